//! The scheduler: runs plays over hosts (linear strategy: each task on every host, then the next), drives the agents, and feeds the reporter.

use crate::actions::{self, Prepared};
use crate::config::Config;
use crate::inventory::Inventory;
use crate::journal::OutboxEntry;
use crate::playbook::{
    Block, Include, IncludeSource, Meta, MetaAction, Play, Playbook, RoleCtx, Step, Task,
};
use crate::protocol::{JournalOp, NotifySpec, OnceSpec, Request, Response};
use crate::reporter::{Reporter, Stats, Status, TaskEvent};
use crate::templating::Templar;
use crate::transport::{self, AgentBinary, AgentConn, ConnKind, ConnSpec, TransportError};
use crate::vars::{Layer, Scope};
use fixpoint_modules::{Diff, Outcome};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The read-only half of the engine (`Shared`), borrowed field by field: a `&self` method would
/// borrow the whole engine, while host futures need `self.hosts` mutably at the same time.
macro_rules! shared {
    ($engine:expr) => {
        Shared {
            cfg: &$engine.cfg,
            inventory: &$engine.inventory,
            run_id: &$engine.run_id,
            templar: &$engine.templar,
            binary: &$engine.binary,
        }
    };
}

/// How a whole run ended, for the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    Success,
    Failed,
    NotConverged,
}

/// State of one host for one pass (connections survive passes: one connection per host per run).
struct HostState {
    name: String,
    inv_vars: Arc<Map<String, Value>>,
    facts: Map<String, Value>,
    /// `set_fact` and `register` results: data, never templated again.
    host_vars: Map<String, Value>,
    /// Variables loaded by `include_vars` (below `set_fact`, as in Ansible).
    included_vars: Map<String, Value>,
    /// The last task that failed on this host, with its result, for a `rescue`.
    last_failure: Option<(Value, Value)>,
    /// `meta: end_host` ended the play for this host.
    ended: bool,
    /// Agents by (delegated host, become user): `None` is the host itself.
    conns: HashMap<ConnKey, AgentConn>,
    failed: bool,
    unreachable: bool,
    notified: Vec<String>,
    /// Handler notifications left in the host's outbox by earlier runs, not yet delivered.
    pending: Vec<OutboxEntry>,
    stats: Stats,
    gathered: bool,
}

impl HostState {
    fn reset_for_pass(&mut self) {
        self.facts.clear();
        self.host_vars.clear();
        self.included_vars.clear();
        self.last_failure = None;
        self.ended = false;
        self.failed = false;
        self.unreachable = false;
        self.notified.clear();
        self.pending.clear();
        self.stats = Stats::default();
        self.gathered = false;
    }

    fn new(name: &str, inv_vars: Arc<Map<String, Value>>) -> HostState {
        HostState {
            name: name.to_string(),
            inv_vars,
            facts: Map::new(),
            host_vars: Map::new(),
            included_vars: Map::new(),
            last_failure: None,
            ended: false,
            conns: HashMap::new(),
            failed: false,
            unreachable: false,
            notified: Vec::new(),
            pending: Vec::new(),
            stats: Stats::default(),
            gathered: false,
        }
    }

    fn active(&self) -> bool {
        !self.failed && !self.unreachable && !self.ended
    }
}

/// Which agent of a host: the host this task is delegated to (None: the host itself), and the
/// become user.
type ConnKey = (Option<String>, Option<String>);

/// One result to report, produced by a host future and reported in host order.
struct Event {
    status: Status,
    item: Option<String>,
    diff: Diff,
    msg: Option<String>,
    result: Map<String, Value>,
    ignored: bool,
    note: Option<String>,
    /// `delegate_to`: the host it ran on, when not the task's own.
    delegated_to: Option<String>,
}

/// Things shared by every host future of a play.
struct PlayCtx<'a> {
    play: &'a Play,
    book: &'a Playbook,
    /// The hosts of the current batch (all of the play's without `serial`).
    hosts: Vec<String>,
    /// All hosts of the play.
    all_hosts: Vec<String>,
    /// The play's hosts that have not failed (Ansible's `ansible_play_hosts`).
    live_hosts: Vec<String>,
    groups: Value,
    hostvars: Value,
    /// Variables from `vars_files` whose paths are templated (rendered once per play).
    files_vars: Map<String, Value>,
    /// Parameters of the `include_tasks` / `include_role` being run (and its loop item).
    include_params: Map<String, Value>,
    /// The handlers known so far (see `Engine::handlers`).
    handlers: Arc<Vec<Task>>,
}

impl PlayCtx<'_> {
    /// The same play with these include parameters on top of the current ones.
    fn with_params(&self, params: Map<String, Value>) -> PlayCtx<'_> {
        let mut include_params = self.include_params.clone();
        include_params.extend(params);
        PlayCtx {
            play: self.play,
            book: self.book,
            hosts: self.hosts.clone(),
            all_hosts: self.all_hosts.clone(),
            live_hosts: self.live_hosts.clone(),
            groups: self.groups.clone(),
            hostvars: self.hostvars.clone(),
            files_vars: self.files_vars.clone(),
            include_params,
            handlers: self.handlers.clone(),
        }
    }
}

pub struct Engine {
    cfg: Config,
    templar: Arc<Templar>,
    inventory: Arc<Inventory>,
    reporter: Reporter,
    hosts: BTreeMap<String, HostState>,
    binary: Arc<tokio::sync::OnceCell<Result<Arc<AgentBinary>, String>>>,
    /// Changed results of the current pass: (host, task, location, diff), for `--twice`.
    changed_log: Vec<(String, String, String, Diff)>,
    /// This run's id, recorded with the host lock and journal records.
    run_id: String,
    /// `meta: end_play` was reached in the current play (or a failure limit).
    play_ended: bool,
    /// False until `--start-at-task`'s task is reached.
    started: bool,
    /// Blocks with a `rescue` being run: failures inside may still be rescued.
    rescue_depth: usize,
    /// Hosts of the current batch that had failed before it started.
    failed_before: Vec<String>,
    /// See `idle_hostvars`.
    idle_hostvars: Arc<OnceLock<Map<String, Value>>>,
    /// In a `strategy: free` lane: the other hosts' `hostvars` as they were when it started.
    peer_hostvars: Map<String, Value>,
    /// The current play's handlers: its own and its roles', then those of roles loaded at run
    /// time.
    handlers: Arc<Vec<Task>>,
}

impl Engine {
    pub fn new(cfg: Config, inventory: Inventory, templar: Templar) -> Engine {
        let reporter = Reporter::new(cfg.json, cfg.verbosity, cfg.diff || cfg.twice);
        Engine {
            cfg,
            templar: Arc::new(templar),
            inventory: Arc::new(inventory),
            reporter,
            hosts: BTreeMap::new(),
            binary: Arc::default(),
            changed_log: Vec::new(),
            run_id: new_run_id(),
            play_ended: false,
            started: true,
            rescue_depth: 0,
            failed_before: Vec::new(),
            idle_hostvars: Arc::default(),
            peer_hostvars: Map::new(),
            handlers: Arc::default(),
        }
    }

    /// Run all playbooks (twice under `--twice`) and say how it went.
    pub async fn run(&mut self, books: &[Playbook]) -> RunOutcome {
        let passes = if self.cfg.twice { 2 } else { 1 };
        let mut outcome = RunOutcome::Success;
        for pass in 1..=passes {
            for h in self.hosts.values_mut() {
                h.reset_for_pass();
            }
            self.started = self.cfg.start_at_task.is_none();
            self.changed_log.clear();
            for book in books {
                for play in &book.plays {
                    self.run_play(book, play, pass).await;
                }
            }
            let stats: BTreeMap<String, Stats> = self
                .hosts
                .iter()
                .map(|(n, h)| (n.clone(), h.stats))
                .collect();
            self.reporter.recap(&stats, pass, self.cfg.twice);
            if !self.started {
                self.reporter.warn(&format!(
                    "--start-at-task: no task named \"{}\" was found",
                    self.cfg.start_at_task.as_deref().unwrap_or_default()
                ));
                outcome = RunOutcome::Failed;
                break;
            }
            if stats.values().any(|s| s.failed > 0 || s.unreachable > 0) {
                outcome = RunOutcome::Failed;
                break;
            }
            if pass == 2 && !self.changed_log.is_empty() {
                let culprits = std::mem::take(&mut self.changed_log);
                self.reporter.not_converged(&culprits);
                outcome = RunOutcome::NotConverged;
            }
        }
        self.close_all().await;
        outcome
    }

    /// `fixpoint journal`: run one journal action on every selected host; true when all succeeded.
    pub async fn journal(&mut self, pattern: &str, become_: bool, action: JournalOp) -> bool {
        let hosts = match self.inventory.select(pattern) {
            Ok(h) if !h.is_empty() => h,
            Ok(_) => {
                self.reporter.warn(&format!("no hosts matched `{pattern}`"));
                return false;
            }
            Err(e) => {
                self.reporter.warn(&format!("bad host pattern: {e}"));
                return false;
            }
        };
        let play = Play::bare(pattern, become_);
        let book = Playbook {
            path: PathBuf::from("journal"),
            dir: PathBuf::from("."),
            plays: Vec::new(),
            roles_path: Vec::new(),
        };
        let ctx = PlayCtx {
            play: &play,
            book: &book,
            hosts: hosts.clone(),
            all_hosts: hosts.clone(),
            live_hosts: hosts.clone(),
            groups: serde_json::to_value(self.inventory.groups_map()).unwrap_or_default(),
            hostvars: Value::Null,
            files_vars: Map::new(),
            include_params: Map::new(),
            handlers: Arc::default(),
        };
        let mut ok = true;
        for host in &hosts {
            self.host_state(host);
            let shared = shared!(self);
            let h = self.hosts.get_mut(host).expect("host state");
            let res = async {
                let spec = shared.conn_spec(h, &ctx, None)?;
                let conn = shared.conn(h, &spec, &ctx).await.map_err(|(_, e)| e)?;
                match conn
                    .call(
                        &Request::Journal {
                            action: action.clone(),
                        },
                        None,
                    )
                    .await
                    .map_err(|e| e.to_string())?
                {
                    Response::Journal { data } => Ok(data),
                    Response::Failed { msg, .. } => Err(msg),
                    other => Err(format!("unexpected answer: {other:?}")),
                }
            }
            .await;
            match res {
                Ok(data) => self.reporter.journal(host, &data),
                Err(e) => {
                    ok = false;
                    self.reporter.warn(&format!("[{host}] {e}"));
                }
            }
        }
        self.close_all().await;
        ok
    }

    /// Close every agent and master connection, all at once: each close waits for the agent to
    /// exit and the master to go, and doing them one by one adds up.
    async fn close_all(&mut self) {
        let conns = std::mem::take(&mut self.hosts)
            .into_values()
            .flat_map(|mut h| h.conns.drain().map(|(_, c)| c).collect::<Vec<_>>());
        futures::future::join_all(conns.map(AgentConn::close)).await;
    }

    fn host_state(&mut self, name: &str) -> &mut HostState {
        if !self.hosts.contains_key(name) {
            let inv_vars = Arc::new(self.inventory.host_vars(name));
            self.hosts
                .insert(name.to_string(), HostState::new(name, inv_vars));
        }
        self.hosts.get_mut(name).expect("just inserted")
    }

    async fn run_play(&mut self, book: &Playbook, play: &Play, pass: u8) {
        let mut selected = match self.inventory.select(&play.hosts) {
            Ok(h) => h,
            Err(e) => {
                self.reporter
                    .warn(&format!("play \"{}\": bad host pattern: {e}", play.name));
                return;
            }
        };
        if let Some(limit) = &self.cfg.limit {
            match self.inventory.select(limit) {
                Ok(allowed) => selected.retain(|h| allowed.contains(h)),
                Err(e) => {
                    self.reporter.warn(&format!("bad --limit pattern: {e}"));
                    return;
                }
            }
        }
        order_hosts(&mut selected, play.order);
        self.reporter
            .play_start(&shown_name(&self.play_scope(play), &play.name), pass);
        if selected.is_empty() {
            self.reporter.warn(&format!(
                "play \"{}\": no hosts matched `{}`",
                play.name, play.hosts
            ));
            return;
        }
        for h in &selected {
            self.host_state(h);
        }
        let files_vars = match self.templated_vars_files(play) {
            Ok(v) => v,
            Err(e) => {
                self.reporter.warn(&format!("play \"{}\": {e}", play.name));
                for h in &selected {
                    let hs = self.host_state(h);
                    hs.failed = true;
                    hs.stats.failed += 1;
                }
                return;
            }
        };
        self.play_ended = false;
        for h in &selected {
            self.host_state(h).ended = false;
        }
        let groups = serde_json::to_value(self.inventory.groups_map()).unwrap_or_default();
        self.handlers = Arc::new(play.handlers.clone());
        for batch in batches(&selected, &play.serial) {
            let ctx = PlayCtx {
                play,
                book,
                hosts: batch.clone(),
                all_hosts: selected.clone(),
                live_hosts: selected.clone(),
                groups: groups.clone(),
                hostvars: Value::Null,
                files_vars: files_vars.clone(),
                include_params: Map::new(),
                handlers: self.handlers.clone(),
            };
            self.failed_before = batch
                .iter()
                .filter(|h| !self.hosts[*h].active())
                .cloned()
                .collect();
            if play.gather_facts {
                self.gather_facts(&ctx).await;
            }
            // Ansible's order: pre_tasks, handlers, roles then tasks, handlers, post_tasks, handlers.
            let sections: [&[&[Step]]; 3] = [
                &[&play.pre_tasks],
                &[&play.roles, &play.tasks],
                &[&play.post_tasks],
            ];
            for section in sections {
                if play.free {
                    self.run_free_section(&ctx, section, &batch).await;
                } else {
                    for steps in section {
                        self.run_steps(&ctx, steps, &batch).await;
                    }
                    if !self.play_ended {
                        self.flush_handlers(&ctx).await;
                    }
                }
                if self.play_ended {
                    break;
                }
            }
            if self.play_ended {
                break;
            }
        }
    }

    /// `hostvars` of the inventory hosts before any play works on them (computed once).
    fn idle_hostvars(&self) -> &Map<String, Value> {
        self.idle_hostvars.get_or_init(|| {
            let names = self.inventory.select("all").unwrap_or_default();
            names
                .into_iter()
                .map(|n| {
                    let inv = Arc::new(self.inventory.host_vars(&n));
                    let empty = Map::new();
                    let m = rendered_inv_vars(
                        &n,
                        &inv,
                        &empty,
                        &empty,
                        &self.templar,
                        &self.cfg.extra_vars,
                    );
                    (n, Value::Object(m))
                })
                .collect()
        })
    }

    /// The play context with the hosts' variables and failures as they are now.
    fn snapshot<'c>(&self, ctx: &'c PlayCtx<'c>) -> PlayCtx<'c> {
        PlayCtx {
            handlers: self.handlers.clone(),
            hostvars: hostvars_snapshot(
                &self.hosts,
                self.idle_hostvars(),
                &self.peer_hostvars,
                &self.templar,
                &self.cfg.extra_vars,
            ),
            live_hosts: ctx
                .all_hosts
                .iter()
                .filter(|h| {
                    self.hosts
                        .get(*h)
                        .is_some_and(|hs| !hs.failed && !hs.unreachable)
                })
                .cloned()
                .collect(),
            ..ctx.with_params(Map::new())
        }
    }

    /// `strategy: free`: every host runs the section (and then its handlers) in its own lane,
    /// all lanes at once, so no host waits for another between tasks. A lane is an engine that
    /// owns that one host's state; the other hosts' `hostvars` are those of the section start.
    async fn run_free_section(&mut self, ctx: &PlayCtx<'_>, section: &[&[Step]], batch: &[String]) {
        let peers = match hostvars_snapshot(
            &self.hosts,
            self.idle_hostvars(),
            &self.peer_hostvars,
            &self.templar,
            &self.cfg.extra_vars,
        ) {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        let mut lanes = Vec::new();
        for h in batch {
            if !self.hosts[h].active() {
                continue;
            }
            let hs = self.hosts.remove(h).expect("host state");
            lanes.push(self.lane(hs, peers.clone()));
        }
        let futures = lanes.into_iter().map(|mut lane| async move {
            let allowed: Vec<String> = lane.hosts.keys().cloned().collect();
            let lane_ctx = PlayCtx {
                hosts: allowed.clone(),
                ..ctx.with_params(Map::new())
            };
            for steps in section {
                lane.run_steps(&lane_ctx, steps, &allowed).await;
            }
            if !lane.play_ended {
                lane.flush_handlers(&lane_ctx).await;
            }
            lane
        });
        // --forks bounds how many hosts are worked on at once, as in the linear strategy.
        use futures::StreamExt;
        let done: Vec<Engine> = futures::stream::iter(futures)
            .buffer_unordered(self.cfg.forks)
            .collect()
            .await;
        for lane in done {
            self.hosts.extend(lane.hosts);
            self.changed_log.extend(lane.changed_log);
            self.started |= lane.started;
            // `meta: end_play` in any lane ends the play (the other lanes finished the section).
            self.play_ended |= lane.play_ended;
            self.add_handlers(lane.handlers.to_vec());
        }
    }

    /// An engine for one host of a free play, sharing this one's configuration and caches.
    fn lane(&self, hs: HostState, peers: Map<String, Value>) -> Engine {
        let mut hosts = BTreeMap::new();
        hosts.insert(hs.name.clone(), hs);
        Engine {
            cfg: self.cfg.clone(),
            templar: self.templar.clone(),
            inventory: self.inventory.clone(),
            reporter: Reporter::new(
                self.cfg.json,
                self.cfg.verbosity,
                self.cfg.diff || self.cfg.twice,
            ),
            hosts,
            binary: self.binary.clone(),
            changed_log: Vec::new(),
            run_id: self.run_id.clone(),
            play_ended: false,
            started: self.started,
            rescue_depth: 0,
            failed_before: Vec::new(),
            idle_hostvars: self.idle_hostvars.clone(),
            peer_hostvars: peers,
            handlers: self.handlers.clone(),
        }
    }

    /// `any_errors_fatal` and `max_fail_percentage`: after each step outside a block with a
    /// rescue (where a failure may still be rescued), end the play when the batch failed enough.
    fn check_fail_limits(&mut self, ctx: &PlayCtx<'_>) {
        if self.rescue_depth > 0 {
            return;
        }
        let failed = ctx
            .hosts
            .iter()
            .filter(|h| {
                let hs = &self.hosts[*h];
                (hs.failed || hs.unreachable) && !self.failed_before.contains(*h)
            })
            .count();
        if failed == 0 {
            return;
        }
        let fatal = ctx.play.any_errors_fatal;
        let over = ctx
            .play
            .max_fail_percentage
            .is_some_and(|max| (failed as f64) * 100.0 / (ctx.hosts.len() as f64) > max);
        if fatal || over {
            let why = if fatal {
                "any_errors_fatal".to_string()
            } else {
                format!(
                    "max_fail_percentage {} exceeded",
                    ctx.play.max_fail_percentage.unwrap_or_default()
                )
            };
            self.reporter.warn(&format!(
                "play \"{}\" ends for all hosts: {failed} host(s) failed ({why})",
                ctx.play.name
            ));
            self.play_ended = true;
            // The hosts that did not fail did not finish the play either: the run fails.
            for h in &ctx.hosts {
                let hs = self.hosts.get_mut(h).expect("host state");
                if hs.active() {
                    hs.failed = true;
                }
            }
        }
    }

    /// Run a list of steps on the hosts of `allowed` that are still active.
    fn run_steps<'s>(
        &'s mut self,
        ctx: &'s PlayCtx<'s>,
        steps: &'s [Step],
        allowed: &'s [String],
    ) -> futures::future::BoxFuture<'s, ()> {
        Box::pin(async move {
            for step in steps {
                let targets: Vec<String> = allowed
                    .iter()
                    .filter(|h| self.hosts[*h].active())
                    .cloned()
                    .collect();
                if targets.is_empty() || self.play_ended {
                    return;
                }
                match step {
                    Step::Task(task) => {
                        if !self.started {
                            // --start-at-task: skip until the named task.
                            let want = self.cfg.start_at_task.as_deref().unwrap_or_default();
                            if task.display_name() != want
                                && crate::listing::listed_name(task) != want
                            {
                                continue;
                            }
                            self.started = true;
                        }
                        if self.tag_selected(&task.tags) {
                            self.run_task(ctx, task, &targets, false).await;
                        }
                    }
                    Step::Block(block) => self.run_block(ctx, block, &targets).await,
                    Step::Include(inc) => {
                        if self.tag_selected(&inc.tags) {
                            self.run_include(ctx, inc, &targets).await;
                        }
                    }
                    Step::Meta(meta) => {
                        if self.tag_selected(&meta.tags) {
                            self.run_meta(ctx, meta, &targets).await;
                        }
                    }
                }
                self.check_fail_limits(ctx);
            }
        })
    }

    /// `block` / `rescue` / `always`: hosts that fail in the block run the rescue (and count
    /// as rescued, not failed, when it succeeds); every host that entered runs the always part.
    async fn run_block(&mut self, ctx: &PlayCtx<'_>, block: &Block, entered: &[String]) {
        for h in entered {
            self.hosts.get_mut(h).expect("host state").last_failure = None;
        }
        let rescuable = !block.rescue.is_empty();
        self.rescue_depth += usize::from(rescuable);
        self.run_steps(ctx, &block.block, entered).await;
        self.rescue_depth -= usize::from(rescuable);
        let failed_here = |me: &Self| -> Vec<String> {
            entered
                .iter()
                .filter(|h| {
                    let hs = &me.hosts[*h];
                    hs.failed && !hs.unreachable
                })
                .cloned()
                .collect()
        };
        let to_rescue = failed_here(self);
        if !block.rescue.is_empty() && !to_rescue.is_empty() {
            for h in &to_rescue {
                let hs = self.hosts.get_mut(h).expect("host state");
                hs.failed = false;
                hs.stats.failed = hs.stats.failed.saturating_sub(1);
                let (task, result) = hs.last_failure.clone().unwrap_or_default();
                hs.host_vars.insert("ansible_failed_task".into(), task);
                hs.host_vars.insert("ansible_failed_result".into(), result);
            }
            self.run_steps(ctx, &block.rescue, &to_rescue).await;
            for h in &to_rescue {
                let hs = self.hosts.get_mut(h).expect("host state");
                if !hs.failed && !hs.unreachable {
                    hs.stats.rescued += 1;
                }
            }
        }
        if !block.always.is_empty() && !self.play_ended {
            // Hosts that failed in the block (and were not rescued) run `always` and stay failed.
            let still_failed = failed_here(self);
            for h in &still_failed {
                self.hosts.get_mut(h).expect("host state").failed = false;
            }
            let runners: Vec<String> = entered
                .iter()
                .filter(|h| !self.hosts[*h].unreachable)
                .cloned()
                .collect();
            self.run_steps(ctx, &block.always, &runners).await;
            for h in &still_failed {
                self.hosts.get_mut(h).expect("host state").failed = true;
            }
        }
    }

    /// `include_tasks` / `include_role`: evaluated per host (and loop item); hosts that
    /// include the same file with the same parameters run it together.
    async fn run_include(&mut self, ctx: &PlayCtx<'_>, inc: &Include, targets: &[String]) {
        let shared = shared!(self);
        let snap = self.snapshot(ctx);
        // (file, parameters) → hosts, in order of first appearance.
        let mut groups: Vec<IncludeGroup> = Vec::new();
        let mut failures: Vec<(String, String)> = Vec::new();
        for host in targets {
            let h = &self.hosts[host];
            let scope = shared.scope_with(
                &snap,
                VarSrc {
                    role: inc.role.as_deref(),
                    vars: Some(&inc.inherited_vars),
                    check_mode: None,
                },
                h,
            );
            let items: Vec<Option<(usize, Value)>> = match &inc.loop_items {
                None => vec![None],
                Some(raw) => match scope
                    .render(raw)
                    .and_then(|v| crate::playbook::loops::expand(inc.loop_kind, v, &[]))
                {
                    Ok(items) => items.into_iter().enumerate().map(Some).collect(),
                    Err(e) => {
                        failures.push((host.clone(), format!("cannot expand the loop: {e}")));
                        continue;
                    }
                },
            };
            for item in items {
                let mut params = Map::new();
                if let Some((i, v)) = &item {
                    params.insert(inc.loop_var.clone(), v.clone());
                    params.insert("ansible_loop_var".into(), json!(inc.loop_var));
                    if let Some(iv) = &inc.index_var {
                        params.insert(iv.clone(), json!(i));
                    }
                }
                let s = scope.with(Layer::data(params.clone()));
                let mut ok = true;
                for cond in &inc.when {
                    match s.eval_bool(cond) {
                        Ok(true) => {}
                        Ok(false) => {
                            ok = false;
                            break;
                        }
                        Err(e) => {
                            failures.push((
                                host.clone(),
                                format!("cannot evaluate `when: {cond}`: {e}"),
                            ));
                            ok = false;
                            break;
                        }
                    }
                }
                if !ok {
                    continue;
                }
                match s.render(&Value::Object(inc.vars.clone())) {
                    Ok(Value::Object(m)) => params.extend(m),
                    Ok(_) => {}
                    Err(e) => {
                        failures.push((host.clone(), format!("cannot render `vars`: {e}")));
                        continue;
                    }
                }
                // The file name sees the include's own `vars`, as its other arguments do.
                let s = s.with(Layer::data(params.clone()));
                let file = match &inc.source {
                    IncludeSource::TasksFile { file: name, .. }
                    | IncludeSource::Role { name, .. } => match s.render(&json!(name)) {
                        Ok(v) => Some(display(&v)),
                        Err(e) => {
                            failures.push((
                                host.clone(),
                                format!("cannot render the name `{name}`: {e}"),
                            ));
                            continue;
                        }
                    },
                    IncludeSource::Loaded(_) => None,
                };
                match groups
                    .iter_mut()
                    .find(|(f, p, _)| *f == file && *p == params)
                {
                    Some((_, _, hosts)) => {
                        if !hosts.contains(host) {
                            hosts.push(host.clone())
                        }
                    }
                    None => groups.push((file, params, vec![host.clone()])),
                }
            }
        }
        let location = inc.pos.to_string();
        let name = inc.name.clone().unwrap_or_else(|| inc.action.to_string());
        for (host, msg) in failures {
            self.fail_host(
                &host,
                &name,
                inc.action,
                &location,
                format!("{msg} (at {location})"),
            );
        }
        for (file, params, hosts) in groups {
            let sub = ctx.with_params(params);
            let (source, file) = match (&inc.source, file) {
                (IncludeSource::Loaded(steps), _) => {
                    self.run_steps(&sub, steps, &hosts).await;
                    continue;
                }
                (source, Some(file)) => (source, file),
                (_, None) => continue,
            };
            let mut loader = crate::playbook::Loader::new(&ctx.play.dir, &ctx.book.roles_path);
            let loaded = match source {
                IncludeSource::TasksFile {
                    search, inherit, ..
                } => match crate::playbook::find_in(search, &file) {
                    Some(path) => loader
                        .task_file(&path, &inc.pos, inherit)
                        .map_err(|d| d.to_string()),
                    None => Err(format!(
                        "task file `{file}` not found; looked in {}",
                        search
                            .iter()
                            .map(|d| d.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                },
                IncludeSource::Role {
                    from,
                    params,
                    inherit,
                    ..
                } => loader
                    .runtime_role(&file, &inc.pos, from, params.clone(), inherit)
                    .map_err(|d| d.to_string()),
                IncludeSource::Loaded(_) => unreachable!("run above"),
            };
            match loaded {
                Ok(steps) => {
                    self.add_handlers(std::mem::take(&mut loader.role_handlers));
                    let sub = PlayCtx {
                        handlers: self.handlers.clone(),
                        ..sub
                    };
                    self.run_steps(&sub, &steps, &hosts).await;
                }
                Err(e) => {
                    for h in &hosts {
                        self.fail_host(
                            h,
                            &name,
                            inc.action,
                            &location,
                            format!("{e} (included at {location})"),
                        );
                    }
                }
            }
        }
    }

    /// Handlers of roles loaded at run time join the play's (once each).
    fn add_handlers(&mut self, new: Vec<Task>) {
        if new.is_empty() {
            return;
        }
        let all = Arc::make_mut(&mut self.handlers);
        for h in new {
            if !all.iter().any(|x| x.pos == h.pos && x.name == h.name) {
                all.push(h);
            }
        }
    }

    /// Report a failure that happened outside a module run (an include that cannot load).
    fn fail_host(&mut self, host: &str, task: &str, module: &str, location: &str, msg: String) {
        self.reporter.task_start(task, false);
        let hs = self.hosts.get_mut(host).expect("host state");
        hs.failed = true;
        hs.stats.failed += 1;
        hs.last_failure = Some((json!({"name": task}), json!({"failed": true, "msg": msg})));
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
            ignored: false,
            censored: false,
            note: None,
            delegated_to: None,
        });
    }

    /// `meta:` actions.
    async fn run_meta(&mut self, ctx: &PlayCtx<'_>, meta: &Meta, targets: &[String]) {
        let shared = shared!(self);
        let mut hit = Vec::new();
        let mut errors = Vec::new();
        for host in targets {
            let src = VarSrc {
                role: meta.role.as_deref(),
                vars: Some(&meta.vars),
                check_mode: None,
            };
            let scope = shared.scope_with(ctx, src, &self.hosts[host]);
            match all_hold(&scope, &meta.when) {
                Ok(true) => hit.push(host.clone()),
                Ok(false) => {}
                Err(e) => errors.push((
                    host.clone(),
                    format!("cannot evaluate `when`: {e} (meta at {})", meta.pos),
                )),
            }
        }
        for (host, msg) in errors {
            self.fail_host(&host, "meta", "meta", &meta.pos.to_string(), msg);
        }
        if hit.is_empty() {
            return;
        }
        match meta.action {
            MetaAction::FlushHandlers => self.flush_handlers(ctx).await,
            MetaAction::EndPlay => self.play_ended = true,
            MetaAction::EndHost => {
                for h in &hit {
                    self.hosts.get_mut(h).expect("host state").ended = true;
                }
            }
            MetaAction::Noop => {}
        }
    }

    /// The variables known before any host is involved: play vars, plain `vars_files`, `-e`.
    /// Play and task names are rendered with them, as Ansible does.
    fn play_scope(&self, play: &Play) -> Arc<Scope> {
        Scope::new(
            self.templar.clone(),
            vec![
                Layer::templates(play.vars.clone()),
                Layer::templates(play.vars_from_files.clone()),
                Layer::templates(self.cfg.extra_vars.clone()),
            ],
        )
    }

    /// Load the `vars_files` whose paths are templates, rendered with play vars and `-e`.
    fn templated_vars_files(&self, play: &Play) -> Result<Map<String, Value>, String> {
        let mut out = Map::new();
        if play.vars_files.is_empty() {
            return Ok(out);
        }
        let scope = self.play_scope(play);
        for (path, pos) in &play.vars_files {
            let rendered = scope
                .render(&json!(path))
                .map_err(|e| format!("cannot render vars_files entry `{path}` ({pos}): {e}"))?;
            let file = play.dir.join(display(&rendered));
            let vars = crate::playbook::load_vars_file(&file, pos).map_err(|d| d.msg)?;
            out.extend(vars);
        }
        Ok(out)
    }

    fn tag_selected(&self, tags: &[String]) -> bool {
        self.cfg.tag_selected(tags)
    }

    async fn gather_facts(&mut self, ctx: &PlayCtx<'_>) {
        let targets: Vec<String> = ctx
            .hosts
            .iter()
            .filter(|h| self.hosts[*h].active() && !self.hosts[*h].gathered)
            .cloned()
            .collect();
        if targets.is_empty() {
            return;
        }
        self.reporter.task_start("Gathering Facts", false);
        let shared = shared!(self);
        let sem = tokio::sync::Semaphore::new(self.cfg.forks);
        let futures = self
            .hosts
            .values_mut()
            .filter(|h| targets.contains(&h.name))
            .map(|h| {
                let sem = &sem;
                let shared = &shared;
                async move {
                    let _permit = sem.acquire().await.expect("semaphore open");
                    let spec = match shared.conn_spec(h, ctx, None) {
                        Ok(s) => s,
                        Err(e) => return (h.name.clone(), Err((false, e))),
                    };
                    let res = match shared.conn(h, &spec, ctx).await {
                        Ok(conn) => conn
                            .call(&Request::Facts, Some(shared.cfg.connect_timeout))
                            .await
                            .map_err(|e| (false, e.to_string())),
                        Err(e) => Err(e),
                    };
                    match res {
                        Ok(Response::Facts { facts }) => {
                            h.facts = facts_vars(facts);
                            h.gathered = true;
                            (h.name.clone(), Ok(()))
                        }
                        Ok(other) => (
                            h.name.clone(),
                            Err((false, format!("unexpected answer to facts: {other:?}"))),
                        ),
                        Err(e) => (h.name.clone(), Err(e)),
                    }
                }
            });
        let results = futures::future::join_all(futures).await;
        for (host, res) in results {
            let hs = self.hosts.get_mut(&host).expect("host state");
            let (status, msg) = match res {
                Ok(()) => {
                    hs.stats.ok += 1;
                    (Status::Ok, None)
                }
                Err((true, e)) => {
                    hs.unreachable = true;
                    hs.stats.unreachable += 1;
                    (Status::Unreachable, Some(e))
                }
                Err((false, e)) => {
                    hs.failed = true;
                    hs.stats.failed += 1;
                    (Status::Failed, Some(e))
                }
            };
            self.reporter.task(&TaskEvent {
                host: &host,
                task: "Gathering Facts",
                module: "setup",
                location: &ctx.play.pos.to_string(),
                status,
                item: None,
                diff: None,
                msg: msg.as_deref(),
                result: None,
                ignored: false,
                censored: false,
                note: None,
                delegated_to: None,
            });
        }
    }

    async fn flush_handlers(&mut self, ctx: &PlayCtx<'_>) {
        // Notifications an earlier run recorded but never delivered are delivered now.
        let scope = playbook_scope(ctx.book);
        for host in &ctx.hosts {
            let hs = self.hosts.get_mut(host).expect("host state");
            if !hs.active() {
                continue;
            }
            let (mine, rest): (Vec<OutboxEntry>, Vec<OutboxEntry>) =
                std::mem::take(&mut hs.pending)
                    .into_iter()
                    .partition(|p| p.playbook == scope && p.play == ctx.play.name);
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
        let handlers = self.handlers.clone();
        for handler in handlers.iter() {
            let name = handler.name.clone().unwrap_or_default();
            let force = self.cfg.force_handlers || ctx.play.force_handlers;
            let targets: Vec<String> = ctx
                .hosts
                .iter()
                .filter(|h| {
                    let hs = &self.hosts[*h];
                    (hs.active() || (force && !hs.unreachable))
                        && hs
                            .notified
                            .iter()
                            .any(|n| *n == name || handler.listen.contains(n))
                })
                .cloned()
                .collect();
            if targets.is_empty() {
                continue;
            }
            for h in &targets {
                let hs = self.hosts.get_mut(h).expect("host state");
                hs.notified
                    .retain(|n| *n != name && !handler.listen.contains(n));
            }
            self.run_task(ctx, handler, &targets, true).await;
            // Delivered: remove the outbox entry on every agent of the hosts where it succeeded.
            for h in &targets {
                let hs = self.hosts.get_mut(h).expect("host state");
                if !hs.active() {
                    continue;
                }
                for conn in hs.conns.values_mut() {
                    let req = Request::HandlerDone {
                        playbook: scope.clone(),
                        play: ctx.play.name.clone(),
                        handler: name.clone(),
                    };
                    if let Err(e) = conn.call(&req, Some(self.cfg.connect_timeout)).await {
                        tracing::warn!(host = %h, "cannot clear the outbox entry of `{name}`: {e}");
                    }
                }
            }
        }
        // Notifications for handlers that do not exist were reported when notified.
    }

    async fn run_task(
        &mut self,
        ctx: &PlayCtx<'_>,
        task: &Task,
        targets: &[String],
        handler: bool,
    ) {
        let name = shown_name(&self.play_scope(ctx.play), &task.display_name());
        // The banner names the role as Ansible does (`common : Install`); events keep the name.
        let banner = match &task.role {
            Some(r) => format!("{} : {name}", r.name),
            None => name.clone(),
        };
        self.reporter.task_start(&banner, handler);
        // `run_once`: the first host runs it; its results are given to the others below.
        let all_targets = targets;
        let targets = if task.run_once {
            &targets[..targets.len().min(1)]
        } else {
            targets
        };
        let shared = shared!(self);
        let sem = tokio::sync::Semaphore::new(
            task.throttle
                .map_or(self.cfg.forks, |t| t.min(self.cfg.forks)),
        );
        let ctx = self.snapshot(ctx);
        let ctx = &ctx;
        let futures = self
            .hosts
            .values_mut()
            .filter(|h| targets.contains(&h.name))
            .map(|h| {
                let sem = &sem;
                let shared = &shared;
                async move {
                    let _permit = sem.acquire().await.expect("semaphore open");
                    let events = shared.run_task_on_host(ctx, task, h).await;
                    (h.name.clone(), events)
                }
            });
        let results = futures::future::join_all(futures).await;
        let location = task.pos.to_string();
        for (host, events) in results {
            let hs = self.hosts.get_mut(&host).expect("host state");
            let mut any_changed = false;
            let mut failed = false;
            let mut unreachable = false;
            for ev in &events {
                match ev.status {
                    Status::Changed => any_changed = true,
                    Status::Failed if !ev.ignored => failed = true,
                    Status::Unreachable => unreachable = true,
                    _ => {}
                }
                if ev.status == Status::Changed {
                    // The --twice verdict shows diffs: never a no_log task's.
                    let diff = if task.no_log {
                        Diff::default()
                    } else {
                        ev.diff.clone()
                    };
                    self.changed_log
                        .push((host.clone(), name.clone(), location.clone(), diff));
                }
                self.reporter.task(&TaskEvent {
                    host: &host,
                    task: &name,
                    module: task.module,
                    location: &location,
                    status: ev.status,
                    item: ev.item.as_deref(),
                    diff: Some(&ev.diff),
                    msg: ev.msg.as_deref(),
                    result: Some(&ev.result),
                    ignored: ev.ignored,
                    censored: task.no_log,
                    note: ev.note.as_deref(),
                    delegated_to: ev.delegated_to.as_deref(),
                });
            }
            // The recap counts a task once per host, like Ansible, whatever its loop length.
            let ignored = events.iter().any(|e| e.ignored);
            if unreachable {
                hs.unreachable = true;
                hs.stats.unreachable += 1;
            } else if failed {
                hs.failed = true;
                hs.stats.failed += 1;
                let result = events
                    .iter()
                    .rev()
                    .find(|e| e.status == Status::Failed && !e.ignored)
                    .map(|e| {
                        let mut r = e.result.clone();
                        if let Some(m) = &e.msg {
                            r.insert("msg".into(), json!(m));
                        }
                        Value::Object(r)
                    })
                    .unwrap_or_default();
                let result = if task.no_log {
                    json!({"censored": "the output has been hidden due to the fact that 'no_log: true' was specified for this result", "failed": true})
                } else {
                    result
                };
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
            if any_changed && !task.notify.is_empty() {
                for n in &task.notify {
                    let known = ctx
                        .handlers
                        .iter()
                        .any(|h| h.name.as_deref() == Some(n) || h.listen.contains(n));
                    if !known {
                        self.reporter.warn(&format!(
                            "task \"{name}\" ({location}) notifies `{n}`, but no handler has that name or listens to it"
                        ));
                        continue;
                    }
                    if !hs.notified.contains(n) {
                        hs.notified.push(n.clone());
                    }
                }
            }
        }
        if task.run_once && all_targets.len() > 1 {
            self.share_run_once(task, &all_targets[0], &all_targets[1..]);
        }
    }

    /// After a `run_once` task, the other hosts see its registered result and facts, as in Ansible.
    fn share_run_once(&mut self, task: &Task, first: &str, others: &[String]) {
        let src = &self.hosts[first].host_vars;
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
            hs.host_vars.extend(shared.clone());
        }
    }
}

/// A run id that says where and when the run started: `<controller host>-<pid>-<unix time>`.
fn new_run_id() -> String {
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "controller".into());
    format!(
        "{host}-{}-{}",
        std::process::id(),
        crate::journal::now_unix()
    )
}

/// Ansible's `group_names`: the host's groups, sorted, without `all`.
fn group_names(groups: &Value, host: &str) -> Vec<String> {
    let mut names: Vec<String> = groups
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(g, members)| {
                    *g != "all"
                        && members
                            .as_array()
                            .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(host)))
                })
                .map(|(g, _)| g.clone())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// `hostvars`: every inventory host's variables (rendered in that host's scope), with the facts
/// and set facts of the hosts this run has worked on, as data. `idle` holds the hosts no play
/// has touched yet, computed once per run.
fn hostvars_snapshot(
    hosts: &BTreeMap<String, HostState>,
    idle: &Map<String, Value>,
    peers: &Map<String, Value>,
    templar: &Arc<Templar>,
    extra_vars: &Map<String, Value>,
) -> Value {
    let mut all = idle.clone();
    all.extend(peers.clone());
    for (name, h) in hosts {
        let mut m = rendered_inv_vars(
            name,
            &h.inv_vars,
            &h.facts,
            &h.host_vars,
            templar,
            extra_vars,
        );
        m.extend(h.facts.clone());
        m.extend(h.host_vars.clone());
        all.insert(name.clone(), Value::Object(m));
    }
    Value::Object(all)
}

/// A host's inventory variables with their templates (`db_name: "{{ app_name }}"`) rendered in
/// that host's own scope, as another host sees them through Ansible's `hostvars`.
fn rendered_inv_vars(
    name: &str,
    inv_vars: &Arc<Map<String, Value>>,
    facts: &Map<String, Value>,
    host_vars: &Map<String, Value>,
    templar: &Arc<Templar>,
    extra_vars: &Map<String, Value>,
) -> Map<String, Value> {
    let mut m = (**inv_vars).clone();
    m.insert("inventory_hostname".into(), json!(name));
    let is_template = |v: &Value| matches!(v, Value::String(s) if Templar::is_template(s));
    if !m.values().any(is_template) {
        return m;
    }
    let magic: Map<String, Value> = [
        ("inventory_hostname".to_string(), json!(name)),
        (
            "inventory_hostname_short".to_string(),
            json!(name.split('.').next().unwrap_or(name)),
        ),
    ]
    .into_iter()
    .collect();
    let scope = Scope::new(
        templar.clone(),
        vec![
            Layer {
                vars: inv_vars.clone(),
                templated: true,
            },
            Layer::data(facts.clone()),
            Layer::data(host_vars.clone()),
            Layer::templates(extra_vars.clone()),
            Layer::data(magic),
        ],
    );
    for v in m.values_mut() {
        if is_template(v) {
            // A value that cannot be rendered here stays as written, as Ansible shows it.
            if let Ok(r) = scope.render(v) {
                *v = r;
            }
        }
    }
    m
}

/// Play `order`: the selection comes in inventory order.
fn order_hosts(hosts: &mut [String], order: crate::playbook::HostOrder) {
    use crate::playbook::HostOrder;
    match order {
        HostOrder::Inventory => {}
        HostOrder::ReverseInventory => hosts.reverse(),
        HostOrder::Sorted => hosts.sort(),
        HostOrder::ReverseSorted => {
            hosts.sort();
            hosts.reverse();
        }
        HostOrder::Shuffle => {
            // No randomness crate: a Fisher-Yates shuffle seeded from the clock is enough to
            // spread the load, which is all `shuffle` is for.
            let mut seed = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
                | 1;
            for i in (1..hosts.len()).rev() {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                hosts.swap(i, (seed % (i as u64 + 1)) as usize);
            }
        }
    }
}

/// The hosts of a play in batches of `serial` sizes (the last size repeats).
fn batches(hosts: &[String], serial: &[crate::playbook::BatchSize]) -> Vec<Vec<String>> {
    use crate::playbook::BatchSize;
    if serial.is_empty() {
        return vec![hosts.to_vec()];
    }
    let mut out = Vec::new();
    let mut rest = hosts;
    let mut i = 0;
    while !rest.is_empty() {
        let size = match serial[i.min(serial.len() - 1)] {
            BatchSize::Count(n) => n,
            // Ansible rounds a percentage down, but a batch has at least one host.
            BatchSize::Percent(p) => ((hosts.len() as f64) * p / 100.0).floor() as usize,
        }
        .clamp(1, rest.len());
        out.push(rest[..size].to_vec());
        rest = &rest[size..];
        i += 1;
    }
    out
}

/// The read-only parts of the engine that host futures need.
struct Shared<'a> {
    cfg: &'a Config,
    inventory: &'a Inventory,
    run_id: &'a str,
    templar: &'a Arc<Templar>,
    binary: &'a tokio::sync::OnceCell<Result<Arc<AgentBinary>, String>>,
}

/// Hosts that include the same file (None: the include's loaded steps) with the same parameters.
type IncludeGroup = (Option<String>, Map<String, Value>, Vec<String>);

/// Where a scope's role and task variables come from (a task, or an include).
#[derive(Default, Clone, Copy)]
struct VarSrc<'t> {
    role: Option<&'t RoleCtx>,
    vars: Option<&'t Map<String, Value>>,
    check_mode: Option<bool>,
}

/// One item's outcome before reporting.
struct ItemResult {
    status: Status,
    outcome: Outcome,
    msg: Option<String>,
    ignored: bool,
    note: Option<String>,
    /// The agent (by become user) that wrote outbox entries for this change, if any.
    outbox_written: Option<ConnKey>,
    /// `delegate_to`: the host it ran on, when not the task's own.
    delegated_to: Option<String>,
}

impl<'a> Shared<'a> {
    /// The variable scope for a task on a host.
    fn scope(&self, ctx: &PlayCtx<'_>, task: Option<&Task>, h: &HostState) -> Arc<Scope> {
        let src = match task {
            Some(t) => VarSrc {
                role: t.role.as_deref(),
                vars: Some(&t.vars),
                check_mode: t.check_mode,
            },
            None => VarSrc::default(),
        };
        self.scope_with(ctx, src, h)
    }

    /// The variable scope on a host, in Ansible's precedence order (later wins): role
    /// defaults, inventory, facts, play vars, vars_files, role vars, block and task vars,
    /// include_vars, set_fact and register, role parameters, include parameters, extra vars.
    fn scope_with(&self, ctx: &PlayCtx<'_>, src: VarSrc<'_>, h: &HostState) -> Arc<Scope> {
        let play = ctx.play;
        let mut magic = Map::new();
        magic.insert("inventory_hostname".into(), json!(h.name));
        magic.insert(
            "inventory_hostname_short".into(),
            json!(h.name.split('.').next().unwrap_or(&h.name)),
        );
        magic.insert("groups".into(), ctx.groups.clone());
        magic.insert(
            "group_names".into(),
            json!(group_names(&ctx.groups, &h.name)),
        );
        magic.insert("hostvars".into(), ctx.hostvars.clone());
        magic.insert("playbook_dir".into(), json!(abs(&ctx.book.dir)));
        magic.insert("ansible_play_hosts_all".into(), json!(ctx.all_hosts));
        magic.insert("ansible_play_hosts".into(), json!(ctx.live_hosts));
        magic.insert("play_hosts".into(), json!(ctx.hosts));
        magic.insert("ansible_play_batch".into(), json!(ctx.hosts));
        magic.insert("ansible_play_name".into(), json!(play.name));
        magic.insert(
            "ansible_check_mode".into(),
            json!(src.check_mode.unwrap_or(self.cfg.check)),
        );
        let mut search_path = Vec::new();
        if let Some(r) = src.role {
            magic.insert("role_path".into(), json!(abs(&r.path)));
            magic.insert("role_name".into(), json!(r.name));
            search_path.push(abs(&r.path));
        }
        search_path.push(abs(&play.dir));
        magic.insert("ansible_search_path".into(), json!(search_path));
        magic.insert("ansible_diff_mode".into(), json!(self.cfg.diff));
        magic.insert("omit".into(), json!(actions::OMIT));
        // A task's own role comes on top of the play's roles at each role level.
        let shared = |vars: &Arc<Map<String, Value>>| Layer {
            vars: vars.clone(),
            templated: true,
        };
        let mut layers = vec![shared(&play.role_defaults)];
        if let Some(r) = src.role {
            layers.push(shared(&r.defaults));
        }
        layers.extend([
            Layer {
                vars: h.inv_vars.clone(),
                templated: true,
            },
            Layer::data(h.facts.clone()),
            Layer::templates(play.vars.clone()),
            Layer::templates(play.vars_from_files.clone()),
            Layer::templates(ctx.files_vars.clone()),
            shared(&play.role_vars),
        ]);
        if let Some(r) = src.role {
            layers.push(shared(&r.vars));
        }
        if let Some(v) = src.vars {
            layers.push(Layer::templates(v.clone()));
        }
        layers.push(Layer::templates(h.included_vars.clone()));
        layers.push(Layer::data(h.host_vars.clone()));
        if let Some(r) = src.role {
            layers.push(shared(&r.params));
        }
        layers.push(Layer::data(ctx.include_params.clone()));
        layers.push(Layer::templates(self.cfg.extra_vars.clone()));
        layers.push(Layer::data(magic));
        Scope::new(self.templar.clone(), layers)
    }

    fn effective_check(&self, task: Option<&Task>) -> bool {
        match task.and_then(|t| t.check_mode) {
            Some(c) => c,
            None => self.cfg.check,
        }
    }

    /// The connection spec for a host, from its (rendered) connection variables.
    fn conn_spec(
        &self,
        h: &HostState,
        ctx: &PlayCtx<'_>,
        task: Option<&Task>,
    ) -> Result<ConnSpec, String> {
        let scope = self.scope(ctx, task, h);
        let get = |k: &str| -> Result<Option<Value>, String> {
            let present = h.inv_vars.contains_key(k)
                || self.cfg.extra_vars.contains_key(k)
                || ctx.play.vars.contains_key(k);
            if !present {
                return Ok(None);
            }
            let v = scope.render(&json!(format!("{{{{ {k} }}}}")))?;
            Ok(Some(v))
        };
        let as_string = |v: Option<Value>| -> Option<String> {
            v.and_then(|v| match v {
                Value::String(s) => Some(s),
                Value::Null => None,
                other => Some(other.to_string()),
            })
        };
        let connection = as_string(get("ansible_connection")?)
            .or_else(|| ctx.play.connection.clone())
            .unwrap_or_else(|| "ssh".into());
        let become_ = task
            .and_then(|t| t.become_)
            .or(ctx.play.become_)
            .or(get("ansible_become")?.map(|v| {
                matches!(v, Value::Bool(true))
                    || v.as_str().is_some_and(|s| s == "true" || s == "yes")
            }))
            .unwrap_or(false);
        let become_user = if become_ {
            Some(
                task.and_then(|t| t.become_user.clone())
                    .or_else(|| ctx.play.become_user.clone())
                    .or(as_string(get("ansible_become_user")?))
                    .unwrap_or_else(|| "root".into()),
            )
        } else {
            None
        };
        let become_password = if become_user.is_some() {
            self.cfg
                .become_password
                .clone()
                .or(as_string(get("ansible_become_password")?))
                .or(as_string(get("ansible_become_pass")?))
        } else {
            None
        };
        let kind = match connection.as_str() {
            "local" => ConnKind::Local,
            "ssh" | "smart" | "paramiko" => ConnKind::Ssh {
                address: as_string(get("ansible_host")?)
                    .or(as_string(get("ansible_ssh_host")?))
                    .unwrap_or_else(|| h.name.clone()),
                port: match get("ansible_port")?.or(get("ansible_ssh_port")?) {
                    Some(Value::Number(n)) => n.as_u64().map(|p| p as u16),
                    Some(Value::String(s)) => Some(
                        s.parse::<u16>()
                            .map_err(|_| format!("ansible_port `{s}` is not a port number"))?,
                    ),
                    _ => None,
                },
                user: as_string(get("ansible_user")?)
                    .or(as_string(get("ansible_ssh_user")?))
                    .or_else(|| ctx.play.remote_user.clone()),
                key_file: as_string(get("ansible_ssh_private_key_file")?).map(PathBuf::from),
                ssh_config: self.cfg.ssh_config.clone(),
                accept_new_host_keys: self.cfg.accept_new_host_keys,
            },
            other => {
                return Err(format!(
                    "ansible_connection `{other}` is not supported (use ssh or local)"
                ))
            }
        };
        // Root becoming root locally needs no sudo.
        let become_user = match (&kind, become_user) {
            (ConnKind::Local, Some(u)) if u == "root" && nix::unistd::geteuid().is_root() => None,
            (_, u) => u,
        };
        Ok(ConnSpec {
            host: h.name.clone(),
            kind,
            become_user,
            become_password,
            agent_path: as_string(get("fixpoint_agent_path")?).map(PathBuf::from),
            state_dir: as_string(get("fixpoint_state_dir")?),
            connect_timeout: self.cfg.connect_timeout,
        })
    }

    /// The connection a task runs through: the host's own, or with `delegate_to` the
    /// delegated host's (its connection variables; the task keeps the original host's vars).
    fn task_conn_spec(
        &self,
        h: &HostState,
        ctx: &PlayCtx<'_>,
        task: &Task,
        scope: &Arc<Scope>,
    ) -> Result<ConnSpec, String> {
        let Some(raw) = &task.delegate_to else {
            return self.conn_spec(h, ctx, Some(task));
        };
        let target = display(
            &scope
                .render(&json!(raw))
                .map_err(|e| format!("cannot render `delegate_to`: {e}"))?,
        );
        if target == h.name {
            return self.conn_spec(h, ctx, Some(task));
        }
        let inv_vars = self.inventory.host_vars(&target);
        if inv_vars.is_empty() {
            return Err(format!(
                "`delegate_to: {target}`: no such host in the inventory"
            ));
        }
        let delegated = HostState::new(&target, Arc::new(inv_vars));
        self.conn_spec(&delegated, ctx, Some(task))
    }

    /// The agent to ship, hashed once per run on a blocking thread.
    async fn agent_binary(&self, spec: &ConnSpec) -> Result<Arc<AgentBinary>, TransportError> {
        let load = |path: PathBuf| async move {
            tokio::task::spawn_blocking(move || AgentBinary::load(path).map(Arc::new))
                .await
                .map_err(|e| TransportError::Connect(format!("hashing the agent failed: {e}")))?
        };
        if let Some(p) = &spec.agent_path {
            return load(p.clone()).await;
        }
        self.binary
            .get_or_init(|| async {
                let exe = std::env::current_exe().map_err(|e| e.to_string())?;
                load(exe).await.map_err(|e| e.to_string())
            })
            .await
            .clone()
            .map_err(TransportError::Connect)
    }

    /// The host's agent for this spec's become user, started on first use. A new agent opens
    /// the host's state directory and takes the run lock before it does anything else.
    /// Errors say whether the host is unreachable (true) or failed (false).
    async fn conn<'h>(
        &self,
        h: &'h mut HostState,
        spec: &ConnSpec,
        ctx: &PlayCtx<'_>,
    ) -> Result<&'h mut AgentConn, (bool, String)> {
        let key = conn_key(h, spec);
        if !h.conns.contains_key(&key) {
            let mut conn = transport::connect(spec, self.agent_binary(spec))
                .await
                .map_err(|e| {
                    let msg = match &spec.become_user {
                        Some(u) => format!("{e} (while starting the agent as `{u}` through sudo)"),
                        None => e.to_string(),
                    };
                    (true, msg)
                })?;
            let begin = Request::Begin {
                run_id: self.run_id.to_string(),
                playbook: playbook_scope(ctx.book),
                state_dir: spec.state_dir.clone(),
                lock_timeout_secs: self.cfg.lock_timeout,
                retention_days: journal_retention(ctx.play),
            };
            let timeout =
                Some(self.cfg.connect_timeout + Duration::from_secs(self.cfg.lock_timeout));
            match conn.call(&begin, timeout).await {
                Ok(Response::Begun { pending, .. }) => {
                    // A delegated host's pending handlers belong to that host, not this one.
                    let pending = if key.0.is_some() { Vec::new() } else { pending };
                    for p in pending {
                        if !h.pending.contains(&p) {
                            h.pending.push(p);
                        }
                    }
                }
                Ok(Response::Failed { msg, .. }) => {
                    conn.close().await;
                    return Err((false, msg));
                }
                Ok(other) => return Err((false, format!("unexpected answer to begin: {other:?}"))),
                Err(e) => return Err((true, e.to_string())),
            }
            h.conns.insert(key.clone(), conn);
        }
        Ok(h.conns.get_mut(&key).expect("just inserted"))
    }

    async fn run_task_on_host(
        &self,
        ctx: &PlayCtx<'_>,
        task: &Task,
        h: &mut HostState,
    ) -> Vec<Event> {
        let scope = self.scope(ctx, Some(task), h);
        let fail = |msg: String| Event {
            status: Status::Failed,
            item: None,
            diff: Diff::default(),
            msg: Some(format!(
                "{msg} (task \"{}\" at {})",
                task.display_name(),
                task.pos
            )),
            result: Map::new(),
            ignored: task.ignore_errors || ctx.play.ignore_errors,
            note: None,
            delegated_to: None,
        };
        let Some(items_raw) = &task.loop_items else {
            match self.when_holds(task, &scope) {
                Ok(true) => {}
                Ok(false) => {
                    self.register_skip(task, h);
                    return vec![skip_event(None)];
                }
                Err(e) => return vec![fail(e)],
            }
            return vec![self.run_until(ctx, task, h, &scope, None).await];
        };
        let items = match scope.render(items_raw).and_then(|v| {
            crate::playbook::loops::expand(task.loop_kind, v, &task.search_dirs(&ctx.play.dir))
        }) {
            Ok(items) => items,
            Err(e) => return vec![fail(format!("cannot expand the loop: {e}"))],
        };
        let mut events = Vec::new();
        let mut results = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let mut layer = Map::new();
            layer.insert(task.loop_var.clone(), item.clone());
            if let Some(iv) = &task.index_var {
                layer.insert(iv.clone(), json!(i));
            }
            layer.insert("ansible_loop_var".into(), json!(task.loop_var));
            if task.loop_extended {
                layer.insert("ansible_loop".into(), extended_loop(&items, i));
            }
            let item_scope = scope.with(Layer::data(layer));
            let label = match &task.loop_label {
                Some(l) => item_scope
                    .render(&json!(l))
                    .map(|v| display(&v))
                    .unwrap_or_else(|_| display(item)),
                None => display(item),
            };
            match self.when_holds(task, &item_scope) {
                Ok(true) => {}
                Ok(false) => {
                    events.push(skip_event(Some(label)));
                    results.push(json!({"changed": false, "skipped": true, "item": item, task.loop_var.clone(): item}));
                    continue;
                }
                Err(e) => {
                    let mut ev = fail(e);
                    ev.item = Some(label);
                    events.push(ev);
                    break;
                }
            }
            let mut ev = self.run_until(ctx, task, h, &item_scope, Some(label)).await;
            let mut res = ev.result.clone();
            res.insert("item".into(), item.clone());
            res.insert(task.loop_var.clone(), item.clone());
            results.push(Value::Object(res));
            let stop =
                ev.status == Status::Failed && !ev.ignored || ev.status == Status::Unreachable;
            if ev.status == Status::Failed {
                ev.result.insert("item".into(), item.clone());
            }
            events.push(ev);
            if stop {
                break;
            }
            if task.loop_pause > 0.0 && i + 1 < items.len() {
                // `loop_control.pause`: the playbook asked for time between items.
                tokio::time::sleep(Duration::from_secs_f64(task.loop_pause)).await;
            }
        }
        if let Some(reg) = &task.register {
            let changed = events.iter().any(|e| e.status == Status::Changed);
            let failed = events.iter().any(|e| e.status == Status::Failed);
            let mut r = Map::new();
            r.insert("changed".into(), json!(changed));
            r.insert("failed".into(), json!(failed));
            r.insert("msg".into(), json!("All items completed"));
            r.insert("results".into(), Value::Array(results));
            if events.iter().all(|e| e.status == Status::Skipped) {
                r.insert("skipped".into(), json!(true));
            }
            h.host_vars.insert(reg.clone(), Value::Object(r));
        }
        if events.is_empty() {
            events.push(skip_event(None));
        }
        events
    }

    /// Run one task (or loop item) and finish it; with `until`, run it again (after `delay`
    /// seconds) until the conditions hold, at most `retries` more times.
    async fn run_until(
        &self,
        ctx: &PlayCtx<'_>,
        task: &Task,
        h: &mut HostState,
        scope: &Arc<Scope>,
        item: Option<String>,
    ) -> Event {
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let r = self.run_item(ctx, task, h, scope).await;
            let wrote = outbox_writer(&r);
            let mut ev = self.finish_item(task, h, scope, r, item.clone());
            self.settle_outbox(ctx, task, h, wrote, ev.status).await;
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
                h.host_vars
                    .insert(reg.clone(), Value::Object(ev.result.clone()));
            }
            match all_hold(&scope.with(Layer::data(layer)), until) {
                Ok(true) => return ev,
                Ok(false) if attempt <= task.retries => {
                    tokio::time::sleep(Duration::from_secs(task.delay)).await;
                }
                Ok(false) => {
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

    /// The agent recorded pending handlers before a change; when the task did not end up
    /// `changed` (e.g. `changed_when`), nothing notifies them, so the entries are withdrawn.
    async fn settle_outbox(
        &self,
        ctx: &PlayCtx<'_>,
        task: &Task,
        h: &mut HostState,
        wrote: Option<ConnKey>,
        status: Status,
    ) {
        let Some(agent) = wrote else { return };
        if status == Status::Changed {
            return;
        }
        if let Some(conn) = h.conns.get_mut(&agent) {
            for handler in handler_names(&ctx.handlers, &task.notify) {
                let req = Request::HandlerDone {
                    playbook: playbook_scope(ctx.book),
                    play: ctx.play.name.clone(),
                    handler,
                };
                let _ = conn.call(&req, Some(self.cfg.connect_timeout)).await;
            }
        }
    }

    fn when_holds(&self, task: &Task, scope: &Arc<Scope>) -> Result<bool, String> {
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

    fn register_skip(&self, task: &Task, h: &mut HostState) {
        if let Some(reg) = &task.register {
            h.host_vars.insert(
                reg.clone(),
                json!({"changed": false, "skipped": true, "skip_reason": "Conditional result was False"}),
            );
        }
    }

    /// Render, prepare and execute one task (or one loop item) on the host.
    async fn run_item(
        &self,
        ctx: &PlayCtx<'_>,
        task: &Task,
        h: &mut HostState,
        scope: &Arc<Scope>,
    ) -> Result<ItemResult, (bool, String)> {
        // Bare expressions (assert's `that`, debug's `var`) are evaluated by the action, not rendered.
        let raw_keys = actions::raw_param_keys(task.module);
        let mut params = task.params.clone();
        let mut raw = Map::new();
        if let Value::Object(m) = &mut params {
            for k in raw_keys {
                if let Some(v) = m.remove(*k) {
                    raw.insert(k.to_string(), v);
                }
            }
        }
        let mut params = scope
            .render(&params)
            .map_err(|e| (false, format!("cannot render the parameters: {e}")))?;
        if let Value::Object(m) = &mut params {
            m.extend(raw);
        }
        // `debug` with `verbosity: N` shows only from N `-v` on; below that it is skipped, as in Ansible.
        if task.module == "debug" {
            let wanted = params.get("verbosity").and_then(Value::as_u64).unwrap_or(0);
            if wanted > u64::from(self.cfg.verbosity) {
                let mut skipped = ItemResult::ok(Map::new());
                skipped.status = Status::Skipped;
                return Ok(skipped);
            }
        }
        let mut environment = ctx.play.environment.clone();
        environment.extend(task.environment.clone());
        let environment = match scope.render(&Value::Object(environment)) {
            Ok(Value::Object(m)) => m,
            Ok(_) => Map::new(),
            Err(e) => return Err((false, format!("cannot render `environment`: {e}"))),
        };
        match task.module {
            "include_vars" => return Ok(include_vars(ctx, task, h, &params)),
            "setup" => {
                let timeout = match params.get("gather_timeout") {
                    Some(Value::Number(n)) => n.as_u64().map(Duration::from_secs),
                    Some(Value::String(t)) => t.trim().parse().ok().map(Duration::from_secs),
                    _ => None,
                };
                let spec = self.conn_spec(h, ctx, Some(task)).map_err(|e| (false, e))?;
                let conn = self.conn(h, &spec, ctx).await?;
                return match conn
                    .call(
                        &Request::Facts,
                        Some(timeout.unwrap_or(self.cfg.connect_timeout)),
                    )
                    .await
                {
                    Ok(Response::Facts { facts }) => {
                        h.facts = facts_vars(facts.clone());
                        h.gathered = true;
                        let mut result = Map::new();
                        result.insert("ansible_facts".into(), Value::Object(facts));
                        Ok(ItemResult::ok(result))
                    }
                    Ok(other) => Err((false, format!("unexpected answer to facts: {other:?}"))),
                    Err(e) => Err((true, e.to_string())),
                };
            }
            _ => {}
        }
        let prepared = actions::prepare(
            task.module,
            params,
            &task.search_dirs(&ctx.play.dir),
            self.templar,
            &scope.ctx(),
            &environment,
        )
        .map_err(|f| (false, f.msg))?;
        let (module, params) = match prepared {
            Prepared::Done(Ok(outcome)) => {
                return Ok(ItemResult {
                    status: if outcome.changed {
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
                })
            }
            Prepared::Done(Err(f)) => {
                return Ok(ItemResult {
                    status: Status::Failed,
                    outcome: Outcome {
                        result: f.result,
                        ..Outcome::default()
                    },
                    msg: Some(f.msg),
                    ignored: false,
                    note: None,
                    outbox_written: None,
                    delegated_to: None,
                })
            }
            Prepared::Agent { module, params } => (module, params),
        };
        // Templated parameters are checked now that they have values.
        if let Err(e) = fixpoint_modules::check_params(module, &params) {
            return Err((
                false,
                format!("invalid parameters for `{}`: {e}", task.module),
            ));
        }
        // A command declared read-only (`changed_when: false`) also runs in check mode.
        let check = self.effective_check(Some(task)) && !task.is_read_only();
        let diff = self.cfg.diff || self.cfg.twice || task.diff.unwrap_or(false);
        let spec = self
            .task_conn_spec(h, ctx, task, scope)
            .map_err(|e| (false, e))?;
        let once = match &task.once {
            Some(raw) => {
                let key = scope
                    .render(&json!(raw))
                    .map_err(|e| (false, format!("cannot render `once`: {e}")))?;
                Some(OnceSpec {
                    key: display(&key),
                    playbook: playbook_scope(ctx.book),
                    request_sha256: crate::journal::request_hash(module, &params),
                    probe_guarded: ["creates", "removes", "unless", "onlyif"]
                        .iter()
                        .any(|k| params.get(*k).is_some_and(|v| !v.is_null())),
                    no_log: task.no_log,
                })
            }
            None => None,
        };
        let notify = (!task.notify.is_empty() && !check).then(|| NotifySpec {
            playbook: playbook_scope(ctx.book),
            play: ctx.play.name.clone(),
            task: task.display_name(),
            handlers: handler_names(&ctx.handlers, &task.notify),
        });
        let conn = self.conn(h, &spec, ctx).await?;
        let req = Request::Run {
            module: module.to_string(),
            params,
            check,
            diff,
            once,
            notify,
        };
        let timeout = task.timeout.map(Duration::from_secs);
        match conn.call(&req, timeout).await {
            Ok(Response::Done {
                outcome,
                note,
                outbox_written,
            }) => Ok(ItemResult {
                status: if outcome.changed {
                    Status::Changed
                } else {
                    Status::Ok
                },
                msg: outcome.msg.clone(),
                outcome,
                ignored: false,
                note,
                outbox_written: outbox_written.then_some(conn_key(h, &spec)),
                delegated_to: conn_key(h, &spec).0,
            }),
            Ok(Response::Failed { msg, result }) => Ok(ItemResult {
                status: Status::Failed,
                outcome: Outcome {
                    result,
                    ..Outcome::default()
                },
                msg: Some(msg),
                ignored: false,
                note: None,
                outbox_written: None,
                delegated_to: conn_key(h, &spec).0,
            }),
            Ok(other) => Err((
                false,
                format!("unexpected answer from the agent: {other:?}"),
            )),
            Err(e) => {
                // The channel is gone or out of step: drop it so nothing else uses it.
                h.conns.remove(&conn_key(h, &spec));
                Err((false, e.to_string()))
            }
        }
    }

    /// Apply register, changed_when, failed_when and ignore_errors; build the event.
    fn finish_item(
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
                if let Some(reg) = &task.register {
                    h.host_vars.insert(
                        reg.clone(),
                        json!({"failed": true, "changed": false, "msg": msg}),
                    );
                }
                return Event {
                    status,
                    item,
                    diff: Diff::default(),
                    msg: Some(msg),
                    result: Map::new(),
                    ignored: ignore && status == Status::Failed,
                    note: None,
                    delegated_to: None,
                };
            }
        };
        let mut result = r.outcome.result.clone();
        result.insert("changed".into(), json!(r.status == Status::Changed));
        result.insert("failed".into(), json!(r.status == Status::Failed));
        if let Some(m) = &r.msg {
            result.insert("msg".into(), json!(m));
        }
        if let Some(Value::Object(facts)) = result.get("ansible_facts") {
            if task.module == "set_fact" {
                for (k, v) in facts {
                    h.host_vars.insert(k.clone(), v.clone());
                }
            }
        }
        // changed_when / failed_when see the result under its registered name and as plain names.
        if task.changed_when.is_some() || task.failed_when.is_some() {
            let mut layer = result.clone();
            if let Some(reg) = &task.register {
                layer.insert(reg.clone(), Value::Object(result.clone()));
            }
            let s = scope.with(Layer::data(layer));
            if let Some(conds) = &task.failed_when {
                match all_hold(&s, conds) {
                    Ok(failed) => {
                        r.status = if failed {
                            Status::Failed
                        } else if r.outcome.changed {
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
                        }
                    }
                }
            }
            result.insert("changed".into(), json!(r.status == Status::Changed));
            result.insert("failed".into(), json!(r.status == Status::Failed));
        }
        if let Some(reg) = &task.register {
            if task.loop_items.is_none() {
                h.host_vars
                    .insert(reg.clone(), Value::Object(result.clone()));
            }
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
        Event {
            status: r.status,
            item,
            diff,
            msg,
            result,
            ignored: ignore && r.status == Status::Failed || r.ignored,
            note: r.note,
            delegated_to: r.delegated_to,
        }
    }
}

/// The agent a spec reaches, among the host's agents.
fn conn_key(h: &HostState, spec: &ConnSpec) -> ConnKey {
    let delegate = (spec.host != h.name).then(|| spec.host.clone());
    (delegate, spec.become_user.clone())
}

/// `ansible_loop` of `loop_control.extended` for item `i`.
fn extended_loop(items: &[Value], i: usize) -> Value {
    let len = items.len();
    let mut m = Map::new();
    m.insert("allitems".into(), Value::Array(items.to_vec()));
    m.insert("index".into(), json!(i + 1));
    m.insert("index0".into(), json!(i));
    m.insert("revindex".into(), json!(len - i));
    m.insert("revindex0".into(), json!(len - i - 1));
    m.insert("first".into(), json!(i == 0));
    m.insert("last".into(), json!(i + 1 == len));
    m.insert("length".into(), json!(len));
    if i > 0 {
        m.insert("previtem".into(), items[i - 1].clone());
    }
    if i + 1 < len {
        m.insert("nextitem".into(), items[i + 1].clone());
    }
    Value::Object(m)
}

/// Facts as variables: `ansible_<name>` and `ansible_facts`.
fn facts_vars(facts: Map<String, Value>) -> Map<String, Value> {
    let mut all = Map::new();
    for (k, v) in &facts {
        all.insert(format!("ansible_{k}"), v.clone());
    }
    all.insert("ansible_facts".into(), Value::Object(facts));
    all
}

/// `include_vars`: variables loaded on the controller go to the host's include_vars layer.
/// Relative names are found in the role's `vars/`, then beside the playbook.
fn include_vars(ctx: &PlayCtx<'_>, task: &Task, h: &mut HostState, params: &Value) -> ItemResult {
    let mut search = Vec::new();
    if let Some(r) = &task.role {
        search.push(r.path.join("vars"));
        search.push(r.path.clone());
    }
    search.push(ctx.play.dir.clone());
    match actions::include_vars(params, &search, &task.pos) {
        Ok((vars, files)) => {
            h.included_vars.extend(vars.clone());
            let mut result = Map::new();
            result.insert("ansible_facts".into(), Value::Object(vars));
            result.insert(
                "ansible_included_var_files".into(),
                json!(files.iter().map(|f| abs(f)).collect::<Vec<_>>()),
            );
            ItemResult::ok(result)
        }
        Err(msg) => ItemResult {
            status: Status::Failed,
            outcome: Outcome::default(),
            msg: Some(msg),
            ignored: false,
            note: None,
            outbox_written: None,
            delegated_to: None,
        },
    }
}

impl ItemResult {
    fn ok(result: Map<String, Value>) -> ItemResult {
        ItemResult {
            status: Status::Ok,
            outcome: Outcome {
                result,
                ..Outcome::default()
            },
            msg: None,
            ignored: false,
            note: None,
            outbox_written: None,
            delegated_to: None,
        }
    }
}

/// Which agent wrote outbox entries for this result, if any.
fn outbox_writer(r: &Result<ItemResult, (bool, String)>) -> Option<ConnKey> {
    r.as_ref().ok().and_then(|i| i.outbox_written.clone())
}

/// The scope of journal keys and outbox entries: the playbook's file name, so a retry from
/// another checkout of the same playbook is recognised as the same logical operation.
fn playbook_scope(book: &Playbook) -> String {
    book.path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| book.path.display().to_string())
}

/// `journal_retention` (days) from the play's vars, default 90.
fn journal_retention(play: &Play) -> u64 {
    match play.vars.get("journal_retention") {
        Some(Value::Number(n)) => n.as_u64().unwrap_or(90),
        Some(Value::String(s)) => s.trim().parse().unwrap_or(90),
        _ => 90,
    }
}

/// The handlers (by name) that a task's `notify` reaches, directly or through `listen`.
fn handler_names(handlers: &[Task], notify: &[String]) -> Vec<String> {
    handlers
        .iter()
        .filter(|h| {
            notify
                .iter()
                .any(|n| h.name.as_deref() == Some(n.as_str()) || h.listen.contains(n))
        })
        .filter_map(|h| h.name.clone())
        .collect()
}

/// A play or task name as shown: rendered when it is a template and renders (names that
/// use host variables stay as written, since one name stands for every host).
fn shown_name(scope: &Arc<Scope>, raw: &str) -> String {
    if !Templar::is_template(raw) {
        return raw.to_string();
    }
    match scope.render(&json!(raw)) {
        Ok(v) => display(&v),
        Err(_) => raw.to_string(),
    }
}

fn all_hold(scope: &Arc<Scope>, conds: &[String]) -> Result<bool, String> {
    for c in conds {
        if !scope.eval_bool(c)? {
            return Ok(false);
        }
    }
    Ok(true)
}

fn skip_event(item: Option<String>) -> Event {
    Event {
        status: Status::Skipped,
        item,
        diff: Diff::default(),
        msg: None,
        result: Map::new(),
        ignored: false,
        note: None,
        delegated_to: None,
    }
}

fn display(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn abs(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}
