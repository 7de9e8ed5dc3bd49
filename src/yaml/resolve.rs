//! PyYAML's YAML 1.1 typing of plain scalars: `yes`/`on` are booleans, `0644` is octal, `~` is
//! null. Shared by every YAML source (playbooks, vars files, `from_yaml`) so they agree.

use super::node::Kind;

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
    let t = s.replace('_', "");
    let (sign, digits) = match t.strip_prefix('-') {
        Some(rest) => (-1i64, rest),
        None => (1, t.strip_prefix('+').unwrap_or(&t)),
    };
    if !digits.is_empty() {
        let int = if let Some(h) = digits.strip_prefix("0x") {
            i64::from_str_radix(h, 16).ok()
        } else if let Some(o) = digits.strip_prefix("0o") {
            i64::from_str_radix(o, 8).ok()
        } else if let Some(b) = digits.strip_prefix("0b") {
            i64::from_str_radix(b, 2).ok()
        } else if digits.len() > 1
            && digits.starts_with('0')
            && digits.chars().all(|c| c.is_ascii_digit())
        {
            // YAML 1.1 octal: `mode: 0644` is 420, exactly as Ansible reads it.
            i64::from_str_radix(digits, 8).ok()
        } else if digits.chars().all(|c| c.is_ascii_digit()) {
            digits.parse::<i64>().ok()
        } else {
            None
        };
        if let Some(i) = int {
            return Kind::Int(sign * i);
        }
        let looks_float = digits
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || c == '.')
            && digits
                .chars()
                .all(|c| c.is_ascii_digit() || "eE.+-".contains(c))
            && digits.contains(['.', 'e', 'E']);
        if looks_float {
            if let Ok(f) = t.parse::<f64>() {
                return Kind::Float(f);
            }
        }
        match digits {
            ".inf" | ".Inf" | ".INF" => return Kind::Float(sign as f64 * f64::INFINITY),
            ".nan" | ".NaN" | ".NAN" => return Kind::Float(f64::NAN),
            _ => {}
        }
    }
    Kind::Str(s.to_string())
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
}
