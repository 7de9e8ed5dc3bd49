//! Python's binding of call arguments for the filters ported from Jinja2 and Python, whose
//! parameters may be given by position or by name (`truncate(9, True)`,
//! `truncate(length=9, killwords=True)`), and the int and truth coercions their bodies apply.

use minijinja::value::ValueKind;
use minijinja::{Error, Value};

use super::types::filter_type_debug;
use crate::template::value::{op_err, split_kwargs};

/// The filter's arguments after its input, one per parameter name (`None`: not given), as
/// Python binds them: positions first, then names; an unknown or repeated name, or too many
/// positions, is Python's `TypeError`.
pub(super) fn bind(
    func: &str,
    args: &[Value],
    names: &[&str],
) -> Result<Vec<Option<Value>>, Error> {
    let (pos, kwargs) = split_kwargs(args)?;
    if pos.len() > names.len() {
        return Err(op_err(format!(
            "{func}() takes at most {} arguments ({} given)",
            names.len() + 1,
            pos.len() + 1
        )));
    }
    let mut out: Vec<Option<Value>> = names.iter().map(|_| None).collect();
    for (slot, v) in out.iter_mut().zip(pos) {
        *slot = Some(v);
    }
    for key in kwargs.args() {
        let Some(i) = names.iter().position(|n| *n == key) else {
            return Err(op_err(format!(
                "{func}() got an unexpected keyword argument '{key}'"
            )));
        };
        if out[i].is_some() {
            return Err(op_err(format!(
                "{func}() got multiple values for argument '{key}'"
            )));
        }
        out[i] = Some(kwargs.peek::<Value>(key)?);
    }
    Ok(out)
}

/// A given argument that is not `None`.
pub(super) fn given(v: &Option<Value>) -> Option<&Value> {
    v.as_ref().filter(|v| !v.is_none())
}

/// Python's `operator.index`: an int (a bool is one), anything else Python's `TypeError`.
pub(super) fn py_index(v: &Value) -> Result<i64, Error> {
    match v.kind() {
        ValueKind::Bool => Ok(i64::from(v.is_true())),
        ValueKind::Number if v.is_integer() => i64::try_from(v.clone()),
        _ => Err(op_err(format!(
            "'{}' object cannot be interpreted as an integer",
            filter_type_debug(v)
        ))),
    }
}

/// Python's `str.isspace` for one character: Unicode's white space and the four ASCII
/// separators (`\x1c`..`\x1f`) Python counts too.
pub(super) fn py_isspace(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// Python's `str.splitlines()`: lines without their ends, no empty line after a last end.
pub(super) fn py_splitlines(s: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let end = match c {
            '\r' if chars.peek().is_some_and(|&(_, n)| n == '\n') => {
                chars.next();
                i + 2
            }
            '\n' | '\r' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}'
            | '\u{2029}' => i + c.len_utf8(),
            _ => continue,
        };
        lines.push(&s[start..i]);
        start = end;
    }
    if start < s.len() {
        lines.push(&s[start..]);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitlines_as_python() {
        assert_eq!(py_splitlines(""), Vec::<&str>::new());
        assert_eq!(py_splitlines("a\n"), vec!["a"]);
        assert_eq!(
            py_splitlines("a\r\n\nb\x0bc\u{2028}"),
            vec!["a", "", "b", "c"]
        );
        assert_eq!(py_splitlines("\n"), vec![""]);
    }
}
