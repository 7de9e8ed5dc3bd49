//! The `copy` module, agent side: put given bytes (or a file already on the host) at `dest`, with
//! mode/owner/group, backup and validate, with the semantics and return values of Ansible's copy.
//!
//! The controller turns a controller-side `src: foo.conf` into `_content_b64` (the bytes, base64)
//! and `_src_name: foo.conf` (plus `_src_mode` for `mode: preserve`); `template` arrives the same
//! way. With `remote_src: true`, `src` names a file on the host instead. A controller `src`
//! that is a directory goes to `copy_tree` instead, and a directory on the host (`remote_src`)
//! to `copy_remote_tree` (the registry decides).
//!
//! Differences from Ansible worth knowing:
//! - The result has `md5sum` when the content is written, as Ansible's outside FIPS mode, but
//!   not for a controller file (its bytes reach the host only when they are needed); `checksum`
//!   is the sha1 of the new content, as Ansible's.
//! - A content change keeps the existing file's owner, group and mode unless they are given
//!   (with `remote_src`, Ansible instead gives a rewritten file the source file's mode and owner);
//!   a new file from `remote_src` gets the source file's mode, as Ansible's copystat does.
//! - `dest` that exists but is not a regular file or directory (a fifo, a device) is an error
//!   rather than being replaced.
//!
//! A symlink at `dest` is not followed unless `follow: true`: by default it is replaced by a
//! regular file (its target is left alone); with `follow: true` the link's target is written.

use crate::fs::{
    atomic_write, atomic_write_from, backup_file, current_umask, expand_user, group_name, id_of,
    install_staged, locate, lookup_gid, lookup_uid, lstat, meta_info, missing_ancestors, mkdir_at,
    mode_str, parent_of, path_info, resolve, set_attrs_at, stage, user_name, Attrs, Found,
    IfChecksum, Loc,
};
use crate::params::{de_opt_string, Bool, ModeSpec};
use crate::text::{diff_skipped, diff_text, MAX_DIFF_SIZE};
use crate::{ContentDiff, Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{Map, Value};
use sha2::Digest as _;
use std::fs::{self, Metadata};
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

mod result;
mod source;
#[cfg(test)]
mod tests;

pub use result::{put_src, Side};
pub use source::Data;
use source::{md5_of_file, sha256_of_file, source, Source};

pub struct Copy;

fn default_true() -> Bool {
    Bool(true)
}

/// Parameters of `copy` as the agent receives them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Text to write. Non-string values are written as JSON, as Ansible does for dicts and lists.
    #[serde(default)]
    pub content: Option<Value>,
    /// The bytes of a controller-side `src`, base64; set by the controller.
    #[serde(default, rename = "_content_b64")]
    pub content_b64: Option<String>,
    /// The sha256 (hex) of a controller-side `src`, sent instead of its bytes: the content only
    /// travels when the host's file differs (see `fs::stage`); set by the controller.
    #[serde(default, rename = "_src_sha256")]
    pub src_sha256: Option<String>,
    /// Its sha1 (hex), for the result's `checksum` (Ansible's sum); set by the controller.
    #[serde(default, rename = "_src_sha1")]
    pub src_sha1: Option<String>,
    /// The size of that controller-side `src`.
    #[serde(default, rename = "_src_size")]
    pub src_size: Option<u64>,
    /// The file name of the controller-side `src`, used when `dest` is a directory.
    #[serde(default, rename = "_src_name")]
    pub src_name: Option<String>,
    /// The permission bits of the controller-side `src`, for `mode: preserve`.
    #[serde(default, rename = "_src_mode")]
    pub src_mode: Option<u32>,
    /// `template`'s `src` as the task gave it (its rendered text arrives as `content`): the
    /// result's `src`, as Ansible's template result has one.
    #[serde(default, rename = "_template_src")]
    pub template_src: Option<String>,
    /// The controller's path of the file copied (or of the template rendered); set by the
    /// controller: the header of the registered diff, and the `src` of a `force: false` result.
    #[serde(default, rename = "_src_path")]
    pub src_path: Option<String>,
    /// With `remote_src: true`, a file on the host to copy; otherwise the controller's file
    /// (informational once the controller has sent its content).
    #[serde(default, deserialize_with = "de_opt_string")]
    pub src: Option<String>,
    #[serde(default)]
    pub remote_src: Bool,
    #[serde(deserialize_with = "de_string")]
    pub dest: String,
    #[serde(default)]
    pub mode: Option<ModeSpec>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub owner: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub group: Option<String>,
    /// Keep a timestamped copy of the old file before replacing its content.
    #[serde(default)]
    pub backup: Bool,
    /// `false`: leave an existing `dest` alone, whatever its content (`thirsty` is Ansible's alias).
    #[serde(default = "default_true", alias = "thirsty")]
    pub force: Bool,
    /// A command with `%s`, run on the new content (a temp file beside `dest`) before it replaces `dest`.
    #[serde(default)]
    pub validate: Option<String>,
    #[serde(default)]
    pub follow: Bool,
    /// Mode of the directories created when `dest` ends with `/`.
    #[serde(default)]
    pub directory_mode: Option<ModeSpec>,
    /// fixpoint's compare-and-swap (not Ansible's): change `dest` only while its content has
    /// this sha256, or while it does not exist (`absent`); see `fs::cas`.
    #[serde(default)]
    pub if_checksum: Option<IfChecksum>,
    /// fixpoint's `if_unchanged_since_last_run`: the agent turns it into `if_checksum` with the
    /// sum the journal recorded for the file (see `fs::cas::check_unchanged_param`).
    #[serde(default)]
    pub if_unchanged_since_last_run: Bool,
}

/// `dest` must be a string, but YAML may have typed a name like `1234` as a number.
fn de_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    de_opt_string(d)?.ok_or_else(|| serde::de::Error::custom("expected a path, found null"))
}

/// One step of a `copy` plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Create a directory for a `dest/` that does not exist yet (parents come first).
    Mkdir {
        path: PathBuf,
        attrs: Attrs,
        /// Where to create it, located at plan time (see `fs::Loc`).
        at: Loc,
    },
    /// Write the new content atomically (validate, then rename over `path`).
    Write {
        path: PathBuf,
        /// The destination as probed: its directory and what was there.
        at: Loc,
        attrs: Attrs,
        backup: bool,
        validate: Option<String>,
    },
    /// Content is right; only owner/group/mode change (no rewrite).
    SetAttrs {
        path: PathBuf,
        attrs: Attrs,
        at: Loc,
    },
}

/// What `probe` found.
#[derive(Debug)]
pub struct Probed {
    /// The file to write: `dest`, `dest/<name>`, or a followed link's target.
    pub dest: PathBuf,
    /// Directories to create first (`dest` ended with `/` and does not exist), outermost first.
    pub new_dirs: Vec<PathBuf>,
    /// The new content, or where it comes from.
    pub data: Data,
    /// sha256 (hex) and size of the new content.
    pub sha256: String,
    pub size: u64,
    /// sha1 (hex) of the new content: the result's `checksum`, as in Ansible.
    pub sha1: String,
    /// Mode of the source file (controller's `_src_mode`, or the host file with `remote_src`).
    pub src_mode: Option<u32>,
    /// lstat of `dest`.
    pub prev: Option<Metadata>,
    /// `dest` is a symlink that is not followed: it is replaced by a regular file.
    pub replace_link: bool,
    /// sha256 (hex) and size of `dest` when it is a regular file, hashed as it is read.
    pub before: Option<(String, u64)>,
    /// What `--diff` shows of it: its text, or that it is binary or large.
    pub before_side: Option<Side>,
    /// `force: false` and `dest` exists: nothing to do.
    pub skip: bool,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub umask: u32,
    /// Owner and group a file created in the destination directory gets (setgid directories pass their group on).
    pub new_uid: u32,
    pub new_gid: u32,
}

impl Module for Copy {
    type Params = Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        let bad = |m: &str| Err(ModuleError::Params(m.to_string()));
        if p.dest.trim().is_empty() {
            return bad("`dest` must not be empty");
        }
        crate::fs::cas::check_unchanged_param(
            p.if_checksum.as_ref(),
            p.if_unchanged_since_last_run.0,
        )?;
        let has_content = p.content.is_some();
        if has_content && p.content_b64.is_some() {
            return bad("`content` and `_content_b64` are mutually exclusive");
        }
        if p.src_sha256.is_some() != p.src_size.is_some() {
            return bad("`_src_sha256` and `_src_size` come together");
        }
        if p.src_sha256.is_some() && (has_content || p.content_b64.is_some() || p.remote_src.0) {
            return bad(
                "`_src_sha256` names a controller file: no `content` or `remote_src` with it",
            );
        }
        if has_content && p.src.is_some() {
            return bad("`src` and `content` are mutually exclusive: give one of them");
        }
        if !has_content && p.content_b64.is_none() && p.src_sha256.is_none() && p.src.is_none() {
            return bad("copy needs `src` (a file to copy) or `content` (the text to write)");
        }
        if p.remote_src.0 && p.src.is_none() {
            return bad("`remote_src: true` needs `src`: the file on the host to copy");
        }
        if p.remote_src.0 && (has_content || p.content_b64.is_some() || p.src_sha256.is_some()) {
            return bad(
                "`remote_src: true` copies `src` from the host; it cannot be used with `content`",
            );
        }
        if has_content && p.mode == Some(ModeSpec::Preserve) {
            return bad("`mode: preserve` keeps the source file's mode, but `content` has no source file; give a mode like \"0644\"");
        }
        if p.directory_mode == Some(ModeSpec::Preserve) {
            return bad("`directory_mode: preserve` is not supported; give a mode like \"0755\"");
        }
        if let Some(v) = &p.validate {
            if !v.contains("%s") {
                return Err(ModuleError::Params(format!(
                    "validate must contain %s: {v}"
                )));
            }
        }
        Ok(())
    }

    fn probe(p: &Params, ctx: &Ctx) -> Result<Probed, ModuleError> {
        let Source {
            data,
            sha256,
            sha1,
            size,
            mode: src_mode,
            name: src_name,
        } = source(p)?;

        let mut dest = expand_user(&p.dest);
        let mut new_dirs = Vec::new();
        let to_dir = |raw: &str| {
            src_name.clone().ok_or_else(|| {
                ModuleError::Params(format!(
                    "dest `{raw}` is a directory, and `content` has no file name; set dest to \
                     the file's path, e.g. {}/name.conf",
                    raw.trim_end_matches('/')
                ))
            })
        };
        if p.dest.ends_with('/') {
            let name = to_dir(&p.dest)?;
            match fs::metadata(&dest) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(ModuleError::failed(format!(
                        "dest `{}` ends with '/' but is not a directory",
                        p.dest
                    )))
                }
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    // Like Ansible, a `dest/` that does not exist is created (mkdir -p).
                    let (missing, blocker) = missing_ancestors(&dest)?;
                    if let Some(b) = blocker {
                        return Err(ModuleError::failed(format!(
                            "cannot create directory {}: {} exists and is not a directory",
                            dest.display(),
                            b.display()
                        )));
                    }
                    new_dirs = missing;
                }
                Err(e) => return Err(ModuleError::io(&dest, e)),
            }
            dest = dest.join(name);
        } else if fs::metadata(&dest).is_ok_and(|m| m.is_dir()) {
            dest = dest.join(to_dir(&p.dest)?);
        }

        if new_dirs.is_empty() {
            let dir = parent_of(&dest);
            match fs::metadata(&dir) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(ModuleError::failed(format!(
                        "destination directory {} is not a directory",
                        dir.display()
                    )))
                }
                Err(e) if e.kind() == ErrorKind::PermissionDenied => {
                    return Err(ModuleError::failed(format!(
                        "destination directory {} is not accessible: {e}",
                        dir.display()
                    )))
                }
                // In check mode an earlier task that would create the directory did not run:
                // report the file as one that would be created, not as a failure.
                Err(_) if ctx.check => {
                    new_dirs = missing_ancestors(&dir)?.0;
                }
                Err(_) => {
                    return Err(ModuleError::failed(format!(
                        "destination directory {} does not exist; create it first (file module, \
                         state: directory), or end dest with '/' to have copy create it",
                        dir.display()
                    )))
                }
            }
        }

        // Ansible: `force: false` leaves any existing dest alone (a dangling link does not exist).
        let skip = !p.force.0 && fs::metadata(&dest).is_ok();

        let mut prev = lstat(&dest)?;
        let mut replace_link = false;
        if prev.as_ref().is_some_and(|m| m.file_type().is_symlink()) {
            match resolve(&dest)? {
                Some((real, m)) if p.follow.0 => {
                    dest = real;
                    prev = Some(m);
                }
                _ => replace_link = true,
            }
        }
        let before = match &prev {
            Some(_) if replace_link || skip => None,
            Some(m) if m.is_file() => Some(sha256_of_file(&dest)?),
            Some(m) if m.is_dir() => {
                return Err(ModuleError::failed(format!(
                    "dest {} is a directory; give the path of the file to write",
                    dest.display()
                )))
            }
            Some(_) => {
                return Err(ModuleError::failed(format!(
                    "dest {} exists and is not a regular file; remove it first",
                    dest.display()
                )))
            }
            None => None,
        };

        let before_side = match &before {
            Some((_, n)) if ctx.diff => Some(Side::of_dest(&dest, *n)?),
            _ => None,
        };

        // A new file's group: the directory's when it is setgid, else ours.
        let dir_meta = fs::metadata(parent_of(&dest)).ok();
        let new_gid = match dir_meta {
            Some(m) if m.mode() & 0o2000 != 0 => m.gid(),
            _ => nix::unistd::getegid().as_raw(),
        };

        Ok(Probed {
            dest,
            new_dirs,
            data,
            sha256,
            sha1,
            size,
            src_mode,
            prev,
            replace_link,
            before,
            before_side,
            skip,
            uid: p.owner.as_deref().map(lookup_uid).transpose()?,
            gid: p.group.as_deref().map(lookup_gid).transpose()?,
            umask: current_umask(),
            new_uid: nix::unistd::geteuid().as_raw(),
            new_gid,
        })
    }

    fn plan(p: &Params, st: &Probed, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let mut plan = Plan::new();
        let shown = st.dest.display().to_string();
        plan.result.insert("dest".into(), shown.clone().into());
        if let Some(src) = p.src.as_ref().or(p.template_src.as_ref()) {
            plan.result.insert("src".into(), src.clone().into());
        }
        if st.skip {
            if p.remote_src.0 {
                // The copy module's answer, with the file's attributes as its exit adds them.
                plan.msg = Some("file already exists".into());
                if let Some(m) = &st.prev {
                    plan.result.extend(meta_info(m));
                }
                plan.result.insert("changed".into(), false.into());
            } else {
                plan.result = result::kept(p);
            }
            return Ok(plan);
        }

        for dir in &st.new_dirs {
            let mode = match &p.directory_mode {
                Some(spec) => spec
                    .resolve(0o777 & !st.umask, true)
                    .map_err(ModuleError::Params)?,
                None => None,
            };
            plan.diff
                .attr(dir.display().to_string(), "state", "absent", "directory");
            plan.actions.push(Action::Mkdir {
                path: dir.clone(),
                attrs: Attrs {
                    mode,
                    uid: st.uid,
                    gid: st.gid,
                },
                at: locate(dir, None)?,
            });
        }

        // The file as it is now, if it stays the same inode's attributes that matter.
        let cur = if st.replace_link {
            None
        } else {
            st.prev.as_ref()
        };
        let default_mode = 0o666 & !st.umask;
        let cur_mode = cur.map_or(default_mode, |m| m.mode() & 0o7777);
        let wanted_mode = match &p.mode {
            None => None,
            Some(ModeSpec::Preserve) => Some(st.src_mode.ok_or_else(|| {
                ModuleError::Params(
                    "`mode: preserve` needs the source file's mode, which did not arrive \
                     (`_src_mode`); give a mode like \"0644\""
                        .into(),
                )
            })?),
            Some(spec) => spec.resolve(cur_mode, false).map_err(ModuleError::Params)?,
        };

        let content_changes = cur.is_none()
            || st
                .before
                .as_ref()
                .is_none_or(|(sum, n)| *sum != st.sha256 || *n != st.size);
        let mut attrs = Attrs::default();
        match cur {
            Some(m) => {
                attrs.mode = wanted_mode.filter(|w| *w != cur_mode);
                attrs.uid = st.uid.filter(|u| *u != m.uid());
                attrs.gid = st.gid.filter(|g| *g != m.gid());
                if let Some(mode) = attrs.mode {
                    plan.diff
                        .attr(&shown, "mode", mode_str(cur_mode), mode_str(mode));
                }
                if let Some(u) = attrs.uid {
                    plan.diff
                        .attr(&shown, "owner", user_name(m.uid()), user_name(u));
                }
                if let Some(g) = attrs.gid {
                    plan.diff
                        .attr(&shown, "group", group_name(m.gid()), group_name(g));
                }
                // The kernel drops setuid/setgid on chown; ask for the bits again so they stay.
                if (attrs.uid.is_some() || attrs.gid.is_some()) && cur_mode & 0o6000 != 0 {
                    attrs.mode.get_or_insert(wanted_mode.unwrap_or(cur_mode));
                }
            }
            None => {
                let before_state = if st.replace_link { "link" } else { "absent" };
                plan.diff.attr(&shown, "state", before_state, "file");
                // A new file: the mode is set explicitly, so a replaced symlink's target does
                // not lend its mode to the new file.
                let mode = wanted_mode
                    .or(if p.remote_src.0 { st.src_mode } else { None })
                    .unwrap_or(default_mode);
                // A brand-new file already has its creator's owner and group; only a replaced
                // link needs them spelled out (atomic_write would copy them from the target).
                let natural = |id: u32| if st.replace_link { Some(id) } else { None };
                attrs = Attrs {
                    mode: Some(mode),
                    uid: st.uid.or_else(|| natural(st.new_uid)),
                    gid: st.gid.or_else(|| natural(st.new_gid)),
                };
                if wanted_mode.is_some() {
                    plan.diff.attr(&shown, "mode", "", mode_str(mode));
                }
                if let Some(u) = st.uid {
                    plan.diff.attr(&shown, "owner", "", user_name(u));
                }
                if let Some(g) = st.gid {
                    plan.diff.attr(&shown, "group", "", group_name(g));
                }
            }
        }

        // Before anything is uploaded or planned: a destination that is not the expected
        // content fails the task, in check mode too.
        if content_changes || attrs != Attrs::default() {
            let found = match (&st.prev, &st.before) {
                (None, _) => Found::Absent,
                (Some(_), Some((sum, _))) => Found::Sha256(sum.clone()),
                (Some(m), None) => Found::other(m),
            };
            crate::fs::cas::require(&shown, p.if_checksum.as_ref(), &found)?;
        }
        let guard = p.if_checksum.as_ref();

        if content_changes {
            plan.diff.content.push(ContentDiff {
                path: shown.clone(),
                before: match (&st.before_side, &st.before) {
                    (Some(side), Some((_, n))) => side.shown(*n),
                    _ => String::new(),
                },
                // A controller file's text is filled in by the controller, which has it.
                after: match &st.data {
                    _ if !ctx.diff => String::new(),
                    Data::Bytes(b) => Side::of_src(b).shown(st.size),
                    Data::Host(_) if st.size > MAX_DIFF_SIZE => diff_skipped(st.size),
                    Data::Host(path) => {
                        diff_text(&fs::read(path).map_err(|e| ModuleError::io(path, e))?)
                    }
                    Data::Controller => String::new(),
                },
            });
            let at = locate(&st.dest, st.prev.as_ref().map(id_of))?.guarded(guard);
            // The bytes of a controller file are needed now: the agent stages an upload where
            // the file goes and the controller repeats the request once it is complete.
            if !ctx.check && matches!(st.data, Data::Controller) && !stage::ready(&st.sha256) {
                return Err(ModuleError::NeedContent {
                    dir: at.dir.clone(),
                    sha256: st.sha256.clone(),
                    size: st.size,
                });
            }
            // Ansible's copy module returns the new content's md5 when it writes (outside
            // FIPS mode); a controller file's bytes are not on the host yet: `apply` sums them
            // once they are written.
            if let Data::Bytes(b) = &st.data {
                plan.result
                    .insert("md5sum".into(), hex::encode(md5::Md5::digest(b)).into());
            }
            plan.actions.push(Action::Write {
                path: st.dest.clone(),
                at,
                attrs,
                backup: p.backup.0 && st.before.is_some(),
                validate: p.validate.clone(),
            });
        } else if attrs != Attrs::default() {
            plan.actions.push(Action::SetAttrs {
                path: st.dest.clone(),
                attrs,
                at: locate(&st.dest, st.prev.as_ref().map(id_of))?.guarded(guard),
            });
        }

        let r = &mut plan.result;
        if plan.actions.is_empty() {
            if let Some(m) = &st.prev {
                r.extend(meta_info(m));
            }
        }
        r.insert("state".into(), "file".into());
        r.insert("checksum".into(), st.sha1.clone().into());
        r.insert("size".into(), st.size.into());
        r.insert("changed".into(), (!plan.actions.is_empty()).into());
        match &st.data {
            // With `remote_src` the copy module runs whatever changes, and sums its source.
            Data::Host(path) => {
                plan.result
                    .insert("md5sum".into(), md5_of_file(path)?.into());
            }
            _ => result::shape(p, st, &mut plan, ctx, content_changes),
        }
        Ok(plan)
    }

    fn apply(
        _: &Params,
        st: Probed,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        let mut backup = None;
        for action in &plan.actions {
            match action {
                Action::Mkdir { attrs, at, .. } => {
                    mkdir_at(at, 0o777)?;
                    set_attrs_at(at, attrs)?;
                }
                Action::Write {
                    at,
                    attrs,
                    backup: want_backup,
                    validate,
                    ..
                } => {
                    if *want_backup {
                        backup = Some(backup_file(at)?);
                    }
                    let validate = validate.as_deref();
                    match &st.data {
                        Data::Bytes(b) => atomic_write(at, b, attrs, validate)?,
                        Data::Host(path) => {
                            let mut f =
                                fs::File::open(path).map_err(|e| ModuleError::io(path, e))?;
                            atomic_write_from(at, &mut f, attrs, validate)?
                        }
                        Data::Controller => {
                            // `plan` checked it is staged; nothing else takes it in between.
                            let staged = stage::take(&st.sha256).ok_or_else(|| {
                                ModuleError::failed("the uploaded content is no longer staged")
                            })?;
                            install_staged(at, staged, attrs, validate)?
                        }
                    }
                }
                Action::SetAttrs { at, attrs, .. } => set_attrs_at(at, attrs)?,
            }
        }
        let mut out = path_info(&st.dest)?;
        out.insert("state".into(), "file".into());
        let wrote = plan
            .actions
            .iter()
            .any(|a| matches!(a, Action::Write { .. }));
        if wrote && matches!(st.data, Data::Controller) {
            out.insert("md5sum".into(), md5_of_file(&st.dest)?.into());
        }
        if let Some(b) = backup {
            out.insert("backup_file".into(), b.into());
        }
        Ok(out)
    }
}
