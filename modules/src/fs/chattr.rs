//! Ansible's `attributes` file argument (alias `attr`): the inode flags `chattr` sets (`i`
//! immutable, `a` append-only, `A` no atime...), in Ansible's three forms: `+i` adds, `-i`
//! removes, and `i` or `=i` sets exactly these. Every module with Ansible's common file
//! arguments takes it; like the SELinux ones (`selinux.rs`) it is taken out of the parameters
//! here, once, and applied after the module ran, to the path the module managed, as Ansible's
//! `set_fs_attributes_if_different` does after the module's own work.
//!
//! The flags are read and written with the `FS_IOC_GETFLAGS`/`FS_IOC_SETFLAGS` ioctls (rustix,
//! already in the agent through `tempfile`), not by running `lsattr`/`chattr` as Ansible does:
//! the agent needs no e2fsprogs on the host, and compares sets of flags, not `lsattr`'s text. So
//! `+A` on a file that has `A` and the `e` (extents) flag converges, where Ansible compares the
//! text `Ae` with `A` and reports a change on every run (tests/conformance/DEVIATIONS.md).

use crate::{Ctx, ModuleError, Outcome};
use serde_json::Value;
use std::borrow::Cow;
use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The parameter names: Ansible's `attributes` and its alias `attr`.
pub const KEYS: &[&str] = &["attributes", "attr"];

/// The native agent modules that take it (`template` hands its parameters to `copy`). A
/// `copy` of a controller directory (`copy_tree`) takes it to refuse it clearly at run time.
const MODULES: &[&str] = &[
    "file",
    "copy",
    "copy_tree",
    "lineinfile",
    "blockinfile",
    "replace",
    "ini_file",
    "get_url",
    "uri",
];

/// Each flag as `lsattr` shows it, in `lsattr`'s order, with its bit (`FS_*_FL` of
/// `linux/fs.h`) and whether `chattr` can set it (the others the filesystem sets itself).
const FLAGS: &[(char, u32, bool)] = &[
    ('s', 0x0000_0001, true),  // secure deletion
    ('u', 0x0000_0002, true),  // undelete
    ('S', 0x0000_0008, true),  // synchronous updates
    ('D', 0x0001_0000, true),  // synchronous directory updates
    ('i', 0x0000_0010, true),  // immutable
    ('a', 0x0000_0020, true),  // append only
    ('d', 0x0000_0040, true),  // no dump
    ('A', 0x0000_0080, true),  // no atime updates
    ('c', 0x0000_0004, true),  // compressed
    ('E', 0x0000_0800, false), // encrypted
    ('j', 0x0000_4000, true),  // data journalling
    ('I', 0x0000_1000, false), // indexed directory
    ('t', 0x0000_8000, true),  // no tail merging
    ('T', 0x0002_0000, true),  // top of directory hierarchy
    ('e', 0x0008_0000, true),  // extents
    ('C', 0x0080_0000, true),  // no copy on write
    ('x', 0x0200_0000, true),  // direct access (DAX)
    ('F', 0x4000_0000, true),  // case-insensitive directory
    ('N', 0x1000_0000, false), // inline data
    ('P', 0x2000_0000, true),  // project hierarchy
    ('V', 0x0010_0000, false), // verity
    ('m', 0x0000_0400, true),  // do not compress
];

/// The extents flag is how ext4 stores the file, not a policy: `=` leaves it as it is (naming
/// it, or `-e`, still changes it). `chattr =A` clears it on a small file and fails half-way on
/// a large one; a converging `=` must not depend on the file's size.
const EXTENTS: u32 = 0x0008_0000;

/// How the wanted flags combine with the file's: Ansible's `+`, `-` and `=` (the default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Add,
    Remove,
    Set,
}

/// A parsed `attributes` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spec {
    pub op: Op,
    pub flags: u32,
}

/// Whether `module` takes the `attributes` argument.
pub fn takes(module: &str) -> bool {
    MODULES.contains(&module)
}

/// The parameters without `attributes`/`attr`, for a module that takes them.
pub fn without<'a>(module: &str, params: &'a Value) -> Cow<'a, Value> {
    match params.as_object() {
        Some(obj) if takes(module) && KEYS.iter().any(|k| obj.contains_key(*k)) => {
            let mut obj = obj.clone();
            for k in KEYS {
                obj.remove(*k);
            }
            Cow::Owned(Value::Object(obj))
        }
        _ => Cow::Borrowed(params),
    }
}

/// The `attributes` value of `params` (or its alias), parsed; `None` when not given, null, or
/// empty (Ansible does nothing for an empty value, `=` included).
pub fn spec_of(params: &Value) -> Result<Option<Spec>, String> {
    let Some(obj) = params.as_object() else {
        return Ok(None);
    };
    let Some((key, v)) = KEYS
        .iter()
        .find_map(|k| obj.get(*k).filter(|v| !v.is_null()).map(|v| (*k, v)))
    else {
        return Ok(None);
    };
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => {
            return Err(format!(
                "`{key}` must be a string of attribute letters such as `+i`, got {other}"
            ))
        }
    };
    parse(&text).map_err(|e| format!("`{key}`: {e}"))
}

/// Parse `+iA`, `-a`, `=i`, `i` (`=` assumed); an empty value (after the operator) is `None`.
pub fn parse(text: &str) -> Result<Option<Spec>, String> {
    let text = text.trim();
    let (op, letters) = match text.chars().next() {
        Some('+') => (Op::Add, &text[1..]),
        Some('-') => (Op::Remove, &text[1..]),
        Some('=') => (Op::Set, &text[1..]),
        _ => (Op::Set, text),
    };
    if letters.is_empty() {
        return Ok(None);
    }
    let mut flags = 0;
    for c in letters.chars() {
        match FLAGS.iter().find(|(l, _, _)| *l == c) {
            Some((_, bit, true)) => flags |= bit,
            Some((_, _, false)) => {
                return Err(format!(
                    "the attribute `{c}` is set by the filesystem and cannot be changed; \
                     settable attributes: {}",
                    settable_letters()
                ))
            }
            None => {
                return Err(format!(
                    "unknown attribute `{c}` in `{text}`; settable attributes: {}",
                    settable_letters()
                ))
            }
        }
    }
    Ok(Some(Spec { op, flags }))
}

fn settable_letters() -> String {
    FLAGS
        .iter()
        .filter(|(_, _, s)| *s)
        .map(|(l, _, _)| *l)
        .collect()
}

/// The flags as `lsattr` letters, in its order, without the dashes (Ansible's `attr_flags`).
pub fn letters(flags: u32) -> String {
    FLAGS
        .iter()
        .filter(|(_, bit, _)| flags & bit != 0)
        .map(|(l, _, _)| *l)
        .collect()
}

impl Spec {
    /// The flags a file with `current` should have; equal to `current` when nothing changes.
    pub fn wanted(&self, current: u32) -> u32 {
        match self.op {
            Op::Add => current | self.flags,
            Op::Remove => current & !self.flags,
            Op::Set => {
                let mut kept = FLAGS
                    .iter()
                    .filter(|(_, _, settable)| !settable)
                    .fold(EXTENTS, |m, (_, bit, _)| m | bit);
                // Named, the extents flag is set like any other.
                kept &= !self.flags;
                let unknown = FLAGS.iter().fold(!0u32, |m, (_, bit, _)| m & !bit);
                (current & (kept | unknown)) | self.flags
            }
        }
    }

    /// As the playbook wrote it, for the diff: `+A`, `-A`, `=A`.
    pub fn shown(&self) -> String {
        let op = match self.op {
            Op::Add => '+',
            Op::Remove => '-',
            Op::Set => '=',
        };
        format!("{op}{}", letters(self.flags))
    }
}

/// Open a regular file or directory to read or change its flags, without following a final
/// symlink and without blocking on a fifo; other kinds of files have no flags (as `lsattr`).
fn open(path: &Path) -> Result<fs::File, ModuleError> {
    let meta = fs::symlink_metadata(path).map_err(|e| ModuleError::io(path, e))?;
    let ft = meta.file_type();
    if !(ft.is_file() || ft.is_dir()) {
        let kind = if ft.is_symlink() {
            "a symlink"
        } else if ft.is_fifo() || ft.is_socket() || ft.is_char_device() || ft.is_block_device() {
            "a special file"
        } else {
            "not a file"
        };
        return Err(ModuleError::failed(format!(
            "cannot set attributes on {}: it is {kind}; only regular files and directories \
             have them",
            path.display()
        )));
    }
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| ModuleError::io(path, e))
}

/// The flags of `path` now.
pub fn read(path: &Path) -> Result<u32, ModuleError> {
    let f = open(path)?;
    rustix::fs::ioctl_getflags(&f)
        .map(|f| f.bits())
        .map_err(|e| ModuleError::failed(flags_error(path, "read", e)))
}

// `FS_IOC_GETVERSION`: the inode's generation number, which `lsattr -v` prints.
nix::ioctl_read!(fs_ioc_getversion, b'v', 1, nix::libc::c_long);

/// What `lsattr -vd path` reports, as Ansible's `stat` reads it: the generation number and the
/// flags. Like `lsattr`, it reads only regular files and directories (a symlink has none, even
/// with `follow`: Ansible asks `lsattr` about the path as given); `None` where `lsattr` fails.
pub fn lsattr(path: &Path) -> Option<(u64, u32)> {
    let meta = fs::symlink_metadata(path).ok()?;
    if !(meta.is_file() || meta.is_dir()) {
        return None;
    }
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let mut version: nix::libc::c_long = 0;
    // SAFETY: the descriptor is open for the call, and the kernel writes one `long` into
    // `version`, which lives across it.
    unsafe { fs_ioc_getversion(f.as_raw_fd(), &mut version) }.ok()?;
    let flags = rustix::fs::ioctl_getflags(&f).ok()?.bits();
    // `lsattr` prints the generation as an unsigned long.
    Some((version as u64, flags))
}

/// Ansible's names of the flags it knows, in `lsattr`'s letter order (its `attributes`).
pub fn names(flags: u32) -> Vec<&'static str> {
    const NAMES: &[(char, &str)] = &[
        ('A', "noatime"),
        ('a', "append"),
        ('c', "compressed"),
        ('C', "nocow"),
        ('d', "nodump"),
        ('D', "dirsync"),
        ('e', "extents"),
        ('E', "encrypted"),
        ('i', "immutable"),
        ('I', "indexed"),
        ('j', "journalled"),
        ('N', "inline"),
        ('s', "zero"),
        ('S', "synchronous"),
        ('t', "notail"),
        ('T', "blockroot"),
        ('u', "undelete"),
    ];
    letters(flags)
        .chars()
        .filter_map(|c| NAMES.iter().find(|(l, _)| *l == c).map(|(_, n)| *n))
        .collect()
}

/// Give `path` exactly `flags`.
pub fn write(path: &Path, flags: u32) -> Result<(), ModuleError> {
    let f = open(path)?;
    rustix::fs::ioctl_setflags(&f, rustix::fs::IFlags::from_bits_retain(flags))
        .map_err(|e| ModuleError::failed(flags_error(path, "set", e)))
}

fn flags_error(path: &Path, what: &str, e: rustix::io::Errno) -> String {
    let why = match e {
        rustix::io::Errno::NOTTY | rustix::io::Errno::OPNOTSUPP => {
            "the filesystem does not support attributes".to_string()
        }
        rustix::io::Errno::PERM => {
            "operation not permitted (`i` and `a` need root, the others the file's owner)"
                .to_string()
        }
        other => std::io::Error::from(other).to_string(),
    };
    format!(
        "chattr failed: cannot {what} the attributes of {}: {why}",
        path.display()
    )
}

/// The string parameter `key` of `params` (first of the names given).
fn string_param<'a>(params: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .find_map(|k| params.get(*k).and_then(Value::as_str))
}

fn bool_param(params: &Value, key: &str, default: bool) -> bool {
    match params.get(key) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => crate::params::parse_bool_str(s).unwrap_or(default),
        _ => default,
    }
}

/// The paths whose attributes the module's task sets, as Ansible's modules pass them to
/// `set_fs_attributes_if_different`; empty when there is none (`file state=absent`).
fn paths(module: &str, params: &Value, outcome: &Outcome) -> Result<Vec<PathBuf>, ModuleError> {
    let given = |keys: &[&str]| string_param(params, keys).map(crate::fs::expand_user);
    // copy, get_url and uri report the file they wrote as `dest` (a directory `dest` gets the
    // source's name inside it).
    let reported = || {
        outcome
            .result
            .get("dest")
            .and_then(Value::as_str)
            .map(PathBuf::from)
    };
    Ok(match module {
        "file" => {
            let Some(path) = given(&["path", "dest", "name"]) else {
                return Ok(Vec::new());
            };
            let state = string_param(params, &["state"]).unwrap_or("");
            if state == "absent" {
                return Ok(Vec::new());
            }
            let follow = bool_param(params, "follow", true);
            let is_link = fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
            // file, directory and touch set a followed link's target, as `mode` does.
            let path = if follow && is_link && !matches!(state, "link" | "hard") {
                fs::canonicalize(&path).unwrap_or(path)
            } else {
                path
            };
            if state == "directory" && bool_param(params, "recurse", false) {
                let mut all = vec![path.clone()];
                walk(&path, &mut all);
                all
            } else {
                vec![path]
            }
        }
        "copy" | "get_url" | "uri" => reported()
            .or_else(|| given(&["dest"]))
            .into_iter()
            .collect(),
        "copy_tree" => {
            return Err(ModuleError::failed(
                "`attributes` on a `copy` of a directory is not supported yet: set them with \
                 `file` (`recurse: true`) after the copy",
            ))
        }
        _ => given(&["path", "dest", "destfile", "name"])
            .into_iter()
            .collect(),
    })
}

/// Every entry below `dir`, depth first, without following symlinks (Ansible's recursive
/// `file` skips links unless `follow`; a link has no flags of its own).
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_symlink() {
            continue;
        }
        out.push(e.path());
        if ft.is_dir() {
            walk(&e.path(), out);
        }
    }
}

/// After the module ran: give its path the `attributes` the task asks for, reporting the
/// change (and its diff) in `outcome`. In check mode nothing is written; a path the module
/// would have created counts as a change, as in Ansible. `before_apply` runs before the first
/// change (the agent records the task's handlers there; it may have run already).
pub fn reconcile(
    module: &str,
    params: &Value,
    ctx: &Ctx,
    outcome: &mut Outcome,
    before_apply: &mut dyn FnMut() -> Result<(), ModuleError>,
) -> Result<(), ModuleError> {
    if !takes(module) {
        return Ok(());
    }
    let Some(spec) = spec_of(params).map_err(ModuleError::Params)? else {
        return Ok(());
    };
    for path in paths(module, params, outcome)? {
        let shown = path.display().to_string();
        if fs::symlink_metadata(&path).is_err() {
            // Only check mode leaves a path the module creates missing.
            if ctx.check {
                outcome.changed = true;
                outcome
                    .diff
                    .attr(&shown, "attributes", "absent", spec.shown());
            }
            continue;
        }
        let current = read(&path)?;
        let wanted = spec.wanted(current);
        if wanted == current {
            continue;
        }
        outcome.changed = true;
        outcome
            .diff
            .attr(&shown, "attributes", letters(current), letters(wanted));
        if !ctx.check {
            before_apply()?;
            write(&path, wanted)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const A: u32 = 0x80;
    const I: u32 = 0x10;

    #[test]
    fn parses_ansibles_three_forms() {
        assert_eq!(
            parse("+A").unwrap(),
            Some(Spec {
                op: Op::Add,
                flags: A
            })
        );
        assert_eq!(
            parse("-iA").unwrap(),
            Some(Spec {
                op: Op::Remove,
                flags: A | I
            })
        );
        assert_eq!(parse("=A").unwrap(), parse("A").unwrap());
        // Empty, with or without an operator: Ansible does nothing.
        assert_eq!(parse("").unwrap(), None);
        assert_eq!(parse("=").unwrap(), None);
        let e = parse("+Q").unwrap_err();
        assert!(
            e.contains("unknown attribute `Q`") && e.contains("settable attributes: su"),
            "{e}"
        );
        let e = parse("E").unwrap_err();
        assert!(e.contains("set by the filesystem"), "{e}");
    }

    #[test]
    fn letters_follow_lsattrs_order() {
        assert_eq!(letters(A | I | EXTENTS), "iAe");
        assert_eq!(parse("Ai").unwrap().unwrap().flags, A | I);
    }

    #[test]
    fn wanted_flags_per_operator() {
        let add = parse("+A").unwrap().unwrap();
        assert_eq!(add.wanted(A | EXTENTS), A | EXTENTS, "already there");
        assert_eq!(add.wanted(EXTENTS), A | EXTENTS);
        let rm = parse("-A").unwrap().unwrap();
        assert_eq!(rm.wanted(EXTENTS), EXTENTS, "already absent");
        assert_eq!(rm.wanted(A | I), I);
        let set = parse("A").unwrap().unwrap();
        // `=` replaces what can be set, keeps extents and what the filesystem sets (`I`).
        assert_eq!(set.wanted(I | EXTENTS | 0x1000), A | EXTENTS | 0x1000);
        assert_eq!(set.wanted(A | EXTENTS), A | EXTENTS);
        let set_e = parse("=Ae").unwrap().unwrap();
        assert_eq!(set_e.wanted(0), A | EXTENTS);
    }

    #[test]
    fn spec_of_reads_the_alias_and_refuses_other_types() {
        assert_eq!(
            spec_of(&json!({"attr": "+i"})).unwrap(),
            parse("+i").unwrap()
        );
        assert_eq!(spec_of(&json!({"attributes": null})).unwrap(), None);
        assert!(spec_of(&json!({"attributes": ["i"]})).is_err());
        let p = json!({"path": "/x", "attributes": "i", "mode": "0644"});
        assert_eq!(
            without("file", &p).as_ref(),
            &json!({"path": "/x", "mode": "0644"})
        );
        assert_eq!(without("stat", &p).as_ref(), &p);
    }

    /// A real file on the test machine's filesystem: `A` (no atime) needs no privilege. A
    /// filesystem without flags (tmpfs before Linux 6.0) makes `read` fail, which is checked too.
    #[test]
    fn reconcile_sets_adds_and_removes_on_a_real_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        fs::write(&f, "").unwrap();
        let Ok(before) = read(&f) else {
            eprintln!("no inode flags on this filesystem; skipped");
            return;
        };
        let mut noop = || Ok(());
        let run = |attrs: &str, check: bool, noop: &mut dyn FnMut() -> Result<(), ModuleError>| {
            let params = json!({"path": f.to_str().unwrap(), "attributes": attrs});
            let mut out = Outcome::default();
            reconcile("file", &params, &Ctx { check, diff: true }, &mut out, noop).unwrap();
            out
        };
        let out = run("+A", true, &mut noop);
        assert!(out.changed);
        assert_eq!(read(&f).unwrap(), before, "check mode writes nothing");
        let out = run("+A", false, &mut noop);
        assert!(out.changed);
        assert_eq!(out.diff.attrs[0].attr, "attributes");
        assert!(read(&f).unwrap() & A != 0);
        assert!(!run("+A", false, &mut noop).changed, "converged");
        if before == 0 || before == EXTENTS {
            assert!(
                !run("=A", false, &mut noop).changed,
                "`=` keeps the extents flag"
            );
        }
        assert!(run("-A", false, &mut noop).changed);
        assert_eq!(read(&f).unwrap() & A, 0);
        assert!(!run("-A", false, &mut noop).changed);
        assert!(!run("", false, &mut noop).changed);
        // A module's path that check mode did not create: a change, nothing read.
        let params = json!({"path": dir.path().join("new").to_str().unwrap(), "attributes": "A"});
        let mut out = Outcome::default();
        let ctx = Ctx {
            check: true,
            diff: false,
        };
        reconcile("file", &params, &ctx, &mut out, &mut noop).unwrap();
        assert!(out.changed);
    }
}
