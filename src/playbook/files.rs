//! Where playbook files are found (beside the playbook, in a role, on a search path) and how a
//! vars file is read.

use super::keywords::vars_of;
use crate::diag::{Diagnostic, Pos};
use crate::yaml;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// Where a step's relative files (a `with_first_found` list, `copy` sources) are searched: its
/// role's directory first, then the play's.
pub fn search_dirs(role: Option<&super::ast::RoleCtx>, play_dir: &Path) -> Vec<PathBuf> {
    role.map(|r| r.path.clone())
        .into_iter()
        .chain([play_dir.to_path_buf()])
        .collect()
}

/// The directory of a file, `.` for a bare file name.
pub(crate) fn dir_of(path: &Path) -> PathBuf {
    path.parent()
        .map(|p| {
            if p.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                p.to_path_buf()
            }
        })
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The first directory in `dirs` that holds `file` (absolute names are taken as they are).
pub fn find_in(dirs: &[PathBuf], file: &str) -> Option<PathBuf> {
    let p = Path::new(file);
    if p.is_absolute() {
        return p.is_file().then(|| p.to_path_buf());
    }
    dirs.iter().map(|d| joined(d, file)).find(|c| c.is_file())
}

/// `dir/file`, without a leading `./` when `dir` is the current directory (positions read better).
pub(crate) fn joined(dir: &Path, file: &str) -> PathBuf {
    if dir == Path::new(".") {
        PathBuf::from(file)
    } else {
        dir.join(file)
    }
}

/// The places searched, for "not found; looked in ..." messages.
pub fn looked_in(dirs: &[PathBuf]) -> String {
    dirs.iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Load a YAML vars file: a mapping of variable names to values.
pub fn load_vars_file(path: &Path, referenced_at: &Pos) -> Result<Map<String, Value>, Diagnostic> {
    if !path.exists() {
        return Err(Diagnostic::at(
            referenced_at,
            format!("vars file {} does not exist", path.display()),
        )
        .help("paths in vars_files are relative to the playbook's directory"));
    }
    let node = yaml::load_file(path)?;
    vars_of(&node, "a vars file")
}
