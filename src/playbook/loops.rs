//! Ansible's `with_*` loops: turning the rendered value of `loop`, `with_items`, `with_dict`,
//! `with_fileglob`, `with_sequence`, `with_nested`, `with_together`, `with_subelements`,
//! `with_indexed_items`, `with_lines` or `with_first_found` into the list of items a task runs
//! over (the lookups these share with `query()` live in `template/lookups/listing.rs`).
//!
//! The loader only records which keyword a task used (`ast::LoopKind`); the engine calls
//! `expand` on the rendered value, host by host.

use super::ast::LoopKind;
use crate::template::listing::{self, short};
use serde_json::{json, Value};
use std::path::PathBuf;

/// The key of the mark the loader puts around a `with_first_found` value (`{key: value}`), so
/// that whoever renders it (`vars::Scope`) leaves out the terms that are undefined, as
/// ansible-core 2.19 does for this lookup called as `with_`, and only for it. The engine
/// renders every loop's value the same way; the mark travels inside the value as the
/// `!unsafe` mark does (`yaml::mark`), so no step between the loader and the render can lose it.
const FIRST_FOUND_TERMS: &str = "__fixpoint_first_found_terms";

/// A loop's raw value as the loader keeps it: a `with_first_found` value marked (see
/// `FIRST_FOUND_TERMS`), any other as written.
pub fn mark_terms(kind: LoopKind, value: Value) -> Value {
    match kind {
        LoopKind::FirstFound(_) => json!({ FIRST_FOUND_TERMS: value }),
        _ => value,
    }
}

/// The `with_first_found` terms inside a marked value, if it is one.
pub fn marked_terms(value: &Value) -> Option<&Value> {
    match value {
        Value::Object(m) if m.len() == 1 => m.get(FIRST_FOUND_TERMS),
        _ => None,
    }
}

/// The items of a loop from its rendered value. `search` is where `with_fileglob` and
/// `with_first_found` look for relative names (the role, then the playbook directory).
pub fn expand(kind: LoopKind, value: Value, search: &[PathBuf]) -> Result<Vec<Value>, String> {
    let list = |v: Value, what: &str| -> Result<Vec<Value>, String> {
        match v {
            Value::Array(a) => Ok(a),
            Value::Null => Ok(Vec::new()),
            other => Err(format!(
                "`{what}` must be a list, but it rendered to {}",
                short(&other)
            )),
        }
    };
    match kind {
        LoopKind::List => list(value, "loop"),
        // The lookup's items (queried by the engine), or the list as it is.
        LoopKind::WithList | LoopKind::Lookup => Ok(match value {
            Value::Array(a) => a,
            other => vec![other],
        }),
        // The lookups' own code: `with_items: x` is `query('items', *x)`.
        LoopKind::Items => Ok(listing::items(terms(value))),
        LoopKind::Dict => match value {
            Value::Object(m) => Ok(m
                .into_iter()
                .map(|(k, v)| json!({"key": k, "value": v}))
                .collect()),
            Value::Null => Ok(Vec::new()),
            other => Err(format!(
                // ansible-core's words, which playbooks test for (its loops target does).
                "`with_dict`: the 'dict' lookup plugin expects a dictionary, got {}",
                short(&other)
            )),
        },
        LoopKind::FirstFound(subdir) => {
            crate::template::first_found_file(&value, Some(subdir), search).map(|found| {
                found
                    .map(|p| Value::String(p.display().to_string()))
                    .into_iter()
                    .collect()
            })
        }
        LoopKind::Fileglob => {
            let patterns = match value {
                Value::String(s) => vec![s],
                other => list(other, "with_fileglob")?
                    .into_iter()
                    .map(|p| match p {
                        Value::String(s) => s,
                        other => other.to_string(),
                    })
                    .collect(),
            };
            Ok(patterns
                .iter()
                .flat_map(|p| crate::template::fileglob(p, search))
                .map(|p| Value::String(p.display().to_string()))
                .collect())
        }
        LoopKind::Flattened => Ok(flattened(match value {
            // The terms as ansible-core lists them: a string is one term.
            Value::Array(a) => a,
            other => vec![other],
        })),
        LoopKind::Sequence => listing::sequence(
            &match value {
                Value::String(s) => s,
                other => other.to_string(),
            },
            &[],
        ),
        LoopKind::IndexedItems => Ok(listing::indexed_items(terms(value))),
        LoopKind::Lines => {
            let mut out = Vec::new();
            for command in terms(value) {
                // In the playbook's directory (the last search directory), as ansible-core.
                out.extend(listing::lines(
                    command.as_str().unwrap_or(&command.to_string()),
                    search.last().map(PathBuf::as_path),
                )?);
            }
            Ok(out)
        }
        LoopKind::Nested => listing::nested(terms(value)),
        LoopKind::Together => listing::together(terms(value)),
        LoopKind::Subelements => match value {
            Value::Array(terms) => listing::subelements(&terms),
            other => listing::subelements(&[other]),
        },
    }
}

/// A `with_` value as the lookup's terms: a list is the terms, anything else the one term (as
/// ansible-core hands a `with_` value to its lookup).
fn terms(value: Value) -> Vec<Value> {
    match value {
        Value::Array(a) => a,
        other => vec![other],
    }
}

/// `community.general.flattened`: every list inside the terms spliced in, all the way down; a
/// string is kept (stripped of surrounding blanks), and a term that is the string `None` or
/// `null` ends the list there (the plugin's marker of an undefined term).
fn flattened(terms: Vec<Value>) -> Vec<Value> {
    let mut out = Vec::new();
    for mut term in terms {
        // A list of one list (of one list...) is its innermost item.
        while let Value::Array(a) = &term {
            if a.len() != 1 {
                break;
            }
            let inner = a[0].clone();
            if !inner.is_array() {
                term = inner;
                break;
            }
            term = inner;
        }
        match term {
            Value::String(s) if s == "None" || s == "null" => break,
            Value::String(s) => out.push(Value::String(s.trim().to_string())),
            Value::Array(a) => out.extend(flattened(a)),
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flattened_splices_every_level_as_community_general_does() {
        let got = expand(
            LoopKind::Flattened,
            json!([[1, 2, [3, [4]]], [["a"]], " b ", {"k": 1}, "null", "never"]),
            &[],
        )
        .unwrap();
        assert_eq!(
            got,
            vec![
                json!(1),
                json!(2),
                json!(3),
                json!(4),
                json!("a"),
                json!("b"),
                json!({"k": 1})
            ]
        );
        assert_eq!(
            expand(LoopKind::Flattened, json!("one"), &[]).unwrap(),
            vec![json!("one")]
        );
    }

    #[test]
    fn with_keys_name_lookups_by_their_collection_names() {
        assert_eq!(
            LoopKind::of_key("with_community.general.flattened"),
            Some(LoopKind::Flattened)
        );
        assert_eq!(
            LoopKind::of_key("with_flattened"),
            Some(LoopKind::Flattened)
        );
        assert_eq!(
            LoopKind::of_key("with_ansible.builtin.items"),
            Some(LoopKind::Items)
        );
        assert_eq!(LoopKind::of_key("with_ansible.builtin.flattened"), None);
        assert_eq!(LoopKind::of_key("with_community.general.items"), None);
        assert_eq!(LoopKind::of_key("with_ansible.builtin.nope"), None);
    }

    #[test]
    fn a_non_list_value_with_non_ascii_text_is_cut_at_a_character() {
        // The quote and 39 two-byte characters: byte 80 falls inside the 40th.
        let e = expand(LoopKind::List, json!("é".repeat(60)), &[]).unwrap_err();
        assert!(e.starts_with("`loop` must be a list"), "{e}");
        assert!(e.ends_with(&format!("\"{}…", "é".repeat(39))), "{e}");
        assert!(expand(LoopKind::Dict, json!("ü".repeat(100)), &[]).is_err());
    }

    #[test]
    fn nested_together_subelements() {
        let nested = expand(LoopKind::Nested, json!([["a", "b"], [1, 2]]), &[]).unwrap();
        assert_eq!(
            nested,
            [
                json!(["a", 1]),
                json!(["a", 2]),
                json!(["b", 1]),
                json!(["b", 2])
            ]
        );
        for kind in [LoopKind::Nested, LoopKind::Together] {
            let e = expand(kind, json!([]), &[]).unwrap_err();
            assert!(e.contains("requires at least one element"), "{e}");
        }
        let together = expand(LoopKind::Together, json!([["a", "b"], [1]]), &[]).unwrap();
        assert_eq!(together, [json!(["a", 1]), json!(["b", null])]);
        let users = json!([{"name": "u", "keys": ["k1", "k2"]}, {"name": "v"}]);
        assert!(expand(LoopKind::Subelements, json!([users.clone(), "keys"]), &[]).is_err());
        let subs = expand(
            LoopKind::Subelements,
            json!([users, "keys", {"skip_missing": true}]),
            &[],
        )
        .unwrap();
        assert_eq!(subs.len(), 2);
        assert_eq!(subs[1], json!([{"name": "u"}, "k2"]));
        // A dotted key takes the list out of the nested mapping.
        let deep = json!([{"n": 1, "a": {"b": [7], "c": 2}}]);
        let subs = expand(LoopKind::Subelements, json!([deep, "a.b"]), &[]).unwrap();
        assert_eq!(subs, [json!([{"n": 1, "a": {"c": 2}}, 7])]);
    }
}
