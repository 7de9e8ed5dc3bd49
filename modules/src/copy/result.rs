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

use serde_json::{json, Map, Value};

use crate::copy::{Action, Data, Params, Probed};
use crate::fs::expand_user;
use crate::text::diff_text;
use crate::{Ctx, Plan};

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

/// One entry of the action's `diff` list: the old text under `dest`'s name when there was a
/// file, the new text under its source's name (`dest` for `content`). A controller file's text
/// is not on the host: the controller adds `after` (`Upload::fill_diff`).
fn content_entry(p: &Params, st: &Probed, shown: &str) -> Value {
    let mut e = Map::new();
    e.insert(
        "before".into(),
        st.before_text.clone().unwrap_or_default().into(),
    );
    if st.before.is_some() {
        e.insert("before_header".into(), shown.into());
    }
    let header = p.src_path.as_deref().unwrap_or(shown);
    e.insert("after_header".into(), header.into());
    if let Data::Bytes(b) = &st.data {
        e.insert("after".into(), diff_text(b).into());
    }
    Value::Object(e)
}
