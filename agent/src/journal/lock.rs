//! The host lock: one run at a time per state directory, an flock that dies with the agent.

use super::{read_json, write_json, StateDir};
use serde::{Deserialize, Serialize};
use std::fs;
use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant};

/// Who holds the run lock.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LockInfo {
    pub run_id: String,
    pub pid: u32,
    pub user: String,
    pub since: String,
    pub playbook: String,
}

impl StateDir {
    /// Take the host lock for this run, waiting up to `timeout`. The lock is an flock held by
    /// this process: it dies with the agent, so a killed run never leaves a stale lock.
    pub fn lock(&mut self, info: &LockInfo, timeout: Duration) -> Result<(), String> {
        self.lock_telling(info, timeout, &mut |_| {})
    }

    /// `lock`, telling `waiting` who holds the lock when it has to wait for another run (once
    /// per holder), so that the person watching the run knows what it waits for.
    pub fn lock_telling(
        &mut self,
        info: &LockInfo,
        timeout: Duration,
        waiting: &mut dyn FnMut(&LockInfo),
    ) -> Result<(), String> {
        let mut told: Option<String> = None;
        use nix::fcntl::{Flock, FlockArg};
        let lock_path = self.path.join("lock");
        // `--lock-timeout` is any number of seconds: one too far to count means no deadline.
        let deadline = Instant::now().checked_add(timeout);
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
                    match holder {
                        Some(h) if h.run_id == info.run_id => return Ok(()),
                        // Said once the grace for an agent of this run is over.
                        Some(h)
                            if Instant::now() >= same_run_grace
                                && told.as_deref() != Some(h.run_id.as_str()) =>
                        {
                            waiting(&h);
                            told = Some(h.run_id);
                        }
                        _ => {}
                    }
                }
                Err((_, e)) => return Err(format!("cannot lock {}: {e}", lock_path.display())),
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) && now >= same_run_grace {
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // A run that waits is told who it waits for, once.
        let mut heard = Vec::new();
        let e = b
            .lock_telling(&other, Duration::from_millis(1500), &mut |h| {
                heard.push(h.run_id.clone())
            })
            .err()
            .unwrap();
        assert!(e.contains("locked by run run-1"), "{e}");
        assert_eq!(heard, ["run-1"]);
        drop(a);
        b.lock(&other, Duration::ZERO).unwrap();
    }

    #[test]
    fn a_wait_too_long_to_count_takes_a_free_lock() {
        let d = tempfile::tempdir().unwrap();
        let info = LockInfo {
            run_id: "run-1".into(),
            pid: 42,
            user: "u".into(),
            since: "now".into(),
            playbook: "site.yml".into(),
        };
        let mut a = StateDir::open(Some(d.path().join("st").to_str().unwrap())).unwrap();
        a.lock(&info, Duration::from_secs(u64::MAX)).unwrap();
    }
}
