//! Host-side helpers shared by modules: atomic writes, owner/group lookup, reading file attributes.

use crate::ModuleError;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Ownership and permissions to give a file; `None` keeps what the file has (or the default for a new one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Attrs {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
}

/// Resolve a user name or numeric id to a uid.
pub fn lookup_uid(name: &str) -> Result<u32, ModuleError> {
    if let Ok(id) = name.parse::<u32>() {
        return Ok(id);
    }
    match nix::unistd::User::from_name(name) {
        Ok(Some(u)) => Ok(u.uid.as_raw()),
        _ => Err(ModuleError::failed(format!(
            "user `{name}` does not exist on this host"
        ))),
    }
}

/// Resolve a group name or numeric id to a gid.
pub fn lookup_gid(name: &str) -> Result<u32, ModuleError> {
    if let Ok(id) = name.parse::<u32>() {
        return Ok(id);
    }
    match nix::unistd::Group::from_name(name) {
        Ok(Some(g)) => Ok(g.gid.as_raw()),
        _ => Err(ModuleError::failed(format!(
            "group `{name}` does not exist on this host"
        ))),
    }
}

/// The user name for a uid, or the number when it has no name.
pub fn user_name(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => u.name,
        _ => uid.to_string(),
    }
}

/// The group name for a gid, or the number when it has no name.
pub fn group_name(gid: u32) -> String {
    match nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid)) {
        Ok(Some(g)) => g.name,
        _ => gid.to_string(),
    }
}

/// `0644`-style text for permission bits.
pub fn mode_str(mode: u32) -> String {
    format!("{:04o}", mode & 0o7777)
}

/// Metadata of `path` without following a final symlink; `None` when it does not exist.
pub fn lstat(path: &Path) -> Result<Option<fs::Metadata>, ModuleError> {
    match fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ModuleError::io(path, e)),
    }
}

/// Read a file's bytes; `None` when it does not exist.
pub fn read_opt(path: &Path) -> Result<Option<Vec<u8>>, ModuleError> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ModuleError::io(path, e)),
    }
}

/// fsync a directory so that a rename inside it is durable.
pub fn fsync_dir(dir: &Path) -> Result<(), ModuleError> {
    let d = fs::File::open(dir).map_err(|e| ModuleError::io(dir, e))?;
    d.sync_all().map_err(|e| ModuleError::io(dir, e))
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Replace `path` with `data` atomically: temp file in the same directory, attributes set on the
/// temp file, fsync, rename over the destination, fsync the directory. A crash at any point leaves
/// either the old file or the new one, never a torn one.
///
/// Attributes not given in `attrs` are copied from the existing file (so a rewrite keeps its owner,
/// group and mode); a new file gets `0644 & !umask`-like defaults from the temp file, widened to 0644
/// because tempfile creates 0600.
///
/// `validate`, when given, is a command with `%s` that must exit 0 on the temp file before the rename.
pub fn atomic_write(
    path: &Path,
    data: &[u8],
    attrs: &Attrs,
    validate: Option<&str>,
) -> Result<(), ModuleError> {
    let dir = parent_dir(path);
    let existing = match fs::metadata(path) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(ModuleError::io(path, e)),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".fixpoint.")
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(|e| ModuleError::io(&dir, e))?;
    tmp.write_all(data)
        .map_err(|e| ModuleError::io(tmp.path(), e))?;

    let mode = attrs
        .mode
        .or_else(|| existing.as_ref().map(|m| m.permissions().mode() & 0o7777))
        .unwrap_or_else(|| 0o666 & !current_umask());
    let uid = attrs.uid.or_else(|| existing.as_ref().map(|m| m.uid()));
    let gid = attrs.gid.or_else(|| existing.as_ref().map(|m| m.gid()));
    if uid.is_some() || gid.is_some() {
        nix::unistd::fchown(
            std::os::fd::AsRawFd::as_raw_fd(tmp.as_file()),
            uid.map(nix::unistd::Uid::from_raw),
            gid.map(nix::unistd::Gid::from_raw),
        )
        .map_err(|e| ModuleError::io(path, format!("cannot set owner/group: {e}")))?;
    }
    // chmod after chown: chown clears setuid/setgid bits.
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(mode))
        .map_err(|e| ModuleError::io(tmp.path(), e))?;
    tmp.as_file()
        .sync_all()
        .map_err(|e| ModuleError::io(tmp.path(), e))?;

    if let Some(cmd) = validate {
        run_validate(cmd, tmp.path())?;
    }

    tmp.persist(path)
        .map_err(|e| ModuleError::io(path, e.error))?;
    fsync_dir(&dir)
}

/// Run a `validate` command (`visudo -cf %s`) on a candidate file.
pub fn run_validate(cmd: &str, candidate: &Path) -> Result<(), ModuleError> {
    if !cmd.contains("%s") {
        return Err(ModuleError::Params(format!(
            "validate must contain %s (the file to check), got `{cmd}`"
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

/// The process umask (read by setting and restoring it; the agent is single-threaded per request).
pub fn current_umask() -> u32 {
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
    nix::sys::stat::umask(old);
    old.bits()
}

/// Make a `backup: true` copy next to `path`: `path.<pid>.<timestamp>~`, as Ansible names it.
/// Returns the backup's path.
pub fn backup_file(path: &Path) -> Result<String, ModuleError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let backup = format!(
        "{}.{}.{}~",
        path.display(),
        std::process::id(),
        now.as_secs()
    );
    fs::copy(path, &backup).map_err(|e| ModuleError::io(path, format!("backup failed: {e}")))?;
    Ok(backup)
}

/// The lossy text of file content for diffs; binary content is summarised instead of shown.
pub fn diff_text(data: &[u8]) -> String {
    if data.contains(&0) {
        format!("<binary, {} bytes>\n", data.len())
    } else {
        String::from_utf8_lossy(data).into_owned()
    }
}
