//! PyYAML's leniency about the indentation of flow collections: it ignores indentation inside
//! `{...}` and `[...]`, so a flow mapping whose lines (or closing `}`) sit at column 0 under a
//! block key loads there, while yaml-rust2 follows the spec and refuses it ("invalid
//! indentation"). Ansible reads such files (its own `filter_core` target has one), so when
//! yaml-rust2 refuses an indentation inside a flow collection, the lines of that collection
//! are indented and the text parsed again. Whitespace at the start of a line inside a flow
//! collection means nothing (flow content holds no block scalars, and quoted or plain scalars
//! drop a continuation line's leading blanks), so the value is the one PyYAML reads; the
//! columns of the moved lines are given back in positions (`Shifts`).

use std::collections::HashMap;
use yaml_rust2::scanner::{Marker, ScanError, Scanner, TokenType};

/// Spaces added at the start of lines (1-based line → count), to subtract from the columns
/// yaml-rust2 reports on those lines.
pub(super) type Shifts = HashMap<usize, usize>;

/// The column (1-based) yaml-rust2's marker `m` stands for in the text as written.
pub(super) fn original_col(shifts: &Shifts, m: &Marker) -> usize {
    let shift = shifts.get(&m.line()).copied().unwrap_or(0);
    m.col().saturating_sub(shift) + 1
}

/// When `err` is an indentation refusal inside a flow collection of `text`: the text with the
/// lines of the outermost such collection (after its first) indented, and the shifts added.
pub(super) fn pad_flow(text: &str, err: &ScanError, shifts: &mut Shifts) -> Option<String> {
    if !err.info().starts_with("invalid indentation") {
        return None;
    }
    let start = outermost_flow_start(text)?;
    let chars: Vec<char> = text.chars().collect();
    let end = flow_end(&chars, start.index())?;
    let end_line = 1 + chars[..end].iter().filter(|c| **c == '\n').count();
    if end_line <= start.line() {
        return None;
    }
    // Past the collection's own column, whatever the block indentation around it.
    let pad = start.col() + 1;
    let mut out = String::with_capacity(text.len() + pad * (end_line - start.line()));
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let n = i + 1;
        if n > start.line() && n <= end_line {
            out.push_str(&" ".repeat(pad));
            *shifts.entry(n).or_insert(0) += pad;
        }
        out.push_str(line);
    }
    Some(out)
}

/// Where the outermost flow collection open at yaml-rust2's first error begins.
fn outermost_flow_start(text: &str) -> Option<Marker> {
    let mut scanner = Scanner::new(text.chars());
    let mut open: Vec<Marker> = Vec::new();
    loop {
        match scanner.next_token() {
            Ok(Some(tok)) => match tok.1 {
                TokenType::FlowMappingStart | TokenType::FlowSequenceStart => open.push(tok.0),
                TokenType::FlowMappingEnd | TokenType::FlowSequenceEnd => {
                    open.pop();
                }
                TokenType::StreamEnd => return None,
                _ => {}
            },
            Ok(None) => return None,
            Err(_) => return open.first().copied(),
        }
    }
}

/// The index of the bracket that closes the flow collection opening at `start`: quoted
/// scalars and comments are skipped; a plain scalar cannot hold a flow indicator there.
fn flow_end(chars: &[char], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut last = '{';
    let mut i = start;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            '"' | '\'' if matches!(last, '{' | '[' | ',' | ':' | '?') => {
                i += 1;
                while i < chars.len() {
                    match chars[i] {
                        '\\' if c == '"' => i += 1,
                        '\'' if c == '\'' && chars.get(i + 1) == Some(&'\'') => i += 1,
                        q if q == c => break,
                        _ => {}
                    }
                    i += 1;
                }
            }
            '#' if i > 0 && chars[i - 1].is_whitespace() => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            _ => {}
        }
        if !c.is_whitespace() {
            last = c;
        }
        i += 1;
    }
    None
}
