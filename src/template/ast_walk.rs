//! Walking a template's syntax tree (minijinja's own parser, `machinery::parse`) to rewrite
//! its text in place: the rewrites that need to know what an expression *is* (`pyops`'s
//! operators, `consts`'s lookup terms) find it here and edit its span, keeping every line.

use minijinja::machinery::ast::{CallArg, Expr, Stmt};
use minijinja::machinery::{parse, Span, WhitespaceConfig};
use minijinja::syntax::SyntaxConfig;

/// A template's syntax tree, None when it does not parse (the compiler then reports why).
pub(super) fn parse_template(src: &str) -> Option<Stmt<'_>> {
    parse(
        src,
        "<template>",
        SyntaxConfig::default(),
        WhitespaceConfig::default(),
    )
    .ok()
}

/// Calls `f` on each expression a statement holds (its own, then those of its body), outermost
/// expressions only: `f` descends into them itself.
pub(super) fn each_expr<'a>(s: &Stmt<'a>, f: &mut dyn FnMut(&Expr<'a>)) {
    let all = |list: &[Stmt<'a>], f: &mut dyn FnMut(&Expr<'a>)| {
        for s in list {
            each_expr(s, f);
        }
    };
    let args = |list: &[CallArg<'a>], f: &mut dyn FnMut(&Expr<'a>)| {
        for a in list {
            let (CallArg::Pos(x)
            | CallArg::Kwarg(_, x)
            | CallArg::PosSplat(x)
            | CallArg::KwargSplat(x)) = a;
            f(x);
        }
    };
    match s {
        Stmt::Template(t) => all(&t.children, f),
        Stmt::EmitExpr(x) => f(&x.expr),
        Stmt::EmitRaw(_) | Stmt::Continue(_) | Stmt::Break(_) => {}
        Stmt::ForLoop(l) => {
            f(&l.iter);
            if let Some(filter) = &l.filter_expr {
                f(filter);
            }
            all(&l.body, f);
            all(&l.else_body, f);
        }
        Stmt::IfCond(c) => {
            f(&c.expr);
            all(&c.true_body, f);
            all(&c.false_body, f);
        }
        Stmt::WithBlock(w) => {
            for (_, value) in &w.assignments {
                f(value);
            }
            all(&w.body, f);
        }
        Stmt::Set(x) => f(&x.expr),
        Stmt::SetBlock(x) => {
            if let Some(filter) = &x.filter {
                f(filter);
            }
            all(&x.body, f);
        }
        Stmt::AutoEscape(x) => {
            f(&x.enabled);
            all(&x.body, f);
        }
        Stmt::FilterBlock(x) => {
            f(&x.filter);
            all(&x.body, f);
        }
        Stmt::Block(x) => all(&x.body, f),
        Stmt::Import(x) => f(&x.expr),
        Stmt::FromImport(x) => f(&x.expr),
        Stmt::Extends(x) => f(&x.name),
        Stmt::Include(x) => f(&x.name),
        Stmt::Macro(m) => {
            for default in &m.defaults {
                f(default);
            }
            all(&m.body, f);
        }
        Stmt::CallBlock(c) => {
            f(&c.call.expr);
            args(&c.call.args, f);
            for default in &c.macro_decl.defaults {
                f(default);
            }
            all(&c.macro_decl.body, f);
        }
        Stmt::Do(x) => {
            f(&x.call.expr);
            args(&x.call.args, f);
        }
    }
}

/// One change to the source: `range` replaced by `text`. `rank` orders the changes made at
/// one offset: closing parentheses (inner first), then the operator, then opening calls
/// (outer first).
pub(super) struct Edit {
    pub(super) range: std::ops::Range<usize>,
    pub(super) text: String,
    pub(super) rank: (u8, i64),
}

/// `src` with `edits` made; None when there are none.
pub(super) fn apply(src: &str, mut edits: Vec<Edit>) -> Option<String> {
    if edits.is_empty() {
        return None;
    }
    edits.sort_by_key(|e| (e.range.start, e.rank));
    let mut out = String::with_capacity(src.len() + edits.len() * 12);
    let mut last = 0;
    for e in edits {
        out.push_str(src.get(last..e.range.start)?);
        out.push_str(&e.text);
        last = e.range.end;
    }
    out.push_str(src.get(last..)?);
    Some(out)
}

pub(super) fn span_of(x: &Expr<'_>) -> Span {
    match x {
        Expr::Var(n) => n.span(),
        Expr::Const(n) => n.span(),
        Expr::Slice(n) => n.span(),
        Expr::UnaryOp(n) => n.span(),
        Expr::BinOp(n) => n.span(),
        Expr::Compare(n) => n.span(),
        Expr::IfExpr(n) => n.span(),
        Expr::Filter(n) => n.span(),
        Expr::Test(n) => n.span(),
        Expr::GetAttr(n) => n.span(),
        Expr::GetItem(n) => n.span(),
        Expr::Call(n) => n.span(),
        Expr::List(n) => n.span(),
        Expr::Map(n) => n.span(),
    }
}

/// An expression's operands, arguments and items.
pub(super) fn children<'x, 'a>(x: &'x Expr<'a>) -> Vec<&'x Expr<'a>> {
    let mut out: Vec<&'x Expr<'a>> = Vec::new();
    let push_args = |args: &'x [CallArg<'a>], out: &mut Vec<&'x Expr<'a>>| {
        for a in args {
            let (CallArg::Pos(x)
            | CallArg::Kwarg(_, x)
            | CallArg::PosSplat(x)
            | CallArg::KwargSplat(x)) = a;
            out.push(x);
        }
    };
    match x {
        Expr::Var(_) | Expr::Const(_) => {}
        Expr::Slice(s) => {
            out.push(&s.expr);
            out.extend([&s.start, &s.stop, &s.step].into_iter().flatten());
        }
        Expr::UnaryOp(u) => out.push(&u.expr),
        Expr::BinOp(b) => out.extend([&b.left, &b.right]),
        Expr::Compare(c) => {
            out.push(&c.expr);
            out.extend(c.ops.iter().map(|op| &op.expr));
        }
        Expr::IfExpr(i) => {
            out.extend([&i.test_expr, &i.true_expr]);
            out.extend(&i.false_expr);
        }
        Expr::Filter(f) => {
            out.extend(&f.expr);
            push_args(&f.args, &mut out);
        }
        Expr::Test(t) => {
            out.push(&t.expr);
            push_args(&t.args, &mut out);
        }
        Expr::GetAttr(g) => out.push(&g.expr),
        Expr::GetItem(g) => out.extend([&g.expr, &g.subscript_expr]),
        Expr::Call(c) => {
            out.push(&c.expr);
            push_args(&c.args, &mut out);
        }
        Expr::List(l) => out.extend(&l.items),
        Expr::Map(m) => out.extend(m.keys.iter().chain(&m.values)),
    }
    out
}

/// Where an expression's text starts and ends. A node's own span may start late (a filter's
/// at its name, a chained attribute's at the dot before it), so its operands count too.
pub(super) fn extent(x: &Expr<'_>) -> (usize, usize) {
    let s = span_of(x);
    children(x).into_iter().map(extent).fold(
        (s.start_offset as usize, s.end_offset as usize),
        |(a, b), (c, d)| (a.min(c), b.max(d)),
    )
}
