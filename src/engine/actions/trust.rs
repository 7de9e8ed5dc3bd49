//! Trust in the expressions `assert` and `debug` evaluate themselves (`that`, `var`): only text
//! the playbook, the inventory or `-e` wrote is code, as ansible-core 2.19's data tags decide.

use super::prepare::{display_value, Failure};
use crate::vars::Scope;
use crate::yaml::mark;
use serde_json::Value;
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
/// a host's string is untrusted, never evaluated.
pub(super) fn var_name(var: String, scope: &Arc<Scope>) -> Result<String, Failure> {
    let Some(code) = crate::template::Templar::single_expression_code(&var).map(str::trim) else {
        return Ok(var);
    };
    match scope.eval(code).map_err(Failure::msg)? {
        Value::String(s) if scope.trusted_string(code, &s) => Ok(s),
        Value::String(s) => Err(untrusted(&Value::String(s))),
        other => Err(Failure::msg(format!(
            "`var` `{var}` rendered to {other}, not the name of a variable (a string)"
        ))),
    }
}
