//! Random filters: `random` (a number below an end, or an element of a list) and `shuffle`.
//! With `seed`, the choice is the same on every run (though not the one Python's `Random`
//! would make for that seed).

use std::hash::{Hash, Hasher};

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, Value};

use crate::template::pyrepr::py_string;
use crate::template::value::{defined, op_err};

fn rng(seed: Option<Value>) -> Result<fastrand::Rng, Error> {
    Ok(match seed.filter(|s| !s.is_none() && !s.is_undefined()) {
        None => fastrand::Rng::new(),
        Some(s) => {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            py_string(&s)?.hash(&mut h);
            fastrand::Rng::with_seed(h.finish())
        }
    })
}

/// `end | random(start=0, step=1, seed=None)` or `list | random(seed=None)`.
pub(super) fn filter_random(
    value: &Value,
    start: Option<i64>,
    step: Option<i64>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let start = start.or(kwargs.get("start")?);
    let step = step.or(kwargs.get("step")?);
    let mut rng = rng(kwargs.get("seed")?)?;
    kwargs.assert_all_used()?;
    let value = defined(value)?;
    if let Some(end) = value.as_i64().filter(|_| value.kind() == ValueKind::Number) {
        let start = start.unwrap_or(0);
        let step = step.filter(|s| *s != 0).unwrap_or(1);
        let n = if step > 0 {
            (end - start + step - 1) / step
        } else {
            (start - end - step - 1) / -step
        };
        if n <= 0 {
            return Err(op_err(format!(
                "random: empty range ({start}, {end}, {step})"
            )));
        }
        return Ok(Value::from(start + step * rng.i64(0..n)));
    }
    if start.is_some_and(|s| s != 0) || step.is_some_and(|s| s != 0) {
        return Err(op_err(
            "random: start and step can only be used with integer values",
        ));
    }
    let items: Vec<Value> = match value.try_iter() {
        Ok(it) if value.kind() != ValueKind::Number => it.collect(),
        _ => return Err(op_err("random can only be used on sequences and integers")),
    };
    if items.is_empty() {
        return Err(op_err("random: cannot choose from an empty sequence"));
    }
    Ok(match value.as_str() {
        // A string's characters, as Python's `choice` picks them.
        Some(s) => {
            let chars: Vec<char> = s.chars().collect();
            Value::from(chars[rng.usize(0..chars.len())].to_string())
        }
        None => items[rng.usize(0..items.len())].clone(),
    })
}

/// `list | shuffle(seed=None)`: the items in a random order.
pub(super) fn filter_shuffle(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let mut rng = rng(kwargs.get("seed")?)?;
    kwargs.assert_all_used()?;
    let value = defined(value)?;
    let mut items: Vec<Value> = match value.as_str() {
        Some(s) => s.chars().map(|c| Value::from(c.to_string())).collect(),
        None => value.try_iter()?.collect(),
    };
    rng.shuffle(&mut items);
    Ok(Value::from(items))
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use serde_json::json;

    #[test]
    fn random_and_shuffle() {
        assert_eq!(eval("[7] | random"), json!(7));
        assert_eq!(eval("[7] | shuffle"), json!([7]));
        for _ in 0..20 {
            let n = eval("10 | random(start=5, step=2)").as_i64().unwrap();
            assert!([5, 7, 9].contains(&n), "{n}");
        }
        assert_eq!(
            eval("[1, 2, 3, 4, 5] | shuffle(seed='x')"),
            eval("[1, 2, 3, 4, 5] | shuffle(seed='x')")
        );
        assert_eq!(eval("[1, 2, 3] | shuffle | sort"), json!([1, 2, 3]));
        assert_eq!(
            eval("100 | random(seed=inventory_hostname | default('h'))"),
            eval("100 | random(seed='h')")
        );
    }
}
