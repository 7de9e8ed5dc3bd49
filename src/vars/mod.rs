//! vars/: what a variable is worth on a host. Lazily rendered layers (`scope`), the order they
//! stack in (`precedence`), the variables defined by the engine itself (`magic`), and the other
//! hosts' variables as a task sees them (`hostvars`).
//!
//! It knows the playbook's AST, the inventory and the templar. It must NOT know the engine (host
//! state, agents, reporting): the engine lends it borrowed views, `HostVars` and `PlayVars`.

pub mod hostvars;
pub mod magic;
pub mod precedence;
pub mod prompt;
mod scope;

pub use magic::PlayObjects;
pub use scope::{pruned_array, pruned_object, Layer, Scope};

use crate::playbook::{Play, RoleCtx};
use serde_json::{Map, Value};
use std::sync::Arc;

/// One host's own variables, as the engine holds them for the current pass. The maps are
/// shared (`Arc`): a scope or a `hostvars` entry holds them without copying, and the engine
/// changes them copy-on-write (`Arc::make_mut`).
#[derive(Clone, Copy)]
pub struct HostVars<'a> {
    pub name: &'a str,
    pub inv_vars: &'a Arc<Map<String, Value>>,
    pub facts: &'a Arc<Map<String, Value>>,
    /// `set_fact` and `register` results: data, never templated again.
    pub host_vars: &'a Arc<Map<String, Value>>,
    /// The trust some of `host_vars` kept (`Layer::vouched`).
    pub host_trust: &'a Arc<Map<String, Value>>,
    /// Variables loaded by `include_vars` (below `set_fact`, as in Ansible).
    pub included_vars: &'a Arc<Map<String, Value>>,
}

/// The defaults and variables of the roles an `include_role` with `public: true` brought in:
/// from then on the play's, for every host, as its `roles:` are (ansible-core adds the role to
/// the play).
#[derive(Default, Clone)]
pub struct PublicRoles {
    pub defaults: Arc<Map<String, Value>>,
    pub vars: Arc<Map<String, Value>>,
}

/// What a host's scope takes from the play being run.
#[derive(Clone, Copy)]
pub struct PlayVars<'a> {
    pub play: &'a Play,
    /// `groups`, `hostvars`, the play's host lists, `playbook_dir`: shared by all hosts.
    pub objects: &'a PlayObjects,
    /// Variables from `vars_files` whose paths are templates (rendered once per play).
    pub files_vars: &'a Arc<Map<String, Value>>,
    /// Parameters of the `include_tasks` / `include_role` being run (and its loop item).
    pub include_params: &'a Arc<Map<String, Value>>,
    pub public_roles: &'a PublicRoles,
}

/// Where a scope's role and task variables come from (a task, or an include).
#[derive(Default, Clone, Copy)]
pub struct VarSrc<'t> {
    pub role: Option<&'t RoleCtx>,
    pub vars: Option<&'t Arc<Map<String, Value>>>,
    pub check_mode: Option<bool>,
    /// The file the task (or include) is written in: its directory is in
    /// `ansible_search_path`, after the role's, as in ansible-core.
    pub task_file: Option<&'t std::path::Path>,
}
