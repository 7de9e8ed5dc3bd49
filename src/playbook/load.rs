//! The loader: YAML playbooks → typed plays and tasks, checked before any host is touched.
//!
//! Every check that can be made without a host happens here, with the source position of the
//! offending key: unknown keys, unknown modules, mistyped module parameters, and unguarded
//! `command`/`shell` steps (the idempotency rule: a raw command needs a guard).

use super::loops::LoopKind;
use super::roles::RoleOpts;
use crate::actions;
use crate::diag::{suggest, Diagnostic, Pos};
use crate::yaml::{self, Kind, Node};
use serde_json::{Map, Value};
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
    pub pos: Pos,
    pub when: Conditions,
    pub loop_items: Option<Value>,
    pub loop_kind: LoopKind,
    pub loop_var: String,
    pub index_var: Option<String>,
    pub vars: Map<String, Value>,
    /// The include's own tags: they select the include, not the tasks it brings (as in Ansible).
    pub tags: Vec<String>,
    /// `include_tasks` or `include_role`, for messages.
    pub action: &'static str,
    pub source: IncludeSource,
    /// The role and block variables around the include, to evaluate its `when` and `loop`.
    pub role: Option<Arc<RoleCtx>>,
    pub inherited_vars: Map<String, Value>,
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
/// `include_role`: which file of each role directory to read instead of `main`.
#[derive(Debug, Clone, Default)]
pub struct RoleFrom {
    pub tasks: Option<String>,
    pub vars: Option<String>,
    pub defaults: Option<String>,
    pub handlers: Option<String>,
}

/// `meta:` actions the scheduler performs itself.
#[derive(Debug, Clone)]
pub struct Meta {
    pub action: MetaAction,
    pub pos: Pos,
    pub when: Conditions,
    pub tags: Vec<String>,
    /// The role and block variables around it, to evaluate `when`.
    pub role: Option<Arc<RoleCtx>>,
    pub vars: Map<String, Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaAction {
    FlushHandlers,
    EndPlay,
    EndHost,
    Noop,
}

/// A role as one invocation sees it: its directory and variables.
#[derive(Debug, Clone, Default)]
pub struct RoleCtx {
    pub name: String,
    pub path: PathBuf,
    /// `defaults/main.yml`: the lowest precedence of all variables.
    pub defaults: Arc<Map<String, Value>>,
    /// `vars/main.yml`: above play `vars_files`.
    pub vars: Arc<Map<String, Value>>,
    /// `vars:` of the role entry (or `include_role`): role parameters, above `set_fact`.
    pub params: Arc<Map<String, Value>>,
}

/// Keywords of an enclosing block, role entry or import, inherited by every task inside.
#[derive(Debug, Clone, Default)]
pub struct Inherited {
    pub when: Conditions,
    pub tags: Vec<String>,
    pub vars: Map<String, Value>,
    pub become_: Option<bool>,
    pub become_user: Option<String>,
    pub ignore_errors: Option<bool>,
    pub no_log: bool,
    pub check_mode: Option<bool>,
    pub diff: Option<bool>,
    pub environment: Map<String, Value>,
    pub delegate_to: Option<String>,
    pub run_once: Option<bool>,
    pub role: Option<Arc<RoleCtx>>,
}

impl Inherited {
    fn apply(&self, t: &mut Task) {
        let mut when = self.when.clone();
        when.append(&mut t.when);
        t.when = when;
        for tag in &self.tags {
            if !t.tags.contains(tag) {
                t.tags.push(tag.clone());
            }
        }
        let mut vars = self.vars.clone();
        vars.extend(std::mem::take(&mut t.vars));
        t.vars = vars;
        t.become_ = t.become_.or(self.become_);
        t.become_user = t.become_user.take().or_else(|| self.become_user.clone());
        t.ignore_errors = t.ignore_errors || self.ignore_errors.unwrap_or(false);
        t.no_log |= self.no_log;
        t.check_mode = t.check_mode.or(self.check_mode);
        t.diff = t.diff.or(self.diff);
        let mut env = self.environment.clone();
        env.extend(std::mem::take(&mut t.environment));
        t.environment = env;
        t.run_once = t.run_once || self.run_once.unwrap_or(false);
        t.delegate_to = t.delegate_to.take().or_else(|| self.delegate_to.clone());
        if t.role.is_none() {
            t.role = self.role.clone();
        }
    }

    /// This context plus the keywords written on `node` (a block, role entry or import).
    pub(crate) fn with_keywords(&self, node: &Node) -> Result<Inherited, Diagnostic> {
        let mut out = self.clone();
        if let Some(n) = node.get("when") {
            out.when.extend(conditions_of(n, "when")?);
        }
        if let Some(n) = node.get("tags") {
            for t in strings_of(n, "tags")? {
                if !out.tags.contains(&t) {
                    out.tags.push(t);
                }
            }
        }
        if let Some(n) = node.get("vars") {
            out.vars.extend(vars_of(n, "`vars`")?);
        }
        if let Some(n) = node.get("become") {
            out.become_ = Some(bool_of(n, "become")?);
        }
        if let Some(n) = node.get("become_user") {
            out.become_user = Some(string_of(n, "become_user")?);
        }
        if let Some(n) = node.get("ignore_errors") {
            out.ignore_errors = Some(bool_of(n, "ignore_errors")?);
        }
        if let Some(n) = node.get("no_log") {
            out.no_log |= bool_of(n, "no_log")?;
        }
        if let Some(n) = node.get("check_mode") {
            out.check_mode = Some(bool_of(n, "check_mode")?);
        }
        if let Some(n) = node.get("diff") {
            out.diff = Some(bool_of(n, "diff")?);
        }
        if let Some(n) = node.get("environment") {
            out.environment.extend(env_of(n)?);
        }
        if let Some(n) = node.get("run_once") {
            out.run_once = Some(bool_of(n, "run_once")?);
        }
        if let Some(n) = node.get("delegate_to") {
            out.delegate_to = Some(string_of(n, "delegate_to")?);
        }
        Ok(out)
    }
}

/// Keywords a block (and a role entry, an import) may carry and pass down to its tasks.
pub(crate) const INHERITED_KEYS: &[&str] = &[
    "name",
    "when",
    "tags",
    "vars",
    "become",
    "become_user",
    "ignore_errors",
    "no_log",
    "check_mode",
    "diff",
    "environment",
    "delegate_to",
    "run_once",
];

#[derive(Debug, Clone)]
pub struct Play {
    pub name: String,
    pub hosts: String,
    pub pos: Pos,
    /// The directory of the playbook file this play is written in (it differs from the top
    /// playbook's under `import_playbook`).
    pub dir: PathBuf,
    pub vars: Map<String, Value>,
    /// `vars_files` whose path is templated, loaded at run time.
    pub vars_files: Vec<(String, Pos)>,
    /// Variables of the `vars_files` with plain paths, loaded (and checked) at load time.
    pub vars_from_files: Map<String, Value>,
    pub gather_facts: bool,
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
    pub become_: Option<bool>,
    pub become_user: Option<String>,
    pub connection: Option<String>,
    pub remote_user: Option<String>,
    pub check_mode: Option<bool>,
    pub diff: Option<bool>,
    pub environment: Map<String, Value>,
    pub force_handlers: bool,
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

/// A condition from `when`, `changed_when`, `failed_when`: bare expressions, all must hold.
pub type Conditions = Vec<String>;

#[derive(Debug, Clone)]
pub struct Task {
    pub name: Option<String>,
    /// Canonical module name (`copy`, not `ansible.builtin.copy`).
    pub module: &'static str,
    pub params: Value,
    pub pos: Pos,
    pub when: Conditions,
    pub loop_items: Option<Value>,
    pub loop_kind: LoopKind,
    pub loop_var: String,
    pub index_var: Option<String>,
    pub loop_label: Option<String>,
    /// `loop_control.pause`: seconds between items.
    pub loop_pause: f64,
    /// `loop_control.extended`: `ansible_loop` for each item.
    pub loop_extended: bool,
    pub register: Option<String>,
    pub notify: Vec<String>,
    pub listen: Vec<String>,
    pub tags: Vec<String>,
    pub changed_when: Option<Conditions>,
    pub failed_when: Option<Conditions>,
    pub ignore_errors: bool,
    pub check_mode: Option<bool>,
    pub diff: Option<bool>,
    pub vars: Map<String, Value>,
    pub once: Option<String>,
    pub become_: Option<bool>,
    pub become_user: Option<String>,
    pub no_log: bool,
    pub environment: Map<String, Value>,
    /// Seconds this task may take on the host before it is failed.
    pub timeout: Option<u64>,
    /// `throttle`: at most this many hosts run the task at once (below `--forks`).
    pub throttle: Option<usize>,
    /// The role this task comes from: its files, templates and variables.
    pub role: Option<Arc<RoleCtx>>,
    /// Run through this host's connection, with the original host's variables.
    pub delegate_to: Option<String>,
    pub run_once: bool,
    /// `until`: retry the task until these hold, `retries` times, `delay` seconds apart.
    pub until: Option<Conditions>,
    pub retries: u32,
    pub delay: u64,
}

impl Task {
    /// The name shown in output: `name:`, else the module and its main argument, as Ansible does.
    pub fn display_name(&self) -> String {
        match &self.name {
            Some(n) => n.clone(),
            None => self.module.to_string(),
        }
    }

    /// Where `copy`/`template` sources and relative files are searched: the role first.
    pub fn search_dirs(&self, play_dir: &Path) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        if let Some(r) = &self.role {
            dirs.push(r.path.clone());
        }
        dirs.push(play_dir.to_path_buf());
        dirs
    }

    /// `changed_when: false` declares a command read-only.
    pub fn is_read_only(&self) -> bool {
        matches!(&self.changed_when, Some(c) if c.len() == 1 && is_false_literal(&c[0]))
    }
}

fn is_false_literal(s: &str) -> bool {
    matches!(s.trim(), "false" | "False" | "no" | "False == True")
}

const TASK_KEYS: &[&str] = &[
    "name",
    "when",
    "loop",
    "with_items",
    "with_list",
    "with_dict",
    "with_fileglob",
    "with_sequence",
    "with_nested",
    "with_together",
    "with_subelements",
    "loop_control",
    "register",
    "notify",
    "listen",
    "tags",
    "changed_when",
    "failed_when",
    "ignore_errors",
    "check_mode",
    "diff",
    "vars",
    "once",
    "become",
    "become_user",
    "args",
    "no_log",
    "environment",
    "timeout",
    "throttle",
    "delegate_to",
    "run_once",
    "until",
    "retries",
    "delay",
];

/// Ansible keywords fixpoint knows but does not implement yet: refused with a clear message
/// instead of being silently ignored.
pub(crate) const TASK_KEYS_NOT_YET: &[&str] = &[
    "delegate_facts",
    "async",
    "poll",
    "any_errors_fatal",
    "apply",
];

const PLAY_KEYS: &[&str] = &[
    "name",
    "hosts",
    "vars",
    "vars_files",
    "gather_facts",
    "tasks",
    "pre_tasks",
    "post_tasks",
    "handlers",
    "become",
    "become_user",
    "connection",
    "remote_user",
    "check_mode",
    "diff",
    "environment",
    "force_handlers",
    "ignore_errors",
    "tags",
    "no_log",
    "roles",
    "serial",
    "strategy",
    "any_errors_fatal",
    "max_fail_percentage",
    "order",
];

const PLAY_KEYS_NOT_YET: &[&str] = &["import_playbook", "vars_prompt"];

impl Play {
    /// A play with no tasks, for commands that talk to hosts outside a playbook (`fixpoint journal`).
    pub fn bare(hosts: &str, become_: bool) -> Play {
        Play {
            name: "journal".into(),
            hosts: hosts.into(),
            pos: Pos::file_only(Path::new("<command line>")),
            dir: PathBuf::from("."),
            vars: Map::new(),
            vars_files: Vec::new(),
            vars_from_files: Map::new(),
            gather_facts: false,
            tags: Vec::new(),
            pre_tasks: Vec::new(),
            roles: Vec::new(),
            tasks: Vec::new(),
            post_tasks: Vec::new(),
            handlers: Vec::new(),
            role_defaults: Arc::default(),
            role_vars: Arc::default(),
            become_: Some(become_),
            become_user: None,
            connection: None,
            remote_user: None,
            check_mode: None,
            diff: None,
            environment: Map::new(),
            force_handlers: false,
            ignore_errors: false,
            serial: Vec::new(),
            free: false,
            order: HostOrder::Inventory,
            any_errors_fatal: false,
            max_fail_percentage: None,
        }
    }
}

/// Load and check a playbook file.
/// Load and check a playbook file, with the playbooks it imports.
pub fn load_playbook(path: &Path, roles_path: &[PathBuf]) -> Result<Playbook, Diagnostic> {
    let mut stack = Vec::new();
    let plays = load_plays(path, roles_path, &mut stack)?;
    Ok(Playbook {
        path: path.to_path_buf(),
        dir: dir_of(path),
        plays,
        roles_path: roles_path.to_vec(),
    })
}

pub(crate) fn dir_of(path: &Path) -> PathBuf {
    path.parent()
        .map(|p| {
            if p.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                p.to_path_buf()
            }
        })
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The short name of an action key: `ansible.builtin.import_tasks` → `import_tasks`.
fn short_name(k: &str) -> &str {
    k.strip_prefix("ansible.builtin.")
        .or_else(|| k.strip_prefix("ansible.legacy."))
        .unwrap_or(k)
}

fn load_plays(
    path: &Path,
    roles_path: &[PathBuf],
    stack: &mut Vec<PathBuf>,
) -> Result<Vec<Play>, Diagnostic> {
    let root = yaml::load_file(path)?;
    let dir = dir_of(path);
    let items = match &root.kind {
        Kind::Seq(items) => items,
        Kind::Null => {
            return Err(root
                .err("the playbook is empty")
                .help("a playbook is a list of plays: `- hosts: all` followed by `tasks:`"))
        }
        _ => {
            return Err(root
                .err(format!(
                    "a playbook must be a list of plays, found {}",
                    root.type_name()
                ))
                .help("start each play with `- hosts: ...`"))
        }
    };
    let mut plays = Vec::new();
    for item in items {
        let import = item.as_map().and_then(|m| {
            m.iter()
                .find(|(k, _, _)| short_name(k) == "import_playbook")
        });
        let Some((key, _, target)) = import else {
            plays.push(load_play(item, &dir, roles_path)?);
            continue;
        };
        let entries = map_of(item, "an import_playbook")?;
        check_keys(
            entries,
            &["name", "vars", "when", "tags"],
            &[],
            "an import_playbook",
            |k| k == key,
        )?;
        // The import's keywords reach every imported play (vars) and task (when, tags).
        let around = Inherited::default().with_keywords(item)?;
        let file = string_of(target, "import_playbook")?;
        if crate::templating::Templar::is_template(&file) {
            return Err(
                target.err("`import_playbook` is static: its file name cannot use variables")
            );
        }
        let file_path = joined(&dir, &file);
        if !file_path.is_file() {
            return Err(target.err(format!("playbook {} does not exist", file_path.display())));
        }
        let canon = std::fs::canonicalize(&file_path).unwrap_or(file_path.clone());
        if stack.contains(&canon) {
            return Err(target.err(format!("{file} imports itself")));
        }
        stack.push(canon);
        let imported = load_plays(&file_path, roles_path, stack);
        stack.pop();
        for mut play in imported? {
            let mut vars = around.vars.clone();
            vars.extend(std::mem::take(&mut play.vars));
            play.vars = vars;
            for t in &around.tags {
                if !play.tags.contains(t) {
                    play.tags.push(t.clone());
                }
            }
            for section in [
                &mut play.pre_tasks,
                &mut play.roles,
                &mut play.tasks,
                &mut play.post_tasks,
            ] {
                wrap_steps(section, &around.when, &around.tags);
            }
            for h in &mut play.handlers {
                wrap_task(h, &around.when, &around.tags);
            }
            plays.push(play);
        }
    }
    Ok(plays)
}

/// Add conditions (first) and tags to every task in these steps, as an enclosing import does.
fn wrap_steps(steps: &mut [Step], when: &[String], tags: &[String]) {
    if when.is_empty() && tags.is_empty() {
        return;
    }
    let add_tags = |list: &mut Vec<String>| {
        for t in tags {
            if !list.contains(t) {
                list.push(t.clone());
            }
        }
    };
    let prepend = |list: &mut Conditions| {
        let mut all = when.to_vec();
        all.append(list);
        *list = all;
    };
    for s in steps {
        match s {
            Step::Task(t) => wrap_task(t, when, tags),
            Step::Block(b) => {
                wrap_steps(&mut b.block, when, tags);
                wrap_steps(&mut b.rescue, when, tags);
                wrap_steps(&mut b.always, when, tags);
            }
            Step::Include(i) => {
                prepend(&mut i.when);
                add_tags(&mut i.tags);
                match &mut i.source {
                    IncludeSource::Loaded(steps) => wrap_steps(steps, when, tags),
                    IncludeSource::TasksFile { inherit, .. }
                    | IncludeSource::Role { inherit, .. } => {
                        prepend(&mut inherit.when);
                        add_tags(&mut inherit.tags);
                    }
                }
            }
            Step::Meta(m) => {
                prepend(&mut m.when);
                add_tags(&mut m.tags);
            }
        }
    }
}

fn wrap_task(t: &mut Task, when: &[String], tags: &[String]) {
    let mut all = when.to_vec();
    all.append(&mut t.when);
    t.when = all;
    for tag in tags {
        if !t.tags.contains(tag) {
            t.tags.push(tag.clone());
        }
    }
}

pub(crate) fn map_of<'a>(
    node: &'a Node,
    what: &str,
) -> Result<&'a [(String, Pos, Node)], Diagnostic> {
    node.as_map().ok_or_else(|| {
        node.err(format!(
            "{what} must be a mapping, found {}",
            node.type_name()
        ))
    })
}

pub(crate) fn check_keys(
    entries: &[(String, Pos, Node)],
    known: &[&str],
    not_yet: &[&str],
    what: &str,
    extra_ok: impl Fn(&str) -> bool,
) -> Result<(), Diagnostic> {
    for (k, kpos, _) in entries {
        if known.contains(&k.as_str()) || extra_ok(k) {
            continue;
        }
        if not_yet.contains(&k.as_str()) {
            return Err(
                Diagnostic::at(kpos, format!("`{k}` is not supported by fixpoint yet")).help(
                    "remove it, or keep this playbook on ansible-playbook until support lands",
                ),
            );
        }
        let mut d = Diagnostic::at(kpos, format!("unknown key `{k}` in {what}"));
        if let Some(s) = suggest(k, known.iter().copied()) {
            d = d.help(format!("did you mean `{s}`?"));
        } else {
            d = d.help(format!("{what} keys are: {}", known.join(", ")));
        }
        return Err(d);
    }
    Ok(())
}

pub(crate) fn bool_of(node: &Node, key: &str) -> Result<bool, Diagnostic> {
    match &node.kind {
        Kind::Bool(b) => Ok(*b),
        Kind::Str(s) => fixpoint_modules::params::parse_bool_str(s).ok_or_else(|| {
            node.err(format!("`{key}` must be a boolean, found \"{s}\""))
                .help("use true or false")
        }),
        _ => Err(node.err(format!(
            "`{key}` must be a boolean, found {}",
            node.type_name()
        ))),
    }
}

pub(crate) fn string_of(node: &Node, key: &str) -> Result<String, Diagnostic> {
    node.scalar_text().ok_or_else(|| {
        node.err(format!(
            "`{key}` must be a string, found {}",
            node.type_name()
        ))
    })
}

/// A string or a list of strings (`tags`, `notify`, `listen`).
pub(crate) fn strings_of(node: &Node, key: &str) -> Result<Vec<String>, Diagnostic> {
    match &node.kind {
        Kind::Seq(items) => items.iter().map(|i| string_of(i, key)).collect(),
        Kind::Str(s) if key == "tags" => Ok(s
            .split(',')
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .collect()),
        Kind::Null => Ok(Vec::new()),
        _ => Ok(vec![string_of(node, key)?]),
    }
}

/// A condition: one expression or a list; booleans become `true`/`false` expressions.
pub(crate) fn conditions_of(node: &Node, key: &str) -> Result<Conditions, Diagnostic> {
    let one = |n: &Node| -> Result<String, Diagnostic> {
        match &n.kind {
            Kind::Bool(b) => Ok(b.to_string()),
            _ => string_of(n, key),
        }
    };
    match &node.kind {
        Kind::Seq(items) => items.iter().map(one).collect(),
        _ => Ok(vec![one(node)?]),
    }
}

pub(crate) fn vars_of(node: &Node, what: &str) -> Result<Map<String, Value>, Diagnostic> {
    match &node.kind {
        Kind::Null => Ok(Map::new()),
        Kind::Map(entries) => {
            let mut m = Map::new();
            for (k, kpos, v) in entries {
                check_var_name(k, kpos)?;
                m.insert(k.clone(), v.to_json());
            }
            Ok(m)
        }
        _ => Err(node.err(format!(
            "{what} must be a mapping of variable names to values"
        ))),
    }
}

/// Variable names must be valid identifiers, as in Ansible.
pub fn check_var_name(name: &str, pos: &Pos) -> Result<(), Diagnostic> {
    let ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(
            Diagnostic::at(pos, format!("invalid variable name `{name}`")).help(
                "variable names start with a letter or _ and contain only letters, digits and _",
            ),
        )
    }
}

/// Loads task lists, imports and roles for one play, and remembers the roles it expanded.
pub struct Loader<'a> {
    pub(crate) play_dir: &'a Path,
    pub(crate) roles_path: &'a [PathBuf],
    /// Task files and roles being loaded, to refuse cycles.
    pub(crate) stack: Vec<PathBuf>,
    /// Roles expanded from `roles:` and dependencies, with their parameters: such a role runs
    /// once per play unless its parameters differ or it sets `allow_duplicates`.
    pub(crate) seen_roles: Vec<(PathBuf, Map<String, Value>)>,
    /// Role handlers files already added to the play.
    pub(crate) handler_files: Vec<PathBuf>,
    /// The handlers of the roles, added to the play's.
    pub role_handlers: Vec<Task>,
    /// Roles whose defaults and vars the whole play sees, in the order they were loaded.
    pub(crate) exported_roles: Vec<Arc<RoleCtx>>,
}

impl<'a> Loader<'a> {
    pub fn new(play_dir: &'a Path, roles_path: &'a [PathBuf]) -> Loader<'a> {
        Loader {
            play_dir,
            roles_path,
            stack: Vec::new(),
            seen_roles: Vec::new(),
            handler_files: Vec::new(),
            role_handlers: Vec::new(),
            exported_roles: Vec::new(),
        }
    }

    /// A list of tasks (a play section, a block, a task file).
    pub fn steps_of(
        &mut self,
        list: &Node,
        what: &str,
        handlers: bool,
        inh: &Inherited,
        file_dir: &Path,
    ) -> Result<Vec<Step>, Diagnostic> {
        let items = match &list.kind {
            Kind::Seq(items) => items.as_slice(),
            Kind::Null => &[],
            _ => {
                return Err(list.err(format!(
                    "{what} must be a list of tasks, found {}",
                    list.type_name()
                )))
            }
        };
        let mut out = Vec::new();
        for t in items {
            out.extend(self.step(t, handlers, inh, file_dir)?);
        }
        Ok(out)
    }

    /// Load a task file (imported, included, or a role's) with the inherited keywords.
    pub fn task_file(
        &mut self,
        path: &Path,
        referenced_at: &Pos,
        inh: &Inherited,
    ) -> Result<Vec<Step>, Diagnostic> {
        let canon = std::fs::canonicalize(path).unwrap_or(path.to_path_buf());
        if self.stack.contains(&canon) {
            return Err(Diagnostic::at(
                referenced_at,
                format!("{} includes itself", path.display()),
            ));
        }
        let node = yaml::load_file(path)?;
        self.stack.push(canon);
        let r = self.steps_of(&node, "a task file", false, inh, &dir_of(path));
        self.stack.pop();
        r
    }

    /// Load a role named at run time (`include_role` with a templated name); its handlers are
    /// left in `role_handlers`.
    pub fn runtime_role(
        &mut self,
        name: &str,
        at: &Pos,
        from: &RoleFrom,
        params: Map<String, Value>,
        inh: &Inherited,
    ) -> Result<Vec<Step>, Diagnostic> {
        let node = yaml::json_to_node(&Value::String(name.to_string()), at);
        let opts = RoleOpts {
            from: from.clone(),
            dedupe: false,
            export: false,
        };
        self.role(&node, params, inh, &opts)
    }

    /// Where a relative task file name is searched: beside the including file, in the
    /// role's `tasks/`, beside the playbook.
    fn task_search(&self, file_dir: &Path, inh: &Inherited) -> Vec<PathBuf> {
        let mut dirs = vec![file_dir.to_path_buf()];
        if let Some(r) = &inh.role {
            dirs.push(r.path.join("tasks"));
        }
        dirs.push(self.play_dir.to_path_buf());
        dirs.dedup();
        dirs
    }

    fn step(
        &mut self,
        node: &Node,
        handlers: bool,
        inh: &Inherited,
        file_dir: &Path,
    ) -> Result<Vec<Step>, Diagnostic> {
        let entries = map_of(node, "a task")?;
        if let Some(b) = node.get("block") {
            if handlers {
                return Err(node.err("blocks in handlers are not supported by fixpoint yet"));
            }
            let keys: Vec<&str> = INHERITED_KEYS
                .iter()
                .copied()
                .chain(["block", "rescue", "always"])
                .collect();
            check_keys(entries, &keys, TASK_KEYS_NOT_YET, "a block", |_| false)?;
            let inner = inh.with_keywords(node)?;
            let section = |me: &mut Self, key: &str| -> Result<Vec<Step>, Diagnostic> {
                match node.get(key) {
                    Some(n) => me.steps_of(n, &format!("`{key}`"), false, &inner, file_dir),
                    None => Ok(Vec::new()),
                }
            };
            let block = self.steps_of(b, "`block`", false, &inner, file_dir)?;
            let rescue = section(self, "rescue")?;
            let always = section(self, "always")?;
            return Ok(vec![Step::Block(Box::new(Block {
                name: node.get("name").map(|n| string_of(n, "name")).transpose()?,
                pos: node.pos.clone(),
                block,
                rescue,
                always,
            }))]);
        }
        for k in ["rescue", "always"] {
            if let Some((_, kpos, _)) = entries.iter().find(|(e, _, _)| e == k) {
                return Err(Diagnostic::at(
                    kpos,
                    format!("`{k}` needs a `block` beside it"),
                ));
            }
        }
        let action = entries.iter().find(|(k, _, _)| {
            matches!(
                short_name(k),
                "import_tasks" | "include_tasks" | "import_role" | "include_role" | "meta"
            )
        });
        let Some((key, kpos, arg)) = action else {
            let task = match local_action(node)? {
                Some(rewritten) => load_task(&rewritten, handlers, inh, self.play_dir)?,
                None => load_task(node, handlers, inh, self.play_dir)?,
            };
            return Ok(vec![Step::Task(Box::new(task))]);
        };
        if handlers {
            return Err(Diagnostic::at(
                kpos,
                format!("`{key}` in handlers is not supported by fixpoint yet"),
            ));
        }
        let is_action = |k: &str| k == key;
        let loop_keys = ["loop", "with_items", "with_list", "loop_control"];
        // An include loops over a list; the other `with_*` lookups are for tasks.
        let include_not_yet: Vec<&str> = TASK_KEYS_NOT_YET
            .iter()
            .copied()
            .chain(
                LoopKind::KEYS
                    .iter()
                    .map(|(k, _)| *k)
                    .filter(|k| !loop_keys.contains(k)),
            )
            .collect();
        match short_name(key) {
            "meta" => {
                check_keys(
                    entries,
                    &["name", "when", "tags"],
                    &[],
                    "a meta task",
                    is_action,
                )?;
                let a = string_of(arg, "meta")?;
                let action = match a.as_str() {
                    "flush_handlers" => MetaAction::FlushHandlers,
                    "end_play" => MetaAction::EndPlay,
                    "end_host" => MetaAction::EndHost,
                    "noop" => MetaAction::Noop,
                    "clear_facts" | "clear_host_errors" | "refresh_inventory"
                    | "reset_connection" | "end_batch" | "end_role" => {
                        return Err(arg.err(format!("`meta: {a}` is not supported by fixpoint yet")))
                    }
                    _ => {
                        return Err(arg
                            .err(format!("unknown meta action `{a}`"))
                            .help("meta actions: flush_handlers, end_play, end_host, noop"))
                    }
                };
                let inner = inh.with_keywords(node)?;
                Ok(vec![Step::Meta(Box::new(Meta {
                    action,
                    pos: node.pos.clone(),
                    when: inner.when,
                    tags: inner.tags,
                    role: inner.role,
                    vars: inner.vars,
                }))])
            }
            "import_tasks" => {
                check_keys(
                    entries,
                    INHERITED_KEYS,
                    TASK_KEYS_NOT_YET,
                    "an import_tasks",
                    is_action,
                )?;
                let file = file_arg(arg, key)?;
                if crate::templating::Templar::is_template(&file) {
                    return Err(arg
                        .err("`import_tasks` is static: its file name cannot use variables")
                        .help("use `include_tasks` to choose the file at run time"));
                }
                let path = find_in(&self.task_search(file_dir, inh), &file).ok_or_else(|| {
                    not_found(arg, "task file", &file, &self.task_search(file_dir, inh))
                })?;
                let inner = inh.with_keywords(node)?;
                self.task_file(&path, &arg.pos, &inner)
            }
            "include_tasks" => {
                let keys: Vec<&str> = INHERITED_KEYS.iter().copied().chain(loop_keys).collect();
                check_keys(
                    entries,
                    &keys,
                    &include_not_yet,
                    "an include_tasks",
                    is_action,
                )?;
                let file = file_arg(arg, key)?;
                let search = self.task_search(file_dir, inh);
                let source = if crate::templating::Templar::is_template(&file) {
                    IncludeSource::TasksFile {
                        file,
                        search,
                        inherit: Box::new(inh.clone()),
                    }
                } else {
                    let path = find_in(&search, &file)
                        .ok_or_else(|| not_found(arg, "task file", &file, &search))?;
                    IncludeSource::Loaded(self.task_file(&path, &arg.pos, inh)?)
                };
                Ok(vec![Step::Include(Box::new(include_of(
                    node,
                    inh,
                    "include_tasks",
                    source,
                )?))])
            }
            short @ ("import_role" | "include_role") => {
                let include = short == "include_role";
                let keys: Vec<&str> = INHERITED_KEYS
                    .iter()
                    .copied()
                    .chain(if include { &loop_keys[..] } else { &[] }.iter().copied())
                    .collect();
                check_keys(
                    entries,
                    &keys,
                    &include_not_yet,
                    &format!("an {short}"),
                    is_action,
                )?;
                let am = map_of(arg, &format!("`{short}`"))?;
                check_keys(
                    am,
                    &[
                        "name",
                        "tasks_from",
                        "vars_from",
                        "defaults_from",
                        "handlers_from",
                    ],
                    &["apply", "rolespec_validate", "allow_duplicates", "public"],
                    &format!("`{short}`"),
                    |_| false,
                )?;
                let name = arg
                    .get("name")
                    .ok_or_else(|| arg.err(format!("`{short}` needs the role's `name`")))?;
                let opt = |k: &str| arg.get(k).map(|n| string_of(n, k)).transpose();
                let opts = RoleOpts {
                    from: RoleFrom {
                        tasks: opt("tasks_from")?,
                        vars: opt("vars_from")?,
                        defaults: opt("defaults_from")?,
                        handlers: opt("handlers_from")?,
                    },
                    dedupe: false,
                    export: !include,
                };
                let params = match node.get("vars") {
                    Some(v) => vars_of(v, "`vars`")?,
                    None => Map::new(),
                };
                let templated_name = name
                    .as_str()
                    .is_some_and(crate::templating::Templar::is_template);
                if include && templated_name {
                    // The role is known only when a host reaches the include (e.g. a loop
                    // over role names): it is loaded then.
                    let source = IncludeSource::Role {
                        name: string_of(name, "name")?,
                        from: opts.from,
                        params,
                        inherit: Box::new(inh.clone()),
                    };
                    let mut inc = include_of(node, inh, "include_role", source)?;
                    inc.vars = Map::new();
                    Ok(vec![Step::Include(Box::new(inc))])
                } else if include {
                    // The include's own keywords decide whether it runs; they do not reach
                    // the role's tasks (Ansible needs `apply:` for that).
                    let steps = self.role(name, params, inh, &opts)?;
                    let mut inc =
                        include_of(node, inh, "include_role", IncludeSource::Loaded(steps))?;
                    inc.vars = Map::new();
                    Ok(vec![Step::Include(Box::new(inc))])
                } else {
                    let mut inner = inh.with_keywords(node)?;
                    inner.vars = inh.vars.clone();
                    self.role(name, params, &inner, &opts)
                }
            }
            _ => unreachable!("matched above"),
        }
    }
}

/// The file of `import_tasks`/`include_tasks`: a name, or a mapping with `file:`.
fn file_arg(arg: &Node, key: &str) -> Result<String, Diagnostic> {
    match &arg.kind {
        Kind::Map(entries) => {
            check_keys(entries, &["file"], &["apply"], &format!("`{key}`"), |_| {
                false
            })?;
            let f = arg
                .get("file")
                .ok_or_else(|| arg.err(format!("`{key}` needs `file:`")))?;
            string_of(f, "file")
        }
        _ => string_of(arg, key),
    }
}

/// The first directory in `dirs` that holds `file` (absolute names are taken as they are).
pub fn find_in(dirs: &[PathBuf], file: &str) -> Option<PathBuf> {
    let p = Path::new(file);
    if p.is_absolute() {
        return p.is_file().then(|| p.to_path_buf());
    }
    dirs.iter().map(|d| joined(d, file)).find(|c| c.is_file())
}

/// `dir/file`, without a leading `./` when `dir` is the current directory (positions read better).
pub(crate) fn joined(dir: &Path, file: &str) -> PathBuf {
    if dir == Path::new(".") {
        PathBuf::from(file)
    } else {
        dir.join(file)
    }
}

fn not_found(at: &Node, what: &str, file: &str, dirs: &[PathBuf]) -> Diagnostic {
    at.err(format!(
        "{what} `{file}` not found; looked in {}",
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// The run-time part of `include_tasks` / `include_role`.
fn include_of(
    node: &Node,
    inh: &Inherited,
    action: &'static str,
    source: IncludeSource,
) -> Result<Include, Diagnostic> {
    let lp = loop_of(node, false)?;
    let mut tags = inh.tags.clone();
    tags.extend(
        node.get("tags")
            .map(|n| strings_of(n, "tags"))
            .transpose()?
            .unwrap_or_default(),
    );
    Ok(Include {
        role: inh.role.clone(),
        inherited_vars: inh.vars.clone(),
        name: node.get("name").map(|n| string_of(n, "name")).transpose()?,
        pos: node.pos.clone(),
        when: node
            .get("when")
            .map(|n| conditions_of(n, "when"))
            .transpose()?
            .unwrap_or_default(),
        loop_items: lp.items,
        loop_kind: lp.kind,
        loop_var: lp.var,
        index_var: lp.index_var,
        vars: match node.get("vars") {
            Some(v) => vars_of(v, "`vars`")?,
            None => Map::new(),
        },
        tags,
        action,
        source,
    })
}

/// The loop of a task or include: its raw value, its kind (`loop`, `with_items`, `with_dict`…),
/// `loop_var` and `index_var`. `task`: a task also takes `pause` and `extended` (an include
/// does not).
pub(crate) struct LoopSpec {
    pub items: Option<Value>,
    pub kind: LoopKind,
    pub var: String,
    pub index_var: Option<String>,
}

fn loop_of(node: &Node, task: bool) -> Result<LoopSpec, Diagnostic> {
    let opt = |key: &str| node.get(key);
    let mut present = LoopKind::KEYS
        .iter()
        .filter_map(|(k, kind)| node.get(k).map(|n| (*k, *kind, n)));
    let first = present.next();
    if let (Some((a, _, _)), Some((b, _, n))) = (first, present.next()) {
        return Err(n.err(format!(
            "a task has one loop, but this one has `{a}` and `{b}`"
        )));
    }
    let mut var = "item".to_string();
    let mut index_var = None;
    if let Some(lc) = opt("loop_control") {
        let task_only = ["pause", "extended"];
        check_keys(
            map_of(lc, "`loop_control`")?,
            &["loop_var", "index_var", "label"],
            if task { &[] } else { &task_only },
            "`loop_control`",
            |k| task && task_only.contains(&k),
        )?;
        if let Some(v) = lc.get("loop_var") {
            var = string_of(v, "loop_var")?;
            check_var_name(&var, &v.pos)?;
        }
        if let Some(v) = lc.get("index_var") {
            index_var = Some(string_of(v, "index_var")?);
        }
    }
    Ok(LoopSpec {
        items: first.map(|(_, _, n)| n.to_json()),
        kind: first.map(|(_, k, _)| k).unwrap_or_default(),
        var,
        index_var,
    })
}

fn load_play(node: &Node, dir: &Path, roles_path: &[PathBuf]) -> Result<Play, Diagnostic> {
    let entries = map_of(node, "a play")?;
    check_keys(entries, PLAY_KEYS, PLAY_KEYS_NOT_YET, "a play", |_| false)?;
    let hosts = match node.get("hosts") {
        Some(h) => match &h.kind {
            Kind::Seq(items) => items
                .iter()
                .map(|i| string_of(i, "hosts"))
                .collect::<Result<Vec<_>, _>>()?
                .join(":"),
            _ => string_of(h, "hosts")?,
        },
        None => {
            return Err(node
                .err("this play has no `hosts:`")
                .help("add `hosts: localhost` (or a group or pattern from the inventory)"))
        }
    };
    // Play tags and no_log reach every task, as block keywords do.
    let base = Inherited {
        tags: match node.get("tags") {
            Some(t) => strings_of(t, "tags")?,
            None => Vec::new(),
        },
        no_log: match node.get("no_log") {
            Some(n) => bool_of(n, "no_log")?,
            None => false,
        },
        ..Inherited::default()
    };
    let mut loader = Loader::new(dir, roles_path);
    let section = |loader: &mut Loader, key: &str, handlers: bool| match node.get(key) {
        Some(list) => loader.steps_of(list, &format!("`{key}`"), handlers, &base, dir),
        None => Ok(Vec::new()),
    };
    let pre_tasks = section(&mut loader, "pre_tasks", false)?;
    let mut roles = Vec::new();
    if let Some(list) = node.get("roles") {
        match &list.kind {
            Kind::Seq(items) => {
                for entry in items {
                    roles.extend(loader.roles_entry(entry, &base)?);
                }
            }
            Kind::Null => {}
            _ => return Err(list.err("`roles` must be a list of roles")),
        }
    }
    let tasks = section(&mut loader, "tasks", false)?;
    let post_tasks = section(&mut loader, "post_tasks", false)?;
    let mut role_defaults = Map::new();
    let mut role_vars = Map::new();
    for r in &loader.exported_roles {
        role_defaults.extend((*r.defaults).clone());
        role_vars.extend((*r.vars).clone());
    }
    let mut handlers = std::mem::take(&mut loader.role_handlers);
    for s in section(&mut loader, "handlers", true)? {
        if let Step::Task(t) = s {
            handlers.push(*t);
        }
    }
    let mut vars_files = Vec::new();
    let mut file_err: Option<Diagnostic> = None;
    if let Some(vf) = node.get("vars_files") {
        match &vf.kind {
            Kind::Seq(items) => {
                for i in items {
                    vars_files.push((string_of(i, "vars_files")?, i.pos.clone()));
                }
            }
            Kind::Null => {}
            _ => vars_files.push((string_of(vf, "vars_files")?, vf.pos.clone())),
        }
    }
    let mut vars_from_files = Map::new();
    vars_files.retain(|(path, pos)| {
        if crate::templating::Templar::is_template(path) {
            return true;
        }
        match load_vars_file(&dir.join(path), pos) {
            Ok(m) => vars_from_files.extend(m),
            Err(e) => {
                file_err.get_or_insert(e);
            }
        }
        false
    });
    if let Some(e) = file_err {
        return Err(e);
    }
    let opt_bool = |key: &str| -> Result<Option<bool>, Diagnostic> {
        node.get(key).map(|n| bool_of(n, key)).transpose()
    };
    let opt_string = |key: &str| -> Result<Option<String>, Diagnostic> {
        node.get(key).map(|n| string_of(n, key)).transpose()
    };
    let play =
        Play {
            vars_from_files,
            name: opt_string("name")?.unwrap_or_else(|| hosts.clone()),
            hosts,
            pos: node.pos.clone(),
            dir: dir.to_path_buf(),
            vars: match node.get("vars") {
                Some(v) => vars_of(v, "`vars`")?,
                None => Map::new(),
            },
            vars_files,
            gather_facts: opt_bool("gather_facts")?.unwrap_or(true),
            tags: base.tags.clone(),
            pre_tasks,
            roles,
            tasks,
            post_tasks,
            handlers,
            role_defaults: Arc::new(role_defaults),
            role_vars: Arc::new(role_vars),
            become_: opt_bool("become")?,
            become_user: opt_string("become_user")?,
            connection: opt_string("connection")?,
            remote_user: opt_string("remote_user")?,
            check_mode: opt_bool("check_mode")?,
            diff: opt_bool("diff")?,
            environment: match node.get("environment") {
                Some(v) => env_of(v)?,
                None => Map::new(),
            },
            force_handlers: opt_bool("force_handlers")?.unwrap_or(false),
            ignore_errors: opt_bool("ignore_errors")?.unwrap_or(false),
            serial: match node.get("serial") {
                Some(n) => serial_of(n)?,
                None => Vec::new(),
            },
            free: false,
            order: match node.get("order") {
                Some(n) => match string_of(n, "order")?.as_str() {
                    "inventory" => HostOrder::Inventory,
                    "reverse_inventory" => HostOrder::ReverseInventory,
                    "sorted" => HostOrder::Sorted,
                    "reverse_sorted" => HostOrder::ReverseSorted,
                    "shuffle" => HostOrder::Shuffle,
                    other => return Err(n.err(format!("unknown host order `{other}`")).help(
                        "order: inventory, reverse_inventory, sorted, reverse_sorted or shuffle",
                    )),
                },
                None => HostOrder::Inventory,
            },
            any_errors_fatal: opt_bool("any_errors_fatal")?.unwrap_or(false),
            max_fail_percentage: match node.get("max_fail_percentage") {
                Some(n) => Some(percent_of(n, "max_fail_percentage")?),
                None => None,
            },
        };
    let mut play = play;
    if let Some(n) = node.get("strategy") {
        let s = string_of(n, "strategy")?;
        match s.as_str() {
            "linear" => {}
            "free" => play.free = true,
            _ => {
                return Err(n
                    .err(format!("strategy `{s}` is not supported by fixpoint yet"))
                    .help("fixpoint runs `linear` and `free`"))
            }
        }
    }
    if play.free {
        // These keywords coordinate hosts, which a free play does not do.
        for key in ["any_errors_fatal", "max_fail_percentage"] {
            if let Some((_, kpos, _)) = entries.iter().find(|(k, _, _)| k == key) {
                return Err(Diagnostic::at(
                    kpos,
                    format!("`{key}` with `strategy: free` is not supported by fixpoint yet"),
                ));
            }
        }
        if let Some(t) = play.all_tasks().into_iter().find(|t| t.run_once) {
            return Err(Diagnostic::at(
                &t.pos,
                "`run_once` with `strategy: free` is not supported by fixpoint yet",
            ));
        }
    }
    Ok(play)
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

impl Play {
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

/// A percentage: `30`, `30%`, `"30%"`.
fn percent_of(n: &Node, key: &str) -> Result<f64, Diagnostic> {
    let bad = || {
        n.err(format!(
            "`{key}` must be a percentage such as 30 or \"30%\""
        ))
    };
    let v = match &n.kind {
        Kind::Int(i) => *i as f64,
        Kind::Float(f) => *f,
        Kind::Str(s) => s
            .trim()
            .trim_end_matches('%')
            .trim()
            .parse()
            .map_err(|_| bad())?,
        _ => return Err(bad()),
    };
    if !(0.0..=100.0).contains(&v) {
        return Err(bad());
    }
    Ok(v)
}

/// `serial`: a number, a percentage, or a list of them.
fn serial_of(n: &Node) -> Result<Vec<BatchSize>, Diagnostic> {
    let one = |n: &Node| -> Result<BatchSize, Diagnostic> {
        match &n.kind {
            Kind::Int(i) if *i > 0 => Ok(BatchSize::Count(*i as usize)),
            Kind::Str(s) if s.trim().ends_with('%') => {
                Ok(BatchSize::Percent(percent_of(n, "serial")?))
            }
            Kind::Str(s) => match s.trim().parse::<usize>() {
                Ok(i) if i > 0 => Ok(BatchSize::Count(i)),
                _ => Err(n.err("`serial` must be a positive number or a percentage")),
            },
            _ => Err(n.err("`serial` must be a positive number or a percentage")),
        }
    };
    match &n.kind {
        Kind::Seq(items) => items.iter().map(one).collect(),
        _ => Ok(vec![one(n)?]),
    }
}

/// Load a YAML vars file: a mapping of variable names to values.
pub fn load_vars_file(path: &Path, referenced_at: &Pos) -> Result<Map<String, Value>, Diagnostic> {
    if !path.exists() {
        return Err(Diagnostic::at(
            referenced_at,
            format!("vars file {} does not exist", path.display()),
        )
        .help("paths in vars_files are relative to the playbook's directory"));
    }
    let node = yaml::load_file(path)?;
    vars_of(&node, "a vars file")
}

fn env_of(node: &Node) -> Result<Map<String, Value>, Diagnostic> {
    match &node.kind {
        Kind::Map(_) => Ok(node.to_json().as_object().cloned().unwrap_or_default()),
        Kind::Str(_) => Err(node
            .err("`environment` given as a variable is not supported yet")
            .help("write the environment variables as a mapping")),
        _ => Err(node.err("`environment` must be a mapping of variable names to values")),
    }
}

/// Split Ansible's `k=v k2="a b"` free-form arguments.
pub fn parse_kv(s: &str, pos: &Pos) -> Result<Map<String, Value>, Diagnostic> {
    let words = shlex::split(s).ok_or_else(|| {
        Diagnostic::at(
            pos,
            format!("cannot parse the arguments `{s}`: unbalanced quotes"),
        )
    })?;
    let mut m = Map::new();
    for w in words {
        match w.split_once('=') {
            Some((k, v)) if !k.is_empty() => {
                m.insert(k.to_string(), Value::String(v.to_string()));
            }
            _ => {
                return Err(Diagnostic::at(
                    pos,
                    format!("expected key=value arguments, found `{w}`"),
                )
                .help("write the module's parameters as a mapping under the module name"))
            }
        }
    }
    Ok(m)
}

/// The parameters `command`/`shell` accept inline in their free-form string.
const COMMAND_INLINE: &[&str] = &["creates", "removes", "chdir", "executable", "stdin", "warn"];

fn free_form_command(s: &str) -> Map<String, Value> {
    let mut m = Map::new();
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| {
        regex::Regex::new(
            r#"(?:^|\s)(creates|removes|chdir|executable|stdin|warn)=("[^"]*"|'[^']*'|\S+)"#,
        )
        .expect("static regex")
    });
    let mut rest = s.to_string();
    for cap in re.captures_iter(s) {
        let key = cap[1].to_string();
        let raw = &cap[2];
        let val = raw.trim_matches(|c| c == '"' || c == '\'').to_string();
        debug_assert!(COMMAND_INLINE.contains(&key.as_str()));
        if key != "warn" {
            m.insert(key, Value::String(val));
        }
        rest = rest.replacen(cap[0].trim_start(), "", 1);
    }
    m.insert("cmd".into(), Value::String(rest.trim().to_string()));
    m
}

/// `local_action: <module> <args>` (or `{module: …, args…}`) is shorthand for the module with
/// `delegate_to: localhost`: the task is rewritten so, keeping the source positions.
fn local_action(node: &Node) -> Result<Option<Node>, Diagnostic> {
    let Some(entries) = node.as_map() else {
        return Ok(None);
    };
    let Some(idx) = entries.iter().position(|(k, _, _)| k == "local_action") else {
        return Ok(None);
    };
    let (_, kpos, value) = &entries[idx];
    if let Some((_, dpos, _)) = entries.iter().find(|(k, _, _)| k == "delegate_to") {
        return Err(Diagnostic::at(
            dpos,
            "a task with `local_action` already runs on localhost; remove `delegate_to`",
        ));
    }
    let (module, args) = match &value.kind {
        Kind::Str(s) => {
            let s = s.trim();
            let (m, rest) = s.split_once(char::is_whitespace).unwrap_or((s, ""));
            let args = Node {
                kind: if rest.trim().is_empty() {
                    Kind::Null
                } else {
                    Kind::Str(rest.trim().to_string())
                },
                pos: value.pos.clone(),
            };
            (m.to_string(), args)
        }
        Kind::Map(m) => {
            let module = value
                .get("module")
                .ok_or_else(|| value.err("`local_action` needs `module:`"))?;
            let mut rest = m.clone();
            rest.retain(|(k, _, _)| k != "module");
            (
                string_of(module, "module")?,
                Node {
                    kind: Kind::Map(rest),
                    pos: value.pos.clone(),
                },
            )
        }
        _ => return Err(value.err("`local_action` must be a module with its arguments")),
    };
    let mut rewritten = entries.to_vec();
    rewritten[idx] = (module, kpos.clone(), args);
    rewritten.push((
        "delegate_to".into(),
        kpos.clone(),
        Node {
            kind: Kind::Str("localhost".into()),
            pos: kpos.clone(),
        },
    ));
    Ok(Some(Node {
        kind: Kind::Map(rewritten),
        pos: node.pos.clone(),
    }))
}

/// Actions fixpoint runs itself on the controller (or through the agent's facts) rather than
/// as a module: `include_vars`, `setup`.
fn controller_action(k: &str) -> Option<&'static str> {
    match short_name(k) {
        "include_vars" => Some("include_vars"),
        "setup" => Some("setup"),
        _ => None,
    }
}

fn load_task(
    node: &Node,
    handler: bool,
    inh: &Inherited,
    play_dir: &Path,
) -> Result<Task, Diagnostic> {
    let entries = map_of(node, "a task")?;
    let mut module: Option<(&'static str, &Node, &Pos)> = None;
    for (k, kpos, v) in entries {
        if TASK_KEYS.contains(&k.as_str()) {
            if k == "listen" && !handler {
                return Err(Diagnostic::at(kpos, "`listen` is only valid on handlers"));
            }
            continue;
        }
        if TASK_KEYS_NOT_YET.contains(&k.as_str()) {
            return Err(
                Diagnostic::at(kpos, format!("`{k}` is not supported by fixpoint yet")).help(
                    "remove it, or keep this playbook on ansible-playbook until support lands",
                ),
            );
        }
        match fixpoint_modules::canonical_name(k).or_else(|| controller_action(k)) {
            Some(m) => {
                if let Some((prev, _, _)) = module {
                    return Err(Diagnostic::at(
                        kpos,
                        format!(
                            "a task runs one module, but this one names both `{prev}` and `{k}`"
                        ),
                    )
                    .help("split it into two tasks"));
                }
                module = Some((m, v, kpos));
            }
            None => {
                let all = TASK_KEYS
                    .iter()
                    .chain(fixpoint_modules::registry::ALL_MODULES.iter())
                    .copied();
                let mut d = Diagnostic::at(
                    kpos,
                    format!("`{k}` is neither a task keyword nor a module fixpoint knows"),
                );
                d = match suggest(k, all) {
                    Some(s) => d.help(format!("did you mean `{s}`?")),
                    None => d.help(format!(
                        "modules: {}",
                        fixpoint_modules::registry::ALL_MODULES.join(", ")
                    )),
                };
                return Err(d);
            }
        }
    }
    let Some((module, raw_params, mod_pos)) = module else {
        return Err(node
            .err("this task names no module")
            .help("add one module, e.g. `copy:`, `file:`, `command:`"));
    };

    let mut params = match &raw_params.kind {
        Kind::Map(_) => raw_params
            .to_json()
            .as_object()
            .cloned()
            .unwrap_or_default(),
        Kind::Null => Map::new(),
        Kind::Str(s) if module == "command" || module == "shell" => free_form_command(s),
        Kind::Str(s) if module == "set_fact" || module == "debug" || module == "fail" => {
            parse_kv(s, &raw_params.pos)?
        }
        Kind::Str(s) if module == "include_vars" && !s.contains('=') => {
            let mut m = Map::new();
            m.insert("file".into(), Value::String(s.clone()));
            m
        }
        Kind::Str(s) => parse_kv(s, &raw_params.pos)?,
        _ => {
            return Err(raw_params.err(format!(
                "the parameters of `{module}` must be a mapping, found {}",
                raw_params.type_name()
            )))
        }
    };
    if let Some(args) = node.get("args") {
        match &args.kind {
            Kind::Map(_) => {
                for (k, v) in args.to_json().as_object().cloned().unwrap_or_default() {
                    params.insert(k, v);
                }
            }
            _ => return Err(args.err("`args` must be a mapping of module parameters")),
        }
    }
    if let Some(k) = params.keys().find(|k| k.starts_with('_')) {
        return Err(Diagnostic::at(
            &param_pos(raw_params, k).unwrap_or_else(|| mod_pos.clone()),
            format!("unknown parameter `{k}` for module `{module}`"),
        ));
    }

    let opt = |key: &str| node.get(key);
    let mut loop_label = None;
    let mut loop_pause = 0.0;
    let mut loop_extended = false;
    if let Some(lc) = opt("loop_control") {
        let lce = map_of(lc, "`loop_control`")?;
        check_keys(
            lce,
            &["loop_var", "index_var", "label", "pause", "extended"],
            &[],
            "`loop_control`",
            |_| false,
        )?;
        if let Some(v) = lc.get("label") {
            loop_label = Some(string_of(v, "label")?);
        }
        if let Some(v) = lc.get("pause") {
            loop_pause = match v.kind {
                Kind::Int(i) if i >= 0 => i as f64,
                Kind::Float(f) if f >= 0.0 => f,
                _ => return Err(v.err("`pause` must be a number of seconds")),
            };
        }
        if let Some(v) = lc.get("extended") {
            loop_extended = bool_of(v, "extended")?;
        }
    }
    let lp = loop_of(node, true)?;

    let opt_bool = |key: &str| -> Result<Option<bool>, Diagnostic> {
        opt(key).map(|n| bool_of(n, key)).transpose()
    };
    let opt_string = |key: &str| -> Result<Option<String>, Diagnostic> {
        opt(key).map(|n| string_of(n, key)).transpose()
    };
    let register = opt_string("register")?;
    if let (Some(r), Some(n)) = (&register, opt("register")) {
        check_var_name(r, &n.pos)?;
    }
    let mut task = Task {
        name: opt_string("name")?,
        module,
        params: Value::Object(params),
        pos: node.pos.clone(),
        when: opt("when")
            .map(|n| conditions_of(n, "when"))
            .transpose()?
            .unwrap_or_default(),
        loop_items: lp.items,
        loop_kind: lp.kind,
        loop_var: lp.var,
        index_var: lp.index_var,
        loop_label,
        loop_pause,
        loop_extended,
        register,
        notify: opt("notify")
            .map(|n| strings_of(n, "notify"))
            .transpose()?
            .unwrap_or_default(),
        listen: opt("listen")
            .map(|n| strings_of(n, "listen"))
            .transpose()?
            .unwrap_or_default(),
        tags: opt("tags")
            .map(|n| strings_of(n, "tags"))
            .transpose()?
            .unwrap_or_default(),
        changed_when: opt("changed_when")
            .map(|n| conditions_of(n, "changed_when"))
            .transpose()?,
        failed_when: opt("failed_when")
            .map(|n| conditions_of(n, "failed_when"))
            .transpose()?,
        ignore_errors: opt_bool("ignore_errors")?.unwrap_or(false),
        check_mode: opt_bool("check_mode")?,
        diff: opt_bool("diff")?,
        vars: match opt("vars") {
            Some(v) => vars_of(v, "`vars`")?,
            None => Map::new(),
        },
        once: opt_string("once")?,
        become_: opt_bool("become")?,
        become_user: opt_string("become_user")?,
        no_log: opt_bool("no_log")?.unwrap_or(false),
        environment: match opt("environment") {
            Some(v) => env_of(v)?,
            None => Map::new(),
        },
        timeout: match opt("timeout") {
            Some(n) => match n.kind {
                Kind::Int(i) if i > 0 => Some(i as u64),
                _ => return Err(n.err("`timeout` must be a positive number of seconds")),
            },
            None => None,
        },
        role: None,
        throttle: match opt("throttle") {
            Some(n) => match n.kind {
                Kind::Int(i) if i > 0 => Some(i as usize),
                _ => return Err(n.err("`throttle` must be a positive number of hosts")),
            },
            None => None,
        },
        delegate_to: opt_string("delegate_to")?,
        run_once: opt_bool("run_once")?.unwrap_or(false),
        until: opt("until")
            .map(|n| conditions_of(n, "until"))
            .transpose()?,
        retries: match opt("retries") {
            Some(n) => match n.kind {
                Kind::Int(i) if i >= 0 => i as u32,
                _ => return Err(n.err("`retries` must be a number")),
            },
            // Ansible's default when `until` is given.
            None => 3,
        },
        delay: match opt("delay") {
            Some(n) => match n.kind {
                Kind::Int(i) if i >= 0 => i as u64,
                _ => return Err(n.err("`delay` must be a number of seconds")),
            },
            None => 5,
        },
    };
    inh.apply(&mut task);
    // A value written on the task itself wins over the block's (or play's), also when false.
    for (key, field) in [
        ("ignore_errors", &mut task.ignore_errors),
        ("no_log", &mut task.no_log),
        ("run_once", &mut task.run_once),
    ] {
        if let Some(v) = opt_bool(key)? {
            *field = v;
        }
    }
    check_module_params(&task, raw_params, mod_pos, &task.search_dirs(play_dir))?;
    check_guard(&task, mod_pos)?;
    Ok(task)
}

/// The position of a parameter key inside the module's mapping, when it was written there.
fn param_pos(raw: &Node, key: &str) -> Option<Pos> {
    raw.as_map()?
        .iter()
        .find(|(k, _, _)| k == key)
        .map(|(_, p, _)| p.clone())
}

fn contains_template(v: &Value) -> bool {
    match v {
        Value::String(s) => crate::templating::Templar::is_template(s),
        Value::Array(a) => a.iter().any(contains_template),
        Value::Object(m) => m.values().any(contains_template),
        _ => false,
    }
}

/// Check parameters now where they are not templated; templated values are checked again after
/// rendering, on the host's values.
fn check_module_params(
    task: &Task,
    raw: &Node,
    mod_pos: &Pos,
    dirs: &[PathBuf],
) -> Result<(), Diagnostic> {
    let params = task.params.as_object().cloned().unwrap_or_default();
    let templated: Vec<String> = params
        .iter()
        .filter(|(_, v)| contains_template(v))
        .map(|(k, _)| k.clone())
        .collect();
    let mut static_params = params.clone();
    // set_fact's keys are variable names: only the keys are checked, so nothing is taken out.
    if task.module != "set_fact" {
        for k in &templated {
            static_params.remove(k);
        }
    }
    let result = actions::check_params(task.module, &Value::Object(static_params), dirs);
    match result {
        Ok(()) => Ok(()),
        Err(e) => {
            // A required field we removed because it is templated is not an error yet.
            // (The error may name the canonical field while the playbook used an alias.)
            if !templated.is_empty()
                && (e.msg.starts_with("missing field")
                    || templated.iter().any(|k| e.msg.contains(&format!("`{k}`"))))
            {
                return Ok(());
            }
            let top = e.path.split(['.', '[']).next().unwrap_or("").to_string();
            let field = if top.is_empty() || top == "." {
                // serde names unknown fields in the message, not the path.
                e.msg
                    .split('`')
                    .nth(1)
                    .map(str::to_string)
                    .unwrap_or_default()
            } else {
                top
            };
            let pos = param_pos(raw, &field).unwrap_or_else(|| mod_pos.clone());
            Err(Diagnostic::at(
                &pos,
                format!("invalid parameters for module `{}`: {e}", task.module),
            )
            .help(format!(
                "see the `{}` module in README.md for its parameters",
                task.module
            )))
        }
    }
}

/// The idempotency rule: a raw command must say how a second run recognises it is done.
fn check_guard(task: &Task, mod_pos: &Pos) -> Result<(), Diagnostic> {
    if task.module != "command" && task.module != "shell" {
        return Ok(());
    }
    let p = task.params.as_object();
    let has = |k: &str| p.is_some_and(|m| m.get(k).is_some_and(|v| !v.is_null()));
    if has("creates")
        || has("removes")
        || has("unless")
        || has("onlyif")
        || task.once.is_some()
        || task.is_read_only()
    {
        return Ok(());
    }
    Err(Diagnostic::at(
        mod_pos,
        format!(
            "unguarded `{}` task{}: it would run again on every run",
            task.module,
            task.name
                .as_ref()
                .map(|n| format!(" \"{n}\""))
                .unwrap_or_default()
        ),
    )
    .help(
        "add a guard that lets a second run recognise the work is done: `creates: <path>`, \
         `removes: <path>`, `unless: <command that succeeds when done>`, `onlyif: <command that \
         succeeds when needed>`, `once: <key>` (run once, recorded in the host journal), or \
         `changed_when: false` if the command only reads",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_form_command_extracts_inline_guards() {
        let m = free_form_command("touch /tmp/x creates=/tmp/x chdir=/tmp");
        assert_eq!(m["cmd"], "touch /tmp/x");
        assert_eq!(m["creates"], "/tmp/x");
        assert_eq!(m["chdir"], "/tmp");
    }

    #[test]
    fn kv_arguments() {
        let pos = Pos::file_only(Path::new("x.yml"));
        let m = parse_kv("path=/tmp/a state=directory msg=\"a b\"", &pos).unwrap();
        assert_eq!(m["msg"], "a b");
        assert!(parse_kv("oops", &pos).is_err());
    }
}
