//! Content uploaded by the controller for one `copy`, staged in a temp file before it is installed.
//!
//! A `copy` of a controller file sends only the file's sha256 and size. When the host's file
//! differs, the module answers "need content" (`ModuleError::NeedContent`); the agent then
//! `begin`s a stage: a temp file created exclusively (0600, unpredictable name) in the
//! destination's directory, or its nearest existing ancestor when `dest/` directories are still
//! to be created. The controller streams the bytes in chunks (`write_chunk`), which are hashed as
//! they are written; the stage is complete only when the size and the sha256 match what was
//! announced. The controller then repeats the `copy`, whose apply `take`s the complete stage and
//! renames it into place (`atomic::install_staged`), so the destination only ever holds the old
//! content or the whole verified new one.
//!
//! One request's stages exist at a time (the agent serves one request at a time): a `copy` of a
//! directory tree begins one stage per distinct content it lacks (`begin_many`), and the
//! controller sends them all before repeating the request once. Stages that are not taken are
//! removed by the next `begin` or by `discard` when the agent's session ends; an agent killed
//! mid-upload leaves its temp files behind, as an interrupted atomic write does.

use super::dirfd::Dir;
use crate::ModuleError;
use sha2::Digest as _;
use std::ffi::OsString;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// A temp file receiving (or holding) uploaded content.
pub struct Staged {
    pub dir: Dir,
    pub name: OsString,
    pub file: File,
    pub sha256: String,
    pub size: u64,
    written: u64,
    hasher: sha2::Sha256,
    complete: bool,
}

static STAGE: Mutex<Vec<Staged>> = Mutex::new(Vec::new());

/// The stages are values added and removed whole: a poisoned lock is used as is.
fn stage() -> MutexGuard<'static, Vec<Staged>> {
    STAGE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Remove a stage's temp file.
fn unlink(s: Staged) {
    let _ = s.dir.unlink(&s.name);
}

/// The deepest directory of `dir` that exists (a `dest/` whose directories the copy creates).
fn existing_ancestor(dir: &Path) -> PathBuf {
    let mut cur = dir;
    loop {
        if cur.is_dir() {
            return cur.to_path_buf();
        }
        match cur.parent() {
            Some(p) => cur = p,
            None => return PathBuf::from("/"),
        }
    }
}

/// Start receiving content with this sha256 and size, for a file that goes into `dir` (any
/// earlier stage is removed).
pub fn begin(dir: &Path, sha256: &str, size: u64) -> Result<(), ModuleError> {
    begin_many(&[(dir.to_path_buf(), sha256.to_string(), size)])
}

/// Start receiving several contents (sha256, size), each for a file that goes into its `dir`;
/// any earlier stage is removed. A content named twice is staged once.
pub fn begin_many(wanted: &[(PathBuf, String, u64)]) -> Result<(), ModuleError> {
    let mut g = stage();
    for old in g.drain(..) {
        unlink(old);
    }
    for (dir, sha256, size) in wanted {
        if g.iter().any(|s| s.sha256 == *sha256) {
            continue;
        }
        if *size == 0 && hex::encode(sha2::Sha256::digest(b"")) != *sha256 {
            // Nothing will arrive: the empty file is the content only if it is the one announced.
            for s in g.drain(..) {
                unlink(s);
            }
            return Err(ModuleError::failed(
                "the announced content is empty but its sha256 is not that of empty content",
            ));
        }
        let started = Dir::open(&existing_ancestor(dir))
            .and_then(|d| d.create_temp(".fixpoint.", ".upload").map(|t| (d, t)));
        let (dir, (file, name)) = match started {
            Ok(x) => x,
            Err(e) => {
                for s in g.drain(..) {
                    unlink(s);
                }
                return Err(e);
            }
        };
        g.push(Staged {
            dir,
            name,
            file,
            sha256: sha256.clone(),
            size: *size,
            written: 0,
            hasher: sha2::Sha256::new(),
            complete: *size == 0,
        });
    }
    Ok(())
}

/// Write the chunk at `offset` of the content `sha256`. Chunks arrive in order; after the last
/// one the size and hash are checked, and a mismatch discards the stage.
pub fn write_chunk(sha256: &str, offset: u64, data: &[u8]) -> Result<(), ModuleError> {
    let mut g = stage();
    let Some(i) = g.iter().position(|s| s.sha256 == sha256 && !s.complete) else {
        return Err(ModuleError::failed(format!(
            "no upload of content {sha256} is in progress on this host"
        )));
    };
    let s = &mut g[i];
    let fits = s
        .written
        .checked_add(data.len() as u64)
        .is_some_and(|end| end <= s.size);
    if offset != s.written || !fits {
        let msg = format!(
            "upload out of step: a chunk of {} bytes at offset {offset}, while {} of {} bytes were written",
            data.len(),
            s.written,
            s.size
        );
        let s = g.swap_remove(i);
        unlink(s);
        return Err(ModuleError::failed(msg));
    }
    let path = s.dir.at(&s.name);
    // Runs of zeros are skipped rather than written: the file stays as sparse as its source.
    let res = if data.iter().all(|b| *b == 0) {
        s.file
            .seek(SeekFrom::Current(data.len() as i64))
            .map(|_| ())
    } else {
        s.file.write_all(data)
    };
    if let Err(e) = res {
        let s = g.swap_remove(i);
        unlink(s);
        return Err(ModuleError::io(path, e));
    }
    s.hasher.update(data);
    s.written += data.len() as u64;
    if s.written == s.size {
        let got = hex::encode(std::mem::take(&mut s.hasher).finalize());
        let len = s.file.set_len(s.size);
        if got != s.sha256 || len.is_err() {
            let msg = match len {
                Err(e) => format!("{}: {e}", path.display()),
                Ok(()) => format!(
                    "the uploaded content has sha256 {got}, not the {} announced (the file changed on the controller while it was sent?); nothing was written",
                    s.sha256
                ),
            };
            let s = g.swap_remove(i);
            unlink(s);
            return Err(ModuleError::failed(msg));
        }
        s.complete = true;
    }
    Ok(())
}

/// Whether complete content `sha256` is staged.
pub fn ready(sha256: &str) -> bool {
    stage().iter().any(|s| s.complete && s.sha256 == sha256)
}

/// Take the complete stage of content `sha256` (its temp file now belongs to the caller).
pub fn take(sha256: &str) -> Option<Staged> {
    let mut g = stage();
    let i = g.iter().position(|s| s.complete && s.sha256 == sha256)?;
    Some(g.swap_remove(i))
}

/// Remove whatever is staged (the session ends, or a stage was not used).
pub fn discard() {
    for s in stage().drain(..) {
        unlink(s);
    }
}
