//! The `file` module: make a path a file, directory, symlink or hard link (or remove it), and set
//! its mode, owner, group and times, with the semantics of Ansible's `ansible.builtin.file`.
//!
//! Deliberate differences from Ansible, all so that a second run reports no change:
//! - `state: touch` on an existing path does **not** bump its times unless `modification_time: now`
//!   or `access_time: now` is given. Ansible defaults both to `now`, so its touch never converges;
//!   here both default to `preserve`, so touch only creates a missing file and sets attributes.
//! - With no `state`, a regular file that has other hard links counts as `file` (Ansible calls it
//!   `hard` and then demands a `src`).
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

use crate::fs::{
    current_umask, expand_user, group_name, id_of, locate, lookup_gid, lookup_uid, lstat,
    meta_info, missing_ancestors, mkdir_at, mode_str, parent_of, path_info, recheck_guard, resolve,
    state_of, user_name, with_entry, written, Dir, Found, IfChecksum, Loc,
};
use crate::params::{de_opt_string, Bool, ModeSpec};
use crate::{Ctx, Module, ModuleError, Plan};
use nix::sys::time::TimeSpec;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::{self, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

pub struct File;

/// What `path` should be.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum FileState {
    File,
    Directory,
    Link,
    Hard,
    Touch,
    Absent,
}

impl FileState {
    pub fn as_str(self) -> &'static str {
        match self {
            FileState::File => "file",
            FileState::Directory => "directory",
            FileState::Link => "link",
            FileState::Hard => "hard",
            FileState::Touch => "touch",
            FileState::Absent => "absent",
        }
    }
}

fn default_true() -> Bool {
    Bool(true)
}

/// Parameters of `file`, spelled as in Ansible.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The path to manage (`dest` and `name` are Ansible's aliases).
    #[serde(alias = "dest", alias = "name")]
    pub path: String,
    /// Default: what the path already is; `file` when it does not exist (`directory` with `recurse`).
    #[serde(default)]
    pub state: Option<FileState>,
    #[serde(default)]
    pub mode: Option<ModeSpec>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub owner: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub group: Option<String>,
    /// `state: directory` only: apply mode/owner/group/times to everything below `path` too.
    #[serde(default)]
    pub recurse: Bool,
    /// The link's target (`state: link`, may be relative to the link's directory) or the file to
    /// hard-link (`state: hard`).
    #[serde(default, deserialize_with = "de_opt_string")]
    pub src: Option<String>,
    /// Replace an existing file or empty directory with a link; create a symlink to a missing `src`.
    #[serde(default)]
    pub force: Bool,
    #[serde(default = "default_true")]
    pub follow: Bool,
    /// `preserve` (default), `now`, or a time in `modification_time_format`.
    #[serde(default, deserialize_with = "de_opt_string")]
    pub modification_time: Option<String>,
    /// strptime-style format; default `%Y%m%d%H%M.%S` as in Ansible.
    #[serde(default)]
    pub modification_time_format: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub access_time: Option<String>,
    #[serde(default)]
    pub access_time_format: Option<String>,
    /// fixpoint's compare-and-swap (not Ansible's), for `state: file`, `touch` and `absent`:
    /// change `path` only while its content has this sha256, or while it does not exist
    /// (`absent`); see `fs::cas`.
    #[serde(default)]
    pub if_checksum: Option<IfChecksum>,
    /// fixpoint's `if_unchanged_since_last_run`: the agent turns it into `if_checksum` with the
    /// sum the journal recorded for the file (see `fs::cas::check_unchanged_param`).
    #[serde(default)]
    pub if_unchanged_since_last_run: Bool,
    /// Ansible's internal diff peek (its action plugins pass it; so do its own tests): when given
    /// at all, true or false, the module only reports whether `path` looks binary (a NUL byte in
    /// its first 8 KiB) and changes nothing.
    #[serde(default, rename = "_diff_peek")]
    pub diff_peek: Option<Bool>,
}

/// A wanted access or modification time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeWant {
    /// Leave the time as it is.
    Preserve,
    /// Set it to the current time (always a change, as asked).
    Now,
    /// Seconds since the epoch.
    At(i64),
}

/// What an existing symlink or hard link is compared against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replace {
    /// Nothing is at `path`: create the link there.
    Nothing,
    /// A file or link is at `path`: create the new link beside it and rename it over.
    Entry,
    /// An empty directory is at `path` (`force: true`): remove it, then link.
    EmptyDir,
}

/// One step of a `file` plan.
///
/// Every action carries `at`, where its object was found by the probe (see `fs::Loc`): apply
/// reaches it through directory descriptors without following links, and refuses an object that
/// is no longer the one probed, so a file swapped for a symlink is never followed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Create one directory; its parents come earlier in the plan.
    Mkdir {
        path: PathBuf,
        at: Loc,
    },
    /// Create an empty regular file (`touch` on a missing path).
    CreateFile {
        path: PathBuf,
        at: Loc,
    },
    Symlink {
        path: PathBuf,
        src: PathBuf,
        replace: Replace,
        at: Loc,
    },
    HardLink {
        path: PathBuf,
        src: PathBuf,
        replace: Replace,
        at: Loc,
    },
    /// Unlink a file or symlink.
    Remove {
        path: PathBuf,
        at: Loc,
    },
    /// Remove a directory and everything below it (symlinks inside are removed, not followed).
    RemoveTree {
        path: PathBuf,
        at: Loc,
    },
    Chown {
        path: PathBuf,
        uid: Option<u32>,
        gid: Option<u32>,
        /// Change the symlink itself (lchown).
        nofollow: bool,
        at: Loc,
    },
    Chmod {
        path: PathBuf,
        mode: u32,
        at: Loc,
    },
    SetTimes {
        path: PathBuf,
        atime: TimeWant,
        mtime: TimeWant,
        nofollow: bool,
        at: Loc,
    },
}

impl Action {
    /// Where the action's object is (every action has one).
    fn at_mut(&mut self) -> &mut Loc {
        match self {
            Action::Mkdir { at, .. }
            | Action::CreateFile { at, .. }
            | Action::Symlink { at, .. }
            | Action::HardLink { at, .. }
            | Action::Remove { at, .. }
            | Action::RemoveTree { at, .. }
            | Action::Chown { at, .. }
            | Action::Chmod { at, .. }
            | Action::SetTimes { at, .. } => at,
        }
    }
}

/// The link half of the probe: what `src` means and where it leads.
#[derive(Debug)]
pub struct LinkProbe {
    /// The text the symlink should hold, or the file to hard-link from.
    pub src: PathBuf,
    /// Where `src` leads, resolved, with its metadata; `None` when it does not exist.
    pub target: Option<(PathBuf, Metadata)>,
}

/// One path below a `recurse` directory.
#[derive(Debug)]
pub struct Entry {
    pub path: PathBuf,
    pub meta: Metadata,
    /// Where the walk found it, through directory descriptors.
    pub at: Loc,
    /// A symlink met in the tree: attributes go to the link itself.
    pub nofollow: bool,
}

/// What `probe` found.
#[derive(Debug)]
pub struct Probed {
    /// `path` after `~` expansion (and, for `state: hard` into a directory, plus the source's name).
    pub path: PathBuf,
    /// The state asked for, or the default resolved from what exists.
    pub state: FileState,
    /// lstat of `path`.
    pub prev: Option<Metadata>,
    /// What the symlink at `path` holds now.
    pub current_link: Option<PathBuf>,
    /// When `path` is a symlink and `follow` is set: its resolved target (`None`: dangling).
    pub followed: Option<Option<(PathBuf, Metadata)>>,
    pub link: Option<LinkProbe>,
    /// `path` is a directory with nothing in it.
    pub dir_empty: bool,
    /// `state: directory` on a missing path: directories to create, outermost first.
    pub missing_dirs: Vec<PathBuf>,
    /// An ancestor that exists but is not a directory, so `missing_dirs` cannot be created.
    pub blocker: Option<PathBuf>,
    /// `recurse`: everything below the directory.
    pub tree: Vec<Entry>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub umask: u32,
    pub mtime: TimeWant,
    pub atime: TimeWant,
    /// The path whose attributes are reported (the followed target for `file`/`directory`).
    pub report: PathBuf,
    /// With `if_checksum`: what is at the path the task changes (the followed target, or for
    /// `absent` the path itself), and where.
    pub cas: Option<(Found, PathBuf)>,
    /// `_diff_peek`: whether `path` looks binary; nothing else was probed.
    pub appears_binary: Option<bool>,
}

impl Probed {
    /// The probe of a `_diff_peek` request: only the path and the guess.
    fn peek(path: PathBuf, appears_binary: bool) -> Probed {
        Probed {
            report: path.clone(),
            path,
            state: FileState::File,
            prev: None,
            current_link: None,
            followed: None,
            link: None,
            dir_empty: false,
            missing_dirs: Vec::new(),
            blocker: None,
            tree: Vec::new(),
            uid: None,
            gid: None,
            umask: 0,
            mtime: TimeWant::Preserve,
            atime: TimeWant::Preserve,
            cas: None,
            appears_binary: Some(appears_binary),
        }
    }
}

/// Ansible's guess for the diff peek: a NUL byte in the first 8 KiB; a file that cannot be read
/// counts as text.
fn appears_binary(path: &Path) -> bool {
    use std::io::Read;
    let mut head = Vec::with_capacity(8192);
    match fs::File::open(path) {
        Ok(f) => f.take(8192).read_to_end(&mut head).is_ok() && head.contains(&0),
        Err(_) => false,
    }
}

impl Module for File {
    type Params = Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if p.path.trim().is_empty() {
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
            // `state: link` without `src` keeps an existing link's target (to change its
            // attributes), as in Ansible; creating one without `src` fails on the host.
            if s == FileState::Hard && p.src.is_none() {
                return Err(ModuleError::Params(format!(
                    "state: {} needs `src`: the path the link points to",
                    s.as_str()
                )));
            }
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

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Probed, ModuleError> {
        let follow = p.follow.0;
        let mut path = expand_user(&p.path);
        if p.diff_peek.is_some() {
            let binary = appears_binary(&path);
            return Ok(Probed::peek(path, binary));
        }
        let src_text = p.src.as_deref().map(expand_user);
        // A relative hard-link source is relative to the directory `path` names an entry of.
        let hard_src = src_text.as_ref().map(|s| parent_of(&path).join(s));

        // Ansible: a hard link "into" an existing directory is created inside it, named like the source.
        if p.state == Some(FileState::Hard) {
            if let (Some(src), Some(m)) = (&src_text, lstat(&path)?) {
                if m.is_dir() {
                    if let Some(name) = src.file_name() {
                        path = path.join(name);
                    }
                }
            }
        }

        let prev = lstat(&path)?;
        let is_link = prev.as_ref().is_some_and(|m| m.file_type().is_symlink());
        let state = match p.state {
            Some(s) => s,
            None => match &prev {
                Some(m) if m.file_type().is_symlink() => FileState::Link,
                Some(m) if m.is_dir() => FileState::Directory,
                Some(_) => FileState::File,
                None if p.recurse.0 => FileState::Directory,
                None => FileState::File,
            },
        };
        if p.recurse.0 && state != FileState::Directory {
            return Err(ModuleError::Params(format!(
                "`recurse` requires state: directory, but {} is a {}",
                path.display(),
                state.as_str()
            )));
        }
        if p.src.is_some() && !matches!(state, FileState::Link | FileState::Hard) {
            return Err(ModuleError::Params(format!(
                "`src` requires state: link or state: hard ({} is a {})",
                path.display(),
                state.as_str()
            )));
        }

        let current_link = if is_link {
            Some(fs::read_link(&path).map_err(|e| ModuleError::io(&path, e))?)
        } else {
            None
        };
        let followed = if is_link && follow && state != FileState::Absent {
            Some(resolve(&path)?)
        } else {
            None
        };

        let link = match state {
            FileState::Link => {
                let src = src_text.clone().or_else(|| current_link.clone());
                match src {
                    Some(src) => {
                        let abs = parent_of(&path).join(&src);
                        Some(LinkProbe {
                            target: resolve(&abs)?,
                            src,
                        })
                    }
                    None => None,
                }
            }
            FileState::Hard => match hard_src {
                Some(src) => {
                    let target = match lstat(&src)? {
                        Some(m) if m.file_type().is_symlink() && follow => resolve(&src)?,
                        Some(m) => Some((src.clone(), m)),
                        None => None,
                    };
                    Some(LinkProbe { src, target })
                }
                None => None,
            },
            _ => None,
        };

        // Only a link may replace a directory (when it is empty): no other state lists it.
        let dir_empty = match &prev {
            Some(m) if m.is_dir() && state == FileState::Link => fs::read_dir(&path)
                .map_err(|e| ModuleError::io(&path, e))?
                .next()
                .is_none(),
            _ => false,
        };

        // The path whose attributes are set: the followed target for file/directory/touch.
        let (attr_path, attr_meta) = match &followed {
            Some(Some((real, m))) => (real.clone(), Some(m)),
            _ => (path.clone(), prev.as_ref()),
        };
        let mut missing_dirs = Vec::new();
        let mut blocker = None;
        let mut tree = Vec::new();
        if state == FileState::Directory {
            if prev.is_none() {
                (missing_dirs, blocker) = missing_ancestors(&path)?;
            } else if p.recurse.0 && attr_meta.is_some_and(|m| m.is_dir()) {
                let mut seen = HashSet::new();
                if let Some(m) = attr_meta {
                    seen.insert((m.dev(), m.ino()));
                    // The top directory is reached as the task names it (its links followed
                    // once, as Ansible does); everything below through descriptors only.
                    let real =
                        fs::canonicalize(&attr_path).map_err(|e| ModuleError::io(&attr_path, e))?;
                    let root = Dir::open_id(&real, Some(id_of(m)))?;
                    walk(&root, &real, follow, &mut seen, &mut tree)?;
                }
            }
        }

        let cas = match &p.if_checksum {
            None => None,
            Some(_) => {
                let at = if state == FileState::Absent {
                    &path
                } else {
                    &attr_path
                };
                Some((Found::at_path(at)?, at.clone()))
            }
        };
        let report = match state {
            FileState::File | FileState::Directory => attr_path,
            _ => path.clone(),
        };

        Ok(Probed {
            path,
            state,
            prev,
            current_link,
            followed,
            link,
            dir_empty,
            missing_dirs,
            blocker,
            tree,
            uid: p.owner.as_deref().map(lookup_uid).transpose()?,
            gid: p.group.as_deref().map(lookup_gid).transpose()?,
            umask: current_umask(),
            mtime: time_param(
                "modification_time",
                p.modification_time.as_deref(),
                p.modification_time_format.as_deref(),
            )?,
            atime: time_param(
                "access_time",
                p.access_time.as_deref(),
                p.access_time_format.as_deref(),
            )?,
            report,
            cas,
            appears_binary: None,
        })
    }

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
        if let Some(l) = &st.link {
            let src = match st.state {
                FileState::Link => l.src.display().to_string(),
                _ => p.src.clone().unwrap_or_default(),
            };
            r.insert("src".into(), src.into());
        }
        r.insert("changed".into(), (!plan.actions.is_empty()).into());
        // Registered only in diff mode, as ansible-core does.
        if ctx.diff {
            let diff = crate::file_diff::registered(&plan.diff, &[&st.path, &st.report]);
            plan.result.insert("diff".into(), diff);
        }
        Ok(plan)
    }

    fn apply(
        _: &Params,
        st: Probed,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        for action in &plan.actions {
            perform(action)?;
        }
        path_info(&st.report)
    }
}

/// The wanted attributes, resolved.
struct Want<'a> {
    mode: Option<&'a ModeSpec>,
    uid: Option<u32>,
    gid: Option<u32>,
    mtime: TimeWant,
    atime: TimeWant,
}

impl Want<'_> {
    fn any(&self) -> bool {
        self.mode.is_some()
            || self.uid.is_some()
            || self.gid.is_some()
            || self.mtime != TimeWant::Preserve
            || self.atime != TimeWant::Preserve
    }
}

/// The path whose attributes are compared: existing metadata, or a prediction for a path the plan creates.
enum Cur<'a> {
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
fn plan_attrs(
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
fn plan_attrs_at(
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
    if mtime != TimeWant::Preserve {
        plan.diff
            .attr(&shown, "mtime", fmt_cur_time(cur_m), fmt_want(mtime));
    }
    if atime != TimeWant::Preserve {
        plan.diff
            .attr(&shown, "atime", fmt_cur_time(cur_a), fmt_want(atime));
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

fn fmt_want(w: TimeWant) -> String {
    match w {
        TimeWant::Preserve => "preserve".into(),
        TimeWant::Now => "now".into(),
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

fn plan_absent<'a>(
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

fn plan_file<'a>(
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

fn plan_directory<'a>(
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

fn plan_touch<'a>(
    plan: &mut Plan<Action>,
    st: &'a Probed,
    want: &Want,
) -> Result<Option<&'a Metadata>, ModuleError> {
    if st.prev.is_none() {
        plan.diff
            .attr(st.path.display().to_string(), "state", "absent", "file");
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

fn plan_symlink<'a>(
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

fn plan_hardlink<'a>(
    plan: &mut Plan<Action>,
    p: &Params,
    st: &'a Probed,
    want: &Want,
) -> Result<Option<&'a Metadata>, ModuleError> {
    let shown = st.path.display().to_string();
    let link = link_src(st, "hard", "the file to link to")?;
    let (src, target) = link.target.as_ref().ok_or_else(|| {
        ModuleError::failed(format!(
            "src {} does not exist; a hard link needs an existing file",
            link.src.display()
        ))
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

/// Perform one planned action, on the object the probe found (see [`Action`]).
fn perform(action: &Action) -> Result<(), ModuleError> {
    match action {
        Action::Mkdir { at, .. } => mkdir_at(at, 0o777),
        Action::CreateFile { at, .. } => {
            let dir = Dir::open(&at.dir)?;
            recheck_guard(&dir, at)?;
            written::change(&dir.at(&at.name), None, || dir.create_file(&at.name))
        }
        Action::Symlink {
            src, replace, at, ..
        } => place_link(at, *replace, |d, name| d.symlink(src, name)),
        Action::HardLink {
            src, replace, at, ..
        } => place_link(at, *replace, |d, name| d.hard_link(src, name)),
        // Unlinked by name in the directory the probe saw: never what a link there points to.
        // With `if_checksum`, the content is looked at once more just before (`fs::cas`).
        Action::Remove { at, .. } => {
            let dir = Dir::open(&at.dir)?;
            recheck_guard(&dir, at)?;
            written::change(&dir.at(&at.name), Some(written::Left::Absent), || {
                dir.unlink(&at.name)
            })
        }
        Action::RemoveTree { at, .. } => {
            let dir = Dir::open(&at.dir)?;
            recheck_guard(&dir, at)?;
            dir.remove_tree(&at.name)
        }
        Action::Chown {
            uid,
            gid,
            nofollow,
            at,
            ..
        } => with_entry(at, *nofollow, |h| h.chown(*uid, *gid)),
        Action::Chmod { mode, at, .. } => with_entry(at, false, |h| h.chmod(*mode)),
        Action::SetTimes {
            atime,
            mtime,
            nofollow,
            at,
            ..
        } => {
            let spec = |t: &TimeWant| match t {
                TimeWant::Preserve => TimeSpec::UTIME_OMIT,
                TimeWant::Now => TimeSpec::UTIME_NOW,
                TimeWant::At(s) => TimeSpec::new(*s, 0),
            };
            with_entry(at, *nofollow, |h| h.set_times(&spec(atime), &spec(mtime)))
        }
    }
}

/// Create a link at `at` with `make`; an existing entry is replaced atomically (new link beside
/// it under an unpredictable name, then rename), an empty directory is removed first (rename
/// cannot replace a directory). All inside the directory the probe saw, reached without links.
fn place_link(
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

/// Everything below `dir` (whose canonical path is `path`), parents before children, sorted by
/// name for a stable plan, found through directory descriptors: a subdirectory is opened with
/// `O_NOFOLLOW`, so one swapped for a link during the walk is refused rather than listed.
/// With `follow`, a symlink's target is visited too (once: `seen` holds device and inode), as
/// Ansible does.
fn walk(
    dir: &Dir,
    path: &Path,
    follow: bool,
    seen: &mut HashSet<(u64, u64)>,
    out: &mut Vec<Entry>,
) -> Result<(), ModuleError> {
    for name in dir.names()? {
        let Some(h) = dir.entry(&name)? else {
            continue;
        };
        let meta = h.metadata()?;
        let entry_path = path.join(&name);
        let at = Loc {
            dir: path.to_path_buf(),
            name: name.clone(),
            id: Some(id_of(&meta)),
            guard: None,
        };
        if meta.file_type().is_symlink() {
            out.push(Entry {
                path: entry_path.clone(),
                meta,
                at,
                nofollow: true,
            });
            if follow {
                if let Some((real, m)) = resolve(&entry_path)? {
                    if seen.insert((m.dev(), m.ino())) {
                        let is_dir = m.is_dir();
                        let at = locate(&real, Some(id_of(&m)))?;
                        out.push(Entry {
                            path: real.clone(),
                            meta: m,
                            at,
                            nofollow: false,
                        });
                        if is_dir {
                            let id = out.last().and_then(|e| e.at.id);
                            walk(&Dir::open_id(&real, id)?, &real, follow, seen, out)?;
                        }
                    }
                }
            }
        } else if seen.insert((meta.dev(), meta.ino())) {
            let is_dir = meta.is_dir();
            out.push(Entry {
                path: entry_path.clone(),
                meta,
                at,
                nofollow: false,
            });
            if is_dir {
                walk(&dir.subdir(&name)?, &entry_path, follow, seen, out)?;
            }
        }
    }
    Ok(())
}

/// Parse `modification_time`/`access_time`: `preserve` (or unset), `now`, or a time in `format`.
fn time_param(
    field: &str,
    value: Option<&str>,
    format: Option<&str>,
) -> Result<TimeWant, ModuleError> {
    let format = format.unwrap_or("%Y%m%d%H%M.%S");
    match value.map(str::trim) {
        None | Some("preserve") => Ok(TimeWant::Preserve),
        Some("now") => Ok(TimeWant::Now),
        Some(v) => parse_time(v, format).map(TimeWant::At).map_err(|e| {
            ModuleError::Params(format!(
                "`{field}`: \"{v}\" does not match the format \"{format}\" ({e}); use \"now\", \
                 \"preserve\" or a time like 202401311530.00 (quote it in YAML)"
            ))
        }),
    }
}

/// A strptime subset (`%Y %y %m %d %H %M %S %%`, other characters literal), read as local time
/// like Python's `time.mktime(time.strptime(...))`, which Ansible uses.
fn parse_time(value: &str, format: &str) -> Result<i64, String> {
    let v = value.as_bytes();
    let mut i = 0;
    let (mut year, mut mon, mut day, mut hour, mut min, mut sec) = (1900, 1, 1, 0, 0, 0);
    let num = |i: &mut usize, max_digits: usize| -> Result<i32, String> {
        let start = *i;
        while *i < v.len() && *i - start < max_digits && v[*i].is_ascii_digit() {
            *i += 1;
        }
        if *i == start {
            return Err(format!("expected a number at position {start}"));
        }
        value[start..*i].parse::<i32>().map_err(|e| e.to_string())
    };
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            let mut buf = [0u8; 4];
            let lit = c.encode_utf8(&mut buf).as_bytes();
            if !v[i..].starts_with(lit) {
                return Err(format!("expected \"{c}\" at position {i}"));
            }
            i += lit.len();
            continue;
        }
        match chars.next() {
            Some('Y') => year = num(&mut i, 4)?,
            Some('y') => {
                let y = num(&mut i, 2)?;
                year = if y < 69 { 2000 + y } else { 1900 + y };
            }
            Some('m') => mon = num(&mut i, 2)?,
            Some('d') => day = num(&mut i, 2)?,
            Some('H') => hour = num(&mut i, 2)?,
            Some('M') => min = num(&mut i, 2)?,
            Some('S') => sec = num(&mut i, 2)?,
            Some('%') => {
                if v.get(i) != Some(&b'%') {
                    return Err(format!("expected \"%\" at position {i}"));
                }
                i += 1;
            }
            Some(other) => {
                return Err(format!(
                    "unsupported directive %{other} (supported: %Y %y %m %d %H %M %S %%)"
                ))
            }
            None => return Err("format ends with a lone %".into()),
        }
    }
    if i != v.len() {
        return Err(format!("unexpected \"{}\" at the end", &value[i..]));
    }
    if !(1..=12).contains(&mon)
        || !(1..=31).contains(&day)
        || !(0..=23).contains(&hour)
        || !(0..=59).contains(&min)
        || !(0..=61).contains(&sec)
    {
        return Err("a field is out of range".into());
    }
    // SAFETY: `tm` is a plain C struct; all-zero is a valid value (null tm_zone is allowed), and
    // mktime only reads and normalises it in place, keeping no pointer to it.
    let mut tm: nix::libc::tm = unsafe { std::mem::zeroed() };
    tm.tm_year = year - 1900;
    tm.tm_mon = mon - 1;
    tm.tm_mday = day;
    tm.tm_hour = hour;
    tm.tm_min = min;
    tm.tm_sec = sec;
    tm.tm_isdst = -1; // let the C library decide whether DST applies, as Python does
                      // SAFETY: `tm` is a valid, exclusively borrowed struct tm.
    let t = unsafe { nix::libc::mktime(&mut tm) };
    if t == -1 {
        return Err("not a representable local time".into());
    }
    Ok(t as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{CHECK, RUN};
    use crate::{check_params, run, Ctx};
    use nix::sys::stat::UtimensatFlags;
    use serde_json::json;
    use std::os::unix::fs::{symlink, PermissionsExt};

    /// Everything observable about a tree (lstat, without following links), to prove "nothing changed".
    fn snapshot(root: &Path) -> Vec<String> {
        let mut out = Vec::new();
        fn rec(p: &Path, out: &mut Vec<String>) {
            let m = fs::symlink_metadata(p).unwrap();
            let body = if m.file_type().is_symlink() {
                format!("-> {}", fs::read_link(p).unwrap().display())
            } else if m.is_file() {
                format!("{:?}", read_noatime(p))
            } else {
                String::new()
            };
            out.push(format!(
                "{} mode={:o} uid={} gid={} ino={} mtime={}.{} ctime={}.{} {}",
                p.display(),
                m.mode(),
                m.uid(),
                m.gid(),
                m.ino(),
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec(),
                body
            ));
            if m.is_dir() {
                let mut names: Vec<_> = fs::read_dir(p)
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .collect();
                names.sort();
                for n in names {
                    rec(&n, out);
                }
            }
        }
        rec(root, &mut out);
        out
    }

    /// Read without updating the access time, which some tests pin.
    fn read_noatime(p: &Path) -> Vec<u8> {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOATIME)
            .open(p)
            .unwrap();
        let mut v = Vec::new();
        f.read_to_end(&mut v).unwrap();
        v
    }

    fn mode_of(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    fn run_file(params: Value, ctx: &Ctx) -> crate::Outcome {
        run::<File>(&params, ctx).unwrap()
    }

    fn err_of(params: Value) -> String {
        run::<File>(&params, &RUN).unwrap_err().to_string()
    }

    #[test]
    fn directory_is_created_with_parents_and_converges() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("a/b/c");
        let params = json!({"path": d, "state": "directory", "mode": "0750"});

        let before = snapshot(t.path());
        let checked = run_file(params.clone(), &CHECK);
        assert!(checked.changed);
        assert_eq!(
            snapshot(t.path()),
            before,
            "check mode must not touch the disk"
        );
        assert!(checked
            .diff
            .attrs
            .iter()
            .any(|a| a.attr == "state" && a.after == "directory" && a.path.ends_with("a/b/c")));

        let first = run_file(params.clone(), &RUN);
        assert!(first.changed);
        assert!(d.is_dir());
        // Like Ansible, every created directory gets the mode.
        assert_eq!(mode_of(&t.path().join("a")), 0o750);
        assert_eq!(mode_of(&d), 0o750);
        assert_eq!(first.result["state"], "directory");
        assert_eq!(first.result["mode"], "0750");

        let stable = snapshot(t.path());
        let second = run_file(params, &RUN);
        assert!(!second.changed);
        assert!(second.diff.is_empty());
        assert_eq!(second.result["mode"], "0750");
        assert_eq!(
            snapshot(t.path()),
            stable,
            "a converged run must not write anything"
        );
    }

    #[test]
    fn directory_over_a_file_fails_clearly() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("f");
        fs::write(&f, "x").unwrap();
        let e = err_of(json!({"path": f, "state": "directory"}));
        assert!(e.contains("already exists as a file"), "{e}");
        let e = err_of(json!({"path": f.join("sub"), "state": "directory"}));
        assert!(e.contains("is not a directory"), "{e}");
    }

    #[test]
    fn mode_owner_group_change_without_rewrite_and_converge() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("f");
        fs::write(&f, "data").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o644)).unwrap();
        let ino = fs::metadata(&f).unwrap().ino();
        let params = json!({"path": f, "mode": "0600", "owner": "65534", "group": 65534});

        let first = run_file(params.clone(), &RUN);
        assert!(first.changed);
        let m = fs::metadata(&f).unwrap();
        assert_eq!(
            (m.mode() & 0o7777, m.uid(), m.gid(), m.ino()),
            (0o600, 65534, 65534, ino)
        );
        assert_eq!(fs::read(&f).unwrap(), b"data");
        let mode_diff = first.diff.attrs.iter().find(|a| a.attr == "mode").unwrap();
        assert_eq!(
            (mode_diff.before.as_str(), mode_diff.after.as_str()),
            ("0644", "0600")
        );
        assert!(first.diff.attrs.iter().any(|a| a.attr == "owner"));
        assert!(first.diff.attrs.iter().any(|a| a.attr == "group"));
        assert_eq!(first.result["uid"], 65534);
        assert_eq!(first.result["state"], "file");

        let stable = snapshot(t.path());
        let second = run_file(params, &RUN);
        assert!(!second.changed);
        assert_eq!(snapshot(t.path()), stable);
    }

    #[test]
    fn symbolic_mode_converges() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("f");
        fs::write(&f, "").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o666)).unwrap();
        let params = json!({"path": f, "state": "file", "mode": "go-w,u+x"});
        assert!(run_file(params.clone(), &RUN).changed);
        assert_eq!(mode_of(&f), 0o744);
        assert!(!run_file(params, &RUN).changed);
    }

    #[test]
    fn chown_keeps_setuid_bit() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("suid");
        fs::write(&f, "").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o4755)).unwrap();
        let params = json!({"path": f, "owner": "65534"});
        assert!(run_file(params.clone(), &RUN).changed);
        assert_eq!(mode_of(&f), 0o4755, "chown must not lose the setuid bit");
        assert!(!run_file(params, &RUN).changed);
    }

    #[test]
    fn state_file_on_missing_path_fails_like_ansible() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("nope");
        let e = err_of(json!({"path": f, "state": "file"}));
        assert!(e.contains("is absent, cannot continue"), "{e}");
        // No state and a missing path means state: file.
        let e = err_of(json!({"path": f, "mode": "0644"}));
        assert!(e.contains("is absent, cannot continue"), "{e}");
        assert!(!f.exists());
    }

    #[test]
    fn touch_creates_then_converges_without_bumping_times() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("t");
        let params = json!({"path": f, "state": "touch", "mode": "0640"});

        let before = snapshot(t.path());
        assert!(run_file(params.clone(), &CHECK).changed);
        assert_eq!(snapshot(t.path()), before);

        let first = run_file(params.clone(), &RUN);
        assert!(first.changed);
        assert_eq!(mode_of(&f), 0o640);
        assert_eq!(first.result["dest"], f.display().to_string());

        // Make the times old, so a bump would be visible.
        nix::sys::stat::utimensat(
            None,
            &f,
            &TimeSpec::new(1_000_000, 0),
            &TimeSpec::new(1_000_000, 0),
            UtimensatFlags::FollowSymlink,
        )
        .unwrap();
        let stable = snapshot(t.path());
        let second = run_file(params, &RUN);
        assert!(!second.changed);
        assert_eq!(snapshot(t.path()), stable);

        // Asking for `now` does bump them (and is always a change, as asked).
        let now = run_file(
            json!({"path": f, "state": "touch", "modification_time": "now"}),
            &RUN,
        );
        assert!(now.changed);
        let m = fs::metadata(&f).unwrap();
        assert!(m.mtime() > 1_000_000);
        assert_eq!(m.atime(), 1_000_000, "access_time stays preserved");
    }

    #[test]
    fn explicit_times_are_set_once() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("f");
        fs::write(&f, "").unwrap();
        let params = json!({
            "path": f,
            "state": "file",
            "modification_time": "2001-02-03 04:05:06",
            "modification_time_format": "%Y-%m-%d %H:%M:%S",
            "access_time": "200102030405.06",
        });
        let first = run_file(params.clone(), &RUN);
        assert!(first.changed);
        assert!(first.diff.attrs.iter().any(|a| a.attr == "mtime"));
        let m = fs::metadata(&f).unwrap();
        assert_eq!(m.mtime(), m.atime());
        assert_eq!(
            m.mtime(),
            parse_time("200102030405.06", "%Y%m%d%H%M.%S").unwrap()
        );
        let stable = snapshot(t.path());
        assert!(!run_file(params, &RUN).changed);
        assert_eq!(snapshot(t.path()), stable);
    }

    #[test]
    fn parse_time_reads_fields_and_rejects_garbage() {
        let a = parse_time("202401311530.00", "%Y%m%d%H%M.%S").unwrap();
        let b = parse_time("202401311531.05", "%Y%m%d%H%M.%S").unwrap();
        assert_eq!(b - a, 65);
        assert!(parse_time("2024013115", "%Y%m%d%H%M.%S").is_err());
        assert!(parse_time("202413311530.00", "%Y%m%d%H%M.%S").is_err());
        assert!(parse_time("202401311530.00x", "%Y%m%d%H%M.%S").is_err());
        assert!(parse_time("2024", "%j").is_err());
    }

    #[test]
    fn symlink_created_converges_and_retargets() {
        let t = tempfile::tempdir().unwrap();
        fs::write(t.path().join("one"), "1").unwrap();
        fs::write(t.path().join("two"), "2").unwrap();
        let l = t.path().join("l");
        let params = json!({"path": l, "state": "link", "src": "one"});

        let first = run_file(params.clone(), &RUN);
        assert!(first.changed);
        assert_eq!(fs::read_link(&l).unwrap(), Path::new("one"));
        assert_eq!(first.result["state"], "link");
        assert_eq!(first.result["src"], "one");
        assert_eq!(first.result["dest"], l.display().to_string());

        let stable = snapshot(t.path());
        assert!(!run_file(params, &RUN).changed);
        assert_eq!(snapshot(t.path()), stable);

        let re = run_file(json!({"path": l, "state": "link", "src": "two"}), &RUN);
        assert!(re.changed);
        let d = re.diff.attrs.iter().find(|a| a.attr == "src").unwrap();
        assert_eq!((d.before.as_str(), d.after.as_str()), ("one", "two"));
        assert_eq!(fs::read_to_string(&l).unwrap(), "2");
    }

    #[test]
    fn symlink_refusals_and_force() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("f");
        fs::write(&f, "keep").unwrap();
        fs::write(t.path().join("target"), "").unwrap();

        let e = err_of(json!({"path": f, "state": "link", "src": "target"}));
        assert!(
            e.contains("refusing to convert from file to symlink"),
            "{e}"
        );
        assert_eq!(fs::read(&f).unwrap(), b"keep");

        let e = err_of(json!({"path": t.path().join("l"), "state": "link", "src": "missing"}));
        assert!(
            e.contains("src file does not exist") && e.contains("force"),
            "{e}"
        );

        // force: replaces the file; and allows a dangling link.
        assert!(
            run_file(
                json!({"path": f, "state": "link", "src": "target", "force": "yes"}),
                &RUN
            )
            .changed
        );
        assert!(fs::symlink_metadata(&f).unwrap().file_type().is_symlink());
        assert!(run_file(json!({"path": t.path().join("l"), "state": "link", "src": "missing", "force": true}), &RUN).changed);

        let d = t.path().join("d");
        fs::create_dir(&d).unwrap();
        fs::write(d.join("x"), "").unwrap();
        let e = err_of(json!({"path": d, "state": "link", "src": "target", "force": true}));
        assert!(e.contains("not empty"), "{e}");
        fs::remove_file(d.join("x")).unwrap();
        assert!(
            run_file(
                json!({"path": d, "state": "link", "src": "target", "force": true}),
                &RUN
            )
            .changed
        );
        assert_eq!(fs::read_link(&d).unwrap(), Path::new("target"));
    }

    #[test]
    fn link_without_src_keeps_an_existing_link_and_cannot_create_one() {
        let t = tempfile::tempdir().unwrap();
        let target = t.path().join("target");
        fs::write(&target, "").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o644)).unwrap();
        let l = t.path().join("l");
        std::os::unix::fs::symlink("target", &l).unwrap();
        // Ansible's file target: attributes of the link itself, its target untouched.
        let params = json!({"path": l, "state": "link", "mode": "0600", "follow": false});
        check_params("file", &params).unwrap();
        let out = run_file(params, &RUN);
        assert!(!out.changed);
        assert_eq!(fs::read_link(&l).unwrap(), Path::new("target"));
        assert_eq!(mode_of(&target), 0o644);
        let missing = json!({"path": t.path().join("new"), "state": "link"});
        let e = run::<File>(&missing, &RUN).unwrap_err().to_string();
        assert!(
            e.starts_with("src is required for creating new symlinks"),
            "{e}"
        );
        assert!(check_params("file", &json!({"path": "/x", "state": "hard"})).is_err());
    }

    #[test]
    fn follow_decides_where_link_attributes_go() {
        let t = tempfile::tempdir().unwrap();
        let target = t.path().join("target");
        fs::write(&target, "").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o644)).unwrap();
        let l = t.path().join("l");

        // Default follow: the mode lands on the target.
        let out = run_file(
            json!({"path": l, "state": "link", "src": "target", "mode": "0600"}),
            &RUN,
        );
        assert!(out.changed);
        assert_eq!(mode_of(&target), 0o600);
        assert!(
            !run_file(
                json!({"path": l, "state": "link", "src": "target", "mode": "0600"}),
                &RUN
            )
            .changed
        );

        // follow: false: owner goes on the link itself, mode is ignored, the target is untouched.
        let params = json!({"path": l, "state": "link", "src": "target", "mode": "0640",
                            "owner": "65534", "follow": false});
        assert!(run_file(params.clone(), &RUN).changed);
        assert_eq!(fs::symlink_metadata(&l).unwrap().uid(), 65534);
        let tm = fs::metadata(&target).unwrap();
        assert_eq!((tm.mode() & 0o7777, tm.uid()), (0o600, 0));
        let stable = snapshot(t.path());
        assert!(!run_file(params, &RUN).changed);
        assert_eq!(snapshot(t.path()), stable);

        // state: file through a link with follow changes the target and reports its path.
        let out = run_file(json!({"path": l, "state": "file", "mode": "0604"}), &RUN);
        assert_eq!(mode_of(&target), 0o604);
        assert_eq!(
            out.result["path"],
            fs::canonicalize(&target).unwrap().display().to_string()
        );
        let e = err_of(json!({"path": l, "state": "file", "follow": false}));
        assert!(e.contains("is link, cannot continue"), "{e}");
    }

    #[test]
    fn hard_link_created_converges_and_needs_force_to_replace() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src");
        fs::write(&src, "s").unwrap();
        let h = t.path().join("h");
        let params = json!({"path": h, "state": "hard", "src": src});

        let before = snapshot(t.path());
        assert!(run_file(params.clone(), &CHECK).changed);
        assert_eq!(snapshot(t.path()), before);

        let first = run_file(params.clone(), &RUN);
        assert!(first.changed);
        assert_eq!(
            fs::metadata(&h).unwrap().ino(),
            fs::metadata(&src).unwrap().ino()
        );
        assert_eq!(first.result["state"], "hard");

        let stable = snapshot(t.path());
        assert!(!run_file(params, &RUN).changed);
        assert_eq!(snapshot(t.path()), stable);

        let other = t.path().join("other");
        fs::write(&other, "o").unwrap();
        let e = err_of(json!({"path": other, "state": "hard", "src": "src"}));
        assert!(e.contains("Cannot link") && e.contains("force"), "{e}");
        assert!(
            run_file(
                json!({"path": other, "state": "hard", "src": "src", "force": true}),
                &RUN
            )
            .changed
        );
        assert_eq!(
            fs::metadata(&other).unwrap().ino(),
            fs::metadata(&src).unwrap().ino()
        );

        // Into an existing directory: the link is named like the source (Ansible).
        let d = t.path().join("d");
        fs::create_dir(&d).unwrap();
        assert!(run_file(json!({"path": d, "state": "hard", "src": src}), &RUN).changed);
        assert_eq!(
            fs::metadata(d.join("src")).unwrap().ino(),
            fs::metadata(&src).unwrap().ino()
        );

        let e = err_of(json!({"path": t.path().join("x"), "state": "hard", "src": "nope"}));
        assert!(e.contains("does not exist"), "{e}");
    }

    #[test]
    fn absent_removes_trees_and_links_but_not_link_targets() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("d");
        fs::create_dir_all(d.join("sub")).unwrap();
        fs::write(d.join("sub/f"), "").unwrap();
        let keep = t.path().join("keep");
        fs::create_dir(&keep).unwrap();
        fs::write(keep.join("precious"), "").unwrap();
        let l = t.path().join("l");
        symlink(&keep, &l).unwrap();

        let before = snapshot(t.path());
        let checked = run_file(json!({"path": d, "state": "absent"}), &CHECK);
        assert!(checked.changed);
        assert_eq!(checked.diff.attrs[0].before, "directory");
        assert_eq!(snapshot(t.path()), before);

        assert!(run_file(json!({"path": d, "state": "absent"}), &RUN).changed);
        assert!(!d.exists());
        assert!(run_file(json!({"path": l, "state": "absent"}), &RUN).changed);
        assert!(fs::symlink_metadata(&l).is_err());
        assert!(keep.join("precious").exists());

        let e = check_params("file", &json!({"path": "/", "state": "absent"}));
        assert!(e.is_ok(), "the refusal is a run-time check");
        // Check mode: if this guard ever broke, the test must not remove the machine's files.
        let e = run::<File>(&json!({"path": "/", "state": "absent"}), &CHECK)
            .unwrap_err()
            .to_string();
        assert!(e.contains("refusing to remove /"), "{e}");

        let again = run_file(json!({"path": d, "state": "absent"}), &RUN);
        assert!(!again.changed);
        assert_eq!(again.result["state"], "absent");
    }

    #[test]
    fn recurse_sets_the_whole_tree_and_converges() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("tree");
        fs::create_dir_all(root.join("a/b")).unwrap();
        fs::write(root.join("a/f"), "").unwrap();
        fs::write(root.join("a/b/g"), "").unwrap();
        let outside = t.path().join("outside");
        fs::write(&outside, "").unwrap();
        symlink(&outside, root.join("a/l")).unwrap();

        let params = json!({"path": root, "state": "directory", "recurse": true,
                            "owner": "65534", "mode": "u=rwX,go=rX", "follow": false});
        assert!(run_file(params.clone(), &RUN).changed);
        for p in ["", "a", "a/b", "a/f", "a/b/g"] {
            let m = fs::symlink_metadata(root.join(p)).unwrap();
            assert_eq!(m.uid(), 65534, "{p}");
            assert_eq!(
                m.mode() & 0o7777,
                if m.is_dir() { 0o755 } else { 0o644 },
                "{p}"
            );
        }
        assert_eq!(fs::symlink_metadata(root.join("a/l")).unwrap().uid(), 65534);
        assert_eq!(
            fs::metadata(&outside).unwrap().uid(),
            0,
            "follow: false stays in the tree"
        );

        let stable = snapshot(t.path());
        assert!(!run_file(params, &RUN).changed);
        assert_eq!(snapshot(t.path()), stable);

        // Default follow reaches the link's target, as Ansible does.
        let params = json!({"path": root, "recurse": true, "owner": "65534"});
        assert!(run_file(params, &RUN).changed);
        assert_eq!(fs::metadata(&outside).unwrap().uid(), 65534);
    }

    #[test]
    fn check_mode_with_changes_leaves_disk_alone() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("f");
        fs::write(&f, "x").unwrap();
        let before = snapshot(t.path());
        for params in [
            json!({"path": f, "mode": "0700", "owner": "nobody"}),
            json!({"path": f, "state": "touch", "modification_time": "now"}),
            json!({"path": f, "state": "link", "src": "/etc", "force": true}),
            json!({"path": f, "state": "absent"}),
            json!({"path": t.path().join("n/m"), "state": "directory"}),
        ] {
            let out = run_file(params.clone(), &CHECK);
            assert!(out.changed, "{params}");
            assert!(!out.diff.is_empty(), "{params}");
            assert_eq!(snapshot(t.path()), before, "{params}");
        }
    }

    #[test]
    fn aliases_and_bad_parameters() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("x");
        assert!(run_file(json!({"dest": d, "state": "directory"}), &RUN).changed);
        assert!(!run_file(json!({"name": d, "state": "directory"}), &RUN).changed);

        // `state: link` without `src` is decided on the host (an existing link keeps its target).
        check_params("file", &json!({"path": "/x", "state": "link"})).unwrap();
        let e = check_params("file", &json!({"path": "/x", "src": "/y"})).unwrap_err();
        assert!(e
            .to_string()
            .contains("src option requires state to be 'link' or 'hard'"));
        let e = check_params("file", &json!({"path": "/x", "state": "hard"})).unwrap_err();
        assert!(e.to_string().contains("src"), "{e}");
        let e = check_params("file", &json!({"path": "/x", "state": "dir"})).unwrap_err();
        assert_eq!(e.path, "state");
        let e = check_params("file", &json!({"path": "/x", "mode": "rw-r--r--"})).unwrap_err();
        assert_eq!(e.path, "mode");
        let e = check_params("file", &json!({"path": "/x", "colour": "red"})).unwrap_err();
        assert!(e.to_string().contains("colour"), "{e}");
        let e = check_params(
            "file",
            &json!({"path": "/x", "state": "file", "recurse": true}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("recurse"), "{e}");
        let e = check_params(
            "file",
            &json!({"path": "/x", "state": "touch", "src": "/y"}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("src"), "{e}");
        let e = check_params(
            "file",
            &json!({"path": "/x", "modification_time": "yesterday"}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("modification_time"), "{e}");
        let e = check_params("file", &json!({"path": "/x", "follow": "maybe"})).unwrap_err();
        assert_eq!(e.path, "follow");
        let e = check_params("file", &json!({"state": "file"})).unwrap_err();
        assert!(e.to_string().contains("path"), "{e}");
        assert!(check_params("file", &json!({"path": "/x", "state": "link", "src": "/y"})).is_ok());

        let e = err_of(json!({"path": d, "owner": "no-such-user-fixpoint"}));
        assert!(e.contains("no-such-user-fixpoint"), "{e}");
    }
}
