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

/// Deserialize an optional string that YAML may have typed as a number or a boolean
/// (`line: 8080`, `owner: 1000`), converting it as Ansible's `type='str'` does (`8080`, `True`).
pub fn de_opt_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    use serde::Deserialize;
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(s)),
        Some(serde_json::Value::Number(n)) => Ok(Some(n.to_string())),
        Some(serde_json::Value::Bool(b)) => Ok(Some(if b { "True" } else { "False" }.to_string())),
        Some(other) => Err(serde::de::Error::custom(format!(
            "expected a string, found {other}"
        ))),
    }
}

/// The `mode`, `owner` and `group` a module's parameters ask for; `None` leaves that attribute alone.
#[derive(Clone, Copy, Debug, Default)]
pub struct WantedAttrs<'a> {
    pub mode: Option<&'a crate::params::ModeSpec>,
    pub owner: Option<&'a str>,
    pub group: Option<&'a str>,
}

impl<'a> WantedAttrs<'a> {
    /// From a module's `mode`, `owner` and `group` parameters.
    pub fn new(
        mode: &'a Option<crate::params::ModeSpec>,
        owner: &'a Option<String>,
        group: &'a Option<String>,
    ) -> Self {
        WantedAttrs {
            mode: mode.as_ref(),
            owner: owner.as_deref(),
            group: group.as_deref(),
        }
    }
}

/// Compare wanted attributes with a file's current metadata (`None`: the file is about to be
/// created), record each difference in `diff` under `path`, and return only the attributes that
/// must be set. For a new file every given attribute is returned, since it must be applied.
pub fn plan_attrs(
    path: &str,
    meta: Option<&fs::Metadata>,
    wanted: &WantedAttrs,
    diff: &mut crate::Diff,
) -> Result<Attrs, ModuleError> {
    let mut out = Attrs::default();
    let cur_mode = meta
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or_else(|| 0o666 & !current_umask());
    let before = |s: String| {
        if meta.is_some() {
            s
        } else {
            "absent".to_string()
        }
    };
    if let Some(spec) = wanted.mode {
        let is_dir = meta.is_some_and(|m| m.is_dir());
        if let Some(m) = spec
            .resolve(cur_mode, is_dir)
            .map_err(ModuleError::Params)?
        {
            if meta.is_none() || m != cur_mode {
                out.mode = Some(m);
                diff.attr(path, "mode", before(mode_str(cur_mode)), mode_str(m));
            }
        }
    }
    if let Some(owner) = wanted.owner {
        let uid = lookup_uid(owner)?;
        if meta.is_none_or(|m| m.uid() != uid) {
            out.uid = Some(uid);
            diff.attr(
                path,
                "owner",
                before(meta.map(|m| user_name(m.uid())).unwrap_or_default()),
                user_name(uid),
            );
        }
    }
    if let Some(group) = wanted.group {
        let gid = lookup_gid(group)?;
        if meta.is_none_or(|m| m.gid() != gid) {
            out.gid = Some(gid);
            diff.attr(
                path,
                "group",
                before(meta.map(|m| group_name(m.gid())).unwrap_or_default()),
                group_name(gid),
            );
        }
    }
    Ok(out)
}

/// Set owner, group and mode on an existing path (following symlinks), without touching its content.
pub fn set_attrs(path: &Path, attrs: &Attrs) -> Result<(), ModuleError> {
    if attrs.uid.is_some() || attrs.gid.is_some() {
        std::os::unix::fs::chown(path, attrs.uid, attrs.gid)
            .map_err(|e| ModuleError::io(path, format!("cannot set owner/group: {e}")))?;
    }
    // chmod after chown: chown clears setuid/setgid bits.
    if let Some(mode) = attrs.mode {
        fs::set_permissions(path, fs::Permissions::from_mode(mode))
            .map_err(|e| ModuleError::io(path, format!("cannot set mode: {e}")))?;
    }
    Ok(())
}

/// Expand a leading `~` or `~user`, as Ansible does for `type='path'` parameters
/// (`path: ~/.bashrc` means the connecting user's home, not a directory named `~`).
pub fn expand_user(path: &str) -> PathBuf {
    if let Some(rest) = path.strip_prefix('~') {
        let (user, tail) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let home = if user.is_empty() {
            std::env::var_os("HOME").map(PathBuf::from).or_else(|| {
                nix::unistd::User::from_uid(nix::unistd::geteuid())
                    .ok()
                    .flatten()
                    .map(|u| u.dir)
            })
        } else {
            nix::unistd::User::from_name(user)
                .ok()
                .flatten()
                .map(|u| u.dir)
        };
        if let Some(home) = home {
            let mut s = home.into_os_string();
            s.push(tail);
            return PathBuf::from(s);
        }
    }
    PathBuf::from(path)
}

/// Ansible's `state` word for what is at a path: `link`, `directory`, `hard` (a non-directory with
/// more than one link) or `file` (anything else, including fifos and devices, as Ansible does).
pub fn state_of(meta: &fs::Metadata) -> &'static str {
    let ft = meta.file_type();
    if ft.is_symlink() {
        "link"
    } else if ft.is_dir() {
        "directory"
    } else if meta.nlink() > 1 {
        "hard"
    } else {
        "file"
    }
}

/// The attributes Ansible's `add_path_info` adds to file-ish results (uid, gid, owner, group,
/// mode, state, size), from metadata read without following a final symlink.
pub fn meta_info(meta: &fs::Metadata) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    m.insert("uid".into(), meta.uid().into());
    m.insert("gid".into(), meta.gid().into());
    m.insert("owner".into(), user_name(meta.uid()).into());
    m.insert("group".into(), group_name(meta.gid()).into());
    m.insert("mode".into(), mode_str(meta.mode()).into());
    m.insert("state".into(), state_of(meta).into());
    m.insert("size".into(), meta.size().into());
    m
}

/// [`meta_info`] for a path read now; a missing path reports `state: absent`.
pub fn path_info(path: &Path) -> Result<serde_json::Map<String, serde_json::Value>, ModuleError> {
    Ok(match lstat(path)? {
        Some(meta) => meta_info(&meta),
        None => {
            let mut m = serde_json::Map::new();
            m.insert("state".into(), "absent".into());
            m
        }
    })
}

/// Python's `str(datetime)` (UTC here): `2024-05-01 12:00:00.123456`, without the fraction when it is 0.
pub fn format_datetime(t: std::time::SystemTime) -> String {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, day) = civil_from_days(days);
    let base = format!(
        "{y:04}-{m:02}-{day:02} {:02}:{:02}:{:02}",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    );
    match d.subsec_micros() {
        0 => base,
        us => format!("{base}.{us:06}"),
    }
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}
