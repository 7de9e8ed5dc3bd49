//! The directory a step's own path resolved to just before its module ran, kept for the module.
//!
//! The agent resolves the path of a file-writing task before the module runs (to find its
//! journal record: `drift`), and the module resolves the same path again when it locates the
//! file; each resolution reads every link on the way (`realpath`: one `readlink` per component).
//! The agent's answer is kept here for the module's first `locate`, whatever path it names, and
//! used only when that is the same path. Nothing changes the filesystem in between: the agent
//! only reads its journal, and a module changes nothing before it has located it (every change
//! goes through a [`Loc`](super::Loc)), so it is the answer the module would get. Any later
//! `locate` resolves again, since the module may have changed what the path crosses; and the
//! agent drops what was not taken when the step is done, so nothing outlives the step.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

thread_local! {
    /// The path as the agent named it, and the canonical directory `locate` found for it.
    static KEPT: RefCell<Option<(PathBuf, PathBuf)>> = const { RefCell::new(None) };
}

/// Keep `dir`, what `path`'s directory resolved to, for the module's first `locate` of `path`.
pub(crate) fn keep(path: &Path, dir: &Path) {
    KEPT.with(|k| *k.borrow_mut() = Some((path.to_path_buf(), dir.to_path_buf())));
}

/// The directory kept for `path`; `None` when none is kept for exactly this path. Whatever was
/// kept is gone after the first call.
pub(crate) fn take(path: &Path) -> Option<PathBuf> {
    KEPT.with(|k| match k.borrow_mut().take() {
        Some((p, dir)) if p == path => Some(dir),
        _ => None,
    })
}

/// Drop what was kept and not taken (the agent calls it when a step is done).
pub fn forget() {
    KEPT.with(|k| *k.borrow_mut() = None);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taken_by_the_first_locate_only_for_its_path() {
        keep(Path::new("/a/b"), Path::new("/real/a"));
        assert_eq!(take(Path::new("/a/b")), Some(PathBuf::from("/real/a")));
        assert_eq!(take(Path::new("/a/b")), None);
        // The first `locate` of another path drops it: the module may change things after it.
        keep(Path::new("/a/b"), Path::new("/real/a"));
        assert_eq!(take(Path::new("/a/c")), None);
        assert_eq!(take(Path::new("/a/b")), None);
        keep(Path::new("/a/b"), Path::new("/real/a"));
        forget();
        assert_eq!(take(Path::new("/a/b")), None);
    }
}
