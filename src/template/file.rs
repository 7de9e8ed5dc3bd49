//! Template files (the `template` module): Ansible's `#jinja2:` header that overrides the
//! environment's options, and the trailing newlines ansible-core keeps.

use super::{Templar, TemplateError};
use minijinja::Value;

impl Templar {
    /// Render a whole template file's text (the `template` module). A first line of the form
    /// `#jinja2: trim_blocks: False, lstrip_blocks: True` overrides the options, as in Ansible.
    pub fn render_file(
        &self,
        name_for_errors: &str,
        source: &str,
        ctx: &Value,
    ) -> Result<String, TemplateError> {
        let rendered = self.render_file_text(name_for_errors, source, ctx)?;
        // As ansible-core, end with at least as many newlines as the source does: a template
        // that `{% extends %}` another (whose own last newline Jinja drops) still ends its line.
        let trailing = |t: &str| t.len() - t.trim_end_matches('\n').len();
        let missing = trailing(source).saturating_sub(trailing(&rendered));
        Ok(rendered + &"\n".repeat(missing))
    }

    fn render_file_text(
        &self,
        name_for_errors: &str,
        source: &str,
        ctx: &Value,
    ) -> Result<String, TemplateError> {
        let Some((pairs, body)) = parse_jinja2_header(source) else {
            return self.render_text(source, name_for_errors, ctx);
        };
        let syntax = |message: String| TemplateError::Syntax {
            message,
            template: name_for_errors.to_string(),
            line: Some(1),
        };
        let overrides = header_options(&pairs).map_err(syntax)?;
        let mut env = (*self.env).clone();
        let mut line_prefixes: (Option<String>, Option<String>) = (None, None);
        for (key, value) in overrides {
            match (key.as_str(), value) {
                ("trim_blocks", HeaderValue::Bool(b)) => env.set_trim_blocks(b),
                ("lstrip_blocks", HeaderValue::Bool(b)) => env.set_lstrip_blocks(b),
                ("keep_trailing_newline", HeaderValue::Bool(b)) => env.set_keep_trailing_newline(b),
                ("line_statement_prefix", HeaderValue::Text(t)) => line_prefixes.0 = Some(t),
                ("line_comment_prefix", HeaderValue::Text(t)) => line_prefixes.1 = Some(t),
                _ => {}
            }
        }
        if line_prefixes.0.is_some() || line_prefixes.1.is_some() {
            let mut b = minijinja::syntax::SyntaxConfig::builder();
            if let Some(p) = line_prefixes.0 {
                b.line_statement_prefix(p);
            }
            if let Some(p) = line_prefixes.1 {
                b.line_comment_prefix(p);
            }
            env.set_syntax(b.build().map_err(|e| syntax(e.to_string()))?);
        }
        Templar::plain(env).render_text(body, name_for_errors, ctx)
    }
}

/// Parses Ansible's `#jinja2:` override header; returns its comma-separated pairs as written
/// and the remaining text.
pub(super) fn parse_jinja2_header(source: &str) -> Option<(Vec<&str>, &str)> {
    let rest = source.strip_prefix("#jinja2:")?;
    let (line, body) = rest.split_once('\n').unwrap_or((rest, ""));
    Some((line.split(',').collect(), body))
}

/// A `#jinja2:` header's value: a Python literal, as ansible-core reads it (`True`, `'x'`).
enum HeaderValue {
    Bool(bool),
    Text(String),
}

/// The header's pairs as options, or ansible-core's message for a malformed one.
fn header_options(pairs: &[&str]) -> Result<Vec<(String, HeaderValue)>, String> {
    pairs
        .iter()
        .map(|pair| {
            if pair.trim().is_empty() {
                return Err("Empty '#jinja2:' override pair not allowed.".to_string());
            }
            let Some((k, v)) = pair.split_once(':') else {
                return Err(format!(
                    "Missing key-value separator `:` in '#jinja2:' override pair '{pair}'."
                ));
            };
            let v = v.trim();
            let value = match v {
                "True" | "true" | "yes" | "1" => HeaderValue::Bool(true),
                "False" | "false" | "no" | "0" => HeaderValue::Bool(false),
                _ if v.len() >= 2
                    && (v.starts_with('"') && v.ends_with('"')
                        || v.starts_with('\'') && v.ends_with('\'')) =>
                {
                    HeaderValue::Text(v[1..v.len() - 1].to_string())
                }
                _ => HeaderValue::Text(v.to_string()),
            };
            Ok((k.trim().to_string(), value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use crate::template::Templar;
    use serde_json::json;

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
        // trim_blocks eats the newline after `endif`; as ansible-core, the source's last
        // newline is put back.
        assert_eq!(out, "  yes\n  \n");
    }

    #[test]
    fn render_file_honours_jinja2_header() {
        let t = Templar::new();
        let src = "#jinja2: trim_blocks: False, lstrip_blocks: True\n  {% if true %}\nyes\n  {% endif %}\n";
        let out = t.render_file("x", src, &vars()).unwrap();
        assert_eq!(out, "\nyes\n\n");
        let src = "#jinja2: line_statement_prefix:\":\"\n: if true\nfoo\n: endif\n";
        assert_eq!(t.render_file("x", src, &vars()).unwrap(), "foo\n");
        let e = t
            .render_file("x", "#jinja2: lstrip_blocks=True\nx\n", &vars())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("Missing key-value separator `:` in '#jinja2:' override pair ' lstrip_blocks=True'."),
            "{e}"
        );
    }
}
