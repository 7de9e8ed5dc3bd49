//! Variable scopes: layered variables resolved lazily, so playbook variables may refer to each other as in Ansible.
//!
//! Layers are searched from the top down. Layers that come from the playbook, the inventory or
//! `-e` are templates: a value is rendered when it is looked up, in the same scope. Layers that
//! come from hosts (facts, registered results) are data and are never templated again, so a
//! string like `{{ x }}` printed by a remote command stays that string.

use crate::template::Templar;
use minijinja::value::{Enumerator, Object, ObjectRepr};
use serde_json::{Map, Value};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

/// One layer of variables.
#[derive(Clone, Debug)]
pub struct Layer {
    pub vars: Arc<Map<String, Value>>,
    /// Values may contain templates to render on lookup.
    pub templated: bool,
}

impl Layer {
    pub fn templates(vars: Map<String, Value>) -> Layer {
        Layer {
            vars: Arc::new(vars),
            templated: true,
        }
    }

    pub fn data(vars: Map<String, Value>) -> Layer {
        Layer {
            vars: Arc::new(vars),
            templated: false,
        }
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
    /// The first error met while rendering a variable, reported instead of a bare "undefined".
    error: Mutex<Option<String>>,
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
        Arc::new(Scope {
            layers,
            templar,
            resolving: Mutex::new(Vec::new()),
            cache: Mutex::new(HashMap::new()),
            error: Mutex::new(None),
        })
    }

    /// A new scope with one more layer on top.
    pub fn with(&self, layer: Layer) -> Arc<Scope> {
        let mut layers = self.layers.clone();
        layers.push(layer);
        Scope::new(self.templar.clone(), layers)
    }

    /// This scope as a template context.
    pub fn ctx(self: &Arc<Self>) -> minijinja::Value {
        minijinja::Value::from_dyn_object(self.clone())
    }

    /// The error met while resolving a variable, if any (to explain an "undefined" error).
    pub fn take_error(&self) -> Option<String> {
        self.error.lock().expect("scope error").take()
    }

    fn resolve(self: &Arc<Self>, key: &str) -> Option<minijinja::Value> {
        if let Some(v) = self.cache.lock().expect("scope cache").get(key) {
            return Some(v.clone());
        }
        let layer = self
            .layers
            .iter()
            .rev()
            .find(|l| l.vars.contains_key(key))?;
        let raw = &layer.vars[key];
        let value = if layer.templated && contains_template(raw) {
            {
                let mut r = self.resolving.lock().expect("scope resolving");
                if r.iter().any(|k| k == key) {
                    let mut e = self.error.lock().expect("scope error");
                    e.get_or_insert_with(|| {
                        format!(
                            "variable `{key}` refers to itself (through {})",
                            r.join(" → ")
                        )
                    });
                    return None;
                }
                r.push(key.to_string());
            }
            let rendered = self.templar.render_value(raw, &self.ctx());
            self.resolving.lock().expect("scope resolving").pop();
            match rendered {
                Ok(v) => minijinja::Value::from_serialize(&v),
                Err(e) => {
                    let mut slot = self.error.lock().expect("scope error");
                    slot.get_or_insert_with(|| format!("in variable `{key}`: {e}"));
                    return None;
                }
            }
        } else {
            minijinja::Value::from_serialize(raw)
        };
        self.cache
            .lock()
            .expect("scope cache")
            .insert(key.to_string(), value.clone());
        Some(value)
    }

    /// Render a JSON value (module parameters, conditions...) in this scope.
    pub fn render(self: &Arc<Self>, v: &Value) -> Result<Value, String> {
        self.templar
            .render_value(v, &self.ctx())
            .map_err(|e| self.explain(e.to_string()))
    }

    /// Evaluate a bare expression for truthiness (`when:`).
    pub fn eval_bool(self: &Arc<Self>, expr: &str) -> Result<bool, String> {
        self.templar
            .eval_bool(expr, &self.ctx())
            .map_err(|e| self.explain(e.to_string()))
    }

    fn explain(&self, msg: String) -> String {
        match self.take_error() {
            Some(inner) => format!("{msg} ({inner})"),
            None => msg,
        }
    }

    /// All variables resolved to plain data (for `hostvars` snapshots and debugging).
    pub fn flatten(self: &Arc<Self>) -> Map<String, Value> {
        let keys: BTreeSet<&String> = self.layers.iter().flat_map(|l| l.vars.keys()).collect();
        keys.into_iter()
            .filter_map(|k| {
                let v = self.resolve(k)?;
                Some((k.clone(), serde_json::to_value(&v).ok()?))
            })
            .collect()
    }

    pub fn templar(&self) -> &Arc<Templar> {
        &self.templar
    }
}

fn contains_template(v: &Value) -> bool {
    match v {
        Value::String(s) => Templar::is_template(s),
        Value::Array(a) => a.iter().any(contains_template),
        Value::Object(m) => m.values().any(contains_template),
        _ => false,
    }
}

impl Object for Scope {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &minijinja::Value) -> Option<minijinja::Value> {
        self.resolve(key.as_str()?)
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let keys: BTreeSet<String> = self
            .layers
            .iter()
            .flat_map(|l| l.vars.keys().cloned())
            .collect();
        Enumerator::Values(keys.into_iter().map(minijinja::Value::from).collect())
    }
}
