//! Result post-processing: `changed_when`, `failed_when`, `ignore_errors`, `set_fact` and
//! the registered result, turning an item's outcome into the event that is reported.

use super::actions::trust::{fact_trust, result_trust};
use super::state::HostState;
use super::{all_hold, Shared};
use crate::connection::pool::ConnKey;
use crate::playbook::Task;
use crate::report::Status;
use crate::vars::{Layer, Scope};
use fixpoint_modules::{Diff, Outcome};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// What ansible-core 2.19 puts under `exception` when it has no traceback to show.
pub(super) const NO_TRACEBACK: &str = "(traceback unavailable)";

/// One item's outcome before reporting.
pub(super) struct ItemResult {
    pub(super) status: Status,
    pub(super) outcome: Outcome,
    pub(super) msg: Option<String>,
    pub(super) ignored: bool,
    pub(super) note: Option<String>,
    /// The agent (by become user) that created outbox entries for this change, and for which
    /// handlers, if any.
    pub(super) outbox_written: Option<(ConnKey, Vec<String>)>,
    /// `delegate_to`: the host it ran on, when not the task's own.
    pub(super) delegated_to: Option<String>,
}

impl ItemResult {
    pub(super) fn ok(result: Map<String, Value>) -> ItemResult {
        ItemResult::done(Outcome {
            result,
            ..Outcome::default()
        })
    }

    /// A module's outcome: changed or ok (skipped when the module says so, as a command
    /// without a guard in check mode), its message shown.
    pub(super) fn done(outcome: Outcome) -> ItemResult {
        ItemResult {
            status: if outcome.result.get("skipped") == Some(&Value::Bool(true)) {
                // A module that skipped itself (a command in check mode).
                Status::Skipped
            } else if outcome.changed {
                Status::Changed
            } else {
                Status::Ok
            },
            msg: outcome.msg.clone(),
            outcome,
            ignored: false,
            note: None,
            outbox_written: None,
            delegated_to: None,
        }
    }

    /// A failure with its message and whatever result the module returned with it.
    pub(super) fn failed(msg: String, result: Map<String, Value>) -> ItemResult {
        ItemResult {
            status: Status::Failed,
            outcome: Outcome {
                result,
                ..Outcome::default()
            },
            msg: Some(msg),
            ignored: false,
            note: None,
            outbox_written: None,
            delegated_to: None,
        }
    }
}

/// What ansible-core registers for a task that failed before or instead of its module (a
/// template it could not render, a condition it could not evaluate).
pub(super) fn failure_result(msg: &str) -> Map<String, Value> {
    let mut m = Map::with_capacity(4);
    m.insert("failed".into(), json!(true));
    m.insert("changed".into(), json!(false));
    m.insert("msg".into(), json!(msg));
    m.insert("exception".into(), json!(NO_TRACEBACK));
    m
}

/// One result to report, produced by a host future and reported in host order.
pub(super) struct Event {
    pub(super) status: Status,
    pub(super) item: Option<String>,
    pub(super) diff: Diff,
    pub(super) msg: Option<String>,
    pub(super) result: Map<String, Value>,
    pub(super) ignored: bool,
    pub(super) note: Option<String>,
    /// `delegate_to`: the host it ran on, when not the task's own.
    pub(super) delegated_to: Option<String>,
    /// The item's `notify` names rendered with its variables, when the task's are templates
    /// (`notify: "restart {{ svc }}"`); otherwise they are the task's own.
    pub(super) notified: Option<Vec<String>>,
    /// The module a templated `action` named on this host, as written: the event's module,
    /// and the task's name when it has none, as ansible-core names each host's copy of it.
    pub(super) action: Option<String>,
    /// This item's output is hidden: `no_log` given by a template of the loop item held for
    /// it (the task's own `no_log` hides all of them: `HostRun`).
    pub(super) hidden: bool,
}

impl Shared<'_> {
    /// Apply register, changed_when, failed_when and ignore_errors; build the event.
    pub(super) fn finish_item(
        &self,
        task: &Task,
        h: &mut HostState,
        scope: &Arc<Scope>,
        r: Result<ItemResult, (bool, String)>,
        item: Option<String>,
    ) -> Event {
        let ignore = task.ignore_errors;
        let mut r = match r {
            Ok(r) => r,
            Err((unreachable, msg)) => {
                let msg = format!("{msg} (task \"{}\" at {})", task.display_name(), task.pos);
                let status = if unreachable {
                    Status::Unreachable
                } else {
                    Status::Failed
                };
                // As ansible-core registers them: an unreachable result is not `failed`
                // (the `unreachable` and `reachable` tests read its `unreachable`). A loop
                // keeps it as the item's result.
                let mut result = failure_result(&msg);
                if unreachable {
                    result.remove("failed");
                    result.insert("unreachable".into(), json!(true));
                }
                if let Some(reg) = &task.register {
                    h.set_var(reg, Value::Object(result.clone()));
                }
                return Event {
                    status,
                    item,
                    diff: Diff::default(),
                    msg: Some(msg),
                    result,
                    // Each item's own: a loop is unreachable as a whole unless every
                    // unreachable item ignored it (`account`).
                    ignored: match status {
                        Status::Failed => ignore,
                        _ => task.ignore_unreachable == Some(true),
                    },
                    note: None,
                    delegated_to: None,
                    notified: None,
                    action: None,
                    hidden: false,
                };
            }
        };
        let module_failed = r.status == Status::Failed;
        // What `failed_when` needs of the module's own result, before it is taken (not
        // copied: it runs for every task on every host).
        let module_said_changed = r.outcome.result.get("changed") == Some(&Value::Bool(true));
        let mut result = std::mem::take(&mut r.outcome.result);
        result.insert("changed".into(), json!(r.status == Status::Changed));
        result.insert("failed".into(), json!(r.status == Status::Failed));
        if let Some(m) = &r.msg {
            result.insert("msg".into(), json!(m));
        }
        let cacheable =
            result.remove(super::actions::prepare::CACHEABLE) == Some(Value::Bool(true));
        let facts_to = delegated_facts_target(task, h, scope);
        // `debug: var=ansible_facts` shows facts; it sets none (ansible-core leaves debug's
        // results out when it collects facts).
        let facts = match task.module {
            "debug" => None,
            _ => result.get("ansible_facts"),
        };
        if let (Some(Value::Object(facts)), Some(to)) = (facts, facts_to) {
            h.delegated_facts
                .push((to, facts.clone(), task.module == "set_fact"));
        } else if let Some(Value::Object(facts)) = facts {
            if task.module == "set_fact" {
                for (k, v) in facts {
                    let trust = fact_trust(task, scope, k, v);
                    h.set_vouched_var(k, v.clone(), trust);
                }
                if cacheable {
                    super::facts::add_to_ansible_facts(
                        std::sync::Arc::make_mut(&mut h.facts),
                        facts,
                    );
                }
            } else {
                // Any other module's facts (`service_facts`, `package_facts`, a Python
                // module's or `getent`'s `getent_passwd`) join the host's facts, as in Ansible.
                super::facts::merge_facts(std::sync::Arc::make_mut(&mut h.facts), facts);
            }
        }
        // changed_when / failed_when see the result under its registered name and as plain names.
        if task.changed_when.is_some() || task.failed_when.is_some() {
            let mut layer = result.clone();
            if let Some(reg) = &task.register {
                layer.insert(reg.clone(), Value::Object(result.clone()));
            }
            let s = scope.with(Layer::data(layer));
            let mut failed_when_result = None;
            // A condition that cannot be evaluated fails the task, and ansible-core records
            // why under `<keyword>_result` (`changed_when_result`), which playbooks test.
            let mut unevaluable: Option<(&str, String)> = None;
            if let Some(conds) = &task.failed_when {
                match all_hold(&s, conds) {
                    Ok(failed) => {
                        failed_when_result = Some(failed);
                        // A module that failed may still have changed something (a command
                        // that ran and exited 1 says `changed: true`), which stands once
                        // failed_when overrules the failure, as in ansible-core.
                        let module_changed =
                            r.outcome.changed || (module_failed && module_said_changed);
                        r.status = if failed {
                            Status::Failed
                        } else if module_changed {
                            Status::Changed
                        } else {
                            Status::Ok
                        };
                        if failed && r.msg.is_none() {
                            r.msg = Some(format!("failed_when: {} held", conds.join(" and ")));
                        }
                        if !failed {
                            // The module's own failure message no longer applies.
                            r.msg = r.outcome.msg.clone();
                        }
                    }
                    Err(e) => {
                        r.status = Status::Failed;
                        r.msg = Some(format!("cannot evaluate failed_when: {e}"));
                        unevaluable = Some(("failed_when_result", e));
                    }
                }
            }
            if r.status != Status::Failed {
                if let Some(conds) = &task.changed_when {
                    match all_hold(&s, conds) {
                        Ok(true) => r.status = Status::Changed,
                        Ok(false) => r.status = Status::Ok,
                        Err(e) => {
                            r.status = Status::Failed;
                            r.msg = Some(format!("cannot evaluate changed_when: {e}"));
                            unevaluable = Some(("changed_when_result", e));
                        }
                    }
                }
            }
            result.insert("changed".into(), json!(r.status == Status::Changed));
            result.insert("failed".into(), json!(r.status == Status::Failed));
            // ansible-core records what failed_when gave in the result (and so in `register`).
            if let Some(f) = failed_when_result {
                result.insert("failed_when_result".into(), json!(f));
            }
            if let Some((key, e)) = unevaluable {
                // The module's own `changed` stays in the result, as in ansible-core.
                result.insert("changed".into(), json!(r.outcome.changed));
                result.insert(
                    key.into(),
                    json!(format!("Error while evaluating conditional: {e}")),
                );
            }
        }
        // ansible-core 2.19 records an `exception` on every failed result (this text when it
        // keeps no traceback), and moves it to `failed_when_suppressed_exception` when
        // `failed_when` overrules a module's failure; playbooks test both.
        if r.status == Status::Failed {
            result
                .entry("exception")
                .or_insert_with(|| json!(NO_TRACEBACK));
        } else if module_failed {
            let e = result
                .remove("exception")
                .unwrap_or_else(|| json!(NO_TRACEBACK));
            result.insert("failed_when_suppressed_exception".into(), e);
        }
        if scope.take_deprecated() {
            result.insert("deprecations".into(), templated_condition_deprecation());
        }
        // ansible-core's `unarchive` and `script` action plugins skip (`creates`, `removes`) by
        // raising, which ends the task before the `failed` key every module result gets.
        if r.status != Status::Failed
            && result.get("skipped") == Some(&Value::Bool(true))
            && ["unarchive", "script"].contains(&task.module)
        {
            result.remove("failed");
        }
        if let Some(reg) = &task.register {
            if task.loop_items.is_none() {
                let trust = result_trust(task, scope, &result);
                let mut registered = Value::Object(result.clone());
                if task.module == "include_vars" {
                    // A registered result is data, never rendered: a file's `!unsafe` strings
                    // are their text there (the trust above left them out).
                    registered = crate::yaml::mark::strip_marks(&registered);
                }
                h.set_vouched_var(reg, registered, trust);
            }
        }
        // A module that skipped itself stays skipped whatever changed_when says, as in Ansible.
        if r.status != Status::Failed && result.get("skipped") == Some(&Value::Bool(true)) {
            r.status = Status::Skipped;
            result.insert("changed".into(), json!(false));
        }
        let msg = match (r.status, r.msg) {
            (Status::Failed, Some(m)) => Some(format!(
                "{m} (task \"{}\" at {})",
                task.display_name(),
                task.pos
            )),
            (_, m) => m,
        };
        let diff = if r.status == Status::Changed {
            r.outcome.diff
        } else {
            Diff::default()
        };
        // Rendered per item whatever its status: when any item changed, ansible-core notifies
        // the names of every item.
        let notified = super::handlers::templated_notify(task, scope)
            .map(|r| r.unwrap_or_else(|_| task.notify.clone()));
        Event {
            status: r.status,
            item,
            diff,
            msg,
            result,
            ignored: ignore && r.status == Status::Failed || r.ignored,
            note: r.note,
            delegated_to: r.delegated_to,
            notified,
            action: None,
            hidden: false,
        }
    }
}

pub(super) fn skip_event(item: Option<String>) -> Event {
    Event {
        status: Status::Skipped,
        item,
        diff: Diff::default(),
        msg: None,
        result: Map::new(),
        ignored: false,
        note: None,
        delegated_to: None,
        notified: None,
        action: None,
        hidden: false,
    }
}

/// With `delegate_facts: true` and `delegate_to` another host: that host, which the facts the
/// task sets are for (ansible-core gives them to it instead of the delegating host).
fn delegated_facts_target(task: &Task, h: &HostState, scope: &Arc<Scope>) -> Option<String> {
    if !task.delegate_facts {
        return None;
    }
    let raw = task.delegate_to.as_ref()?;
    let to = super::display(&scope.render(&json!(raw)).ok()?);
    (to != h.name).then_some(to)
}

/// The deprecation ansible-core 2.19 records in a task's result (`deprecations`) when one of
/// its conditions is written as a template (`when: "{{ x }}"`), in its words.
fn templated_condition_deprecation() -> Value {
    json!([{
        "collection_name": "ansible.builtin",
        "deprecator": {"resolved_name": "ansible.builtin", "type": null},
        "msg": "Conditionals should not be surrounded by templating delimiters such as {{ }} or {% %}.",
        "version": "2.23",
    }])
}
