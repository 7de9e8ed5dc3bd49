//! The `!unsafe` mark as it travels inside plain JSON values: `{"__ansible_unsafe": value}`.
//!
//! Variables and module parameters are `serde_json` values, merged, copied and combined in
//! many places (inventory groups, vars files, role defaults, block inheritance). A mark kept
//! beside the values would have to follow every one of those steps, and a step that forgot it
//! would silently make the value a template again; a mark inside the value cannot be lost.
//! The shape is Ansible's own JSON form of an unsafe string (its legacy JSON decoder reads it
//! from `-e` and JSON vars files, and `ansible-inventory --list` prints it), so JSON sources
//! that use it mean the same here. Only marked values carry it: nothing else gets heavier.
//!
//! Whoever renders a value (`template::Templar::render_value`) yields the inner value as it is,
//! never templated; places that show raw values strip the mark (`strip_marks`).
//!
//! A `!vault` value travels the same way, as `{"__ansible_vault": "<vault text>"}` (Ansible's
//! own JSON form of an encrypted value): it is decrypted where it is rendered, never before, so
//! a value no secret opens is an error only when a task uses it, as in ansible-core 2.19.

use serde_json::{Map, Value};

/// The single key of a marked value.
pub const UNSAFE_KEY: &str = "__ansible_unsafe";

/// The single key of a vaulted value.
pub const VAULT_KEY: &str = "__ansible_vault";

/// A `!vault` value: its vault text, to decrypt when it is used.
pub fn vault(ciphertext: &str) -> Value {
    let mut m = Map::with_capacity(1);
    m.insert(VAULT_KEY.to_string(), Value::String(ciphertext.to_string()));
    Value::Object(m)
}

/// The vault text of a vaulted value (a mapping whose only key is the vault mark), if it is one.
pub fn vault_text(v: &Value) -> Option<&str> {
    match v {
        Value::Object(m) if m.len() == 1 => m.get(VAULT_KEY)?.as_str(),
        _ => None,
    }
}

/// Whether a vaulted value appears anywhere inside `v`.
pub fn has_vault(v: &Value) -> bool {
    match v {
        Value::Object(m) => vault_text(v).is_some() || m.values().any(has_vault),
        Value::Array(a) => a.iter().any(has_vault),
        _ => false,
    }
}

/// `value` marked as never to be templated.
pub fn mark(value: Value) -> Value {
    let mut m = Map::with_capacity(1);
    m.insert(UNSAFE_KEY.to_string(), value);
    Value::Object(m)
}

/// The literal inside a marked value (a mapping whose only key is the mark), if it is one.
pub fn literal_of(v: &Value) -> Option<&Value> {
    match v {
        Value::Object(m) if m.len() == 1 => m.get(UNSAFE_KEY),
        _ => None,
    }
}

/// Whether a mark appears anywhere inside `v`.
pub fn has_marks(v: &Value) -> bool {
    match v {
        Value::Object(m) => literal_of(v).is_some() || m.values().any(has_marks),
        Value::Array(a) => a.iter().any(has_marks),
        _ => false,
    }
}

/// `v` with every marked value replaced by its literal: for showing raw values and for
/// load-time checks of values that are known already.
pub fn strip_marks(v: &Value) -> Value {
    if let Some(inner) = literal_of(v) {
        return inner.clone();
    }
    match v {
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, x)| (k.clone(), strip_marks(x))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(strip_marks).collect()),
        other => other.clone(),
    }
}

/// Data (a value rendered already, a host's) made safe to put into a layer of templates: each
/// string marked, so it stays its text there; a mapping's keys are rendered too, so one with a
/// key that looks like a template is marked whole. Mappings otherwise stay mappings, for
/// `include_vars`' `hash_behaviour: merge` to merge into.
pub fn literal_data(v: Value) -> Value {
    match v {
        Value::String(_) => mark(v),
        Value::Array(a) => Value::Array(a.into_iter().map(literal_data).collect()),
        Value::Object(m) if m.keys().any(|k| k.contains(['{', '%', '#'])) => mark(Value::Object(m)),
        Value::Object(m) => {
            Value::Object(m.into_iter().map(|(k, v)| (k, literal_data(v))).collect())
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn marks_are_found_and_stripped_at_any_depth() {
        let v = json!({"a": mark(json!("{{ x }}")), "b": [1, {"c": mark(json!({"{{ k }}": 1}))}]});
        assert!(has_marks(&v));
        assert_eq!(
            strip_marks(&v),
            json!({"a": "{{ x }}", "b": [1, {"c": {"{{ k }}": 1}}]})
        );
        assert_eq!(literal_of(&v["a"]), Some(&json!("{{ x }}")));
        // A mapping with more keys than the mark is an ordinary mapping.
        let two = json!({UNSAFE_KEY: "x", "other": 1});
        assert_eq!(literal_of(&two), None);
        assert!(!has_marks(&two));
        assert!(!has_marks(&json!({"a": "{{ x }}"})));
    }
}
