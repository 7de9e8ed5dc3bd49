//! Python's `/`, `//` and `%` where minijinja's differ (and the ordering comparisons, whose
//! helpers are `pycmp`'s): under Jinja2 (ansible-core), `%` with a
//! string on the left formats it (`'%s/x' % dir`, `printf.rs`), a zero divisor raises
//! ZeroDivisionError (minijinja's `1 / 0` is an infinity), and `//` and `%` round toward
//! negative infinity (minijinja's are Euclid's: `7 // -2` is -3, Python's -4).
//!
//! minijinja has no hook for its operators, so each of these three is found by minijinja's
//! own parser (`machinery::parse`, the parser the template is then compiled with) and its text
//! rewritten to a call of a helper: `a % b` becomes `__fp_mod(a , b)` (`, true)` when `b` is
//! written as a tuple, `(x, y)`, whose items are then the format's arguments). Lines are kept,
//! so errors name the right one. Only the operators change: each operand's text is left as
//! written, so the other rewrites (`rewrite.rs`) and the undefined names of errors still apply.

use std::fmt;

use minijinja::machinery::ast::{BinOpKind, Expr};
use minijinja::machinery::parse_expr;
use minijinja::value::{Rest, ValueKind};
use minijinja::{Error, ErrorKind, Value};

use super::ast_walk::{apply, children, each_expr, extent, parse_template, Edit};
use super::pycmp::Op;
use super::timedelta;

/// The helpers the operators are rewritten to.
pub(super) const MOD_FN: &str = "__fp_mod";
pub(super) const DIV_FN: &str = "__fp_div";
pub(super) const FLOORDIV_FN: &str = "__fp_floordiv";

/// An exception Python raises while evaluating an expression (ZeroDivisionError, the format's
/// TypeError), carried as the source of minijinja's error so that the message is worded as
/// ansible-core's ("Error rendering template: division by zero", `error.rs`).
#[derive(Debug)]
pub(super) struct Raised(pub(super) String);

impl fmt::Display for Raised {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Raised {}

pub(super) fn raised(message: &str) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.to_string()).with_source(Raised(message.into()))
}

/// The message of a Python exception somewhere in an error's chain.
pub(super) fn raised_message(err: &Error) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(r) = e.downcast_ref::<Raised>() {
            return Some(r.0.clone());
        }
        cur = e.source();
    }
    None
}

/// A Python number: `bool` is an `int`, as in Python.
#[derive(Clone, Copy)]
pub(super) enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    pub(super) fn of(v: &Value) -> Option<Num> {
        match v.kind() {
            ValueKind::Bool => Some(Num::Int(i128::from(v.is_true()))),
            ValueKind::Number if v.is_integer() => i128::try_from(v.clone()).ok().map(Num::Int),
            ValueKind::Number => f64::try_from(v.clone()).ok().map(Num::Float),
            _ => None,
        }
    }

    pub(super) fn float(self) -> f64 {
        match self {
            Num::Int(n) => n as f64,
            Num::Float(f) => f,
        }
    }
}

/// Python's name of a value's type, for its TypeError messages: `type_debug`'s.
pub(super) fn py_type(v: &Value) -> &'static str {
    super::filters::types::filter_type_debug(v)
}

/// Both operands as numbers, or Python's TypeError for `op`; an undefined operand is the
/// undefined error, so that the variable is named.
fn operands(a: &Value, b: &Value, op: &str) -> Result<(Num, Num), Error> {
    if a.is_undefined() || b.is_undefined() {
        return Err(Error::from(ErrorKind::UndefinedError));
    }
    match (Num::of(a), Num::of(b)) {
        (Some(x), Some(y)) => Ok((x, y)),
        _ => Err(raised(&format!(
            "unsupported operand type(s) for {op}: '{}' and '{}'",
            py_type(a),
            py_type(b)
        ))),
    }
}

fn overflow() -> Error {
    raised("integer overflow")
}

/// `a / b`: true division.
pub(super) fn div(a: &Value, b: &Value) -> Result<Value, Error> {
    let (x, y) = operands(a, b, "/")?;
    match (x, y) {
        (Num::Int(_), Num::Int(0)) => Err(raised("division by zero")),
        (_, y) if y.float() == 0.0 => Err(raised("float division by zero")),
        (x, y) => Ok(Value::from(x.float() / y.float())),
    }
}

/// `a // b`: division rounded toward negative infinity.
pub(super) fn floordiv(a: &Value, b: &Value) -> Result<Value, Error> {
    match operands(a, b, "//")? {
        (Num::Int(_), Num::Int(0)) => Err(raised("integer division or modulo by zero")),
        (Num::Int(x), Num::Int(y)) => {
            let q = x.checked_div(y).ok_or_else(overflow)?;
            let floor = if x % y != 0 && ((x < 0) != (y < 0)) {
                q - 1
            } else {
                q
            };
            Ok(Value::from(floor))
        }
        (x, y) => {
            let (x, y) = (x.float(), y.float());
            if y == 0.0 {
                return Err(raised("float floor division by zero"));
            }
            Ok(Value::from(float_divmod(x, y).0))
        }
    }
}

/// `a % b`: a string on the left is formatted with `b` (`tuple`: `b` was written as a
/// tuple); numbers take the remainder with the divisor's sign, as Python does.
pub(super) fn rem(a: &Value, b: &Value, tuple: Option<bool>) -> Result<Value, Error> {
    if let Some(fmt) = a.as_str() {
        return super::printf::format(fmt, b, tuple.unwrap_or(false)).map(Value::from);
    }
    match operands(a, b, "%")? {
        (Num::Int(_), Num::Int(0)) => Err(raised("integer modulo by zero")),
        (Num::Int(x), Num::Int(y)) => {
            let r = x.checked_rem(y).ok_or_else(overflow)?;
            Ok(Value::from(if r != 0 && ((r < 0) != (y < 0)) {
                r + y
            } else {
                r
            }))
        }
        (x, y) => {
            let (x, y) = (x.float(), y.float());
            if y == 0.0 {
                return Err(raised("float modulo"));
            }
            Ok(Value::from(float_divmod(x, y).1))
        }
    }
}

/// Jinja2's `sum(attribute=None, start=0)`: Python's `sum`, `start` plus each item (by its
/// `attribute`, a dotted path) with Python's `+`: numbers add, lists concatenate, and anything
/// else fails with Python's TypeError (minijinja's sums numbers only, and takes no `start`).
pub(super) fn sum(value: &Value, args: Rest<Value>) -> Result<Value, Error> {
    let mut bound = super::pycmp::bind("sum", &args, &["attribute", "start"])?.into_iter();
    let attribute = bound.next().flatten();
    let mut total = bound.next().flatten().unwrap_or(Value::from(0));
    if total.kind() == ValueKind::String {
        return Err(raised("sum() can't sum strings [use ''.join(seq) instead]"));
    }
    for item in super::value::defined(value)?.try_iter()? {
        let item = super::filters::collections::jinja_key(&item, attribute.as_ref(), Some(true))?;
        total = add(&total, &item)?;
    }
    Ok(total)
}

/// Python's `a + b` for what `sum` adds.
fn add(a: &Value, b: &Value) -> Result<Value, Error> {
    if a.is_undefined() || b.is_undefined() {
        return Err(Error::from(ErrorKind::UndefinedError));
    }
    match (Num::of(a), Num::of(b), a.kind()) {
        (Some(Num::Int(x)), Some(Num::Int(y)), _) => {
            Ok(Value::from(x.checked_add(y).ok_or_else(overflow)?))
        }
        (Some(x), Some(y), _) => Ok(Value::from(x.float() + y.float())),
        (_, _, ValueKind::Seq) if b.kind() == ValueKind::Seq => Ok(Value::from(
            a.try_iter()?.chain(b.try_iter()?).collect::<Vec<_>>(),
        )),
        (_, _, ValueKind::Seq) => Err(raised(&format!(
            "can only concatenate list (not \"{}\") to list",
            py_type(b)
        ))),
        _ => Err(raised(&format!(
            "unsupported operand type(s) for +: '{}' and '{}'",
            py_type(a),
            py_type(b)
        ))),
    }
}

/// CPython's `float_divmod`: the floored quotient and the remainder with the divisor's sign.
fn float_divmod(x: f64, y: f64) -> (f64, f64) {
    let mut m = x % y;
    let mut d = (x - m) / y;
    if m != 0.0 {
        if (y < 0.0) != (m < 0.0) {
            m += y;
            d -= 1.0;
        }
    } else {
        m = 0.0_f64.copysign(y);
    }
    let q = if d != 0.0 {
        let f = d.floor();
        if d - f > 0.5 {
            f + 1.0
        } else {
            f
        }
    } else {
        0.0_f64.copysign(x / y)
    };
    (q, m)
}

/// The template `src` with its `/`, `//` and `%` rewritten to the helpers; None when it has
/// none or does not parse (the compiler then reports the error, on the text as written).
pub(super) fn rewrite_template(src: &str) -> Option<String> {
    let ast = parse_template(src)?;
    let mut edits = Vec::new();
    let dates = timedelta::makes_dates(src);
    each_expr(&ast, &mut |x| expr(x, src, 0, dates, &mut edits));
    apply(src, edits)
}

/// The same for a bare expression.
pub(super) fn rewrite_expr(code: &str) -> Option<String> {
    let ast = parse_expr(code).ok()?;
    let mut edits = Vec::new();
    expr(&ast, code, 0, timedelta::makes_dates(code), &mut edits);
    apply(code, edits)
}

/// Whether code (string constants aside, `masked`) holds an operator this module rewrites
/// (`-` only when its template makes datetimes, `dates`): most templates have none and are not
/// parsed twice.
pub(super) fn has_operator(masked: &str, dates: bool) -> bool {
    masked.contains(['%', '/', '<', '>'])
        || masked.contains("**")
        || (dates && masked.contains('-'))
}

/// `dates`: the template makes datetimes, so `-` may subtract two (`timedelta`).
fn expr(x: &Expr<'_>, src: &str, d: i64, dates: bool, edits: &mut Vec<Edit>) {
    let mut depth = d;
    if let Expr::BinOp(b) = x {
        let helper = match b.op {
            BinOpKind::Pow => Some((timedelta::POW_FN, "**")),
            BinOpKind::Sub if dates => Some((timedelta::SUB_FN, "-")),
            BinOpKind::Rem => Some((MOD_FN, "%")),
            BinOpKind::Div => Some((DIV_FN, "/")),
            BinOpKind::FloorDiv => Some((FLOORDIV_FN, "//")),
            BinOpKind::Lt => Some((Op::Lt.helper(), "<")),
            BinOpKind::Lte => Some((Op::Le.helper(), "<=")),
            BinOpKind::Gt => Some((Op::Gt.helper(), ">")),
            BinOpKind::Gte => Some((Op::Ge.helper(), ">=")),
            _ => None,
        };
        if let Some((helper, op)) = helper {
            binop(x, &b.left, &b.right, helper, op, src, d, edits);
        }
        depth += 1;
    }
    for child in children(x) {
        expr(child, src, depth, dates, edits);
    }
}

/// `left op right` (the whole in `whole`) → `helper(left , right)`. Between the operands'
/// spans there is only the operator, blanks and the parentheses of a parenthesized operand;
/// anything else (a span that is not the text's) leaves the operator to minijinja.
#[allow(clippy::too_many_arguments)]
fn binop(
    whole: &Expr<'_>,
    left: &Expr<'_>,
    right: &Expr<'_>,
    helper: &str,
    op: &str,
    src: &str,
    depth: i64,
    edits: &mut Vec<Edit>,
) {
    let end = extent(whole).1;
    let (gap_start, gap_end) = (extent(left).1, extent(right).0);
    let Some(gap) = src.get(gap_start..gap_end) else {
        return;
    };
    let Some(at) = gap.find(op) else {
        return;
    };
    // The whole starts at the left operand's opening parentheses, one for each closed before
    // the operator (minijinja's span of a comparison starts at the token before it).
    let mut start = extent(left).0;
    for _ in 0..gap[..at].matches(')').count() {
        let Some(before) = src.get(..start).map(str::trim_end) else {
            return;
        };
        match before.strip_suffix('(') {
            Some(rest) => start = rest.len(),
            None => return,
        }
    }
    let around = format!("{}{}", &gap[..at], &gap[at + op.len()..]);
    if !around
        .chars()
        .all(|c| c.is_whitespace() || c == '(' || c == ')')
        || src.get(start..end).is_none()
    {
        return;
    }
    // A tuple written as such (`(a, b)`, a list node whose text opens with a parenthesis)
    // holds the format's arguments; any other value is one argument.
    let tuple = helper == MOD_FN
        && matches!(right, Expr::List(_))
        && src.as_bytes().get(gap_end) == Some(&b'(');
    let op_at = gap_start + at;
    edits.push(Edit {
        range: start..start,
        text: format!("{helper}("),
        rank: (2, depth),
    });
    edits.push(Edit {
        range: op_at..op_at + op.len(),
        text: ",".to_string(),
        rank: (1, 0),
    });
    edits.push(Edit {
        range: end..end,
        text: if tuple { ", true)" } else { ")" }.to_string(),
        rank: (0, -depth),
    });
}

#[cfg(test)]
mod tests {
    use super::{rewrite_expr, rewrite_template};
    use crate::template::test_support::*;
    use crate::template::{Templar, TemplateError};
    use serde_json::json;

    #[test]
    fn operators_become_calls_on_the_same_lines() {
        assert_eq!(
            rewrite_expr("'%s-%s' % (a, b) ~ x / 2").unwrap(),
            "__fp_mod('%s-%s' , (a, b), true) ~ __fp_div(x , 2)"
        );
        assert_eq!(
            rewrite_expr("a % b % (c // d)").unwrap(),
            "__fp_mod(__fp_mod(a , b) , (__fp_floordiv(c , d)))"
        );
        assert_eq!(
            rewrite_expr("('%s' % x) | upper").unwrap(),
            "(__fp_mod('%s' , x)) | upper"
        );
        // A comparison's span starts at the token before it (`and`), its operands do not.
        assert_eq!(
            rewrite_expr("now().year > 2000 and ((n)) <= 12").unwrap(),
            "__fp_gt(now().year , 2000) and __fp_le(((n)) , 12)"
        );
        assert_eq!(rewrite_expr("a + b * c ~ '%s / %d'"), None);
        assert_eq!(
            rewrite_template("{% if i % 2 %}\n{{ '%02d' % i }}{% endif %}").unwrap(),
            "{% if __fp_mod(i , 2) %}\n{{ __fp_mod('%02d' , i) }}{% endif %}"
        );
        assert_eq!(rewrite_template("a/b {{ x }} 50%"), None);
    }

    #[test]
    fn percent_formats_strings_and_floors_numbers() {
        assert_eq!(
            render("{{ '%s/x.gbk' % (path) }}"),
            json!("/etc/nginx/nginx.conf/x.gbk")
        );
        assert_eq!(render("{{ '%s-%d' % (x, count) }}"), json!("a-3"));
        assert_eq!(render("{{ '%s' % users }}"), json!("['alice', 'bob']"));
        assert_eq!(render("{{ '%(name)s:%(uid)d' % user }}"), json!("bob:1000"));
        assert_eq!(render("{{ '%s' % 'x' | upper }}"), json!("X"));
        assert_eq!(
            render("{{ [-7 % 3, 7 % -3, -7 // 2, 7 // -2, 7.5 % 2, -7.5 // 2, 7 / 2] }}"),
            json!([2, -2, -4, -4, 1.5, -4.0, 3.5])
        );
        assert_eq!(
            render("{% for i in range(4) if i % 2 == 0 %}{{ '<%02d>' % i }}{% endfor %}"),
            json!("<00><02>")
        );
        assert!(truth("count % 2 == 1"));
    }

    #[test]
    fn zero_divisors_raise_as_python() {
        for (code, message) in [
            ("{{ 1 / 0 }}", "division by zero"),
            ("x {{ 1.0 / 0 }}", "float division by zero"),
            ("{{ count // 0 }}", "integer division or modulo by zero"),
            ("{{ 1.0 // 0 }}", "float floor division by zero"),
            ("{{ count % 0 }}", "integer modulo by zero"),
            ("{{ 1.5 % 0 }}", "float modulo"),
            (
                "{{ users % 2 }}",
                "unsupported operand type(s) for %: 'list' and 'int'",
            ),
            (
                "{{ '%d' % x }}",
                "%d format: a real number is required, not str",
            ),
        ] {
            let e = render_err(code);
            assert!(
                matches!(&e, TemplateError::Raised { message: m, .. } if m == message),
                "{code}: {e:?}"
            );
            assert!(
                e.to_string()
                    .starts_with(&format!("Error rendering template: {message}")),
                "{e}"
            );
        }
    }

    #[test]
    fn undefined_operands_are_named() {
        let e = Templar::new()
            .render_str("{{ '%s' % nope }}", &vars())
            .unwrap_err();
        assert_eq!(undefined_name(e), "nope");
        let e = Templar::new()
            .render_str("{{ count / missing }}", &vars())
            .unwrap_err();
        assert_eq!(undefined_name(e), "missing");
    }
}
