//! The error type of templating and how it is worded: which variable, which template, which line.

use minijinja::Error;

/// Longest template text quoted in an error message before it is cut.
const MAX_LABEL: usize = 80;

/// Errors from rendering or evaluating templates. Messages name the variable, the template
/// (file name, or the template text for inline strings) and the line.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("{}{}{}", undefined_message(name), why.as_ref().map(|w| format!(": {w}")).unwrap_or_default(), location(template, *line))]
    Undefined {
        /// The undefined variable (`foo`) or attribute path (`user.nmae`).
        name: String,
        /// What made it undefined, when a plugin said (`lookup('vars')`: "No variable named
        /// 'x' was found.", which playbooks test for).
        why: Option<String>,
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
    /// An exception Python raises evaluating the expression (`1 / 0`, `'%d' % 'a'`), worded
    /// as ansible-core words it, which playbooks search for (lookup_first_found target).
    #[error("Error rendering template: {message}{}", location(template, *line))]
    Raised {
        message: String,
        template: String,
        line: Option<usize>,
    },
    /// A condition that cannot be decided (empty, not a boolean, or naming untrusted text).
    #[error("{message}{}", location(template, None))]
    Condition { message: String, template: String },
}

fn undefined_message(name: &str) -> String {
    match split_path_tail(name) {
        Some((parent, key, true)) => {
            format!("`{name}` is undefined (`{parent}` has no item `{key}`)")
        }
        // The attribute quoted as ansible-core's message quotes it (`has no attribute 'x'`),
        // which playbooks test for.
        Some((parent, attr, false)) => {
            format!("`{name}` is undefined (`{parent}` has no attribute '{attr}')")
        }
        // ansible-core's wording, which playbooks look for in `msg`.
        None => format!("'{name}' is undefined"),
    }
}

/// Splits `a.b` into (`a`, `b`) and `a['c']` into (`a`, `c`, subscript) so messages can say
/// what is missing where.
pub(super) fn split_path_tail(name: &str) -> Option<(&str, &str, bool)> {
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
pub(super) fn label_for_text(text: &str) -> String {
    let short: String = text.chars().take(MAX_LABEL).collect();
    if short.len() < text.len() {
        format!("{:?}…", short)
    } else {
        format!("{short:?}")
    }
}

pub(super) fn syntax_error(err: &Error, label: &str) -> TemplateError {
    TemplateError::Syntax {
        message: err.detail().unwrap_or("invalid syntax").to_string(),
        template: label.to_string(),
        line: err.line(),
    }
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use crate::template::{Templar, TemplateError};

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
                ..
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
}
