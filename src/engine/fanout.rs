//! One task over a set of hosts: run it on each (bounded by forks and `throttle`), report the
//! results in host order, count them for the recap, record notifications, and share a
//! `run_once` result with the other hosts.

use super::handlers::{handler_key, notified_handlers};
use super::result::Event;
use super::state::{HostState, PlayCtx};
use super::{shown_name, Engine, Shared};
use crate::playbook::Task;
use crate::report::{Reporter, Status, TaskEvent};
use fixpoint_modules::Diff;
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::sync::Arc;

impl Engine {
    pub(super) async fn run_task(
        &mut self,
        ctx: &PlayCtx<'_>,
        task: &Task,
        targets: &[String],
        handler: bool,
    ) {
        if self.interrupt.requested() {
            // Ctrl-C: no new task starts (see `interrupt`).
            return;
        }
        let name_scope = match targets.first() {
            Some(h) => shared!(self).scope(ctx, Some(task), &self.hosts[h]),
            None => self.play_scope(ctx.play),
        };
        let name = shown_name(&name_scope, &task.display_name(), &|_| false);
        // The banner names the role as Ansible does (`common : Install`); events keep the name.
        let banner = match &task.role {
            Some(r) => format!("{} : {name}", r.name),
            None => name.clone(),
        };
        self.reporter.task_start(&banner, handler);
        // `run_once`: the first host runs it; its results are given to the others below.
        // `pause` and `add_host` run once for all hosts too (ansible-core's BYPASS_HOST_LOOP),
        // but their result stays with the host that ran them, as in ansible-core.
        let all_targets = targets;
        // A templated `run_once` is decided with the first host's variables, as ansible-core's
        // linear strategy decides it (one that cannot be rendered is false).
        let run_once = task.run_once
            || task
                .templated
                .get("run_once")
                .is_some_and(|t| matches!(name_scope.eval_bool(t), Ok(true)));
        let targets = if run_once || bypasses_host_loop(task.module) {
            &targets[..targets.len().min(1)]
        } else {
            targets
        };
        // A templated `throttle` is rendered with the first host's variables too; one that
        // gives no number stops the run, as ansible-core's "Failed to convert the throttle
        // value to an integer" does.
        let throttle = match task.templated.get("throttle") {
            Some(t) => match name_scope
                .render(&json!(t))
                .map_err(|e| e.to_string())
                .and_then(|v| throttle_value(&v).ok_or_else(|| format!("it gave {v}")))
            {
                Ok(n) => Some(n),
                Err(e) => {
                    self.reporter.error(&format!(
                        "task \"{name}\" (at {}): failed to convert the throttle value `{t}` \
                         to an integer: {e}",
                        task.pos
                    ));
                    self.run_stopped = true;
                    self.play_ended = true;
                    return;
                }
            },
            None => task.throttle,
        };
        let ctx = self.snapshot(ctx);
        let ctx = &ctx;
        let shared = shared!(self);
        // `--forks` is any count; a semaphore holds at most MAX_PERMITS (2^61 - 1): more
        // hosts at once than that is the same as no bound. `throttle: 0` is no bound.
        let bound = throttle
            .filter(|t| *t > 0)
            .map_or(self.cfg.forks, |t| t.min(self.cfg.forks))
            .min(tokio::sync::Semaphore::MAX_PERMITS);
        // In a free play each host's lane runs the task for its host alone: the lanes share
        // the task's bound, as ansible-core's free strategy counts the task's workers.
        let sem = match throttle.filter(|t| *t > 0 && ctx.play.free) {
            Some(_) => self
                .free_throttles
                .lock()
                .expect("throttle table")
                .entry((task.pos.to_string(), bound))
                .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(bound)))
                .clone(),
            None => Arc::new(tokio::sync::Semaphore::new(bound)),
        };
        let interrupt = self.interrupt.clone();
        let label = if handler {
            format!("handler {banner}")
        } else {
            banner.clone()
        };
        self.progress.queued(targets, &label);
        // The hosts in the play's order (`order:`): with fewer forks than hosts, that is the
        // order they start in, as in ansible-core, and the order their results are reported.
        let place: std::collections::HashMap<&str, usize> = targets
            .iter()
            .enumerate()
            .map(|(i, t)| (t.as_str(), i))
            .collect();
        let mut states: Vec<&mut HostState> = self
            .hosts
            .values_mut()
            .filter(|h| place.contains_key(h.name.as_str()))
            .collect();
        states.sort_by_key(|h| place[h.name.as_str()]);
        let names: Vec<String> = states.iter().map(|h| h.name.clone()).collect();
        let mut running: futures::stream::FuturesUnordered<_> = states
            .into_iter()
            .enumerate()
            .map(|(i, h)| {
                let sem = &sem;
                let shared = &shared;
                async move {
                    // The semaphore is local and never closed.
                    let _permit = sem.acquire().await.expect("semaphore open");
                    shared.progress.running(&h.name);
                    // Boxed: a task's future is tens of kB (every step down to the agent
                    // call), and unboxed each host's was copied three times on its way into
                    // `running` (issue 13).
                    let done = Box::pin(shared.run_task_on_host(ctx, task, h)).await;
                    shared.progress.finished(&h.name);
                    (i, done)
                }
            })
            .collect();
        let mut finished: Vec<Option<super::task::HostRun>> = names.iter().map(|_| None).collect();
        loop {
            tokio::select! {
                next = futures::StreamExt::next(&mut running) => match next {
                    Some((i, done)) => finished[i] = Some(done),
                    None => break,
                },
                // A second Ctrl-C: the hosts still running are stopped here. Dropping their
                // futures leaves their channels out of step; closing them at the end of the
                // run makes each agent kill what the task started.
                () = interrupt.forced() => break,
            }
        }
        drop(running);
        let results = names.into_iter().zip(finished).map(|(host, done)| {
            let (events, warnings, no_log) =
                done.unwrap_or_else(|| (vec![interrupted_event()], Vec::new(), task.no_log));
            (host, events, warnings, no_log)
        });
        let location = task.pos.to_string();
        // How the task's conditions are written is worth saying once, not once per host.
        let mut warned = std::collections::BTreeSet::new();
        let mut missing_handler = false;
        for (host, events, warnings, no_log) in results {
            let hs = self.hosts.get_mut(&host).expect("host state");
            let unknown = account(hs, task, &name, &location, &events, no_log, &ctx.handlers);
            let shown = Shown {
                task,
                name: &name,
                location: &location,
            };
            let changed_log = self.cfg.twice.then_some(&mut self.changed_log);
            missing_handler |= report_host(
                &mut self.reporter,
                changed_log,
                &shown,
                &host,
                (&events, warnings, no_log),
                &mut warned,
                unknown,
            );
        }
        if missing_handler {
            self.run_stopped = true;
            self.play_ended = true;
        }
        if run_once && all_targets.len() > 1 {
            for h in &all_targets[1..] {
                self.progress.finished(h);
            }
        }
        if let (true, Some(first)) = (run_once, all_targets.first()) {
            // Every host of the play's batch but the unreachable ones gets them, also those
            // that did not reach the task (an include only the first host ran), as
            // ansible-core hands them to its play's hosts.
            let others: Vec<String> = ctx
                .hosts
                .iter()
                .filter(|h| *h != first && self.hosts.get(*h).is_some_and(|hs| !hs.unreachable))
                .cloned()
                .collect();
            self.share_run_once(task, first, &others);
        }
        // Before the next task renders anything: `add_host` / `group_by` changed the inventory.
        self.commit_inventory();
    }

    /// After a `run_once` task, the other hosts see its registered result and facts, as in Ansible.
    fn share_run_once(&mut self, task: &Task, first: &str, others: &[String]) {
        let src = &self.hosts[first].host_vars;
        let src_trust = self.hosts[first].host_trust.clone();
        let mut shared = Map::new();
        if let Some(reg) = &task.register {
            if let Some(v) = src.get(reg) {
                shared.insert(reg.clone(), v.clone());
            }
        }
        if task.module == "set_fact" {
            if let Some(m) = task.params.as_object() {
                for k in m.keys().filter(|k| *k != "cacheable") {
                    if let Some(v) = src.get(k) {
                        shared.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        for h in others {
            let hs = self.hosts.get_mut(h).expect("host state");
            for (k, v) in &shared {
                // The same values: the same trust, as ansible-core shares the objects.
                let trust = src_trust.get(k).cloned().unwrap_or_default();
                hs.set_vouched_var(k, v.clone(), trust);
            }
        }
    }

    /// Report a failure that happened outside a module run (an include that cannot load);
    /// `ignored` (`ignore_errors`): the host goes on, and the recap counts it ok and ignored.
    pub(super) fn fail_host(
        &mut self,
        host: &str,
        (task, module, location): (&str, &str, &str),
        msg: String,
        ignored: bool,
    ) {
        self.reporter.task_start(task, false);
        let hs = self.hosts.get_mut(host).expect("host state");
        if ignored {
            hs.stats.ok += 1;
            hs.stats.ignored += 1;
        } else {
            hs.failed = true;
            hs.stats.failed += 1;
            hs.last_failure = Some((json!({"name": task}), json!({"failed": true, "msg": msg})));
        }
        self.reporter.task(&TaskEvent {
            host,
            task,
            module,
            location,
            status: Status::Failed,
            item: None,
            diff: None,
            msg: Some(&msg),
            result: None,
            ignored,
            censored: false,
            note: None,
            delegated_to: None,
            python: false,
        });
    }
}

/// A task as its results show it: its name (rendered) and where it is written.
pub(super) struct Shown<'a> {
    pub(super) task: &'a Task,
    pub(super) name: &'a str,
    pub(super) location: &'a str,
}

/// Print one host's results of a task: the warnings its conditions gave (each once per task,
/// `warned`), its events, and the notifications that reached no handler (`unknown`, from
/// `account`). Under `--twice`, the changes go to `changed_log`. Returns whether such a
/// notification stops the run (an error unless `ANSIBLE_ERROR_ON_MISSING_HANDLER` says false,
/// as in ansible-core).
pub(super) fn report_host(
    reporter: &mut Reporter,
    changed_log: Option<&mut Vec<(String, String, String, Diff)>>,
    shown: &Shown<'_>,
    host: &str,
    (events, warnings, no_log): (&[Event], Vec<String>, bool),
    warned: &mut BTreeSet<String>,
    unknown: Vec<String>,
) -> bool {
    let Shown {
        task,
        name,
        location,
    } = *shown;
    // ansible-core stops at the result whose notification no handler answers, before it
    // shows that result.
    if !unknown.is_empty() && crate::config::error_on_missing_handler() {
        for n in unknown {
            reporter.error(&format!(
                "task \"{name}\" ({location}) on {host} notifies `{n}`, but no handler has \
                 that name or listens to it"
            ));
        }
        return true;
    }
    for w in warnings {
        if warned.insert(w.clone()) {
            reporter.warn(&format!("task \"{name}\" ({location}): {w}"));
        }
    }
    let mut changed_log = changed_log;
    for ev in events {
        // `add_host` and `group_by` change the run's inventory, not a host: every run starts
        // from the inventory as loaded, so they are changed on every pass and say nothing
        // about convergence.
        // Kept for --twice only: the diffs hold whole file contents, megabytes per host on a
        // first run.
        if let Some(log) = changed_log.as_deref_mut() {
            if ev.status == Status::Changed && !matches!(task.module, "add_host" | "group_by") {
                // The --twice verdict shows diffs: never a no_log task's.
                let diff = if no_log || ev.hidden {
                    Diff::default()
                } else {
                    ev.diff.clone()
                };
                log.push((
                    host.to_string(),
                    name.to_string(),
                    location.to_string(),
                    diff,
                ));
            }
        }
        reporter.task(&TaskEvent {
            host,
            task: match &ev.action {
                Some(action) if task.name.is_none() => action,
                _ => name,
            },
            module: ev
                .action
                .as_deref()
                .unwrap_or(task.alias.unwrap_or(task.module)),
            location,
            status: ev.status,
            item: ev.item.as_deref(),
            diff: Some(&ev.diff),
            msg: ev.msg.as_deref(),
            result: Some(&ev.result),
            ignored: ev.ignored,
            censored: no_log || ev.hidden,
            note: ev.note.as_deref(),
            delegated_to: ev.delegated_to.as_deref(),
            python: task.python.is_some(),
        });
    }
    for n in unknown {
        reporter.warn(&format!(
            "task \"{name}\" ({location}) notifies `{n}`, but no handler has that name or listens to it"
        ));
    }
    false
}

/// A task's results on one host, counted for the recap (once per host, like Ansible, whatever
/// its loop length), its failure kept for a `rescue`, its notifications recorded: the host's
/// own bookkeeping, which a pipelined host does as it goes. Returns the notifications that
/// reach no handler.
pub(super) fn account(
    hs: &mut HostState,
    task: &Task,
    name: &str,
    location: &str,
    events: &[Event],
    no_log: bool,
    handlers: &[Task],
) -> Vec<String> {
    let mut any_changed = false;
    let mut failed = false;
    let mut unreachable = false;
    let mut unreachable_ignored = false;
    for ev in events {
        match ev.status {
            Status::Changed => any_changed = true,
            Status::Failed if !ev.ignored => failed = true,
            // `ignore_unreachable`: reported, counted ok and ignored, host kept; a loop's
            // only when each unreachable item ignored it (`finish_item`).
            Status::Unreachable if ev.ignored || task.ignore_unreachable == Some(true) => {
                unreachable_ignored = true
            }
            Status::Unreachable => unreachable = true,
            _ => {}
        }
    }
    // As ansible-core counts a loop: ignored only when no item's failure (or unreachable
    // host) stands.
    let ignored =
        !failed && !unreachable && (events.iter().any(|e| e.ignored) || unreachable_ignored);
    // A loop with an item whose output is hidden hides the loop's result, as ansible-core.
    let no_log = no_log || events.iter().any(|e| e.hidden);
    let looped = hs.loop_failure.take();
    // A task that was not skipped and reached the host: its role ran here (`RoleDedup`).
    let all_skipped = events.iter().all(|e| e.status == Status::Skipped);
    if let (Some(dedup), false, false) = (
        task.role.as_ref().and_then(|r| r.dedup),
        all_skipped,
        unreachable || unreachable_ignored,
    ) {
        let id = hs.role_identity(&dedup);
        hs.roles_ran.insert(id);
    }
    if unreachable {
        hs.unreachable = true;
        hs.stats.unreachable += 1;
    } else if failed {
        hs.failed = true;
        hs.stats.failed += 1;
        // A loop's failure is the loop's result; another task's, its failed result.
        let result = match looped {
            Some(r) => Value::Object(r),
            None => events
                .iter()
                .rev()
                .find(|e| e.status == Status::Failed && !e.ignored)
                .map(|e| {
                    let mut r = e.result.clone();
                    // The module's own message, as registered; the event's names the task.
                    if let (Some(m), false) = (&e.msg, r.contains_key("msg")) {
                        r.insert("msg".into(), json!(m));
                    }
                    Value::Object(r)
                })
                .unwrap_or_default(),
        };
        let result = if no_log {
            json!({"censored": "the output has been hidden due to the fact that 'no_log: true' was specified for this result", "failed": true})
        } else {
            result
        };
        // ansible-core's `ansible_failed_task.name` is empty for a task without a name.
        let name = if task.name.is_some() { name } else { "" };
        hs.last_failure = Some((
            json!({"name": name, "action": task.module, "location": location}),
            result,
        ));
    } else if any_changed {
        hs.stats.changed += 1;
        hs.stats.ok += 1;
    } else if !events.is_empty() && events.iter().all(|e| e.status == Status::Skipped) {
        hs.stats.skipped += 1;
    } else {
        hs.stats.ok += 1;
    }
    if ignored {
        hs.stats.ignored += 1;
    }
    let mut unknown = Vec::new();
    if any_changed && !task.notify.is_empty() {
        // Templated names, as each item rendered them (`Event::notified`).
        let mut names: Vec<&String> = Vec::new();
        if events.iter().any(|e| e.notified.is_some()) {
            for n in events.iter().filter_map(|e| e.notified.as_ref()).flatten() {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
        } else {
            names.extend(&task.notify);
        }
        for n in names {
            let reached = notified_handlers(handlers, n);
            if reached.is_empty() {
                if !unknown.contains(n) {
                    unknown.push(n.clone());
                }
                continue;
            }
            for h in reached {
                let key = handler_key(h);
                if !hs.notified.contains(&key) {
                    hs.notified.push(key);
                }
            }
        }
    }
    unknown
}

/// Actions ansible-core runs once for the whole host list (`BYPASS_HOST_LOOP`), on its first
/// host, whose variables they see.
fn bypasses_host_loop(module: &str) -> bool {
    matches!(module, "pause" | "add_host")
}

/// The result of a task stopped by a second Ctrl-C.
pub(super) fn interrupted_event() -> Event {
    Event {
        status: Status::Failed,
        item: None,
        diff: Diff::default(),
        msg: Some(
            "interrupted: a second Ctrl-C stopped the task before it finished; the agent killed what it started, so its effect is unknown".into(),
        ),
        result: Map::new(),
        ignored: false,
        note: None,
        delegated_to: None,
        notified: None,
        action: None,
        hidden: false,
    }
}

/// A rendered `throttle` as Python's `int()` reads it: a whole number or its text (a negative
/// one is no bound, as 0).
fn throttle_value(v: &Value) -> Option<usize> {
    let n: i64 = match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f.trunc() as i64))?,
        Value::String(s) => s.trim().parse().ok()?,
        Value::Bool(b) => i64::from(*b),
        _ => return None,
    };
    Some(n.max(0) as usize)
}
