//! The `script` module: a controller file copied to the host and run there with its arguments,
//! unless `creates`/`removes` say the work is done; Ansible's script return values.
//!
//! The controller finds the file (`files/` of the role or playbook) and sends its sha256
//! (`_src_sha256`, `_src_size`, `_src_name`); the agent keeps it in the same content cache as
//! `unarchive` and asks for the bytes (`NeedContent`) only when missing, and only when the
//! script is going to run. It runs from a private temp directory that is removed afterwards.

use crate::command::{env_pairs, split_command, Action, Invocation, Probed};
use crate::params::{de_opt_string, is_template, Bool};
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::path::Path;

pub struct Script;

fn yes() -> Bool {
    Bool(true)
}

/// Parameters of `script`, as Ansible names them, and what the controller adds.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The script's path on the controller and its arguments (the free form).
    #[serde(default, alias = "_raw_params", deserialize_with = "de_opt_string")]
    pub cmd: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub creates: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub removes: Option<String>,
    /// Absolute directory to run in.
    #[serde(default, deserialize_with = "de_opt_string")]
    pub chdir: Option<String>,
    /// The interpreter the script is given to (`executable script args`).
    #[serde(default, deserialize_with = "de_opt_string")]
    pub executable: Option<String>,
    /// Read by the controller, which sends a vault-encrypted script decrypted (the default).
    #[serde(default = "yes")]
    pub decrypt: Bool,
    #[serde(default, rename = "_src_sha256", deserialize_with = "de_opt_string")]
    pub src_sha256: Option<String>,
    #[serde(default, rename = "_src_size")]
    pub src_size: Option<u64>,
    /// The script's file name, kept for the copy on the host.
    #[serde(default, rename = "_src_name", deserialize_with = "de_opt_string")]
    pub src_name: Option<String>,
    #[serde(default, rename = "_env")]
    pub env: Option<Map<String, Value>>,
}

/// The script's path as written in `cmd` (its first word), for the controller to look up.
pub fn script_path(cmd: &str) -> Option<String> {
    split_command(cmd.trim())?.into_iter().next()
}

impl Module for Script {
    type Params = Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        let Some(cmd) = p.cmd.as_deref().filter(|c| !c.trim().is_empty()) else {
            return Err(ModuleError::Params(
                "one of the following is required: _raw_params, cmd (write the script's path after `script:`)".into(),
            ));
        };
        if !is_template(cmd) && script_path(cmd).is_none_or(|s| s.is_empty()) {
            return Err(ModuleError::Params(format!(
                "`cmd` has an unterminated quote or a trailing backslash, or no script: {cmd}"
            )));
        }
        if let Some(d) = p.chdir.as_deref() {
            if !is_template(d) && !d.starts_with('/') {
                return Err(ModuleError::Params(format!(
                    "`chdir` {d} must be an absolute path for a Unix-aware remote node"
                )));
            }
        }
        if p.executable.as_deref() == Some("") {
            return Err(ModuleError::Params(
                "`executable` is empty; give an interpreter such as /bin/bash, or leave it out"
                    .into(),
            ));
        }
        env_pairs(&p.env).map(|_| ())
    }

    fn probe(p: &Params, ctx: &Ctx) -> Result<Probed, ModuleError> {
        let cmd = p.cmd.clone().unwrap_or_default();
        let mut skip = None;
        // Ansible tests these paths as written (`test -e`), without `~` or globs.
        if let Some(c) = &p.creates {
            if Path::new(c).exists() {
                skip = Some(format!("{c} exists, matching creates option"));
            }
        }
        if skip.is_none() {
            if let Some(r) = &p.removes {
                if !Path::new(r).exists() {
                    skip = Some(format!("{r} does not exist, matching removes option"));
                }
            }
        }
        let env = env_pairs(&p.env)?;
        let mut inv = Invocation {
            argv: Vec::new(),
            shown: Value::String(cmd.clone()),
            chdir: p.chdir.as_deref().map(Into::into),
            stdin: None,
            // The output exactly as the script wrote it, as Ansible's script returns it.
            strip_empty_ends: false,
            env,
            guard_shell: "/bin/sh".into(),
            creates: None,
            removes: None,
            unless: None,
            onlyif: None,
        };
        if skip.is_none() && !ctx.check {
            // The bytes are needed only now: ask for them if the host's cache lacks them.
            let (Some(sha), Some(size)) = (&p.src_sha256, p.src_size) else {
                return Err(ModuleError::Params(
                    "script runs a controller file: the controller sends its `_src_sha256` and `_src_size`".into(),
                ));
            };
            let cached = crate::unarchive::cached_archive(sha, size)?;
            inv.argv = vec![cached.to_string_lossy().into_owned()];
        }
        Ok(Probed {
            inv,
            skip,
            skip_msg: None,
        })
    }

    fn plan(p: &Params, state: &Probed, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let mut plan = Plan::new();
        if let Some(why) = &state.skip {
            plan.result.insert("skipped".into(), Value::Bool(true));
            plan.msg = Some(why.clone());
            return Ok(plan);
        }
        if ctx.check && p.creates.is_none() && p.removes.is_none() {
            // As Ansible: without a guard to judge by, the script's effect cannot be told.
            plan.result.insert("skipped".into(), Value::Bool(true));
            plan.msg = Some("Check mode is not supported for this task.".into());
            return Ok(plan);
        }
        plan.actions.push(Action::Run);
        Ok(plan)
    }

    fn apply(
        p: &Params,
        state: Probed,
        _: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        let cached = state.inv.argv.first().cloned().ok_or_else(|| {
            ModuleError::failed("the script's content was not fetched before running it")
        })?;
        let cmd = p.cmd.as_deref().unwrap_or_default().trim();
        let first = script_path(cmd).unwrap_or_default();
        let name = p
            .src_name
            .clone()
            .filter(|n| !n.is_empty() && !n.contains('/'))
            .unwrap_or_else(|| "script".into());
        // A private directory: the copy is executable by its owner only, and gone afterwards.
        let dir = tempfile::Builder::new()
            .prefix("fixpoint-script-")
            .tempdir()
            .map_err(|e| ModuleError::io(std::env::temp_dir(), e))?;
        let copy = dir.path().join(&name);
        std::fs::copy(&cached, &copy).map_err(|e| ModuleError::io(&copy, e))?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| ModuleError::io(&copy, e))?;
        }
        // As Ansible: every occurrence of the script's path in the line becomes the copy's
        // path, unquoted (the temp directory's name needs no quoting; a quoted script name
        // stays quoted), so the arguments keep their quoting; the line runs through the shell.
        let target = cmd.replace(&first, &copy.to_string_lossy());
        let line = match &p.executable {
            Some(exe) => format!("{exe} {target}"),
            None => target,
        };
        let mut inv = state.inv.clone();
        inv.argv = vec!["/bin/sh".into(), "-c".into(), line];
        let out = crate::raw::run(&inv);
        drop(dir);
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::registry::check_params;
    use serde_json::json;

    #[test]
    fn script_and_raw_parameters_are_checked() {
        check_params("script", &json!({"cmd": "s.sh 'a b'", "creates": "/x"})).unwrap();
        check_params("script", &json!({"cmd": "s.sh", "chdir": "{{ d }}"})).unwrap();
        let e = check_params("script", &json!({"chdir": "/"})).unwrap_err();
        assert!(e.to_string().contains("cmd"), "{e}");
        let e = check_params("script", &json!({"cmd": "s.sh", "chdir": "rel"})).unwrap_err();
        assert!(e.to_string().contains("absolute"), "{e}");
        let e = check_params("script", &json!({"cmd": "'s.sh"})).unwrap_err();
        assert!(e.to_string().contains("unterminated"), "{e}");
        check_params("raw", &json!({"cmd": "uptime", "executable": "/bin/bash"})).unwrap();
        let e = check_params("raw", &json!({"cmd": "x", "creates": "/x"})).unwrap_err();
        assert!(e.to_string().contains("ignores it"), "{e}");
        let e = check_params("raw", &json!({})).unwrap_err();
        assert!(e.to_string().contains("no command"), "{e}");
    }

    #[test]
    fn the_script_path_is_the_first_word() {
        assert_eq!(
            super::script_path("  'my s.sh' a b").as_deref(),
            Some("my s.sh")
        );
    }
}
