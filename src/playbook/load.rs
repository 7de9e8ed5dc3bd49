//! The parser entry: a playbook file -> `Playbook`, its `import_playbook`s followed, each play's
//! keywords read and its task sections loaded (through `includes::Loader`).
//!
//! Every check that can be made without a host happens at load time, with the source position
//! of the offending key: unknown keys, unknown modules, mistyped module parameters, and
//! unguarded `command`/`shell` steps (the idempotency rule: a raw command needs a guard).

use super::ast::{
    add_tags, prepend_conditions, HostOrder, IncludeSource, Inherited, Play, Playbook, Step, Task,
    VarPrompt,
};
use super::files::{dir_of, joined, load_vars_file};
use super::includes::Loader;
use super::keywords::{
    become_method_of, bool_of, check_keys, conn_keywords_of, env_of, flag_of, map_of, percent_of,
    serial_of, short_name, string_of, strings_of, vars_of, Flag, PLAY_KEYS, PLAY_KEYS_NOT_YET,
};
use crate::diag::Diagnostic;
use crate::yaml::{self, Kind, Node};
use fixpoint_modules::params::is_template;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Load and check a playbook file, with the playbooks it imports: the first error.
pub fn load_playbook(path: &Path, roles_path: &[PathBuf]) -> Result<Playbook, Diagnostic> {
    match load_playbook_all(path, roles_path, &Map::new()) {
        (Some(book), errors) if errors.is_empty() => Ok(book),
        (_, mut errors) => Err(errors.remove(0)),
    }
}

/// Load and check a playbook file, with the playbooks it imports, and return every error
/// found: each play and each task entry is checked, a wrong one recorded and left out, and
/// the load goes on. The playbook (what of it loaded) is there unless the file itself could
/// not be read as a list of plays; with errors it is for further checks only, never to run.
/// `extra_vars` (`-e`): what a templated `import_playbook` name may use besides the import's
/// own `vars`, as in ansible-core, which renders the name once, before any host.
pub fn load_playbook_all(
    path: &Path,
    roles_path: &[PathBuf],
    extra_vars: &Map<String, Value>,
) -> (Option<Playbook>, Vec<Diagnostic>) {
    let mut stack = vec![std::fs::canonicalize(path).unwrap_or(path.to_path_buf())];
    let mut errors = Vec::new();
    let imports = Imports {
        roles_path,
        extra_vars,
        import_vars: Map::new(),
    };
    let plays = match load_plays(path, &imports, &mut stack, &mut errors) {
        Ok(plays) => plays,
        Err(d) => {
            errors.push(d);
            return (None, errors);
        }
    };
    let book = Playbook {
        path: path.to_path_buf(),
        dir: dir_of(path),
        plays,
        roles_path: roles_path.to_vec(),
    };
    (Some(book), errors)
}

/// What every playbook of one load shares.
struct Imports<'a> {
    roles_path: &'a [PathBuf],
    extra_vars: &'a Map<String, Value>,
    /// The `vars` of the `import_playbook`s around the file being loaded (an outer one's
    /// over an inner one's): its plays' variables at load time too (`import_role` names).
    import_vars: Map<String, Value>,
}

/// The plays of one playbook file, with those of its `import_playbook`s in place. `stack`:
/// the playbooks being imported (the top one first), to refuse cycles.
fn load_plays(
    path: &Path,
    imports: &Imports<'_>,
    stack: &mut Vec<PathBuf>,
    errors: &mut Vec<Diagnostic>,
) -> Result<Vec<Play>, Diagnostic> {
    let roles_path = imports.roles_path;
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
    if items.is_empty() {
        // ansible-core refuses it too ("A playbook must contain at least one play"), also
        // when imported.
        return Err(root
            .err("the playbook is an empty list: it has no play")
            .help("a playbook is a list of plays: `- hosts: all` followed by `tasks:`"));
    }
    let mut plays = Vec::new();
    for item in items {
        let import = item.as_map().and_then(|m| {
            m.iter()
                .find(|(k, _, _)| short_name(k) == "import_playbook")
        });
        let Some((key, _, target)) = import else {
            let mut loader = Loader::new(&dir, roles_path).collecting();
            let play = load_play(item, &dir, &mut loader, imports);
            errors.extend(loader.take_collected());
            match play {
                Ok(p) => {
                    // `ANSIBLE_ERROR_ON_MISSING_HANDLER=false` makes it a warning where the
                    // task changes something, as in ansible-core.
                    if crate::config::error_on_missing_handler() {
                        errors.extend(super::validate::unanswered_notifications(&p));
                    }
                    plays.push(p)
                }
                Err(d) => errors.push(d),
            }
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
        let file = import_name(target, &around.vars, imports.extra_vars)?;
        let file_path = joined(&dir, &file);
        if !file_path.is_file() {
            return Err(target
                .err(format!("playbook {} does not exist", file_path.display()))
                .help("fix the name: it is relative to the importing playbook's directory"));
        }
        let canon = std::fs::canonicalize(&file_path).unwrap_or(file_path.clone());
        if let Some(at) = stack.iter().position(|p| *p == canon) {
            let chain: Vec<String> = stack[at..]
                .iter()
                .chain([&canon])
                .map(|p| p.display().to_string())
                .collect();
            return Err(target
                .err(format!(
                    "`import_playbook` makes a cycle: {}",
                    chain.join(" imports ")
                ))
                .help("remove one of these imports: a playbook cannot import itself"));
        }
        stack.push(canon);
        let mut import_vars = around.vars.clone();
        import_vars.extend(imports.import_vars.clone());
        let inner = Imports {
            import_vars,
            ..*imports
        };
        let imported = load_plays(&file_path, &inner, stack, errors);
        stack.pop();
        for mut play in imported? {
            // The import's vars win over the play's own (ansible-core merges them over), an
            // outer import's over an inner one's.
            if !around.vars.is_empty() {
                let mut vars = (*play.vars).clone();
                vars.extend(around.vars.iter().map(|(k, v)| (k.clone(), v.clone())));
                play.vars = vars.into();
            }
            add_tags(&mut play.tags, &around.tags);
            // Fact gathering runs under the outermost import's `when` (ansible-core gives the
            // play's setup task the conditions of the last import that wraps it).
            if !around.when.is_empty() {
                play.gather_when = around.when.clone();
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

/// The file an `import_playbook` names: written as it is, or a template rendered once with the
/// import's `vars` and `-e` (no host is known yet, as in ansible-core).
fn import_name(
    target: &Node,
    vars: &Map<String, Value>,
    extra_vars: &Map<String, Value>,
) -> Result<String, Diagnostic> {
    let file = string_of(target, "import_playbook")?;
    if !is_template(&file) {
        return Ok(file);
    }
    match render_before_hosts(&file, vars, extra_vars) {
        Ok(Value::String(s)) if !s.is_empty() => Ok(s),
        Ok(other) => Err(target
            .err(format!(
                "`import_playbook` must name a playbook file, but its template gave {other}"
            ))
            .help("the name is rendered once, before any host, from the import's `vars` and `-e`")),
        Err(e) => Err(target
            .err(format!(
                "cannot render the `import_playbook` file name: {e}"
            ))
            .help(
                "the name is rendered once, before any host: it may use the import's `vars` and \
                 `-e` variables, not host or play variables",
            )),
    }
}

/// A keyword's template rendered once, before any host is known, with these `vars` and `-e`
/// (as ansible-core renders `import_playbook` names and a play's `strategy`).
fn render_before_hosts(
    text: &str,
    vars: &Map<String, Value>,
    extra_vars: &Map<String, Value>,
) -> Result<Value, crate::template::TemplateError> {
    let mut known = vars.clone();
    known.extend(extra_vars.iter().map(|(k, v)| (k.clone(), v.clone())));
    let ctx = crate::template::json_to_value(&Value::Object(known));
    crate::template::Templar::new().render_str(text, &ctx)
}

/// A play keyword's template that does not render, said where it is written.
fn unrenderable(n: &Node, key: &str, e: crate::template::TemplateError) -> Diagnostic {
    n.err(format!("cannot render the `{key}`: {e}"))
        .help("it is rendered once, before any host: it may use the play's `vars` and `-e`")
}

/// A play keyword's text (`strategy`, `order`); a template is rendered once, when the play
/// starts and before any host, with the play's `vars` and `-e`, as ansible-core renders it.
fn play_keyword_text(
    n: &Node,
    key: &str,
    vars: &Map<String, Value>,
    extra_vars: &Map<String, Value>,
) -> Result<String, Diagnostic> {
    let text = string_of(n, key)?;
    if !is_template(&text) {
        return Ok(text);
    }
    match render_before_hosts(&text, vars, extra_vars) {
        Ok(Value::String(r)) => Ok(r),
        Ok(other) => Ok(other.to_string()),
        Err(e) => Err(unrenderable(n, key, e)),
    }
}

/// A play keyword written as a template (`serial: "{{ batch }}"`, `gather_facts`), rendered
/// as `play_keyword_text` says, as a node at the keyword's place for its parser; one written
/// plainly as it is.
fn play_keyword_node(
    n: &Node,
    key: &str,
    vars: &Map<String, Value>,
    extra_vars: &Map<String, Value>,
) -> Result<Node, Diagnostic> {
    let Some(text) = n.scalar_text().filter(|t| is_template(t)) else {
        return Ok(n.clone());
    };
    let value =
        render_before_hosts(&text, vars, extra_vars).map_err(|e| unrenderable(n, key, e))?;
    fn node_of(v: &Value, pos: &crate::diag::Pos) -> Node {
        let kind = match v {
            Value::Bool(b) => Kind::Bool(*b),
            Value::Number(n) => match n.as_i64() {
                Some(i) => Kind::Int(i),
                None => Kind::Float(n.as_f64().unwrap_or_default()),
            },
            Value::String(s) => Kind::Str(s.clone()),
            Value::Array(items) => Kind::Seq(items.iter().map(|i| node_of(i, pos)).collect()),
            Value::Null => Kind::Null,
            other => Kind::Str(other.to_string()),
        };
        Node {
            kind,
            pos: pos.clone(),
        }
    }
    Ok(node_of(&value, &n.pos))
}

/// A play's connection keywords; `user` is the old name of its `remote_user` (ansible-core
/// still reads it, and refuses both at once).
fn play_conn_keywords(node: &Node) -> Result<super::ast::ConnKeywords, Diagnostic> {
    let mut conn = conn_keywords_of(node)?;
    if let Some(u) = node.get("user") {
        if conn.remote_user.is_some() {
            return Err(u
                .err("both `user` and `remote_user` are set for this play")
                .help("`user` is the old name of `remote_user`: keep `remote_user` only"));
        }
        conn.remote_user = Some(string_of(u, "user")?);
    }
    Ok(conn)
}

/// A play's `order`; a template is rendered as `play_keyword_text` says, as ansible-core renders
/// it (`order: "{{ myorder | default('inventory') }}"`).
fn host_order_of(
    n: &Node,
    vars: &Map<String, Value>,
    extra_vars: &Map<String, Value>,
) -> Result<HostOrder, Diagnostic> {
    let order = play_keyword_text(n, "order", vars, extra_vars)?;
    Ok(match order.as_str() {
        "inventory" => HostOrder::Inventory,
        "reverse_inventory" => HostOrder::ReverseInventory,
        "sorted" => HostOrder::Sorted,
        "reverse_sorted" => HostOrder::ReverseSorted,
        "shuffle" => HostOrder::Shuffle,
        other => {
            return Err(n
                .err(format!("unknown host order `{other}`"))
                .help("order: inventory, reverse_inventory, sorted, reverse_sorted or shuffle"))
        }
    })
}

/// Add conditions (first) and tags to every task in these steps, as an enclosing import does.
fn wrap_steps(steps: &mut [Step], when: &[String], tags: &[String]) {
    if when.is_empty() && tags.is_empty() {
        return;
    }
    for s in steps {
        match s {
            Step::Task(t) => wrap_task(t, when, tags),
            Step::Block(b) => {
                wrap_steps(&mut b.block, when, tags);
                wrap_steps(&mut b.rescue, when, tags);
                wrap_steps(&mut b.always, when, tags);
            }
            Step::Include(i) => {
                prepend_conditions(&mut i.when, when);
                add_tags(&mut i.tags, tags);
                match &mut i.source {
                    IncludeSource::Loaded(steps) => wrap_steps(steps, when, tags),
                    IncludeSource::TasksFile { inherit, .. }
                    | IncludeSource::Role { inherit, .. } => {
                        prepend_conditions(&mut inherit.when, when);
                        add_tags(&mut inherit.tags, tags);
                    }
                }
            }
            Step::Meta(m) => {
                prepend_conditions(&mut m.when, when);
                add_tags(&mut m.tags, tags);
            }
        }
    }
}

/// Add conditions (first) and tags to one task, as an enclosing import does.
fn wrap_task(t: &mut Task, when: &[String], tags: &[String]) {
    prepend_conditions(&mut t.when, when);
    add_tags(&mut t.tags, tags);
    // A handler that includes tasks or is a meta runs as that step: the conditions go there.
    match t.handler_step.as_deref_mut() {
        Some(Step::Include(inc)) => {
            prepend_conditions(&mut inc.when, when);
            add_tags(&mut inc.tags, tags);
        }
        Some(Step::Meta(m)) => {
            prepend_conditions(&mut m.when, when);
            add_tags(&mut m.tags, tags);
        }
        _ => {}
    }
}

/// One play: its keywords, its sections loaded in run order, its roles' variables merged.
fn load_play(
    node: &Node,
    dir: &Path,
    loader: &mut Loader,
    imports: &Imports,
) -> Result<Play, Diagnostic> {
    let extra_vars = imports.extra_vars;
    loader.extra_vars = extra_vars.clone();
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
    if hosts.trim().is_empty() {
        // ansible-core: "Hosts list cannot be empty".
        let at = node.get("hosts").unwrap_or(node);
        return Err(at
            .err("`hosts` is empty: the play names no host")
            .help("name a host, a group or a pattern of the inventory (`hosts: all`)"));
    }
    // Play tags, no_log, ignore_errors, check_mode and diff reach every task (handlers and
    // role tasks too), as block keywords do; a task or block may say otherwise.
    let mut base = Inherited {
        tags: match node.get("tags") {
            Some(t) => strings_of(t, "tags")?,
            None => Vec::new(),
        },
        ..Inherited::default()
    };
    for key in ["no_log", "ignore_errors", "check_mode", "diff"] {
        base.set_flag(node, key)?;
    }
    if let Some(n) = node.get("module_defaults") {
        super::defaults::read(n, &mut base.module_defaults)?;
    }
    loader.play_vars = match node.get("vars") {
        Some(v) => vars_of(v, "`vars`")?,
        None => Map::new(),
    };
    loader.play_vars.extend(
        imports
            .import_vars
            .iter()
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    if let Some(n) = node.get("ignore_unreachable") {
        base.ignore_unreachable = Some(bool_of(n, "ignore_unreachable")?);
    }
    if let Some(n) = node.get("collections") {
        base.collections = strings_of(n, "collections")?;
    }
    base.set_throttle(node)?;
    // `run_once` on the play reaches every task, as a block's does; a template is decided
    // per task with its first host's variables.
    match node
        .get("run_once")
        .map(|n| flag_of(n, "run_once"))
        .transpose()?
    {
        Some(Flag::Lit(v)) => base.run_once = Some(v),
        Some(Flag::Tmpl(t)) => {
            base.templated.insert("run_once", t);
        }
        None => {}
    }
    let section = |loader: &mut Loader, key: &str, handlers: bool| match node.get(key) {
        Some(list) => loader.steps_of(list, &format!("`{key}`"), handlers, &base, dir),
        None => Ok(Vec::new()),
    };
    let pre_tasks = section(loader, "pre_tasks", false)?;
    let mut roles = Vec::new();
    if let Some(list) = node.get("roles") {
        match &list.kind {
            Kind::Seq(items) => {
                for entry in items {
                    match loader.roles_entry(entry, &base) {
                        Ok(steps) => roles.extend(steps),
                        Err(d) => loader.record(d)?,
                    }
                }
            }
            Kind::Null => {}
            _ => {
                return Err(list
                    .err("`roles` must be a list of roles")
                    .help("e.g. `roles: [common, web]`"))
            }
        }
    }
    let tasks = section(loader, "tasks", false)?;
    let post_tasks = section(loader, "post_tasks", false)?;
    let mut role_defaults = Map::new();
    let mut role_vars = Map::new();
    for r in &loader.exported_roles {
        role_defaults.extend((*r.defaults).clone());
        role_vars.extend((*r.vars).clone());
    }
    let mut handlers = std::mem::take(&mut loader.role_handlers);
    for s in section(loader, "handlers", true)? {
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
                    match &i.kind {
                        // A list inside the list: the first of its files that exists, as
                        // in Ansible.
                        Kind::Seq(alts) => vars_files.push(first_vars_file(i, alts, dir)?),
                        _ => vars_files.push((string_of(i, "vars_files")?, i.pos.clone())),
                    }
                }
            }
            Kind::Null => {}
            _ => vars_files.push((string_of(vf, "vars_files")?, vf.pos.clone())),
        }
    }
    let mut vars_from_files = Map::new();
    vars_files.retain(|(path, pos)| {
        if is_template(path) {
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
    // `serial: "{{ batch }}"`, `gather_facts: "{{ x | default(true) }}"`: rendered as `order`.
    let rendered = |n: &Node, key: &str| play_keyword_node(n, key, &loader.play_vars, extra_vars);
    let play = Play {
        vars_from_files: vars_from_files.into(),
        name: opt_string("name")?.unwrap_or_else(|| hosts.clone()),
        hosts,
        pos: node.pos.clone(),
        dir: dir.to_path_buf(),
        vars: match node.get("vars") {
            Some(v) => vars_of(v, "`vars`")?.into(),
            None => Default::default(),
        },
        vars_files,
        gather_facts: match node.get("gather_facts") {
            Some(n) => bool_of(&rendered(n, "gather_facts")?, "gather_facts")?,
            None => crate::config::default_gathering()?,
        },
        gather_timeout: gather_keywords_of(node)?,
        gather_when: Vec::new(),
        vars_prompt: match node.get("vars_prompt") {
            Some(n) => vars_prompt_of(n)?,
            None => Vec::new(),
        },
        tags: base.tags.clone(),
        pre_tasks,
        roles,
        tasks,
        post_tasks,
        handlers,
        role_defaults: Arc::new(role_defaults),
        role_vars: Arc::new(role_vars),
        play_role_names: std::mem::take(&mut loader.play_role_names),
        dependent_role_names: std::mem::take(&mut loader.dependent_role_names),
        become_: opt_bool("become")?,
        become_user: opt_string("become_user")?,
        become_method: node
            .get("become_method")
            .map(become_method_of)
            .transpose()?,
        conn: play_conn_keywords(node)?,
        check_mode: base.check_mode,
        diff: base.diff,
        environment: match node.get("environment") {
            Some(v) => env_of(v)?,
            None => Vec::new(),
        },
        force_handlers: opt_bool("force_handlers")?,
        ignore_errors: base.ignore_errors.unwrap_or(false),
        serial: match node.get("serial") {
            Some(n) => serial_of(&rendered(n, "serial")?)?,
            None => Vec::new(),
        },
        free: false,
        order: match node.get("order") {
            Some(n) => host_order_of(n, &loader.play_vars, extra_vars)?,
            None => HostOrder::Inventory,
        },
        any_errors_fatal: opt_bool("any_errors_fatal")?.unwrap_or(false),
        max_fail_percentage: match node.get("max_fail_percentage") {
            Some(n) => Some(percent_of(
                &rendered(n, "max_fail_percentage")?,
                "max_fail_percentage",
            )?),
            None => None,
        },
    };
    let mut play = play;
    // The play's `strategy`, else `ANSIBLE_STRATEGY`'s default.
    let strategy = match node.get("strategy") {
        // `strategy: "{{ s | default('linear') }}"`.
        Some(n) => (
            play_keyword_text(n, "strategy", &loader.play_vars, extra_vars)?,
            Some(n),
        ),
        None => (crate::config::default_strategy(), None),
    };
    match strategy {
        (s, _) if s == "linear" => {}
        // fixpoint's free lanes already keep a host on its fork until it is through the
        // section, which is what `host_pinned` adds to ansible-core's `free`.
        (s, _) if s == "free" || s == "host_pinned" => play.free = true,
        (s, at) => {
            let d = match at {
                Some(n) => n.err(format!("strategy `{s}` is not supported by fixpoint yet")),
                None => Diagnostic::new(format!(
                    "ANSIBLE_STRATEGY={s} is not supported by fixpoint yet"
                )),
            };
            return Err(d.help("fixpoint runs `linear`, `free` and `host_pinned`"));
        }
    }
    if play.free {
        // `any_errors_fatal`, `max_fail_percentage` and `run_once` coordinate hosts, which a
        // free play does not do: ignored with a warning (`validate`), as ansible-core's free
        // strategy ignores them (each host runs in a lane of its own, `engine::free`, where
        // the first host of a `run_once` task is that host). Except a `run_once` task whose
        // result other tasks read: ansible-core gives every host's result (and facts) to all
        // the hosts, in whatever order they finish.
        if let Some(t) = play.all_tasks().into_iter().find(|t| {
            (t.run_once || t.templated.contains_key("run_once"))
                && (t.register.is_some()
                    || matches!(t.module, "set_fact" | "include_vars" | "setup" | "getent")
                    || t.module.ends_with("_facts"))
        }) {
            return Err(Diagnostic::at(
                &t.pos,
                format!(
                    "`run_once` on a task that {} is refused in a `strategy: free` play: \
                     ansible-core runs it on every host and gives each host's result to all \
                     of them, the last one to finish winning",
                    if t.register.is_some() { "registers its result" } else { "sets facts" }
                ),
            )
            .help("use the linear strategy, or drop `run_once` (the task runs on every host either way)"));
        }
        // ansible-core stops the run on them there: they run once for all hosts, which a
        // free play's hosts do not wait for.
        if let Some(t) = play
            .all_tasks()
            .into_iter()
            .find(|t| matches!(t.module, "pause" | "add_host"))
        {
            return Err(Diagnostic::at(
                &t.pos,
                format!(
                    "`{}` runs once for all the hosts, which `strategy: free` does not support \
                     (ansible-core stops the run there too)",
                    t.module
                ),
            )
            .help("run it in a play with the linear strategy"));
        }
    }
    Ok(play)
}

/// `vars_prompt`: a list of `{name, prompt, default, private, confirm, encrypt, salt}`.
fn vars_prompt_of(node: &Node) -> Result<Vec<VarPrompt>, Diagnostic> {
    let items = match &node.kind {
        Kind::Seq(items) => items,
        Kind::Null => return Ok(Vec::new()),
        _ => {
            return Err(node
                .err("`vars_prompt` must be a list")
                .help("e.g. `vars_prompt: [{name: user, prompt: \"User?\", default: admin}]`"))
        }
    };
    let mut out = Vec::new();
    for item in items {
        let entries = map_of(item, "a `vars_prompt` entry")?;
        check_keys(
            entries,
            &[
                "name", "prompt", "default", "private", "confirm", "encrypt", "salt", "unsafe",
            ],
            &["salt_size"],
            "a `vars_prompt` entry",
            |_| false,
        )?;
        let Some(name) = item.get("name") else {
            return Err(item
                .err("this `vars_prompt` entry has no `name`")
                .help("add `name:` with the variable to set"));
        };
        let name_text = string_of(name, "name")?;
        super::keywords::check_var_name(&name_text, &name.pos)?;
        let opt_string = |k: &str| item.get(k).map(|n| string_of(n, k)).transpose();
        let opt_bool = |k: &str| item.get(k).map(|n| bool_of(n, k)).transpose();
        out.push(VarPrompt {
            name: name_text,
            prompt: opt_string("prompt")?,
            default: opt_string("default")?,
            private: opt_bool("private")?.unwrap_or(true),
            confirm: opt_bool("confirm")?.unwrap_or(false),
            encrypt: opt_string("encrypt")?,
            salt: opt_string("salt")?,
            pos: item.pos.clone(),
        });
    }
    Ok(out)
}

/// A `vars_files` entry that is itself a list: the first of its paths whose file exists.
/// Templated paths in such a list are refused (they would have to be tried on each host).
fn first_vars_file(
    entry: &Node,
    alts: &[Node],
    dir: &Path,
) -> Result<(String, crate::diag::Pos), Diagnostic> {
    let mut paths = Vec::new();
    for a in alts {
        let p = string_of(a, "vars_files")?;
        if is_template(&p) {
            return Err(a.err(
                "a templated path in a list of alternative `vars_files` is not supported by \
                 fixpoint yet",
            ));
        }
        paths.push((p, a.pos.clone()));
    }
    paths
        .iter()
        .find(|(p, _)| dir.join(p).is_file())
        .cloned()
        .ok_or_else(|| {
            let names: Vec<&str> = paths.iter().map(|(p, _)| p.as_str()).collect();
            entry
                .err(format!(
                    "none of the `vars_files` alternatives exists: {}",
                    names.join(", ")
                ))
                .help("create one of them, or fix the names: they are relative to the playbook's directory")
        })
}

/// A play's `gather_timeout` (seconds), after checking its `gather_subset`: a subset name or a
/// list of them, as the `setup` module takes (`all`, `min`, `network`, `!hardware`...).
fn gather_keywords_of(node: &Node) -> Result<Option<u64>, Diagnostic> {
    if let Some(n) = node.get("gather_subset") {
        let ok = match &n.kind {
            Kind::Str(_) => true,
            Kind::Seq(items) => items.iter().all(|i| matches!(i.kind, Kind::Str(_))),
            _ => false,
        };
        if !ok {
            return Err(n
                .err("`gather_subset` must be a subset name or a list of them")
                .help("e.g. `gather_subset: [min]`"));
        }
    }
    match node.get("gather_timeout") {
        None => Ok(None),
        Some(n) => match n.kind {
            Kind::Int(i) if i > 0 => Ok(Some(i as u64)),
            _ => Err(n
                .err("`gather_timeout` must be a positive number of seconds")
                .help("e.g. `gather_timeout: 30`")),
        },
    }
}
