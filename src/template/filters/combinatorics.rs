//! Ansible's combinatorial filters, Python's `itertools` under the names `product`,
//! `permutations` and `combinations`: the same tuples (lists here, as `zip` gives) in the same
//! order, the same argument checks.

use minijinja::value::{Rest, ValueKind};
use minijinja::{Error, Value};

use super::args::{bind, given, py_index};
use super::types::filter_type_debug;
use crate::template::value::{defined, op_err, split_kwargs};

/// The items of an iterable as Python iterates it (a string's characters, a mapping's keys);
/// anything else is Python's `TypeError`.
fn py_items(v: &Value) -> Result<Vec<Value>, Error> {
    match defined(v)?.kind() {
        ValueKind::Seq | ValueKind::Map | ValueKind::String | ValueKind::Iterable => {
            Ok(v.try_iter()?.collect())
        }
        _ => Err(op_err(format!(
            "'{}' object is not iterable",
            filter_type_debug(v)
        ))),
    }
}

/// The `r` of `permutations` and `combinations`: itertools takes an int only (a bool is one).
fn length_r(v: &Value) -> Result<usize, Error> {
    let int = v.kind() == ValueKind::Bool || (v.kind() == ValueKind::Number && v.is_integer());
    if !int {
        return Err(op_err("Expected int as r"));
    }
    let r = py_index(v)?;
    usize::try_from(r).map_err(|_| op_err("r must be non-negative"))
}

/// `itertools.product(*iterables, repeat=1)`: every pick of one item from each pool (the
/// inputs, `repeat` times over), the last pool varying fastest.
pub(super) fn filter_product(first: &Value, rest: Rest<Value>) -> Result<Value, Error> {
    let (pos, kwargs) = split_kwargs(&rest)?;
    let mut repeat = 1;
    for key in kwargs.args() {
        if key != "repeat" {
            return Err(op_err(format!(
                "'{key}' is an invalid keyword argument for product()"
            )));
        }
        repeat = py_index(&kwargs.peek::<Value>(key)?)?;
    }
    let repeat =
        usize::try_from(repeat).map_err(|_| op_err("repeat argument cannot be negative"))?;
    let mut pools = Vec::new();
    for v in std::iter::once(first).chain(&pos) {
        pools.push(py_items(v)?);
    }
    let pools: Vec<&Vec<Value>> = (0..repeat).flat_map(|_| pools.iter()).collect();
    // An odometer over the pools; an empty pool means no pick at all.
    let mut out = Vec::new();
    if pools.iter().any(|p| p.is_empty()) {
        return Ok(Value::from(out));
    }
    let mut idx = vec![0usize; pools.len()];
    loop {
        out.push(Value::from(
            idx.iter()
                .zip(&pools)
                .map(|(&i, p)| p[i].clone())
                .collect::<Vec<_>>(),
        ));
        let mut k = pools.len();
        loop {
            if k == 0 {
                return Ok(Value::from(out));
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < pools[k].len() {
                break;
            }
            idx[k] = 0;
        }
    }
}

/// `itertools.permutations(iterable, r=None)`: ordered picks of `r` distinct positions (all of
/// them by default), in the order of their positions.
pub(super) fn filter_permutations(value: &Value, args: Rest<Value>) -> Result<Value, Error> {
    let a = bind("permutations", &args, &["r"])?;
    let items = py_items(value)?;
    let r = match given(&a[0]) {
        Some(r) => length_r(r)?,
        None => items.len(),
    };
    let mut out = Vec::new();
    let mut picked = Vec::with_capacity(r);
    let mut used = vec![false; items.len()];
    permute(&items, r, &mut picked, &mut used, &mut out);
    Ok(Value::from(out))
}

fn permute(
    items: &[Value],
    r: usize,
    picked: &mut Vec<usize>,
    used: &mut [bool],
    out: &mut Vec<Value>,
) {
    if picked.len() == r {
        out.push(Value::from(
            picked.iter().map(|&i| items[i].clone()).collect::<Vec<_>>(),
        ));
        return;
    }
    for i in 0..items.len() {
        if !used[i] {
            used[i] = true;
            picked.push(i);
            permute(items, r, picked, used, out);
            picked.pop();
            used[i] = false;
        }
    }
}

/// `itertools.combinations(iterable, r)`: picks of `r` positions in increasing order; `r` has
/// no default.
pub(super) fn filter_combinations(value: &Value, args: Rest<Value>) -> Result<Value, Error> {
    let a = bind("combinations", &args, &["r"])?;
    let items = py_items(value)?;
    let Some(r) = a[0].as_ref() else {
        return Err(op_err(
            "combinations() missing required argument 'r' (pos 2)",
        ));
    };
    let r = length_r(r)?;
    let mut out = Vec::new();
    combine(&items, r, 0, &mut Vec::with_capacity(r), &mut out);
    Ok(Value::from(out))
}

fn combine(items: &[Value], r: usize, from: usize, picked: &mut Vec<Value>, out: &mut Vec<Value>) {
    if picked.len() == r {
        out.push(Value::from(picked.clone()));
        return;
    }
    // Not enough items left to fill the pick: no branch below would finish.
    for i in from..items.len() {
        if items.len() - i < r - picked.len() {
            break;
        }
        picked.push(items[i].clone());
        combine(items, r, i + 1, picked, out);
        picked.pop();
    }
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use crate::template::Templar;
    use serde_json::json;

    #[test]
    fn itertools_order_and_arguments() {
        assert_eq!(
            eval("[1, 2] | product(['a', 'b'])"),
            json!([[1, "a"], [1, "b"], [2, "a"], [2, "b"]])
        );
        assert_eq!(
            eval("[1, 2] | product(repeat=2)"),
            json!([[1, 1], [1, 2], [2, 1], [2, 2]])
        );
        assert_eq!(eval("[1, 2] | product(repeat=0)"), json!([[]]));
        assert_eq!(eval("[1, 2] | product([])"), json!([]));
        assert_eq!(eval("'ab' | product('x')"), json!([["a", "x"], ["b", "x"]]));
        assert_eq!(
            eval("[1, 2, 3] | permutations(2)"),
            json!([[1, 2], [1, 3], [2, 1], [2, 3], [3, 1], [3, 2]])
        );
        assert_eq!(eval("[1, 2] | permutations"), json!([[1, 2], [2, 1]]));
        assert_eq!(
            eval("[1, 2] | permutations(r=none)"),
            json!([[1, 2], [2, 1]])
        );
        assert_eq!(eval("[1, 2] | permutations(3)"), json!([]));
        assert_eq!(eval("[1, 2] | permutations(true)"), json!([[1], [2]]));
        assert_eq!(
            eval("'abcd' | combinations(3) | map('join') | list"),
            json!(["abc", "abd", "acd", "bcd"])
        );
        assert_eq!(eval("[1, 2] | combinations(0)"), json!([[]]));
        assert_eq!(eval("[1, 2] | combinations(r=5)"), json!([]));
        for (bad, msg) in [
            ("5 | permutations", "'int' object is not iterable"),
            ("[1] | permutations(-1)", "r must be non-negative"),
            ("[1] | permutations('2')", "Expected int as r"),
            ("[1] | combinations", "missing required argument 'r'"),
            (
                "[1] | product(repeat=-1)",
                "repeat argument cannot be negative",
            ),
            (
                "[1] | product(foo=1)",
                "'foo' is an invalid keyword argument",
            ),
            (
                "[1] | combinations(1, r=1)",
                "multiple values for argument 'r'",
            ),
        ] {
            let e = Templar::new().eval(bad, &vars()).unwrap_err().to_string();
            assert!(e.contains(msg), "{bad}: {e}");
        }
    }
}
