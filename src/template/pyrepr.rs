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
        // minijinja writes `NaN`; Python `nan` (`inf` and `-inf` are alike).
        ValueKind::Number if f64::try_from(v.clone()).is_ok_and(f64::is_nan) => out.push_str("nan"),
        _ => {
            let _ = write!(out, "{v}");
        }
    }
    Ok(())
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
