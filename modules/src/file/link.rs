//! The `file` module's links: the plan for `state: link` and `state: hard`, and placing a link
//! over what is at `path`.

use super::plan::{plan_attrs, Cur, Want};
use super::{Action, LinkProbe, Params, Probed, Replace};
use crate::fs::{id_of, locate, parent_of, state_of, Dir, Loc};
use crate::{Ctx, ModuleError, Plan};
use std::ffi::OsStr;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;

/// The `src` that `state: link` and `state: hard` need; `what` tells the user what it names.
fn link_src<'a>(st: &'a Probed, state: &str, what: &str) -> Result<&'a LinkProbe, ModuleError> {
    st.link.as_ref().ok_or_else(|| {
        // Ansible's wording first.
        ModuleError::failed(format!(
            "src is required for creating new symlinks: state: {state} needs `src` to create \
             {}: {what}",
            st.path.display()
        ))
    })
}

pub(super) fn plan_symlink<'a>(
    plan: &mut Plan<Action>,
    p: &Params,
    st: &'a Probed,
    want: &Want,
    ctx: &Ctx,
) -> Result<Option<&'a Metadata>, ModuleError> {
    let shown = st.path.display().to_string();
    let link = link_src(st, "link", "the path the link points to")?;
    let force = p.force.0;
    // In check mode the source may be a file an earlier task would have created.
    if !force && !ctx.check && p.src.is_some() && link.target.is_none() {
        return Err(ModuleError::failed(format!(
            "src file does not exist, use \"force: true\" if you really want to create the link: {}",
            parent_of(&st.path).join(&link.src).display()
        )));
    }
    let replace = match &st.prev {
        None => Replace::Nothing,
        Some(m) if m.file_type().is_symlink() => Replace::Entry,
        Some(m) if m.is_dir() => {
            if !force {
                return Err(ModuleError::failed(format!(
                    "refusing to convert from directory to symlink for {shown}; set force: true \
                     to replace an empty directory"
                )));
            }
            if !st.dir_empty {
                return Err(ModuleError::failed(format!(
                    "the directory {shown} is not empty, refusing to convert it to a symlink"
                )));
            }
            Replace::EmptyDir
        }
        Some(m) => {
            if !force {
                return Err(ModuleError::failed(format!(
                    "refusing to convert from {} to symlink for {shown}; set force: true to \
                     replace it",
                    state_of(m)
                )));
            }
            Replace::Entry
        }
    };
    let changes = st.current_link.as_ref() != Some(&link.src);
    if changes {
        match &st.current_link {
            Some(old) => plan.diff.attr(
                &shown,
                "src",
                old.display().to_string(),
                link.src.display().to_string(),
            ),
            None => plan.diff.attr(
                &shown,
                "state",
                st.prev.as_ref().map_or("absent", state_of),
                "link",
            ),
        }
        plan.actions.push(Action::Symlink {
            path: st.path.clone(),
            src: link.src.clone(),
            replace,
            at: locate(&st.path, st.prev.as_ref().map(id_of))?,
        });
    }

    if p.follow.0 {
        match &link.target {
            Some((real, m)) => plan_attrs(plan, real, Cur::Existing(m), false, want)?,
            None if want.any() => {
                plan.msg = Some(
                    "cannot set attributes on a symlink target that does not exist; set follow: \
                     false to set them on the link itself"
                        .into(),
                )
            }
            None => {}
        }
    } else if changes {
        let new = Cur::New {
            mode: 0o777,
            is_dir: false,
            is_link: true,
        };
        plan_attrs(plan, &st.path, new, true, want)?;
    } else if let Some(m) = &st.prev {
        plan_attrs(plan, &st.path, Cur::Existing(m), true, want)?;
    }
    Ok(st.prev.as_ref())
}

pub(super) fn plan_hardlink<'a>(
    plan: &mut Plan<Action>,
    p: &Params,
    st: &'a Probed,
    want: &Want,
) -> Result<Option<&'a Metadata>, ModuleError> {
    let shown = st.path.display().to_string();
    // No `src` (no `state` either, on a file with other hard links): ansible-core has no link to
    // compare, only the attributes to set.
    if let (None, Some(m)) = (&st.link, &st.prev) {
        if state_of(m) == "hard" {
            plan_attrs(plan, &st.path, Cur::Existing(m), !p.follow.0, want)?;
            return Ok(Some(m));
        }
    }
    // ansible-core's words, and what it registers with them.
    let link = st
        .link
        .as_ref()
        .ok_or_else(|| ModuleError::failed("src is required for creating new hardlinks"))?;
    let (src, target) = link.target.as_ref().ok_or_else(|| {
        let mut result = serde_json::Map::new();
        result.insert("dest".into(), shown.clone().into());
        result.insert("src".into(), p.src.clone().unwrap_or_default().into());
        ModuleError::Failed {
            msg: "src does not exist".into(),
            result,
        }
    })?;
    if target.is_dir() {
        return Err(ModuleError::failed(format!(
            "src {} is a directory; hard links to directories are not allowed (use state: link)",
            src.display()
        )));
    }
    let same = |m: &Metadata| m.dev() == target.dev() && m.ino() == target.ino();
    let replace = match &st.prev {
        None => Some(Replace::Nothing),
        Some(m) if same(m) => None,
        // Ansible replaces a symlink with the hard link without asking for force.
        Some(m) if m.file_type().is_symlink() => Some(Replace::Entry),
        Some(m) if m.is_dir() => {
            return Err(ModuleError::failed(format!(
                "{shown} is a directory; refusing to replace it with a hard link"
            )))
        }
        Some(m) if !p.force.0 => {
            return Err(ModuleError::failed(if m.nlink() > 1 {
                format!(
                    "Cannot link, different hard link exists at destination {shown}; set force: \
                     true to replace it"
                )
            } else {
                format!("Cannot link, file exists at destination {shown}; set force: true to replace it")
            }))
        }
        Some(_) => Some(Replace::Entry),
    };
    match replace {
        Some(replace) => {
            plan.diff.attr(
                &shown,
                "state",
                st.prev.as_ref().map_or("absent", state_of),
                "hard",
            );
            plan.actions.push(Action::HardLink {
                path: st.path.clone(),
                src: src.clone(),
                replace,
                at: locate(&st.path, st.prev.as_ref().map(id_of))?,
            });
            // After linking, `path` is the source's inode, with the source's attributes.
            plan_attrs(plan, &st.path, Cur::Existing(target), !p.follow.0, want)?;
        }
        None => {
            if let Some(m) = &st.prev {
                plan_attrs(plan, &st.path, Cur::Existing(m), !p.follow.0, want)?;
            }
        }
    }
    Ok(st.prev.as_ref())
}

/// Create a link at `at` with `make`; an existing entry is replaced atomically (new link beside
/// it under an unpredictable name, then rename), an empty directory is removed first (rename
/// cannot replace a directory). All inside the directory the probe saw, reached without links.
pub(super) fn place_link(
    at: &Loc,
    replace: Replace,
    make: impl Fn(&Dir, &OsStr) -> std::io::Result<()>,
) -> Result<(), ModuleError> {
    let dir = Dir::open(&at.dir)?;
    let path = dir.at(&at.name);
    let link_err = |e: std::io::Error| ModuleError::io(&path, format!("cannot link: {e}"));
    match replace {
        Replace::Nothing => make(&dir, &at.name).map_err(link_err)?,
        Replace::EmptyDir => {
            dir.rmdir(&at.name)?;
            make(&dir, &at.name).map_err(link_err)?;
        }
        Replace::Entry => {
            // Reserve an unpredictable name exclusively, then put the link in its place.
            let (f, tmp) = dir.create_temp(".fixpoint.", ".tmp")?;
            drop(f);
            dir.unlink(&tmp)?;
            make(&dir, &tmp).map_err(link_err)?;
            if let Err(e) = dir.rename(&tmp, &at.name) {
                let _ = dir.unlink(&tmp);
                return Err(e);
            }
        }
    }
    dir.fsync()
}
