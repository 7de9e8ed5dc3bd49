//! The `file` module's plan for a file, a directory, `touch` and `absent`, and the attribute
//! comparison (mode, owner, group, times) every state shares.

use super::{Action, Probed, TimeWant};
use crate::fs::{group_name, id_of, locate, meta_info, mode_str, state_of, user_name, Loc};
use crate::params::ModeSpec;
use crate::{ModuleError, Plan};
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The wanted attributes, resolved.
pub(super) struct Want<'a> {
    pub(super) mode: Option<&'a ModeSpec>,
    pub(super) uid: Option<u32>,
    pub(super) gid: Option<u32>,
    pub(super) mtime: TimeWant,
    pub(super) atime: TimeWant,
}

impl Want<'_> {
    pub(super) fn any(&self) -> bool {
        self.mode.is_some()
            || self.uid.is_some()
            || self.gid.is_some()
            || self.mtime != TimeWant::Preserve
            || self.atime != TimeWant::Preserve
    }
}

/// The path whose attributes are compared: existing metadata, or a prediction for a path the plan creates.
pub(super) enum Cur<'a> {
    Existing(&'a Metadata),
    /// Created by this plan: `mode` is what it will get before any chmod (umask applied).
    New {
        mode: u32,
        is_dir: bool,
        is_link: bool,
    },
}

/// Compare wanted attributes with `cur` and add the actions and diff lines that make them equal.
/// `nofollow`: when the path is a symlink, act on the link itself (no mode; lchown; lutimes).
pub(super) fn plan_attrs(
    plan: &mut Plan<Action>,
    path: &Path,
    cur: Cur,
    nofollow: bool,
    want: &Want,
) -> Result<(), ModuleError> {
    let at = match &cur {
        Cur::Existing(m) => locate(path, Some(id_of(m)))?,
        Cur::New { .. } => locate(path, None)?,
    };
    plan_attrs_at(plan, path, at, cur, nofollow, want)
}

/// [`plan_attrs`] for an object already located (a tree entry found through descriptors).
pub(super) fn plan_attrs_at(
    plan: &mut Plan<Action>,
    path: &Path,
    at: Loc,
    cur: Cur,
    nofollow: bool,
    want: &Want,
) -> Result<(), ModuleError> {
    let shown = path.display().to_string();
    let (meta, cur_mode, is_dir, is_link) = match cur {
        Cur::Existing(m) => (
            Some(m),
            m.mode() & 0o7777,
            m.is_dir(),
            m.file_type().is_symlink(),
        ),
        Cur::New {
            mode,
            is_dir,
            is_link,
        } => (None, mode, is_dir, is_link),
    };
    let link_itself = nofollow && is_link;

    // A new path gets every attribute asked for; an existing one only those that differ.
    let uid = want.uid.filter(|u| meta.is_none_or(|m| m.uid() != *u));
    let gid = want.gid.filter(|g| meta.is_none_or(|m| m.gid() != *g));
    if let Some(u) = uid {
        let before = meta.map(|m| user_name(m.uid())).unwrap_or_default();
        plan.diff.attr(&shown, "owner", before, user_name(u));
    }
    if let Some(g) = gid {
        let before = meta.map(|m| group_name(m.gid())).unwrap_or_default();
        plan.diff.attr(&shown, "group", before, group_name(g));
    }
    let chown = uid.is_some() || gid.is_some();
    // chown before chmod: chown clears setuid/setgid, chmod puts the wanted bits back.
    if chown {
        plan.actions.push(Action::Chown {
            path: path.to_path_buf(),
            uid,
            gid,
            nofollow: link_itself,
            at: at.clone(),
        });
    }

    if !link_itself {
        let new_mode = match want.mode {
            Some(spec) => spec
                .resolve(cur_mode, is_dir)
                .map_err(ModuleError::Params)?,
            None => None,
        };
        let mode_changes = new_mode.is_some_and(|m| meta.is_none() || m != cur_mode);
        let target = new_mode.unwrap_or(cur_mode);
        if mode_changes {
            let before = meta.map(|_| mode_str(cur_mode)).unwrap_or_default();
            plan.diff.attr(&shown, "mode", before, mode_str(target));
        }
        // The kernel drops setuid/setgid of a file on chown; restore them so the next run agrees.
        let restore = chown && !is_dir && meta.is_some() && target & 0o6000 != 0;
        if mode_changes || restore {
            plan.actions.push(Action::Chmod {
                path: path.to_path_buf(),
                mode: target,
                at: at.clone(),
            });
        }
    }

    let cur_m = meta.map(|m| (m.mtime(), m.mtime_nsec()));
    let cur_a = meta.map(|m| (m.atime(), m.atime_nsec()));
    let mtime = time_change(want.mtime, cur_m);
    let atime = time_change(want.atime, cur_a);
    // `now` reads the clock once, so both times show the same instant, as ansible-core's diff does.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    if mtime != TimeWant::Preserve {
        plan.diff
            .attr(&shown, "mtime", fmt_cur_time(cur_m), fmt_want(mtime, now));
    }
    if atime != TimeWant::Preserve {
        plan.diff
            .attr(&shown, "atime", fmt_cur_time(cur_a), fmt_want(atime, now));
    }
    if mtime != TimeWant::Preserve || atime != TimeWant::Preserve {
        plan.actions.push(Action::SetTimes {
            path: path.to_path_buf(),
            atime,
            mtime,
            nofollow: link_itself,
            at,
        });
    }
    Ok(())
}

/// What must change for one time: `Preserve` when nothing.
fn time_change(want: TimeWant, cur: Option<(i64, i64)>) -> TimeWant {
    match want {
        TimeWant::At(t) if cur == Some((t, 0)) => TimeWant::Preserve,
        w => w,
    }
}

fn fmt_cur_time(cur: Option<(i64, i64)>) -> String {
    match cur {
        None => String::new(),
        Some((s, 0)) => s.to_string(),
        Some((s, ns)) => format!("{s}.{ns:09}").trim_end_matches('0').to_string(),
    }
}

/// A wanted time as the diff shows it: `now` as the clock reads while planning (seconds, with
/// the fraction), which is what ansible-core's diff shows for it.
fn fmt_want(w: TimeWant, now: f64) -> String {
    match w {
        TimeWant::Preserve => "preserve".into(),
        TimeWant::Now => now.to_string(),
        TimeWant::At(t) => t.to_string(),
    }
}

/// Where attributes go for file/directory/touch: the followed target, or `path` itself.
fn attr_target(st: &Probed) -> Result<(PathBuf, Option<&Metadata>, bool), ModuleError> {
    match &st.followed {
        Some(Some((real, m))) => Ok((real.clone(), Some(m), false)),
        Some(None) => Err(ModuleError::failed(format!(
            "{} is a symlink to {}, which does not exist; create the target first, or set \
             follow: false to act on the link itself",
            st.path.display(),
            st.current_link
                .as_deref()
                .unwrap_or(Path::new("?"))
                .display()
        ))),
        None => Ok((st.path.clone(), st.prev.as_ref(), true)),
    }
}

pub(super) fn plan_absent<'a>(
    plan: &mut Plan<Action>,
    st: &'a Probed,
) -> Result<Option<&'a Metadata>, ModuleError> {
    if let Some(m) = &st.prev {
        if st.path.parent().is_none() {
            return Err(ModuleError::failed(format!(
                "refusing to remove {}",
                st.path.display()
            )));
        }
        plan.diff.attr(
            st.path.display().to_string(),
            "state",
            state_of(m),
            "absent",
        );
        // lstat: a symlink to a directory is unlinked, never emptied.
        let path = st.path.clone();
        let at = locate(&path, Some(id_of(m)))?;
        plan.actions.push(if m.is_dir() {
            Action::RemoveTree { path, at }
        } else {
            Action::Remove { path, at }
        });
    }
    Ok(None)
}

pub(super) fn plan_file<'a>(
    plan: &mut Plan<Action>,
    st: &'a Probed,
    want: &Want,
) -> Result<Option<&'a Metadata>, ModuleError> {
    let (path, meta, nofollow) = attr_target(st)?;
    // ansible-core's words, with the path and what is there in the result: a playbook may
    // test `r.state` or the message.
    // (ansible-core's failure adds the attributes of a path that exists, as its exit does.)
    let conflict = |state: &str, meta: Option<&Metadata>| {
        let mut result = meta.map(meta_info).unwrap_or_default();
        result.insert("path".into(), path.display().to_string().into());
        result.insert("state".into(), state.into());
        ModuleError::Failed {
            msg: format!("file ({}) is {state}, cannot continue", path.display()),
            result,
        }
    };
    let meta = meta.ok_or_else(|| conflict("absent", None))?;
    if meta.is_dir() {
        return Err(conflict("directory", Some(meta)));
    }
    if meta.file_type().is_symlink() {
        return Err(conflict("link", Some(meta)));
    }
    plan_attrs(plan, &path, Cur::Existing(meta), nofollow, want)?;
    Ok(Some(meta))
}

pub(super) fn plan_directory<'a>(
    plan: &mut Plan<Action>,
    st: &'a Probed,
    want: &Want,
) -> Result<Option<&'a Metadata>, ModuleError> {
    let (path, meta, nofollow) = attr_target(st)?;
    match meta {
        None => {
            if let Some(b) = &st.blocker {
                return Err(ModuleError::failed(format!(
                    "cannot create directory {}: {} exists and is not a directory",
                    path.display(),
                    b.display()
                )));
            }
            // Like `mkdir -p`, and like Ansible every directory created gets mode/owner/group.
            for dir in &st.missing_dirs {
                plan.diff
                    .attr(dir.display().to_string(), "state", "absent", "directory");
                plan.actions.push(Action::Mkdir {
                    path: dir.clone(),
                    at: locate(dir, None)?,
                });
                let new = Cur::New {
                    mode: 0o777 & !st.umask,
                    is_dir: true,
                    is_link: false,
                };
                plan_attrs(plan, dir, new, false, want)?;
            }
            Ok(None)
        }
        Some(m) if m.is_dir() => {
            plan_attrs(plan, &path, Cur::Existing(m), nofollow, want)?;
            for e in &st.tree {
                let cur = Cur::Existing(&e.meta);
                plan_attrs_at(plan, &e.path, e.at.clone(), cur, e.nofollow, want)?;
            }
            Ok(Some(m))
        }
        Some(m) => Err(ModuleError::failed(format!(
            "{} already exists as a {}; remove it first (state: absent){}",
            path.display(),
            state_of(m),
            if m.file_type().is_symlink() {
                ", or set follow: true to use the directory it points to"
            } else {
                ""
            }
        ))),
    }
}

pub(super) fn plan_touch<'a>(
    plan: &mut Plan<Action>,
    st: &'a Probed,
    want: &Want,
) -> Result<Option<&'a Metadata>, ModuleError> {
    if st.prev.is_none() {
        plan.diff
            .attr(st.path.display().to_string(), "state", "absent", "touch");
        plan.actions.push(Action::CreateFile {
            path: st.path.clone(),
            at: locate(&st.path, None)?,
        });
        let new = Cur::New {
            mode: 0o666 & !st.umask,
            is_dir: false,
            is_link: false,
        };
        plan_attrs(plan, &st.path, new, false, want)?;
        return Ok(None);
    }
    let (path, meta, nofollow) = attr_target(st)?;
    if let Some(m) = meta {
        plan_attrs(plan, &path, Cur::Existing(m), nofollow, want)?;
    }
    Ok(st.prev.as_ref())
}
