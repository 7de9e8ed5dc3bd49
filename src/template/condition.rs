//! Conditions (`when`, `changed_when`, `failed_when`, `until`, `assert`'s `that`) as
//! ansible-core 2.19 evaluates them.
//!
//! A condition is a bare expression. One written entirely as a template (`when: "{{ flag }}"`)
//! is rendered first: a boolean is used (with a deprecation warning, as in 2.19); a string is
//! evaluated again as an expression only when it is a value written in a trusted source (the
//! playbook, the inventory, `-e`: `cond: "x == 1"` and `when: "{{ cond }}"`), which the caller
//! decides; a string that came from a host or was computed is an error, never code; anything
//! else (a number, a list, none) is an error too. Nothing a template renders to is ever parsed
//! unless the caller vouches for it. A bare expression must come to a boolean too: a string,
//! number, list or none is an error, not a truth value.

use minijinja::value::ValueKind;
use minijinja::Value;

use super::error::label_for_text;
use super::expr::{split_embedded, Embedded};
use super::rewrite::rewrite_code;
use super::undefined::{is_silent_undefined, undefined_result};
use super::{single_expression, Templar, TemplateError};

/// What a condition came to, and warnings about how it is written.
#[derive(Debug, Default)]
pub struct Verdict {
    pub holds: bool,
    pub warnings: Vec<String>,
    /// The condition was written as a template of a boolean, which ansible-core 2.19
    /// deprecates, and records in the task's result (`deprecations`).
    pub deprecated: bool,
}

/// Whether a condition is all template (starts and ends with template delimiters), the form
/// ansible-core renders before evaluating.
fn is_all_template(text: &str) -> bool {
    ["{{", "{%", "{#"].iter().any(|s| text.starts_with(s))
        && ["}}", "%}", "#}"].iter().any(|e| text.ends_with(e))
}

impl Templar {
    /// Evaluates a condition. `trusted(code, text)` says whether `text`, the string the
    /// expression `code` evaluates to, was written verbatim in a trusted source; only such a
    /// string may stand for an expression (`when: "{{ cond }}"`).
    pub fn eval_condition(
        &self,
        cond: &str,
        ctx: &Value,
        trusted: &dyn Fn(&str, &str) -> bool,
    ) -> Result<Verdict, TemplateError> {
        let text = cond.trim();
        if text.is_empty() {
            return Err(condition_error(cond, "the condition is empty"));
        }
        if !is_all_template(text) {
            let mut warnings = Vec::new();
            let value = self.eval_expr(text, cond, ctx, &mut warnings)?;
            return Ok(Verdict {
                holds: boolean_result(cond, &value)?,
                warnings,
                deprecated: false,
            });
        }
        // All template: render, then look at what it rendered to.
        let single = single_expression(text)
            .filter(|inner| self.env.compile_expression(inner).is_ok())
            .map(str::trim);
        let value = match single {
            Some(inner) => {
                let code = rewrite_code(inner);
                let v = self.eval_code(&code, cond, ctx)?;
                if is_silent_undefined(&self.env, &v) {
                    Value::from(())
                } else if v.is_undefined() {
                    return Err(undefined_result(
                        &self.env,
                        &label_for_text(cond),
                        &code,
                        ctx,
                    ));
                } else {
                    v
                }
            }
            None => Value::from(self.render_text(text, &label_for_text(cond), ctx)?),
        };
        match value.kind() {
            ValueKind::Bool => Ok(Verdict {
                holds: value.is_true(),
                warnings: vec![format!(
                    "`{text}`: a condition is a bare expression, not a template; write `{}` \
                     (ansible-core 2.19 deprecates the template form)",
                    single.unwrap_or("...")
                )],
                deprecated: true,
            }),
            ValueKind::None | ValueKind::Undefined => Err(condition_error(
                cond,
                "the condition rendered to nothing (none or empty)",
            )),
            ValueKind::String => {
                let s = value.as_str().unwrap_or_default().trim();
                if s.is_empty() {
                    return Err(condition_error(
                        cond,
                        "the condition rendered to nothing (none or empty)",
                    ));
                }
                if !single.is_some_and(|code| trusted(code, s)) {
                    return Err(condition_error(
                        cond,
                        "untrusted template or expression: the condition rendered to text that \
                         does not come verbatim from the playbook, the inventory or -e (it came \
                         from a host, or was computed), and such text is never evaluated; \
                         write the condition as a bare expression",
                    ));
                }
                // A trusted string is an expression named indirectly (`cond: "x == 1"`).
                let mut warnings = Vec::new();
                let v = self.eval_expr(s, cond, ctx, &mut warnings)?;
                Ok(Verdict {
                    holds: boolean_result(cond, &v)?,
                    warnings,
                    deprecated: false,
                })
            }
            kind => Err(condition_error(
                cond,
                &format!(
                    "the condition rendered to {}, not a boolean",
                    kind_name(kind)
                ),
            )),
        }
    }

    /// Evaluates a bare expression whose string constants may hold templates (rendered to
    /// values on use, with a warning); delimiters outside constants are a syntax error. An
    /// undefined result is an error, unless it is the silent one of an `if` without `else`.
    pub(super) fn eval_expr(
        &self,
        text: &str,
        original: &str,
        ctx: &Value,
        warnings: &mut Vec<String>,
    ) -> Result<Value, TemplateError> {
        let expr = split_embedded(text).map_err(|message| TemplateError::Syntax {
            message,
            template: label_for_text(original),
            line: None,
        })?;
        let code = rewrite_code(&expr.code);
        let (value, embedded) = if expr.embedded.is_empty() {
            (self.eval_code(&code, original, ctx), None)
        } else {
            let wrapper = Embedded::new(ctx, self, expr.embedded);
            let inner = Value::from_dyn_object(wrapper.clone());
            (self.eval_code(&code, original, &inner), Some(wrapper))
        };
        if let Some(w) = &embedded {
            // A constant that failed to render explains the undefined it left behind. An
            // undefined variable in it is an error only once the expression trips on it, as
            // ansible-core's undefined marker: a lookup that takes markers (the assert
            // target's `yield_terms`) hands it back, and `[1]` of its result is still fine.
            if let Some(e) = w.take_error() {
                let tripped = !matches!(e, TemplateError::Undefined { .. })
                    || value.as_ref().map_or(true, |v| v.is_undefined());
                if tripped {
                    return Err(e);
                }
            }
            if w.used() {
                warnings.push(format!(
                    "`{}`: a template inside a string constant of an expression is rendered \
                     to its value, but ansible-core 2.19 deprecates it; use the variable \
                     itself (`x == 'a'`, not `'{{{{ x }}}}' == 'a'`)",
                    original.trim()
                ));
            }
        }
        let value = value?;
        if value.is_undefined() && !is_silent_undefined(&self.env, &value) {
            return Err(undefined_result(
                &self.env,
                &label_for_text(original),
                &code,
                ctx,
            ));
        }
        Ok(value)
    }
}

/// An expression's result as a condition: ansible-core 2.19 takes only a boolean and fails
/// on anything else (a string such as "yes", a number, a list, none), naming what it was and
/// what its truth value would have been.
fn boolean_result(cond: &str, value: &Value) -> Result<bool, TemplateError> {
    if value.kind() == ValueKind::Bool {
        return Ok(value.is_true());
    }
    let kind = match value.kind() {
        ValueKind::String => "a string",
        ValueKind::None | ValueKind::Undefined => "none",
        k => kind_name(k),
    };
    let truth = if value.is_true() { "True" } else { "False" };
    Err(condition_error(
        cond,
        &format!(
            "the condition's result is {kind} (its truth value would be {truth}), not a \
             boolean; conditions must have a boolean result, as in ansible-core 2.19: \
             compare or test it (`x | length > 0`, `x is defined`, `x | bool`)"
        ),
    ))
}

fn condition_error(cond: &str, message: &str) -> TemplateError {
    TemplateError::Condition {
        message: message.to_string(),
        template: label_for_text(cond),
    }
}

fn kind_name(kind: ValueKind) -> &'static str {
    match kind {
        ValueKind::Number => "a number",
        ValueKind::Seq | ValueKind::Iterable => "a list",
        ValueKind::Map => "a mapping",
        ValueKind::Bytes => "bytes",
        _ => "a value that is not a boolean",
    }
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use crate::template::{Templar, TemplateError};
    use serde_json::json;

    fn cond(c: &str, trusted: bool) -> Result<(bool, usize), TemplateError> {
        let ctx = ctx(json!({
            "flag": true, "num": 3, "list": [1], "nothing": null, "empty": "",
            "expr": "num == 3", "no_word": "no", "false_word": "False",
            "host": "x' ~ lookup('lines', 'false') ~ '",
        }));
        Templar::new()
            .eval_condition(c, &ctx, &|_, _| trusted)
            .map(|v| (v.holds, v.warnings.len()))
    }

    fn message(e: TemplateError) -> String {
        e.to_string()
    }

    #[test]
    fn all_template_conditions_follow_ansible_core_2_19() {
        // A boolean is used, with a warning.
        assert_eq!(cond("{{ flag }}", false).unwrap(), (true, 1));
        assert_eq!(cond("{{ num == 4 }}", false).unwrap(), (false, 1));
        // A trusted string is an expression named indirectly.
        assert_eq!(cond("{{ expr }}", true).unwrap(), (true, 0));
        assert_eq!(cond("{{ false_word }}", true).unwrap(), (false, 0));
        // ... and read as one: `no` is an (undefined) variable, not a boolean word.
        assert!(matches!(
            cond("{{ no_word }}", true),
            Err(TemplateError::Undefined { .. })
        ));
        // An untrusted string is never evaluated.
        for c in ["{{ host }}", "{{ expr }}", "{{ flag }} and {{ flag }}"] {
            let e = message(cond(c, false).unwrap_err());
            assert!(e.contains("untrusted"), "{c}: {e}");
        }
        // Computed text is untrusted even when its parts are.
        let e = message(cond("{% if flag %}true{% endif %}", true).unwrap_err());
        assert!(e.contains("untrusted"), "{e}");
        for c in [
            "{{ nothing }}",
            "{{ empty }}",
            "{% if false %}x{% endif %}",
            "  ",
        ] {
            let e = message(cond(c, true).unwrap_err());
            assert!(e.contains("empty") || e.contains("nothing"), "{c}: {e}");
        }
        assert!(message(cond("{{ num }}", true).unwrap_err()).contains("a number"));
        assert!(message(cond("{{ list }}", true).unwrap_err()).contains("a list"));
    }

    #[test]
    fn templates_inside_constants_render_to_values_never_to_code() {
        // `'{{ host }}'` is the host's text, compared as a string.
        assert_eq!(cond("'{{ host }}' == 'x'", false).unwrap(), (false, 1));
        assert_eq!(cond("'{{ host }}' == host", false).unwrap(), (true, 1));
        // Rendered natively, as in Ansible: `'{{ num }}' == 3`.
        assert_eq!(cond("'{{ num }}' == 3", false).unwrap(), (true, 1));
        // Read only when reached (no warning, no undefined error).
        assert_eq!(
            cond("missing is defined and '{{ missing }}' == 'a'", false).unwrap(),
            (false, 0)
        );
        assert!(matches!(
            cond("'{{ missing }}' == 'a'", false),
            Err(TemplateError::Undefined { .. })
        ));
        let e = message(cond("{{ host }} == 'x'", false).unwrap_err());
        assert!(e.contains("delimiters"), "{e}");
        assert_eq!(cond("num == 3", false).unwrap(), (true, 0));
        assert_eq!(cond("host == host", false).unwrap(), (true, 0));
    }

    #[test]
    fn bare_conditions_must_be_booleans_as_in_ansible_core_2_19() {
        assert_eq!(cond("flag", false).unwrap(), (true, 0));
        for (c, what) in [
            ("host", "a string"),
            ("no_word", "a string"),
            ("num", "a number"),
            ("list", "a list"),
            ("nothing", "none"),
            ("1 if false", "none"),
        ] {
            let e = message(cond(c, false).unwrap_err());
            assert!(e.contains(what) && e.contains("boolean"), "{c}: {e}");
        }
        // A trusted string named indirectly must come to a boolean as well.
        let e = message(cond("{{ no_word }}", true).unwrap_err());
        assert!(e.contains("undefined") || e.contains("boolean"), "{e}");
    }
}
