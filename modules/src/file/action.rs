//! The `file` module's actions, and performing one on the object the probe found.

use super::link::place_link;
use super::TimeWant;
use crate::fs::{mkdir_at, recheck_guard, with_entry, written, Dir, Loc};
use crate::ModuleError;
use nix::sys::time::TimeSpec;
use std::path::PathBuf;

/// What an existing symlink or hard link is compared against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replace {
    /// Nothing is at `path`: create the link there.
    Nothing,
    /// A file or link is at `path`: create the new link beside it and rename it over.
    Entry,
    /// An empty directory is at `path` (`force: true`): remove it, then link.
    EmptyDir,
}

/// One step of a `file` plan.
///
/// Every action carries `at`, where its object was found by the probe (see `fs::Loc`): apply
/// reaches it through directory descriptors without following links, and refuses an object that
/// is no longer the one probed, so a file swapped for a symlink is never followed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Create one directory; its parents come earlier in the plan.
    Mkdir {
        path: PathBuf,
        at: Loc,
    },
    /// Create an empty regular file (`touch` on a missing path).
    CreateFile {
        path: PathBuf,
        at: Loc,
    },
    Symlink {
        path: PathBuf,
        src: PathBuf,
        replace: Replace,
        at: Loc,
    },
    HardLink {
        path: PathBuf,
        src: PathBuf,
        replace: Replace,
        at: Loc,
    },
    /// Unlink a file or symlink.
    Remove {
        path: PathBuf,
        at: Loc,
    },
    /// Remove a directory and everything below it (symlinks inside are removed, not followed).
    RemoveTree {
        path: PathBuf,
        at: Loc,
    },
    Chown {
        path: PathBuf,
        uid: Option<u32>,
        gid: Option<u32>,
        /// Change the symlink itself (lchown).
        nofollow: bool,
        at: Loc,
    },
    Chmod {
        path: PathBuf,
        mode: u32,
        at: Loc,
    },
    SetTimes {
        path: PathBuf,
        atime: TimeWant,
        mtime: TimeWant,
        nofollow: bool,
        at: Loc,
    },
}

impl Action {
    /// Where the action's object is (every action has one).
    pub(super) fn at_mut(&mut self) -> &mut Loc {
        match self {
            Action::Mkdir { at, .. }
            | Action::CreateFile { at, .. }
            | Action::Symlink { at, .. }
            | Action::HardLink { at, .. }
            | Action::Remove { at, .. }
            | Action::RemoveTree { at, .. }
            | Action::Chown { at, .. }
            | Action::Chmod { at, .. }
            | Action::SetTimes { at, .. } => at,
        }
    }
}

/// Perform one planned action, on the object the probe found (see [`Action`]).
pub(super) fn perform(action: &Action) -> Result<(), ModuleError> {
    match action {
        Action::Mkdir { at, .. } => mkdir_at(at, 0o777),
        Action::CreateFile { at, .. } => {
            let dir = Dir::open(&at.dir)?;
            recheck_guard(&dir, at)?;
            written::change(&dir.at(&at.name), None, || dir.create_file(&at.name))
        }
        Action::Symlink {
            src, replace, at, ..
        } => place_link(at, *replace, |d, name| d.symlink(src, name)),
        Action::HardLink {
            src, replace, at, ..
        } => place_link(at, *replace, |d, name| d.hard_link(src, name)),
        // Unlinked by name in the directory the probe saw: never what a link there points to.
        // With `if_checksum`, the content is looked at once more just before (`fs::cas`).
        Action::Remove { at, .. } => {
            let dir = Dir::open(&at.dir)?;
            recheck_guard(&dir, at)?;
            written::change(&dir.at(&at.name), Some(written::Left::Absent), || {
                dir.unlink(&at.name)
            })
        }
        Action::RemoveTree { at, .. } => {
            let dir = Dir::open(&at.dir)?;
            recheck_guard(&dir, at)?;
            dir.remove_tree(&at.name)
        }
        Action::Chown {
            uid,
            gid,
            nofollow,
            at,
            ..
        } => with_entry(at, *nofollow, |h| h.chown(*uid, *gid)),
        Action::Chmod { mode, at, .. } => with_entry(at, false, |h| h.chmod(*mode)),
        Action::SetTimes {
            atime,
            mtime,
            nofollow,
            at,
            ..
        } => {
            let spec = |t: &TimeWant| match t {
                TimeWant::Preserve => TimeSpec::UTIME_OMIT,
                TimeWant::Now => TimeSpec::UTIME_NOW,
                TimeWant::At(s) => TimeSpec::new(*s, 0),
            };
            with_entry(at, *nofollow, |h| h.set_times(&spec(atime), &spec(mtime)))
        }
    }
}
