//! Serialisation filters: `to_json`, `to_nice_json`, `from_json`, `to_yaml`, `to_nice_yaml`,
//! `from_yaml`. The text layouts live in `template::output`; YAML is read by `crate::yaml`,
//! the same loader as playbooks, so `from_yaml` types scalars exactly as they do.

use std::path::Path;

use minijinja::value::Kwargs;
use minijinja::{Error, Value};
use serde_json::Value as Json;

use crate::template::output::{py_json, yaml_dump};
use crate::template::value::{defined, json_to_value, op_err, value_to_json, value_to_json_text};

pub(super) fn filter_to_json(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    let json = value_to_json_text(serializable(value)?)?;
    Ok(Value::from(py_json(
        &json,
        indent,
        sort_keys.unwrap_or(false),
    )))
}

/// Ansible's `to_nice_json`: indent 4, keys sorted.
pub(super) fn filter_to_nice_json(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    let json = value_to_json_text(serializable(value)?)?;
    Ok(Value::from(py_json(
        &json,
        Some(indent.unwrap_or(4)),
        sort_keys.unwrap_or(true),
    )))
}

pub(super) fn filter_from_json(value: &str) -> Result<Value, Error> {
    serde_json::from_str::<Json>(value)
        .map(|j| json_to_value(&j))
        .map_err(|e| op_err(format!("from_json: invalid JSON: {e}")))
}

/// `from_yaml`: YAML 1.1 as PyYAML reads it (`yes` is true, `0x1F` is 31, `~` is null).
pub(super) fn filter_from_yaml(value: &str) -> Result<Value, Error> {
    // The path only appears in positions, which the message below reports as line/column.
    crate::yaml::parse_str(value, Path::new("<from_yaml>"))
        .map(|node| json_to_value(&node.to_data_json()))
        .map_err(|e| {
            let at = match &e.pos {
                Some(p) if p.line > 0 => format!(" at line {} column {}", p.line, p.col),
                _ => String::new(),
            };
            op_err(format!("from_yaml: {}{at}", e.msg))
        })
}

/// `from_yaml_all`: every document of a YAML stream, as a list; `None` is an empty list and
/// any other non-string is given back as it is (Ansible deprecates, but allows, that).
pub(super) fn filter_from_yaml_all(value: &Value) -> Result<Value, Error> {
    let Some(text) = defined(value)?.as_str() else {
        return Ok(if value.is_none() {
            Value::from(Vec::<Value>::new())
        } else {
            value.clone()
        });
    };
    crate::yaml::parse_str_all(text, Path::new("<from_yaml_all>"))
        .map(|docs| {
            Value::from(
                docs.iter()
                    .map(|d| json_to_value(&d.to_data_json()))
                    .collect::<Vec<_>>(),
            )
        })
        .map_err(|e| {
            let at = match &e.pos {
                Some(p) if p.line > 0 => format!(" at line {} column {}", p.line, p.col),
                _ => String::new(),
            };
            op_err(format!("from_yaml_all: {}{at}", e.msg))
        })
}

/// Ansible's `to_yaml`: PyYAML's default style (collections of scalars inline), keys sorted.
pub(super) fn filter_to_yaml(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    yaml_filter(value, kwargs, 2, true)
}

/// Ansible's `to_nice_yaml`: block style, indent 4, keys sorted.
pub(super) fn filter_to_nice_yaml(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    yaml_filter(value, kwargs, 4, false)
}

/// Both YAML filters: an `indent` keyword (at least 2), then the emitter in the given style.
fn yaml_filter(
    value: &Value,
    kwargs: Kwargs,
    default_indent: usize,
    flow_leaves: bool,
) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    kwargs.assert_all_used()?;
    let json = value_to_json(serializable(value)?)?;
    Ok(Value::from(yaml_dump(
        &json,
        indent.unwrap_or(default_indent).max(2),
        flow_leaves,
    )))
}

/// `value`, unless it is undefined or `omit`, which ansible-core's JSON encoder refuses.
fn serializable(value: &Value) -> Result<&Value, Error> {
    if crate::template::is_omit(value) {
        return Err(op_err(
            "Object of type '_OmitType' is not JSON serializable",
        ));
    }
    defined(value)
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use crate::template::Templar;
    use serde_json::json;

    #[test]
    fn json_filters() {
        assert_eq!(
            eval("user | to_json"),
            json!(r#"{"name": "bob", "uid": 1000, "groups": ["wheel"]}"#)
        );
        // Keys keep the order they were written in, as Python's dicts do; `sort_keys` sorts.
        assert_eq!(
            eval("{'b': 1, 'a': 2} | to_json"),
            json!(r#"{"b": 1, "a": 2}"#)
        );
        assert_eq!(
            eval("{'b': 1, 'a': 2} | to_json(sort_keys=true)"),
            json!(r#"{"a": 2, "b": 1}"#)
        );
        assert_eq!(eval("'héllo' | to_json"), json!(r#""h\u00e9llo""#));
        assert_eq!(
            eval("{'b': 1, 'a': [1, 2]} | to_nice_json"),
            json!("{\n    \"a\": [\n        1,\n        2\n    ],\n    \"b\": 1\n}")
        );
        assert_eq!(
            eval("{'a': []} | to_nice_json(indent=2)"),
            json!("{\n  \"a\": []\n}")
        );
        assert_eq!(
            eval("'{\"a\": [1, true]}' | from_json"),
            json!({"a": [1, true]})
        );
        assert!(Templar::new().eval("'{' | from_json", &vars()).is_err());
    }

    #[test]
    fn yaml_filters() {
        assert_eq!(
            eval("{'b': [1, 2], 'a': 'x'} | to_yaml"),
            json!("a: x\nb: [1, 2]\n")
        );
        assert_eq!(
            eval("{'users': [{'name': 'bob', 'shell': 'zsh'}], 'on': 'yes'} | to_nice_yaml"),
            json!("'on': 'yes'\nusers:\n-   name: bob\n    shell: zsh\n")
        );
        assert_eq!(
            eval("{'a': {'b': 'two\\nlines'}} | to_nice_yaml"),
            json!("a:\n    b: \"two\\nlines\"\n")
        );
        assert_eq!(
            eval("{'mode': '0644', 'e': ''} | to_nice_yaml(indent=2)"),
            json!("e: ''\nmode: '0644'\n")
        );
        assert_eq!(
            eval("'---\\na: 1\\n---\\nb: 2' | from_yaml_all | list"),
            json!([{"a": 1}, {"b": 2}])
        );
        assert_eq!(eval("none | from_yaml_all"), json!([]));
        assert_eq!(eval("2 | from_yaml_all"), json!(2));
        assert_eq!(
            eval("'a: 1\\nb: [x, y]\\n' | from_yaml"),
            json!({"a": 1, "b": ["x", "y"]})
        );
        // Round trip through YAML keeps the data.
        let out = eval("user | to_nice_yaml | from_yaml");
        assert_eq!(
            out,
            json!({"name": "bob", "uid": 1000, "groups": ["wheel"]})
        );
    }

    #[test]
    fn from_yaml_types_scalars_like_pyyaml() {
        assert_eq!(
            eval("'a: yes\\nb: 0x1F\\nc: ~\\nd: 0644\\ne: \"yes\"\\nf: 1_000\\ng: Off\\nh: y' | from_yaml"),
            json!({"a": true, "b": 31, "c": null, "d": 420, "e": "yes", "f": 1000, "g": false, "h": "y"})
        );
        assert_eq!(eval("'yes' | from_yaml"), json!(true));
        assert_eq!(eval("'' | from_yaml"), json!(null));
        let e = Templar::new()
            .eval("'a: [1, 2' | from_yaml", &vars())
            .unwrap_err();
        assert!(e.to_string().contains("from_yaml: invalid YAML"), "{e}");
    }

    #[test]
    fn to_yaml_quotes_strings_that_would_read_back_typed() {
        assert_eq!(
            eval("{'a': 'yes', 'b': '0x1F', 'c': '~', 'd': '1_000', 'e': 'plain'} | to_yaml"),
            json!("{a: 'yes', b: '0x1F', c: '~', d: '1_000', e: plain}\n")
        );
        assert_eq!(
            eval("['yes', '0x1F', '~', '1_000'] | to_nice_yaml"),
            json!("- 'yes'\n- '0x1F'\n- '~'\n- '1_000'\n")
        );
        // Base 60 reads back as a number, so `1:30` is quoted; in a flow collection PyYAML
        // quotes any `:`, in block style only what would read back typed.
        assert_eq!(
            eval("['1:30', '01:30'] | to_yaml"),
            json!("['1:30', '01:30']\n")
        );
        assert_eq!(
            eval("['1:30', '01:30', 'a?b'] | to_nice_yaml"),
            json!("- '1:30'\n- 01:30\n- a?b\n")
        );
        // And they come back as the same strings.
        assert_eq!(
            eval("['yes', '0x1F', '~', '1_000'] | to_yaml | from_yaml"),
            json!(["yes", "0x1F", "~", "1_000"])
        );
    }
}
