//! The loader: YAML playbooks → typed plays and tasks, checked before any host is touched.
//!
//! Every check that can be made without a host happens here, with the source position of the
//! offending key: unknown keys, unknown modules, mistyped module parameters, and unguarded
//! `command`/`shell` steps (the idempotency rule: a raw command needs a guard).

use crate::actions;
use crate::diag::{suggest, Diagnostic, Pos};
use crate::yaml::{self, Kind, Node};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// A loaded playbook file.
#[derive(Debug, Clone)]
pub struct Playbook {
    pub path: PathBuf,
    /// The directory that holds the playbook: `files/`, `templates/` and vars files are found from here.
    pub dir: PathBuf,
    pub plays: Vec<Play>,
}

#[derive(Debug, Clone)]
pub struct Play {
    pub name: String,
    pub hosts: String,
    pub pos: Pos,
    pub vars: Map<String, Value>,
    /// `vars_files` whose path is templated, loaded at run time.
    pub vars_files: Vec<(String, Pos)>,
    /// Variables of the `vars_files` with plain paths, loaded (and checked) at load time.
    pub vars_from_files: Map<String, Value>,
    pub gather_facts: bool,
    pub pre_tasks: Vec<Task>,
    pub tasks: Vec<Task>,
    pub post_tasks: Vec<Task>,
    pub handlers: Vec<Task>,
    pub become_: Option<bool>,
    pub become_user: Option<String>,
    pub connection: Option<String>,
    pub remote_user: Option<String>,
    pub check_mode: Option<bool>,
    pub diff: Option<bool>,
    pub environment: Map<String, Value>,
    pub force_handlers: bool,
    pub ignore_errors: bool,
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
    pub loop_var: String,
    pub index_var: Option<String>,
    pub loop_label: Option<String>,
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
}

impl Task {
    /// The name shown in output: `name:`, else the module and its main argument, as Ansible does.
    pub fn display_name(&self) -> String {
        match &self.name {
            Some(n) => n.clone(),
            None => self.module.to_string(),
        }
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
];

/// Ansible keywords fixpoint knows but does not implement yet: refused with a clear message
/// instead of being silently ignored.
const TASK_KEYS_NOT_YET: &[&str] = &[
    "block",
    "rescue",
    "always",
    "include_tasks",
    "import_tasks",
    "include_role",
    "import_role",
    "import_playbook",
    "include_vars",
    "delegate_to",
    "delegate_facts",
    "run_once",
    "until",
    "retries",
    "delay",
    "async",
    "poll",
    "with_dict",
    "with_fileglob",
    "with_together",
    "with_nested",
    "with_subelements",
    "with_sequence",
    "any_errors_fatal",
    "throttle",
    "local_action",
    "meta",
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
];

const PLAY_KEYS_NOT_YET: &[&str] = &[
    "roles",
    "serial",
    "strategy",
    "any_errors_fatal",
    "max_fail_percentage",
    "import_playbook",
    "vars_prompt",
    "order",
];

impl Play {
    /// A play with no tasks, for commands that talk to hosts outside a playbook (`fixpoint journal`).
    pub fn bare(hosts: &str, become_: bool) -> Play {
        Play {
            name: "journal".into(),
            hosts: hosts.into(),
            pos: Pos::file_only(Path::new("<command line>")),
            vars: Map::new(),
            vars_files: Vec::new(),
            vars_from_files: Map::new(),
            gather_facts: false,
            pre_tasks: Vec::new(),
            tasks: Vec::new(),
            post_tasks: Vec::new(),
            handlers: Vec::new(),
            become_: Some(become_),
            become_user: None,
            connection: None,
            remote_user: None,
            check_mode: None,
            diff: None,
            environment: Map::new(),
            force_handlers: false,
            ignore_errors: false,
        }
    }
}

/// Load and check a playbook file.
pub fn load_playbook(path: &Path) -> Result<Playbook, Diagnostic> {
    let root = yaml::load_file(path)?;
    let dir = path
        .parent()
        .map(|p| {
            if p.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                p.to_path_buf()
            }
        })
        .unwrap_or_else(|| PathBuf::from("."));
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
        plays.push(load_play(item, &dir)?);
    }
    Ok(Playbook {
        path: path.to_path_buf(),
        dir,
        plays,
    })
}

fn map_of<'a>(node: &'a Node, what: &str) -> Result<&'a [(String, Pos, Node)], Diagnostic> {
    node.as_map().ok_or_else(|| {
        node.err(format!(
            "{what} must be a mapping, found {}",
            node.type_name()
        ))
    })
}

fn check_keys(
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

fn bool_of(node: &Node, key: &str) -> Result<bool, Diagnostic> {
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

fn string_of(node: &Node, key: &str) -> Result<String, Diagnostic> {
    node.scalar_text().ok_or_else(|| {
        node.err(format!(
            "`{key}` must be a string, found {}",
            node.type_name()
        ))
    })
}

/// A string or a list of strings (`tags`, `notify`, `listen`).
fn strings_of(node: &Node, key: &str) -> Result<Vec<String>, Diagnostic> {
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
fn conditions_of(node: &Node, key: &str) -> Result<Conditions, Diagnostic> {
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

fn vars_of(node: &Node, what: &str) -> Result<Map<String, Value>, Diagnostic> {
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

fn load_play(node: &Node, dir: &Path) -> Result<Play, Diagnostic> {
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
    let play_tags = match node.get("tags") {
        Some(t) => strings_of(t, "tags")?,
        None => Vec::new(),
    };
    let play_no_log = match node.get("no_log") {
        Some(n) => bool_of(n, "no_log")?,
        None => false,
    };
    let tasks_of = |key: &str, handlers: bool| -> Result<Vec<Task>, Diagnostic> {
        let Some(list) = node.get(key) else {
            return Ok(Vec::new());
        };
        let items = match &list.kind {
            Kind::Seq(items) => items.as_slice(),
            Kind::Null => &[],
            _ => {
                return Err(list.err(format!(
                    "`{key}` must be a list of tasks, found {}",
                    list.type_name()
                )))
            }
        };
        items
            .iter()
            .map(|t| {
                let mut task = load_task(t, handlers, dir)?;
                task.tags.extend(play_tags.iter().cloned());
                task.no_log |= play_no_log;
                Ok(task)
            })
            .collect()
    };
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
    let play = Play {
        vars_from_files,
        name: opt_string("name")?.unwrap_or_else(|| hosts.clone()),
        hosts,
        pos: node.pos.clone(),
        vars: match node.get("vars") {
            Some(v) => vars_of(v, "`vars`")?,
            None => Map::new(),
        },
        vars_files,
        gather_facts: opt_bool("gather_facts")?.unwrap_or(true),
        pre_tasks: tasks_of("pre_tasks", false)?,
        tasks: tasks_of("tasks", false)?,
        post_tasks: tasks_of("post_tasks", false)?,
        handlers: tasks_of("handlers", true)?,
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
    };
    Ok(play)
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
    let re = regex::Regex::new(
        r#"(?:^|\s)(creates|removes|chdir|executable|stdin|warn)=("[^"]*"|'[^']*'|\S+)"#,
    )
    .expect("static regex");
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

fn load_task(node: &Node, handler: bool, dir: &Path) -> Result<Task, Diagnostic> {
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
        match fixpoint_modules::canonical_name(k) {
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
    let loop_node = opt("loop").or(opt("with_items")).or(opt("with_list"));
    let flatten_items = opt("with_items").is_some();
    let mut loop_var = "item".to_string();
    let mut index_var = None;
    let mut loop_label = None;
    if let Some(lc) = opt("loop_control") {
        let lce = map_of(lc, "`loop_control`")?;
        check_keys(
            lce,
            &["loop_var", "index_var", "label", "pause", "extended"],
            &[],
            "`loop_control`",
            |_| false,
        )?;
        if let Some(v) = lc.get("loop_var") {
            loop_var = string_of(v, "loop_var")?;
            check_var_name(&loop_var, &v.pos)?;
        }
        if let Some(v) = lc.get("index_var") {
            index_var = Some(string_of(v, "index_var")?);
        }
        if let Some(v) = lc.get("label") {
            loop_label = Some(string_of(v, "label")?);
        }
    }
    let loop_items = loop_node.map(|n| {
        let v = n.to_json();
        // with_items flattens one level, as in Ansible.
        match (flatten_items, v) {
            (true, Value::Array(items)) => Value::Array(
                items
                    .into_iter()
                    .flat_map(|i| match i {
                        Value::Array(inner) => inner,
                        other => vec![other],
                    })
                    .collect(),
            ),
            (_, v) => v,
        }
    });

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
    let task = Task {
        name: opt_string("name")?,
        module,
        params: Value::Object(params),
        pos: node.pos.clone(),
        when: opt("when")
            .map(|n| conditions_of(n, "when"))
            .transpose()?
            .unwrap_or_default(),
        loop_items,
        loop_var,
        index_var,
        loop_label,
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
    };
    check_module_params(&task, raw_params, mod_pos, dir)?;
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
        Value::String(s) => s.contains("{{") || s.contains("{%"),
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
    dir: &Path,
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
    let result = actions::check_params(task.module, &Value::Object(static_params), dir);
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
