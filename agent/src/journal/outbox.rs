//! The handler outbox: a notification is stored before the change that triggers it, and removed once the handler ran.

use super::{hash_id, read_json, write_json, StateDir};
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::PathBuf;

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

impl StateDir {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
