//! The `lineinfile` module: make sure one line is present in (or absent from) a text file, with
//! Ansible's lineinfile semantics. The file handling it shares with `blockinfile` is in `text`.
//!
//! `edit` holds Ansible's `present()` and `absent()` on the file's lines, `backrefs` Python's
//! `match.expand` (which `replace` uses too).

mod backrefs;
mod edit;

pub(crate) use backrefs::{check_template, expand_template};
use edit::{absent, present};

use crate::fs::{IfChecksum, WantedAttrs};
use crate::params::{de_opt_string, is_template, Bool, ModeSpec};
use crate::text::{
    apply_edit, check_anchors, check_common, compile_regex, exclusive, missing_file, plan_rewrite,
    probe_guarded, EditAction, Presence, TextFile,
};
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};

pub struct LineInFile;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(
        alias = "dest",
        alias = "destfile",
        alias = "name",
        deserialize_with = "crate::params::de_path"
    )]
    pub path: String,
    #[serde(default, alias = "value", deserialize_with = "de_opt_string")]
    pub line: Option<String>,
    #[serde(default, alias = "regex", deserialize_with = "de_opt_string")]
    pub regexp: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub search_string: Option<String>,
    #[serde(default)]
    pub state: Presence,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub insertafter: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub insertbefore: Option<String>,
    #[serde(default)]
    pub create: Bool,
    #[serde(default)]
    pub backrefs: Bool,
    #[serde(default)]
    pub firstmatch: Bool,
    #[serde(default)]
    pub backup: Bool,
    #[serde(default)]
    pub validate: Option<String>,
    #[serde(default)]
    pub mode: Option<ModeSpec>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub owner: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub group: Option<String>,
    /// Accepted for compatibility; writes are always atomic here.
    #[serde(default)]
    pub unsafe_writes: Option<Bool>,
    /// fixpoint's compare-and-swap (not Ansible's): edit the file only while its content has
    /// this sha256, or while it does not exist (`absent`); see `fs::cas`.
    #[serde(default)]
    pub if_checksum: Option<IfChecksum>,
    /// fixpoint's `if_unchanged_since_last_run`: the agent turns it into `if_checksum` with the
    /// sum the journal recorded for the file (see `fs::cas::check_unchanged_param`).
    #[serde(default)]
    pub if_unchanged_since_last_run: Bool,
}

impl Module for LineInFile {
    type Params = Params;
    type State = TextFile;
    type Action = EditAction;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        check_common(&p.path, p.validate.as_deref(), p.mode.as_ref())?;
        crate::fs::cas::check_unchanged_param(
            p.if_checksum.as_ref(),
            p.if_unchanged_since_last_run.0,
        )?;
        if p.insertafter.is_some() && p.insertbefore.is_some() {
            return Err(exclusive("insertafter", "insertbefore"));
        }
        if p.regexp.is_some() && p.search_string.is_some() {
            return Err(exclusive("regexp", "search_string"));
        }
        if p.backrefs.0 && p.search_string.is_some() {
            return Err(exclusive("backrefs", "search_string"));
        }
        match p.state {
            Presence::Present => {
                if p.backrefs.0 && p.regexp.is_none() {
                    return Err(ModuleError::Params(
                        "`regexp` is required with `backrefs: true` (the back-references come from its groups)".into(),
                    ));
                }
                if p.line.is_none() {
                    return Err(ModuleError::Params(
                        "`line` is required with `state: present`".into(),
                    ));
                }
            }
            Presence::Absent => {
                if p.line.is_none() && p.regexp.is_none() && p.search_string.is_none() {
                    return Err(ModuleError::Params(
                        "one of `line`, `search_string` or `regexp` is required with `state: absent`"
                            .into(),
                    ));
                }
            }
        }
        // Catch regex typos at load time, unless a template will produce the pattern.
        if let Some(re) = &p.regexp {
            if !is_template(re) {
                compile_regex("regexp", re)?;
            }
        }
        check_anchors(p.insertafter.as_deref(), p.insertbefore.as_deref())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<TextFile, ModuleError> {
        probe_guarded(&p.path, p.if_checksum.as_ref())
    }

    fn plan(p: &Params, file: &TextFile, ctx: &Ctx) -> Result<Plan<EditAction>, ModuleError> {
        let mut plan = plan_edit_lines(p, file, ctx)?;
        // ansible-core's lineinfile returns `backup` (empty unless one was made) and `msg`
        // (empty when nothing changes) whenever it looked at the file.
        if file.content.is_some() || p.state == Presence::Present {
            plan.result.insert("backup".into(), json!(""));
            if plan.msg.is_none() {
                plan.result.insert("msg".into(), json!(""));
            }
        }
        if let Some(w) = empty_pattern_warning(p) {
            plan.result.insert("warnings".into(), json!([w]));
        }
        Ok(plan)
    }

    fn apply(
        p: &Params,
        file: TextFile,
        plan: &Plan<EditAction>,
    ) -> Result<Map<String, Value>, ModuleError> {
        apply_edit(&file, &plan.actions, p.validate.as_deref(), "backup")
    }
}

/// ansible-core's warning when `regexp` or `search_string` is empty (it matches every line),
/// word for word: playbooks look for it in `warnings`.
fn empty_pattern_warning(p: &Params) -> Option<String> {
    let name = match (p.regexp.as_deref(), p.search_string.as_deref()) {
        (Some(""), _) => "regular expression",
        (_, Some("")) => "search string",
        _ => return None,
    };
    let mut msg = format!(
        "The {name} is an empty string, which will match every line in the file. This may have \
         unintended consequences, such as replacing the last line in the file rather than appending."
    );
    if name == "regular expression" {
        msg.push_str(
            " If this is desired, use '^' to match every line in the file and avoid this warning.",
        );
    }
    Some(msg)
}

/// The edits `state` asks for, with the result's fields (`found`, `diff`) and message.
fn plan_edit_lines(
    p: &Params,
    file: &TextFile,
    ctx: &Ctx,
) -> Result<Plan<EditAction>, ModuleError> {
    let wanted = WantedAttrs::new(&p.mode, &p.owner, &p.group);
    let if_checksum = p.if_checksum.as_ref();
    let rewrite =
        |after, msg| plan_rewrite(file, after, &wanted, p.backup.0, if_checksum, ctx, msg);
    let Some(content) = &file.content else {
        if p.state == Presence::Absent {
            let mut plan = Plan::new();
            plan.msg = Some("file not present".into());
            return Ok(plan);
        }
        if !p.create.0 {
            return Err(missing_file(format!(
                "Destination {} does not exist ! (set `create: true` to create it)",
                p.path
            )));
        }
        // A new file: an empty one that `present` then edits.
        let (lines, msg) = present(p, Vec::new())?;
        return rewrite(lines.concat(), msg);
    };
    let lines = split_lines(content);
    match p.state {
        Presence::Present => {
            let (new_lines, msg) = present(p, lines)?;
            rewrite(new_lines.concat(), msg)
        }
        Presence::Absent => {
            let (kept, found) = absent(p, lines)?;
            let msg = if found > 0 {
                format!("{found} line(s) removed")
            } else {
                String::new()
            };
            let mut plan = rewrite(kept.concat(), msg)?;
            plan.result.insert("found".into(), json!(found));
            Ok(plan)
        }
    }
}

/// The part of a line a regex sees: without its final `\n`, because Python's `$` matches just
/// before a trailing newline and Rust's does not.
fn search_view(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\n").unwrap_or(line)
}

/// Python's `readlines()` on a binary file: split after each `\n`, keeping it.
pub(crate) fn split_lines(data: &[u8]) -> Vec<Vec<u8>> {
    data.split_inclusive(|b| *b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

/// The line ending new lines get: the file's own when its first line ends in CRLF, else `\n`
/// (Ansible always writes `\n`; keeping CRLF files consistent is the one deliberate difference).
fn file_eol(lines: &[Vec<u8>]) -> &'static [u8] {
    match lines.first() {
        Some(l) if l.ends_with(b"\r\n") => b"\r\n",
        _ => b"\n",
    }
}

fn with_eol(line: &[u8], eol: &[u8]) -> Vec<u8> {
    let mut v = line.to_vec();
    v.extend_from_slice(eol);
    v
}

#[cfg(test)]
mod tests;
