//! Paths on the host: existence without following links (`lstat`), resolving links, the parent
//! directory, the directories `mkdir -p` would create, and `~` expansion.

use crate::ModuleError;
use std::ffi::OsString;
use std::fs::{self, Metadata};
use std::io::ErrorKind;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// The directory holding `path` (`.` for a bare name).
pub fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Metadata of `path` without following a final symlink; `None` when it does not exist. A path
/// "below" a regular file (`file/sub`: ENOTDIR) counts as missing too, like ENOENT.
pub fn lstat(path: &Path) -> Result<Option<Metadata>, ModuleError> {
    match fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(m)),
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => Ok(None),
        Err(e) => Err(ModuleError::io(path, e)),
    }
}

/// Follow symlinks: the canonical path and metadata, or `None` when the target does not exist.
pub(crate) fn resolve(path: &Path) -> Result<Option<(PathBuf, Metadata)>, ModuleError> {
    match fs::metadata(path) {
        Ok(m) => {
            let real = fs::canonicalize(path).map_err(|e| ModuleError::io(path, e))?;
            Ok(Some((real, m)))
        }
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => Ok(None),
        Err(e) => Err(ModuleError::io(path, e)),
    }
}

/// The missing directories on the way to `path` (outermost first), and an ancestor that exists
/// but is not a directory (so they cannot be created), as `mkdir -p` would find them.
pub(crate) fn missing_ancestors(
    path: &Path,
) -> Result<(Vec<PathBuf>, Option<PathBuf>), ModuleError> {
    let mut missing = vec![path.to_path_buf()];
    let mut blocker = None;
    let mut cur = path.parent();
    while let Some(dir) = cur.filter(|d| !d.as_os_str().is_empty()) {
        match fs::metadata(dir) {
            Ok(m) if m.is_dir() => break,
            Ok(_) => {
                blocker = Some(dir.to_path_buf());
                break;
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {
                // A dangling symlink is not a missing directory: mkdir would fail on it.
                if lstat(dir)?.is_some() {
                    blocker = Some(dir.to_path_buf());
                    break;
                }
                missing.push(dir.to_path_buf());
            }
            Err(e) if e.kind() == ErrorKind::NotADirectory => {}
            Err(e) => return Err(ModuleError::io(dir, e)),
        }
        cur = dir.parent();
    }
    missing.reverse();
    Ok((missing, blocker))
}

/// Expand a leading `~` or `~user`, as Ansible does for `type='path'` parameters
/// (`path: ~/.bashrc` means the connecting user's home, not a directory named `~`), with `$HOME`
/// taken from this process's environment.
pub fn expand_user(path: &str) -> PathBuf {
    expand_user_with(path, || std::env::var_os("HOME"))
}

/// Python's `os.path.expanduser`, with the caller saying where `$HOME` comes from (`command` looks
/// in the task's `environment` first, since Ansible expands there). Without `$HOME`, `~` is the
/// home of the current user in the password database; `~user` always comes from there. An
/// unknown user leaves the path as written.
pub fn expand_user_with(path: &str, home_var: impl FnOnce() -> Option<OsString>) -> PathBuf {
    let Some(rest) = path.strip_prefix('~') else {
        return PathBuf::from(path);
    };
    let (user, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let home = if user.is_empty() {
        home_var().or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.dir.into_os_string())
        })
    } else {
        nix::unistd::User::from_name(user)
            .ok()
            .flatten()
            .map(|u| u.dir.into_os_string())
    };
    let Some(home) = home else {
        return PathBuf::from(path);
    };
    // As Python: the home's trailing slashes are dropped (`/home/x/` and `/a` give `/home/x/a`,
    // a home of `/` gives `/a`), and an expansion that ends up empty is `/`.
    let bytes = home.as_bytes();
    let end = bytes.iter().rposition(|b| *b != b'/').map_or(0, |i| i + 1);
    let mut out = OsString::from_vec(bytes[..end].to_vec());
    out.push(tail);
    if out.is_empty() {
        out.push("/");
    }
    PathBuf::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn parent_of_a_bare_name_is_the_current_directory() {
        assert_eq!(parent_of(Path::new("a/b")), PathBuf::from("a"));
        assert_eq!(parent_of(Path::new("/x")), PathBuf::from("/"));
        assert_eq!(parent_of(Path::new("b")), PathBuf::from("."));
        assert_eq!(parent_of(Path::new("/")), PathBuf::from("."));
    }

    #[test]
    fn lstat_does_not_follow_and_counts_below_a_file_as_missing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, "x").unwrap();
        let link = dir.path().join("dangling");
        symlink(dir.path().join("nowhere"), &link).unwrap();
        assert!(lstat(&file).unwrap().unwrap().is_file());
        assert!(lstat(&link).unwrap().unwrap().file_type().is_symlink());
        assert!(lstat(&dir.path().join("missing")).unwrap().is_none());
        assert!(lstat(&file.join("sub")).unwrap().is_none());
    }

    #[test]
    fn resolve_follows_links_and_a_dangling_one_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let real = fs::canonicalize(dir.path()).unwrap().join("f");
        fs::write(&real, "x").unwrap();
        let link = dir.path().join("l");
        symlink(&real, &link).unwrap();
        let (path, meta) = resolve(&link).unwrap().unwrap();
        assert_eq!(path, real);
        assert!(meta.is_file());
        symlink(dir.path().join("nowhere"), dir.path().join("d")).unwrap();
        assert!(resolve(&dir.path().join("d")).unwrap().is_none());
        assert!(resolve(&real.join("sub")).unwrap().is_none());
    }

    #[test]
    fn missing_ancestors_lists_what_mkdir_p_creates_or_what_blocks_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a/b/c");
        let (missing, blocker) = missing_ancestors(&target).unwrap();
        let want: Vec<PathBuf> = ["a", "a/b", "a/b/c"]
            .iter()
            .map(|p| dir.path().join(p))
            .collect();
        assert_eq!(missing, want);
        assert_eq!(blocker, None);

        fs::write(dir.path().join("a"), "x").unwrap();
        let (_, blocker) = missing_ancestors(&target).unwrap();
        assert_eq!(blocker, Some(dir.path().join("a")));

        fs::remove_file(dir.path().join("a")).unwrap();
        symlink(dir.path().join("nowhere"), dir.path().join("a")).unwrap();
        let (_, blocker) = missing_ancestors(&target).unwrap();
        assert_eq!(
            blocker,
            Some(dir.path().join("a")),
            "a dangling link blocks"
        );
    }

    #[test]
    fn expand_user_follows_python() {
        // Compared as text: `Path` equality ignores doubled slashes, Python's result does not have them.
        let ex = |path: &str, home: Option<&str>| {
            expand_user_with(path, || home.map(OsString::from))
                .into_os_string()
                .into_string()
                .unwrap()
        };
        assert_eq!(ex("~/a", Some("/home/x/")), "/home/x/a");
        assert_eq!(ex("~", Some("/home/x")), "/home/x");
        assert_eq!(ex("~/a", Some("/")), "/a");
        assert_eq!(ex("~", Some("/")), "/");
        assert_eq!(ex("~", Some("")), "/");
        assert_eq!(ex("a~", Some("/home/x")), "a~");
        assert_eq!(ex("/~/a", Some("/home/x")), "/~/a");
        assert_eq!(
            ex("~no_such_user_fp/a", Some("/home/x")),
            "~no_such_user_fp/a"
        );
        let root = nix::unistd::User::from_name("root").unwrap().unwrap().dir;
        assert_eq!(
            PathBuf::from(ex("~root/a", Some("/home/x"))),
            root.join("a")
        );
        // Without $HOME, the current user's entry in the password database.
        let me = nix::unistd::User::from_uid(nix::unistd::getuid())
            .unwrap()
            .unwrap()
            .dir;
        assert_eq!(PathBuf::from(ex("~/a", None)), me.join("a"));
    }

    #[test]
    fn expand_user_reads_home_from_the_process_environment() {
        assert_eq!(expand_user("a~"), PathBuf::from("a~"));
        if let Some(h) = std::env::var_os("HOME").filter(|h| h.len() > 1) {
            let h = PathBuf::from(h);
            assert_eq!(expand_user("~/x"), h.join("x"));
        }
    }
}
