//! Ansible's `present()` and `absent()` of lineinfile, on the file's lines.

use super::backrefs::expand_template;
use super::{file_eol, search_view, with_eol, Params};
use crate::text::{compile_regex, insert_anchors, strip_eol};
use crate::ModuleError;

/// Ansible's `present()`: returns the new lines and the message ("line added", "line replaced" or "").
pub(super) fn present(
    p: &Params,
    mut lines: Vec<Vec<u8>>,
) -> Result<(Vec<Vec<u8>>, String), ModuleError> {
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
pub(super) fn absent(
    p: &Params,
    lines: Vec<Vec<u8>>,
) -> Result<(Vec<Vec<u8>>, usize), ModuleError> {
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
