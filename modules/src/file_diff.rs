//! The `diff` the `file` module registers in diff mode (and `copy` when only attributes are
//! compared), in the shape of ansible-core's file module.

use std::path::Path;

use serde_json::{Map, Value};

use crate::fs::{lookup_gid, lookup_uid};
use crate::ModuleError;

/// Ansible's registered `diff` of `file`: `before` and `after` mappings with the `path` and
/// each of its attributes that changes (`state`, `src`, `mode`, `owner` and `group` as ids, times).
pub(crate) fn registered(diff: &crate::Diff, paths: &[&Path]) -> Value {
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let path = shown.first().cloned().unwrap_or_default();
    let mut before = Map::new();
    let mut after = Map::new();
    before.insert("path".into(), path.clone().into());
    after.insert("path".into(), path.into());
    for a in diff.attrs.iter().filter(|a| shown.contains(&a.path)) {
        let id = |v: &str, f: fn(&str) -> Result<u32, ModuleError>| -> Value {
            f(v).map_or_else(|_| v.into(), Value::from)
        };
        let (b, n) = match a.attr.as_str() {
            "owner" => (id(&a.before, lookup_uid), id(&a.after, lookup_uid)),
            "group" => (id(&a.before, lookup_gid), id(&a.after, lookup_gid)),
            // ansible-core's times are Python floats (seconds since the epoch).
            "mtime" | "atime" => (seconds(&a.before), seconds(&a.after)),
            _ => (a.before.clone().into(), a.after.clone().into()),
        };
        before.insert(a.attr.clone(), b);
        after.insert(a.attr.clone(), n);
    }
    // A directory that goes lists what it held, as ansible-core's initial diff walks it.
    let removes_dir = diff.attrs.iter().any(|a| {
        a.attr == "state"
            && a.before == "directory"
            && a.after == "absent"
            && shown[..1].contains(&a.path)
    });
    if let (true, Some(dir)) = (removes_dir, paths.first()) {
        before.insert("path_content".into(), path_content(dir));
    }
    serde_json::json!({"before": before, "after": after})
}

/// A time of the diff as ansible-core registers it: a float (seconds since the epoch).
fn seconds(v: &str) -> Value {
    v.parse::<f64>().map_or_else(|_| v.into(), Value::from)
}

/// Every directory and file below `dir`, top down, each directory's entries in the order the
/// directory lists them (as Python's `os.walk`). A link to a directory counts as a directory, as
/// `os.walk` lists it, but is not entered; any other link (dangling too) counts as a file.
fn path_content(dir: &Path) -> Value {
    let mut dirs = Vec::new();
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut subs = Vec::new();
        for e in entries.flatten() {
            let p = e.path();
            let t = e.file_type().ok();
            if t.is_some_and(|t| t.is_dir()) {
                dirs.push(Value::from(p.display().to_string()));
                subs.push(p);
            } else if t.is_some_and(|t| t.is_symlink()) && p.is_dir() {
                dirs.push(Value::from(p.display().to_string()));
            } else {
                files.push(Value::from(p.display().to_string()));
            }
        }
        // Depth first in listing order, as os.walk descends.
        todo.extend(subs.into_iter().rev());
    }
    serde_json::json!({"directories": dirs, "files": files})
}
