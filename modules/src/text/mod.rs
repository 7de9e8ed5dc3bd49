//! Text-file editing shared by `lineinfile`, `blockinfile`, `replace`, `ini_file`, `pam_limits`
//! and `authorized_key`: Python-style patterns, line helpers, the probe → plan → apply of a
//! rewrite, and the `diff` and path information those modules register as Ansible's do.
//!
//! It builds on `fs` for writing and attributes; `fs` must never use it. It knows nothing about
//! what a line or block module decides to put in the file: that stays in the module's own file.

mod edit;
pub(crate) mod regex;

pub(crate) use self::regex::compile_regex;
pub use edit::{
    add_path_info, apply_edit, diff_skipped, diff_text, plan_edit, plan_rewrite, probe_guarded,
    probe_text_file, EditAction, Presence, TextFile, MAX_DIFF_SIZE, MAX_EDIT_SIZE,
};
pub(crate) use edit::{
    check_anchors, check_common, exclusive, insert_anchors, missing_file, strip_eol,
};
