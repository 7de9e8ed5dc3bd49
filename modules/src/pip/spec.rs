//! Python requirement strings as `pip` reads them: PEP 503 names, PEP 440 versions and version
//! specifiers, so that the probe can tell whether what `pip list` shows already satisfies
//! `foo[bar]>=1,<2` without asking pip to install anything.
//!
//! Only what Ansible's module decides with (the `packaging` library's `Requirement`) is modelled:
//! a name, extras and specifiers. Anything else (URLs, paths, VCS links, environment markers) is
//! not a plain requirement; the caller passes it to pip as written and lets pip decide.

use std::cmp::Ordering;

/// PEP 503's normal form: runs of `-`, `_` and `.` become one `-`, letters lower case.
pub fn canonical_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !in_sep {
                out.push('-');
            }
            in_sep = true;
        } else {
            out.extend(c.to_lowercase());
            in_sep = false;
        }
    }
    out
}

/// One segment of a local version label (`+ubuntu.1`): numbers sort above words.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Local {
    Word(String),
    Num(u64),
}

/// A PEP 440 version, normalised.
#[derive(Debug, Clone)]
pub struct Version {
    epoch: u64,
    release: Vec<u64>,
    /// `a`/`b`/`rc` as 0/1/2, and its number.
    pre: Option<(u8, u64)>,
    post: Option<u64>,
    dev: Option<u64>,
    local: Option<Vec<Local>>,
}

/// Reads the number at the start of `s`, if any (its length too).
fn number(s: &str) -> (Option<u64>, usize) {
    let n = s.bytes().take_while(u8::is_ascii_digit).count();
    (s[..n].parse().ok(), n)
}

/// Skips one optional `-`, `_` or `.`.
fn sep(s: &str) -> &str {
    s.strip_prefix(['-', '_', '.']).unwrap_or(s)
}

impl Version {
    /// PEP 440's permissive parse (`v1.0`, `1.0-post1`, `1.0RC2`), or None when `s` is no version.
    pub fn parse(s: &str) -> Option<Version> {
        let lower = s.trim().to_ascii_lowercase();
        let mut rest = lower.strip_prefix('v').unwrap_or(&lower);
        let mut epoch = 0;
        if let Some(i) = rest.find('!') {
            epoch = rest[..i].parse().ok()?;
            rest = &rest[i + 1..];
        }
        let mut release = Vec::new();
        loop {
            let (n, len) = number(rest);
            release.push(n?);
            rest = &rest[len..];
            match rest.strip_prefix('.') {
                Some(r) if r.starts_with(|c: char| c.is_ascii_digit()) => rest = r,
                _ => break,
            }
        }
        let mut v = Version {
            epoch,
            release,
            pre: None,
            post: None,
            dev: None,
            local: None,
        };
        let after = sep(rest);
        let pre_words = [
            ("alpha", 0),
            ("beta", 1),
            ("preview", 2),
            ("pre", 2),
            ("rc", 2),
            ("a", 0),
            ("b", 1),
            ("c", 2),
        ];
        if let Some((w, k)) = pre_words.iter().find(|(w, _)| after.starts_with(w)) {
            let r = sep(&after[w.len()..]);
            let (n, len) = number(r);
            v.pre = Some((*k, n.unwrap_or(0)));
            rest = if n.is_some() {
                &r[len..]
            } else {
                &after[w.len()..]
            };
        }
        if let Some(r) = rest
            .strip_prefix('-')
            .filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        {
            let (n, len) = number(r);
            v.post = n;
            rest = &r[len..];
        } else {
            let after = sep(rest);
            if let Some(w) = ["post", "rev", "r"].iter().find(|w| after.starts_with(**w)) {
                let r = sep(&after[w.len()..]);
                let (n, len) = number(r);
                v.post = Some(n.unwrap_or(0));
                rest = if n.is_some() {
                    &r[len..]
                } else {
                    &after[w.len()..]
                };
            }
        }
        let after = sep(rest);
        if let Some(r) = after.strip_prefix("dev") {
            let r2 = sep(r);
            let (n, len) = number(r2);
            v.dev = Some(n.unwrap_or(0));
            rest = if n.is_some() { &r2[len..] } else { r };
        }
        if let Some(label) = rest.strip_prefix('+') {
            let segs: Vec<Local> = label
                .split(['-', '_', '.'])
                .map(|s| match s.parse() {
                    Ok(n) if s.bytes().all(|b| b.is_ascii_digit()) => Some(Local::Num(n)),
                    _ if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric()) => {
                        Some(Local::Word(s.to_string()))
                    }
                    _ => None,
                })
                .collect::<Option<_>>()?;
            v.local = Some(segs);
            rest = "";
        }
        rest.is_empty().then_some(v)
    }

    pub fn is_prerelease(&self) -> bool {
        self.pre.is_some() || self.dev.is_some()
    }

    /// Without its local label (`1.0+x` → `1.0`).
    fn public(&self) -> Version {
        Version {
            local: None,
            ..self.clone()
        }
    }

    /// Epoch and release only (`1.0rc1.post2` → `1.0`).
    fn base(&self) -> Version {
        Version {
            epoch: self.epoch,
            release: self.release.clone(),
            pre: None,
            post: None,
            dev: None,
            local: None,
        }
    }

    /// The order key of PEP 440 (as the `packaging` library builds it): trailing zeros of the
    /// release do not count; a dev release sorts before the pre-releases of its version.
    fn key(&self) -> impl Ord + '_ {
        let mut rel: &[u64] = &self.release;
        while let [head @ .., 0] = rel {
            rel = head;
        }
        let pre = match (self.pre, self.post, self.dev) {
            (None, None, Some(_)) => (0, 0, 0),
            (None, _, _) => (2, 0, 0),
            (Some((k, n)), _, _) => (1, k, n),
        };
        let post = self.post.map_or((0, 0), |n| (1, n));
        let dev = self.dev.map_or((1, 0), |n| (0, n));
        (self.epoch, rel, pre, post, dev, self.local.as_ref())
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Version {}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

const OPERATORS: [&str; 8] = ["===", "~=", "==", "!=", "<=", ">=", "<", ">"];

/// One clause such as `>=1.0` or `==2.*`, as written (its text is what pip is given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Specifier {
    pub op: &'static str,
    pub version: String,
}

impl Specifier {
    fn parse(s: &str) -> Option<Specifier> {
        let s = s.trim();
        let op = OPERATORS.iter().find(|o| s.starts_with(**o))?;
        let version = s[op.len()..].trim().to_string();
        if version.is_empty() {
            return None;
        }
        let wild = version.strip_suffix(".*");
        let ok = match (*op, wild) {
            ("===", _) => true,
            ("==" | "!=", Some(w)) => Version::parse(w).is_some_and(|v| v.local.is_none()),
            (_, Some(_)) => false,
            ("~=", None) => Version::parse(&version).is_some_and(|v| v.release.len() > 1),
            _ => Version::parse(&version).is_some(),
        };
        ok.then_some(Specifier { op, version })
    }

    /// Whether `candidate` satisfies this clause, pre-releases allowed (as Ansible asks).
    pub fn contains(&self, candidate: &str) -> bool {
        if self.op == "===" {
            return candidate.trim().eq_ignore_ascii_case(&self.version);
        }
        let Some(c) = Version::parse(candidate) else {
            return false;
        };
        if let Some(prefix) = self.version.strip_suffix(".*") {
            let Some(p) = Version::parse(prefix) else {
                return false;
            };
            let matched = prefix_match(&c, &p);
            return if self.op == "==" { matched } else { !matched };
        }
        let Some(v) = Version::parse(&self.version) else {
            return false;
        };
        match self.op {
            "==" => equal(&c, &v),
            "!=" => !equal(&c, &v),
            "<=" => c.public() <= v,
            ">=" => c.public() >= v,
            "<" => c < v && (v.is_prerelease() || !c.is_prerelease() || c.base() != v.base()),
            ">" => {
                c > v
                    && (v.post.is_some() || c.post.is_none() || c.base() != v.base())
                    && (c.local.is_none() || c.base() != v.base())
            }
            // `~=1.4.5` is `>=1.4.5, ==1.4.*`.
            _ => {
                let mut p = v.base();
                p.release.pop();
                c.public() >= v && prefix_match(&c, &p)
            }
        }
    }
}

/// `==V` with a local label compares everything; without one, the candidate's label is ignored.
fn equal(c: &Version, v: &Version) -> bool {
    if v.local.is_some() {
        c == v
    } else {
        c.public() == *v
    }
}

/// `==1.4.*`: same epoch, the release starts with the prefix's (padded with zeros), and the
/// prefix's own pre/post/dev parts match when it has them.
fn prefix_match(c: &Version, p: &Version) -> bool {
    if c.epoch != p.epoch {
        return false;
    }
    let n = p.release.len();
    let mut rel = c.release.clone();
    rel.resize(rel.len().max(n), 0);
    if rel[..n] != p.release[..] {
        return false;
    }
    (p.pre.is_none() || p.pre == c.pre)
        && (p.post.is_none() || p.post == c.post)
        && (p.dev.is_none() || p.dev == c.dev)
}

/// A requirement as Ansible's module sees it: a plain one (name, extras, specifiers), or
/// anything else, kept as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    Plain {
        name: String,
        extras: Vec<String>,
        specifiers: Vec<Specifier>,
    },
    Other(String),
}

fn is_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

impl Requirement {
    /// `foo`, `Foo_Bar[x,y] >=1, <2`, `foo (==1.0)`; anything else is `Other`.
    pub fn parse(s: &str) -> Requirement {
        Self::parse_plain(s).unwrap_or_else(|| Requirement::Other(s.to_string()))
    }

    fn parse_plain(s: &str) -> Option<Requirement> {
        let s = s.trim();
        let end = s
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
            .unwrap_or(s.len());
        let name = &s[..end];
        if !is_name(name) {
            return None;
        }
        let mut rest = s[end..].trim_start();
        let mut extras = Vec::new();
        if let Some(r) = rest.strip_prefix('[') {
            let close = r.find(']')?;
            for e in r[..close].split(',').map(str::trim) {
                if e.is_empty() && close > 0 || !e.is_empty() && !is_name(e) {
                    return None;
                }
                if !e.is_empty() {
                    extras.push(e.to_string());
                }
            }
            rest = r[close + 1..].trim_start();
        }
        if let Some(r) = rest.strip_prefix('(') {
            rest = r.strip_suffix(')')?;
        }
        let mut specifiers = Vec::new();
        if !rest.trim().is_empty() {
            for part in rest.split(',') {
                specifiers.push(Specifier::parse(part)?);
            }
        }
        extras.sort();
        extras.dedup();
        Some(Requirement::Plain {
            name: name.to_string(),
            extras,
            specifiers,
        })
    }

    /// A plain requirement for `name` with Ansible's `version` parameter added: `==` before a
    /// bare version, the operator as given otherwise.
    pub fn with_version(req: &str, version: &str) -> Requirement {
        let v = version.trim_start();
        let sep = if v.starts_with(|c: char| c.is_ascii_digit()) {
            "=="
        } else {
            " "
        };
        Requirement::parse(&format!("{req}{sep}{v}"))
    }

    /// The canonical name of a plain requirement.
    pub fn key(&self) -> Option<String> {
        match self {
            Requirement::Plain { name, .. } => Some(canonical_name(name)),
            Requirement::Other(_) => None,
        }
    }

    pub fn has_specifier(&self) -> bool {
        matches!(self, Requirement::Plain { specifiers, .. } if !specifiers.is_empty())
    }

    /// Whether an installed `version` of this requirement's name satisfies it.
    pub fn satisfied_by(&self, version: &str) -> bool {
        match self {
            Requirement::Plain { specifiers, .. } => specifiers.iter().all(|s| s.contains(version)),
            Requirement::Other(_) => false,
        }
    }
}

/// The text pip is given, as `packaging` prints a requirement: extras sorted, specifiers
/// sorted as text and joined by commas, no spaces (`foo[a,b]<2,>=1`).
impl std::fmt::Display for Requirement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Requirement::Other(s) => f.write_str(s),
            Requirement::Plain {
                name,
                extras,
                specifiers,
            } => {
                f.write_str(name)?;
                if !extras.is_empty() {
                    write!(f, "[{}]", extras.join(","))?;
                }
                let mut specs: Vec<String> = specifiers
                    .iter()
                    .map(|s| format!("{}{}", s.op, s.version))
                    .collect();
                specs.sort();
                f.write_str(&specs.join(","))
            }
        }
    }
}

/// Ansible's repair of a `name` list that a comma split too far: `['foo>=1', '<2', 'bar']`
/// (from `name: foo>=1,<2,bar`) becomes `['foo>=1,<2', 'bar']`; commas inside `[...]` extras
/// stay too.
pub fn recover_names(names: &[String]) -> Vec<String> {
    let parts: Vec<&str> = names.iter().flat_map(|n| n.split(',')).collect();
    let mut out = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut in_brackets = false;
    for part in parts {
        let is_spec = OPERATORS.iter().any(|o| part.trim_start().starts_with(o));
        if !is_spec && !in_brackets {
            if !current.is_empty() {
                out.push(current.join(","));
            }
            current.clear();
        }
        if part.contains('[') {
            in_brackets = true;
        }
        if in_brackets && part.contains(']') {
            in_brackets = false;
        }
        current.push(part);
    }
    out.push(current.join(","));
    out
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
