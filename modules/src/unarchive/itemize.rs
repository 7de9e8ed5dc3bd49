//! The registered `diff.prepared` of a zip `unarchive`: one rsync-like itemized line per entry
//! that differs from the tree (`>f++++++.?? top/a.txt` for a missing file), in archive order,
//! with the letters Ansible's zip handler gives, and the CRC-32 comparison those need.
//!
//! Ansible registers these lines whenever a zip would be extracted, with or without `--diff`,
//! and nothing for a tar archive (its handler reads `tar --diff`, which it does not itemize).

use super::archive::{Entry, Kind};
use super::extract::Want;
use crate::ModuleError;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Whether the regular file at `path` holds data whose CRC-32 is `crc` (a zip entry's).
pub fn same_crc(path: &Path, crc: u32) -> Result<bool, ModuleError> {
    // O_NOFOLLOW: the caller saw a regular file; a symlink swapped in since is not read.
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| ModuleError::io(path, e))?;
    let mut sum = flate2::Crc::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf).map_err(|e| ModuleError::io(path, e))?;
        if n == 0 {
            return Ok(sum.sum() == crc);
        }
        sum.update(&buf[..n]);
    }
}

/// The itemized line of an entry the plan writes or fixes: what is at its path compared with
/// what it must become. The letters are rsync's, at Ansible's places: `>` missing, `c` another
/// type is there; else `c` (content: the CRC-32, or a symlink's target), `s` size, `t` mtime,
/// `p` permissions, `o`/`g` owner/group (a group difference hides an owner one, as in
/// Ansible).
pub fn line(root: &Path, e: &Entry, want: &Want, keep_newer: bool) -> Result<String, ModuleError> {
    let ftype = match e.kind {
        Kind::Dir => 'd',
        Kind::Symlink(_) => 'L',
        Kind::File | Kind::Hardlink(_) => 'f',
    };
    let path = root.join(&e.path);
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok(format!(">{ftype}++++++.?? {}\n", e.name))
        }
        Err(err) => return Err(ModuleError::io(&path, err)),
    };
    let ft = meta.file_type();
    let same_type = match e.kind {
        Kind::Dir => ft.is_dir(),
        Kind::Symlink(_) => ft.is_symlink(),
        Kind::File | Kind::Hardlink(_) => ft.is_file(),
    };
    if !same_type {
        return Ok(format!("c{ftype}++++++.?? {}\n", e.name));
    }
    let mut item: Vec<char> = format!(".{ftype}.......??").chars().collect();
    if ft.is_file() {
        let newer = if keep_newer {
            e.mtime > meta.mtime()
        } else {
            e.mtime != meta.mtime()
        };
        if newer {
            item[4] = 't';
        }
        if e.size != meta.len() {
            item[3] = 's';
        }
        if let Some(crc) = e.crc {
            if !same_crc(&path, crc)? {
                item[2] = 'c';
            }
        }
    }
    if let Kind::Symlink(t) = &e.kind {
        if std::fs::read_link(&path).is_ok_and(|l| &l != t) {
            item[2] = 'c';
        }
    } else if want.mode.is_some_and(|m| meta.mode() & 0o7777 != m) {
        item[5] = 'p';
    }
    if want.uid.is_some_and(|u| meta.uid() != u) {
        item[6] = 'o';
    }
    if want.gid.is_some_and(|g| meta.gid() != g) {
        item[6] = 'g';
    }
    Ok(format!(
        "{} {}\n",
        item.into_iter().collect::<String>(),
        e.name
    ))
}
