//! Trust: whether a string a variable path names is text the playbook, the inventory or `-e`
//! wrote (ansible-core 2.19's `TrustedAsTemplate`), the one thing that makes a string code.

use super::Scope;
use crate::template::Templar;
use crate::yaml::mark;
use serde_json::{Map, Value};

/// How many strings one `vouched_at` asks about at most: a value larger than that (a long
/// registered loop copied whole by `set_fact`) keeps no trust past it rather than cost more.
const VOUCH_BUDGET: usize = 4096;

impl Scope {
    /// The trust `value`, what the variable path `code` evaluates to, carries: a tree of
    /// `value`'s shape that keeps each string `trusted_string` vouches for at its path, and
    /// `Null` for everything else (`Null` alone: nothing). What a variable set from `code`
    /// keeps (`Layer::vouched`), as ansible-core keeps the tags of the strings a template
    /// passes through unchanged. Anything but a variable path vouches for nothing.
    pub fn vouched_at(&self, code: &str, value: &Value) -> Value {
        let code = code.trim();
        if !self.may_vouch(code) {
            return Value::Null;
        }
        let mut budget = VOUCH_BUDGET;
        self.vouch_tree(&mut code.to_string(), value, &mut budget)
    }

    /// The trust of what a task's argument `raw`, as the playbook wrote it, rendered to
    /// (`set_fact`'s values): a string with no template is the playbook's text; one that is
    /// nothing but a variable path (`"{{ x }}"`, `"{{ r.results }}"`) keeps the trust of what
    /// that path holds (`vouched_at`); lists and mappings element by element. Anything
    /// computed, `!unsafe` or changed by rendering carries none.
    pub fn vouched_render(&self, raw: &Value, rendered: &Value) -> Value {
        if mark::literal_of(raw).is_some() || mark::vault_text(raw).is_some() {
            return Value::Null;
        }
        match (raw, rendered) {
            (Value::String(r), _) if Templar::is_template(r) => {
                match Templar::single_expression_code(r) {
                    Some(code) => self.vouched_at(code, rendered),
                    None => Value::Null,
                }
            }
            (Value::String(r), Value::String(s)) if r == s => rendered.clone(),
            (Value::Array(r), Value::Array(v)) if r.len() == v.len() => {
                pruned_array(r.iter().zip(v).map(|(r, v)| self.vouched_render(r, v)))
            }
            // A key that is a template may land on another key's value: no trust at all.
            (Value::Object(r), Value::Object(v)) if !r.keys().any(|k| Templar::is_template(k)) => {
                pruned_object(
                    r.iter()
                        .filter_map(|(k, r)| Some((k.clone(), self.vouched_render(r, v.get(k)?)))),
                )
            }
            _ => Value::Null,
        }
    }

    /// Whether the variable `code` starts from can hold trusted text at all: a template layer's,
    /// or a data layer's with sources or vouched values for it. Most values a task copies
    /// (a registered result) stop here, asking nothing per string.
    fn may_vouch(&self, code: &str) -> bool {
        let Some((name, _)) = parse_path(code) else {
            return false;
        };
        self.layers
            .iter()
            .rev()
            .find(|l| l.has(name))
            .is_some_and(|l| {
                l.object(name).is_none()
                    && (l.templated
                        || l.literal.is_some()
                        || l.vouched.as_ref().is_some_and(|v| v.contains_key(name)))
            })
    }

    fn vouch_tree(&self, code: &mut String, value: &Value, budget: &mut usize) -> Value {
        let len = code.len();
        match value {
            Value::String(s) if *budget > 0 => {
                *budget -= 1;
                if self.trusted_string(code, s) {
                    value.clone()
                } else {
                    Value::Null
                }
            }
            Value::Array(a) => pruned_array(a.iter().enumerate().map(|(i, e)| {
                code.push_str(&format!("[{i}]"));
                let t = self.vouch_tree(code, e, budget);
                code.truncate(len);
                t
            })),
            Value::Object(m) => pruned_object(m.iter().map(|(k, e)| {
                code.push_str(&Step::Key(k.clone()).code());
                let t = self.vouch_tree(code, e, budget);
                code.truncate(len);
                (k.clone(), t)
            })),
            _ => Value::Null,
        }
    }

    /// Whether `value`, the string the expression `code` evaluates to, was written verbatim
    /// in a template layer (the playbook, the inventory, `-e`), following variables that are
    /// nothing but another variable (`a: "{{ b }}"`) and loop items back to the element they
    /// were rendered from (`Layer::literal`). Only a variable path (`cond`, `conds.web`,
    /// `c['x'][0]`) can name such a string, and the string found must be `value` itself:
    /// anything computed, any value from a data layer and any `!unsafe` value is untrusted,
    /// as in ansible-core 2.19.
    pub fn trusted_string(&self, code: &str, value: &str) -> bool {
        self.trusted_path(code, value, 0)
    }

    fn trusted_path(&self, code: &str, value: &str, depth: usize) -> bool {
        // Deep enough for real indirection, and an end to `a: "{{ b }}"`, `b: "{{ a }}"`.
        const MAX_DEPTH: usize = 16;
        let Some((name, steps)) = parse_path(code) else {
            return false;
        };
        let Some(layer) = self.layers.iter().rev().find(|l| l.has(name)) else {
            return false;
        };
        if layer.object(name).is_some() {
            return false;
        }
        let source = if layer.templated {
            layer.vars.get(name)
        } else if let Some(tree) = layer.vouched.as_ref().and_then(|t| t.get(name)) {
            return vouched_holds(tree, &steps, value);
        } else {
            layer.literal.as_ref().and_then(|l| l.get(name))
        };
        let Some(mut v) = source else {
            return false;
        };
        for (i, step) in steps.iter().enumerate() {
            if let Value::String(s) = v {
                // A template on the way: trusted only as another variable path.
                return depth < MAX_DEPTH
                    && Templar::single_expression_code(s).is_some_and(|inner| {
                        let rest: String = steps[i..].iter().map(Step::code).collect();
                        self.trusted_path(&format!("{}{rest}", inner.trim()), value, depth + 1)
                    });
            }
            if mark::literal_of(v).is_some() {
                return false;
            }
            let Some(next) = step.reach(v) else {
                return false;
            };
            v = next;
        }
        match v {
            // The same text: a loop item's source must not vouch for another string.
            Value::String(s) if !Templar::is_template(s) => s.trim() == value.trim(),
            Value::String(s) => {
                depth < MAX_DEPTH
                    && Templar::single_expression_code(s)
                        .is_some_and(|inner| self.trusted_path(inner.trim(), value, depth + 1))
            }
            _ => false,
        }
    }
}

/// Whether the vouched tree `tree` (`Layer::vouched`) holds exactly `value` at `steps`.
fn vouched_holds(tree: &Value, steps: &[Step], value: &str) -> bool {
    steps
        .iter()
        .try_fold(tree, |v, step| step.reach(v))
        .is_some_and(|v| v.as_str() == Some(value))
}

/// A vouched list: `Null` when no element holds anything trusted.
pub fn pruned_array(items: impl Iterator<Item = Value>) -> Value {
    let a: Vec<Value> = items.collect();
    if a.iter().all(Value::is_null) {
        Value::Null
    } else {
        Value::Array(a)
    }
}

/// A vouched mapping: only the keys that hold something trusted; `Null` when none does.
pub fn pruned_object(entries: impl Iterator<Item = (String, Value)>) -> Value {
    let m: Map<String, Value> = entries.filter(|(_, v)| !v.is_null()).collect();
    if m.is_empty() {
        Value::Null
    } else {
        Value::Object(m)
    }
}

/// One step of a variable path: `.name` / `['name']`, or `[0]`.
pub(super) enum Step {
    Key(String),
    Index(usize),
}

impl Step {
    /// What this step reaches inside `v` (a list's index also written as a key: `l.0`).
    fn reach<'v>(&self, v: &'v Value) -> Option<&'v Value> {
        match (v, self) {
            (Value::Object(m), Step::Key(k)) => m.get(k),
            (Value::Array(a), Step::Key(k)) => k.parse::<usize>().ok().and_then(|i| a.get(i)),
            (Value::Array(a), Step::Index(i)) => a.get(*i),
            _ => None,
        }
    }

    fn code(&self) -> String {
        match self {
            Step::Key(k) => format!("['{}']", k.replace('\\', "\\\\").replace('\'', "\\'")),
            Step::Index(i) => format!("[{i}]"),
        }
    }
}

/// `name.attr['key'][0]` → (`name`, steps); None for anything else (calls, filters,
/// operators, computed subscripts).
pub(super) fn parse_path(code: &str) -> Option<(&str, Vec<Step>)> {
    let code = code.trim();
    let ident_end = |s: &str| {
        s.char_indices()
            .find(|&(i, c)| !(c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit())))
            .map_or(s.len(), |(i, _)| i)
    };
    let end = ident_end(code);
    if end == 0 {
        return None;
    }
    let (name, mut rest) = code.split_at(end);
    let mut steps = Vec::new();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            return Some((name, steps));
        }
        if let Some(r) = rest.strip_prefix('.') {
            let r = r.trim_start();
            let end = r
                .find(|c: char| !(c == '_' || c.is_ascii_alphanumeric()))
                .unwrap_or(r.len());
            if end == 0 {
                return None;
            }
            steps.push(Step::Key(r[..end].to_string()));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let close = r.find(']')?;
            let inner = r[..close].trim();
            let step = match inner.as_bytes().first()? {
                q @ (b'\'' | b'"') => {
                    let body = inner.strip_prefix(*q as char)?.strip_suffix(*q as char)?;
                    if body.contains(['\\', '\'', '"']) {
                        return None;
                    }
                    Step::Key(body.to_string())
                }
                _ => Step::Index(inner.parse().ok()?),
            };
            steps.push(step);
            rest = &r[close + 1..];
        } else {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{layer, obj};
    use super::*;
    use crate::vars::Layer;
    use serde_json::json;
    use std::sync::Arc;

    #[test]
    fn only_strings_written_in_template_layers_are_trusted() {
        let s = Scope::new(
            Arc::new(Templar::new()),
            vec![
                layer(
                    json!({
                        "cond": "x == 1", "conds": {"web": ["a == 1"]}, "ind": "{{ cond }}",
                        "deep": "{{ conds.web }}", "loop_a": "{{ loop_b }}",
                        "loop_b": "{{ loop_a }}", "computed": "{{ cond | trim }}",
                        "mixed": "y{{ cond }}", "marked": mark::mark(json!("x == 1")),
                        "shadowed": "1 == 1", "reg_ref": "{{ reg.stdout }}",
                    }),
                    true,
                ),
                layer(
                    json!({"reg": {"stdout": "1 == 1"}, "shadowed": "1 == 1"}),
                    false,
                ),
                // A loop item and what it was rendered from.
                Layer::data(obj(json!({
                    "item": {"that": "1 == 1", "l": ["a == 1", "x == 1", "1 == 1"]},
                    "other": "a == 2", "bare": "1 == 1",
                })))
                .with_literal(obj(json!({
                    "item": {"that": "1 == 1", "l": ["a == 1", "{{ cond }}", "{{ reg.stdout }}"]},
                    "other": "{{ conds.web[0] }}",
                }))),
            ],
        );
        // What the engine asks: the expression and the text it evaluated to.
        let trusted = |code: &str| {
            let text = s.eval(code).ok();
            s.trusted_string(code, text.as_ref().and_then(Value::as_str).unwrap_or(""))
        };
        for code in [
            "cond",
            " conds.web[0] ",
            "conds['web'][0]",
            "conds.web.0",
            "ind",
            "deep[0]",
            "deep.0",
            "item.that",
            "item.l[0]",
            "item.l[1]",
        ] {
            assert!(trusted(code), "{code}");
        }
        for code in [
            "reg.stdout",
            "shadowed",
            "reg_ref",
            "computed",
            "mixed",
            "marked",
            "loop_a",
            "cond | trim",
            "cond ~ ''",
            "missing",
            "conds.web",
            "conds[x]",
            "lookup('lines', 'x')",
            "item.l[2]",
            "other",
            "bare",
        ] {
            assert!(!trusted(code), "{code}");
        }
        // A trusted path vouches only for the text it holds.
        assert!(!s.trusted_string("cond", "x == 2"));
    }

    #[test]
    fn kept_trust_is_traced_when_set_and_compared_verbatim() {
        let s = Scope::new(
            Arc::new(Templar::new()),
            vec![
                layer(
                    json!({"cond": "x == 1", "conds": ["a == 1", "{{ cond }}", "{{ 1 }} == 1"],
                           "marked": mark::mark(json!("x == 1"))}),
                    true,
                ),
                // A registered result: its `item`s vouched for when it was set, not its stdout.
                Layer::data(obj(json!({
                    "reg": {"results": [{"item": "b == 1", "stdout": "b == 1"}]},
                    "host": {"stdout": "x == 1"},
                })))
                .with_vouched(&Arc::new(obj(json!({
                    "reg": {"results": [{"item": "b == 1"}]},
                })))),
            ],
        );
        assert!(s.trusted_string("reg.results[0].item", "b == 1"));
        assert!(!s.trusted_string("reg.results[0].stdout", "b == 1"));
        assert!(!s.trusted_string("reg.results[0].item", "b == 2"));
        // What a path holds, as a tree of its shape: the trusted strings, null for the rest.
        let conds = s.eval("conds").unwrap();
        assert_eq!(
            s.vouched_at("conds", &conds),
            json!(["a == 1", "x == 1", null])
        );
        let reg = s.eval("reg").unwrap();
        assert_eq!(
            s.vouched_at("reg", &reg),
            json!({"results": [{"item": "b == 1"}]})
        );
        for code in ["host", "host.stdout", "marked", "cond | trim", "missing"] {
            let v = s.eval(code).unwrap_or_default();
            assert_eq!(s.vouched_at(code, &v), Value::Null, "{code}");
        }
        // A task's argument as written, and what it rendered to.
        let raw = json!({"lit": "y == 2", "var": "{{ cond }}", "list": ["{{ cond }}", "z"],
                         "host": "{{ host.stdout }}", "trim": "{{ cond | trim }}",
                         "unsafe": mark::mark(json!("y == 2"))});
        let rendered = s.render(&raw).unwrap();
        assert_eq!(
            s.vouched_render(&raw, &rendered),
            json!({"lit": "y == 2", "var": "x == 1", "list": ["x == 1", "z"]})
        );
        // A template key may name another key: nothing is vouched for.
        let keyed = json!({"{{ cond }}": "a", "b": "c"});
        assert_eq!(
            s.vouched_render(&keyed, &json!({"x == 1": "a", "b": "c"})),
            Value::Null
        );
        // A rendered value that is not what the playbook wrote is not vouched for.
        assert_eq!(s.vouched_render(&json!("y"), &json!("z")), Value::Null);
    }
}
