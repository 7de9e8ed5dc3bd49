//! Conversions and single-value filters: `bool`, `int`, `float`, `string`, `type_debug`,
//! `mandatory` and `ternary`.

use minijinja::value::{Kwargs, Rest, ValueKind};
use minijinja::{Error, ErrorKind, Value};

use crate::template::pyrepr::py_string;
use crate::template::value::{defined, op_err, split_kwargs};

/// Ansible's `bool`: yes/on/1/true (any case) are true, other strings false, as are none and
/// anything else but the number 1.
pub(in crate::template) fn filter_bool(value: &Value) -> Result<Value, Error> {
    Ok(match defined(value)?.kind() {
        ValueKind::Bool => value.clone(),
        // Lower-cased, not trimmed: ansible-core's `bool` reads " yes" as false.
        ValueKind::String => Value::from(matches!(
            value.as_str().unwrap_or_default().to_lowercase().as_str(),
            "yes" | "on" | "1" | "true"
        )),
        ValueKind::Number => Value::from(value.as_i64() == Some(1)),
        _ => Value::from(false),
    })
}

/// Jinja2's `int(default=0, base=10)`: unparseable input gives the default, not an error.
pub(super) fn filter_int(value: &Value, args: Rest<Value>) -> Result<Value, Error> {
    let (pos, kwargs) = split_kwargs(&args)?;
    let kw_default: Option<Value> = kwargs.get("default")?;
    let kw_base: Option<u32> = kwargs.get("base")?;
    kwargs.assert_all_used()?;
    let default = pos
        .first()
        .cloned()
        .or(kw_default)
        .unwrap_or_else(|| Value::from(0));
    let base = match pos.get(1) {
        Some(b) => u32::try_from(b.clone())?,
        None => kw_base.unwrap_or(10),
    };
    if !(2..=36).contains(&base) {
        return Err(op_err(format!("int: invalid base {base}")));
    }
    Ok(match defined(value)?.kind() {
        ValueKind::Bool => Value::from(value.is_true() as i64),
        ValueKind::Number => match value.as_i64() {
            Some(i) => Value::from(i),
            None => match f64::try_from(value.clone()) {
                // Python's int() of NaN raises a ValueError, which Ansible's filter turns
                // into the default; of an infinity an OverflowError, which it does not catch.
                Ok(f) if f.is_nan() => default,
                Ok(f) if f.is_infinite() => {
                    return Err(op_err("int: cannot convert float infinity to integer"))
                }
                Ok(f) => Value::from(f.trunc() as i64),
                Err(_) => default,
            },
        },
        ValueKind::String => {
            let s = value.as_str().unwrap_or_default().trim().replace('_', "");
            let (neg, digits) = match s.strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, s.strip_prefix('+').unwrap_or(&s)),
            };
            let lower = digits.to_ascii_lowercase();
            let digits = match base {
                16 => lower.strip_prefix("0x").unwrap_or(&lower),
                8 => lower.strip_prefix("0o").unwrap_or(&lower),
                2 => lower.strip_prefix("0b").unwrap_or(&lower),
                _ => &lower,
            };
            // One sign, taken above: `from_str_radix` would take a second one (`--5`, `0x-5`),
            // which Python refuses, and `-i` of a parsed i64::MIN overflows.
            let unsigned = !digits.starts_with(['+', '-']);
            match i64::from_str_radix(digits, base).ok().filter(|_| unsigned) {
                // `i` is not negative here, so `-i` cannot overflow.
                Some(i) => Value::from(if neg { -i } else { i }),
                None => s
                    .parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite())
                    .map_or(default, |f| Value::from(f.trunc() as i64)),
            }
        }
        _ => default,
    })
}

/// Jinja2's `float(default=0.0)`.
pub(super) fn filter_float(value: &Value, args: Rest<Value>) -> Result<Value, Error> {
    let (pos, kwargs) = split_kwargs(&args)?;
    let kw_default: Option<Value> = kwargs.get("default")?;
    kwargs.assert_all_used()?;
    let default = pos
        .first()
        .cloned()
        .or(kw_default)
        .unwrap_or_else(|| Value::from(0.0));
    Ok(match defined(value)?.kind() {
        ValueKind::Bool => Value::from(if value.is_true() { 1.0 } else { 0.0 }),
        ValueKind::Number => f64::try_from(value.clone()).map_or(default, Value::from),
        ValueKind::String => value
            .as_str()
            .unwrap_or_default()
            .trim()
            .parse::<f64>()
            .map_or(default, Value::from),
        _ => default,
    })
}

/// Jinja2's `round(precision=0, method='common')`: `common` is Python's `round()` (the exact
/// binary value rounded, ties to even; an integer stays an integer), `floor` and `ceil` work
/// on `value * 10**precision` and give a float.
pub(super) fn filter_round(value: &Value, args: Rest<Value>) -> Result<Value, Error> {
    let (pos, kwargs) = split_kwargs(&args)?;
    let kw_precision: Option<i32> = kwargs.get("precision")?;
    let kw_method: Option<String> = kwargs.get("method")?;
    kwargs.assert_all_used()?;
    let precision = match pos.first() {
        Some(p) => i32::try_from(p.clone())?,
        None => kw_precision.unwrap_or(0),
    };
    let method = match pos.get(1) {
        Some(m) => m.as_str().unwrap_or_default().to_string(),
        None => kw_method.unwrap_or_else(|| "common".into()),
    };
    if defined(value)?.kind() != ValueKind::Number {
        return Err(op_err(format!(
            "round expects a number, got {}",
            filter_type_debug(value)
        )));
    }
    let is_int = value.as_i64().is_some() && !value.to_string().contains('.');
    let x = f64::try_from(value.clone())?;
    let scale = 10f64.powi(precision);
    match method.as_str() {
        "common" if is_int => Ok(value.clone()),
        // Rust's fixed-precision formatting rounds the exact binary value half to even, as
        // Python's round() does.
        "common" if precision >= 0 => Ok(Value::from(
            format!("{x:.*}", precision as usize)
                .parse::<f64>()
                .unwrap_or(x),
        )),
        "common" => Ok(Value::from((x * scale).round_ties_even() / scale)),
        "floor" => Ok(Value::from((x * scale).floor() / scale)),
        "ceil" => Ok(Value::from((x * scale).ceil() / scale)),
        other => Err(op_err(format!(
            "round: method must be common, floor or ceil, not `{other}`"
        ))),
    }
}

/// Python's `str()`: `True`, `None`, `['a']`.
pub(super) fn filter_string(value: &Value) -> Result<Value, Error> {
    py_string(defined(value)?).map(Value::from)
}

/// `mandatory(msg=None)`: undefined input is an error (named by the caller's error handling).
pub(super) fn filter_mandatory(
    value: &Value,
    msg: Option<String>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let msg = match msg {
        Some(m) => Some(m),
        None => kwargs.get("msg")?,
    };
    kwargs.assert_all_used()?;
    if value.is_undefined() {
        return Err(match msg {
            Some(msg) => op_err(msg),
            None => Error::new(ErrorKind::UndefinedError, "mandatory variable not defined"),
        });
    }
    Ok(value.clone())
}

/// `ternary(true_val, false_val, none_val=None)`.
pub(super) fn filter_ternary(
    value: &Value,
    yes: Value,
    no: Value,
    none: Option<Value>,
) -> Result<Value, Error> {
    if let (Some(none), true) = (none, defined(value)?.is_none()) {
        return Ok(none);
    }
    Ok(if value.is_true() { yes } else { no })
}

/// Python type names, as Ansible users see them.
pub(in crate::template) fn filter_type_debug(value: &Value) -> &'static str {
    if crate::template::is_omit(value) {
        return "_OmitType";
    }
    match value.kind() {
        ValueKind::Undefined => "AnsibleUndefined",
        ValueKind::None => "NoneType",
        ValueKind::Bool => "bool",
        // Python's ints have no bound: a u64 or i128 is an int too.
        ValueKind::Number if value.is_integer() => "int",
        ValueKind::Number => "float",
        ValueKind::String => "str",
        ValueKind::Bytes => "bytes",
        ValueKind::Seq | ValueKind::Iterable => "list",
        ValueKind::Map => "dict",
        _ => "object",
    }
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use crate::template::Templar;
    use serde_json::json;

    #[test]
    fn bool_int_float_string_filters() {
        for (input, want) in [
            ("yes", true),
            ("On", true),
            ("1", true),
            ("TRUE", true),
            ("no", false),
            ("off", false),
            ("0", false),
            ("false", false),
            ("maybe", false),
        ] {
            let c = ctx(json!({"v": input}));
            assert_eq!(
                Templar::new().eval_bool("v | bool", &c).unwrap(),
                want,
                "{input}"
            );
        }
        assert_eq!(eval("1 | bool"), json!(true));
        // ansible-core coerces what it does not know (with a deprecation): none and a padded
        // word are false.
        assert_eq!(eval("none | bool"), json!(false));
        assert_eq!(eval("' yes' | bool"), json!(false));
        assert_eq!(eval("true | bool"), json!(true));
        assert_eq!(eval("'42' | int"), json!(42));
        assert_eq!(eval("' 7 ' | int"), json!(7));
        assert_eq!(eval("'3.9' | int"), json!(3));
        assert_eq!(eval("'abc' | int"), json!(0));
        assert_eq!(eval("'abc' | int(5)"), json!(5));
        assert_eq!(eval("'0x1F' | int(base=16)"), json!(31));
        assert_eq!(eval("'-12' | int"), json!(-12));
        assert_eq!(eval("true | int"), json!(1));
        assert_eq!(eval("'2.5' | float"), json!(2.5));
        assert_eq!(eval("'x' | float"), json!(0.0));
        assert_eq!(eval("3 | float"), json!(3.0));
        assert_eq!(eval("flag | string"), json!("True"));
        assert_eq!(eval("nothing | string"), json!("None"));
        assert_eq!(eval("count | string"), json!("3"));
        assert!(Templar::new().eval("missing | bool", &vars()).is_err());
    }

    #[test]
    fn int_takes_one_sign_as_python_does() {
        // A second sign is not a number (Python's int() raises, Ansible's filter gives the
        // default); with the most negative integer it once overflowed the negation.
        assert_eq!(eval("'--9223372036854775808' | int"), json!(0));
        assert_eq!(eval("'-+5' | int"), json!(0));
        assert_eq!(eval("'+-5' | int(7)"), json!(7));
        assert_eq!(eval("'0x-5' | int(base=16)"), json!(0));
        assert_eq!(eval("'-0x5' | int(base=16)"), json!(-5));
    }

    #[test]
    fn ternary_mandatory_and_type_debug_filters() {
        assert_eq!(eval("flag | ternary('on', 'off')"), json!("on"));
        assert_eq!(
            eval("nothing | ternary('on', 'off', 'unset')"),
            json!("unset")
        );
        assert_eq!(eval("x | mandatory"), json!("a"));
        assert_eq!(
            undefined_name(
                Templar::new()
                    .eval("gone | mandatory", &vars())
                    .unwrap_err()
            ),
            "gone"
        );
        let e = Templar::new()
            .eval("gone | mandatory('set gone!')", &vars())
            .unwrap_err();
        assert!(e.to_string().contains("set gone!"), "{e}");
        assert_eq!(eval("count | type_debug"), json!("int"));
        assert_eq!(eval("user | type_debug"), json!("dict"));
    }
}
