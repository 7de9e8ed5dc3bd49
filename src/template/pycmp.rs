//! Python's ordering comparisons (`<`, `<=`, `>`, `>=`) where minijinja's differ, and the
//! tests and filters built on them (`select('>', 0)`, `max`, `min`, `sort`).
//!
//! minijinja orders every pair of values, NaN included and across types, where Python (and so
//! ansible-core) says false for any ordering with NaN and raises TypeError for types it cannot
//! order: `'12' > 10` fails under Ansible, the classic `ansible_distribution_major_version > 7`
//! mistake, which minijinja would quietly answer. The operators are rewritten to the helpers
//! here by `pyops` (`a > b` becomes `__fp_gt(a , b)`); a chain (`a < b < c`) stays minijinja's.

use std::cmp::Ordering;

use minijinja::value::{Rest, ValueKind};
use minijinja::{Environment, Error, ErrorKind, Value};

use super::filters::collections::jinja_key;
use super::pyops::{py_type, raised, Num};
use super::value::split_kwargs;

/// An ordering operator, as Python's rich comparison names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    pub(super) fn symbol(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }

    /// The helper `pyops` rewrites the operator to.
    pub(super) fn helper(self) -> &'static str {
        match self {
            Op::Lt => "__fp_lt",
            Op::Le => "__fp_le",
            Op::Gt => "__fp_gt",
            Op::Ge => "__fp_ge",
        }
    }

    /// Whether `ord` (of the left operand to the right) satisfies the operator; no ordering
    /// (NaN) satisfies none.
    fn holds(self, ord: Option<Ordering>) -> bool {
        match (self, ord) {
            (_, None) => false,
            (Op::Lt, Some(o)) => o.is_lt(),
            (Op::Le, Some(o)) => o.is_le(),
            (Op::Gt, Some(o)) => o.is_gt(),
            (Op::Ge, Some(o)) => o.is_ge(),
        }
    }
}

/// `a op b` as Python evaluates it.
pub(super) fn compare(a: &Value, b: &Value, op: Op) -> Result<bool, Error> {
    if a.is_undefined() || b.is_undefined() {
        return Err(Error::from(ErrorKind::UndefinedError));
    }
    if let (Some(x), Some(y)) = (Num::of(a), Num::of(b)) {
        return Ok(op.holds(num_cmp(x, y)));
    }
    match (a.kind(), b.kind()) {
        (ValueKind::String, ValueKind::String) => Ok(op.holds(Some(a.as_str().cmp(&b.as_str())))),
        (ValueKind::Bytes, ValueKind::Bytes) => Ok(op.holds(Some(a.as_bytes().cmp(&b.as_bytes())))),
        (ValueKind::Seq, ValueKind::Seq) => seq_compare(a, b, op),
        // Objects of fixpoint's own (`to_datetime`'s) order themselves, as their Python
        // counterparts do.
        (ValueKind::Plain, ValueKind::Plain) => Ok(op.holds(a.partial_cmp(b))),
        _ => Err(unorderable(a, b, op)),
    }
}

/// Python's TypeError for a pair it cannot order.
fn unorderable(a: &Value, b: &Value, op: Op) -> Error {
    raised(&format!(
        "'{}' not supported between instances of '{}' and '{}'",
        op.symbol(),
        py_type(a),
        py_type(b)
    ))
}

fn num_cmp(x: Num, y: Num) -> Option<Ordering> {
    match (x, y) {
        (Num::Int(x), Num::Int(y)) => Some(x.cmp(&y)),
        (x, y) => x.float().partial_cmp(&y.float()),
    }
}

/// Lists compare at their first items that differ (by Python's `==`), else by length.
fn seq_compare(a: &Value, b: &Value, op: Op) -> Result<bool, Error> {
    let (xs, ys): (Vec<Value>, Vec<Value>) = (a.try_iter()?.collect(), b.try_iter()?.collect());
    for (x, y) in xs.iter().zip(&ys) {
        if !py_eq(x, y) {
            return compare(x, y, op);
        }
    }
    Ok(op.holds(Some(xs.len().cmp(&ys.len()))))
}

/// Python's `==` for one list item: numbers by value (`True == 1`), the rest as minijinja.
fn py_eq(a: &Value, b: &Value) -> bool {
    match (Num::of(a), Num::of(b)) {
        (Some(x), Some(y)) => num_cmp(x, y) == Some(Ordering::Equal),
        _ => a == b,
    }
}

/// The helpers, Jinja2's comparison tests (`select('>', 0)`) and Ansible's `max` and `min`.
pub(super) fn add(env: &mut Environment<'static>) {
    for (op, tests) in [
        (Op::Lt, &["<", "lt", "lessthan"][..]),
        (Op::Le, &["<=", "le"][..]),
        (Op::Gt, &[">", "gt", "greaterthan"][..]),
        (Op::Ge, &[">=", "ge"][..]),
    ] {
        let f = move |a: &Value, b: &Value| compare(a, b, op);
        env.add_function(op.helper(), f);
        for name in tests {
            env.add_test(*name, f);
        }
    }
    env.add_filter("max", |v: &Value, args: Rest<Value>| {
        extreme(v, &args, Op::Gt)
    });
    env.add_filter("min", |v: &Value, args: Rest<Value>| {
        extreme(v, &args, Op::Lt)
    });
    env.add_filter("sort", sort);
}

/// Binds a filter's arguments as Python does, positionally or by name, to `names` in order;
/// a value that is none counts as not given (Jinja2's defaults are falsy or None).
pub(super) fn bind(
    filter: &str,
    args: &[Value],
    names: &[&str],
) -> Result<Vec<Option<Value>>, Error> {
    let (positional, kwargs) = split_kwargs(args)?;
    if positional.len() > names.len() {
        return Err(raised(&format!(
            "{filter}() takes at most {} positional arguments ({} given)",
            names.len() + 1,
            positional.len() + 1
        )));
    }
    let mut out = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let named: Option<Value> = kwargs.get(name)?;
        let v = match (positional.get(i), named) {
            (Some(_), Some(_)) => {
                return Err(raised(&format!(
                    "{filter}() got multiple values for argument '{name}'"
                )))
            }
            (Some(p), None) => Some(p.clone()),
            (None, n) => n,
        };
        out.push(v.filter(|v| !v.is_none() && !v.is_undefined()));
    }
    kwargs.assert_all_used()?;
    Ok(out)
}

/// The key Jinja2 compares an item by: `attribute` (a dotted path; several separated by commas
/// make a list of keys, as `sort` takes them), lower-cased strings unless `case_sensitive`.
fn key_fn(
    attribute: Option<Value>,
    case_sensitive: Option<Value>,
) -> impl Fn(&Value) -> Result<Value, Error> {
    let case_sensitive = Some(case_sensitive.is_some_and(|v| v.is_true()));
    let attributes: Vec<Value> = match attribute {
        Some(a) => a
            .to_string()
            .split(',')
            .map(|p| Value::from(p.trim()))
            .collect(),
        None => Vec::new(),
    };
    move |item: &Value| match attributes.as_slice() {
        [] => jinja_key(item, None, case_sensitive),
        [one] => jinja_key(item, Some(one), case_sensitive),
        several => several
            .iter()
            .map(|a| jinja_key(item, Some(a), case_sensitive))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::from),
    }
}

/// Jinja2's `max`/`min(case_sensitive=False, attribute=None)`, which ansible-core's filters
/// are: Python's `max`/`min` over the items keyed by `attribute` (a dotted path, numbers index
/// lists), strings compared lower-cased unless `case_sensitive`; the first of equal items wins.
/// An empty sequence is undefined (an error where it is used).
fn extreme(value: &Value, args: &[Value], op: Op) -> Result<Value, Error> {
    let name = if op == Op::Gt { "max" } else { "min" };
    let mut bound = bind(name, args, &["case_sensitive", "attribute"])?.into_iter();
    let (case_sensitive, attribute) = (bound.next().flatten(), bound.next().flatten());
    let key = key_fn(attribute, case_sensitive);
    let mut items = super::value::defined(value)?.try_iter()?;
    let Some(mut best) = items.next() else {
        return Ok(Value::UNDEFINED);
    };
    let mut best_key = key(&best)?;
    for item in items {
        let k = key(&item)?;
        if compare(&k, &best_key, op)? {
            (best, best_key) = (item, k);
        }
    }
    Ok(best)
}

/// Jinja2's `sort(reverse=False, case_sensitive=False, attribute=None)`: Python's stable
/// `sorted` by the items' keys (`key_fn`), comparing with `<` alone, so that items Python
/// cannot order fail as in ansible-core and equal ones keep their order (also reversed).
fn sort(value: &Value, args: Rest<Value>) -> Result<Value, Error> {
    let mut bound = bind("sort", &args, &["reverse", "case_sensitive", "attribute"])?.into_iter();
    let reverse = bound.next().flatten().is_some_and(|v| v.is_true());
    let case_sensitive = bound.next().flatten();
    let key = key_fn(bound.next().flatten(), case_sensitive);
    let mut keyed: Vec<(Value, Value)> = super::value::defined(value)?
        .try_iter()?
        .map(|item| Ok((key(&item)?, item)))
        .collect::<Result<_, Error>>()?;
    // CPython sorts a reversed list and reverses the result: equal items stay in order.
    if reverse {
        keyed.reverse();
    }
    let mut keyed = merge_sort(keyed)?;
    if reverse {
        keyed.reverse();
    }
    Ok(Value::from(
        keyed.into_iter().map(|(_, item)| item).collect::<Vec<_>>(),
    ))
}

/// A stable merge sort whose comparison may fail (Rust's own sorts need a total order, which
/// NaN and mixed types are not).
fn merge_sort(mut v: Vec<(Value, Value)>) -> Result<Vec<(Value, Value)>, Error> {
    if v.len() <= 1 {
        return Ok(v);
    }
    let right = merge_sort(v.split_off(v.len() / 2))?;
    let left = merge_sort(v)?;
    let mut out = Vec::with_capacity(left.len() + right.len());
    let (mut l, mut r) = (left.into_iter().peekable(), right.into_iter().peekable());
    while let (Some(a), Some(b)) = (l.peek(), r.peek()) {
        // The right one goes first only when it is strictly less: stable.
        let next = if compare(&b.0, &a.0, Op::Lt)? {
            r.next()
        } else {
            l.next()
        };
        out.extend(next);
    }
    out.extend(l);
    out.extend(r);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use serde_json::json;

    const NAN: &str = "('nan' | float)";

    #[test]
    fn nan_orders_with_nothing_and_mixed_types_raise() {
        for op in ["<", "<=", ">", ">="] {
            assert_eq!(eval(&format!("{NAN} {op} 0")), json!(false), "{op}");
            assert_eq!(eval(&format!("0 {op} {NAN}")), json!(false), "{op}");
        }
        assert_eq!(
            eval(&format!("[{NAN}, 1] | select('>', 0) | list")),
            json!([1])
        );
        assert_eq!(eval(&format!("[1, {NAN}, 0] | max")), json!(1));
        assert_eq!(eval(&format!("[1, {NAN}, 0] | min")), json!(0));
        for (expr, msg) in [
            (
                "x > 10",
                "'>' not supported between instances of 'str' and 'int'",
            ),
            (
                "nothing <= 1",
                "'<=' not supported between instances of 'NoneType' and 'int'",
            ),
            (
                "{} < {}",
                "'<' not supported between instances of 'dict' and 'dict'",
            ),
            (
                "[1, 'a'] | max",
                "'>' not supported between instances of 'str' and 'int'",
            ),
            (
                "[1, 's'] | select('lt', 2) | list",
                "not supported between instances of 'str'",
            ),
            (
                "[3, 1, 'a'] | sort",
                "'<' not supported between instances of 'str' and 'int'",
            ),
            (
                "['a'] | sum",
                "unsupported operand type(s) for +: 'int' and 'str'",
            ),
            (
                "[1] | sum(start=[])",
                "can only concatenate list (not \"int\") to list",
            ),
            ("['a'] | sum(start='')", "sum() can't sum strings"),
            (
                "[1] | sort(true, reverse=false)",
                "got multiple values for argument 'reverse'",
            ),
        ] {
            let err = render_err(&format!("{{{{ {expr} }}}}")).to_string();
            assert!(err.contains(msg), "{expr}: {err}");
        }
    }

    #[test]
    fn numbers_strings_and_lists_order_as_in_python() {
        for expr in [
            "1 < 2.5",
            "true > 0",
            "'a' < 'b'",
            "'B' < 'a'",
            "[1, 2] < [1, 3]",
            "[1] < [1, 0]",
            "[1, 'a'] < [True, 'b']",
            "2 >= 2.0",
            "count >= 3",
            "1 < 2 < 3",
        ] {
            assert_eq!(eval(expr), json!(true), "{expr}");
        }
        assert!(!truth("count > 3"));
    }

    #[test]
    fn max_and_min_are_jinja2s() {
        for (expr, want) in [
            ("['B', 'a'] | max", json!("B")),
            ("['B', 'a'] | min", json!("a")),
            ("['B', 'a'] | max(case_sensitive=true)", json!("a")),
            (
                "items | max(attribute='value')",
                json!({"key": "b", "value": 2}),
            ),
            (
                "items | min(attribute='value')",
                json!({"key": "a", "value": 1}),
            ),
            (
                "[{'a': [5, 1]}, {'a': [0, 2]}] | max(attribute='a.1')",
                json!({"a": [0, 2]}),
            ),
            ("[True, 0] | min", json!(0)),
            ("[2, 2.0] | max", json!(2)),
            ("'abc' | max", json!("c")),
            ("[] | max | default('none')", json!("none")),
            ("[1, 2.5, True] | sum", json!(4.5)),
            ("[[1], [2]] | sum(start=[0])", json!([0, 1, 2])),
            ("items | sum(attribute='value')", json!(3)),
            ("[] | sum(start=5)", json!(5)),
            ("['B', 'a'] | max(true)", json!("a")),
            ("[1, 2.5, True] | sort", json!([1, true, 2.5])),
            ("['b', 'A', 'c'] | sort", json!(["A", "b", "c"])),
            ("['b', 'a', 'C'] | sort(case_sensitive=true)", json!(["C", "a", "b"])),
            ("['b', 'a', 'C'] | sort(true)", json!(["C", "b", "a"])),
            ("[[2, 1], [1, 2], [1]] | sort", json!([[1], [1, 2], [2, 1]])),
            (
                "[{'a': 1, 'b': 2}, {'a': 0, 'b': 3}, {'a': 1, 'b': 1}] | sort(attribute='a,b')",
                json!([{"a": 0, "b": 3}, {"a": 1, "b": 1}, {"a": 1, "b": 2}]),
            ),
            (
                "[{'a': 1, 'n': 1}, {'a': 0}, {'a': 1, 'n': 2}] | sort(attribute='a', reverse=true)",
                json!([{"a": 1, "n": 1}, {"a": 1, "n": 2}, {"a": 0}]),
            ),
        ] {
            assert_eq!(eval(expr), want, "{expr}");
        }
    }
}
