//! The playbook's own modules: `library/` beside the playbook and in every role loaded (with
//! `module_utils/` beside each, for the support code they import), found as ansible-core
//! finds them: a short name (`ping`) or an `ansible.legacy.` one looks there before anything
//! else, so a local module named like a builtin (or a native fixpoint module) replaces it, as
//! in Ansible; `ansible.builtin.ping` never does.
//!
//! Ansible adds a role's `library/` to its module search path when it loads the role, for the
//! rest of the run, so a play's tasks may use a module of a role the play loaded: roles are
//! noted here as the loader finds them, in order, after the playbook's own directory.

use super::PyModule;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Role directories loaded so far, in load order (each once).
static ROLES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Remember a role the loader found: its `library/` and `module_utils/` are searched from now.
pub fn note_role(role_dir: &Path) {
    let mut g = ROLES.lock().unwrap_or_else(|p| p.into_inner());
    if !g.iter().any(|r| r == role_dir) {
        g.push(role_dir.to_path_buf());
    }
}

/// The role directories loaded so far, in load order.
pub fn roles() -> Vec<PathBuf> {
    ROLES.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// The directories searched, in order: the playbook's, then each role's.
fn bases(play_dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![play_dir.to_path_buf()];
    out.extend(roles());
    out
}

/// The local module a task's module name stands for, if any: `Err` when the file is there but
/// is not a module fixpoint can run (a script, an old-style module).
pub fn find(name: &str, play_dir: &Path) -> Result<Option<Arc<PyModule>>, String> {
    let short = name.strip_prefix("ansible.legacy.").unwrap_or(name);
    if short.is_empty() || short.contains('.') || short.contains('/') {
        return Ok(None);
    }
    let bases = bases(play_dir);
    let Some(path) = bases
        .iter()
        .map(|b| b.join("library").join(format!("{short}.py")))
        .find(|p| p.is_file())
    else {
        return Ok(None);
    };
    let module_utils = bases
        .iter()
        .map(|b| b.join("module_utils"))
        .filter(|d| d.is_dir())
        .collect();
    let m = PyModule {
        name: name.to_string(),
        fqn: format!("ansible.modules.{short}"),
        path,
        collection: None,
        module_utils,
    };
    match super::locate::checked(m, false) {
        Ok(m) => Ok(Some(m)),
        Err(super::locate::Refusal::Refused(why)) => Err(why),
        Err(super::locate::Refusal::NotFound) => Ok(None),
    }
}

/// The builtin action a local action plugin (`action_plugins/<name>.py` beside the playbook or
/// in a role loaded) only re-exports: a file whose one statement, beside comments, `from
/// __future__` imports and `assert ActionModule`, is `from ansible.plugins.action.<x> import
/// ActionModule`. It behaves as action `<x>` under another name (ansible-core's own targets
/// use such aliases); any other action plugin is Python code fixpoint does not run.
pub fn action_alias(name: &str, play_dir: &Path) -> Option<String> {
    let short = name.strip_prefix("ansible.legacy.").unwrap_or(name);
    if short.is_empty() || short.contains('.') || short.contains('/') {
        return None;
    }
    let path = bases(play_dir)
        .iter()
        .map(|b| b.join("action_plugins").join(format!("{short}.py")))
        .find(|p| p.is_file())?;
    let text = std::fs::read_to_string(path).ok()?;
    let mut target = None;
    for line in text.lines().map(str::trim) {
        if line.is_empty()
            || line.starts_with('#')
            || line.starts_with("from __future__ import")
            || line == "assert ActionModule"
        {
            continue;
        }
        let x = line
            .strip_prefix("from ansible.plugins.action.")?
            .strip_suffix(" import ActionModule")?;
        if target.is_some() || !x.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return None;
        }
        target = Some(x.to_string());
    }
    target
}
