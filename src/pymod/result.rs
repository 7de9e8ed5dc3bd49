//! A Python module's answer → a fixpoint outcome, cleaned as ansible-core cleans it before
//! registering it: `_ansible_*` keys and `invocation` removed, `failed`/`changed` filled in (a
//! non-zero `rc` fails, as in Ansible), `stdout_lines`/`stderr_lines` added, the `diff` turned
//! into the diff fixpoint renders, warnings and deprecations taken out to be shown.

use fixpoint_modules::{ContentDiff, Diff, Outcome};
use serde_json::{json, Map, Value};

/// What the module said, in fixpoint's terms.
#[derive(Debug)]
pub struct PyResult {
    pub failed: bool,
    pub outcome: Outcome,
    /// Warnings and deprecations, to be shown once.
    pub warnings: Vec<String>,
}

/// The JSON object in the module's stdout (lines before and after it are dropped, as Ansible
/// does with a module that prints around its result).
fn json_of(stdout: &str) -> Option<Map<String, Value>> {
    if let Ok(Value::Object(m)) = serde_json::from_str(stdout.trim()) {
        return Some(m);
    }
    let start = stdout.find('{')?;
    let end = stdout.rfind('}')?;
    match serde_json::from_str(stdout.get(start..=end)?) {
        Ok(Value::Object(m)) => Some(m),
        _ => None,
    }
}

fn message_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(o) => o
            .get("msg")
            .or_else(|| o.get("event").and_then(|e| e.get("msg")))
            .map(message_of)
            .unwrap_or_else(|| v.to_string()),
        other => other.to_string(),
    }
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        // Ansible shows structured before/after as sorted, indented JSON.
        other => {
            let mut s = serde_json::to_string_pretty(other).unwrap_or_default();
            s.push('\n');
            s
        }
    }
}

/// Ansible's `diff` (one mapping or a list of them) → content diffs.
fn diff_of(v: &Value) -> Diff {
    let mut d = Diff::default();
    let items: Vec<&Value> = match v {
        Value::Array(a) => a.iter().collect(),
        other => vec![other],
    };
    for it in items {
        let Some(o) = it.as_object() else { continue };
        if let Some(p) = o.get("prepared").and_then(Value::as_str) {
            d.content.push(ContentDiff {
                path: String::new(),
                before: String::new(),
                after: p.to_string(),
            });
            continue;
        }
        if !o.contains_key("before") && !o.contains_key("after") {
            continue;
        }
        let header = o
            .get("after_header")
            .or_else(|| o.get("before_header"))
            .and_then(Value::as_str)
            .unwrap_or("");
        d.content.push(ContentDiff {
            path: header.to_string(),
            before: o.get("before").map(text_of).unwrap_or_default(),
            after: o.get("after").map(text_of).unwrap_or_default(),
        });
    }
    d
}

fn strip_internal(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| !k.starts_with("_ansible_"));
            m.values_mut().for_each(strip_internal);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_internal),
        _ => {}
    }
}

/// Turn the module's process result into an outcome. `keep_diff`: the user asked for diffs
/// (fixpoint asks modules for them under `--twice` too, to name a culprit, but the registered
/// value then stays as Ansible's would).
pub fn convert(stdout: &str, stderr: &str, rc: i32, keep_diff: bool) -> PyResult {
    let Some(mut data) = json_of(stdout) else {
        let mut result = Map::new();
        result.insert("module_stdout".into(), json!(stdout));
        result.insert("module_stderr".into(), json!(stderr));
        result.insert("rc".into(), json!(rc));
        return PyResult {
            failed: true,
            outcome: Outcome {
                result,
                msg: Some(
                    "Module result deserialization failed. See stdout/stderr for the returned \
                     output."
                        .into(),
                ),
                ..Outcome::default()
            },
            warnings: Vec::new(),
        };
    };
    let mut warnings = Vec::new();
    for key in ["warnings", "deprecations"] {
        match data.remove(key) {
            Some(Value::Array(a)) => {
                for w in a {
                    let m = message_of(&w);
                    warnings.push(if key == "deprecations" {
                        format!("[DEPRECATION WARNING]: {m}")
                    } else {
                        m
                    });
                }
            }
            Some(Value::Null) | None => {}
            Some(other) => warnings.push(message_of(&other)),
        }
    }
    data.remove("invocation");
    let mut v = Value::Object(data);
    strip_internal(&mut v);
    let Value::Object(mut data) = v else {
        unreachable!("an object stays an object")
    };
    for (s, l) in [("stdout", "stdout_lines"), ("stderr", "stderr_lines")] {
        if let (Some(Value::String(t)), false) = (data.get(s), data.contains_key(l)) {
            let lines: Vec<&str> = t.lines().collect();
            data.insert(l.into(), json!(lines));
        }
    }
    let failed = match data.get("failed") {
        Some(f) => truthy(f),
        None => data
            .get("rc")
            .is_some_and(|rc| !(rc == &json!(0) || rc == &json!("0"))),
    };
    // ansible-core turns a failure's `exception` (a structured summary from 2.19's modules, or
    // a traceback string) into the traceback text, "(traceback unavailable)" without one.
    let exception = data.remove("exception");
    if failed
        || exception
            .as_ref()
            .is_some_and(fixpoint_modules::params::py_truthy)
    {
        let text = match &exception {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(Value::Object(o)) => o
                .get("event")
                .and_then(|e| e.get("formatted_traceback"))
                .and_then(Value::as_str)
                .unwrap_or("(traceback unavailable)")
                .to_string(),
            _ => "(traceback unavailable)".to_string(),
        };
        data.insert("exception".into(), json!(text));
    }
    let changed = data.get("changed").is_some_and(truthy);
    let diff = data.get("diff").map(diff_of).unwrap_or_default();
    if !keep_diff {
        data.remove("diff");
    }
    let msg = data.remove("msg").map(|m| message_of(&m));
    data.remove("changed");
    data.remove("failed");
    PyResult {
        failed,
        outcome: Outcome {
            changed,
            diff,
            result: data,
            msg,
        },
        warnings,
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::String(s) => matches!(s.to_lowercase().as_str(), "true" | "yes" | "1" | "on"),
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_answer_is_cleaned_as_ansible_registers_it() {
        let out = "noise\n{\"changed\": true, \"msg\": \"1 replacements made\", \"rc\": 0, \
                   \"invocation\": {\"module_args\": {}}, \"_ansible_no_log\": false, \
                   \"warnings\": [\"w1\"], \"diff\": {\"before\": \"a\\n\", \"after\": \"b\\n\", \
                   \"before_header\": \"/f\", \"after_header\": \"/f\"}}\n";
        let r = convert(out, "", 0, true);
        assert!(!r.failed);
        assert!(r.outcome.changed);
        assert_eq!(r.warnings, vec!["w1".to_string()]);
        assert_eq!(r.outcome.msg.as_deref(), Some("1 replacements made"));
        assert!(!r.outcome.result.contains_key("invocation"));
        assert!(!r.outcome.result.contains_key("_ansible_no_log"));
        assert_eq!(r.outcome.diff.content[0].path, "/f");
        assert_eq!(r.outcome.diff.content[0].after, "b\n");
        assert!(r.outcome.result.contains_key("diff"));
        let r = convert(out, "", 0, false);
        assert!(!r.outcome.result.contains_key("diff"));
    }

    #[test]
    fn a_non_zero_rc_without_failed_fails_and_garbage_is_a_module_failure() {
        let r = convert("{\"rc\": 2, \"stdout\": \"a\\nb\"}", "", 0, false);
        assert!(r.failed);
        assert_eq!(r.outcome.result["stdout_lines"], json!(["a", "b"]));
        let r = convert("Traceback", "boom", 1, false);
        assert!(r.failed);
        assert_eq!(r.outcome.result["module_stderr"], json!("boom"));
    }
}
