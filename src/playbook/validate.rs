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
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The position of a parameter key inside the module's mapping, when it was written there.
pub(crate) fn param_pos(raw: &Node, key: &str) -> Option<Pos> {
    raw.as_map()?
        .iter()
        .find(|(k, _, _)| k == key)
        .map(|(_, p, _)| p.clone())
}

/// Whether a parameter value holds a template anywhere inside (lists and mappings too); an
/// `!unsafe` value is literal, known now; a `!vault` value is known when the task decrypts it,
/// so it is checked then, as a template is.
fn contains_template(v: &Value) -> bool {
    if mark::literal_of(v).is_some() {
        return false;
    }
    if mark::vault_text(v).is_some() {
        return true;
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
    task: &mut Task,
    raw: &Node,
    mod_pos: &Pos,
    dirs: &[PathBuf],
    late: &[String],
) -> Result<(), Diagnostic> {
    let params = task.params.as_object().cloned().unwrap_or_default();
    // `late`: parameters that may be given on the host (`package`'s and `service`'s manager
    // module defaults): checked, like templated ones, when the task runs.
    let templated: Vec<String> = params
        .iter()
        .filter(|(_, v)| contains_template(v))
        .map(|(k, _)| k.clone())
        .chain(late.iter().filter(|k| !params.contains_key(*k)).cloned())
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
    // Unknown keys first, templated or not: serde stops at the first problem, and the message
    // of an unknown key lists every known one, so it would read like one about a templated key.
    if let Some(known) = actions::param_names(task.module) {
        if let Some(k) = params.keys().find(|k| !known.contains(&k.as_str())) {
            let pos = param_pos(raw, k).unwrap_or_else(|| mod_pos.clone());
            let d = Diagnostic::at(
                &pos,
                format!(
                    "invalid parameters for module `{}`: parameter `{k}`: unknown field `{k}`, expected one of {}",
                    task.module,
                    known
                        .iter()
                        // `_raw_params` is the free-form text; other `_` names are internal.
                        .filter(|n| !n.starts_with('_') || **n == "_raw_params")
                        .map(|n| format!("`{n}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
            .help(match crate::diag::suggest(k, known.iter().copied()) {
                Some(near) => format!("did you mean `{near}`?"),
                None => format!(
                    "see the `{}` module in README.md for its parameters",
                    task.module
                ),
            });
            if !fails_only_where_it_runs(task) {
                return Err(d);
            }
            task.unknown_param = Some(d);
            return Ok(());
        }
    }
    let result = actions::check_params(task.module, &Value::Object(static_params), dirs);
    match result {
        Ok(()) => Ok(()),
        Err(e) => {
            // A required field we removed because it is templated is not an error yet.
            // (The error may name the canonical field while the playbook used an alias.)
            if !templated.is_empty()
                && (e.msg.starts_with(fixpoint_modules::MISSING_REQUIRED)
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
            let d = Diagnostic::at(
                &pos,
                format!("invalid parameters for module `{}`: {e}", task.module),
            )
            .help(format!(
                "see the `{}` module in README.md for its parameters",
                task.module
            ));
            // A task that says `ignore_errors: true` expects it may fail: ansible-core fails
            // it when it runs and goes on (Ansible's own tests check such failures), so it is
            // a warning here and the same check fails it on the host (`engine/item.rs`).
            // So is a task with a `when` (roles keep tasks only other platforms reach) or a
            // `failed_when` (which may expect the failure). So is a `copy` source missing now: an earlier task may make it on the
            // controller (`delegate_to: localhost`), and ansible-core looks for it only when
            // the task runs, where reading it fails the task (`engine/actions/prepare.rs`).
            if fails_only_where_it_runs(task)
                || (task.module == "copy" && actions::is_missing_source(&e))
            {
                task.unknown_param = Some(d);
                return Ok(());
            }
            Err(d)
        }
    }
}

/// Whether invalid parameters of `task` wait for a host to run it (a warning in `validate`,
/// the module's failure there), as ansible-core fails such a task only then: it may be skipped
/// (`when`), its failure may be ignored or expected (`ignore_errors`, `failed_when`).
pub(crate) fn fails_only_where_it_runs(task: &Task) -> bool {
    task.ignore_errors || !task.when.is_empty() || task.failed_when.is_some()
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
/// asked of handlers: the notification that runs them is their guard). A `when:` that reads a
/// registered result, or a fact `set_fact` derives from one, is a guard too: the author tied
/// the step to a change. Which names those are is known only once the whole playbook is
/// loaded, so while loading such a task is marked `guard_pending` and `validate` decides.
pub(crate) fn check_guard(task: &mut Task, mod_pos: &Pos) -> Result<(), Diagnostic> {
    if !matches!(task.module, "command" | "shell" | "raw" | "script") {
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
    if !task.when.is_empty() {
        match guard_names() {
            // Loading the playbook: decided by `validate` once it has seen every task.
            None => {
                task.guard_pending = Some(mod_pos.clone());
                return Ok(());
            }
            // A file a host includes at run time: the playbook's names are known.
            Some(names) if when_reads_any(&task.when, &names) => return Ok(()),
            Some(_) => {}
        }
    }
    Err(unguarded(task, mod_pos))
}

/// The error of a command without a guard.
pub(crate) fn unguarded(task: &Task, mod_pos: &Pos) -> Diagnostic {
    Diagnostic::at(
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
         succeeds when needed>`, `once: <key>` (run once, recorded in the host journal), \
         `changed_when: false` if the command only reads, or a `when:` that reads a registered \
         result (or a fact set_fact derives from one)",
    )
}

/// The names a `when:` may read to count as a command's guard, once `validate` has computed
/// them for the loaded playbooks (None while loading).
static GUARD_NAMES: Mutex<Option<Arc<BTreeSet<String>>>> = Mutex::new(None);

fn guard_names() -> Option<Arc<BTreeSet<String>>> {
    GUARD_NAMES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

/// Record the guard names of the loaded playbooks, for the files hosts include at run time.
pub fn set_guard_names(names: BTreeSet<String>) {
    *GUARD_NAMES.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(names));
}

/// The guard names: every registered variable, then every fact a `set_fact` gives from an
/// expression reading one of them, until no more are added. `set_facts` holds each fact's
/// name and the names its value's templates read.
pub fn guard_closure(
    registered: BTreeSet<String>,
    set_facts: &[(String, BTreeSet<String>)],
) -> BTreeSet<String> {
    let mut names = registered;
    loop {
        let before = names.len();
        for (fact, reads) in set_facts {
            if !names.contains(fact) && reads.iter().any(|r| names.contains(r)) {
                names.insert(fact.clone());
            }
        }
        if names.len() == before {
            return names;
        }
    }
}

/// Whether any of these conditions reads one of `names`.
pub fn when_reads_any(conds: &[String], names: &BTreeSet<String>) -> bool {
    conds
        .iter()
        .any(|c| names_read(c).iter().any(|n| names.contains(n)))
}

/// The top-level variable names an expression (or template) reads, found lexically: the
/// identifiers outside string literals that do not follow a `.` (attributes); filter, test and
/// keyword names come along, which is harmless as the result is only matched against variable
/// names the playbook registers.
pub fn names_read(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut chars = expr.char_indices().peekable();
    let mut prev_sig: Option<char> = None;
    while let Some((i, c)) = chars.next() {
        if c == '\'' || c == '"' {
            // Skip the string literal (with its escapes).
            let mut escaped = false;
            for (_, d) in chars.by_ref() {
                if escaped {
                    escaped = false;
                } else if d == '\\' {
                    escaped = true;
                } else if d == c {
                    break;
                }
            }
            prev_sig = Some(c);
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if d.is_ascii_alphanumeric() || d == '_' {
                    end = j + d.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            if prev_sig != Some('.') {
                out.insert(expr[i..end].to_string());
            }
            prev_sig = Some('a');
            continue;
        }
        if c.is_ascii_digit() {
            // A number (and its exponent or suffix letters) is no name.
            while chars
                .peek()
                .is_some_and(|(_, d)| d.is_ascii_alphanumeric() || *d == '_' || *d == '.')
            {
                chars.next();
            }
            prev_sig = Some('0');
            continue;
        }
        if !c.is_whitespace() {
            prev_sig = Some(c);
        }
    }
    out
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

/// The `notify` names of a play that no handler of it answers (by name, `listen` topic, or
/// either prefixed with its role's name): ansible-core stops the whole run with an error when
/// such a task changes something, after the tasks before it ran; fixpoint refuses the play at
/// load, before any host is touched. Only where every handler is known now: a play that loads
/// tasks at run time (an include of a templated or conditional file, an `include_role` of a
/// templated name) or names a handler with a template is not checked, and a templated `notify`
/// name is checked where it runs.
pub(crate) fn unanswered_notifications(play: &super::ast::Play) -> Vec<Diagnostic> {
    use super::ast::{IncludeSource, Step};
    fn walk<'a>(steps: &'a [Step], dynamic: &mut bool, handlers: &mut Vec<&'a Task>) {
        for s in steps {
            match s {
                Step::Block(b) => {
                    for part in [&b.block, &b.rescue, &b.always] {
                        walk(part, dynamic, handlers);
                    }
                }
                Step::Include(i) => {
                    handlers.extend(i.handlers.iter());
                    match &i.source {
                        IncludeSource::Loaded(inner) => walk(inner, dynamic, handlers),
                        _ => *dynamic = true,
                    }
                }
                Step::Task(_) | Step::Meta(_) => {}
            }
        }
    }
    let mut dynamic = false;
    let mut handlers: Vec<&Task> = play.handlers.iter().collect();
    for section in [&play.pre_tasks, &play.roles, &play.tasks, &play.post_tasks] {
        walk(section, &mut dynamic, &mut handlers);
    }
    if dynamic
        || handlers
            .iter()
            .any(|h| h.name.as_deref().is_some_and(is_template))
    {
        return Vec::new();
    }
    let mut out = Vec::new();
    for t in play.all_tasks() {
        for n in t.notify.iter().filter(|n| !is_template(n)) {
            if !handlers.iter().any(|h| h.answers(n)) {
                out.push(
                    Diagnostic::at(
                        &t.pos,
                        format!(
                            "this task notifies `{n}`, but no handler of the play has that name \
                             or listens to it (ansible-core stops the run with an error when \
                             the task changes something)"
                        ),
                    )
                    .help("name one of the play's handlers, or add a handler with that name or `listen` topic"),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn names_read_skips_attributes_strings_and_numbers() {
        assert_eq!(
            names_read("(pkgs | bool) or x.changed and y['stdout'] == \"a b\" and 1.5e3 > n"),
            set(&["and", "bool", "n", "or", "pkgs", "x", "y"])
        );
        assert_eq!(names_read("{{ a.b.c }}"), set(&["a"]));
    }

    #[test]
    fn facts_derived_from_registered_results_are_guard_names_transitively() {
        let facts = vec![
            ("c".to_string(), set(&["b"])),
            ("b".to_string(), set(&["r", "other"])),
            ("d".to_string(), set(&["inventory_var"])),
        ];
        assert_eq!(guard_closure(set(&["r"]), &facts), set(&["b", "c", "r"]));
        assert!(when_reads_any(&["c | bool".into()], &set(&["b", "c", "r"])));
        assert!(!when_reads_any(
            &["d and inventory_var".into()],
            &set(&["b", "c", "r"])
        ));
    }
}
