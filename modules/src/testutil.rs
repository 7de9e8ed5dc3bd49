//! Helpers shared by the modules' unit tests: scratch files and "was it rewritten?" checks.

use crate::Ctx;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A file's content as text.
pub fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap()
}

/// Inode and mtime: a converged run must not rewrite the file at all.
pub fn stamp(p: &Path) -> (u64, i64, i64) {
    let m = fs::metadata(p).unwrap();
    (m.ino(), m.mtime(), m.mtime_nsec())
}

/// A scratch directory holding `f.conf` with `content`; keep the directory alive for the test.
pub fn setup(content: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.conf");
    fs::write(&path, content).unwrap();
    (dir, path)
}

/// A real run that also asks for content diffs.
pub const RUN: Ctx = Ctx {
    check: false,
    diff: true,
};

/// Check mode with content diffs: report everything, change nothing.
pub const CHECK: Ctx = Ctx {
    check: true,
    diff: true,
};
