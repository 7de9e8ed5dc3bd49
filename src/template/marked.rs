//! Task names whose template fails, shown as ansible-core 2.19 shows them: each failing
//! `{{ }}` becomes an `<< error N - why >>` marker instead of the name falling back to its text.
//!
//! ansible-core renders a name leniently: an undefined value (a variable, an attribute or item
//! of one, a filter or call applied to one) prints as its marker and the rest of the name still
//! renders; an error raised while evaluating (an operator on an undefined value, a division by
//! zero) prints its marker, then `<< error N+1 - template potentially truncated >>`, and nothing
//! after it. fixpoint's undefined values are strict, so which of the two an undefined error is
//! is read from the expression: undefined through operators is raised, as in Jinja.

use super::error::split_path_tail;
use super::rewrite::{block_end, mask_strings};
use super::{Templar, TemplateError};
use minijinja::Value;
use serde_json::Value as Json;

impl Templar {
    /// `text` rendered as ansible-core renders a task name, with markers for the expressions
    /// that fail; None when it holds statements or comments (`{% %}`, `{# #}`), whose partial
    /// output is not known here: the caller shows the name as written.
    pub fn render_name(&self, text: &str, ctx: &Value) -> Option<String> {
        if text.contains("{%") || text.contains("{#") {
            return None;
        }
        let b = text.as_bytes();
        let (mut out, mut errors, mut at) = (String::new(), 0, 0);
        while let Some(off) = text[at..].find("{{") {
            let start = at + off;
            let end = block_end(b, start + 2, b'}')?;
            out.push_str(&text[at..start]);
            let region = &text[start..end + 2];
            match self.render_as_text(region, ctx) {
                Ok(s) => out.push_str(&s),
                Err(e) => {
                    errors += 1;
                    let code = &text[start + 2..end];
                    let (why, go_on) = self.marker(&e, code, ctx);
                    out.push_str(&format!("<< error {errors} - {why} >>"));
                    if !go_on {
                        out.push_str(&format!(
                            "<< error {} - template potentially truncated >>",
                            errors + 1
                        ));
                        return Some(out.trim().to_string());
                    }
                }
            }
            at = end + 2;
        }
        out.push_str(&text[at..]);
        Some(out.trim().to_string())
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
                (why, !has_operator(code))
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
