//! The `find` module: list the files under directories that pass Ansible's filters (name
//! patterns, content, type, age, size, mode), each described as `find` describes it. Read-only:
//! its plan is always empty and it never reports a change.
//!
//! The walk follows Python's `os.walk` as Ansible's module drives it, so that `files`,
//! `examined` and `skipped_paths` agree with it: each directory's entries in the order the
//! kernel lists them, non-directories before directories, a directory's subtree before its next
//! sibling; hidden entries are skipped but hidden directories are still entered; `depth` counts
//! levels below each path.

mod codec;

use crate::fs::expand_user;
use crate::params::{apply_symbolic, de_opt_string, Bool};
use crate::text::compile_regex;
use crate::{Ctx, Module, ModuleError, Plan};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::fs::{self, Metadata};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

pub struct Find;

/// A list parameter as Ansible converts it: a list, or one string split on commas.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommaList(pub Vec<String>);

impl<'de> Deserialize<'de> for CommaList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(CommaList(Vec::new())),
            Value::String(s) => Ok(CommaList(s.split(',').map(str::to_string).collect())),
            Value::Number(n) => Ok(CommaList(vec![n.to_string()])),
            Value::Array(items) => items
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    Value::Number(n) => Ok(n.to_string()),
                    Value::Bool(b) => Ok(if b { "True" } else { "False" }.to_string()),
                    other => Err(serde::de::Error::custom(format!(
                        "expected a string in the list, found {other}"
                    ))),
                })
                .collect::<Result<_, _>>()
                .map(CommaList),
            other => Err(serde::de::Error::custom(format!(
                "expected a list or a comma-separated string, found {other}"
            ))),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum FileType {
    #[default]
    File,
    Directory,
    Link,
    Any,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AgeStamp {
    Atime,
    Ctime,
    #[default]
    Mtime,
}

/// `checksum_algorithm`: find offers md5 besides the SHA family.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    Md5,
    #[default]
    Sha1,
    Sha224,
    Sha256,
    Sha384,
    Sha512,
}

/// Parameters of `find`, spelled as in Ansible.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(alias = "name", alias = "path")]
    pub paths: CommaList,
    #[serde(default, alias = "pattern")]
    pub patterns: CommaList,
    #[serde(default, alias = "exclude")]
    pub excludes: CommaList,
    /// A regular expression searched in each file's content (`file_type: file` only).
    #[serde(default, deserialize_with = "de_opt_string")]
    pub contains: Option<String>,
    #[serde(default)]
    pub read_whole_file: Bool,
    #[serde(default)]
    pub file_type: FileType,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub age: Option<String>,
    #[serde(default)]
    pub age_stamp: AgeStamp,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub size: Option<String>,
    #[serde(default)]
    pub recurse: Bool,
    #[serde(default)]
    pub hidden: Bool,
    #[serde(default)]
    pub follow: Bool,
    #[serde(default)]
    pub get_checksum: Bool,
    #[serde(default, alias = "checksum", alias = "checksum_algo")]
    pub checksum_algorithm: Algorithm,
    #[serde(default)]
    pub use_regex: Bool,
    #[serde(default)]
    pub depth: Option<i64>,
    /// Octal or symbolic; Ansible refuses a number here (YAML would have read `0644` as 420).
    #[serde(default)]
    pub mode: Option<Value>,
    #[serde(default = "yes")]
    pub exact_mode: Bool,
    /// How `contains` reads files: a Python codec name (`codec.rs`), UTF-8 without one.
    #[serde(default)]
    pub encoding: Option<String>,
    #[serde(default)]
    pub limit: Option<i64>,
}

fn yes() -> Bool {
    Bool(true)
}

/// `age` in seconds: `-3d`, `2w`, `90` (Ansible's units s, m, h, d, w).
fn parse_age(s: &str) -> Option<i64> {
    parse_scaled(
        s,
        &[
            ('s', 1),
            ('m', 60),
            ('h', 3600),
            ('d', 86400),
            ('w', 604_800),
        ],
    )
}

/// `size` in bytes: `10k`, `-1m`, `300` (units b, k, m, g, t, powers of 1024).
fn parse_size(s: &str) -> Option<i64> {
    parse_scaled(
        s,
        &[
            ('b', 1),
            ('k', 1 << 10),
            ('m', 1 << 20),
            ('g', 1 << 30),
            ('t', 1 << 40),
        ],
    )
}

fn parse_scaled(s: &str, units: &[(char, i64)]) -> Option<i64> {
    let s = s.to_lowercase();
    let (num, mult) = match s.chars().last() {
        Some(c) if c.is_ascii_alphabetic() => {
            let (_, m) = units.iter().find(|(u, _)| *u == c)?;
            (&s[..s.len() - 1], *m)
        }
        _ => (s.as_str(), 1),
    };
    let digits = num.strip_prefix('-').unwrap_or(num);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    num.parse::<i64>().ok()?.checked_mul(mult)
}

/// The permission bits `mode` stands for: octal, else symbolic applied to 0 (as Ansible does).
fn parse_mode(v: &Value) -> Result<u32, ModuleError> {
    let Value::String(s) = v else {
        return Err(ModuleError::Params(format!(
            "argument 'mode' is not a string and conversion is not allowed, value is {v}; quote it (\"0644\")"
        )));
    };
    match u32::from_str_radix(s.trim(), 8) {
        Ok(m) => Ok(m & 0o7777),
        Err(_) => apply_symbolic(0, s.trim(), false).map_err(ModuleError::Params),
    }
}

/// A name filter: fnmatch globs, or Python regexes matched at the start of the name.
enum Matcher {
    Glob(glob::Pattern),
    Regex(crate::text::regex::Regex),
}

impl Matcher {
    fn new(pattern: &str, use_regex: bool, field: &str) -> Result<Matcher, ModuleError> {
        if use_regex {
            return compile_regex(field, &format!("^(?:{pattern})")).map(Matcher::Regex);
        }
        // fnmatch: `**` is `*`, and a `[` that opens no class is literal.
        let mut collapsed = String::with_capacity(pattern.len());
        for c in pattern.chars() {
            if !(c == '*' && collapsed.ends_with('*')) {
                collapsed.push(c);
            }
        }
        let pat = glob::Pattern::new(&collapsed)
            .or_else(|_| glob::Pattern::new(&glob::Pattern::escape(pattern)))
            .map_err(|e| ModuleError::Params(format!("`{field}`: {e}")))?;
        Ok(Matcher::Glob(pat))
    }

    fn matches(&self, name: &str) -> bool {
        match self {
            Matcher::Glob(p) => p.matches_with(
                name,
                glob::MatchOptions {
                    case_sensitive: true,
                    require_literal_separator: false,
                    require_literal_leading_dot: false,
                },
            ),
            Matcher::Regex(r) => r.is_match(name.as_bytes()),
        }
    }
}

/// Everything the filters need, compiled once.
struct Filters {
    patterns: Vec<Matcher>,
    excludes: Vec<Matcher>,
    contains: Option<crate::text::regex::Regex>,
    /// `contains` has a `$` (and no `\Z`): searched in the whole file, it may also match
    /// before the file's final newline, as Python's `$` does.
    contains_dollar: bool,
    /// How `contains` decodes a file; `encoding` as given, for messages.
    codec: codec::Codec,
    encoding: Option<String>,
    age: Option<i64>,
    size: Option<i64>,
    mode: Option<u32>,
}

impl Filters {
    fn new(p: &Params) -> Result<Filters, ModuleError> {
        let regex = p.use_regex.0;
        let patterns: Vec<String> = if p.patterns.0.is_empty() {
            vec![if regex { ".*" } else { "*" }.to_string()]
        } else {
            p.patterns.0.clone()
        };
        let compile = |list: &[String], field: &str| {
            list.iter()
                .map(|s| Matcher::new(s, regex, field))
                .collect::<Result<Vec<_>, _>>()
        };
        let codec = codec::lookup(p.encoding.as_deref());
        if let (codec::Codec::Unsupported, Some(e)) = (codec, &p.encoding) {
            return Err(ModuleError::Params(format!(
                "encoding `{e}`: fixpoint's find does not decode this Python codec (see the \
                 README's `find` for those it does)"
            )));
        }
        Ok(Filters {
            patterns: compile(&patterns, "patterns")?,
            excludes: compile(&p.excludes.0, "excludes")?,
            contains: p
                .contains
                .as_deref()
                .map(|c| {
                    if p.read_whole_file.0 {
                        compile_regex("contains", c)
                    } else {
                        compile_regex("contains", &format!("^(?:{c})"))
                    }
                })
                .transpose()?,
            contains_dollar: p
                .contains
                .as_deref()
                .is_some_and(|c| c.contains('$') && !c.contains("\\Z")),
            codec,
            encoding: p.encoding.clone(),
            age: p
                .age
                .as_deref()
                .map(|a| {
                    parse_age(a).ok_or_else(|| ModuleError::Params("failed to process age".into()))
                })
                .transpose()?,
            size: p
                .size
                .as_deref()
                .map(|s| {
                    parse_size(s)
                        .ok_or_else(|| ModuleError::Params("failed to process size".into()))
                })
                .transpose()?,
            mode: p.mode.as_ref().map(parse_mode).transpose()?,
        })
    }

    /// Ansible's `pfilter`: one pattern matches and no exclude does.
    fn name(&self, name: &str) -> bool {
        self.patterns.iter().any(|m| m.matches(name))
            && !self.excludes.iter().any(|m| m.matches(name))
    }

    fn age(&self, m: &Metadata, stamp: AgeStamp, now: f64) -> bool {
        let Some(age) = self.age else { return true };
        let t = match stamp {
            AgeStamp::Atime => secs(m.atime(), m.atime_nsec()),
            AgeStamp::Ctime => secs(m.ctime(), m.ctime_nsec()),
            AgeStamp::Mtime => secs(m.mtime(), m.mtime_nsec()),
        };
        if age >= 0 {
            now - t >= age as f64
        } else {
            now - t <= age.unsigned_abs() as f64
        }
    }

    fn size(&self, m: &Metadata) -> bool {
        match self.size {
            None => true,
            Some(s) if s >= 0 => m.size() >= s as u64,
            Some(s) => m.size() <= s.unsigned_abs(),
        }
    }

    fn mode(&self, m: &Metadata, exact: bool) -> bool {
        match self.mode {
            None => true,
            Some(want) if exact => m.mode() & 0o7777 == want,
            Some(want) => m.mode() & want != 0,
        }
    }

    /// Ansible's `contentfilter`: a line that matches at its start, or the whole file searched.
    /// An unreadable file does not match.
    fn content(&self, path: &Path, whole: bool) -> Result<bool, String> {
        let Some(re) = &self.contains else {
            return Ok(true);
        };
        let mut bytes = Vec::new();
        if fs::File::open(path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .is_err()
        {
            return Ok(false);
        }
        let encoding = self.encoding.as_deref();
        if let (codec::Codec::Unknown, Some(name)) = (self.codec, encoding) {
            // Python's `LookupError`, raised when the file is opened: the path is skipped.
            return Err(format!("unknown encoding: {name}"));
        }
        let Some(text) = codec::decode(self.codec, bytes) else {
            return Err(format!(
                "Failed to read the file {} due to an encoding error. current encoding: {}",
                path.display(),
                // ansible-core's words when `open` chose the encoding.
                encoding.unwrap_or(
                    "None (default determined by the Python built-in function \"open\")"
                )
            ));
        };
        if whole {
            // Python's `$` (without MULTILINE) matches at the end of the text or before a
            // newline that ends it; Rust's only at the end: the text without that newline is
            // searched too.
            let b = text.as_bytes();
            let before_final_newline =
                self.contains_dollar && b.ends_with(b"\n") && re.is_match(&b[..b.len() - 1]);
            return Ok(re.is_match(b) || before_final_newline);
        }
        Ok(text
            .split_inclusive('\n')
            .any(|l| re.is_match(l.trim_end_matches('\n').as_bytes())))
    }
}

fn secs(s: i64, ns: i64) -> f64 {
    s as f64 + ns as f64 / 1e9
}

impl Module for Find {
    type Params = Params;
    /// The complete result: files, matched, examined, skipped_paths, msg.
    type State = Map<String, Value>;
    /// find never acts.
    type Action = std::convert::Infallible;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if p.paths.0.iter().all(|s| s.trim().is_empty()) {
            return Err(ModuleError::Params("`paths` must not be empty".into()));
        }
        if let Some(l) = p.limit {
            if l <= 0 {
                return Err(ModuleError::Params(format!(
                    "limit cannot be {l} (use None for unlimited)"
                )));
            }
        }
        Filters::new(p).map(|_| ())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Map<String, Value>, ModuleError> {
        let filters = Filters::new(p)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let mut w = Walk {
            p,
            f: &filters,
            now,
            files: Vec::new(),
            skipped: Map::new(),
            examined: 0,
            warned: false,
            limit_hit: false,
        };
        for raw in &p.paths.0 {
            let top = expand_user(raw);
            if !top.is_dir() {
                w.skipped.insert(
                    top.display().to_string(),
                    format!("'{}' is not a directory", top.display()).into(),
                );
                w.warned = true;
                continue;
            }
            if let Err(e) = w.walk(&top) {
                w.skipped.insert(top.display().to_string(), e.into());
                w.warned = true;
            }
        }
        let msg = if w.warned {
            "Not all paths examined, check warnings for details"
        } else if w.limit_hit {
            "Limit of matches reached"
        } else {
            "All paths examined"
        };
        let mut out = Map::new();
        out.insert("files".into(), Value::Array(w.files.clone()));
        out.insert("changed".into(), false.into());
        out.insert("msg".into(), msg.into());
        out.insert("matched".into(), w.files.len().into());
        out.insert("examined".into(), w.examined.into());
        out.insert("skipped_paths".into(), Value::Object(w.skipped));
        Ok(out)
    }

    fn plan(
        _: &Params,
        state: &Map<String, Value>,
        _ctx: &Ctx,
    ) -> Result<Plan<Self::Action>, ModuleError> {
        Ok(Plan::report(state))
    }

    fn apply(
        _: &Params,
        _: Map<String, Value>,
        plan: &Plan<Self::Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        plan.nothing_to_apply()
    }
}

/// One `find` in progress.
struct Walk<'a> {
    p: &'a Params,
    f: &'a Filters,
    now: f64,
    files: Vec<Value>,
    skipped: Map<String, Value>,
    examined: usize,
    warned: bool,
    limit_hit: bool,
}

/// Python's `str(OSError)`: `[Errno 13] Permission denied: '/x'`.
fn os_error(path: &Path, e: &std::io::Error) -> String {
    let text = e.to_string();
    // Rust appends " (os error N)"; Python puts the number first.
    let bare = text.split(" (os error").next().unwrap_or(&text);
    match e.raw_os_error() {
        Some(n) => format!("[Errno {n}] {bare}: '{}'", path.display()),
        None => format!("{bare}: '{}'", path.display()),
    }
}

/// `os.path.normpath`, lexically.
fn normpath(p: &Path) -> PathBuf {
    let mut out: Vec<Component> = Vec::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => match out.last() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir) => {}
                _ => out.push(c),
            },
            other => out.push(other),
        }
    }
    if out.is_empty() {
        return PathBuf::from(".");
    }
    out.iter().collect()
}

impl Walk<'_> {
    /// Walk one of `paths` (a directory), depth first, entries in directory order.
    fn walk(&mut self, top: &Path) -> Result<(), String> {
        let top_seps = {
            let t = top.to_string_lossy();
            format!("{}/", t.trim_end_matches('/')).matches('/').count()
        };
        let mut seen = HashSet::new();
        // A stack of directories still to list; children pushed in reverse keep their order.
        let mut stack = vec![top.to_path_buf()];
        let mut first = true;
        while let Some(root) = stack.pop() {
            if !first && !self.p.recurse.0 {
                break;
            }
            first = false;
            let rd = match fs::read_dir(&root) {
                Ok(rd) => rd,
                Err(e) => {
                    if matches!(e.kind(), ErrorKind::PermissionDenied | ErrorKind::NotFound)
                        || e.raw_os_error() == Some(nix::libc::EPERM)
                    {
                        self.skipped
                            .insert(root.display().to_string(), os_error(&root, &e).into());
                        continue;
                    }
                    return Err(os_error(&root, &e));
                }
            };
            let (mut files, mut dirs) = (Vec::new(), Vec::new());
            for entry in rd.flatten() {
                // os.walk sorts by `is_dir()`, which follows symbolic links.
                let is_dir = fs::metadata(entry.path()).is_ok_and(|m| m.is_dir());
                if is_dir {
                    dirs.push(entry.file_name());
                } else {
                    files.push(entry.file_name());
                }
            }
            self.examined += files.len() + dirs.len();
            let mut descend: Vec<PathBuf> = Vec::new();
            let mut pruned = false;
            for (name, is_dir) in files
                .iter()
                .map(|n| (n, false))
                .chain(dirs.iter().map(|n| (n, true)))
            {
                let full = normpath(&root.join(name));
                if let Some(depth) = self.p.depth.filter(|d| *d != 0) {
                    let level =
                        full.to_string_lossy().matches('/').count() as i64 - top_seps as i64 + 1;
                    if level > depth {
                        pruned = true;
                        continue;
                    }
                }
                let name = name.to_string_lossy();
                if is_dir {
                    descend.push(root.join(&*name));
                }
                if name.starts_with('.') && !self.p.hidden.0 {
                    continue;
                }
                let meta = match fs::symlink_metadata(&full) {
                    Ok(m) => m,
                    Err(e) => {
                        self.skipped
                            .insert(full.display().to_string(), os_error(&full, &e).into());
                        self.warned = true;
                        continue;
                    }
                };
                if let Some(entry) = self.consider(&name, &full, &meta)? {
                    self.files.push(entry);
                }
                if self.p.limit.is_some_and(|l| self.files.len() as i64 == l) {
                    self.limit_hit = true;
                    return Ok(());
                }
            }
            if pruned {
                continue;
            }
            for d in descend.into_iter().rev() {
                let m = match fs::symlink_metadata(&d) {
                    Ok(m) => m,
                    Err(_) => continue,
                };
                if m.file_type().is_symlink() {
                    if !self.p.follow.0 {
                        continue;
                    }
                    // Followed links can loop back; Python would walk forever.
                    match fs::metadata(&d) {
                        Ok(t) if seen.insert((t.dev(), t.ino())) => {}
                        _ => continue,
                    }
                }
                stack.push(d);
            }
        }
        Ok(())
    }

    /// The entry's description when it passes the filters for its type.
    fn consider(&self, name: &str, full: &Path, m: &Metadata) -> Result<Option<Value>, String> {
        let (p, f) = (self.p, self.f);
        let ft = m.file_type();
        let common =
            || f.name(name) && f.age(m, p.age_stamp, self.now) && f.mode(m, p.exact_mode.0);
        let keep = match p.file_type {
            FileType::Any => common() && (!ft.is_file() || f.size(m)),
            FileType::Directory => ft.is_dir() && common(),
            FileType::Link => ft.is_symlink() && common(),
            FileType::File => {
                ft.is_file()
                    && f.name(name)
                    && f.age(m, p.age_stamp, self.now)
                    && f.size(m)
                    && f.content(full, p.read_whole_file.0)?
                    && f.mode(m, p.exact_mode.0)
            }
        };
        if !keep {
            return Ok(None);
        }
        let mut r = statinfo(full, m);
        if ft.is_file() && p.get_checksum.0 && matches!(p.file_type, FileType::Any | FileType::File)
        {
            r.insert("checksum".into(), checksum(full, p.checksum_algorithm));
        }
        Ok(Some(Value::Object(r)))
    }
}

/// A file's digest in hex, or null when it cannot be read.
fn checksum(path: &Path, alg: Algorithm) -> Value {
    use crate::stat::hash_file;
    let sum = match alg {
        Algorithm::Md5 => hash_file::<md5::Md5>(path),
        Algorithm::Sha1 => hash_file::<sha1::Sha1>(path),
        Algorithm::Sha224 => hash_file::<sha2::Sha224>(path),
        Algorithm::Sha256 => hash_file::<sha2::Sha256>(path),
        Algorithm::Sha384 => hash_file::<sha2::Sha384>(path),
        Algorithm::Sha512 => hash_file::<sha2::Sha512>(path),
    };
    sum.map_or(Value::Null, Value::from)
}

/// Ansible's `statinfo` for one entry, keys in its order, `path` first.
fn statinfo(path: &Path, m: &Metadata) -> Map<String, Value> {
    let mode = m.mode();
    let mut out = Map::new();
    crate::stat::put_stat_numbers(&mut out, path, m);
    let mut put = |k: &str, v: Value| {
        out.insert(k.to_string(), v);
    };
    put(
        "gr_name",
        crate::fs::names::group_by_gid(m.gid())
            .unwrap_or_default()
            .into(),
    );
    put(
        "pw_name",
        crate::fs::names::user_by_uid(m.uid())
            .unwrap_or_default()
            .into(),
    );
    for (key, bit) in [
        ("wusr", 0o200),
        ("rusr", 0o400),
        ("xusr", 0o100),
        ("wgrp", 0o020),
        ("rgrp", 0o040),
        ("xgrp", 0o010),
        ("woth", 0o002),
        ("roth", 0o004),
        ("xoth", 0o001),
        ("isuid", 0o4000),
        ("isgid", 0o2000),
    ] {
        put(key, (mode & bit != 0).into());
    }
    out
}

#[cfg(test)]
mod tests;
