//! Regular-expression filters with Python `re` semantics: `regex_replace`, `regex_search`,
//! `regex_findall`, `regex_escape`; the compiled-pattern cache is shared with the regex tests.
//! Patterns are compiled by `fancy-regex`, which takes Python's syntax beyond the `regex`
//! crate's: look-ahead and look-behind, back-references (`\1`, `(?P=name)`), atomic groups.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};

use fancy_regex::{Captures, Regex, RegexBuilder};
use minijinja::value::{Kwargs, Rest};
use minijinja::{Error, Value};

use crate::template::pyrepr::py_string;
use crate::template::value::{defined, op_err, split_kwargs};

/// Regexes are compiled once per pattern and flags; templates apply them in loops.
pub(in crate::template) fn cached_regex(
    pattern: &str,
    ignorecase: bool,
    multiline: bool,
) -> Result<Regex, Error> {
    type Cache = Mutex<HashMap<(String, bool, bool), Regex>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let key = (pattern.to_string(), ignorecase, multiline);
    if let Some(re) = cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(re);
    }
    let re = RegexBuilder::new(pattern)
        .case_insensitive(ignorecase)
        .multi_line(multiline)
        .build()
        .map_err(|e| op_err(format!("invalid regular expression {pattern:?}: {e}")))?;
    if let Ok(mut c) = cache.lock() {
        if c.len() > 512 {
            c.clear();
        }
        c.insert(key, re.clone());
    }
    Ok(re)
}

pub(in crate::template) fn regex_flags(kwargs: &Kwargs) -> Result<(bool, bool), Error> {
    let ignorecase: Option<bool> = kwargs.get("ignorecase")?;
    let multiline: Option<bool> = kwargs.get("multiline")?;
    Ok((ignorecase.unwrap_or(false), multiline.unwrap_or(false)))
}

/// A failure while matching (the backtracking limit of a pathological pattern).
pub(in crate::template) fn match_err(pattern: &str, e: fancy_regex::Error) -> Error {
    op_err(format!("regular expression {pattern:?} failed: {e}"))
}

/// Translates a Python `re.sub` replacement (`\1`, `\g<name>`, `\\`) to the regex crate's
/// syntax (`${1}`, `${name}`, literal `$` escaped as `$$`).
fn python_replacement(repl: &str) -> String {
    let mut out = String::with_capacity(repl.len() + 8);
    let mut chars = repl.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '$' => out.push_str("$$"),
            '\\' => match chars.peek().copied() {
                Some(d) if d.is_ascii_digit() => {
                    let mut num = String::new();
                    while let Some(d) = chars.peek().copied().filter(|d| d.is_ascii_digit()) {
                        if num.len() == 2 {
                            break;
                        }
                        num.push(d);
                        chars.next();
                    }
                    let _ = write!(out, "${{{num}}}");
                }
                Some('g') => {
                    chars.next();
                    if chars.peek() == Some(&'<') {
                        chars.next();
                        let name: String = chars.by_ref().take_while(|&c| c != '>').collect();
                        let _ = write!(out, "${{{name}}}");
                    } else {
                        out.push_str("\\g");
                    }
                }
                Some('n') => {
                    chars.next();
                    out.push('\n');
                }
                Some('t') => {
                    chars.next();
                    out.push('\t');
                }
                Some('r') => {
                    chars.next();
                    out.push('\r');
                }
                Some('\\') => {
                    chars.next();
                    out.push('\\');
                }
                _ => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    out
}

pub(super) fn filter_regex_replace(
    value: &Value,
    pattern: Option<String>,
    replacement: Option<String>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let (ignorecase, multiline) = regex_flags(&kwargs)?;
    let count: Option<usize> = kwargs.get("count")?;
    kwargs.assert_all_used()?;
    let text = py_string(defined(value)?)?;
    let pattern = pattern.unwrap_or_default();
    let re = cached_regex(&pattern, ignorecase, multiline)?;
    let repl = python_replacement(&replacement.unwrap_or_default());
    re.try_replacen(&text, count.unwrap_or(0), repl.as_str())
        .map(|out| Value::from(out.into_owned()))
        .map_err(|e| match_err(&pattern, e))
}

/// Ansible's `regex_search(pattern, '\\1', '\\g<name>', ...)`: the match, the listed groups,
/// or none when nothing matches.
pub(super) fn filter_regex_search(
    value: &Value,
    pattern: String,
    args: Rest<Value>,
) -> Result<Value, Error> {
    let (groups, kwargs) = split_kwargs(&args)?;
    let (ignorecase, multiline) = regex_flags(&kwargs)?;
    kwargs.assert_all_used()?;
    // The group arguments are read first, as ansible-core does: a malformed one fails even
    // when nothing matches.
    enum Group {
        Number(usize),
        Name(String),
    }
    let malformed = || op_err("'NoneType' object has no attribute 'group'");
    let groups = groups
        .iter()
        .map(|g| {
            let spec = g.as_str().unwrap_or_default();
            if let Some(rest) = spec.strip_prefix("\\g") {
                let name = rest
                    .strip_prefix('<')
                    .and_then(|r| r.split_once('>'))
                    .map(|(n, _)| n)
                    .filter(|n| !n.is_empty() && !n.contains(char::is_whitespace))
                    .ok_or_else(malformed)?;
                Ok(match name.parse::<usize>() {
                    Ok(i) => Group::Number(i),
                    Err(_) => Group::Name(name.to_string()),
                })
            } else if let Some(rest) = spec.strip_prefix('\\') {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                digits.parse().map(Group::Number).map_err(|_| malformed())
            } else {
                Err(op_err("Unknown argument"))
            }
        })
        .collect::<Result<Vec<Group>, Error>>()?;
    let text = py_string(defined(value)?)?;
    let re = cached_regex(&pattern, ignorecase, multiline)?;
    let Some(caps) = re.captures(&text).map_err(|e| match_err(&pattern, e))? else {
        return Ok(Value::from(()));
    };
    if groups.is_empty() {
        return Ok(Value::from(caps.get(0).map_or("", |m| m.as_str())));
    }
    let mut out = Vec::new();
    for g in groups {
        let m = match &g {
            Group::Number(i) => caps.get(*i),
            Group::Name(name) => caps.name(name),
        };
        out.push(m.map_or(Value::from(()), |m| Value::from(m.as_str())));
    }
    Ok(Value::from(out))
}

/// Python's `re.findall`: whole matches, the group when there is one, lists of groups else.
pub(super) fn filter_regex_findall(
    value: &Value,
    pattern: String,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let (ignorecase, multiline) = regex_flags(&kwargs)?;
    kwargs.assert_all_used()?;
    let text = py_string(defined(value)?)?;
    let re = cached_regex(&pattern, ignorecase, multiline)?;
    let groups = re.captures_len() - 1;
    let found = |caps: Captures<'_, str>| {
        let group = |i: usize| Value::from(caps.get(i).map_or("", |m| m.as_str()));
        match groups {
            0 => group(0),
            1 => group(1),
            n => Value::from((1..=n).map(group).collect::<Vec<_>>()),
        }
    };
    let out: Vec<Value> = re
        .captures_iter(text.as_str())
        .map(|caps| caps.map(found))
        .collect::<Result<_, _>>()
        .map_err(|e| match_err(&pattern, e))?;
    Ok(Value::from(out))
}

pub(super) fn filter_regex_escape(value: &str) -> String {
    regex::escape(value)
}

#[cfg(test)]
mod tests {
    use super::python_replacement;
    use crate::template::test_support::*;
    use serde_json::json;

    #[test]
    fn regex_filters() {
        assert_eq!(
            eval("'ansible' | regex_replace('^a.*i(.*)$', 'a\\\\1')"),
            json!("able")
        );
        assert_eq!(
            eval("'foo=bar' | regex_replace('(?P<k>\\\\w+)=(?P<v>\\\\w+)', '\\\\g<v>=\\\\g<k>')"),
            json!("bar=foo")
        );
        assert_eq!(
            eval("'a.b.c' | regex_replace('\\\\.', '$')"),
            json!("a$b$c")
        );
        assert_eq!(
            eval("'ABC' | regex_replace('b', 'x', ignorecase=true)"),
            json!("AxC")
        );
        assert_eq!(
            eval("'server1' | regex_search('server[0-9]')"),
            json!("server1")
        );
        assert_eq!(eval("'server1' | regex_search('db')"), json!(null));
        assert_eq!(
            eval("'k=v' | regex_search('(\\\\w)=(\\\\w)', '\\\\2', '\\\\1')"),
            json!(["v", "k"])
        );
        assert_eq!(
            eval("'a1b22' | regex_findall('[0-9]+')"),
            json!(["1", "22"])
        );
        assert_eq!(
            eval("'a=1 b=2' | regex_findall('(\\\\w)=(\\\\d)')"),
            json!([["a", "1"], ["b", "2"]])
        );
        assert_eq!(eval("'a.b' | regex_escape"), json!("a\\.b"));
        // Python syntax the `regex` crate lacks: look-around and back-references.
        assert_eq!(
            eval("'price: 100USD 7EUR' | regex_findall('\\\\d+(?=USD)')"),
            json!(["100"])
        );
        assert_eq!(
            eval("'aa bb cd' | regex_replace('(\\\\w)\\\\1', '<\\\\1>')"),
            json!("<a> <b> cd")
        );
        assert_eq!(
            eval("'x=1' | regex_search('(?<=x=)(?P<n>\\\\d)(?!\\\\d)', '\\\\g<n>')"),
            json!(["1"])
        );
        assert_eq!(
            python_replacement(r"\1-\g<name>-\\-$"),
            "${1}-${name}-\\-$$"
        );
    }
}
