//! The lookups that turn their terms into a list, shared by `lookup()`/`query()` and the
//! `with_*` loops (`src/playbook/loops.rs`): `sequence`, `subelements`, `dict`,
//! `indexed_items`, `lines`, `items`, `nested`, `together` and `random_choice`. They work on JSON values so the loop code needs no minijinja;
//! error wording follows ansible-core's where its own targets test for it.

use serde_json::{json, Value};

/// `sequence` for one term (`start=1 end=10 stride=2 format=web%02d`, `count=3`, or the short
/// form `[start-]end[/stride][:format]`), with `defaults` (the lookup's keyword arguments)
/// applied first: the term's own settings win.
pub fn sequence(term: &str, defaults: &[(String, String)]) -> Result<Vec<Value>, String> {
    sequence_of(term, defaults).map_err(|e| format!("`with_sequence: {}`: {e}", term.trim()))
}

fn sequence_of(term: &str, defaults: &[(String, String)]) -> Result<Vec<Value>, String> {
    let mut opts: Vec<(String, String)> = vec![
        ("start".into(), "1".into()),
        ("stride".into(), "1".into()),
        ("format".into(), "%d".into()),
    ];
    let mut set = |k: &str, v: &str| {
        opts.retain(|(o, _)| o != k);
        opts.push((k.to_string(), v.to_string()));
    };
    for (k, v) in defaults {
        set(k, v);
    }
    let term = term.trim();
    if let Some(c) = shortcut_re().captures(term) {
        for (k, i) in [("start", 1), ("end", 2), ("stride", 3), ("format", 4)] {
            if let Some(m) = c.get(i) {
                set(k, m.as_str());
            }
        }
    } else {
        let mut unknown = Vec::new();
        for word in term.split_whitespace() {
            match word.split_once('=') {
                Some((k, v)) if FIELDS.contains(&k) => set(k, v),
                Some((k, _)) => unknown.push(format!("'{k}'")),
                None => unknown.push("'_raw_params'".to_string()),
            }
        }
        if !unknown.is_empty() {
            return Err(format!(
                "unrecognized arguments to with_sequence: [{}]",
                unknown.join(", ")
            ));
        }
    }
    let get = |k: &str| opts.iter().find(|(o, _)| o == k).map(|(_, v)| v.as_str());
    let num = |k: &str| -> Result<Option<i128>, String> {
        get(k)
            .map(|v| {
                parse_int(v).ok_or_else(|| {
                    format!("option `{k}` has an invalid value {v:?}: not an integer")
                })
            })
            .transpose()
    };
    let (start, stride) = (num("start")?.unwrap_or(1), num("stride")?.unwrap_or(1));
    let end = match (num("end")?, num("count")?) {
        (None, None) => return Err("must specify count or end in with_sequence".into()),
        (Some(_), Some(_)) => {
            return Err("can't specify both count and end in with_sequence".into())
        }
        (Some(e), None) => e,
        (None, Some(0)) => return Ok(Vec::new()),
        // ansible-core's arithmetic, kept: with a stride other than 1 this is not the
        // `count`th number, and its own target checks the result.
        (None, Some(c)) => start + c * stride - 1,
    };
    if stride > 0 && end < start {
        return Err("to count backwards make stride negative".into());
    }
    if stride < 0 && end > start {
        return Err("to count forward don't make stride negative".into());
    }
    if stride == 0 {
        return Ok(Vec::new());
    }
    let format = get("format").unwrap_or("%d");
    if format.matches('%').count() != 1 {
        return Err(format!("bad formatting string: {format}"));
    }
    let width = format_width(format)?;
    let limit = if stride > 0 { end + 1 } else { end - 1 };
    let len = ((limit - start).abs() + stride.abs() - 1) / stride.abs();
    if len > MAX_ITEMS {
        return Err(format!(
            "the sequence is out of range: {len} items (at most {MAX_ITEMS})"
        ));
    }
    let mut out = Vec::new();
    let mut i = start;
    while (stride > 0 && i < limit) || (stride < 0 && i > limit) {
        out.push(Value::String(printf_int(format, i, width)?));
        i += stride;
    }
    Ok(out)
}

const FIELDS: &[&str] = &["start", "end", "count", "stride", "format"];

/// More items than any loop can run over: refused rather than exhausting memory.
const MAX_ITEMS: i128 = 10_000_000;

/// Decimal, `0x` hexadecimal or `0o` octal; 64-bit, as Python's ints are for any sane loop.
fn parse_int(s: &str) -> Option<i128> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok().map(i128::from)
    } else if let Some(o) = s.strip_prefix("0o") {
        i64::from_str_radix(o, 8).ok().map(i128::from)
    } else {
        s.parse::<i64>().ok().map(i128::from)
    }
}

fn shortcut_re() -> &'static regex::Regex {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        let num = "(0?x?[0-9a-f]+)";
        regex::Regex::new(&format!("(?i)^(?:{num}-)?{num}(?:/{num})?(?::(.+))?$"))
            .expect("static regex")
    })
}

/// The widest `%Nd` a sequence format may ask for: items are names and numbers, and a width
/// of billions would only exhaust memory.
const MAX_FORMAT_WIDTH: usize = 1024;

fn format_re() -> &'static regex::Regex {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| regex::Regex::new(r"%(0?)(\d*)([dixXos])").expect("static regex"))
}

/// The width of the format's conversion (0 when none is given), checked once for the sequence.
fn format_width(fmt: &str) -> Result<usize, String> {
    let Some(c) = format_re().captures(fmt) else {
        return Err(format!("bad formatting string: {fmt}"));
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

/// The one `%d`-style conversion sequence formats take (`%d`, `%02d`, `%x`, `%o`, `%s`).
fn printf_int(fmt: &str, n: i128, width: usize) -> Result<String, String> {
    Ok(format_re()
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
        .into_owned())
}

/// `subelements`: `[elements, "key"]` or `[elements, "key", {skip_missing: true}]` gives
/// `[element, sub]` for each entry of the list under `key` (dotted: in nested mappings) of
/// each element, the list taken out of the element. Elements marked `skipped` are left out.
pub fn subelements(terms: &[Value]) -> Result<Vec<Value>, String> {
    let bad = |why: &str| format!("subelements lookup expects a list of two or three items, {why}");
    if !(2..=3).contains(&terms.len()) {
        return Err(bad(""));
    }
    let key = match (&terms[0], &terms[1]) {
        (Value::Array(_) | Value::Object(_), Value::String(k)) => k.clone(),
        _ => {
            return Err(bad(
                "first a dict or a list, second a string pointing to the subkey",
            ))
        }
    };
    let elements = match &terms[0] {
        Value::Object(m) if m.get("skipped").is_some_and(|s| s != &json!(false)) => {
            return Ok(Vec::new())
        }
        Value::Object(m) => m.values().cloned().collect(),
        Value::Array(a) => a.clone(),
        _ => unreachable!("checked above"),
    };
    let skip_missing = match terms.get(2) {
        None => false,
        Some(Value::Object(f)) => {
            if let Some(k) = f.keys().find(|k| *k != "skip_missing") {
                return Err(bad(&format!(
                    "the optional third item must be a dict with flags ['skip_missing'], not `{k}`"
                )));
            }
            f.get("skip_missing").is_some_and(|v| {
                matches!(v, Value::Bool(true))
                    || matches!(v.as_str(), Some("yes" | "true" | "True" | "on" | "1"))
                    || v == &json!(1)
            })
        }
        Some(_) => {
            return Err(bad(
                "the optional third item must be a dict with flags ['skip_missing']",
            ))
        }
    };
    let names: Vec<&str> = key.split('.').collect();
    let mut out = Vec::new();
    for mut element in elements {
        let Value::Object(_) = element else {
            return Err(format!(
                "subelements lookup expects a dictionary, got {}",
                short(&element)
            ));
        };
        if element.get("skipped").is_some_and(|s| s != &json!(false)) {
            continue;
        }
        let mut sublist = Vec::new();
        let mut here = &mut element;
        for (i, name) in names.iter().enumerate() {
            let last = i + 1 == names.len();
            let Some(next) = here.get(*name) else {
                if skip_missing {
                    break;
                }
                return Err(format!(
                    "could not find '{name}' key in iterated item {}",
                    short(here)
                ));
            };
            if !last {
                if !next.is_object() {
                    if skip_missing {
                        break;
                    }
                    return Err(format!(
                        "the key {name} should point to a dictionary, got {}",
                        short(next)
                    ));
                }
                here = here.get_mut(*name).expect("checked above");
            } else if let Value::Array(_) = next {
                if let Some(Value::Array(a)) = here.as_object_mut().and_then(|m| m.remove(*name)) {
                    sublist = a;
                }
            } else {
                return Err(format!(
                    "the key {name} should point to a list, got {}",
                    short(next)
                ));
            }
        }
        for sub in sublist {
            out.push(json!([element.clone(), sub]));
        }
    }
    Ok(out)
}

/// `dict`: `{key, value}` for each entry of each mapping term.
pub fn dict_items(terms: &[Value]) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for term in terms {
        let Value::Object(m) = term else {
            return Err(format!(
                "the 'dict' lookup plugin expects a dictionary, got {}",
                short(term)
            ));
        };
        out.extend(m.iter().map(|(k, v)| json!({"key": k, "value": v})));
    }
    Ok(out)
}

/// `indexed_items`: `[index, item]` for each item of the terms flattened one level.
pub fn indexed_items(terms: Vec<Value>) -> Vec<Value> {
    terms
        .into_iter()
        .flat_map(|t| match t {
            Value::Array(a) => a,
            other => vec![other],
        })
        .enumerate()
        .map(|(i, item)| json!([i, item]))
        .collect()
}

/// `items`: the terms flattened one level (a list term is spliced in, anything else kept), as
/// ansible-core's `_flatten` does.
pub fn items(terms: Vec<Value>) -> Vec<Value> {
    flatten(terms)
}

/// `nested`: every combination of the terms, the first term varying slowest. Each combination
/// is flattened one level, and so is each of its parts, as ansible-core's `_combine` does: a
/// list inside a term ends up spliced into the item. Terms are iterated as Python does (a
/// string by its characters, a mapping by its keys).
pub fn nested(terms: Vec<Value>) -> Result<Vec<Value>, String> {
    let mut terms = terms.into_iter();
    let Some(first) = terms.next() else {
        // ansible-core's wording: its own target checks for it.
        return Err("with_nested requires at least one element in the nested list".into());
    };
    let mut result = first;
    for next in terms {
        let right = py_iter(&next)?;
        let mut combined = Vec::new();
        for x in py_iter(&result)? {
            for y in &right {
                combined.push(Value::Array(flatten(vec![x.clone(), y.clone()])));
            }
        }
        result = Value::Array(combined);
    }
    py_iter(&result)?
        .iter()
        .map(|x| Ok(Value::Array(flatten(py_iter(x)?))))
        .collect()
}

/// `together`: the terms side by side (Python's `zip_longest`, missing entries null), each
/// item flattened one level.
pub fn together(terms: Vec<Value>) -> Result<Vec<Value>, String> {
    if terms.is_empty() {
        return Err("with_together requires at least one element in each list".into());
    }
    let lists: Vec<Vec<Value>> = terms.iter().map(py_iter).collect::<Result<_, _>>()?;
    let n = lists.iter().map(Vec::len).max().unwrap_or(0);
    Ok((0..n)
        .map(|i| {
            Value::Array(flatten(
                lists
                    .iter()
                    .map(|l| l.get(i).cloned().unwrap_or(Value::Null))
                    .collect(),
            ))
        })
        .collect())
}

/// `random_choice`: one of the terms picked at random; no terms, no item.
pub fn random_choice(terms: Vec<Value>) -> Vec<Value> {
    if terms.is_empty() {
        return terms;
    }
    let i = fastrand::usize(..terms.len());
    terms.into_iter().skip(i).take(1).collect()
}

/// ansible-core's `_flatten`: list terms spliced in, one level.
fn flatten(terms: Vec<Value>) -> Vec<Value> {
    terms
        .into_iter()
        .flat_map(|t| match t {
            Value::Array(a) => a,
            other => vec![other],
        })
        .collect()
}

/// What Python's `for x in value` goes over: a list's items, a string's characters, a mapping's
/// keys; other values are not iterable, in Python's words (`'int' object is not iterable`).
fn py_iter(value: &Value) -> Result<Vec<Value>, String> {
    match value {
        Value::Array(a) => Ok(a.clone()),
        Value::String(s) => Ok(s.chars().map(|c| Value::String(c.to_string())).collect()),
        Value::Object(m) => Ok(m.keys().map(|k| Value::String(k.clone())).collect()),
        Value::Null => Err("'NoneType' object is not iterable".into()),
        Value::Bool(_) => Err("'bool' object is not iterable".into()),
        Value::Number(n) if n.is_f64() => Err("'float' object is not iterable".into()),
        Value::Number(_) => Err("'int' object is not iterable".into()),
    }
}

/// `lines`: the output lines of a shell command run on the controller (the playbook's
/// author wrote it, as with `lookup('pipe')`), in `cwd` (the playbook's directory, ansible-core's
/// loader base directory) when given.
pub fn lines(command: &str, cwd: Option<&std::path::Path>) -> Result<Vec<Value>, String> {
    Ok(shell_output("lines", command, cwd)?
        .lines()
        .map(|l| Value::String(l.to_string()))
        .collect())
}

/// `pipe`: the output of a shell command run on the controller, as `lines` runs it, with its
/// trailing whitespace taken off (Python's `rstrip()`, as ansible-core's plugin does).
pub fn pipe(command: &str, cwd: Option<&std::path::Path>) -> Result<String, String> {
    Ok(shell_output("pipe", command, cwd)?.trim_end().to_string())
}

/// What `sh -c command` printed; a command that fails fails the lookup with ansible-core's
/// message (`lookup_plugin.pipe(false) returned 1`).
fn shell_output(
    plugin: &str,
    command: &str,
    cwd: Option<&std::path::Path>,
) -> Result<String, String> {
    let mut c = std::process::Command::new("sh");
    c.arg("-c").arg(command).stdin(std::process::Stdio::null());
    if let Some(dir) = cwd.filter(|d| d.is_dir()) {
        c.current_dir(dir);
    }
    let o = c
        .output()
        .map_err(|e| format!("lookup('{plugin}'): cannot run `{command}`: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "lookup_plugin.{plugin}({command}) returned {}: {}",
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// The value as JSON for a message, cut after about 80 bytes, at a character boundary: the
/// value comes from the playbook or a host and may hold any text.
pub fn short(v: &Value) -> String {
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

    fn seq(term: &str, kw: &[(&str, &str)]) -> Result<Vec<Value>, String> {
        let kw: Vec<(String, String)> = kw
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        sequence(term, &kw)
    }

    #[test]
    fn sequences_as_ansible_core_counts() {
        let s = |t: &str| seq(t, &[]).unwrap();
        assert_eq!(s("start=1 end=3"), [json!("1"), json!("2"), json!("3")]);
        assert_eq!(s("4-6/2:web%02d"), [json!("web04"), json!("web06")]);
        assert_eq!(s("2"), [json!("1"), json!("2")]);
        assert_eq!(
            seq("", &[("count", "5"), ("start", "10")]).unwrap().len(),
            5
        );
        assert_eq!(
            seq("count=5 start=0", &[("stride", "-1")]).unwrap().len(),
            7
        );
        assert_eq!(
            seq("count=5 start=0", &[("stride", "0")]).unwrap(),
            Vec::<Value>::new()
        );
        assert_eq!(seq("count=5", &[("start", "20")]).unwrap()[0], json!("20"));
        let e = |t: &str| seq(t, &[]).unwrap_err();
        assert!(e("start=0 junk=3").contains("unrecognized arguments to with_sequence: ['junk']"));
        assert!(e("start=A end=3").contains("has an invalid value"));
        assert!(e("A-4/2").contains("has an invalid value"));
        assert!(e("start=1").contains("must specify count or end"));
        assert!(e("start=1 end=4 count=2").contains("can't specify both"));
        assert!(e("start=4 end=1 stride=2").contains("make stride negative"));
        assert!(e("start=1 end=4 stride=-2").contains("don't make stride negative"));
        assert!(e("start=1 end=4 format=d").contains("bad formatting string: d"));
        assert!(e("1:x%99999d").contains("too wide"));
        assert_eq!(
            s("start=-9223372036854775807 end=-9223372036854775808 stride=-1").len(),
            2
        );
        assert_eq!(
            s("start=9223372036854775806 end=9223372036854775807").len(),
            2
        );
        assert!(e("start=1 count=9223372036854775807 stride=2").contains("out of range"));
    }

    #[test]
    fn items_nested_together_as_ansible_core_combines() {
        assert_eq!(
            items(vec![json!([1, [2, [3]]]), json!("ab"), json!(null)]),
            [json!(1), json!([2, [3]]), json!("ab"), json!(null)]
        );
        let n = |t: Value| nested(t.as_array().unwrap().clone());
        assert_eq!(
            n(json!([["a", "b"], [1, 2]])).unwrap(),
            [
                json!(["a", 1]),
                json!(["a", 2]),
                json!(["b", 1]),
                json!(["b", 2])
            ]
        );
        // A list inside a term is spliced into the item; a string term gives its characters.
        assert_eq!(n(json!([[[1, 2]], ["a"]])).unwrap(), [json!([1, 2, "a"])]);
        assert_eq!(n(json!([["ab"]])).unwrap(), [json!(["a", "b"])]);
        assert_eq!(
            n(json!([[1], "xy"])).unwrap(),
            [json!([1, "x"]), json!([1, "y"])]
        );
        assert_eq!(n(json!([[1], {"k": 0}])).unwrap(), [json!([1, "k"])]);
        assert_eq!(
            n(json!([[1, 2]])).unwrap_err(),
            "'int' object is not iterable"
        );
        assert_eq!(
            n(json!([null])).unwrap_err(),
            "'NoneType' object is not iterable"
        );
        assert!(n(json!([])).unwrap_err().contains("at least one element"));
        let t = |t: Value| together(t.as_array().unwrap().clone());
        assert_eq!(
            t(json!([[[1, 2]], ["a", "b"]])).unwrap(),
            [json!([1, 2, "a"]), json!([null, "b"])]
        );
        assert_eq!(
            t(json!(["ab", {"k": 1, "j": 2}])).unwrap(),
            [json!(["a", "k"]), json!(["b", "j"])]
        );
        assert_eq!(
            t(json!([[1], 5])).unwrap_err(),
            "'int' object is not iterable"
        );
        assert!(t(json!([])).unwrap_err().contains("at least one element"));
        assert!(random_choice(Vec::new()).is_empty());
        let pick = random_choice(vec![json!("a"), json!("b")]);
        assert!(pick == [json!("a")] || pick == [json!("b")]);
    }

    #[test]
    fn subelements_dict_indexed() {
        let users =
            json!([{"name": "u", "m": {"k": [1, 2], "p": "x"}}, {"name": "v", "skipped": true}]);
        let got = subelements(&[users.clone(), json!("m.k")]).unwrap();
        assert_eq!(
            got,
            [
                json!([{"name": "u", "m": {"p": "x"}}, 1]),
                json!([{"name": "u", "m": {"p": "x"}}, 2])
            ]
        );
        assert!(subelements(&[json!(9001), json!("k")])
            .unwrap_err()
            .contains("first a dict or a list"));
        assert!(subelements(&[users.clone(), json!("m.p")])
            .unwrap_err()
            .contains("should point to a list"));
        assert!(subelements(&[users.clone(), json!("m.p.q")])
            .unwrap_err()
            .contains("should point to a dictionary"));
        assert!(subelements(&[users.clone(), json!("nope")]).is_err());
        assert!(
            subelements(&[users, json!("nope"), json!({"skip_missing": true})])
                .unwrap()
                .is_empty()
        );
        assert!(subelements(&[json!({"skipped": true}), json!("k")])
            .unwrap()
            .is_empty());
        assert_eq!(
            dict_items(&[json!({"a": 1})]).unwrap(),
            [json!({"key": "a", "value": 1})]
        );
        assert!(dict_items(&[json!(1)]).is_err());
        assert_eq!(
            indexed_items(vec![json!(["a", "b"])]),
            [json!([0, "a"]), json!([1, "b"])]
        );
        assert_eq!(indexed_items(vec![json!({"a": 1})]), [json!([0, {"a": 1}])]);
        assert_eq!(
            lines("printf 'a\\nb\\n'", None).unwrap(),
            [json!("a"), json!("b")]
        );
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("here"), "").unwrap();
        assert_eq!(lines("ls", Some(d.path())).unwrap(), [json!("here")]);
        assert!(lines("exit 3", None).unwrap_err().contains("returned 3"));
    }
}
