//! Jinja2's HTML filters as Jinja2 and MarkupSafe compute them: `forceescape`, `xmlattr`,
//! `striptags` (with Python's `html.unescape` and the HTML5 named references) and `urlize`.
//! minijinja's own escaping writes `&quot;`/`&#x27;` where MarkupSafe writes `&#34;`/`&#39;`,
//! and minijinja-contrib's `striptags` knows fewer entities: neither gives Ansible's text.

use std::collections::HashMap;
use std::sync::OnceLock;

use minijinja::value::{Rest, ValueKind};
use minijinja::{Error, Value};
use regex::Regex;

use super::args::{bind, given, py_index, py_isspace};
use super::types::filter_type_debug;
use crate::template::pyrepr::{py_repr_string, py_string};
use crate::template::value::{defined, op_err};

/// MarkupSafe's `escape` of a text: the five characters HTML gives a meaning.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\'' => out.push_str("&#39;"),
            '"' => out.push_str("&#34;"),
            c => out.push(c),
        }
    }
    out
}

/// Jinja2's `forceescape`: the value's text (Python's `str()`), escaped.
pub(super) fn filter_forceescape(value: &Value) -> Result<String, Error> {
    Ok(escape(&py_string(defined(value)?)?))
}

/// Jinja2's `xmlattr(autospace=True)`: `key="value"` for each item whose value is not none,
/// both escaped, joined by spaces, with one space before unless `autospace` is false. A key
/// with white space, `/`, `>` or `=` is refused.
pub(super) fn filter_xmlattr(value: &Value, args: Rest<Value>) -> Result<String, Error> {
    let a = bind("xmlattr", &args, &["autospace"])?;
    if defined(value)?.kind() != ValueKind::Map {
        return Err(op_err(format!(
            "'{}' object has no attribute 'items'",
            filter_type_debug(value)
        )));
    }
    let mut items = Vec::new();
    for key in value.try_iter()? {
        let v = value.get_item(&key)?;
        if v.is_none() || v.is_undefined() {
            continue;
        }
        let Some(k) = key.as_str() else {
            return Err(op_err(format!(
                "expected string or bytes-like object, got '{}'",
                filter_type_debug(&key)
            )));
        };
        if k.chars().any(|c| {
            matches!(
                c,
                ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c' | '/' | '>' | '='
            )
        }) {
            return Err(op_err(format!(
                "Invalid character in attribute name: {}",
                py_repr_string(&key)?
            )));
        }
        items.push(format!("{}=\"{}\"", escape(k), escape(&py_string(&v)?)));
    }
    let out = items.join(" ");
    let autospace = a[0].as_ref().is_none_or(Value::is_true);
    Ok(if autospace && !out.is_empty() {
        format!(" {out}")
    } else {
        out
    })
}

/// Jinja2's `striptags` (MarkupSafe's): comments and tags taken out up to the first one left
/// open, white space runs made one space, then character references resolved.
pub(super) fn filter_striptags(value: &Value) -> Result<String, Error> {
    let text = py_string(defined(value)?)?;
    let mut kept = String::new();
    let mut pos = 0;
    while let Some(start) = text[pos..].find('<').map(|i| i + pos) {
        let end = if text[start..].starts_with("<!--") {
            text[start + 4..].find("-->").map(|i| start + 4 + i + 3)
        } else {
            text[start..].find('>').map(|i| start + i + 1)
        };
        let Some(end) = end else {
            break;
        };
        kept.push_str(&text[pos..start]);
        pos = end;
    }
    kept.push_str(&text[pos..]);
    let collapsed = kept
        .split(py_isspace)
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    Ok(unescape(&collapsed))
}

/// The HTML5 named references, `name` (with its `;` where the name has one) to text.
fn entities() -> &'static HashMap<&'static str, String> {
    static MAP: OnceLock<HashMap<&'static str, String>> = OnceLock::new();
    MAP.get_or_init(|| {
        include_str!("html5_entities.txt")
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (name, points) = l.split_once('\t')?;
                let text = points
                    .split(' ')
                    .filter_map(|p| u32::from_str_radix(p, 16).ok().and_then(char::from_u32))
                    .collect();
                Some((name, text))
            })
            .collect()
    })
}

/// Python's `html.unescape`: numeric references (HTML5's replacements for the invalid ones)
/// and named ones, a name without `;` read as the longest known name it starts with.
fn unescape(s: &str) -> String {
    static REF: OnceLock<Regex> = OnceLock::new();
    if !s.contains('&') {
        return s.to_string();
    }
    let re = REF.get_or_init(|| {
        Regex::new(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\x0c <&#;]{1,32};?)")
            .expect("a valid regex")
    });
    re.replace_all(s, |c: &regex::Captures| {
        let r = &c[1];
        if let Some(num) = r.strip_prefix('#') {
            let (digits, radix) = match num.strip_prefix(['x', 'X']) {
                Some(hex) => (hex, 16),
                None => (num, 10),
            };
            // Too many digits for a u32 is past the last code point all the same.
            let n = u32::from_str_radix(digits.trim_end_matches(';'), radix).unwrap_or(u32::MAX);
            return numeric_ref(n);
        }
        let names = entities();
        if let Some(t) = names.get(r) {
            return t.clone();
        }
        let chars: Vec<(usize, char)> = r.char_indices().collect();
        for x in (2..chars.len()).rev() {
            let cut = chars[x].0;
            if let Some(t) = names.get(&r[..cut]) {
                return format!("{t}{}", &r[cut..]);
            }
        }
        format!("&{r}")
    })
    .into_owned()
}

/// The text of `&#n;` under HTML5's rules: C1 controls read as windows-1252, surrogates and
/// numbers past Unicode as U+FFFD, other non-characters and controls dropped.
fn numeric_ref(n: u32) -> String {
    const C1: [u32; 32] = [
        0x20ac, 0x81, 0x201a, 0x192, 0x201e, 0x2026, 0x2020, 0x2021, 0x2c6, 0x2030, 0x160, 0x2039,
        0x152, 0x8d, 0x17d, 0x8f, 0x90, 0x2018, 0x2019, 0x201c, 0x201d, 0x2022, 0x2013, 0x2014,
        0x2dc, 0x2122, 0x161, 0x203a, 0x153, 0x9d, 0x17e, 0x178,
    ];
    let c = match n {
        0 => Some('\u{fffd}'),
        0x0d => Some('\r'),
        0x80..=0x9f => char::from_u32(C1[(n - 0x80) as usize]),
        0xd800..=0xdfff | 0x110000.. => Some('\u{fffd}'),
        0x01..=0x08 | 0x0b | 0x0e..=0x1f | 0x7f | 0xfdd0..=0xfdef => None,
        n if n & 0xfffe == 0xfffe => None,
        n => char::from_u32(n),
    };
    c.map(String::from).unwrap_or_default()
}

/// Jinja2's `urlize(trim_url_limit=None, nofollow=False, target=None, rel=None,
/// extra_schemes=None)` with Ansible's environment (`rel="noopener"` always added): each
/// word of the escaped text that looks like a web address or a mail address made a link.
pub(super) fn filter_urlize(value: &Value, args: Rest<Value>) -> Result<String, Error> {
    let a = bind(
        "urlize",
        &args,
        &[
            "trim_url_limit",
            "nofollow",
            "target",
            "rel",
            "extra_schemes",
        ],
    )?;
    let text = escape(&py_string(defined(value)?)?);
    let limit = given(&a[0]).map(py_index).transpose()?;
    let mut rel: Vec<String> = match a[3].as_ref().filter(|r| r.is_true()) {
        None => Vec::new(),
        Some(r) => r
            .as_str()
            .ok_or_else(|| {
                op_err(format!(
                    "'{}' object has no attribute 'split'",
                    filter_type_debug(r)
                ))
            })?
            .split(py_isspace)
            .filter(|w| !w.is_empty())
            .map(String::from)
            .collect(),
    };
    if a[1].as_ref().is_some_and(Value::is_true) {
        rel.push("nofollow".into());
    }
    rel.push("noopener".into());
    rel.sort();
    rel.dedup();
    let mut attrs = format!(" rel=\"{}\"", escape(&rel.join(" ")));
    if let Some(t) = a[2].as_ref().filter(|t| t.is_true()) {
        attrs.push_str(&format!(" target=\"{}\"", escape(&py_string(t)?)));
    }
    let mut schemes = Vec::new();
    if let Some(s) = given(&a[4]) {
        static SCHEME: OnceLock<Regex> = OnceLock::new();
        let valid =
            SCHEME.get_or_init(|| Regex::new(r"^[\w.+-]{2,}:/{0,2}$").expect("a valid regex"));
        for scheme in s.try_iter()? {
            let ok = scheme.as_str().is_some_and(|s| valid.is_match(s));
            if !ok {
                return Err(op_err(format!(
                    "{} is not a valid URI scheme prefix.",
                    py_repr_string(&scheme)?
                )));
            }
            schemes.push(scheme.as_str().unwrap_or_default().to_string());
        }
    }
    let trim = |x: &str| -> String {
        let Some(limit) = limit else {
            return x.to_string();
        };
        let len = x.chars().count() as i64;
        if len <= limit {
            return x.to_string();
        }
        // Python's `x[:limit]`: a negative limit counts from the end.
        let keep = if limit < 0 {
            (len + limit).max(0)
        } else {
            limit
        };
        format!("{}...", x.chars().take(keep as usize).collect::<String>())
    };
    let mut out = String::new();
    for word in split_keeping_space(&text) {
        out.push_str(&urlize_word(word, &attrs, &schemes, &trim));
    }
    Ok(out)
}

/// Python's `re.split(r'(\s+)', text)`: the words and the white space between them.
fn split_keeping_space(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut space = None;
    for (i, c) in text.char_indices() {
        let s = py_isspace(c);
        if space.is_some_and(|was| was != s) {
            out.push(&text[start..i]);
            start = i;
        }
        space = Some(s);
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

fn urlize_word(
    word: &str,
    attrs: &str,
    schemes: &[String],
    trim: &dyn Fn(&str) -> String,
) -> String {
    static HTTP: OnceLock<Regex> = OnceLock::new();
    static EMAIL: OnceLock<Regex> = OnceLock::new();
    // A scheme or `www.` and a host name, a bare name under one of the classic top-level
    // domains, or a scheme and an IP address; then a port, a path, a query, a fragment.
    let http = HTTP.get_or_init(|| {
        Regex::new(
            r"(?ix)^(
                (https?://|www\.) ([\w%-]+\.)* ([a-z]{2,63} | xn--[\w%]{2,59})
              | ([\w%-]{2,63}\.)+ (com|net|int|edu|gov|org|info|mil)
              | https?:// ( \d{1,3}(\.\d{1,3}){3} | \[ ([\da-f]{0,4}:){2} ([\da-f]{0,4}:?){1,6} \] )
            ) (:\d{1,5})? ([/?\#]\S*)? $",
        )
        .expect("a valid regex")
    });
    let email = EMAIL.get_or_init(|| Regex::new(r"^\S+@\w[\w.-]*\.\w+$").expect("a valid regex"));

    // Opening brackets before the address and closing punctuation after it are not part of it.
    let mut middle = word;
    let mut head_len = 0;
    loop {
        let rest = &middle[head_len..];
        let n = if rest.starts_with(['(', '<']) {
            1
        } else if rest.starts_with("&lt;") {
            4
        } else {
            break;
        };
        head_len += n;
    }
    let head = &middle[..head_len];
    middle = &middle[head_len..];
    let mut cut = middle.len();
    loop {
        let rest = &middle[..cut];
        if rest.ends_with([')', '>', '.', ',', '\n']) {
            cut -= 1;
        } else if rest.ends_with("&gt;") {
            cut -= 4;
        } else {
            break;
        }
    }
    let mut middle = middle[..cut].to_string();
    let mut tail = word[head_len + cut..].to_string();
    // A closing bracket the address opened belongs to it (`http://a.com/(b)`).
    for (open, close) in [("(", ")"), ("<", ">"), ("&lt;", "&gt;")] {
        let opened = middle.matches(open).count();
        if opened <= middle.matches(close).count() {
            continue;
        }
        for _ in 0..opened.min(tail.matches(close).count()) {
            let end = tail.find(close).unwrap_or(0) + close.len();
            middle.push_str(&tail[..end]);
            tail.drain(..end);
        }
    }
    let linked = if http.is_match(&middle) {
        let href = if middle.starts_with("https://") || middle.starts_with("http://") {
            middle.clone()
        } else {
            format!("https://{middle}")
        };
        format!("<a href=\"{href}\"{attrs}>{}</a>", trim(&middle))
    } else if middle.starts_with("mailto:") && email.is_match(&middle[7..]) {
        format!("<a href=\"{middle}\">{}</a>", &middle[7..])
    } else if middle.contains('@')
        && !middle.starts_with("www.")
        && !middle.starts_with('@')
        && !middle.contains(':')
        && email.is_match(&middle)
    {
        format!("<a href=\"mailto:{middle}\">{middle}</a>")
    } else {
        // Each extra scheme wraps again, as Jinja2's loop does.
        for scheme in schemes {
            if middle != *scheme && middle.starts_with(scheme.as_str()) {
                middle = format!("<a href=\"{middle}\"{attrs}>{middle}</a>");
            }
        }
        middle
    };
    format!("{head}{linked}{tail}")
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use serde_json::json;

    #[test]
    fn escaping_and_stripping() {
        assert_eq!(
            eval(
                r#"['<a href="x">T&amp;</a>' | forceescape, [1, '<'] | forceescape, none | forceescape]"#
            ),
            json!([
                "&lt;a href=&#34;x&#34;&gt;T&amp;amp;&lt;/a&gt;",
                "[1, &#39;&lt;&#39;]",
                "None"
            ])
        );
        assert_eq!(
            eval("'<p>a  <b>b</b>\\n c</p><!-- x <y> -->&lt;&amp;amp;&copy&nbsp;x&#65;&#x42;&#0;&#128;&notin;&notit;&#1;&#xD800;&bogus;' | striptags"),
            json!("a b c<&amp;©\u{a0}xAB\u{fffd}€∉¬it;\u{fffd}&bogus;")
        );
        assert_eq!(
            eval("[5 | striptags, ['<a>'] | striptags, '<a' | striptags, 'a<!--b' | striptags, 'x<b>y<c' | striptags]"),
            json!(["5", "['']", "<a", "a<!--b", "xy<c"])
        );
        assert_eq!(
            eval(
                r#"{'class': 'my <list>', 'missing': none, 'id': 42, 'on': true, 'q': "it's"} | xmlattr"#
            ),
            json!(r#" class="my &lt;list&gt;" id="42" on="True" q="it&#39;s""#)
        );
        assert_eq!(eval("{'a': 1} | xmlattr(false)"), json!(r#"a="1""#));
        assert_eq!(eval("{'a': none} | xmlattr"), json!(""));
    }

    #[test]
    fn urlize_as_jinja() {
        assert_eq!(
            eval("'Visit http://example.com/a, or www.test.org. (https://x.io/p?q=1) mail me@ex.com or mailto:a@b.cd <b>' | urlize"),
            json!(r#"Visit <a href="http://example.com/a" rel="noopener">http://example.com/a</a>, or <a href="https://www.test.org" rel="noopener">www.test.org</a>. (<a href="https://x.io/p?q=1" rel="noopener">https://x.io/p?q=1</a>) mail <a href="mailto:me@ex.com">me@ex.com</a> or <a href="mailto:a@b.cd">a@b.cd</a> &lt;b&gt;"#)
        );
        assert_eq!(
            eval("'go to https://averyveryverylong.example.com/path now' | urlize(15, true)"),
            json!(
                r#"go to <a href="https://averyveryverylong.example.com/path" rel="nofollow noopener">https://averyve...</a> now"#
            )
        );
        assert_eq!(
            eval("'see example.com and bar.xyz and http://127.0.0.1:8080/x and http://[::1]/ and ftp://f.org/x' | urlize(target='_blank', rel='ext', extra_schemes=['ftp://'])"),
            json!(r#"see <a href="https://example.com" rel="ext noopener" target="_blank">example.com</a> and bar.xyz and <a href="http://127.0.0.1:8080/x" rel="ext noopener" target="_blank">http://127.0.0.1:8080/x</a> and <a href="http://[::1]/" rel="ext noopener" target="_blank">http://[::1]/</a> and <a href="ftp://f.org/x" rel="ext noopener" target="_blank">ftp://f.org/x</a>"#)
        );
        assert_eq!(
            eval(
                r#"['(http://a.com/(b))' | urlize, '&lt;www.x.com&gt;' | urlize, '"q" <http://x.com>' | urlize, 'x@@y.com @a@b.com a@b me@localhost' | urlize]"#
            ),
            json!([
                r#"(<a href="http://a.com/(b)" rel="noopener">http://a.com/(b)</a>)"#,
                "&amp;lt;www.x.com&amp;gt;",
                r#"&#34;q&#34; &lt;<a href="http://x.com" rel="noopener">http://x.com</a>&gt;"#,
                r#"<a href="mailto:x@@y.com">x@@y.com</a> @a@b.com a@b me@localhost"#
            ])
        );
    }
}
