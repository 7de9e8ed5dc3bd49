//! The `raw` module: one command line run by a shell on the host, with Ansible's raw return
//! values (`rc`, `stdout`, `stderr` and their `_lines`, always `changed`). Ansible sends it over
//! the bare connection; fixpoint runs it through the agent, like `shell`.

use crate::command::{self, Action, Invocation, Probed};
use crate::params::de_opt_string;
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{Map, Value};

pub struct Raw;

/// Parameters of `raw`: the free form and `executable`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The command line; the controller turns the free form (`raw: uptime`) into this.
    #[serde(default, alias = "_raw_params", deserialize_with = "de_opt_string")]
    pub cmd: Option<String>,
    /// The shell that runs the line with `-c` (default `/bin/sh`).
    #[serde(default, deserialize_with = "de_opt_string")]
    pub executable: Option<String>,
    /// Taken from the free form (`creates=`) as Ansible does, then refused: Ansible's raw
    /// ignores them and runs anyway, so a playbook relying on them is not doing what it says.
    #[serde(default)]
    pub creates: Option<Value>,
    #[serde(default)]
    pub removes: Option<Value>,
    #[serde(default)]
    pub chdir: Option<Value>,
}

/// The keys of command's result that raw's does not have.
const NOT_RAW: [&str; 4] = ["cmd", "start", "end", "delta"];

/// Command's result in raw's shape.
pub(crate) fn reshape(mut m: Map<String, Value>) -> Map<String, Value> {
    for k in NOT_RAW {
        m.remove(k);
    }
    m
}

/// Run `inv` and give raw's (and script's) result, also on failure.
pub(crate) fn run(inv: &Invocation) -> Result<Map<String, Value>, ModuleError> {
    match command::execute(inv) {
        Ok(m) => {
            let mut m = reshape(m);
            // Ansible's raw and script report a change whatever the command did.
            m.insert("changed".into(), Value::Bool(true));
            Ok(m)
        }
        Err(ModuleError::Failed { msg, result }) => Err(ModuleError::Failed {
            msg,
            result: reshape(result),
        }),
        Err(e) => Err(e),
    }
}

impl Module for Raw {
    type Params = Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if p.cmd.as_deref().is_none_or(|c| c.trim().is_empty()) {
            return Err(ModuleError::Params(
                "no command given: write the command after `raw:` (it becomes `cmd`)".into(),
            ));
        }
        if p.executable.as_deref() == Some("") {
            return Err(ModuleError::Params(
                "`executable` is empty; give a shell such as /bin/bash, or leave it out for /bin/sh"
                    .into(),
            ));
        }
        for (k, v) in [
            ("creates", &p.creates),
            ("removes", &p.removes),
            ("chdir", &p.chdir),
        ] {
            if v.is_some() {
                return Err(ModuleError::Params(format!(
                    "`{k}` is not a parameter of raw (Ansible's raw ignores it and runs the command anyway); use `command` or `shell` for `{k}`, or guard raw with `when:`/`once:`"
                )));
            }
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Probed, ModuleError> {
        let line = p.cmd.clone().unwrap_or_default();
        let shell = p.executable.clone().unwrap_or_else(|| "/bin/sh".into());
        Ok(Probed {
            inv: Invocation {
                argv: vec![shell.clone(), "-c".into(), line.clone()],
                shown: Value::String(line),
                chdir: None,
                stdin: None,
                // The output exactly as the command wrote it, as Ansible's raw returns it.
                strip_empty_ends: false,
                env: Vec::new(),
                guard_shell: shell,
                creates: None,
                removes: None,
                unless: None,
                onlyif: None,
            },
            skip: None,
            skip_msg: None,
        })
    }

    fn plan(_: &Params, _state: &Probed, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let mut plan = Plan::new();
        if ctx.check {
            // As Ansible: raw is always skipped in check mode.
            plan.result.insert("skipped".into(), Value::Bool(true));
        } else {
            plan.actions.push(Action::Run);
        }
        Ok(plan)
    }

    fn apply(
        _: &Params,
        state: Probed,
        _: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        run(&state.inv)
    }
}
