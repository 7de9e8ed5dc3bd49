//! The handler outbox: a notification is stored before the change that triggers it, and removed once the handler ran.

use super::{hash_id, read_json, write_json, StateDir};
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::PathBuf;

/// One pending handler notification.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct OutboxEntry {
    /// The playbook and play that notified, for display: entries are not scoped by them.
    pub playbook: String,
    pub play: String,
    pub handler: String,
    /// The remote user whose handler it is (empty in entries of the first layout).
    #[serde(default)]
    pub user: String,
    /// The inventory host it was notified for: several inventory hosts may be one machine
    /// (aliases, `ansible_connection=local`), and a handler notified for one is not the
    /// others' (empty in entries written before, which any of them delivers).
    #[serde(default)]
    pub host: String,
    pub run_id: String,
    pub task: String,
    pub since: String,
}

impl StateDir {
    /// A pending notification names one logical operation, the handler, for one remote user
    /// and one inventory host on this machine, whichever playbook (or repository) notified it
    /// and whichever delivers it.
    fn outbox_path(&self, host: &str, user: &str, handler: &str) -> PathBuf {
        // "outbox/v2": entries of the first layout hashed the playbook's file name and the play;
        // those of the second have no host, and keep their name.
        let id = match host {
            "" => hash_id(&["outbox/v2", user, handler]),
            _ => hash_id(&["outbox/v3", host, user, handler]),
        };
        self.path.join("outbox").join(format!("{id}.json"))
    }

    /// Record a pending notification durably (before the change that triggers it). Returns
    /// whether it is new: false when the handler was still pending from earlier (the original
    /// "since" is kept).
    pub fn outbox_add(&self, e: &OutboxEntry) -> Result<bool, String> {
        let p = self.outbox_path(&e.host, &e.user, &e.handler);
        if p.exists() {
            return Ok(false);
        }
        write_json(&p, e).map(|()| true)
    }

    /// The handler ran for `host`: its notification is delivered (and one without a host, which
    /// was any host's).
    pub fn outbox_remove(&self, host: &str, user: &str, handler: &str) -> Result<(), String> {
        let mut removed = false;
        for p in [
            self.outbox_path(host, user, handler),
            self.outbox_path("", user, handler),
        ] {
            match fs::remove_file(&p) {
                Ok(()) => removed = true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("{}: {e}", p.display())),
            }
        }
        match removed {
            true => fixpoint_modules::fs::fsync_dir(&self.path.join("outbox"))
                .map_err(|e| e.to_string()),
            false => Ok(()),
        }
    }

    /// Every pending notification of `user` for `host` (the controller delivers those its plays
    /// have handlers for), with those written without a host.
    pub fn outbox_pending(&self, host: &str, user: &str) -> Result<Vec<OutboxEntry>, String> {
        let mut out: Vec<OutboxEntry> = self
            .outbox_files()?
            .into_iter()
            .map(|(_, e)| e)
            .filter(|e| e.user == user && (e.host == host || e.host.is_empty()))
            .collect();
        out.sort_by(|a, b| a.since.cmp(&b.since));
        Ok(out)
    }

    fn outbox_files(&self) -> Result<Vec<(PathBuf, OutboxEntry)>, String> {
        let dir = self.path.join("outbox");
        let mut out = Vec::new();
        for e in fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let p = e.map_err(|e| e.to_string())?.path();
            if p.extension().and_then(|x| x.to_str()) != Some("json") {
                continue;
            }
            if let Some(entry) = read_json::<OutboxEntry>(&p)? {
                out.push((p, entry));
            }
        }
        Ok(out)
    }

    /// File the entries of the first layout (keyed by playbook file name, play and handler)
    /// under their handler; entries without a user are `user`'s (the state directory's owner
    /// wrote them). Two entries for one handler are one pending notification: the older one
    /// (its `since`) is kept. Call it under the host lock. Returns how many entries moved.
    pub fn migrate_outbox(&self, user: &str) -> Result<usize, String> {
        let mut moved = 0;
        for (path, mut entry) in self.outbox_files()? {
            let old_layout = entry.user.is_empty();
            if old_layout {
                entry.user = user.to_string();
            }
            let want = self.outbox_path(&entry.host, &entry.user, &entry.handler);
            if path == want && !old_layout {
                continue;
            }
            match read_json::<OutboxEntry>(&want)? {
                Some(there) if path != want && there.since <= entry.since => {
                    fs::remove_file(&path).map_err(|e| format!("{}: {e}", path.display()))?
                }
                _ => {
                    // Written whole under the new name (with its user) before the old goes.
                    write_json(&want, &entry)?;
                    if path != want {
                        fs::remove_file(&path).map_err(|e| format!("{}: {e}", path.display()))?
                    }
                }
            }
            moved += 1;
        }
        if moved > 0 {
            fixpoint_modules::fs::fsync_dir(&self.path.join("outbox"))
                .map_err(|e| e.to_string())?;
        }
        Ok(moved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(playbook: &str, play: &str, since: &str) -> OutboxEntry {
        OutboxEntry {
            playbook: playbook.into(),
            play: play.into(),
            handler: "h".into(),
            user: "u".into(),
            host: "web1".into(),
            run_id: "r1".into(),
            task: "t".into(),
            since: since.into(),
        }
    }

    #[test]
    fn outbox_keeps_the_first_since_and_removes_idempotently() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(Some(d.path().join("st").to_str().unwrap())).unwrap();
        assert!(s.outbox_add(&entry("p", "play", "first")).unwrap());
        assert!(!s.outbox_add(&entry("p", "play", "second")).unwrap());
        assert_eq!(s.outbox_pending("web1", "u").unwrap()[0].since, "first");
        s.outbox_remove("web1", "u", "h").unwrap();
        s.outbox_remove("web1", "u", "h").unwrap();
        assert!(s.outbox_pending("web1", "u").unwrap().is_empty());
    }

    #[test]
    fn one_handler_notified_from_two_playbooks_is_one_entry_per_user() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(Some(d.path().join("st").to_str().unwrap())).unwrap();
        s.outbox_add(&entry("/repo-a/site.yml", "web", "1"))
            .unwrap();
        s.outbox_add(&entry("/repo-b/deploy.yml", "other", "2"))
            .unwrap();
        s.outbox_add(&OutboxEntry {
            user: "v".into(),
            ..entry("p", "play", "3")
        })
        .unwrap();
        let mine = s.outbox_pending("web1", "u").unwrap();
        assert_eq!(mine.len(), 1);
        assert_eq!(mine[0].playbook, "/repo-a/site.yml");
        // Delivered from any playbook: the notification is gone for this user only.
        s.outbox_remove("web1", "u", "h").unwrap();
        assert!(s.outbox_pending("web1", "u").unwrap().is_empty());
        assert_eq!(s.outbox_pending("web1", "v").unwrap().len(), 1);
    }

    #[test]
    fn inventory_hosts_of_one_machine_have_their_own_entries() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(Some(d.path().join("st").to_str().unwrap())).unwrap();
        s.outbox_add(&entry("p", "play", "1")).unwrap();
        assert!(s.outbox_pending("web2", "u").unwrap().is_empty());
        assert!(s
            .outbox_add(&OutboxEntry {
                host: "web2".into(),
                ..entry("p", "play", "2")
            })
            .unwrap());
        s.outbox_remove("web2", "u", "h").unwrap();
        assert_eq!(s.outbox_pending("web1", "u").unwrap().len(), 1);
        // One written before entries had a host is any host's, delivered once.
        s.outbox_add(&OutboxEntry {
            host: String::new(),
            handler: "old".into(),
            ..entry("p", "play", "0")
        })
        .unwrap();
        assert_eq!(s.outbox_pending("web2", "u").unwrap()[0].handler, "old");
        s.outbox_remove("web2", "u", "old").unwrap();
        assert_eq!(s.outbox_pending("web1", "u").unwrap().len(), 1);
    }

    #[test]
    fn entries_of_the_first_layout_are_filed_under_their_handler() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(Some(d.path().join("st").to_str().unwrap())).unwrap();
        // The first layout: named by playbook file name, play and handler, without a user.
        let old = |playbook: &str, play: &str, since: &str| {
            let e = OutboxEntry {
                user: String::new(),
                host: String::new(),
                ..entry(playbook, play, since)
            };
            let name = format!("{}.json", hash_id(&[playbook, play, "h"]));
            write_json(&s.path.join("outbox").join(name), &e).unwrap();
        };
        old("site.yml", "web", "2020-01-02");
        old("deploy.yml", "db", "2020-01-01");
        assert!(
            s.outbox_pending("", "u").unwrap().is_empty(),
            "not yet filed"
        );
        assert_eq!(s.migrate_outbox("u").unwrap(), 2);
        let pending = s.outbox_pending("", "u").unwrap();
        assert_eq!(pending.len(), 1, "{pending:?}");
        assert_eq!(
            pending[0].since, "2020-01-01",
            "the older notification is kept"
        );
        assert_eq!(pending[0].user, "u");
        assert_eq!(fs::read_dir(s.path.join("outbox")).unwrap().count(), 1);
        assert_eq!(s.migrate_outbox("u").unwrap(), 0, "idempotent");
    }
}
