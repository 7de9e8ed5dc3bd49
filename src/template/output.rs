//! Text emitters for `to_json`/`to_nice_json` (Python's `json.dumps` layout) and
//! `to_yaml`/`to_nice_yaml` (PyYAML's layout and quoting).
//!
//! They take plain JSON values and know nothing of templates.

use std::fmt::Write as _;

use serde_json::Value as Json;

/// JSON as Python's `json.dumps` writes it: `", "`/`": "` separators, non-ASCII escaped.
pub(super) fn py_json(v: &Json, indent: Option<usize>, sort_keys: bool) -> String {
    let mut out = String::new();
    write_py_json(v, indent, sort_keys, 0, &mut out);
    out
}

fn write_py_json(v: &Json, indent: Option<usize>, sort_keys: bool, level: usize, out: &mut String) {
    let newline = |out: &mut String, level: usize| {
        if let Some(n) = indent {
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', n * level));
        }
    };
    let sep = if indent.is_some() { "," } else { ", " };
    match v {
        Json::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(sep);
                }
                newline(out, level + 1);
                write_py_json(item, indent, sort_keys, level + 1, out);
            }
            newline(out, level);
            out.push(']');
        }
        Json::Object(map) if !map.is_empty() => {
            let mut entries: Vec<(&String, &Json)> = map.iter().collect();
            if sort_keys {
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            out.push('{');
            for (i, (k, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(sep);
                }
                newline(out, level + 1);
                out.push_str(&ascii_json_string(k));
                out.push_str(": ");
                write_py_json(item, indent, sort_keys, level + 1, out);
            }
            newline(out, level);
            out.push('}');
        }
        Json::String(s) => out.push_str(&ascii_json_string(s)),
        other => out.push_str(&other.to_string()),
    }
}

/// A JSON string literal with non-ASCII characters as `\uXXXX` (Python's `ensure_ascii`).
fn ascii_json_string(s: &str) -> String {
    let quoted = Json::String(s.to_string()).to_string();
    if quoted.is_ascii() {
        return quoted;
    }
    let mut out = String::with_capacity(quoted.len() + 8);
    for c in quoted.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut buf = [0u16; 2];
            for unit in c.encode_utf16(&mut buf) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        }
    }
    out
}

/// A small YAML emitter mimicking PyYAML's layout (`-   item` with indent 4, sequences not
/// indented under their key), which serde_yaml cannot be configured to produce.
pub(super) fn yaml_dump(v: &Json, indent: usize, flow_leaves: bool) -> String {
    let mut out = String::new();
    match v {
        Json::Object(m) if !yaml_is_inline(v, flow_leaves) => {
            yaml_map(m, 0, false, indent, flow_leaves, &mut out)
        }
        Json::Array(a) if !yaml_is_inline(v, flow_leaves) => {
            yaml_seq(a, 0, false, indent, flow_leaves, &mut out)
        }
        _ => {
            out.push_str(&yaml_inline(v, false));
            out.push('\n');
        }
    }
    out
}

fn is_leaf(v: &Json) -> bool {
    match v {
        Json::Array(a) => a
            .iter()
            .all(|x| !matches!(x, Json::Array(_) | Json::Object(_))),
        Json::Object(m) => m
            .values()
            .all(|x| !matches!(x, Json::Array(_) | Json::Object(_))),
        _ => true,
    }
}

/// Whether a value is written on the same line as its key or dash.
fn yaml_is_inline(v: &Json, flow_leaves: bool) -> bool {
    match v {
        Json::Array(a) => a.is_empty() || (flow_leaves && is_leaf(v)),
        Json::Object(m) => m.is_empty() || (flow_leaves && is_leaf(v)),
        _ => true,
    }
}

fn yaml_map(
    m: &serde_json::Map<String, Json>,
    col: usize,
    prefixed: bool,
    indent: usize,
    fl: bool,
    out: &mut String,
) {
    let mut entries: Vec<(&String, &Json)> = m.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    for (i, (k, v)) in entries.into_iter().enumerate() {
        if i > 0 || !prefixed {
            out.extend(std::iter::repeat_n(' ', col));
        }
        out.push_str(&yaml_scalar_str(k, false));
        out.push(':');
        match v {
            _ if yaml_is_inline(v, fl) => {
                out.push(' ');
                out.push_str(&yaml_inline(v, false));
                out.push('\n');
            }
            Json::Object(inner) => {
                out.push('\n');
                yaml_map(inner, col + indent, false, indent, fl, out);
            }
            Json::Array(items) => {
                out.push('\n');
                yaml_seq(items, col, false, indent, fl, out);
            }
            _ => unreachable!("scalars are inline"),
        }
    }
}

fn yaml_seq(a: &[Json], col: usize, prefixed: bool, indent: usize, fl: bool, out: &mut String) {
    for (i, v) in a.iter().enumerate() {
        if i > 0 || !prefixed {
            out.extend(std::iter::repeat_n(' ', col));
        }
        out.push('-');
        out.extend(std::iter::repeat_n(' ', indent - 1));
        match v {
            _ if yaml_is_inline(v, fl) => {
                out.push_str(&yaml_inline(v, false));
                out.push('\n');
            }
            Json::Object(inner) => yaml_map(inner, col + indent, true, indent, fl, out),
            Json::Array(items) => yaml_seq(items, col + indent, true, indent, fl, out),
            _ => unreachable!("scalars are inline"),
        }
    }
}

fn yaml_inline(v: &Json, in_flow: bool) -> String {
    match v {
        Json::Null => "null".into(),
        Json::Bool(b) => b.to_string(),
        Json::Number(n) => n.to_string(),
        Json::String(s) => yaml_scalar_str(s, in_flow),
        Json::Array(a) => {
            let items: Vec<String> = a.iter().map(|x| yaml_inline(x, true)).collect();
            format!("[{}]", items.join(", "))
        }
        Json::Object(m) => {
            let mut entries: Vec<(&String, &Json)> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let items: Vec<String> = entries
                .into_iter()
                .map(|(k, x)| format!("{}: {}", yaml_scalar_str(k, true), yaml_inline(x, true)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
    }
}

/// A string as a YAML scalar: plain when unambiguous, quoted when a YAML 1.1 reader (PyYAML,
/// i.e. Ansible) would read it as something else.
fn yaml_scalar_str(s: &str, in_flow: bool) -> String {
    if s.is_empty() {
        return "''".into();
    }
    let single = || format!("'{}'", s.replace('\'', "''"));
    let looks_typed = matches!(
        s.to_ascii_lowercase().as_str(),
        "y" | "n" | "yes" | "no" | "on" | "off" | "true" | "false" | "null" | "~"
    ) || (s.contains(|c: char| c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_digit() || "._+-:eE".contains(c)));
    let emitted = serde_yaml::to_string(s).unwrap_or_default();
    let emitted = emitted.trim_end_matches('\n');
    if s.contains('\n') || emitted.contains('\n') || s.chars().any(|c| c.is_control()) {
        return Json::String(s.to_string()).to_string();
    }
    let plain = emitted == s;
    if plain && (looks_typed || (in_flow && s.contains([',', '[', ']', '{', '}']))) {
        return single();
    }
    emitted.to_string()
}
