//! The `command` and `shell` modules: run a program (directly, or through a shell) unless its
//! `creates`/`removes`/`unless`/`onlyif` guards say the work is already done; Ansible's return values.

use crate::capture::{Captured, Streams};
use crate::fs::expand_user_with;
use crate::params::{de_opt_string, is_template, Bool, StringList};
use crate::time::format_datetime;
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

/// `command`: split `cmd` with shell-words rules (or take `argv`) and exec it without a shell.
pub struct Command;
/// `shell`: run `cmd` with `executable -c` (default `/bin/sh`), so pipes, globs and `&&` work.
pub struct Shell;

fn yes() -> Bool {
    Bool(true)
}

/// Parameters of `command`. (`shell` has its own struct: serde cannot combine `flatten` with
/// `deny_unknown_fields`, so the common fields are repeated.)
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The command line; the controller turns the free form (`command: ls -l`) into this.
    #[serde(default, alias = "_raw_params", deserialize_with = "de_opt_string")]
    pub cmd: Option<String>,
    /// The program and its arguments as a list, for arguments that would need quoting.
    #[serde(default)]
    pub argv: Option<StringList>,
    /// Expand `~` and `$VARS` in the arguments, as Ansible's command does by default.
    #[serde(default = "yes")]
    pub expand_argument_vars: Bool,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub chdir: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub stdin: Option<String>,
    #[serde(default = "yes")]
    pub stdin_add_newline: Bool,
    #[serde(default = "yes")]
    pub strip_empty_ends: Bool,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub creates: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub removes: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub unless: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub onlyif: Option<String>,
    /// Accepted and ignored, as ansible-core's command does since 2.4 (it warns and runs the
    /// program directly): playbooks written for older Ansible still carry it.
    #[serde(default, deserialize_with = "de_opt_string")]
    pub executable: Option<String>,
    /// Environment from the play/task `environment`, passed by the controller.
    #[serde(default, rename = "_env")]
    pub env: Option<Map<String, Value>>,
}

/// Parameters of `shell`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShellParams {
    /// The shell script; the controller turns the free form (`shell: a | b`) into this.
    #[serde(default, alias = "_raw_params", deserialize_with = "de_opt_string")]
    pub cmd: Option<String>,
    /// The shell that runs `cmd` (and the `unless`/`onlyif` guards) with `-c`.
    #[serde(default, deserialize_with = "de_opt_string")]
    pub executable: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub chdir: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub stdin: Option<String>,
    #[serde(default = "yes")]
    pub stdin_add_newline: Bool,
    #[serde(default = "yes")]
    pub strip_empty_ends: Bool,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub creates: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub removes: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub unless: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub onlyif: Option<String>,
    #[serde(default, rename = "_env")]
    pub env: Option<Map<String, Value>>,
}

const DEFAULT_SHELL: &str = "/bin/sh";

/// Everything needed to check the guards and run the command, resolved from either params struct.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// The program and its arguments, after `~`/`$VAR` expansion (command) or as `sh -c` (shell).
    pub argv: Vec<String>,
    /// `cmd` as Ansible reports it: the argument list for command, the script for shell.
    pub shown: Value,
    pub chdir: Option<PathBuf>,
    pub stdin: Option<Vec<u8>>,
    pub strip_empty_ends: bool,
    /// `_env`, applied over the agent's environment for the command and the guards.
    pub env: Vec<(String, String)>,
    /// The shell that runs `unless`/`onlyif`.
    pub guard_shell: String,
    pub creates: Option<String>,
    pub removes: Option<String>,
    pub unless: Option<String>,
    pub onlyif: Option<String>,
}

/// What the probe found: the resolved invocation, and why it is skipped (if it is).
#[derive(Debug)]
pub struct Probed {
    pub inv: Invocation,
    pub skip: Option<String>,
    /// ansible-core's `msg` for a skip by `creates`/`removes` ("Did not run command since ...";
    /// "Would" in check mode); `skip` is its `stdout`, and the message of fixpoint's own guards.
    pub skip_msg: Option<String>,
}

/// The one thing a command plan can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Run,
}

impl Module for Command {
    type Params = Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        match (&p.cmd, &p.argv) {
            (Some(_), Some(_)) => {
                // Ansible's wording first: its own tests look for it.
                return Err(ModuleError::Params(
                    "parameters are mutually exclusive: _raw_params|cmd|argv (give the command \
                     line or the argument list, not both)"
                        .into(),
                ));
            }
            (Some(c), None) => {
                if c.trim().is_empty() {
                    return Err(no_command());
                }
                if !is_template(c) && split_command(c).is_none() {
                    return Err(ModuleError::Params(format!(
                        "`cmd` has an unterminated quote or a trailing backslash: {c}"
                    )));
                }
            }
            (None, Some(a)) if a.0.is_empty() || a.0[0].is_empty() => return Err(no_command()),
            (None, Some(_)) => {}
            (None, None) => return Err(missing_command()),
        }
        check_env(&p.env)
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Probed, ModuleError> {
        let env = env_pairs(&p.env)?;
        let lookup = EnvLookup(&env);
        let (argv, shown) = match (&p.cmd, &p.argv) {
            (Some(c), _) => {
                let words = split_command(c).ok_or_else(|| {
                    ModuleError::Params(format!(
                        "`cmd` has an unterminated quote or a trailing backslash: {c}"
                    ))
                })?;
                let shown = json!(words);
                (words, shown)
            }
            (None, Some(a)) => (a.0.clone(), json!(a.0)),
            (None, None) => return Err(no_command()),
        };
        if argv.is_empty() {
            return Err(no_command());
        }
        let argv = if p.expand_argument_vars.0 {
            argv.iter().map(|a| expand_path(a, &lookup)).collect()
        } else {
            argv
        };
        let inv = Invocation {
            argv,
            shown,
            chdir: p.chdir.as_deref().map(|d| expand_path(d, &lookup).into()),
            stdin: stdin_bytes(&p.stdin, p.stdin_add_newline.0),
            strip_empty_ends: p.strip_empty_ends.0,
            guard_shell: DEFAULT_SHELL.into(),
            creates: p.creates.as_deref().map(|c| expand_path(c, &lookup)),
            removes: p.removes.as_deref().map(|c| expand_path(c, &lookup)),
            unless: p.unless.clone(),
            onlyif: p.onlyif.clone(),
            env,
        };
        probe(inv)
    }

    fn plan(p: &Params, state: &Probed, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let mut plan = plan(state, ctx);
        if let Some(x) = &p.executable {
            plan.result.insert(
                "warnings".into(),
                json!([format!(
                    "`executable` is no longer supported by the `command` module (since \
                     Ansible 2.4): `{x}` is not used; use `shell` to run a command through \
                     another shell"
                )]),
            );
        }
        Ok(plan)
    }

    fn apply(
        _: &Params,
        state: Probed,
        _: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        with_empty_msg(execute(&state.inv))
    }
}

impl Module for Shell {
    type Params = ShellParams;
    type State = Probed;
    type Action = Action;

    fn validate(p: &ShellParams) -> Result<(), ModuleError> {
        match p.cmd.as_deref() {
            None => return Err(missing_command()),
            Some(c) if c.trim().is_empty() => return Err(no_command()),
            Some(_) => {}
        }
        if p.executable.as_deref() == Some("") {
            return Err(ModuleError::Params(
                "`executable` is empty; give a shell such as /bin/bash, or leave it out for /bin/sh"
                    .into(),
            ));
        }
        check_env(&p.env)
    }

    fn probe(p: &ShellParams, _ctx: &Ctx) -> Result<Probed, ModuleError> {
        let env = env_pairs(&p.env)?;
        let lookup = EnvLookup(&env);
        let script = p.cmd.clone().ok_or_else(no_command)?;
        let shell = p
            .executable
            .clone()
            .unwrap_or_else(|| DEFAULT_SHELL.to_string());
        let inv = Invocation {
            argv: vec![shell.clone(), "-c".into(), script.clone()],
            shown: Value::String(script),
            chdir: p.chdir.as_deref().map(|d| expand_path(d, &lookup).into()),
            stdin: stdin_bytes(&p.stdin, p.stdin_add_newline.0),
            strip_empty_ends: p.strip_empty_ends.0,
            guard_shell: shell,
            creates: p.creates.as_deref().map(|c| expand_path(c, &lookup)),
            removes: p.removes.as_deref().map(|c| expand_path(c, &lookup)),
            unless: p.unless.clone(),
            onlyif: p.onlyif.clone(),
            env,
        };
        probe(inv)
    }

    fn plan(_: &ShellParams, state: &Probed, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        Ok(plan(state, ctx))
    }

    fn apply(
        _: &ShellParams,
        state: Probed,
        _: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        with_empty_msg(execute(&state.inv))
    }
}

/// No command at all: Ansible's wording first (its own tests look for it), then ours.
fn missing_command() -> ModuleError {
    ModuleError::Params(
        "one of the following is required: _raw_params, cmd, argv (write the command after \
         the module name, or set `cmd`)"
            .into(),
    )
}

fn no_command() -> ModuleError {
    ModuleError::Params(
        "no command given: set `cmd` (or write the command after the module name)".into(),
    )
}

fn stdin_bytes(stdin: &Option<String>, add_newline: bool) -> Option<Vec<u8>> {
    stdin.as_ref().map(|s| {
        let mut b = s.clone().into_bytes();
        // Ansible appends the newline unconditionally when asked to.
        if add_newline {
            b.push(b'\n');
        }
        b
    })
}

fn check_env(env: &Option<Map<String, Value>>) -> Result<(), ModuleError> {
    env_pairs(env).map(|_| ())
}

/// `_env` as name/value pairs; scalars become strings the way Python's `str()` spells them.
pub(crate) fn env_pairs(
    env: &Option<Map<String, Value>>,
) -> Result<Vec<(String, String)>, ModuleError> {
    let Some(env) = env else {
        return Ok(Vec::new());
    };
    env.iter()
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => if *b { "True" } else { "False" }.to_string(),
                Value::Null => String::new(),
                other => {
                    return Err(ModuleError::Params(format!(
                        "environment variable `{k}` must be a string, found {other}"
                    )))
                }
            };
            if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
                return Err(ModuleError::Params(format!(
                    "environment variable `{k}` has an invalid name or value"
                )));
            }
            Ok((k.clone(), v))
        })
        .collect()
}

/// Variable lookup for expansion: `_env` first, then the agent's own environment.
struct EnvLookup<'a>(&'a [(String, String)]);

impl EnvLookup<'_> {
    fn get(&self, name: &str) -> Option<String> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var(name).ok())
    }
}

/// Python's `os.path.expandvars`: `$name` and `${name}` replaced when set, left as written otherwise.
fn expand_vars(s: &str, env: &EnvLookup) -> String {
    if !s.contains('$') {
        return s.to_string();
    }
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| {
        regex::Regex::new(r"\$([A-Za-z0-9_]+|\{[^}]*\})").expect("a valid pattern")
    });
    re.replace_all(s, |c: &regex::Captures| {
        let name = c[1].trim_start_matches('{').trim_end_matches('}');
        env.get(name).unwrap_or_else(|| c[0].to_string())
    })
    .into_owned()
}

/// Ansible's `type='path'` parameters (`chdir`, `creates`, `removes`), and `argv` words with
/// `expand_argument_vars`, get `$VAR` and then `~` expanded, `$HOME` included, from the task's
/// `environment` first.
fn expand_path(s: &str, env: &EnvLookup) -> String {
    expand_user_with(&expand_vars(s, env), || env.get("HOME").map(Into::into))
        .to_string_lossy()
        .into_owned()
}

/// Split a command line as Python's `shlex.split` does (which Ansible uses). The shlex crate
/// treats `#` at the start of a word as a comment and does not count `\r` as blank; Python's
/// `shlex.split` does neither thing, so both are adjusted before splitting.
pub(crate) fn split_command(s: &str) -> Option<Vec<String>> {
    let mut prepared = String::with_capacity(s.len() + 4);
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut at_word_start = true;
    for c in s.chars() {
        if escaped {
            prepared.push(c);
            escaped = false;
            at_word_start = false;
            continue;
        }
        match quote {
            Some(q) => {
                if c == q {
                    quote = None;
                } else if c == '\\' && q == '"' {
                    escaped = true;
                }
                prepared.push(c);
            }
            None => match c {
                '\\' => {
                    escaped = true;
                    prepared.push(c);
                    at_word_start = false;
                }
                '\'' | '"' => {
                    quote = Some(c);
                    prepared.push(c);
                    at_word_start = false;
                }
                ' ' | '\t' | '\n' | '\r' => {
                    prepared.push(if c == '\r' { ' ' } else { c });
                    at_word_start = true;
                }
                '#' if at_word_start => {
                    prepared.push_str("\\#");
                    at_word_start = false;
                }
                _ => {
                    prepared.push(c);
                    at_word_start = false;
                }
            },
        }
    }
    shlex::split(&prepared)
}

/// Check the guards in Ansible's order (creates, removes), then `unless` and `onlyif`.
/// Read-only by contract: guard commands are declared to only look, which is why they also
/// run in check mode.
pub(crate) fn probe(inv: Invocation) -> Result<Probed, ModuleError> {
    if let Some(dir) = &inv.chdir {
        if !dir.is_dir() {
            let mut result = Map::new();
            result.insert("cmd".into(), inv.shown.clone());
            return Err(ModuleError::Failed {
                msg: format!(
                    "Unable to change directory before execution: [Errno 2] No such file or directory: '{}'",
                    dir.display()
                ),
                result,
            });
        }
    }
    let mut skip = None;
    let mut skip_msg = None;
    if let Some(c) = &inv.creates {
        if path_exists(c, inv.chdir.as_deref()) {
            skip = Some(format!("skipped, since {c} exists"));
            skip_msg = Some(format!("Did not run command since '{c}' exists"));
        }
    }
    if skip.is_none() {
        if let Some(r) = &inv.removes {
            if !path_exists(r, inv.chdir.as_deref()) {
                skip = Some(format!("skipped, since {r} does not exist"));
                skip_msg = Some(format!("Did not run command since '{r}' does not exist"));
            }
        }
    }
    if skip.is_none() {
        if let Some(u) = &inv.unless {
            if run_guard(&inv, "unless", u)? {
                skip = Some("skipped, since `unless` succeeded".into());
            }
        }
    }
    if skip.is_none() {
        if let Some(o) = &inv.onlyif {
            if !run_guard(&inv, "onlyif", o)? {
                skip = Some("skipped, since `onlyif` failed".into());
            }
        }
    }
    Ok(Probed {
        inv,
        skip,
        skip_msg,
    })
}

/// Whether `pattern` matches an existing path (a glob, as Python's `glob.glob` in Ansible);
/// relative patterns are taken from `chdir`, since Ansible changes directory first.
fn path_exists(pattern: &str, chdir: Option<&Path>) -> bool {
    let literal = match chdir {
        Some(d) if !Path::new(pattern).is_absolute() => d.join(pattern),
        _ => PathBuf::from(pattern),
    };
    if !pattern.contains(['*', '?', '[']) {
        // Like Python's glob for a plain path: a dangling symlink still counts.
        return std::fs::symlink_metadata(&literal).is_ok();
    }
    let full = match chdir {
        Some(d) if !Path::new(pattern).is_absolute() => {
            format!("{}/{pattern}", glob::Pattern::escape(&d.to_string_lossy()))
        }
        _ => pattern.to_string(),
    };
    let opts = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        // Python's glob: `*` does not match names starting with a dot.
        require_literal_leading_dot: true,
    };
    match glob::glob_with(&full, opts) {
        Ok(mut paths) => paths.any(|p| p.is_ok()),
        Err(_) => std::fs::symlink_metadata(&literal).is_ok(),
    }
}

/// Run an `unless`/`onlyif` guard through the shell; true when it exits 0.
fn run_guard(inv: &Invocation, which: &str, script: &str) -> Result<bool, ModuleError> {
    let mut c = std::process::Command::new(&inv.guard_shell);
    c.arg("-c")
        .arg(script)
        .envs(inv.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(d) = &inv.chdir {
        c.current_dir(d);
    }
    // A group of its own, registered while it runs: a task timeout stops the guard too.
    c.process_group(0);
    let cannot = |e: std::io::Error| {
        ModuleError::failed(format!(
            "cannot run the `{which}` command with {}: {e}",
            inv.guard_shell
        ))
    };
    let mut child = c.spawn().map_err(cannot)?;
    let _running = crate::children::register(child.id());
    child.wait().map(|s| s.success()).map_err(cannot)
}

pub(crate) fn plan(state: &Probed, ctx: &Ctx) -> Plan<Action> {
    let mut plan = Plan::new();
    plan.result.insert("cmd".into(), state.inv.shown.clone());
    match &state.skip {
        Some(why) => {
            // Ansible's shape for a skipped command: rc 0 and the reason as stdout.
            output_fields(&mut plan.result, 0, why, "");
            for k in ["start", "end", "delta"] {
                plan.result.insert(k.into(), Value::Null);
            }
            plan.msg = Some(match &state.skip_msg {
                Some(m) if ctx.check => m.replacen("Did", "Would", 1),
                Some(m) => m.clone(),
                None => why.clone(),
            });
        }
        None => {
            if ctx.check {
                output_fields(&mut plan.result, 0, "", "");
                for k in ["start", "end", "delta"] {
                    plan.result.insert(k.into(), Value::Null);
                }
                plan.msg = Some("Command would have run if not in check mode".into());
                let inv = &state.inv;
                let guarded = inv.creates.is_some()
                    || inv.removes.is_some()
                    || inv.unless.is_some()
                    || inv.onlyif.is_some();
                if !guarded {
                    // As Ansible's command module: without a guard to judge by, a command in
                    // check mode is skipped (not changed).
                    plan.result.insert("skipped".into(), Value::Bool(true));
                    return plan;
                }
            }
            plan.actions.push(Action::Run);
        }
    }
    plan
}

fn output_fields(out: &mut Map<String, Value>, rc: i32, stdout: &str, stderr: &str) {
    out.insert("rc".into(), json!(rc));
    out.insert("stdout".into(), json!(stdout));
    out.insert("stderr".into(), json!(stderr));
    out.insert("stdout_lines".into(), json!(splitlines(stdout)));
    out.insert("stderr_lines".into(), json!(splitlines(stderr)));
}

/// ansible-core's command module (shell's too) always returns `msg`, empty when the command
/// succeeded; `raw` and `script`, which also run through [`execute`], have none.
fn with_empty_msg(
    r: Result<Map<String, Value>, ModuleError>,
) -> Result<Map<String, Value>, ModuleError> {
    r.map(|mut out| {
        out.insert("msg".into(), json!(""));
        out
    })
}

/// Run the command and collect Ansible's return values; a non-zero exit is a failure carrying them.
pub(crate) fn execute(inv: &Invocation) -> Result<Map<String, Value>, ModuleError> {
    let mut c = std::process::Command::new(&inv.argv[0]);
    c.args(&inv.argv[1..])
        .envs(inv.env.iter().map(|(k, v)| (k, v)))
        // Never inherit the agent's stdin: it may be the controller's channel.
        .stdin(if inv.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(d) = &inv.chdir {
        c.current_dir(d);
    }
    // The command and whatever it starts share a process group of their own, registered while
    // it runs: a task timeout or a controller that hangs up kills all of it (see `children`).
    c.process_group(0);
    let start = SystemTime::now();
    let t0 = Instant::now();
    let mut child = c.spawn().map_err(|e| spawn_error(inv, &e))?;
    let _running = crate::children::register(child.id());
    // Feed stdin from a thread so a child that writes a lot before reading cannot deadlock us.
    let feeder = match (child.stdin.take(), &inv.stdin) {
        (Some(mut pipe), Some(data)) => {
            let data = data.clone();
            // A child that exits without reading gives EPIPE, which is not our failure.
            Some(std::thread::spawn(move || {
                let _ = pipe.write_all(&data);
            }))
        }
        _ => None,
    };
    // Both pipes are drained at once (a child blocked on a full stderr pipe would never close
    // stdout), each into a bounded capture; once the command has exited, what it left running
    // in the background may keep them open: they are read until they go quiet for a second, as
    // ansible-core reads them (Ansible's command_shell target runs `yoink.sh &` under a timeout).
    let mut streams = Streams::new();
    streams.add(child.stdout.take(), OUTPUT_CAP);
    streams.add(child.stderr.take(), OUTPUT_CAP);
    let status = child.wait();
    let mut caps = streams.finish(Duration::from_secs(1)).into_iter();
    let (out_cap, err_cap) = (
        caps.next().unwrap_or_default(),
        caps.next().unwrap_or_default(),
    );
    let status = status
        .map_err(|e| ModuleError::failed(format!("waiting for `{}` failed: {e}", inv.argv[0])))?;
    if let Some(f) = feeder {
        let _ = f.join();
    }
    let delta = t0.elapsed();
    let end = start + delta;

    // Python reports death by signal N as rc -N.
    let rc = status.code().unwrap_or_else(|| {
        use std::os::unix::process::ExitStatusExt;
        -status.signal().unwrap_or(0)
    });
    let mut stdout = capped_text(&out_cap);
    let mut stderr = capped_text(&err_cap);
    if inv.strip_empty_ends {
        stdout.truncate(stdout.trim_end_matches(['\r', '\n']).len());
        stderr.truncate(stderr.trim_end_matches(['\r', '\n']).len());
    }
    let mut out = Map::new();
    out.insert("cmd".into(), inv.shown.clone());
    output_fields(&mut out, rc, &stdout, &stderr);
    out.insert("start".into(), json!(format_datetime(start)));
    out.insert("end".into(), json!(format_datetime(end)));
    out.insert("delta".into(), json!(format_timedelta(delta)));
    for (key, cap) in [
        ("stdout_truncated", &out_cap),
        ("stderr_truncated", &err_cap),
    ] {
        if cap.omitted() > 0 {
            out.insert(
                key.into(),
                json!({"total_bytes": cap.total, "omitted_bytes": cap.omitted(), "cap_bytes": OUTPUT_CAP}),
            );
        }
    }
    if rc != 0 {
        out.insert("changed".into(), json!(true));
        return Err(ModuleError::Failed {
            msg: "non-zero return code".into(),
            result: out,
        });
    }
    Ok(out)
}

/// How much of each of stdout and stderr a command keeps: the first and the last MiB. The result
/// carries each stream twice (`stdout` and `stdout_lines`), and a byte becomes at most 6 in JSON
/// (`\u0001`), so the two streams stay under 48 MiB on the wire, inside the controller's 64 MiB
/// answer limit (`fixpoint_agent::protocol::MAX_RESPONSE_FRAME`).
pub const OUTPUT_CAP: usize = 2 * 1024 * 1024;

/// A captured stream as text, with a line saying how much was cut from its middle.
fn capped_text(c: &Captured) -> String {
    let mut s = String::from_utf8_lossy(&c.head).into_owned();
    if c.omitted() > 0 {
        s.push_str(&format!(
            "\n[fixpoint: {} bytes omitted here; output is capped at {OUTPUT_CAP} bytes per stream, the first and last {} kept]\n",
            c.omitted(),
            OUTPUT_CAP / 2
        ));
    }
    s.push_str(&String::from_utf8_lossy(&c.tail));
    s
}

/// Ansible reports a program that cannot be started with Python's OSError text and the errno as rc.
fn spawn_error(inv: &Invocation, e: &std::io::Error) -> ModuleError {
    let errno = e.raw_os_error().unwrap_or(2);
    let mut result = Map::new();
    result.insert("cmd".into(), inv.shown.clone());
    result.insert("rc".into(), json!(errno));
    result.insert("stdout".into(), json!(""));
    result.insert("stderr".into(), json!(""));
    result.insert("stdout_lines".into(), json!([]));
    result.insert("stderr_lines".into(), json!([]));
    ModuleError::Failed {
        msg: format!(
            "[Errno {errno}] {}: '{}'",
            nix::errno::Errno::from_raw(errno).desc(),
            inv.argv[0]
        ),
        result,
    }
}

/// Python's `str.splitlines()` (what Ansible uses for `stdout_lines`).
pub(crate) fn splitlines(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                out.push(std::mem::take(&mut cur));
            }
            '\n' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}'
            | '\u{2029}' => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Python's `str(timedelta)`: `0:00:01.500000`, `1 day, 2:03:04`.
fn format_timedelta(d: Duration) -> String {
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let mut s = match days {
        0 => String::new(),
        1 => "1 day, ".to_string(),
        n => format!("{n} days, "),
    };
    s.push_str(&format!(
        "{}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    ));
    if d.subsec_micros() != 0 {
        s.push_str(&format!(".{:06}", d.subsec_micros()));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{check_params, run, run_module, Outcome};
    use std::fs;

    fn ok(params: Value) -> Outcome {
        run::<Command>(&params, &Ctx::default()).unwrap()
    }

    fn sh(params: Value) -> Outcome {
        run::<Shell>(&params, &Ctx::default()).unwrap()
    }

    fn failure(r: Result<Outcome, ModuleError>) -> (String, Map<String, Value>) {
        match r {
            Err(ModuleError::Failed { msg, result }) => (msg, result),
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn huge_output_is_capped_keeping_head_and_tail_and_says_so() {
        // 5 MB on each stream, well past the cap; the start and the end must survive.
        let out = sh(
            json!({"cmd": "printf START; head -c 5000000 /dev/zero | tr '\\0' x; echo END; \
                                    (printf ESTART; head -c 5000000 /dev/zero | tr '\\0' y; echo EEND) >&2"}),
        );
        let r = &out.result;
        for (key, first, last, fill) in [
            ("stdout", "START", "xEND", 'x'),
            ("stderr", "ESTART", "yEEND", 'y'),
        ] {
            let text = r[key].as_str().unwrap();
            assert!(text.starts_with(first), "{key} keeps its head");
            assert!(text.ends_with(last), "{key} keeps its tail");
            assert!(
                text.len() <= OUTPUT_CAP + 1024,
                "{key}: {} bytes",
                text.len()
            );
            assert!(
                text.contains("bytes omitted"),
                "{key} says where it was cut"
            );
            assert!(text.chars().filter(|c| *c == fill).count() > OUTPUT_CAP / 2);
            let t = &r[format!("{key}_truncated").as_str()];
            let total = 5_000_000 + first.len() as u64 + last.len() as u64;
            assert_eq!(t["total_bytes"], json!(total), "{key}: {t}");
            assert_eq!(t["cap_bytes"], json!(OUTPUT_CAP), "{key}: {t}");
            assert_eq!(
                t["omitted_bytes"],
                json!(total - OUTPUT_CAP as u64),
                "{key}: {t}"
            );
        }
        // Output under the cap is whole and carries no such key.
        let small = sh(json!({"cmd": "echo hi"}));
        assert_eq!(small.result["stdout"], json!("hi"));
        assert!(small.result.get("stdout_truncated").is_none());
        assert!(small.result.get("stderr_truncated").is_none());
    }

    #[test]
    fn command_runs_and_returns_ansible_values() {
        let out = ok(json!({"cmd": "echo 'hello world' again"}));
        assert!(out.changed);
        let r = &out.result;
        assert_eq!(r["cmd"], json!(["echo", "hello world", "again"]));
        assert_eq!(r["rc"], json!(0));
        assert_eq!(r["stdout"], json!("hello world again"));
        assert_eq!(r["stdout_lines"], json!(["hello world again"]));
        assert_eq!(r["stderr"], json!(""));
        assert_eq!(r["stderr_lines"], json!([]));
        let dt = regex::Regex::new(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{6})?$").unwrap();
        assert!(dt.is_match(r["start"].as_str().unwrap()), "{}", r["start"]);
        assert!(dt.is_match(r["end"].as_str().unwrap()));
        let delta = regex::Regex::new(r"^\d+:\d\d:\d\d(\.\d{6})?$").unwrap();
        assert!(
            delta.is_match(r["delta"].as_str().unwrap()),
            "{}",
            r["delta"]
        );
    }

    #[test]
    fn command_does_not_use_a_shell_and_hash_is_not_a_comment() {
        let out = ok(json!({"cmd": "echo a | b # c"}));
        assert_eq!(out.result["stdout"], json!("a | b # c"));
    }

    #[test]
    fn argv_keeps_arguments_whole() {
        let out = ok(json!({"argv": ["printf", "%s|", "a b", "c"]}));
        assert_eq!(out.result["stdout"], json!("a b|c|"));
        assert_eq!(out.result["cmd"], json!(["printf", "%s|", "a b", "c"]));
    }

    #[test]
    fn shell_runs_through_sh_and_reports_cmd_as_string() {
        let out = sh(json!({"cmd": "echo a | tr a b && echo two >&2"}));
        assert_eq!(out.result["cmd"], json!("echo a | tr a b && echo two >&2"));
        assert_eq!(out.result["stdout"], json!("b"));
        assert_eq!(out.result["stderr"], json!("two"));
        let out = sh(json!({"cmd": "echo $0", "executable": "/bin/bash"}));
        assert_eq!(out.result["stdout"], json!("/bin/bash"));
    }

    #[test]
    fn registry_maps_shell_to_shell() {
        let out = run_module("shell", &json!({"cmd": "echo $((1+2))"}), &Ctx::default()).unwrap();
        assert_eq!(out.result["stdout"], json!("3"));
        let out = run_module("command", &json!({"cmd": "echo $((1+2))"}), &Ctx::default()).unwrap();
        assert_eq!(out.result["stdout"], json!("$((1+2))"));
        check_params("shell", &json!({"cmd": "x", "executable": "/bin/bash"})).unwrap();
        // command takes `executable` and ignores it, as ansible-core does: no shell runs.
        let out = run_module(
            "command",
            &json!({"cmd": "echo $0", "executable": "/bin/bash"}),
            &Ctx::default(),
        )
        .unwrap();
        assert_eq!(out.result["stdout"], json!("$0"));
        // ... with a warning that says so, as ansible-core's (its target checks it).
        let w = out.result["warnings"][0].as_str().unwrap();
        assert!(
            w.contains("no longer supported") && w.contains("/bin/bash"),
            "{w}"
        );
    }

    #[test]
    fn non_zero_rc_fails_with_all_values() {
        let (msg, r) = failure(run::<Shell>(
            &json!({"cmd": "echo out; echo err >&2; exit 3"}),
            &Ctx::default(),
        ));
        assert_eq!(msg, "non-zero return code");
        assert_eq!(r["rc"], json!(3));
        assert_eq!(r["stdout"], json!("out"));
        assert_eq!(r["stderr"], json!("err"));
        assert_eq!(r["changed"], json!(true));
        assert!(r.contains_key("delta"));
    }

    #[test]
    fn missing_program_fails_like_ansible() {
        let (msg, r) = failure(run::<Command>(
            &json!({"cmd": "fixpoint-no-such-program --x"}),
            &Ctx::default(),
        ));
        assert_eq!(
            msg,
            "[Errno 2] No such file or directory: 'fixpoint-no-such-program'"
        );
        assert_eq!(r["rc"], json!(2));
    }

    #[test]
    fn creates_skips_when_path_exists_including_globs() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let cmd = format!("touch {}", marker.display());
        let out = ok(json!({"cmd": cmd, "creates": marker}));
        assert!(out.changed);
        assert!(marker.exists());
        let out = ok(json!({"cmd": cmd, "creates": marker}));
        assert!(!out.changed);
        let why = format!("skipped, since {} exists", marker.display());
        let msg = format!("Did not run command since '{}' exists", marker.display());
        assert_eq!(out.msg.as_deref(), Some(msg.as_str()));
        assert_eq!(out.result["stdout"], json!(why));
        assert_eq!(out.result["rc"], json!(0));
        let glob = format!("{}/r*", dir.path().display());
        assert!(!ok(json!({"cmd": "false", "creates": glob})).changed);
        let glob = format!("{}/zz*", dir.path().display());
        assert!(ok(json!({"cmd": "true", "creates": glob})).changed);
    }

    #[test]
    fn removes_skips_when_path_missing() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("gone");
        let out = ok(json!({"argv": ["false"], "removes": f}));
        assert!(!out.changed);
        assert_eq!(
            out.result["stdout"],
            json!(format!("skipped, since {} does not exist", f.display()))
        );
        fs::write(&f, "").unwrap();
        let out = ok(json!({"argv": ["rm", f], "removes": f}));
        assert!(out.changed);
        assert!(!f.exists());
    }

    #[test]
    fn unless_and_onlyif_guards() {
        let out = ok(json!({"cmd": "false", "unless": "true"}));
        assert!(!out.changed);
        assert_eq!(
            out.msg.as_deref(),
            Some("skipped, since `unless` succeeded")
        );
        assert!(ok(json!({"cmd": "true", "unless": "false"})).changed);
        let out = ok(json!({"cmd": "false", "onlyif": "test -e /fixpoint-nonexistent"}));
        assert!(!out.changed);
        assert_eq!(out.msg.as_deref(), Some("skipped, since `onlyif` failed"));
        assert!(ok(json!({"cmd": "true", "onlyif": "true"})).changed);
    }

    #[test]
    fn guards_run_in_check_mode_but_the_command_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("m");
        let check = Ctx {
            check: true,
            diff: false,
        };
        let cmd = format!("touch {}", marker.display());
        let out = run::<Command>(&json!({"cmd": cmd, "unless": "true"}), &check).unwrap();
        assert!(!out.changed);
        let out = run::<Command>(&json!({"cmd": cmd, "unless": "false"}), &check).unwrap();
        assert!(out.changed);
        assert_eq!(
            out.msg.as_deref(),
            Some("Command would have run if not in check mode")
        );
        assert!(!marker.exists());
        // Without a guard it is skipped, as in Ansible.
        let out = run::<Command>(&json!({"cmd": cmd}), &check).unwrap();
        assert!(!out.changed);
        assert_eq!(out.result["skipped"], json!(true));
        assert!(!marker.exists());
    }

    #[test]
    fn a_command_without_any_guard_is_skipped_in_check_mode() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("m");
        let check = Ctx {
            check: true,
            diff: false,
        };
        let cmd = format!("touch {}", marker.display());
        let out = run::<Command>(&json!({ "cmd": cmd }), &check).unwrap();
        assert!(!out.changed);
        assert_eq!(out.result["skipped"], json!(true));
        assert_eq!(out.result["rc"], json!(0));
        assert_eq!(
            out.msg.as_deref(),
            Some("Command would have run if not in check mode")
        );
        assert!(!marker.exists());
        // With `creates`, check mode says it would run (changed), as Ansible does.
        let creates = dir.path().join("c").display().to_string();
        let out = run::<Command>(&json!({"cmd": cmd, "creates": creates}), &check).unwrap();
        assert!(out.changed);
        assert!(out.result.get("skipped").is_none());
    }

    #[test]
    fn chdir_applies_to_command_and_relative_creates() {
        let dir = tempfile::tempdir().unwrap();
        let real = fs::canonicalize(dir.path()).unwrap();
        let out = ok(json!({"cmd": "pwd", "chdir": real}));
        assert_eq!(out.result["stdout"], json!(real.to_string_lossy()));
        fs::write(real.join("here"), "").unwrap();
        let out = ok(json!({"cmd": "false", "chdir": real, "creates": "here"}));
        assert!(!out.changed);
        let out = sh(json!({"cmd": "false", "chdir": real, "unless": "test -e here"}));
        assert!(!out.changed);
        let (msg, _) = failure(run::<Command>(
            &json!({"cmd": "pwd", "chdir": real.join("nope")}),
            &Ctx::default(),
        ));
        assert!(msg.starts_with("Unable to change directory"), "{msg}");
    }

    #[test]
    fn stdin_newline_and_strip_options() {
        let out = ok(json!({"cmd": "cat", "stdin": "abc"}));
        assert_eq!(out.result["stdout"], json!("abc"));
        let out = ok(json!({"cmd": "cat", "stdin": "abc", "strip_empty_ends": false}));
        assert_eq!(out.result["stdout"], json!("abc\n"));
        let out = ok(json!({
            "cmd": "cat", "stdin": "abc", "stdin_add_newline": "no", "strip_empty_ends": false
        }));
        assert_eq!(out.result["stdout"], json!("abc"));
        // Without stdin the child reads EOF rather than the agent's own input.
        let out = ok(json!({"cmd": "cat"}));
        assert_eq!(out.result["stdout"], json!(""));
    }

    #[test]
    fn environment_reaches_command_guards_and_expansion() {
        let env = json!({"FIXPOINT_T": "v1", "FIXPOINT_N": 5});
        let out = sh(json!({"cmd": "echo $FIXPOINT_T-$FIXPOINT_N", "_env": env}));
        assert_eq!(out.result["stdout"], json!("v1-5"));
        let out = ok(json!({"cmd": "echo $FIXPOINT_T ${FIXPOINT_N} $FIXPOINT_UNSET", "_env": env}));
        assert_eq!(out.result["stdout"], json!("v1 5 $FIXPOINT_UNSET"));
        let out =
            ok(json!({"cmd": "echo $FIXPOINT_T", "_env": env, "expand_argument_vars": false}));
        assert_eq!(out.result["stdout"], json!("$FIXPOINT_T"));
        let out = ok(json!({"cmd": "false", "_env": env, "unless": "test \"$FIXPOINT_T\" = v1"}));
        assert!(!out.changed);
        let e = check_params("command", &json!({"cmd": "x", "_env": {"A": [1]}})).unwrap_err();
        assert!(e.to_string().contains("`A`"), "{e}");
    }

    #[test]
    fn bad_parameters_are_rejected() {
        let e = check_params("command", &json!({"cmd": "a", "argv": ["a"]})).unwrap_err();
        assert!(e.to_string().contains("mutually exclusive"), "{e}");
        let e = check_params("command", &json!({})).unwrap_err();
        assert!(
            e.to_string()
                .contains("one of the following is required: _raw_params, cmd, argv"),
            "{e}"
        );
        let e = check_params("command", &json!({"cmd": " "})).unwrap_err();
        assert!(e.to_string().contains("no command given"), "{e}");
        let e = check_params("shell", &json!({"cmd": "  "})).unwrap_err();
        assert!(e.to_string().contains("no command given"), "{e}");
        let e = check_params("command", &json!({"cmd": "echo 'unterminated"})).unwrap_err();
        assert!(e.to_string().contains("unterminated quote"), "{e}");
        let e = check_params("command", &json!({"cmd": "x", "chdri": "/"})).unwrap_err();
        assert!(e.to_string().contains("chdri"), "{e}");
        let e = check_params("shell", &json!({"cmd": "x", "argv": ["x"]})).unwrap_err();
        assert!(e.to_string().contains("argv"), "{e}");
        let e = check_params(
            "command",
            &json!({"cmd": "x", "strip_empty_ends": "perhaps"}),
        )
        .unwrap_err();
        assert_eq!(e.path, "strip_empty_ends");
        check_params("command", &json!({"cmd": "echo '{{ x }}"})).unwrap();
    }

    #[test]
    fn python_compatible_helpers() {
        assert_eq!(
            split_command("a 'b c' \"d\\\"e\" #f g#h"),
            Some(
                vec!["a", "b c", "d\"e", "#f", "g#h"]
                    .into_iter()
                    .map(String::from)
                    .collect()
            )
        );
        assert_eq!(splitlines("a\r\nb\rc\n\nd\n"), vec!["a", "b", "c", "", "d"]);
        assert_eq!(
            format_timedelta(Duration::from_micros(1_500_000)),
            "0:00:01.500000"
        );
        assert_eq!(
            format_timedelta(Duration::from_secs(90_061)),
            "1 day, 1:01:01"
        );
        let env = [("HOME".to_string(), "/home/x/".to_string())];
        let l = EnvLookup(&env);
        assert_eq!(expand_path("~/a", &l), "/home/x/a");
        assert_eq!(expand_path("a~", &l), "a~");
        assert_eq!(expand_vars("${HOME}b $HOME", &l), "/home/x/b /home/x/");
    }
}
