//! What the engine keeps between tasks: each host's state for a pass, and the context every
//! host future of a play shares. Both lend borrowed views of themselves to vars/.

use crate::connection::pool::Conns;
use crate::playbook::{Play, Playbook, Task};
use crate::report::Stats;
use crate::vars::{HostVars, PlayVars};
use fixpoint_agent::journal::OutboxEntry;
use serde_json::{Map, Value};
use std::sync::Arc;

/// State of one host for one pass (connections survive passes: one connection per host per run).
pub(super) struct HostState {
    pub(super) name: String,
    pub(super) inv_vars: Arc<Map<String, Value>>,
    pub(super) facts: Map<String, Value>,
    /// `set_fact` and `register` results: data, never templated again.
    pub(super) host_vars: Map<String, Value>,
    /// Variables loaded by `include_vars` (below `set_fact`, as in Ansible).
    pub(super) included_vars: Map<String, Value>,
    /// The last task that failed on this host, with its result, for a `rescue`.
    pub(super) last_failure: Option<(Value, Value)>,
    /// `meta: end_host` ended the play for this host.
    pub(super) ended: bool,
    /// Agents by (delegated host, become user): `None` is the host itself.
    pub(super) conns: Conns,
    pub(super) failed: bool,
    pub(super) unreachable: bool,
    /// The handlers notified on this host and not run yet (`handlers::handler_key`).
    pub(super) notified: Vec<String>,
    /// Handler notifications left in the host's outbox by earlier runs, not yet delivered.
    pub(super) pending: Vec<OutboxEntry>,
    pub(super) stats: Stats,
    pub(super) gathered: bool,
}

impl HostState {
    pub(super) fn reset_for_pass(&mut self) {
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

    pub(super) fn new(name: &str, inv_vars: Arc<Map<String, Value>>) -> HostState {
        HostState {
            name: name.to_string(),
            inv_vars,
            facts: Map::new(),
            host_vars: Map::new(),
            included_vars: Map::new(),
            last_failure: None,
            ended: false,
            conns: Conns::new(),
            failed: false,
            unreachable: false,
            notified: Vec::new(),
            pending: Vec::new(),
            stats: Stats::default(),
            gathered: false,
        }
    }

    pub(super) fn active(&self) -> bool {
        !self.failed && !self.unreachable && !self.ended
    }

    /// This host's variables, for vars/.
    pub(super) fn vars(&self) -> HostVars<'_> {
        HostVars {
            name: &self.name,
            inv_vars: &self.inv_vars,
            facts: &self.facts,
            host_vars: &self.host_vars,
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
    pub(super) groups: Value,
    pub(super) hostvars: Value,
    /// Variables from `vars_files` whose paths are templated (rendered once per play).
    pub(super) files_vars: Map<String, Value>,
    /// Parameters of the `include_tasks` / `include_role` being run (and its loop item).
    pub(super) include_params: Map<String, Value>,
    /// The handlers known so far (see `Engine::handlers`).
    pub(super) handlers: Arc<Vec<Task>>,
}

impl PlayCtx<'_> {
    /// The same play with these include parameters on top of the current ones.
    pub(super) fn with_params(&self, params: Map<String, Value>) -> PlayCtx<'_> {
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

    /// What a host's scope takes from this play, for vars/.
    pub(super) fn vars(&self) -> PlayVars<'_> {
        PlayVars {
            play: self.play,
            playbook_dir: &self.book.dir,
            batch: &self.hosts,
            all_hosts: &self.all_hosts,
            live_hosts: &self.live_hosts,
            groups: &self.groups,
            hostvars: &self.hostvars,
            files_vars: &self.files_vars,
            include_params: &self.include_params,
        }
    }
}
