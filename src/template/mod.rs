//! Jinja2 templating as Ansible users know it (strict undefined, Ansible filters and tests,
//! native values for single-expression strings), built on minijinja.
//!
//! Everything here is self-contained: the rest of fixpoint hands in a context `Value` (a plain
//! map or a lazily resolving `Object`) and gets back `serde_json::Value`s, strings or bools.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine as _;
use minijinja::value::{Kwargs, Rest, ValueKind};
use minijinja::{AutoEscape, Environment, Error, ErrorKind, State, UndefinedBehavior, Value};
use regex::{Regex, RegexBuilder};
use serde_json::Value as Json;
use sha2::Digest as _;

/// Name of the helper that implements Ansible's chained-undefined lookups (see `rewrite_chains`).
const CHAIN_FN: &str = "__fp_chain";
/// Longest template text quoted in an error message before it is cut.
const MAX_LABEL: usize = 80;
/// Guard against self-referencing dynamic objects when converting values.
const MAX_DEPTH: usize = 64;

/// Errors from rendering or evaluating templates. Messages name the variable, the template
/// (file name, or the template text for inline strings) and the line.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("{}{}", undefined_message(name), location(template, *line))]
    Undefined {
        /// The undefined variable (`foo`) or attribute path (`user.nmae`).
        name: String,
        template: String,
        line: Option<usize>,
    },
    #[error("template syntax error: {message}{}", location(template, *line))]
    Syntax {
        message: String,
        template: String,
        line: Option<usize>,
    },
    #[error("template error: {message}{}", location(template, *line))]
    Render {
        message: String,
        template: String,
        line: Option<usize>,
    },
}

fn undefined_message(name: &str) -> String {
    match split_path_tail(name) {
        Some((parent, key, true)) => {
            format!("`{name}` is undefined (`{parent}` has no item `{key}`)")
        }
        Some((parent, attr, false)) => {
            format!("`{name}` is undefined (`{parent}` has no attribute `{attr}`)")
        }
        None => format!("undefined variable `{name}`"),
    }
}

/// Splits `a.b` into (`a`, `b`) and `a['c']` into (`a`, `c`, subscript) so messages can say
/// what is missing where.
fn split_path_tail(name: &str) -> Option<(&str, &str, bool)> {
    if name.ends_with(']') {
        let open = name.rfind('[')?;
        let key = name[open + 1..name.len() - 1].trim();
        let key = key.trim_matches(|c| c == '\'' || c == '"');
        return Some((&name[..open], key, true));
    }
    let dot = name.rfind('.')?;
    Some((&name[..dot], &name[dot + 1..], false))
}

fn location(template: &str, line: Option<usize>) -> String {
    match line {
        Some(line) => format!(" (in {template}, line {line})"),
        None => format!(" (in {template})"),
    }
}

/// How a template is called in error messages: files by name, inline strings by their text.
fn label_for_text(text: &str) -> String {
    let short: String = text.chars().take(MAX_LABEL).collect();
    if short.len() < text.len() {
        format!("{:?}…", short)
    } else {
        format!("{short:?}")
    }
}

/// The Jinja2 engine with Ansible's filters, tests and options. Cheap to clone and share.
#[derive(Clone)]
pub struct Templar {
    env: Arc<Environment<'static>>,
}

impl Default for Templar {
    fn default() -> Self {
        Templar::new()
    }
}

impl std::fmt::Debug for Templar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Templar").finish_non_exhaustive()
    }
}

/// Which source an error came from, so undefined names can be looked up in the right place.
enum Source<'a> {
    Template(&'a str),
    Expression(&'a str),
}

impl Templar {
    pub fn new() -> Templar {
        Templar {
            env: Arc::new(build_env(None)),
        }
    }

    /// Add a loader for `template` module sources / `{% include %}` relative to given dirs
    /// (searched in order).
    pub fn with_search_path(self, dirs: Vec<PathBuf>) -> Templar {
        Templar {
            env: Arc::new(build_env(Some(dirs))),
        }
    }

    /// True when a string contains `{{`, `{%` or `{#`.
    pub fn is_template(s: &str) -> bool {
        fixpoint_modules::params::is_template(s)
    }

    /// Render one string value. A string that is (trimmed) a single `{{ expr }}` yields the
    /// expression's native value (list, dict, number, bool), as Ansible does for
    /// `loop: "{{ users }}"`; anything else renders to a string.
    pub fn render_str(&self, s: &str, ctx: &Value) -> Result<Json, TemplateError> {
        if !Self::is_template(s) {
            return Ok(Json::String(s.to_string()));
        }
        if let Some(expr) = single_expression(s) {
            let code = rewrite_code(expr);
            // Not every `{{ ... }}` is one expression (`{{ a }} and {{ b }}` is not): only
            // when the inner text compiles on its own is it evaluated natively.
            if let Ok(compiled) = self.env.compile_expression_owned(code.clone()) {
                let label = label_for_text(s);
                let value = compiled
                    .eval(ctx)
                    .map_err(|e| self.convert_error(&e, &label, Source::Expression(&code), ctx))?;
                return Ok(match self.finish_native(&value, &label, &code, ctx)? {
                    // Text around the expression is kept for strings (`"{{ data }}\n"` in
                    // `content:`), unless whitespace control removes it.
                    Json::String(text) => Json::String(keep_surrounding(s, &text)),
                    other => other,
                });
            }
        }
        self.render_text(s, &label_for_text(s), ctx)
            .map(Json::String)
    }

    /// Recursively render every string in a JSON value (keys of maps too, when templated).
    pub fn render_value(&self, v: &Json, ctx: &Value) -> Result<Json, TemplateError> {
        match v {
            Json::String(s) => self.render_str(s, ctx),
            Json::Array(items) => items
                .iter()
                .map(|item| self.render_value(item, ctx))
                .collect::<Result<Vec<_>, _>>()
                .map(Json::Array),
            Json::Object(map) => {
                let mut out = serde_json::Map::with_capacity(map.len());
                for (k, v) in map {
                    let key = if Self::is_template(k) {
                        match self.render_str(k, ctx)? {
                            Json::String(s) => s,
                            other => other.to_string(),
                        }
                    } else {
                        k.clone()
                    };
                    out.insert(key, self.render_value(v, ctx)?);
                }
                Ok(Json::Object(out))
            }
            other => Ok(other.clone()),
        }
    }

    /// Evaluate a bare Jinja expression (`when:`, `changed_when:`, `failed_when:`,
    /// `assert.that`) for truthiness. A string that is itself `{{ expr }}` is accepted too.
    pub fn eval_bool(&self, expr: &str, ctx: &Value) -> Result<bool, TemplateError> {
        let value = self.eval_raw(expr, ctx)?;
        // Ansible evaluates the text a templated condition renders to, so `when: "{{ flag }}"`
        // with flag = "false" is false; boolean words are read that way here (other strings
        // keep their truthiness rather than being evaluated as code).
        if Self::is_template(expr) {
            if let Some(s) = value.as_str() {
                let word = s.trim().to_ascii_lowercase();
                if matches!(word.as_str(), "false" | "no" | "off" | "0" | "none" | "") {
                    return Ok(false);
                }
            }
        }
        Ok(value.is_true())
    }

    /// Evaluate a bare expression to a value.
    pub fn eval(&self, expr: &str, ctx: &Value) -> Result<Json, TemplateError> {
        let code = self.expression_code(expr, ctx)?;
        let value = self.eval_code(&code, expr, ctx)?;
        self.finish_native(&value, &label_for_text(expr), &code, ctx)
    }

    /// Render a whole template file's text (the `template` module). A first line of the form
    /// `#jinja2: trim_blocks: False, lstrip_blocks: True` overrides the options, as in Ansible.
    pub fn render_file(
        &self,
        name_for_errors: &str,
        source: &str,
        ctx: &Value,
    ) -> Result<String, TemplateError> {
        let Some((overrides, body)) = parse_jinja2_header(source) else {
            return self.render_text(source, name_for_errors, ctx);
        };
        let mut env = (*self.env).clone();
        for (key, yes) in overrides {
            match key.as_str() {
                "trim_blocks" => env.set_trim_blocks(yes),
                "lstrip_blocks" => env.set_lstrip_blocks(yes),
                "keep_trailing_newline" => env.set_keep_trailing_newline(yes),
                _ => {}
            }
        }
        Templar { env: Arc::new(env) }.render_text(body, name_for_errors, ctx)
    }

    /// Check a template's syntax without rendering (for `fixpoint validate`).
    pub fn check_syntax(&self, s: &str) -> Result<(), TemplateError> {
        let env: &Environment<'_> = &self.env;
        env.template_from_named_str("<check>", s)
            .map(|_| ())
            .map_err(|e| syntax_error(&e, &label_for_text(s)))
    }

    /// Renders template text to a string under the given error label.
    fn render_text(&self, s: &str, label: &str, ctx: &Value) -> Result<String, TemplateError> {
        let code = rewrite_chains(s);
        let env: &Environment<'_> = &self.env;
        let tmpl = env
            .template_from_named_str(label, &code)
            .map_err(|e| syntax_error(&e, label))?;
        tmpl.render(ctx)
            .map_err(|e| self.convert_error(&e, label, Source::Template(&code), ctx))
    }

    /// The expression text behind a `when:`-style string: bare, `{{ expr }}`, or text with
    /// embedded `{{ }}` that renders to an expression (Ansible templates those first).
    fn expression_code(&self, expr: &str, ctx: &Value) -> Result<String, TemplateError> {
        let trimmed = expr.trim();
        if trimmed.is_empty() {
            return Err(TemplateError::Syntax {
                message: "empty expression".into(),
                template: label_for_text(expr),
                line: None,
            });
        }
        if !Self::is_template(trimmed) {
            return Ok(rewrite_code(trimmed));
        }
        if let Some(inner) = single_expression(trimmed) {
            if self.env.compile_expression(inner).is_ok() {
                return Ok(rewrite_code(inner));
            }
        }
        let rendered = self.render_text(trimmed, &label_for_text(expr), ctx)?;
        Ok(rewrite_code(rendered.trim()))
    }

    fn eval_raw(&self, expr: &str, ctx: &Value) -> Result<Value, TemplateError> {
        let code = self.expression_code(expr, ctx)?;
        let value = self.eval_code(&code, expr, ctx)?;
        if self.is_silent_undefined(&value) {
            return Ok(Value::from(()));
        }
        if value.is_undefined() {
            return Err(self.undefined_result(&label_for_text(expr), &code, ctx));
        }
        Ok(value)
    }

    fn eval_code(&self, code: &str, original: &str, ctx: &Value) -> Result<Value, TemplateError> {
        let label = label_for_text(original);
        if closes_block(code) {
            return Err(TemplateError::Syntax {
                message: "unexpected end of block (`}}` or `%}`) in expression".into(),
                template: label,
                line: None,
            });
        }
        let compiled = self
            .env
            .compile_expression_owned(code.to_string())
            .map_err(|e| syntax_error(&e, &label))?;
        compiled
            .eval(ctx)
            .map_err(|e| self.convert_error(&e, &label, Source::Expression(code), ctx))
    }

    /// Converts an evaluated expression to JSON; undefined anywhere in it is an error, as
    /// printing it would be.
    fn finish_native(
        &self,
        value: &Value,
        label: &str,
        code: &str,
        ctx: &Value,
    ) -> Result<Json, TemplateError> {
        if self.is_silent_undefined(value) {
            // `{{ x if x is defined }}` with no `else`: prints as "" in a template too.
            return Ok(Json::String(String::new()));
        }
        if value.is_undefined() {
            return Err(self.undefined_result(label, code, ctx));
        }
        value_to_json(value)
            .map_err(|e| self.convert_error(&e, label, Source::Expression(code), ctx))
    }

    /// An expression evaluated to undefined without minijinja complaining (it only complains
    /// when undefined is used): find out which name it was.
    fn undefined_result(&self, label: &str, code: &str, ctx: &Value) -> TemplateError {
        let undeclared = self
            .env
            .compile_expression(code)
            .map(|e| e.undeclared_variables(true))
            .unwrap_or_default();
        let name = self
            .find_undefined_name(Some(code), code, &undeclared, ctx)
            .unwrap_or_else(|| code.trim().to_string());
        TemplateError::Undefined {
            name,
            template: label.to_string(),
            line: None,
        }
    }

    /// The undefined of an `if` without `else` is "silent": it is not an error to use it.
    /// minijinja does not expose the difference except through its strict truth check.
    fn is_silent_undefined(&self, value: &Value) -> bool {
        value.is_undefined() && minijinja::filters::bool(&self.env.empty_state(), value).is_ok()
    }

    fn convert_error(
        &self,
        err: &Error,
        label: &str,
        source: Source<'_>,
        ctx: &Value,
    ) -> TemplateError {
        // Errors inside an `{% include %}` come wrapped; the innermost one has the position.
        let inner = innermost(err);
        let (label, included) = match inner.name() {
            Some(name) if name != label && name != "<expression>" && name != "<string>" => {
                (name.to_string(), true)
            }
            _ => (label.to_string(), false),
        };
        let line = inner.line();
        if inner.kind() == ErrorKind::SyntaxError {
            return syntax_error(inner, &label);
        }
        if !is_undefined_error(err) {
            return TemplateError::Render {
                message: describe_error(err),
                template: label,
                line,
            };
        }
        let env: &Environment<'_> = &self.env;
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
        let name = self
            .find_undefined_name(snippet, &text, &undeclared, ctx)
            .or_else(|| snippet.map(|s| s.trim().to_string()))
            .unwrap_or_else(|| "<unknown>".to_string());
        TemplateError::Undefined {
            name,
            template: label,
            line,
        }
    }

    /// Names the undefined variable behind a strict-undefined error. minijinja's error only
    /// carries the span of the failing expression, so the span's variable paths (and then the
    /// template's undeclared variables) are resolved against the context to find the first
    /// missing one.
    fn find_undefined_name(
        &self,
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
                    if let Some(missing) = self.first_missing(ctx, path) {
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
            if let Some(missing) = self.first_missing(ctx, &path) {
                if !is_protected(&masked, &path.head) {
                    return Some(missing);
                }
                fallback.get_or_insert(missing);
            }
        }
        fallback
    }

    /// The shortest prefix of `path` that does not resolve in `ctx` (or the globals).
    fn first_missing(&self, ctx: &Value, path: &VarPath) -> Option<String> {
        let mut cur = ctx.get_attr(&path.head).unwrap_or(Value::UNDEFINED);
        if cur.is_undefined() {
            cur = self
                .env
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

fn syntax_error(err: &Error, label: &str) -> TemplateError {
    TemplateError::Syntax {
        message: err.detail().unwrap_or("invalid syntax").to_string(),
        template: label.to_string(),
        line: err.line(),
    }
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
/// on a side where whitespace control (`{{-`, `-}}`) strips it.
fn keep_surrounding(s: &str, text: &str) -> String {
    let t = s.trim();
    let lead = if t.starts_with("{{-") {
        ""
    } else {
        &s[..s.len() - s.trim_start().len()]
    };
    let trail = if t.ends_with("-}}") {
        ""
    } else {
        &s[s.trim_end().len()..]
    };
    format!("{lead}{text}{trail}")
}

/// The inner text of a string that is, trimmed, exactly one `{{ ... }}` (whitespace-control
/// markers dropped); whether it is really one expression is for the parser to decide.
fn single_expression(s: &str) -> Option<&str> {
    let t = s.trim();
    if !t.starts_with("{{") || block_end(t.as_bytes(), 2, b'}')? + 2 != t.len() {
        return None;
    }
    let inner = &t[2..t.len() - 2];
    let inner = inner.strip_prefix(['-', '+']).unwrap_or(inner);
    let inner = inner.strip_suffix(['-', '+']).unwrap_or(inner);
    (!inner.trim().is_empty()).then_some(inner)
}

/// Parses Ansible's `#jinja2:` override header; returns the options and the remaining text.
fn parse_jinja2_header(source: &str) -> Option<(Vec<(String, bool)>, &str)> {
    let rest = source.strip_prefix("#jinja2:")?;
    let (line, body) = rest.split_once('\n').unwrap_or((rest, ""));
    let opts = line
        .split(',')
        .filter_map(|kv| {
            let (k, v) = kv.split_once(':')?;
            let v = v.trim().trim_matches(|c| c == '"' || c == '\'');
            Some((
                k.trim().to_string(),
                matches!(v.to_ascii_lowercase().as_str(), "true" | "yes" | "1"),
            ))
        })
        .collect();
    Some((opts, body))
}

fn build_env(search_path: Option<Vec<PathBuf>>) -> Environment<'static> {
    let mut env = Environment::new();
    // Strict: printing, iterating, comparing or testing the truth of an undefined value is an
    // error (Ansible's StrictUndefined), while `default`, `is defined` and `is undefined` still
    // see undefined values. SemiStrict would let `when: typo` silently be false.
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    // Spans and template source on errors, needed to name undefined variables.
    env.set_debug(true);
    // Ansible's template module defaults: trim_blocks yes, lstrip_blocks no, newline kept.
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(false);
    env.set_keep_trailing_newline(true);
    // Ansible never HTML-escapes, whatever the file extension.
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_formatter(|out, _state, value| {
        let mut s = String::new();
        py_str(value, &mut s, 0)?;
        out.write_str(&s)
            .map_err(|_| Error::new(ErrorKind::WriteFailure, "failed to write output"))
    });
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    let dirs = Arc::new(search_path.clone().unwrap_or_default());
    if search_path.is_some() {
        let dirs = dirs.clone();
        env.set_loader(move |name| load_from_dirs(&dirs, name));
    }
    let lookup_dirs = dirs.clone();
    env.add_function("lookup", move |state: &State, args: Rest<Value>| {
        let (values, wantlist) = run_lookup(state, &lookup_dirs, &args)?;
        Ok(if wantlist {
            Value::from(values)
        } else if values.len() == 1 {
            values.into_iter().next().unwrap_or_default()
        } else {
            let strings: Result<Vec<String>, Error> = values.iter().map(py_string).collect();
            Value::from(strings?.join(","))
        })
    });
    for name in ["query", "q"] {
        let dirs = dirs.clone();
        env.add_function(name, move |state: &State, args: Rest<Value>| {
            run_lookup(state, &dirs, &args).map(|(values, _)| Value::from(values))
        });
    }
    env.add_function(CHAIN_FN, chain_lookup);
    add_filters(&mut env);
    add_tests(&mut env);
    env
}

/// The lookups that need nothing but the controller: `env`, `file` (searched like templates,
/// then relative to the working directory) and `vars`. Returns the values and `wantlist`.
fn run_lookup(
    state: &State,
    dirs: &[PathBuf],
    args: &[Value],
) -> Result<(Vec<Value>, bool), Error> {
    let (pos, kwargs) = split_kwargs(args)?;
    let wantlist: Option<bool> = kwargs.get("wantlist")?;
    let default: Option<Value> = kwargs.get("default")?;
    let Some((plugin, terms)) = pos.split_first() else {
        return Err(op_err("lookup needs a plugin name"));
    };
    let plugin = plugin.as_str().unwrap_or_default().to_string();
    // Where relative names are found: the task's `ansible_search_path` (its role, then the
    // playbook's directory), each with `files/` or `templates/` first, then the given dirs.
    let mut search: Vec<PathBuf> = match state.lookup("ansible_search_path") {
        Some(v) if !v.is_undefined() => v
            .try_iter()
            .map(|it| it.filter_map(|d| d.as_str().map(PathBuf::from)).collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    search.extend(dirs.iter().cloned());
    let find = |sub: &str, term: &str| -> Option<PathBuf> {
        let p = Path::new(term);
        if p.is_absolute() {
            return p.exists().then(|| p.to_path_buf());
        }
        search
            .iter()
            .flat_map(|d| [d.join(sub).join(term), d.join(term)])
            .chain(std::iter::once(PathBuf::from(term)))
            .find(|c| c.exists())
    };
    if plugin == "first_found" {
        let found = first_found(terms, &kwargs, &find)?;
        kwargs.assert_all_used()?;
        return match (found, &default) {
            (Some(p), _) => Ok((vec![Value::from(p.display().to_string())], false)),
            (None, Some(d)) => Ok((vec![d.clone()], false)),
            (None, None) if kwargs_skip(&kwargs) => Ok((Vec::new(), true)),
            (None, None) => Err(op_err("lookup('first_found'): none of the files was found")),
        };
    }
    let _ = kwargs.get::<Option<bool>>("skip");
    let mut out = Vec::new();
    for term in terms {
        let term = py_string(defined(term)?)?;
        out.push(match plugin.as_str() {
            "template" => {
                let path = find("templates", &term).ok_or_else(|| {
                    op_err(format!("lookup('template'): {term} not found"))
                })?;
                let source = std::fs::read_to_string(&path).map_err(|e| {
                    op_err(format!(
                        "lookup('template'): cannot read {}: {e}",
                        path.display()
                    ))
                })?;
                // The template sees the variables of the expression that looks it up.
                let mut vars = std::collections::BTreeMap::new();
                for name in state.known_variables() {
                    if let Some(v) = state.lookup(&name) {
                        vars.insert(name.to_string(), v);
                    }
                }
                let code = rewrite_chains(&source);
                let rendered = state
                    .env()
                    .render_named_str(&path.display().to_string(), &code, Value::from(vars))?;
                Value::from(rendered)
            }
            "fileglob" => {
                for f in fileglob(&term, &search) {
                    out.push(Value::from(f.display().to_string()));
                }
                continue;
            }
            "lines" => {
                let o = std::process::Command::new("sh")
                    .arg("-c")
                    .arg(&term)
                    .stdin(std::process::Stdio::null())
                    .output()
                    .map_err(|e| op_err(format!("lookup('lines'): cannot run `{term}`: {e}")))?;
                if !o.status.success() {
                    return Err(op_err(format!(
                        "lookup('lines'): `{term}` failed ({}): {}",
                        o.status,
                        String::from_utf8_lossy(&o.stderr).trim()
                    )));
                }
                for l in String::from_utf8_lossy(&o.stdout).lines() {
                    out.push(Value::from(l.to_string()));
                }
                continue;
            }
            "env" => std::env::var(&term).map_or_else(
                |_| default.clone().unwrap_or_else(|| Value::from("")),
                Value::from,
            ),
            "file" => {
                let path = find("files", &term)
                    .filter(|p| p.is_file())
                    .unwrap_or_else(|| PathBuf::from(&term));
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    op_err(format!(
                        "lookup('file'): cannot read {}: {e}",
                        path.display()
                    ))
                })?;
                // Ansible strips the trailing newline (rstrip=True).
                Value::from(text.trim_end_matches(['\n', '\r']).to_string())
            }
            "vars" => match state.lookup(&term) {
                Some(v) if !v.is_undefined() => v,
                _ => match &default {
                    Some(d) => d.clone(),
                    None => {
                        return Err(Error::new(
                            ErrorKind::UndefinedError,
                            format!("lookup('vars'): no variable `{term}`"),
                        ))
                    }
                },
            },
            other => {
                return Err(op_err(format!(
                    "lookup plugin `{other}` is not supported (env, file, template, vars, first_found, fileglob and lines are)"
                )))
            }
        });
    }
    kwargs.assert_all_used()?;
    Ok((out, wantlist.unwrap_or(false)))
}

/// `first_found`: terms are names or lists of names, or mappings with `files` and `paths`.
fn first_found(
    terms: &[Value],
    kwargs: &Kwargs,
    find: &dyn Fn(&str, &str) -> Option<PathBuf>,
) -> Result<Option<PathBuf>, Error> {
    let mut files: Vec<String> = Vec::new();
    let mut paths: Vec<String> = Vec::new();
    let strings = |v: &Value| -> Result<Vec<String>, Error> {
        if let Some(s) = v.as_str() {
            return Ok(s.split([',', ';']).map(|x| x.trim().to_string()).collect());
        }
        match v.try_iter() {
            Ok(it) => it.map(|x| py_string(&x)).collect(),
            Err(_) => Ok(vec![py_string(v)?]),
        }
    };
    let mut add = |v: &Value| -> Result<(), Error> {
        if v.kind() == minijinja::value::ValueKind::Map {
            if let Ok(f) = v.get_attr("files") {
                if !f.is_undefined() {
                    files.extend(strings(&f)?);
                }
            }
            if let Ok(p) = v.get_attr("paths") {
                if !p.is_undefined() {
                    paths.extend(strings(&p)?);
                }
            }
            return Ok(());
        }
        match v.try_iter() {
            Ok(it) if v.as_str().is_none() => {
                for x in it {
                    files.push(py_string(&x)?);
                }
            }
            _ => files.push(py_string(v)?),
        }
        Ok(())
    };
    for t in terms {
        add(defined(t)?)?;
    }
    if let Some(f) = kwargs.get::<Option<Value>>("files")? {
        files.extend(strings(&f)?);
    }
    if let Some(p) = kwargs.get::<Option<Value>>("paths")? {
        paths.extend(strings(&p)?);
    }
    for f in &files {
        if paths.is_empty() {
            if let Some(p) = find("files", f) {
                return Ok(Some(p));
            }
        }
        for dir in &paths {
            let joined = Path::new(dir).join(f);
            if let Some(p) = find("files", &joined.display().to_string()) {
                return Ok(Some(p));
            }
        }
    }
    Ok(None)
}

fn kwargs_skip(kwargs: &Kwargs) -> bool {
    kwargs
        .get::<Option<bool>>("skip")
        .ok()
        .flatten()
        .unwrap_or(false)
}

/// `fileglob`: files (not directories) matching a `*`/`?` pattern in its last component;
/// a relative pattern is looked for in each search directory's `files/`, then the directory.
pub fn fileglob(pattern: &str, search: &[PathBuf]) -> Vec<PathBuf> {
    let p = Path::new(pattern);
    let (dir_part, name_part) = match (p.parent(), p.file_name()) {
        (Some(d), Some(n)) => (d.to_path_buf(), n.to_string_lossy().into_owned()),
        _ => return Vec::new(),
    };
    let re = regex::Regex::new(&format!(
        "^{}$",
        regex::escape(&name_part)
            .replace("\\*", ".*")
            .replace("\\?", ".")
    ))
    .expect("escaped glob");
    let dirs: Vec<PathBuf> = if p.is_absolute() {
        vec![dir_part]
    } else {
        search
            .iter()
            .flat_map(|d| [d.join("files").join(&dir_part), d.join(&dir_part)])
            .collect()
    };
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut found: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|f| {
                f.is_file() && re.is_match(&f.file_name().unwrap_or_default().to_string_lossy())
            })
            .collect();
        if !found.is_empty() {
            found.sort();
            return found;
        }
    }
    Vec::new()
}

fn load_from_dirs(dirs: &[PathBuf], name: &str) -> Result<Option<String>, Error> {
    for dir in dirs {
        let path = dir.join(name);
        if path.is_file() {
            return std::fs::read_to_string(&path).map(Some).map_err(|e| {
                Error::new(
                    ErrorKind::InvalidOperation,
                    format!("cannot read template {}: {e}", path.display()),
                )
            });
        }
    }
    Ok(None)
}

// ---------------------------------------------------------------------------------------------
// Chained undefined lookups.
//
// Ansible's undefined swallows attribute access (`item.opts.mode | default(omit)` works when
// `item.opts` is missing), but minijinja's strict mode errors on any lookup through an undefined
// value. Paths that end in `| default`/`| d` or `is [not] defined/undefined` are therefore
// rewritten to `__fp_chain(item, "opts", "mode")`, which yields undefined instead of failing.
// The rewrite keeps every newline, so line numbers in errors stay right.
// ---------------------------------------------------------------------------------------------

fn chain_lookup(base: &Value, keys: Rest<Value>) -> Value {
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

/// Rewrites chained lookups in every `{{ }}` / `{% %}` block of a template.
fn rewrite_chains(src: &str) -> String {
    static HINT: OnceLock<Regex> = OnceLock::new();
    let hint = HINT.get_or_init(|| Regex::new(r"default|defined|\|\s*d\b").expect("valid regex"));
    if !hint.is_match(src) {
        return src.to_string();
    }
    let mut out = String::with_capacity(src.len());
    let mut last = 0;
    for region in code_regions(src) {
        out.push_str(&src[last..region.start]);
        out.push_str(&rewrite_code(&src[region.clone()]));
        last = region.end;
    }
    out.push_str(&src[last..]);
    out
}

/// Rewrites chained lookups in one piece of expression code.
fn rewrite_code(code: &str) -> String {
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
fn block_end(b: &[u8], start: usize, close: u8) -> Option<usize> {
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
fn closes_block(code: &str) -> bool {
    block_end(code.as_bytes(), 0, b'}').is_some() || block_end(code.as_bytes(), 0, b'%').is_some()
}

fn raw_end_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"\{%[-+]?\s*endraw\s*[-+]?%\}").expect("valid regex"))
}

/// Replaces string-literal contents with `\x01` bytes (same byte length), so that regexes
/// over code never match inside strings while offsets still line up with the original.
fn mask_strings(code: &str) -> String {
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

/// Whether every use of `head` in (masked) code is guarded by `default`/`is defined`, in which
/// case it cannot be the variable an undefined error is about.
fn is_protected(masked: &str, head: &str) -> bool {
    let Ok(re) = Regex::new(&format!(
        r#"(?P<pre>^|[^\w.\x01'"])(?P<path>{}(?:\.\w+|\[[^\[\]]*\])*)(?P<post>\s*\|\s*(?:default|d)\b|\s+is\s+(?:not\s+)?(?:defined|undefined)\b)?"#,
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

#[derive(Debug)]
enum Seg {
    Attr(String),
    Key(String, String),
    Index(i64, String),
    Dynamic,
}

#[derive(Debug)]
struct VarPath {
    text: String,
    head: String,
    segs: Vec<Seg>,
}

fn path_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r#"(?:^|[^\w.\x01'"])(?P<path>[A-Za-z_]\w*(?:\.\w+|\[[^\[\]]*\])*)"#)
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

// ---------------------------------------------------------------------------------------------
// Value conversion and Python-style printing.
// ---------------------------------------------------------------------------------------------

/// Converts a template value to JSON; undefined values anywhere are errors.
fn value_to_json(v: &Value) -> Result<Json, Error> {
    value_to_json_depth(v, 0)
}

fn value_to_json_depth(v: &Value, depth: usize) -> Result<Json, Error> {
    if depth > MAX_DEPTH {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "value is nested too deeply",
        ));
    }
    Ok(match v.kind() {
        ValueKind::Undefined => return Err(Error::from(ErrorKind::UndefinedError)),
        ValueKind::None => Json::Null,
        ValueKind::Bool => Json::Bool(v.is_true()),
        ValueKind::Number => serde_json::to_value(v).unwrap_or_else(|_| {
            v.to_string()
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map_or(Json::Null, Json::Number)
        }),
        ValueKind::String => Json::String(v.as_str().unwrap_or_default().to_string()),
        ValueKind::Bytes => {
            Json::String(String::from_utf8_lossy(v.as_bytes().unwrap_or_default()).into_owned())
        }
        ValueKind::Seq | ValueKind::Iterable => Json::Array(
            v.try_iter()?
                .map(|item| value_to_json_depth(&item, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        ValueKind::Map => {
            let mut map = serde_json::Map::new();
            for key in v.try_iter()? {
                let item = v.get_item(&key)?;
                let key = match key.as_str() {
                    Some(s) => s.to_string(),
                    None => key.to_string(),
                };
                map.insert(key, value_to_json_depth(&item, depth + 1)?);
            }
            Json::Object(map)
        }
        ValueKind::Invalid => return Err(op_err(format!("invalid value: {v}"))),
        _ => Json::String(v.to_string()),
    })
}

/// Prints a value the way Jinja2 under Python does: `True`, `None`, `['a', 1]`, `{'k': 'v'}`.
fn py_str(v: &Value, out: &mut String, depth: usize) -> Result<(), Error> {
    match v.kind() {
        // Top-level silent undefined (`{{ x if false }}`) prints nothing; strict undefined
        // never reaches the formatter.
        ValueKind::Undefined if depth == 0 => Ok(()),
        ValueKind::String if depth == 0 => {
            out.push_str(v.as_str().unwrap_or_default());
            Ok(())
        }
        _ => py_repr(v, out, depth),
    }
}

fn py_repr(v: &Value, out: &mut String, depth: usize) -> Result<(), Error> {
    if depth > MAX_DEPTH {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "value is nested too deeply",
        ));
    }
    match v.kind() {
        ValueKind::Undefined => return Err(Error::from(ErrorKind::UndefinedError)),
        ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if v.is_true() { "True" } else { "False" }),
        ValueKind::String => py_quote(v.as_str().unwrap_or_default(), out),
        ValueKind::Seq | ValueKind::Iterable => {
            out.push('[');
            for (i, item) in v.try_iter()?.enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_repr(&item, out, depth + 1)?;
            }
            out.push(']');
        }
        ValueKind::Map => {
            out.push('{');
            for (i, key) in v.try_iter()?.enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let item = v.get_item(&key)?;
                py_repr(&key, out, depth + 1)?;
                out.push_str(": ");
                py_repr(&item, out, depth + 1)?;
            }
            out.push('}');
        }
        _ => {
            let _ = write!(out, "{v}");
        }
    }
    Ok(())
}

/// Python's `repr()` of a string.
fn py_quote(s: &str, out: &mut String) {
    let q = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(q);
}

/// The string form of a value as Python's `str()` gives it.
fn py_string(v: &Value) -> Result<String, Error> {
    let mut s = String::new();
    py_str(v, &mut s, 0)?;
    Ok(s)
}

/// Rejects undefined input in filters that take `&Value` (minijinja only checks typed args).
fn defined(v: &Value) -> Result<&Value, Error> {
    if v.is_undefined() {
        Err(Error::from(ErrorKind::UndefinedError))
    } else {
        Ok(v)
    }
}

fn op_err(msg: impl Into<std::borrow::Cow<'static, str>>) -> Error {
    Error::new(ErrorKind::InvalidOperation, msg)
}

// ---------------------------------------------------------------------------------------------
// Filters.
// ---------------------------------------------------------------------------------------------

fn add_filters(env: &mut Environment<'static>) {
    // Builtins kept as they are: default/d, lower, upper, trim, join, length/count, unique,
    // sort, first, last, min, max, sum, map, select, reject, selectattr, rejectattr, split,
    // replace. Those below are missing or differ from Ansible's.
    env.add_filter("bool", filter_bool);
    env.add_filter("int", filter_int);
    env.add_filter("float", filter_float);
    env.add_filter("string", filter_string);
    env.add_filter("to_json", filter_to_json);
    env.add_filter("to_nice_json", filter_to_nice_json);
    env.add_filter("from_json", filter_from_json);
    env.add_filter("to_yaml", filter_to_yaml);
    env.add_filter("to_nice_yaml", filter_to_nice_yaml);
    env.add_filter("from_yaml", filter_from_yaml);
    env.add_filter("regex_replace", filter_regex_replace);
    env.add_filter("regex_search", filter_regex_search);
    env.add_filter("regex_findall", filter_regex_findall);
    env.add_filter("regex_escape", filter_regex_escape);
    env.add_filter("basename", filter_basename);
    env.add_filter("dirname", filter_dirname);
    env.add_filter("splitext", filter_splitext);
    env.add_filter("quote", filter_quote);
    env.add_filter("b64encode", filter_b64encode);
    env.add_filter("b64decode", filter_b64decode);
    env.add_filter("hash", filter_hash);
    env.add_filter("dict2items", filter_dict2items);
    env.add_filter("items2dict", filter_items2dict);
    env.add_filter("combine", filter_combine);
    env.add_filter("mandatory", filter_mandatory);
    env.add_filter("ternary", filter_ternary);
    env.add_filter("flatten", filter_flatten);
    env.add_filter("difference", filter_difference);
    env.add_filter("intersect", filter_intersect);
    env.add_filter("union", filter_union);
    env.add_filter("symmetric_difference", filter_symmetric_difference);
    env.add_filter("extract", filter_extract);
    env.add_filter("type_debug", filter_type_debug);
}

/// Ansible's `bool`: yes/on/1/true (any case) are true, other strings false.
fn filter_bool(value: &Value) -> Result<Value, Error> {
    Ok(match defined(value)?.kind() {
        ValueKind::None => Value::from(()),
        ValueKind::Bool => value.clone(),
        ValueKind::String => Value::from(matches!(
            value
                .as_str()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
                .as_str(),
            "yes" | "on" | "1" | "true"
        )),
        ValueKind::Number => Value::from(value.as_i64() == Some(1)),
        _ => Value::from(false),
    })
}

/// Jinja2's `int(default=0, base=10)`: unparseable input gives the default, not an error.
fn filter_int(value: &Value, args: Rest<Value>) -> Result<Value, Error> {
    let (pos, kwargs) = split_kwargs(&args)?;
    let kw_default: Option<Value> = kwargs.get("default")?;
    let kw_base: Option<u32> = kwargs.get("base")?;
    kwargs.assert_all_used()?;
    let default = pos
        .first()
        .cloned()
        .or(kw_default)
        .unwrap_or_else(|| Value::from(0));
    let base = match pos.get(1) {
        Some(b) => u32::try_from(b.clone())?,
        None => kw_base.unwrap_or(10),
    };
    if !(2..=36).contains(&base) {
        return Err(op_err(format!("int: invalid base {base}")));
    }
    Ok(match defined(value)?.kind() {
        ValueKind::Bool => Value::from(value.is_true() as i64),
        ValueKind::Number => match value.as_i64() {
            Some(i) => Value::from(i),
            None => f64::try_from(value.clone())
                .ok()
                .map_or(default, |f| Value::from(f.trunc() as i64)),
        },
        ValueKind::String => {
            let s = value.as_str().unwrap_or_default().trim().replace('_', "");
            let (neg, digits) = match s.strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, s.strip_prefix('+').unwrap_or(&s)),
            };
            let lower = digits.to_ascii_lowercase();
            let digits = match base {
                16 => lower.strip_prefix("0x").unwrap_or(&lower),
                8 => lower.strip_prefix("0o").unwrap_or(&lower),
                2 => lower.strip_prefix("0b").unwrap_or(&lower),
                _ => &lower,
            };
            match i64::from_str_radix(digits, base) {
                Ok(i) => Value::from(if neg { -i } else { i }),
                Err(_) => s
                    .parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite())
                    .map_or(default, |f| Value::from(f.trunc() as i64)),
            }
        }
        _ => default,
    })
}

/// Jinja2's `float(default=0.0)`.
fn filter_float(value: &Value, args: Rest<Value>) -> Result<Value, Error> {
    let (pos, kwargs) = split_kwargs(&args)?;
    let kw_default: Option<Value> = kwargs.get("default")?;
    kwargs.assert_all_used()?;
    let default = pos
        .first()
        .cloned()
        .or(kw_default)
        .unwrap_or_else(|| Value::from(0.0));
    Ok(match defined(value)?.kind() {
        ValueKind::Bool => Value::from(if value.is_true() { 1.0 } else { 0.0 }),
        ValueKind::Number => f64::try_from(value.clone()).map_or(default, Value::from),
        ValueKind::String => value
            .as_str()
            .unwrap_or_default()
            .trim()
            .parse::<f64>()
            .map_or(default, Value::from),
        _ => default,
    })
}

/// Python's `str()`: `True`, `None`, `['a']`.
fn filter_string(value: &Value) -> Result<Value, Error> {
    py_string(defined(value)?).map(Value::from)
}

fn filter_to_json(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    let json = value_to_json(defined(value)?)?;
    Ok(Value::from(py_json(
        &json,
        indent,
        sort_keys.unwrap_or(false),
    )))
}

/// Ansible's `to_nice_json`: indent 4, keys sorted.
fn filter_to_nice_json(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    let json = value_to_json(defined(value)?)?;
    Ok(Value::from(py_json(
        &json,
        Some(indent.unwrap_or(4)),
        sort_keys.unwrap_or(true),
    )))
}

/// JSON as Python's `json.dumps` writes it: `", "`/`": "` separators, non-ASCII escaped.
fn py_json(v: &Json, indent: Option<usize>, sort_keys: bool) -> String {
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

fn filter_from_json(value: &str) -> Result<Value, Error> {
    serde_json::from_str::<Json>(value)
        .map(|j| Value::from_serialize(&j))
        .map_err(|e| op_err(format!("from_json: invalid JSON: {e}")))
}

fn filter_from_yaml(value: &str) -> Result<Value, Error> {
    serde_yaml::from_str::<serde_yaml::Value>(value)
        .map(|y| Value::from_serialize(&y))
        .map_err(|e| op_err(format!("from_yaml: invalid YAML: {e}")))
}

/// Ansible's `to_yaml`: PyYAML's default style (collections of scalars inline), keys sorted.
fn filter_to_yaml(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    kwargs.assert_all_used()?;
    let json = value_to_json(defined(value)?)?;
    Ok(Value::from(yaml_dump(
        &json,
        indent.unwrap_or(2).max(2),
        true,
    )))
}

/// Ansible's `to_nice_yaml`: block style, indent 4, keys sorted.
fn filter_to_nice_yaml(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    kwargs.assert_all_used()?;
    let json = value_to_json(defined(value)?)?;
    Ok(Value::from(yaml_dump(
        &json,
        indent.unwrap_or(4).max(2),
        false,
    )))
}

/// A small YAML emitter mimicking PyYAML's layout (`-   item` with indent 4, sequences not
/// indented under their key), which serde_yaml cannot be configured to produce.
fn yaml_dump(v: &Json, indent: usize, flow_leaves: bool) -> String {
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

fn is_leaf(v: &Json) -> bool {
    match v {
        Json::Array(a) => a
            .iter()
            .all(|x| !matches!(x, Json::Array(_) | Json::Object(_))),
        Json::Object(m) => m
            .values()
            .all(|x| !matches!(x, Json::Array(_) | Json::Object(_))),
        _ => true,
    }
}

/// Whether a value is written on the same line as its key or dash.
fn yaml_is_inline(v: &Json, flow_leaves: bool) -> bool {
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
        out.extend(std::iter::repeat_n(' ', indent - 1));
        match v {
            _ if yaml_is_inline(v, fl) => {
                out.push_str(&yaml_inline(v, false));
                out.push('\n');
            }
            Json::Object(inner) => yaml_map(inner, col + indent, true, indent, fl, out),
            Json::Array(items) => yaml_seq(items, col + indent, true, indent, fl, out),
            _ => unreachable!("scalars are inline"),
        }
    }
}

fn yaml_inline(v: &Json, in_flow: bool) -> String {
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
    let looks_typed = matches!(
        s.to_ascii_lowercase().as_str(),
        "y" | "n" | "yes" | "no" | "on" | "off" | "true" | "false" | "null" | "~"
    ) || (s.contains(|c: char| c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_digit() || "._+-:eE".contains(c)));
    let emitted = serde_yaml::to_string(s).unwrap_or_default();
    let emitted = emitted.trim_end_matches('\n');
    if s.contains('\n') || emitted.contains('\n') || s.chars().any(|c| c.is_control()) {
        return Json::String(s.to_string()).to_string();
    }
    let plain = emitted == s;
    if plain && (looks_typed || (in_flow && s.contains([',', '[', ']', '{', '}']))) {
        return single();
    }
    emitted.to_string()
}

/// Regexes are compiled once per pattern and flags; templates apply them in loops.
fn cached_regex(pattern: &str, ignorecase: bool, multiline: bool) -> Result<Regex, Error> {
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

fn regex_flags(kwargs: &Kwargs) -> Result<(bool, bool), Error> {
    let ignorecase: Option<bool> = kwargs.get("ignorecase")?;
    let multiline: Option<bool> = kwargs.get("multiline")?;
    Ok((ignorecase.unwrap_or(false), multiline.unwrap_or(false)))
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

fn filter_regex_replace(
    value: &Value,
    pattern: Option<String>,
    replacement: Option<String>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let (ignorecase, multiline) = regex_flags(&kwargs)?;
    let count: Option<usize> = kwargs.get("count")?;
    kwargs.assert_all_used()?;
    let text = py_string(defined(value)?)?;
    let re = cached_regex(&pattern.unwrap_or_default(), ignorecase, multiline)?;
    let repl = python_replacement(&replacement.unwrap_or_default());
    Ok(Value::from(
        re.replacen(&text, count.unwrap_or(0), repl.as_str())
            .into_owned(),
    ))
}

/// Ansible's `regex_search(pattern, '\\1', '\\g<name>', ...)`: the match, the listed groups,
/// or none when nothing matches.
fn filter_regex_search(value: &Value, pattern: String, args: Rest<Value>) -> Result<Value, Error> {
    let (groups, kwargs) = split_kwargs(&args)?;
    let (ignorecase, multiline) = regex_flags(&kwargs)?;
    kwargs.assert_all_used()?;
    let text = py_string(defined(value)?)?;
    let re = cached_regex(&pattern, ignorecase, multiline)?;
    let Some(caps) = re.captures(&text) else {
        return Ok(Value::from(()));
    };
    if groups.is_empty() {
        return Ok(Value::from(caps.get(0).map_or("", |m| m.as_str())));
    }
    let mut out = Vec::new();
    for g in groups {
        let spec = g.as_str().unwrap_or_default();
        let m = if let Some(name) = spec.strip_prefix("\\g<").and_then(|s| s.strip_suffix('>')) {
            match name.parse::<usize>() {
                Ok(i) => caps.get(i),
                Err(_) => caps.name(name),
            }
        } else if let Some(num) = spec
            .strip_prefix('\\')
            .and_then(|s| s.parse::<usize>().ok())
        {
            caps.get(num)
        } else {
            return Err(op_err(format!("regex_search: unknown argument {spec:?}")));
        };
        out.push(m.map_or(Value::from(()), |m| Value::from(m.as_str())));
    }
    Ok(Value::from(out))
}

/// Python's `re.findall`: whole matches, the group when there is one, lists of groups else.
fn filter_regex_findall(value: &Value, pattern: String, kwargs: Kwargs) -> Result<Value, Error> {
    let (ignorecase, multiline) = regex_flags(&kwargs)?;
    kwargs.assert_all_used()?;
    let text = py_string(defined(value)?)?;
    let re = cached_regex(&pattern, ignorecase, multiline)?;
    let groups = re.captures_len() - 1;
    let out: Vec<Value> = re
        .captures_iter(&text)
        .map(|caps| {
            let group = |i: usize| Value::from(caps.get(i).map_or("", |m| m.as_str()));
            match groups {
                0 => group(0),
                1 => group(1),
                n => Value::from((1..=n).map(group).collect::<Vec<_>>()),
            }
        })
        .collect();
    Ok(Value::from(out))
}

fn filter_regex_escape(value: &str) -> String {
    regex::escape(value)
}

/// Python's `os.path.basename`: the text after the last slash.
fn filter_basename(path: &str) -> String {
    path.rsplit('/').next().unwrap_or_default().to_string()
}

/// Python's `os.path.dirname`: the text before the last slash, trailing slashes dropped
/// unless that is the root.
fn filter_dirname(path: &str) -> String {
    match path.rfind('/') {
        None => String::new(),
        Some(i) => {
            let head = &path[..=i];
            let trimmed = head.trim_end_matches('/');
            if trimmed.is_empty() {
                head.to_string()
            } else {
                trimmed.to_string()
            }
        }
    }
}

/// Python's `os.path.splitext`: `[root, ext]`.
fn filter_splitext(path: &str) -> Value {
    let base_start = path.rfind('/').map_or(0, |i| i + 1);
    let base = &path[base_start..];
    let dot = base
        .trim_start_matches('.')
        .rfind('.')
        .map(|i| i + (base.len() - base.trim_start_matches('.').len()));
    match dot {
        Some(i) => Value::from(vec![
            Value::from(&path[..base_start + i]),
            Value::from(&path[base_start + i..]),
        ]),
        None => Value::from(vec![Value::from(path), Value::from("")]),
    }
}

/// Python's `shlex.quote`.
fn filter_quote(value: &Value) -> Result<String, Error> {
    let s = py_string(defined(value)?)?;
    if s.is_empty() {
        return Ok("''".into());
    }
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "@%+=:,./-_".contains(c))
    {
        return Ok(s);
    }
    Ok(format!("'{}'", s.replace('\'', "'\"'\"'")))
}

fn filter_b64encode(value: &Value) -> Result<String, Error> {
    let s = py_string(defined(value)?)?;
    Ok(base64::engine::general_purpose::STANDARD.encode(s.as_bytes()))
}

fn filter_b64decode(value: &str) -> Result<String, Error> {
    let cleaned: String = value.chars().filter(|c| !c.is_whitespace()).collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(cleaned.as_bytes())
        .map_err(|e| op_err(format!("b64decode: {e}")))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// `hash('sha256')`; only the SHA-2 family is available.
fn filter_hash(value: &Value, algorithm: Option<String>) -> Result<String, Error> {
    let s = py_string(defined(value)?)?;
    let algo = algorithm.unwrap_or_else(|| "sha256".into());
    let digest: Vec<u8> = match algo.as_str() {
        "sha224" => sha2::Sha224::digest(s.as_bytes()).to_vec(),
        "sha256" => sha2::Sha256::digest(s.as_bytes()).to_vec(),
        "sha384" => sha2::Sha384::digest(s.as_bytes()).to_vec(),
        "sha512" => sha2::Sha512::digest(s.as_bytes()).to_vec(),
        other => {
            return Err(op_err(format!(
                "hash: unsupported algorithm {other:?} (use sha224, sha256, sha384 or sha512)"
            )))
        }
    };
    Ok(digest.iter().fold(String::new(), |mut acc, b| {
        let _ = write!(acc, "{b:02x}");
        acc
    }))
}

fn names(kwargs: &Kwargs) -> Result<(String, String), Error> {
    let key: Option<String> = kwargs.get("key_name")?;
    let value: Option<String> = kwargs.get("value_name")?;
    kwargs.assert_all_used()?;
    Ok((
        key.unwrap_or_else(|| "key".into()),
        value.unwrap_or_else(|| "value".into()),
    ))
}

fn filter_dict2items(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let (key_name, value_name) = names(&kwargs)?;
    if defined(value)?.kind() != ValueKind::Map {
        return Err(op_err(format!(
            "dict2items requires a dictionary, got {}",
            value.kind()
        )));
    }
    let mut out = Vec::new();
    for key in value.try_iter()? {
        let item = value.get_item(&key)?;
        out.push(Value::from_iter([
            (key_name.as_str(), key),
            (value_name.as_str(), item),
        ]));
    }
    Ok(Value::from(out))
}

fn filter_items2dict(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let (key_name, value_name) = names(&kwargs)?;
    let mut out = Vec::new();
    for item in defined(value)?.try_iter()? {
        let k = item.get_attr(&key_name)?;
        let v = item.get_attr(&value_name)?;
        if k.is_undefined() || v.is_undefined() {
            return Err(op_err(format!(
                "items2dict: each item needs `{key_name}` and `{value_name}`"
            )));
        }
        out.push((k, v));
    }
    Ok(Value::from_iter(out))
}

/// Splits trailing keyword arguments off a `Rest` (minijinja passes them as the last value).
fn split_kwargs(args: &[Value]) -> Result<(Vec<Value>, Kwargs), Error> {
    match args.split_last() {
        Some((last, rest)) if last.is_kwargs() => {
            Ok((rest.to_vec(), Kwargs::try_from(last.clone())?))
        }
        _ => Ok((
            args.to_vec(),
            Kwargs::from_iter(Vec::<(String, Value)>::new()),
        )),
    }
}

/// Ansible's `combine(*dicts, recursive=False, list_merge='replace')`.
fn filter_combine(value: &Value, args: Rest<Value>) -> Result<Value, Error> {
    let (others, kwargs) = split_kwargs(&args)?;
    let recursive: Option<bool> = kwargs.get("recursive")?;
    let list_merge: Option<String> = kwargs.get("list_merge")?;
    kwargs.assert_all_used()?;
    let list_merge = list_merge.unwrap_or_else(|| "replace".into());
    if !matches!(
        list_merge.as_str(),
        "replace" | "keep" | "append" | "prepend" | "append_rp" | "prepend_rp"
    ) {
        return Err(op_err(format!(
            "combine: unknown list_merge {list_merge:?}"
        )));
    }
    let mut dicts = Vec::new();
    for v in std::iter::once(value).chain(others.iter()) {
        match value_to_json(defined(v)?)? {
            Json::Array(items) => dicts.extend(items),
            other => dicts.push(other),
        }
    }
    let mut result = serde_json::Map::new();
    for d in dicts {
        let Json::Object(map) = d else {
            return Err(op_err("combine: arguments must be dictionaries"));
        };
        merge_hash(&mut result, map, recursive.unwrap_or(false), &list_merge);
    }
    Ok(Value::from_serialize(Json::Object(result)))
}

fn merge_hash(
    x: &mut serde_json::Map<String, Json>,
    y: serde_json::Map<String, Json>,
    recursive: bool,
    list_merge: &str,
) {
    for (key, y_value) in y {
        let Some(x_value) = x.get_mut(&key) else {
            x.insert(key, y_value);
            continue;
        };
        match (x_value, y_value) {
            (Json::Object(xm), Json::Object(ym)) if recursive => {
                merge_hash(xm, ym, recursive, list_merge)
            }
            (Json::Array(xa), Json::Array(ya)) if list_merge != "replace" => {
                let merged = match list_merge {
                    "keep" => xa.clone(),
                    "append" => xa.iter().cloned().chain(ya).collect(),
                    "prepend" => ya.into_iter().chain(xa.iter().cloned()).collect(),
                    "append_rp" => {
                        let kept: Vec<Json> =
                            xa.iter().filter(|z| !ya.contains(z)).cloned().collect();
                        kept.into_iter().chain(ya).collect()
                    }
                    _ => {
                        let rest: Vec<Json> =
                            xa.iter().filter(|z| !ya.contains(z)).cloned().collect();
                        ya.into_iter().chain(rest).collect()
                    }
                };
                *xa = merged;
            }
            (slot, y_value) => *slot = y_value,
        }
    }
}

/// `mandatory(msg=None)`: undefined input is an error (named by the caller's error handling).
fn filter_mandatory(value: &Value, msg: Option<String>) -> Result<Value, Error> {
    if value.is_undefined() {
        return Err(match msg {
            Some(msg) => op_err(msg),
            None => Error::new(ErrorKind::UndefinedError, "mandatory variable not defined"),
        });
    }
    Ok(value.clone())
}

/// `ternary(true_val, false_val, none_val=None)`.
fn filter_ternary(
    value: &Value,
    yes: Value,
    no: Value,
    none: Option<Value>,
) -> Result<Value, Error> {
    if let (Some(none), true) = (none, defined(value)?.is_none()) {
        return Ok(none);
    }
    Ok(if value.is_true() { yes } else { no })
}

/// `flatten(levels=None, skip_nulls=True)`.
fn filter_flatten(value: &Value, levels: Option<usize>, kwargs: Kwargs) -> Result<Value, Error> {
    let kw_levels: Option<usize> = kwargs.get("levels")?;
    let skip_nulls: Option<bool> = kwargs.get("skip_nulls")?;
    kwargs.assert_all_used()?;
    fn walk(
        v: &Value,
        levels: Option<usize>,
        skip_nulls: bool,
        out: &mut Vec<Value>,
    ) -> Result<(), Error> {
        for item in v.try_iter()? {
            if item.kind() == ValueKind::Seq && levels != Some(0) {
                walk(&item, levels.map(|l| l - 1), skip_nulls, out)?;
            } else if !(skip_nulls && item.is_none()) {
                out.push(item);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(
        defined(value)?,
        levels.or(kw_levels),
        skip_nulls.unwrap_or(true),
        &mut out,
    )?;
    Ok(Value::from(out))
}

fn unique_items(v: &Value) -> Result<Vec<Value>, Error> {
    let mut out: Vec<Value> = Vec::new();
    for item in defined(v)?.try_iter()? {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    Ok(out)
}

fn filter_difference(a: &Value, b: &Value) -> Result<Value, Error> {
    let b = unique_items(b)?;
    Ok(Value::from(
        unique_items(a)?
            .into_iter()
            .filter(|x| !b.contains(x))
            .collect::<Vec<_>>(),
    ))
}

fn filter_intersect(a: &Value, b: &Value) -> Result<Value, Error> {
    let b = unique_items(b)?;
    Ok(Value::from(
        unique_items(a)?
            .into_iter()
            .filter(|x| b.contains(x))
            .collect::<Vec<_>>(),
    ))
}

fn filter_union(a: &Value, b: &Value) -> Result<Value, Error> {
    let mut out = unique_items(a)?;
    for x in unique_items(b)? {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    Ok(Value::from(out))
}

fn filter_symmetric_difference(a: &Value, b: &Value) -> Result<Value, Error> {
    let (a, b) = (unique_items(a)?, unique_items(b)?);
    let mut out: Vec<Value> = a.iter().filter(|x| !b.contains(x)).cloned().collect();
    out.extend(b.iter().filter(|x| !a.contains(x)).cloned());
    Ok(Value::from(out))
}

/// `map('extract', container, morekeys)`: `container[item][morekeys...]`.
fn filter_extract(
    item: &Value,
    container: &Value,
    morekeys: Option<Value>,
) -> Result<Value, Error> {
    let mut v = container.get_item(defined(item)?)?;
    if let Some(keys) = morekeys {
        let keys: Vec<Value> = if keys.kind() == ValueKind::Seq {
            keys.try_iter()?.collect()
        } else {
            vec![keys]
        };
        for k in keys {
            v = v.get_item(&k)?;
        }
    }
    Ok(v)
}

/// Python type names, as Ansible users see them.
fn filter_type_debug(value: &Value) -> &'static str {
    match value.kind() {
        ValueKind::Undefined => "AnsibleUndefined",
        ValueKind::None => "NoneType",
        ValueKind::Bool => "bool",
        ValueKind::Number if value.as_i64().is_some() => "int",
        ValueKind::Number => "float",
        ValueKind::String => "str",
        ValueKind::Bytes => "bytes",
        ValueKind::Seq | ValueKind::Iterable => "list",
        ValueKind::Map => "dict",
        _ => "object",
    }
}

// ---------------------------------------------------------------------------------------------
// Tests.
// ---------------------------------------------------------------------------------------------

fn add_tests(env: &mut Environment<'static>) {
    // Builtins kept: defined, undefined, none, string, number, mapping, sequence, ...
    env.add_test("failed", test_failed);
    env.add_test("failure", test_failed);
    env.add_test("succeeded", test_succeeded);
    env.add_test("success", test_succeeded);
    env.add_test("successful", test_succeeded);
    env.add_test("changed", test_changed);
    env.add_test("change", test_changed);
    env.add_test("skipped", test_skipped);
    env.add_test("skip", test_skipped);
    env.add_test("unreachable", test_unreachable);
    env.add_test("reachable", test_reachable);
    env.add_test("match", test_match);
    env.add_test("search", test_search);
    env.add_test("regex", test_regex);
    env.add_test("version", test_version);
    env.add_test("version_compare", test_version);
    env.add_test("contains", test_contains);
    env.add_test("subset", test_subset);
    env.add_test("superset", test_superset);
    env.add_test("truthy", test_truthy);
    env.add_test("falsy", test_falsy);
    env.add_test("file", |p: &str| Path::new(p).is_file());
    env.add_test("directory", |p: &str| Path::new(p).is_dir());
    env.add_test("exists", |p: &str| Path::new(p).exists());
    env.add_test("link", |p: &str| Path::new(p).is_symlink());
    env.add_test("abs", |p: &str| Path::new(p).is_absolute());
}

/// Registered results are maps; anything else is a usage error, as in Ansible.
fn result_flag(result: &Value, test: &str, key: &str) -> Result<bool, Error> {
    if defined(result)?.kind() != ValueKind::Map {
        return Err(op_err(format!(
            "the `{test}` test expects a dictionary (a registered result)"
        )));
    }
    let v = result.get_attr(key)?;
    Ok(!v.is_undefined() && filter_bool(&v)?.is_true())
}

fn test_failed(result: &Value) -> Result<bool, Error> {
    result_flag(result, "failed", "failed")
}

fn test_succeeded(result: &Value) -> Result<bool, Error> {
    result_flag(result, "succeeded", "failed").map(|f| !f)
}

fn test_skipped(result: &Value) -> Result<bool, Error> {
    result_flag(result, "skipped", "skipped")
}

fn test_unreachable(result: &Value) -> Result<bool, Error> {
    result_flag(result, "unreachable", "unreachable")
}

fn test_reachable(result: &Value) -> Result<bool, Error> {
    result_flag(result, "reachable", "unreachable").map(|f| !f)
}

/// Changed when the result says so, or any of a loop's `results` does.
fn test_changed(result: &Value) -> Result<bool, Error> {
    if result_flag(result, "changed", "changed")? {
        return Ok(true);
    }
    let results = result.get_attr("results")?;
    if results.kind() == ValueKind::Seq {
        for r in results.try_iter()? {
            if r.kind() == ValueKind::Map && result_flag(&r, "changed", "changed")? {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

fn regex_test(
    value: &Value,
    pattern: &str,
    kwargs: &Kwargs,
    match_type: &str,
) -> Result<bool, Error> {
    let (ignorecase, multiline) = regex_flags(kwargs)?;
    let text = py_string(defined(value)?)?;
    let anchored = match match_type {
        "match" => format!(r"\A(?:{pattern})"),
        "fullmatch" => format!(r"\A(?:{pattern})\z"),
        "search" => pattern.to_string(),
        other => return Err(op_err(format!("regex test: unknown match_type {other:?}"))),
    };
    Ok(cached_regex(&anchored, ignorecase, multiline)?.is_match(&text))
}

fn test_match(value: &Value, pattern: String, kwargs: Kwargs) -> Result<bool, Error> {
    let rv = regex_test(value, &pattern, &kwargs, "match")?;
    kwargs.assert_all_used()?;
    Ok(rv)
}

fn test_search(value: &Value, pattern: String, kwargs: Kwargs) -> Result<bool, Error> {
    let rv = regex_test(value, &pattern, &kwargs, "search")?;
    kwargs.assert_all_used()?;
    Ok(rv)
}

fn test_regex(value: &Value, pattern: String, kwargs: Kwargs) -> Result<bool, Error> {
    let match_type: Option<String> = kwargs.get("match_type")?;
    let rv = regex_test(
        value,
        &pattern,
        &kwargs,
        match_type.as_deref().unwrap_or("search"),
    )?;
    kwargs.assert_all_used()?;
    Ok(rv)
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum VersionPart {
    Num(u64),
    Text(String),
}

/// LooseVersion-style components: runs of digits compare numerically, other runs as text.
fn version_parts(v: &str) -> Vec<VersionPart> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut cur_digit = false;
    for c in v.chars() {
        if c == '.' || c == '-' || c == '_' || c == '+' {
            if !cur.is_empty() {
                parts.push(std::mem::take(&mut cur));
            }
            continue;
        }
        if !cur.is_empty() && c.is_ascii_digit() != cur_digit {
            parts.push(std::mem::take(&mut cur));
        }
        cur_digit = c.is_ascii_digit();
        cur.push(c);
    }
    if !cur.is_empty() {
        parts.push(cur);
    }
    parts
        .into_iter()
        .map(|p| {
            p.parse::<u64>()
                .map_or(VersionPart::Text(p), VersionPart::Num)
        })
        .collect()
}

/// `version(other, operator='eq')`.
fn test_version(
    value: &Value,
    other: &Value,
    operator: Option<String>,
    kwargs: Kwargs,
) -> Result<bool, Error> {
    let kw_op: Option<String> = kwargs.get("operator")?;
    let _strict: Option<bool> = kwargs.get("strict")?;
    let _version_type: Option<String> = kwargs.get("version_type")?;
    kwargs.assert_all_used()?;
    let a = version_parts(&py_string(defined(value)?)?);
    let b = version_parts(&py_string(defined(other)?)?);
    let ord = a.cmp(&b);
    let op = operator.or(kw_op).unwrap_or_else(|| "eq".into());
    use std::cmp::Ordering::*;
    Ok(match op.as_str() {
        "<" | "lt" => ord == Less,
        "<=" | "le" => ord != Greater,
        ">" | "gt" => ord == Greater,
        ">=" | "ge" => ord != Less,
        "==" | "=" | "eq" => ord == Equal,
        "!=" | "<>" | "ne" => ord != Equal,
        other => return Err(op_err(format!("version: unknown operator {other:?}"))),
    })
}

fn test_contains(container: &Value, item: &Value) -> Result<bool, Error> {
    Ok(defined(container)?.try_iter()?.any(|x| &x == item))
}

fn test_subset(a: &Value, b: &Value) -> Result<bool, Error> {
    let b = unique_items(b)?;
    Ok(unique_items(a)?.iter().all(|x| b.contains(x)))
}

fn test_superset(a: &Value, b: &Value) -> Result<bool, Error> {
    test_subset(b, a)
}

fn test_truthy(value: &Value, kwargs: Kwargs) -> Result<bool, Error> {
    let convert: Option<bool> = kwargs.get("convert_bool")?;
    kwargs.assert_all_used()?;
    if convert.unwrap_or(false) && matches!(value.kind(), ValueKind::String | ValueKind::Number) {
        return Ok(filter_bool(value)?.is_true());
    }
    Ok(defined(value)?.is_true())
}

fn test_falsy(value: &Value, kwargs: Kwargs) -> Result<bool, Error> {
    test_truthy(value, kwargs).map(|t| !t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use minijinja::value::{Enumerator, Object};
    use serde_json::json;
    use std::collections::BTreeMap;

    fn ctx(j: Json) -> Value {
        Value::from_serialize(&j)
    }

    fn vars() -> Value {
        ctx(json!({
            "users": ["alice", "bob"],
            "user": {"name": "bob", "uid": 1000, "groups": ["wheel"]},
            "count": 3,
            "flag": true,
            "x": "a",
            "y": "yes",
            "empty": "",
            "nothing": null,
            "path": "/etc/nginx/nginx.conf",
            "items": [{"key": "a", "value": 1}, {"key": "b", "value": 2}],
        }))
    }

    fn render(s: &str) -> Json {
        Templar::new()
            .render_str(s, &vars())
            .unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn eval(expr: &str) -> Json {
        Templar::new()
            .eval(expr, &vars())
            .unwrap_or_else(|e| panic!("{expr}: {e}"))
    }

    fn truth(expr: &str) -> bool {
        Templar::new()
            .eval_bool(expr, &vars())
            .unwrap_or_else(|e| panic!("{expr}: {e}"))
    }

    fn undefined_name(err: TemplateError) -> String {
        match err {
            TemplateError::Undefined { name, .. } => name,
            other => panic!("expected an undefined error, got {other:?}"),
        }
    }

    fn render_err(s: &str) -> TemplateError {
        Templar::new().render_str(s, &vars()).expect_err(s)
    }

    #[test]
    fn templar_is_shareable() {
        fn check<T: Send + Sync + Clone>() {}
        check::<Templar>();
    }

    #[test]
    fn detects_templates() {
        assert!(Templar::is_template("{{ x }}"));
        assert!(Templar::is_template("a {% if x %}b{% endif %}"));
        assert!(Templar::is_template("{# note #}"));
        assert!(!Templar::is_template("plain { text } %"));
    }

    #[test]
    fn single_expression_returns_native_values() {
        assert_eq!(render("{{ users }}"), json!(["alice", "bob"]));
        assert_eq!(
            render("  {{ user }} "),
            json!({"name": "bob", "uid": 1000, "groups": ["wheel"]})
        );
        assert_eq!(render("{{ count + 1 }}"), json!(4));
        assert_eq!(render("{{ flag }}"), json!(true));
        assert_eq!(render("{{ nothing }}"), json!(null));
        assert_eq!(render("{{ 1.5 }}"), json!(1.5));
        assert_eq!(render("{{- users | length -}}"), json!(2));
        assert_eq!(render("{{ {'a': {'b': 1}} }}"), json!({"a": {"b": 1}}));
        assert_eq!(render("{{ x }}"), json!("a"));
        assert_eq!(render("{{ -count }}"), json!(-3));
        // Whitespace around a string result is kept, unless whitespace control strips it.
        assert_eq!(render("{{ x }}\n"), json!("a\n"));
        assert_eq!(render(" {{- x }}\n"), json!("a\n"));
        assert_eq!(render(" {{ x -}}\n"), json!(" a"));
        assert_eq!(render(" {{ users }}\n"), json!(["alice", "bob"]));
        // An `if` without `else` is silently undefined, not an error.
        assert_eq!(render("{{ x if false }}"), json!(""));
        assert_eq!(render("{{ foo if foo is defined }}"), json!(""));
        assert!(!truth("foo if foo is defined"));
        assert_eq!(render("[{{ foo if foo is defined }}]"), json!("[]"));
    }

    #[test]
    fn mixed_text_renders_to_python_style_strings() {
        assert_eq!(render("n={{ count }}"), json!("n=3"));
        assert_eq!(render("{{ x }}{{ count }}"), json!("a3"));
        assert_eq!(render("{{ x }} and {{ y }}"), json!("a and yes"));
        assert_eq!(
            render("flag={{ flag }} none={{ nothing }}"),
            json!("flag=True none=None")
        );
        assert_eq!(
            render("users: {{ users }}"),
            json!("users: ['alice', 'bob']")
        );
        assert_eq!(
            render("u: {{ {'k': \"it's\"} }}"),
            json!("u: {'k': \"it's\"}")
        );
        assert_eq!(render("plain text"), json!("plain text"));
        assert_eq!(render("{% if flag %}on{% endif %}"), json!("on"));
        assert_eq!(render("{# only a comment #}"), json!(""));
    }

    #[test]
    fn render_value_walks_lists_maps_and_keys() {
        let t = Templar::new();
        let v =
            json!({"name": "{{ user.name }}", "{{ x }}_key": ["{{ count }}", 5, "lit"], "n": null});
        let out = t.render_value(&v, &vars()).unwrap();
        assert_eq!(
            out,
            json!({"name": "bob", "a_key": [3, 5, "lit"], "n": null})
        );
    }

    #[test]
    fn undefined_variables_are_named() {
        let e = render_err("{{ foo }}");
        assert_eq!(e.to_string(), "undefined variable `foo` (in \"{{ foo }}\")");
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
            "`user.nmae` is undefined (`user` has no attribute `nmae`) (in \"name: {{ user.nmae }}\", line 1)"
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
        assert_eq!(e.to_string(), "undefined variable `nope` (in \"nope\")");
    }

    #[test]
    fn errors_report_the_line() {
        let t = Templar::new();
        let e = t
            .render_file("motd.j2", "line one\n{{ x }}\n{{ oops }}\n", &vars())
            .unwrap_err();
        match e {
            TemplateError::Undefined {
                name,
                template,
                line,
            } => {
                assert_eq!(name, "oops");
                assert_eq!(template, "motd.j2");
                assert_eq!(line, Some(3));
            }
            other => panic!("{other:?}"),
        }
        let e = t
            .render_file("bad.j2", "a\n{% if %}\n", &vars())
            .unwrap_err();
        assert!(
            matches!(e, TemplateError::Syntax { line: Some(2), .. }),
            "{e:?}"
        );
        assert!(e.to_string().starts_with("template syntax error: "), "{e}");
        let e = render_err("{{ count | regex_replace('(', 'x') }} x");
        assert!(matches!(e, TemplateError::Render { .. }), "{e:?}");
        assert!(e.to_string().contains("invalid regular expression"), "{e}");
    }

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
            rewrite_code("not a.b['c'] is defined"),
            "not __fp_chain(a, \"b\", ('c')) is defined"
        );
    }

    #[test]
    fn when_style_expressions() {
        assert!(truth("x == 'a' and y | bool"));
        assert!(!truth("x == 'b' or not flag"));
        assert!(truth("{{ x == 'a' }}"));
        let c = ctx(json!({"s_false": "False", "s_no": "no", "s_yes": "yes"}));
        let t = Templar::new();
        assert!(!t.eval_bool("{{ s_false }}", &c).unwrap());
        assert!(!t.eval_bool("{{ s_no }}", &c).unwrap());
        assert!(t.eval_bool("{{ s_yes }}", &c).unwrap());
        assert!(
            t.eval_bool("s_false", &c).unwrap(),
            "bare strings keep Jinja truthiness"
        );
        assert!(truth("'alice' in users"));
        assert!(truth("users | length > 1"));
        assert!(truth("count is divisibleby 3"));
        // Text around `{{ }}` is rendered first, then evaluated, as Ansible does.
        assert!(truth("'{{ x }}' == 'a'"));
        let e = Templar::new()
            .eval_bool("{{ x }} == 'a'", &vars())
            .unwrap_err();
        assert_eq!(undefined_name(e), "a");
        assert!(matches!(
            Templar::new().eval_bool("x }} y", &vars()),
            Err(TemplateError::Syntax { .. })
        ));
        assert!(truth("'{{ x }}' == 'a'"));
        assert!(!truth("empty"));
        assert_eq!(eval("users | map('upper') | list"), json!(["ALICE", "BOB"]));
        assert_eq!(eval("{{ count * 2 }}"), json!(6));
        assert!(Templar::new().eval_bool("  ", &vars()).is_err());
    }

    #[test]
    fn bool_int_float_string_filters() {
        for (input, want) in [
            ("yes", true),
            ("On", true),
            ("1", true),
            ("TRUE", true),
            ("no", false),
            ("off", false),
            ("0", false),
            ("false", false),
            ("maybe", false),
        ] {
            let c = ctx(json!({"v": input}));
            assert_eq!(
                Templar::new().eval_bool("v | bool", &c).unwrap(),
                want,
                "{input}"
            );
        }
        assert_eq!(eval("1 | bool"), json!(true));
        assert_eq!(eval("true | bool"), json!(true));
        assert_eq!(eval("'42' | int"), json!(42));
        assert_eq!(eval("' 7 ' | int"), json!(7));
        assert_eq!(eval("'3.9' | int"), json!(3));
        assert_eq!(eval("'abc' | int"), json!(0));
        assert_eq!(eval("'abc' | int(5)"), json!(5));
        assert_eq!(eval("'0x1F' | int(base=16)"), json!(31));
        assert_eq!(eval("'-12' | int"), json!(-12));
        assert_eq!(eval("true | int"), json!(1));
        assert_eq!(eval("'2.5' | float"), json!(2.5));
        assert_eq!(eval("'x' | float"), json!(0.0));
        assert_eq!(eval("3 | float"), json!(3.0));
        assert_eq!(eval("flag | string"), json!("True"));
        assert_eq!(eval("nothing | string"), json!("None"));
        assert_eq!(eval("count | string"), json!("3"));
        assert!(Templar::new().eval("missing | bool", &vars()).is_err());
    }

    #[test]
    fn builtin_string_and_list_filters() {
        assert_eq!(eval("'AbC' | lower"), json!("abc"));
        assert_eq!(eval("'AbC' | upper"), json!("ABC"));
        assert_eq!(eval("'  t  ' | trim"), json!("t"));
        assert_eq!(eval("users | join(',')"), json!("alice,bob"));
        assert_eq!(eval("users | count"), json!(2));
        assert_eq!(eval("'a,b' | split(',')"), json!(["a", "b"]));
        assert_eq!(eval("'a-b' | replace('-', '_')"), json!("a_b"));
        assert_eq!(eval("[3, 1, 3] | unique | list"), json!([3, 1]));
        assert_eq!(eval("[3, 1, 2] | sort"), json!([1, 2, 3]));
        assert_eq!(eval("users | first"), json!("alice"));
        assert_eq!(eval("users | last"), json!("bob"));
        assert_eq!(eval("[3, 1, 2] | min"), json!(1));
        assert_eq!(eval("[3, 1, 2] | max"), json!(3));
        assert_eq!(eval("[3, 1, 2] | sum"), json!(6));
        assert_eq!(
            eval("items | map(attribute='key') | list"),
            json!(["a", "b"])
        );
        assert_eq!(
            eval("items | selectattr('value', 'gt', 1) | map(attribute='key') | list"),
            json!(["b"])
        );
        assert_eq!(
            eval("items | rejectattr('key', 'equalto', 'a') | list"),
            json!([{"key": "b", "value": 2}])
        );
        assert_eq!(eval("[0, 1, 2] | select | list"), json!([1, 2]));
        assert_eq!(eval("[0, 1, 2] | reject('odd') | list"), json!([0, 2]));
    }

    #[test]
    fn json_filters() {
        assert_eq!(
            eval("user | to_json"),
            json!(r#"{"groups": ["wheel"], "name": "bob", "uid": 1000}"#)
        );
        assert_eq!(eval("'héllo' | to_json"), json!(r#""h\u00e9llo""#));
        assert_eq!(
            eval("{'b': 1, 'a': [1, 2]} | to_nice_json"),
            json!("{\n    \"a\": [\n        1,\n        2\n    ],\n    \"b\": 1\n}")
        );
        assert_eq!(
            eval("{'a': []} | to_nice_json(indent=2)"),
            json!("{\n  \"a\": []\n}")
        );
        assert_eq!(
            eval("'{\"a\": [1, true]}' | from_json"),
            json!({"a": [1, true]})
        );
        assert!(Templar::new().eval("'{' | from_json", &vars()).is_err());
    }

    #[test]
    fn yaml_filters() {
        assert_eq!(
            eval("{'b': [1, 2], 'a': 'x'} | to_yaml"),
            json!("a: x\nb: [1, 2]\n")
        );
        assert_eq!(
            eval("{'users': [{'name': 'bob', 'shell': 'zsh'}], 'on': 'yes'} | to_nice_yaml"),
            json!("'on': 'yes'\nusers:\n-   name: bob\n    shell: zsh\n")
        );
        assert_eq!(
            eval("{'a': {'b': 'two\\nlines'}} | to_nice_yaml"),
            json!("a:\n    b: \"two\\nlines\"\n")
        );
        assert_eq!(
            eval("{'mode': '0644', 'e': ''} | to_nice_yaml(indent=2)"),
            json!("e: ''\nmode: '0644'\n")
        );
        assert_eq!(
            eval("'a: 1\\nb: [x, y]\\n' | from_yaml"),
            json!({"a": 1, "b": ["x", "y"]})
        );
        // Round trip through YAML keeps the data.
        let out = eval("user | to_nice_yaml | from_yaml");
        assert_eq!(
            out,
            json!({"name": "bob", "uid": 1000, "groups": ["wheel"]})
        );
    }

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
        assert_eq!(
            python_replacement(r"\1-\g<name>-\\-$"),
            "${1}-${name}-\\-$$"
        );
    }

    #[test]
    fn path_and_encoding_filters() {
        assert_eq!(eval("path | basename"), json!("nginx.conf"));
        assert_eq!(eval("path | dirname"), json!("/etc/nginx"));
        assert_eq!(eval("'/etc/' | basename"), json!(""));
        assert_eq!(eval("'/' | dirname"), json!("/"));
        assert_eq!(eval("'file' | dirname"), json!(""));
        assert_eq!(
            eval("path | splitext"),
            json!(["/etc/nginx/nginx", ".conf"])
        );
        assert_eq!(eval("'.bashrc' | splitext"), json!([".bashrc", ""]));
        assert_eq!(
            eval("'simple-path/x.txt' | quote"),
            json!("simple-path/x.txt")
        );
        assert_eq!(eval("\"it's here\" | quote"), json!("'it'\"'\"'s here'"));
        assert_eq!(eval("'' | quote"), json!("''"));
        assert_eq!(eval("'hello' | b64encode"), json!("aGVsbG8="));
        assert_eq!(eval("'aGVsbG8=' | b64decode"), json!("hello"));
        assert_eq!(
            eval("'abc' | hash('sha256')"),
            json!("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
        assert!(Templar::new().eval("'abc' | hash('md5')", &vars()).is_err());
    }

    #[test]
    fn dict_filters() {
        assert_eq!(
            eval("{'a': 1, 'b': 2} | dict2items"),
            json!([{"key": "a", "value": 1}, {"key": "b", "value": 2}])
        );
        assert_eq!(
            eval("{'a': 1} | dict2items(key_name='k', value_name='v')"),
            json!([{"k": "a", "v": 1}])
        );
        assert_eq!(eval("items | items2dict"), json!({"a": 1, "b": 2}));
        assert_eq!(
            eval("{'a': 1, 'n': {'x': 1}} | combine({'b': 2, 'n': {'y': 2}})"),
            json!({"a": 1, "b": 2, "n": {"y": 2}})
        );
        assert_eq!(
            eval("{'n': {'x': 1}} | combine({'n': {'y': 2}}, recursive=true)"),
            json!({"n": {"x": 1, "y": 2}})
        );
        assert_eq!(
            eval("{'l': [1, 2]} | combine({'l': [2, 3]}, list_merge='append_rp')"),
            json!({"l": [1, 2, 3]})
        );
        assert_eq!(
            eval("[{'a': 1}, {'b': 2}] | combine"),
            json!({"a": 1, "b": 2})
        );
        assert_eq!(
            eval("{'a': 1} | combine({'a': 2}, {'a': 3})"),
            json!({"a": 3})
        );
    }

    #[test]
    fn misc_filters() {
        assert_eq!(eval("flag | ternary('on', 'off')"), json!("on"));
        assert_eq!(
            eval("nothing | ternary('on', 'off', 'unset')"),
            json!("unset")
        );
        assert_eq!(eval("x | mandatory"), json!("a"));
        assert_eq!(
            undefined_name(
                Templar::new()
                    .eval("gone | mandatory", &vars())
                    .unwrap_err()
            ),
            "gone"
        );
        let e = Templar::new()
            .eval("gone | mandatory('set gone!')", &vars())
            .unwrap_err();
        assert!(e.to_string().contains("set gone!"), "{e}");
        assert_eq!(eval("[1, [2, [3, none]]] | flatten"), json!([1, 2, 3]));
        assert_eq!(eval("[1, [2, [3]]] | flatten(1)"), json!([1, 2, [3]]));
        assert_eq!(eval("[1, 2, 3] | difference([2])"), json!([1, 3]));
        assert_eq!(eval("[1, 2, 3] | intersect([3, 2, 5])"), json!([2, 3]));
        assert_eq!(eval("[1, 2] | union([2, 3])"), json!([1, 2, 3]));
        assert_eq!(eval("[1, 2] | symmetric_difference([2, 3])"), json!([1, 3]));
        assert_eq!(
            eval("['a'] | map('extract', {'a': {'ip': 1}}, 'ip') | list"),
            json!([1])
        );
        assert_eq!(eval("count | type_debug"), json!("int"));
        assert_eq!(eval("user | type_debug"), json!("dict"));
    }

    #[test]
    fn result_tests() {
        let c = ctx(json!({
            "ok": {"changed": false, "failed": false},
            "ch": {"changed": true},
            "bad": {"failed": true, "msg": "boom"},
            "skip": {"skipped": true, "changed": false},
            "loop": {"results": [{"changed": false}, {"changed": true}]},
            "s": "not a result",
        }));
        let t = Templar::new();
        let b = |e: &str| {
            t.eval_bool(e, &c)
                .unwrap_or_else(|err| panic!("{e}: {err}"))
        };
        assert!(b("ch is changed"));
        assert!(!b("ok is changed"));
        assert!(b("loop is changed"));
        assert!(b("bad is failed"));
        assert!(!b("bad is succeeded"));
        assert!(b("ok is success"));
        assert!(b("ok is succeeded"));
        assert!(b("skip is skipped"));
        assert!(!b("ok is skipped"));
        assert!(b("ok is not failed"));
        assert!(t.eval_bool("s is changed", &c).is_err());
    }

    #[test]
    fn regex_and_other_tests() {
        assert!(truth("'foobar' is match('foo')"));
        assert!(!truth("'foobar' is match('bar')"));
        assert!(truth("'foobar' is search('bar')"));
        assert!(truth("'FOO' is search('foo', ignorecase=true)"));
        assert!(truth("'foobar' is regex('o+b')"));
        assert!(!truth("'foobar' is regex('bar', match_type='match')"));
        assert!(truth("'a\\nb' is match('^b', multiline=true) == false"));
        assert!(truth("'20.04' is version('18.04', '>')"));
        assert!(truth("'1.10.0' is version('1.9', 'gt')"));
        assert!(truth("'2.0' is version('2.0', operator='eq')"));
        assert!(truth("'1.0rc1' is version('1.0', '>')"));
        assert!(truth("users is contains('bob')"));
        assert!(truth("['bob'] is subset(users)"));
        assert!(truth("users is superset(['bob'])"));
        assert!(truth("x is truthy"));
        assert!(truth("empty is falsy"));
        assert!(truth("nothing is none"));
        assert!(truth("'/' is directory"));
        assert!(truth("'/' is exists"));
        assert!(!truth("'/definitely/not/here' is file"));
        assert!(truth("'/etc' is abs"));
    }

    #[test]
    fn python_methods() {
        assert!(truth("x.startswith('a')"));
        assert!(truth("path.endswith('.conf')"));
        assert_eq!(eval("'a b'.split()"), json!(["a", "b"]));
        assert_eq!(eval("'  s '.strip()"), json!("s"));
        assert_eq!(eval("'s'.upper() ~ 'T'.lower()"), json!("St"));
        assert_eq!(eval("'a-b'.replace('-', '+')"), json!("a+b"));
        assert_eq!(
            eval("user.keys() | list | sort"),
            json!(["groups", "name", "uid"])
        );
        assert_eq!(eval("{'a': 1}.values() | list"), json!([1]));
        assert_eq!(eval("{'a': 1}.items() | list"), json!([["a", 1]]));
        assert_eq!(eval("user.get('nope', 'dflt')"), json!("dflt"));
        assert_eq!(eval("user.get('name')"), json!("bob"));
    }

    /// A context that resolves variables on demand, as the engine's scopes do.
    #[derive(Debug)]
    struct Lazy {
        vars: BTreeMap<String, Json>,
    }

    impl Object for Lazy {
        fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
            self.vars.get(key.as_str()?).map(Value::from_serialize)
        }

        fn enumerate(self: &Arc<Self>) -> Enumerator {
            Enumerator::Values(self.vars.keys().map(|k| Value::from(k.as_str())).collect())
        }
    }

    #[test]
    fn dynamic_object_context() {
        let lazy = Lazy {
            vars: BTreeMap::from([
                ("pkgs".to_string(), json!(["nginx", "curl"])),
                (
                    "svc".to_string(),
                    json!({"name": "nginx", "enabled": "yes"}),
                ),
            ]),
        };
        let c = Value::from_object(lazy);
        let t = Templar::new();
        assert_eq!(
            t.render_str("{{ pkgs }}", &c).unwrap(),
            json!(["nginx", "curl"])
        );
        assert_eq!(
            t.render_str("svc={{ svc.name }}", &c).unwrap(),
            json!("svc=nginx")
        );
        assert!(t
            .eval_bool("svc.enabled | bool and 'curl' in pkgs", &c)
            .unwrap());
        assert_eq!(
            t.render_str("{{ nope | default(1) }}", &c).unwrap(),
            json!(1)
        );
        assert_eq!(
            t.render_str("{{ svc.port.num | default(80) }}", &c)
                .unwrap(),
            json!(80)
        );
        assert_eq!(
            undefined_name(t.render_str("{{ svc.nmae }}", &c).unwrap_err()),
            "svc.nmae"
        );
        assert_eq!(undefined_name(t.eval_bool("nope", &c).unwrap_err()), "nope");
        // Enumerating the context works too (e.g. for debugging every variable).
        let all = t.eval("svc", &c).unwrap();
        assert_eq!(all, json!({"name": "nginx", "enabled": "yes"}));
    }

    #[test]
    fn render_file_trims_blocks_and_keeps_trailing_newline() {
        let t = Templar::new();
        let src =
            "# {{ ansible_managed }}\n{% for u in users %}\nuser {{ u }}\n{% endfor %}\nend\n";
        let c = ctx(json!({"users": ["a", "b"], "ansible_managed": "managed by fixpoint"}));
        let out = t.render_file("users.conf.j2", src, &c).unwrap();
        assert_eq!(out, "# managed by fixpoint\nuser a\nuser b\nend\n");
        // No HTML escaping whatever the extension.
        let out = t.render_file("page.html.j2", "{{ '<b>&' }}", &c).unwrap();
        assert_eq!(out, "<b>&");
        // Leading whitespace before a block is kept (lstrip_blocks off).
        let out = t
            .render_file("x", "  {% if true %}\nyes\n  {% endif %}\n", &c)
            .unwrap();
        assert_eq!(out, "  yes\n  ");
    }

    #[test]
    fn render_file_honours_jinja2_header() {
        let t = Templar::new();
        let src = "#jinja2: trim_blocks: False, lstrip_blocks: True\n  {% if true %}\nyes\n  {% endif %}\n";
        let out = t.render_file("x", src, &vars()).unwrap();
        assert_eq!(out, "\nyes\n\n");
    }

    #[test]
    fn includes_use_the_search_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("part.j2"), "part {{ x }}\n").unwrap();
        std::fs::write(dir.path().join("broken.j2"), "ok\n{{ missing_in_part }}\n").unwrap();
        let t = Templar::new().with_search_path(vec![
            PathBuf::from("/nonexistent"),
            dir.path().to_path_buf(),
        ]);
        let out = t
            .render_file("main.j2", "main\n{% include 'part.j2' %}", &vars())
            .unwrap();
        assert_eq!(out, "main\npart a\n");
        let e = t
            .render_file("main.j2", "{% include 'broken.j2' %}", &vars())
            .unwrap_err();
        match e {
            TemplateError::Undefined {
                name,
                template,
                line,
            } => {
                assert_eq!(name, "missing_in_part");
                assert_eq!(template, "broken.j2");
                assert_eq!(line, Some(2));
            }
            other => panic!("{other:?}"),
        }
        let e = Templar::new()
            .render_file("main.j2", "{% include 'part.j2' %}", &vars())
            .unwrap_err();
        assert!(e.to_string().contains("part.j2"), "{e}");
    }

    #[test]
    fn lookups() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("key.pub"), "ssh-ed25519 AAAA\n").unwrap();
        let t = Templar::new().with_search_path(vec![dir.path().to_path_buf()]);
        let c = vars();
        assert_eq!(
            t.eval("lookup('file', 'key.pub')", &c).unwrap(),
            json!("ssh-ed25519 AAAA")
        );
        let path = std::env::var("PATH").unwrap_or_default();
        assert_eq!(t.eval("lookup('env', 'PATH')", &c).unwrap(), json!(path));
        assert_eq!(
            t.eval("lookup('env', 'FIXPOINT_NOPE_X', default='d')", &c)
                .unwrap(),
            json!("d")
        );
        assert_eq!(t.eval("lookup('vars', 'x')", &c).unwrap(), json!("a"));
        assert_eq!(
            t.eval("query('vars', 'x', 'count')", &c).unwrap(),
            json!(["a", 3])
        );
        assert_eq!(
            t.eval("lookup('vars', 'x', 'y')", &c).unwrap(),
            json!("a,yes")
        );
        assert!(t.eval("lookup('file', 'missing.txt')", &c).is_err());
        let e = t.eval("lookup('pipe', 'ls')", &c).unwrap_err();
        assert!(e.to_string().contains("not supported"), "{e}");
    }

    #[test]
    fn check_syntax_does_not_render() {
        let t = Templar::new();
        assert!(t.check_syntax("{{ undefined_is_fine_here }}").is_ok());
        assert!(t
            .check_syntax("{% for x in y %}{{ x }}{% endfor %}")
            .is_ok());
        let e = t.check_syntax("{% for x in y %}").unwrap_err();
        assert!(matches!(e, TemplateError::Syntax { .. }), "{e:?}");
        let e = t.check_syntax("{{ x | }}").unwrap_err();
        assert!(
            matches!(e, TemplateError::Syntax { line: Some(1), .. }),
            "{e:?}"
        );
    }

    #[test]
    fn loop_controls_are_enabled() {
        assert_eq!(
            render(
                "{% for u in users %}{% if u == 'bob' %}{% break %}{% endif %}{{ u }}{% endfor %}"
            ),
            json!("alice")
        );
    }
}
