//! The type conversions of ansible-core's argument specs (`str`, `list`, `dict`, `bool`, `int`,
//! `float`, `path`, `raw`, `json`/`jsonarg`, `bytes`, `bits`) and the Python spellings their
//! messages use, so that a role's argument spec accepts, converts and refuses what it does
//! under ansible-core, with the same words.

use crate::yaml::mark;
use fixpoint_modules::params::{py_quote, py_str};
use serde_json::{json, Map, Value};

/// Python's name of a value's type, as the messages name it (`str`, `int`, `NoneType`).
pub(super) fn type_name(v: &Value) -> &'static str {
    if mark::float_of(v).is_some() {
        return "float";
    }
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// The class name of a value as ansible-core 2.19 holds it: what a playbook or vars file gives
/// carries its origin, in a tagged subclass of the Python type (bool and None cannot be
/// subclassed, so they keep theirs).
pub(super) fn class_name(v: &Value) -> String {
    match type_name(v) {
        name @ ("bool" | "NoneType") => name.to_string(),
        name => {
            let mut cap = name.to_string();
            cap[..1].make_ascii_uppercase();
            format!("_AnsibleTagged{cap}")
        }
    }
}

/// Python's `type(value)` in a message: `<class '...'>`.
pub(super) fn class_of(v: &Value) -> String {
    match type_name(v) {
        name @ ("bool" | "NoneType") => format!("<class '{name}'>"),
        _ => format!(
            "<class 'ansible.module_utils._internal._datatag.{}'>",
            class_name(v)
        ),
    }
}

/// Python's `repr()` of a value.
pub(super) fn repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::String(s) => {
            let mut out = String::new();
            py_quote(s, &mut out);
            out
        }
        other => py_str(other),
    }
}

/// Python's `str()` of a value (`None` for null, where `py_str` gives a `str` parameter's '').
pub(super) fn text(v: &Value) -> String {
    match mark::float_of(v) {
        Some(f) => mark::python_str(f).to_string(),
        None if v.is_null() => "None".into(),
        None => py_str(v),
    }
}

/// Python's `==` between two values: numbers and booleans compare by value (`1 == 1.0 ==
/// True`), containers member by member.
pub(super) fn py_eq(a: &Value, b: &Value) -> bool {
    match (number(a), number(b)) {
        (Some(x), Some(y)) => return x == y,
        (Some(_), None) | (None, Some(_)) => return false,
        _ => {}
    }
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, p)| y.get(k).is_some_and(|q| py_eq(p, q)))
        }
        _ => a == b,
    }
}

/// A number or boolean as Python compares it.
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::Number(n) => n.as_f64(),
        other => mark::float_of(other),
    }
}

/// Python's truth value of a spec entry (`required: yes`, `apply_defaults: 1`).
pub(super) fn truthy(v: Option<&Value>) -> bool {
    v.is_some_and(fixpoint_modules::params::py_truthy)
}

/// The strings ansible-core's `boolean()` reads as true and as false (after lowercasing and
/// stripping), and the list its message gives (in one order a Python run prints that set in).
const TRUE_WORDS: &[&str] = &["y", "yes", "on", "1", "true", "t"];
const FALSE_WORDS: &[&str] = &["n", "no", "off", "0", "false", "f"];
const VALID_BOOLEANS: &str =
    "0, 1, 'no', 'y', '0', 't', 'f', 'on', '1', 'n', 'off', 'true', 'yes', 'false'";

/// Whether `v` equals one of `boolean()`'s false values (`'no'`, `0`, `False`...).
pub(super) fn is_false_word(v: &Value) -> bool {
    match v {
        Value::String(s) => FALSE_WORDS.contains(&s.as_str()),
        other => number(other) == Some(0.0),
    }
}

/// Whether `v` equals one of `boolean()`'s true values.
pub(super) fn is_true_word(v: &Value) -> bool {
    match v {
        Value::String(s) => TRUE_WORDS.contains(&s.as_str()),
        other => number(other) == Some(1.0),
    }
}

/// Convert `v` to the type a spec names; `Err` holds the conversion's own message. A name no
/// converter has fails as ansible-core's lookup of it does.
pub(super) fn convert(wanted: &str, v: &Value) -> Result<Value, String> {
    match wanted {
        "str" => Ok(Value::String(check_str(v))),
        "path" => Ok(Value::String(check_str(v))),
        "raw" => Ok(v.clone()),
        "list" => check_list(v),
        "dict" => check_dict(v),
        "bool" => check_bool(v),
        "int" => check_int(v),
        "float" => check_float(v),
        "json" | "jsonarg" => check_jsonarg(v),
        "bytes" => check_size(v, false),
        "bits" => check_size(v, true),
        _ => Err("'NoneType' object is not callable".into()),
    }
}

fn check_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => text(other),
    }
}

fn check_list(v: &Value) -> Result<Value, String> {
    match v {
        Value::Array(_) => Ok(v.clone()),
        Value::String(s) => Ok(json!(s.split(',').collect::<Vec<_>>())),
        Value::Bool(_) | Value::Number(_) => Ok(json!([text(v)])),
        other if mark::float_of(other).is_some() => Ok(json!([text(v)])),
        other => Err(format!("{} cannot be converted to a list", class_of(other))),
    }
}

fn check_dict(v: &Value) -> Result<Value, String> {
    let s = match v {
        Value::Object(_) if mark::float_of(v).is_none() => return Ok(v.clone()),
        Value::String(s) => s,
        other => return Err(format!("{} cannot be converted to a dict", class_of(other))),
    };
    if s.starts_with('{') {
        if let Ok(d @ Value::Object(_)) = serde_json::from_str::<Value>(s) {
            return Ok(d);
        }
        return match crate::inventory::pyliteral::parse_value(s) {
            d @ Value::Object(_) => Ok(d),
            _ => Err("unable to evaluate string as dictionary".into()),
        };
    }
    if !s.contains('=') {
        return Err("dictionary requested, could not parse JSON or key=value".into());
    }
    // `k1=v1, k2='v 2'`: fields split on commas and spaces outside quotes, `\` escaping.
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in s.trim().chars() {
        if escaped {
            field.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if quote.is_none() && (c == '\'' || c == '"') {
            quote = Some(c);
        } else if quote == Some(c) {
            quote = None;
        } else if quote.is_none() && (c == ',' || c == ' ') {
            if !field.is_empty() {
                fields.push(std::mem::take(&mut field));
            }
        } else {
            field.push(c);
        }
    }
    if !field.is_empty() {
        fields.push(field);
    }
    let mut out = Map::new();
    for f in fields {
        let Some((k, val)) = f.split_once('=') else {
            return Err(
                "unable to evaluate string in the \"key=value\" format as dictionary".into(),
            );
        };
        out.insert(k.to_string(), Value::String(val.to_string()));
    }
    Ok(Value::Object(out))
}

fn check_bool(v: &Value) -> Result<Value, String> {
    // `boolean()`: strings lowercased and stripped, numbers as they are (1 and 0.0 too).
    let word = match v {
        Value::Bool(_) => return Ok(v.clone()),
        Value::String(s) => Value::String(s.trim().to_lowercase()),
        Value::Number(_) => v.clone(),
        other if mark::float_of(other).is_some() => v.clone(),
        other => return Err(format!("{} cannot be converted to a bool", class_of(other))),
    };
    if is_true_word(&word) {
        Ok(Value::Bool(true))
    } else if is_false_word(&word) {
        Ok(Value::Bool(false))
    } else {
        Err(format!(
            "The value '{}' is not a valid boolean. Valid booleans include: {VALID_BOOLEANS}",
            text(v)
        ))
    }
}

fn check_int(v: &Value) -> Result<Value, String> {
    let fail = || format!("\"{}\" cannot be converted to an int", repr(v));
    match v {
        Value::Bool(_) => Ok(v.clone()),
        Value::Number(n) if !n.is_f64() => Ok(v.clone()),
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            if f.fract() == 0.0 {
                Ok(json!(f as i64))
            } else {
                Err(fail())
            }
        }
        Value::String(s) => decimal_integer(s).map(|i| json!(i)).ok_or_else(fail),
        _ => Err(fail()),
    }
}

/// The integer Python's `int(Decimal(s))` gives when it equals `Decimal(s)`: `' 42 '`, `'4.0'`,
/// `'1e3'`, `'1_000'`; `None` for text that is no decimal number or has a fractional part.
fn decimal_integer(s: &str) -> Option<i128> {
    let t = s.trim();
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (mantissa, exp) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], Some(&t[i + 1..])),
        None => (t, None),
    };
    let (whole, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |p: &str| underscored_digits(p);
    let (whole, frac) = (digits(whole)?, digits(frac)?);
    if whole.is_empty() && frac.is_empty() {
        return None;
    }
    let exp: i64 = match exp {
        Some(e) => {
            let (sign, e) = match e.as_bytes().first() {
                Some(b'-') => (-1, &e[1..]),
                Some(b'+') => (1, &e[1..]),
                _ => (1, e),
            };
            let e = digits(e)?;
            sign * e.parse::<i64>().ok()?
        }
        None => 0,
    };
    // The digits and where the point falls after applying the exponent.
    let all = format!("{whole}{frac}");
    let point = whole.len() as i64 + exp;
    let (int_part, frac_part) = if point <= 0 {
        (String::new(), all.clone())
    } else if point as usize >= all.len() {
        (
            format!("{all}{}", "0".repeat(point as usize - all.len())),
            String::new(),
        )
    } else {
        (
            all[..point as usize].to_string(),
            all[point as usize..].to_string(),
        )
    };
    if frac_part.bytes().any(|b| b != b'0') {
        return None;
    }
    let n: i128 = if int_part.is_empty() {
        0
    } else {
        int_part.parse().ok()?
    };
    Some(if neg { -n } else { n })
}

/// Digits with single underscores between them (Python's numeric literal rule), without the
/// underscores; `None` for anything else.
fn underscored_digits(p: &str) -> Option<String> {
    if p.starts_with('_') || p.ends_with('_') || p.contains("__") {
        return None;
    }
    let out: String = p.chars().filter(|c| *c != '_').collect();
    out.bytes().all(|b| b.is_ascii_digit()).then_some(out)
}

fn check_float(v: &Value) -> Result<Value, String> {
    let fail = || format!("{} cannot be converted to a float", class_of(v));
    match v {
        Value::Number(n) => Ok(mark::float(n.as_f64().unwrap_or(0.0))),
        Value::Bool(b) => Ok(mark::float(f64::from(u8::from(*b)))),
        Value::String(s) => python_float(s).map(mark::float).ok_or_else(fail),
        other if mark::float_of(other).is_some() => Ok(other.clone()),
        _ => Err(fail()),
    }
}

/// Python's `float(s)`: surrounding whitespace, `_` between digits, `inf`, `nan`.
fn python_float(s: &str) -> Option<f64> {
    let t = s.trim();
    let word = t.trim_start_matches(['+', '-']).to_ascii_lowercase();
    if matches!(word.as_str(), "inf" | "infinity" | "nan") {
        return t.parse().ok();
    }
    let ok = t
        .bytes()
        .all(|b| b.is_ascii_digit() || b"+-._eE".contains(&b))
        && !t.contains("__")
        && t.split(['.', 'e', 'E', '+', '-'])
            .all(|part| !part.starts_with('_') && !part.ends_with('_'));
    if !ok {
        return None;
    }
    t.replace('_', "").parse().ok()
}

fn check_jsonarg(v: &Value) -> Result<Value, String> {
    match v {
        Value::String(s) => Ok(Value::String(s.trim().to_string())),
        Value::Array(_) | Value::Object(_) if mark::float_of(v).is_none() => {
            Ok(Value::String(mark::python_json_floats(v.to_string())))
        }
        other => Err(format!(
            "{} cannot be converted to a json string",
            class_of(other)
        )),
    }
}

fn check_size(v: &Value, bits: bool) -> Result<Value, String> {
    crate::template::human_to_bytes(&text(v), None, bits)
        .map(|n| json!(n as i64))
        .ok_or_else(|| {
            format!(
                "{} cannot be converted to a {} value",
                class_of(v),
                if bits { "Bit" } else { "Byte" }
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_as_pythons_decimal_reads_them() {
        for (s, want) in [
            (" 42 ", Some(42)),
            ("4.0", Some(4)),
            ("1e3", Some(1000)),
            ("1_000", Some(1000)),
            ("-15e-1", None),
            ("-150e-1", Some(-15)),
            ("4.5", None),
            ("abc", None),
            ("1__0", None),
            ("", None),
            (".", None),
        ] {
            assert_eq!(decimal_integer(s), want, "{s:?}");
        }
    }

    #[test]
    fn conversions_and_their_messages() {
        assert_eq!(convert("list", &json!("a,b")).unwrap(), json!(["a", "b"]));
        assert_eq!(convert("list", &json!(true)).unwrap(), json!(["True"]));
        assert_eq!(
            convert("dict", &json!("a=1 b='x y'")).unwrap(),
            json!({"a": "1", "b": "x y"})
        );
        assert_eq!(
            convert("dict", &json!("{'a': 1}")).unwrap(),
            json!({"a": 1})
        );
        assert_eq!(
            convert("dict", &json!("a=1 b")).unwrap_err(),
            "unable to evaluate string in the \"key=value\" format as dictionary"
        );
        assert_eq!(convert("bool", &json!(" Yes")).unwrap(), json!(true));
        assert!(convert("bool", &json!(2))
            .unwrap_err()
            .starts_with("The value '2' is not"));
        assert_eq!(
            convert("int", &json!("4.5")).unwrap_err(),
            "\"'4.5'\" cannot be converted to an int"
        );
        assert_eq!(convert("float", &json!(" 1_5.5 ")).unwrap(), json!(15.5));
        assert_eq!(
            convert("float", &json!("x")).unwrap_err(),
            "<class 'ansible.module_utils._internal._datatag._AnsibleTaggedStr'> cannot be \
             converted to a float"
        );
        assert_eq!(convert("bytes", &json!("1K")).unwrap(), json!(1024));
        assert_eq!(convert("bits", &json!("1Mb")).unwrap(), json!(1 << 20));
        assert!(convert("bytes", &json!("1Mb")).is_err());
        assert_eq!(convert("str", &json!([1])).unwrap(), json!("[1]"));
        assert_eq!(convert("str", &json!(null)).unwrap(), json!(""));
        assert_eq!(
            convert("int", &json!(null)).unwrap_err(),
            "\"None\" cannot be converted to an int"
        );
        assert_eq!(
            convert("string", &json!(1)).unwrap_err(),
            "'NoneType' object is not callable"
        );
    }
}
