//! What a loop gives each item and takes back: the item's variables and their trust, the
//! items of a `with_<lookup>` loop, `loop_control.loop_var` and `break_when`, and the registered
//! result of the whole loop.

use super::actions::trust::result_trust;
use super::all_hold;
use crate::playbook::Task;
use crate::report::Status;
use crate::vars::{magic, pruned_object, Layer, Scope};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// The variables loop item `i` adds to the task's scope: the loop variable, `index_var`,
/// `ansible_loop_var` (and `ansible_index_var`) and, with `extended`, `ansible_loop`. The
/// item's result carries them too, as ansible-core's does.
pub(super) fn item_vars(
    task: &Task,
    items: &[Value],
    i: usize,
    loop_var: &str,
) -> Map<String, Value> {
    let mut layer = Map::new();
    layer.insert(loop_var.to_string(), items[i].clone());
    if let Some(iv) = &task.index_var {
        layer.insert(iv.clone(), json!(i));
        layer.insert("ansible_index_var".into(), json!(iv));
    }
    layer.insert("ansible_loop_var".into(), json!(loop_var));
    if let Some(allitems) = task.loop_extended {
        layer.insert("ansible_loop".into(), ansible_loop(items, i, allitems));
    }
    layer
}

/// `ansible_loop` of item `i` (`loop_control.extended`), without `allitems` unless asked.
pub(super) fn ansible_loop(items: &[Value], i: usize, allitems: bool) -> Value {
    let mut ext = magic::extended_loop(items, i);
    if let (false, Value::Object(m)) = (allitems, &mut ext) {
        m.shift_remove("allitems");
    }
    ext
}

/// [`item_vars`] as a scope layer, with the trust of the literal item it came from.
pub(super) fn item_layer(task: &Task, items: &[Value], i: usize, loop_var: &str) -> Layer {
    let layer = item_vars(task, items, i, loop_var);
    let layer = Layer::data(layer);
    match item_source(task, items.len(), i) {
        Some(source) => layer.with_literal(Map::from_iter([(loop_var.to_string(), source)])),
        None => layer,
    }
}

/// The trust a registered loop result keeps for one item, as in ansible-core, where the
/// controller adds the item itself to each result: its `item` (and the loop variable) keep
/// the trust of the loop item (`Scope::vouched_at` of the loop variable, traced through
/// `Layer::literal`), and a controller-side action's facts theirs (`result_trust`).
pub(super) fn item_trust(
    task: &Task,
    item_scope: &Scope,
    (item, loop_var): (&Value, &str),
    result: Option<&Map<String, Value>>,
) -> Value {
    if task.register.is_none() {
        return Value::Null;
    }
    let of_item = item_scope.vouched_at(loop_var, item);
    let mut trust = match result.map(|r| result_trust(task, item_scope, r)) {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    if !of_item.is_null() {
        // ansible-core's item result holds the item under the loop variable's name only.
        trust.insert(loop_var.to_string(), of_item);
    }
    pruned_object(trust.into_iter())
}

/// What item `i` of a loop was rendered from, as the playbook wrote it, for trust alone
/// (`Layer::literal`): the element of a list written in the task, or `{{ var[i] }}` for a loop
/// over a variable's list. So `that: "{{ item }}"` over `loop: [a == 1]` evaluates the item,
/// as in ansible-core, while an item a template computed is never code. None where items and
/// elements may not line up (flattened, looked up, a dict).
fn item_source(task: &Task, len: usize, i: usize) -> Option<Value> {
    use crate::playbook::LoopKind;
    let one_to_one = match task.loop_kind {
        LoopKind::List | LoopKind::WithList => true,
        // Flattened: one to one only when no element is, or may render to, a list.
        LoopKind::Items => match task.loop_items.as_ref()? {
            Value::Array(a) => a.iter().all(|e| {
                !e.is_array()
                    && !e
                        .as_str()
                        .is_some_and(crate::template::Templar::is_template)
            }),
            // A variable's list lines up or not: the text must match anyway (`trusted_string`).
            _ => true,
        },
        _ => false,
    };
    if !one_to_one {
        return None;
    }
    match task.loop_items.as_ref()? {
        Value::Array(a) if a.len() == len => a.get(i).cloned(),
        Value::String(s) => crate::template::Templar::single_expression_code(s)
            .map(|code| json!(format!("{{{{ {}[{i}] }}}}", code.trim()))),
        _ => None,
    }
}

/// ansible-core 2.18's `loop_control.break_when`, after an item (`res`, its result, also under
/// the `register` name): whether the loop stops there. Conditions that cannot be evaluated stop
/// it too, with why in `broken` (the task then fails with that alone, as in ansible-core).
pub(super) fn break_after(
    task: &Task,
    item_scope: &Arc<Scope>,
    res: Option<&Value>,
    broken: &mut Option<String>,
) -> bool {
    let Some(conds) = &task.loop_break_when else {
        return false;
    };
    let scope = match (&task.register, res) {
        (Some(reg), Some(res)) => {
            let mut m = Map::new();
            m.insert(reg.clone(), res.clone());
            item_scope.with(Layer::data(m))
        }
        _ => item_scope.clone(),
    };
    all_hold(&scope, conds).unwrap_or_else(|e| {
        *broken = Some(format!("Error while evaluating conditional: {e}"));
        true
    })
}

/// `loop_control.loop_var` as this host names it: ansible-core renders a templated name.
pub(super) fn loop_var_of(raw: &str, scope: &Arc<Scope>) -> Result<String, String> {
    if !crate::template::Templar::is_template(raw) {
        return Ok(raw.to_string());
    }
    let name = match scope.render(&Value::String(raw.to_string()))? {
        Value::String(s) => s,
        other => other.to_string(),
    };
    if crate::playbook::is_var_name(&name) {
        Ok(name)
    } else {
        Err(format!(
            "`loop_control.loop_var` `{raw}` renders to `{name}`, which is not a variable name"
        ))
    }
}

/// The variable holding a `with_<lookup>` loop's terms while its lookup is queried.
const LOOP_TERMS: &str = "__fixpoint_loop_terms";

/// A `with_<lookup>` loop's items: its lookup queried with the rendered terms (a list is the
/// terms, anything else the one term), as ansible-core runs it; other loops' values as they are.
pub(super) fn query_loop(task: &Task, terms: Value, scope: &Arc<Scope>) -> Result<Value, String> {
    let Some(name) = task.loop_lookup.as_deref() else {
        return Ok(terms);
    };
    let terms = match terms {
        Value::Array(a) => a,
        other => vec![other],
    };
    let mut layer = Map::new();
    layer.insert(LOOP_TERMS.to_string(), Value::Array(terms));
    // The name is the playbook's own key, written as a JSON string: a Jinja string literal.
    scope
        .with(Layer::data(layer))
        .eval(&format!("query({}, *{LOOP_TERMS})", Value::from(name)))
}

/// A loop's registered result, with ansible-core's keys in its order: `skipped` when every
/// item was (and `skipped_reason` for no items at all), `failed` only when an item failed, and
/// the `msg` that says which.
pub(super) fn loop_result(statuses: &[Status], results: Vec<Value>) -> Map<String, Value> {
    let mut r = Map::new();
    let changed = statuses.contains(&Status::Changed);
    if statuses.is_empty() {
        r.insert("changed".into(), json!(false));
        r.insert("skipped".into(), json!(true));
        r.insert("skipped_reason".into(), json!("No items in the list"));
        r.insert("results".into(), Value::Array(results));
        return r;
    }
    let skipped = statuses.iter().all(|s| *s == Status::Skipped);
    let failed = statuses.contains(&Status::Failed);
    r.insert("results".into(), Value::Array(results));
    r.insert("skipped".into(), json!(skipped));
    if changed {
        r.insert("changed".into(), json!(true));
    }
    if failed {
        r.insert("failed".into(), json!(true));
    }
    if statuses.contains(&Status::Unreachable) {
        r.insert("unreachable".into(), json!(true));
    }
    let msg = if skipped {
        "All items skipped"
    } else if failed {
        "One or more items failed"
    } else {
        "All items completed"
    };
    r.insert("msg".into(), json!(msg));
    if !changed {
        r.insert("changed".into(), json!(false));
    }
    r
}
