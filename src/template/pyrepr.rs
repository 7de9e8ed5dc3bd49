//! Python's `str()` and `repr()` of template values: how Jinja2 under Python prints them
//! (`True`, `None`, `['a', 1]`, `{'k': 'v'}`), which is what Ansible users see in output.

use std::fmt::Write as _;

use minijinja::value::ValueKind;
use minijinja::{Error, ErrorKind, Value};

use super::filters::collections::GroupTuple;
use super::value::{used_vault, vault_text, MAX_DEPTH};

/// Prints a value the way Jinja2 under Python does: `True`, `None`, `['a', 1]`, `{'k': 'v'}`.
pub(super) fn py_str(v: &Value, out: &mut String, depth: usize) -> Result<(), Error> {
    if let (0, Some(text)) = (depth, vault_text(v)) {
        out.push_str(&used_vault(&text)?);
        return Ok(());
    }
    match v.kind() {
        // Top-level silent undefined (`{{ x if false }}`) prints nothing; strict undefined
        // never reaches the formatter.
        ValueKind::Undefined if depth == 0 => Ok(()),
        ValueKind::String if depth == 0 => {
            out.push_str(v.as_str().unwrap_or_default());
            Ok(())
        }
        // A datetime or timedelta prints as Python's `str()` of it (its `render`).
        ValueKind::Plain
            if depth == 0
                && (v.downcast_object_ref::<super::now::DateTime>().is_some()
                    || super::timedelta::is_timedelta(v)) =>
        {
            let _ = write!(out, "{v}");
            Ok(())
        }
        _ => py_repr(v, out, depth),
    }
}

fn py_repr(v: &Value, out: &mut String, depth: usize) -> Result<(), Error> {
    if depth > MAX_DEPTH {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "value is nested too deeply",
        ));
    }
    // `groupby`'s groups are Python tuples.
    if let Some(t) = v.downcast_object_ref::<GroupTuple>() {
        out.push('(');
        py_repr(&t.grouper, out, depth + 1)?;
        out.push_str(", ");
        py_repr(&t.list, out, depth + 1)?;
        out.push(')');
        return Ok(());
    }
    if let Some(dt) = v.downcast_object_ref::<super::now::DateTime>() {
        out.push_str(&dt.python_repr());
        return Ok(());
    }
    if let Some(r) = super::timedelta::repr(v) {
        out.push_str(&r);
        return Ok(());
    }
    // A vaulted value prints as the string it holds, as ansible-core's `EncryptedString`.
    if let Some(text) = vault_text(v) {
        py_quote(&used_vault(&text)?, out);
        return Ok(());
    }
    match v.kind() {
        ValueKind::Undefined => return Err(Error::from(ErrorKind::UndefinedError)),
        ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if v.is_true() { "True" } else { "False" }),
        ValueKind::String => py_quote(v.as_str().unwrap_or_default(), out),
        ValueKind::Seq | ValueKind::Iterable => {
            out.push('[');
            for (i, item) in v.try_iter()?.enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_repr(&item, out, depth + 1)?;
            }
            out.push(']');
        }
        ValueKind::Map => {
            out.push('{');
            for (i, key) in v.try_iter()?.enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let item = v.get_item(&key)?;
                py_repr(&key, out, depth + 1)?;
                out.push_str(": ");
                py_repr(&item, out, depth + 1)?;
            }
            out.push('}');
        }
        ValueKind::Number if !v.is_integer() => match f64::try_from(v.clone()) {
            Ok(f) => out.push_str(&py_float(f)),
            Err(_) => {
                let _ = write!(out, "{v}");
            }
        },
        _ => {
            let _ = write!(out, "{v}");
        }
    }
    Ok(())
}

/// Python's `repr()` of a float: the shortest digits that read back, in exponent form
/// (`1e+16`, `1e-05`) when the exponent is below -4 or 16 and above, else with a `.0` when
/// whole; `nan`, `inf`, `-inf`. `json.dumps` writes finite floats the same way.
pub(super) fn py_float(f: f64) -> String {
    if !f.is_finite() {
        return crate::yaml::mark::python_str(f).to_string();
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if f != 0.0 && !(-4..16).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    let plain = format!("{f}");
    if plain.contains('.') {
        plain
    } else {
        format!("{plain}.0")
    }
}

/// Python's `repr()` of a string (the modules' copy: their parameters convert the same way).
pub(super) use fixpoint_modules::params::py_quote;

/// The string form of a value as Python's `str()` gives it.
pub(super) fn py_string(v: &Value) -> Result<String, Error> {
    let mut s = String::new();
    py_str(v, &mut s, 0)?;
    Ok(s)
}

/// The form of a value as Python's `repr()` gives it (strings quoted).
pub(super) fn py_repr_string(v: &Value) -> Result<String, Error> {
    let mut s = String::new();
    py_repr(v, &mut s, 0)?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::py_float;

    #[test]
    fn floats_print_as_python_repr() {
        for (f, want) in [
            (1.0, "1.0"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1e-5, "1e-05"),
            (1e-4, "0.0001"),
            (1.5e300, "1.5e+300"),
            (-2.5e-7, "-2.5e-07"),
            (0.1 + 0.2, "0.30000000000000004"),
            (-0.0, "-0.0"),
            (f64::NAN, "nan"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(py_float(f), want, "{f}");
        }
    }
}
