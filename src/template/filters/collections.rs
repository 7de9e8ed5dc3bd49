//! List filters: `flatten`, the set operations (`difference`, `intersect`, `union`,
//! `symmetric_difference`), `extract`, `zip`, `zip_longest`, `subelements` and `groupby`.

use minijinja::value::{Kwargs, Rest, ValueKind};
use minijinja::{Error, Value};

use crate::template::pyrepr::py_repr_string;
use crate::template::value::{defined, op_err, split_kwargs};

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
    let keys: Vec<Value> = items
        .iter()
        .map(|item| jinja_key(item, attribute.as_ref(), case_sensitive))
        .collect::<Result<_, _>>()?;
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

/// What Jinja2's `unique`, `max` and `min` compare an item by: its `attribute` (a dotted path,
/// numbers index lists) if given, lower-cased if a string unless `case_sensitive`.
pub(in crate::template) fn jinja_key(
    item: &Value,
    attribute: Option<&Value>,
    case_sensitive: Option<bool>,
) -> Result<Value, Error> {
    let key = match attribute {
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

/// The items of each argument, for the `zip` filters.
fn item_lists(first: &Value, rest: &[Value]) -> Result<Vec<Vec<Value>>, Error> {
    std::iter::once(first)
        .chain(rest)
        .map(|v| Ok(defined(v)?.try_iter()?.collect()))
        .collect()
}

/// Python's `zip`: tuples (lists here) of the n-th items, as long as the shortest input.
pub(super) fn filter_zip(first: &Value, rest: Rest<Value>) -> Result<Value, Error> {
    let lists = item_lists(first, &rest)?;
    let n = lists.iter().map(Vec::len).min().unwrap_or(0);
    Ok(Value::from(
        (0..n)
            .map(|i| Value::from(lists.iter().map(|l| l[i].clone()).collect::<Vec<_>>()))
            .collect::<Vec<_>>(),
    ))
}

/// Python's `itertools.zip_longest(fillvalue=None)`: as long as the longest input.
pub(super) fn filter_zip_longest(first: &Value, rest: Rest<Value>) -> Result<Value, Error> {
    let (rest, kwargs) = split_kwargs(&rest)?;
    let fill: Value = kwargs
        .get::<Option<Value>>("fillvalue")?
        .unwrap_or(Value::from(()));
    kwargs.assert_all_used()?;
    let lists = item_lists(first, &rest)?;
    let n = lists.iter().map(Vec::len).max().unwrap_or(0);
    Ok(Value::from(
        (0..n)
            .map(|i| {
                Value::from(
                    lists
                        .iter()
                        .map(|l| l.get(i).cloned().unwrap_or_else(|| fill.clone()))
                        .collect::<Vec<_>>(),
                )
            })
            .collect::<Vec<_>>(),
    ))
}

/// Ansible's `subelements(obj, subelements, skip_missing=False)`: each element of a list (or
/// of a dict's values) paired with each item of the list the dotted key (or key list) leads to.
pub(super) fn filter_subelements(
    obj: &Value,
    subelements: &Value,
    skip_missing: Option<bool>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let skip_missing = match skip_missing {
        Some(b) => b,
        None => kwargs.get::<Option<bool>>("skip_missing")?.unwrap_or(false),
    };
    kwargs.assert_all_used()?;
    let elements: Vec<Value> = match defined(obj)?.kind() {
        ValueKind::Map => obj
            .try_iter()?
            .map(|k| obj.get_item(&k))
            .collect::<Result<_, _>>()?,
        ValueKind::Seq => obj.try_iter()?.collect(),
        _ => return Err(op_err("obj must be a list of dicts or a nested dict")),
    };
    let keys: Vec<Value> = match defined(subelements)?.kind() {
        ValueKind::Seq => subelements.try_iter()?.collect(),
        ValueKind::String => subelements
            .as_str()
            .unwrap_or_default()
            .split('.')
            .map(Value::from)
            .collect(),
        _ => return Err(op_err("subelements must be a list or a string")),
    };
    let mut out = Vec::new();
    for element in elements {
        let mut values = element.clone();
        for key in &keys {
            if values.kind() != ValueKind::Map {
                return Err(op_err(format!(
                    "the key {} should point to a dictionary, got '{}'",
                    crate::template::pyrepr::py_string(key)?,
                    crate::template::pyrepr::py_string(&values)?
                )));
            }
            match values.get_item(key).ok().filter(|v| !v.is_undefined()) {
                Some(v) => values = v,
                None if skip_missing => {
                    values = Value::from(Vec::<Value>::new());
                    break;
                }
                None => {
                    return Err(op_err(format!(
                        "could not find {} key in iterated item {}",
                        py_repr_string(key)?,
                        py_repr_string(&values)?
                    )))
                }
            }
        }
        if values.kind() != ValueKind::Seq {
            return Err(op_err(format!(
                "the key {} should point to a list, got {}",
                py_repr_string(keys.last().unwrap_or(&Value::from(())))?,
                py_repr_string(&values)?
            )));
        }
        for v in values.try_iter()? {
            out.push(Value::from(vec![element.clone(), v]));
        }
    }
    Ok(Value::from(out))
}

/// One group of `groupby`: Python's named tuple `(grouper, list)`, indexable and with both
/// names, printed as a tuple (`(1, [{'a': 1}])`) where a list would print with brackets.
#[derive(Debug)]
pub(in crate::template) struct GroupTuple {
    pub(in crate::template) grouper: Value,
    pub(in crate::template) list: Value,
}

impl minijinja::value::Object for GroupTuple {
    fn repr(self: &std::sync::Arc<Self>) -> minijinja::value::ObjectRepr {
        minijinja::value::ObjectRepr::Seq
    }

    fn get_value(self: &std::sync::Arc<Self>, key: &Value) -> Option<Value> {
        match (key.as_str(), key.as_i64()) {
            (Some("grouper"), _) | (_, Some(0)) => Some(self.grouper.clone()),
            (Some("list"), _) | (_, Some(1)) => Some(self.list.clone()),
            _ => None,
        }
    }

    fn enumerate(self: &std::sync::Arc<Self>) -> minijinja::value::Enumerator {
        minijinja::value::Enumerator::Seq(2)
    }
}

/// Jinja's `groupby`, its groups as [`GroupTuple`]s.
pub(super) fn filter_groupby(
    value: Value,
    attribute: Option<&str>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let groups = minijinja::filters::groupby(value, attribute, kwargs)?;
    let mut out = Vec::new();
    for g in groups.try_iter()? {
        out.push(Value::from_object(GroupTuple {
            grouper: g.get_attr("grouper")?,
            list: g.get_attr("list")?,
        }));
    }
    Ok(Value::from(out))
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

    #[test]
    fn zip_filters() {
        assert_eq!(eval("[1, 3] | zip([2, 4, 6])"), json!([[1, 2], [3, 4]]));
        assert_eq!(
            eval("[1] | zip_longest([2, 4], fillvalue='x')"),
            json!([[1, 2], ["x", 4]])
        );
    }

    #[test]
    fn subelements_pairs_and_refuses() {
        let c = "[{'n': 'a', 'g': ['w', 'x'], 'k': {'l': [1]}}]";
        assert_eq!(
            eval(&format!("{c} | subelements('g') | map('last') | list")),
            json!(["w", "x"])
        );
        assert_eq!(
            eval(&format!("{c} | subelements('k.l') | map('last') | list")),
            json!([1])
        );
        assert_eq!(
            eval(&format!("{c} | subelements('z', skip_missing=True)")),
            json!([])
        );
        let t = crate::template::Templar::new();
        for (expr, msg) in [
            ("true | subelements('g')", "obj must be a list of dicts"),
            (
                "{} | subelements(17)",
                "subelements must be a list or a string",
            ),
            (&format!("{c} | subelements('z')"), "could not find 'z' key"),
            (&format!("{c} | subelements('n')"), "should point to a list"),
            (
                &format!("{c} | subelements(['g', 'k'])"),
                "should point to a dictionary",
            ),
        ] {
            let e = t.eval(expr, &vars()).unwrap_err().to_string();
            assert!(e.contains(msg), "{expr}: {e}");
        }
    }

    #[test]
    fn groupby_groups_are_named_tuples() {
        let c = "[{'a': 1, 'n': 'x'}, {'a': 2, 'n': 'y'}, {'a': 1, 'n': 'z'}]";
        assert_eq!(
            eval(&format!(
                "{c} | groupby('a') | map(attribute='grouper') | list"
            )),
            json!([1, 2])
        );
        assert_eq!(
            eval(&format!(
                "({c} | groupby('a'))[0].list | map(attribute='n') | list"
            )),
            json!(["x", "z"])
        );
        assert_eq!(eval(&format!("({c} | groupby('a'))[1][0]")), json!(2));
        assert_eq!(
            eval("([{'a': 1}] | groupby('a'))[0] | string"),
            json!("(1, [{'a': 1}])")
        );
    }
}
