//! engine/: runs the plays of a playbook over the inventory's hosts.
//!
//! It owns the run: which hosts a play selects and in what batches, the strategies (linear,
//! free), blocks, run-time includes, handlers, `meta:`, one task on one host (loop, when, until,
//! register), the post-processing of its result, and each host's state between tasks.
//! It must NOT know how a playbook is parsed (it gets the AST, and asks the loader for the files
//! included at run time), how a variable is resolved (vars/), how an agent is started or
//! reached (connection/), nor how results look (report/).
//!
//! Entry points: `Engine::run` (apply/check) and `Engine::journal` (`fixpoint journal`).

use crate::config::Config;
use crate::connection::AgentBinary;
use crate::inventory::Inventory;
use crate::playbook::{Playbook, Task};
use crate::report::{Progress, Reporter};
use crate::template::Templar;
use crate::vars::{hostvars, precedence, Scope, VarSrc};
use fixpoint_modules::params::is_template;
use fixpoint_modules::Diff;
use serde_json::Value;
use state::{HostState, PlayCtx};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A free play's task bounds shared by its lanes: by task location and bound.
type FreeThrottles = Arc<std::sync::Mutex<HashMap<(String, usize), Arc<tokio::sync::Semaphore>>>>;

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
            pending_inventory: &$engine.pending_inventory,
            progress: &$engine.progress,
        }
    };
}

mod actions;
mod block;
mod connect;
mod facts;
mod fanout;
mod free;
mod handlers;
mod includes;
mod interrupt;
mod item;
mod linear;
mod loop_items;
mod meta;
mod pipeline;
mod play;
pub(crate) mod python;
mod result;
mod run;
mod section;
mod start_at;
pub use start_at::check_start_at;
mod state;
mod task;

/// How a whole run ended, for the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    Success,
    Failed,
    /// An error in the playbook stopped the run where ansible-core stops it (exit 2, as
    /// ansible-core's error exit): `ANSIBLE_HOST_PATTERN_MISMATCH=error`.
    Stopped,
    NotConverged,
    /// Stopped by SIGINT (exit 130).
    Interrupted,
    /// `fixpoint drift` found files changed outside fixpoint (exit 3).
    Drifted,
}

pub struct Engine {
    cfg: Config,
    templar: Arc<Templar>,
    inventory: Arc<Inventory>,
    /// The inventory the run started with: each `--twice` pass starts from it again.
    original_inventory: Arc<Inventory>,
    /// The current task's `add_host`/`group_by` edits, installed by `commit_inventory`.
    pending_inventory: actions::inventory::Pending,
    /// The edits installed in this pass, in order (a free lane's are replayed on the play's).
    inventory_log: Vec<crate::inventory::InventoryEdit>,
    /// `meta: refresh_inventory` read the sources again in this pass.
    inventory_refreshed: bool,
    /// The running play's `ansible_play_hosts_all`: the hosts its pattern selected, then each
    /// host an `add_host` added (or changed), and the pattern's selection again after
    /// `meta: refresh_inventory`, as ansible-core keeps its strategy's host cache.
    play_hosts_all: Vec<String>,
    /// The `groups` variable after an edit of the current play (its `PlayCtx` has the older).
    inventory_groups: Option<crate::inventory::GroupHosts>,
    /// The play's objects with `inventory_groups`, and the objects they were made from: made
    /// once per edit, not per task, so `hostvars` entries (which compare the groups by
    /// address) are reused between edits (`objects_now`).
    grouped_objects: Option<(Arc<crate::vars::PlayObjects>, crate::vars::PlayObjects)>,
    reporter: Reporter,
    /// The live status lines (shared with the reporter, which prints above them).
    progress: Progress,
    /// Every host a play selected gets its state here before any step runs (`play.rs` calls
    /// `host_state` for each), and states are never removed (a free play's lane takes its host's
    /// and gives it back): the engine's `expect("host state")` on a host of the play hold.
    hosts: BTreeMap<String, HostState>,
    /// The embedded agent, shipped to hosts whose cache lacks it.
    binary: Arc<AgentBinary>,
    /// Changed results of the current pass: (host, task, location, diff), for `--twice`.
    changed_log: Vec<(String, String, String, Diff)>,
    /// This run's id, recorded with the host lock and journal records.
    run_id: String,
    /// `fixpoint drift`: after the playbooks, each host's agents compare the journal's other
    /// written-file records too (see `run::journal_drift`).
    drift: bool,
    /// `meta: end_play` was reached in the current play (or a failure limit).
    play_ended: bool,
    /// A failure limit was hit, or every host of a batch failed: as in ansible-core, no
    /// later play of the playbook runs.
    playbook_stopped: bool,
    /// An error stopped the whole run, as ansible-core's `AnsibleError` between plays does:
    /// no later playbook runs and the run fails.
    run_stopped: bool,
    /// The `throttle` of a free play's tasks, shared by its hosts' lanes (each runs the task
    /// for its own host).
    free_throttles: FreeThrottles,
    /// A handler's `include_tasks` is running, and whether it runs forced (`force_handlers`):
    /// its file is loaded as handlers, where a block inside a block is refused
    /// (`Engine::run_include`), and, forced, its tasks run on the failed hosts that reached it,
    /// as the handler itself does.
    handler_include: Option<bool>,
    /// The running play's variables known without a host, which its templated tags are
    /// rendered with.
    tag_scope: Option<Arc<Scope>>,
    /// What `include_role` with `public: true` made the running play's (`vars::PublicRoles`).
    public_roles: Arc<crate::vars::PublicRoles>,
    /// False until `--start-at-task`'s task is reached.
    started: bool,
    /// Blocks with a `rescue` being run: failures inside may still be rescued.
    rescue_depth: usize,
    /// Hosts of the current batch that had failed before it started.
    failed_before: Vec<String>,
    /// A task whose own `any_errors_fatal` (or its block's, its role's) is true just failed a
    /// host: the play ends at the next check (`linear::check_fail_limits`).
    fatal_now: bool,
    /// Hosts failed by a task whose own `any_errors_fatal` is false: the play's does not
    /// count their failure.
    fatal_excused: Vec<String>,
    /// `hostvars` entries kept between tasks (see `vars::hostvars`); `hostvars_changed` is the
    /// one place to call when the inventory changes during the run.
    hostvars: hostvars::Cache,
    /// In a `strategy: free` lane: the other hosts' `hostvars` as they were when it started.
    peer_hostvars: Option<Arc<hostvars::Table>>,
    /// The current play's handlers: its own and its roles', then those of roles loaded at run
    /// time.
    handlers: Arc<Vec<Task>>,
    /// SIGINTs received (see `interrupt`).
    interrupt: Arc<interrupt::Interrupt>,
}

impl Engine {
    pub fn new(cfg: Config, inventory: Inventory, templar: Templar) -> Engine {
        let inventory = Arc::new(inventory);
        let progress = Progress::new(Reporter::progress_wanted(cfg.json, cfg.no_progress));
        let mut reporter = Reporter::new(
            cfg.json,
            cfg.verbosity,
            cfg.diff || cfg.twice,
            progress.clone(),
        );
        reporter.set_shard(cfg.shard);
        let run_id = new_run_id();
        reporter.set_run_id(&run_id);
        Engine {
            cfg,
            templar: Arc::new(templar),
            original_inventory: inventory.clone(),
            inventory,
            pending_inventory: Default::default(),
            inventory_log: Vec::new(),
            inventory_refreshed: false,
            play_hosts_all: Vec::new(),
            inventory_groups: None,
            grouped_objects: None,
            reporter,
            progress,
            hosts: BTreeMap::new(),
            binary: Arc::new(AgentBinary::embedded()),
            changed_log: Vec::new(),
            run_id,
            drift: false,
            play_ended: false,
            playbook_stopped: false,
            run_stopped: false,
            free_throttles: Arc::default(),
            handler_include: None,
            tag_scope: None,
            public_roles: Arc::default(),
            started: true,
            rescue_depth: 0,
            failed_before: Vec::new(),
            fatal_now: false,
            fatal_excused: Vec::new(),
            hostvars: hostvars::Cache::default(),
            peer_hostvars: None,
            handlers: Arc::default(),
            interrupt: Arc::default(),
        }
    }

    /// Also write the run's JSON events (those `--format json` prints) to `sink`, whatever
    /// stdout shows: `fixpoint pull` keeps them as its result.
    pub fn tee_json(&mut self, sink: Box<dyn std::io::Write + Send>) {
        self.reporter.tee_json(sink);
    }

    fn host_state(&mut self, name: &str) -> &mut HostState {
        if !self.hosts.contains_key(name) {
            let inv_vars = Arc::new(self.inventory.host_vars(name));
            self.hosts
                .insert(name.to_string(), HostState::new(name, inv_vars));
        }
        // Inserted just above when missing.
        self.hosts.get_mut(name).expect("just inserted")
    }

    /// Whether `--tags`/`--skip-tags` select a step with these tags. Templated tags are
    /// rendered with the play's variables (`play::tag_scope`), as ansible-core does.
    fn tag_selected(&self, tags: &[String]) -> bool {
        match &self.tag_scope {
            Some(scope) if tags.iter().any(|t| is_template(t)) => {
                rendered_tags(scope, tags).is_ok_and(|t| self.cfg.tag_selected(&t))
            }
            _ => self.cfg.tag_selected(tags),
        }
    }
}

/// The read-only parts of the engine that host futures need.
struct Shared<'a> {
    cfg: &'a Config,
    inventory: &'a Inventory,
    run_id: &'a str,
    templar: &'a Arc<Templar>,
    binary: &'a Arc<AgentBinary>,
    pending_inventory: &'a actions::inventory::Pending,
    progress: &'a Progress,
}

impl Shared<'_> {
    /// The variable scope for a task on a host.
    fn scope(&self, ctx: &PlayCtx<'_>, task: Option<&Task>, h: &HostState) -> Arc<Scope> {
        self.scope_with(ctx, var_src(task), h)
    }

    /// The variable scope on a host (see `vars::precedence` for the order of its layers).
    fn scope_with(&self, ctx: &PlayCtx<'_>, src: VarSrc<'_>, h: &HostState) -> Arc<Scope> {
        precedence::host_scope(self.cfg, self.templar, &ctx.vars(), src, &h.vars())
    }

    fn effective_check(&self, task: Option<&Task>) -> bool {
        match task.and_then(|t| t.check_mode) {
            Some(c) => c,
            None => self.cfg.check,
        }
    }
}

/// Where a task's (or, without one, the play's) role and task variables come from.
fn var_src(task: Option<&Task>) -> VarSrc<'_> {
    match task {
        Some(t) => VarSrc {
            role: t.role.as_deref(),
            vars: Some(&t.vars),
            check_mode: t.check_mode,
            task_file: Some(t.pos.file.as_path()),
        },
        None => VarSrc::default(),
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
        fixpoint_agent::journal::now_unix()
    )
}

/// The playbook as the host records it for display (lock holder, `once:` records, outbox
/// entries): its file name. Nothing on the host is keyed by it: `once:` keys and pending
/// handlers name one operation per remote user, whichever playbook reaches them.
fn playbook_scope(book: &Playbook) -> String {
    book.path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| book.path.display().to_string())
}

/// A play or task name as shown: rendered when it is a template and renders. A task's name is
/// rendered, as in ansible-core, with the variables of the first host that runs it; when it
/// fails, the failing expressions are shown as ansible-core 2.19 marks them
/// (`Templar::render_name`), unless the name reads an undefined variable that `may_be_set`
/// (by a task before it in the same section, which has not run yet): then, as a play's name
/// that fails, it is shown as written.
fn shown_name(scope: &Arc<Scope>, raw: &str, may_be_set: &dyn Fn(&str) -> bool) -> String {
    if !Templar::is_template(raw) {
        return raw.to_string();
    }
    let templar = scope.templar();
    let ctx = scope.ctx();
    match templar.render_str(raw, &ctx) {
        Ok(v) => display(&v),
        Err(crate::template::TemplateError::Undefined { name, .. })
            if may_be_set(name.split(['.', '[']).next().unwrap_or_default()) =>
        {
            raw.to_string()
        }
        Err(_) => {
            // The variables it reads render in the name's mode too (`Scope::marking`).
            let markers = Arc::new(crate::template::Markers::default());
            let marking = scope.marking(markers.clone());
            templar
                .render_marked(raw, &marking.ctx(), &markers)
                .map_or_else(|| raw.to_string(), |(s, _)| s.trim().to_string())
        }
    }
}

/// Whether `task` may set variable `name` when it runs (`register`, `set_fact`; any name for
/// `include_vars`, whose file is read on the host's turn).
fn may_set(task: &Task, name: &str) -> bool {
    task.register.as_deref() == Some(name)
        || task.module == "include_vars"
        || task.module == "set_fact" && task.params.get(name).is_some()
}

/// Whether every condition holds (`when`, `until`, `changed_when`... are lists joined by `and`).
fn all_hold(scope: &Arc<Scope>, conds: &[String]) -> Result<bool, String> {
    for c in conds {
        if !scope.eval_bool(c)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Tags as rendered: a template may give one tag or a list of them, which join the others.
fn rendered_tags(scope: &Arc<Scope>, tags: &[String]) -> Result<Vec<String>, String> {
    let mut out = Vec::with_capacity(tags.len());
    for t in tags {
        if !is_template(t) {
            out.push(t.clone());
            continue;
        }
        match scope.render(&Value::String(t.clone()))? {
            Value::Array(list) => out.extend(list.iter().map(display)),
            one => out.push(display(&one)),
        }
    }
    Ok(out)
}

/// A rendered value as text: strings as they are, anything else as JSON.
fn display(v: &Value) -> String {
    if let Some(f) = crate::yaml::mark::float_of(v) {
        return crate::yaml::mark::python_str(f).into();
    }
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
