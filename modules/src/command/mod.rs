//! The `command` and `shell` modules: run a program (directly, or through a shell) unless its
//! `creates`/`removes`/`unless`/`onlyif` guards say the work is already done; Ansible's return values.
//!
//! `params` holds what the task says, `args` the environment and argument expansion, `guards`
//! the probe (`creates`, `removes`, `unless`, `onlyif`) and the plan, `exec` the run and its
//! return values; `raw` and `script` reuse the last three.

mod args;
mod exec;
mod guards;
mod params;

pub(crate) use args::{env_pairs, split_command};
use args::{expand_path, EnvLookup};
use exec::with_empty_msg;
pub use exec::OUTPUT_CAP;
pub(crate) use exec::{execute, splitlines};
pub(crate) use guards::{plan, probe};
pub use params::{Params, ShellParams};

use crate::params::is_template;
use crate::{Ctx, Module, ModuleError, Plan};
use serde_json::{json, Map, Value};
use std::path::PathBuf;

/// `command`: split `cmd` with shell-words rules (or take `argv`) and exec it without a shell.
pub struct Command;
/// `shell`: run `cmd` with `executable -c` (default `/bin/sh`), so pipes, globs and `&&` work.
pub struct Shell;

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

#[cfg(test)]
mod tests;
