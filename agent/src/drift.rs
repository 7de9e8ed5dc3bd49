//! Drift attribution on the host: a task's files compared with what fixpoint last left there
//! (the journal's `written/` records), and `if_unchanged_since_last_run` turned into
//! `if_checksum` with the sum the journal recorded.
//!
//! Only files with a record are compared: a file fixpoint never wrote has no drift, and one it
//! changed itself later has the later record. A record left in doubt (a change interrupted
//! before it was recorded as finished) claims nothing.

use crate::journal::{Written, WrittenDir};
use fixpoint_modules::fs::cas::IF_UNCHANGED;
use fixpoint_modules::fs::written::Left;
use fixpoint_modules::params::Bool;
use serde_json::{json, Map, Value};
use std::collections::HashSet;

/// The file a task of a file-writing module changes (its `dest`/`path` as the module reads it),
/// as the journal names it: the directory canonical, the name as written. `tree`: the task may
/// write files below it (a directory copy).
struct Target {
    path: String,
    tree: bool,
}

fn target(module: &str, params: &Value) -> Option<Target> {
    let keys: &[&str] = match module {
        "copy" | "copy_tree" => &["dest"],
        "lineinfile" | "blockinfile" | "replace" | "ini_file" => {
            &["path", "dest", "destfile", "name"]
        }
        "file" => &["path", "dest", "name"],
        _ => return None,
    };
    let raw = keys
        .iter()
        .find_map(|k| params.get(*k).and_then(Value::as_str))?;
    let expanded = fixpoint_modules::fs::expand_user(raw);
    // The module locates the same path first thing: it takes this answer (see `located`).
    let loc = fixpoint_modules::fs::locate_for_step(&expanded).ok()?;
    let path = if loc.name == "." {
        loc.dir
    } else {
        loc.dir.join(&loc.name)
    };
    let tree = module == "copy_tree" || (module == "copy" && path.is_dir());
    Some(Target {
        path: path.display().to_string(),
        tree,
    })
}

/// One drifted file: where, since which run, and what differs.
fn entry(w: &Written, what: &[&str]) -> Value {
    json!({"path": w.path, "since_run": w.run_id, "at": w.at, "what": what})
}

/// Compare one record with the file now; `None`: no drift (or nothing to claim).
fn compare(w: &Written) -> Option<Value> {
    if w.in_doubt.is_some() {
        return None;
    }
    let left = w.left.as_ref()?;
    let now = Left::observe(std::path::Path::new(&w.path)).ok()?;
    let what = left.differences(now.as_ref());
    (!what.is_empty()).then(|| entry(w, &what))
}

/// The `drift` of a task before it runs: the records of its file (and, for a directory copy,
/// of the files below it) that differ from the host now. Every path compared is added to
/// `checked`, so `fixpoint drift` reports the other records as not in the playbook.
pub fn of_task(
    written: &WrittenDir,
    module: &str,
    params: &Value,
    checked: &mut HashSet<String>,
) -> Option<Value> {
    let t = target(module, params)?;
    let mut records: Vec<Written> = written.read(&t.path).into_iter().collect();
    if t.tree {
        let below = format!("{}/", t.path.trim_end_matches('/'));
        records.extend(
            written
                .all()
                .ok()?
                .into_iter()
                .filter(|w| w.path.starts_with(&below)),
        );
    }
    let mut found: Vec<Value> = Vec::new();
    for w in &records {
        checked.insert(w.path.clone());
        found.extend(compare(w));
    }
    drift_value(&t.path, found)
}

/// The task result's `drift`: one file's entry as it is; several (a directory copy) summed
/// up, the latest run and time first, with every file under `files`.
fn drift_value(path: &str, mut found: Vec<Value>) -> Option<Value> {
    match found.len() {
        0 => None,
        1 => found.pop(),
        _ => {
            found.sort_by(|a, b| b["at"].as_str().cmp(&a["at"].as_str()));
            let mut what: Vec<String> = Vec::new();
            for f in &found {
                for w in f["what"].as_array().into_iter().flatten() {
                    let w = w.as_str().unwrap_or_default().to_string();
                    if !what.contains(&w) {
                        what.push(w);
                    }
                }
            }
            Some(json!({
                "path": path,
                "since_run": found[0]["since_run"],
                "at": found[0]["at"],
                "what": what,
                "files": found,
            }))
        }
    }
}

/// Every record's file that drifted and is not in `checked` (no task of this run compared it):
/// `fixpoint drift`'s comparison of the journal alone.
pub fn of_journal(written: &WrittenDir, checked: &HashSet<String>) -> Result<Value, String> {
    Ok(Value::Array(
        written
            .all()?
            .iter()
            .filter(|w| !checked.contains(&w.path))
            .filter_map(compare)
            .collect(),
    ))
}

/// What `if_unchanged_since_last_run` found in the journal, to word a refusal.
pub struct Since {
    path: String,
    run_id: String,
    at: String,
}

/// Turn `if_unchanged_since_last_run: true` into `if_checksum` with what the journal says
/// fixpoint last left at the task's file (`absent` when its last change removed it). Without a
/// record the parameter is dropped and the write proceeds: the first run of a task has nothing
/// to compare with, as Ansible users expect of a first run. A record in doubt refuses.
pub fn unchanged_guard(
    written: Option<&WrittenDir>,
    module: &str,
    params: &Value,
) -> Result<(Option<Value>, Option<Since>), String> {
    let Some(flag) = params.get(IF_UNCHANGED) else {
        return Ok((None, None));
    };
    let mut p = params.clone();
    let obj = p
        .as_object_mut()
        .expect("parameters with a key are a mapping");
    obj.remove(IF_UNCHANGED);
    let on = serde_json::from_value::<Bool>(flag.clone()).is_ok_and(|b| b.0);
    let (Some(written), true) = (written, on) else {
        return Ok((Some(p), None));
    };
    let Some(t) = target(module, params).filter(|t| !t.tree) else {
        return Err(format!(
            "`{IF_UNCHANGED}` compares one file: it does not apply to this `{module}` task"
        ));
    };
    let Some(w) = written.read(&t.path) else {
        return Ok((Some(p), None));
    };
    let left = match (&w.in_doubt, &w.left) {
        (None, Some(left)) => left,
        (doubt, _) => {
            return Err(format!(
                "{IF_UNCHANGED}: fixpoint's last change of {} (run {}) was interrupted before it \
                 was recorded as finished, so what fixpoint left there is unknown; check the \
                 file, then give the task `if_checksum` with the sum it must have (or run it \
                 once without the guard)",
                t.path,
                doubt.as_deref().unwrap_or(&w.run_id)
            ))
        }
    };
    obj.insert(
        "if_checksum".into(),
        json!(left.sha256().unwrap_or("absent")),
    );
    Ok((
        Some(p),
        Some(Since {
            path: t.path,
            run_id: w.run_id,
            at: w.at,
        }),
    ))
}

/// A failed guard's message in the terms the task used: the run whose content was expected.
pub fn reword_refusal(since: &Since, msg: &str, result: &mut Map<String, Value>) -> String {
    if !msg.starts_with("if_checksum:") {
        return msg.to_string();
    }
    result.insert("since_run".into(), json!(since.run_id));
    let s = |k: &str| {
        result
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string()
    };
    let during = if msg.contains("another writer") {
        " (another writer changed it while the task ran)"
    } else {
        ""
    };
    format!(
        "{IF_UNCHANGED}: {} changed since fixpoint's run {} left it at {}{during}: expected {} \
         (what that run left), found {}; nothing was changed",
        since.path,
        since.run_id,
        since.at,
        s("expected_checksum"),
        s("found_checksum")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{now_text, StateDir, WRITTEN_VERSION};

    /// The journal names files by their canonical directory.
    fn canonical(p: &std::path::Path) -> std::path::PathBuf {
        std::fs::canonicalize(p).unwrap()
    }

    fn record(w: &WrittenDir, path: &std::path::Path, left: Option<Left>) {
        w.write(&Written {
            version: WRITTEN_VERSION,
            path: path.display().to_string(),
            left,
            run_id: "run-1".into(),
            at: now_text(),
            unix: 1,
            in_doubt: None,
        })
        .unwrap();
    }

    #[test]
    fn a_task_sees_drift_only_on_files_fixpoint_wrote() {
        let d = tempfile::tempdir().unwrap();
        let st = StateDir::open(Some(d.path().join("st").to_str().unwrap())).unwrap();
        let w = st.written();
        let root = canonical(d.path());
        let f = root.join("app.conf");
        std::fs::write(&f, "v1\n").unwrap();
        let left = Left::observe(&f).unwrap();
        record(&w, &f, left);
        let mut checked = HashSet::new();
        let params = json!({"dest": f, "content": "v1\n"});
        assert!(of_task(&w, "copy", &params, &mut checked).is_none());
        std::fs::write(&f, "hand\n").unwrap();
        let drift = of_task(&w, "copy", &params, &mut checked).unwrap();
        assert_eq!(drift["since_run"], "run-1");
        assert_eq!(drift["what"], json!(["content"]));
        assert!(checked.contains(&f.display().to_string()));
        // Never written by fixpoint: nothing to say.
        let other = json!({"path": root.join("other")});
        assert!(of_task(&w, "lineinfile", &other, &mut checked).is_none());
        // The journal alone: what no task compared.
        assert_eq!(of_journal(&w, &checked).unwrap(), json!([]));
        assert_eq!(
            of_journal(&w, &HashSet::new()).unwrap()[0]["path"],
            json!(f.display().to_string())
        );
    }

    #[test]
    fn if_unchanged_becomes_the_recorded_sum() {
        let d = tempfile::tempdir().unwrap();
        let st = StateDir::open(Some(d.path().join("st").to_str().unwrap())).unwrap();
        let w = st.written();
        let root = canonical(d.path());
        let f = root.join("app.conf");
        let params = json!({"dest": f, "content": "x", IF_UNCHANGED: true});
        // No record: the parameter goes and the write proceeds.
        let (p, since) = unchanged_guard(Some(&w), "copy", &params).unwrap();
        assert!(since.is_none());
        assert_eq!(p.unwrap(), json!({"dest": f, "content": "x"}));
        record(&w, &f, Some(Left::Absent));
        let (p, since) = unchanged_guard(Some(&w), "copy", &params).unwrap();
        assert_eq!(p.unwrap()["if_checksum"], "absent");
        let since = since.unwrap();
        let mut result = Map::new();
        result.insert("expected_checksum".into(), json!("absent"));
        result.insert("found_checksum".into(), json!("abc"));
        let msg = reword_refusal(
            &since,
            "if_checksum: x is not the expected content",
            &mut result,
        );
        assert!(msg.contains("since fixpoint's run run-1"), "{msg}");
        assert_eq!(result["since_run"], "run-1");
        // In doubt: refused.
        let mut doubt = w.read(&f.display().to_string()).unwrap();
        doubt.in_doubt = Some("run-2".into());
        w.write(&doubt).unwrap();
        let e = unchanged_guard(Some(&w), "copy", &params).err().unwrap();
        assert!(e.contains("run-2") && e.contains("interrupted"), "{e}");
        // `false` only drops the parameter.
        let off = json!({"dest": f, "content": "x", IF_UNCHANGED: false});
        let (p, since) = unchanged_guard(Some(&w), "copy", &off).unwrap();
        assert!(since.is_none() && p.unwrap().get(IF_UNCHANGED).is_none());
    }
}
