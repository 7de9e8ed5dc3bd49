//! Keyword tables (what a play, task or block may say) and the readers of keyword values.
//!
//! Each reader turns one YAML node into a typed value or a diagnostic at that node: the parser
//! files share them so a keyword reads the same everywhere. Values only: no files are read here.

use super::ast::{add_tags, BatchSize, Conditions, EnvPart, Environment, Inherited, LoopKind};
use crate::connection::BecomeMethod;
use crate::diag::{suggest, Diagnostic, Pos};
use crate::template::Templar;
use crate::yaml::{Kind, Node};
use serde_json::{Map, Value};

/// Keywords a block (and a role entry, an import) may carry and pass down to its tasks.
pub(crate) const INHERITED_KEYS: &[&str] = &[
    "name",
    "when",
    "tags",
    "vars",
    "become",
    "become_user",
    "become_method",
    "ignore_errors",
    "no_log",
    "check_mode",
    "diff",
    "environment",
    "delegate_to",
    "run_once",
    "module_defaults",
    "remote_user",
    "port",
    "connection",
    "any_errors_fatal",
    "ignore_unreachable",
    "collections",
    "become_exe",
    "become_flags",
    "throttle",
];

/// What a block says besides its inherited keywords.
pub(crate) const BLOCK_KEYS: &[&str] = &["block", "rescue", "always", "notify"];

/// The actions that include or import tasks and roles, or steer the run (`meta`): the loader
/// reads them itself rather than as modules.
pub(crate) const INCLUDE_ACTIONS: &[&str] = &[
    "import_tasks",
    "include_tasks",
    "import_role",
    "include_role",
    "meta",
];

/// Boolean keywords that may be given as a template (`ignore_errors: "{{ x }}"`), rendered on
/// each host when the task runs, as ansible-core does.
pub(crate) const TEMPLATED_FLAGS: &[&str] =
    &["ignore_errors", "no_log", "check_mode", "diff", "become"];

/// A keyword as written: a value (a boolean unless said), or a template rendered at run time.
pub(crate) enum Flag<T = bool> {
    Lit(T),
    Tmpl(String),
}

/// A boolean keyword that may be a template (see `TEMPLATED_FLAGS`).
pub(crate) fn flag_of(node: &Node, key: &str) -> Result<Flag, Diagnostic> {
    match &node.kind {
        Kind::Str(s) if fixpoint_modules::params::is_template(s) => Ok(Flag::Tmpl(s.clone())),
        _ => bool_of(node, key).map(Flag::Lit),
    }
}

/// `throttle` as written (on a play, block, role entry or task): at most this many hosts at
/// once (0: no bound), or a template rendered when the task runs, as ansible-core renders it.
pub(crate) fn throttle_of(node: &Node) -> Result<Flag<usize>, Diagnostic> {
    match &node.kind {
        Kind::Int(i) if *i >= 0 => Ok(Flag::Lit(*i as usize)),
        Kind::Str(s) if fixpoint_modules::params::is_template(s) => Ok(Flag::Tmpl(s.clone())),
        Kind::Str(s) if s.trim().parse::<usize>().is_ok() => {
            Ok(Flag::Lit(s.trim().parse().expect("checked")))
        }
        _ => Err(node
            .err("`throttle` must be a number of hosts")
            .help("e.g. `throttle: 1` to run the task on one host at a time (0: no bound)")),
    }
}

/// `become_method`: fixpoint becomes through sudo or su; other methods are refused here.
pub(crate) fn become_method_of(node: &Node) -> Result<String, Diagnostic> {
    let m = string_of(node, "become_method")?;
    if known_become_method(&m) {
        return Ok(m);
    }
    Err(node
        .err(format!("become_method `{m}` is not supported by fixpoint"))
        .help("fixpoint becomes through sudo or su: use `become_method: sudo` (or leave it out) or `become_method: su`"))
}

/// The `become_method` values fixpoint reads (keyword or `--become-method`): `sudo`, `su` and
/// templates (rendered when used).
pub fn known_become_method(m: &str) -> bool {
    is_template(m) || m == "sudo" || m == "su"
}

/// The `connection` values fixpoint reads (keyword or `--connection`): those it connects with
/// (`connection::spec::KNOWN_CONNECTIONS`) and templates (rendered when used).
pub fn known_connection(c: &str) -> bool {
    is_template(c) || crate::connection::spec::KNOWN_CONNECTIONS.contains(&c)
}

fn is_template(s: &str) -> bool {
    fixpoint_modules::params::is_template(s)
}

impl Inherited {
    /// Set a boolean keyword of `TEMPLATED_FLAGS` from `node` (a block, role entry, play): a
    /// value replaces an outer template, a template replaces an outer value at run time.
    pub(crate) fn set_flag(&mut self, node: &Node, key: &'static str) -> Result<(), Diagnostic> {
        let Some(n) = node.get(key) else {
            return Ok(());
        };
        let v = match flag_of(n, key)? {
            Flag::Tmpl(t) => {
                self.templated.insert(key, t);
                return Ok(());
            }
            Flag::Lit(v) => v,
        };
        self.templated.remove(key);
        match key {
            "ignore_errors" => self.ignore_errors = Some(v),
            "no_log" => self.no_log |= v,
            "check_mode" => self.check_mode = Some(v),
            "diff" => self.diff = Some(v),
            "run_once" => self.run_once = Some(v),
            "ignore_unreachable" => self.ignore_unreachable = Some(v),
            _ => self.become_ = Some(v),
        }
        Ok(())
    }
}

impl Inherited {
    /// `throttle` written on `node` replaces an outer one, a number or a template alike.
    pub(crate) fn set_throttle(&mut self, node: &Node) -> Result<(), Diagnostic> {
        match node.get("throttle").map(throttle_of).transpose()? {
            Some(Flag::Lit(v)) => {
                self.throttle = Some(v);
                self.templated.remove("throttle");
            }
            Some(Flag::Tmpl(t)) => {
                self.throttle = None;
                self.templated.insert("throttle", t);
            }
            None => {}
        }
        Ok(())
    }

    /// This context plus the keywords written on `node` (a block, role entry or import).
    pub(crate) fn with_keywords(&self, node: &Node) -> Result<Inherited, Diagnostic> {
        let mut out = self.clone();
        if let Some(n) = node.get("when") {
            out.when.extend(conditions_of(n, "when")?);
        }
        if let Some(n) = node.get("tags") {
            add_tags(&mut out.tags, &strings_of(n, "tags")?);
        }
        if let Some(n) = node.get("vars") {
            out.vars.extend(vars_of(n, "`vars`")?);
        }
        for key in TEMPLATED_FLAGS {
            out.set_flag(node, key)?;
        }
        if let Some(n) = node.get("become_user") {
            out.become_user = Some(string_of(n, "become_user")?);
        }
        if let Some(n) = node.get("become_method") {
            out.become_method = Some(become_method_of(n)?);
        }
        if let Some(n) = node.get("environment") {
            out.environment.extend(env_of(n)?);
        }
        // Templates too: each task renders them as it renders its own.
        out.set_flag(node, "run_once")?;
        out.set_flag(node, "ignore_unreachable")?;
        if let Some(n) = node.get("delegate_to") {
            out.delegate_to = Some(string_of(n, "delegate_to")?);
        }
        if let Some(n) = node.get("module_defaults") {
            super::defaults::read(n, &mut out.module_defaults)?;
        }
        out.conn = conn_keywords_of(node)?.or(&out.conn);
        if let Some(n) = node.get("any_errors_fatal") {
            out.any_errors_fatal = Some(bool_of(n, "any_errors_fatal")?);
        }
        if let Some(n) = node.get("collections") {
            out.collections = strings_of(n, "collections")?;
        }
        out.set_throttle(node)?;
        // Only blocks accept `notify` (their key check says so); an inner one replaces it.
        if let Some(n) = node.get("notify") {
            out.notify = strings_of(n, "notify")?;
        }
        Ok(out)
    }
}

/// `remote_user`, `port` and `connection` written on `node` (a play, block, role entry, task).
/// A port that is not a template must be a port number; a connection other than `ssh` (and
/// its aliases) or `local` is refused here, a templated one where it is rendered.
pub(crate) fn conn_keywords_of(node: &Node) -> Result<super::ast::ConnKeywords, Diagnostic> {
    let port = match node.get("port") {
        None => None,
        Some(n) => {
            let p = string_of(n, "port")?;
            if !is_template(&p) && !matches!(p.trim().parse::<u16>(), Ok(1..)) {
                return Err(n
                    .err(format!("`port` must be a port number, found \"{p}\""))
                    .help("e.g. `port: 2222`"));
            }
            Some(p.trim().to_string())
        }
    };
    let connection = match node.get("connection") {
        None => None,
        Some(n) => {
            let c = string_of(n, "connection")?;
            if !known_connection(&c) {
                return Err(n
                    .err(format!("connection `{c}` is not supported by fixpoint"))
                    .help("fixpoint connects with `ssh` or `local`"));
            }
            Some(c)
        }
    };
    let become_flags = match node.get("become_flags") {
        None => None,
        Some(n) => {
            let f = string_of(n, "become_flags")?;
            if !is_template(&f) {
                become_flags_of(&f).map_err(|e| {
                    n.err(e).help(
                        "fixpoint passes sudo -H, -E, -i, -s, --preserve-env[=...] and \
                         --login (-S and -n are its own to decide: it gives the password \
                         itself), and su -, -l, --login, -m, -p, --preserve-environment and \
                         -s/--shell SHELL",
                    )
                })?;
            }
            Some(f)
        }
    };
    Ok(super::ast::ConnKeywords {
        become_exe: node
            .get("become_exe")
            .map(|n| string_of(n, "become_exe"))
            .transpose()?,
        become_flags,
        remote_user: node
            .get("remote_user")
            .map(|n| string_of(n, "remote_user"))
            .transpose()?,
        port,
        connection,
    })
}

/// `become_flags` as written, checked at load time, when the method may not be known yet (a
/// variable may set it): flags that sudo or su takes (`become_flags_for` checks them against
/// the method when a task uses them).
pub fn become_flags_of(flags: &str) -> Result<Vec<String>, String> {
    become_flags_for(BecomeMethod::Sudo, flags)
        .or_else(|sudo| become_flags_for(BecomeMethod::Su, flags).map_err(|_| sudo))
}

/// The flags of `become_flags` that fixpoint passes on to `method`: the ones that only change
/// the environment the agent starts in. sudo's `-S` (password on stdin, where fixpoint's channel
/// is) and `-n` are dropped, since fixpoint decides how sudo gets the password; su's `-s` takes
/// the shell that runs the agent (`-s /bin/sh` for an account whose shell is `nologin`); any
/// other flag is refused rather than guessed at (su's `-c` would replace the agent).
pub fn become_flags_for(method: BecomeMethod, flags: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut words = flags.split_whitespace();
    while let Some(f) = words.next() {
        match (method, f) {
            (BecomeMethod::Sudo, "-S" | "-n" | "--stdin" | "--non-interactive") => {}
            (
                BecomeMethod::Sudo,
                "-H" | "-E" | "-i" | "-s" | "--set-home" | "--preserve-env" | "--login" | "--shell",
            ) => out.push(f.to_string()),
            (BecomeMethod::Sudo, _) if f.starts_with("--preserve-env=") => out.push(f.to_string()),
            (BecomeMethod::Su, "-" | "-l" | "--login" | "-m" | "-p" | "--preserve-environment") => {
                out.push(f.to_string())
            }
            (BecomeMethod::Su, "-s" | "--shell") => {
                let shell = words
                    .next()
                    .ok_or_else(|| format!("become_flags: su's `{f}` needs a shell after it"))?;
                out.extend([f.to_string(), shell.to_string()]);
            }
            (BecomeMethod::Su, _) if f.starts_with("--shell=") => out.push(f.to_string()),
            (_, other) => {
                return Err(format!(
                    "become_flags: `{other}` is not supported by fixpoint with become_method {}",
                    method.name()
                ))
            }
        }
    }
    Ok(out)
}

/// Keywords a task may carry besides its module.
pub(crate) const TASK_KEYS: &[&str] = &[
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
    "with_first_found",
    "with_flattened",
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
    "once_scope",
    "become",
    "become_user",
    "become_method",
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
    "module_defaults",
    "remote_user",
    "port",
    "connection",
    "any_errors_fatal",
    "ignore_unreachable",
    "delegate_facts",
    "async",
    "poll",
    "collections",
    "become_exe",
    "become_flags",
];

/// Ansible keywords fixpoint knows but does not implement yet: refused with a clear message
/// instead of being silently ignored.
pub(crate) const TASK_KEYS_NOT_YET: &[&str] = &["apply", "debugger"];

/// Keywords a play may carry.
pub(crate) const PLAY_KEYS: &[&str] = &[
    "name",
    "hosts",
    "vars",
    "vars_files",
    "gather_facts",
    "gather_subset",
    "gather_timeout",
    "tasks",
    "pre_tasks",
    "post_tasks",
    "handlers",
    "become",
    "become_user",
    "become_method",
    "connection",
    "remote_user",
    "port",
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
    "module_defaults",
    "ignore_unreachable",
    "vars_prompt",
    "collections",
    "become_exe",
    "become_flags",
    "throttle",
    "run_once",
    "user",
];

pub(crate) const PLAY_KEYS_NOT_YET: &[&str] = &[];

/// The short name of an action key: `ansible.builtin.import_tasks` → `import_tasks`.
pub(crate) fn short_name(k: &str) -> &str {
    k.strip_prefix("ansible.builtin.")
        .or_else(|| k.strip_prefix("ansible.legacy."))
        .unwrap_or(k)
}

/// The entries of a mapping, or an error naming what was expected (`what`: "a task", ...).
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

/// Refuse the first key that is neither `known` nor accepted by `extra_ok`: keys of
/// `not_yet` are named as unsupported, others get a "did you mean" from `known`.
pub(crate) fn check_keys(
    entries: &[(String, Pos, Node)],
    known: &[&str],
    not_yet: &[&str],
    what: &str,
    extra_ok: impl Fn(&str) -> bool,
) -> Result<(), Diagnostic> {
    for (k, kpos, v) in entries {
        if known.contains(&k.as_str()) || extra_ok(k) {
            continue;
        }
        // `debugger: never` (or null) asks for no debugger: nothing to do.
        if k == "debugger" && (matches!(v.kind, Kind::Null) || v.as_str() == Some("never")) {
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
            let e = node.err(format!("`{key}` must be a boolean, found \"{s}\""));
            match (key, Templar::is_template(s)) {
                // ansible-core reads it as written: a template is a non-empty string, so true
                // whatever it would give; refused rather than taken either way.
                ("any_errors_fatal", true) => e.help(
                    "ansible-core does not render `any_errors_fatal`: a template there is taken \
                     as true whatever it gives; write true or false",
                ),
                (_, true) => e.help("this keyword is not rendered: write true or false"),
                _ => e.help("use true or false"),
            }
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
/// `listen` topics: ansible-core never renders them (a templated one is matched as its text,
/// which no rendered `notify` name equals), so one written as a template is refused rather
/// than left listening to nothing (a change without its restart).
pub(crate) fn plain_names(node: &Node, key: &str) -> Result<Vec<String>, Diagnostic> {
    let names = strings_of(node, key)?;
    if names.iter().any(|n| is_template(n)) {
        return Err(node
            .err(format!(
                "a `{key}` topic given as a template would never be notified: ansible-core \
                 does not render `{key}` topics, and the `notify` names it matches them with \
                 are rendered"
            ))
            .help(
                "write the topic as plain text: ansible-core matches a `listen` topic as written",
            ));
    }
    Ok(names)
}

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

/// A mapping of variables (`vars:`, a vars file), each name checked.
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

/// A name Ansible accepts for a variable: a letter or `_`, then letters, digits and `_`.
pub fn is_var_name(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Variable names must be valid identifiers, as in Ansible.
pub fn check_var_name(name: &str, pos: &Pos) -> Result<(), Diagnostic> {
    if is_var_name(name) {
        Ok(())
    } else {
        Err(
            Diagnostic::at(pos, format!("invalid variable name `{name}`")).help(
                "variable names start with a letter or _ and contain only letters, digits and _",
            ),
        )
    }
}

/// `environment:` as ansible-core takes it: a mapping, a template that gives one when the task
/// runs, or a list of those (merged in order).
pub(crate) fn env_of(node: &Node) -> Result<Environment, Diagnostic> {
    let part = |n: &Node| match &n.kind {
        Kind::Map(_) => Ok(EnvPart::Map(
            n.to_json().as_object().cloned().unwrap_or_default(),
        )),
        Kind::Str(s) if Templar::is_template(s) => Ok(EnvPart::Template(s.clone())),
        _ => Err(n
            .err("`environment` must be a mapping of variable names to values")
            .help(
                "e.g. `environment: {HTTP_PROXY: \"http://proxy:3128\"}`, or a template \
                 giving one: `environment: \"{{ proxy_env }}\"`",
            )),
    };
    match &node.kind {
        Kind::Seq(items) => items.iter().map(part).collect(),
        _ => Ok(vec![part(node)?]),
    }
}

/// A percentage: `30`, `30%`, `"30%"`.
pub(crate) fn percent_of(n: &Node, key: &str) -> Result<f64, Diagnostic> {
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
pub(crate) fn serial_of(n: &Node) -> Result<Vec<BatchSize>, Diagnostic> {
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

/// The loop of a task or include: its raw value, its kind (`loop`, `with_items`, `with_dict`…),
/// `loop_var` and `index_var`. `task`: a task also takes `pause` and `extended` (an include
/// does not).
pub(crate) struct LoopSpec {
    pub items: Option<Value>,
    pub kind: LoopKind,
    /// The lookup of a `with_<lookup>` loop (`LoopKind::Lookup`).
    pub lookup: Option<String>,
    pub var: String,
    pub index_var: Option<String>,
    /// `loop_control.extended` (and `extended_allitems`, true unless said): `ansible_loop`
    /// for each item, with `allitems` when true.
    pub extended: Option<bool>,
}

pub(crate) fn loop_of(node: &Node, task: bool) -> Result<LoopSpec, Diagnostic> {
    let opt = |key: &str| node.get(key);
    let entries = node.as_map().unwrap_or_default();
    let mut present = entries.iter().filter_map(|(k, _, n)| {
        let kind =
            LoopKind::of_key(k).or_else(|| LoopKind::lookup_of_key(k).map(|_| LoopKind::Lookup))?;
        Some((k.as_str(), kind, n))
    });
    let first = present.next();
    if let (Some((a, _, _)), Some((b, _, n))) = (first, present.next()) {
        return Err(n.err(format!(
            "a task has one loop, but this one has `{a}` and `{b}`"
        )));
    }
    let mut var = "item".to_string();
    let mut index_var = None;
    let mut extended = None;
    if let Some(lc) = opt("loop_control") {
        let task_only = ["pause", "break_when"];
        check_keys(
            map_of(lc, "`loop_control`")?,
            &[
                "loop_var",
                "index_var",
                "label",
                "extended",
                "extended_allitems",
            ],
            if task { &[] } else { &task_only },
            "`loop_control`",
            |k| task && task_only.contains(&k),
        )?;
        if let Some(v) = lc.get("extended") {
            let allitems = match lc.get("extended_allitems") {
                Some(a) => bool_of(a, "extended_allitems")?,
                None => true,
            };
            extended = bool_of(v, "extended")?.then_some(allitems);
        }
        if let Some(v) = lc.get("loop_var") {
            var = string_of(v, "loop_var")?;
            // A templated name (`"{{ loop_var_name }}"`) is rendered, and checked, on each host.
            if !crate::template::Templar::is_template(&var) {
                check_var_name(&var, &v.pos)?;
            }
        }
        if let Some(v) = lc.get("index_var") {
            index_var = Some(string_of(v, "index_var")?);
        }
    }
    Ok(LoopSpec {
        items: first.map(|(_, kind, n)| super::loops::mark_terms(kind, n.to_json())),
        kind: first.map(|(_, k, _)| k).unwrap_or_default(),
        lookup: first.and_then(|(k, _, _)| LoopKind::lookup_of_key(k).map(str::to_string)),
        var,
        index_var,
        extended,
    })
}

#[cfg(test)]
mod keyword_list_tests {
    use super::*;

    /// Every task keyword of ansible-core 2.19 is either implemented or refused as "not
    /// supported yet", never reported as unknown (`action`, `local_action` and `with_<lookup>`
    /// are read where the module is).
    #[test]
    fn every_ansible_task_keyword_is_implemented_or_refused_as_not_yet() {
        let ansible = [
            "any_errors_fatal",
            "args",
            "async",
            "become",
            "become_exe",
            "become_flags",
            "become_method",
            "become_user",
            "changed_when",
            "check_mode",
            "collections",
            "connection",
            "debugger",
            "delay",
            "delegate_facts",
            "delegate_to",
            "diff",
            "environment",
            "failed_when",
            "ignore_errors",
            "ignore_unreachable",
            "loop",
            "loop_control",
            "module_defaults",
            "name",
            "no_log",
            "notify",
            "poll",
            "port",
            "register",
            "remote_user",
            "retries",
            "run_once",
            "tags",
            "throttle",
            "timeout",
            "until",
            "vars",
            "when",
        ];
        for k in ansible {
            assert!(
                TASK_KEYS.contains(&k) || TASK_KEYS_NOT_YET.contains(&k),
                "task keyword `{k}` is neither implemented nor listed as not yet"
            );
        }
    }
}
