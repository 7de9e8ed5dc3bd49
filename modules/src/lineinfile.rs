//! The `lineinfile` module: make sure one line is present in (or absent from) a text file, with
//! Ansible's lineinfile semantics. The file handling it shares with `blockinfile` is in `text`.

use crate::fs::{IfChecksum, WantedAttrs};
use crate::params::{de_opt_string, is_template, Bool, ModeSpec};
use crate::text::regex::{Captures, Regex};
use crate::text::{
    apply_edit, check_anchors, check_common, compile_regex, exclusive, insert_anchors,
    missing_file, plan_rewrite, probe_guarded, strip_eol, EditAction, Presence, TextFile,
};
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};

pub struct LineInFile;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(alias = "dest", alias = "destfile", alias = "name")]
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

/// Ansible's `present()`: returns the new lines and the message ("line added", "line replaced" or "").
fn present(p: &Params, mut lines: Vec<Vec<u8>>) -> Result<(Vec<Vec<u8>>, String), ModuleError> {
    let line = p.line.as_deref().unwrap_or_default().as_bytes();
    let eol = file_eol(&lines);
    let re_m = p
        .regexp
        .as_deref()
        .map(|r| compile_regex("regexp", r))
        .transpose()?;
    let (insertafter, insertbefore) =
        insert_anchors(p.insertafter.as_deref(), p.insertbefore.as_deref());
    let bre_ins = match (insertafter, insertbefore) {
        (Some(a), _) if a != "BOF" && a != "EOF" => Some(compile_regex("insertafter", a)?),
        (_, Some(b)) if b != "BOF" => Some(compile_regex("insertbefore", b)?),
        _ => None,
    };
    let firstmatch = p.firstmatch.0;

    // idx0: the line regexp/search_string (or the exact line) found; idx1: the insertion point.
    let mut idx0: Option<usize> = None;
    let mut idx1: Option<usize> = None;
    let mut matched = false;

    // 1. The regexp, or 2. the search string: the last match wins (the first with firstmatch).
    if let Some(re) = &re_m {
        for (i, l) in lines.iter().enumerate() {
            if re.is_match(search_view(l)) {
                idx0 = Some(i);
                matched = true;
                if firstmatch {
                    break;
                }
            }
        }
    }
    if let Some(s) = p.search_string.as_deref() {
        for (i, l) in lines.iter().enumerate() {
            if contains(l, s.as_bytes()) {
                idx0 = Some(i);
                matched = true;
                if firstmatch {
                    break;
                }
            }
        }
    }
    // 3. No match: look for the exact line, and for the insertafter/insertbefore anchor.
    if !matched {
        for (i, l) in lines.iter().enumerate() {
            if strip_eol(l) == line {
                idx0 = Some(i);
            } else if bre_ins
                .as_ref()
                .is_some_and(|re| re.is_match(search_view(l)))
            {
                if insertafter.is_some() {
                    idx1 = Some(i + 1);
                    if firstmatch {
                        break;
                    }
                }
                if insertbefore.is_some() {
                    idx1 = Some(i);
                    if firstmatch {
                        break;
                    }
                }
            }
        }
    }
    // (Ansible also has a branch for "no regexp, no exact line, but idx0 set", which cannot
    // happen: idx0 is only set by a match or the exact line. It is left out.)

    let added = |lines: &mut Vec<Vec<u8>>, at: usize| {
        lines.insert(at, with_eol(line, eol));
        "line added".to_string()
    };
    let mut msg = String::new();
    if let Some(i0) = idx0 {
        let mut new_line = match (&re_m, p.backrefs.0 && matched) {
            (Some(re), true) => {
                let caps = re
                    .captures(search_view(&lines[i0]))
                    .expect("the line matched a moment ago");
                expand_template(line, re, &caps).map_err(|e| {
                    ModuleError::Params(format!("`line` cannot be expanded with backrefs: {e}"))
                })?
            }
            _ => line.to_vec(),
        };
        if !new_line.ends_with(b"\n") {
            // Keep the replaced line's own ending (CRLF stays CRLF).
            let own = &lines[i0][strip_eol(&lines[i0]).len()..];
            new_line.extend_from_slice(if own.ends_with(b"\n") { own } else { eol });
        }
        if lines[i0] != new_line {
            lines[i0] = new_line;
            msg = "line replaced".into();
        }
    } else if p.backrefs.0 {
        // Without a match there is nothing to fill the back-references with: leave the file alone.
    } else if insertbefore == Some("BOF") || insertafter == Some("BOF") {
        msg = added(&mut lines, 0);
    } else if insertafter == Some("EOF") || idx1.is_none() {
        ensure_final_newline(&mut lines, eol);
        let at = lines.len();
        msg = added(&mut lines, at);
    } else if let (Some(_), Some(i1)) = (insertafter, idx1) {
        // Do not insert when the line is already right after the anchor.
        if lines.len() == i1 {
            if strip_eol(&lines[i1 - 1]) != line {
                // Ansible would glue the line onto an unterminated last line; terminate it first.
                ensure_final_newline(&mut lines, eol);
                msg = added(&mut lines, i1);
            }
        } else if strip_eol(&lines[i1]) != line {
            msg = added(&mut lines, i1);
        }
    } else if let Some(i1) = idx1 {
        msg = added(&mut lines, i1);
    }
    Ok((lines, msg))
}

/// Ansible adds a line separator to a last line that has none before appending after it.
fn ensure_final_newline(lines: &mut [Vec<u8>], eol: &[u8]) {
    if let Some(last) = lines.last_mut() {
        if !matches!(last.last(), Some(b'\n' | b'\r')) {
            last.extend_from_slice(eol);
        }
    }
}

/// Ansible's `absent()`: drop every line matching regexp, search_string, or equal to line.
fn absent(p: &Params, lines: Vec<Vec<u8>>) -> Result<(Vec<Vec<u8>>, usize), ModuleError> {
    let re = p
        .regexp
        .as_deref()
        .map(|r| compile_regex("regexp", r))
        .transpose()?;
    let line = p.line.as_deref().unwrap_or_default().as_bytes();
    let total = lines.len();
    let kept: Vec<Vec<u8>> = lines
        .into_iter()
        .filter(|l| {
            let hit = if let Some(re) = &re {
                re.is_match(search_view(l))
            } else if let Some(s) = p.search_string.as_deref() {
                contains(l, s.as_bytes())
            } else {
                strip_eol(l) == line
            };
            !hit
        })
        .collect();
    let found = total - kept.len();
    Ok((kept, found))
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// Python's `match.expand(template)`: `\1`, `\g<1>`, `\g<name>`, and the escapes `\n`, `\t`, `\\`...
/// Groups that did not take part in the match expand to nothing, as in Python 3.5+.
pub(crate) fn expand_template(tpl: &[u8], re: &Regex, caps: &Captures) -> Result<Vec<u8>, String> {
    expand(tpl, re, Some(caps))
}

/// Check a replacement template against `re` without a match, as Python compiles it before
/// substituting: a bad escape or group fails even where nothing matches (`replace: '\D'`).
pub(crate) fn check_template(tpl: &[u8], re: &Regex) -> Result<(), String> {
    expand(tpl, re, None).map(|_| ())
}

/// [`expand_template`]; without `caps`, group references are checked and expand to nothing.
fn expand(tpl: &[u8], re: &Regex, caps: Option<&Captures>) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(tpl.len());
    let mut i = 0;
    let group = |out: &mut Vec<u8>, idx: usize| -> Result<(), String> {
        if idx >= re.captures_len() {
            return Err(format!("invalid group reference {idx}"));
        }
        if let Some(m) = caps.and_then(|c| c.get(idx)) {
            out.extend_from_slice(m.as_bytes());
        }
        Ok(())
    };
    let is_oct = |b: Option<&u8>| b.is_some_and(|c| (b'0'..=b'7').contains(c));
    while i < tpl.len() {
        let c = tpl[i];
        if c != b'\\' {
            out.push(c);
            i += 1;
            continue;
        }
        let Some(&n) = tpl.get(i + 1) else {
            return Err("bad escape (end of pattern)".into());
        };
        match n {
            b'g' => {
                let rest = &tpl[i + 2..];
                let close = rest
                    .strip_prefix(b"<")
                    .and_then(|r| r.iter().position(|b| *b == b'>'))
                    .ok_or("missing group name after \\g (write \\g<1> or \\g<name>)")?;
                let name = String::from_utf8_lossy(&rest[1..1 + close]).into_owned();
                if let Ok(idx) = name.parse::<usize>() {
                    group(&mut out, idx)?;
                } else {
                    match caps.and_then(|c| c.name(&name)) {
                        Some(m) => out.extend_from_slice(m.as_bytes()),
                        // A named group that exists but did not take part is empty.
                        None if re
                            .capture_names()
                            .any(|n| n.as_deref() == Some(name.as_str())) => {}
                        None => return Err(format!("unknown group name '{name}'")),
                    }
                }
                i += 2 + close + 2;
            }
            b'0' => {
                // Octal escape: \0 plus up to two more octal digits.
                let mut j = i + 2;
                let mut v: u32 = 0;
                while j < i + 4 && is_oct(tpl.get(j)) {
                    v = v * 8 + u32::from(tpl[j] - b'0');
                    j += 1;
                }
                out.push(v as u8);
                i = j;
            }
            b'1'..=b'9' => {
                let d1 = tpl.get(i + 2);
                if d1.is_some_and(u8::is_ascii_digit) {
                    if is_oct(Some(&n)) && is_oct(d1) && is_oct(tpl.get(i + 3)) {
                        let v = u32::from(n - b'0') * 64
                            + u32::from(tpl[i + 2] - b'0') * 8
                            + u32::from(tpl[i + 3] - b'0');
                        if v > 0o377 {
                            return Err(format!(
                                "octal escape value \\{v:o} outside of range 0-0o377"
                            ));
                        }
                        out.push(v as u8);
                        i += 4;
                    } else {
                        group(
                            &mut out,
                            usize::from(n - b'0') * 10 + usize::from(tpl[i + 2] - b'0'),
                        )?;
                        i += 3;
                    }
                } else {
                    group(&mut out, usize::from(n - b'0'))?;
                    i += 2;
                }
            }
            b'a' | b'b' | b'f' | b'n' | b'r' | b't' | b'v' | b'\\' => {
                out.push(match n {
                    b'a' => 0x07,
                    b'b' => 0x08,
                    b'f' => 0x0c,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'v' => 0x0b,
                    _ => b'\\',
                });
                i += 2;
            }
            n if n.is_ascii_alphabetic() => {
                return Err(format!("bad escape \\{}", n as char));
            }
            // Any other escaped character stays as written, backslash included.
            n => {
                out.push(b'\\');
                out.push(n);
                i += 2;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{read, setup, stamp, CHECK};
    use crate::{check_params, run, Outcome};
    use std::fs;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn go(params: Value) -> Outcome {
        run::<LineInFile>(&params, &Ctx::default()).unwrap()
    }

    #[test]
    fn an_empty_pattern_warns_as_ansible_does() {
        let (_d, path) = setup("a\nb\n");
        let out = go(json!({"path": path, "regexp": "", "line": "c"}));
        let w = out.result["warnings"][0].as_str().unwrap();
        assert!(
            w.starts_with("The regular expression is an empty string"),
            "{w}"
        );
        assert!(w.ends_with("avoid this warning."), "{w}");
        let out = go(json!({"path": path, "search_string": "", "line": "c"}));
        let w = out.result["warnings"][0].as_str().unwrap();
        assert!(w.ends_with("rather than appending."), "{w}");
        let out = go(json!({"path": path, "regexp": "^c", "line": "c"}));
        assert!(out.result.get("warnings").is_none());
    }

    #[test]
    fn a_file_over_the_edit_limit_is_refused_and_left_alone() {
        let (_d, path) = setup("");
        // Sparse: the size is what counts, not the disk it would take.
        let big = crate::text::MAX_EDIT_SIZE + 1;
        fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(big)
            .unwrap();
        for (module, params) in [
            ("lineinfile", json!({"path": path, "line": "c"})),
            ("blockinfile", json!({"path": path, "block": "c"})),
        ] {
            let e = crate::registry::run_module(module, &params, &Ctx::default()).unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.contains(&format!("is {big} bytes, larger than the 32 MiB")),
                "{module}: {msg}"
            );
            assert!(msg.contains("`copy` or `template`"), "{msg}");
        }
        assert_eq!(fs::metadata(&path).unwrap().len(), big);
        // At the limit it is edited.
        fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(crate::text::MAX_EDIT_SIZE - 2)
            .unwrap();
        assert!(go(json!({"path": path, "line": "c"})).changed);
    }

    #[test]
    fn appends_then_converges_without_rewriting() {
        let (_d, path) = setup("a\nb\n");
        let params = json!({"path": path, "line": "c"});
        let out = go(params.clone());
        assert!(out.changed);
        assert_eq!(out.msg.as_deref(), Some("line added"));
        assert_eq!(read(&path), "a\nb\nc\n");
        let before = stamp(&path);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let again = go(params);
        assert!(!again.changed);
        assert!(again.diff.is_empty());
        assert_eq!(stamp(&path), before);
    }

    #[test]
    fn check_mode_reports_and_leaves_disk_alone_and_diff_is_filled() {
        let (_d, path) = setup("a\n");
        let before = stamp(&path);
        let out = run::<LineInFile>(&json!({"path": path, "line": "b"}), &CHECK).unwrap();
        assert!(out.changed);
        assert_eq!(read(&path), "a\n");
        assert_eq!(stamp(&path), before);
        assert_eq!(out.diff.content.len(), 1);
        assert_eq!(out.diff.content[0].before, "a\n");
        assert_eq!(out.diff.content[0].after, "a\nb\n");
    }

    #[test]
    fn no_content_diff_unless_asked() {
        let (_d, path) = setup("a\n");
        let out = go(json!({"path": path, "line": "b"}));
        assert!(out.diff.content.is_empty());
    }

    #[test]
    fn regexp_replaces_last_match_or_first_with_firstmatch() {
        let (_d, path) = setup("port=1\nx\nport=2\n");
        let out = go(json!({"path": path, "regexp": "^port=", "line": "port=80"}));
        assert_eq!(out.msg.as_deref(), Some("line replaced"));
        assert_eq!(read(&path), "port=1\nx\nport=80\n");
        fs::write(&path, "port=1\nx\nport=2\n").unwrap();
        go(json!({"path": path, "regexp": "^port=", "line": "port=80", "firstmatch": "yes"}));
        assert_eq!(read(&path), "port=80\nx\nport=2\n");
    }

    #[test]
    fn regexp_dollar_matches_before_newline_like_python() {
        let (_d, path) = setup("key = old\n");
        go(json!({"path": path, "regexp": "^key = old$", "line": "key = new"}));
        assert_eq!(read(&path), "key = new\n");
    }

    #[test]
    fn regexp_without_match_but_exact_line_present_is_ok() {
        let (_d, path) = setup("a\nport=80\n");
        let before = stamp(&path);
        let out = go(json!({"path": path, "regexp": "^nomatch", "line": "port=80"}));
        assert!(!out.changed);
        assert_eq!(stamp(&path), before);
    }

    #[test]
    fn regexp_without_match_appends() {
        let (_d, path) = setup("a\n");
        go(json!({"path": path, "regexp": "^port=", "line": "port=80"}));
        assert_eq!(read(&path), "a\nport=80\n");
    }

    #[test]
    fn search_string_replaces_literal_match() {
        let (_d, path) = setup("a.b=1\naxb=2\n");
        go(json!({"path": path, "search_string": "a.b", "line": "a.b=3"}));
        assert_eq!(read(&path), "a.b=3\naxb=2\n");
    }

    #[test]
    fn insertafter_places_after_last_anchor_and_falls_back_to_eof() {
        let (_d, path) = setup("[main]\nx=1\n[other]\ny=1\n");
        go(json!({"path": path, "line": "z=2", "insertafter": "^\\[main\\]"}));
        assert_eq!(read(&path), "[main]\nz=2\nx=1\n[other]\ny=1\n");
        // Second run: the line exists, nothing moves.
        let out = go(json!({"path": path, "line": "z=2", "insertafter": "^\\[main\\]"}));
        assert!(!out.changed);
        // No anchor match: end of file.
        go(json!({"path": path, "line": "w=3", "insertafter": "^nothing"}));
        assert!(read(&path).ends_with("y=1\nw=3\n"));
    }

    #[test]
    fn insertafter_last_of_several_anchors_unless_firstmatch() {
        let (_d, path) = setup("# c\na\n# c\nb\n");
        go(json!({"path": path, "line": "new", "insertafter": "^#"}));
        assert_eq!(read(&path), "# c\na\n# c\nnew\nb\n");
        fs::write(&path, "# c\na\n# c\nb\n").unwrap();
        go(json!({"path": path, "line": "new", "insertafter": "^#", "firstmatch": true}));
        assert_eq!(read(&path), "# c\nnew\na\n# c\nb\n");
    }

    #[test]
    fn insertafter_anchor_on_unterminated_last_line() {
        let (_d, path) = setup("a\nanchor");
        go(json!({"path": path, "line": "new", "insertafter": "^anchor"}));
        assert_eq!(read(&path), "a\nanchor\nnew\n");
    }

    #[test]
    fn insertbefore_and_bof() {
        let (_d, path) = setup("a\nb\n");
        go(json!({"path": path, "line": "before-b", "insertbefore": "^b"}));
        assert_eq!(read(&path), "a\nbefore-b\nb\n");
        go(json!({"path": path, "line": "top", "insertbefore": "BOF"}));
        assert_eq!(read(&path), "top\na\nbefore-b\nb\n");
        let out = go(json!({"path": path, "line": "top", "insertbefore": "BOF"}));
        assert!(!out.changed);
        // No anchor match: end of file.
        go(json!({"path": path, "line": "end", "insertbefore": "^zzz"}));
        assert!(read(&path).ends_with("b\nend\n"));
    }

    #[test]
    fn final_newline_added_before_appending() {
        let (_d, path) = setup("a");
        go(json!({"path": path, "line": "b"}));
        assert_eq!(read(&path), "a\nb\n");
    }

    #[test]
    fn backrefs_expand_python_groups_and_no_match_leaves_file() {
        let (_d, path) = setup("listen 8080 ssl\n");
        let out = go(json!({
            "path": path, "regexp": "^listen (\\d+)(?P<rest>.*)$",
            "line": "listen \\1 http2\\g<rest>", "backrefs": true
        }));
        assert!(out.changed);
        assert_eq!(read(&path), "listen 8080 http2 ssl\n");
        let before = stamp(&path);
        let out = go(json!({
            "path": path, "regexp": "^nomatch(.*)", "line": "x\\1", "backrefs": true
        }));
        assert!(!out.changed);
        assert_eq!(stamp(&path), before);
    }

    #[test]
    fn absent_removes_every_match() {
        let (_d, path) = setup("a\n#x\nb\n#y\n");
        let out = go(json!({"path": path, "regexp": "^#", "state": "absent"}));
        assert_eq!(out.msg.as_deref(), Some("2 line(s) removed"));
        assert_eq!(out.result["found"], json!(2));
        assert_eq!(read(&path), "a\nb\n");
        let out = go(json!({"path": path, "line": "b", "state": "absent"}));
        assert_eq!(out.msg.as_deref(), Some("1 line(s) removed"));
        assert_eq!(read(&path), "a\n");
        let out = go(json!({"path": path, "search_string": "zz", "state": "absent"}));
        assert!(!out.changed);
    }

    #[test]
    fn absent_on_missing_file_is_ok() {
        let dir = tempfile::tempdir().unwrap();
        let out = go(json!({"path": dir.path().join("nope"), "line": "x", "state": "absent"}));
        assert!(!out.changed);
        assert_eq!(out.msg.as_deref(), Some("file not present"));
    }

    #[test]
    fn missing_file_fails_unless_create() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/new.conf");
        let err =
            run::<LineInFile>(&json!({"path": path, "line": "x"}), &Ctx::default()).unwrap_err();
        match err {
            ModuleError::Failed { msg, result } => {
                assert!(
                    msg.starts_with(&format!("Destination {} does not exist !", path.display()))
                );
                assert_eq!(result["rc"], json!(257));
            }
            other => panic!("unexpected {other:?}"),
        }
        let out = go(json!({"path": path, "line": "x", "create": true, "mode": "0600"}));
        assert!(out.changed);
        assert_eq!(read(&path), "x\n");
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
            0o600
        );
        assert!(!go(json!({"path": path, "line": "x", "create": true, "mode": "0600"})).changed);
    }

    #[test]
    fn mode_only_change_does_not_rewrite_content() {
        let (_d, path) = setup("a\n");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let ino = fs::metadata(&path).unwrap().ino();
        let out = go(json!({"path": path, "line": "a", "mode": "0640"}));
        assert!(out.changed);
        assert_eq!(
            out.msg.as_deref(),
            Some("ownership, perms or SE linux context changed")
        );
        assert_eq!(out.diff.attrs[0].attr, "mode");
        assert_eq!(out.diff.attrs[0].before, "0644");
        assert_eq!(out.diff.attrs[0].after, "0640");
        assert_eq!(fs::metadata(&path).unwrap().ino(), ino);
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
            0o640
        );
    }

    #[test]
    fn rewrite_keeps_existing_mode() {
        let (_d, path) = setup("a\n");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        go(json!({"path": path, "line": "b"}));
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
            0o600
        );
    }

    #[test]
    fn crlf_line_endings_kept() {
        let (_d, path) = setup("a=1\r\nb=2\r\n");
        go(json!({"path": path, "regexp": "^a=", "line": "a=9"}));
        assert_eq!(read(&path), "a=9\r\nb=2\r\n");
        go(json!({"path": path, "line": "c=3"}));
        assert_eq!(read(&path), "a=9\r\nb=2\r\nc=3\r\n");
        assert!(!go(json!({"path": path, "line": "c=3"})).changed);
    }

    #[test]
    fn backup_made_when_changing() {
        let (_d, path) = setup("a\n");
        let out = go(json!({"path": path, "line": "b", "backup": true}));
        let backup = out.result["backup"].as_str().unwrap();
        assert_eq!(fs::read_to_string(backup).unwrap(), "a\n");
        let out = go(json!({"path": path, "line": "b", "backup": true}));
        assert_eq!(out.result["backup"], json!(""));
    }

    #[test]
    fn validate_failure_leaves_file() {
        let (_d, path) = setup("a\n");
        let err = run::<LineInFile>(
            &json!({"path": path, "line": "b", "validate": "false %s"}),
            &Ctx::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("failed to validate"), "{err}");
        assert_eq!(read(&path), "a\n");
        go(json!({"path": path, "line": "b", "validate": "grep -q b %s"}));
        assert_eq!(read(&path), "a\nb\n");
    }

    #[test]
    fn symlink_is_followed_and_kept() {
        let (d, path) = setup("a\n");
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        go(json!({"dest": link, "line": "b"}));
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(read(&path), "a\nb\n");
    }

    #[test]
    fn directory_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = run::<LineInFile>(&json!({"path": dir.path(), "line": "x"}), &Ctx::default())
            .unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
    }

    #[test]
    fn numbers_are_strings_and_aliases_work() {
        let (_d, path) = setup("");
        go(json!({"destfile": path, "value": 8080}));
        assert_eq!(read(&path), "8080\n");
    }

    #[test]
    fn bad_parameters_are_rejected_naming_the_field() {
        let e = check_params(
            "lineinfile",
            &json!({"path": "/x", "line": "a", "bogus": 1}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
        let e = check_params(
            "lineinfile",
            &json!({"path": "/x", "line": "a", "state": "gone"}),
        )
        .unwrap_err();
        assert_eq!(e.path, "state");
        let e = check_params(
            "lineinfile",
            &json!({"path": "/x", "line": "a", "create": "maybe"}),
        )
        .unwrap_err();
        assert_eq!(e.path, "create");
        let e = check_params(
            "lineinfile",
            &json!({"path": "/x", "backrefs": true, "line": "a"}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("regexp"), "{e}");
        let e = check_params("lineinfile", &json!({"path": "/x"})).unwrap_err();
        assert!(e.to_string().contains("`line` is required"), "{e}");
        let e = check_params("lineinfile", &json!({"path": "/x", "state": "absent"})).unwrap_err();
        assert!(e.to_string().contains("state: absent"), "{e}");
        let e = check_params(
            "lineinfile",
            &json!({"path": "/x", "line": "a", "insertafter": "a", "insertbefore": "b"}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("mutually exclusive"), "{e}");
        let e = check_params(
            "lineinfile",
            &json!({"path": "/x", "line": "a", "regexp": "(a"}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("`regexp`"), "{e}");
        let e = check_params(
            "lineinfile",
            &json!({"path": "/x", "line": "a", "validate": "true"}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("%s"), "{e}");
        // Templated patterns are left for run time.
        check_params(
            "lineinfile",
            &json!({"path": "/x", "line": "a", "regexp": "{{ re }}("}),
        )
        .unwrap();
    }

    #[test]
    fn python_template_expansion() {
        let re = Regex::new(r"(a)(b)?(?P<n>c)").unwrap();
        let caps = re.captures(b"ac").unwrap();
        assert_eq!(
            expand_template(br"\1-\2-\g<n>-\g<3>", &re, &caps).unwrap(),
            b"a--c-c"
        );
        assert_eq!(
            expand_template(br"x\ty\\z\.", &re, &caps).unwrap(),
            b"x\ty\\z\\."
        );
        assert_eq!(expand_template(br"\101", &re, &caps).unwrap(), b"A");
        assert!(expand_template(br"\9", &re, &caps).is_err());
        assert!(expand_template(br"\q", &re, &caps).is_err());
    }
}
