//! The on-host journal: the state directory, the run lock, keyed one-time steps (`once:`) and the handler outbox.
//!
//! Everything here runs inside the agent, on the host where the effects happen. Every record is
//! one small JSON file written atomically (temp file, fsync, rename, fsync of the directory), so
//! a crash leaves either the old record or the new one, and an operator can read them with `cat`.
//!
//! ```text
//! <state>/lock             flock(2) target, held by the agent for the whole run
//! <state>/lock.json        who holds it (run id, pid, user, since, playbook)
//! <state>/journal/<id>.json   one `once:` key: request hash, status, times, result
//! <state>/outbox/<id>.json    one pending handler notification
//! ```

use fixpoint_modules::fs::{atomic_write, Attrs};
use fixpoint_modules::time::format_datetime;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::fs;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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

/// One pending handler notification.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct OutboxEntry {
    pub playbook: String,
    pub play: String,
    pub handler: String,
    pub run_id: String,
    pub task: String,
    pub since: String,
}

/// Who holds the run lock.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LockInfo {
    pub run_id: String,
    pub pid: u32,
    pub user: String,
    pub since: String,
    pub playbook: String,
}

/// The agent's state directory, opened and (once `lock` succeeds) locked.
pub struct StateDir {
    pub path: PathBuf,
    /// Unlocks when dropped, and the kernel drops it when the agent dies.
    lock: Option<nix::fcntl::Flock<fs::File>>,
}

/// Largest stdout/stderr kept in a record: enough to `register` and debug, bounded on disk.
const RESULT_TEXT_CAP: usize = 64 * 1024;

pub fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

pub fn now_text() -> String {
    format_datetime(SystemTime::now()) + " UTC"
}

fn hash_id(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    hex::encode(&h.finalize()[..16])
}

/// The default state directory for the current user, as the issue and README describe.
pub fn default_state_dir() -> PathBuf {
    if nix::unistd::geteuid().is_root() {
        return PathBuf::from("/var/lib/fixpoint");
    }
    if let Some(x) = std::env::var_os("XDG_STATE_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("fixpoint");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::geteuid())
                .ok()
                .flatten()
                .map(|u| u.dir)
        })
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    home.join(".local/state/fixpoint")
}

fn write_json<T: Serialize>(path: &Path, v: &T) -> Result<(), String> {
    let body = serde_json::to_vec_pretty(v).map_err(|e| e.to_string())?;
    atomic_write(
        path,
        &body,
        &Attrs {
            mode: Some(0o600),
            ..Attrs::default()
        },
        None,
    )
    .map_err(|e| e.to_string())
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, String> {
    match fs::read(path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| format!("{}: corrupt record: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

impl StateDir {
    /// Open (creating 0700) the state directory, refusing one that others could tamper with.
    pub fn open(override_dir: Option<&str>) -> Result<StateDir, String> {
        let path = override_dir
            .map(PathBuf::from)
            .unwrap_or_else(default_state_dir);
        if !path.exists() {
            fs::create_dir_all(&path).map_err(|e| {
                format!("cannot create the state directory {}: {e}", path.display())
            })?;
            fs::set_permissions(&path, fs::Permissions::from_mode(0o700))
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        let meta = fs::symlink_metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let me = nix::unistd::geteuid().as_raw();
        if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o022 != 0 {
            return Err(format!(
                "refusing the state directory {}: it must be a directory owned by uid {me} and not group- or world-writable (fix: chown and chmod 700 it, or set fixpoint_state_dir)",
                path.display()
            ));
        }
        for sub in ["journal", "outbox"] {
            let d = path.join(sub);
            if !d.exists() {
                // Another agent of this run (a delegated task) may create it at the same moment.
                match fs::create_dir(&d) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(format!("{}: {e}", d.display())),
                }
                fs::set_permissions(&d, fs::Permissions::from_mode(0o700))
                    .map_err(|e| format!("{}: {e}", d.display()))?;
            }
        }
        Ok(StateDir { path, lock: None })
    }

    /// Take the host lock for this run, waiting up to `timeout`. The lock is an flock held by
    /// this process: it dies with the agent, so a killed run never leaves a stale lock.
    pub fn lock(&mut self, info: &LockInfo, timeout: Duration) -> Result<(), String> {
        use nix::fcntl::{Flock, FlockArg};
        let lock_path = self.path.join("lock");
        let deadline = Instant::now() + timeout;
        // An agent of this same run may have just taken the lock and not yet written
        // lock.json: give it this long to say so before treating the holder as another run.
        let same_run_grace = Instant::now() + Duration::from_secs(1);
        loop {
            let file = fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(0o600)
                .open(&lock_path)
                .map_err(|e| format!("{}: {e}", lock_path.display()))?;
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(locked) => {
                    write_json(&self.path.join("lock.json"), info)?;
                    self.lock = Some(locked);
                    return Ok(());
                }
                Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                    // Another agent of the same run holds it (a task delegated to a host that
                    // is also in the play): they are one run, so this one goes ahead.
                    let holder: Option<LockInfo> =
                        read_json(&self.path.join("lock.json")).ok().flatten();
                    if holder.is_some_and(|h| h.run_id == info.run_id) {
                        return Ok(());
                    }
                }
                Err((_, e)) => return Err(format!("cannot lock {}: {e}", lock_path.display())),
            }
            if Instant::now() >= deadline && Instant::now() >= same_run_grace {
                let holder: Option<LockInfo> =
                    read_json(&self.path.join("lock.json")).ok().flatten();
                return Err(match holder {
                    Some(h) => format!(
                        "locked by run {} (pid {}, user {}, since {}, playbook {})",
                        h.run_id, h.pid, h.user, h.since, h.playbook
                    ),
                    None => "locked by another run".to_string(),
                });
            }
            // Waiting for another run to finish: there is nothing to be notified by, so poll.
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn record_path(&self, user: &str, playbook: &str, key: &str) -> PathBuf {
        self.path
            .join("journal")
            .join(format!("{}.json", hash_id(&[user, playbook, key])))
    }

    pub fn read_record(
        &self,
        user: &str,
        playbook: &str,
        key: &str,
    ) -> Result<Option<Record>, String> {
        read_json(&self.record_path(user, playbook, key))
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
        write_json(&self.record_path(&rec.user, &rec.playbook, &rec.key), &rec)
    }

    pub fn remove_record(&self, rec: &Record) -> Result<(), String> {
        let p = self.record_path(&rec.user, &rec.playbook, &rec.key);
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
        let cutoff = now_unix().saturating_sub(days * 86_400);
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

    fn outbox_path(&self, playbook: &str, play: &str, handler: &str) -> PathBuf {
        self.path
            .join("outbox")
            .join(format!("{}.json", hash_id(&[playbook, play, handler])))
    }

    /// Record a pending notification durably (before the change that triggers it).
    pub fn outbox_add(&self, e: &OutboxEntry) -> Result<(), String> {
        let p = self.outbox_path(&e.playbook, &e.play, &e.handler);
        if p.exists() {
            // Still pending from earlier: keep the original "since".
            return Ok(());
        }
        write_json(&p, e)
    }

    /// The handler ran: its notification is delivered.
    pub fn outbox_remove(&self, playbook: &str, play: &str, handler: &str) -> Result<(), String> {
        let p = self.outbox_path(playbook, play, handler);
        match fs::remove_file(&p) {
            Ok(()) => fixpoint_modules::fs::fsync_dir(&self.path.join("outbox"))
                .map_err(|e| e.to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(format!("{}: {e}", p.display())),
        }
    }

    /// Every pending notification (the controller picks those of its playbooks and plays).
    pub fn outbox_pending(&self) -> Result<Vec<OutboxEntry>, String> {
        let dir = self.path.join("outbox");
        let mut out = Vec::new();
        for e in fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let p = e.map_err(|e| e.to_string())?.path();
            if p.extension().and_then(|x| x.to_str()) != Some("json") {
                continue;
            }
            if let Some(entry) = read_json::<OutboxEntry>(&p)? {
                out.push(entry);
            }
        }
        out.sort_by(|a, b| a.since.cmp(&b.since));
        Ok(out)
    }
}

/// sha256 of a rendered request: the module and its parameters in canonical (sorted) JSON.
pub fn request_hash(module: &str, params: &Value) -> String {
    let canonical = serde_json::json!({"module": module, "params": params});
    hex::encode(Sha256::digest(canonical.to_string().as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(key: &str, status: OnceStatus) -> Record {
        Record {
            key: key.into(),
            user: "u".into(),
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
            s.read_record("u", "site.yml", "k1")
                .unwrap()
                .unwrap()
                .status,
            OnceStatus::Started
        );
        r.status = OnceStatus::Done;
        r.started_unix -= 10 * 86_400;
        r.finished_unix = Some(r.started_unix);
        s.write_record(&r).unwrap();
        s.write_record(&rec("k2", OnceStatus::Done)).unwrap();
        assert_eq!(s.prune(5).unwrap(), 1);
        assert!(s.read_record("u", "site.yml", "k1").unwrap().is_none());
        assert!(s.read_record("u", "site.yml", "k2").unwrap().is_some());
    }

    #[test]
    fn unsafe_state_dir_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("st");
        fs::create_dir(&p).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o777)).unwrap();
        let e = StateDir::open(Some(p.to_str().unwrap())).err().unwrap();
        assert!(e.contains("refusing the state directory"), "{e}");
    }

    #[test]
    fn outbox_keeps_the_first_since_and_removes_idempotently() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(Some(d.path().join("st").to_str().unwrap())).unwrap();
        let e = OutboxEntry {
            playbook: "p".into(),
            play: "play".into(),
            handler: "h".into(),
            run_id: "r1".into(),
            task: "t".into(),
            since: "first".into(),
        };
        s.outbox_add(&e).unwrap();
        s.outbox_add(&OutboxEntry {
            since: "second".into(),
            ..e.clone()
        })
        .unwrap();
        assert_eq!(s.outbox_pending().unwrap()[0].since, "first");
        s.outbox_remove("p", "play", "h").unwrap();
        s.outbox_remove("p", "play", "h").unwrap();
        assert!(s.outbox_pending().unwrap().is_empty());
    }

    #[test]
    fn second_lock_reports_the_holder() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("st");
        let info = LockInfo {
            run_id: "run-1".into(),
            pid: 42,
            user: "u".into(),
            since: "now".into(),
            playbook: "site.yml".into(),
        };
        let mut a = StateDir::open(Some(dir.to_str().unwrap())).unwrap();
        a.lock(&info, Duration::ZERO).unwrap();
        let other = LockInfo {
            run_id: "run-2".into(),
            ..info.clone()
        };
        let mut b = StateDir::open(Some(dir.to_str().unwrap())).unwrap();
        let e = b.lock(&other, Duration::ZERO).err().unwrap();
        assert!(e.contains("locked by run run-1 (pid 42"), "{e}");
        // Another agent of the same run (a delegated task) goes ahead.
        let mut c = StateDir::open(Some(dir.to_str().unwrap())).unwrap();
        c.lock(&info, Duration::ZERO).unwrap();
        drop(a);
        b.lock(&other, Duration::ZERO).unwrap();
    }
}
