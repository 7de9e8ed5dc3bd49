//! `once:` records: a keyed step's request hash, status and result, so a retried run never repeats its effect.

use super::{hash_id, now_unix, read_json, write_json, StateDir};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::fs;
use std::path::PathBuf;

/// Status of a `once:` record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnceStatus {
    /// The effect began and its end was not recorded: it may or may not have happened.
    Started,
    Done,
    /// The attempt failed; a failed attempt has no effect to protect, so it runs again.
    Failed,
}

/// One `once:` key's record.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    pub key: String,
    pub user: String,
    /// `once_scope:`, when the task names one: the key is unique within it.
    #[serde(default)]
    pub scope: Option<String>,
    /// The playbook that wrote the record, for display: keys are not scoped by it.
    pub playbook: String,
    pub module: String,
    /// sha256 of the rendered request (module + parameters): a key is never reused for another action.
    pub request_sha256: String,
    pub status: OnceStatus,
    pub run_id: String,
    pub started_at: String,
    pub started_unix: u64,
    #[serde(default)]
    pub finished_at: Option<String>,
    #[serde(default)]
    pub finished_unix: Option<u64>,
    #[serde(default)]
    pub changed: bool,
    /// Return values (rc, stdout, stderr...), capped, shown only to the owner of the state directory.
    #[serde(default)]
    pub result: Map<String, Value>,
}

/// Largest stdout/stderr kept in a record: enough to `register` and debug, bounded on disk.
const RESULT_TEXT_CAP: usize = 64 * 1024;

impl StateDir {
    /// A key names one logical operation for one remote user on this host (within an optional
    /// `once_scope`), whichever playbook reaches it; the stored request hash tells a reuse for
    /// something else.
    fn record_path(&self, user: &str, scope: Option<&str>, key: &str) -> PathBuf {
        // "once/v2": records of the first layout also hashed the playbook's file name.
        let id = match scope {
            Some(scope) => hash_id(&["once/v2", user, key, scope]),
            None => hash_id(&["once/v2", user, key]),
        };
        self.path.join("journal").join(format!("{id}.json"))
    }

    pub fn read_record(
        &self,
        user: &str,
        scope: Option<&str>,
        key: &str,
    ) -> Result<Option<Record>, String> {
        read_json(&self.record_path(user, scope, key))
    }

    /// File the records of the first layout (keyed by user, playbook file name and key) under
    /// their key. When two playbooks used one key, the newer record takes the name and the other
    /// is kept beside it as `<id>.json.superseded`, which nothing reads again. Call it under the
    /// host lock. Returns how many records moved.
    pub fn migrate_records(&self) -> Result<usize, String> {
        let dir = self.path.join("journal");
        let mut moved = 0;
        for e in fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let path = e.map_err(|e| e.to_string())?.path();
            if path.extension().and_then(|x| x.to_str()) != Some("json") {
                continue;
            }
            let Some(rec) = read_json::<Record>(&path)? else {
                continue;
            };
            let want = self.record_path(&rec.user, rec.scope.as_deref(), &rec.key);
            if path == want {
                continue;
            }
            let rename = |from: &PathBuf, to: &PathBuf| {
                fs::rename(from, to).map_err(|e| format!("{}: {e}", from.display()))
            };
            let set_aside = |p: &PathBuf| p.with_extension("json.superseded");
            match read_json::<Record>(&want)? {
                Some(there) if there.started_unix >= rec.started_unix => {
                    rename(&path, &set_aside(&path))?
                }
                Some(_) => {
                    rename(&want, &set_aside(&want))?;
                    rename(&path, &want)?
                }
                None => rename(&path, &want)?,
            }
            moved += 1;
        }
        if moved > 0 {
            fixpoint_modules::fs::fsync_dir(&dir).map_err(|e| e.to_string())?;
        }
        Ok(moved)
    }

    /// Write a record durably (fsync + rename + fsync dir) before returning.
    pub fn write_record(&self, rec: &Record) -> Result<(), String> {
        let mut rec = rec.clone();
        for k in ["stdout", "stderr"] {
            if let Some(Value::String(s)) = rec.result.get_mut(k) {
                if s.len() > RESULT_TEXT_CAP {
                    let mut cut = RESULT_TEXT_CAP;
                    while !s.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    s.truncate(cut);
                    s.push_str("\n[truncated by the journal]");
                }
            }
        }
        rec.result.remove("stdout_lines");
        rec.result.remove("stderr_lines");
        write_json(
            &self.record_path(&rec.user, rec.scope.as_deref(), &rec.key),
            &rec,
        )
    }

    pub fn remove_record(&self, rec: &Record) -> Result<(), String> {
        let p = self.record_path(&rec.user, rec.scope.as_deref(), &rec.key);
        fs::remove_file(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        fixpoint_modules::fs::fsync_dir(&self.path.join("journal")).map_err(|e| e.to_string())
    }

    /// Every record, oldest first.
    pub fn records(&self) -> Result<Vec<Record>, String> {
        let mut out: Vec<Record> = Vec::new();
        let dir = self.path.join("journal");
        for e in fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let p = e.map_err(|e| e.to_string())?.path();
            if p.extension().and_then(|x| x.to_str()) != Some("json") {
                continue;
            }
            if let Some(r) = read_json::<Record>(&p)? {
                out.push(r);
            }
        }
        out.sort_by_key(|r| r.started_unix);
        Ok(out)
    }

    /// Remove records older than `days`. Returns how many went.
    pub fn prune(&self, days: u64) -> Result<usize, String> {
        // `days` comes from the playbook or the command line: a retention too long to count in
        // seconds keeps everything (wrapping round would prune everything instead).
        let cutoff = now_unix().saturating_sub(days.saturating_mul(86_400));
        let mut n = 0;
        for r in self.records()? {
            let t = r.finished_unix.unwrap_or(r.started_unix);
            if t < cutoff {
                self.remove_record(&r)?;
                n += 1;
            }
        }
        Ok(n)
    }
}

/// sha256 of a rendered request: the module and its parameters in canonical (sorted) JSON.
/// Mappings keep the order they were written in (serde_json's `preserve_order`, as Python
/// dicts do), so keys are sorted here: the same request must hash the same whatever order its
/// parameters were built in, and as records written before that order was kept.
pub fn request_hash(module: &str, params: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&m[k])))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    let canonical = serde_json::json!({"module": module, "params": sorted(params)});
    hex::encode(Sha256::digest(canonical.to_string().as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::now_text;

    #[test]
    fn the_request_hash_does_not_depend_on_the_order_of_parameters() {
        let a: Value =
            serde_json::from_str(r#"{"b": 1, "a": {"y": 2, "x": [{"q": 1, "p": 2}]}}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{"a": {"x": [{"p": 2, "q": 1}], "y": 2}, "b": 1}"#).unwrap();
        assert_eq!(request_hash("shell", &a), request_hash("shell", &b));
        assert_ne!(request_hash("shell", &a), request_hash("command", &a));
    }

    fn rec(key: &str, status: OnceStatus) -> Record {
        Record {
            key: key.into(),
            user: "u".into(),
            scope: None,
            playbook: "site.yml".into(),
            module: "shell".into(),
            request_sha256: "abc".into(),
            status,
            run_id: "r1".into(),
            started_at: now_text(),
            started_unix: now_unix(),
            finished_at: None,
            finished_unix: None,
            changed: true,
            result: Map::new(),
        }
    }

    #[test]
    fn records_round_trip_and_prune_by_age() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(Some(d.path().join("st").to_str().unwrap())).unwrap();
        let mut r = rec("k1", OnceStatus::Started);
        s.write_record(&r).unwrap();
        assert_eq!(
            s.read_record("u", None, "k1").unwrap().unwrap().status,
            OnceStatus::Started
        );
        r.status = OnceStatus::Done;
        r.started_unix -= 10 * 86_400;
        r.finished_unix = Some(r.started_unix);
        s.write_record(&r).unwrap();
        s.write_record(&rec("k2", OnceStatus::Done)).unwrap();
        assert_eq!(s.prune(5).unwrap(), 1);
        assert!(s.read_record("u", None, "k1").unwrap().is_none());
        assert!(s.read_record("u", None, "k2").unwrap().is_some());
    }

    #[test]
    fn a_retention_beyond_the_epoch_keeps_every_record() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(Some(d.path().join("st").to_str().unwrap())).unwrap();
        let mut r = rec("old", OnceStatus::Done);
        r.started_unix -= 10 * 86_400;
        r.finished_unix = Some(r.started_unix);
        s.write_record(&r).unwrap();
        // `days * 86_400` wraps round to 61184 seconds here: unchecked, it would prune the
        // ten-day-old record (or panic).
        let days = u64::MAX / 86_400 + 1;
        assert_eq!(s.prune(days).unwrap(), 0);
        assert_eq!(s.prune(u64::MAX).unwrap(), 0);
        assert!(s.read_record("u", None, "old").unwrap().is_some());
    }

    #[test]
    fn a_key_is_one_operation_whichever_playbook_reaches_it() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(Some(d.path().join("st").to_str().unwrap())).unwrap();
        let mut r = rec("migrate-db", OnceStatus::Done);
        r.playbook = "deploy.yml".into();
        s.write_record(&r).unwrap();
        let found = s.read_record("u", None, "migrate-db").unwrap().unwrap();
        assert_eq!(
            found.playbook, "deploy.yml",
            "the playbook is kept for display"
        );
        // An explicit scope is another key space; another user is too.
        assert!(s
            .read_record("u", Some("db1"), "migrate-db")
            .unwrap()
            .is_none());
        assert!(s.read_record("v", None, "migrate-db").unwrap().is_none());
    }

    #[test]
    fn records_of_the_first_layout_are_filed_under_their_key() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(Some(d.path().join("st").to_str().unwrap())).unwrap();
        // The first layout hashed user, playbook file name and key.
        let old_name = |playbook: &str, key: &str| {
            s.path
                .join("journal")
                .join(format!("{}.json", hash_id(&["u", playbook, key])))
        };
        let mut a = rec("k", OnceStatus::Done);
        a.playbook = "a.yml".into();
        a.started_unix -= 100;
        let mut b = rec("k", OnceStatus::Done);
        b.playbook = "b.yml".into();
        b.request_sha256 = "other".into();
        let single = rec("single", OnceStatus::Started);
        for (r, path) in [
            (&a, old_name("a.yml", "k")),
            (&b, old_name("b.yml", "k")),
            (&single, old_name("site.yml", "single")),
        ] {
            write_json(&path, r).unwrap();
        }
        assert_eq!(s.migrate_records().unwrap(), 3);
        assert_eq!(
            s.read_record("u", None, "single").unwrap().unwrap().status,
            OnceStatus::Started
        );
        // Two playbooks used one key: the newer record wins, the other is set aside.
        let kept = s.read_record("u", None, "k").unwrap().unwrap();
        assert_eq!(kept.playbook, "b.yml");
        let set_aside: Vec<_> = fs::read_dir(s.path.join("journal"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(".json.superseded"))
            .collect();
        assert_eq!(set_aside.len(), 1);
        assert_eq!(s.records().unwrap().len(), 2);
        // A second pass has nothing left to move.
        assert_eq!(s.migrate_records().unwrap(), 0);
    }
}
