//! What fixpoint leaves at the files it changes, told to a [`Witness`] (the agent's journal keeps
//! it, for drift attribution and `if_unchanged_since_last_run`).
//!
//! The write path calls [`change`] around the one step that changes a file (the rename of an
//! atomic write, a chown or chmod of a pinned file, a touch, an unlink): the witness hears
//! `changing` durably before the step and `left` (the file's state after it) or `unchanged`
//! (the step failed) after. Without a witness (module tests, the controller) nothing is hashed
//! or recorded. The witness is taken out of its slot while it is called, so the journal's own
//! writes are never witnessed.
//!
//! It knows how to observe a file, not where or how records are kept.

use crate::ModuleError;
use serde::{Deserialize, Serialize};
use sha2::Digest as _;
use std::cell::RefCell;
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

/// A file as fixpoint compares it: absent, or a regular file's content and attributes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Left {
    Absent,
    File {
        /// sha256 of the content, lowercase hex.
        sha256: String,
        /// Permission bits (`0o7777` of `st_mode`).
        mode: u32,
        uid: u32,
        gid: u32,
    },
}

/// Open `path` to read without touching its access time: the journal reads each file a task
/// changed, and a read would undo an `access_time` the task just set (relatime updates an atime
/// older than the mtime). `O_NOATIME` needs the file's owner or CAP_FOWNER; without, a plain open.
fn open_noatime(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOATIME)
        .open(path)
    {
        Err(e) if e.raw_os_error() == Some(nix::libc::EPERM) => File::open(path),
        r => r,
    }
}

impl Left {
    /// What is at `path` now, without following a symlink there; `None` for something that is
    /// neither absent nor a regular file (a directory, a link...), which is not tracked.
    pub fn observe(path: &Path) -> Result<Option<Left>, ModuleError> {
        match super::paths::lstat(path)? {
            None => Ok(Some(Left::Absent)),
            Some(m) if m.is_file() => {
                let f = open_noatime(path).map_err(|e| ModuleError::io(path, e))?;
                Left::of_file(&f)
                    .map(Some)
                    .map_err(|e| ModuleError::io(path, e))
            }
            Some(_) => Ok(None),
        }
    }

    /// The content (read from the start, whatever the file's offset) and attributes of an open
    /// regular file.
    pub fn of_file(f: &File) -> std::io::Result<Left> {
        let meta = f.metadata()?;
        let mut h = sha2::Sha256::new();
        let mut buf = vec![0u8; super::chunk_len(meta.len())];
        let mut at = 0u64;
        loop {
            let n = f.read_at(&mut buf, at)?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
            at += n as u64;
        }
        Ok(Left::File {
            sha256: hex::encode(h.finalize()),
            mode: meta.mode() & 0o7777,
            uid: meta.uid(),
            gid: meta.gid(),
        })
    }

    /// The sha256 of the content, or `None` when absent.
    pub fn sha256(&self) -> Option<&str> {
        match self {
            Left::Absent => None,
            Left::File { sha256, .. } => Some(sha256),
        }
    }

    /// What differs between what fixpoint left (`self`) and what is there now: `content`
    /// (also for a file that appeared, went, or became something untracked), `mode`, `owner`,
    /// `group`. Empty: no drift.
    pub fn differences(&self, now: Option<&Left>) -> Vec<&'static str> {
        match (self, now) {
            (Left::Absent, Some(Left::Absent)) => Vec::new(),
            (
                Left::File {
                    sha256,
                    mode,
                    uid,
                    gid,
                },
                Some(Left::File {
                    sha256: s2,
                    mode: m2,
                    uid: u2,
                    gid: g2,
                }),
            ) => [
                (sha256 != s2, "content"),
                (mode != m2, "mode"),
                (uid != u2, "owner"),
                (gid != g2, "group"),
            ]
            .into_iter()
            .filter(|(differs, _)| *differs)
            .map(|(_, what)| what)
            .collect(),
            _ => vec!["content"],
        }
    }
}

/// Who keeps account of what fixpoint changes (the agent's journal).
pub trait Witness {
    /// `path` is about to change: recorded durably before the change, so that a crash during it
    /// leaves the record in doubt rather than wrong.
    fn changing(&mut self, path: &Path) -> Result<(), String>;
    /// The change is done and `path` now is `now` (`None`: something untracked).
    fn left(&mut self, path: &Path, now: Option<&Left>) -> Result<(), String>;
    /// The change failed before it happened: `path` is as it was.
    fn unchanged(&mut self, path: &Path);
}

thread_local! {
    static WITNESS: RefCell<Option<Box<dyn Witness>>> = const { RefCell::new(None) };
}

/// Tell `w` about every change this thread makes through the write path, until the returned
/// guard is dropped.
pub fn watch(w: Box<dyn Witness>) -> Watching {
    WITNESS.with(|s| *s.borrow_mut() = Some(w));
    Watching
}

/// Stops the witnessing [`watch`] started when dropped.
pub struct Watching;

impl Drop for Watching {
    fn drop(&mut self) {
        WITNESS.with(|s| *s.borrow_mut() = None);
    }
}

/// A witness is listening (so the write path should compute what it leaves).
pub(crate) fn active() -> bool {
    WITNESS.with(|s| s.borrow().is_some())
}

/// Run `step`, the one change of the file at `path`, under the witness: `changing` before,
/// then `left` with `known` (what the step leaves, when the caller knows it without looking
/// again) or the state observed after it, or `unchanged` when the step failed.
pub(crate) fn change<T>(
    path: &Path,
    known: Option<Left>,
    step: impl FnOnce() -> Result<T, ModuleError>,
) -> Result<T, ModuleError> {
    let Some(mut w) = WITNESS.with(|s| s.borrow_mut().take()) else {
        return step();
    };
    let result = (|| {
        w.changing(path).map_err(|e| {
            ModuleError::io(
                path,
                format!("cannot record the change in the journal: {e}"),
            )
        })?;
        match step() {
            Ok(v) => {
                // A file the agent may not read back (mode 0000 for a non-root user) is
                // forgotten rather than failing a change that happened.
                let now = match known {
                    Some(k) => Some(k),
                    None => Left::observe(path).unwrap_or(None),
                };
                w.left(path, now.as_ref()).map_err(|e| {
                    ModuleError::io(
                        path,
                        format!("changed, but recording the change in the journal failed: {e}"),
                    )
                })?;
                Ok(v)
            }
            Err(e) => {
                w.unchanged(path);
                Err(e)
            }
        }
    })();
    WITNESS.with(|s| *s.borrow_mut() = Some(w));
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[derive(Default)]
    struct Log(Rc<RefCell<Vec<String>>>);

    impl Witness for Log {
        fn changing(&mut self, path: &Path) -> Result<(), String> {
            self.0
                .borrow_mut()
                .push(format!("changing {}", path.display()));
            Ok(())
        }
        fn left(&mut self, path: &Path, now: Option<&Left>) -> Result<(), String> {
            let what = match now {
                Some(Left::File { sha256, mode, .. }) => format!("{}:{mode:o}", &sha256[..8]),
                Some(Left::Absent) => "absent".into(),
                None => "untracked".into(),
            };
            self.0
                .borrow_mut()
                .push(format!("left {} {what}", path.display()));
            Ok(())
        }
        fn unchanged(&mut self, path: &Path) {
            self.0
                .borrow_mut()
                .push(format!("unchanged {}", path.display()));
        }
    }

    #[test]
    fn the_write_path_tells_the_witness_what_it_left() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(t.path()).unwrap();
        let f = real.join("f");
        let log = Rc::new(RefCell::new(Vec::new()));
        let _w = watch(Box::new(Log(log.clone())));
        crate::fs::atomic_write_path(
            &f,
            b"x",
            &crate::fs::Attrs {
                mode: Some(0o640),
                ..Default::default()
            },
            None,
        )
        .unwrap();
        let loc =
            crate::fs::locate(&f, Some(crate::fs::id_of(&std::fs::metadata(&f).unwrap()))).unwrap();
        crate::fs::set_attrs_at(
            &loc,
            &crate::fs::Attrs {
                mode: Some(0o600),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            std::fs::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let p = f.display();
        assert_eq!(
            *log.borrow(),
            [
                format!("changing {p}"),
                format!("left {p} 2d711642:640"),
                format!("changing {p}"),
                format!("left {p} 2d711642:600"),
            ]
        );
    }

    #[test]
    fn differences_name_what_changed() {
        let a = Left::File {
            sha256: "a".into(),
            mode: 0o644,
            uid: 0,
            gid: 0,
        };
        let b = Left::File {
            sha256: "b".into(),
            mode: 0o600,
            uid: 0,
            gid: 1,
        };
        assert!(a.differences(Some(&a)).is_empty());
        assert_eq!(a.differences(Some(&b)), ["content", "mode", "group"]);
        assert_eq!(a.differences(Some(&Left::Absent)), ["content"]);
        assert_eq!(a.differences(None), ["content"]);
        assert!(Left::Absent.differences(Some(&Left::Absent)).is_empty());
    }
}
