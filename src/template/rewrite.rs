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
//! filters and tests are `ansible.builtin`'s. Another collection's (`| ns.coll.f(a)`) become
//! calls of the dispatcher (`| __fp_filter("ns.coll.f", a)`, `foreign`), which finds the
//! plugin by name when it runs.
//!
//! Also here: the small scanners of template source the rest of the folder shares (where a
//! `{{ }}` block ends, string literals masked out).

use std::fmt::Write as _;
use std::ops::Range;
use std::sync::OnceLock;

use minijinja::value::Rest;
use minijinja::Value;
use regex::Regex;

use super::foreign::{is_collection_name, FILTER_FN, TEST_FN};
use super::{consts, pyops};

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
            r#"(?P<pre>^|[^0-9A-Za-z_.)\]'"\x01])(?P<path>[A-Za-z_][0-9A-Za-z_]*(?:\.[0-9A-Za-z_]+|\[[^\[\]]*\])+)(?:\s*\|\s*(?:default|d)(?-u:\b)|\s+is\s+(?:not\s+)?(?:defined|undefined)(?-u:\b))"#,
        )
        .expect("valid regex")
    })
}

/// Rewrites chained lookups in every `{{ }}` / `{% %}` block of a template, then Python's
/// operators (`pyops`), then the literals the template changes in place (`mutable`).
pub(super) fn rewrite_chains(src: &str) -> String {
    let consts = consts::rewrite_template(src);
    let out = rewrite_template_chains(consts.as_deref().unwrap_or(src));
    let dates = super::timedelta::makes_dates(&out);
    let has_operator = code_regions(&out)
        .into_iter()
        .any(|r| pyops::has_operator(&mask_strings(&out[r]), dates));
    let out = match has_operator
        .then(|| pyops::rewrite_template(&out))
        .flatten()
    {
        Some(rewritten) => rewritten,
        None => out,
    };
    super::mutable::rewrite_template(&out).unwrap_or(out)
}

/// Whether code (string constants aside) holds an operator `pyops` rewrites.
fn has_python_operator(code: &str) -> bool {
    pyops::has_operator(&mask_strings(code), super::timedelta::makes_dates(code))
}

fn rewrite_template_chains(src: &str) -> String {
    static HINT: OnceLock<Regex> = OnceLock::new();
    let hint = HINT.get_or_init(|| {
        Regex::new(concat!(
            r"default|defined|\|\s*d(?-u:\b)|ansible\.(?:builtin|legacy|_protomatter)\.|tagged_with",
            r"|(?:\||(?-u:\b)is\s|filter\s)\s*(?:not\s+)?[A-Za-z_][0-9A-Za-z_]*\.[A-Za-z_][0-9A-Za-z_]*\.[A-Za-z_]",
        ))
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
    let consts = consts::rewrite_expr(code);
    let out = rewrite_region(consts.as_deref().unwrap_or(code));
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
    let code = &dispatch_collection_names(&mark_tag_tests(&strip_builtin_prefix(code)));
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

/// `x | ansible.builtin.f` → `x | f`, and the same after `is` / `is not` and in
/// `{% filter %}` (also for `ansible._protomatter.`, ansible-core's internal collection, whose
/// `finalize` is ours).
fn strip_builtin_prefix(code: &str) -> String {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(
            r"(?:\||(?-u:\b)is(?:\s+not)?|^\s*[-+]?\s*filter\s)\s*(ansible\.(?:builtin|legacy|_protomatter)\.)[A-Za-z_]",
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

/// `path is tagged_with(name)` → `path is __fp_tagged_at("path", name)`: the test can answer
/// `TrustedAsTemplate` only for a string a variable path names (`jinja_tests::tagged_at`
/// asks the context's `TRUST_ORACLE`), so it is given the path as written. Any other operand
/// (a filter's result, a call's) keeps the plain test, for which nothing is trusted.
fn mark_tag_tests(code: &str) -> String {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(
            r"(?P<path>[A-Za-z_][0-9A-Za-z_]*(?:\s*\.\s*[0-9A-Za-z_]+|\[[^\[\]]*\])*)\s+is(?:\s+not)?\s+(?P<test>tagged_with)\s*\(",
        )
        .expect("valid regex")
    });
    if !code.contains("tagged_with") {
        return code.to_string();
    }
    let masked = mask_strings(code);
    let mut out = String::with_capacity(code.len() + 32);
    let mut last = 0;
    for caps in re.captures_iter(&masked) {
        let path = caps.name("path").expect("group exists");
        let test = caps.name("test").expect("group exists");
        let text = &code[path.range()];
        // What comes before the path must end an operand: not a filter's bar, an attribute's
        // dot, a call or a subscript, nor the middle of a name.
        let before = masked[..path.start()].trim_end();
        let joined =
            before.chars().last().is_some_and(|c| {
                c == '|' || c == '.' || c == ')' || c == ']' || c == '\'' || c == '"'
            }) || masked[..path.start()]
                .chars()
                .last()
                .is_some_and(|c| c.is_alphanumeric() || c == '_');
        if joined || text.contains(['"', '\\', '\n']) {
            continue;
        }
        out.push_str(&code[last..test.start()]);
        let _ = write!(out, "__fp_tagged_at(\"{text}\", ");
        last = caps.get(0).expect("whole match").end();
    }
    out.push_str(&code[last..]);
    out
}

/// `x | ns.coll.f(a)` → `x | __fp_filter("ns.coll.f", a)`, `x is ns.coll.t` →
/// `x is __fp_test("ns.coll.t")`, `x is ns.coll.t y` → `x is __fp_test("ns.coll.t", y)`, and
/// `{% filter ns.coll.f %}`: the dispatcher asks for the plugin when it runs, so no name has to
/// be known when the environment is built. Whitespace is kept, so lines stay.
fn dispatch_collection_names(code: &str) -> String {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(concat!(
            r"(?:(?P<filter>\||^\s*[-+]?\s*filter\s)|(?:^|[^0-9A-Za-z_.])is(?:\s+not)?\s)",
            r"\s*(?P<name>[A-Za-z_][0-9A-Za-z_]*(?:\.[A-Za-z_][0-9A-Za-z_]*){2,})",
        ))
        .expect("valid regex")
    });
    let masked = mask_strings(code);
    let m = masked.as_bytes();
    let mut out = String::with_capacity(code.len() + 32);
    let mut last = 0;
    for caps in re.captures_iter(&masked) {
        let name = caps.name("name").expect("group exists");
        // Inside a test's argument, already rewritten with it.
        if name.start() < last || !is_collection_name(name.as_str()) {
            continue;
        }
        let filter = caps.name("filter").is_some();
        let quoted = format!("\"{}\"", name.as_str());
        let next = skip_space(m, name.end());
        out.push_str(&code[last..name.start()]);
        out.push_str(if filter { FILTER_FN } else { TEST_FN });
        if m.get(next) == Some(&b'(') {
            out.push_str(&code[name.end()..=next]);
            out.push_str(&quoted);
            if m.get(skip_space(m, next + 1)) != Some(&b')') {
                out.push_str(", ");
            }
            last = next + 1;
        } else if !filter && starts_test_argument(&masked[next..]) {
            let end = unary_end(m, next);
            let _ = write!(out, "({quoted},");
            out.push_str(&dispatch_collection_names(&code[name.end()..end]));
            out.push(')');
            last = end;
        } else {
            let _ = write!(out, "({quoted})");
            last = name.end();
        }
    }
    out.push_str(&code[last..]);
    out
}

fn skip_space(m: &[u8], mut i: usize) -> usize {
    while m.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// Whether what follows a test's name is its one argument without parentheses (`x is
/// divisibleby 3`), by minijinja's rule: a name other than `and`, `or`, `else` and `is`, a
/// constant, a sign, a list or a dict.
fn starts_test_argument(rest: &str) -> bool {
    match rest.bytes().next() {
        Some(b'\'' | b'"' | b'+' | b'-' | b'[' | b'{') => true,
        Some(c) if c.is_ascii_digit() => true,
        Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
            let word = rest
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .next()
                .unwrap_or_default();
            !matches!(word, "and" | "or" | "else" | "is")
        }
        _ => false,
    }
}

/// Where the argument starting at `i` ends: signs, then a name, number, string, list or dict,
/// then attributes, subscripts and calls (minijinja's unary expression and its postfixes).
fn unary_end(m: &[u8], mut i: usize) -> usize {
    while matches!(m.get(i), Some(b'+' | b'-')) {
        i = skip_space(m, i + 1);
    }
    let word = |mut j: usize| {
        while m
            .get(j)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        {
            j += 1;
        }
        j
    };
    i = match m.get(i) {
        Some(&q @ (b'\'' | b'"')) => m[i + 1..]
            .iter()
            .position(|&c| c == q)
            .map_or(m.len(), |p| i + p + 2),
        Some(b'[' | b'{' | b'(') => group_end(m, i),
        _ => word(i),
    };
    loop {
        let j = skip_space(m, i);
        match m.get(j) {
            Some(b'.') => {
                let k = skip_space(m, j + 1);
                let e = word(k);
                if e == k {
                    return i;
                }
                i = e;
            }
            Some(b'[' | b'(') => i = group_end(m, j),
            _ => return i,
        }
    }
}

/// The offset after the bracket that closes the one at `i` (string constants masked).
fn group_end(m: &[u8], i: usize) -> usize {
    let mut depth = 0usize;
    for (j, c) in m.iter().enumerate().skip(i) {
        match c {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
    }
    m.len()
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

    #[test]
    fn collection_filters_and_tests_go_through_the_dispatcher() {
        let cases = [
            (
                "x | ns.coll.f('a', k=1) | upper",
                r#"x | __fp_filter("ns.coll.f", 'a', k=1) | upper"#,
            ),
            ("x | ns.coll.f ()", r#"x | __fp_filter ("ns.coll.f")"#),
            ("x|ns.coll.f|length", r#"x|__fp_filter("ns.coll.f")|length"#),
            (
                "x is not ns.coll.t and y is ns.coll.t(1)",
                r#"x is not __fp_test("ns.coll.t") and y is __fp_test("ns.coll.t", 1)"#,
            ),
            // A test's one argument without parentheses, up to its end.
            (
                "x is ns.coll.t -a.b[0] or z",
                r#"x is __fp_test("ns.coll.t", -a.b[0]) or z"#,
            ),
            (
                "x is ns.coll.t [y | ns.coll.f]",
                r#"x is __fp_test("ns.coll.t", [y | __fp_filter("ns.coll.f")])"#,
            ),
            (
                "x is ns.coll.t 'a b'",
                r#"x is __fp_test("ns.coll.t", 'a b')"#,
            ),
            // Left alone: strings, attributes, fixpoint's own (`ansible.builtin`) and names
            // that are no filter or test.
            ("'| ns.coll.f' ~ a.b.c", "'| ns.coll.f' ~ a.b.c"),
            ("this.is.a.b.c", "this.is.a.b.c"),
            ("x | ansible.legacy.upper", "x | upper"),
        ];
        for (code, want) in cases {
            assert_eq!(rewrite_code(code), want, "{code}");
        }
        // Lines are kept, and a `{% filter %}` block's filter is one too.
        assert_eq!(
            rewrite_chains("{% filter ns.coll.f %}a{% endfilter %}\n{{ x\n| ns.coll.g }}"),
            "{% filter __fp_filter(\"ns.coll.f\") %}a{% endfilter %}\n{{ x\n| __fp_filter(\"ns.coll.g\") }}"
        );
        // Without plugins, the name is said missing in ansible-core's words.
        let err = render_err("{{ 1 | ns.coll.f }}").to_string();
        assert!(err.contains("No filter named 'ns.coll.f'."), "{err}");
        let err = render_err("{{ [1] | select('ns.coll.t') | list }}").to_string();
        assert!(err.contains("No test named 'ns.coll.t'."), "{err}");
    }

    #[test]
    fn a_tag_test_of_a_variable_path_is_given_the_path() {
        for (code, want) in [
            (
                "x.y is tagged_with('TrustedAsTemplate')",
                "x.y is __fp_tagged_at(\"x.y\", 'TrustedAsTemplate')",
            ),
            (
                "r['k'][0] is not ansible._protomatter.tagged_with('T')",
                "r['k'][0] is not __fp_tagged_at(\"r['k'][0]\", 'T')",
            ),
            (
                "(a is tagged_with('T'))",
                "(a is __fp_tagged_at(\"a\", 'T'))",
            ),
        ] {
            assert_eq!(rewrite_code(code), want, "{code}");
        }
        // Any other operand: the plain test, which trusts nothing.
        for code in [
            "x | first is tagged_with('T')",
            "f(x) is tagged_with('T')",
            "'a' is tagged_with('T')",
            "x[0].y.z() is tagged_with('T')",
        ] {
            assert!(!rewrite_code(code).contains("__fp_tagged_at"), "{code}");
        }
    }
}
