//! Comparing archive entries with the tree under `dest`, and writing the ones that differ
//! without ever following a symlink below `dest` (each directory is opened with `O_NOFOLLOW`
//! from the one above it, see `fs::dirfd`).

use super::archive::{self, Entry, Kind};
use super::{name_or_id, owned, Probed};
use crate::fs::Dir;
use crate::ModuleError;
use nix::sys::time::TimeSpec;
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// What an entry must end with besides its content; `None`: left as it comes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Want {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub mode: Option<u32>,
}

/// How an entry compares with the tree.
#[derive(Debug, PartialEq, Eq)]
pub enum Diff {
    Same,
    /// Only owner, group or mode differ.
    Attrs,
    /// Missing, another type, size, mtime, CRC-32 (zip) or link target: the entry is written.
    Content,
}

pub fn owner_uid(e: &Entry) -> u32 {
    name_or_id(e.uname.as_deref(), e.uid, |n| {
        nix::unistd::User::from_name(n)
            .ok()
            .flatten()
            .map(|u| u.uid.as_raw())
    })
}

pub fn owner_gid(e: &Entry) -> u32 {
    name_or_id(e.gname.as_deref(), e.gid, |n| {
        nix::unistd::Group::from_name(n)
            .ok()
            .flatten()
            .map(|g| g.gid.as_raw())
    })
}

/// Refuse the archive when a selected entry (or a hard link's target) would be reached through
/// a symlink: one the archive makes, or one already under `dest`.
pub fn check_paths(st: &Probed) -> Result<(), ModuleError> {
    let links: HashSet<&Path> = st
        .entries
        .iter()
        .filter(|e| matches!(e.kind, Kind::Symlink(_)))
        .map(|e| e.path.as_path())
        .collect();
    let through_link = |p: &Path| -> Option<PathBuf> {
        let mut cur = PathBuf::new();
        let comps: Vec<Component> = p.components().collect();
        for c in comps.iter().take(comps.len().saturating_sub(1)) {
            cur.push(c);
            if links.contains(cur.as_path())
                || std::fs::symlink_metadata(st.root.join(&cur))
                    .is_ok_and(|m| m.file_type().is_symlink())
            {
                return Some(cur.clone());
            }
        }
        None
    };
    for &i in &st.selected {
        let e = &st.entries[i];
        let mut paths = vec![&e.path];
        if let Kind::Hardlink(t) = &e.kind {
            paths.push(t);
        }
        for p in paths {
            if let Some(l) = through_link(p) {
                return Err(archive::refused(
                    &st.archive,
                    &format!(
                        "entry `{}` goes through the symlink `{}`",
                        e.name,
                        l.display()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Compare one entry with what is at its path.
pub fn compare(
    root: &Path,
    e: &Entry,
    want: &Want,
    keep_newer: bool,
    all: &[Entry],
) -> Result<Diff, ModuleError> {
    let path = root.join(&e.path);
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Diff::Content),
        Err(err) => return Err(ModuleError::io(&path, err)),
    };
    let ft = meta.file_type();
    let attrs_ok =
        |m: &std::fs::Metadata| owned(m, want) && want.mode.is_none_or(|w| m.mode() & 0o7777 == w);
    let same = match &e.kind {
        Kind::Dir => {
            if !ft.is_dir() {
                return Ok(Diff::Content);
            }
            true
        }
        Kind::File => {
            if !ft.is_file() {
                return Ok(Diff::Content);
            }
            if keep_newer && meta.mtime() > e.mtime {
                return Ok(Diff::Same);
            }
            // A zip's entries carry their CRC-32, which Ansible compares too: same size and
            // mtime with other data is a change.
            meta.len() == e.size
                && meta.mtime() == e.mtime
                && match e.crc {
                    Some(crc) => super::itemize::same_crc(&path, crc)?,
                    None => true,
                }
        }
        Kind::Symlink(t) => {
            let ok = ft.is_symlink() && std::fs::read_link(&path).is_ok_and(|l| &l == t);
            // A link has no mode of its own; its owner is not compared either.
            return Ok(if ok { Diff::Same } else { Diff::Content });
        }
        Kind::Hardlink(t) => {
            let target = std::fs::symlink_metadata(root.join(t)).ok();
            let linked = target.is_some_and(|m| m.ino() == meta.ino() && m.dev() == meta.dev());
            // The target entry carries the attributes.
            let _ = all;
            return Ok(if linked { Diff::Same } else { Diff::Content });
        }
    };
    Ok(match (same, attrs_ok(&meta)) {
        (false, _) => Diff::Content,
        (true, true) => Diff::Same,
        (true, false) => Diff::Attrs,
    })
}

/// Open (creating as needed, as `mkdir -p` with the umask does) the directory holding `rel`.
fn parent_dir(root: &Dir, rel: &Path) -> Result<(Dir, PathBuf), ModuleError> {
    let comps: Vec<Component> = rel.components().collect();
    let mut dir = Dir::open(root.path())?;
    for c in comps.iter().take(comps.len().saturating_sub(1)) {
        let name = c.as_os_str();
        if dir.entry(name)?.is_none() {
            dir.mkdir(name, 0o777)?;
        }
        dir = dir.subdir(name)?;
    }
    let last = comps
        .last()
        .map(|c| PathBuf::from(c.as_os_str()))
        .unwrap_or_default();
    Ok((dir, last))
}

/// Remove what is at `name` when it is not a directory (a directory in the way of a file is an
/// error rather than being deleted with its content).
fn clear(dir: &Dir, name: &OsStr, keep_dir: bool) -> Result<(), ModuleError> {
    if let Some(h) = dir.entry(name)? {
        if h.is_dir() {
            if keep_dir {
                return Ok(());
            }
            return Err(ModuleError::failed(format!(
                "{} is a directory in the tree and not one in the archive; remove it first",
                dir.at(name).display()
            )));
        }
        drop(h);
        dir.unlink(name)?;
    }
    Ok(())
}

fn attrs(dir: &Dir, name: &OsStr, want: &Want) -> Result<(), ModuleError> {
    let h = dir
        .entry(name)?
        .ok_or_else(|| ModuleError::io(dir.at(name), "vanished while being extracted"))?;
    if h.is_link() {
        return Ok(());
    }
    let st = h.stat();
    let (uid, gid) = (
        want.uid.filter(|u| *u != st.st_uid),
        want.gid.filter(|g| *g != st.st_gid),
    );
    if uid.is_some() || gid.is_some() {
        h.chown(uid, gid)?;
    }
    if let Some(m) = want.mode {
        // chown clears setuid/setgid: the mode is set after it.
        h.chmod(m)?;
    }
    Ok(())
}

fn set_mtime(dir: &Dir, name: &OsStr, mtime: i64) -> Result<(), ModuleError> {
    if let Some(h) = dir.entry(name)? {
        let t = TimeSpec::new(mtime, 0);
        h.set_times(&t, &t)?;
    }
    Ok(())
}

/// Write the entries `list` (indices into `st.entries`), in archive order: directories and
/// files as the archive streams by, then links (a hard link's target is written by then).
pub fn write(st: &Probed, list: &[usize]) -> Result<(), ModuleError> {
    let root = Dir::open(&st.root)?;
    let wanted: HashSet<usize> = list.iter().copied().collect();
    let none = Want::default();
    let want = |i: usize| st.want.get(&i).copied().unwrap_or(none);
    for &i in list {
        let e = &st.entries[i];
        if e.kind == Kind::Dir {
            let (dir, name) = parent_dir(&root, &e.path)?;
            clear(&dir, name.as_os_str(), true)?;
            dir.mkdir(name.as_os_str(), 0o700)?;
            attrs(&dir, name.as_os_str(), &want(i))?;
        }
    }
    let files: HashSet<usize> = list
        .iter()
        .copied()
        .filter(|i| st.entries[*i].kind == Kind::File)
        .collect();
    let fmt = st.format.expect("probed");
    archive::each_data(&st.archive, fmt, &files, &mut |i, data| {
        let e = &st.entries[i];
        let (dir, name) = parent_dir(&root, &e.path)?;
        let (mut f, tmp) = dir.create_temp(".fixpoint.", ".unarchive")?;
        let done = (|| {
            std::io::copy(data, &mut f).map_err(|err| ModuleError::io(&e.name, err))?;
            f.flush()
                .map_err(|err| ModuleError::io(dir.at(&tmp), err))?;
            let w = want(i);
            if w.uid.is_some() || w.gid.is_some() {
                std::os::unix::fs::fchown(&f, w.uid, w.gid)
                    .map_err(|err| ModuleError::io(dir.at(&tmp), err))?;
            }
            let mode = w.mode.unwrap_or(0o644);
            f.set_permissions(std::fs::Permissions::from_mode(mode))
                .map_err(|err| ModuleError::io(dir.at(&tmp), err))?;
            let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(e.mtime.max(0) as u64);
            f.set_modified(t)
                .map_err(|err| ModuleError::io(dir.at(&tmp), err))?;
            f.sync_all()
                .map_err(|err| ModuleError::io(dir.at(&tmp), err))?;
            clear(&dir, name.as_os_str(), false)?;
            dir.rename(&tmp, name.as_os_str())
        })();
        if done.is_err() {
            let _ = dir.unlink(&tmp);
        }
        done
    })?;
    for &i in list {
        let e = &st.entries[i];
        match &e.kind {
            Kind::Symlink(target) => {
                let (dir, name) = parent_dir(&root, &e.path)?;
                clear(&dir, name.as_os_str(), false)?;
                dir.symlink(target, name.as_os_str())
                    .map_err(|err| ModuleError::io(dir.at(name.as_os_str()), err))?;
            }
            Kind::Hardlink(target) => {
                let (dir, name) = parent_dir(&root, &e.path)?;
                clear(&dir, name.as_os_str(), false)?;
                dir.hard_link(&st.root.join(target), name.as_os_str())
                    .map_err(|err| ModuleError::io(dir.at(name.as_os_str()), err))?;
            }
            _ => {}
        }
    }
    // Directory times last, as tar sets them: writing inside a directory moves its mtime.
    let mut dir_times: HashMap<PathBuf, i64> = HashMap::new();
    for &i in &st.selected {
        let e = &st.entries[i];
        if e.kind == Kind::Dir && !e.path.as_os_str().is_empty() {
            dir_times.insert(e.path.clone(), e.mtime);
        }
    }
    let _ = wanted;
    for (p, t) in dir_times {
        let (dir, name) = parent_dir(&root, &p)?;
        set_mtime(&dir, name.as_os_str(), t)?;
    }
    root.fsync()
}

/// Give the entries `list` their owner, group and mode (their content is right).
pub fn set_attrs(st: &Probed, list: &[usize]) -> Result<(), ModuleError> {
    let root = Dir::open(&st.root)?;
    for &i in list {
        let e = &st.entries[i];
        let (dir, name) = parent_dir(&root, &e.path)?;
        attrs(
            &dir,
            name.as_os_str(),
            &st.want.get(&i).copied().unwrap_or_default(),
        )?;
    }
    Ok(())
}

/// Give the top directories `list` their owner, group and mode.
pub fn set_top_attrs(st: &Probed, list: &[(PathBuf, Want)]) -> Result<(), ModuleError> {
    let root = Dir::open(&st.root)?;
    for (top, want) in list {
        if root.entry(top.as_os_str())?.is_some() {
            attrs(&root, top.as_os_str(), want)?;
        }
    }
    Ok(())
}
