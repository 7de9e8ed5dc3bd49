//! Background jobs (`async` with `poll: 0`) and the `async_status` module that reads them.
//!
//! A job's results file is where ansible-core's documentation says it is, `~/.ansible_async/<jid>`
//! of the user the task runs as (its `results_file`), and holds what ansible-core's async_wrapper
//! writes there: first a start record (`started`, `finished: false`, the job id), then the
//! module's own result. fixpoint adds to the start record the pid of the job's process and that
//! process's start time, so that a job whose process is gone without a result (killed, the host
//! rebooted) is reported as failed ("effect unknown") instead of running for ever. Every write
//! after the first is a temp file, fsync and rename: a reader sees one record or the other.
//!
//! The start record is created with `O_EXCL`: that is the job's claim. A repeated start request
//! (the controller retrying after a dropped connection) finds it and answers with the job that
//! exists instead of starting a second one.

use crate::params::de_string;
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// `~/.ansible_async` of the effective user (from the user database: `$HOME` may still be the
/// login user's under `sudo`), ansible-core's default `async_dir`.
pub fn dir() -> PathBuf {
    let home = crate::fs::effective_home().unwrap_or_else(|| PathBuf::from("/tmp"));
    home.join(".ansible_async")
}

/// The results file of job `jid`; a jid that is not a plain file name is refused (it comes from
/// the playbook, and must not name a path elsewhere).
pub fn job_path(jid: &str) -> Result<PathBuf, ModuleError> {
    if jid.is_empty() || jid == "." || jid == ".." || jid.contains('/') || jid.contains('\0') {
        return Err(ModuleError::Params(format!(
            "`jid` must be a job id as `async` registered it (`ansible_job_id`), not {jid:?}"
        )));
    }
    Ok(dir().join(jid))
}

/// What a start request found.
pub enum Claim {
    /// The start record was created: this request starts the job.
    New(PathBuf),
    /// The job was started before (its record, as it is now).
    Existing(PathBuf),
}

/// Claim job `jid`: create its start record, durably, unless it exists.
pub fn claim(jid: &str) -> Result<Claim, String> {
    let path = job_path(jid).map_err(|e| e.to_string())?;
    let d = dir();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&d)
        .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    let mut f = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Ok(Claim::Existing(path))
        }
        Err(e) => return Err(format!("cannot create {}: {e}", path.display())),
    };
    let record = json!({"started": true, "finished": false, "ansible_job_id": jid});
    f.write_all(record.to_string().as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    crate::fs::fsync_dir(&d).map_err(|e| e.to_string())?;
    Ok(Claim::New(path))
}

/// Replace job `jid`'s record: temp file, fsync, rename, fsync the directory.
pub fn write_record(jid: &str, record: &Value) -> Result<(), String> {
    let path = job_path(jid).map_err(|e| e.to_string())?;
    let tmp = path.with_file_name(format!(".{jid}.{}.tmp", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(record.to_string().as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("cannot write {}: {e}", path.display()));
    }
    crate::fs::fsync_dir(&dir()).map_err(|e| e.to_string())
}

/// The start record with the job's process: `pid` and its start time (`/proc/<pid>/stat`), so
/// that a reused pid is not taken for the job.
pub fn started_record(jid: &str, pid: u32) -> Value {
    json!({
        "started": true,
        "finished": false,
        "ansible_job_id": jid,
        "fixpoint_pid": pid,
        "fixpoint_pid_start": proc_start(pid),
    })
}

/// What the task that starts a job registers, as ansible-core's: the job id and its results
/// file, `started` and not `finished` (the task itself reports changed).
pub fn start_result(jid: &str, path: &Path) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("failed".into(), json!(false));
    m.insert("started".into(), json!(true));
    m.insert("finished".into(), json!(false));
    m.insert("ansible_job_id".into(), json!(jid));
    m.insert("results_file".into(), json!(path.display().to_string()));
    m
}

/// The result a finished module leaves in its job's record (ansible-core writes the module's
/// JSON: its return values, `changed`, and `failed` with `msg` when it failed).
pub fn finished_record(outcome: Result<crate::Outcome, ModuleError>) -> Value {
    let mut m = match outcome {
        Ok(o) => {
            let mut m = o.result;
            m.insert("changed".into(), json!(o.changed));
            if let Some(msg) = o.msg {
                m.entry("msg").or_insert(json!(msg));
            }
            m
        }
        Err(ModuleError::Failed { msg, mut result }) => {
            result.insert("failed".into(), json!(true));
            result.insert("msg".into(), json!(msg));
            result
        }
        Err(e) => {
            let mut m = Map::new();
            m.insert("failed".into(), json!(true));
            m.insert("msg".into(), json!(e.to_string()));
            m
        }
    };
    m.remove("started");
    Value::Object(m)
}

/// The start time of process `pid` (field 22 of `/proc/<pid>/stat`, in clock ticks since boot).
fn proc_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from its last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the job's process still runs: the same pid, started at the same time.
fn alive(record: &Map<String, Value>) -> bool {
    let Some(pid) = record.get("fixpoint_pid").and_then(Value::as_u64) else {
        return false;
    };
    let Ok(pid) = u32::try_from(pid) else {
        return false;
    };
    match record.get("fixpoint_pid_start").and_then(Value::as_u64) {
        Some(start) => proc_start(pid) == Some(start),
        None => std::path::Path::new(&format!("/proc/{pid}")).exists(),
    }
}

/// `async_status`: report on (or clean up) a background job.
pub struct AsyncStatus;

/// Parameters of `async_status`, spelled as in Ansible.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(deserialize_with = "de_string")]
    pub jid: String,
    #[serde(default)]
    pub mode: Mode,
}

#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Status,
    Cleanup,
}

/// What `async_status` found: its result, and whether the job reported a change.
pub struct Found {
    result: Map<String, Value>,
    changed: bool,
}

/// `async_status` reports the job's change: its plan holds this one step, which does nothing.
pub enum Report {
    Changed,
}

/// The keys ansible-core's action starts every `async_status` result with.
fn base(jid: &str, path: &Path, mode: &Mode) -> Map<String, Value> {
    let mut m = Map::new();
    let status = *mode == Mode::Status;
    m.insert("started".into(), json!(status));
    m.insert("finished".into(), json!(false));
    m.insert("stdout".into(), json!(""));
    m.insert("stderr".into(), json!(""));
    m.insert("stdout_lines".into(), json!([]));
    m.insert("stderr_lines".into(), json!([]));
    m.insert("ansible_job_id".into(), json!(jid));
    let key = if status { "results_file" } else { "erased" };
    m.insert(key.into(), json!(path.display().to_string()));
    m
}

/// `failed` in a module's result, as Python reads it (a non-empty, non-zero value).
fn truthy(v: Option<&Value>) -> bool {
    v.is_some_and(crate::params::py_truthy)
}

impl Module for AsyncStatus {
    type Params = Params;
    type State = Found;
    type Action = Report;

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Found, ModuleError> {
        let path = job_path(&p.jid)?;
        let mut result = base(&p.jid, &path, &p.mode);
        let not_found = |mut result: Map<String, Value>| {
            result.insert("started".into(), json!(true));
            result.insert("finished".into(), json!(true));
            ModuleError::Failed {
                msg: "could not find job".into(),
                result,
            }
        };
        if p.mode == Mode::Cleanup {
            // The job's own bookkeeping, not the host's state: ansible-core removes it in
            // check mode too, and reports no change.
            return match std::fs::remove_file(&path) {
                Ok(()) => Ok(Found {
                    result,
                    changed: false,
                }),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(not_found(result)),
                Err(e) => Err(ModuleError::failed(format!(
                    "cannot remove {}: {e}",
                    path.display()
                ))),
            };
        }
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(not_found(result)),
            Err(e) => {
                return Err(ModuleError::failed(format!(
                    "cannot read {}: {e}",
                    path.display()
                )))
            }
        };
        let mut data = match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(m)) => m,
            // Not written yet (a job of ansible-core's own wrapper): it runs.
            _ if text.trim().is_empty() => Map::new(),
            _ => {
                result.insert("finished".into(), json!(true));
                return Err(ModuleError::Failed {
                    msg: format!("Could not parse job output: {text}"),
                    result,
                });
            }
        };
        let running = data.is_empty() || data.contains_key("started");
        if running && data.contains_key("fixpoint_pid") && !alive(&data) {
            result.insert("finished".into(), json!(true));
            return Err(ModuleError::Failed {
                msg: format!(
                    "the job ended without a result (its process, pid {}, is gone): what it did \
                     is unknown",
                    data["fixpoint_pid"]
                ),
                result,
            });
        }
        data.remove("fixpoint_pid");
        data.remove("fixpoint_pid_start");
        if running {
            data.insert("finished".into(), json!(false));
        } else {
            data.insert("finished".into(), json!(true));
            data.insert("ansible_job_id".into(), json!(p.jid));
        }
        for (k, v) in data {
            result.insert(k, v);
        }
        // ansible-core's action makes them booleans (its older wrapper wrote 0 and 1).
        for k in ["started", "finished"] {
            let b = truthy(result.get(k));
            result.insert(k.into(), json!(b));
        }
        if truthy(result.get("failed")) {
            let msg = match result.get("msg") {
                Some(Value::String(s)) => s.clone(),
                Some(v) if !v.is_null() => v.to_string(),
                _ => String::new(),
            };
            return Err(ModuleError::Failed { msg, result });
        }
        let changed = truthy(result.get("changed"));
        Ok(Found { result, changed })
    }

    fn plan(p: &Params, found: &Found, _: &Ctx) -> Result<Plan<Report>, ModuleError> {
        let _ = p;
        let mut plan = Plan::new();
        plan.result = found.result.clone();
        if found.changed {
            plan.actions.push(Report::Changed);
        }
        Ok(plan)
    }

    fn apply(_: &Params, _: Found, _: &Plan<Report>) -> Result<Map<String, Value>, ModuleError> {
        Ok(Map::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jid_that_names_a_path_is_refused() {
        for bad in ["", ".", "..", "../x", "a/b"] {
            assert!(job_path(bad).is_err(), "{bad:?}");
        }
        assert!(job_path("j123.456")
            .unwrap()
            .ends_with(".ansible_async/j123.456"));
    }

    #[test]
    fn a_finished_record_keeps_the_module_result_and_says_failed() {
        let ok = finished_record(Ok(crate::Outcome {
            changed: true,
            diff: Default::default(),
            result: Map::from_iter([("rc".to_string(), json!(0))]),
            msg: None,
        }));
        assert_eq!(ok, json!({"rc": 0, "changed": true}));
        let bad = finished_record(Err(ModuleError::failed("boom")));
        assert_eq!(bad["failed"], json!(true));
        assert_eq!(bad["msg"], json!("boom"));
    }

    #[test]
    fn a_start_record_whose_process_is_gone_is_not_alive() {
        let me = std::process::id();
        let rec = started_record("j1", me);
        assert!(alive(rec.as_object().unwrap()));
        let mut other = rec.as_object().unwrap().clone();
        other.insert("fixpoint_pid_start".into(), json!(1));
        assert!(!alive(&other), "the same pid started at another time");
        other.remove("fixpoint_pid");
        assert!(!alive(&other));
    }

    #[test]
    fn truthy_reads_values_as_python_does() {
        assert!(!truthy(Some(&json!(0))));
        assert!(truthy(Some(&json!(1))));
        assert!(!truthy(Some(&json!(""))));
        assert!(truthy(Some(&json!(true))));
        assert!(!truthy(None));
    }
}
