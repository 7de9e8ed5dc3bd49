//! Load-time checks of a loaded task: module parameters (where not templated) and the
//! idempotency rule that a raw command needs a guard.
//!
//! They read the typed task and the YAML only for positions; templated values are checked again
//! by the engine after rendering.

use super::actions;
use super::ast::Task;
use crate::diag::{Diagnostic, Pos};
use crate::yaml::{mark, Node};
use fixpoint_modules::params::is_template;
use serde_json::Value;
use std::path::PathBuf;

/// The position of a parameter key inside the module's mapping, when it was written there.
pub(crate) fn param_pos(raw: &Node, key: &str) -> Option<Pos> {
    raw.as_map()?
        .iter()
        .find(|(k, _, _)| k == key)
        .map(|(_, p, _)| p.clone())
}

/// Whether a parameter value holds a template anywhere inside (lists and mappings too); an
/// `!unsafe` value is literal, known now.
fn contains_template(v: &Value) -> bool {
    if mark::literal_of(v).is_some() {
        return false;
    }
    match v {
        Value::String(s) => is_template(s),
        Value::Array(a) => a.iter().any(contains_template),
        Value::Object(m) => m.values().any(contains_template),
        _ => false,
    }
}

/// Check parameters now where they are not templated; templated values are checked again after
/// rendering, on the host's values.
pub(crate) fn check_module_params(
    task: &Task,
    raw: &Node,
    mod_pos: &Pos,
    dirs: &[PathBuf],
) -> Result<(), Diagnostic> {
    let params = task.params.as_object().cloned().unwrap_or_default();
    let templated: Vec<String> = params
        .iter()
        .filter(|(_, v)| contains_template(v))
        .map(|(k, _)| k.clone())
        .collect();
    let mut static_params: serde_json::Map<String, Value> = params
        .iter()
        .map(|(k, v)| (k.clone(), mark::strip_marks(v)))
        .collect();
    // set_fact's keys are variable names: only the keys are checked, so nothing is taken out.
    if task.module != "set_fact" {
        for k in &templated {
            static_params.remove(k);
        }
    }
    if let Some(py) = &task.python {
        let local = task
            .delegate_to
            .as_deref()
            .is_some_and(|d| d == "localhost" || d == "127.0.0.1");
        return check_python_params(py, &static_params, &templated, raw, mod_pos, local);
    }
    let result = actions::check_params(task.module, &Value::Object(static_params), dirs);
    match result {
        Ok(()) => Ok(()),
        Err(e) => {
            // A required field we removed because it is templated is not an error yet.
            // (The error may name the canonical field while the playbook used an alias.)
            if !templated.is_empty()
                && (e.msg.starts_with("missing field")
                    || templated.iter().any(|k| names_param(&e.msg, k)))
            {
                return Ok(());
            }
            let top = e.path.split(['.', '[']).next().unwrap_or("").to_string();
            let field = if top.is_empty() || top == "." {
                // serde names unknown fields in the message, not the path.
                e.msg
                    .split('`')
                    .nth(1)
                    .map(str::to_string)
                    .unwrap_or_default()
            } else {
                top
            };
            let pos = param_pos(raw, &field).unwrap_or_else(|| mod_pos.clone());
            Err(Diagnostic::at(
                &pos,
                format!("invalid parameters for module `{}`: {e}", task.module),
            )
            .help(format!(
                "see the `{}` module in README.md for its parameters",
                task.module
            )))
        }
    }
}

/// Whether an error message names this parameter, quoted (`` `state` ``) or as a bare word in a
/// list ("one of the following is required: state, enabled"): such an error is about a value
/// taken out because it is templated, and is decided after rendering.
fn names_param(msg: &str, key: &str) -> bool {
    msg.contains(&format!("`{key}`"))
        || msg
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|w| w == key)
}

/// The idempotency rule: a raw command must say how a second run recognises it is done (not
/// asked of handlers: the notification that runs them is their guard).
pub(crate) fn check_guard(task: &Task, mod_pos: &Pos) -> Result<(), Diagnostic> {
    if task.module != "command" && task.module != "shell" {
        return Ok(());
    }
    let p = task.params.as_object();
    let has = |k: &str| p.is_some_and(|m| m.get(k).is_some_and(|v| !v.is_null()));
    if has("creates")
        || has("removes")
        || has("unless")
        || has("onlyif")
        || task.once.is_some()
        || task.is_read_only()
    {
        return Ok(());
    }
    Err(Diagnostic::at(
        mod_pos,
        format!(
            "unguarded `{}` task{}: it would run again on every run",
            task.module,
            task.name
                .as_ref()
                .map(|n| format!(" \"{n}\""))
                .unwrap_or_default()
        ),
    )
    .help(
        "add a guard that lets a second run recognise the work is done: `creates: <path>`, \
         `removes: <path>`, `unless: <command that succeeds when done>`, `onlyif: <command that \
         succeeds when needed>`, `once: <key>` (run once, recorded in the host journal), or \
         `changed_when: false` if the command only reads",
    ))
}

/// A task of a module run as Ansible's Python code: its untemplated parameters against the
/// options the module documents (`crate::pymod::doc`), without running anything.
pub(crate) fn check_python_params(
    py: &crate::pymod::PyModule,
    static_params: &serde_json::Map<String, Value>,
    templated: &[String],
    raw: &Node,
    mod_pos: &Pos,
    delegated_to_controller: bool,
) -> Result<(), Diagnostic> {
    let mut literal = static_params.clone();
    // A templated value is checked once rendered (by the engine).
    for t in templated {
        literal.insert(t.clone(), Value::String("{{ templated }}".into()));
    }
    let action = if templated.iter().any(|t| t == "remote_src") {
        Ok(())
    } else {
        crate::pymod::doc::check_action(py, &literal, delegated_to_controller)
    };
    action
        .and_then(|()| crate::pymod::doc::check(py, static_params, templated))
        .map_err(|e| {
            let pos = e
                .param
                .as_deref()
                .and_then(|p| param_pos(raw, p))
                .unwrap_or_else(|| mod_pos.clone());
            Diagnostic::at(&pos, format!("invalid parameters: {}", e.msg)).help(format!(
                "`{}` is Ansible's module code ({}): see its documentation (`ansible-doc {}`)",
                py.name,
                py.path.display(),
                py.name
            ))
        })
}
