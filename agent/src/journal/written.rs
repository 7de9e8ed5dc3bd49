//! Written-file records: for each path fixpoint changed, what its last change left there
//! (content sha256, mode, owner, group), with the run and the time, for drift attribution and
//! `if_unchanged_since_last_run`.
//!
//! One record per path (the latest change only), named by a hash of the path, in
//! `<state>/written/`: a directory of its own, so that agents of earlier versions, which read
//! every file of `journal/` as a `once:` record, never meet one. A record carries its format's
//! `version`; a record of a later version is left alone (treated as no record). Retention is the
//! `once:` records' (age, at `Begin` and with `fixpoint journal prune`) plus a bound on the count.

use super::{hash_id, now_text, now_unix, read_json, write_json, write_json_settling, StateDir};
use fixpoint_modules::fs::written::{Left, Witness};
use serde::{Deserialize, Serialize};
use std::cell::OnceCell;
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The record format this agent writes and reads.
pub const WRITTEN_VERSION: u32 = 1;

/// At most this many paths are tracked: past it the oldest records go first.
pub const MAX_WRITTEN: usize = 20_000;

fn first_version() -> u32 {
    1
}

/// What fixpoint last left at one path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Written {
    #[serde(default = "first_version")]
    pub version: u32,
    pub path: String,
    /// What the last finished change left; `None` when the only change begun was never
    /// recorded as finished.
    #[serde(default)]
    pub left: Option<Left>,
    pub run_id: String,
    pub at: String,
    pub unix: u64,
    /// The run whose change of this path began and was never recorded as finished (the agent
    /// died during it): what is there now may be that change or not, so nothing is claimed.
    #[serde(default)]
    pub in_doubt: Option<String>,
}

/// The `written/` directory of a state directory.
#[derive(Clone, Debug)]
pub struct WrittenDir {
    dir: PathBuf,
}

impl StateDir {
    pub fn written(&self) -> WrittenDir {
        WrittenDir {
            dir: self.path.join("written"),
        }
    }
}

impl WrittenDir {
    fn file_of(&self, path: &str) -> PathBuf {
        self.dir
            .join(format!("{}.json", hash_id(&["written/v1", path])))
    }

    /// The record of `path`; none for a record this agent cannot read (corrupt, or of a later
    /// version): it is not evidence of anything.
    pub fn read(&self, path: &str) -> Option<Written> {
        read_json::<Written>(&self.file_of(path))
            .ok()
            .flatten()
            .filter(|w| w.version <= WRITTEN_VERSION && w.path == path)
    }

    pub fn write(&self, w: &Written) -> Result<(), String> {
        write_json(&self.file_of(&w.path), w)
    }

    /// Write `w` where losing it in a crash is safe (see `Recorder::left`): its content is
    /// durable before it replaces the record, the replacement itself may be lost.
    fn settle(&self, w: &Written) -> Result<(), String> {
        write_json_settling(&self.file_of(&w.path), w)
    }

    pub fn remove(&self, path: &str) -> Result<(), String> {
        let p = self.file_of(path);
        match fs::remove_file(&p) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(format!("{}: {e}", p.display())),
        }
    }

    /// Every readable record, oldest first.
    pub fn all(&self) -> Result<Vec<Written>, String> {
        let mut out = Vec::new();
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(format!("{}: {e}", self.dir.display())),
        };
        for e in entries {
            let p = e.map_err(|e| e.to_string())?.path();
            if p.extension().and_then(|x| x.to_str()) != Some("json") {
                continue;
            }
            if let Some(w) = read_json::<Written>(&p)
                .ok()
                .flatten()
                .filter(|w| w.version <= WRITTEN_VERSION)
            {
                out.push(w);
            }
        }
        out.sort_by(|a, b| a.unix.cmp(&b.unix).then_with(|| a.path.cmp(&b.path)));
        Ok(out)
    }

    /// Remove records older than `days`, then the oldest beyond `max`. Returns how many went.
    pub fn prune(&self, days: u64, max: usize) -> Result<usize, String> {
        let cutoff = now_unix().saturating_sub(days.saturating_mul(86_400));
        let all = self.all()?;
        let over = all.len().saturating_sub(max);
        let mut n = 0;
        for (i, w) in all.iter().enumerate() {
            if i < over || w.unix < cutoff {
                self.remove(&w.path)?;
                n += 1;
            }
        }
        if n > 0 {
            fixpoint_modules::fs::fsync_dir(&self.dir).map_err(|e| e.to_string())?;
        }
        Ok(n)
    }
}

/// The agent's [`Witness`] for one module run: keeps `written/` up to date with what the run's
/// changes leave. Files under the state directory (the journal itself) are not tracked.
pub struct Recorder {
    dir: WrittenDir,
    /// The state directory as written; its canonical form is resolved on the first change only
    /// (`tracked`): a step that changes nothing, as every step of a converged run, resolves no
    /// path here.
    state_dir: PathBuf,
    state: OnceCell<PathBuf>,
    run_id: String,
    /// The records as they were before a change in progress, to put back if it fails.
    before: HashMap<PathBuf, Option<Written>>,
}

impl Recorder {
    pub fn new(st: &StateDir, run_id: &str) -> Recorder {
        Recorder {
            dir: st.written(),
            state_dir: st.path.clone(),
            state: OnceCell::new(),
            run_id: run_id.to_string(),
            before: HashMap::new(),
        }
    }

    fn tracked(&self, path: &Path) -> bool {
        // The write path names files by their canonical directory.
        let state = self.state.get_or_init(|| {
            fs::canonicalize(&self.state_dir).unwrap_or_else(|_| self.state_dir.clone())
        });
        !path.starts_with(state)
    }

    fn record(&self, path: &Path, left: Option<Left>) -> Written {
        Written {
            version: WRITTEN_VERSION,
            path: path.display().to_string(),
            left,
            run_id: self.run_id.clone(),
            at: now_text(),
            unix: now_unix(),
            in_doubt: None,
        }
    }
}

impl Witness for Recorder {
    fn changing(&mut self, path: &Path) -> Result<(), String> {
        if !self.tracked(path) {
            return Ok(());
        }
        let old = self.dir.read(&path.display().to_string());
        // A record must say "in doubt" durably before the change, or a crash during it would
        // leave the record claiming the old content. A path without a record needs no mark: a
        // crash leaves it without one, which claims nothing either (no drift, and
        // `if_unchanged_since_last_run` proceeds as on the first change of a path).
        if let Some(w) = &old {
            self.dir.write(&Written {
                in_doubt: Some(self.run_id.clone()),
                ..w.clone()
            })?;
        }
        self.before.insert(path.to_path_buf(), old);
        Ok(())
    }

    fn left(&mut self, path: &Path, now: Option<&Left>) -> Result<(), String> {
        if !self.tracked(path) {
            return Ok(());
        }
        self.before.remove(path);
        // The change is durable now (its rename was synced). Losing this record in a crash
        // leaves the in-doubt mark or no record: either claims nothing, so its rename is not
        // synced (a first run writes one such record per changed file).
        match now {
            Some(l) => self.dir.settle(&self.record(path, Some(l.clone()))),
            // Something fixpoint does not compare (a directory, a link) took the file's place.
            None => self.dir.remove(&path.display().to_string()),
        }
    }

    fn unchanged(&mut self, path: &Path) {
        let Some(old) = self.before.remove(path) else {
            return;
        };
        // Best effort: a record left in doubt only makes the next run claim nothing. A path
        // without a record was not marked (`changing`).
        if let Some(w) = old {
            let _ = self.dir.write(&w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(sha: &str) -> Left {
        Left::File {
            sha256: sha.into(),
            mode: 0o644,
            uid: 0,
            gid: 0,
        }
    }

    fn rec(path: &str, unix: u64) -> Written {
        Written {
            version: WRITTEN_VERSION,
            path: path.into(),
            left: Some(file("a")),
            run_id: "r1".into(),
            at: now_text(),
            unix,
            in_doubt: None,
        }
    }

    fn open(d: &tempfile::TempDir) -> StateDir {
        StateDir::open(Some(d.path().join("st").to_str().unwrap())).unwrap()
    }

    #[test]
    fn one_record_per_path_pruned_by_age_and_count() {
        let d = tempfile::tempdir().unwrap();
        let w = open(&d).written();
        let now = now_unix();
        w.write(&rec("/old", now - 10 * 86_400)).unwrap();
        for i in 0..5 {
            w.write(&rec(&format!("/f{i}"), now - 5 + i)).unwrap();
        }
        // The latest change of a path replaces its record.
        let mut again = rec("/f0", now);
        again.run_id = "r2".into();
        w.write(&again).unwrap();
        assert_eq!(w.read("/f0").unwrap().run_id, "r2");
        assert_eq!(w.all().unwrap().len(), 6);
        // Age first (the ten-day-old record), then the count: of the five left, the oldest
        // two go to keep three.
        assert_eq!(w.prune(5, 3).unwrap(), 3);
        let left: Vec<String> = w.all().unwrap().into_iter().map(|r| r.path).collect();
        assert_eq!(left, ["/f3", "/f4", "/f0"]);
        // A retention too long to count keeps everything.
        assert_eq!(w.prune(u64::MAX, MAX_WRITTEN).unwrap(), 0);
    }

    #[test]
    fn records_of_a_later_version_or_corrupt_are_no_evidence() {
        let d = tempfile::tempdir().unwrap();
        let w = open(&d).written();
        let mut later = rec("/later", now_unix());
        later.version = WRITTEN_VERSION + 1;
        w.write(&later).unwrap();
        assert!(w.read("/later").is_none());
        std::fs::write(w.file_of("/bad"), "{not json").unwrap();
        assert!(w.read("/bad").is_none());
        assert!(w.all().unwrap().is_empty());
        // A record of the first format without the fields added since reads as version 1.
        std::fs::write(
            w.file_of("/v1"),
            r#"{"path": "/v1", "run_id": "r0", "at": "t", "unix": 1,
                "left": {"kind": "absent"}}"#,
        )
        .unwrap();
        let v1 = w.read("/v1").unwrap();
        assert_eq!(
            (v1.version, v1.left, v1.in_doubt),
            (1, Some(Left::Absent), None)
        );
    }

    #[test]
    fn the_recorder_marks_a_change_in_doubt_until_it_is_done() {
        let d = tempfile::tempdir().unwrap();
        let st = open(&d);
        let w = st.written();
        w.write(&rec("/etc/app.conf", 1)).unwrap();
        let mut r = Recorder::new(&st, "r2");
        let p = Path::new("/etc/app.conf");
        r.changing(p).unwrap();
        let mid = w.read("/etc/app.conf").unwrap();
        assert_eq!(mid.in_doubt.as_deref(), Some("r2"));
        assert_eq!((mid.run_id.as_str(), mid.left), ("r1", Some(file("a"))));
        r.left(p, Some(&file("b"))).unwrap();
        let done = w.read("/etc/app.conf").unwrap();
        assert_eq!((done.run_id.as_str(), &done.in_doubt), ("r2", &None));
        assert_eq!(done.left, Some(file("b")));
        // A change that failed puts the record back as it was; a first one leaves none.
        r.changing(p).unwrap();
        r.unchanged(p);
        assert_eq!(w.read("/etc/app.conf").unwrap(), done);
        let new = Path::new("/etc/new");
        r.changing(new).unwrap();
        r.unchanged(new);
        assert!(w.read("/etc/new").is_none());
        // The first change of a path is not marked (no record claims nothing already); what it
        // left is recorded, and no temporary file stays behind.
        r.changing(new).unwrap();
        assert!(w.read("/etc/new").is_none());
        r.left(new, Some(&file("n"))).unwrap();
        assert_eq!(w.read("/etc/new").unwrap().left, Some(file("n")));
        let names: Vec<String> = fs::read_dir(st.path.join("written"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names.iter().all(|n| n.ends_with(".json")), "{names:?}");
        assert_eq!(names.len(), 2, "{names:?}");
        // The journal's own files are not tracked.
        let own = st.path.join("outbox/x.json");
        r.changing(&own).unwrap();
        r.left(&own, Some(&file("c"))).unwrap();
        assert!(w.read(&own.display().to_string()).is_none());
    }
}
