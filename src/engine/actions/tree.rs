//! `copy` of a controller directory: the tree under `src` is walked here, each file hashed (as
//! a single `copy src:` is, see `upload.rs`), and the list goes to the agent's `copy_tree`
//! (`modules/src/copy_tree.rs`), which asks in one answer for every content the host lacks.
//!
//! As Ansible's copy action: `src: dir` copies the directory itself into `dest/`, `src: dir/`
//! its contents; symlinks in the source are followed (`local_follow`'s default), a link to a
//! file is copied as that file and a link to a directory as that directory. With
//! `local_follow: false` Ansible recreates the links on the host, which `copy_tree` cannot: a
//! tree holding one is refused then, and one without links is copied the same either way.

use super::upload::Upload;
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// Fill `params` of a `copy` whose `src` (as written: `src_text`) is the controller directory
/// `dir` for the agent's `copy_tree`; returns the files it may ask for. With `decrypt`, a
/// vault-encrypted file travels as its plain text (`vault::plain`).
pub fn prepare(
    params: &mut Map<String, Value>,
    src_text: &str,
    dir: &Path,
    follow: bool,
    decrypt: bool,
) -> Result<Vec<Upload>, super::prepare::Failure> {
    let fail = |msg: String| super::prepare::Failure {
        msg,
        result: Map::new(),
    };
    if params.contains_key("content") {
        return Err(fail("src and content are mutually exclusive".into()));
    }
    let contents_only = src_text.ends_with('/');
    let mut walk = Walk {
        follow,
        decrypt,
        ..Walk::default()
    };
    let top = if contents_only {
        String::new()
    } else {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| fail(format!("`{src_text}` has no directory name to copy")))?;
        walk.dirs.push(name.clone());
        name
    };
    let meta = std::fs::metadata(dir).map_err(|e| fail(format!("{}: {e}", dir.display())))?;
    walk.ancestors.insert((meta.dev(), meta.ino()));
    walk.dir(dir, &top).map_err(fail)?;

    let files: Vec<Value> = walk
        .files
        .iter()
        .map(|(rel, up, mode)| {
            json!({"rel": rel, "sha256": up.sha256, "sha1": up.sha1, "size": up.size, "mode": mode})
        })
        .collect();
    params.insert("_tree".into(), json!({"dirs": walk.dirs, "files": files}));
    // Ansible's result names the directory it found, with the slash the task wrote.
    let shown = crate::vars::magic::abs(dir);
    let shown = shown.trim_end_matches('/');
    params.insert(
        "src".into(),
        json!(if contents_only {
            format!("{shown}/")
        } else {
            shown.to_string()
        }),
    );
    if let Some(Value::String(dest)) = params.get_mut("dest") {
        if !dest.ends_with('/') {
            dest.push('/');
        }
    }
    Ok(walk.files.into_iter().map(|(_, up, _)| up).collect())
}

#[derive(Default)]
struct Walk {
    dirs: Vec<String>,
    /// Path below `dest`, the hashed file, its permission bits.
    files: Vec<(String, Upload, u32)>,
    /// The directories being walked (device, inode): a link back to one is a loop.
    ancestors: HashSet<(u64, u64)>,
    /// `local_follow`: links are followed; otherwise one is refused (see the module's comment).
    follow: bool,
    /// `decrypt`: vault-encrypted files travel decrypted.
    decrypt: bool,
}

impl Walk {
    /// Walk `dir`, whose entries go below `rel` (parents before children, names in order).
    fn dir(&mut self, dir: &Path, rel: &str) -> Result<(), String> {
        let err = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| err(dir, e))?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()
            .map_err(|e| err(dir, e))?;
        names.sort();
        for name in names {
            let path = dir.join(&name);
            let name = name.to_str().ok_or_else(|| {
                format!(
                    "{}: a name that is not UTF-8 cannot be copied",
                    path.display()
                )
            })?;
            let sub = if rel.is_empty() {
                name.to_string()
            } else {
                format!("{rel}/{name}")
            };
            if !self.follow && path.is_symlink() {
                return Err(no_follow(&path));
            }
            // Links are followed, as Ansible's `local_follow: true` (its default) does.
            let meta = match std::fs::metadata(&path) {
                Ok(m) => m,
                Err(_) if path.is_symlink() => {
                    return Err(format!(
                        "{} is a symlink to nothing; fixpoint does not copy symlinks (Ansible \
                         would create the link)",
                        path.display()
                    ))
                }
                Err(e) => return Err(err(&path, e)),
            };
            if meta.is_dir() {
                let id = (meta.dev(), meta.ino());
                if !self.ancestors.insert(id) {
                    return Err(format!(
                        "{} links back to a directory being copied; fixpoint does not copy \
                         symlinks (Ansible would create the link)",
                        path.display()
                    ));
                }
                self.dirs.push(sub.clone());
                self.dir(&path, &sub)?;
                self.ancestors.remove(&id);
            } else if meta.is_file() {
                let mut up = match self.decrypt {
                    true => Upload::of(&crate::vault::plain::plain_path(&path)?)?,
                    false => Upload::of(&path)?,
                };
                up.rel = Some(sub.clone());
                self.files
                    .push((sub, up, meta.permissions().mode() & 0o7777));
            } else {
                return Err(format!(
                    "{} is not a regular file or directory; it cannot be copied",
                    path.display()
                ));
            }
        }
        Ok(())
    }
}

/// The refusal of a link under `local_follow: false`.
pub fn no_follow(path: &Path) -> String {
    format!(
        "{} is a symlink and `local_follow` is false: Ansible would create the link on the host, \
         which fixpoint's copy does not do; drop `local_follow: false` to copy what it points to",
        path.display()
    )
}
