//! Compare-and-swap writes: fixpoint's own `if_checksum` parameter (`copy`, `template`,
//! `lineinfile`, `blockinfile`, `file`), the content a destination must have for a task to change it.
//!
//! A task with `if_checksum` changes its destination only when the destination's current content
//! has that sha256 (`absent`: only when nothing is there). The module's plan checks it against
//! what the probe read, so check mode reports the same failure a run would; the write path checks
//! it again immediately before the change (`Loc::guard`, read by `atomic::finish` just before the
//! rename and by `dirfd::set_attrs_at`), so an outside writer between the probe and the rename
//! makes the task fail instead of losing that writer's update. A task that would change nothing
//! is not checked: the destination already is what it asks for.
//!
//! It knows how to hash and compare, not how any module finds its destination.

use crate::{ModuleError, Plan};
use serde::Deserialize;
use serde_json::{Map, Value};
use sha2::Digest as _;
use std::fmt;
use std::io::Read;

/// What `if_checksum` asks the destination to be before the change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IfChecksum {
    /// `absent`: nothing at the destination (no file, no link, nothing).
    Absent,
    /// A regular file whose content has this sha256 (lowercase hex).
    Sha256(String),
}

impl fmt::Display for IfChecksum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IfChecksum::Absent => f.write_str("absent"),
            IfChecksum::Sha256(h) => f.write_str(h),
        }
    }
}

impl IfChecksum {
    /// Read `absent` or 64 hex digits (either case); anything else is refused with what is expected.
    pub fn parse(s: &str) -> Result<IfChecksum, String> {
        let t = s.trim();
        if t == "absent" {
            return Ok(IfChecksum::Absent);
        }
        let hex = t.strip_prefix("sha256:").unwrap_or(t);
        if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(IfChecksum::Sha256(hex.to_ascii_lowercase()));
        }
        Err(format!(
            "`if_checksum` must be the sha256 of the destination's current content (64 hex \
             digits, e.g. the output of `sha256sum FILE`) or `absent` for a destination that \
             must not exist yet; got `{s}`"
        ))
    }
}

impl<'de> Deserialize<'de> for IfChecksum {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        IfChecksum::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// What is at a destination now, as `if_checksum` compares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    Absent,
    /// A regular file's content sha256 (lowercase hex).
    Sha256(String),
    /// Something that has no content to compare: "a directory", "a symlink"...
    Other(&'static str),
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Found::Absent => f.write_str("absent"),
            Found::Sha256(h) => f.write_str(h),
            Found::Other(what) => f.write_str(what),
        }
    }
}

impl Found {
    /// The sha256 of what `r` yields.
    pub fn of_reader(r: &mut dyn Read) -> std::io::Result<Found> {
        let mut h = sha2::Sha256::new();
        std::io::copy(r, &mut h)?;
        Ok(Found::Sha256(hex::encode(h.finalize())))
    }

    /// The sha256 of `data`.
    pub fn of_bytes(data: &[u8]) -> Found {
        Found::Sha256(hex::encode(sha2::Sha256::digest(data)))
    }

    /// What kind of non-file `meta` describes, for the message.
    pub fn other(meta: &std::fs::Metadata) -> Found {
        let t = meta.file_type();
        Found::Other(if t.is_dir() {
            "a directory"
        } else if t.is_symlink() {
            "a symlink"
        } else {
            "not a regular file"
        })
    }

    /// What is at `path` now, without following a symlink there.
    pub fn at_path(path: &std::path::Path) -> Result<Found, ModuleError> {
        match super::paths::lstat(path)? {
            None => Ok(Found::Absent),
            Some(m) if m.is_file() => {
                let mut f = std::fs::File::open(path).map_err(|e| ModuleError::io(path, e))?;
                Found::of_reader(&mut f).map_err(|e| ModuleError::io(path, e))
            }
            Some(m) => Ok(Found::other(&m)),
        }
    }

    pub(crate) fn matches(&self, want: &IfChecksum) -> bool {
        match (want, self) {
            (IfChecksum::Absent, Found::Absent) => true,
            (IfChecksum::Sha256(w), Found::Sha256(f)) => w == f,
            _ => false,
        }
    }
}

/// The task's failure when the destination is not what `if_checksum` asks: both sums in the
/// message and in the result (`expected_checksum`, `found_checksum`), nothing changed.
pub fn mismatch(path: &str, want: &IfChecksum, found: &Found, when: &str) -> ModuleError {
    let mut result = Map::new();
    result.insert("expected_checksum".into(), Value::from(want.to_string()));
    result.insert("found_checksum".into(), Value::from(found.to_string()));
    ModuleError::Failed {
        msg: format!(
            "if_checksum: {path} is not the expected content{when}: expected {want}, found \
             {found}; nothing was changed"
        ),
        result,
    }
}

/// `Ok` when `found` is what `want` asks for (or nothing is asked).
pub fn require(path: &str, want: Option<&IfChecksum>, found: &Found) -> Result<(), ModuleError> {
    match want {
        Some(w) if !found.matches(w) => Err(mismatch(path, w, found, "")),
        _ => Ok(()),
    }
}

/// The plan-time check every module with `if_checksum` makes once its plan is known: a plan that
/// changes something needs the destination to be the expected content (`found` is only computed
/// then); a plan that changes nothing passes. Check mode fails the same way, from the same probe.
pub fn check_plan<A>(
    want: Option<&IfChecksum>,
    plan: &Plan<A>,
    path: &str,
    found: impl FnOnce() -> Result<Found, ModuleError>,
) -> Result<(), ModuleError> {
    match want {
        Some(w) if !plan.actions.is_empty() => require(path, Some(w), &found()?),
        _ => Ok(()),
    }
}

/// The parameter the agent replaces: `if_unchanged_since_last_run: true` asks for the content the
/// journal says fixpoint last left at the destination, which only the agent can read; it hands
/// the module `if_checksum` with that sum instead. A module only refuses the two together.
pub const IF_UNCHANGED: &str = "if_unchanged_since_last_run";

/// `if_checksum` and `if_unchanged_since_last_run` both name the content expected: one of them.
pub fn check_unchanged_param(
    if_checksum: Option<&IfChecksum>,
    if_unchanged: bool,
) -> Result<(), ModuleError> {
    if if_checksum.is_some() && if_unchanged {
        return Err(ModuleError::Params(
            "`if_checksum` and `if_unchanged_since_last_run` both say what the destination must \
             contain: give one of them"
                .into(),
        ));
    }
    Ok(())
}
