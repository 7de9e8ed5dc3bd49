//! Bare expressions (`when: x == 'a'`, `debug: var=...`) that contain `{{ }}`: the only template
//! allowed is inside a string constant (`'{{ x }}' == 'a'`), and it is rendered to a *value*
//! when the expression reads it, as ansible-core 2.19 does. The expression text is never
//! rendered and then parsed again: that would run whatever a host put in `x` (`x' ~
//! lookup('lines', 'touch owned') ~ '`) as code on the controller.
//!
//! Each such constant is replaced by a variable (`__fp_embedded_0`) that a context wrapper
//! (`Embedded`) renders lazily, so `x is defined and '{{ x }}' == 'a'` still short-circuits.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use minijinja::value::{Enumerator, Object, ObjectRepr};
use minijinja::Value;

use super::rewrite::mask_strings;
use super::{Templar, TemplateError};

/// Prefix of the variables standing for string constants with a template inside.
const EMBEDDED_PREFIX: &str = "__fp_embedded_";

/// An expression with its template-bearing string constants taken out.
pub(super) struct Expr {
    /// The code, each such constant replaced by `__fp_embedded_<n>`.
    pub(super) code: String,
    /// The constants, as written (quotes and escapes included), by number.
    pub(super) embedded: Vec<String>,
}

/// Splits the template-bearing string constants out of `text`. Template delimiters outside a
/// string constant are an error, as in ansible-core: `{{ x }} == 'a'` is not an expression.
pub(super) fn split_embedded(text: &str) -> Result<Expr, String> {
    let masked = mask_strings(text);
    let mb = masked.as_bytes();
    let mut code = String::with_capacity(text.len());
    let mut embedded = Vec::new();
    let mut last = 0;
    let mut i = 0;
    while i < mb.len() {
        let q = mb[i];
        if q != b'\'' && q != b'"' {
            i += 1;
            continue;
        }
        // `mask_strings` keeps the quotes and blanks what is between them.
        let end = mb[i + 1..]
            .iter()
            .position(|&c| c == q)
            .map_or(mb.len(), |p| i + 1 + p + 1);
        let literal = &text[i..end];
        if Templar::is_template(literal) {
            code.push_str(&text[last..i]);
            code.push_str(&format!("{EMBEDDED_PREFIX}{}", embedded.len()));
            embedded.push(literal.to_string());
            last = end;
        }
        i = end;
    }
    code.push_str(&text[last..]);
    if masked.contains("{{") || masked.contains("{%") {
        return Err(format!(
            "template delimiters are not allowed in an expression: write it bare (`x == 'a'`, \
             not `{{{{ x }}}} == 'a'`) in `{text}`"
        ));
    }
    Ok(Expr { code, embedded })
}

/// The evaluation context of an expression with embedded constants: the constants by number,
/// rendered on first use in the outer context, everything else from the outer context.
pub(super) struct Embedded {
    outer: Value,
    templar: Templar,
    sources: Vec<String>,
    values: Mutex<Vec<Option<Value>>>,
    /// The first error met rendering a constant, reported instead of the undefined it leaves.
    error: Mutex<Option<TemplateError>>,
    used: AtomicBool,
}

impl std::fmt::Debug for Embedded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedded")
            .field("sources", &self.sources)
            .finish_non_exhaustive()
    }
}

impl Embedded {
    pub(super) fn new(outer: &Value, templar: &Templar, sources: Vec<String>) -> Arc<Embedded> {
        Arc::new(Embedded {
            outer: outer.clone(),
            templar: templar.clone(),
            values: Mutex::new(vec![None; sources.len()]),
            sources,
            error: Mutex::new(None),
            used: AtomicBool::new(false),
        })
    }

    /// Whether the expression read a constant with a template inside (worth a warning).
    pub(super) fn used(&self) -> bool {
        self.used.load(Ordering::Relaxed)
    }

    pub(super) fn take_error(&self) -> Option<TemplateError> {
        self.error.lock().expect("embedded error").take()
    }

    fn constant(&self, n: usize) -> Value {
        if let Some(v) = &self.values.lock().expect("embedded values")[n] {
            return v.clone();
        }
        self.used.store(true, Ordering::Relaxed);
        let rendered = self
            .templar
            .literal_text(&self.sources[n])
            .and_then(|text| self.templar.render_str(&text, &self.outer));
        let v = match rendered {
            Ok(j) => super::json_to_value(&j),
            Err(e) => {
                self.error.lock().expect("embedded error").get_or_insert(e);
                Value::UNDEFINED
            }
        };
        self.values.lock().expect("embedded values")[n] = Some(v.clone());
        v
    }
}

impl Object for Embedded {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let name = key.as_str()?;
        if let Some(n) = name.strip_prefix(EMBEDDED_PREFIX) {
            if let Some(n) = n.parse::<usize>().ok().filter(|n| *n < self.sources.len()) {
                return Some(self.constant(n));
            }
        }
        self.outer.get_item(key).ok().filter(|v| !v.is_undefined())
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        match self.outer.try_iter() {
            Ok(keys) => Enumerator::Values(keys.collect()),
            Err(_) => Enumerator::Empty,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::split_embedded;

    #[test]
    fn constants_with_templates_are_taken_out() {
        let e = split_embedded("'{{ x }}' == \"a{% if y %}b{% endif %}\" and z == '}}'").unwrap();
        assert_eq!(e.code, "__fp_embedded_0 == __fp_embedded_1 and z == '}}'");
        assert_eq!(e.embedded, ["'{{ x }}'", "\"a{% if y %}b{% endif %}\""]);
        // Escaped quotes stay inside their constant.
        let e = split_embedded(r"'it\'s {{ x }}' ~ y").unwrap();
        assert_eq!(e.code, "__fp_embedded_0 ~ y");
        assert!(split_embedded("{{ x }} == 'a'").is_err());
        assert!(split_embedded("x == 'a' and {% if %}").is_err());
        assert_eq!(split_embedded("x == 'a'").unwrap().embedded.len(), 0);
    }
}
