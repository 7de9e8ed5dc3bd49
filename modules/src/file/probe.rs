//! The `file` module's probe: what is at `path`, at `src`, and below a `recurse` directory.

use super::params::time_param;
use super::{FileState, Params, TimeWant};
use crate::fs::{
    current_umask, expand_user, id_of, locate, lookup_gid, lookup_uid, lstat, missing_ancestors,
    names, parent_of, resolve, Dir, Found, Loc,
};
use crate::ModuleError;
use std::collections::HashSet;
use std::fs::{self, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

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
    /// Check mode's warnings of an owner or group this host lacks, in ansible-core's words:
    /// registered with the result, failed or not.
    pub warnings: Vec<String>,
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
            warnings: Vec::new(),
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

/// What is at `path` (and at `src`, and below a `recurse` directory) now.
pub(super) fn probe(p: &Params, check: bool) -> Result<Probed, ModuleError> {
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
            // ansible-core's get_state: a file with other hard links is `hard`, which needs no
            // `src` when it already is one.
            Some(m) if m.nlink() > 1 => FileState::Hard,
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
    // As in ansible-core, `touch` means touch: both times default to `now` (so it is changed on
    // every run unless both are `preserve`); every other state leaves them alone.
    let untold_time = (state == FileState::Touch).then_some("now");
    let report = match state {
        FileState::File | FileState::Directory => attr_path,
        _ => path.clone(),
    };

    let (uid, gid, warnings) = owner_and_group(p, state, check, attr_meta.is_some(), &report)?;

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
        uid,
        gid,
        umask: current_umask(),
        mtime: time_param(
            "modification_time",
            p.modification_time.as_deref().or(untold_time),
            p.modification_time_format.as_deref(),
        )?,
        atime: time_param(
            "access_time",
            p.access_time.as_deref().or(untold_time),
            p.access_time_format.as_deref(),
        )?,
        report,
        cas,
        appears_binary: None,
        warnings,
    })
}

/// The uid and gid asked for (`None`: keep), and check mode's warnings.
type Owners = (Option<u32>, Option<u32>, Vec<String>);

/// The uid and gid asked for, and check mode's warnings. In check mode ansible-core warns of an
/// owner or group (a name, or an id no account has) this host lacks, since an earlier task that
/// would have made it did not run; a name it cannot resolve then fails only where a chown would
/// be reached, on a path that exists. Otherwise an unknown name fails before anything changes
/// (ansible-core fails at its chown, after creating what it was asked to).
fn owner_and_group(
    p: &Params,
    state: FileState,
    check: bool,
    exists: bool,
    report: &Path,
) -> Result<Owners, ModuleError> {
    let mut warnings = Vec::new();
    // Removing a path sets no owner: ansible-core does not look one up.
    if state == FileState::Absent {
        return Ok((None, None, warnings));
    }
    if !check {
        let uid = p.owner.as_deref().map(lookup_uid).transpose()?;
        let gid = p.group.as_deref().map(lookup_gid).transpose()?;
        return Ok((uid, gid, warnings));
    }
    let kinds = [
        (
            "user",
            "uid",
            p.owner.as_deref(),
            lookup_uid as fn(&str) -> _,
        ),
        ("group", "gid", p.group.as_deref(), lookup_gid),
    ];
    let mut ids = [None, None];
    for (i, (kind, id_word, name, lookup)) in kinds.into_iter().enumerate() {
        let Some(name) = name else { continue };
        let known = match name.parse::<u32>() {
            Ok(id) if kind == "user" => names::user_by_uid(id).is_some(),
            Ok(id) => names::group_by_gid(id).is_some(),
            Err(_) if kind == "user" => names::uid_by_name(name).is_some(),
            Err(_) => names::gid_by_name(name).is_some(),
        };
        if !known {
            let key = if name.parse::<u32>().is_ok() {
                format!("{kind} with {id_word} {name}")
            } else {
                format!("{kind} {name}")
            };
            warnings.push(format!(
                "failed to look up {key}. Create {kind} up to this point in real play"
            ));
        }
        ids[i] = match lookup(name) {
            Ok(id) => Some(id),
            // Nothing to chown yet: ansible-core reports the path as one it would create.
            Err(_) if !exists => None,
            Err(ModuleError::Failed { msg, mut result }) => {
                result.insert("path".into(), report.display().to_string().into());
                result.insert("warnings".into(), warnings.clone().into());
                return Err(ModuleError::Failed { msg, result });
            }
            Err(e) => return Err(e),
        };
    }
    Ok((ids[0], ids[1], warnings))
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
