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
use fixpoint_agent::protocol::{BatchStep, Request, Response};
use futures::StreamExt;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedSender;

mod loops;

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
    /// Item index, the step's index in the batch, the item.
    runs: std::collections::VecDeque<(usize, usize, AgentItem)>,
    /// The items are steps of a larger batch (`HostRunner::batch`), which reads its end.
    shared: bool,
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
    /// A gate (`Fit::Gate`): run on the controller once the answers before it are in.
    Gate,
    /// A loop whose items (item index, item) are steps of the batch, with the items and loop
    /// variable they were rendered from.
    Loop(
        std::collections::VecDeque<(usize, AgentItem)>,
        Vec<serde_json::Value>,
        String,
    ),
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
        // Names are rendered before the section runs, with the first host's variables.
        let first = &self.hosts[&targets[0]];
        let names: Vec<String> = sec
            .tasks
            .iter()
            .enumerate()
            .map(|(k, t)| {
                let scope = shared!(self).scope(ctx, Some(t), first);
                let earlier = &sec.tasks[..k];
                shown_name(&scope, &t.display_name(), &|v| {
                    earlier.iter().any(|b| super::may_set(b, v))
                })
            })
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
        // Every host's handshake starts now, not after the controller prepared its batch.
        for h in self.hosts.values().filter(|h| targets.contains(&h.name)) {
            shared.open_ahead(h, ctx, sec.tasks[0]);
        }
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
        let mut missing_handler = false;
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
                // A notification no handler answers stops the run once the section is
                // through (a task whose `notify` is a template is a barrier: it stops there).
                missing_handler |= print_task(
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
                self.reporter
                    .task_start(&labels.banners[next], sec.handlers);
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
            missing_handler |= print_task(
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
        if missing_handler {
            self.run_stopped = true;
            self.play_ended = true;
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
) -> bool {
    if results.is_empty() {
        return false;
    }
    if !bannered {
        reporter.task_start(&labels.banners[k], sec.handlers);
    }
    let shown = Shown {
        task: sec.tasks[k],
        name: &labels.names[k],
        location: &labels.locations[k],
    };
    let mut stop = false;
    for (i, ((events, warnings, no_log), unknown)) in results {
        stop |= report_host(
            reporter,
            changed_log.as_deref_mut(),
            &shown,
            &hosts[i],
            (&events, warnings, no_log),
            warned,
            unknown,
        );
    }
    stop
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
            if sec.fit[j] == Fit::Gate {
                plan.push(Planned::Gate);
                j += 1;
                continue;
            }
            let scope = sh.scope(ctx, Some(task), h);
            if task.loop_items.is_some() {
                // A loop joins when every item that runs (its `when` is the items') can go to
                // this agent now; otherwise it runs on its own, which says why.
                let Some((items, loop_var)) = sh.loop_items(ctx, task, &scope) else {
                    break;
                };
                let Some((runs, this, true)) =
                    sh.plan_loop(ctx, task, h, &scope, &items, &loop_var).await
                else {
                    break;
                };
                if *key.get_or_insert_with(|| this.clone()) != this {
                    break;
                }
                plan.push(Planned::Loop(runs, items, loop_var));
                j += 1;
                continue;
            }
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
            // Only skipped tasks before the first gate: nothing to send, and the gate runs on
            // its own.
            let count = plan
                .iter()
                .position(|p| matches!(p, Planned::Gate))
                .unwrap_or(plan.len());
            if count == 0 {
                return Batched::NotStarted;
            }
            for (i, p) in plan.into_iter().take(count).enumerate() {
                if let Planned::Skip(scope) = p {
                    self.skip(h, k + i, &scope);
                }
            }
            return Batched::Through(k + count);
        };
        let spec = plan
            .iter()
            .find_map(|p| match p {
                Planned::Run(item, _) => Some(item.spec.clone()),
                Planned::Loop(runs, ..) => runs.front().map(|(_, item)| item.spec.clone()),
                _ => None,
            })
            .expect("a step was planned");
        // The agent started for this batch gets it with its start (`conn_sending`).
        let steps = batch_steps(&plan, &sec.tasks[k..]);
        let mut gated = last_gate(&steps);
        let mut first = Some(Request::Batch { steps });
        let conn = match sh.conn_sending(h, &spec, ctx, &mut first).await {
            Ok(conn) => conn,
            // The agent cannot be started: the first step fails (or finds the host
            // unreachable) as it would on its own, after the tasks skipped before it.
            Err(e) => {
                let mut e = Some(e);
                for (i, p) in plan.into_iter().enumerate() {
                    let idx = k + i;
                    match p {
                        Planned::Skip(scope) => self.skip(h, idx, &scope),
                        // The gate (or loop) runs on its own, and the tasks after it too.
                        Planned::Gate | Planned::Loop(..) => return Batched::Through(idx),
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
        // `None`: it went with the agent's start.
        if let Some(Request::Batch { mut steps }) = first {
            if !conn.takes_batches() {
                return Batched::Unsupported;
            }
            if !conn.takes_gates() {
                // An older agent: the batch ends before its first gate.
                if let Some(g) = plan.iter().position(|p| matches!(p, Planned::Gate)) {
                    plan.truncate(g);
                    steps = batch_steps(&plan, &sec.tasks[k..]);
                    gated = last_gate(&steps);
                }
            }
            if conn.send_batch(steps).await.is_err() {
                // Too large, or the channel is gone: the task on its own says what happened.
                return Batched::NotStarted;
            }
        }
        let mut settle = Vec::new();
        let mut ended = false;
        let mut next = k;
        let planned = plan.len();
        let mut passed = 0;
        // The batch step whose answer comes next.
        let mut step = 0;
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
                Planned::Gate => {
                    // After the agent ended the batch, the gate and the rest run on their own.
                    if ended || self.interrupt.requested() {
                        break;
                    }
                    self.starts(h, idx);
                    let run = sh.run_task_on_host(ctx, task, h).await;
                    let stop = stops(&run);
                    self.done(h, idx, run);
                    next = idx + 1;
                    if stop {
                        // The gated steps change nothing: the batch is cancelled below.
                        break;
                    }
                    passed += 1;
                    if passed <= gated {
                        if let Some(conn) = h.conns.get_mut(&key) {
                            // A failed write breaks the channel: the next answer says so.
                            let _ = conn.open_gate(passed).await;
                        }
                    }
                    continue;
                }
                Planned::Loop(runs, items, loop_var) => {
                    if ended || self.interrupt.requested() {
                        break;
                    }
                    self.starts(h, idx);
                    let count = runs.len();
                    let mut sent = LoopBatch {
                        key: key.clone(),
                        runs: runs
                            .into_iter()
                            .enumerate()
                            .map(|(n, (i, item))| (i, step + n, item))
                            .collect(),
                        shared: true,
                        ended: false,
                        settle: Vec::new(),
                    };
                    let run = sh
                        .run_sent_loop(ctx, task, h, (&items, &loop_var), &mut sent)
                        .await;
                    settle.append(&mut sent.settle);
                    step += count;
                    let stop = stops(&run);
                    self.done(h, idx, run);
                    next = idx + 1;
                    if stop {
                        break;
                    }
                    continue;
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
                        Ok(Some((index, resp))) => answer_of(step, index, resp),
                        // The agent started no more steps (cancelled): this task did not run.
                        Ok(None) => break,
                        Err(e) => Err(e),
                    };
                    step += 1;
                    ended |= answer.is_err();
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
        // serves anything else. A batch left part way (a gate that did not pass, Ctrl-C) is
        // cancelled: a gated step may be waiting for a gate that will not open, and the
        // answers of those that were converged already are not used.
        if let Some(conn) = h.conns.get_mut(&key) {
            let left = next < k + planned;
            while let Ok(Some(_)) = match left {
                true => conn.next_step(None, Box::pin(std::future::ready(()))).await,
                false => conn.next_step(None, Box::pin(std::future::pending())).await,
            } {}
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
        self.shared.register_skip(task, h, scope);
        let warnings = scope.take_warnings();
        self.done(h, k, (vec![skip_event(None)], warnings, task.no_log));
    }
}

/// Whether a task's run stops the host: a failure not ignored, or the host unreachable.
fn stops(run: &HostRun) -> bool {
    run.0
        .iter()
        .any(|ev| ev.status == Status::Failed && !ev.ignored || ev.status == Status::Unreachable)
}

/// The agent steps of a planned batch (`tasks` from its first task on), each gated on the
/// gates before it in the batch.
fn batch_steps(plan: &[Planned], tasks: &[&crate::playbook::Task]) -> Vec<BatchStep> {
    let mut gates = 0;
    let mut steps: Vec<BatchStep> = Vec::new();
    for (p, task) in plan.iter().zip(tasks) {
        let gate = (gates > 0).then_some(gates);
        match p {
            Planned::Gate => gates += 1,
            Planned::Skip(_) => {}
            Planned::Run(item, _) => steps.push(batch_step(task, item, gate)),
            Planned::Loop(runs, ..) => {
                steps.extend(runs.iter().map(|(_, item)| batch_step(task, item, gate)));
            }
        }
    }
    steps
}

/// The last gate with an agent step after it: the gates past it need not be opened.
fn last_gate(steps: &[BatchStep]) -> u32 {
    steps.iter().filter_map(|s| s.gate).max().unwrap_or(0)
}

/// The batch step of an agent task (or a loop item).
fn batch_step(task: &crate::playbook::Task, item: &AgentItem, gate: Option<u32>) -> BatchStep {
    BatchStep {
        run: item.req.clone(),
        timeout_ms: item
            .timeout
            .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
        ignore_errors: task.ignore_errors,
        gate,
    }
}

/// The answer of batch step `index`, expected to be step `step`'s: anything else is the
/// controller and the agent out of step, which ends the channel rather than give one task
/// another's answer.
fn answer_of(
    step: usize,
    index: usize,
    resp: Response,
) -> Result<Response, crate::connection::TransportError> {
    if index == step || index == usize::MAX {
        return Ok(resp);
    }
    Err(crate::connection::TransportError::Protocol(format!(
        "the agent answered batch step {index} where step {step} was expected"
    )))
}

/// Whether `item` reads controller files on a host that is the controller itself (see
/// `section::reads_controller_files`).
fn local_files(task: &crate::playbook::Task, item: &AgentItem) -> bool {
    matches!(item.spec.kind, crate::connection::ConnKind::Local)
        && super::section::reads_controller_files(task)
}
