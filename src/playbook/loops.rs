//! Ansible's `with_*` loops: turning the rendered value of `loop`, `with_items`, `with_dict`,
//! `with_fileglob`, `with_sequence`, `with_nested`, `with_together`, `with_subelements` or
//! `with_first_found` into the list of items a task runs over.
//!
//! The loader only records which keyword a task used (`ast::LoopKind`); the engine calls
//! `expand` on the rendered value, host by host.

use super::ast::LoopKind;
use serde_json::{json, Map, Value};
use std::path::PathBuf;

/// The items of a loop from its rendered value. `search` is where `with_fileglob` and
/// `with_first_found` look for relative names (the role, then the playbook directory).
pub fn expand(kind: LoopKind, value: Value, search: &[PathBuf]) -> Result<Vec<Value>, String> {
    let list = |v: Value, what: &str| -> Result<Vec<Value>, String> {
        match v {
            Value::Array(a) => Ok(a),
            Value::Null => Ok(Vec::new()),
            other => Err(format!(
                "`{what}` must be a list, but it rendered to {}",
                short(&other)
            )),
        }
    };
    match kind {
        LoopKind::List => list(value, "loop"),
        LoopKind::Items => Ok(list(value, "with_items")?
            .into_iter()
            .flat_map(|i| match i {
                Value::Array(inner) => inner,
                other => vec![other],
            })
            .collect()),
        LoopKind::Dict => match value {
            Value::Object(m) => Ok(m
                .into_iter()
                .map(|(k, v)| json!({"key": k, "value": v}))
                .collect()),
            Value::Null => Ok(Vec::new()),
            other => Err(format!(
                "`with_dict` must be a mapping, but it rendered to {}",
                short(&other)
            )),
        },
        LoopKind::FirstFound(subdir) => {
            crate::template::first_found_file(&value, Some(subdir), search).map(|found| {
                found
                    .map(|p| Value::String(p.display().to_string()))
                    .into_iter()
                    .collect()
            })
        }
        LoopKind::Fileglob => {
            let patterns = match value {
                Value::String(s) => vec![s],
                other => list(other, "with_fileglob")?
                    .into_iter()
                    .map(|p| match p {
                        Value::String(s) => s,
                        other => other.to_string(),
                    })
                    .collect(),
            };
            Ok(patterns
                .iter()
                .flat_map(|p| crate::template::fileglob(p, search))
                .map(|p| Value::String(p.display().to_string()))
                .collect())
        }
        LoopKind::Flattened => Ok(flattened(match value {
            // The terms as ansible-core lists them: a string is one term.
            Value::Array(a) => a,
            other => vec![other],
        })),
        LoopKind::Sequence => sequence(&match value {
            Value::String(s) => s,
            other => other.to_string(),
        }),
        LoopKind::Nested => {
            let lists = lists_of(value, "with_nested")?;
            // ansible-core's wording: its own target checks for it.
            if lists.is_empty() {
                return Err("with_nested requires at least one element in the nested list".into());
            }
            let mut out: Vec<Vec<Value>> = vec![Vec::new()];
            for l in lists {
                out = out
                    .into_iter()
                    .flat_map(|prefix| {
                        l.iter().map(move |x| {
                            let mut p = prefix.clone();
                            p.push(x.clone());
                            p
                        })
                    })
                    .collect();
            }
            Ok(out.into_iter().map(Value::Array).collect())
        }
        LoopKind::Together => {
            let lists = lists_of(value, "with_together")?;
            if lists.is_empty() {
                return Err("with_together requires at least one element in each list".into());
            }
            let n = lists.iter().map(Vec::len).max().unwrap_or(0);
            Ok((0..n)
                .map(|i| {
                    Value::Array(
                        lists
                            .iter()
                            .map(|l| l.get(i).cloned().unwrap_or(Value::Null))
                            .collect(),
                    )
                })
                .collect())
        }
        LoopKind::Subelements => subelements(value),
    }
}

fn lists_of(value: Value, what: &str) -> Result<Vec<Vec<Value>>, String> {
    match value {
        Value::Array(a) => a
            .into_iter()
            .map(|l| match l {
                Value::Array(inner) => Ok(inner),
                other => Ok(vec![other]),
            })
            .collect(),
        other => Err(format!(
            "`{what}` must be a list of lists, but it rendered to {}",
            short(&other)
        )),
    }
}

/// `community.general.flattened`: every list inside the terms spliced in, all the way down; a
/// string is kept (stripped of surrounding blanks), and a term that is the string `None` or
/// `null` ends the list there (the plugin's marker of an undefined term).
fn flattened(terms: Vec<Value>) -> Vec<Value> {
    let mut out = Vec::new();
    for mut term in terms {
        // A list of one list (of one list...) is its innermost item.
        while let Value::Array(a) = &term {
            if a.len() != 1 {
                break;
            }
            let inner = a[0].clone();
            if !inner.is_array() {
                term = inner;
                break;
            }
            term = inner;
        }
        match term {
            Value::String(s) if s == "None" || s == "null" => break,
            Value::String(s) => out.push(Value::String(s.trim().to_string())),
            Value::Array(a) => out.extend(flattened(a)),
            other => out.push(other),
        }
    }
    out
}

/// `with_subelements: [elements, "key"]` or `[elements, "key", {skip_missing: true}]`.
fn subelements(value: Value) -> Result<Vec<Value>, String> {
    let bad = || {
        "`with_subelements` takes [list of mappings, \"key\"] (and optionally {skip_missing: true})"
            .to_string()
    };
    let Value::Array(args) = value else {
        return Err(bad());
    };
    let (elements, key, flags) = match args.as_slice() {
        [e, Value::String(k)] => (e.clone(), k.clone(), Map::new()),
        [e, Value::String(k), Value::Object(f)] => (e.clone(), k.clone(), f.clone()),
        _ => return Err(bad()),
    };
    let skip_missing = flags
        .get("skip_missing")
        .is_some_and(|v| v == &json!(true) || v == &json!("yes") || v == &json!("true"));
    let elements = match elements {
        Value::Array(a) => a,
        Value::Object(m) => m.into_values().collect(),
        _ => return Err(bad()),
    };
    let mut out = Vec::new();
    for mut e in elements {
        // A dotted key reaches into nested mappings, as in Ansible, which takes the list out
        // of the element: `item.0` is the element without it.
        let (path, last) = key
            .rsplit_once('.')
            .map_or(("", key.as_str()), |(p, l)| (p, l));
        let mut parent = Some(&mut e);
        for part in path.split('.').filter(|p| !p.is_empty()) {
            parent = parent.and_then(|s| s.get_mut(part));
        }
        let sub = match parent {
            Some(Value::Object(m)) if matches!(m.get(last), Some(Value::Array(_))) => {
                m.remove(last)
            }
            Some(p) => p.get(last).cloned(),
            None => None,
        };
        match sub {
            Some(Value::Array(subs)) => {
                for s in subs {
                    out.push(json!([e.clone(), s]));
                }
            }
            None if skip_missing => {}
            None => {
                return Err(format!(
                    "`with_subelements`: an element has no `{key}` (add {{skip_missing: true}} to skip it)"
                ))
            }
            Some(other) => {
                return Err(format!(
                    "`with_subelements`: `{key}` must be a list, found {}",
                    short(&other)
                ))
            }
        }
    }
    Ok(out)
}

/// `with_sequence`: `start=1 end=10 stride=2 format=web%02d`, `count=3`, or the short form
/// `[start-]end[/stride][:format]`.
fn sequence(spec: &str) -> Result<Vec<Value>, String> {
    let bad = |why: &str| format!("`with_sequence: {spec}`: {why}");
    let mut start: i64 = 1;
    let mut end: Option<i64> = None;
    let mut count: Option<i64> = None;
    let mut stride: i64 = 1;
    let mut format: Option<String> = None;
    let num = |s: &str| -> Result<i64, String> {
        let s = s.trim();
        let parsed = if let Some(h) = s.strip_prefix("0x") {
            i64::from_str_radix(h, 16)
        } else if let Some(o) = s.strip_prefix("0o") {
            i64::from_str_radix(o, 8)
        } else {
            s.parse()
        };
        parsed.map_err(|_| bad(&format!("`{s}` is not a number")))
    };
    if spec.contains('=') {
        for word in spec.split_whitespace() {
            let (k, v) = word
                .split_once('=')
                .ok_or_else(|| bad("expected key=value"))?;
            match k {
                "start" => start = num(v)?,
                "end" => end = Some(num(v)?),
                "count" => count = Some(num(v)?),
                "stride" => stride = num(v)?,
                "format" => format = Some(v.to_string()),
                other => return Err(bad(&format!("unknown option `{other}`"))),
            }
        }
    } else {
        let (range, fmt) = match spec.split_once(':') {
            Some((r, f)) => (r, Some(f.to_string())),
            None => (spec, None),
        };
        format = fmt;
        let (range, st) = match range.split_once('/') {
            Some((r, s)) => (r, Some(num(s)?)),
            None => (range, None),
        };
        if let Some(s) = st {
            stride = s;
        }
        match range.split_once('-') {
            Some((a, b)) => {
                start = num(a)?;
                end = Some(num(b)?);
            }
            None => end = Some(num(range)?),
        }
    }
    let end = match (end, count) {
        (Some(_), Some(_)) => return Err(bad("give `end` or `count`, not both")),
        (Some(e), None) => e,
        (None, Some(0)) => return Ok(Vec::new()),
        (None, Some(c)) => c
            .checked_sub(1)
            .and_then(|c| c.checked_mul(stride))
            .and_then(|span| start.checked_add(span))
            .ok_or_else(|| bad("its end is out of range of 64-bit integers"))?,
        (None, None) => return Err(bad("give `end` or `count`")),
    };
    if stride == 0 {
        return Err(bad("`stride` cannot be 0"));
    }
    if (stride > 0 && end < start) || (stride < 0 && end > start) {
        return Err(bad("the sequence never reaches `end` with this `stride`"));
    }
    let width = match &format {
        Some(f) => format_width(f).map_err(|e| bad(&e))?,
        None => 0,
    };
    let mut out = Vec::new();
    let mut i = start;
    while (stride > 0 && i <= end) || (stride < 0 && i >= end) {
        out.push(Value::String(match &format {
            Some(f) => printf_int(f, i, width),
            None => i.to_string(),
        }));
        // Past the last 64-bit integer is past `end` too: the sequence is complete.
        match i.checked_add(stride) {
            Some(next) => i = next,
            None => break,
        }
    }
    Ok(out)
}

/// The widest `%Nd` a `with_sequence` format may ask for: items are names and numbers, and
/// a width of billions would only exhaust memory.
const MAX_FORMAT_WIDTH: usize = 1024;

fn format_re() -> &'static regex::Regex {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| regex::Regex::new(r"%(0?)(\d*)([dixXo])").expect("static regex"))
}

/// The width of the format's conversion (0 when none is given), checked once for the sequence.
fn format_width(fmt: &str) -> Result<usize, String> {
    let Some(c) = format_re().captures(fmt) else {
        return Ok(0);
    };
    if c[2].is_empty() {
        return Ok(0);
    }
    c[2].parse::<usize>()
        .ok()
        .filter(|w| *w <= MAX_FORMAT_WIDTH)
        .ok_or_else(|| {
            format!(
                "format width {} is too wide (at most {MAX_FORMAT_WIDTH})",
                &c[2]
            )
        })
}

/// The one `%d`-style conversion `with_sequence` formats take (`%d`, `%02d`, `%x`, `%o`), with
/// the width `format_width` checked.
fn printf_int(fmt: &str, n: i64, width: usize) -> String {
    format_re()
        .replace(fmt, |c: &regex::Captures| {
            let body = match &c[3] {
                "x" => format!("{n:x}"),
                "X" => format!("{n:X}"),
                "o" => format!("{n:o}"),
                _ => n.to_string(),
            };
            if c[1].is_empty() {
                format!("{body:>width$}")
            } else {
                format!("{body:0>width$}")
            }
        })
        .into_owned()
}

/// The value as JSON for a message, cut after about 80 bytes, at a character boundary: the
/// value comes from the playbook or a host and may hold any text.
fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 80 {
        format!("{}…", &s[..s.floor_char_boundary(80)])
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flattened_splices_every_level_as_community_general_does() {
        let got = expand(
            LoopKind::Flattened,
            json!([[1, 2, [3, [4]]], [["a"]], " b ", {"k": 1}, "null", "never"]),
            &[],
        )
        .unwrap();
        assert_eq!(
            got,
            vec![
                json!(1),
                json!(2),
                json!(3),
                json!(4),
                json!("a"),
                json!("b"),
                json!({"k": 1})
            ]
        );
        assert_eq!(
            expand(LoopKind::Flattened, json!("one"), &[]).unwrap(),
            vec![json!("one")]
        );
    }

    #[test]
    fn with_keys_name_lookups_by_their_collection_names() {
        assert_eq!(
            LoopKind::of_key("with_community.general.flattened"),
            Some(LoopKind::Flattened)
        );
        assert_eq!(
            LoopKind::of_key("with_flattened"),
            Some(LoopKind::Flattened)
        );
        assert_eq!(
            LoopKind::of_key("with_ansible.builtin.items"),
            Some(LoopKind::Items)
        );
        assert_eq!(LoopKind::of_key("with_ansible.builtin.flattened"), None);
        assert_eq!(LoopKind::of_key("with_community.general.items"), None);
        assert_eq!(LoopKind::of_key("with_ansible.builtin.nope"), None);
    }

    #[test]
    fn sequences() {
        let s = |spec: &str| sequence(spec).unwrap();
        assert_eq!(s("start=1 end=3"), [json!("1"), json!("2"), json!("3")]);
        assert_eq!(
            s("start=0 count=3 stride=2"),
            [json!("0"), json!("2"), json!("4")]
        );
        assert_eq!(s("4-6/2:web%02d"), [json!("web04"), json!("web06")]);
        assert_eq!(s("2"), [json!("1"), json!("2")]);
        assert!(sequence("start=5 end=1").is_err());
        // The ends of the 64-bit integers are reached, not stepped over.
        assert_eq!(
            s("start=9223372036854775806 end=9223372036854775807").len(),
            2
        );
        assert_eq!(
            s("start=-9223372036854775807 end=-9223372036854775808 stride=-1").len(),
            2
        );
        assert!(sequence("start=1 count=9223372036854775807 stride=2").is_err());
        assert!(sequence("1:x%99999d").is_err());
        assert_eq!(s("2:x%1024d")[0].as_str().unwrap().len(), 1025);
    }

    #[test]
    fn a_non_list_value_with_non_ascii_text_is_cut_at_a_character() {
        // The quote and 39 two-byte characters: byte 80 falls inside the 40th.
        let e = expand(LoopKind::List, json!("é".repeat(60)), &[]).unwrap_err();
        assert!(e.starts_with("`loop` must be a list"), "{e}");
        assert!(e.ends_with(&format!("\"{}…", "é".repeat(39))), "{e}");
        for kind in [LoopKind::Dict, LoopKind::Nested] {
            assert!(expand(kind, json!("ü".repeat(100)), &[]).is_err());
        }
    }

    #[test]
    fn nested_together_subelements() {
        let nested = expand(LoopKind::Nested, json!([["a", "b"], [1, 2]]), &[]).unwrap();
        assert_eq!(
            nested,
            [
                json!(["a", 1]),
                json!(["a", 2]),
                json!(["b", 1]),
                json!(["b", 2])
            ]
        );
        for kind in [LoopKind::Nested, LoopKind::Together] {
            let e = expand(kind, json!([]), &[]).unwrap_err();
            assert!(e.contains("requires at least one element"), "{e}");
        }
        let together = expand(LoopKind::Together, json!([["a", "b"], [1]]), &[]).unwrap();
        assert_eq!(together, [json!(["a", 1]), json!(["b", null])]);
        let users = json!([{"name": "u", "keys": ["k1", "k2"]}, {"name": "v"}]);
        assert!(expand(LoopKind::Subelements, json!([users.clone(), "keys"]), &[]).is_err());
        let subs = expand(
            LoopKind::Subelements,
            json!([users, "keys", {"skip_missing": true}]),
            &[],
        )
        .unwrap();
        assert_eq!(subs.len(), 2);
        assert_eq!(subs[1], json!([{"name": "u"}, "k2"]));
        // A dotted key takes the list out of the nested mapping.
        let deep = json!([{"n": 1, "a": {"b": [7], "c": 2}}]);
        let subs = expand(LoopKind::Subelements, json!([deep, "a.b"]), &[]).unwrap();
        assert_eq!(subs, [json!([{"n": 1, "a": {"c": 2}}, 7])]);
    }
}
