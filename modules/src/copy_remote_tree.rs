//! `copy` with `remote_src: true` of a directory on the host, with the semantics of Ansible's
//! copy module (`copy_directory`): `src: /a/dir` goes to `dest/dir`, `src: /a/dir/` into `dest`;
//! entries missing from the destination are created with the source's modes (directories and
//! files) and symlinks are recreated as links; a file whose content differs is rewritten and
//! gets the source file's mode; files of the destination that the source lacks stay. `owner` and
//! `group` reach every copied entry; `mode` (like Ansible) only the directory the result names.
//!
//! The registry sends a `copy` here when `remote_src` is true and `src` is a directory on the
//! host (`is_remote_dir`). Probe → plan → apply per entry: only what differs is written
//! (atomically, through directory descriptors), nothing in the destination is followed.

use crate::copy::Params;
use crate::fs::{
    atomic_write_from, current_umask, expand_user, group_name, id_of, locate, lookup_gid,
    lookup_uid, lstat, missing_ancestors, mkdir_at, mode_str, parent_of, set_attrs_at, user_name,
    with_entry, Attrs, Dir, Loc,
};
use crate::params::ModeSpec;
use crate::{Ctx, Module, ModuleError, Plan};
use serde_json::{Map, Value};
use std::fs::{self, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

pub struct CopyRemoteTree;

/// Whether a `copy` request names a directory on the host as its source.
pub fn is_remote_dir(params: &Value) -> bool {
    let remote = params
        .get("remote_src")
        .and_then(|v| serde_json::from_value::<crate::params::Bool>(v.clone()).ok())
        .is_some_and(|b| b.0);
    remote
        && params
            .get("src")
            .and_then(Value::as_str)
            .is_some_and(|s| fs::metadata(expand_user(s)).is_ok_and(|m| m.is_dir()))
}

/// One entry of the source tree.
#[derive(Debug)]
pub enum Kind {
    Dir { mode: u32 },
    File { mode: u32, path: PathBuf },
    Link { target: PathBuf },
}

#[derive(Debug)]
pub struct Entry {
    pub dest: PathBuf,
    pub kind: Kind,
    /// lstat of the destination entry.
    pub prev: Option<Metadata>,
    /// A file whose content differs from the destination's.
    pub differs: bool,
}

#[derive(Debug)]
pub struct Probed {
    /// Missing directories above the copy (outermost first) and their mode.
    pub new_dirs: Vec<(PathBuf, Option<u32>)>,
    /// The copy's top (`dest/dir`, or `dest` for `src/`), created when missing with this mode.
    pub top: PathBuf,
    pub top_prev: Option<Metadata>,
    pub top_mode: u32,
    pub entries: Vec<Entry>,
    /// The directory the result names, which gets `mode`.
    pub shown: String,
    pub shown_path: PathBuf,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Mkdir {
        at: Loc,
        attrs: Attrs,
    },
    Write {
        at: Loc,
        from: PathBuf,
        attrs: Attrs,
    },
    Link {
        at: Loc,
        target: PathBuf,
        attrs: Attrs,
    },
    SetAttrs {
        at: Loc,
        attrs: Attrs,
    },
}

fn same_content(a: &Path, b: &Path) -> Result<bool, ModuleError> {
    use std::io::Read;
    let open = |p: &Path| fs::File::open(p).map_err(|e| ModuleError::io(p, e));
    let (mut fa, mut fb) = (open(a)?, open(b)?);
    let mut ba = vec![0u8; 1 << 16];
    let mut bb = vec![0u8; 1 << 16];
    loop {
        let n = fa.read(&mut ba).map_err(|e| ModuleError::io(a, e))?;
        let mut got = 0;
        while got < n {
            let m = fb
                .read(&mut bb[got..n])
                .map_err(|e| ModuleError::io(b, e))?;
            if m == 0 {
                return Ok(false);
            }
            got += m;
        }
        if ba[..n] != bb[..n] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(fb.read(&mut bb[..1]).map_err(|e| ModuleError::io(b, e))? == 0);
        }
    }
}

/// Walk `dir` (names in order, parents first, links not followed) into `out` below `dest`.
fn walk(dir: &Path, dest: &Path, out: &mut Vec<(PathBuf, Kind)>) -> Result<(), ModuleError> {
    let mut names: Vec<_> = fs::read_dir(dir)
        .map_err(|e| ModuleError::io(dir, e))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()
        .map_err(|e| ModuleError::io(dir, e))?;
    names.sort();
    for name in names {
        let path = dir.join(&name);
        let to = dest.join(&name);
        let m = fs::symlink_metadata(&path).map_err(|e| ModuleError::io(&path, e))?;
        let mode = m.mode() & 0o7777;
        if m.file_type().is_symlink() {
            let target = fs::read_link(&path).map_err(|e| ModuleError::io(&path, e))?;
            out.push((to, Kind::Link { target }));
        } else if m.is_dir() {
            out.push((to.clone(), Kind::Dir { mode }));
            walk(&path, &to, out)?;
        } else if m.is_file() {
            out.push((to, Kind::File { mode, path }));
        } else {
            return Err(ModuleError::failed(format!(
                "{} is not a regular file, directory or symlink; it cannot be copied",
                path.display()
            )));
        }
    }
    Ok(())
}

impl Module for CopyRemoteTree {
    type Params = Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        crate::copy::Copy::validate(p)?;
        if p.mode == Some(ModeSpec::Preserve) {
            return Err(ModuleError::Params(
                "`mode: preserve` with a directory on the host is not supported; the copied \
                 files keep their source modes anyway"
                    .into(),
            ));
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Probed, ModuleError> {
        let src_text = p.src.as_deref().unwrap_or_default();
        let src = expand_user(src_text);
        let contents = src_text.ends_with('/');
        let dest_text = p.dest.as_str();
        let dest = expand_user(dest_text.trim_end_matches('/'));
        let umask = current_umask();
        let dest_is_dir = match fs::metadata(&dest) {
            Ok(m) if m.is_dir() => true,
            Ok(_) => {
                return Err(ModuleError::failed(format!(
                    "dest {} exists and is not a directory",
                    dest.display()
                )))
            }
            Err(_) => false,
        };
        let mut new_dirs = Vec::new();
        if !dest_is_dir {
            if dest_text.ends_with('/') {
                // Ansible makes a `dest/` that is missing, with `directory_mode`.
                let (missing, blocker) = missing_ancestors(&dest)?;
                if let Some(b) = blocker {
                    return Err(ModuleError::failed(format!(
                        "cannot create directory {}: {} exists and is not a directory",
                        dest.display(),
                        b.display()
                    )));
                }
                let mode = match &p.directory_mode {
                    Some(spec) => spec
                        .resolve(0o777 & !umask, true)
                        .map_err(ModuleError::Params)?,
                    None => None,
                };
                new_dirs = missing.into_iter().map(|d| (d, mode)).collect();
            } else if !parent_of(&dest).is_dir() {
                return Err(ModuleError::failed(format!(
                    "Destination directory {} does not exist",
                    parent_of(&dest).display()
                )));
            }
        }
        let name = src
            .file_name()
            .map(|n| n.to_os_string())
            .unwrap_or_default();
        let top = if contents {
            dest.clone()
        } else {
            dest.join(&name)
        };
        let (shown, shown_path) = if dest_is_dir || dest_text.ends_with('/') {
            if contents {
                (format!("{}/", dest.display()), dest.clone())
            } else {
                (top.display().to_string(), top.clone())
            }
        } else {
            (dest_text.to_string(), dest.clone())
        };
        let top_prev = if dest_is_dir { lstat(&top)? } else { None };
        if let Some(m) = &top_prev {
            if !m.is_dir() {
                return Err(ModuleError::failed(format!(
                    "{} exists and is not a directory",
                    top.display()
                )));
            }
        }
        let src_meta = fs::metadata(&src).map_err(|e| ModuleError::io(&src, e))?;
        if !contents && !dest_is_dir && !dest_text.ends_with('/') {
            // `dest` itself is new: made as a plain directory, then given `mode` below.
            new_dirs.push((dest.clone(), None));
        }
        let mut found = Vec::new();
        walk(&src, &top, &mut found)?;
        let mut entries = Vec::with_capacity(found.len());
        for (to, kind) in found {
            let prev = if top_prev.is_some() {
                lstat(&to)?
            } else {
                None
            };
            let differs = match (&kind, &prev) {
                (_, None) => true,
                (Kind::Dir { .. }, Some(m)) if m.is_dir() => false,
                (Kind::File { path, .. }, Some(m)) if m.is_file() => !same_content(path, &to)?,
                // A link of the destination stays as it is.
                (Kind::Link { .. }, Some(_)) => false,
                (_, Some(_)) => {
                    return Err(ModuleError::failed(format!(
                        "{} exists and is not what the source has there",
                        to.display()
                    )))
                }
            };
            entries.push(Entry {
                dest: to,
                kind,
                prev,
                differs,
            });
        }
        Ok(Probed {
            new_dirs,
            top,
            top_prev,
            top_mode: src_meta.mode() & 0o7777,
            entries,
            shown,
            shown_path,
            uid: p.owner.as_deref().map(lookup_uid).transpose()?,
            gid: p.group.as_deref().map(lookup_gid).transpose()?,
        })
    }

    fn plan(p: &Params, st: &Probed, _ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let mut plan = Plan::new();
        let (uid, gid) = (st.uid, st.gid);
        let mkdir = |plan: &mut Plan<Action>, path: &Path, mode: Option<u32>| {
            plan.diff
                .attr(path.display().to_string(), "state", "absent", "directory");
            Ok::<_, ModuleError>(Action::Mkdir {
                at: locate(path, None)?,
                attrs: Attrs { mode, uid, gid },
            })
        };
        for (d, mode) in &st.new_dirs {
            let a = mkdir(&mut plan, d, *mode)?;
            plan.actions.push(a);
        }
        if st.top_prev.is_none() && !st.new_dirs.iter().any(|(d, _)| *d == st.top) {
            let a = mkdir(&mut plan, &st.top, Some(st.top_mode))?;
            plan.actions.push(a);
        }
        // Owner and group of what exists already (Ansible's chown_recursive).
        let chown = |plan: &mut Plan<Action>, path: &Path, m: &Metadata| {
            let a = Attrs {
                mode: None,
                uid: uid.filter(|u| *u != m.uid()),
                gid: gid.filter(|g| *g != m.gid()),
            };
            let shown = path.display().to_string();
            if let Some(u) = a.uid {
                plan.diff
                    .attr(&shown, "owner", user_name(m.uid()), user_name(u));
            }
            if let Some(g) = a.gid {
                plan.diff
                    .attr(&shown, "group", group_name(m.gid()), group_name(g));
            }
            Ok::<_, ModuleError>(a)
        };
        if let Some(m) = &st.top_prev {
            let a = chown(&mut plan, &st.top, m)?;
            if a != Attrs::default() {
                plan.actions.push(Action::SetAttrs {
                    at: locate(&st.top, Some(id_of(m)))?,
                    attrs: a,
                });
            }
        }
        for e in &st.entries {
            let shown = e.dest.display().to_string();
            match (&e.kind, &e.prev) {
                (Kind::Dir { mode }, None) => {
                    let a = mkdir(&mut plan, &e.dest, Some(*mode))?;
                    plan.actions.push(a);
                }
                (Kind::File { mode, path }, prev) if e.differs => {
                    let before = if prev.is_some() { "file" } else { "absent" };
                    plan.diff.attr(&shown, "state", before, "file");
                    plan.actions.push(Action::Write {
                        at: locate(&e.dest, prev.as_ref().map(id_of))?,
                        from: path.clone(),
                        attrs: Attrs {
                            mode: Some(*mode),
                            uid: uid.or_else(|| prev.as_ref().map(|m| m.uid())),
                            gid: gid.or_else(|| prev.as_ref().map(|m| m.gid())),
                        },
                    });
                }
                (Kind::Link { target }, None) => {
                    plan.diff.attr(&shown, "state", "absent", "link");
                    plan.actions.push(Action::Link {
                        at: locate(&e.dest, None)?,
                        target: target.clone(),
                        attrs: Attrs {
                            mode: None,
                            uid,
                            gid,
                        },
                    });
                }
                // A link the destination has stays as it is.
                (Kind::Link { .. }, Some(_)) => {}
                (_, Some(m)) => {
                    let a = chown(&mut plan, &e.dest, m)?;
                    if a != Attrs::default() {
                        plan.actions.push(Action::SetAttrs {
                            at: locate(&e.dest, Some(id_of(m)))?,
                            attrs: a,
                        });
                    }
                }
                (_, None) => unreachable!("a missing file differs"),
            }
        }
        // `mode` goes to the directory the result names, as Ansible's last step does.
        if let Some(spec) = &p.mode {
            // The named directory is `top`, or a `dest` the plan creates.
            let existed = if st.shown_path == st.top {
                st.top_prev.as_ref()
            } else {
                None
            };
            let cur = existed.map_or(0o777 & !current_umask(), |m| m.mode() & 0o7777);
            if let Some(want) = spec.resolve(cur, true).map_err(ModuleError::Params)? {
                let new = existed.is_none();
                if new || want != cur {
                    if !new {
                        plan.diff
                            .attr(&st.shown, "mode", mode_str(cur), mode_str(want));
                    }
                    plan.actions.push(Action::SetAttrs {
                        at: locate(&st.shown_path, existed.map(id_of))?,
                        attrs: Attrs {
                            mode: Some(want),
                            uid: None,
                            gid: None,
                        },
                    });
                }
            }
        }
        let changed = !plan.actions.is_empty();
        plan.result.insert("dest".into(), st.shown.clone().into());
        if let Some(src) = &p.src {
            plan.result.insert("src".into(), src.clone().into());
        }
        plan.result.insert("checksum".into(), Value::Null);
        plan.result.insert("changed".into(), changed.into());
        Ok(plan)
    }

    fn apply(
        _: &Params,
        _: Probed,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        for action in &plan.actions {
            match action {
                Action::Mkdir { at, attrs } => {
                    mkdir_at(at, 0o777)?;
                    set_attrs_at(at, attrs)?;
                }
                Action::Write { at, from, attrs } => {
                    let mut f = fs::File::open(from).map_err(|e| ModuleError::io(from, e))?;
                    atomic_write_from(at, &mut f, attrs, None)?;
                }
                Action::Link { at, target, attrs } => {
                    let dir = Dir::open(&at.dir)?;
                    dir.symlink(target, &at.name)
                        .map_err(|e| ModuleError::io(dir.at(&at.name), e))?;
                    if attrs.uid.is_some() || attrs.gid.is_some() {
                        with_entry(at, true, |h| h.chown(attrs.uid, attrs.gid))?;
                    }
                }
                Action::SetAttrs { at, attrs } => set_attrs_at(at, attrs)?,
            }
        }
        Ok(Map::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::run_module;
    use serde_json::json;
    use std::os::unix::fs::PermissionsExt;

    const RUN: Ctx = Ctx {
        check: false,
        diff: true,
    };

    #[test]
    fn the_registry_sends_a_host_directory_here_and_it_converges() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src");
        fs::create_dir_all(src.join("d")).unwrap();
        fs::write(src.join("d/f"), "f\n").unwrap();
        fs::set_permissions(src.join("d/f"), fs::Permissions::from_mode(0o640)).unwrap();
        let dest = t.path().join("out");
        let params = json!({"src": src, "dest": dest, "remote_src": true});
        let checked = run_module(
            "copy",
            &params,
            &Ctx {
                check: true,
                diff: true,
            },
        )
        .unwrap();
        assert!(checked.changed);
        assert!(!dest.exists(), "check mode writes nothing");
        let out = run_module("copy", &params, &RUN).unwrap();
        assert!(out.changed);
        assert_eq!(out.result["dest"], dest.display().to_string());
        let f = dest.join("src/d/f");
        assert_eq!(fs::read(&f).unwrap(), b"f\n");
        assert_eq!(fs::metadata(&f).unwrap().mode() & 0o7777, 0o640);
        let ino = fs::metadata(&f).unwrap().ino();
        let again = run_module("copy", &params, &RUN).unwrap();
        assert!(!again.changed, "{:?}", again.diff);
        assert_eq!(fs::metadata(&f).unwrap().ino(), ino, "not rewritten");
        assert_eq!(again.result["dest"], dest.join("src").display().to_string());
    }
}
