//! Trust in the expressions `assert` and `debug` evaluate themselves (`that`, `var`): only text
//! the playbook, the inventory or `-e` wrote is code, as ansible-core 2.19's data tags decide;
//! and the trust a registered result or a `set_fact` keeps for the tasks after it.

use super::prepare::{display_value, Failure};
use crate::playbook::Task;
use crate::template::Templar;
use crate::vars::{pruned_array, pruned_object, Scope};
use crate::yaml::mark;
use serde_json::{Map, Value};
use std::sync::Arc;

/// An expression an action evaluates itself (`assert`'s `that`, `debug`'s `var`) that an
/// argument splat rendered, at `path` when the splat is a variable path: a string stays code
/// only if it is the playbook's own text (`Scope::trusted_string`, as for `when: "{{ c }}"`);
/// any other is marked `!unsafe`, which the action refuses to evaluate, as ansible-core
/// refuses an untrusted expression. So a host's output spread into `assert` never runs.
pub(in crate::engine) fn vouch(v: Value, path: Option<&str>, scope: &Scope) -> Value {
    match v {
        Value::String(s) if path.is_some_and(|p| scope.trusted_string(p, &s)) => Value::String(s),
        Value::String(s) => mark::mark(Value::String(s)),
        Value::Array(a) => Value::Array(
            a.into_iter()
                .enumerate()
                .map(|(i, e)| vouch(e, path.map(|p| format!("{p}[{i}]")).as_deref(), scope))
                .collect(),
        ),
        other => other,
    }
}

/// An expression an action would evaluate that is not the playbook's own text (an argument
/// splat's, `item::vouch`, or written `!unsafe`): never evaluated, as in ansible-core 2.19.
pub(super) fn untrusted(text: &Value) -> Failure {
    Failure::msg(format!(
        "untrusted template or expression: `{}` is not text the playbook, the inventory or -e \
         wrote (it came from a host, or a template computed it), and such text is never \
         evaluated; write the expression in the task",
        display_value(text)
    ))
}

/// The expression `debug`'s `var` names. Written as one template (`var: "{{ name }}"`,
/// `var={{ item }}`), it is rendered first, as ansible-core templates it, and what it renders
/// to must be a string the playbook wrote (a variable's, a literal loop item's): a computed or
/// a host's string is untrusted, never evaluated. `None`: it rendered to `omit`.
pub(super) fn var_name(var: String, scope: &Arc<Scope>) -> Result<Option<String>, Failure> {
    let Some(code) = crate::template::Templar::single_expression_code(&var).map(str::trim) else {
        return Ok(Some(var));
    };
    match scope.eval(code).map_err(Failure::msg)? {
        // `var: "{{ omit }}"` leaves the argument out, as any parameter rendered to omit.
        Value::String(s) if s == crate::vars::magic::OMIT => Ok(None),
        Value::String(s) if scope.trusted_string(code, &s) => Ok(Some(s)),
        Value::String(s) => Err(untrusted(&Value::String(s))),
        other => Err(Failure::msg(format!(
            "`var` `{var}` rendered to {other}, not the name of a variable (a string)"
        ))),
    }
}

/// The trust a task's result keeps when it is registered (`HostState::set_vouched_var`), as
/// ansible-core keeps the tags of the values a controller-side action returns: `set_fact`'s
/// facts (`fact_trust`) and the strings of `include_vars`' files, under `ansible_facts`, and
/// `debug`'s `msg` (as `set_fact` would keep it). A module's result is the host's, and keeps
/// none.
pub(in crate::engine) fn result_trust(
    task: &Task,
    scope: &Scope,
    result: &Map<String, Value>,
) -> Value {
    if task.module == "debug" {
        let msg = match (task.params.get("msg"), result.get("msg")) {
            (Some(raw), Some(msg)) => scope.vouched_render(raw, msg),
            _ => Value::Null,
        };
        return pruned_object(std::iter::once(("msg".to_string(), msg)));
    }
    let Some(Value::Object(facts)) = result.get("ansible_facts") else {
        return Value::Null;
    };
    let facts = match task.module {
        "set_fact" => pruned_object(
            facts
                .iter()
                .map(|(k, v)| (k.clone(), fact_trust(task, scope, k, v))),
        ),
        // Merged into a variable's current value, the facts hold what it held: none.
        "include_vars" if task.params.get("hash_behaviour").is_none() => file_trust(facts),
        _ => Value::Null,
    };
    pruned_object(std::iter::once(("ansible_facts".to_string(), facts)))
}

/// The trust `set_fact`'s fact `name` keeps: that of its argument as written, rendered to
/// `value` (`Scope::vouched_render`). None when a key is a template: it may name another key.
pub(in crate::engine) fn fact_trust(
    task: &Task,
    scope: &Scope,
    name: &str,
    value: &Value,
) -> Value {
    let Some(params) = task.params.as_object() else {
        return Value::Null;
    };
    if params.keys().any(|k| Templar::is_template(k)) {
        return Value::Null;
    }
    match params.get(name) {
        Some(raw) => scope.vouched_render(raw, value),
        None => Value::Null,
    }
}

/// The strings a vars file wrote, as `include_vars` read them: all trusted but the `!unsafe`
/// ones, and those that are templates (a registered result is data to fixpoint, never
/// rendered again, where ansible-core renders them).
fn file_trust(v: &Map<String, Value>) -> Value {
    fn tree(v: &Value) -> Value {
        if mark::literal_of(v).is_some() || mark::vault_text(v).is_some() {
            return Value::Null;
        }
        match v {
            Value::String(s) if !Templar::is_template(s) => v.clone(),
            Value::Array(a) => pruned_array(a.iter().map(tree)),
            Value::Object(m) => pruned_object(m.iter().map(|(k, e)| (k.clone(), tree(e)))),
            _ => Value::Null,
        }
    }
    pruned_object(v.iter().map(|(k, e)| (k.clone(), tree(e))))
}

/// ansible-core 2.19 evaluates each element of a list of conditions a template gives
/// (`that: "{{ thats }}"`) as a condition of its own, so one written as a template that
/// rendered to a boolean (`'{{ 1 == 1 }}'`, which fixpoint rendered with the list) is
/// deprecated there as `when: "{{ true }}"` is (`Scope::take_deprecated`).
pub(super) fn note_templated_elements(that: &str, listed: &Value, scope: &Scope) {
    let (Some(Value::Array(raw)), Value::Array(items)) =
        (scope.whole_variable_definition(that), listed)
    else {
        return;
    };
    let templated_bool =
        |(r, v): (&Value, &Value)| v.is_boolean() && r.as_str().is_some_and(Templar::is_template);
    if raw.iter().zip(items).any(templated_bool) {
        scope.note_deprecated();
    }
}
