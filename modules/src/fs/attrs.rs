//! File attributes: the owner, group and mode a module wants, looked up and compared with what
//! a path has, and the Ansible-style attribute fields (`uid`, `owner`, `mode`, `state`...) of results.

use super::paths::lstat;
use crate::ModuleError;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

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
    match super::names::uid_by_name(name) {
        Some(uid) => Ok(uid),
        None => Err(ModuleError::failed(format!(
            "chown failed: failed to look up user {name}"
        ))),
    }
}

/// Resolve a group name or numeric id to a gid.
pub fn lookup_gid(name: &str) -> Result<u32, ModuleError> {
    if let Ok(id) = name.parse::<u32>() {
        return Ok(id);
    }
    match super::names::gid_by_name(name) {
        Some(gid) => Ok(gid),
        None => Err(ModuleError::failed(format!(
            "chgrp failed: failed to look up group {name}"
        ))),
    }
}

/// The home directory of the effective user, from the user database (`$HOME` may still be the
/// login user's under `sudo`), else `$HOME`.
pub fn effective_home() -> Option<std::path::PathBuf> {
    nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map(|u| u.dir)
        .or_else(|| std::env::var_os("HOME").map(std::path::PathBuf::from))
}

/// The user name for a uid, or the number when it has no name.
pub fn user_name(uid: u32) -> String {
    super::names::user_by_uid(uid).unwrap_or_else(|| uid.to_string())
}

/// The group name for a gid, or the number when it has no name.
pub fn group_name(gid: u32) -> String {
    super::names::group_by_gid(gid).unwrap_or_else(|| gid.to_string())
}

/// Permission bits as ansible-core's module results and diffs write them: a `0`, then at least
/// three octal digits (`0644`, `01444` with the sticky bit). `stat` writes four (`stat_mode_str`).
pub fn mode_str(mode: u32) -> String {
    format!("0{:03o}", mode & 0o7777)
}

/// Permission bits as ansible-core's `stat` writes them: four octal digits (`0644`, `1444`).
pub fn stat_mode_str(mode: u32) -> String {
    format!("{:04o}", mode & 0o7777)
}

/// The process umask, read once (by setting and restoring it): nothing in the agent changes it
/// for good (this is the only call of `umask(2)`; commands set theirs in their own process), so
/// every step need not read it again with two system calls.
pub fn current_umask() -> u32 {
    static UMASK: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *UMASK.get_or_init(|| {
        let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
        nix::sys::stat::umask(old);
        old.bits()
    })
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
