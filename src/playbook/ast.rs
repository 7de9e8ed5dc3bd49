//! The typed playbook: plays, task lists, tasks, blocks, includes and roles as the engine runs them.
//!
//! Plain data with the source position of each piece. Nothing here reads YAML or files: the
//! parser (`load`, `includes`, `task`) builds these values, the engine walks them.

use crate::diag::{Diagnostic, Pos};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A loaded playbook file.
#[derive(Debug, Clone)]
pub struct Playbook {
    pub path: PathBuf,
    /// The directory that holds the playbook: `files/`, `templates/` and vars files are found from here.
    pub dir: PathBuf,
    /// Its plays, with the plays of `import_playbook` in place.
    pub plays: Vec<Play>,
    /// Where roles are searched after `roles/` beside the playbook (`--roles-path`, `ANSIBLE_ROLES_PATH`).
    pub roles_path: Vec<PathBuf>,
}

/// One entry of a task list: a task, a block, a dynamic include or a `meta` action.
#[derive(Debug, Clone)]
pub enum Step {
    Task(Box<Task>),
    Block(Box<Block>),
    Include(Box<Include>),
    Meta(Box<Meta>),
}

impl Step {
    /// The role invocation the step belongs to (a block: that of its first step).
    pub fn role(&self) -> Option<&Arc<RoleCtx>> {
        match self {
            Step::Task(t) => t.role.as_ref(),
            Step::Include(i) => i.role.as_ref(),
            Step::Meta(m) => m.role.as_ref(),
            Step::Block(b) => b
                .block
                .iter()
                .chain(&b.rescue)
                .chain(&b.always)
                .find_map(Step::role),
        }
    }
}

/// `block` / `rescue` / `always`. The block's keywords were pushed down into its tasks at load
/// time (as Ansible inherits them), so only the control flow is left here.
#[derive(Debug, Clone)]
pub struct Block {
    pub name: Option<String>,
    pub pos: Pos,
    pub block: Vec<Step>,
    pub rescue: Vec<Step>,
    pub always: Vec<Step>,
}

/// `include_tasks` / `include_role`: decided per host at run time (`when`, `loop`), with its
/// `vars` as include parameters.
#[derive(Debug, Clone)]
pub struct Include {
    pub name: Option<String>,
    /// The name its result is reported under: `name`, else `include_tasks`, or
    /// `include_role : <role>` as Ansible shows it.
    pub shown: String,
    pub pos: Pos,
    pub when: Conditions,
    pub loop_items: Option<Value>,
    pub loop_kind: LoopKind,
    pub loop_var: String,
    pub index_var: Option<String>,
    /// `loop_control.extended`: `ansible_loop` for each item, with `allitems` when true.
    pub loop_extended: Option<bool>,
    pub vars: Map<String, Value>,
    /// The include's own tags: they select the include, not the tasks it brings (as in Ansible).
    pub tags: Vec<String>,
    /// `include_tasks` or `include_role`, for messages.
    pub action: &'static str,
    pub source: IncludeSource,
    /// Where the include's own result is kept (`{include, include_args}`, as ansible-core's).
    pub register: Option<String>,
    /// The file (`include_tasks`) or role (`include_role`) as written: its result names it.
    pub target: String,
    /// An `include_role`'s arguments as written (`name`, `tasks_from`...; not `apply`): its
    /// result's `include_args`.
    pub role_args: Map<String, Value>,
    /// `include_role`'s `public: true`: once included, its role's defaults and vars are the
    /// play's (`vars::PublicRoles`).
    pub public: bool,
    /// `ignore_errors`: a host whose include fails (its `when` or loop cannot be decided, its
    /// file cannot load) goes on.
    pub ignore_errors: bool,
    /// `run_once` (the include's, or its block's): only the first host includes, and its
    /// registered result is every host's, as in ansible-core.
    pub run_once: bool,
    /// The role and block variables around the include, to evaluate its `when` and `loop`.
    pub role: Option<Arc<RoleCtx>>,
    pub inherited_vars: Arc<Map<String, Value>>,
    /// An `include_role` loaded at load time: the handlers of its role (and of the roles it
    /// depends on), which join the play's each time a host includes it, with the include's
    /// parameters, as in ansible-core.
    pub handlers: Vec<Task>,
}

#[derive(Debug, Clone)]
pub enum IncludeSource {
    /// A file or role named without templates, loaded (and checked) at load time.
    Loaded(Vec<Step>),
    /// `include_tasks` of a templated file name: loaded when the host reaches it.
    TasksFile {
        file: String,
        /// Where relative names are searched, in order.
        search: Vec<PathBuf>,
        inherit: Box<Inherited>,
    },
    /// `include_role` of a templated role name: loaded when the host reaches it.
    Role {
        name: String,
        from: RoleFrom,
        /// The include's `vars`: role parameters (templates, rendered in the task's scope).
        params: Map<String, Value>,
        inherit: Box<Inherited>,
    },
}

/// `tasks_from`, `vars_from`, `defaults_from`, `handlers_from` of `import_role` /
/// `include_role`: which file of each role directory to read instead of `main`; and
/// `rolespec_validate: false`, which leaves out the check of the entry point's argument spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoleFrom {
    pub tasks: Option<String>,
    pub vars: Option<String>,
    pub defaults: Option<String>,
    pub handlers: Option<String>,
    pub skip_argspec: bool,
}

/// `meta:` actions the scheduler performs itself.
#[derive(Debug, Clone)]
pub struct Meta {
    pub action: MetaAction,
    /// `name:`, shown on its skipped results; unnamed, its action as written (`meta`,
    /// `ansible.builtin.meta`), as ansible-core names it.
    pub name: String,
    /// `name:` was written (listings name an unnamed meta by its action alone).
    pub named: bool,
    pub pos: Pos,
    pub when: Conditions,
    pub tags: Vec<String>,
    /// The role and block variables around it, to evaluate `when`.
    pub role: Option<Arc<RoleCtx>>,
    pub vars: Arc<Map<String, Value>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaAction {
    FlushHandlers,
    EndPlay,
    EndHost,
    Noop,
    ClearFacts,
    ClearHostErrors,
    EndBatch,
    ResetConnection,
    /// Ends the role invocation it is in, for the hosts it runs on (ansible-core 2.18+).
    EndRole,
    /// Reads the inventory sources again (`Engine::refresh_inventory`).
    RefreshInventory,
}

impl MetaAction {
    pub fn as_str(self) -> &'static str {
        match self {
            MetaAction::FlushHandlers => "flush_handlers",
            MetaAction::EndPlay => "end_play",
            MetaAction::EndHost => "end_host",
            MetaAction::Noop => "noop",
            MetaAction::ClearFacts => "clear_facts",
            MetaAction::ClearHostErrors => "clear_host_errors",
            MetaAction::EndBatch => "end_batch",
            MetaAction::ResetConnection => "reset_connection",
            MetaAction::EndRole => "end_role",
            MetaAction::RefreshInventory => "refresh_inventory",
        }
    }
}

/// A role as one invocation sees it: its directory and variables.
#[derive(Debug, Clone, Default)]
pub struct RoleCtx {
    pub name: String,
    pub path: PathBuf,
    /// `defaults/main.yml`: the lowest precedence of all variables.
    pub defaults: Arc<Map<String, Value>>,
    /// For a dependency, the variables of the roles it is a dependency of (each one's `vars:`
    /// then its vars/main.yml, outermost first), below its own, as ansible-core's inherited
    /// role vars; empty for other roles.
    pub inherited: Arc<Map<String, Value>>,
    /// `vars/main.yml`: above play `vars_files`.
    pub vars: Arc<Map<String, Value>>,
    /// `vars:` of a `roles:` entry or an `import_role`: the role's own variables, above its
    /// `vars/main.yml` and below block and task vars (ansible-core's `Role.vars`, merged last
    /// into the role's variables); not exported to the play.
    pub entry_vars: Arc<Map<String, Value>>,
    /// The other keys of a role entry, and `include_role`'s `vars:`: role parameters, above
    /// `set_fact`.
    pub params: Arc<Map<String, Value>>,
    /// `params` are a `roles:` entry's (or a dependency's): the roles this one imports or
    /// includes see them above their own include `vars:` (ansible-core's role params of the
    /// dependency chain), where an include's `vars:` are below the nested include's.
    pub entry_params: bool,
    /// Whether a host that completed this role passes its steps by (`roles::RoleDedup`).
    pub dedup: Option<super::roles::RoleDedup>,
}

pub use super::inherited::{ConnKeywords, EnvPart, Environment, Inherited};

#[derive(Debug, Clone)]
pub struct Play {
    pub name: String,
    pub hosts: String,
    pub pos: Pos,
    /// The directory of the playbook file this play is written in (it differs from the top
    /// playbook's under `import_playbook`).
    pub dir: PathBuf,
    pub vars: Arc<Map<String, Value>>,
    /// `vars_files` whose path is templated, loaded at run time.
    pub vars_files: Vec<(String, Pos)>,
    /// Variables of the `vars_files` with plain paths, loaded (and checked) at load time.
    pub vars_from_files: Arc<Map<String, Value>>,
    pub gather_facts: bool,
    /// `gather_timeout`: seconds the play's fact gathering may take (the connection timeout
    /// without it). `gather_subset` is accepted and checked, not kept: fixpoint's facts are
    /// one fixed set, as for the `setup` module.
    pub gather_timeout: Option<u64>,
    /// `vars_prompt`: play variables asked for when the run starts (`vars::prompt`).
    pub vars_prompt: Vec<VarPrompt>,
    /// The `when` of the `import_playbook` that brought this play in: fact gathering runs
    /// only on the hosts where it holds (its tasks carry it too).
    pub gather_when: Conditions,
    /// The play's own `tags` (also given to each of its tasks).
    pub tags: Vec<String>,
    pub pre_tasks: Vec<Step>,
    /// The `roles:` of the play, expanded: they run after `pre_tasks`, before `tasks`.
    pub roles: Vec<Step>,
    pub tasks: Vec<Step>,
    pub post_tasks: Vec<Step>,
    /// The play's handlers, then those of its roles.
    pub handlers: Vec<Task>,
    /// The defaults of the play's roles (`roles:`, dependencies, `import_role`), merged in
    /// load order: every task of the play sees them, as in Ansible.
    pub role_defaults: Arc<Map<String, Value>>,
    /// The `vars/` of those roles, merged the same way.
    pub role_vars: Arc<Map<String, Value>>,
    /// The roles the play names in `roles:` and imports (`import_role`), in load order, a role
    /// named twice listed twice: ansible-core's `ansible_play_role_names` (and `role_names`).
    pub play_role_names: Vec<String>,
    /// The roles those roles depend on (`meta/main.yml`, all the way down), each once:
    /// `ansible_dependent_role_names`.
    pub dependent_role_names: Vec<String>,
    pub become_: Option<bool>,
    pub become_user: Option<String>,
    pub become_method: Option<String>,
    /// `connection`, `remote_user` and `port`: the play's connection keywords.
    pub conn: ConnKeywords,
    pub check_mode: Option<bool>,
    pub diff: Option<bool>,
    pub environment: Environment,
    /// `force_handlers` written on the play: it wins over `--force-handlers`, also when false.
    pub force_handlers: Option<bool>,
    pub ignore_errors: bool,
    /// `serial`: batch sizes, each a count or a percentage of the play's hosts; the last
    /// repeats. Empty: one batch.
    pub serial: Vec<BatchSize>,
    /// `strategy: free`: each host goes through the tasks at its own pace.
    pub free: bool,
    /// `order`: the order hosts are taken in (`inventory` when absent).
    pub order: HostOrder,
    /// Any unrescued failure ends the play for every host.
    pub any_errors_fatal: bool,
    /// End the play when more than this percentage of a batch's hosts failed.
    pub max_fail_percentage: Option<f64>,
}

/// One entry of a play's `vars_prompt`.
#[derive(Debug, Clone)]
pub struct VarPrompt {
    pub name: String,
    pub prompt: Option<String>,
    pub default: Option<String>,
    /// Not echoed (the default, as in ansible-core).
    pub private: bool,
    pub confirm: bool,
    /// `encrypt`: the `password_hash` type the answer is hashed with, and its `salt`.
    pub encrypt: Option<String>,
    pub salt: Option<String>,
    pub pos: Pos,
}

/// Play `order`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostOrder {
    Inventory,
    ReverseInventory,
    Sorted,
    ReverseSorted,
    Shuffle,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BatchSize {
    Count(usize),
    Percent(f64),
}

/// Add each of `tags` to `list` unless it is already there (a tag keeps its first place).
pub(crate) fn add_tags(list: &mut Vec<String>, tags: &[String]) {
    for t in tags {
        if !list.contains(t) {
            list.push(t.clone());
        }
    }
}

/// Put `first` before the conditions in `list`: an enclosing block's or import's conditions
/// are evaluated before the task's own.
pub(crate) fn prepend_conditions(list: &mut Conditions, first: &[String]) {
    let mut all = first.to_vec();
    all.append(list);
    *list = all;
}

/// A condition from `when`, `changed_when`, `failed_when`: bare expressions, all must hold.
pub type Conditions = Vec<String>;

/// Which loop keyword a task uses: it decides how the rendered value becomes items. (Defined
/// here rather than in `loops` so the tree depends on nothing else in the folder.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoopKind {
    /// `loop`: the list as it is.
    #[default]
    List,
    /// `with_list`: the list as it is; any other value is the one item (ansible-core makes a
    /// list of `with_*` terms that are not one).
    WithList,
    /// `with_items`: the list flattened one level.
    Items,
    /// `with_dict`: `{key, value}` for each entry of a mapping.
    Dict,
    /// `with_fileglob`: the controller files matching each pattern.
    Fileglob,
    /// `with_sequence`: numbers (or formatted strings) from `start`/`end`/`count`/`stride`.
    Sequence,
    /// `with_nested`: every combination of the given lists.
    Nested,
    /// `with_together`: the given lists side by side (missing entries are null).
    Together,
    /// `with_flattened` (`community.general.flattened`): the lists flattened all the way down.
    Flattened,
    /// `with_subelements`: `[element, sub]` for each entry of a list under each element.
    Subelements,
    /// `with_indexed_items`: `[index, item]` for each item of the list.
    IndexedItems,
    /// `with_lines`: the output lines of each command, run on the controller.
    Lines,
    /// `with_first_found`: the first file of the list that exists, searched (as in
    /// ansible-core) in this subdirectory of each search directory first: `vars` for
    /// `include_vars`, `templates` for `template`, `files` otherwise.
    FirstFound(&'static str),
    /// `with_<lookup>` of any other lookup (`with_file`, `with_env`, a plugin's): the items are
    /// `query('<lookup>', *terms)`, the lookup named in the task's `loop_lookup`.
    Lookup,
}

impl LoopKind {
    /// The task keyword for each kind (the keys the loader accepts).
    pub const KEYS: &'static [(&'static str, LoopKind)] = &[
        ("loop", LoopKind::List),
        ("with_list", LoopKind::WithList),
        ("with_items", LoopKind::Items),
        ("with_dict", LoopKind::Dict),
        ("with_fileglob", LoopKind::Fileglob),
        ("with_sequence", LoopKind::Sequence),
        ("with_nested", LoopKind::Nested),
        ("with_together", LoopKind::Together),
        ("with_subelements", LoopKind::Subelements),
        ("with_first_found", LoopKind::FirstFound("files")),
        ("with_flattened", LoopKind::Flattened),
        ("with_indexed_items", LoopKind::IndexedItems),
        ("with_lines", LoopKind::Lines),
    ];

    /// The lookup a `with_<lookup>` key names when it is none of `KEYS` (`with_file`,
    /// `with_ansible.builtin.env`: `file`, `env`): a `LoopKind::Lookup`. Whether such a
    /// lookup exists is `validate`'s to say, once the playbook's plugins are known.
    pub fn lookup_of_key(key: &str) -> Option<&str> {
        if Self::of_key(key).is_some() {
            return None;
        }
        let name = key.strip_prefix("with_")?;
        let name = ["ansible.builtin.", "ansible.legacy."]
            .iter()
            .find_map(|p| name.strip_prefix(p))
            .unwrap_or(name);
        (!name.is_empty()).then_some(name)
    }

    /// The loop a task key asks for: one of `KEYS`, or `with_<lookup>` naming the lookup by
    /// its collection name (`with_ansible.builtin.items`, `with_community.general.flattened`,
    /// which is where ansible-core routes `flattened`).
    pub fn of_key(key: &str) -> Option<LoopKind> {
        if let Some((_, kind)) = Self::KEYS.iter().find(|(k, _)| *k == key) {
            return Some(*kind);
        }
        let lookup = key.strip_prefix("with_")?;
        let short = ["ansible.builtin.", "ansible.legacy.", "community.general."]
            .iter()
            .find_map(|p| lookup.strip_prefix(p))?;
        // community.general holds `flattened` only of these; ansible.builtin the others.
        if lookup.starts_with("community.general.") != (short == "flattened") {
            return None;
        }
        let with = format!("with_{short}");
        Self::KEYS
            .iter()
            .find(|(k, _)| *k == with)
            .map(|(_, kind)| *kind)
    }
}

#[derive(Debug, Clone, Default)]
pub struct Task {
    pub name: Option<String>,
    /// Canonical module name (`copy`, not `ansible.builtin.copy`).
    pub module: &'static str,
    /// The module's key as the task writes it (`ansible.builtin.copy`), which names a task
    /// without `name:`, as in ansible-core; empty where the module is named at run time.
    pub module_written: String,
    pub params: Value,
    pub pos: Pos,
    pub when: Conditions,
    pub loop_items: Option<Value>,
    pub loop_kind: LoopKind,
    /// The lookup of a `LoopKind::Lookup` loop.
    pub loop_lookup: Option<String>,
    pub loop_var: String,
    pub index_var: Option<String>,
    pub loop_label: Option<String>,
    /// `loop_control.pause`: the wait between items.
    pub loop_pause: std::time::Duration,
    /// `loop_control.extended`: `ansible_loop` for each item, with `allitems` when true
    /// (`extended_allitems`, default yes).
    pub loop_extended: Option<bool>,
    /// `loop_control.break_when`: after each item, the loop stops when these hold (the item's
    /// result under the `register` name), as in ansible-core 2.18.
    pub loop_break_when: Option<Conditions>,
    pub register: Option<String>,
    pub notify: Vec<String>,
    pub listen: Vec<String>,
    pub tags: Vec<String>,
    pub changed_when: Option<Conditions>,
    pub failed_when: Option<Conditions>,
    pub ignore_errors: bool,
    pub check_mode: Option<bool>,
    pub diff: Option<bool>,
    pub vars: Arc<Map<String, Value>>,
    pub once: Option<String>,
    /// `once_scope:`: the key space of `once` (default: the host and remote user).
    pub once_scope: Option<String>,
    pub become_: Option<bool>,
    pub become_user: Option<String>,
    /// `become_method` (`sudo`, or `su`, refused when it would be used).
    pub become_method: Option<String>,
    pub no_log: bool,
    /// Boolean keywords given as templates, rendered on each host when the task runs; each
    /// replaces the keyword's value (`ignore_errors`, `no_log`, `check_mode`, `diff`, `become`).
    pub templated: BTreeMap<&'static str, String>,
    pub environment: Environment,
    /// Seconds this task may take on the host before it is failed.
    pub timeout: Option<u64>,
    /// `throttle`: at most this many hosts run the task at once (below `--forks`; 0: no
    /// bound); a template is in `templated`, rendered with the first host's variables.
    pub throttle: Option<usize>,
    /// The role this task comes from: its files, templates and variables.
    pub role: Option<Arc<RoleCtx>>,
    /// A module fixpoint does not implement natively, run as Ansible's own Python code
    /// (`crate::pymod`); `module` is then the name as the task wrote it.
    pub python: Option<Arc<crate::pymod::PyModule>>,
    /// Run through this host's connection, with the original host's variables.
    pub delegate_to: Option<String>,
    /// `remote_user`, `port`, `connection` of the task (and of its blocks and role): which
    /// connection it runs through, below the host's connection variables.
    pub conn: ConnKeywords,
    /// `any_errors_fatal` of the task (its blocks, its role); the play's when unset.
    pub any_errors_fatal: Option<bool>,
    /// `ignore_unreachable`: a host this task cannot reach stays in the play (its result is
    /// reported unreachable and counted ok and ignored, as in ansible-core).
    pub ignore_unreachable: Option<bool>,
    /// `delegate_facts` (with `delegate_to`): the facts the task sets go to the delegated host.
    pub delegate_facts: bool,
    pub run_once: bool,
    /// `until`: retry the task until these hold, `retries` times, `delay` seconds apart;
    /// [`UNTIL_SUCCEEDED`] when `retries` is given alone.
    pub until: Option<Conditions>,
    pub retries: Templated<u64>,
    /// Seconds; a fraction is allowed (`delay: 0.01`), as in Ansible.
    pub delay: Templated<f64>,
    /// A `command`/`shell` without a guard of its own whose `when` may be its guard (it reads a
    /// registered result): where its module key is, until `validate` has seen the whole
    /// playbook and decided (`playbook::validate::check_guard`).
    pub guard_pending: Option<Pos>,
    /// A parameter the module does not take, on a task with a `when`: ansible-core fails such
    /// a task only when a host runs it (roles keep tasks that only old Ansible versions reach,
    /// like `command`'s removed `warn`), so `validate` warns and the module fails it on the host.
    /// Any invalid parameters of a task with `ignore_errors: true` are kept here likewise.
    pub unknown_param: Option<Diagnostic>,
    /// `async` on an action that does not support it (`script`, `copy`...): ansible-core fails
    /// the task with this message when a host runs it; kept only on a task with `ignore_errors`
    /// or a `when` (any other is refused at load).
    pub async_refused: Option<String>,
    /// `async: N` with `poll: 0`: the module runs as a background job on the host, stopped
    /// after N seconds, and the task registers the job's id (see `engine::item`, agent `job.rs`).
    pub async_job: Option<u64>,
    /// A handler that is an `include_tasks` or a `meta` (`Step::Include`, `Step::Meta`):
    /// notified, it runs that step (its file's tasks, or the meta action), as in ansible-core.
    pub handler_step: Option<Box<Step>>,
    /// A handler an `include_role` brought: that include's parameters (its loop item...),
    /// which the handler sees as the included role's tasks do, as in ansible-core.
    pub handler_params: Option<Arc<Map<String, Value>>>,
    /// `package`/`service` with `module_defaults`: all of them, for the manager's module the
    /// task runs on the host (`playbook::defaults::backend_defaults`); the defaults of
    /// `package`/`service` themselves are in `params` already.
    pub module_defaults: Option<Arc<Map<String, Value>>>,
    /// The module's arguments given as one template (`assert: "{{ item }}"`, `args: "{{ x }}"`),
    /// rendered on each host and item to a mapping that goes under the task's own arguments.
    pub args_splat: Option<Box<ArgsSplat>>,
    /// A local action plugin's name when it only re-exports the builtin action `module`
    /// (`pymod::library::action_alias`): results name the action so, as ansible-core's do.
    pub alias: Option<&'static str>,
}

/// Arguments given as one template: ansible-core renders it to a mapping that sits over the
/// `module_defaults` and under the arguments the task writes out.
/// The `until` of a task given `retries` without one: ansible-core retries it until it
/// succeeds (its result, seen as plain names by `until`, is not failed).
pub const UNTIL_SUCCEEDED: &str = "not (failed | default(false))";

#[derive(Debug, Clone)]
pub struct ArgsSplat {
    pub template: String,
    /// The parameters `module_defaults` gave: the rendered mapping replaces them.
    pub defaulted: Vec<String>,
}

/// A number keyword (`retries`, `delay`) that may also be a template, rendered on the host when
/// the task runs (`retries: "{{ idx + 2 }}"`), as ansible-core templates every field.
#[derive(Debug, Clone, PartialEq)]
pub enum Templated<T> {
    Fixed(T),
    Template(String),
}

impl<T: Default> Default for Templated<T> {
    fn default() -> Self {
        Templated::Fixed(T::default())
    }
}

impl Task {
    /// The name shown in output: `name:`, else the module and its main argument, as Ansible does.
    pub fn display_name(&self) -> String {
        match &self.name {
            Some(n) => n.clone(),
            None if !self.module_written.is_empty() => self.module_written.clone(),
            None => self.module.to_string(),
        }
    }

    /// Where `copy`/`template` sources and relative files are searched: the role first.
    pub fn search_dirs(&self, play_dir: &Path) -> Vec<PathBuf> {
        super::files::search_dirs(self.role.as_deref(), play_dir)
    }

    /// `changed_when: false` declares a command read-only.
    pub fn is_read_only(&self) -> bool {
        matches!(&self.changed_when, Some(c) if c.len() == 1 && is_false_literal(&c[0]))
    }
}

fn is_false_literal(s: &str) -> bool {
    matches!(s.trim(), "false" | "False" | "no" | "False == True")
}

impl Play {
    /// A play with no tasks, for commands that talk to hosts outside a playbook (`fixpoint journal`).
    pub fn bare(hosts: &str, become_: bool) -> Play {
        Play {
            name: "journal".into(),
            hosts: hosts.into(),
            pos: Pos::file_only(Path::new("<command line>")),
            dir: PathBuf::from("."),
            vars: Arc::default(),
            vars_files: Vec::new(),
            vars_from_files: Arc::default(),
            gather_facts: false,
            gather_timeout: None,
            gather_when: Vec::new(),
            vars_prompt: Vec::new(),
            tags: Vec::new(),
            pre_tasks: Vec::new(),
            roles: Vec::new(),
            tasks: Vec::new(),
            post_tasks: Vec::new(),
            handlers: Vec::new(),
            role_defaults: Arc::default(),
            role_vars: Arc::default(),
            play_role_names: Vec::new(),
            dependent_role_names: Vec::new(),
            become_: Some(become_),
            become_user: None,
            become_method: None,
            conn: ConnKeywords::default(),
            check_mode: None,
            diff: None,
            environment: Vec::new(),
            force_handlers: None,
            ignore_errors: false,
            serial: Vec::new(),
            free: false,
            order: HostOrder::Inventory,
            any_errors_fatal: false,
            max_fail_percentage: None,
        }
    }

    /// The play's tasks in run order (pre_tasks, roles, tasks, post_tasks), then its handlers.
    pub fn all_tasks(&self) -> Vec<&Task> {
        let mut out = Vec::new();
        for section in [&self.pre_tasks, &self.roles, &self.tasks, &self.post_tasks] {
            out.extend(all_tasks(section));
        }
        out.extend(self.handlers.iter());
        out
    }
}

/// Every task in these steps, blocks and loaded includes included, in order.
pub fn all_tasks(steps: &[Step]) -> Vec<&Task> {
    let mut out = Vec::new();
    for s in steps {
        match s {
            Step::Task(t) => out.push(t.as_ref()),
            Step::Block(b) => {
                out.extend(all_tasks(&b.block));
                out.extend(all_tasks(&b.rescue));
                out.extend(all_tasks(&b.always));
            }
            Step::Include(i) => {
                if let IncludeSource::Loaded(steps) = &i.source {
                    out.extend(all_tasks(steps));
                }
            }
            Step::Meta(_) => {}
        }
    }
    out
}
