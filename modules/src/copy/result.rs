//! The registered result of a `copy` (or `template`) of a controller file or of `content`, in
//! the shape ansible-core's copy action gives it.
//!
//! ansible-core's action runs one of two modules on the host and returns what that module said:
//! the copy module when the content differs (its result, with the action's `diff` list), the
//! file module when only attributes may change (so `path` is there, and in diff mode the file
//! module's `{before, after}` mapping). In check mode a content change runs no module at all: the
//! result is only `changed` and the `diff` list. With `force: false` and an existing `dest` the
//! action returns the task's `dest`, the controller's `src` and `changed`. `remote_src` runs the
//! copy module directly, so none of this applies to it.

use std::io::Read;
use std::path::Path;

use serde_json::{json, Map, Value};

use crate::copy::{Action, Data, Params, Probed};
use crate::fs::expand_user;
use crate::text::{diff_skipped, MAX_DIFF_SIZE};
use crate::{Ctx, ModuleError, Plan};

/// How far into the old file ansible-core's file module looks for a NUL byte before it calls
/// the file binary (its `_diff_peek`): a NUL further in does not count.
const PEEK: usize = 8192;

/// One side of a content diff, as ansible-core's action decides what to show of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Side {
    Text(String),
    /// Has a NUL byte: the registered diff says `src_binary` / `dst_binary` instead.
    Binary,
    /// Larger than `MAX_DIFF_SIZE`: `src_larger` / `dst_larger`, the limit, instead.
    Larger,
}

impl Side {
    /// The new content: larger is decided by size before anything is read; then any NUL byte
    /// makes it binary.
    pub fn of_src(data: &[u8]) -> Side {
        if data.len() as u64 > MAX_DIFF_SIZE {
            Side::Larger
        } else if data.contains(&0) {
            Side::Binary
        } else {
            Side::Text(String::from_utf8_lossy(data).into_owned())
        }
    }

    /// The existing file at `path` of `size` bytes: a NUL byte in its first 8 KiB makes it binary
    /// whatever its size; else larger by size; else its text.
    pub fn of_dest(path: &Path, size: u64) -> Result<Side, ModuleError> {
        let err = |e| ModuleError::io(path, e);
        let mut head = Vec::with_capacity(PEEK);
        let mut f = std::fs::File::open(path).map_err(err)?;
        (&mut f)
            .take(PEEK as u64)
            .read_to_end(&mut head)
            .map_err(err)?;
        if head.contains(&0) {
            return Ok(Side::Binary);
        }
        if size > MAX_DIFF_SIZE {
            return Ok(Side::Larger);
        }
        f.take(MAX_DIFF_SIZE + 1)
            .read_to_end(&mut head)
            .map_err(err)?;
        Ok(Side::Text(String::from_utf8_lossy(&head).into_owned()))
    }

    /// What the human diff shows for a side of `size` bytes.
    pub fn shown(&self, size: u64) -> String {
        match self {
            Side::Text(t) => t.clone(),
            Side::Binary => format!("<binary, {size} bytes>\n"),
            Side::Larger => diff_skipped(size),
        }
    }
}

/// Put the new content's side into a registered diff entry: its text under `header`, or the
/// `src_binary` / `src_larger` marker with no header (as ansible-core's action does).
pub fn put_src(entry: &mut Map<String, Value>, side: &Side, header: &str) {
    match side {
        Side::Text(t) => {
            entry.insert("after_header".into(), header.into());
            entry.insert("after".into(), t.clone().into());
        }
        Side::Binary => {
            entry.insert("src_binary".into(), 1.into());
        }
        Side::Larger => {
            entry.insert("src_larger".into(), MAX_DIFF_SIZE.into());
        }
    }
}

/// The result of `force: false` leaving an existing `dest` alone.
pub(super) fn kept(p: &Params) -> Map<String, Value> {
    let mut r = Map::new();
    r.insert(
        "dest".into(),
        expand_user(&p.dest).display().to_string().into(),
    );
    if let Some(src) = p.src_path.as_ref().or(p.template_src.as_ref()) {
        r.insert("src".into(), src.clone().into());
    }
    r.insert("changed".into(), false.into());
    r
}

/// Reshape a finished plan's result; `writes` says whether the content changes.
pub(super) fn shape(p: &Params, st: &Probed, plan: &mut Plan<Action>, ctx: &Ctx, writes: bool) {
    let shown = st.dest.display().to_string();
    let diff = match (writes, ctx.diff) {
        (true, true) => json!([content_entry(p, st, &shown)]),
        (false, true) => crate::file_diff::registered(&plan.diff, &[st.dest.as_path()]),
        (_, false) => json!([]),
    };
    let r = &mut plan.result;
    if writes && ctx.check {
        // No module ran: what would change, and nothing about the file.
        r.retain(|k, _| k == "changed");
    }
    if !writes {
        // The file module's result: its `path`, and no `src` (it got none).
        r.insert("path".into(), shown.into());
        r.remove("src");
    }
    r.insert("diff".into(), diff);
}

/// One entry of the action's `diff` list: the old side under `dest`'s name when there was a
/// file (an empty `before` when there was none), the new side under its source's name (`dest`
/// for `content`). A controller file's bytes are not on the host: the controller adds its side
/// (`Upload::fill_diff`, with [`put_src`]).
fn content_entry(p: &Params, st: &Probed, shown: &str) -> Value {
    let mut e = Map::new();
    match (&st.before, &st.before_side) {
        (Some(_), Some(Side::Text(t))) => {
            e.insert("before_header".into(), shown.into());
            e.insert("before".into(), t.clone().into());
        }
        (Some(_), Some(Side::Binary)) => {
            e.insert("dst_binary".into(), 1.into());
        }
        (Some(_), Some(Side::Larger)) => {
            e.insert("dst_larger".into(), MAX_DIFF_SIZE.into());
        }
        _ => {
            e.insert("before".into(), "".into());
        }
    }
    let header = p.src_path.as_deref().unwrap_or(shown);
    if let Data::Bytes(b) = &st.data {
        put_src(&mut e, &Side::of_src(b), header);
    } else {
        // Where the controller's side goes; it drops the header for a binary or large file.
        e.insert("after_header".into(), header.into());
    }
    Value::Object(e)
}
