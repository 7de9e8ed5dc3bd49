//! Dictionary filters: `dict2items`, `items2dict`, `combine` (with Ansible's recursive and
//! list-merge options) and `rekey_on_member`.

use minijinja::value::{Kwargs, Rest, ValueKind};
use minijinja::{Error, Value};
use serde_json::Value as Json;

use crate::template::value::{defined, op_err, split_kwargs, value_to_json};

fn names(kwargs: &Kwargs) -> Result<(String, String), Error> {
    let key: Option<String> = kwargs.get("key_name")?;
    let value: Option<String> = kwargs.get("value_name")?;
    kwargs.assert_all_used()?;
    Ok((
        key.unwrap_or_else(|| "key".into()),
        value.unwrap_or_else(|| "value".into()),
    ))
}

pub(super) fn filter_dict2items(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let (key_name, value_name) = names(&kwargs)?;
    if defined(value)?.kind() != ValueKind::Map {
        return Err(op_err(format!(
            "dict2items requires a dictionary, got {}",
            value.kind()
        )));
    }
    let mut out = Vec::new();
    for key in value.try_iter()? {
        let item = value.get_item(&key)?;
        out.push(Value::from_iter([
            (key_name.as_str(), key),
            (value_name.as_str(), item),
        ]));
    }
    Ok(Value::from(out))
}

pub(super) fn filter_items2dict(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let (key_name, value_name) = names(&kwargs)?;
    let mut out = Vec::new();
    for item in defined(value)?.try_iter()? {
        let k = item.get_attr(&key_name)?;
        let v = item.get_attr(&value_name)?;
        if k.is_undefined() || v.is_undefined() {
            return Err(op_err(format!(
                "items2dict: each item needs `{key_name}` and `{value_name}`"
            )));
        }
        out.push((k, v));
    }
    Ok(Value::from_iter(out))
}

/// Ansible's `combine(*dicts, recursive=False, list_merge='replace')`.
pub(super) fn filter_combine(value: &Value, args: Rest<Value>) -> Result<Value, Error> {
    let (others, kwargs) = split_kwargs(&args)?;
    let recursive: Option<bool> = kwargs.get("recursive")?;
    let list_merge: Option<String> = kwargs.get("list_merge")?;
    kwargs.assert_all_used()?;
    let list_merge = list_merge.unwrap_or_else(|| "replace".into());
    if !matches!(
        list_merge.as_str(),
        "replace" | "keep" | "append" | "prepend" | "append_rp" | "prepend_rp"
    ) {
        return Err(op_err(format!(
            "combine: unknown list_merge {list_merge:?}"
        )));
    }
    let mut dicts = Vec::new();
    for v in std::iter::once(value).chain(others.iter()) {
        match value_to_json(defined(v)?)? {
            Json::Array(items) => dicts.extend(items),
            other => dicts.push(other),
        }
    }
    let mut result = serde_json::Map::new();
    for d in dicts {
        let Json::Object(map) = d else {
            return Err(op_err("combine: arguments must be dictionaries"));
        };
        merge_hash(&mut result, map, recursive.unwrap_or(false), &list_merge);
    }
    Ok(crate::template::json_to_value(&Json::Object(result)))
}

fn merge_hash(
    x: &mut serde_json::Map<String, Json>,
    y: serde_json::Map<String, Json>,
    recursive: bool,
    list_merge: &str,
) {
    for (key, y_value) in y {
        let Some(x_value) = x.get_mut(&key) else {
            x.insert(key, y_value);
            continue;
        };
        match (x_value, y_value) {
            (Json::Object(xm), Json::Object(ym)) if recursive => {
                merge_hash(xm, ym, recursive, list_merge)
            }
            (Json::Array(xa), Json::Array(ya)) if list_merge != "replace" => {
                let merged = match list_merge {
                    "keep" => xa.clone(),
                    "append" => xa.iter().cloned().chain(ya).collect(),
                    "prepend" => ya.into_iter().chain(xa.iter().cloned()).collect(),
                    "append_rp" => {
                        let kept: Vec<Json> =
                            xa.iter().filter(|z| !ya.contains(z)).cloned().collect();
                        kept.into_iter().chain(ya).collect()
                    }
                    _ => {
                        let rest: Vec<Json> =
                            xa.iter().filter(|z| !ya.contains(z)).cloned().collect();
                        ya.into_iter().chain(rest).collect()
                    }
                };
                *xa = merged;
            }
            (slot, y_value) => *slot = y_value,
        }
    }
}

/// `rekey_on_member(key, duplicates='error')`: a mapping of the dicts of a list (or of a
/// mapping's values) by their `key` member; `duplicates='overwrite'` keeps the last.
pub(super) fn filter_rekey_on_member(
    data: &Value,
    key: &Value,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let duplicates: Option<String> = kwargs.get("duplicates")?;
    kwargs.assert_all_used()?;
    let duplicates = duplicates.unwrap_or_else(|| "error".into());
    if duplicates != "error" && duplicates != "overwrite" {
        return Err(op_err(format!(
            "duplicates parameter to rekey_on_member has unknown value {duplicates:?}"
        )));
    }
    let items: Vec<Value> = match defined(data)?.kind() {
        ValueKind::Map => data
            .try_iter()?
            .map(|k| data.get_item(&k))
            .collect::<Result<_, _>>()?,
        ValueKind::Seq | ValueKind::Iterable => data.try_iter()?.collect(),
        _ => return Err(op_err("Type is not a valid list, set, or dict")),
    };
    let mut out: Vec<(Value, Value)> = Vec::new();
    for item in items {
        if item.kind() != ValueKind::Map {
            return Err(op_err("List item is not a valid dict"));
        }
        let k = item.get_item(key)?;
        if k.is_undefined() {
            return Err(op_err(format!("Key {key} was not found.")));
        }
        match out.iter_mut().find(|(seen, _)| *seen == k) {
            Some(_) if duplicates == "error" => {
                return Err(op_err(format!(
                    "Key {k} is not unique, cannot convert to dict."
                )))
            }
            Some(slot) => slot.1 = item,
            None => out.push((k, item)),
        }
    }
    Ok(Value::from_iter(out))
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use serde_json::json;

    #[test]
    fn rekey_on_member() {
        assert_eq!(
            eval("[{'p': 'a', 's': 1}, {'p': 'b', 's': 2}] | rekey_on_member('p')"),
            serde_json::json!({"a": {"p": "a", "s": 1}, "b": {"p": "b", "s": 2}})
        );
        assert_eq!(
            eval("{'x': {'p': 'a'}} | rekey_on_member('p')"),
            serde_json::json!({"a": {"p": "a"}})
        );
        assert_eq!(
            eval("[{'p': 'a', 's': 1}, {'p': 'a', 's': 2}] | rekey_on_member('p', duplicates='overwrite')"),
            serde_json::json!({"a": {"p": "a", "s": 2}})
        );
        let t = crate::template::Templar::new();
        for (e, want) in [
            (
                "[] | rekey_on_member('p', duplicates='boo')",
                "unknown value",
            ),
            ("'minkeys' | rekey_on_member('p')", "not a valid list"),
            ("[true] | rekey_on_member('p')", "not a valid dict"),
            ("[{'q': 1}] | rekey_on_member('p')", "was not found"),
            (
                "[{'p': 1}, {'p': 1}] | rekey_on_member('p')",
                "is not unique",
            ),
        ] {
            let err = t.eval(e, &vars()).unwrap_err().to_string();
            assert!(err.contains(want), "{e}: {err}");
        }
    }

    #[test]
    fn dict_filters() {
        assert_eq!(
            eval("{'a': 1, 'b': 2} | dict2items"),
            json!([{"key": "a", "value": 1}, {"key": "b", "value": 2}])
        );
        assert_eq!(
            eval("{'a': 1} | dict2items(key_name='k', value_name='v')"),
            json!([{"k": "a", "v": 1}])
        );
        assert_eq!(eval("items | items2dict"), json!({"a": 1, "b": 2}));
        assert_eq!(
            eval("{'a': 1, 'n': {'x': 1}} | combine({'b': 2, 'n': {'y': 2}})"),
            json!({"a": 1, "b": 2, "n": {"y": 2}})
        );
        assert_eq!(
            eval("{'n': {'x': 1}} | combine({'n': {'y': 2}}, recursive=true)"),
            json!({"n": {"x": 1, "y": 2}})
        );
        assert_eq!(
            eval("{'l': [1, 2]} | combine({'l': [2, 3]}, list_merge='append_rp')"),
            json!({"l": [1, 2, 3]})
        );
        assert_eq!(
            eval("[{'a': 1}, {'b': 2}] | combine"),
            json!({"a": 1, "b": 2})
        );
        assert_eq!(
            eval("{'a': 1} | combine({'a': 2}, {'a': 3})"),
            json!({"a": 3})
        );
    }
}
