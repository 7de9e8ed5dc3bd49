//! The checked run configuration built from the raw command line: the engine never sees clap types.

use crate::cli::{Format, PlayDefaultArgs, RunArgs};
use crate::connection::{Handshakes, Secret};
use crate::diag::{Diagnostic, Pos};
use crate::yaml;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `Debug` shows no password: `become_password` is a `Secret`.
#[derive(Debug, Clone)]
pub struct Config {
    pub playbooks: Vec<PathBuf>,
    /// The `-i` sources in order (files, directories, host lists); none: the implicit localhost.
    pub inventory: Vec<PathBuf>,
    pub limit: Option<String>,
    pub check: bool,
    pub diff: bool,
    pub extra_vars: std::sync::Arc<Map<String, Value>>,
    pub tags: Vec<String>,
    pub skip_tags: Vec<String>,
    pub twice: bool,
    pub json: bool,
    pub verbosity: u8,
    pub forks: usize,
    pub connect_timeout: Duration,
    /// The cap on SSH handshakes in flight (`--connect-concurrency`), shared by every clone.
    pub handshakes: Handshakes,
    pub ssh_config: Option<PathBuf>,
    pub accept_new_host_keys: bool,
    /// The `-K` answer.
    pub become_password: Option<Secret>,
    pub force_handlers: bool,
    /// `ANSIBLE_HOST_PATTERN_MISMATCH=error`: a play's pattern term naming no host or group
    /// stops the run (else a play that matches nothing is skipped with a warning).
    pub pattern_mismatch_fails: bool,
    /// Seconds to wait for another run's host lock (0: fail at once).
    pub lock_timeout: u64,
    /// Where roles are searched after `roles/` beside the playbook.
    pub roles_path: Vec<PathBuf>,
    /// `--list-*` / `--syntax-check`: print and exit instead of running.
    pub listing: Option<Listing>,
    /// `--start-at-task`.
    pub start_at_task: Option<String>,
    /// `--shard i/N`: only this shard's hosts run.
    pub shard: Option<crate::inventory::Shard>,
    /// `--shard-allow-cross`: plays that need the whole fleet run with their per-shard meaning.
    pub shard_allow_cross: bool,
    /// `--no-progress`: no live status lines even on a terminal.
    pub no_progress: bool,
    /// Not `--no-pipelining`: sections of tasks run without barriers, in batches (engine/pipeline.rs).
    pub pipelining: bool,
    /// `-b`, `--become-user`, `--become-method`, `-u`, `-c`.
    pub play_defaults: PlayDefaults,
}

/// What a play does where neither its keywords nor a connection variable say otherwise (the
/// command line's `-b`, `--become-user`, `--become-method`, `-u`, `-c`, as ansible-playbook
/// makes them the defaults of those keywords); `connection::spec` reads them last.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlayDefaults {
    pub become_: bool,
    pub become_user: Option<String>,
    /// `sudo`, `su` or a template: the parser refuses the rest (`cli::become_method`).
    pub become_method: Option<String>,
    pub remote_user: Option<String>,
    /// A connection `connection::spec` knows, or a template (`cli::connection`).
    pub connection: Option<String>,
}

impl From<PlayDefaultArgs> for PlayDefaults {
    fn from(a: PlayDefaultArgs) -> Self {
        PlayDefaults {
            become_: a.become_,
            become_user: a.become_user,
            become_method: a.become_method,
            remote_user: a.remote_user,
            connection: a.connection,
        }
    }
}

impl PlayDefaults {
    /// Whether a value is a template, rendered for each task (so the connection spec is too).
    pub fn templated(&self) -> bool {
        [
            &self.become_user,
            &self.become_method,
            &self.remote_user,
            &self.connection,
        ]
        .into_iter()
        .flatten()
        .any(|v| fixpoint_modules::params::is_template(v))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    Tasks,
    Hosts,
    Tags,
    SyntaxCheck,
}

/// `--roles-path` (colon-separated, repeatable), then `ANSIBLE_ROLES_PATH`.
pub fn roles_path(cli: &[String]) -> Vec<PathBuf> {
    let env = std::env::var("ANSIBLE_ROLES_PATH").unwrap_or_default();
    cli.iter()
        .map(String::as_str)
        .chain(std::iter::once(env.as_str()))
        .flat_map(|s| s.split(':'))
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .collect()
}

/// `ANSIBLE_GATHERING`: whether a play that does not say `gather_facts` gathers facts
/// (`implicit`, the default, yes; `explicit`, no), as ansible-core reads it.
pub fn default_gathering() -> Result<bool, Diagnostic> {
    match std::env::var("ANSIBLE_GATHERING")
        .unwrap_or_default()
        .as_str()
    {
        "" | "implicit" => Ok(true),
        "explicit" => Ok(false),
        other => Err(Diagnostic::new(format!(
            "ANSIBLE_GATHERING={other} is not supported by fixpoint yet"
        ))
        .help("fixpoint reads `implicit` (the default) and `explicit`")),
    }
}

/// `ANSIBLE_HOST_PATTERN_MISMATCH`: `warning` (the default) and `ignore` skip a play whose
/// pattern matches nothing, `error` stops the run at a pattern term that names no host or group.
fn pattern_mismatch_fails() -> Result<bool, Diagnostic> {
    match std::env::var("ANSIBLE_HOST_PATTERN_MISMATCH")
        .unwrap_or_default()
        .trim()
    {
        "" | "warning" | "ignore" => Ok(false),
        "error" => Ok(true),
        other => Err(Diagnostic::new(format!(
            "ANSIBLE_HOST_PATTERN_MISMATCH={other} is not one of warning, error, ignore"
        ))
        .help("unset it, or give one of those three, as ansible-core accepts")),
    }
}

/// The `ANSIBLE_*` settings fixpoint reads as ansible-core does (README, "ansible-core's
/// settings"), besides where collections and vault secrets are found.
pub const ANSIBLE_ENV: &[&str] = &[
    "ANSIBLE_ROLES_PATH",
    "ANSIBLE_GATHERING",
    "ANSIBLE_STRATEGY",
    "ANSIBLE_TIMEOUT",
    "ANSIBLE_FORCE_HANDLERS",
    "ANSIBLE_HOST_PATTERN_MISMATCH",
    "ANSIBLE_PRIVATE_ROLE_VARS",
    "ANSIBLE_INJECT_FACT_VARS",
    "ANSIBLE_ERROR_ON_MISSING_HANDLER",
];

/// `ANSIBLE_PRIVATE_ROLE_VARS`, when it is set: whether roles keep their defaults and vars to
/// themselves. Unset, an imported role's are the play's and an included one's are not; set
/// (even to nothing, which is false), it decides for both (a role's own `public` still wins),
/// as ansible-core reads it.
pub fn private_role_vars() -> Option<bool> {
    std::env::var_os("ANSIBLE_PRIVATE_ROLE_VARS").map(|_| env_bool("ANSIBLE_PRIVATE_ROLE_VARS"))
}

/// `ANSIBLE_INJECT_FACT_VARS`: whether facts are variables of their own (`ansible_os_family`)
/// besides `ansible_facts.os_family`; true unless it says false, as ansible-core reads it.
pub fn inject_fact_vars() -> bool {
    std::env::var_os("ANSIBLE_INJECT_FACT_VARS").is_none() || env_bool("ANSIBLE_INJECT_FACT_VARS")
}

/// `ANSIBLE_ERROR_ON_MISSING_HANDLER`: whether a task that notifies a name no handler answers
/// is an error (the run stops) rather than a warning; true unless it says false, as
/// ansible-core reads it.
pub fn error_on_missing_handler() -> bool {
    std::env::var_os("ANSIBLE_ERROR_ON_MISSING_HANDLER").is_none()
        || env_bool("ANSIBLE_ERROR_ON_MISSING_HANDLER")
}

/// How a setting's value is read (`ANSIBLE_SETTINGS`).
type SettingValue = fn() -> Value;

/// The ansible-core settings fixpoint reads, by ansible-core's names, each with its value as
/// ansible-core gives it to `lookup('config', …)`: its environment variable as fixpoint reads
/// it, else ansible-core's default.
const ANSIBLE_SETTINGS: &[(&str, SettingValue)] = &[
    ("DEFAULT_FORCE_HANDLERS", || {
        Value::Bool(env_bool("ANSIBLE_FORCE_HANDLERS"))
    }),
    ("DEFAULT_GATHERING", || {
        env_text("ANSIBLE_GATHERING", "implicit")
    }),
    ("DEFAULT_PRIVATE_ROLE_VARS", || {
        Value::Bool(private_role_vars().unwrap_or(false))
    }),
    ("DEFAULT_STRATEGY", || Value::String(default_strategy())),
    ("ERROR_ON_MISSING_HANDLER", || {
        Value::Bool(error_on_missing_handler())
    }),
    ("HOST_PATTERN_MISMATCH", || {
        env_text("ANSIBLE_HOST_PATTERN_MISMATCH", "warning")
    }),
    ("INJECT_FACTS_AS_VARS", || Value::Bool(inject_fact_vars())),
];

/// The names `ansible_setting` knows.
pub fn ansible_setting_names() -> impl Iterator<Item = &'static str> {
    ANSIBLE_SETTINGS.iter().map(|(name, _)| *name)
}

/// One of ansible-core's settings fixpoint reads, by ansible-core's name, as ansible-core gives
/// it; `None` for any other name.
pub fn ansible_setting(name: &str) -> Option<Value> {
    ANSIBLE_SETTINGS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, value)| value())
}

/// An `ANSIBLE_*` text setting, or its default when unset or empty.
fn env_text(var: &str, default: &str) -> Value {
    let v = std::env::var(var).unwrap_or_default();
    Value::String(if v.is_empty() { default.to_string() } else { v })
}

/// An `ANSIBLE_*` boolean setting as ansible-core reads one: `yes`, `on`, `1`, `true`, `y`, `t`
/// (any case) are true, anything else (or nothing) false.
fn env_bool(name: &str) -> bool {
    let v = std::env::var(name).unwrap_or_default().to_ascii_lowercase();
    matches!(v.trim(), "yes" | "on" | "1" | "true" | "y" | "t")
}

/// `ANSIBLE_STRATEGY`: the strategy of a play that does not say `strategy` (`linear` by
/// default), as ansible-core reads it.
pub fn default_strategy() -> String {
    std::env::var("ANSIBLE_STRATEGY")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "linear".into())
}

impl Config {
    pub fn from_run_args(a: RunArgs, check_cmd: bool) -> Result<Config, Diagnostic> {
        let RunArgs {
            playbooks,
            run,
            change,
            controller: ctl,
            apply,
            defaults,
        } = a;
        let extra_vars = parse_extra_vars(&run.extra_vars)?;
        if apply.twice && (change.check || check_cmd) {
            return Err(
                Diagnostic::new("--twice cannot be combined with check mode")
                    .help("--twice applies changes and then proves a second run changes nothing"),
            );
        }
        if apply.shard_allow_cross && apply.shard.is_none() {
            return Err(Diagnostic::new("--shard-allow-cross needs --shard")
                .help("give the shard (--shard INDEX/COUNT or FIXPOINT_SHARD), or drop --shard-allow-cross"));
        }
        let become_password = if ctl.ask_become_pass {
            Some(read_become_password()?)
        } else {
            None
        };
        Ok(Config {
            playbooks,
            inventory: run.inventory,
            limit: run.limit,
            check: change.check || check_cmd,
            diff: run.diff || check_cmd,
            extra_vars: extra_vars.into(),
            tags: run.tags,
            skip_tags: run.skip_tags,
            twice: apply.twice,
            json: run.format == Format::Json,
            verbosity: run.verbose,
            forks: ctl.forks,
            connect_timeout: Duration::from_secs(ctl.timeout.max(1)),
            handshakes: Handshakes::new(connect_concurrency(ctl.connect_concurrency)?),
            ssh_config: ctl.ssh_config,
            accept_new_host_keys: ctl.accept_new_host_keys,
            become_password,
            force_handlers: change.force_handlers || env_bool("ANSIBLE_FORCE_HANDLERS"),
            pattern_mismatch_fails: pattern_mismatch_fails()?,
            lock_timeout: run.lock_timeout,
            roles_path: roles_path(&ctl.roles_path),
            listing: if apply.syntax_check {
                Some(Listing::SyntaxCheck)
            } else if apply.list_hosts {
                Some(Listing::Hosts)
            } else if apply.list_tasks {
                Some(Listing::Tasks)
            } else if apply.list_tags {
                Some(Listing::Tags)
            } else {
                None
            },
            start_at_task: apply.start_at_task,
            shard: apply.shard,
            shard_allow_cross: apply.shard_allow_cross,
            no_progress: ctl.no_progress,
            pipelining: !ctl.no_pipelining,
            play_defaults: defaults.into(),
        })
    }
}

impl Config {
    /// Whether a task (or include) with these tags runs under --tags / --skip-tags, with
    /// Ansible's special tags: `always` and `never` on tasks, `all`, `tagged` and `untagged`
    /// in the options (a task without tags is `untagged`; no --tags means `all`), decided in
    /// ansible-core's order.
    pub fn tag_selected(&self, tags: &[String]) -> bool {
        let untagged = tags.iter().all(|t| t == "untagged");
        let has = |t: &str| tags.iter().any(|x| x == t) || (t == "untagged" && untagged);
        let only =
            |t: &str| self.tags.iter().any(|x| x == t) || (t == "all" && self.tags.is_empty());
        let run = has("always")
            || (only("all") && !has("never"))
            || self.tags.iter().any(|t| has(t))
            || (only("tagged") && !untagged && !has("never"));
        if !run {
            return false;
        }
        let skip = |t: &str| self.skip_tags.iter().any(|x| x == t);
        if skip("all") {
            has("always") && !skip("always")
        } else {
            !(self.skip_tags.iter().any(|t| has(t)) || (skip("tagged") && !untagged))
        }
    }

    /// The configuration of `fixpoint journal`: no playbook, default run settings.
    pub fn for_journal(a: &crate::cli::JournalArgs) -> Result<Config, Diagnostic> {
        Ok(Config {
            playbooks: Vec::new(),
            inventory: a.inventory.clone(),
            limit: None,
            check: false,
            diff: false,
            extra_vars: parse_extra_vars(&a.extra_vars)?.into(),
            tags: Vec::new(),
            skip_tags: Vec::new(),
            twice: false,
            json: a.format == Format::Json,
            verbosity: 0,
            forks: 50,
            connect_timeout: Duration::from_secs(30),
            handshakes: Handshakes::new(connect_concurrency(None)?),
            ssh_config: a.ssh_config.clone(),
            accept_new_host_keys: a.accept_new_host_keys,
            become_password: None,
            force_handlers: false,
            pattern_mismatch_fails: false,
            lock_timeout: a.lock_timeout,
            roles_path: Vec::new(),
            listing: None,
            start_at_task: None,
            shard: None,
            shard_allow_cross: false,
            no_progress: false,
            pipelining: true,
            play_defaults: PlayDefaults::default(),
        })
    }
}

/// `--connect-concurrency`, else `FIXPOINT_CONNECT_CONCURRENCY`, else 4 per core (at most 10).
fn connect_concurrency(cli: Option<usize>) -> Result<usize, Diagnostic> {
    let n = match cli {
        Some(n) => n,
        None => match std::env::var("FIXPOINT_CONNECT_CONCURRENCY") {
            Ok(v) => v.trim().parse().map_err(|_| {
                Diagnostic::new(format!(
                    "FIXPOINT_CONNECT_CONCURRENCY=`{v}` is not a number of handshakes"
                ))
                .help("set it to a positive integer, or unset it for the default (4 per core, at most 10)")
            })?,
            Err(_) => Handshakes::default_limit(),
        },
    };
    if n == 0 {
        return Err(Diagnostic::new(
            "the connect concurrency (--connect-concurrency, FIXPOINT_CONNECT_CONCURRENCY) must be at least 1",
        )
            .help("it is how many SSH handshakes run at once; the default is 4 per core, at most 10"));
    }
    Ok(n)
}

/// Read the sudo password once: from the terminal without echo, or one line of stdin.
fn read_become_password() -> Result<Secret, Diagnostic> {
    crate::vault::secrets::read_hidden("BECOME password: ")
        .map(Secret::new)
        .map_err(|e| Diagnostic::new(format!("cannot read the become password: {e}")))
}

/// `-e` values: `k=v k2=v2`, `@file.yml` / `@file.json`, or a JSON/YAML mapping. Later ones win.
pub fn parse_extra_vars(items: &[String]) -> Result<Map<String, Value>, Diagnostic> {
    let mut out = Map::new();
    for item in items {
        let item = item.trim();
        let vars = if let Some(file) = item.strip_prefix('@') {
            let node = yaml::load_file(Path::new(file)).map_err(|mut d| {
                d.msg = format!("-e @{file}: {}", d.msg);
                d
            })?;
            match node.to_json() {
                Value::Object(m) => m,
                Value::Null => Map::new(),
                _ => {
                    return Err(Diagnostic::at(
                        &node.pos,
                        format!("-e @{file}: the file must hold a mapping of variables"),
                    )
                    .help("write one `name: value` line per variable"))
                }
            }
        } else if item.starts_with('{') {
            let json_help = "write a JSON object, quoted for the shell: -e '{\"key\": \"value\"}'";
            let node = yaml::parse_str(item, Path::new("<-e>")).map_err(|d| Diagnostic {
                msg: format!("-e {item}: {}", d.msg),
                ..d.help(json_help)
            })?;
            match node.to_json() {
                Value::Object(m) => m,
                _ => {
                    return Err(
                        Diagnostic::new(format!("-e {item}: expected a mapping")).help(json_help)
                    )
                }
            }
        } else {
            let pos = Pos::file_only(Path::new("<-e>"));
            crate::playbook::parse_kv(item, &pos).map_err(|d| {
                d.help("use -e key=value, -e @vars.yml or -e '{\"key\": \"value\"}'")
            })?
        };
        for (k, v) in vars {
            crate::playbook::check_var_name(&k, &Pos::file_only(Path::new("<-e>")))?;
            out.insert(k, v);
        }
    }
    Ok(out)
}
