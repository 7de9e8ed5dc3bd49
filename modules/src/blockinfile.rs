//! The `blockinfile` module: keep a marker-delimited block of lines in a text file, with
//! Ansible's blockinfile semantics (replace in place, insert by anchor, empty block removes).

use crate::fs::{IfChecksum, WantedAttrs};
use crate::params::{de_opt_string, is_template, Bool, ModeSpec};
use crate::text::{
    apply_edit, check_anchors, check_common, compile_regex, exclusive, insert_anchors,
    missing_file, plan_rewrite, probe_guarded, strip_eol, EditAction, Presence, TextFile,
};
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{Map, Value};

pub struct BlockInFile;

fn default_marker() -> String {
    "# {mark} ANSIBLE MANAGED BLOCK".into()
}
fn default_begin() -> String {
    "BEGIN".into()
}
fn default_end() -> String {
    "END".into()
}

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
    #[serde(default, alias = "content", deserialize_with = "de_opt_string")]
    pub block: Option<String>,
    #[serde(default = "default_marker")]
    pub marker: String,
    #[serde(default = "default_begin")]
    pub marker_begin: String,
    #[serde(default = "default_end")]
    pub marker_end: String,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub insertafter: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub insertbefore: Option<String>,
    #[serde(default)]
    pub create: Bool,
    #[serde(default)]
    pub state: Presence,
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
    #[serde(default)]
    pub append_newline: Bool,
    #[serde(default)]
    pub prepend_newline: Bool,
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

impl Module for BlockInFile {
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
        // Without {mark} the begin and end lines are identical and the block cannot be found again.
        if !p.marker.contains("{mark}") && !is_template(&p.marker) {
            return Err(ModuleError::Params(format!(
                "`marker` must contain {{mark}} (replaced by marker_begin/marker_end), got `{}`",
                p.marker
            )));
        }
        if p.marker_begin == p.marker_end {
            return Err(ModuleError::Params(
                "`marker_begin` and `marker_end` must differ, or the block's end cannot be told from its start".into(),
            ));
        }
        check_anchors(p.insertafter.as_deref(), p.insertbefore.as_deref())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<TextFile, ModuleError> {
        probe_guarded(&p.path, p.if_checksum.as_ref())
    }

    fn plan(p: &Params, file: &TextFile, ctx: &Ctx) -> Result<Plan<EditAction>, ModuleError> {
        let present = p.state == Presence::Present;
        if file.content.is_none() {
            if !present {
                let mut plan = Plan::new();
                plan.msg = Some(format!("File {} not present", p.path));
                return Ok(plan);
            }
            if !p.create.0 {
                return Err(missing_file(format!(
                    "Path {} does not exist ! (set `create: true` to create it)",
                    p.path
                )));
            }
        }
        let after = edit(p, file.content.as_deref())?;
        let original = file.content.as_deref();
        let msg = if original == Some(after.as_slice()) {
            ""
        } else if original.is_none() {
            "File created"
        } else if !present || p.block.as_deref().unwrap_or_default().is_empty() {
            "Block removed"
        } else {
            "Block inserted"
        };
        let wanted = WantedAttrs::new(&p.mode, &p.owner, &p.group);
        let if_checksum = p.if_checksum.as_ref();
        plan_rewrite(
            file,
            after,
            &wanted,
            p.backup.0,
            if_checksum,
            ctx,
            msg.into(),
        )
    }

    fn apply(
        p: &Params,
        file: TextFile,
        plan: &Plan<EditAction>,
    ) -> Result<Map<String, Value>, ModuleError> {
        // Ansible's blockinfile names this key `backup_file` (lineinfile says `backup`).
        apply_edit(&file, &plan.actions, p.validate.as_deref(), "backup_file")
    }
}

/// Python's `bytes.splitlines(True)`: split after `\n`, `\r\n` or a lone `\r`, keeping them.
fn splitlines(data: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < data.len() {
        let end = match data[i] {
            b'\r' if data.get(i + 1) == Some(&b'\n') => i + 2,
            b'\r' | b'\n' => i + 1,
            _ => {
                i += 1;
                continue;
            }
        };
        out.push(data[start..end].to_vec());
        start = end;
        i = end;
    }
    if start < data.len() {
        out.push(data[start..].to_vec());
    }
    out
}

/// Whether a Python pattern turns on MULTILINE with a leading inline flag group (`(?m)`, `(?ms)`):
/// Ansible then searches the whole file instead of line by line.
fn is_multiline(pattern: &str) -> bool {
    pattern
        .strip_prefix("(?")
        .and_then(|r| r.split_once(')'))
        .is_some_and(|(flags, _)| {
            flags.contains('m') && flags.chars().all(|c| c.is_ascii_alphabetic())
        })
}

/// Ansible's blockinfile edit: the new content for `original` (None: the file does not exist yet).
fn edit(p: &Params, original: Option<&[u8]>) -> Result<Vec<u8>, ModuleError> {
    let mut lines = original.map(splitlines).unwrap_or_default();
    let present = p.state == Presence::Present;
    let marker0 = p.marker.replace("{mark}", &p.marker_begin);
    let marker1 = p.marker.replace("{mark}", &p.marker_end);
    let block = p.block.as_deref().unwrap_or_default();
    let blocklines: Vec<Vec<u8>> = if present && !block.is_empty() {
        let mut b = block.as_bytes().to_vec();
        if !b.ends_with(b"\n") {
            b.push(b'\n');
        }
        let mut v = vec![format!("{marker0}\n").into_bytes()];
        v.extend(splitlines(&b));
        v.push(format!("{marker1}\n").into_bytes());
        v
    } else {
        Vec::new()
    };

    let (insertafter, insertbefore) =
        insert_anchors(p.insertafter.as_deref(), p.insertbefore.as_deref());
    let insert_re = match (insertafter, insertbefore) {
        (Some(a), _) if a != "EOF" => Some((a, compile_regex("insertafter", a)?)),
        (_, Some(b)) if b != "BOF" => Some((b, compile_regex("insertbefore", b)?)),
        _ => None,
    };

    // The last line equal to each marker. Line endings are ignored so that a marker on an
    // unterminated last line, or in a CRLF file, is still found (Ansible would add a second block).
    let mut n0 = None;
    let mut n1 = None;
    for (i, l) in lines.iter().enumerate() {
        let l = strip_eol(l);
        if l == marker0.as_bytes() {
            n0 = Some(i);
        }
        if l == marker1.as_bytes() {
            n1 = Some(i);
        }
    }

    let at = match (n0, n1) {
        (Some(b), Some(e)) => {
            // An existing block is replaced where it stands, whatever insertafter/insertbefore say.
            let (lo, hi) = if b < e { (b, e) } else { (e, b) };
            lines.drain(lo..=hi);
            lo
        }
        _ => match insert_re {
            Some((pattern, re)) if is_multiline(pattern) => {
                let text = original.unwrap_or_default();
                match re.find(text) {
                    // The line the match ends on (insertafter: the block goes after it) or
                    // starts on (insertbefore: before it), as Ansible counts them.
                    Some(m) if insertafter.is_some() => {
                        text[..m.end()].iter().filter(|b| **b == b'\n').count() + 1
                    }
                    Some(m) => text[..m.start()].iter().filter(|b| **b == b'\n').count(),
                    // Ansible crashes here; the end of the file is the documented fallback.
                    None => lines.len(),
                }
            }
            Some((_, re)) => {
                let last = lines
                    .iter()
                    .rposition(|l| re.is_match(l.strip_suffix(b"\n").unwrap_or(l)));
                match last {
                    None => lines.len(),
                    Some(i) if insertafter.is_some() => i + 1,
                    Some(i) => i,
                }
            }
            None if insertbefore.is_some() => 0,
            None => lines.len(),
        },
    };
    let mut at = at.min(lines.len());

    if !blocklines.is_empty() {
        // A block must start on a line of its own. (Ansible also does this when only removing,
        // which rewrites a file without a block; that is skipped here.)
        if at > 0 && !lines[at - 1].ends_with(b"\n") {
            lines[at - 1].push(b'\n');
        }
        if p.prepend_newline.0 && at != 0 && lines[at - 1] != b"\n" {
            lines.insert(at, b"\n".to_vec());
            at += 1;
        }
    }
    let inserting = !blocklines.is_empty();
    let after_block = at + blocklines.len();
    lines.splice(at..at, blocklines);
    // Only around a block that is there: Ansible would also add the blank line where a block
    // was just removed.
    if inserting && p.append_newline.0 && after_block < lines.len() && lines[after_block] != b"\n" {
        lines.insert(after_block, b"\n".to_vec());
    }
    Ok(lines.concat())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{read, setup, stamp, CHECK};
    use crate::{check_params, run, Outcome};
    use serde_json::json;
    use std::fs;

    fn go(params: Value) -> Outcome {
        run::<BlockInFile>(&params, &Ctx::default()).unwrap()
    }

    const B: &str = "# BEGIN ANSIBLE MANAGED BLOCK\n";
    const E: &str = "# END ANSIBLE MANAGED BLOCK\n";

    #[test]
    fn inserts_at_eof_then_converges_without_rewriting() {
        let (_d, path) = setup("a\n");
        let params = json!({"path": path, "block": "x=1\ny=2\n"});
        let out = go(params.clone());
        assert!(out.changed);
        assert_eq!(out.msg.as_deref(), Some("Block inserted"));
        assert_eq!(read(&path), format!("a\n{B}x=1\ny=2\n{E}"));
        let before = stamp(&path);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let again = go(params);
        assert!(!again.changed);
        assert_eq!(stamp(&path), before);
    }

    #[test]
    fn check_mode_changes_nothing_and_fills_diff() {
        let (_d, path) = setup("a\n");
        let before = stamp(&path);
        let out = run::<BlockInFile>(&json!({"path": path, "block": "x"}), &CHECK).unwrap();
        assert!(out.changed);
        assert_eq!(stamp(&path), before);
        assert_eq!(read(&path), "a\n");
        assert_eq!(out.diff.content[0].before, "a\n");
        assert_eq!(out.diff.content[0].after, format!("a\n{B}x\n{E}"));
    }

    #[test]
    fn existing_block_replaced_in_place() {
        let (_d, path) = setup(&format!("top\n{B}old\n{E}bottom\n"));
        let out = go(json!({"path": path, "block": "new1\nnew2", "insertbefore": "BOF"}));
        assert_eq!(out.msg.as_deref(), Some("Block inserted"));
        assert_eq!(read(&path), format!("top\n{B}new1\nnew2\n{E}bottom\n"));
    }

    #[test]
    fn empty_block_and_absent_remove() {
        let (_d, path) = setup(&format!("top\n{B}old\n{E}bottom\n"));
        let out = go(json!({"path": path, "block": ""}));
        assert_eq!(out.msg.as_deref(), Some("Block removed"));
        assert_eq!(read(&path), "top\nbottom\n");
        fs::write(&path, format!("top\n{B}old\n{E}bottom\n")).unwrap();
        let out = go(json!({"path": path, "state": "absent"}));
        assert_eq!(out.msg.as_deref(), Some("Block removed"));
        assert_eq!(read(&path), "top\nbottom\n");
        let before = stamp(&path);
        assert!(!go(json!({"path": path, "state": "absent"})).changed);
        assert_eq!(stamp(&path), before);
    }

    #[test]
    fn absent_without_block_leaves_unterminated_file_alone() {
        let (_d, path) = setup("a");
        assert!(!go(json!({"path": path, "state": "absent"})).changed);
        assert_eq!(read(&path), "a");
    }

    #[test]
    fn insertafter_and_insertbefore_anchor_last_match() {
        let (_d, path) = setup("a\n[s]\nb\n[s]\nc\n");
        go(json!({"path": path, "block": "x", "insertafter": "^\\[s\\]"}));
        assert_eq!(read(&path), format!("a\n[s]\nb\n[s]\n{B}x\n{E}c\n"));
        let (_d, path) = setup("a\n[s]\nb\n");
        go(json!({"path": path, "block": "x", "insertbefore": "^\\[s\\]"}));
        assert_eq!(read(&path), format!("a\n{B}x\n{E}[s]\nb\n"));
        let (_d, path) = setup("a\n");
        go(json!({"path": path, "block": "x", "insertbefore": "BOF"}));
        assert_eq!(read(&path), format!("{B}x\n{E}a\n"));
        let (_d, path) = setup("a\n");
        go(json!({"path": path, "block": "x", "insertafter": "^nomatch"}));
        assert_eq!(read(&path), format!("a\n{B}x\n{E}"));
    }

    #[test]
    fn multiline_anchor_searches_whole_file() {
        let (_d, path) = setup("a\nb\nc\n");
        go(json!({"path": path, "block": "x", "insertafter": "(?m)^a\\nb"}));
        assert_eq!(read(&path), format!("a\nb\n{B}x\n{E}c\n"));
        // Ansible counts the newlines up to the match's end, then goes one line further: a
        // match that ends with its newline puts the block one line lower.
        let (_d, path) = setup("a\nb\nc\n");
        go(json!({"path": path, "block": "x", "insertafter": "(?m)^a\\nb\\n"}));
        assert_eq!(read(&path), format!("a\nb\nc\n{B}x\n{E}"));
        let (_d, path) = setup("a\nb\nc\n");
        go(json!({"path": path, "block": "x", "insertbefore": "(?m)^b\\nc"}));
        assert_eq!(read(&path), format!("a\n{B}x\n{E}b\nc\n"));
    }

    #[test]
    fn custom_markers_and_newline_padding() {
        let (_d, path) = setup("a\nb\n");
        let params = json!({
            "path": path, "block": "x", "marker": "<!-- {mark} -->",
            "marker_begin": "start", "marker_end": "stop",
            "insertafter": "^a", "prepend_newline": true, "append_newline": true
        });
        go(params.clone());
        assert_eq!(read(&path), "a\n\n<!-- start -->\nx\n<!-- stop -->\n\nb\n");
        assert!(!go(params).changed);
    }

    #[test]
    fn unterminated_last_line_gets_newline_before_block() {
        let (_d, path) = setup("a");
        go(json!({"path": path, "block": "x"}));
        assert_eq!(read(&path), format!("a\n{B}x\n{E}"));
    }

    #[test]
    fn end_marker_without_final_newline_is_still_found() {
        let (_d, path) = setup(&format!("{B}x\n# END ANSIBLE MANAGED BLOCK"));
        let out = go(json!({"path": path, "block": "y"}));
        assert!(out.changed);
        assert_eq!(read(&path), format!("{B}y\n{E}"));
    }

    #[test]
    fn missing_file_fails_or_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d/new");
        let err =
            run::<BlockInFile>(&json!({"path": path, "block": "x"}), &Ctx::default()).unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
        let out = go(json!({"path": path, "block": "x", "create": true}));
        assert_eq!(out.msg.as_deref(), Some("File created"));
        assert_eq!(read(&path), format!("{B}x\n{E}"));
        let out = go(json!({"path": dir.path().join("gone"), "state": "absent"}));
        assert!(!out.changed);
    }

    #[test]
    fn backup_reported_as_backup_file() {
        let (_d, path) = setup("a\n");
        let out = go(json!({"path": path, "content": "x", "backup": "yes"}));
        let b = out.result["backup_file"].as_str().unwrap();
        assert_eq!(fs::read_to_string(b).unwrap(), "a\n");
    }

    #[test]
    fn bad_parameters_are_rejected() {
        let e = check_params("blockinfile", &json!({"path": "/x", "blok": "a"})).unwrap_err();
        assert!(e.to_string().contains("blok"), "{e}");
        let e =
            check_params("blockinfile", &json!({"path": "/x", "marker": "# managed"})).unwrap_err();
        assert!(e.to_string().contains("{mark}"), "{e}");
        let e = check_params(
            "blockinfile",
            &json!({"path": "/x", "insertafter": "a", "insertbefore": "b"}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("mutually exclusive"), "{e}");
        let e = check_params("blockinfile", &json!({"path": "/x", "mode": "0999"})).unwrap_err();
        assert_eq!(e.path, "mode");
        check_params("blockinfile", &json!({"dest": "/x", "content": "a"})).unwrap();
    }

    #[test]
    fn python_splitlines() {
        assert_eq!(
            splitlines(b"a\r\nb\rc\nd"),
            vec![
                b"a\r\n".to_vec(),
                b"b\r".to_vec(),
                b"c\n".to_vec(),
                b"d".to_vec()
            ]
        );
        assert!(is_multiline("(?m)^a"));
        assert!(is_multiline("(?sm)^a"));
        assert!(!is_multiline("^a(?m)"));
    }
}
