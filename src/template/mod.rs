//! Jinja2 templating as Ansible users know it (strict undefined, Ansible filters and tests,
//! native values for single-expression strings), built on minijinja.
//!
//! This folder owns everything between a template string and its value: the environment
//! (`env`), rewriting the source before minijinja sees it (`rewrite`; Python's `/`, `//` and
//! `%`, string formatting included, in `pyops` and `printf`), bare expressions with
//! templates inside string constants (`expr`), conditions as ansible-core 2.19 evaluates them
//! (`condition`), what `fixpoint validate` reads from a template without rendering it
//! (`scan`), naming undefined variables in errors (`undefined`, `error`), filters, Jinja
//! tests, lookups, `now()`, Python-style printing (`pyrepr`) and the JSON/YAML emitters (`output`).
//!
//! What a template renders to is a value, never template or code again: nothing here renders a
//! rendered string a second time, and values marked `!unsafe` (`yaml::mark`) are not rendered
//! at all.
//!
//! It must not know about plays, hosts, connections or variable precedence: the rest of
//! fixpoint hands in a context `Value` (a plain map or a lazily resolving `Object`) and gets
//! back `serde_json::Value`s, strings or bools. Its one dependency inside the crate is the YAML
//! loader (`crate::yaml`), so `from_yaml`/`to_yaml` type scalars as every other YAML source.

mod ast_walk;
mod condition;
mod consts;
mod cross;
mod env;
mod error;
mod expr;
mod file;
mod filters;
mod foreign;
mod inline;
mod jinja_tests;
mod lookups;
mod marked;
mod mutable;
mod now;
mod omit;
mod output;
mod printf;
mod pycmp;
mod pykeys;
mod pymethods;
mod pyops;
mod pyrepr;
mod reads;
mod rewrite;
mod scan;
#[cfg(test)]
mod test_support;
mod timedelta;
mod undefined;
mod value;
mod version;

use std::path::PathBuf;
use std::sync::Arc;

use minijinja::{Environment, Value};
use serde_json::Value as Json;

use crate::yaml::mark;
pub use condition::Verdict;
pub use cross::{CrossRead, FLEET_NAMES};
use env::{build_env, set_search_path};
pub use error::TemplateError;
use error::{label_for_text, syntax_error};
pub(crate) use filters::human_to_bytes;
pub use foreign::{
    is_collection_name, set_foreign, Call as PluginCall, Failure as PluginFailure, Foreign,
    Kind as PluginKind,
};
use inline::Inline;
pub use lookups::{config_refused, fileglob, first_found_file, listing};
pub use marked::Markers;
pub use now::python_local_time;
pub use omit::{is_omit, is_omit_json, omit, OMIT};
use pyrepr::py_str;
use rewrite::{
    block_end, closes_block, escape_backslashes, escape_backslashes_in_code, rewrite_chains,
    rewrite_code,
};
pub use scan::{Problem, Reference, Scan, ScanAs};
use undefined::{convert_error, is_silent_undefined, undefined_result, Source};
pub use value::json_to_value;
use value::value_to_json;

/// A name a context may answer with the names of its variables in the order ansible-core hands
/// them to a lookup (`varnames`, a plugin's `variables`): the engine's scopes give each where it
/// is first defined, from the lowest precedence up. A context that does not answer it has its
/// names sorted.
pub const VARIABLE_ORDER: &str = "__fp_variable_order";

/// A name a context may answer with its trust: a function `(path, text)` telling whether
/// `text`, what the variable path `path` holds, is text the playbook wrote (the engine's scopes:
/// `Scope::trusted_string`). The test `tagged_with('TrustedAsTemplate')` asks it, for a path
/// (`rewrite::mark_tag_tests`); a context that does not answer it trusts nothing.
pub const TRUST_ORACLE: &str = "__fp_trusted";

/// The `template` module's options for rendering a file (see [`Templar::with_file_options`]).
#[derive(Debug, Default, Clone)]
pub struct FileOptions {
    pub trim_blocks: Option<bool>,
    pub lstrip_blocks: Option<bool>,
    /// `block_start_string`, `block_end_string`, `variable_start_string`,
    /// `variable_end_string`, `comment_start_string`, `comment_end_string`.
    pub delimiters: [Option<String>; 6],
}

/// The Jinja2 engine with Ansible's filters, tests and options. Cheap to clone and share.
#[derive(Clone)]
pub struct Templar {
    env: Arc<Environment<'static>>,
    /// The template strings rendered so far, compiled once (see `inline`): for the engine's
    /// templar, not for the ones made from it for a `template` file.
    inline: Option<Arc<Inline>>,
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

impl Templar {
    pub fn new() -> Templar {
        let env = build_env(None);
        Templar {
            inline: Some(Arc::new(Inline::new(&env))),
            env: Arc::new(env),
        }
    }

    /// A templar over `env` that keeps no compiled template strings.
    fn plain(env: Environment<'static>) -> Templar {
        Templar {
            env: Arc::new(env),
            inline: None,
        }
    }

    /// Add a loader for `template` module sources / `{% include %}` relative to given dirs
    /// (searched in order); lookups read relative files from there too.
    pub fn with_search_path(self, dirs: Vec<PathBuf>) -> Templar {
        let mut env = Arc::unwrap_or_clone(self.env);
        set_search_path(&mut env, Some(dirs));
        Templar::plain(env)
    }

    /// The `template` module's rendering options on this engine: `trim_blocks`, `lstrip_blocks`
    /// and the delimiters (`block_start_string`...), each `None` keeping the default. A file's
    /// `#jinja2:` header still overrides them, as in Ansible.
    pub fn with_file_options(&self, o: &FileOptions) -> Result<Templar, TemplateError> {
        let mut env = (*self.env).clone();
        if let Some(v) = o.trim_blocks {
            env.set_trim_blocks(v);
        }
        if let Some(v) = o.lstrip_blocks {
            env.set_lstrip_blocks(v);
        }
        if o.delimiters.iter().any(Option::is_some) {
            let d =
                |i: usize, default: &'static str| o.delimiters[i].clone().unwrap_or(default.into());
            let syntax = minijinja::syntax::SyntaxConfig::builder()
                .block_delimiters(d(0, "{%"), d(1, "%}"))
                .variable_delimiters(d(2, "{{"), d(3, "}}"))
                .comment_delimiters(d(4, "{#"), d(5, "#}"))
                .build()
                .map_err(|e| syntax_error(&e, "the template's delimiters"))?;
            env.set_syntax(syntax);
        }
        Ok(Templar::plain(env))
    }

    /// An engine for text nobody vouches for (the fuzz targets in `fuzz/`): the lookups, which
    /// run commands (`lines`) and read the controller's files, are gone, and a render stops
    /// with an error after `fuel` instructions, so that no input can hang it.
    pub fn untrusted(fuel: u64) -> Templar {
        let mut env = build_env(None);
        for name in ["lookup", "query", "q"] {
            env.remove_global(name);
        }
        env.set_fuel(Some(fuel));
        Templar::plain(env)
    }

    /// True when a string contains `{{`, `{%` or `{#`.
    pub fn is_template(s: &str) -> bool {
        fixpoint_modules::params::is_template(s)
    }

    /// The text inside a string that is, trimmed, exactly one `{{ ... }}` (whether that text is
    /// one expression is for the caller to find out).
    pub fn single_expression_code(s: &str) -> Option<&str> {
        single_expression(s)
    }

    /// Whether `render_value` would change anything in `v`: a template string, an `!unsafe`
    /// mark or a `!vault` value anywhere inside.
    pub fn needs_render(v: &Json) -> bool {
        match v {
            Json::String(s) => Self::is_template(s),
            Json::Array(a) => a.iter().any(Self::needs_render),
            Json::Object(m) => {
                mark::literal_of(v).is_some()
                    || mark::vault_text(v).is_some()
                    || m.keys().any(|k| Self::is_template(k))
                    || m.values().any(Self::needs_render)
            }
            _ => false,
        }
    }

    /// Render one string value. A string that is (trimmed) a single `{{ expr }}` yields the
    /// expression's native value (list, dict, number, bool), as Ansible does for
    /// `loop: "{{ users }}"`; anything else renders to a string. As in ansible-core, a
    /// backslash inside a string constant of a `{{ }}` block is literal (`escape_backslashes`).
    pub fn render_str(&self, s: &str, ctx: &Value) -> Result<Json, TemplateError> {
        self.render_str_as(s, ctx, false)
    }

    /// `render_str` for a term of `with_first_found`: an undefined value inside the list or
    /// mapping a single expression gives is left out (ansible-core keeps it as a marker, which
    /// the lookup drops) instead of failing the render; an undefined result is still an error.
    pub fn render_term_str(&self, s: &str, ctx: &Value) -> Result<Json, TemplateError> {
        self.render_str_as(s, ctx, true)
    }

    fn render_str_as(&self, s: &str, ctx: &Value, omit: bool) -> Result<Json, TemplateError> {
        if !Self::is_template(s) {
            return Ok(Json::String(s.to_string()));
        }
        if let Some(expr) = single_expression(s) {
            let code = rewrite_code(&escape_backslashes_in_code(expr));
            // Not every `{{ ... }}` is one expression (`{{ a }} and {{ b }}` is not): only
            // when the inner text compiles on its own is it evaluated natively.
            if let Ok(compiled) = self.env.compile_expression_owned(code.clone()) {
                let value = compiled.eval(ctx).map_err(|e| {
                    let label = label_for_text(s);
                    convert_error(&self.env, &e, &label, Source::Expression(&code), ctx)
                })?;
                return Ok(match self.finish_native(&value, s, &code, ctx, omit)? {
                    // Text around the expression is kept for strings (`"{{ data }}\n"` in
                    // `content:`), unless whitespace control removes it.
                    Json::String(text) => Json::String(keep_surrounding(s, &text)),
                    // Text left around any other value makes the whole a string, as Jinja2
                    // concatenates more than one output node (its one trailing newline aside).
                    _ if has_text_around(s) => Json::String(self.render_as_text(s, ctx)?),
                    other => other,
                });
            }
        }
        let (text, single) = self.render_as_text_noting_one(s, ctx)?;
        // Statements that print one value and nothing else (`{% set l = [] %}...{{ l }}`): as
        // in ansible-core, whose Jinja2 gives one output node as itself, the value (a string
        // stays the text, its trailing newline included).
        if let Some(v) = single.filter(|v| v.as_str().is_none() && s.contains("{%")) {
            let mut printed = String::new();
            if !(v.is_none() || is_omit(&v)) {
                py_str(&v, &mut printed, 0).map_err(|e| TemplateError::Render {
                    message: e.to_string(),
                    template: label_for_text(s),
                    line: None,
                })?;
            }
            if text.strip_suffix('\n').unwrap_or(&text) == printed {
                return self.finish_native(&v, s, s, ctx, omit);
            }
        }
        Ok(Json::String(text))
    }

    /// A template string rendered as text (the expressions' values printed into it).
    fn render_as_text(&self, s: &str, ctx: &Value) -> Result<String, TemplateError> {
        self.render_as_text_noting_one(s, ctx).map(|(text, _)| text)
    }

    /// `render_as_text`, and the value printed when exactly one was.
    fn render_as_text_noting_one(
        &self,
        s: &str,
        ctx: &Value,
    ) -> Result<(String, Option<Value>), TemplateError> {
        let text = escape_backslashes(s);
        match &self.inline {
            Some(inline) => self.render_inline(inline, &text, s, ctx),
            None => self.render_text_noting_one(&text, &label_for_text(s), ctx),
        }
    }

    /// Recursively render every string in a JSON value (keys of maps too, when templated).
    /// A value marked `!unsafe` is its literal, untouched; a `!vault` value its plain text.
    pub fn render_value(&self, v: &Json, ctx: &Value) -> Result<Json, TemplateError> {
        if let Some(literal) = mark::literal_of(v) {
            return Ok(literal.clone());
        }
        if let Some(text) = mark::vault_text(v) {
            // Decrypted with the run's secrets, a vaulted value is its plain text, never a
            // template (as in ansible-core). When none opens it, it stays vaulted: that is an
            // error only where it is used (`value::used_vault`), as in ansible-core 2.19.
            return Ok(match crate::vault::decrypt_installed(text) {
                Ok(plain) => Json::String(String::from_utf8_lossy(&plain).into_owned()),
                Err(_) => v.clone(),
            });
        }
        match v {
            Json::String(s) => self.render_str(s, ctx),
            // As ansible-core's finalisation: an item or value that renders to `omit` is
            // left out of its list or mapping.
            Json::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    let v = self.render_value(item, ctx)?;
                    if !is_omit_json(&v) || !Self::needs_render(item) {
                        out.push(v);
                    }
                }
                Ok(Json::Array(out))
            }
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
                    let rendered = self.render_value(v, ctx)?;
                    if !is_omit_json(&rendered) || !Self::needs_render(v) {
                        out.insert(key, rendered);
                    }
                }
                Ok(Json::Object(out))
            }
            other => Ok(other.clone()),
        }
    }

    /// A condition evaluated with no value trusted to name an expression, warnings dropped
    /// (the folder's tests; the engine goes through `eval_condition` with its scope).
    #[cfg(test)]
    pub fn eval_bool(&self, expr: &str, ctx: &Value) -> Result<bool, TemplateError> {
        self.eval_condition(expr, ctx, &|_, _| false)
            .map(|v| v.holds)
    }

    /// `debug: var=`'s value: as [`Templar::eval`], but an undefined variable is not an error:
    /// the value is ansible-core 2.19's placeholder for it, `<< error 1 - 'x' is undefined >>`,
    /// worded as ansible-core words it (the first undefined name of a path, or the object that
    /// lacks the attribute), and the message is returned for the task's warning.
    pub fn eval_var(
        &self,
        expr: &str,
        ctx: &Value,
    ) -> Result<(Json, Option<String>), TemplateError> {
        let (name, why) = match self.eval(expr, ctx) {
            Err(TemplateError::Undefined { name, why, .. }) => (name, why),
            other => return other.map(|v| (v, None)),
        };
        let message = why.unwrap_or_else(|| {
            // The first undefined name of the path is the one ansible-core names.
            let mut path = name.as_str();
            while let Some((parent, _, _)) = error::split_path_tail(path) {
                if self.eval(parent, ctx).is_ok() {
                    break;
                }
                path = parent;
            }
            match error::split_path_tail(path) {
                Some((parent, key, subscript)) => {
                    let parent = self.eval(parent, ctx).ok();
                    let kind = parent.as_ref().map_or("NoneType", |p| match p {
                        Json::Object(_) => "dict",
                        Json::Array(_) => "list",
                        Json::String(_) => "str",
                        Json::Number(n) if n.is_f64() => "float",
                        Json::Number(_) => "int",
                        Json::Bool(_) => "bool",
                        Json::Null => "NoneType",
                    });
                    let key = if subscript && key.parse::<i64>().is_ok() {
                        key.to_string()
                    } else {
                        format!("'{key}'")
                    };
                    format!("object of type '{kind}' has no attribute {key}")
                }
                None => format!("'{path}' is undefined"),
            }
        });
        Ok((
            Json::String(format!("<< error 1 - {message} >>")),
            Some(message),
        ))
    }

    /// Evaluate a bare expression to a value (`debug: var=`). A whole `{{ expr }}` is read as
    /// `expr`; templates inside string constants render to values (see `expr`); the text is
    /// never rendered and then evaluated.
    pub fn eval(&self, expr: &str, ctx: &Value) -> Result<Json, TemplateError> {
        let trimmed = expr.trim();
        if trimmed.is_empty() {
            return Err(TemplateError::Syntax {
                message: "empty expression".into(),
                template: label_for_text(expr),
                line: None,
            });
        }
        let code = match single_expression(trimmed) {
            Some(inner) if self.env.compile_expression(inner).is_ok() => inner,
            _ => trimmed,
        };
        let value = self.eval_expr(code, expr, ctx, &mut Vec::new())?;
        self.finish_native(&value, expr, code, ctx, false)
    }

    /// The string a Jinja string constant (`'it\'s {{ x }}'`, quotes included) stands for.
    fn literal_text(&self, literal: &str) -> Result<String, TemplateError> {
        let label = label_for_text(literal);
        let compiled = self
            .env
            .compile_expression_owned(literal.to_string())
            .map_err(|e| syntax_error(&e, &label))?;
        let v = compiled.eval(()).map_err(|e| syntax_error(&e, &label))?;
        Ok(v.as_str().unwrap_or_default().to_string())
    }

    /// Check a template's syntax without rendering (for `fixpoint validate`).
    pub fn check_syntax(&self, s: &str) -> Result<(), TemplateError> {
        let env: &Environment<'_> = &self.env;
        env.template_from_named_str("<check>", s)
            .map(|_| ())
            .map_err(|e| syntax_error(&e, &label_for_text(s)))
    }

    /// `render_text` of a template string (`text`, from `original`) with its compiled form kept
    /// for the next render of the same string; errors name it as `render_text` does.
    fn render_inline(
        &self,
        inline: &Inline,
        text: &str,
        original: &str,
        ctx: &Value,
    ) -> Result<(String, Option<Value>), TemplateError> {
        let Some((code, tmpl)) = inline.get(text) else {
            return self.render_text_noting_one(text, &label_for_text(original), ctx);
        };
        let tmpl = tmpl.map_err(|e| syntax_error(&e, &label_for_text(original)))?;
        tmpl.render_captured(ctx)
            .map(|c| {
                let one = only_printed(c.state());
                (c.into_output(), one)
            })
            .map_err(|e| {
                let label = label_for_text(original);
                convert_error(inline.env(), &e, &label, Source::Template(&code), ctx)
            })
    }

    /// Renders template text to a string under the given error label.
    fn render_text(&self, s: &str, label: &str, ctx: &Value) -> Result<String, TemplateError> {
        self.render_text_noting_one(s, label, ctx)
            .map(|(text, _)| text)
    }

    /// `render_text`, and the value printed when exactly one was.
    fn render_text_noting_one(
        &self,
        s: &str,
        label: &str,
        ctx: &Value,
    ) -> Result<(String, Option<Value>), TemplateError> {
        let code = rewrite_chains(s);
        let env: &Environment<'_> = &self.env;
        let tmpl = env
            .template_from_named_str(label, &code)
            .map_err(|e| syntax_error(&e, label))?;
        tmpl.render_captured(ctx)
            .map(|c| {
                let one = only_printed(c.state());
                (c.into_output(), one)
            })
            .map_err(|e| convert_error(&self.env, &e, label, Source::Template(&code), ctx))
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
            .map_err(|e| convert_error(&self.env, &e, &label, Source::Expression(code), ctx))
    }

    /// Converts an evaluated expression to JSON; undefined anywhere in it is an error, as
    /// printing it would be. `original` is the text evaluated, named in errors (the label is
    /// made only for an error: it costs more than many a successful render).
    fn finish_native(
        &self,
        value: &Value,
        original: &str,
        code: &str,
        ctx: &Value,
        omit_undefined: bool,
    ) -> Result<Json, TemplateError> {
        if is_silent_undefined(&self.env, value) {
            // `{{ x if x is defined }}` with no `else`: prints as "" in a template too.
            return Ok(Json::String(String::new()));
        }
        if value.is_undefined() {
            return Err(undefined_result(
                &self.env,
                &label_for_text(original),
                code,
                ctx,
            ));
        }
        let json = if omit_undefined {
            value::value_to_json_omitting_undefined(value)
        } else {
            value_to_json(value)
        };
        json.map_err(|e| {
            let label = label_for_text(original);
            convert_error(&self.env, &e, &label, Source::Expression(code), ctx)
        })
    }
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

/// The value a finished render printed, when it printed exactly one (`env`'s formatter counts).
fn only_printed(state: &minijinja::State<'_, '_>) -> Option<Value> {
    match state.get_temp(env::EMITS)?.as_usize()? {
        1 => state.get_temp(env::EMITTED),
        _ => None,
    }
}

/// Whether a single `{{ expr }}` keeps text around it in Jinja2's output: whitespace that
/// whitespace control does not strip, beyond the one trailing newline Jinja2 drops.
fn has_text_around(s: &str) -> bool {
    let around = keep_surrounding(s, "");
    let around = around
        .strip_suffix("\r\n")
        .or_else(|| around.strip_suffix('\n'))
        .filter(|_| s.ends_with('\n'))
        .unwrap_or(&around);
    !around.is_empty()
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

#[cfg(test)]
mod tests;
