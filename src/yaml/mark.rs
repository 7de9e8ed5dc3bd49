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

/// The single key of a float JSON cannot hold: `{"__fixpoint_float": "inf"}` (`-inf`, `nan`).
///
/// YAML's `.inf`, `-.inf` and `.nan` are floats in ansible-core, and Python carries them
/// everywhere; a JSON number cannot, so such a float travels as this mark (like `!unsafe`'s,
/// it cannot be lost in a merge or copy) and becomes an `f64` again where templates read it
/// (`template::json_to_value`). A template's non-finite result is marked again on its way back
/// to JSON (`template::value`), and whatever prints JSON for people or filters writes
/// Python's `Infinity`, `-Infinity`, `NaN` for it (`python_json_text`).
pub const FLOAT_KEY: &str = "__fixpoint_float";

/// `f` as a JSON value: a number, or the mark of a non-finite float.
pub fn float(f: f64) -> Value {
    match serde_json::Number::from_f64(f) {
        Some(n) => Value::Number(n),
        None => {
            let mut m = Map::with_capacity(1);
            m.insert(
                FLOAT_KEY.to_string(),
                Value::String(python_str(f).to_string()),
            );
            Value::Object(m)
        }
    }
}

/// The non-finite float a marked value stands for, if `v` is one.
pub fn float_of(v: &Value) -> Option<f64> {
    match v {
        Value::Object(m) if m.len() == 1 => named_float(m.get(FLOAT_KEY)?.as_str()?),
        _ => None,
    }
}

/// The float a mark names (`python_str`'s inverse).
fn named_float(name: &str) -> Option<f64> {
    match name {
        "inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        "nan" => Some(f64::NAN),
        _ => None,
    }
}

/// Python's str() of a non-finite float: `inf`, `-inf`, `nan` (also the mark's own text).
pub fn python_str(f: f64) -> &'static str {
    if f.is_nan() {
        "nan"
    } else if f > 0.0 {
        "inf"
    } else {
        "-inf"
    }
}

/// How Python's `json.dumps` writes a non-finite float (not JSON, but what ansible-core prints
/// and `to_json` gives).
pub fn python_json_text(f: f64) -> &'static str {
    match python_str(f) {
        "nan" => "NaN",
        "inf" => "Infinity",
        _ => "-Infinity",
    }
}

/// JSON text `serde_json` wrote (compact or pretty), with each non-finite float's mark written
/// as Python writes the float. A textual replacement is exact: inside a JSON string every `"`
/// is escaped, so the mark's unescaped text can only be the one-key mapping itself.
pub fn python_json_floats(text: String) -> String {
    if !text.contains(FLOAT_KEY) {
        return text;
    }
    static MARK: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    // A fixed pattern: it compiles.
    let re = MARK.get_or_init(|| {
        regex::Regex::new(&format!(
            r#"\{{\s*"{FLOAT_KEY}"\s*:\s*"(inf|-inf|nan)"\s*\}}"#
        ))
        .unwrap()
    });
    re.replace_all(&text, |c: &regex::Captures| {
        python_json_text(named_float(&c[1]).unwrap_or(f64::NAN))
    })
    .into_owned()
}

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
    if float_of(&v).is_some() {
        return v;
    }
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

    #[test]
    fn non_finite_floats_are_marked_and_print_as_python_does() {
        assert_eq!(float(1.5), json!(1.5));
        let v = json!([
            float(f64::INFINITY),
            float(f64::NEG_INFINITY),
            float(f64::NAN),
            "x"
        ]);
        assert_eq!(float_of(&v[0]), Some(f64::INFINITY));
        assert_eq!(float_of(&v[1]), Some(f64::NEG_INFINITY));
        assert!(float_of(&v[2]).is_some_and(f64::is_nan));
        assert_eq!(float_of(&v[3]), None);
        assert_eq!(literal_data(v[0].clone()), v[0]);
        let text = python_json_floats(serde_json::to_string(&v).unwrap());
        assert_eq!(text, r#"[Infinity,-Infinity,NaN,"x"]"#);
        let pretty = python_json_floats(serde_json::to_string_pretty(&v).unwrap());
        assert!(pretty.contains("  Infinity,"), "{pretty}");
        // A string that spells the mark is escaped, so it stays a string.
        let s = json!(format!("{{\"{FLOAT_KEY}\":\"inf\"}}"));
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(python_json_floats(text.clone()), text);
    }
}
