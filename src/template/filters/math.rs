//! Ansible's math filters that Jinja2 lacks: `log`, `pow` and `root`, computed as Python's
//! `math` module does (results are floats; text is refused with the plugin's wording, which
//! playbooks test for), and the size filters `human_readable` and `human_to_bytes`.

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, Value};

use crate::template::pyrepr::py_string;
use crate::template::value::{defined, op_err};

/// The number a math filter works on; booleans count, as in Python.
fn number(v: &Value, filter: &str) -> Result<f64, Error> {
    let v = defined(v)?;
    match v.kind() {
        ValueKind::Number => f64::try_from(v.clone()),
        ValueKind::Bool => Ok(if v.is_true() { 1.0 } else { 0.0 }),
        _ => Err(op_err(format!("{filter}() can only be used on numbers"))),
    }
    .map_err(|_| op_err(format!("{filter}() can only be used on numbers")))
}

/// Python's `ValueError: math domain error` for results outside the reals.
fn real(x: f64) -> Result<Value, Error> {
    if x.is_nan() {
        Err(op_err("math domain error"))
    } else {
        Ok(Value::from(x))
    }
}

/// `log(x)` (natural) and `log(x, base)`; base 10 is `log10`, others `ln x / ln base`.
pub(super) fn filter_log(x: &Value, base: Option<Value>) -> Result<Value, Error> {
    let x = number(x, "log")?;
    let base = base.map(|b| number(&b, "log")).transpose()?;
    if x <= 0.0 || base.is_some_and(|b| b <= 0.0) {
        return Err(op_err("math domain error"));
    }
    match base {
        None => real(x.ln()),
        Some(10.0) => real(x.log10()),
        Some(1.0) => Err(op_err("float division by zero")),
        Some(b) => real(x.ln() / b.ln()),
    }
}

/// `pow(y)`: `math.pow(x, y)`.
pub(super) fn filter_pow(x: &Value, y: &Value) -> Result<Value, Error> {
    let (x, y) = (number(x, "pow")?, number(y, "pow")?);
    real(x.powf(y))
}

/// `root(base=2)`: the square root, or `x ** (1 / base)`.
pub(super) fn filter_root(x: &Value, base: Option<Value>) -> Result<Value, Error> {
    let x = number(x, "root")?;
    match base.map(|b| number(&b, "root")).transpose()? {
        None => real(x.sqrt()),
        Some(2.0) => real(x.sqrt()),
        Some(0.0) => Err(op_err("float division by zero")),
        Some(b) => real(x.powf(1.0 / b)),
    }
}

/// The size units, largest first, with their factor (powers of 1024, as Ansible's).
const SIZE_RANGES: &[(char, u128)] = &[
    ('Y', 1 << 80),
    ('Z', 1 << 70),
    ('E', 1 << 60),
    ('P', 1 << 50),
    ('T', 1 << 40),
    ('G', 1 << 30),
    ('M', 1 << 20),
    ('K', 1 << 10),
    ('B', 1),
];

/// `human_readable(isbits=False, unit=None)`: `10240` is `10.00 KB`; `unit` picks the unit.
pub(super) fn filter_human_readable(size: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let isbits: Option<bool> = kwargs.get("isbits")?;
    let unit: Option<String> = kwargs.get("unit")?;
    kwargs.assert_all_used()?;
    let size = match defined(size)?.kind() {
        ValueKind::Number | ValueKind::Bool => number(size, "human_readable")?,
        _ => return Err(op_err("human_readable() failed on bad input")),
    };
    let wanted = unit
        .and_then(|u| u.chars().next())
        .map(|c| c.to_ascii_uppercase());
    let (suffix, limit) = SIZE_RANGES
        .iter()
        .find(|(s, l)| match wanted {
            None => size >= *l as f64,
            Some(w) => w == *s,
        })
        .copied()
        .unwrap_or(('B', 1));
    let base = if isbits.unwrap_or(false) {
        "bits"
    } else {
        "Bytes"
    };
    let suffix = if limit == 1 {
        base.to_string()
    } else {
        format!("{suffix}{}", &base[..1])
    };
    Ok(Value::from(format!("{:.2} {suffix}", size / limit as f64)))
}

/// `human_to_bytes(default_unit=None, isbits=False)`: `'10 KB'` is 10240; the unit's second
/// letter must be `B` (or `b` with `isbits`), or the unit spelled out (`kilobyte`).
pub(super) fn filter_human_to_bytes(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let default_unit: Option<String> = kwargs.get("default_unit")?;
    let isbits = kwargs.get::<Option<bool>>("isbits")?.unwrap_or(false);
    kwargs.assert_all_used()?;
    let text = py_string(defined(value)?)?;
    human_to_bytes(&text, default_unit.as_deref(), isbits)
        .map(Value::from)
        .ok_or_else(|| op_err("human_to_bytes() can't interpret the input"))
}

/// Python's `human_to_bytes`: the number of bytes (bits with `isbits`) `text` names, `None`
/// when it names none. Also the `bytes` and `bits` types of role argument specs.
pub(crate) fn human_to_bytes(text: &str, default_unit: Option<&str>, isbits: bool) -> Option<i128> {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| {
        regex::Regex::new(r"^([0-9]*\.?[0-9]+)(?:\s*([A-Za-z]+))?\s*$").expect("static regex")
    });
    let c = re.captures(text)?;
    let num: f64 = c[1].parse().ok()?;
    let Some(unit) = c
        .get(2)
        .map(|m| m.as_str().to_string())
        .or(default_unit.map(str::to_string))
    else {
        return Some(num.round_ties_even() as i128);
    };
    let key = unit.chars().next()?.to_ascii_uppercase();
    let (_, limit) = SIZE_RANGES.iter().find(|(s, _)| *s == key)?;
    if unit.chars().count() > 1 {
        const NAMES: &[(char, &str)] = &[
            ('B', "byte"),
            ('K', "kilo"),
            ('M', "mega"),
            ('G', "giga"),
            ('T', "tera"),
            ('P', "peta"),
            ('E', "exa"),
            ('Z', "zeta"),
            ('Y', "yotta"),
        ];
        let class = if isbits { "b" } else { "B" };
        let prefix = NAMES.iter().find(|(k, _)| *k == key).map_or("", |(_, n)| n);
        let long = match (key, isbits) {
            ('B', false) => "byte".to_string(),
            ('B', true) => "bit".to_string(),
            (_, false) => format!("{prefix}byte"),
            (_, true) => format!("{prefix}bit"),
        };
        let short = if key == 'B' {
            class.to_string()
        } else {
            format!("{key}{class}")
        };
        if unit.to_lowercase() != long && unit != short {
            return None;
        }
    }
    Some((num * *limit as f64).round_ties_even() as i128)
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use serde_json::json;

    #[test]
    fn log_pow_root() {
        assert!(truth("1|log == 0.0"));
        assert!(truth("100|log(10) == 2.0"));
        assert!(truth("21|log(21) == 1.0"));
        assert!(truth("(2.3|log(42)|string).startswith('0.222841')"));
        assert!(truth("2|pow(4) == 16.0"));
        assert_eq!(eval("2|pow(4)"), json!(16.0));
        assert!(truth("4|root == 2.0"));
        assert!(truth("9|root(1) == 9.0"));
        assert!(truth("(9|root(6)|string).startswith('1.4422495')"));
        assert_eq!(eval("1|human_readable"), json!("1.00 Bytes"));
        assert_eq!(eval("1|human_readable(isbits=True)"), json!("1.00 bits"));
        assert_eq!(eval("10240|human_readable"), json!("10.00 KB"));
        assert_eq!(eval("102400000|human_readable"), json!("97.66 MB"));
        assert_eq!(eval("102400000|human_readable(unit='G')"), json!("0.10 GB"));
        assert_eq!(
            eval("102400000|human_readable(isbits=True, unit='G')"),
            json!("0.10 Gb")
        );
        assert_eq!(eval("'0'|human_to_bytes"), json!(0));
        assert_eq!(eval("'0.1'|human_to_bytes"), json!(0));
        assert_eq!(eval("'0.9'|human_to_bytes"), json!(1));
        assert_eq!(eval("'10.00 KB'|human_to_bytes"), json!(10240));
        assert_eq!(eval("'11 MB'|human_to_bytes"), json!(11534336));
        assert_eq!(eval("'1.1 GB'|human_to_bytes"), json!(1181116006));
        assert_eq!(eval("'10.00 Kb'|human_to_bytes(isbits=True)"), json!(10240));
        assert_eq!(eval("'2 kilobyte'|human_to_bytes"), json!(2048));
        assert_eq!(eval("10|human_to_bytes(default_unit='M')"), json!(10485760));
        for e in [
            "'10.00 foo'|human_to_bytes",
            "'10 Kb'|human_to_bytes",
            "'x'|human_readable",
        ] {
            assert!(
                crate::template::Templar::new().eval(e, &vars()).is_err(),
                "{e}"
            );
        }
        for e in ["'yo'|log", "'yo'|pow(4)", "'yo'|root"] {
            let err = crate::template::Templar::new()
                .eval(e, &vars())
                .unwrap_err()
                .to_string();
            assert!(err.contains("can only be used on numbers"), "{e}: {err}");
        }
    }
}
