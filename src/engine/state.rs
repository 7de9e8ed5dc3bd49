//! What the engine keeps between tasks: each host's state for a pass, and the context every
//! host future of a play shares. Both lend borrowed views of themselves to vars/.

use crate::connection::pool::Conns;
use crate::connection::ConnSpec;
use crate::playbook::{Play, Playbook, Task};
use crate::report::Stats;
use crate::vars::precedence::MapsMemo;
use crate::vars::{HostVars, PlayObjects, PlayVars};
use fixpoint_agent::journal::OutboxEntry;
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// State of one host for one pass (connections survive passes: one connection per host per run).
pub(super) struct HostState {
    pub(super) name: String,
    pub(super) inv_vars: Arc<Map<String, Value>>,
    /// The variable maps are shared with scopes and `hostvars` entries: change them with
    /// `Arc::make_mut` (copy-on-write), which is how `hostvars` sees that they changed.
    pub(super) facts: Arc<Map<String, Value>>,
    /// `set_fact` and `register` results: data, never templated again.
    pub(super) host_vars: Arc<Map<String, Value>>,
    /// The trust some of `host_vars` kept when they were set (`Layer::vouched`), by name: set
    /// only with its variable (`set_vouched_var`), dropped whenever the variable is set again.
    pub(super) host_trust: Arc<Map<String, Value>>,
    /// Variables loaded by `include_vars` (below `set_fact`, as in Ansible).
    pub(super) included_vars: Arc<Map<String, Value>>,
    /// The last task that failed on this host, with its result, for a `rescue`.
    pub(super) last_failure: Option<(Value, Value)>,
    /// A loop whose item failed left its whole result here (`results`, "One or more items
    /// failed"): the task's result, which a `rescue` sees, rather than the last item's.
    pub(super) loop_failure: Option<Map<String, Value>>,
    /// `meta: end_host` ended the play for this host.
    pub(super) ended: bool,
    /// `meta: end_role` ended this role invocation for the host: its later steps pass the host
    /// by (`Engine::outside_ended_role`) until the host reaches a step of another invocation.
    pub(super) ended_role: Option<Arc<crate::playbook::RoleCtx>>,
    /// This play's roles (`RoleDedup::id`) of which a task ran here.
    pub(super) roles_ran: HashSet<u64>,
    /// Per expansion of a role that hosts may pass by (`RoleDedup::expansion`): whether this
    /// host does, decided at the first of its steps the host reached.
    pub(super) role_passed_by: HashMap<u64, bool>,
    /// Per expansion of a role an `include_role` loop includes: its loop item's variables
    /// (hashed), which make another role of each item's in ansible-core's eyes.
    pub(super) role_item: HashMap<u64, u64>,
    /// Agents by (delegated host, become user): `None` is the host itself.
    pub(super) conns: Conns,
    pub(super) failed: bool,
    pub(super) unreachable: bool,
    /// Failed by another host's failure under `any_errors_fatal`, not by a task of its own:
    /// it runs the `rescue` and `always` of the blocks it is in as a failed host does, and a
    /// `rescue` takes it back without counting it rescued (`marked_now`), but ansible-core
    /// counts it failed when the play ends (`fatal_marked`), so it runs no later play.
    pub(super) marked_now: bool,
    pub(super) fatal_marked: bool,
    /// A later play started after `fatal_marked` was set: ansible-core carries the host into
    /// that play's result as failed, so the run fails; with no later play, a host a `rescue`
    /// took back leaves the run's exit alone.
    pub(super) fatal_carried: bool,
    /// The handlers notified on this host and not run yet (`handlers::handler_key`).
    pub(super) notified: Vec<String>,
    /// Handler notifications left in the host's outbox by earlier runs, not yet delivered.
    pub(super) pending: Vec<OutboxEntry>,
    pub(super) stats: Stats,
    /// The failures and unreachables counted when `meta: clear_host_errors` last ran: only
    /// those after it make the run fail, as in ansible-core (the recap still counts all).
    pub(super) cleared: (u32, u32),
    /// The connection spec of the current play, when it depends on nothing a task changes
    /// (see `connect::conn_spec`).
    pub(super) spec_cache: Mutex<Option<(SpecKey, ConnSpec)>>,
    /// Whether the connection variables come from the inventory, play vars and `-e` alone
    /// (`spec::vars_fixed`), for the variable maps it was last asked about.
    pub(super) conn_vars_fixed: MapsMemo,
    /// Facts a `delegate_facts` task set for another host: (that host, the facts, whether
    /// they came from `set_fact`), moved there once the task is done on every host.
    pub(super) delegated_facts: Vec<(String, Map<String, Value>, bool)>,
    /// Requests this host's agents answered (all passes), and the count when the pass began:
    /// the JSON recap's `round_trips`.
    pub(super) round_trips: Arc<AtomicU64>,
    pub(super) round_trips_before: u64,
}

/// What a cached connection spec was computed for: the play (by address: plays live as long
/// as the run), the task's `become`, `become_user` and `become_method` keywords, and its
/// connection keywords (`remote_user`, `port`, `connection`).
pub(super) type SpecKey = (
    usize,
    Option<bool>,
    Option<String>,
    Option<String>,
    Option<crate::playbook::ConnKeywords>,
);

impl HostState {
    pub(super) fn reset_for_pass(&mut self) {
        self.facts = Arc::default();
        self.host_vars = Arc::default();
        self.host_trust = Arc::default();
        self.included_vars = Arc::default();
        self.last_failure = None;
        self.loop_failure = None;
        self.ended = false;
        self.failed = false;
        self.unreachable = false;
        self.marked_now = false;
        self.fatal_marked = false;
        self.fatal_carried = false;
        self.notified.clear();
        self.pending.clear();
        self.stats = Stats::default();
        self.cleared = (0, 0);
        self.round_trips_before = self.round_trips.load(Ordering::Relaxed);
        self.forget_spec();
    }

    /// The identity of the role `dedup` is an expansion of, as this host runs it now.
    pub(super) fn role_identity(&self, dedup: &crate::playbook::roles::RoleDedup) -> u64 {
        match self.role_item.get(&dedup.expansion) {
            Some(item) => dedup.id.rotate_left(1) ^ item,
            None => dedup.id,
        }
    }

    /// Take every agent connection of this host, to be closed (`pool::close_all`).
    pub(super) fn take_conns(&mut self) -> Vec<crate::connection::AgentConn> {
        self.conns.drain().map(|(_, c)| c).collect()
    }

    /// Drop the cached connection spec (the inventory changed).
    pub(super) fn forget_spec(&mut self) {
        *self.spec_cache.get_mut().expect("spec cache") = None;
    }

    pub(super) fn new(name: &str, inv_vars: Arc<Map<String, Value>>) -> HostState {
        HostState {
            name: name.to_string(),
            inv_vars,
            facts: Arc::default(),
            host_vars: Arc::default(),
            host_trust: Arc::default(),
            included_vars: Arc::default(),
            last_failure: None,
            loop_failure: None,
            ended: false,
            ended_role: None,
            roles_ran: HashSet::new(),
            role_passed_by: HashMap::new(),
            role_item: HashMap::new(),
            conns: Conns::new(),
            failed: false,
            unreachable: false,
            marked_now: false,
            fatal_marked: false,
            fatal_carried: false,
            notified: Vec::new(),
            pending: Vec::new(),
            stats: Stats::default(),
            cleared: (0, 0),
            spec_cache: Mutex::default(),
            conn_vars_fixed: MapsMemo::default(),
            delegated_facts: Vec::new(),
            round_trips: Arc::default(),
            round_trips_before: 0,
        }
    }

    /// The round trips of the current pass.
    pub(super) fn pass_round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::Relaxed) - self.round_trips_before
    }

    /// Whether the host failed or was unreachable since `meta: clear_host_errors` last ran.
    pub(super) fn failed_run(&self) -> bool {
        self.stats.failed > self.cleared.0
            || self.stats.unreachable > self.cleared.1
            || self.fatal_carried
    }

    pub(super) fn active(&self) -> bool {
        !self.failed && !self.unreachable && !self.ended
    }

    /// Set a `set_fact` / `register` variable (copy-on-write) as data: whatever trust an
    /// earlier value of that name kept goes with it.
    pub(super) fn set_var(&mut self, name: &str, value: Value) {
        self.set_vouched_var(name, value, Value::Null);
    }

    /// Set a `set_fact` / `register` variable with the trust its value kept (`Null`: none; see
    /// `Scope::vouched_at`).
    pub(super) fn set_vouched_var(&mut self, name: &str, value: Value, trust: Value) {
        Arc::make_mut(&mut self.host_vars).insert(name.to_string(), value);
        if !trust.is_null() {
            Arc::make_mut(&mut self.host_trust).insert(name.to_string(), trust);
        } else if self.host_trust.contains_key(name) {
            Arc::make_mut(&mut self.host_trust).remove(name);
        }
    }

    /// This host's variables, for vars/.
    pub(super) fn vars(&self) -> HostVars<'_> {
        HostVars {
            name: &self.name,
            inv_vars: &self.inv_vars,
            facts: &self.facts,
            host_vars: &self.host_vars,
            host_trust: &self.host_trust,
            included_vars: &self.included_vars,
        }
    }
}

/// Things shared by every host future of a play.
pub(super) struct PlayCtx<'a> {
    pub(super) play: &'a Play,
    pub(super) book: &'a Playbook,
    /// The hosts of the current batch (all of the play's without `serial`).
    pub(super) hosts: Vec<String>,
    /// All hosts of the play.
    pub(super) all_hosts: Vec<String>,
    /// The play's hosts that have not failed (Ansible's `ansible_play_hosts`).
    pub(super) live_hosts: Vec<String>,
    /// `groups`, `hostvars` and the host lists as template objects, shared by every scope.
    pub(super) objects: Arc<PlayObjects>,
    /// Variables from `vars_files` whose paths are templated (rendered once per play).
    pub(super) files_vars: Arc<Map<String, Value>>,
    /// Parameters of the `include_tasks` / `include_role` being run (and its loop item).
    pub(super) include_params: Arc<Map<String, Value>>,
    /// The handlers known so far (see `Engine::handlers`).
    pub(super) handlers: Arc<Vec<Task>>,
    /// What `include_role` with `public: true` made the play's so far (`Engine::public_roles`).
    pub(super) public_roles: Arc<crate::vars::PublicRoles>,
}

impl<'a> PlayCtx<'a> {
    /// The context of a play's batch, before any task ran (no `hostvars` yet: `snapshot`
    /// gives them).
    pub(super) fn new(
        play: &'a Play,
        book: &'a Playbook,
        groups: &crate::inventory::GroupHosts,
        batch: Vec<String>,
        all_hosts: Vec<String>,
        files_vars: Arc<Map<String, Value>>,
        handlers: Arc<Vec<Task>>,
    ) -> PlayCtx<'a> {
        let objects = PlayObjects::new(groups, play, &batch, &all_hosts);
        PlayCtx {
            play,
            book,
            hosts: batch,
            live_hosts: all_hosts.clone(),
            all_hosts,
            objects: Arc::new(objects),
            files_vars,
            include_params: Arc::default(),
            handlers,
            public_roles: Arc::default(),
        }
    }
}

impl PlayCtx<'_> {
    /// The same play with these include parameters on top of the current ones.
    pub(super) fn with_params(&self, params: Map<String, Value>) -> PlayCtx<'_> {
        self.with_include_params(self.params_with(params))
    }

    /// The current include parameters with these on top.
    pub(super) fn params_with(&self, params: Map<String, Value>) -> Arc<Map<String, Value>> {
        if params.is_empty() {
            self.include_params.clone()
        } else {
            let mut p = (*self.include_params).clone();
            p.extend(params);
            Arc::new(p)
        }
    }

    /// The same play with exactly these include parameters.
    pub(super) fn with_include_params(
        &self,
        include_params: Arc<Map<String, Value>>,
    ) -> PlayCtx<'_> {
        PlayCtx {
            play: self.play,
            book: self.book,
            hosts: self.hosts.clone(),
            all_hosts: self.all_hosts.clone(),
            live_hosts: self.live_hosts.clone(),
            objects: self.objects.clone(),
            files_vars: self.files_vars.clone(),
            include_params,
            handlers: self.handlers.clone(),
            public_roles: self.public_roles.clone(),
        }
    }

    /// What a host's scope takes from this play, for vars/.
    pub(super) fn vars(&self) -> PlayVars<'_> {
        PlayVars {
            play: self.play,
            objects: &self.objects,
            files_vars: &self.files_vars,
            include_params: &self.include_params,
            public_roles: &self.public_roles,
        }
    }
}
