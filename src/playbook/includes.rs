//! Task lists and what they pull in: blocks, `meta`, `import_tasks`/`include_tasks`,
//! `import_role`/`include_role` and `roles:`, expanded into steps by the `Loader`.
//!
//! Static imports and roles are loaded here, at load time; a templated include is left as an
//! `Include` for the engine, which calls back into the `Loader` when a host reaches it.
//! Single tasks are `task`'s, role directories `roles`'s: this file only drives them.

use super::ast::{
    Block, Include, IncludeSource, Inherited, LoopKind, Meta, MetaAction, RoleCtx, RoleFrom, Step,
    Task,
};
use super::files::{dir_of, find_in, looked_in};
use super::keywords::{
    bool_of, check_keys, conditions_of, loop_of, map_of, short_name, string_of, strings_of,
    vars_of, BLOCK_KEYS, INCLUDE_ACTIONS, INHERITED_KEYS, TASK_KEYS_NOT_YET,
};
use super::roles::{self, Listed, Role, RoleDedup, RoleOpts, RoleVars};
use super::task::{action_keyword, load_task};
use crate::diag::{Diagnostic, Pos};
use crate::yaml::{self, Kind, Node};
use fixpoint_modules::params::is_template;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod args;
mod role_steps;
use args::*;

/// Loads task lists, imports and roles for one play, and remembers the roles it expanded.
pub struct Loader<'a> {
    play_dir: &'a Path,
    roles_path: &'a [PathBuf],
    /// Task files and roles being loaded, to refuse cycles.
    stack: Vec<PathBuf>,
    /// The identities (`RoleDedup::id`) of the roles loaded with the play: a later expansion
    /// of one is a repeat.
    seen_roles: Vec<u64>,
    /// Role handlers files already added to the play, with the role parameters they got.
    handler_files: Vec<(PathBuf, RoleVars)>,
    /// The handlers of the roles, added to the play's.
    pub role_handlers: Vec<Task>,
    /// While an `include_role` is loaded at load time: every handler its roles bring,
    /// whether or not the play has them already (`Include::handlers`).
    include_handlers: Option<Vec<Task>>,
    /// Roles whose defaults and vars the whole play sees, in the order they were loaded.
    pub(crate) exported_roles: Vec<Arc<RoleCtx>>,
    /// The play's roles (`roles:`, `import_role`) by name, in load order (`Play`).
    pub(crate) play_role_names: Vec<String>,
    /// The roles they depend on, each once (`Play`).
    pub(crate) dependent_role_names: Vec<String>,
    /// When set (loading a playbook), a task entry that is wrong is recorded here and left
    /// out, so that one load reports every wrong entry; when not (a host reaching a run-time
    /// include), the first error is returned.
    collected: Option<Vec<Diagnostic>>,
    /// The play's `vars:`: with the role's and block's variables, what a static import's
    /// templated file name may use (`static_name`).
    pub(crate) play_vars: Map<String, Value>,
    /// `-e`: known when the playbook loads too, above everything else.
    pub(crate) extra_vars: Map<String, Value>,
}

impl<'a> Loader<'a> {
    /// A loader for the play in `play_dir`, finding roles beside it, then in `roles_path`.
    pub fn new(play_dir: &'a Path, roles_path: &'a [PathBuf]) -> Loader<'a> {
        Loader {
            play_dir,
            roles_path,
            stack: Vec::new(),
            seen_roles: Vec::new(),
            handler_files: Vec::new(),
            role_handlers: Vec::new(),
            include_handlers: None,
            exported_roles: Vec::new(),
            play_role_names: Vec::new(),
            dependent_role_names: Vec::new(),
            collected: None,
            play_vars: Map::new(),
            extra_vars: Map::new(),
        }
    }

    /// This loader records each wrong task entry and goes on (see `take_collected`).
    pub fn collecting(mut self) -> Self {
        self.collected = Some(Vec::new());
        self
    }

    /// Record an error and go on when collecting; return it otherwise.
    pub fn record(&mut self, d: Diagnostic) -> Result<(), Diagnostic> {
        match &mut self.collected {
            Some(errors) => {
                errors.push(d);
                Ok(())
            }
            None => Err(d),
        }
    }

    /// The errors recorded so far by a collecting loader.
    pub fn take_collected(&mut self) -> Vec<Diagnostic> {
        self.collected
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
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
            match self.step(t, handlers, inh, file_dir) {
                Ok(steps) => out.extend(steps),
                Err(d) => self.record(d)?,
            }
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
        self.task_file_as(path, referenced_at, inh, false)
    }

    /// [`Self::task_file`], read as handlers when `handlers` (an `import_tasks` in handlers).
    fn task_file_as(
        &mut self,
        path: &Path,
        referenced_at: &Pos,
        inh: &Inherited,
        handlers: bool,
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
        let what = if handlers { "handlers" } else { "a task file" };
        let r = self.steps_of(&node, what, handlers, inh, &dir_of(path));
        self.stack.pop();
        r
    }

    /// A static import's templated file name, rendered with what is known at load time, as
    /// ansible-core does: the role's defaults, the play's vars, the role's vars, the block's
    /// vars and the role's parameters (in that precedence), `role_path`, `role_name` and
    /// `playbook_dir`. A value that is itself a template is rendered in turn.
    fn static_name(&self, file: &str, inh: &Inherited) -> Result<String, String> {
        match self.static_value(file, inh)? {
            Value::String(s) => Ok(s),
            other => Err(format!("it renders to {other}, not a file name")),
        }
    }

    /// [`Self::static_name`] for any value (a boolean argument written as a template).
    fn static_value(&self, file: &str, inh: &Inherited) -> Result<Value, String> {
        let mut vars = Map::new();
        if let Some(r) = &inh.role {
            vars.extend((*r.defaults).clone());
        }
        vars.extend(self.play_vars.clone());
        if let Some(r) = &inh.role {
            vars.extend((*r.vars).clone());
            vars.extend((*r.entry_vars).clone());
        }
        vars.extend(inh.vars.clone());
        let abs = |p: &Path| {
            std::fs::canonicalize(p)
                .unwrap_or_else(|_| p.to_path_buf())
                .display()
                .to_string()
        };
        if let Some(r) = &inh.role {
            vars.extend((*r.params).clone());
            vars.insert("role_path".into(), Value::String(abs(&r.path)));
            vars.insert(
                "role_name".into(),
                Value::String(r.short_name().to_string()),
            );
        }
        vars.insert("playbook_dir".into(), Value::String(abs(self.play_dir)));
        vars.extend(self.extra_vars.iter().map(|(k, v)| (k.clone(), v.clone())));
        let templar = crate::template::Templar::new();
        let ctx = crate::template::json_to_value(&Value::Object(vars));
        let mut name = file.to_string();
        // A variable whose value is a template (`dir: "{{ role_path }}/x"`) takes one more
        // pass each; a value that keeps naming itself stops here.
        for _ in 0..8 {
            if !is_template(&name) {
                return Ok(Value::String(name));
            }
            name = match templar.render_str(&name, &ctx).map_err(|e| e.to_string())? {
                Value::String(s) => s,
                other => return Ok(other),
            };
        }
        Err(format!("`{file}` does not settle to a value"))
    }

    /// A boolean argument of `include_role`/`import_role` (`public`, `allow_duplicates`,
    /// `rolespec_validate`): a value, or a template of what is known when the playbook loads
    /// (`"{{ False | bool }}"`), rendered then.
    fn static_bool(&self, n: &Node, key: &str, inh: &Inherited) -> Result<bool, Diagnostic> {
        let Some(text) = n.as_str().filter(|s| is_template(s)) else {
            return bool_of(n, key);
        };
        let not_known = |why: String| {
            n.err(format!(
                "`{key}` is decided when the playbook loads, with the play, role and block \
                 variables: {why}"
            ))
        };
        match self.static_value(text, inh).map_err(not_known)? {
            Value::Bool(b) => Ok(b),
            Value::String(s) => {
                let node = yaml::json_to_node(&Value::String(s), &n.pos);
                bool_of(&node, key)
            }
            other => Err(not_known(format!("it renders to {other}, not a boolean"))),
        }
    }

    /// Whether the role `name_node` names is being loaded (an include of itself).
    fn loading_role(&self, name_node: &Node) -> Result<bool, Diagnostic> {
        let dirs = roles::role_dirs(self.play_dir, self.roles_path);
        let role = roles::find_role(name_node, &dirs, self.play_dir, &[])?;
        Ok(self.stack.contains(&role.canon))
    }

    /// Where a relative task file name is searched: beside the including file, in the
    /// role's `tasks/`, beside the playbook.
    fn task_search(&self, file_dir: &Path, inh: &Inherited) -> Vec<PathBuf> {
        let mut dirs = vec![file_dir.to_path_buf()];
        // A role's: its `tasks/`, then the role itself (a handler's `tasks/handlers.yml`), as
        // ansible-core's search goes.
        if let Some(r) = &inh.role {
            dirs.push(r.path.join("tasks"));
            dirs.push(r.path.clone());
        }
        dirs.push(self.play_dir.to_path_buf());
        dirs.dedup();
        dirs
    }

    /// One entry of a task list: a block, a meta action, an import or include, or a task.
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
                .chain(BLOCK_KEYS.iter().copied())
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
        // `action: x args` / `local_action: x args`: read as the task `x: args` (an include
        // or a meta given so too).
        let rewritten = action_keyword(node)?;
        let (node, entries, run_time_module) = match &rewritten {
            Some((r, template)) => (r, map_of(r, "a task")?, template.as_deref()),
            None => (node, entries, None),
        };
        let action = entries
            .iter()
            .find(|(k, _, _)| INCLUDE_ACTIONS.contains(&short_name(k)));
        let Some((key, kpos, arg)) = action else {
            let task = load_task(node, handlers, inh, self.play_dir, run_time_module)?;
            return Ok(vec![Step::Task(Box::new(task))]);
        };
        if handlers && !matches!(short_name(key), "include_tasks" | "import_tasks" | "meta") {
            return Err(Diagnostic::at(
                kpos,
                format!("`{key}` in handlers is not supported by fixpoint yet"),
            ));
        }
        // `include_tasks: file=x.yml` (`include_role: name=r`): ansible-core splits a string of
        // key=value words into arguments, as for a module; a plain name stays the file's.
        let kv_arg;
        let arg = match kv_arguments(arg) {
            Some(map) => {
                kv_arg = map;
                &kv_arg
            }
            None => arg,
        };
        let is_action = |k: &str| k == key;
        // An include loops over what its loop gives, decided from data alone or the first of
        // a list of files (`with_first_found`, the usual way to include a platform's tasks);
        // the other `with_*` lookups that search the controller's files or run commands are
        // for tasks.
        let loop_keys = [
            "loop",
            "with_first_found",
            "with_items",
            "with_list",
            "with_sequence",
            "with_dict",
            "with_nested",
            "with_together",
            "with_subelements",
            "with_indexed_items",
            "with_flattened",
            "loop_control",
        ];
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
                let keys: &[&str] = if handlers {
                    &["name", "when", "tags", "listen"]
                } else {
                    &["name", "when", "tags"]
                };
                check_keys(entries, keys, &[], "a meta task", is_action)?;
                let a = string_of(arg, "meta")?;
                let action = match a.as_str() {
                    "flush_handlers" => MetaAction::FlushHandlers,
                    "end_play" => MetaAction::EndPlay,
                    "end_host" => MetaAction::EndHost,
                    "noop" => MetaAction::Noop,
                    "clear_facts" => MetaAction::ClearFacts,
                    "clear_host_errors" => MetaAction::ClearHostErrors,
                    "end_batch" => MetaAction::EndBatch,
                    "reset_connection" => MetaAction::ResetConnection,
                    // Refused where ansible-core refuses it when it loads the play.
                    "end_role" if handlers => {
                        return Err(arg
                            .err("`meta: end_role` cannot be used in a handler")
                            .help(
                            "handlers belong to the play, not to a role: there is no role to end",
                        ))
                    }
                    "end_role" if inh.role.is_none() => {
                        return Err(arg.err("`meta: end_role` cannot be used outside of a role"))
                    }
                    "end_role" => MetaAction::EndRole,
                    "refresh_inventory" => MetaAction::RefreshInventory,
                    _ => {
                        return Err(arg.err(format!("unknown meta action `{a}`")).help(
                            "meta actions: flush_handlers, end_play, end_host, end_batch, \
                             end_role, clear_facts, clear_host_errors, reset_connection, \
                             refresh_inventory, noop",
                        ))
                    }
                };
                let inner = inh.with_keywords(node)?;
                let name = match node.get("name") {
                    Some(n) => string_of(n, "name")?,
                    None => key.to_string(),
                };
                let meta = Step::Meta(Box::new(Meta {
                    action,
                    name,
                    named: node.get("name").is_some(),
                    pos: node.pos.clone(),
                    when: inner.when,
                    tags: inner.tags,
                    role: inner.role,
                    vars: inner.vars.into(),
                }));
                if handlers {
                    return Ok(vec![Step::Task(Box::new(handler_step(node, meta)?))]);
                }
                Ok(vec![meta])
            }
            "import_tasks" => {
                check_keys(
                    entries,
                    INHERITED_KEYS,
                    TASK_KEYS_NOT_YET,
                    "an import_tasks",
                    is_action,
                )?;
                let mut file = file_arg(arg, key)?;
                // The import's own `vars` are known when it loads, as the block's are.
                let inner = inh.with_keywords(node)?;
                if is_template(&file) {
                    file = self.static_name(&file, &inner).map_err(|why| {
                        arg.err(format!(
                            "`import_tasks` is static: its file name can use only the variables \
                             known when the playbook loads (play, role and block variables, \
                             its own `vars`, `-e`, `role_path`, `playbook_dir`): {why}"
                        ))
                        .help("use `include_tasks` to choose the file at run time")
                    })?;
                }
                let path = find_in(&self.task_search(file_dir, inh), &file).ok_or_else(|| {
                    not_found(arg, "task file", &file, &self.task_search(file_dir, inh))
                })?;
                // In handlers, the file's tasks are handlers (answering to their own names).
                self.task_file_as(&path, &arg.pos, &inner, handlers)
            }
            "include_tasks" => {
                let keys: Vec<&str> = INHERITED_KEYS
                    .iter()
                    .copied()
                    .chain(loop_keys)
                    .chain(handlers.then_some("listen"))
                    .chain(["register", "args"])
                    .collect();
                check_keys(
                    entries,
                    &keys,
                    &include_not_yet,
                    "an include_tasks",
                    is_action,
                )?;
                // `args:` may hold the include's `apply` (and `file`), as it holds a
                // module's parameters.
                let args = match node.get("args") {
                    Some(a) => {
                        check_keys(
                            map_of(a, "`args`")?,
                            &["file", "apply"],
                            &[],
                            "`args`",
                            |_| false,
                        )?;
                        Some(a)
                    }
                    None => None,
                };
                let file = match args.and_then(|a| a.get("file")) {
                    Some(f) if matches!(arg.kind, Kind::Null) => string_of(f, "file")?,
                    _ => file_arg(arg, key)?,
                };
                let target = file.clone();
                let search = self.task_search(file_dir, inh);
                let applied = match args {
                    Some(a) if a.get("apply").is_some() => with_apply(a, inh)?,
                    _ => with_apply(arg, inh)?,
                };
                // A templated name is known when a host reaches the include; so is whether a
                // conditional include's file exists (a missing one fails only the hosts that
                // reach it, as in ansible-core).
                let missing = || find_in(&search, &file).is_none() && node.get("when").is_some();
                let source = if is_template(&file) || missing() {
                    IncludeSource::TasksFile {
                        file,
                        search,
                        inherit: Box::new(applied),
                    }
                } else {
                    let path = find_in(&search, &file)
                        .ok_or_else(|| not_found(arg, "task file", &file, &search))?;
                    let before = self.collected.as_ref().map_or(0, Vec::len);
                    match self.task_file(&path, &arg.pos, &applied) {
                        Ok(steps) if self.collected.as_ref().map_or(0, Vec::len) == before => {
                            IncludeSource::Loaded(steps)
                        }
                        // A conditional include is loaded only when a host reaches it, as
                        // ansible-core does: what is wrong in a file for another platform (a
                        // role's setup-FreeBSD.yml) fails the host that includes it, not the run.
                        // Validate still checks the file and warns (`include_candidates`).
                        _ if node.get("when").is_some() => {
                            if let Some(c) = self.collected.as_mut() {
                                c.truncate(before);
                            }
                            IncludeSource::TasksFile {
                                file,
                                search,
                                inherit: Box::new(applied),
                            }
                        }
                        Ok(steps) => IncludeSource::Loaded(steps),
                        Err(d) => return Err(d),
                    }
                };
                let mut inc = include_of(node, inh, "include_tasks", target, source)?;
                // Unnamed, it is shown as its action is written (`ansible.builtin.include_tasks`).
                if inc.name.is_none() {
                    inc.shown = key.to_string();
                }
                if handlers {
                    let step = Step::Include(Box::new(inc));
                    return Ok(vec![Step::Task(Box::new(handler_step(node, step)?))]);
                }
                Ok(vec![Step::Include(Box::new(inc))])
            }
            short @ ("import_role" | "include_role") => {
                let include = short == "include_role";
                let keys: Vec<&str> = INHERITED_KEYS
                    .iter()
                    .copied()
                    .chain(if include { &loop_keys[..] } else { &[] }.iter().copied())
                    .chain(include.then_some("register"))
                    .collect();
                check_keys(
                    entries,
                    &keys,
                    &include_not_yet,
                    &format!("an {short}"),
                    is_action,
                )?;
                let am = map_of(arg, &format!("`{short}`"))?;
                // `role` is another name for `name`, as ansible-core reads it.
                let arg_keys: &[&str] = &[
                    "name",
                    "role",
                    "tasks_from",
                    "vars_from",
                    "defaults_from",
                    "handlers_from",
                    "rolespec_validate",
                    "public",
                    "allow_duplicates",
                    "apply",
                ];
                check_keys(
                    am,
                    &arg_keys[..arg_keys.len() - usize::from(!include)],
                    &["apply"],
                    &format!("`{short}`"),
                    |_| false,
                )?;
                let name = arg
                    .get("name")
                    .or_else(|| arg.get("role"))
                    .ok_or_else(|| arg.err(format!("`{short}` needs the role's `name`")))?;
                let opt = |k: &str| arg.get(k).map(|n| string_of(n, k)).transpose();
                // `public`: whether the role's defaults and vars are the play's. An imported
                // role's are unless it says no (from the start); an included role's are not
                // unless it says yes (from when a host includes it, `Include::public`); when
                // ANSIBLE_PRIVATE_ROLE_VARS is set, it decides for both.
                let public = match arg.get("public") {
                    Some(n) => self.static_bool(n, "public", inh)?,
                    None => crate::config::private_role_vars().map_or(!include, |private| !private),
                };
                // `allow_duplicates: false`: not again on a host that ran the role already
                // (`RoleDedup`, decided per host when it reaches the role's first step).
                let allow_duplicates = match arg.get("allow_duplicates") {
                    Some(n) => Some(self.static_bool(n, "allow_duplicates", inh)?),
                    None => None,
                };
                let opts = RoleOpts {
                    from: RoleFrom {
                        tasks: opt("tasks_from")?,
                        vars: opt("vars_from")?,
                        defaults: opt("defaults_from")?,
                        handlers: opt("handlers_from")?,
                        skip_argspec: match arg.get("rolespec_validate") {
                            Some(n) => !self.static_bool(n, "rolespec_validate", inh)?,
                            None => false,
                        },
                    },
                    dedupe: false,
                    allow_duplicates,
                    export: public && !include,
                    listed: if include {
                        Listed::Neither
                    } else {
                        Listed::Play
                    },
                    inherited: Arc::default(),
                    inherited_defaults: Arc::default(),
                    entry_keys: Value::Null,
                };
                let params = match node.get("vars") {
                    Some(v) => vars_of(v, "`vars`")?,
                    None => Map::new(),
                };
                // `include_role`'s `vars:` are include parameters (above `set_fact` and block
                // vars); `import_role`'s are the role's own, as a `roles:` entry's.
                let vars = if include {
                    RoleVars {
                        entry: Map::new(),
                        params: params.clone(),
                    }
                } else {
                    RoleVars {
                        entry: params.clone(),
                        params: Map::new(),
                    }
                };
                // A role named by a template, or whose `*_from` are templates, is known only
                // when a host reaches the include (a loop over role names): it is loaded then.
                let from = &opts.from;
                let templated_name = name.as_str().is_some_and(is_template)
                    || [&from.tasks, &from.vars, &from.defaults, &from.handlers]
                        .into_iter()
                        .flatten()
                        .any(|f| is_template(f));
                // An unnamed include_role is reported as Ansible names it.
                let target = string_of(name, "name")?;
                let shown = format!("{key} : {target}");
                let mut role_args = arg.to_json().as_object().cloned().unwrap_or_default();
                role_args.remove("apply");
                if include && templated_name {
                    let source = IncludeSource::Role {
                        name: string_of(name, "name")?,
                        from: opts.from,
                        params,
                        inherit: Box::new(with_apply(arg, inh)?),
                    };
                    let mut inc = include_of(node, inh, "include_role", target, source)?;
                    inc.public = public;
                    inc.role_args = role_args.clone();
                    inc.vars = Map::new();
                    if inc.name.is_none() {
                        inc.shown = shown;
                    }
                    Ok(vec![Step::Include(Box::new(inc))])
                } else if include && self.loading_role(name)? {
                    // A role including itself: legal (its `when` ends the recursion on the
                    // host), so it is loaded when a host reaches it, as ansible-core does.
                    let source = IncludeSource::Role {
                        name: string_of(name, "name")?,
                        from: opts.from,
                        params,
                        inherit: Box::new(with_apply(arg, inh)?),
                    };
                    let mut inc = include_of(node, inh, "include_role", target, source)?;
                    inc.public = public;
                    inc.role_args = role_args.clone();
                    inc.vars = Map::new();
                    if inc.name.is_none() {
                        inc.shown = shown;
                    }
                    Ok(vec![Step::Include(Box::new(inc))])
                } else if include {
                    // The include's own keywords decide whether it runs; they do not reach
                    // the role's tasks (Ansible needs `apply:` for that).
                    let outer = self.include_handlers.replace(Vec::new());
                    let steps = self.role(name, vars, &with_apply(arg, inh)?, &opts);
                    let handlers = std::mem::replace(&mut self.include_handlers, outer);
                    let source = IncludeSource::Loaded(steps?);
                    let mut inc = include_of(node, inh, "include_role", target, source)?;
                    inc.public = public;
                    inc.role_args = role_args.clone();
                    inc.handlers = handlers.unwrap_or_default();
                    inc.vars = Map::new();
                    if inc.name.is_none() {
                        inc.shown = shown;
                    }
                    Ok(vec![Step::Include(Box::new(inc))])
                } else {
                    let mut inner = inh.with_keywords(node)?;
                    inner.vars = inh.vars.clone();
                    // `import_role` is static: templated `*_from` are rendered with the
                    // variables known when the playbook loads (its own `vars` too), as its
                    // name is (`role`).
                    let known = inh.with_keywords(node)?;
                    let mut opts = opts;
                    for f in [
                        &mut opts.from.tasks,
                        &mut opts.from.vars,
                        &mut opts.from.defaults,
                        &mut opts.from.handlers,
                    ]
                    .into_iter()
                    .flatten()
                    {
                        *f = self
                            .static_name(f, &known)
                            .map_err(|why| static_role_err(name, &why))?;
                    }
                    self.role(name, vars, &inner, &opts)
                }
            }
            // `action` is one of the five keys matched where it was found.
            _ => unreachable!("matched above"),
        }
    }
}

/// A templated role name (or `*_from`) of `roles:`, `import_role` or a dependency that does
/// not render with what is known when the playbook loads.
pub(super) fn static_role_err(at: &Node, why: &str) -> Diagnostic {
    at.err(format!(
        "a role named here is found when the playbook loads: its name can use only the \
         variables known then (play, role and block variables, `-e`, `role_path`, `playbook_dir`): \
         {why}"
    ))
    .help("use `include_role` to choose the role at run time")
}
