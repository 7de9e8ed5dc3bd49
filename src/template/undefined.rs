//! Naming the undefined variable behind an error. minijinja only says "undefined value" and
//! gives a span; users need `user.nmae` and the line, so the span's variable paths are
//! resolved against the context to find the first missing one.
//!
//! Works on the environment and the context it is handed; knows nothing of how the
//! environment was built or where the context's variables come from.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::OnceLock;

use minijinja::{Environment, Error, ErrorKind, Value};
use regex::Regex;

use super::error::{syntax_error, TemplateError};
use super::pyops::raised_message;
use super::rewrite::{mask_strings, CHAIN_FN};

/// Which source an error came from, so undefined names can be looked up in the right place.
pub(super) enum Source<'a> {
    Template(&'a str),
    Expression(&'a str),
}

/// An expression evaluated to undefined without minijinja complaining (it only complains
/// when undefined is used): find out which name it was.
pub(super) fn undefined_result(
    env: &Environment<'_>,
    label: &str,
    code: &str,
    ctx: &Value,
) -> TemplateError {
    let undeclared = env
        .compile_expression(code)
        .map(|e| e.undeclared_variables(true))
        .unwrap_or_default();
    let name = find_undefined_name(env, Some(code), code, &undeclared, ctx)
        .unwrap_or_else(|| code.trim().to_string());
    TemplateError::Undefined {
        name,
        why: None,
        template: label.to_string(),
        line: None,
    }
}

/// The undefined of an `if` without `else` is "silent": it is not an error to use it.
/// minijinja does not expose the difference except through its strict truth check.
pub(super) fn is_silent_undefined(env: &Environment<'_>, value: &Value) -> bool {
    value.is_undefined() && minijinja::filters::bool(&env.empty_state(), value).is_ok()
}

pub(super) fn convert_error(
    env: &Environment<'_>,
    err: &Error,
    label: &str,
    source: Source<'_>,
    ctx: &Value,
) -> TemplateError {
    // Errors inside an `{% include %}` come wrapped; the innermost one has the position.
    let inner = innermost(err);
    // A template string compiled once (`inline`) is named by its own text: not an include.
    let own_text = |name: &str| matches!(source, Source::Template(code) if code == name);
    let (label, included) = match inner.name() {
        Some(name)
            if name != label && name != "<expression>" && name != "<string>" && !own_text(name) =>
        {
            (name.to_string(), true)
        }
        _ => (label.to_string(), false),
    };
    let line = inner.line();
    if inner.kind() == ErrorKind::SyntaxError {
        return syntax_error(inner, &label);
    }
    if let Some(message) = raised_message(err) {
        return TemplateError::Raised {
            message,
            template: label,
            line,
        };
    }
    if let Some(name) = named_undefined(err) {
        return TemplateError::Undefined {
            name,
            why: None,
            template: label,
            line,
        };
    }
    if !is_undefined_error(err) {
        return TemplateError::Render {
            message: describe_error(err),
            template: label,
            line,
        };
    }
    let (text, undeclared) = if included {
        match env.get_template(&label) {
            Ok(t) => (t.source().to_string(), t.undeclared_variables(true)),
            Err(_) => (String::new(), HashSet::new()),
        }
    } else {
        match source {
            Source::Template(code) => (
                code.to_string(),
                env.template_from_str(code)
                    .map(|t| t.undeclared_variables(true))
                    .unwrap_or_default(),
            ),
            Source::Expression(code) => (
                code.to_string(),
                env.compile_expression(code)
                    .map(|e| e.undeclared_variables(true))
                    .unwrap_or_default(),
            ),
        }
    };
    let snippet = inner.range().and_then(|r| text.get(r));
    let name = find_undefined_name(env, snippet, &text, &undeclared, ctx)
        .or_else(|| snippet.map(|s| s.trim().to_string()))
        .unwrap_or_else(|| "<unknown>".to_string());
    TemplateError::Undefined {
        name,
        why: undefined_detail(err),
        template: label,
        line,
    }
}

/// Names the undefined variable behind a strict-undefined error. minijinja's error only
/// carries the span of the failing expression, so the span's variable paths (and then the
/// template's undeclared variables) are resolved against the context to find the first
/// missing one.
fn find_undefined_name(
    env: &Environment<'_>,
    snippet: Option<&str>,
    source: &str,
    undeclared: &HashSet<String>,
    ctx: &Value,
) -> Option<String> {
    let heads: HashSet<&str> = undeclared
        .iter()
        .map(|v| v.split(['.', '[']).next().unwrap_or(v))
        .collect();
    if let Some(snippet) = snippet {
        let paths = find_paths(snippet);
        for path in &paths {
            if heads.contains(path.head.as_str()) {
                if let Some(missing) = first_missing(env, ctx, path) {
                    return Some(missing);
                }
            }
        }
        // A lone path that is not a context variable is a loop or `set` variable: its own
        // text is the best name there is.
        if let [path] = paths.as_slice() {
            if path.text == snippet.trim()
                && !path.segs.is_empty()
                && !heads.contains(path.head.as_str())
            {
                return Some(path.text.clone());
            }
        }
    }
    let masked = mask_strings(source);
    let mut candidates: Vec<(usize, &String)> = undeclared
        .iter()
        .map(|v| (masked.find(v.as_str()).unwrap_or(usize::MAX), v))
        .collect();
    candidates.sort();
    let mut fallback = None;
    for (_, var) in candidates {
        let Some(path) = find_paths(var).into_iter().next() else {
            continue;
        };
        if let Some(missing) = first_missing(env, ctx, &path) {
            if !is_protected(&masked, &path.head) {
                return Some(missing);
            }
            fallback.get_or_insert(missing);
        }
    }
    fallback
}

/// The shortest prefix of `path` that does not resolve in `ctx` (or the globals).
fn first_missing(env: &Environment<'_>, ctx: &Value, path: &VarPath) -> Option<String> {
    let mut cur = ctx.get_attr(&path.head).unwrap_or(Value::UNDEFINED);
    if cur.is_undefined() {
        cur = env
            .globals()
            .find(|(name, _)| *name == path.head)
            .map(|(_, v)| v)
            .unwrap_or(Value::UNDEFINED);
    }
    if cur.is_undefined() {
        return Some(path.head.clone());
    }
    let mut text = path.head.clone();
    for seg in &path.segs {
        let next = match seg {
            Seg::Attr(name) => {
                text.push('.');
                text.push_str(name);
                lookup_attr(&cur, name)
            }
            Seg::Key(key, raw) => {
                text.push_str(raw);
                cur.get_item(&Value::from(key.as_str())).unwrap_or_default()
            }
            Seg::Index(idx, raw) => {
                text.push_str(raw);
                cur.get_item(&Value::from(*idx)).unwrap_or_default()
            }
            Seg::Dynamic => return None,
        };
        if next.is_undefined() {
            return Some(text);
        }
        cur = next;
    }
    None
}

/// `a.b` in Jinja: attribute, or for `a.0` the list index.
fn lookup_attr(cur: &Value, name: &str) -> Value {
    let v = cur.get_attr(name).unwrap_or_default();
    if v.is_undefined() {
        if let Ok(idx) = name.parse::<i64>() {
            return cur.get_item(&Value::from(idx)).unwrap_or_default();
        }
    }
    v
}

/// The deepest minijinja error in a chain that knows where it happened (the one inside an
/// include, rather than the include statement).
fn innermost(err: &Error) -> &Error {
    let mut found = err;
    let mut cur = std::error::Error::source(err);
    while let Some(e) = cur {
        if let Some(e) = e.downcast_ref::<Error>() {
            if e.line().is_some() {
                found = e;
            }
        }
        cur = e.source();
    }
    found
}

fn describe_error(err: &Error) -> String {
    let mut msg = match err.detail() {
        Some(detail) => format!("{}: {detail}", err.kind()),
        None => err.kind().to_string(),
    };
    let mut source = std::error::Error::source(err);
    while let Some(inner) = source {
        let _ = write!(msg, ": {inner}");
        source = inner.source();
    }
    msg
}

/// The detail of an undefined error a filter or lookup raised with one (minijinja's own have
/// none).
fn undefined_detail(err: &Error) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(e) = e.downcast_ref::<Error>() {
            if e.kind() == ErrorKind::UndefinedError {
                if let Some(d) = e.detail() {
                    return Some(d.to_string());
                }
            }
        }
        cur = e.source();
    }
    None
}

/// The variable an undefined error names itself (`NamedUndefined`, a lookup term's template).
fn named_undefined(err: &Error) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(NamedUndefined(name)) = e.downcast_ref::<NamedUndefined>() {
            return Some(name.clone());
        }
        cur = e.source();
    }
    None
}

/// The cause of an undefined error raised by a template rendered inside a function
/// (`consts`): that template's missing variable, which the text around the call does not
/// show.
#[derive(Debug)]
pub(super) struct NamedUndefined(pub(super) String);

impl std::fmt::Display for NamedUndefined {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "'{}' is undefined", self.0)
    }
}

impl std::error::Error for NamedUndefined {}

/// Strict-undefined errors, including the ones minijinja reports as invalid operations on an
/// undefined value (`undef + 1`, `undef.startswith(..)`, `undef | sort`).
fn is_undefined_error(err: &Error) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(e) = e.downcast_ref::<Error>() {
            match e.kind() {
                ErrorKind::UndefinedError => return true,
                ErrorKind::InvalidOperation | ErrorKind::UnknownMethod
                    if e.detail().is_some_and(|d| {
                        d.contains("undefined has no")
                            || d.contains("and undefined")
                            || d.contains("types undefined")
                    }) =>
                {
                    return true
                }
                _ => {}
            }
        }
        cur = e.source();
    }
    false
}

/// Puts the whitespace around a single `{{ expr }}` back around its string result, except
/// Whether every use of `head` in (masked) code is guarded by `default`/`is defined`, in which
/// case it cannot be the variable an undefined error is about.
fn is_protected(masked: &str, head: &str) -> bool {
    let Ok(re) = Regex::new(&format!(
        r#"(?P<pre>^|[^0-9A-Za-z_.\x01'"])(?P<path>{}(?:\.[0-9A-Za-z_]+|\[[^\[\]]*\])*)(?P<post>\s*\|\s*(?:default|d)(?-u:\b)|\s+is\s+(?:not\s+)?(?:defined|undefined)(?-u:\b))?"#,
        regex::escape(head)
    )) else {
        return false;
    };
    let chain_arg = format!("{CHAIN_FN}(");
    let mut seen = false;
    for caps in re.captures_iter(masked) {
        let path = caps.name("path").expect("group exists");
        if masked[path.end()..].starts_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        seen = true;
        let guarded = caps.name("post").is_some() || masked[..path.start()].ends_with(&chain_arg);
        if !guarded {
            return false;
        }
    }
    seen
}

/// One step of a variable path after its head.
#[derive(Debug)]
enum Seg {
    Attr(String),
    Key(String, String),
    Index(i64, String),
    Dynamic,
}

/// A variable path as written in the source (`user.groups[0]`), split into head and steps.
#[derive(Debug)]
struct VarPath {
    text: String,
    head: String,
    segs: Vec<Seg>,
}

fn path_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r#"(?:^|[^0-9A-Za-z_.\x01'"])(?P<path>[A-Za-z_][0-9A-Za-z_]*(?:\.[0-9A-Za-z_]+|\[[^\[\]]*\])*)"#)
            .expect("valid regex")
    })
}

/// Variable paths (`user.name`, `x['k'][0]`) in a piece of code, outside string literals.
/// The first argument of a chain helper is skipped: it is guarded by construction.
fn find_paths(code: &str) -> Vec<VarPath> {
    let masked = mask_strings(code);
    let mut paths = Vec::new();
    for caps in path_re().captures_iter(&masked) {
        let m = caps.name("path").expect("group exists");
        if masked[..m.start()].ends_with(&format!("{CHAIN_FN}(")) {
            continue;
        }
        let text = &code[m.range()];
        let mtext = &masked[m.range()];
        let head_end = mtext.find(['.', '[']).unwrap_or(mtext.len());
        let mut segs = Vec::new();
        let mut i = head_end;
        while i < mtext.len() {
            if mtext.as_bytes()[i] == b'.' {
                let end = mtext[i + 1..]
                    .find(['.', '['])
                    .map_or(mtext.len(), |p| p + i + 1);
                segs.push(Seg::Attr(text[i + 1..end].to_string()));
                i = end;
            } else {
                let end = mtext[i..].find(']').map_or(mtext.len(), |p| p + i);
                let raw = &text[i..(end + 1).min(text.len())];
                let inner = text[i + 1..end].trim();
                let quoted = inner.len() >= 2
                    && (inner.starts_with('\'') && inner.ends_with('\'')
                        || inner.starts_with('"') && inner.ends_with('"'));
                segs.push(if quoted {
                    Seg::Key(inner[1..inner.len() - 1].to_string(), raw.to_string())
                } else if let Ok(idx) = inner.parse::<i64>() {
                    Seg::Index(idx, raw.to_string())
                } else {
                    Seg::Dynamic
                });
                i = end + 1;
            }
        }
        paths.push(VarPath {
            text: text.to_string(),
            head: text[..head_end].to_string(),
            segs,
        });
    }
    paths
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use crate::template::{Templar, TemplateError};

    #[test]
    fn undefined_variables_are_named() {
        let e = render_err("{{ foo }}");
        assert_eq!(e.to_string(), "'foo' is undefined (in \"{{ foo }}\")");
        assert_eq!(undefined_name(e), "foo");
        assert_eq!(undefined_name(render_err("hello {{ foo }}!")), "foo");
        assert_eq!(undefined_name(render_err("hello {{ foo | upper }}")), "foo");
        assert_eq!(undefined_name(render_err("{{ 'a' ~ foo }} x")), "foo");
        assert_eq!(
            undefined_name(render_err("{% for u in foo %}{{ u }}{% endfor %}")),
            "foo"
        );
        assert_eq!(
            undefined_name(render_err("{% if foo %}y{% endif %}")),
            "foo"
        );
        assert_eq!(undefined_name(render_err("{{ count + bar }} x")), "bar");
        assert_eq!(
            undefined_name(render_err("{{ foo.startswith('a') }} x")),
            "foo"
        );
        assert_eq!(undefined_name(render_err("{{ [foo] }}")), "foo");
        let e = render_err("a\n{{ foo | sort }} x");
        assert!(
            matches!(e, TemplateError::Undefined { line: Some(2), .. }),
            "{e:?}"
        );
        assert_eq!(undefined_name(e), "foo");
        assert_eq!(
            undefined_name(render_err("{{ foo | default('x') }} {{ bar }}")),
            "bar"
        );
    }

    #[test]
    fn undefined_attributes_are_named() {
        let e = render_err("name: {{ user.nmae }}");
        assert_eq!(
            e.to_string(),
            "`user.nmae` is undefined (`user` has no attribute 'nmae') (in \"name: {{ user.nmae }}\", line 1)"
        );
        assert_eq!(
            undefined_name(render_err("{{ user['nmae'] }}")),
            "user['nmae']"
        );
        assert_eq!(undefined_name(render_err("{{ foo.bar }}")), "foo");
        assert_eq!(
            undefined_name(render_err("{% for u in users %}{{ u.nmae }}{% endfor %}")),
            "u.nmae"
        );
        assert_eq!(
            undefined_name(render_err("{{ user.groups[3] }}")),
            "user.groups[3]"
        );
    }

    #[test]
    fn undefined_in_expressions_is_named() {
        let t = Templar::new();
        let e = t.eval_bool("foo == 'a'", &vars()).unwrap_err();
        assert_eq!(undefined_name(e), "foo");
        let e = t.eval_bool("x == 'a' and missing", &vars()).unwrap_err();
        assert_eq!(undefined_name(e), "missing");
        let e = t.eval("user.nmae", &vars()).unwrap_err();
        assert!(e.to_string().contains("`user.nmae` is undefined"), "{e}");
        let e = t.eval_bool("nope", &vars()).unwrap_err();
        assert_eq!(e.to_string(), "'nope' is undefined (in \"nope\")");
    }
}
