//! The probe of `command` and `shell` (the `creates`/`removes`/`unless`/`onlyif` guards, in
//! Ansible's order) and the plan: run, or skip with Ansible's message.

use super::exec::output_fields;
use super::{Action, Invocation, Probed};
use crate::{Ctx, ModuleError, Plan};
use serde_json::{Map, Value};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

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
