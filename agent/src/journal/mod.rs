//! The on-host journal: the state directory and the record files that `lock`, `once` and `outbox` keep in it.
//!
//! Everything here runs inside the agent, on the host where the effects happen. Every record is
//! one small JSON file written atomically (temp file, fsync, rename, fsync of the directory), so
//! a crash leaves either the old record or the new one, and an operator can read them with `cat`
//! (a `written/` record that settles a change skips the last fsync: see `written.rs`).
//!
//! ```text
//! <state>/lock             flock(2) target, held by the agent for the whole run
//! <state>/lock.json        who holds it (run id, pid, user, since, playbook)
//! <state>/journal/<id>.json   one `once:` key: request hash, status, times, result
//! <state>/outbox/<id>.json    one pending handler notification
//! <state>/written/<id>.json   what fixpoint last left at one path (drift attribution)
//! ```

mod lock;
mod once;
mod outbox;
mod written;

pub use lock::LockInfo;
pub use once::{request_hash, OnceStatus, Record};
pub use outbox::OutboxEntry;
pub use written::{Recorder, Written, WrittenDir, MAX_WRITTEN, WRITTEN_VERSION};

use fixpoint_modules::fs::{atomic_write_path, Attrs};
use fixpoint_modules::time::format_datetime;
use serde::{Deserialize, Serialize};

use sha2::{Digest, Sha256};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// The agent's state directory, opened and (once `lock` succeeds) locked.
pub struct StateDir {
    pub path: PathBuf,
    /// Unlocks when dropped, and the kernel drops it when the agent dies.
    lock: Option<nix::fcntl::Flock<fs::File>>,
    /// Made for this agent alone (its user has no home to keep state in): removed when dropped.
    throwaway: bool,
}

impl Drop for StateDir {
    fn drop(&mut self) {
        if self.throwaway {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

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
    atomic_write_path(
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

/// [`write_json`] without making the rename durable: the new record's content is synced
/// before the rename, but the directory is not, so a crash leaves the old record (or none) or
/// the whole new one. Only for a record whose loss is safe: one that merely settles what a
/// durable record before it left in doubt (`Recorder::left`).
fn write_json_settling<T: Serialize>(path: &Path, v: &T) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let body = serde_json::to_vec_pretty(v).map_err(|e| e.to_string())?;
    let err = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp.{}", std::process::id()));
    let tmp = path.with_file_name(name);
    let written = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(&body)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    written.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        err(path, e)
    })
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
        let cannot = |path: &Path, e: std::io::Error| {
            format!("cannot create the state directory {}: {e}", path.display())
        };
        let (path, throwaway) = match override_dir {
            Some(d) => {
                let path = PathBuf::from(d);
                create_private(&path).map_err(|e| cannot(&path, e))?;
                (path, false)
            }
            None => {
                let path = default_state_dir();
                match create_private(&path) {
                    Ok(()) => (path, false),
                    // A system account with no home it may write (`nobody`'s is /nonexistent),
                    // become for a task, has nowhere to keep state between runs, as ansible-core
                    // keeps none: its agent keeps its lock and records for this run only.
                    Err(e) if homeless(&e) => (throwaway_dir()?, true),
                    Err(e) => return Err(cannot(&path, e)),
                }
            }
        };
        // Dropped on every return below: a refused throwaway directory is removed too.
        let dir = StateDir {
            path,
            lock: None,
            throwaway,
        };
        let path = &dir.path;
        let meta = fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let me = nix::unistd::geteuid().as_raw();
        if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o022 != 0 {
            return Err(format!(
                "refusing the state directory {}: it must be a directory owned by uid {me} and not group- or world-writable (fix: chown and chmod 700 it, or set fixpoint_state_dir)",
                path.display()
            ));
        }
        for sub in ["journal", "outbox", "written"] {
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
        Ok(dir)
    }
}

/// Create `path` (and its parents) if missing, 0700.
fn create_private(path: &Path) -> std::io::Result<()> {
    if path.exists() {
        return Ok(());
    }
    fs::create_dir_all(path)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o700))
}

/// Whether creating the default state directory failed because the user's home is missing or
/// not theirs to write, rather than for a fault an operator should see.
fn homeless(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{NotFound, PermissionDenied, ReadOnlyFilesystem};
    !nix::unistd::geteuid().is_root()
        && matches!(e.kind(), PermissionDenied | NotFound | ReadOnlyFilesystem)
}

/// A fresh directory of this user's own (0700, unpredictable name) in the temp directory.
fn throwaway_dir() -> Result<PathBuf, String> {
    let template = std::env::temp_dir().join("fixpoint-state-XXXXXX");
    nix::unistd::mkdtemp(&template).map_err(|e| {
        format!(
            "cannot create a state directory in {}: {e}",
            template.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_state_dir_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("st");
        fs::create_dir(&p).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o777)).unwrap();
        let e = StateDir::open(Some(p.to_str().unwrap())).err().unwrap();
        assert!(e.contains("refusing the state directory"), "{e}");
    }
}
