//! Variable scopes: layered variables resolved lazily, so playbook variables may refer to each other as in Ansible.
//!
//! Layers are searched from the top down. Layers that come from the playbook, the inventory or
//! `-e` are templates: a value is rendered when it is looked up, in the same scope, except the
//! values marked `!unsafe` inside them (`yaml::mark`), which are literal. Layers that come from
//! hosts (facts, registered results) are data and are never templated again, so a string like
//! `{{ x }}` printed by a remote command stays that string.
//!
//! The same split decides trust in conditions: `when: "{{ cond }}"` evaluates the string `cond`
//! holds as an expression only when it was written, verbatim, in a template layer
//! (`trusted_string`); a string from a data layer is never code.

mod trust;

use crate::template::{Markers, Templar, TemplateError, TRUST_ORACLE, VARIABLE_ORDER};
use crate::yaml::mark;
use minijinja::value::{Enumerator, Object, ObjectRepr};
use serde_json::{Map, Value};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use trust::parse_path;
pub use trust::{pruned_array, pruned_object};

/// One layer of variables.
#[derive(Clone, Debug)]
pub struct Layer {
    pub vars: Arc<Map<String, Value>>,
    /// Values may contain templates to render on lookup.
    pub templated: bool,
    /// Variables that are template objects already (`hostvars`, `groups`, the play's host
    /// lists): built once and shared by every host's scope instead of copied into each, and
    /// never templated again. They sit in the same layer as `vars` and win over it.
    pub objects: Arc<Vec<(String, minijinja::Value)>>,
    /// For a data layer: what some of its values were rendered from, as written in the
    /// playbook (a loop item's literal element, or `{{ list[i] }}` for an item of a variable's
    /// list). Only trust reads it (`trusted_string`): a string that came through unchanged
    /// from such a source may stand for an expression, as ansible-core keeps the trust of the
    /// strings a template passes through.
    pub literal: Option<Arc<Map<String, Value>>>,
    /// For a data layer: the trust its variables kept when they were set (`Scope::vouched_at`,
    /// `vouched_render`), resolved then: each a tree of the variable's shape holding the strings
    /// that were the playbook's text, compared verbatim and never followed (`set_fact`, a
    /// registered loop's `item`s, `include_vars`' registered facts). A string a host returned
    /// is never in it, whatever its text.
    pub vouched: Option<Arc<Map<String, Value>>>,
}

impl Layer {
    pub fn templates(vars: Map<String, Value>) -> Layer {
        Layer::shared(Arc::new(vars), true)
    }

    pub fn data(vars: Map<String, Value>) -> Layer {
        Layer::shared(Arc::new(vars), false)
    }

    /// A layer over a map the caller keeps (no copy).
    pub fn shared(vars: Arc<Map<String, Value>>, templated: bool) -> Layer {
        // Most layers have no objects: they share one empty list rather than allocate one
        // each (a dozen layers per scope, a scope per task and host).
        static NO_OBJECTS: OnceLock<Arc<Vec<(String, minijinja::Value)>>> = OnceLock::new();
        Layer {
            vars,
            templated,
            objects: NO_OBJECTS.get_or_init(Arc::default).clone(),
            literal: None,
            vouched: None,
        }
    }

    /// This data layer with the playbook's sources of some of its values (see `literal`).
    pub fn with_literal(mut self, literal: Map<String, Value>) -> Layer {
        self.literal = Some(Arc::new(literal));
        self
    }

    /// This data layer with the trust its values kept (see `vouched`); an empty map is none.
    pub fn with_vouched(mut self, vouched: &Arc<Map<String, Value>>) -> Layer {
        if !vouched.is_empty() {
            self.vouched = Some(vouched.clone());
        }
        self
    }

    /// This layer with these shared objects.
    pub fn with_objects(mut self, objects: Vec<(String, minijinja::Value)>) -> Layer {
        self.objects = Arc::new(objects);
        self
    }

    fn object(&self, key: &str) -> Option<&minijinja::Value> {
        self.objects.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn has(&self, key: &str) -> bool {
        self.object(key).is_some() || self.vars.contains_key(key)
    }

    fn keys(&self) -> impl Iterator<Item = &String> {
        self.vars.keys().chain(self.objects.iter().map(|(k, _)| k))
    }
}

/// A lazily resolving variable scope, usable as a minijinja context.
///
/// Its locks are `expect`ed: none is held across a call that can panic (rendering happens with
/// every lock released; under a lock there are only push, pop, insert, take and `format!`), so
/// none can be poisoned.
pub struct Scope {
    layers: Vec<Layer>,
    templar: Arc<Templar>,
    resolving: Mutex<Vec<String>>,
    cache: Mutex<HashMap<String, minijinja::Value>>,
    /// The first error met while rendering a variable (and that variable), reported instead
    /// of a bare "undefined".
    error: Mutex<Option<VarError>>,
    /// Warnings about how conditions are written, shared with the scopes derived by `with`
    /// (loop items, registered results) so the engine collects them once per task.
    warnings: Arc<Mutex<Vec<String>>>,
    /// A condition written as a template of a boolean was evaluated (shared like `warnings`),
    /// for the result's `deprecations` (`take_deprecated`).
    deprecated: Arc<AtomicBool>,
    /// Marking mode (`marking`): the count of error markers so far of the name being shown.
    markers: Option<Arc<Markers>>,
}

impl std::fmt::Debug for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("layers", &self.layers.len())
            .finish()
    }
}

impl Scope {
    pub fn new(templar: Arc<Templar>, layers: Vec<Layer>) -> Arc<Scope> {
        Scope::build(templar, layers, Arc::default(), Arc::default())
    }

    fn build(
        templar: Arc<Templar>,
        layers: Vec<Layer>,
        warnings: Arc<Mutex<Vec<String>>>,
        deprecated: Arc<AtomicBool>,
    ) -> Arc<Scope> {
        Arc::new(Scope {
            layers,
            templar,
            resolving: Mutex::new(Vec::new()),
            cache: Mutex::new(HashMap::new()),
            error: Mutex::new(None),
            warnings,
            deprecated,
            markers: None,
        })
    }

    /// This scope in marking mode, for showing a task name that fails as ansible-core shows
    /// it (`Templar::render_name`): a variable whose template fails gives its text with
    /// markers in place of what failed, counted in `markers` (ansible-core renders variables
    /// lazily, in the mode of the template that reads them).
    pub fn marking(&self, markers: Arc<Markers>) -> Arc<Scope> {
        let mut s = Scope::build(
            self.templar.clone(),
            self.layers.clone(),
            self.warnings.clone(),
            self.deprecated.clone(),
        );
        Arc::get_mut(&mut s).expect("a new scope").markers = Some(markers);
        s
    }

    /// A new scope with one more layer on top (sharing this scope's warnings).
    pub fn with(&self, layer: Layer) -> Arc<Scope> {
        let mut layers = self.layers.clone();
        layers.push(layer);
        Scope::build(
            self.templar.clone(),
            layers,
            self.warnings.clone(),
            self.deprecated.clone(),
        )
    }

    /// Keep a warning to be shown once with the task's results (a Python module's warnings).
    pub fn warn(&self, w: String) {
        let mut g = self.warnings.lock().expect("scope warnings");
        if !g.contains(&w) {
            g.push(w);
        }
    }

    /// Whether a condition written as a template of a boolean was evaluated in this scope (or
    /// one derived from it) since the last call: ansible-core 2.19 records that deprecation
    /// in the task's result.
    pub fn take_deprecated(&self) -> bool {
        self.deprecated.swap(false, Ordering::Relaxed)
    }

    /// Note that a condition written as a template of a boolean was evaluated (`take_deprecated`).
    pub fn note_deprecated(&self) {
        self.deprecated.store(true, Ordering::Relaxed);
    }

    /// The warnings conditions evaluated in this scope (or one derived from it) gave, once.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().expect("scope warnings"))
    }

    /// This scope as a template context.
    pub fn ctx(self: &Arc<Self>) -> minijinja::Value {
        minijinja::Value::from_dyn_object(self.clone())
    }

    /// The error met while resolving a variable, if any (to explain an "undefined" error).
    pub fn take_error(&self) -> Option<String> {
        self.error
            .lock()
            .expect("scope error")
            .take()
            .map(|e| e.to_string())
    }

    /// Keep the error `key`'s template gave (the first one: the others follow from it). When
    /// the error only says that the variable whose error is kept is undefined (`a: "{{ b }}"`,
    /// `b` failed), `key` takes that error over: the innermost cause is what ansible-core
    /// reports, through any number of variables.
    fn note_error(&self, key: &str, e: &TemplateError) {
        let msg = e.to_string();
        let mut slot = self.error.lock().expect("scope error");
        match slot.as_mut() {
            None => {
                *slot = Some(VarError {
                    key: Some(key.to_string()),
                    inner: msg,
                    through: Vec::new(),
                    undefined: matches!(e, TemplateError::Undefined { .. }),
                })
            }
            Some(e) if e.explains(&msg) => {
                if let Some(k) = e.key.replace(key.to_string()) {
                    e.through.push(k);
                }
            }
            Some(_) => {}
        }
    }

    fn resolve(self: &Arc<Self>, key: &str) -> Option<minijinja::Value> {
        if let Some(v) = self.cache.lock().expect("scope cache").get(key) {
            return Some(v.clone());
        }
        let layer = self.layers.iter().rev().find(|l| l.has(key))?;
        if let Some(v) = layer.object(key) {
            return Some(v.clone());
        }
        let raw = &layer.vars[key];
        let value = if layer.templated && Templar::needs_render(raw) {
            {
                let mut r = self.resolving.lock().expect("scope resolving");
                if r.iter().any(|k| k == key) {
                    let mut e = self.error.lock().expect("scope error");
                    e.get_or_insert_with(|| VarError {
                        key: None,
                        inner: format!(
                            "variable `{key}` refers to itself (through {})",
                            r.join(" → ")
                        ),
                        through: Vec::new(),
                        undefined: false,
                    });
                    return None;
                }
                r.push(key.to_string());
            }
            let marked = match (&self.markers, raw) {
                (Some(m), Value::String(text)) => {
                    match self.templar.render_marked(text, &self.ctx(), m) {
                        Some((s, false)) => Some(Ok(Value::String(s))),
                        // An error that ends the rendering ends the reading template's too,
                        // after this text (`Templar::render_marked`).
                        Some((s, true)) => {
                            m.set_cut(s);
                            self.resolving.lock().expect("scope resolving").pop();
                            return None;
                        }
                        None => None,
                    }
                }
                _ => None,
            };
            let rendered = marked.unwrap_or_else(|| self.templar.render_value(raw, &self.ctx()));
            self.resolving.lock().expect("scope resolving").pop();
            match rendered {
                // `v: "{{ omit }}"` is `omit` again where it is used (`v | type_debug`).
                Ok(v) if crate::template::is_omit_json(&v) => crate::template::omit(),
                Ok(v) => crate::template::json_to_value(&v),
                Err(e) => {
                    self.note_error(key, &e);
                    return None;
                }
            }
        } else {
            crate::template::json_to_value(raw)
        };
        // In marking mode each reading renders again: each gets markers of its own.
        if self.markers.is_some() {
            return Some(value);
        }
        self.cache
            .lock()
            .expect("scope cache")
            .insert(key.to_string(), value.clone());
        Some(value)
    }

    /// Render a JSON value (module parameters, conditions...) in this scope; a
    /// `with_first_found` value the loader marked (`playbook::loops::mark_terms`) is rendered
    /// by `render_terms`.
    pub fn render(self: &Arc<Self>, v: &Value) -> Result<Value, String> {
        self.render_any(v).map_err(|e| self.explain(e.to_string()))
    }

    fn render_any(self: &Arc<Self>, v: &Value) -> Result<Value, TemplateError> {
        match crate::playbook::loops::marked_terms(v) {
            Some(terms) => self.render_terms(terms),
            None => self.templar.render_value(v, &self.ctx()),
        }
    }

    /// `with_first_found`'s terms, rendered as ansible-core 2.19 renders them for that lookup
    /// called as a `with_` loop: a term (an element of a list, a mapping's value, at any depth)
    /// whose template is undefined is left out, and so is one inside a variable that a term
    /// names whole (`files: "{{ files }}"`), whose elements ansible-core renders one by one
    /// (lazily). Any other error is the error, and so is an undefined value as a whole.
    fn render_terms(self: &Arc<Self>, v: &Value) -> Result<Value, TemplateError> {
        match self.render_term(v, 0)? {
            Some(rendered) => Ok(rendered),
            // Rendered again for the error, which the dropped term's render cleared.
            None => self.templar.render_value(v, &self.ctx()),
        }
    }

    /// One term of `render_terms`; None: it is undefined. `depth` counts the variables
    /// followed, against a variable that names itself.
    fn render_term(
        self: &Arc<Self>,
        v: &Value,
        depth: usize,
    ) -> Result<Option<Value>, TemplateError> {
        const MAX_DEPTH: usize = 16;
        if mark::literal_of(v).is_some() || mark::vault_text(v).is_some() {
            return self.templar.render_value(v, &self.ctx()).map(Some);
        }
        match v {
            Value::String(s) => {
                if depth < MAX_DEPTH {
                    if let Some(raw) = self.whole_variable_definition(s) {
                        return self.render_term(&raw, depth + 1);
                    }
                }
                match self.templar.render_term_str(s, &self.ctx()) {
                    Ok(rendered) => Ok(Some(rendered)),
                    Err(e) if self.only_undefined(&e) => Ok(None),
                    Err(e) => Err(e),
                }
            }
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.extend(self.render_term(item, depth)?);
                }
                Ok(Some(Value::Array(out)))
            }
            Value::Object(map) => {
                let mut out = Map::with_capacity(map.len());
                for (k, item) in map {
                    let key = match self.templar.render_str(k, &self.ctx())? {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    if let Some(rendered) = self.render_term(item, depth)? {
                        out.insert(key, rendered);
                    }
                }
                Ok(Some(Value::Object(out)))
            }
            other => Ok(Some(other.clone())),
        }
    }

    /// The definition of the variable a template is nothing but (`"{{ files }}"`), when it is
    /// a list or mapping written in a template layer (what ansible-core keeps lazy).
    pub fn whole_variable_definition(&self, s: &str) -> Option<Value> {
        let code = Templar::single_expression_code(s)?;
        let (name, steps) = parse_path(code)?;
        if !steps.is_empty() {
            return None;
        }
        let layer = self.layers.iter().rev().find(|l| l.has(name))?;
        if layer.object(name).is_some() || !layer.templated {
            return None;
        }
        let raw = &layer.vars[name];
        (raw.is_array() || raw.is_object()).then(|| raw.clone())
    }

    /// Whether an error only says that something is undefined: not a variable's other error
    /// behind it (`boom: "{{ 1 // 0 }}"` makes `boom` undefined, but is an error). The
    /// variable's error, kept to explain it, is dropped with the term.
    fn only_undefined(&self, e: &TemplateError) -> bool {
        if !matches!(e, TemplateError::Undefined { .. }) {
            return false;
        }
        let mut slot = self.error.lock().expect("scope error");
        if slot.as_ref().is_some_and(|v| !v.undefined) {
            return false;
        }
        *slot = None;
        true
    }

    /// [`render`](Self::render), also telling whether it failed on an undefined variable
    /// (ansible-core lets a task's `when` decide before it reports an undefined loop).
    pub fn render_noting_undefined(self: &Arc<Self>, v: &Value) -> Result<Value, (String, bool)> {
        self.render_any(v).map_err(|e| {
            let undefined = matches!(e, TemplateError::Undefined { .. });
            (self.explain(e.to_string()), undefined)
        })
    }

    /// Evaluate a condition (`when:`, `changed_when:`, `assert`'s `that`...) as ansible-core
    /// 2.19 does (see `template::condition`); its warnings are kept for `take_warnings`.
    pub fn eval_bool(self: &Arc<Self>, expr: &str) -> Result<bool, String> {
        let verdict = self
            .templar
            .eval_condition(expr, &self.ctx(), &|code, value| {
                self.trusted_string(code, value)
            })
            .map_err(|e| self.explain(e.to_string()))?;
        self.warnings
            .lock()
            .expect("scope warnings")
            .extend(verdict.warnings);
        if verdict.deprecated {
            self.note_deprecated();
        }
        Ok(verdict.holds)
    }

    /// Evaluate a bare expression to a value (`debug: var=`).
    pub fn eval(self: &Arc<Self>, expr: &str) -> Result<Value, String> {
        self.templar
            .eval(expr, &self.ctx())
            .map_err(|e| self.explain(e.to_string()))
    }

    /// `debug: var=`'s value: an undefined variable is ansible-core's placeholder text, with
    /// its message (`Templar::eval_var`).
    pub fn eval_var(self: &Arc<Self>, expr: &str) -> Result<(Value, Option<String>), String> {
        self.templar
            .eval_var(expr, &self.ctx())
            .map_err(|e| self.explain(e.to_string()))
    }

    fn explain(&self, msg: String) -> String {
        let Some(e) = self.error.lock().expect("scope error").take() else {
            return msg;
        };
        // Failing because a variable that failed is undefined: that failure is the error, as
        // ansible-core reports it (`'sorry_not_defined' is undefined`, not the variable that
        // read it).
        if e.explains(&msg) {
            let mut chain = e.through.clone();
            chain.extend(e.key.clone());
            return format!("{} (in variable `{}`)", e.inner, chain.join("` ← `"));
        }
        format!("{msg} ({e})")
    }

    /// All variables resolved to plain data (for `hostvars` snapshots and debugging).
    pub fn flatten(self: &Arc<Self>) -> Map<String, Value> {
        let keys: BTreeSet<&String> = self.layers.iter().flat_map(Layer::keys).collect();
        keys.into_iter()
            .filter_map(|k| {
                let v = self.resolve(k)?;
                Some((k.clone(), serde_json::to_value(&v).ok()?))
            })
            .collect()
    }

    /// The names of its variables in the order ansible-core gives them to a lookup: it merges
    /// its sources into one dict from the lowest precedence up, where a name keeps the place
    /// it was first defined at (`VARIABLE_ORDER`).
    pub fn names_in_order(&self) -> Vec<String> {
        let mut seen = HashSet::new();
        self.layers
            .iter()
            .flat_map(Layer::keys)
            .filter(|k| seen.insert(k.as_str()))
            .cloned()
            .collect()
    }

    /// The map of the layer `name` is taken from, if a layer sets it as a plain variable.
    pub fn defining_map(&self, name: &str) -> Option<&Arc<Map<String, Value>>> {
        let layer = self.layers.iter().rev().find(|l| l.has(name))?;
        layer.object(name).is_none().then_some(&layer.vars)
    }

    /// Whether any layer sets `name` (whatever its value).
    pub fn defines(&self, name: &str) -> bool {
        self.layers.iter().any(|l| l.has(name))
    }

    pub fn templar(&self) -> &Arc<Templar> {
        &self.templar
    }
}

/// The error a variable's template gave: `inner`, met rendering `key` (None: a loop of
/// variables), reached through the variables in `through` (innermost first).
struct VarError {
    key: Option<String>,
    inner: String,
    through: Vec<String>,
    /// The innermost error only says that something is undefined.
    undefined: bool,
}

impl VarError {
    /// Whether `msg` is only the consequence of this error: it says that `key` is undefined.
    fn explains(&self, msg: &str) -> bool {
        self.key
            .as_ref()
            .is_some_and(|k| msg.starts_with(&format!("'{k}' is undefined")))
    }
}

impl std::fmt::Display for VarError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.key {
            // As it read before: the variable whose template failed, and why.
            Some(k) if self.through.is_empty() => write!(f, "in variable `{k}`: {}", self.inner),
            Some(k) => write!(
                f,
                "in variable `{k}` (through `{}`): {}",
                self.through.join("` ← `"),
                self.inner
            ),
            None => f.write_str(&self.inner),
        }
    }
}

impl Object for Scope {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &minijinja::Value) -> Option<minijinja::Value> {
        let key = key.as_str()?;
        if key == VARIABLE_ORDER {
            return Some(minijinja::Value::from(self.names_in_order()));
        }
        if key == TRUST_ORACLE {
            // Weak: a template keeps what it looks up no longer than it runs, but a scope
            // must never own itself.
            let scope = Arc::downgrade(self);
            return Some(minijinja::Value::from_function(
                move |path: &str, text: &str| -> bool {
                    scope
                        .upgrade()
                        .is_some_and(|s| s.trusted_string(path, text))
                },
            ));
        }
        match self.resolve(key) {
            // `vars`: every variable the template sees, as one mapping (`vars[name]`, `name in
            // vars`), as ansible-core's templates have it, unless a variable is named so.
            None if key == "vars" => Some(minijinja::Value::from_dyn_object(self.clone())),
            found => found,
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let keys: BTreeSet<String> = self.layers.iter().flat_map(|l| l.keys().cloned()).collect();
        Enumerator::Values(keys.into_iter().map(minijinja::Value::from).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(super) fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    pub(super) fn layer(v: Value, templated: bool) -> Layer {
        let m = obj(v);
        if templated {
            Layer::templates(m)
        } else {
            Layer::data(m)
        }
    }

    #[test]
    fn a_lookup_sees_the_names_where_they_are_first_defined() {
        let s = Scope::new(
            Arc::new(Templar::new()),
            vec![
                layer(json!({"b_1": 1, "a_2": "{{ b_1 }}"}), true),
                layer(json!({"c_3": 3, "b_1": 4}), false),
            ],
        );
        assert_eq!(
            s.eval("query('varnames', '_')").unwrap(),
            json!(["b_1", "a_2", "c_3"])
        );
    }

    #[test]
    fn marked_values_resolve_to_their_literal() {
        let s = Scope::new(
            Arc::new(Templar::new()),
            vec![layer(
                json!({"y": "no", "x": mark::mark(json!("{{ y }}")), "r": "{{ x }}",
                       "n": {"a": mark::mark(json!("{{ y }}")), "b": "{{ y }}"}}),
                true,
            )],
        );
        assert_eq!(s.render(&json!("{{ r }}")).unwrap(), json!("{{ y }}"));
        assert_eq!(
            s.render(&json!("{{ n }}")).unwrap(),
            json!({"a": "{{ y }}", "b": "no"})
        );
    }
    #[test]
    fn first_found_terms_leave_out_what_is_undefined_only() {
        use crate::playbook::{loops::mark_terms, LoopKind};
        let s = Scope::new(
            Arc::new(Templar::new()),
            vec![layer(
                json!({"files": ["{{ missing }}a", "b"], "boom": "{{ 1 // 0 }}",
                       "deep": {"x": 1}}),
                true,
            )],
        );
        let terms = |v: Value| mark_terms(LoopKind::FirstFound("files"), v);
        let got = s
            .render(&terms(json!([
                "{{ missing }}x",
                "{{ deep.nope }}",
                {"files": "{{ files }}", "paths": "{{ nope }}"},
                "{{ [{'files': missing}] }}",
                "c"
            ])))
            .unwrap();
        assert_eq!(got, json!([{"files": ["b"]}, [{}], "c"]));
        // Another error behind a variable is the error; so is an undefined value as a whole.
        let e = s.render(&terms(json!(["{{ boom }}", "c"]))).unwrap_err();
        assert!(e.contains("division"), "{e}");
        let e = s.render(&terms(json!("{{ missing }}"))).unwrap_err();
        assert!(e.contains("'missing' is undefined"), "{e}");
        // Any other loop is rendered as it is.
        assert!(s.render(&json!(["{{ missing }}x", "c"])).is_err());
    }
}
