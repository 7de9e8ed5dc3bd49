//! Safe replacement of a file's content: atomic write (temp file in the destination's directory,
//! fsync, rename, fsync the directory), the `validate` command run on the candidate before the
//! rename, and the `backup: true` copy made before it.

use super::attrs::{current_umask, Attrs};
use super::paths::parent_of;
use crate::ModuleError;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// fsync a directory so that a rename inside it is durable.
pub fn fsync_dir(dir: &Path) -> Result<(), ModuleError> {
    let d = fs::File::open(dir).map_err(|e| ModuleError::io(dir, e))?;
    d.sync_all().map_err(|e| ModuleError::io(dir, e))
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
    let dir = parent_of(path);
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
