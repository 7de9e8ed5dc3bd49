//! Text emitters for `to_json`/`to_nice_json` (Python's `json.dumps` layout) and
//! `to_yaml`/`to_nice_yaml` (PyYAML's layout and quoting).
//!
//! They take plain JSON values; whether a YAML string needs quotes is asked of fixpoint's one
//! YAML resolver (`crate::yaml`), so what is written reads back as the same string.

use std::fmt::Write as _;

use serde_json::Value as Json;

use crate::yaml::mark::float_of;
use crate::yaml::{resolve_plain, Kind};

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
    if let Some(f) = float_of(v) {
        out.push_str(crate::yaml::mark::python_json_text(f));
        return;
    }
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
        Json::Number(n) if n.is_f64() => {
            out.push_str(&super::pyrepr::py_float(n.as_f64().unwrap_or_default()))
        }
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

/// A small YAML emitter mimicking PyYAML's layout (`- scalar`, `-   key: v` for a nested
/// collection with indent 4, sequences not indented under their key), which serde_yaml cannot be configured to produce.
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

/// A list or mapping (a non-finite float's mark is a scalar).
fn is_collection(v: &Json) -> bool {
    matches!(v, Json::Array(_) | Json::Object(_)) && float_of(v).is_none()
}

fn is_leaf(v: &Json) -> bool {
    match v {
        Json::Array(a) => a.iter().all(|x| !is_collection(x)),
        Json::Object(m) => m.values().all(|x| !is_collection(x)),
        _ => true,
    }
}

/// Whether a value is written on the same line as its key or dash.
fn yaml_is_inline(v: &Json, flow_leaves: bool) -> bool {
    if !is_collection(v) {
        return true;
    }
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
            // Scalars were written inline by the first arm.
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
        match v {
            // PyYAML puts one space after the dash of a value on that line, and pads to the
            // indent only before a nested block collection.
            _ if yaml_is_inline(v, fl) => {
                out.push(' ');
                out.push_str(&yaml_inline(v, false));
                out.push('\n');
            }
            Json::Object(inner) => {
                out.extend(std::iter::repeat_n(' ', indent - 1));
                yaml_map(inner, col + indent, true, indent, fl, out)
            }
            Json::Array(items) => {
                out.extend(std::iter::repeat_n(' ', indent - 1));
                yaml_seq(items, col + indent, true, indent, fl, out)
            }
            // Scalars were written inline by the first arm.
            _ => unreachable!("scalars are inline"),
        }
    }
}

fn yaml_inline(v: &Json, in_flow: bool) -> String {
    if let Some(f) = float_of(v) {
        // PyYAML's spelling, which reads back as the same float.
        return if f.is_nan() {
            ".nan"
        } else if f > 0.0 {
            ".inf"
        } else {
            "-.inf"
        }
        .into();
    }
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
    // PyYAML's dumper also quotes what its resolver reads as a timestamp (`2024-01-01`), which
    // fixpoint's resolver leaves a string (base 60, `1:30`, it reads as a number too).
    let looks_typed = pyyaml_timestamp_or_base60().is_match(s);
    if s.contains('\n') || s.chars().any(|c| c.is_control() || !yaml_printable(c)) {
        return double_quoted(s);
    }
    // Plain only where the text is not YAML syntax and the resolver reads it back as this
    // string: `yes`, `0x1F`, `~`, `1_000` would come back as true, 31, null and 1000.
    let plain = plain_allowed(s) && matches!(resolve_plain(s), Kind::Str(_));
    // In a flow collection PyYAML's emitter also quotes any `:` and `?` (`['01:30']`).
    if plain && !looks_typed && !(in_flow && s.contains([',', '?', ':', '[', ']', '{', '}'])) {
        return s.to_string();
    }
    single()
}

/// PyYAML's implicit timestamp and base-60 int/float patterns (YAML 1.1).
fn pyyaml_timestamp_or_base60() -> &'static regex::Regex {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new(concat!(
            r"^(?:[0-9]{4}-[0-9]{2}-[0-9]{2}",
            r"|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?",
            r"|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?)$"
        ))
        .expect("valid regex")
    })
}

/// Whether a one-line string may be written as a plain scalar in block context, by the rules
/// of libyaml's (and PyYAML's) emitter: no leading or trailing space, no document marker, and
/// no indicator where a reader would take it for syntax (`- x`, `a: b`, `a #b`, `&x`, ...).
fn plain_allowed(s: &str) -> bool {
    if s.starts_with(' ') || s.ends_with(' ') || s.starts_with("---") || s.starts_with("...") {
        return false;
    }
    let chars: Vec<char> = s.chars().collect();
    // Tabs and line breaks never get here (they are quoted as control characters).
    let blank_at = |i: usize| chars.get(i).is_none_or(|c| *c == ' ');
    for (i, &c) in chars.iter().enumerate() {
        let followed_by_blank = blank_at(i + 1);
        let syntax = if i == 0 {
            "#,[]{}&*!|>'\"%@`".contains(c) || (matches!(c, '?' | ':' | '-') && followed_by_blank)
        } else {
            (c == ':' && followed_by_blank) || (c == '#' && chars[i - 1] == ' ')
        };
        if syntax {
            return false;
        }
    }
    true
}

/// Characters YAML lets a scalar hold as they are (libyaml's `IS_PRINTABLE`), line
/// separators excepted, which a reader would fold.
fn yaml_printable(c: char) -> bool {
    matches!(c, '\n' | ' '..='~' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
        && !matches!(c, '\u{feff}' | '\u{2028}' | '\u{2029}')
}

/// A double-quoted scalar: JSON string syntax, which YAML reads the same, with the characters
/// YAML does not allow raw escaped as `\uXXXX`.
fn double_quoted(s: &str) -> String {
    let quoted = Json::String(s.to_string()).to_string();
    if quoted.chars().all(yaml_printable) {
        return quoted;
    }
    let mut out = String::with_capacity(quoted.len() + 8);
    for c in quoted.chars() {
        if yaml_printable(c) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::Path;

    #[test]
    fn strings_the_resolver_would_type_are_quoted() {
        for s in [
            "yes", "Yes", "NO", "on", "Off", "true", "FALSE", "~", "null", "Null", "0x1F", "0b101",
            "0644", "1_000", "12", "-3", "+7", "1.5", ".inf", "-.Inf", ".nan",
        ] {
            assert_eq!(yaml_scalar_str(s, false), format!("'{s}'"), "{s}");
        }
        // Strings that read back as strings stay plain.
        // PyYAML (YAML 1.1) reads these as strings too, so its dumper leaves them plain.
        for s in [
            "0o17",
            "1e3",
            "12e4567",
            "hello",
            "it's",
            "a#b",
            "http://x",
            "nginx-1.2",
            "0x",
            "yes!",
            "key=val",
        ] {
            assert_eq!(yaml_scalar_str(s, false), s, "{s}");
        }
    }

    #[test]
    fn yaml_syntax_is_quoted() {
        assert_eq!(yaml_scalar_str("a: b", false), "'a: b'");
        assert_eq!(yaml_scalar_str("a:", false), "'a:'");
        assert_eq!(yaml_scalar_str("- x", false), "'- x'");
        assert_eq!(yaml_scalar_str("-x", false), "-x");
        assert_eq!(yaml_scalar_str("a #b", false), "'a #b'");
        assert_eq!(yaml_scalar_str("#b", false), "'#b'");
        assert_eq!(yaml_scalar_str("*x", false), "'*x'");
        assert_eq!(yaml_scalar_str("'q", false), "'''q'");
        assert_eq!(yaml_scalar_str(" lead", false), "' lead'");
        assert_eq!(yaml_scalar_str("trail ", false), "'trail '");
        assert_eq!(yaml_scalar_str("--- x", false), "'--- x'");
        assert_eq!(yaml_scalar_str("a,b", false), "a,b");
        assert_eq!(yaml_scalar_str("a,b", true), "'a,b'");
        assert_eq!(yaml_scalar_str("two\nlines", false), "\"two\\nlines\"");
        assert_eq!(yaml_scalar_str("tab\there", false), "\"tab\\there\"");
        assert_eq!(yaml_scalar_str("a\u{2028}b", false), "\"a\\u2028b\"");
        assert_eq!(yaml_scalar_str("", false), "''");
    }

    #[test]
    fn emitted_yaml_reads_back_as_the_same_strings() {
        let strings = [
            "yes",
            "~",
            "0x1F",
            "1_000",
            "0644",
            "1.5",
            "a: b",
            "- x",
            "a #b",
            "'q",
            "\"dq\"",
            " lead",
            "two\nlines",
            "tab\there",
            "a\u{2028}b",
            "\u{feff}bom",
            "del\u{7f}",
            "héllo",
            "[x]",
            "{y}",
            "a,b",
            "2024-01-01",
            "1:30",
            "y",
            "",
            "null",
            "@at",
            "%p",
        ];
        let data = json!({
            "list": strings,
            "map": strings.iter().map(|s| (s.to_string(), json!(s))).collect::<serde_json::Map<_, _>>(),
        });
        for (indent, flow_leaves) in [(2, true), (4, false)] {
            let text = yaml_dump(&data, indent, flow_leaves);
            let back = crate::yaml::parse_str(&text, Path::new("t.yml"))
                .unwrap_or_else(|e| panic!("{text}\n{e:?}"))
                .to_json();
            assert_eq!(back, data, "{text}");
        }
    }
}
