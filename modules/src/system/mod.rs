//! System settings modules: `sysctl`, `hostname`, `timezone`, `mount` and `cron`. Each edits
//! its configuration file atomically (`fs::atomic`) and runs the host's own program
//! (`sysctl`, `crontab`, `mount`...) through `apt::exec::run` for what the kernel or a daemon
//! holds; none of them knows about the controller.

pub mod cron;
pub mod hostname;
pub mod mount;
pub mod sysctl;
pub mod timezone;

use crate::apt::exec::{run, Ran};
use crate::fs::{atomic_write, id_of, locate, Attrs, Loc};
use crate::{ContentDiff, ModuleError};
use std::path::{Path, PathBuf};

/// Run a system program with the C locale, whose messages are the ones parsed here.
pub(crate) fn run_c(argv: &[&str]) -> Result<Ran, ModuleError> {
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    let env: Vec<(String, String)> = [("LANG", "C"), ("LC_ALL", "C"), ("LC_MESSAGES", "C")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    run(&argv, &env, None)
}

/// Where Ansible's `get_bin_path` looks after `PATH`.
const SBIN_DIRS: &[&str] = &["/sbin", "/usr/sbin", "/usr/local/sbin"];

/// A program's path as Ansible's `get_bin_path(name, required=True)` finds it: the first
/// executable in `PATH`, then in the sbin directories (the path shows in messages such as
/// timezone's "executed `/usr/bin/timedatectl ...`").
pub(crate) fn get_bin_path(program: &str) -> Result<PathBuf, ModuleError> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    for d in SBIN_DIRS {
        if !dirs.iter().any(|p| p == Path::new(d)) && Path::new(d).exists() {
            dirs.push(PathBuf::from(d));
        }
    }
    dirs.iter()
        .map(|d| d.join(program))
        .find(|p| {
            std::fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
        .ok_or_else(|| {
            let shown: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
            ModuleError::failed(format!(
                "Failed to find required executable \"{program}\" in paths: {}",
                shown.join(":")
            ))
        })
}

/// A configuration file as the probe found it: written back through its symlinks (Ansible
/// writes to the file's realpath), and only if it is still the file (or the absence) seen.
#[derive(Debug)]
pub struct ConfFile {
    /// The path as the task gave it, for messages and diffs.
    pub shown: String,
    /// Its text; `None` when it is missing or not a regular file (Ansible's `os.path.isfile`).
    pub text: Option<String>,
    pub at: Loc,
}

impl ConfFile {
    pub fn probe(path: &Path) -> Result<ConfFile, ModuleError> {
        let meta = match std::fs::metadata(path) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(ModuleError::io(path, e)),
        };
        let target = match &meta {
            Some(_) => std::fs::canonicalize(path).map_err(|e| ModuleError::io(path, e))?,
            None => path.to_path_buf(),
        };
        let text = match &meta {
            Some(m) if m.is_file() => Some(
                std::fs::read(&target)
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .map_err(|e| ModuleError::io(path, e))?,
            ),
            _ => None,
        };
        let at = locate(&target, meta.as_ref().map(id_of))?;
        Ok(ConfFile {
            shown: path.display().to_string(),
            text,
            at,
        })
    }

    /// Replace the file atomically: a new one gets `0666 & !umask`, a rewrite keeps its owner,
    /// group and mode.
    pub fn write(&self, content: &str) -> Result<(), ModuleError> {
        atomic_write(&self.at, content.as_bytes(), &Attrs::default(), None)
    }

    /// The content diff of replacing the text with `after`.
    pub fn diff(&self, after: &str) -> ContentDiff {
        ContentDiff {
            path: self.shown.clone(),
            before: self.text.clone().unwrap_or_default(),
            after: after.to_string(),
        }
    }
}
