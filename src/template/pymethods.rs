//! Python's `str`, `dict` and `list` methods that minijinja-contrib's `pycompat` lacks or takes
//! fewer arguments of (`'v1.2'.removeprefix('v')`, `s.rsplit('/', 1)`, `s.split(',',
//! maxsplit=1)`, `s.count('a', 1)`, `'5'.zfill(3)`...), and the `dict()` global over pairs.
//!
//! Positions are in characters, as Python's are, and `start`/`end` are read as slice bounds.
//! Methods that change a value in place (`append`, `update`, `setdefault`) are not here:
//! fixpoint's values do not change once made, so such a call fails as an unknown method rather
//! than seem to work.

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, ErrorKind, Value};

use super::pyops::raised;
use super::value::split_kwargs;

/// The result of `value.method(args)` if it is one of these methods, else None (pycompat's
/// turn).
pub(super) fn call(value: &Value, method: &str, args: &[Value]) -> Option<Result<Value, Error>> {
    match value.kind() {
        ValueKind::String => {
            let s = value.as_str()?;
            str_method(s, method, args)
        }
        // Values never change here, so a copy is the value itself.
        ValueKind::Map | ValueKind::Seq if method == "copy" => Some(match args {
            [] => Ok(value.clone()),
            _ => Err(raised("copy() takes no arguments")),
        }),
        _ => None,
    }
}

fn str_method(s: &str, method: &str, args: &[Value]) -> Option<Result<Value, Error>> {
    let r = match method {
        "index" | "rindex" | "find" | "rfind" | "count" | "startswith" | "endswith" => {
            search(s, method, args)
        }
        "center" | "ljust" | "rjust" => pad(s, method, args),
        "zfill" => zfill(s, args),
        "partition" | "rpartition" => partition(s, method == "rpartition", args),
        "removeprefix" | "removesuffix" => one_str(method, args).map(|a| {
            let out = match method {
                "removeprefix" => s.strip_prefix(a.as_str()),
                _ => s.strip_suffix(a.as_str()),
            };
            Value::from(out.unwrap_or(s))
        }),
        "split" | "rsplit" => split(s, method == "rsplit", args),
        "swapcase" => no_args(method, args).map(|()| {
            Value::from(
                s.chars()
                    .flat_map(|c| -> Box<dyn Iterator<Item = char>> {
                        if c.is_uppercase() {
                            Box::new(c.to_lowercase())
                        } else {
                            Box::new(c.to_uppercase())
                        }
                    })
                    .collect::<String>(),
            )
        }),
        "istitle" => no_args(method, args).map(|()| Value::from(is_title(s))),
        "expandtabs" => expandtabs(s, args),
        _ => return None,
    };
    Some(r)
}

fn no_args(method: &str, args: &[Value]) -> Result<(), Error> {
    match args {
        [] => Ok(()),
        _ => Err(raised(&format!(
            "str.{method}() takes no arguments ({} given)",
            args.len()
        ))),
    }
}

/// The one string argument of `method`.
fn one_str(method: &str, args: &[Value]) -> Result<String, Error> {
    match args {
        [a] => a.as_str().map(str::to_string).ok_or_else(|| {
            raised(&format!(
                "{method}() argument must be str, not {}",
                super::pyops::py_type(a)
            ))
        }),
        _ => Err(raised(&format!(
            "str.{method}() takes exactly one argument ({} given)",
            args.len()
        ))),
    }
}

/// An optional integer argument (None counts as not given).
fn int_arg(v: Option<&Value>) -> Result<Option<i64>, Error> {
    match v {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => i64::try_from(v.clone())
            .map(Some)
            .map_err(|_| raised("slice indices must be integers or None")),
    }
}

/// Python's slice bounds of `start` and `end` over `len` characters (negative from the end);
/// `start` may be past the end, which callers read as an empty window.
fn bounds(len: usize, start: Option<i64>, end: Option<i64>) -> (usize, usize) {
    let len = len as i64;
    let fix = |i: i64| if i < 0 { (i + len).max(0) } else { i };
    let start = fix(start.unwrap_or(0)) as usize;
    let end = fix(end.unwrap_or(len)).min(len) as usize;
    (start, end)
}

/// `find`, `rfind`, `index`, `rindex`, `count`, `startswith`, `endswith`, with their optional
/// `start` and `end`.
fn search(s: &str, method: &str, args: &[Value]) -> Result<Value, Error> {
    let (needle, rest) = match args.split_first() {
        Some((n, rest)) if rest.len() <= 2 => (n, rest),
        _ => {
            return Err(raised(&format!(
                "{method}() takes from 1 to 3 positional arguments"
            )))
        }
    };
    let chars: Vec<char> = s.chars().collect();
    let (start, end) = bounds(chars.len(), int_arg(rest.first())?, int_arg(rest.get(1))?);
    let window: &[char] = if start <= end {
        &chars[start..end]
    } else {
        &[]
    };
    if method == "startswith" || method == "endswith" {
        // A tuple (a list here) of candidates: any of them.
        let candidates: Vec<Value> = match needle.kind() {
            ValueKind::Seq => needle.try_iter()?.collect(),
            _ => vec![needle.clone()],
        };
        let mut any = false;
        for c in candidates {
            let Some(c) = c.as_str() else {
                return Err(raised(&format!(
                    "{method} first arg must be str or a tuple of str, not {}",
                    super::pyops::py_type(&c)
                )));
            };
            let c: Vec<char> = c.chars().collect();
            any |= start <= chars.len()
                && if method == "startswith" {
                    window.starts_with(&c)
                } else {
                    window.ends_with(&c)
                };
        }
        return Ok(Value::from(any));
    }
    let Some(needle) = needle.as_str() else {
        return Err(raised(&format!(
            "must be str, not {}",
            super::pyops::py_type(needle)
        )));
    };
    let needle: Vec<char> = needle.chars().collect();
    if method == "count" {
        if start > chars.len() || start > end {
            return Ok(Value::from(0));
        }
        if needle.is_empty() {
            return Ok(Value::from(window.len() + 1));
        }
        let (mut n, mut i) = (0, 0);
        while i + needle.len() <= window.len() {
            if window[i..].starts_with(&needle) {
                n += 1;
                i += needle.len();
            } else {
                i += 1;
            }
        }
        return Ok(Value::from(n));
    }
    let found = if start > chars.len() || window.len() < needle.len() {
        None
    } else {
        let mut positions = 0..=window.len() - needle.len();
        let hit = |i: &usize| window[*i..].starts_with(&needle);
        if method.starts_with('r') {
            positions.rev().find(hit)
        } else {
            positions.find(hit)
        }
    };
    match (found, method) {
        (Some(i), _) => Ok(Value::from(start + i)),
        (None, "find" | "rfind") => Ok(Value::from(-1)),
        (None, _) => Err(raised("substring not found")),
    }
}

/// `center`, `ljust`, `rjust`: `width` and a one-character `fillchar` (a space by default).
fn pad(s: &str, method: &str, args: &[Value]) -> Result<Value, Error> {
    let (width, fill) = match args {
        [w] => (w, ' '),
        [w, f] => {
            let mut cs = f.as_str().unwrap_or_default().chars();
            match (cs.next(), cs.next()) {
                (Some(c), None) => (w, c),
                _ => {
                    return Err(raised(
                        "The fill character must be exactly one character long",
                    ))
                }
            }
        }
        _ => {
            return Err(raised(&format!(
                "{method}() takes 1 or 2 arguments ({} given)",
                args.len()
            )))
        }
    };
    let width = int_arg(Some(width))?.unwrap_or(0);
    let len = s.chars().count() as i64;
    let margin = (width - len).max(0);
    let left = match method {
        // CPython's split of an odd margin: the extra goes left when the width is odd.
        "center" => margin / 2 + (margin & width & 1),
        "rjust" => margin,
        _ => 0,
    };
    let fill_n = |n: i64| std::iter::repeat_n(fill, n as usize);
    Ok(Value::from(
        fill_n(left)
            .chain(s.chars())
            .chain(fill_n(margin - left))
            .collect::<String>(),
    ))
}

/// `zfill(width)`: zeros on the left, after a leading sign.
fn zfill(s: &str, args: &[Value]) -> Result<Value, Error> {
    let [w] = args else {
        return Err(raised("zfill() takes exactly one argument"));
    };
    let width = int_arg(Some(w))?.unwrap_or(0);
    let len = s.chars().count() as i64;
    if width <= len {
        return Ok(Value::from(s));
    }
    let zeros = "0".repeat((width - len) as usize);
    Ok(Value::from(match s.strip_prefix(['+', '-']) {
        Some(rest) => format!("{}{zeros}{rest}", &s[..1]),
        None => format!("{zeros}{s}"),
    }))
}

/// `partition(sep)` / `rpartition(sep)`: the three parts around the first (last) `sep`.
fn partition(s: &str, from_right: bool, args: &[Value]) -> Result<Value, Error> {
    let method = if from_right {
        "rpartition"
    } else {
        "partition"
    };
    let sep = one_str(method, args)?;
    if sep.is_empty() {
        return Err(raised("empty separator"));
    }
    let found = if from_right {
        s.rfind(&sep)
    } else {
        s.find(&sep)
    };
    let parts = match found {
        Some(i) => [&s[..i], &sep[..], &s[i + sep.len()..]],
        None if from_right => ["", "", s],
        None => [s, "", ""],
    };
    Ok(Value::from(parts.map(Value::from).to_vec()))
}

/// `split(sep=None, maxsplit=-1)` / `rsplit(...)`, positional or by name. Without `sep`, runs
/// of whitespace separate and leading or trailing whitespace gives no empty part.
fn split(s: &str, from_right: bool, args: &[Value]) -> Result<Value, Error> {
    let (positional, kwargs): (Vec<Value>, Kwargs) = split_kwargs(args)?;
    let named_sep: Option<Value> = kwargs.get("sep")?;
    let named_max: Option<i64> = kwargs.get("maxsplit")?;
    kwargs.assert_all_used()?;
    let sep = positional
        .first()
        .cloned()
        .or(named_sep)
        .filter(|v| !v.is_none());
    let max = match positional.get(1) {
        Some(v) => int_arg(Some(v))?,
        None => named_max,
    }
    .filter(|m| *m >= 0)
    .map(|m| m as usize);
    if positional.len() > 2 {
        return Err(raised("split() takes at most 2 arguments"));
    }
    let parts: Vec<String> = match &sep {
        Some(sep) => {
            let sep = sep
                .as_str()
                .ok_or_else(|| raised("must be str or None"))?
                .to_string();
            if sep.is_empty() {
                return Err(raised("empty separator"));
            }
            match (max, from_right) {
                (None, _) => s.split(sep.as_str()).map(str::to_string).collect(),
                (Some(m), false) => s.splitn(m + 1, sep.as_str()).map(str::to_string).collect(),
                (Some(m), true) => {
                    let mut v: Vec<String> =
                        s.rsplitn(m + 1, sep.as_str()).map(str::to_string).collect();
                    v.reverse();
                    v
                }
            }
        }
        None => whitespace_split(s, max, from_right),
    };
    Ok(Value::from(parts))
}

/// Python's `split()` without a separator: at most `max` splits, the rest kept whole (its
/// outer whitespace on the side the splitting ended stripped).
fn whitespace_split(s: &str, max: Option<usize>, from_right: bool) -> Vec<String> {
    let words: Vec<&str> = s.split_whitespace().collect();
    let Some(max) = max.filter(|m| *m < words.len()) else {
        return words.into_iter().map(str::to_string).collect();
    };
    let mut out = Vec::new();
    if from_right {
        let mut rest = s.trim_end();
        for _ in 0..max {
            let cut = rest.rfind(char::is_whitespace).unwrap_or(0);
            out.push(rest[cut..].trim_start().to_string());
            rest = rest[..cut].trim_end();
        }
        if !rest.is_empty() {
            out.push(rest.to_string());
        }
        out.reverse();
    } else {
        let mut rest = s.trim_start();
        for _ in 0..max {
            let cut = rest.find(char::is_whitespace).unwrap_or(rest.len());
            out.push(rest[..cut].to_string());
            rest = rest[cut..].trim_start();
        }
        if !rest.is_empty() {
            out.push(rest.to_string());
        }
    }
    out
}

/// Python's `istitle`: cased characters, each upper-case one after an uncased one and each
/// lower-case one after a cased one.
fn is_title(s: &str) -> bool {
    let (mut cased, mut prev_cased) = (false, false);
    for c in s.chars() {
        if c.is_uppercase() {
            if prev_cased {
                return false;
            }
            (cased, prev_cased) = (true, true);
        } else if c.is_lowercase() {
            if !prev_cased {
                return false;
            }
            (cased, prev_cased) = (true, true);
        } else {
            prev_cased = false;
        }
    }
    cased
}

/// `expandtabs(tabsize=8)`: each tab to the next multiple of `tabsize` columns, counted from
/// the last line break.
fn expandtabs(s: &str, args: &[Value]) -> Result<Value, Error> {
    let (positional, kwargs) = split_kwargs(args)?;
    let named: Option<i64> = kwargs.get("tabsize")?;
    kwargs.assert_all_used()?;
    let size = int_arg(positional.first())?.or(named).unwrap_or(8);
    let mut out = String::with_capacity(s.len());
    let mut col: i64 = 0;
    for c in s.chars() {
        match c {
            '\t' if size > 0 => {
                let n = size - col % size;
                out.extend(std::iter::repeat_n(' ', n as usize));
                col += n;
            }
            '\t' => {}
            '\n' | '\r' => {
                out.push(c);
                col = 0;
            }
            _ => {
                out.push(c);
                col += 1;
            }
        }
    }
    Ok(Value::from(out))
}

/// Python's `dict(mapping_or_pairs=(), **kwargs)`.
pub(super) fn dict(args: &[Value]) -> Result<Value, Error> {
    let (positional, kwargs) = split_kwargs(args)?;
    let mut out: Vec<(Value, Value)> = Vec::new();
    let mut put = |k: Value, v: Value| super::mutable::set_pair(&mut out, k, v);
    match positional.as_slice() {
        [] => {}
        [m] if m.kind() == ValueKind::Map => {
            for k in m.try_iter()? {
                let v = m.get_item(&k)?;
                put(k, v);
            }
        }
        [pairs] => {
            for (i, pair) in pairs.try_iter()?.enumerate() {
                let kv: Vec<Value> = match pair.kind() {
                    ValueKind::Seq | ValueKind::String => pair.try_iter()?.collect(),
                    _ => Vec::new(),
                };
                match <[Value; 2]>::try_from(kv) {
                    Ok([k, v]) => put(k, v),
                    Err(kv) if kv.is_empty() && pair.kind() != ValueKind::Seq => {
                        return Err(raised(&format!(
                            "cannot convert dictionary update sequence element #{i} to a sequence"
                        )))
                    }
                    Err(kv) => {
                        return Err(raised(&format!(
                            "dictionary update sequence element #{i} has length {}; 2 is required",
                            kv.len()
                        )))
                    }
                }
            }
        }
        _ => {
            return Err(Error::new(
                ErrorKind::TooManyArguments,
                format!("dict expected at most 1 argument, got {}", positional.len()),
            ))
        }
    }
    for k in kwargs.args() {
        let v: Value = kwargs.get(k)?;
        put(Value::from(k), v);
    }
    Ok(Value::from_iter(out))
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use serde_json::json;

    #[test]
    fn string_methods_as_python() {
        for (expr, want) in [
            ("'abc'.index('b')", json!(1)),
            ("'abcb'.rindex('b')", json!(3)),
            ("'abcb'.find('b', 2)", json!(3)),
            ("'abcb'.rfind('b', 0, -1)", json!(1)),
            ("'abc'.find('', 5)", json!(-1)),
            ("'aaa'.count('a', 1)", json!(2)),
            ("'abc'.count('')", json!(4)),
            ("'abc'.startswith('b', 1)", json!(true)),
            ("'abc'.endswith(('x', 'bc'))", json!(true)),
            ("'héllo'.index('l')", json!(2)),
            ("'abc'.center(7, '*')", json!("**abc**")),
            ("'ab'.center(5)", json!("  ab ")),
            ("'ab'.ljust(4, '.')", json!("ab..")),
            ("'ab'.rjust(4)", json!("  ab")),
            ("'5'.zfill(3)", json!("005")),
            ("'-5'.zfill(4)", json!("-005")),
            ("'a=b=c'.partition('=')", json!(["a", "=", "b=c"])),
            ("'a=b=c'.rpartition('=')", json!(["a=b", "=", "c"])),
            ("'abc'.rpartition('x')", json!(["", "", "abc"])),
            ("'aBc'.swapcase()", json!("AbC")),
            ("'v1.2'.removeprefix('v')", json!("1.2")),
            ("'x.txt'.removesuffix('.txt')", json!("x")),
            ("'a b c'.rsplit(' ', 1)", json!(["a b", "c"])),
            ("'a,b,c'.split(',', maxsplit=1)", json!(["a", "b,c"])),
            ("' a  b c '.split(None, 1)", json!(["a", "b c "])),
            ("' a  b c '.rsplit(maxsplit=1)", json!([" a  b", "c"])),
            ("'a b'.split()", json!(["a", "b"])),
            ("'Ab Cd'.istitle()", json!(true)),
            ("'Ab cd'.istitle()", json!(false)),
            ("'a\\tbc\\td'.expandtabs(4)", json!("a   bc  d")),
        ] {
            assert_eq!(eval(expr), want, "{expr}");
        }
        for (expr, msg) in [
            ("'abc'.index('z')", "substring not found"),
            ("'abc'.partition('')", "empty separator"),
            ("'abc'.center(5, 'ab')", "exactly one character"),
        ] {
            let err = render_err(&format!("{{{{ {expr} }}}}")).to_string();
            assert!(err.contains(msg), "{expr}: {err}");
        }
    }

    #[test]
    fn dict_from_pairs_and_copies() {
        assert_eq!(eval("dict([['a', 1], ('b', 2)])"), json!({"a": 1, "b": 2}));
        assert_eq!(eval("dict({'a': 1}, b=2)"), json!({"a": 1, "b": 2}));
        assert_eq!(eval("dict(a=1)"), json!({"a": 1}));
        assert_eq!(eval("dict(['ab'])"), json!({"a": "b"}));
        assert_eq!(eval("{'a': 1}.copy()"), json!({"a": 1}));
        assert_eq!(eval("[1, 2].copy()"), json!([1, 2]));
        let err = render_err("{{ dict([[1, 2, 3]]) }}").to_string();
        assert!(err.contains("has length 3; 2 is required"), "{err}");
    }
}
