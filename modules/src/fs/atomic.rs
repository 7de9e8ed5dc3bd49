//! Safe replacement of a file's content: atomic write (temp file in the destination's directory,
//! fsync, rename, fsync the directory), the `validate` command run on the candidate before the
//! rename, and the `backup: true` copy made before it.

use super::attrs::{current_umask, Attrs};
use super::dirfd::{recheck_guard, Dir, Handle, Loc};
use super::stage::Staged;
use crate::ModuleError;
use nix::sys::stat::FileStat;
use std::fs;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// fsync a directory so that a rename inside it is durable.
pub fn fsync_dir(dir: &Path) -> Result<(), ModuleError> {
    let d = fs::File::open(dir).map_err(|e| ModuleError::io(dir, e))?;
    d.sync_all().map_err(|e| ModuleError::io(dir, e))
}

/// Replace the file at `dest` with `data` atomically: a temp file created exclusively (mode 0600,
/// unpredictable name) in the destination's directory, attributes set on it, fsync, rename over
/// the destination, fsync the directory (once: see `finish`). A crash at any point leaves either the old file or the
/// new one, never a torn one.
///
/// The directory is reopened without following any symlink (see `dirfd`), and what is at the
/// destination must still be what the probe saw (`dest.id`; `None`: nothing), so a directory or
/// file swapped for a link since the probe makes this fail instead of writing elsewhere.
///
/// Attributes not given in `attrs` are copied from the existing file (so a rewrite keeps its owner,
/// group and mode); a new file gets `0666 & !umask`.
///
/// `validate`, when given, is a command with `%s` that must exit 0 on the temp file before the rename.
pub fn atomic_write(
    dest: &Loc,
    data: &[u8],
    attrs: &Attrs,
    validate: Option<&str>,
) -> Result<(), ModuleError> {
    atomic_write_from(dest, &mut &data[..], attrs, validate)
}

/// [`atomic_write`] of what `src` yields, streamed (a host file for `remote_src`): memory stays
/// flat whatever the size.
pub fn atomic_write_from(
    dest: &Loc,
    src: &mut dyn Read,
    attrs: &Attrs,
    validate: Option<&str>,
) -> Result<(), ModuleError> {
    let dir = Dir::open(&dest.dir)?;
    let existing = still_as_probed(&dir, dest)?;
    let (mut tmp, tmp_name) = dir.create_temp(".fixpoint.", ".tmp")?;
    // Whatever fails from here on, the temp file must not stay behind.
    let result = std::io::copy(src, &mut tmp)
        .map_err(|e| ModuleError::io(dir.at(&tmp_name), e))
        .and_then(|_| finish(&dir, &tmp, &tmp_name, &dir, dest, existing, attrs, validate));
    if result.is_err() {
        let _ = dir.unlink(&tmp_name);
    }
    result
}

/// Install content staged by an upload (see `stage`): its temp file, already verified against
/// the announced sha256, gets the attributes and is renamed over the destination, as
/// [`atomic_write`] does with its own temp file.
pub fn install_staged(
    dest: &Loc,
    staged: Staged,
    attrs: &Attrs,
    validate: Option<&str>,
) -> Result<(), ModuleError> {
    let result = Dir::open(&dest.dir).and_then(|dir| {
        let existing = still_as_probed(&dir, dest)?;
        finish(
            &staged.dir,
            &staged.file,
            &staged.name,
            &dir,
            dest,
            existing,
            attrs,
            validate,
        )?;
        Ok(dir)
    });
    match result {
        Err(e) => {
            let _ = staged.dir.unlink(&staged.name);
            Err(e)
        }
        // The temp file's name left this directory when it is not the destination's (which
        // `finish` made durable).
        Ok(dir) if !staged.dir.same_as(&dir) => staged.dir.fsync(),
        Ok(_) => Ok(()),
    }
}

/// Install a temp file the caller filled in the destination's own directory (`dir`, opened on
/// `dest.dir`; a download streamed there): attributes, fsync, rename, as [`atomic_write`] does.
/// The temp file is removed when anything fails.
pub fn install_temp(
    dest: &Loc,
    dir: &Dir,
    tmp: &fs::File,
    tmp_name: &std::ffi::OsStr,
    attrs: &Attrs,
) -> Result<(), ModuleError> {
    let result = still_as_probed(dir, dest)
        .and_then(|existing| finish(dir, tmp, tmp_name, dir, dest, existing, attrs, None));
    if result.is_err() {
        let _ = dir.unlink(tmp_name);
    }
    result
}

/// The file a write replaces, as pinned when it was checked against the probe: its metadata,
/// and its extended attributes (ACLs, `user.*`, its SELinux label), which the new inode keeps,
/// as ansible-core's atomic_move keeps them (`shutil.copystat`).
struct Existing {
    stat: FileStat,
    xattrs: Vec<(std::ffi::CString, Vec<u8>)>,
}

/// What is at the destination must still be what the probe saw (`dest.id`; `None`: nothing).
fn still_as_probed(dir: &Dir, dest: &Loc) -> Result<Option<Existing>, ModuleError> {
    Ok(probed_entry(dir, dest)?.map(|h| Existing {
        stat: *h.stat(),
        xattrs: h.xattrs(),
    }))
}

/// [`still_as_probed`]'s check, giving the pinned entry.
fn probed_entry<'d>(dir: &'d Dir, dest: &Loc) -> Result<Option<Handle<'d>>, ModuleError> {
    let existing = dir.entry(&dest.name)?;
    match (&existing, dest.id) {
        (Some(h), Some(id)) if h.id() == id => {}
        (None, None) => {}
        _ => {
            return Err(ModuleError::io(
                dir.at(&dest.name),
                "changed since it was examined (created, removed or replaced); nothing was \
                 written, run again",
            ))
        }
    }
    Ok(existing)
}

/// Give the filled temp file its owner, group and mode, make it durable, validate it, rename it
/// over the destination, and make the rename durable: before the journal records what the
/// change left (`written::change`), so that a record can never outlive its change in a crash.
#[allow(clippy::too_many_arguments)]
fn finish(
    tmp_dir: &Dir,
    tmp: &fs::File,
    tmp_name: &std::ffi::OsStr,
    dir: &Dir,
    dest: &Loc,
    existing: Option<Existing>,
    attrs: &Attrs,
    validate: Option<&str>,
) -> Result<(), ModuleError> {
    let path = dir.at(&dest.name);
    let tmp_path = tmp_dir.at(tmp_name);
    let mode = attrs
        .mode
        .or_else(|| existing.as_ref().map(|e| e.stat.st_mode & 0o7777))
        .unwrap_or_else(|| 0o666 & !current_umask());
    let uid = attrs
        .uid
        .or_else(|| existing.as_ref().map(|e| e.stat.st_uid));
    let gid = attrs
        .gid
        .or_else(|| existing.as_ref().map(|e| e.stat.st_gid));
    if uid.is_some() || gid.is_some() {
        nix::unistd::fchown(
            tmp.as_raw_fd(),
            uid.map(nix::unistd::Uid::from_raw),
            gid.map(nix::unistd::Gid::from_raw),
        )
        .map_err(|e| ModuleError::io(&path, format!("cannot set owner/group: {e}")))?;
    }
    // The replaced file's extended attributes go before the mode is set, as `copystat` orders
    // them (a chmod after an ACL sets its mask from the group bits).
    if let Some(e) = &existing {
        super::xattrs::write_all(tmp, &e.xattrs).map_err(|e| {
            ModuleError::io(&tmp_path, format!("cannot copy extended attributes: {e}"))
        })?;
    }
    // chmod after chown: chown clears setuid/setgid bits.
    tmp.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(|e| ModuleError::io(&tmp_path, e))?;
    tmp.sync_all().map_err(|e| ModuleError::io(&tmp_path, e))?;
    if let Some(cmd) = validate {
        run_validate(cmd, &tmp_path)?;
    }
    #[cfg(test)]
    hook::before_rename(&path);
    // A task with `if_checksum` looks again immediately before the rename: writing and
    // validating the temp file takes time, and another writer may have replaced the destination
    // (a new inode) or changed its content in place since the probe. Either fails the task and
    // leaves that writer's file as it is. (Unguarded writes keep last-writer-wins: the agent's
    // own journal files are written that way by agents of one run.)
    if dest.guard.is_some() {
        probed_entry(dir, dest)?;
        recheck_guard(dir, dest)?;
    }
    // What the rename leaves, for the journal (drift attribution): the temp file as it is now.
    let known = if super::written::active() {
        Some(super::written::Left::of_file(tmp).map_err(|e| ModuleError::io(&tmp_path, e))?)
    } else {
        None
    };
    super::written::change(&path, known, || {
        tmp_dir.rename_to(tmp_name, dir, &dest.name)?;
        dir.fsync()
    })
}

/// [`atomic_write`] to `path` as it is now, whatever is there (for files that no probe looked at,
/// such as the agent's own journal records): the directory is located now, then reached without
/// following links.
pub fn atomic_write_path(
    path: &Path,
    data: &[u8],
    attrs: &Attrs,
    validate: Option<&str>,
) -> Result<(), ModuleError> {
    let id = super::paths::lstat(path)?.as_ref().map(super::dirfd::id_of);
    atomic_write(&super::dirfd::locate(path, id)?, data, attrs, validate)
}

/// Run a `validate` command (`visudo -cf %s`) on a candidate file.
pub fn run_validate(cmd: &str, candidate: &Path) -> Result<(), ModuleError> {
    if !cmd.contains("%s") {
        return Err(ModuleError::Params(format!(
            "validate must contain %s: {cmd}"
        )));
    }
    let full = cmd.replace("%s", &shell_quote(&candidate.to_string_lossy()));
    let out = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(&full)
        .output()
        .map_err(|e| ModuleError::failed(format!("cannot run validate command: {e}")))?;
    if !out.status.success() {
        return Err(ModuleError::failed(format!(
            "failed to validate: `{full}` exited with {}: {}",
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// Quote a word for /bin/sh.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Make a `backup: true` copy of the file at `loc` (it must still be the file the probe saw) in
/// the same directory, named `<name>.<pid>.<seconds>.<random>~`: created exclusively, mode 0600
/// while it fills, without following anything at that name; then given the original's owner,
/// group and mode, as Ansible's backup keeps them. Returns the backup's path.
pub fn backup_file(loc: &Loc) -> Result<String, ModuleError> {
    let dir = Dir::open(&loc.dir)?;
    let path = dir.at(&loc.name);
    let fail = |e: &dyn std::fmt::Display| ModuleError::io(&path, format!("backup failed: {e}"));
    let mut src = dir.open_read(&loc.name)?;
    let meta = src.metadata().map_err(|e| fail(&e))?;
    if loc.id.is_some_and(|id| id != (meta.dev(), meta.ino())) {
        return Err(fail(&"the file changed since it was examined"));
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut prefix = loc.name.clone();
    prefix.push(format!(".{}.{}.", std::process::id(), now.as_secs()));
    let (mut out, name) = dir.create_temp(&prefix.to_string_lossy(), "~")?;
    let result = (|| {
        std::io::copy(&mut src, &mut out).map_err(|e| fail(&e))?;
        nix::unistd::fchown(
            out.as_raw_fd(),
            Some(nix::unistd::Uid::from_raw(meta.uid())),
            Some(nix::unistd::Gid::from_raw(meta.gid())),
        )
        .map_err(|e| fail(&e))?;
        out.set_permissions(fs::Permissions::from_mode(meta.mode() & 0o7777))
            .map_err(|e| fail(&e))?;
        out.sync_all().map_err(|e| fail(&e))
    })();
    if let Err(e) = result {
        let _ = dir.unlink(&name);
        return Err(e);
    }
    dir.fsync()?;
    Ok(dir.at(&name).display().to_string())
}

/// A test's stand-in for an outside writer: called between the temp file's write and the
/// re-check before the rename (no sleeps, no second process needed to hit that window).
#[cfg(test)]
pub(crate) mod hook {
    use std::cell::RefCell;
    use std::path::Path;

    type Hook = Box<dyn FnMut(&Path)>;

    thread_local! {
        static BEFORE_RENAME: RefCell<Option<Hook>> = const { RefCell::new(None) };
    }

    /// Run `f` on the destination's path before every rename of this thread's atomic writes,
    /// until the returned guard is dropped.
    pub(crate) fn set(f: impl FnMut(&Path) + 'static) -> Unset {
        BEFORE_RENAME.with(|h| *h.borrow_mut() = Some(Box::new(f)));
        Unset
    }

    pub(crate) struct Unset;

    impl Drop for Unset {
        fn drop(&mut self) {
            BEFORE_RENAME.with(|h| *h.borrow_mut() = None);
        }
    }

    pub(super) fn before_rename(dest: &Path) {
        BEFORE_RENAME.with(|h| {
            if let Some(f) = h.borrow_mut().as_mut() {
                f(dest)
            }
        });
    }
}
