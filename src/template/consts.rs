//! Templates written inside the string constants of a lookup's terms:
//! `{{ lookup('pipe', 'echo {{ x }}') }}` runs `echo` with `x`'s value, as ansible-core 2.19
//! does for backward compatibility (with a deprecation warning; the feature is due to go in
//! 2.23).
//!
//! ansible-core tags each template-looking string constant of a template and, when a lookup is
//! called, renders those of its positional terms (at the top, or inside a list, tuple or dict
//! value written there) before the plugin sees them. Nothing else is rendered: not the
//! lookup's name, not a keyword argument, not a constant anywhere else, not a value computed
//! from a constant (`'{{ x }}' ~ 'a'`, `'{{ x }}' | upper`: the tag does not survive), and never
//! a value a variable or a host gave. Here the same is decided from the template's text, by
//! minijinja's parser: such a constant is wrapped in a call of `__fp_lookup_const`, which
//! renders it in the variables of the expression that holds it. A bare expression (a
//! condition) renders every such constant already (`expr.rs`), so it has none left to wrap.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use minijinja::machinery::ast::{CallArg, Expr};
use minijinja::machinery::parse_expr;
use minijinja::{Error, ErrorKind, State, Value};
use regex::Regex;

use super::ast_walk::{apply, children, each_expr, parse_template, span_of, Edit};
use super::lookups::native;
use super::rewrite::rewrite_chains;
use super::undefined::{convert_error, NamedUndefined, Source};
use super::{Templar, TemplateError};

/// The helper a lookup term's template-bearing constant is wrapped in.
pub(super) const CONST_FN: &str = "__fp_lookup_const";

/// A call of `lookup`, `query` or `q` somewhere in the text: most templates have none and are
/// not parsed for this.
fn calls_lookup(src: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"(?-u:\b)(?:lookup|query|q)\s*\(").expect("valid regex"))
        .is_match(src)
}

/// The template `src` with its lookup terms' template-bearing constants wrapped; None when it
/// has none (or does not parse: the compiler then reports why).
pub(super) fn rewrite_template(src: &str) -> Option<String> {
    // One `{{`/`{%` opens the block the call is in; a constant with a template needs another.
    let opens = src.matches("{{").count() + src.matches("{%").count();
    if opens < 2 || !calls_lookup(src) {
        return None;
    }
    let ast = parse_template(src)?;
    let mut edits = Vec::new();
    each_expr(&ast, &mut |x| find_calls(x, src, &mut edits));
    apply(src, edits)
}

/// The same for a bare expression (the inside of a template that is one `{{ expr }}`).
pub(super) fn rewrite_expr(code: &str) -> Option<String> {
    if !Templar::is_template(code) || !calls_lookup(code) {
        return None;
    }
    let ast = parse_expr(code).ok()?;
    let mut edits = Vec::new();
    find_calls(&ast, code, &mut edits);
    apply(code, edits)
}

/// Each call of a lookup in `x`: its positional terms (the plugin's name aside) are searched.
fn find_calls(x: &Expr<'_>, src: &str, edits: &mut Vec<Edit>) {
    if let Expr::Call(call) = x {
        if matches!(&call.expr, Expr::Var(v) if matches!(v.id, "lookup" | "query" | "q")) {
            let positional = call.args.iter().filter_map(|a| match a {
                CallArg::Pos(term) => Some(term),
                _ => None,
            });
            for term in positional.skip(1) {
                wrap_constants(term, src, edits);
            }
        }
    }
    for child in children(x) {
        find_calls(child, src, edits);
    }
}

/// Wraps the template-bearing string constants that reach the plugin as they are: the term
/// itself, the items of a list or tuple and the values of a dict written as the term, and the
/// branches of a conditional expression (Python hands on the constant itself, tag and all).
fn wrap_constants(term: &Expr<'_>, src: &str, edits: &mut Vec<Edit>) {
    match term {
        Expr::Const(c) if c.value.as_str().is_some_and(Templar::is_template) => {
            let span = span_of(term);
            let (start, end) = (span.start_offset as usize, span.end_offset as usize);
            // Only a constant written as one quoted string: the span must be its text.
            let quoted = src.get(start..end).is_some_and(|t| {
                t.len() >= 2 && (t.starts_with('\'') || t.starts_with('"')) && t.ends_with(&t[..1])
            });
            if quoted {
                edits.push(Edit {
                    range: start..start,
                    text: format!("{CONST_FN}("),
                    rank: (1, 0),
                });
                edits.push(Edit {
                    range: end..end,
                    text: ")".to_string(),
                    rank: (0, 0),
                });
            }
        }
        Expr::List(l) => l.items.iter().for_each(|x| wrap_constants(x, src, edits)),
        Expr::Map(m) => m.values.iter().for_each(|x| wrap_constants(x, src, edits)),
        Expr::IfExpr(i) => {
            wrap_constants(&i.true_expr, src, edits);
            if let Some(x) = &i.false_expr {
                wrap_constants(x, src, edits);
            }
        }
        _ => {}
    }
}

/// `__fp_lookup_const(text)`: the constant's template rendered in the variables of the
/// expression that holds it, natively (`'{{ [1, 2] }}'` is a list) as ansible-core renders it.
/// Only the variables the template names are read, so no other is rendered for it.
pub(super) fn render_const(state: &State, text: String) -> Result<Value, Error> {
    let name = "<a lookup term>";
    let code = rewrite_chains(&text);
    let env = state.env();
    let tmpl = env.template_from_named_str(name, &code)?;
    let mut vars = BTreeMap::new();
    for var in tmpl.undeclared_variables(false) {
        if let Some(v) = state.lookup(&var) {
            vars.insert(var, v);
        }
    }
    let vars = Value::from(vars);
    let rendered = match native::single_value(env, name, &code, &vars, true) {
        Ok(Some(v)) => Ok(v),
        Ok(None) => tmpl.render(&vars).map(Value::from),
        Err(e) => Err(e),
    };
    rendered.map_err(
        |e| match convert_error(env, &e, name, Source::Template(&code), &vars) {
            // Named here, where the template's text is known: the caller sees only the call.
            TemplateError::Undefined { name, .. } => {
                Error::new(ErrorKind::UndefinedError, format!("'{name}' is undefined"))
                    .with_source(NamedUndefined(name))
            }
            _ => e,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::{rewrite_expr, rewrite_template};

    #[test]
    fn only_lookup_terms_are_wrapped() {
        assert_eq!(
            rewrite_expr("lookup('pipe', 'echo {{ x }}') == 'a'").unwrap(),
            "lookup('pipe', __fp_lookup_const('echo {{ x }}')) == 'a'"
        );
        assert_eq!(
            rewrite_expr("q('t', ['{{ a }}', {'k': \"{{ b }}\"}], kw='{{ c }}')").unwrap(),
            "q('t', [__fp_lookup_const('{{ a }}'), {'k': __fp_lookup_const(\"{{ b }}\")}], kw='{{ c }}')"
        );
        assert_eq!(
            rewrite_template("{{ query('t', 'a' if x else '{{ y }}') }}").unwrap(),
            "{{ query('t', 'a' if x else __fp_lookup_const('{{ y }}')) }}"
        );
        // The plugin's name, a computed value and a constant outside a lookup stay as written.
        assert_eq!(rewrite_expr("lookup('{{ \"pipe\" }}')"), None);
        assert_eq!(
            rewrite_expr("lookup('t', '{{ x }}' ~ 'a', '{{ y }}' | upper)"),
            None
        );
        assert_eq!(rewrite_template("{{ ['{{ x }}'] }}"), None);
        assert_eq!(rewrite_template("{{ lookup('env', 'HOME') }}"), None);
    }
}
