//! The scheduler: runs plays over hosts (linear strategy: each task on every host, then the next), drives the agents, and feeds the reporter.

use crate::actions::{self, Prepared};
use crate::config::Config;
use crate::inventory::Inventory;
use crate::journal::OutboxEntry;
use crate::loader::{Play, Playbook, Task};
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
    conns: HashMap<Option<String>, AgentConn>,
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
        self.failed = false;
        self.unreachable = false;
        self.notified.clear();
        self.pending.clear();
        self.stats = Stats::default();
        self.gathered = false;
    }

    fn active(&self) -> bool {
        !self.failed && !self.unreachable
    }
}

/// One result to report, produced by a host future and reported in host order.
struct Event {
    status: Status,
    item: Option<String>,
    diff: Diff,
    msg: Option<String>,
    result: Map<String, Value>,
    ignored: bool,
    note: Option<String>,
}

/// Things shared by every host future of a play.
struct PlayCtx<'a> {
    play: &'a Play,
    book: &'a Playbook,
    hosts: Vec<String>,
    groups: Value,
    /// `groups` and `hostvars`, shared by every host's scope (one copy per task, not per host).
    shared_vars: Arc<Map<String, Value>>,
    /// Variables from `vars_files` whose paths are templated (rendered once per play).
    files_vars: Map<String, Value>,
    /// Play vars and `-e`: what play and task names are rendered with, as in Ansible.
    name_scope: Arc<Scope>,
}

pub struct Engine {
    /// Everything host futures read; kept apart from `hosts` so both can be borrowed at once.
    shared: Shared,
    inventory: Inventory,
    reporter: Reporter,
    hosts: BTreeMap<String, HostState>,
    /// Changed results of the current pass: (host, task, location, diff), for `--twice`.
    changed_log: Vec<(String, String, String, Diff)>,
}

impl Engine {
    pub fn new(cfg: Config, inventory: Inventory, templar: Templar) -> Engine {
        let reporter = Reporter::new(cfg.json, cfg.verbosity, cfg.diff || cfg.twice);
        Engine {
            shared: Shared {
                cfg,
                run_id: new_run_id(),
                templar: Arc::new(templar),
                binary: OnceLock::new(),
            },
            inventory,
            reporter,
            hosts: BTreeMap::new(),
            changed_log: Vec::new(),
        }
    }

    /// Run all playbooks (twice under `--twice`) and say how it went.
    pub async fn run(&mut self, books: &[Playbook]) -> RunOutcome {
        let passes = if self.shared.cfg.twice { 2 } else { 1 };
        let mut outcome = RunOutcome::Success;
        for pass in 1..=passes {
            for h in self.hosts.values_mut() {
                h.reset_for_pass();
            }
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
            self.reporter.recap(&stats, pass, self.shared.cfg.twice);
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
        for (_, mut h) in std::mem::take(&mut self.hosts) {
            for (_, c) in h.conns.drain() {
                c.close().await;
            }
        }
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
        };
        let ctx = PlayCtx {
            play: &play,
            book: &book,
            hosts: hosts.clone(),
            groups: serde_json::to_value(self.inventory.groups_map()).unwrap_or_default(),
            shared_vars: Arc::new(Map::new()),
            files_vars: Map::new(),
            name_scope: self.play_scope(&play),
        };
        let mut ok = true;
        for host in &hosts {
            self.host_state(host);
            let shared = &self.shared;
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
        for (_, mut h) in std::mem::take(&mut self.hosts) {
            for (_, c) in h.conns.drain() {
                c.close().await;
            }
        }
        ok
    }

    fn host_state(&mut self, name: &str) -> &mut HostState {
        if !self.hosts.contains_key(name) {
            let inv_vars = Arc::new(self.inventory.host_vars(name));
            self.hosts.insert(
                name.to_string(),
                HostState {
                    name: name.to_string(),
                    inv_vars,
                    facts: Map::new(),
                    host_vars: Map::new(),
                    conns: HashMap::new(),
                    failed: false,
                    unreachable: false,
                    notified: Vec::new(),
                    pending: Vec::new(),
                    stats: Stats::default(),
                    gathered: false,
                },
            );
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
        if let Some(limit) = &self.shared.cfg.limit {
            match self.inventory.select(limit) {
                Ok(allowed) => selected.retain(|h| allowed.contains(h)),
                Err(e) => {
                    self.reporter.warn(&format!("bad --limit pattern: {e}"));
                    return;
                }
            }
        }
        let name_scope = self.play_scope(play);
        self.reporter
            .play_start(&shown_name(&name_scope, &play.name), pass);
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
        let files_vars = match self.templated_vars_files(book, play) {
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
        let ctx = PlayCtx {
            play,
            book,
            hosts: selected.clone(),
            groups: serde_json::to_value(self.inventory.groups_map()).unwrap_or_default(),
            shared_vars: Arc::new(Map::new()),
            files_vars,
            name_scope,
        };
        if play.gather_facts {
            self.gather_facts(&ctx).await;
        }
        let sections: [&[Task]; 3] = [&play.pre_tasks, &play.tasks, &play.post_tasks];
        for section in sections {
            for task in section {
                if !self.tag_selected(task) {
                    continue;
                }
                let targets: Vec<String> = ctx
                    .hosts
                    .iter()
                    .filter(|h| self.hosts[*h].active())
                    .cloned()
                    .collect();
                if targets.is_empty() {
                    break;
                }
                self.run_task(&ctx, task, &targets, false).await;
            }
            self.flush_handlers(&ctx).await;
        }
    }

    /// The variables known before any host is involved: play vars, plain `vars_files`, `-e`.
    fn play_scope(&self, play: &Play) -> Arc<Scope> {
        Scope::new(
            self.shared.templar.clone(),
            vec![
                Layer::templates(play.vars.clone()),
                Layer::templates(play.vars_from_files.clone()),
                Layer::templates(self.shared.cfg.extra_vars.clone()),
            ],
        )
    }

    /// Load the `vars_files` whose paths are templates, rendered with play vars and `-e`.
    fn templated_vars_files(
        &self,
        book: &Playbook,
        play: &Play,
    ) -> Result<Map<String, Value>, String> {
        let mut out = Map::new();
        if play.vars_files.is_empty() {
            return Ok(out);
        }
        let scope = self.play_scope(play);
        for (path, pos) in &play.vars_files {
            let rendered = scope
                .render(&json!(path))
                .map_err(|e| format!("cannot render vars_files entry `{path}` ({pos}): {e}"))?;
            let file = book.dir.join(display(&rendered));
            let vars = crate::loader::load_vars_file(&file, pos).map_err(|d| d.msg)?;
            out.extend(vars);
        }
        Ok(out)
    }

    fn tag_selected(&self, task: &Task) -> bool {
        let has = |t: &str| task.tags.iter().any(|x| x == t);
        if !self.shared.cfg.skip_tags.is_empty()
            && task
                .tags
                .iter()
                .any(|t| self.shared.cfg.skip_tags.contains(t))
        {
            return false;
        }
        if has("never") && !task.tags.iter().any(|t| self.shared.cfg.tags.contains(t)) {
            return false;
        }
        if self.shared.cfg.tags.is_empty() || self.shared.cfg.tags.iter().any(|t| t == "all") {
            return true;
        }
        has("always") || task.tags.iter().any(|t| self.shared.cfg.tags.contains(t))
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
        let shared = &self.shared;
        let sem = tokio::sync::Semaphore::new(self.shared.cfg.forks);
        let futures = self
            .hosts
            .values_mut()
            .filter(|h| targets.contains(&h.name))
            .map(|h| {
                let sem = &sem;

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
                            let mut all = Map::new();
                            for (k, v) in &facts {
                                all.insert(format!("ansible_{k}"), v.clone());
                            }
                            all.insert("ansible_facts".into(), Value::Object(facts));
                            h.facts = all;
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
        for handler in &ctx.play.handlers {
            let name = handler.name.clone().unwrap_or_default();
            let force = self.shared.cfg.force_handlers || ctx.play.force_handlers;
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
                    if let Err(e) = conn.call(&req, Some(self.shared.cfg.connect_timeout)).await {
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
        let name = shown_name(&ctx.name_scope, &task.display_name());
        self.reporter.task_start(&name, handler);
        let shared = &self.shared;
        let sem = tokio::sync::Semaphore::new(self.shared.cfg.forks);
        let mut shared_vars = Map::new();
        shared_vars.insert("groups".into(), ctx.groups.clone());
        shared_vars.insert("hostvars".into(), hostvars_snapshot(&self.hosts));
        let ctx = PlayCtx {
            play: ctx.play,
            book: ctx.book,
            hosts: ctx.hosts.clone(),
            groups: ctx.groups.clone(),
            shared_vars: Arc::new(shared_vars),
            files_vars: ctx.files_vars.clone(),
            name_scope: ctx.name_scope.clone(),
        };
        let ctx = &ctx;
        let futures = self
            .hosts
            .values_mut()
            .filter(|h| targets.contains(&h.name))
            .map(|h| {
                let sem = &sem;

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
                    self.changed_log.push((
                        host.clone(),
                        name.clone(),
                        location.clone(),
                        ev.diff.clone(),
                    ));
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
                        .play
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

/// `hostvars`: each host's inventory variables, facts and set facts, as data.
fn hostvars_snapshot(hosts: &BTreeMap<String, HostState>) -> Value {
    let mut all = Map::new();
    for (name, h) in hosts {
        let mut m = (*h.inv_vars).clone();
        m.extend(h.facts.clone());
        m.extend(h.host_vars.clone());
        m.insert("inventory_hostname".into(), json!(name));
        all.insert(name.clone(), Value::Object(m));
    }
    Value::Object(all)
}

/// The read-only parts of the engine that host futures need.
struct Shared {
    cfg: Config,
    /// This run's id, recorded with the host lock and journal records.
    run_id: String,
    templar: Arc<Templar>,
    binary: OnceLock<Result<Arc<AgentBinary>, String>>,
}

/// One item's outcome before reporting.
struct ItemResult {
    status: Status,
    outcome: Outcome,
    msg: Option<String>,
    note: Option<String>,
    /// The agent (by become user) that wrote outbox entries for this change, if any.
    outbox_written: Option<Option<String>>,
}

impl Shared {
    /// The variable scope for a task on a host, in Ansible's precedence order (later wins).
    fn scope(&self, ctx: &PlayCtx<'_>, task: Option<&Task>, h: &HostState) -> Arc<Scope> {
        let play = ctx.play;
        let mut magic = Map::new();
        magic.insert("inventory_hostname".into(), json!(h.name));
        magic.insert(
            "inventory_hostname_short".into(),
            json!(h.name.split('.').next().unwrap_or(&h.name)),
        );
        magic.insert(
            "group_names".into(),
            json!(group_names(&ctx.groups, &h.name)),
        );
        magic.insert("playbook_dir".into(), json!(abs(&ctx.book.dir)));
        magic.insert("ansible_play_hosts".into(), json!(ctx.hosts));
        magic.insert("ansible_play_hosts_all".into(), json!(ctx.hosts));
        magic.insert("play_hosts".into(), json!(ctx.hosts));
        magic.insert("ansible_play_name".into(), json!(play.name));
        magic.insert(
            "ansible_check_mode".into(),
            json!(self.effective_check(task)),
        );
        magic.insert("ansible_diff_mode".into(), json!(self.cfg.diff));
        magic.insert("omit".into(), json!(actions::OMIT));
        let mut layers = vec![
            Layer {
                vars: h.inv_vars.clone(),
                templated: true,
            },
            Layer::data(h.facts.clone()),
            Layer::templates(play.vars.clone()),
            Layer::templates(play.vars_from_files.clone()),
            Layer::templates(ctx.files_vars.clone()),
        ];
        if let Some(t) = task {
            layers.push(Layer::templates(t.vars.clone()));
        }
        layers.push(Layer::data(h.host_vars.clone()));
        layers.push(Layer::templates(self.cfg.extra_vars.clone()));
        layers.push(Layer {
            vars: ctx.shared_vars.clone(),
            templated: false,
        });
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

    fn agent_binary(&self, spec: &ConnSpec) -> Result<Arc<AgentBinary>, TransportError> {
        if let Some(p) = &spec.agent_path {
            return AgentBinary::load(p.clone()).map(Arc::new);
        }
        self.binary
            .get_or_init(|| {
                let exe = std::env::current_exe().map_err(|e| e.to_string())?;
                AgentBinary::load(exe)
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            })
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
        let key = spec.become_user.clone();
        if !h.conns.contains_key(&key) {
            let mut conn = transport::connect(spec, || self.agent_binary(spec))
                .await
                .map_err(|e| {
                    let msg = match &spec.become_user {
                        Some(u) => format!("{e} (while starting the agent as `{u}` through sudo)"),
                        None => e.to_string(),
                    };
                    (true, msg)
                })?;
            let begin = Request::Begin {
                run_id: self.run_id.clone(),
                playbook: playbook_scope(ctx.book),
                state_dir: spec.state_dir.clone(),
                lock_timeout_secs: self.cfg.lock_timeout,
                retention_days: journal_retention(ctx.play),
            };
            let timeout =
                Some(self.cfg.connect_timeout + Duration::from_secs(self.cfg.lock_timeout));
            match conn.call(&begin, timeout).await {
                Ok(Response::Begun { pending, .. }) => {
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
            let r = self.run_item(ctx, task, h, &scope).await;
            let wrote = outbox_writer(&r);
            let ev = self.finish_item(task, h, &scope, r, None);
            self.settle_outbox(ctx, task, h, wrote, ev.status).await;
            return vec![ev];
        };
        let items = match scope.render(items_raw) {
            Ok(Value::Array(items)) => items,
            Ok(Value::Null) => Vec::new(),
            Ok(other) => {
                return vec![fail(format!(
                    "`loop` must be a list, but it rendered to {}",
                    short(&other)
                ))]
            }
            Err(e) => return vec![fail(format!("cannot render `loop`: {e}"))],
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
            let r = self.run_item(ctx, task, h, &item_scope).await;
            let wrote = outbox_writer(&r);
            let mut ev = self.finish_item(task, h, &item_scope, r, Some(label));
            self.settle_outbox(ctx, task, h, wrote, ev.status).await;
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

    /// The agent recorded pending handlers before a change; when the task did not end up
    /// `changed` (e.g. `changed_when`), nothing notifies them, so the entries are withdrawn.
    async fn settle_outbox(
        &self,
        ctx: &PlayCtx<'_>,
        task: &Task,
        h: &mut HostState,
        wrote: Option<Option<String>>,
        status: Status,
    ) {
        let Some(agent) = wrote else { return };
        if status == Status::Changed {
            return;
        }
        if let Some(conn) = h.conns.get_mut(&agent) {
            for handler in handler_names(ctx.play, &task.notify) {
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
        let mut environment = ctx.play.environment.clone();
        environment.extend(task.environment.clone());
        let environment = match scope.render(&Value::Object(environment)) {
            Ok(Value::Object(m)) => m,
            Ok(_) => Map::new(),
            Err(e) => return Err((false, format!("cannot render `environment`: {e}"))),
        };
        let prepared = actions::prepare(
            task.module,
            params,
            &ctx.book.dir,
            &self.templar,
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
                    note: None,
                    outbox_written: None,
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
                    note: None,
                    outbox_written: None,
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
        let spec = self.conn_spec(h, ctx, Some(task)).map_err(|e| (false, e))?;
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
                })
            }
            None => None,
        };
        let notify = (!task.notify.is_empty() && !check).then(|| NotifySpec {
            playbook: playbook_scope(ctx.book),
            play: ctx.play.name.clone(),
            task: task.display_name(),
            handlers: handler_names(ctx.play, &task.notify),
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
                note,
                outbox_written: outbox_written.then_some(spec.become_user.clone()),
            }),
            Ok(Response::Failed { msg, result }) => Ok(ItemResult {
                status: Status::Failed,
                outcome: Outcome {
                    result,
                    ..Outcome::default()
                },
                msg: Some(msg),
                note: None,
                outbox_written: None,
            }),
            Ok(other) => Err((
                false,
                format!("unexpected answer from the agent: {other:?}"),
            )),
            Err(e) => {
                // The channel is gone or out of step: drop it so nothing else uses it.
                h.conns.remove(&spec.become_user);
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
            ignored: ignore && r.status == Status::Failed,
            note: r.note,
        }
    }
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

/// Which agent wrote outbox entries for this result, if any.
fn outbox_writer(r: &Result<ItemResult, (bool, String)>) -> Option<Option<String>> {
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
fn handler_names(play: &Play, notify: &[String]) -> Vec<String> {
    play.handlers
        .iter()
        .filter(|h| {
            notify
                .iter()
                .any(|n| h.name.as_deref() == Some(n.as_str()) || h.listen.contains(n))
        })
        .filter_map(|h| h.name.clone())
        .collect()
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
    }
}

fn display(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 80 {
        format!("{}…", &s[..80])
    } else {
        s
    }
}

fn abs(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}
