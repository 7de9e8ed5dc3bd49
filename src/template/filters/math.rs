//! Ansible's math filters that Jinja2 lacks: `log`, `pow` and `root`, computed as Python's
//! `math` module does (results are floats; text is refused with the plugin's wording, which
//! playbooks test for).

use minijinja::value::ValueKind;
use minijinja::{Error, Value};

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
        for e in ["'yo'|log", "'yo'|pow(4)", "'yo'|root"] {
            let err = crate::template::Templar::new()
                .eval(e, &vars())
                .unwrap_err()
                .to_string();
            assert!(err.contains("can only be used on numbers"), "{e}: {err}");
        }
    }
}
