//! The `file` module: make a path a file, directory, symlink or hard link (or remove it), and set
//! its mode, owner, group and times, with the semantics of Ansible's `ansible.builtin.file`.
//!
//! `state: touch` is Ansible's: both times default to `now`, so a touch is changed on every run
//! (`modification_time: preserve` with `access_time: preserve` is the form that converges).
//!
//! Deliberate differences from Ansible:
//! - `touch` with `follow: false` on a symlink sets the link's own times; Ansible's `os.utime`
//!   follows the link and bumps its target, which `follow: false` says to leave alone.
//! - A `mode` on a symlink that is not followed is ignored: Linux symlinks have no permission bits
//!   (Ansible chmods, notices the target changed, and changes it back, reporting a change forever).
//! - A relative `src` of `state: hard` is relative to the directory of `path`, as for `state: link`
//!   (Ansible resolves it against the module's working directory, which no playbook controls).
//! - `follow` on a symlink whose target is missing is an error for `file`, `directory` and `touch`
//!   (Ansible sometimes creates the target directory, sometimes fails later).
//!
//! `follow` (default `true`, as in Ansible) never makes the module replace or remove anything
//! through a link: `state: absent` removes the link itself, `state: link`/`hard` replace the link
//! itself. It only decides which inode gets mode/owner/group/times when `path` is (or becomes) a
//! symlink: with `follow`, the link's target; without, the link itself (lchown, and times set with
//! `AT_SYMLINK_NOFOLLOW`). With `recurse`, `follow` also follows symlinks found inside the tree,
//! as Ansible does, so a recursive chown can reach files outside the tree; set `follow: false` to
//! keep it inside. Which links are followed is decided by the probe only: apply reaches every
//! object through directory descriptors and refuses one that was swapped (for a symlink or
//! anything else) since, so a local user cannot redirect a root-run chown (`fs::dirfd`).
//!
//! Here the module's steps meet; `params` parses, `probe` looks, `plan` and `link` compare,
//! `action` changes.

mod action;
mod link;
mod params;
mod plan;
mod probe;

pub use action::{Action, Replace};
pub use params::{FileState, Params, TimeWant};
pub use probe::{Entry, LinkProbe, Probed};

use crate::fs::{lstat, meta_info, path_info, state_of};
use crate::params::ModeSpec;
use crate::{Ctx, Module, ModuleError, Plan};
use link::{plan_hardlink, plan_symlink};
use params::time_param;
use plan::{plan_absent, plan_directory, plan_file, plan_touch, Want};
use serde_json::{Map, Value};

pub struct File;

impl Module for File {
    type Params = Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        // An empty path names nothing, so there is nothing to remove (ansible-core is ok, and
        // gives `''` for a null `path`); any other state would fail on the host.
        if p.path.trim().is_empty() && p.state != Some(FileState::Absent) {
            return Err(ModuleError::Params("`path` must not be empty".into()));
        }
        crate::fs::cas::check_unchanged_param(
            p.if_checksum.as_ref(),
            p.if_unchanged_since_last_run.0,
        )?;
        // Both guards compare one file's content.
        let guarded = p.if_checksum.is_some() || p.if_unchanged_since_last_run.0;
        if let Some(s) = p.state {
            let is_link = matches!(s, FileState::Link | FileState::Hard);
            // `state: link` or `hard` without `src` keeps an existing link (to change its
            // attributes), as in Ansible; creating one without `src` fails on the host.
            if !is_link && p.src.is_some() {
                return Err(ModuleError::Params(format!(
                    "src option requires state to be 'link' or 'hard', not state: {}",
                    s.as_str()
                )));
            }
            if guarded && !matches!(s, FileState::File | FileState::Touch | FileState::Absent) {
                return Err(ModuleError::Params(format!(
                    "`if_checksum` and `if_unchanged_since_last_run` compare a file's content: \
                     they apply to state: file, touch or absent, not state: {}",
                    s.as_str()
                )));
            }
            if p.recurse.0 && s != FileState::Directory {
                return Err(ModuleError::Params(format!(
                    "`recurse` requires state: directory, not state: {}",
                    s.as_str()
                )));
            }
        }
        // Ansible's wording: its target checks it.
        if p.state.is_none() && p.src.is_some() {
            return Err(ModuleError::Params(
                "src option requires state to be 'link' or 'hard' (`src` without `state`)".into(),
            ));
        }
        if guarded && p.recurse.0 {
            return Err(ModuleError::Params(
                "`if_checksum` and `if_unchanged_since_last_run` compare one file's content; \
                 they cannot be used with `recurse`"
                    .into(),
            ));
        }
        if p.mode == Some(ModeSpec::Preserve) {
            return Err(ModuleError::Params(
                "`mode: preserve` only applies to copy and template; give a mode like \"0644\""
                    .into(),
            ));
        }
        time_param(
            "modification_time",
            p.modification_time.as_deref(),
            p.modification_time_format.as_deref(),
        )?;
        time_param(
            "access_time",
            p.access_time.as_deref(),
            p.access_time_format.as_deref(),
        )?;
        Ok(())
    }

    fn probe(p: &Params, ctx: &Ctx) -> Result<Probed, ModuleError> {
        probe::probe(p, ctx.check)
    }

    fn plan(p: &Params, st: &Probed, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        // Check mode's warnings go with the result, a failure's too (ansible-core's `warn`
        // comes before the module decides anything).
        let mut planned = plan(p, st, ctx);
        if !st.warnings.is_empty() {
            let warnings = Value::from(st.warnings.clone());
            match &mut planned {
                Ok(plan) => drop(plan.result.insert("warnings".into(), warnings)),
                Err(ModuleError::Failed { result, .. }) => {
                    drop(result.insert("warnings".into(), warnings))
                }
                Err(_) => {}
            }
        }
        planned
    }

    fn apply(
        _: &Params,
        st: Probed,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        // The file a touch created is removed again when the rest fails (its owner cannot be
        // given, say), as ansible-core does: a failed touch of a missing path leaves nothing.
        let mut created = None;
        for action in &plan.actions {
            if let Err(e) = action::perform(action) {
                if let Some(at) = created {
                    let _ = action::perform(&Action::Remove {
                        path: st.path.clone(),
                        at,
                    });
                }
                return Err(e);
            }
            if let Action::CreateFile { at, .. } = action {
                created = Some(at.clone());
            }
        }
        path_info(&st.report)
    }
}

/// The plan for what `probe` found (without check mode's warnings).
fn plan(p: &Params, st: &Probed, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
    let mut plan = Plan::new();
    if let Some(binary) = st.appears_binary {
        let r = &mut plan.result;
        r.insert("path".into(), st.path.display().to_string().into());
        r.insert("appears_binary".into(), binary.into());
        r.insert("changed".into(), false.into());
        return Ok(plan);
    }
    let want = Want {
        mode: p.mode.as_ref(),
        uid: st.uid,
        gid: st.gid,
        mtime: st.mtime,
        atime: st.atime,
    };
    let report_meta = match st.state {
        FileState::Absent => plan_absent(&mut plan, st)?,
        FileState::File => plan_file(&mut plan, st, &want)?,
        FileState::Directory => plan_directory(&mut plan, st, &want)?,
        FileState::Touch => plan_touch(&mut plan, st, &want)?,
        FileState::Link => plan_symlink(&mut plan, p, st, &want, ctx)?,
        FileState::Hard => plan_hardlink(&mut plan, p, st, &want)?,
    };

    // Before anything changes, and in check mode too: the path must be the expected content.
    // The first action (the one that reaches the path first) carries the re-check to apply.
    if let Some((found, at)) = &st.cas {
        let want = p.if_checksum.as_ref();
        if !plan.actions.is_empty() {
            crate::fs::cas::require(&at.display().to_string(), want, found)?;
        }
        if let Some(first) = plan.actions.first_mut() {
            let loc = first.at_mut();
            *loc = loc.clone().guarded(want);
        }
    }

    let r = &mut plan.result;
    // Ansible's link, hard and touch results name the path `dest` (below), the others `path`.
    if !matches!(
        st.state,
        FileState::Link | FileState::Hard | FileState::Touch
    ) {
        r.insert("path".into(), st.report.display().to_string().into());
    }
    r.insert("state".into(), st.state.as_str().into());
    if st.state == FileState::Touch {
        r.insert("state".into(), "file".into());
    }
    if plan.actions.is_empty() {
        // Converged: the probe's metadata is the truth, reported as Ansible's add_path_info would.
        if let Some(m) = report_meta {
            r.extend(meta_info(m));
        }
    } else if ctx.check {
        // Nothing changes: ansible-core's module reports the path as it is now (its state,
        // owner, mode...), and nothing of a path that does not exist.
        let now = match st.state {
            FileState::Link | FileState::Hard | FileState::Touch => &st.path,
            _ => &st.report,
        };
        r.remove("state");
        if let Some(m) = lstat(now)? {
            r.extend(meta_info(&m));
        }
    }
    if matches!(
        st.state,
        FileState::Link | FileState::Hard | FileState::Touch
    ) {
        r.insert("dest".into(), st.path.display().to_string().into());
    }
    match &st.link {
        Some(l) => {
            let src = match st.state {
                FileState::Link => l.src.display().to_string(),
                _ => p.src.clone().unwrap_or_default(),
            };
            r.insert("src".into(), src.into());
        }
        // A hard link kept without `src` (no `state`): ansible-core registers `src: null`.
        None if st.state == FileState::Hard => {
            r.insert("src".into(), Value::Null);
        }
        None => {}
    }
    r.insert("changed".into(), (!plan.actions.is_empty()).into());
    // Registered only in diff mode, as ansible-core does; its touch of a missing path in
    // check mode returns before it builds one.
    let touch_new_checked = st.state == FileState::Touch && st.prev.is_none() && ctx.check;
    if ctx.diff && !touch_new_checked {
        let mut paths = vec![st.path.as_path(), st.report.as_path()];
        // A followed link's attributes change on its target, and ansible-core's diff shows
        // them under the link's path.
        if let (FileState::Link, true) = (st.state, p.follow.0) {
            if let Some((real, _)) = st.link.as_ref().and_then(|l| l.target.as_ref()) {
                paths.push(real);
            }
        }
        // So does a touch through a link.
        if let (FileState::Touch, Some(Some((real, _)))) = (st.state, &st.followed) {
            paths.push(real);
        }
        let mut diff = crate::file_diff::registered(&plan.diff, &paths);
        // ansible-core's touch diff always names the state before and `touch` after, even
        // when nothing changes.
        if st.state == FileState::Touch {
            let before = st.prev.as_ref().map_or("absent", state_of);
            for (side, state) in [("before", before), ("after", "touch")] {
                if let Some(Value::Object(m)) = diff.get_mut(side) {
                    state_after_path(m, state);
                }
            }
        }
        plan.result.insert("diff".into(), diff);
    }
    Ok(plan)
}

/// Put `state` right after `path` in one side of a registered diff, where ansible-core's
/// initial diff has it (the registered mapping keeps its order when printed).
fn state_after_path(side: &mut Map<String, Value>, state: &str) {
    let rest = std::mem::take(side);
    for (k, v) in rest {
        if k != "state" {
            side.insert(k.clone(), v);
        }
        if k == "path" {
            side.insert("state".into(), state.into());
        }
    }
}

#[cfg(test)]
mod tests;
