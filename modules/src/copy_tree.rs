//! `copy` of a directory tree from the controller, agent side: the controller walks `src` and
//! sends the list of directories and files (each file by its sha256, sha1, size and mode); this
//! module probes every destination entry, plans per entry (create a directory, set attributes,
//! write a file whose content differs) and applies exactly that, with Ansible's semantics.
//!
//! Ansible's copy action copies `src: dir` as `dest/dir/...` and `src: dir/` as `dest/...`; each
//! file goes through the copy module (`mode`, `owner`, `group`, `force`, `backup`, `validate`;
//! a new file gets `0666 & ~umask` unless `mode` is given), every directory of the source tree
//! through the file module (`directory_mode`, `owner`, `group`, applied to existing directories
//! too), and destination directories that do not exist yet are created with `directory_mode`.
//!
//! The content of the files that differ travels in one go: the plan asks for all of them at
//! once (`ModuleError::NeedContents`), the agent stages each (`fs::stage`), the controller sends
//! them, then repeats the request, whose probe and plan find them staged. A symlink inside the
//! destination tree is never followed: a link where a file goes is replaced by the file (as
//! Ansible's copy does), a link where a directory goes is refused.

use crate::fs::{
    atomic_write_from, backup_file, current_umask, expand_user, group_name, id_of, install_staged,
    locate, lookup_gid, lookup_uid, lstat, meta_info, missing_ancestors, mkdir_at, mode_str,
    path_info, set_attrs_at, stage, user_name, Attrs, Loc,
};
use crate::params::{de_opt_string, Bool, ModeSpec};
use crate::text::{diff_skipped, diff_text, MAX_DIFF_SIZE};
use crate::{ContentDiff, Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{Map, Value};
use sha2::Digest as _;
use std::collections::{HashMap, HashSet};
use std::fs::{self, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

pub struct CopyTree;

fn default_true() -> Bool {
    Bool(true)
}

/// One file of the controller's tree.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeFile {
    /// Its path below `dest`.
    pub rel: String,
    pub sha256: String,
    /// sha1 (hex): the result's `checksum` when the tree has one file.
    pub sha1: String,
    pub size: u64,
    /// Its permission bits on the controller, for `mode: preserve`.
    pub mode: u32,
}

/// What the controller found under `src`: directories (parents before children) and files.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tree {
    #[serde(default)]
    pub dirs: Vec<String>,
    #[serde(default)]
    pub files: Vec<TreeFile>,
}

/// Parameters as the agent receives them: the task's `copy` parameters, with `src` walked.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(rename = "_tree")]
    pub tree: Tree,
    /// The controller's directory, for the result.
    #[serde(default, deserialize_with = "de_opt_string")]
    pub src: Option<String>,
    #[serde(deserialize_with = "de_string")]
    pub dest: String,
    #[serde(default)]
    pub remote_src: Bool,
    #[serde(default)]
    pub mode: Option<ModeSpec>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub owner: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub group: Option<String>,
    #[serde(default)]
    pub backup: Bool,
    #[serde(default = "default_true", alias = "thirsty")]
    pub force: Bool,
    #[serde(default)]
    pub validate: Option<String>,
    /// Accepted; Ansible does not follow a link at a file's place when it copies a tree with
    /// directories, and fixpoint never does (the link is replaced by the file).
    #[serde(default)]
    pub follow: Bool,
    #[serde(default)]
    pub directory_mode: Option<ModeSpec>,
}

fn de_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    de_opt_string(d)?.ok_or_else(|| serde::de::Error::custom("expected a path, found null"))
}

/// One step of the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Mkdir {
        at: Loc,
        attrs: Attrs,
    },
    SetAttrs {
        at: Loc,
        attrs: Attrs,
    },
    /// Write file `index` of the tree at `at` (atomically; the old file or link is replaced).
    Write {
        index: usize,
        at: Loc,
        attrs: Attrs,
        backup: bool,
    },
}

/// A destination directory of the tree as probed.
#[derive(Debug)]
pub struct DirState {
    pub path: PathBuf,
    /// lstat; None: missing (or below a missing directory).
    pub prev: Option<Metadata>,
}

/// A destination file as probed.
#[derive(Debug)]
pub struct FileState {
    pub path: PathBuf,
    /// lstat; None: missing.
    pub prev: Option<Metadata>,
    /// A symlink is there: it is replaced by the file.
    pub replace_link: bool,
    /// sha256 and size of the regular file there.
    pub before: Option<(String, u64)>,
    pub before_text: Option<String>,
    /// `force: false` and something is there.
    pub skip: bool,
}

#[derive(Debug)]
pub struct Probed {
    /// `dest`, `~` expanded.
    pub root: PathBuf,
    /// `dest` and its missing parents, outermost first, when `dest` does not exist.
    pub new_root_dirs: Vec<PathBuf>,
    pub dirs: Vec<DirState>,
    pub files: Vec<FileState>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub umask: u32,
}

/// A relative path of the tree: not empty, not absolute, no `.` or `..`.
fn check_rel(rel: &str) -> Result<(), ModuleError> {
    let ok = !rel.is_empty()
        && Path::new(rel)
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
    if ok {
        Ok(())
    } else {
        Err(ModuleError::Params(format!(
            "`_tree` holds `{rel}`, which is not a plain relative path"
        )))
    }
}

/// The directory part of a tree path (`""` at the top).
fn parent_rel(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(p, _)| p)
}

impl Module for CopyTree {
    type Params = Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if p.dest.trim().is_empty() {
            return Err(ModuleError::Params("`dest` must not be empty".into()));
        }
        if p.remote_src.0 {
            return Err(ModuleError::Params(
                "a tree from the controller cannot have `remote_src: true`".into(),
            ));
        }
        if p.directory_mode == Some(ModeSpec::Preserve) {
            return Err(ModuleError::Params(
                "`directory_mode: preserve` is not supported; give a mode like \"0755\"".into(),
            ));
        }
        if let Some(v) = &p.validate {
            if !v.contains("%s") {
                return Err(ModuleError::Params(format!(
                    "validate must contain %s: {v}"
                )));
            }
        }
        let mut dirs = HashSet::new();
        for d in &p.tree.dirs {
            check_rel(d)?;
            let parent = parent_rel(d);
            if !parent.is_empty() && !dirs.contains(parent) {
                return Err(ModuleError::Params(format!(
                    "`_tree` names directory `{d}` before its parent"
                )));
            }
            dirs.insert(d.as_str());
        }
        for f in &p.tree.files {
            check_rel(&f.rel)?;
            let parent = parent_rel(&f.rel);
            if !parent.is_empty() && !dirs.contains(parent) {
                return Err(ModuleError::Params(format!(
                    "`_tree` names file `{}` outside its directories",
                    f.rel
                )));
            }
            if f.sha256.len() != 64 || !f.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(ModuleError::Params(format!(
                    "`_tree` file `{}` has no sha256 in hex",
                    f.rel
                )));
            }
        }
        Ok(())
    }

    fn probe(p: &Params, ctx: &Ctx) -> Result<Probed, ModuleError> {
        let root = expand_user(p.dest.trim_end_matches('/'));
        let root = if root.as_os_str().is_empty() {
            PathBuf::from("/")
        } else {
            root
        };
        let empty = p.tree.dirs.is_empty() && p.tree.files.is_empty();
        let mut new_root_dirs = Vec::new();
        let root_missing = match fs::metadata(&root) {
            Ok(m) if m.is_dir() => false,
            Ok(_) => {
                return Err(ModuleError::failed(format!(
                    "dest {} exists and is not a directory; a directory is copied into a directory",
                    root.display()
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Created only when something goes into it (an empty `src/` creates nothing,
                // as in Ansible).
                if !empty {
                    let (missing, blocker) = missing_ancestors(&root)?;
                    if let Some(b) = blocker {
                        return Err(ModuleError::failed(format!(
                            "cannot create directory {}: {} exists and is not a directory",
                            root.display(),
                            b.display()
                        )));
                    }
                    new_root_dirs = missing;
                }
                true
            }
            Err(e) => return Err(ModuleError::io(&root, e)),
        };

        // Which tree directories are missing: their contents are not looked at.
        let mut missing: HashSet<&str> = HashSet::new();
        let parent_missing = |rel: &str, missing: &HashSet<&str>| {
            let parent = parent_rel(rel);
            if parent.is_empty() {
                root_missing
            } else {
                missing.contains(parent)
            }
        };
        let mut dirs = Vec::with_capacity(p.tree.dirs.len());
        for rel in &p.tree.dirs {
            let path = root.join(rel);
            let prev = if parent_missing(rel, &missing) {
                None
            } else {
                lstat(&path)?
            };
            match &prev {
                None => {
                    missing.insert(rel);
                }
                Some(m) if m.is_dir() => {}
                Some(m) => {
                    let what = if m.file_type().is_symlink() {
                        "is a symlink (fixpoint does not follow links inside a copied tree)"
                    } else {
                        "exists and is not a directory"
                    };
                    return Err(ModuleError::failed(format!("{} {what}", path.display())));
                }
            }
            dirs.push(DirState { path, prev });
        }

        let mut files = Vec::with_capacity(p.tree.files.len());
        for f in &p.tree.files {
            let path = root.join(&f.rel);
            let prev = if parent_missing(&f.rel, &missing) {
                None
            } else {
                lstat(&path)?
            };
            // Ansible: `force: false` leaves an existing file alone (a dangling link does not exist).
            let skip = !p.force.0 && prev.is_some() && fs::metadata(&path).is_ok();
            let replace_link = prev.as_ref().is_some_and(|m| m.file_type().is_symlink());
            let before = match &prev {
                Some(_) if replace_link || skip => None,
                Some(m) if m.is_file() => Some(sha256_of_file(&path)?),
                Some(m) if m.is_dir() => {
                    return Err(ModuleError::failed(format!(
                        "{} is a directory, where the copy puts the file {}",
                        path.display(),
                        f.rel
                    )))
                }
                Some(_) => {
                    return Err(ModuleError::failed(format!(
                        "{} exists and is not a regular file; remove it first",
                        path.display()
                    )))
                }
                None => None,
            };
            let before_text = match &before {
                Some((_, n)) if ctx.diff && *n > MAX_DIFF_SIZE => Some(diff_skipped(*n)),
                Some(_) if ctx.diff => Some(diff_text(
                    &fs::read(&path).map_err(|e| ModuleError::io(&path, e))?,
                )),
                _ => None,
            };
            files.push(FileState {
                path,
                prev,
                replace_link,
                before,
                before_text,
                skip,
            });
        }

        Ok(Probed {
            root,
            new_root_dirs,
            dirs,
            files,
            uid: p.owner.as_deref().map(lookup_uid).transpose()?,
            gid: p.group.as_deref().map(lookup_gid).transpose()?,
            umask: current_umask(),
        })
    }

    fn plan(p: &Params, st: &Probed, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let mut plan = Plan::new();
        let dir_mode = |current: u32| -> Result<Option<u32>, ModuleError> {
            match &p.directory_mode {
                Some(spec) => spec.resolve(current, true).map_err(ModuleError::Params),
                None => Ok(None),
            }
        };
        let default_dir = 0o777 & !st.umask;
        let new_dir = |plan: &mut Plan<Action>, path: &Path| -> Result<(), ModuleError> {
            plan.diff
                .attr(path.display().to_string(), "state", "absent", "directory");
            plan.actions.push(Action::Mkdir {
                at: locate(path, None)?,
                attrs: Attrs {
                    mode: dir_mode(default_dir)?,
                    uid: st.uid,
                    gid: st.gid,
                },
            });
            Ok(())
        };
        for d in &st.new_root_dirs {
            new_dir(&mut plan, d)?;
        }
        for d in &st.dirs {
            let Some(m) = &d.prev else {
                new_dir(&mut plan, &d.path)?;
                continue;
            };
            let shown = d.path.display().to_string();
            let cur = m.mode() & 0o7777;
            let attrs = Attrs {
                mode: dir_mode(cur)?.filter(|w| *w != cur),
                uid: st.uid.filter(|u| *u != m.uid()),
                gid: st.gid.filter(|g| *g != m.gid()),
            };
            diff_attrs(&mut plan, &shown, m, &attrs);
            if attrs != Attrs::default() {
                plan.actions.push(Action::SetAttrs {
                    at: locate(&d.path, Some(id_of(m)))?,
                    attrs,
                });
            }
        }

        let default_mode = 0o666 & !st.umask;
        // Contents the host lacks, to be sent before anything is written.
        let mut wanted: Vec<(PathBuf, String, u64)> = Vec::new();
        let mut asked: HashSet<&str> = HashSet::new();
        for (index, (f, src)) in st.files.iter().zip(&p.tree.files).enumerate() {
            if f.skip {
                continue;
            }
            let shown = f.path.display().to_string();
            let cur = if f.replace_link {
                None
            } else {
                f.prev.as_ref()
            };
            let cur_mode = cur.map_or(default_mode, |m| m.mode() & 0o7777);
            let wanted_mode = match &p.mode {
                None => None,
                Some(ModeSpec::Preserve) => Some(src.mode & 0o7777),
                Some(spec) => spec.resolve(cur_mode, false).map_err(ModuleError::Params)?,
            };
            let content_changes = cur.is_none()
                || f.before
                    .as_ref()
                    .is_none_or(|(sum, n)| *sum != src.sha256 || *n != src.size);
            let attrs = match cur {
                Some(m) => {
                    let mut a = Attrs {
                        mode: wanted_mode.filter(|w| *w != cur_mode),
                        uid: st.uid.filter(|u| *u != m.uid()),
                        gid: st.gid.filter(|g| *g != m.gid()),
                    };
                    diff_attrs(&mut plan, &shown, m, &a);
                    // The kernel drops setuid/setgid on chown; ask for the bits again.
                    if (a.uid.is_some() || a.gid.is_some()) && cur_mode & 0o6000 != 0 {
                        a.mode.get_or_insert(wanted_mode.unwrap_or(cur_mode));
                    }
                    a
                }
                None => {
                    let before = if f.replace_link { "link" } else { "absent" };
                    plan.diff.attr(&shown, "state", before, "file");
                    if let Some(m) = wanted_mode {
                        plan.diff.attr(&shown, "mode", "", mode_str(m));
                    }
                    // A replaced link's target must not lend the file its owner or group.
                    let own = |want: Option<u32>, natural: u32| {
                        want.or(f.replace_link.then_some(natural))
                    };
                    Attrs {
                        mode: Some(wanted_mode.unwrap_or(default_mode)),
                        uid: own(st.uid, nix::unistd::geteuid().as_raw()),
                        gid: own(st.gid, nix::unistd::getegid().as_raw()),
                    }
                }
            };
            if content_changes {
                plan.diff.content.push(ContentDiff {
                    path: shown.clone(),
                    before: f.before_text.clone().unwrap_or_default(),
                    // The controller fills in the new text: it has the file.
                    after: String::new(),
                });
                let at = locate(&f.path, f.prev.as_ref().map(id_of))?;
                if !ctx.check && !stage::ready(&src.sha256) && asked.insert(&src.sha256) {
                    wanted.push((at.dir.clone(), src.sha256.clone(), src.size));
                }
                plan.actions.push(Action::Write {
                    index,
                    at,
                    attrs,
                    backup: p.backup.0 && f.before.is_some(),
                });
            } else if attrs != Attrs::default() {
                plan.actions.push(Action::SetAttrs {
                    at: locate(&f.path, f.prev.as_ref().map(id_of))?,
                    attrs,
                });
            }
        }
        if !wanted.is_empty() {
            return Err(ModuleError::NeedContents(wanted));
        }

        let changed = !plan.actions.is_empty();
        let r = &mut plan.result;
        if let ([f], []) = (&p.tree.files[..], &p.tree.dirs[..]) {
            // One file at the top of the tree: Ansible returns that file's copy result.
            let probed = &st.files[0];
            r.insert("dest".into(), probed.path.display().to_string().into());
            if !changed {
                if let Some(m) = &probed.prev {
                    r.extend(meta_info(m));
                }
            }
            r.insert("state".into(), "file".into());
            r.insert("checksum".into(), f.sha1.clone().into());
            r.insert("size".into(), f.size.into());
        } else {
            r.insert("dest".into(), format!("{}/", display_root(&st.root)).into());
        }
        if let Some(src) = &p.src {
            r.insert("src".into(), src.clone().into());
        }
        r.insert("changed".into(), changed.into());
        Ok(plan)
    }

    fn apply(
        p: &Params,
        st: Probed,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        // Where each content was installed: a second file with the same content copies it.
        let mut installed: HashMap<&str, PathBuf> = HashMap::new();
        let mut backups = Vec::new();
        for action in &plan.actions {
            match action {
                Action::Mkdir { at, attrs } => {
                    mkdir_at(at, 0o777)?;
                    set_attrs_at(at, attrs)?;
                }
                Action::SetAttrs { at, attrs } => set_attrs_at(at, attrs)?,
                Action::Write {
                    index,
                    at,
                    attrs,
                    backup,
                } => {
                    let src = &p.tree.files[*index];
                    if *backup {
                        backups.push(backup_file(at)?);
                    }
                    let validate = p.validate.as_deref();
                    match stage::take(&src.sha256) {
                        Some(staged) => install_staged(at, staged, attrs, validate)?,
                        None => {
                            let from = installed.get(src.sha256.as_str()).ok_or_else(|| {
                                ModuleError::failed(format!(
                                    "the uploaded content of {} is no longer staged",
                                    src.rel
                                ))
                            })?;
                            let mut f =
                                fs::File::open(from).map_err(|e| ModuleError::io(from, e))?;
                            atomic_write_from(at, &mut f, attrs, validate)?;
                        }
                    }
                    installed.insert(&src.sha256, st.files[*index].path.clone());
                }
            }
        }
        let mut out = Map::new();
        if let ([_], []) = (&p.tree.files[..], &p.tree.dirs[..]) {
            out = path_info(&st.files[0].path)?;
            out.insert("state".into(), "file".into());
        }
        if let [b] = &backups[..] {
            out.insert("backup_file".into(), b.clone().into());
        }
        Ok(out)
    }
}

fn display_root(root: &Path) -> String {
    let s = root.display().to_string();
    if s == "/" {
        String::new()
    } else {
        s
    }
}

/// Diff lines for the attributes of an existing entry that change.
fn diff_attrs(plan: &mut Plan<Action>, shown: &str, m: &Metadata, a: &Attrs) {
    if let Some(mode) = a.mode {
        plan.diff
            .attr(shown, "mode", mode_str(m.mode() & 0o7777), mode_str(mode));
    }
    if let Some(u) = a.uid {
        plan.diff
            .attr(shown, "owner", user_name(m.uid()), user_name(u));
    }
    if let Some(g) = a.gid {
        plan.diff
            .attr(shown, "group", group_name(m.gid()), group_name(g));
    }
}

/// sha256 (hex) and size of a file, read in chunks.
fn sha256_of_file(path: &Path) -> Result<(String, u64), ModuleError> {
    let mut f = fs::File::open(path).map_err(|e| ModuleError::io(path, e))?;
    let mut h = sha2::Sha256::new();
    let n = std::io::copy(&mut f, &mut h).map_err(|e| ModuleError::io(path, e))?;
    Ok((hex::encode(h.finalize()), n))
}

#[cfg(test)]
#[path = "copy_tree_tests.rs"]
mod tests;
