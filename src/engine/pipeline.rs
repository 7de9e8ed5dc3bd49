//! Pipelining: a section of tasks (`section.rs`) run on every host with no barrier between its
//! tasks, each host's consecutive batch steps rendered up front and sent to its agent in one
//! `Batch`, whose answers stream back one by one. Results are still printed in task order: task
//! k's banner once the tasks before it are printed and a host starts it (so the log shows what
//! runs, as without pipelining), and every host's result, in host order, as soon as every host
//! is past it, while the hosts go on. Each host does its own bookkeeping (`fanout::account`) as its results
//! arrive; the engine only prints, so the host futures can hold their `HostState`s meanwhile.

use super::fanout::{account, interrupted_event, report_host, Shown};
use super::interrupt::Interrupt;
use super::item::{outbox_writer, AgentItem, ItemPlan};
use super::result::skip_event;
use super::section::{Fit, Section};
use super::state::{HostState, PlayCtx};
use super::task::HostRun;
use super::{shown_name, Engine, Shared};
use crate::connection::pool::ConnKey;
use crate::report::Status;
use crate::vars::Scope;
use fixpoint_agent::protocol::{BatchStep, Response};
use futures::StreamExt;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedSender;

/// What a host future tells the engine.
enum Msg {
    /// Task `k` starts on a host: its banner can be printed once the tasks before it are.
    Starts(usize),
    /// Task `k` is done on host `i`: its run, and the notifications that reached no handler.
    Task(usize, usize, HostRun, Vec<String>),
    /// Host `i` goes no further in the section.
    Done(usize),
}

/// The section's tasks as shown: names (rendered), banners, locations.
struct Labels {
    names: Vec<String>,
    banners: Vec<String>,
    locations: Vec<String>,
}

/// Where a host's attempt at a batch left it.
enum Batched {
    /// Its tasks up to (not including) this one are done.
    Through(usize),
    /// Nothing was sent: the first task runs on its own.
    NotStarted,
    /// The agent takes no batches (an older one): every task runs on its own.
    Unsupported,
}

/// A loop's items sent to the agent in one batch (`Shared::loop_batch`): those not answered
/// yet, by item index.
pub(super) struct LoopBatch {
    key: ConnKey,
    runs: std::collections::VecDeque<(usize, AgentItem)>,
    /// The batch is over: the items left run on their own.
    ended: bool,
    /// Outbox entries to withdraw once the batch is over (`settle_outbox`).
    settle: Vec<Settle>,
}

/// An item's outbox entries (by agent) and its status, for `settle_outbox`.
type Settle = (Option<(ConnKey, Vec<String>)>, Status);

/// One task of a batch, rendered on the host.
enum Planned {
    /// Its `when` is false.
    Skip(Arc<Scope>),
    /// A step of the batch.
    Run(Box<AgentItem>, Arc<Scope>),
}

impl Engine {
    /// Run `sec` on the hosts of `targets` (see the module's comment).
    pub(super) async fn run_section(
        &mut self,
        ctx: &PlayCtx<'_>,
        sec: &Section<'_>,
        targets: &[String],
    ) {
        if self.interrupt.requested() {
            return;
        }
        let play_scope = self.play_scope(ctx.play);
        let names: Vec<String> = sec
            .tasks
            .iter()
            .map(|t| shown_name(&play_scope, &t.display_name()))
            .collect();
        let labels = Labels {
            banners: sec
                .tasks
                .iter()
                .zip(&names)
                .map(|(t, n)| match &t.role {
                    Some(r) => format!("{} : {n}", r.name),
                    None => n.clone(),
                })
                .collect(),
            locations: sec.tasks.iter().map(|t| t.pos.to_string()).collect(),
            names,
        };
        // Nothing in a section reads another host's state: one snapshot serves it all.
        let ctx = self.snapshot(ctx);
        let ctx = &ctx;
        let shared = shared!(self);
        let sem =
            tokio::sync::Semaphore::new(self.cfg.forks.min(tokio::sync::Semaphore::MAX_PERMITS));
        let interrupt = self.interrupt.clone();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Msg>();
        let hosts: Vec<String> = self
            .hosts
            .keys()
            .filter(|h| targets.contains(h))
            .cloned()
            .collect();
        let mut running: futures::stream::FuturesUnordered<_> = self
            .hosts
            .values_mut()
            .filter(|h| targets.contains(&h.name))
            .enumerate()
            .map(|(i, h)| {
                let (sem, shared, labels, interrupt) = (&sem, &shared, &labels, &interrupt);
                let tx = tx.clone();
                async move {
                    // The semaphore is local and never closed.
                    let _permit = sem.acquire().await.expect("semaphore open");
                    let host = HostRunner {
                        shared,
                        ctx,
                        sec,
                        labels,
                        interrupt,
                        tx: &tx,
                        me: i,
                    };
                    host.run(h).await;
                    let _ = tx.send(Msg::Done(i));
                }
            })
            .collect();
        drop(tx);
        let n = sec.tasks.len();
        let mut slots: Vec<BTreeMap<usize, (HostRun, Vec<String>)>> =
            (0..n).map(|_| BTreeMap::new()).collect();
        let mut reached = vec![0usize; hosts.len()];
        let mut done = vec![false; hosts.len()];
        let mut next = 0;
        let mut forced = false;
        let mut warned: Vec<BTreeSet<String>> = vec![BTreeSet::new(); n];
        let mut started = vec![false; n];
        let mut bannered = false;
        loop {
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(Msg::Starts(k)) => started[k] = true,
                    Some(Msg::Task(k, i, run, unknown)) => {
                        slots[k].insert(i, (run, unknown));
                        reached[i] = k + 1;
                    }
                    Some(Msg::Done(i)) => done[i] = true,
                    None => break,
                },
                Some(()) = running.next() => {}
                // A second Ctrl-C: the hosts still running are stopped here (see `run_task`).
                () = interrupt.forced() => {
                    forced = true;
                    break;
                }
            }
            while next < n && (0..hosts.len()).all(|i| done[i] || reached[i] > next) {
                let changed_log = self.cfg.twice.then_some(&mut self.changed_log);
                print_task(
                    &mut self.reporter,
                    changed_log,
                    sec,
                    &labels,
                    (next, bannered),
                    &hosts,
                    std::mem::take(&mut slots[next]),
                    &mut warned[next],
                );
                next += 1;
                bannered = false;
            }
            if next < n && started[next] && !bannered {
                self.reporter.task_start(&labels.banners[next], false);
                bannered = true;
            }
        }
        drop(running);
        if forced {
            for (i, host) in hosts.iter().enumerate() {
                let k = reached[i];
                if done[i] || k >= n {
                    continue;
                }
                let task = sec.tasks[k];
                let events = vec![interrupted_event()];
                let hs = self.hosts.get_mut(host).expect("host state");
                let unknown = account(
                    hs,
                    task,
                    &labels.names[k],
                    &labels.locations[k],
                    &events,
                    task.no_log,
                    &ctx.handlers,
                );
                slots[k].insert(i, ((events, Vec::new(), task.no_log), unknown));
            }
        }
        while next < n {
            let changed_log = self.cfg.twice.then_some(&mut self.changed_log);
            print_task(
                &mut self.reporter,
                changed_log,
                sec,
                &labels,
                (next, bannered),
                &hosts,
                std::mem::take(&mut slots[next]),
                &mut warned[next],
            );
            next += 1;
            bannered = false;
        }
    }
}

/// Print task `k`'s results, in host order, after its banner unless it is out already
/// (`bannered`); nothing when no host reached it (as the linear strategy prints no task once
/// every host failed).
#[allow(clippy::too_many_arguments)]
fn print_task(
    reporter: &mut crate::report::Reporter,
    mut changed_log: Option<&mut Vec<(String, String, String, fixpoint_modules::Diff)>>,
    sec: &Section<'_>,
    labels: &Labels,
    (k, bannered): (usize, bool),
    hosts: &[String],
    results: BTreeMap<usize, (HostRun, Vec<String>)>,
    warned: &mut BTreeSet<String>,
) {
    if results.is_empty() {
        return;
    }
    if !bannered {
        reporter.task_start(&labels.banners[k], false);
    }
    let shown = Shown {
        task: sec.tasks[k],
        name: &labels.names[k],
        location: &labels.locations[k],
    };
    for (i, ((events, warnings, no_log), unknown)) in results {
        report_host(
            reporter,
            changed_log.as_deref_mut(),
            &shown,
            &hosts[i],
            (&events, warnings, no_log),
            warned,
            unknown,
        );
    }
}

/// One host going through a section.
struct HostRunner<'r, 's, 'c> {
    shared: &'r Shared<'s>,
    ctx: &'r PlayCtx<'c>,
    sec: &'r Section<'r>,
    labels: &'r Labels,
    interrupt: &'r Arc<Interrupt>,
    tx: &'r UnboundedSender<Msg>,
    me: usize,
}

impl HostRunner<'_, '_, '_> {
    async fn run(&self, h: &mut HostState) {
        let n = self.sec.tasks.len();
        let mut batches = true;
        let mut k = 0;
        while k < n && h.active() && !self.interrupt.requested() {
            if batches && matches!(self.sec.fit[k], Fit::Step { .. }) {
                match self.batch(h, k).await {
                    Batched::Through(next) => {
                        k = next;
                        continue;
                    }
                    Batched::Unsupported => batches = false,
                    Batched::NotStarted => {}
                }
            }
            let task = self.sec.tasks[k];
            self.starts(h, k);
            let run = self.shared.run_task_on_host(self.ctx, task, h).await;
            self.done(h, k, run);
            k += 1;
        }
    }

    /// The host's status line: task `k` runs.
    fn starts(&self, h: &HostState, k: usize) {
        let _ = self.tx.send(Msg::Starts(k));
        let p = self.shared.progress;
        p.queued(std::slice::from_ref(&h.name), &self.labels.banners[k]);
        p.running(&h.name);
    }

    /// Task `k` is done on the host: its bookkeeping, then the engine prints it in its turn.
    fn done(&self, h: &mut HostState, k: usize, run: HostRun) {
        self.shared.progress.finished(&h.name);
        let task = self.sec.tasks[k];
        let unknown = account(
            h,
            task,
            &self.labels.names[k],
            &self.labels.locations[k],
            &run.0,
            run.2,
            &self.ctx.handlers,
        );
        let _ = self.tx.send(Msg::Task(k, self.me, run, unknown));
    }

    /// Render the tasks of the batch that starts at `k`, send them, and finish each as its
    /// answer arrives.
    async fn batch(&self, h: &mut HostState, k: usize) -> Batched {
        let (sh, ctx, sec) = (self.shared, self.ctx, self.sec);
        let mut plan: Vec<Planned> = Vec::new();
        let mut key: Option<ConnKey> = None;
        let mut j = k;
        while j < sec.tasks.len() && (j == k || !sec.batch_start[j]) {
            let task = sec.tasks[j];
            let scope = sh.scope(ctx, Some(task), h);
            match sh.when_holds(task, &scope) {
                Ok(true) => {}
                Ok(false) => {
                    plan.push(Planned::Skip(scope));
                    j += 1;
                    continue;
                }
                // The task fails: it runs on its own, which says why.
                Err(_) => break,
            }
            // An agent's module: rendering it neither sends nor changes anything.
            let item = match sh.plan_item(ctx, task, h, &scope).await {
                ItemPlan::Agent(item) => item,
                ItemPlan::Done(_) => break,
            };
            let this = super::connect::conn_key(h, &item.spec);
            if *key.get_or_insert_with(|| this.clone()) != this {
                // Another agent (another become user): another batch.
                break;
            }
            if j > k && local_files(task, &item) {
                // The tasks before it may write the controller's files it reads.
                break;
            }
            plan.push(Planned::Run(Box::new(item), scope));
            j += 1;
        }
        let Some(key) = key else {
            if plan.is_empty() {
                return Batched::NotStarted;
            }
            // Only skipped tasks: nothing to send.
            let count = plan.len();
            for (i, p) in plan.into_iter().enumerate() {
                if let Planned::Skip(scope) = p {
                    self.skip(h, k + i, &scope);
                }
            }
            return Batched::Through(k + count);
        };
        let first_run = plan
            .iter()
            .position(|p| matches!(p, Planned::Run(..)))
            .expect("a run was planned");
        let Some(Planned::Run(first, _)) = plan.get(first_run) else {
            unreachable!("position found a run")
        };
        let steps: Vec<BatchStep> = plan
            .iter()
            .zip(k..)
            .filter_map(|(p, i)| match p {
                Planned::Run(item, _) => Some(BatchStep {
                    run: item.req.clone(),
                    timeout_ms: item
                        .timeout
                        .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
                    ignore_errors: sec.tasks[i].ignore_errors,
                }),
                Planned::Skip(_) => None,
            })
            .collect();
        let spec = first.spec.clone();
        let conn = match sh.conn(h, &spec, ctx).await {
            Ok(conn) => conn,
            // The agent cannot be started: the first step fails (or finds the host
            // unreachable) as it would on its own, after the tasks skipped before it.
            Err(e) => {
                let mut e = Some(e);
                for (i, p) in plan.into_iter().enumerate() {
                    let idx = k + i;
                    match p {
                        Planned::Skip(scope) => self.skip(h, idx, &scope),
                        Planned::Run(_, scope) => {
                            let task = sec.tasks[idx];
                            self.starts(h, idx);
                            let err = e.take().expect("the first run");
                            let ev = sh.finish_item(task, h, &scope, Err(err), None);
                            let warnings = scope.take_warnings();
                            self.done(h, idx, (vec![ev], warnings, task.no_log));
                            return Batched::Through(idx + 1);
                        }
                    }
                }
                unreachable!("the plan has a run");
            }
        };
        if !conn.takes_batches() {
            return Batched::Unsupported;
        }
        if conn.send_batch(steps).await.is_err() {
            // Too large, or the channel is gone: the task on its own says what happened.
            return Batched::NotStarted;
        }
        let mut settle = Vec::new();
        let mut ended = false;
        let mut next = k;
        for (i, p) in plan.into_iter().enumerate() {
            let idx = k + i;
            let task = sec.tasks[idx];
            match p {
                Planned::Skip(scope) => {
                    if self.interrupt.requested() {
                        break;
                    }
                    self.skip(h, idx, &scope);
                }
                Planned::Run(item, scope) => {
                    if ended {
                        break;
                    }
                    // After a Ctrl-C the step starts only if the agent had started it already:
                    // its banner waits for its answer.
                    let early = self.interrupt.requested();
                    if !early {
                        self.starts(h, idx);
                    }
                    let Some(conn) = h.conns.get_mut(&key) else {
                        break;
                    };
                    let answer = match conn.next_step(item.timeout, self.interrupt.first()).await {
                        Ok(Some((_, resp))) => Ok(resp),
                        // The agent started no more steps (cancelled): this task did not run.
                        Ok(None) => break,
                        Err(e) => {
                            ended = true;
                            Err(e)
                        }
                    };
                    if let Ok(Response::NeedContent { .. }) = &answer {
                        // The agent ended the batch there; the content is sent and the
                        // request repeated on its own, then the next batch begins.
                        while let Ok(Some(_)) = conn.next_step(None, std::future::pending()).await {
                        }
                        ended = true;
                    }
                    if early {
                        self.starts(h, idx);
                    }
                    let r = sh.agent_answer(ctx, h, &item, answer).await;
                    let wrote = outbox_writer(&r);
                    let ev = sh.finish_item(task, h, &scope, r, None);
                    settle.push((wrote, ev.status));
                    let stop = ev.status == Status::Failed && !ev.ignored
                        || ev.status == Status::Unreachable;
                    let warnings = scope.take_warnings();
                    self.done(h, idx, (vec![ev], warnings, task.no_log));
                    next = idx + 1;
                    if stop {
                        break;
                    }
                    continue;
                }
            }
            next = idx + 1;
        }
        // Whatever the agent still says about the batch (its end) is read before the channel
        // serves anything else.
        if let Some(conn) = h.conns.get_mut(&key) {
            while let Ok(Some(_)) = conn.next_step(None, std::future::pending()).await {}
        }
        // Outbox entries of steps the controller decided did not change (`changed_when`):
        // only a batch's last step has them, so withdrawing them now is in order.
        for (wrote, status) in settle {
            sh.settle_outbox(h, wrote, status).await;
        }
        if next == k {
            // Not one task was finished (cancelled before the first): none runs.
            return Batched::Through(sec.tasks.len());
        }
        Batched::Through(next)
    }

    /// Task `k`'s `when` is false on the host.
    fn skip(&self, h: &mut HostState, k: usize, scope: &Arc<Scope>) {
        let task = self.sec.tasks[k];
        self.starts(h, k);
        self.shared.register_skip(task, h);
        let warnings = scope.take_warnings();
        self.done(h, k, (vec![skip_event(None)], warnings, task.no_log));
    }
}

impl Shared<'_> {
    /// Render the items of a loop task and send them in one batch, when
    /// `section::loop_batchable` allows and at least two items run: the items that run, up to
    /// the first that cannot be rendered or runs elsewhere. `None`: every item runs on its own.
    pub(super) async fn loop_batch(
        &self,
        ctx: &PlayCtx<'_>,
        task: &crate::playbook::Task,
        h: &mut HostState,
        scope: &Arc<Scope>,
        items: &[serde_json::Value],
        loop_var: &str,
    ) -> Option<LoopBatch> {
        if !super::section::loop_batchable(task, ctx.play, self.templar) {
            return None;
        }
        let mut runs = std::collections::VecDeque::new();
        let mut key: Option<ConnKey> = None;
        for i in 0..items.len() {
            let layer = super::task::item_layer(task, items, i, loop_var);
            let item_scope = scope.with(crate::vars::Layer::data(layer));
            match self.when_holds(task, &item_scope) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(_) => break,
            }
            let ItemPlan::Agent(item) = self.plan_item(ctx, task, h, &item_scope).await else {
                break;
            };
            let this = super::connect::conn_key(h, &item.spec);
            if *key.get_or_insert_with(|| this.clone()) != this || local_files(task, &item) {
                // Another agent; or an item may write the controller's files the next reads.
                break;
            }
            runs.push_back((i, item));
        }
        let key = key?;
        if runs.len() < 2 {
            return None;
        }
        let steps = runs
            .iter()
            .map(|(_, item)| BatchStep {
                run: item.req.clone(),
                timeout_ms: item
                    .timeout
                    .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
                ignore_errors: task.ignore_errors,
            })
            .collect();
        let spec = runs[0].1.spec.clone();
        let conn = self.conn(h, &spec, ctx).await.ok()?;
        if !conn.takes_batches() || conn.send_batch(steps).await.is_err() {
            return None;
        }
        Some(LoopBatch {
            key,
            runs,
            ended: false,
            settle: Vec::new(),
        })
    }

    /// Item `i`'s event from the batch; `None` when the batch does not hold it (any more): it
    /// runs on its own then.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn loop_item(
        &self,
        ctx: &PlayCtx<'_>,
        task: &crate::playbook::Task,
        h: &mut HostState,
        item_scope: &Arc<Scope>,
        b: &mut LoopBatch,
        i: usize,
        label: Option<String>,
    ) -> Option<super::result::Event> {
        if b.ended {
            return None;
        }
        if b.runs.front().is_none_or(|(j, _)| *j != i) {
            // Past the items sent: the batch's end is read before anything else is sent.
            self.end_loop_batch(h, b).await;
            return None;
        }
        let (_, item) = b.runs.pop_front()?;
        let Some(conn) = h.conns.get_mut(&b.key) else {
            b.ended = true;
            return None;
        };
        let answer = match conn.next_step(item.timeout, std::future::pending()).await {
            Ok(Some((_, resp))) => Ok(resp),
            Ok(None) => {
                b.ended = true;
                return None;
            }
            Err(e) => {
                b.ended = true;
                Err(e)
            }
        };
        if let Ok(Response::NeedContent { .. }) = &answer {
            // The agent ended the batch there: the content is sent and the item asked again on
            // its own, and the items after it run on their own.
            while let Ok(Some(_)) = conn.next_step(None, std::future::pending()).await {}
            b.ended = true;
        }
        let r = self.agent_answer(ctx, h, &item, answer).await;
        let wrote = outbox_writer(&r);
        let ev = self.finish_item(task, h, item_scope, r, label);
        b.settle.push((wrote, ev.status));
        Some(ev)
    }

    /// The batch's end read (after a failure the loop stopped at), and the outbox settled.
    pub(super) async fn loop_batch_done(&self, h: &mut HostState, mut b: LoopBatch) {
        self.end_loop_batch(h, &mut b).await;
        for (wrote, status) in std::mem::take(&mut b.settle) {
            self.settle_outbox(h, wrote, status).await;
        }
    }

    async fn end_loop_batch(&self, h: &mut HostState, b: &mut LoopBatch) {
        if b.ended {
            return;
        }
        b.ended = true;
        if let Some(conn) = h.conns.get_mut(&b.key) {
            while let Ok(Some(_)) = conn.next_step(None, std::future::pending()).await {}
        }
    }
}

/// Whether `item` reads controller files on a host that is the controller itself (see
/// `section::reads_controller_files`).
fn local_files(task: &crate::playbook::Task, item: &AgentItem) -> bool {
    matches!(item.spec.kind, crate::connection::ConnKind::Local)
        && super::section::reads_controller_files(task)
}
