//! The `file` module's parameters, and the `modification_time`/`access_time` values they parse to.

use crate::fs::IfChecksum;
use crate::params::{de_opt_string, Bool, ModeSpec};
use crate::ModuleError;
use serde::Deserialize;

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

/// Parse `modification_time`/`access_time`: `preserve` (or unset), `now`, or a time in `format`.
pub(super) fn time_param(
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
pub(super) fn parse_time(value: &str, format: &str) -> Result<i64, String> {
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
