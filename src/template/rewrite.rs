//! Rewriting Jinja source before minijinja sees it: Ansible's chained-undefined lookups.
//!
//! Ansible's undefined swallows attribute access (`item.opts.mode | default(omit)` works when
//! `item.opts` is missing), but minijinja's strict mode errors on any lookup through an undefined
//! value. Paths that end in `| default`/`| d` or `is [not] defined/undefined` are therefore
//! rewritten to `__fp_chain(item, "opts", "mode")`, which yields undefined instead of failing.
//! The rewrite keeps every newline, so line numbers in errors stay right.
//!
//! Filters and tests named the collection way (`| ansible.builtin.to_json`,
//! `is ansible.builtin.match`, also `ansible.legacy.`) lose that prefix here: fixpoint's
//! filters and tests are `ansible.builtin`'s.
//!
//! Also here: the small scanners of template source the rest of the folder shares (where a
//! `{{ }}` block ends, string literals masked out).

use std::fmt::Write as _;
use std::ops::Range;
use std::sync::OnceLock;

use minijinja::value::Rest;
use minijinja::Value;
use regex::Regex;

use super::pyops;

/// Name of the helper that implements Ansible's chained-undefined lookups (see `rewrite_chains`).
pub(super) const CHAIN_FN: &str = "__fp_chain";

/// `__fp_chain(base, key, ...)`: each key looked up in turn (attribute, then item), undefined as
/// soon as a step is missing or none, where a plain lookup would fail under strict undefined.
pub(super) fn chain_lookup(base: &Value, keys: Rest<Value>) -> Value {
    let mut cur = base.clone();
    for key in keys.iter() {
        if cur.is_undefined() || cur.is_none() {
            return Value::UNDEFINED;
        }
        cur = match key.as_str() {
            Some(name) => {
                let v = cur.get_attr(name).unwrap_or_default();
                if v.is_undefined() {
                    cur.get_item(key).unwrap_or_default()
                } else {
                    v
                }
            }
            None => {
                let v = cur.get_item(key).unwrap_or_default();
                match (v.is_undefined(), key.as_i64()) {
                    (true, Some(i)) => cur.get_attr(&i.to_string()).unwrap_or_default(),
                    _ => v,
                }
            }
        };
    }
    cur
}

fn chain_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r#"(?P<pre>^|[^\w.)\]'"\x01])(?P<path>[A-Za-z_]\w*(?:\.\w+|\[[^\[\]]*\])+)(?:\s*\|\s*(?:default|d)\b|\s+is\s+(?:not\s+)?(?:defined|undefined)\b)"#,
        )
        .expect("valid regex")
    })
}

/// Rewrites chained lookups in every `{{ }}` / `{% %}` block of a template, then Python's
/// operators (`pyops`).
pub(super) fn rewrite_chains(src: &str) -> String {
    let out = rewrite_template_chains(src);
    let has_operator = code_regions(&out)
        .into_iter()
        .any(|r| has_python_operator(&out[r]));
    match has_operator
        .then(|| pyops::rewrite_template(&out))
        .flatten()
    {
        Some(rewritten) => rewritten,
        None => out,
    }
}

/// Whether code (string constants aside) holds a `/` or `%`, which `pyops` rewrites: most
/// templates have none and are not parsed twice.
fn has_python_operator(code: &str) -> bool {
    mask_strings(code).contains(['%', '/'])
}

fn rewrite_template_chains(src: &str) -> String {
    static HINT: OnceLock<Regex> = OnceLock::new();
    let hint = HINT.get_or_init(|| {
        Regex::new(r"default|defined|\|\s*d\b|ansible\.(?:builtin|legacy|_protomatter)\.")
            .expect("valid regex")
    });
    if !hint.is_match(src) {
        return src.to_string();
    }
    let mut out = String::with_capacity(src.len());
    let mut last = 0;
    for region in code_regions(src) {
        out.push_str(&src[last..region.start]);
        out.push_str(&rewrite_region(&src[region.clone()]));
        last = region.end;
    }
    out.push_str(&src[last..]);
    out
}

/// Rewrites a bare expression: chained lookups, collection-style filter and test names, and
/// Python's operators (`pyops`).
pub(super) fn rewrite_code(code: &str) -> String {
    let out = rewrite_region(code);
    // minijinja's expression parser panics on a block end (`closes_block`): such code is left
    // for the caller to refuse.
    if !has_python_operator(&out) || closes_block(&out) {
        return out;
    }
    pyops::rewrite_expr(&out).unwrap_or(out)
}

/// Rewrites chained lookups (and collection-style filter and test names) in one piece of
/// expression code.
fn rewrite_region(code: &str) -> String {
    let code = &strip_builtin_prefix(code);
    let masked = mask_strings(code);
    let mut out = String::with_capacity(code.len() + 16);
    let mut last = 0;
    for caps in chain_re().captures_iter(&masked) {
        let path = caps.name("path").expect("group exists");
        let Some(call) = chain_call(&code[path.range()], &masked[path.range()]) else {
            continue;
        };
        out.push_str(&code[last..path.start()]);
        out.push_str(&call);
        last = path.end();
    }
    out.push_str(&code[last..]);
    out
}

/// ansible-core's `escape_backslashes` for template strings from YAML: a backslash inside a
/// string constant of a `{{ }}` block is itself, not the start of an escape sequence, so
/// `regex_replace('(\w+)', '\1')` written once in a double-quoted YAML string works as in
/// Ansible. `{% %}` statements, template files and bare expressions are left as they are.
pub(super) fn escape_backslashes(src: &str) -> String {
    if !src.contains('\\') {
        return src.to_string();
    }
    let mut out = String::with_capacity(src.len() + 8);
    let mut last = 0;
    for region in code_regions(src) {
        if !src[..region.start].ends_with("{{") {
            continue;
        }
        out.push_str(&src[last..region.start]);
        out.push_str(&escape_backslashes_in_code(&src[region.clone()]));
        last = region.end;
    }
    out.push_str(&src[last..]);
    out
}

/// The code of one `{{ }}` block with each string constant's backslashes made literal: the
/// constant is found as Jinja's lexer finds it (a backslash skips the next character), and
/// written back so that minijinja reads exactly the characters between the quotes.
pub(super) fn escape_backslashes_in_code(code: &str) -> String {
    if !code.contains('\\') {
        return code.to_string();
    }
    let mut out = String::with_capacity(code.len() + 8);
    let mut chars = code.chars();
    while let Some(c) = chars.next() {
        if c != '\'' && c != '"' {
            out.push(c);
            continue;
        }
        let mut inner = String::new();
        let mut closed = false;
        while let Some(d) = chars.next() {
            if d == c {
                closed = true;
                break;
            }
            inner.push(d);
            if d == '\\' {
                if let Some(e) = chars.next() {
                    inner.push(e);
                }
            }
        }
        out.push(c);
        if closed {
            let q = c.to_string();
            out.push_str(&inner.replace('\\', "\\\\").replace(&q, &format!("\\{q}")));
            out.push(c);
        } else {
            // An unterminated constant: left for the parser to report.
            out.push_str(&inner);
        }
    }
    out
}

/// `x | ansible.builtin.f` → `x | f`, and the same after `is` / `is not` (also for
/// `ansible._protomatter.`, ansible-core's internal collection, whose `finalize` is ours).
fn strip_builtin_prefix(code: &str) -> String {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(
            r"(?:\||\bis(?:\s+not)?)\s*(ansible\.(?:builtin|legacy|_protomatter)\.)[A-Za-z_]",
        )
        .expect("valid regex")
    });
    let masked = mask_strings(code);
    let mut out = String::with_capacity(code.len());
    let mut last = 0;
    for caps in re.captures_iter(&masked) {
        let prefix = caps.get(1).expect("group exists");
        out.push_str(&code[last..prefix.start()]);
        last = prefix.end();
    }
    out.push_str(&code[last..]);
    out
}

/// `a.b[c].0` → `__fp_chain(a, "b", (c), 0)`; None for paths that cannot be rewritten (slices).
fn chain_call(path: &str, masked: &str) -> Option<String> {
    let head_end = masked.find(['.', '[']).unwrap_or(masked.len());
    let mut call = format!("{CHAIN_FN}({}", &path[..head_end]);
    let bytes = masked.as_bytes();
    let mut i = head_end;
    while i < bytes.len() {
        if bytes[i] == b'.' {
            let end = masked[i + 1..]
                .find(['.', '['])
                .map_or(masked.len(), |p| p + i + 1);
            let name = &path[i + 1..end];
            if name.bytes().all(|b| b.is_ascii_digit()) {
                let _ = write!(call, ", {name}");
            } else {
                let _ = write!(call, ", \"{name}\"");
            }
            i = end;
        } else {
            let end = masked[i..].find(']')? + i;
            let inner_masked = &masked[i + 1..end];
            if inner_masked.contains(':') || inner_masked.trim().is_empty() {
                return None;
            }
            let _ = write!(call, ", ({})", &path[i + 1..end]);
            i = end + 1;
        }
    }
    call.push(')');
    Some(call)
}

/// Byte ranges of the code inside `{{ }}` and `{% %}` blocks, skipping comments, string
/// literals and `{% raw %}` sections.
fn code_regions(src: &str) -> Vec<Range<usize>> {
    let b = src.as_bytes();
    let mut regions = Vec::new();
    let mut i = 0;
    while i + 1 < b.len() {
        if b[i] != b'{' || !matches!(b[i + 1], b'{' | b'%' | b'#') {
            i += 1;
            continue;
        }
        let kind = b[i + 1];
        let start = i + 2;
        if kind == b'#' {
            match src[start..].find("#}") {
                Some(p) => {
                    i = start + p + 2;
                    continue;
                }
                None => break,
            }
        }
        let Some(j) = block_end(b, start, if kind == b'{' { b'}' } else { b'%' }) else {
            break;
        };
        let code = src[start..j].trim_matches(|c: char| c == '-' || c == '+' || c.is_whitespace());
        if kind == b'%' && code == "raw" {
            match raw_end_re().find(&src[j..]) {
                Some(m) => {
                    i = j + m.end();
                    continue;
                }
                None => break,
            }
        }
        regions.push(start..j);
        i = j + 2;
    }
    regions
}

/// Offset of the `}}` (or `%}`) that closes a block whose code starts at `start`, skipping
/// string literals and brackets as Jinja's lexer does (`{{ {'a': {'b': 1}} }}`).
pub(super) fn block_end(b: &[u8], start: usize, close: u8) -> Option<usize> {
    let mut j = start;
    let mut depth = 0usize;
    let mut quote = None;
    while j < b.len() {
        let c = b[j];
        if let Some(q) = quote {
            if c == b'\\' {
                j += 2;
                continue;
            }
            if c == q {
                quote = None;
            }
        } else if c == b'\'' || c == b'"' {
            quote = Some(c);
        } else if depth == 0 && c == close && b.get(j + 1) == Some(&b'}') {
            return Some(j);
        } else if matches!(c, b'(' | b'[' | b'{') {
            depth += 1;
        } else if matches!(c, b')' | b']' | b'}') {
            depth = depth.saturating_sub(1);
        }
        j += 1;
    }
    None
}

/// Whether bare expression code contains a block end (`}}`, `%}`). minijinja's expression
/// parser panics on `x }} y`, so such code must never reach it.
pub(super) fn closes_block(code: &str) -> bool {
    block_end(code.as_bytes(), 0, b'}').is_some() || block_end(code.as_bytes(), 0, b'%').is_some()
}

fn raw_end_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"\{%[-+]?\s*endraw\s*[-+]?%\}").expect("valid regex"))
}

/// Replaces string-literal contents with `\x01` bytes (same byte length), so that regexes
/// over code never match inside strings while offsets still line up with the original.
pub(super) fn mask_strings(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for ch in code.chars() {
        match quote {
            None => {
                if ch == '\'' || ch == '"' {
                    quote = Some(ch);
                }
                out.push(ch);
            }
            Some(q) => {
                if !escaped && ch == q {
                    quote = None;
                    out.push(ch);
                    continue;
                }
                escaped = !escaped && ch == '\\';
                out.extend(std::iter::repeat_n('\x01', ch.len_utf8()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{rewrite_chains, rewrite_code};
    use crate::template::test_support::*;
    use serde_json::json;

    #[test]
    fn default_and_defined_work_under_strictness() {
        assert_eq!(render("{{ foo | default('x') }}"), json!("x"));
        assert_eq!(render("{{ foo | d('x') }}"), json!("x"));
        assert_eq!(render("{{ user.nmae | default('x') }}"), json!("x"));
        assert_eq!(render("{{ user.name | default('x') }}"), json!("bob"));
        // Ansible's undefined chains: the parent itself may be missing.
        assert_eq!(render("{{ foo.bar.baz | default('x') }}"), json!("x"));
        assert_eq!(render("{{ foo['bar'][0] | default(7) }}"), json!(7));
        assert_eq!(
            render("v={{ item.opts.mode|default('0644') }}"),
            json!("v=0644")
        );
        assert_eq!(render("{{ users.9 | default('none') }}"), json!("none"));
        assert_eq!(render("{{ users.1 | default('none') }}"), json!("bob"));
        assert_eq!(render("{{ empty | default('z', true) }}"), json!("z"));
        assert_eq!(render("{{ empty | default('z') }}"), json!(""));
        assert_eq!(render("{{ nothing | default('z') }}"), json!(null));
        assert!(!truth("foo is defined"));
        assert!(truth("foo is undefined"));
        assert!(truth("foo is not defined"));
        assert!(!truth("foo.bar is defined"));
        assert!(!truth("user.nmae is defined"));
        assert!(truth("user.name is defined"));
        assert!(truth("user['name'] is defined"));
        assert!(truth("foo is not defined or foo"));
        // Strings that merely look like such paths are left alone.
        assert_eq!(render("{{ 'a.b | default' ~ x }}"), json!("a.b | defaulta"));
        assert_eq!(
            render("{% raw %}{{ a.b | default(1) }}{% endraw %}"),
            json!("{{ a.b | default(1) }}")
        );
        // A missing variable that is not guarded still fails.
        assert_eq!(
            undefined_name(render_err("{{ foo.bar | default(baz) }} x")),
            "baz"
        );
    }

    #[test]
    fn backslashes_in_string_constants_are_literal() {
        use super::{escape_backslashes, escape_backslashes_in_code};
        assert_eq!(escape_backslashes_in_code(r"'\1' ~ x"), r"'\\1' ~ x");
        assert_eq!(escape_backslashes_in_code(r"'it\'s'"), r"'it\\\'s'");
        assert_eq!(
            escape_backslashes_in_code(r#""a\"b" ~ 'c'"#),
            r#""a\\\"b" ~ 'c'"#
        );
        assert_eq!(
            escape_backslashes(r"{{ '\d' }} \n {% set y = '\n' %}"),
            r"{{ '\\d' }} \n {% set y = '\n' %}"
        );
        assert_eq!(
            render(r"{{ 'abc-123' | regex_replace('(\w+)-(\d+)', '\2-\1') }}"),
            json!("123-abc")
        );
        assert_eq!(render(r"x={{ 'a\nb' }}"), json!(r"x=a\nb"));
        // Bare expressions keep Jinja's escapes, as in ansible-core.
        assert_eq!(eval(r"'a\tb'"), json!("a\tb"));
    }

    #[test]
    fn rewrite_keeps_lines_and_strings() {
        let src = "a\n{{ x.y | default('q.r | default') }}\n{# c.d | default #}{{ 'e' }}";
        let out = rewrite_chains(src);
        assert_eq!(out.lines().count(), src.lines().count());
        assert!(
            out.contains("__fp_chain(x, \"y\") | default('q.r | default')"),
            "{out}"
        );
        assert!(out.contains("{# c.d | default #}"), "{out}");
        assert_eq!(rewrite_code("a[1:] | default([])"), "a[1:] | default([])");
        assert_eq!(rewrite_code("f(a).b | d"), "f(a).b | d");
        assert_eq!(
            rewrite_code("x | ansible.builtin.to_json is ansible.legacy.match('a')"),
            "x | to_json is match('a')"
        );
        assert_eq!(
            rewrite_code("'| ansible.builtin.x' ~ y is not ansible.builtin.defined"),
            "'| ansible.builtin.x' ~ y is not defined"
        );
        assert_eq!(
            render("{{ users | ansible.builtin.first }} {{ x is ansible.builtin.defined }}"),
            json!("alice True")
        );
        assert_eq!(
            rewrite_code("not a.b['c'] is defined"),
            "not __fp_chain(a, \"b\", ('c')) is defined"
        );
    }
}
