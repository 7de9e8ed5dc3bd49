//! Task names whose template fails, shown as ansible-core 2.19 shows them: each failing
//! `{{ }}` becomes an `<< error N - why >>` marker instead of the name falling back to its text.
//!
//! ansible-core renders a name leniently: an undefined value (a variable, an attribute or item
//! of one, a filter or call applied to one) prints as its marker and the rest of the name still
//! renders; an error raised while evaluating (an operator on an undefined value, a division by
//! zero) prints its marker, then `<< error N+1 - template potentially truncated >>`, and nothing
//! after it. fixpoint's undefined values are strict, so which of the two an undefined error is
//! is read from the expression: undefined through operators is raised, as in Jinja.
//!
//! A variable the name reads whose own template fails is rendered the same way, its markers
//! numbered in the same count (ansible-core renders variables lazily, in the name's mode): so
//! `'{{ dir }}'` with `dir: "/srv/{{ id }}"` shows `'/srv/<< error 1 - 'id' is undefined >>'`.

use super::error::split_path_tail;
use super::rewrite::{block_end, mask_strings};
use super::{Templar, TemplateError};
use minijinja::Value;
use serde_json::Value as Json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The markers of a name being shown, shared with the variables it reads (`Scope::marking`).
#[derive(Debug, Default)]
pub struct Markers {
    /// How many so far: the next marker's number is one more.
    count: AtomicUsize,
    /// The text of a variable whose rendering was cut short, for the template reading it.
    cut: Mutex<Option<String>>,
}

impl Markers {
    /// Keep the text of a variable that was cut short (the first: the reading stops there).
    pub fn set_cut(&self, text: String) {
        self.cut.lock().expect("markers").get_or_insert(text);
    }

    fn take_cut(&self) -> Option<String> {
        self.cut.lock().expect("markers").take()
    }
}

impl Templar {
    /// `text` rendered as ansible-core renders a task name, with markers for the expressions
    /// that fail; None when it holds statements or comments (`{% %}`, `{# #}`), whose partial
    /// output is not known here: the caller shows the name as written.
    #[cfg(test)]
    pub fn render_name(&self, text: &str, ctx: &Value) -> Option<String> {
        let markers = Markers::default();
        self.render_marked(text, ctx, &markers)
            .map(|(s, _)| s.trim().to_string())
    }

    /// `text` rendered with markers, numbered on in `markers` (shared with the variables a
    /// name reads, which a scope in marking mode renders so: `Scope::marking`); whether it
    /// was cut short after an error that ends the rendering.
    pub fn render_marked(
        &self,
        text: &str,
        ctx: &Value,
        markers: &Markers,
    ) -> Option<(String, bool)> {
        let errors = &markers.count;
        if text.contains("{%") || text.contains("{#") {
            return None;
        }
        let b = text.as_bytes();
        let (mut out, mut at) = (String::new(), 0);
        while let Some(off) = text[at..].find("{{") {
            let start = at + off;
            let end = block_end(b, start + 2, b'}')?;
            out.push_str(&text[at..start]);
            let region = &text[start..end + 2];
            match self.render_as_text(region, ctx) {
                Ok(s) => out.push_str(&s),
                // A variable it read was cut short: so is this text, after that variable's.
                Err(_)
                    if markers.take_cut().is_some_and(|cut| {
                        out.push_str(&cut);
                        true
                    }) =>
                {
                    return Some((out, true));
                }
                Err(e) => {
                    let n = errors.fetch_add(1, Ordering::Relaxed) + 1;
                    let code = &text[start + 2..end];
                    let (why, go_on) = self.marker(&e, code, ctx);
                    out.push_str(&format!("<< error {n} - {why} >>"));
                    if !go_on {
                        let n = errors.fetch_add(1, Ordering::Relaxed) + 1;
                        out.push_str(&format!("<< error {n} - template potentially truncated >>"));
                        return Some((out, true));
                    }
                }
            }
            at = end + 2;
        }
        out.push_str(&text[at..]);
        Some((out, false))
    }

    /// What the marker of a failed expression says, and whether the rest of the name renders.
    fn marker(&self, e: &TemplateError, code: &str, ctx: &Value) -> (String, bool) {
        match e {
            TemplateError::Undefined { name, .. } => {
                let why = match split_path_tail(name) {
                    None => format!("'{name}' is undefined"),
                    Some((parent, key, _)) => {
                        let shown = |k: &str| match k.parse::<i64>() {
                            Ok(n) => n.to_string(),
                            Err(_) => format!("'{k}'"),
                        };
                        match self.render_str(&format!("{{{{ {parent} }}}}"), ctx) {
                            Ok(v) => format!(
                                "object of type '{}' has no attribute {}",
                                python_type(&v),
                                shown(key)
                            ),
                            Err(_) => format!("'{name}' is undefined"),
                        }
                    }
                };
                (why, !undefined_raises(code, name))
            }
            TemplateError::Raised { message, .. } => {
                (format!("Error rendering template: {message}"), false)
            }
            TemplateError::Render { message, .. } | TemplateError::Condition { message, .. } => {
                (message.clone(), false)
            }
            TemplateError::Syntax { message, .. } => {
                (format!("Syntax error in template: {message}"), false)
            }
        }
    }
}

/// Python's name for a value's type, as its messages say it.
fn python_type(v: &Json) -> &'static str {
    match v {
        Json::Object(_) => "dict",
        Json::Array(_) => "list",
        Json::String(_) => "str",
        Json::Bool(_) => "bool",
        Json::Number(n) if n.is_f64() => "float",
        Json::Number(_) => "int",
        Json::Null => "NoneType",
    }
}

/// Whether the undefined value `name` raises in `code`: an operator applies to it. In a
/// conditional expression (`a if c else b`) only the part that holds it counts: a branch's
/// value passes through, while the condition is tested (as in Jinja, where a test of an
/// undefined value raises under ansible-core).
fn undefined_raises(code: &str, name: &str) -> bool {
    let masked = mask_strings(code);
    let Some((branch, cond, other)) = conditional_parts(&masked) else {
        return has_operator(code);
    };
    let root = name.split(['.', '[']).next().unwrap_or(name);
    let holds = |part: &str| {
        part.match_indices(root).any(|(at, _)| {
            let word = |c: char| c.is_alphanumeric() || c == '_';
            !part[..at].ends_with(word) && !part[at + root.len()..].starts_with(word)
        })
    };
    if holds(cond) {
        return true;
    }
    has_operator(if holds(branch) { branch } else { other })
}

/// `a if c else b` (or `a if c`) split at its own ` if ` and ` else ` (outside brackets),
/// from code whose strings are masked.
fn conditional_parts(masked: &str) -> Option<(&str, &str, &str)> {
    let mut depth = 0i32;
    let (mut at_if, mut at_else) = (None, None);
    for (i, c) in masked.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ' ' if depth == 0 => {
                let rest = &masked[i..];
                if at_if.is_none() && rest.starts_with(" if ") {
                    at_if = Some(i);
                } else if at_if.is_some() && at_else.is_none() && rest.starts_with(" else ") {
                    at_else = Some(i);
                }
            }
            _ => {}
        }
    }
    let i = at_if?;
    Some(match at_else {
        Some(e) => (&masked[..i], &masked[i + 4..e], &masked[e + 6..]),
        None => (&masked[..i], &masked[i + 4..], ""),
    })
}

/// Whether an expression applies an operator (outside its string constants): undefined through
/// an operator raises in Jinja, where attribute access, subscripts, filters and calls give
/// another undefined value.
fn has_operator(code: &str) -> bool {
    let masked = mask_strings(code);
    let words = [" and ", " or ", " not ", " in ", " if ", " is "];
    masked.contains(['~', '+', '-', '*', '/', '%', '<', '>', '!'])
        || masked.contains("==")
        || words.iter().any(|w| format!(" {masked} ").contains(w))
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use crate::template::Templar;
    use serde_json::json;

    #[test]
    fn failing_expressions_become_markers() {
        let t = Templar::new();
        let c = ctx(json!({"good": "fine", "d": {"a": 1}, "l": [1], "zero": 0}));
        let name = |s: &str| t.render_name(s, &c).unwrap();
        assert_eq!(
            name("check {{ python_apt }} with dpkg"),
            "check << error 1 - 'python_apt' is undefined >> with dpkg"
        );
        assert_eq!(
            name("a {{ good }} b {{ missing }} c {{ d.nokey }} {{ l[5] }}"),
            "a fine b << error 1 - 'missing' is undefined >> c << error 2 - object of type \
             'dict' has no attribute 'nokey' >> << error 3 - object of type 'list' has no \
             attribute 5 >>"
        );
        assert_eq!(
            name("x {{ 1 / zero }} y {{ good }}"),
            "x << error 1 - Error rendering template: division by zero >><< error 2 - template \
             potentially truncated >>"
        );
        assert_eq!(
            name("{{ good ~ missing }} after"),
            "<< error 1 - 'missing' is undefined >><< error 2 - template potentially truncated >>"
        );
        assert_eq!(t.render_name("{% if x %}y{% endif %}", &c), None);
    }
}
