//! One task on one host: `when`, the loop over its items (what each gets and leaves:
//! `loop_items.rs`), and `until` retries.

use super::item::outbox_writer;
use super::loop_items::{
    break_after, item_layer, item_trust, item_vars, loop_result, loop_var_of, query_loop,
};
use super::pipeline::LoopBatch;
use super::result::{failure_result, skip_event, Event};
use super::state::{HostState, PlayCtx};
use super::{all_hold, display, Shared};
use crate::playbook::ast::Templated;
use crate::playbook::Task;
use crate::report::Status;
use crate::vars::{pruned_array, pruned_object, Layer, Scope};
use fixpoint_modules::Diff;
use serde_json::{json, Map, Value};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A task's events on one host, the warnings its conditions gave, and whether its output is
/// hidden there (`no_log`, which a template may decide per host).
pub(super) type HostRun = (Vec<Event>, Vec<String>, bool);

impl Shared<'_> {
    /// The task's events on this host, and the warnings its conditions gave.
    pub(super) async fn run_task_on_host(
        &self,
        ctx: &PlayCtx<'_>,
        task: &Task,
        h: &mut HostState,
    ) -> HostRun {
        let scope = self.scope(ctx, Some(task), h);
        if task.templated.is_empty() {
            let events = self.task_events(ctx, task, h, &scope).await;
            return (events, scope.take_warnings(), task.no_log);
        }
        // Keywords given as templates take their values on this host, as in ansible-core; a
        // loop's `PER_ITEM` ones on each item (`loop_events`).
        let resolved = match resolve_flags(task, &scope, &ctx.play.dir, task.loop_items.is_some()) {
            Ok(t) => t,
            Err(msg) => {
                if task.templated.contains_key("action") {
                    // ansible-core names the module after `when`: a task it skips never
                    // needs one, and a failure to name it is registered as the task's.
                    if task.loop_items.is_none()
                        && matches!(self.when_holds(task, &scope), Ok(false))
                    {
                        self.register_skip(task, h, &scope);
                        return (vec![skip_event(None)], scope.take_warnings(), task.no_log);
                    }
                    self.register_failure(task, h, &msg);
                }
                let mut ev = failed_event(task, msg);
                // ansible-core decides on the keyword as written when its value cannot be
                // worked out: a template is a non-empty string, so truthy, and the failure
                // is ignored whatever the template would have given.
                ev.ignored |= task.templated.contains_key("ignore_errors");
                return (vec![ev], scope.take_warnings(), task.no_log);
            }
        };
        let warnings = scope.take_warnings();
        let scope = self.scope(ctx, Some(&resolved), h);
        let mut events = self.task_events(ctx, &resolved, h, &scope).await;
        if task.templated.contains_key("action") {
            for ev in &mut events {
                ev.action = Some(resolved.module_written.clone());
            }
        }
        let mut all = warnings;
        all.extend(scope.take_warnings());
        (events, all, resolved.no_log)
    }

    /// A loop task whose items are steps of a batch sent already (`pipeline.rs`), with the
    /// items and loop variable worked out then (`loop_items`: not rendered twice, so a loop
    /// over a lookup runs what was sent): its events take their answers.
    pub(super) async fn run_sent_loop(
        &self,
        ctx: &PlayCtx<'_>,
        task: &Task,
        h: &mut HostState,
        (items, loop_var): (&[Value], &str),
        sent: &mut LoopBatch,
    ) -> HostRun {
        let scope = self.scope(ctx, Some(task), h);
        let events = self
            .loop_events(ctx, task, h, &scope, (items, loop_var), Some(sent))
            .await;
        (events, scope.take_warnings(), task.no_log)
    }

    /// A loop's items and loop variable on this host, when they can be worked out (the loop
    /// path of `task_events` fails the task with the reason when they cannot).
    pub(super) fn loop_items(
        &self,
        ctx: &PlayCtx<'_>,
        task: &Task,
        scope: &Arc<Scope>,
    ) -> Option<(Vec<Value>, String)> {
        let rendered = scope
            .render_noting_undefined(task.loop_items.as_ref()?)
            .ok()?;
        let rendered = query_loop(task, rendered, scope).ok()?;
        let items = crate::playbook::loops::expand(
            task.loop_kind,
            rendered,
            &task.search_dirs(&ctx.play.dir),
        )
        .ok()?;
        Some((items, loop_var_of(&task.loop_var, scope).ok()?))
    }

    async fn task_events(
        &self,
        ctx: &PlayCtx<'_>,
        task: &Task,
        h: &mut HostState,
        scope: &Arc<Scope>,
    ) -> Vec<Event> {
        let fail = |msg: String| failed_event(task, msg);
        let Some(items_raw) = &task.loop_items else {
            let scope = &self.with_delegated_vars(ctx.play, task, scope);
            match self.when_holds(task, scope) {
                Ok(true) => {}
                Ok(false) => {
                    self.register_skip(task, h, scope);
                    return vec![skip_event(None)];
                }
                Err(e) => {
                    let ev = fail(e);
                    if let (Some(reg), Some(msg)) = (&task.register, &ev.msg) {
                        h.set_var(reg, Value::Object(failure_result(msg)));
                    }
                    return vec![ev];
                }
            }
            return vec![self.run_until(ctx, task, h, scope, None).await];
        };
        let rendered = match scope.render_noting_undefined(items_raw) {
            Ok(v) => v,
            Err((e, undefined)) => {
                // As in ansible-core, a loop over an undefined variable is an error only if the
                // task's `when`, decided without `item`, does not skip the task first.
                if undefined && matches!(self.when_holds(task, scope), Ok(false)) {
                    self.register_skip(task, h, scope);
                    return vec![skip_event(None)];
                }
                let msg = format!("cannot expand the loop: {e}");
                self.register_failure(task, h, &msg);
                return vec![fail(msg)];
            }
        };
        let items = match query_loop(task, rendered, scope).and_then(|rendered| {
            crate::playbook::loops::expand(
                task.loop_kind,
                rendered,
                &task.search_dirs(&ctx.play.dir),
            )
        }) {
            Ok(items) => items,
            Err(e) => {
                // Registered as ansible-core does, so `ignore_errors` + `register` can test it.
                let msg = format!("cannot expand the loop: {e}");
                self.register_failure(task, h, &msg);
                return vec![fail(msg)];
            }
        };
        let loop_var = match loop_var_of(&task.loop_var, scope) {
            Ok(v) => v,
            Err(msg) => {
                self.register_failure(task, h, &msg);
                return vec![fail(msg)];
            }
        };
        self.loop_events(ctx, task, h, scope, (&items, &loop_var), None)
            .await
    }

    /// A loop's events, item by item; `sent`: its items were sent in a larger batch.
    async fn loop_events(
        &self,
        ctx: &PlayCtx<'_>,
        task: &Task,
        h: &mut HostState,
        scope: &Arc<Scope>,
        (items, loop_var): (&[Value], &str),
        sent: Option<&mut LoopBatch>,
    ) -> Vec<Event> {
        let fail = |msg: String| failed_event(task, msg);
        let loop_var = loop_var.to_string();
        let mut events = Vec::new();
        let mut results = Vec::new();
        // The trust each registered result keeps (`item_trust`), beside `results`.
        let mut trusts = Vec::new();
        // What an item leaves for the next ones, as in ansible-core: the facts `set_fact` set
        // and the item's result under the `register` name.
        let mut carried = Map::new();
        // With pipelining, items that depend on nothing an earlier item leaves go to the agent
        // in one batch; each is still finished below, in order.
        let mut own = match (&sent, self.cfg.pipelining) {
            (None, true) if task.templated.is_empty() => {
                self.loop_batch(ctx, task, h, scope, items, &loop_var).await
            }
            _ => None,
        };
        let mut piped = sent.or(own.as_mut());
        // Why `break_when` could not be evaluated: the task fails there, its result that alone.
        let mut broken = None;
        for (i, item) in items.iter().enumerate() {
            let layer = item_layer(task, items, i, &loop_var);
            let item_scope = if carried.is_empty() {
                scope.with(layer)
            } else {
                scope.with(Layer::data(carried.clone())).with(layer)
            };
            let item_scope = self.with_delegated_vars(ctx.play, task, &item_scope);
            let label = match &task.loop_label {
                Some(l) => item_scope
                    .render(&json!(l))
                    .map(|v| display(&v))
                    .unwrap_or_else(|_| display(item)),
                None => display(item),
            };
            // ansible-core renders `loop_control.label` once the item has run, with the item's
            // own result under the `register` name; a label it cannot render fails the item.
            let final_label = |res: &Map<String, Value>| -> Option<Result<String, String>> {
                let l = task.loop_label.as_ref()?;
                let s = match &task.register {
                    Some(reg) => {
                        let mut m = Map::new();
                        m.insert(reg.clone(), Value::Object(res.clone()));
                        item_scope.with(Layer::data(m))
                    }
                    None => item_scope.clone(),
                };
                Some(
                    s.render(&json!(l))
                        .map(|v| display(&v))
                        .map_err(|e| format!("Failed to template loop_control.label: {e}")),
                )
            };
            // The item runs with its own values of the keywords a template gives (`PER_ITEM`),
            // rendered once its `when` holds, as ansible-core renders them.
            let per_item: Task;
            let ready = match self.when_holds(task, &item_scope) {
                Ok(true) if task.templated.is_empty() => Ok(task),
                Ok(true) => match resolve_flags(task, &item_scope, &ctx.play.dir, false) {
                    Ok(t) => {
                        per_item = t;
                        Ok(&per_item)
                    }
                    Err(e) => Err(e),
                },
                Ok(false) => {
                    let mut res = skip_result(&task.when, &item_scope);
                    res.as_object_mut()
                        .expect("an object")
                        .extend(item_vars(task, items, i, &loop_var));
                    if let Some(Err(msg)) = final_label(res.as_object().expect("an object")) {
                        res["failed"] = json!(true);
                        res["msg"] = json!(msg);
                        results.push(res);
                        trusts.push(item_trust(task, &item_scope, (item, &loop_var), None));
                        let mut ev = fail(msg);
                        ev.item = Some(display(item));
                        ev.result.insert("item".into(), item.clone());
                        let stop = !ev.ignored;
                        events.push(ev);
                        if stop {
                            break;
                        }
                        continue;
                    }
                    events.push(skip_event(Some(label)));
                    results.push(res);
                    trusts.push(item_trust(task, &item_scope, (item, &loop_var), None));
                    if break_after(task, &item_scope, results.last(), &mut broken) {
                        break;
                    }
                    continue;
                }
                Err(e) => Err(e),
            };
            let task = match ready {
                Ok(t) => t,
                // The item fails, and the loop goes on to the next, as in ansible-core.
                Err(e) => {
                    let mut ev = fail(e);
                    // A keyword that cannot be rendered counts as written: a template is a
                    // non-empty string, so `ignore_errors` holds (as for a task, above).
                    ev.ignored |= task.templated.contains_key("ignore_errors");
                    ev.item = Some(label);
                    let mut res = failure_result(ev.msg.as_deref().unwrap_or_default());
                    res.extend(item_vars(task, items, i, &loop_var));
                    if let Some(reg) = &task.register {
                        carried.insert(reg.clone(), Value::Object(res.clone()));
                    }
                    results.push(Value::Object(res));
                    trusts.push(item_trust(task, &item_scope, (item, &loop_var), None));
                    ev.result.insert("item".into(), item.clone());
                    events.push(ev);
                    if break_after(task, &item_scope, results.last(), &mut broken) {
                        break;
                    }
                    continue;
                }
            };
            let from_batch = match piped.as_deref_mut() {
                Some(b) => {
                    self.loop_item(ctx, task, h, &item_scope, b, i, Some(label.clone()))
                        .await
                }
                None => None,
            };
            let mut ev = match from_batch {
                Some(ev) => ev,
                None => self.run_until(ctx, task, h, &item_scope, Some(label)).await,
            };
            ev.hidden = task.no_log;
            let mut res = ev.result.clone();
            res.extend(item_vars(task, items, i, &loop_var));
            match final_label(&ev.result) {
                Some(Ok(l)) => ev.item = Some(l),
                Some(Err(msg)) => {
                    res.insert("failed".into(), json!(true));
                    res.insert("msg".into(), json!(msg));
                    ev.status = Status::Failed;
                    ev.msg = Some(msg);
                    ev.ignored = task.ignore_errors;
                }
                None => {}
            }
            if task.module == "set_fact" {
                if let Some(Value::Object(facts)) = ev.result.get("ansible_facts") {
                    carried.extend(facts.clone());
                }
            }
            if let Some(reg) = &task.register {
                carried.insert(reg.clone(), Value::Object(res.clone()));
            }
            results.push(Value::Object(res));
            let result = Some(&ev.result);
            trusts.push(item_trust(task, &item_scope, (item, &loop_var), result));
            // A failed item does not stop the loop: ansible-core runs every item and fails the
            // task after them ("One or more items failed"). Nor does an unreachable one: each
            // item tries to reach the host again.
            if ev.status == Status::Failed {
                ev.result.insert("item".into(), item.clone());
            }
            events.push(ev);
            if break_after(task, &item_scope, results.last(), &mut broken) {
                break;
            }
            if !task.loop_pause.is_zero() && i + 1 < items.len() {
                // `loop_control.pause`: the playbook asked for time between items.
                tokio::time::sleep(task.loop_pause).await;
            }
        }
        // A batch of its own ends here; one the loop shares ends with that batch.
        if let Some(b) = own {
            self.loop_batch_done(h, b).await;
        }
        if let Some(msg) = &broken {
            // As in ansible-core, the task's one result is that failure: the items that ran
            // are not part of it (ansible-core prints them as they finish; here they go).
            events = vec![fail(msg.clone())];
        }
        let result = match &broken {
            Some(msg) => failure_result(msg),
            None => {
                let statuses: Vec<Status> = events.iter().map(|e| e.status).collect();
                loop_result(&statuses, results)
            }
        };
        h.loop_failure = events
            .iter()
            .any(|e| e.status == Status::Failed && !e.ignored)
            .then(|| result.clone());
        if let Some(reg) = &task.register {
            let trust = pruned_object(std::iter::once((
                "results".into(),
                pruned_array(trusts.into_iter()),
            )));
            h.set_vouched_var(reg, Value::Object(result), trust);
        }
        if events.is_empty() {
            events.push(skip_event(None));
        }
        events
    }

    /// Run one task (or loop item) and finish it; with `until`, run it again (after `delay`
    /// seconds) until the conditions hold, at most `retries` more times.
    pub(super) async fn run_until(
        &self,
        ctx: &PlayCtx<'_>,
        task: &Task,
        h: &mut HostState,
        scope: &Arc<Scope>,
        item: Option<String>,
    ) -> Event {
        let mut attempt: u64 = 0;
        let mut numbers: Option<(u64, Duration)> = None;
        loop {
            // `retries` may be any count the playbook gives: past u64::MAX attempts (never
            // reached) the count stays put rather than wrap round to "first attempt".
            attempt = attempt.saturating_add(1);
            let mut r = self.run_item(ctx, task, h, scope).await;
            // As in ansible-core, `changed_when`/`failed_when` already see the attempt count.
            if let (Some(_), Ok(res)) = (&task.until, &mut r) {
                res.outcome.result.insert("attempts".into(), json!(attempt));
            }
            let wrote = outbox_writer(&r);
            let mut ev = self.finish_item(task, h, scope, r, item.clone());
            self.settle_outbox(h, wrote, ev.status).await;
            let Some(until) = &task.until else {
                return ev;
            };
            if ev.status == Status::Unreachable {
                return ev;
            }
            ev.result.insert("attempts".into(), json!(attempt));
            // `until` sees the result under its registered name and as plain names.
            let mut layer = ev.result.clone();
            if let Some(reg) = &task.register {
                layer.insert(reg.clone(), Value::Object(ev.result.clone()));
                h.set_var(reg, Value::Object(ev.result.clone()));
            }
            match all_hold(&scope.with(Layer::data(layer)), until) {
                Ok(true) => return ev,
                Ok(false) => {
                    // Rendered once, on the first retry: they may be templates (`retries:
                    // "{{ n }}"`), seen in the task's (and item's) scope as ansible-core does.
                    if numbers.is_none() {
                        match until_numbers(task, scope) {
                            Ok(n) => numbers = Some(n),
                            Err(e) => {
                                ev.status = Status::Failed;
                                ev.diff = Diff::default();
                                ev.msg = Some(format!(
                                    "{e} (task \"{}\" at {})",
                                    task.display_name(),
                                    task.pos
                                ));
                                ev.ignored = task.ignore_errors;
                                ev.result.insert("failed".into(), json!(true));
                                return ev;
                            }
                        }
                    }
                    let (retries, delay) = numbers.unwrap_or_default();
                    if attempt <= retries {
                        tokio::time::sleep(delay).await;
                        continue;
                    }
                    // ansible-core marks the result failed, but a `failed_when` it evaluated
                    // decides whether the task failed (its `failed_when_result` wins); retried
                    // until it succeeds (`retries` alone), its last failure stands.
                    let succeeded = [crate::playbook::ast::UNTIL_SUCCEEDED];
                    if task.failed_when.is_some() || until.iter().eq(succeeded) {
                        ev.result.insert("attempts".into(), json!(retries));
                        ev.result.insert("failed".into(), json!(true));
                        ev.result
                            .entry("exception")
                            .or_insert_with(|| json!(super::result::NO_TRACEBACK));
                        if let Some(reg) = &task.register {
                            h.set_var(reg, Value::Object(ev.result.clone()));
                        }
                        return ev;
                    }
                    ev.status = Status::Failed;
                    ev.diff = Diff::default();
                    ev.msg = Some(format!(
                        "`until` still false after {attempt} attempts (task \"{}\" at {})",
                        task.display_name(),
                        task.pos
                    ));
                    ev.ignored = task.ignore_errors;
                    ev.result.insert("failed".into(), json!(true));
                    return ev;
                }
                Err(e) => {
                    ev.status = Status::Failed;
                    ev.msg = Some(format!(
                        "cannot evaluate `until`: {e} (task \"{}\" at {})",
                        task.display_name(),
                        task.pos
                    ));
                    ev.ignored = task.ignore_errors;
                    return ev;
                }
            }
        }
    }

    pub(super) fn when_holds(&self, task: &Task, scope: &Arc<Scope>) -> Result<bool, String> {
        for cond in &task.when {
            if !scope
                .eval_bool(cond)
                .map_err(|e| format!("cannot evaluate `when: {cond}`: {e}"))?
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// A task that failed before it ran (its loop could not be expanded) leaves a failed
    /// result under its `register` name.
    fn register_failure(&self, task: &Task, h: &mut HostState, msg: &str) {
        if let Some(reg) = &task.register {
            h.set_var(reg, json!({"changed": false, "failed": true, "msg": msg}));
        }
    }

    pub(super) fn register_skip(&self, task: &Task, h: &mut HostState, scope: &Arc<Scope>) {
        if let Some(reg) = &task.register {
            h.set_var(reg, skip_result(&task.when, scope));
        }
    }
}

/// The result of a task (or loop item, or include) that its `when` skipped, with ansible-core's
/// keys in its order.
pub(super) fn skip_result(when: &[String], scope: &Arc<Scope>) -> Value {
    json!({
        "changed": false,
        "skipped": true,
        "skip_reason": "Conditional result was False",
        "false_condition": false_condition(when, scope),
    })
}

/// The `when` condition that skipped a task (the first that is false), as ansible-core gives it
/// in the skipped result: as written, but `when: false` is the boolean and a condition written
/// as one template (`"{{ x }}"`) its rendered value.
pub(super) fn false_condition(when: &[String], scope: &Arc<Scope>) -> Value {
    let Some(cond) = when
        .iter()
        .find(|c| matches!(scope.eval_bool(c), Ok(false)))
    else {
        return Value::Null;
    };
    match cond.trim() {
        "false" | "False" => json!(false),
        c if crate::template::Templar::single_expression_code(c).is_some() => {
            scope.render(&json!(c)).unwrap_or_else(|_| json!(cond))
        }
        _ => json!(cond),
    }
}

/// The task failed with `msg`, said with the task's name and place.
fn failed_event(task: &Task, msg: String) -> Event {
    Event {
        status: Status::Failed,
        item: None,
        diff: Diff::default(),
        msg: Some(format!(
            "{msg} (task \"{}\" at {})",
            task.display_name(),
            task.pos
        )),
        result: Map::new(),
        ignored: task.ignore_errors,
        note: None,
        delegated_to: None,
        notified: None,
        action: None,
        hidden: false,
    }
}

/// The templated keywords a loop renders for each item, with its variables: ansible-core
/// renders every keyword on each item's copy of the task, and these decide the item's result
/// (or whether its output is hidden) alone. The others (`become`, `action`...) are rendered
/// once per host here: they decide the task's connection and module as a whole.
const PER_ITEM: [&str; 6] = [
    "ignore_errors",
    "ignore_unreachable",
    "check_mode",
    "diff",
    "no_log",
    "delegate_facts",
];

/// `task` with its templated boolean keywords rendered in `scope` (Ansible's strict boolean:
/// true/false, yes/no, on/off, 1/0, y/n, t/f); with `leave_per_item`, a loop task's
/// `PER_ITEM` keywords are left for its items.
fn resolve_flags(
    task: &Task,
    scope: &Arc<Scope>,
    play_dir: &Path,
    leave_per_item: bool,
) -> Result<Task, String> {
    let mut t = task.clone();
    for (key, tmpl) in std::mem::take(&mut t.templated) {
        if leave_per_item && PER_ITEM.contains(&key) {
            t.templated.insert(key, tmpl);
            continue;
        }
        let v = scope
            .render(&json!(tmpl))
            .map_err(|e| format!("cannot render `{key}`: {e}"))?;
        if key == "action" {
            resolve_module(&mut t, &v, play_dir)?;
            continue;
        }
        // Decided for the whole task with the first host's variables (`fanout`).
        if key == "run_once" || key == "throttle" {
            continue;
        }
        if key == "pause" {
            let secs = seconds_of(key, &tmpl, &v, serde_json::Number::as_f64)?;
            t.loop_pause = Duration::try_from_secs_f64(secs)
                .map_err(|_| format!("`pause` of {secs} seconds cannot be waited"))?;
            continue;
        }
        if key == "timeout" {
            let secs = seconds_of(key, &tmpl, &v, serde_json::Number::as_i64)?;
            t.timeout = crate::playbook::task::timeout_of(secs)?;
            continue;
        }
        let b = match &v {
            Value::Bool(b) => Some(*b),
            Value::String(s) if !s.trim().is_empty() => fixpoint_modules::params::parse_bool_str(s),
            Value::Number(n) if n.as_f64() == Some(1.0) => Some(true),
            Value::Number(n) if n.as_f64() == Some(0.0) => Some(false),
            _ => None,
        }
        .ok_or_else(|| {
            format!(
                "`{key}: {tmpl}` gave {}, which is not a valid boolean",
                display(&v)
            )
        })?;
        match key {
            "ignore_errors" => t.ignore_errors = b,
            "ignore_unreachable" => t.ignore_unreachable = Some(b),
            "delegate_facts" => t.delegate_facts = b,
            "no_log" => t.no_log = b,
            "check_mode" => t.check_mode = Some(b),
            "diff" => t.diff = Some(b),
            _ => t.become_ = Some(b),
        }
    }
    Ok(t)
}

/// A templated keyword's number of seconds: a number, or a string holding one.
fn seconds_of<T: std::str::FromStr>(
    key: &str,
    tmpl: &str,
    v: &Value,
    number: fn(&serde_json::Number) -> Option<T>,
) -> Result<T, String> {
    match v {
        Value::Number(n) => number(n),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .ok_or_else(|| {
        format!(
            "`{key}: {tmpl}` gave {}, not a number of seconds",
            display(v)
        )
    })
}

/// The module an `action` template named, on this host (`playbook::load_task`): the task
/// runs it as if written so; a command still needs its guard, which the loader could not ask.
fn resolve_module(t: &mut Task, name: &Value, play_dir: &Path) -> Result<(), String> {
    let Value::String(name) = name else {
        return Err(format!(
            "`action` gave {}, which is not a module name",
            display(name)
        ));
    };
    let (module, python) = crate::playbook::task::module_at_run_time(name.trim(), play_dir)?;
    t.module = module;
    t.module_written = name.trim().to_string();
    t.python = python;
    let pos = t.pos.clone();
    crate::playbook::validate::check_guard(t, &pos).map_err(|d| d.msg)
}

/// `retries` and `delay` of an `until` task, rendered when they are templates.
fn until_numbers(task: &Task, scope: &Arc<Scope>) -> Result<(u64, Duration), String> {
    let render = |what: &str, t: &str| -> Result<Value, String> {
        scope
            .render(&json!(t))
            .map_err(|e| format!("cannot render `{what}`: {e}"))
    };
    let retries = match &task.retries {
        Templated::Fixed(n) => *n,
        Templated::Template(t) => {
            let v = render("retries", t)?;
            match &v {
                Value::Number(n) if n.as_u64().is_some() => n.as_u64().unwrap_or_default(),
                Value::String(s) if s.trim().parse::<u64>().is_ok() => {
                    s.trim().parse().unwrap_or_default()
                }
                other => return Err(format!("`retries` gave {other}, not a count")),
            }
        }
    };
    let secs = match &task.delay {
        Templated::Fixed(f) => *f,
        Templated::Template(t) => {
            let v = render("delay", t)?;
            match &v {
                Value::Number(n) => n.as_f64().unwrap_or(-1.0),
                Value::String(s) => s.trim().parse::<f64>().unwrap_or(-1.0),
                _ => -1.0,
            }
        }
    };
    let delay = Duration::try_from_secs_f64(secs)
        .map_err(|_| format!("`delay` must be a number of seconds, not {secs}"))?;
    Ok((retries, delay))
}
