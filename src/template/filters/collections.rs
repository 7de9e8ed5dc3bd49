//! List filters: `flatten`, the set operations (`difference`, `intersect`, `union`,
//! `symmetric_difference`) and `extract`.

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, Value};

use crate::template::value::defined;

/// `flatten(levels=None, skip_nulls=True)`.
pub(super) fn filter_flatten(
    value: &Value,
    levels: Option<usize>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let kw_levels: Option<usize> = kwargs.get("levels")?;
    let skip_nulls: Option<bool> = kwargs.get("skip_nulls")?;
    kwargs.assert_all_used()?;
    fn walk(
        v: &Value,
        levels: Option<usize>,
        skip_nulls: bool,
        out: &mut Vec<Value>,
    ) -> Result<(), Error> {
        for item in v.try_iter()? {
            if item.kind() == ValueKind::Seq && levels != Some(0) {
                walk(&item, levels.map(|l| l - 1), skip_nulls, out)?;
            } else if !(skip_nulls && item.is_none()) {
                out.push(item);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(
        defined(value)?,
        levels.or(kw_levels),
        skip_nulls.unwrap_or(true),
        &mut out,
    )?;
    Ok(Value::from(out))
}

/// Ansible's `unique(case_sensitive=None, attribute=None)`: Jinja2's (case-insensitive unless
/// `case_sensitive`, by `attribute` if given) when the items can be hashed; otherwise, unless
/// either option was given, the first of each equal item. Non-iterables fail as in Python.
pub(super) fn filter_unique(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let case_sensitive: Option<bool> = kwargs.get("case_sensitive")?;
    let attribute: Option<Value> = kwargs.get("attribute")?;
    kwargs.assert_all_used()?;
    if !matches!(
        defined(value)?.kind(),
        ValueKind::Seq | ValueKind::Map | ValueKind::String | ValueKind::Iterable
    ) {
        return Err(crate::template::value::op_err(format!(
            "'{}' object is not iterable",
            super::types::filter_type_debug(value)
        )));
    }
    let items: Vec<Value> = value.try_iter()?.collect();
    let key_of = |item: &Value| -> Result<Value, Error> {
        let key = match &attribute {
            Some(a) => {
                let mut k = item.clone();
                for part in a.to_string().split('.') {
                    k = match part.parse::<usize>() {
                        Ok(i) => k.get_item(&Value::from(i))?,
                        Err(_) => k.get_attr(part)?,
                    };
                }
                k
            }
            None => item.clone(),
        };
        Ok(match key.as_str() {
            Some(t) if !case_sensitive.unwrap_or(false) => Value::from(t.to_lowercase()),
            _ => key,
        })
    };
    let keys: Vec<Value> = items.iter().map(key_of).collect::<Result<_, _>>()?;
    // Python cannot hash lists and dicts: Jinja2's filter fails on them.
    if keys
        .iter()
        .any(|k| matches!(k.kind(), ValueKind::Seq | ValueKind::Map))
    {
        if case_sensitive == Some(false) || attribute.is_some() {
            return Err(crate::template::value::op_err(
                "Jinja2's unique filter failed and we cannot fall back to Ansible's version as it does not support the parameters supplied.",
            ));
        }
        return unique_items(value).map(Value::from);
    }
    let mut seen: Vec<Value> = Vec::new();
    let mut out = Vec::new();
    for (item, key) in items.into_iter().zip(keys) {
        if !seen.contains(&key) {
            seen.push(key);
            out.push(item);
        }
    }
    Ok(Value::from(out))
}

pub(in crate::template) fn unique_items(v: &Value) -> Result<Vec<Value>, Error> {
    let mut out: Vec<Value> = Vec::new();
    for item in defined(v)?.try_iter()? {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    Ok(out)
}

pub(super) fn filter_difference(a: &Value, b: &Value) -> Result<Value, Error> {
    let b = unique_items(b)?;
    Ok(Value::from(
        unique_items(a)?
            .into_iter()
            .filter(|x| !b.contains(x))
            .collect::<Vec<_>>(),
    ))
}

pub(super) fn filter_intersect(a: &Value, b: &Value) -> Result<Value, Error> {
    let b = unique_items(b)?;
    Ok(Value::from(
        unique_items(a)?
            .into_iter()
            .filter(|x| b.contains(x))
            .collect::<Vec<_>>(),
    ))
}

pub(super) fn filter_union(a: &Value, b: &Value) -> Result<Value, Error> {
    let mut out = unique_items(a)?;
    for x in unique_items(b)? {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    Ok(Value::from(out))
}

pub(super) fn filter_symmetric_difference(a: &Value, b: &Value) -> Result<Value, Error> {
    let (a, b) = (unique_items(a)?, unique_items(b)?);
    let mut out: Vec<Value> = a.iter().filter(|x| !b.contains(x)).cloned().collect();
    out.extend(b.iter().filter(|x| !a.contains(x)).cloned());
    Ok(Value::from(out))
}

/// `map('extract', container, morekeys)`: `container[item][morekeys...]`.
pub(super) fn filter_extract(
    item: &Value,
    container: &Value,
    morekeys: Option<Value>,
) -> Result<Value, Error> {
    let mut v = container.get_item(defined(item)?)?;
    if let Some(keys) = morekeys {
        let keys: Vec<Value> = if keys.kind() == ValueKind::Seq {
            keys.try_iter()?.collect()
        } else {
            vec![keys]
        };
        for k in keys {
            v = v.get_item(&k)?;
        }
    }
    Ok(v)
}

#[cfg(test)]
mod unique_tests {
    use crate::template::test_support::*;
    use serde_json::json;

    #[test]
    fn unique_as_ansible() {
        assert_eq!(eval("[1,2,3,4,4,3,2,1]|unique"), json!([1, 2, 3, 4]));
        assert_eq!(eval("['a', 'A', 'b']|unique"), json!(["a", "b"]));
        assert_eq!(
            eval("['a', 'A', 'b']|unique(case_sensitive=True)"),
            json!(["a", "A", "b"])
        );
        assert_eq!(
            eval("[{'a': 1}, {'a': 1}, {'b': 2}]|unique"),
            json!([{"a": 1}, {"b": 2}])
        );
        assert_eq!(
            eval("[{'a': 1, 'n': 1}, {'a': 1, 'n': 2}]|unique(attribute='a')"),
            json!([{"a": 1, "n": 1}])
        );
        assert_eq!(eval("{'foo': 1, 'moo': 2}|unique"), json!(["foo", "moo"]));
        let t = crate::template::Templar::new();
        assert!(t
            .eval("[{'a': 1}]|unique(case_sensitive=False)", &vars())
            .is_err());
        let e = t.eval("True|unique", &vars()).unwrap_err().to_string();
        assert!(e.contains("'bool' object is not iterable"), "{e}");
    }
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use serde_json::json;

    #[test]
    fn list_and_set_filters() {
        assert_eq!(eval("[1, [2, [3, none]]] | flatten"), json!([1, 2, 3]));
        assert_eq!(eval("[1, [2, [3]]] | flatten(1)"), json!([1, 2, [3]]));
        assert_eq!(eval("[1, 2, 3] | difference([2])"), json!([1, 3]));
        assert_eq!(eval("[1, 2, 3] | intersect([3, 2, 5])"), json!([2, 3]));
        assert_eq!(eval("[1, 2] | union([2, 3])"), json!([1, 2, 3]));
        assert_eq!(eval("[1, 2] | symmetric_difference([2, 3])"), json!([1, 3]));
        assert_eq!(
            eval("['a'] | map('extract', {'a': {'ip': 1}}, 'ip') | list"),
            json!([1])
        );
    }
}
