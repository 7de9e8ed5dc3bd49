//! The `action:` and `local_action:` keywords: a task that names its module as a value is
//! rewritten to the module's own key, and a templated module name is resolved when it runs.

use super::{controller_action, is_all_template, string_of};
use crate::diag::Diagnostic;
use crate::yaml::{Kind, Node};
use std::path::Path;

/// `action: <module> <args>` and `local_action:` (`action` with `delegate_to: localhost`), as
/// the module's own key: the task is rewritten so, keeping the source positions.
/// With the task, the module's template when `action` names it so (see `load_task`).
pub(crate) fn action_keyword(node: &Node) -> Result<Option<(Node, Option<String>)>, Diagnostic> {
    let Some(entries) = node.as_map() else {
        return Ok(None);
    };
    let mut found = entries
        .iter()
        .enumerate()
        .filter(|(_, (k, _, _))| k == "action" || k == "local_action");
    let Some((idx, (key, kpos, value))) = found.next() else {
        return Ok(None);
    };
    if let Some((_, (other, opos, _))) = found.next() {
        return Err(Diagnostic::at(
            opos,
            format!("a task names its module once, but this one has both `{key}` and `{other}`"),
        ));
    }
    let local = key == "local_action";
    if local {
        if let Some((_, dpos, _)) = entries.iter().find(|(k, _, _)| k == "delegate_to") {
            return Err(Diagnostic::at(
                dpos,
                "a task with `local_action` already runs on localhost",
            )
            .help("remove `delegate_to`"));
        }
    }
    let (module, args) = match &value.kind {
        Kind::Str(s) => {
            let s = s.trim();
            let (m, rest) = split_module(s);
            let args = Node {
                kind: if rest.trim().is_empty() {
                    Kind::Null
                } else {
                    Kind::Str(rest.trim().to_string())
                },
                pos: value.pos.clone(),
            };
            (m.to_string(), args)
        }
        Kind::Map(m) => {
            let module = value
                .get("module")
                .ok_or_else(|| value.err(format!("`{key}` needs `module:`")))?;
            let mut rest = m.clone();
            rest.retain(|(k, _, _)| k != "module");
            (
                string_of(module, "module")?,
                Node {
                    kind: Kind::Map(rest),
                    pos: value.pos.clone(),
                },
            )
        }
        _ => return Err(value.err(format!("`{key}` must be a module with its arguments"))),
    };
    if module.is_empty() {
        return Err(value.err(format!("`{key}` names no module")));
    }
    // A template (`action: "{{ ansible_facts.pkg_mgr }}"`) names the module on each host when
    // the task runs, as in ansible-core; any other brace is not a module name.
    let run_time = module.contains('{');
    if run_time && !(fixpoint_modules::params::is_template(&module) && is_all_template(&module)) {
        return Err(value.err(format!(
            "`{key}` must name a module, or be one template giving its name, not `{module}`"
        )));
    }
    let template = run_time.then(|| module.clone());
    let mut rewritten = entries.to_vec();
    rewritten[idx] = (module, kpos.clone(), args);
    if !local {
        return Ok(Some((
            Node {
                kind: Kind::Map(rewritten),
                pos: node.pos.clone(),
            },
            template,
        )));
    }
    rewritten.push((
        "delegate_to".into(),
        kpos.clone(),
        Node {
            kind: Kind::Str("localhost".into()),
            pos: kpos.clone(),
        },
    ));
    Ok(Some((
        Node {
            kind: Kind::Map(rewritten),
            pos: node.pos.clone(),
        },
        template,
    )))
}

/// The module a run-time `action` template rendered to names (see `load_task`): a module of
/// `library/`, a native module or controller action, else Ansible's module of that name, as
/// the loader resolves a written one. The error is ansible-core's message.
pub(crate) fn module_at_run_time(
    name: &str,
    play_dir: &Path,
) -> Result<(&'static str, Option<std::sync::Arc<crate::pymod::PyModule>>), String> {
    let unknown = || format!("Cannot resolve '{name}' to an action or module.");
    if name.is_empty() || name.contains(char::is_whitespace) || name.contains('{') {
        return Err(unknown());
    }
    if let Some(m) = crate::pymod::library::find(name, play_dir)? {
        return Ok((crate::pymod::intern(name), Some(m)));
    }
    if let Some(m) = fixpoint_modules::canonical_name(name).or_else(|| controller_action(name)) {
        return Ok((m, None));
    }
    match crate::pymod::find(name, play_dir)? {
        Some(m) => Ok((crate::pymod::intern(name), Some(m))),
        None => Err(unknown()),
    }
}

/// `action`'s string split into the module and its arguments at the first blank outside a
/// `{{ }}` (ansible-core's `split_args` keeps a template whole), so that
/// `"{{ pkg_mgr }} name=x"` names the module `{{ pkg_mgr }}`.
fn split_module(s: &str) -> (&str, &str) {
    let mut depth = 0usize;
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"{{") {
            depth += 1;
            i += 2;
            continue;
        }
        if depth > 0 && b[i..].starts_with(b"}}") {
            depth -= 1;
            i += 2;
            continue;
        }
        if depth == 0 && b[i].is_ascii_whitespace() {
            return (&s[..i], s[i..].trim());
        }
        i += 1;
    }
    (s, "")
}
