//! Handlers: the play's handler list, running the notified ones, and keeping the agents'
//! outboxes (notifications recorded on the host, so a failed run still delivers them) in step.

use super::state::{HostState, PlayCtx};
use super::{display, Engine, Shared};
use crate::connection::pool::ConnKey;
use crate::playbook::{MetaAction, Play, Step, Task};
use crate::report::Status;
use crate::vars::{Layer, Scope};
use fixpoint_agent::journal::OutboxEntry;
use fixpoint_agent::protocol::{NotifySpec, Request};
use fixpoint_modules::params::is_template;
use serde_json::Value;
use std::sync::Arc;

impl Engine {
    /// Run the handlers notified on the batch's hosts, in the order they are defined, each once
    /// per host however many tasks notified it; then clear their outbox entries.
    pub(super) async fn flush_handlers(&mut self, ctx: &PlayCtx<'_>) {
        // Notifications an earlier run recorded but never delivered are delivered now, by the
        // first play that has a handler of that name (the name is the logical operation,
        // whichever playbook notified it).
        let names: Vec<String> = self
            .handlers
            .iter()
            .filter_map(|h| h.name.clone())
            .collect();
        for host in &ctx.hosts {
            let hs = self.hosts.get_mut(host).expect("host state");
            if !hs.active() {
                continue;
            }
            let (mine, rest): (Vec<OutboxEntry>, Vec<OutboxEntry>) =
                std::mem::take(&mut hs.pending)
                    .into_iter()
                    .partition(|p| names.contains(&p.handler));
            hs.pending = rest;
            let mut notes = Vec::new();
            for p in mine {
                if !hs.notified.contains(&p.handler) {
                    hs.notified.push(p.handler.clone());
                }
                notes.push(format!(
                    "handler `{}` pending since {} (run {}, notified by task \"{}\"): running it now",
                    p.handler, p.since, p.run_id, p.task
                ));
            }
            for n in notes {
                self.reporter.note(host, &n);
            }
        }
        let all = self.handlers.clone();
        let handlers: Vec<&Task> = all
            .iter()
            .enumerate()
            .filter(|&(i, h)| h.name.is_none() || name_winner(&all, i) == i)
            .map(|(_, h)| h)
            .collect();
        // The play's own `force_handlers`, also false, wins over `--force-handlers` (and
        // `ANSIBLE_FORCE_HANDLERS`), as in ansible-core.
        let force = ctx.play.force_handlers.unwrap_or(self.cfg.force_handlers);
        let mut i = 0;
        while i < handlers.len() {
            let handler = handlers[i];
            let targets = self.handler_targets(ctx, handler, force);
            i += 1;
            if targets.is_empty() {
                continue;
            }
            if self.interrupt.requested() {
                // Interrupted: the handler does not start, and its outbox entries stay for the
                // next run (clearing them below is only for handlers that ran).
                break;
            }
            // The handlers after it that run on the same hosts go in the same section (one
            // round trip for all) when none of them can change who runs the next: none
            // notifies a handler or includes tasks, and no host runs them forced.
            let mut group = vec![handler];
            let mut next = i;
            let alone = |h: &Task| {
                h.handler_step.is_some() || !h.notify.is_empty() || h.handler_params.is_some()
            };
            if !force && !alone(handler) {
                while next < handlers.len() {
                    let t = self.handler_targets(ctx, handlers[next], force);
                    if t.is_empty() {
                        next += 1;
                        continue;
                    }
                    if t != targets || alone(handlers[next]) {
                        break;
                    }
                    group.push(handlers[next]);
                    next += 1;
                }
            }
            let steps: Vec<Step> = group
                .iter()
                .map(|h| Step::Task(Box::new((*h).clone())))
                .collect();
            let sec = if group.len() > 1 {
                self.section_at(ctx, &steps)
                    .filter(|s| s.steps == steps.len() && s.tasks.len() == steps.len())
            } else {
                None
            };
            if sec.is_some() {
                i = next;
            } else {
                group.truncate(1);
            }
            for h in &targets {
                let hs = self.hosts.get_mut(h).expect("host state");
                hs.notified
                    .retain(|n| group.iter().all(|g| handler_key(g) != *n));
            }
            // A handler an `include_role` brought sees that include's parameters.
            let own;
            let hctx = match &handler.handler_params {
                Some(p) => {
                    own = ctx.with_include_params(p.clone());
                    &own
                }
                None => ctx,
            };
            match (sec, handler.handler_step.as_deref()) {
                (Some(mut sec), _) => {
                    sec.handlers = true;
                    self.run_section(hctx, &sec, &targets).await;
                }
                (None, Some(Step::Include(inc))) => {
                    // Forced, the included tasks run on the failed hosts it targets too.
                    self.handler_include = Some(force);
                    self.run_include(hctx, inc, &targets).await;
                    self.handler_include = None;
                }
                (None, Some(Step::Meta(m))) if m.action == MetaAction::FlushHandlers => {
                    // ansible-core stops the run when it reaches such a handler.
                    self.reporter.error(&format!(
                        "flush_handlers cannot be used as a handler (handler \"{}\" at {})",
                        m.name, m.pos
                    ));
                    self.run_stopped = true;
                    self.play_ended = true;
                    return;
                }
                (None, Some(Step::Meta(m))) => {
                    let banner = match &handler.role {
                        Some(r) => format!("{} : {}", r.name, handler.display_name()),
                        None => handler.display_name(),
                    };
                    self.reporter.task_start(&banner, true);
                    // Boxed: `run_meta` flushes handlers (never from here: refused above).
                    Box::pin(self.run_meta(hctx, m, &targets)).await;
                }
                (None, _) => self.run_task(hctx, handler, &targets, true).await,
            }
            // Delivered: remove the outbox entry on every agent of the hosts where it succeeded.
            // Not waited for: a run that ends before the agent removes it runs the handler
            // again next time, as it would if it ended just before this. In a group, a host
            // that failed a later handler keeps the earlier ones' entries too (they run again
            // next time: more than needed, never less).
            for g in &group {
                self.handler_done(&targets, g).await;
            }
        }
        // Notifications for handlers that do not exist were reported when notified.
    }

    /// The hosts `handler` runs on now: notified, and active (or, forced, reachable).
    fn handler_targets(&self, ctx: &PlayCtx<'_>, handler: &Task, force: bool) -> Vec<String> {
        let key = handler_key(handler);
        ctx.hosts
            .iter()
            .filter(|h| {
                let hs = &self.hosts[*h];
                (hs.active() || (force && !hs.unreachable)) && hs.notified.contains(&key)
            })
            .cloned()
            .collect()
    }

    /// `handler` ran on `targets`: its outbox entry goes from every agent of the hosts where it
    /// succeeded.
    async fn handler_done(&mut self, targets: &[String], handler: &Task) {
        let name = handler.name.clone().unwrap_or_default();
        for h in targets {
            let hs = self.hosts.get_mut(h).expect("host state");
            if !hs.active() {
                continue;
            }
            for conn in hs.conns.values_mut() {
                let req = Request::HandlerDone {
                    handler: name.clone(),
                };
                if let Err(e) = conn.post(&req).await {
                    tracing::warn!(host = %h, "cannot clear the outbox entry of `{name}`: {e}");
                }
            }
        }
    }

    /// Handler names written as templates, rendered once as ansible-core renders them before
    /// it matches a notification: with the variables known without a host (the handler's
    /// role's defaults, the play's vars and `vars_files`, the role's vars and parameters, the
    /// handler's own vars, `-e`). One that cannot be rendered keeps its text, with ansible-core's
    /// warning when no `listen` topic can reach it either.
    pub(super) fn render_handler_names(&mut self, play: &Play, handlers: &mut [Task]) {
        for h in handlers {
            let Some(name) = h.name.clone().filter(|n| is_template(n)) else {
                continue;
            };
            let mut layers = Vec::new();
            if let Some(r) = &h.role {
                layers.push(Layer::shared(r.defaults.clone(), true));
            }
            layers.push(Layer::shared(play.vars.clone(), true));
            layers.push(Layer::shared(play.vars_from_files.clone(), true));
            if let Some(r) = &h.role {
                for m in [&r.vars, &r.entry_vars, &r.params] {
                    layers.push(Layer::shared(m.clone(), true));
                }
            }
            layers.push(Layer::shared(h.vars.clone(), true));
            layers.push(Layer::shared(self.cfg.extra_vars.clone(), true));
            match Scope::new(self.templar.clone(), layers).render(&Value::String(name.clone())) {
                Ok(v) => h.name = Some(display(&v)),
                Err(e) if h.listen.is_empty() => self.reporter.warn(&format!(
                    "Handler '{name}' is unusable because it has no listen topics and the name \
                     could not be templated (host-specific variables are not supported in \
                     handler names). The error: {e}"
                )),
                Err(_) => {}
            }
        }
    }

    /// The handlers an include brings join the play's, seeing the include's parameters (its
    /// loop item...) as its tasks do.
    pub(super) fn add_included_handlers(
        &mut self,
        ctx: &PlayCtx<'_>,
        mut handlers: Vec<Task>,
        params: &serde_json::Map<String, serde_json::Value>,
    ) {
        if handlers.is_empty() {
            return;
        }
        let params = ctx.params_with(params.clone());
        for h in &mut handlers {
            h.handler_params = Some(params.clone());
        }
        self.render_handler_names(ctx.play, &mut handlers);
        self.add_handlers(handlers);
    }

    /// Handlers of roles loaded at run time join the play's, once per instance: a role
    /// included again with other variables brings its handlers again, and being loaded last
    /// they are the ones that run (ansible-core appends an included role's handlers to the
    /// play's each time it includes it). The same handler with the same variables (another
    /// host's include, a free play's lane) is not added twice.
    pub(super) fn add_handlers(&mut self, new: Vec<Task>) {
        if new.is_empty() {
            return;
        }
        let all = Arc::make_mut(&mut self.handlers);
        let params = |t: &Task| {
            t.role
                .as_ref()
                .map(|r| (r.params.clone(), r.entry_vars.clone()))
        };
        for h in new {
            // The play had an included role's handlers without the include's parameters
            // until a host included it (`Include::handlers`): they are these now.
            if h.handler_params.as_ref().is_some_and(|p| !p.is_empty()) {
                all.retain(|x| {
                    !(x.pos == h.pos
                        && x.name == h.name
                        && x.handler_params.as_ref().is_some_and(|p| p.is_empty()))
                });
            }
            let same = |x: &&Task| {
                x.pos == h.pos
                    && x.name == h.name
                    && x.vars == h.vars
                    && params(x) == params(&h)
                    && x.handler_params == h.handler_params
            };
            if !all.iter().any(|x| same(&x)) {
                all.push(h);
            }
        }
    }
}

impl Shared<'_> {
    /// The agent recorded pending handlers before a change; when the task did not end up
    /// `changed` (e.g. `changed_when`), nothing notifies them, so the entries this change
    /// created are withdrawn (not those still pending from earlier: those are owed anyway).
    pub(super) async fn settle_outbox(
        &self,
        h: &mut HostState,
        wrote: Option<(ConnKey, Vec<String>)>,
        status: Status,
    ) {
        let Some((agent, created)) = wrote else {
            return;
        };
        if status == Status::Changed {
            return;
        }
        if let Some(conn) = h.conns.get_mut(&agent) {
            for handler in created {
                let req = Request::HandlerDone { handler };
                let _ = conn.post(&req).await;
            }
        }
    }
}

/// What a host's `notified` list holds for a handler: its name, or where it is defined when it
/// has none (it can still be notified through `listen`), and then, for one an include brought,
/// that include's parameters: each such instance is notified and runs, as in ansible-core.
pub(super) fn handler_key(h: &Task) -> String {
    match (&h.name, &h.handler_params) {
        (Some(n), _) => n.clone(),
        (None, Some(p)) if !p.is_empty() => {
            format!("\0{}\0{}", h.pos, Value::Object((**p).clone()))
        }
        (None, _) => format!("\0{}", h.pos),
    }
}

/// The handlers a task's `notify` reaches, directly or through `listen`: every handler that
/// has that name or listens to it runs, as in Ansible.
pub(super) fn notified_handlers<'a>(handlers: &'a [Task], n: &str) -> Vec<&'a Task> {
    handlers.iter().filter(|h| h.answers(n)).collect()
}

/// A task's `notify` names rendered with an item's variables, when any is a template
/// (`notify: "restart {{ svc }}"`, rendered per host and item as ansible-core does); `None`
/// when they are plain names. A name that renders to a list gives each of its members.
pub(super) fn templated_notify(
    task: &Task,
    scope: &Arc<Scope>,
) -> Option<Result<Vec<String>, String>> {
    if !task.notify.iter().any(|n| is_template(n)) {
        return None;
    }
    let mut names = Vec::new();
    for n in &task.notify {
        if !is_template(n) {
            names.push(n.clone());
            continue;
        }
        match scope.render(&Value::String(n.clone())) {
            Ok(Value::Array(items)) => names.extend(items.iter().map(display)),
            Ok(v) => names.push(display(&v)),
            Err(e) => return Some(Err(format!("cannot render `notify` name `{n}`: {e}"))),
        }
    }
    Some(Ok(names))
}

/// What a request that may change the host records in the durable outbox before it does: the
/// handlers (by name) its `notify` reaches, its names rendered with the item's variables when
/// they are templates. None in check mode or without `notify`.
pub(super) fn notify_spec(
    ctx: &PlayCtx<'_>,
    task: &Task,
    scope: &Arc<Scope>,
    check: bool,
) -> Result<Option<NotifySpec>, String> {
    if task.notify.is_empty() || check {
        return Ok(None);
    }
    let handlers = match templated_notify(task, scope) {
        None => handler_names(&ctx.handlers, &task.notify),
        Some(names) => handler_names(&ctx.handlers, &names?),
    };
    Ok(Some(NotifySpec {
        playbook: super::playbook_scope(ctx.book),
        play: ctx.play.name.clone(),
        task: task.display_name(),
        handlers,
    }))
}

/// The handlers (by name) that a task's `notify` reaches, directly or through `listen`.
pub(super) fn handler_names(handlers: &[Task], notify: &[String]) -> Vec<String> {
    handlers
        .iter()
        .filter(|h| notify.iter().any(|n| h.answers(n)))
        .filter_map(|h| h.name.clone())
        .collect()
}

/// Of the handlers loaded with the name of `all[i]`, the one that runs, whichever of them was
/// notified: as ansible-core searches them, the last loaded group (the play's own handlers
/// come first, then each role's, then those each include brings) that has one, and in that
/// group the first.
fn name_winner(all: &[Task], i: usize) -> usize {
    let name = &all[i].name;
    let group = |h: &Task| {
        (
            h.role.as_ref().map(Arc::as_ptr),
            h.handler_params.as_ref().map(Arc::as_ptr),
        )
    };
    let last = (0..all.len())
        .rev()
        .find(|&j| all[j].name == *name)
        .unwrap_or(i);
    (0..=last)
        .find(|&j| all[j].name == *name && group(&all[j]) == group(&all[last]))
        .unwrap_or(last)
}
