//! Mappings whose keys were not strings in Python: YAML's `80: http` or `{5: 'five'}` are int
//! keys under ansible-core, and `names[80]`, `map('extract', names)` find them. Variables travel
//! as JSON here, whose keys are strings, so such a key arrives as `"80"`: a mapping with a key
//! that reads as an int, a float or a boolean becomes this wrapper, which finds the entry also
//! when looked up by the number or boolean (its text as JSON wrote it). Iterating and printing
//! still show the string keys (`'80'` where ansible-core shows `80`), and a lookup by number of
//! a key that was a string in the playbook (`'80': x`) succeeds here where ansible-core's fails:
//! lenient where the type was lost, never failing what ansible-core finds.

use std::sync::Arc;

use minijinja::value::{Enumerator, Object, ObjectRepr, ValueKind};
use minijinja::Value;

/// Whether a JSON key is the text of a non-string Python key: an int, a float or a boolean.
pub(super) fn is_typed_key(k: &str) -> bool {
    match k.as_bytes().first() {
        Some(b'0'..=b'9' | b'-') => k.parse::<f64>().is_ok(),
        Some(b't' | b'f' | b'T' | b'F') => matches!(k, "true" | "false" | "True" | "False"),
        _ => false,
    }
}

/// A mapping (a minijinja map with the JSON's string keys) that also answers typed lookups.
#[derive(Debug)]
pub(super) struct TypedKeys(pub(super) Value);

impl TypedKeys {
    fn item(&self, key: &Value) -> Option<Value> {
        self.0.get_item(key).ok().filter(|v| !v.is_undefined())
    }
}

impl Object for TypedKeys {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        if let Some(v) = self.item(key) {
            return Some(v);
        }
        let texts: &[String] = &match key.kind() {
            ValueKind::Bool if key.is_true() => vec!["true".into(), "True".into()],
            ValueKind::Bool => vec!["false".into(), "False".into()],
            ValueKind::Number => vec![key.to_string()],
            _ => return None,
        };
        texts
            .iter()
            .find_map(|t| self.item(&Value::from(t.as_str())))
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        match self.0.try_iter() {
            Ok(keys) => Enumerator::Values(keys.collect()),
            Err(_) => Enumerator::Empty,
        }
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use crate::template::{json_to_value, Templar};
    use serde_json::json;

    #[test]
    fn number_and_boolean_keys_are_found_by_their_value() {
        let vars = json!({"names": {"80": "http", "443": "https", "true": "y", "x": 1}, "ports": [80, 443]});
        let ctx = json_to_value(&vars);
        let eval = |e: &str| Templar::new().eval(e, &ctx).unwrap();
        assert_eq!(eval("names[80]"), json!("http"));
        assert_eq!(eval("names['80']"), json!("http"));
        assert_eq!(eval("names[true]"), json!("y"));
        assert_eq!(eval("names.x"), json!(1));
        assert_eq!(
            eval("ports | map('extract', names) | list"),
            json!(["http", "https"])
        );
        assert_eq!(eval("80 in names"), json!(true));
        assert_eq!(eval("names | length"), json!(4));
        assert_eq!(
            eval("names | dict2items | map(attribute='key') | list"),
            json!(["80", "443", "true", "x"])
        );
        assert_eq!(eval("names"), vars["names"]);
        assert!(eval("names[81] is undefined").as_bool().unwrap());
        // Plain mappings are left as they are.
        assert_eq!(eval("{'a': 1}['a']"), json!(1));
    }
}
