//! Text filters: `comment` (text decorated as a comment block in one of Ansible's styles) and
//! `urlsplit` (Python's `urllib.parse.urlsplit` as a mapping, or one of its parts).

use minijinja::value::Kwargs;
use minijinja::{Error, Value};

use crate::template::pyrepr::py_string;
use crate::template::value::{defined, op_err};

/// Ansible's `comment(style='plain', **options)`: `beginning`, a `prefix` line, each line of
/// the text after `decoration`, a `postfix` line and `end`, joined by `newline`.
pub(super) fn filter_comment(
    value: &Value,
    style: Option<String>,
    kwargs: Kwargs,
) -> Result<String, Error> {
    let text = py_string(defined(value)?)?;
    let style = style.unwrap_or_else(|| "plain".into());
    // (beginning, decoration, end) of each style.
    let (beginning, style_decoration, end) = match style.as_str() {
        "plain" => ("", "# ", ""),
        "erlang" => ("", "% ", ""),
        "c" => ("", "// ", ""),
        "cblock" => ("/*", " * ", " */"),
        "xml" => ("<!--", " - ", "-->"),
        other => {
            return Err(op_err(format!(
                "comment: invalid style {other:?} (plain, erlang, c, cblock or xml)"
            )))
        }
    };
    let opt = |name: &str, default: &str| -> Result<String, Error> {
        Ok(kwargs
            .get::<Option<Value>>(name)?
            .map(|v| py_string(&v))
            .transpose()?
            .unwrap_or_else(|| default.to_string()))
    };
    let count = |name: &str| -> Result<usize, Error> {
        Ok(kwargs.get::<Option<usize>>(name)?.unwrap_or(1))
    };
    // Without a `decoration` option, prefix and postfix default to the style's decoration
    // trimmed, and a style without `beginning` decorates nothing but the lines.
    let prepostfix = opt("decoration", style_decoration)?;
    let newline = opt("newline", "\n")?;
    let beginning = opt("beginning", beginning)?;
    let prefix = opt("prefix", prepostfix.trim_end())?;
    let prefix_count = count("prefix_count")?;
    let decoration = opt("decoration", style_decoration)?;
    let postfix = opt("postfix", prepostfix.trim_end())?;
    let postfix_count = count("postfix_count")?;
    let end = opt("end", end)?;
    kwargs.assert_all_used()?;

    let mut out = String::new();
    if !beginning.is_empty() {
        out.push_str(&beginning);
        out.push_str(&newline);
    }
    if !prefix.is_empty() {
        let line = if prefix == newline {
            newline.clone()
        } else {
            format!("{prefix}{newline}")
        };
        out.push_str(&line.repeat(prefix_count));
    }
    let body = format!(
        "{decoration}{}",
        text.replace(&newline, &format!("{newline}{decoration}"))
    );
    out.push_str(&body.replace(
        &format!("{decoration}{newline}"),
        &format!("{}{newline}", decoration.trim_end()),
    ));
    for _ in 0..postfix_count {
        out.push_str(&newline);
        out.push_str(&postfix);
    }
    if !end.is_empty() {
        out.push_str(&newline);
        out.push_str(&end);
    }
    Ok(out)
}

/// Python's `urlsplit`: `scheme`, `netloc`, `path`, `query`, `fragment`, `username`,
/// `password`, `hostname` (lower case) and `port` (a number), or the one part asked for.
/// Jinja2's `wordcount`: how many runs of word characters (`\w+`, Unicode) the text has.
/// Jinja2's `replace(old, new, count=None)`: at most `count` occurrences (all when none),
/// on the value's text.
pub(super) fn filter_replace(
    value: &Value,
    old: &Value,
    new: &Value,
    count: Option<Value>,
) -> Result<Value, Error> {
    let (s, old, new) = (
        py_string(defined(value)?)?,
        py_string(old)?,
        py_string(new)?,
    );
    let count = match count.filter(|c| !c.is_none()) {
        None => None,
        Some(c) => Some(
            i64::try_from(c.clone())
                .map_err(|_| op_err(format!("replace: count must be an integer, not {c}")))?,
        ),
    };
    Ok(Value::from(match count {
        // Python: a negative count replaces all.
        Some(n) if n >= 0 => s.replacen(&old, &new, n as usize),
        _ => s.replace(&old, &new),
    }))
}

pub(super) fn filter_wordcount(value: &Value) -> Result<Value, Error> {
    static WORD: std::sync::LazyLock<::regex::Regex> =
        std::sync::LazyLock::new(|| ::regex::Regex::new(r"\w+").expect("valid regex"));
    let text = py_string(defined(value)?)?;
    Ok(Value::from(WORD.find_iter(&text).count()))
}

pub(super) fn filter_urlsplit(value: &str, query: Option<String>) -> Result<Value, Error> {
    let parts = urlsplit(value)?;
    match query.filter(|q| !q.is_empty()) {
        None => Ok(Value::from_iter(parts)),
        Some(q) => parts
            .into_iter()
            .find(|(k, _)| *k == q)
            .map(|(_, v)| v)
            .ok_or_else(|| op_err(format!("urlsplit: unknown URL component: {q}"))),
    }
}

fn urlsplit(url: &str) -> Result<Vec<(&'static str, Value)>, Error> {
    let mut rest = url;
    let mut scheme = String::new();
    if let Some(i) = rest.find(':') {
        let candidate = &rest[..i];
        if candidate
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
            && candidate
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        {
            scheme = candidate.to_ascii_lowercase();
            rest = &rest[i + 1..];
        }
    }
    let mut netloc = "";
    if let Some(after) = rest.strip_prefix("//") {
        let end = after.find(['/', '?', '#']).unwrap_or(after.len());
        netloc = &after[..end];
        rest = &after[end..];
    }
    let (rest, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (userinfo, hostport) = match netloc.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, netloc),
    };
    let (username, password) = match userinfo {
        Some(u) => match u.split_once(':') {
            Some((n, p)) => (Value::from(n), Value::from(p)),
            None => (Value::from(u), Value::from(())),
        },
        None => (Value::from(()), Value::from(())),
    };
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        match v6.split_once(']') {
            Some((h, p)) => (h, p.strip_prefix(':')),
            None => return Err(op_err(format!("urlsplit: invalid IPv6 URL {url:?}"))),
        }
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    let port = match port.filter(|p| !p.is_empty()) {
        None => Value::from(()),
        Some(p) => match p.parse::<u16>() {
            Ok(n) if p.bytes().all(|b| b.is_ascii_digit()) => Value::from(n),
            _ => {
                return Err(op_err(format!(
                    "urlsplit: port could not be cast to integer value as {p:?}"
                )))
            }
        },
    };
    let hostname = if netloc.is_empty() || host.is_empty() {
        Value::from(())
    } else {
        Value::from(host.to_lowercase())
    };
    Ok(vec![
        ("fragment", Value::from(fragment)),
        ("hostname", hostname),
        ("netloc", Value::from(netloc)),
        ("password", password),
        ("path", Value::from(path)),
        ("port", port),
        ("query", Value::from(query)),
        ("scheme", Value::from(scheme)),
        ("username", username),
    ])
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use serde_json::json;

    #[test]
    fn replace_with_a_count() {
        assert_eq!(eval("'aaa' | replace('a', 'b', 2)"), json!("bba"));
        assert_eq!(eval("'aaa' | replace('a', 'b')"), json!("bbb"));
        assert_eq!(eval("'aaa' | replace('a', 'b', -1)"), json!("bbb"));
        assert_eq!(eval("123 | replace(2, 'x')"), json!("1x3"));
    }

    #[test]
    fn comment_styles() {
        assert_eq!(eval("'managed' | comment"), json!("#\n# managed\n#"));
        assert_eq!(eval("'a\\nb' | comment('c')"), json!("//\n// a\n// b\n//"));
        assert_eq!(
            eval("'x' | comment('cblock')"),
            json!("/*\n *\n * x\n *\n */")
        );
        assert_eq!(
            eval("'x' | comment('xml')"),
            json!("<!--\n -\n - x\n -\n-->")
        );
        assert_eq!(
            eval("'x' | comment(decoration='; ', prefix_count=0)"),
            json!("; x\n;")
        );
    }

    #[test]
    fn urlsplit_parts() {
        assert_eq!(
            eval("'HTTPS://u:p@Example.com:8443/a/b?c=1#frag' | urlsplit"),
            json!({"fragment": "frag", "hostname": "example.com", "netloc": "u:p@Example.com:8443",
                   "password": "p", "path": "/a/b", "port": 8443, "query": "c=1",
                   "scheme": "https", "username": "u"})
        );
        assert_eq!(eval("'http://h/x' | urlsplit('port')"), json!(null));
        assert_eq!(
            eval("'http://[::1]:80/' | urlsplit('hostname')"),
            json!("::1")
        );
        assert_eq!(
            eval("'/just/a/path' | urlsplit('path')"),
            json!("/just/a/path")
        );
    }
}
