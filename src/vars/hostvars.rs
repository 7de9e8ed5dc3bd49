//! Ansible's `hostvars`: every inventory host's variables as another host sees them.

use super::magic::host_names;
use super::{HostVars, Layer, Scope};
use crate::inventory::Inventory;
use crate::template::Templar;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// `hostvars` of the inventory hosts before any play works on them (the engine computes this
/// once per run and keeps it).
pub fn idle(
    inventory: &Inventory,
    templar: &Arc<Templar>,
    extra_vars: &Map<String, Value>,
) -> Map<String, Value> {
    let names = inventory.select("all").unwrap_or_default();
    names
        .into_iter()
        .map(|n| {
            let inv = Arc::new(inventory.host_vars(&n));
            let empty = Map::new();
            let m = rendered_inv_vars(&n, &inv, &empty, &empty, templar, extra_vars);
            (n, Value::Object(m))
        })
        .collect()
}

/// `hostvars`: every inventory host's variables (rendered in that host's scope), with the facts
/// and set facts of the hosts this run has worked on, as data. `idle` holds the hosts no play
/// has touched yet, computed once per run.
pub fn snapshot<'a>(
    hosts: impl IntoIterator<Item = HostVars<'a>>,
    idle: &Map<String, Value>,
    peers: &Map<String, Value>,
    templar: &Arc<Templar>,
    extra_vars: &Map<String, Value>,
) -> Value {
    let mut all = idle.clone();
    all.extend(peers.clone());
    for h in hosts {
        let mut m = rendered_inv_vars(
            h.name,
            h.inv_vars,
            h.facts,
            h.host_vars,
            templar,
            extra_vars,
        );
        m.extend(h.facts.clone());
        m.extend(h.host_vars.clone());
        all.insert(h.name.to_string(), Value::Object(m));
    }
    Value::Object(all)
}

/// A host's inventory variables with their templates (`db_name: "{{ app_name }}"`) rendered in
/// that host's own scope, as another host sees them through Ansible's `hostvars`.
fn rendered_inv_vars(
    name: &str,
    inv_vars: &Arc<Map<String, Value>>,
    facts: &Map<String, Value>,
    host_vars: &Map<String, Value>,
    templar: &Arc<Templar>,
    extra_vars: &Map<String, Value>,
) -> Map<String, Value> {
    let mut m = (**inv_vars).clone();
    m.insert("inventory_hostname".into(), json!(name));
    // Templates anywhere inside a value, and `!unsafe` marks, which rendering unwraps.
    let is_template = Templar::needs_render;
    if !m.values().any(is_template) {
        return m;
    }
    let scope = Scope::new(
        templar.clone(),
        vec![
            Layer {
                vars: inv_vars.clone(),
                templated: true,
            },
            Layer::data(facts.clone()),
            Layer::data(host_vars.clone()),
            Layer::templates(extra_vars.clone()),
            Layer::data(host_names(name)),
        ],
    );
    for v in m.values_mut() {
        if is_template(v) {
            // A value that cannot be rendered here stays as written, as Ansible shows it
            // (its `!unsafe` values unmarked: they are literal either way).
            *v = match scope.render(v) {
                Ok(r) => r,
                Err(_) => crate::yaml::mark::strip_marks(v),
            };
        }
    }
    m
}
