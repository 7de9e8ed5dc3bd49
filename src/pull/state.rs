//! What a pull keeps on the host between runs (under `<state dir>/pull/`): the record of the
//! last successful run, which `--only-if-changed` compares with, and the lock that keeps two
//! pulls of one checkout from fetching into it at once.

use serde::{Deserialize, Serialize};
use sha2::Digest as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The last run that succeeded: what it ran and when it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastSuccess {
    /// `fingerprint` of the commit and the inputs.
    pub fingerprint: String,
    pub commit: String,
    /// Unix seconds.
    pub finished: u64,
}

/// The sha256 of everything that decides what a run does besides the host itself: the commit,
/// the playbook arguments and extra variables, and this fixpoint's version.
pub fn fingerprint(commit: &str, inputs: &serde_json::Value) -> String {
    let doc = serde_json::json!({
        "commit": commit,
        "inputs": inputs,
        "fixpoint": env!("CARGO_PKG_VERSION"),
    });
    hex::encode(sha2::Sha256::digest(doc.to_string().as_bytes()))
}

/// Where one pull setup (a repository into a checkout) keeps its record and lock: two setups on
/// one host do not see each other's.
pub fn paths(state_dir: &Path, url: &str, checkout: &Path) -> (PathBuf, PathBuf) {
    let key = sha2::Sha256::digest(format!("{url}\0{}", checkout.display()).as_bytes());
    let key = hex::encode(&key[..8]);
    let dir = state_dir.join("pull");
    (
        dir.join(format!("last-success-{key}.json")),
        dir.join(format!("{key}.lock")),
    )
}

pub fn read(path: &Path) -> Option<LastSuccess> {
    let text = std::fs::read(path).ok()?;
    serde_json::from_slice(&text).ok()
}

/// Whether the last success makes this run unnecessary: same fingerprint, and not older than
/// `max_age` (when given).
pub fn unchanged(
    last: Option<&LastSuccess>,
    fingerprint: &str,
    max_age: Option<Duration>,
    now: u64,
) -> bool {
    let Some(last) = last else { return false };
    if last.fingerprint != fingerprint {
        return false;
    }
    match max_age {
        None => true,
        Some(age) => now.saturating_sub(last.finished) < age.as_secs(),
    }
}

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Write `bytes` to `path` atomically: a temp file beside it, synced, renamed over it, and the
/// directory synced, so a reader sees the old file or the new one, never a part.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let fail = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    std::fs::create_dir_all(&parent).map_err(fail)?;
    let mut tmp = tempfile::NamedTempFile::new_in(&parent).map_err(fail)?;
    tmp.write_all(bytes).map_err(fail)?;
    tmp.as_file().sync_all().map_err(fail)?;
    tmp.persist(path).map_err(|e| fail(e.error))?;
    if let Ok(d) = std::fs::File::open(&parent) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// The pull lock, held while this pull fetches and runs (an flock: it dies with the process).
pub struct PullLock {
    _lock: nix::fcntl::Flock<std::fs::File>,
}

/// Take the pull lock at `path`, waiting up to `timeout` for another pull of the same setup.
pub fn lock(path: &Path, timeout: Duration) -> Result<PullLock, String> {
    use nix::fcntl::{Flock, FlockArg};
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    let deadline = std::time::Instant::now().checked_add(timeout);
    loop {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(l) => return Ok(PullLock { _lock: l }),
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => {}
            Err((_, e)) => return Err(format!("cannot lock {}: {e}", path.display())),
        }
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            return Err(format!(
                "another pull of this repository into this checkout is running (lock {}); \
                 wait for it, or give --lock-timeout",
                path.display()
            ));
        }
        // Nothing notifies the release of an flock taken by another process: poll it.
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_equal_fingerprint_young_enough_is_unchanged() {
        let last = LastSuccess {
            fingerprint: "f".into(),
            commit: "c".into(),
            finished: 1000,
        };
        assert!(!unchanged(None, "f", None, 1000));
        assert!(unchanged(Some(&last), "f", None, 99_999));
        assert!(!unchanged(Some(&last), "g", None, 1000));
        let hour = Some(Duration::from_secs(3600));
        assert!(unchanged(Some(&last), "f", hour, 1000 + 3599));
        assert!(!unchanged(Some(&last), "f", hour, 1000 + 3600));
    }

    #[test]
    fn the_fingerprint_follows_commit_and_inputs() {
        let a = fingerprint("c1", &serde_json::json!({"e": ["x=1"]}));
        assert_eq!(a, fingerprint("c1", &serde_json::json!({"e": ["x=1"]})));
        assert_ne!(a, fingerprint("c2", &serde_json::json!({"e": ["x=1"]})));
        assert_ne!(a, fingerprint("c1", &serde_json::json!({"e": ["x=2"]})));
    }

    #[test]
    fn a_second_pull_lock_fails_after_its_bound() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pull/x.lock");
        let held = lock(&p, Duration::ZERO).unwrap();
        let err = lock(&p, Duration::ZERO).err().unwrap();
        assert!(err.contains("another pull"), "{err}");
        drop(held);
        lock(&p, Duration::ZERO).unwrap();
    }
}
