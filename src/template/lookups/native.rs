//! The value of a `template` lookup whose template is one expression: ansible-core 2.19
//! renders templates natively, so a template whose output is a single node (one `{{ expr }}`,
//! around only macro and `set` definitions, once `trim_blocks` and the final newline have
//! taken their whitespace) gives that expression's value (`{{ x }}` → 42, a dict stays a dict),
//! where any more output is joined into a string.

use minijinja::machinery::{ast, parse, WhitespaceConfig};
use minijinja::syntax::SyntaxConfig;
use minijinja::{Environment, Error, Value};

/// The variable the template's one expression is set to, to read it back.
const SLOT: &str = "__fixpoint_native_value";

/// The value of `code` (default delimiters) when it is a single expression, evaluated with
/// `vars` in `env`; None when the template has more output (or does not parse: rendering it
/// reports why).
pub(in crate::template) fn single_value(
    env: &Environment<'_>,
    name: &str,
    code: &str,
    vars: &Value,
    trim_blocks: bool,
) -> Result<Option<Value>, Error> {
    let ws = WhitespaceConfig {
        keep_trailing_newline: false,
        lstrip_blocks: false,
        trim_blocks,
    };
    let Ok(ast::Stmt::Template(t)) = parse(code, name, SyntaxConfig::default(), ws) else {
        return Ok(None);
    };
    let mut emit = None;
    for child in &t.children {
        match child {
            ast::Stmt::Macro(_) | ast::Stmt::Set(_) => {}
            ast::Stmt::EmitRaw(r) if r.raw.is_empty() => {}
            ast::Stmt::EmitExpr(e) if emit.is_none() => emit = Some(e),
            _ => return Ok(None),
        }
    }
    let Some(e) = emit else {
        return Ok(None);
    };
    // The tag `{{ expr }}` becomes `{% set slot = (expr) %}`: the template's macros and sets
    // stay in scope, and the value is read from the state the template leaves. A call of a
    // macro of the template that takes no arguments and whose body is one expression is that
    // expression (ansible-core renders the macro natively too; here its output is text).
    let value_expr = single_expression_macro(&t.children, &e.expr).unwrap_or(e);
    let Some(expr) = expr_text(code, value_expr) else {
        return Ok(None);
    };
    let span = e.span();
    let (start, end) = (span.start_offset as usize, span.end_offset as usize);
    let Some(close) = code.get(end..).and_then(|rest| rest.find("}}")) else {
        return Ok(None);
    };
    let rewritten = format!(
        "{}{{% set {SLOT} = ({expr}) %}}{}",
        &code[..start],
        &code[end + close + 2..]
    );
    let tmpl = env.template_from_named_str(name, &rewritten)?;
    let captured = tmpl.render_captured(vars)?;
    Ok(captured.state().lookup(SLOT))
}

/// The expression of a `{{ expr }}` tag, as written.
fn expr_text<'c>(code: &'c str, e: &ast::Spanned<ast::EmitExpr<'_>>) -> Option<&'c str> {
    let span = e.span();
    let text = code.get(span.start_offset as usize + 2..span.end_offset as usize)?;
    Some(text.trim_start_matches(['-', '+']))
}

/// The one expression of the body of the macro `expr` calls, when `expr` calls, without
/// arguments, a macro of `children` that takes none.
fn single_expression_macro<'a, 's>(
    children: &'a [ast::Stmt<'s>],
    expr: &ast::Expr<'_>,
) -> Option<&'a ast::Spanned<ast::EmitExpr<'s>>> {
    let ast::Expr::Call(call) = expr else {
        return None;
    };
    let ast::Expr::Var(var) = &call.expr else {
        return None;
    };
    if !call.args.is_empty() {
        return None;
    }
    children.iter().find_map(|c| match c {
        ast::Stmt::Macro(m) if m.name == var.id && m.args.is_empty() => {
            let mut emits = m.body.iter().filter(|s| match s {
                ast::Stmt::EmitRaw(r) => !r.raw.is_empty(),
                ast::Stmt::Macro(_) | ast::Stmt::Set(_) => false,
                _ => true,
            });
            match (emits.next(), emits.next()) {
                (Some(ast::Stmt::EmitExpr(b)), None) => Some(b),
                _ => None,
            }
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(code: &str) -> Option<Value> {
        let env = Environment::new();
        let vars = Value::from_serialize(serde_json::json!({"x": 42}));
        single_value(&env, "t.j2", code, &vars, true).unwrap()
    }

    #[test]
    fn one_expression_is_its_value_and_more_output_is_left_to_rendering() {
        assert_eq!(value("{{ x }}\n"), Some(Value::from(42)));
        assert_eq!(
            value("{% set y = x + 1 %}\n{{ [y] }}"),
            Some(Value::from(vec![43]))
        );
        let m = value("{% macro m() %}{{ {'a': x} }}{% endmacro %}\n{{ m() }}\n").unwrap();
        assert_eq!(m.get_attr("a").unwrap(), Value::from(42));
        assert_eq!(value("[1, {{ x }}]\n"), None);
        assert_eq!(value("{{ x }} {{ x }}"), None);
        assert_eq!(value("{% if x %}{{ x }}{% endif %}"), None);
    }
}
