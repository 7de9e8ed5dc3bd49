//! PyYAML's YAML 1.1 typing of plain scalars: `yes`/`on` are booleans, `0644` is octal, `~` is
//! null. Shared by every YAML source (playbooks, vars files, `from_yaml`) so they agree.

use super::node::Kind;
use regex::Regex;
use serde_json::Value;
use std::sync::OnceLock;

/// PyYAML's YAML 1.1 resolution of plain scalars.
pub fn resolve_plain(s: &str) -> Kind {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Kind::Null,
        // PyYAML does not treat `y`/`n` as booleans, so neither does this.
        "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Kind::Bool(true)
        }
        "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Kind::Bool(false)
        }
        _ => {}
    }
    // PyYAML's implicit int and float patterns; anything else is a string: `0o17` (YAML 1.2
    // octal), `12e4567` and `1e3` (a float needs a dot, and a sign on its exponent), `_1`.
    if let Some(kind) = sexagesimal(s) {
        return kind;
    }
    static INT: OnceLock<Regex> = OnceLock::new();
    static FLOAT: OnceLock<Regex> = OnceLock::new();
    // Fixed patterns, tested below: they compile.
    let int_re = INT.get_or_init(|| {
        Regex::new(r"^[-+]?(?:0b[0-1_]+|0[0-7_]+|0|[1-9][0-9_]*|0x[0-9a-fA-F_]+)$").unwrap()
    });
    let float_re = FLOAT.get_or_init(|| {
        Regex::new(concat!(
            r"^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+][0-9]+)?",
            r"|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?",
            r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
        ))
        .unwrap()
    });
    let t = s.replace('_', "");
    let (sign, digits) = match t.strip_prefix('-') {
        Some(rest) => (-1i64, rest),
        None => (1, t.strip_prefix('+').unwrap_or(&t)),
    };
    if int_re.is_match(s) {
        let int = if let Some(h) = digits.strip_prefix("0x") {
            i64::from_str_radix(h, 16).ok()
        } else if let Some(b) = digits.strip_prefix("0b") {
            i64::from_str_radix(b, 2).ok()
        } else if digits.len() > 1 && digits.starts_with('0') {
            // YAML 1.1 octal: `mode: 0644` is 420, exactly as Ansible reads it.
            i64::from_str_radix(digits, 8).ok()
        } else {
            digits.parse::<i64>().ok()
        };
        if let Some(i) = int {
            return Kind::Int(sign * i);
        }
    }
    if float_re.is_match(s) {
        match digits {
            ".inf" | ".Inf" | ".INF" => return Kind::Float(sign as f64 * f64::INFINITY),
            ".nan" | ".NaN" | ".NAN" => return Kind::Float(f64::NAN),
            _ => {}
        }
        if let Ok(f) = t.parse::<f64>() {
            return Kind::Float(f);
        }
    }
    Kind::Str(s.to_string())
}

/// YAML 1.1's base 60: `1:30` is the int 90, `1:00:00` 3600, `1:30.5` the float 90.5 (PyYAML's
/// patterns: a first part without a leading zero for ints, then parts `[0-5]?[0-9]`).
fn sexagesimal(s: &str) -> Option<Kind> {
    static INT: OnceLock<Regex> = OnceLock::new();
    static FLOAT: OnceLock<Regex> = OnceLock::new();
    if !s.contains(':') {
        return None;
    }
    // Fixed patterns, tested below: they compile.
    let int_re = INT.get_or_init(|| Regex::new(r"^[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+$").unwrap());
    let float_re =
        FLOAT.get_or_init(|| Regex::new(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*$").unwrap());
    let is_int = int_re.is_match(s);
    if !is_int && !float_re.is_match(s) {
        return None;
    }
    let t = s.replace('_', "");
    let (sign, digits) = match t.strip_prefix('-') {
        Some(rest) => (-1.0, rest),
        None => (1.0, t.strip_prefix('+').unwrap_or(&t)),
    };
    if is_int {
        let mut value: i64 = 0;
        for part in digits.split(':') {
            value = value
                .checked_mul(60)?
                .checked_add(part.parse::<i64>().ok()?)?;
        }
        return Some(Kind::Int(if sign < 0.0 { -value } else { value }));
    }
    let mut value = 0.0;
    for part in digits.split(':') {
        value = value * 60.0 + part.parse::<f64>().ok()?;
    }
    Some(Kind::Float(sign * value))
}

/// A plain scalar of a JSON document: `1e3` is the float 1000 there, as Python's `json` reads it,
/// though PyYAML would keep it a string.
pub(super) fn resolve_json(s: &str) -> Kind {
    match serde_json::from_str::<Value>(s) {
        Ok(Value::Bool(b)) => Kind::Bool(b),
        Ok(Value::Null) => Kind::Null,
        Ok(Value::Number(n)) => match n.as_i64() {
            Some(i) => Kind::Int(i),
            None => Kind::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        _ => resolve_plain(s),
    }
}

#[cfg(test)]
mod tests {
    use crate::yaml::parse_str;
    use serde_json::Value;
    use std::path::Path;

    fn parse(s: &str) -> crate::yaml::Node {
        parse_str(s, Path::new("t.yml")).unwrap()
    }

    #[test]
    fn scalars_resolve_like_pyyaml() {
        let n = parse("a: yes\nb: 0644\nc: '0644'\nd: 1.5\ne: ~\nf: on\ng: 12\nh: y\n");
        let j = n.to_json();
        assert_eq!(j["a"], Value::Bool(true));
        assert_eq!(j["b"], Value::from(420));
        assert_eq!(j["c"], Value::from("0644"));
        assert_eq!(j["d"], Value::from(1.5));
        assert_eq!(j["e"], Value::Null);
        assert_eq!(j["f"], Value::Bool(true));
        assert_eq!(j["g"], Value::from(12));
        assert_eq!(j["h"], Value::from("y"));
    }

    #[test]
    fn numbers_follow_pyyaml_patterns() {
        // Each expectation is what PyYAML 6 (`yaml.safe_load`) gives.
        let n = parse(concat!(
            "a: 0o17\nb: 12e4567\nc: 1e3\nd: 1.0e+3\ne: 0x1F\nf: 1_000\ng: _1000\n",
            "h: 0b101\ni: 08\nj: .5\nk: -.5\nl: 1_0.5\nm: 0X1F\nn: 1.0e3\no: -0x1f\n",
        ));
        let j = n.to_json();
        assert_eq!(j["a"], Value::from("0o17"));
        assert_eq!(j["b"], Value::from("12e4567"));
        assert_eq!(j["c"], Value::from("1e3"));
        assert_eq!(j["d"], Value::from(1000.0));
        assert_eq!(j["e"], Value::from(31));
        assert_eq!(j["f"], Value::from(1000));
        assert_eq!(j["g"], Value::from("_1000"));
        assert_eq!(j["h"], Value::from(5));
        assert_eq!(j["i"], Value::from("08"));
        assert_eq!(j["j"], Value::from(0.5));
        assert_eq!(j["k"], Value::from("-.5"));
        assert_eq!(j["l"], Value::from(10.5));
        assert_eq!(j["m"], Value::from("0X1F"));
        assert_eq!(j["n"], Value::from("1.0e3"));
        assert_eq!(j["o"], Value::from(-31));
    }

    #[test]
    fn base_60_like_pyyaml() {
        let n = parse(concat!(
            "a: 1:30\nb: 1:00:00\nc: -1:30\nd: 1:30.5\ne: 01:30\nf: 1:60\ng: 1:3:5\n",
            "h: 0:30.0\ni: '1:30'\nj: 12:30:x\nk: 1_0:30\n",
        ));
        let j = n.to_json();
        assert_eq!(j["a"], Value::from(90));
        assert_eq!(j["b"], Value::from(3600));
        assert_eq!(j["c"], Value::from(-90));
        assert_eq!(j["d"], Value::from(90.5));
        assert_eq!(j["e"], Value::from("01:30"));
        assert_eq!(j["f"], Value::from("1:60"));
        assert_eq!(j["g"], Value::from(3785));
        assert_eq!(j["h"], Value::from(30.0));
        assert_eq!(j["i"], Value::from("1:30"));
        assert_eq!(j["j"], Value::from("12:30:x"));
        assert_eq!(j["k"], Value::from(630));
    }

    #[test]
    fn json_documents_keep_json_numbers() {
        let n =
            parse("{\"a\": 1e3, \"b\": 1e-05, \"c\": 12, \"d\": true, \"e\": null, \"f\": \"no\"}");
        let j = n.to_json();
        assert_eq!(j["a"], Value::from(1000.0));
        assert_eq!(j["b"], Value::from(1e-05));
        assert_eq!(j["c"], Value::from(12));
        assert_eq!(j["d"], Value::Bool(true));
        assert_eq!(j["e"], Value::Null);
        assert_eq!(j["f"], Value::from("no"));
        // Not JSON (a YAML 1.1 octal), so YAML rules throughout.
        assert_eq!(
            parse("{\"m\": 0644, \"x\": 1e3}").to_json()["x"],
            Value::from("1e3")
        );
    }
}
