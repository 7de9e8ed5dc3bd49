//! Controller-side actions. The engine runs `include_vars` and `setup` itself, here, because
//! they change the host's variables; `prepare` turns the others into an outcome or a request.

pub mod argspec;
pub mod fetch;
pub mod held;
pub mod include_vars;
pub mod inventory;
pub mod pause;
pub mod prepare;
pub mod tree;
pub mod trust;
pub mod upload;

use super::result::ItemResult;
use super::state::{HostState, PlayCtx};
use super::Shared;
use crate::playbook::Task;
use fixpoint_agent::protocol::{Request, Response};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// `include_vars`: variables loaded on the controller go to the host's include_vars layer.
/// Relative names are found in the role's `vars/`, then beside the playbook.
pub(super) fn include_vars(
    ctx: &PlayCtx<'_>,
    task: &Task,
    h: &mut HostState,
    params: &Value,
    scope: &Arc<crate::vars::Scope>,
) -> ItemResult {
    let mut search = Vec::new();
    if let Some(r) = &task.role {
        search.push(r.path.join("vars"));
        search.push(r.path.clone());
    }
    search.push(ctx.play.dir.clone());
    // A variable's value now, for `hash_behaviour: merge` (only plain names are looked up).
    let existing = |name: &str| {
        let plain = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        // Rendered already (and maybe a host's): literal in the templates layer it joins.
        plain
            .then(|| scope.eval(name).ok().map(crate::yaml::mark::literal_data))
            .flatten()
    };
    match include_vars::include_vars(params, &search, &task.pos, &existing) {
        Ok((vars, files)) => {
            Arc::make_mut(&mut h.included_vars).extend(vars.clone());
            let mut result = Map::new();
            result.insert("ansible_facts".into(), Value::Object(vars));
            result.insert(
                "ansible_included_var_files".into(),
                json!(files
                    .iter()
                    .map(|f| f.display().to_string())
                    .collect::<Vec<_>>()),
            );
            ItemResult::ok(result)
        }
        // Ansible's action reports its failure as `message`.
        Err(msg) => {
            let result = [("message".to_string(), json!(msg))].into_iter().collect();
            ItemResult::failed(msg, result)
        }
    }
}

impl Shared<'_> {
    /// `setup` (and `gather_facts` as a task): the agent gathers the facts again (all of them,
    /// whatever subset is asked for; `gather_timeout` bounds the wait), and they become the
    /// host's facts. The registered `ansible_facts` names them `ansible_<name>`, as the setup
    /// module returns them.
    pub(super) async fn setup(
        &self,
        ctx: &PlayCtx<'_>,
        task: &Task,
        h: &mut HostState,
        params: &Value,
    ) -> Result<ItemResult, (bool, String)> {
        let timeout = match params.get("gather_timeout") {
            Some(Value::Number(n)) => n.as_u64().map(Duration::from_secs),
            Some(Value::String(t)) => t.trim().parse().ok().map(Duration::from_secs),
            _ => None,
        };
        // With `delegate_to`, the delegated host's facts (given to this host, or with
        // `delegate_facts` to that host: `result::delegated_facts_target`).
        let scope = self.scope(ctx, Some(task), h);
        let spec = self
            .task_conn_spec(h, ctx, task, &scope)
            .map_err(|e| (false, e))?;
        let for_other = task.delegate_facts && spec.host != h.name;
        let conn = self.conn(h, &spec, ctx).await?;
        match conn
            .call(
                &Request::Facts,
                Some(timeout.unwrap_or(self.cfg.connect_timeout)),
            )
            .await
        {
            Ok(Response::Facts { facts }) => {
                // `filter: ansible_distribution*` (a pattern or a list; `*` or none: all).
                let patterns: Vec<String> = match params.get("filter") {
                    Some(Value::String(p)) if p != "*" => vec![p.clone()],
                    Some(Value::Array(ps)) => ps.iter().map(super::display).collect(),
                    _ => Vec::new(),
                };
                let facts = match patterns.is_empty() {
                    true => facts,
                    false => super::facts::filtered(facts, &patterns),
                };
                let returned: Map<String, Value> = facts
                    .iter()
                    .map(|(k, v)| (format!("ansible_{k}"), v.clone()))
                    .collect();
                if !for_other {
                    h.facts = Arc::new(super::facts::add_gathered(&h.facts, facts));
                }
                let mut result = Map::new();
                result.insert("ansible_facts".into(), Value::Object(returned));
                Ok(ItemResult::ok(result))
            }
            Ok(other) => Err((false, format!("unexpected answer to facts: {other:?}"))),
            Err(e) => Err((true, e.to_string())),
        }
    }
}
