//! The `service` module's SysV path (Ansible's generic `service` module on Linux without
//! systemd): `service NAME start|stop|status`, `update-rc.d` for boot links, and that module's
//! return values (`name`, `state`, `enabled`).
//!
//! Upstart (`initctl`) and OpenRC (`rc-service`) hosts are not supported: the module fails on
//! them and says so. `runlevel` is an OpenRC parameter: accepted, unused here, as on Linux SysV.

use super::sysv::State;
use super::{missing, process_matches, run, split_args, sysv_is_enabled, sysv_script, which};
use crate::params::Bool;
use crate::{Ctx, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::path::PathBuf;

/// Parameters of `service`, as Ansible spells them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub name: String,
    #[serde(default)]
    pub state: Option<State>,
    #[serde(default, deserialize_with = "crate::params::de_opt_uint")]
    pub sleep: Option<u64>,
    #[serde(default)]
    pub pattern: Option<String>,
    #[serde(default)]
    pub enabled: Option<Bool>,
    #[serde(default)]
    pub runlevel: Option<String>,
    #[serde(default, alias = "args")]
    pub arguments: Option<String>,
    /// `auto` (the host's `service_mgr` fact), or a manager's module name.
    #[serde(default, rename = "use")]
    pub use_: Option<String>,
}

/// What the host has.
#[derive(Debug)]
pub struct Probed {
    service: PathBuf,
    enabled: bool,
    has_kill_links: bool,
    running: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Boot links: `update-rc.d NAME defaults` first when the script has no links at all.
    Enable { on: bool, defaults_first: bool },
    /// `service NAME VERB [arguments]`, in order (a restart is a stop and a start).
    Control(Vec<&'static str>),
}

/// The generic module's reading of `service NAME status` (it trusts the exit status first).
pub fn status_says_running(name: &str, rc: i32, out: &str) -> Option<bool> {
    if [1, 2, 3, 4, 69].contains(&rc) {
        return Some(false);
    }
    if out.matches('\n').count() <= 1 {
        let clean = out.to_lowercase().replace(&name.to_lowercase(), "");
        if clean.contains("stop") {
            return Some(false);
        } else if clean.contains("run") {
            return Some(!clean.contains("not "));
        } else if clean.contains("start") && !clean.contains("not ") {
            return Some(true);
        } else if [
            "could not access pid file",
            "is dead and pid file exists",
            "dead but subsys locked",
            "dead but pid file exists",
        ]
        .iter()
        .any(|s| clean.contains(s))
        {
            return Some(false);
        }
    }
    if rc == 0 {
        return Some(true);
    }
    (name == "iptables" && out.contains("ACCEPT")).then_some(true)
}

pub fn validate(p: &Params) -> Result<(), ModuleError> {
    if p.name.trim().is_empty() {
        return Err(ModuleError::Params("`name` must not be empty".into()));
    }
    if p.state.is_none() && p.enabled.is_none() {
        return Err(ModuleError::Params(
            "one of the following is required: state, enabled".into(),
        ));
    }
    Ok(())
}

pub fn probe(p: &Params, _ctx: &Ctx) -> Result<Probed, ModuleError> {
    if which("initctl").is_some()
        && std::path::Path::new(&format!("/etc/init/{}.conf", p.name)).exists()
    {
        return Err(ModuleError::failed(format!(
            "{} is an upstart job: upstart is not supported",
            p.name
        )));
    }
    if which("rc-service").is_some() {
        return Err(ModuleError::failed(
            "this host runs OpenRC, which is not supported",
        ));
    }
    // Without an init script there is no tool to enable it with: Ansible fails the same way.
    sysv_script(&p.name).ok_or_else(|| missing(&p.name))?;
    if which("update-rc.d").is_none() {
        return Err(ModuleError::failed(
            "cannot manage SysV boot links without update-rc.d (chkconfig and insserv are not supported)",
        ));
    }
    let service = which("service").ok_or_else(|| {
        ModuleError::failed("cannot find 'service' binary or init script for service")
    })?;
    let running = match (&p.state, &p.pattern) {
        (None, _) => None,
        (Some(_), Some(pat)) => Some(process_matches(pat)),
        (Some(_), None) => {
            let mut argv = vec![p.name.as_str(), "status"];
            let args = split_args(p.arguments.as_deref())?;
            argv.extend(args.iter().map(String::as_str));
            let ran = run(&service, &argv)?;
            let r = status_says_running(&p.name, ran.rc, &ran.stdout);
            if r.is_none() {
                return Err(ModuleError::failed(
                    "failed determining service state, possible typo of service name?",
                ));
            }
            r
        }
    };
    let has_kill_links = glob::glob(&format!("/etc/rc?.d/K??{}", glob::Pattern::escape(&p.name)))
        .map(|mut g| g.any(|x| x.is_ok()))
        .unwrap_or(false);
    Ok(Probed {
        service,
        enabled: sysv_is_enabled(&p.name, None),
        has_kill_links,
        running,
    })
}

pub fn plan(p: &Params, s: &Probed, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
    let mut plan = Plan::new();
    plan.result.insert("name".into(), json!(p.name));
    if let Some(want) = p.enabled {
        plan.result.insert("enabled".into(), json!(want.0));
        if want.0 != s.enabled {
            plan.actions.push(Action::Enable {
                on: want.0,
                defaults_first: want.0 && !s.has_kill_links,
            });
            plan.diff.attr(
                &p.name,
                "enabled",
                s.enabled.to_string(),
                want.0.to_string(),
            );
        }
    }
    if let Some(state) = p.state {
        let running = s.running.unwrap_or(false);
        let verbs: Vec<&'static str> = match state {
            State::Started if !running => vec!["start"],
            State::Reloaded if !running => vec!["start"],
            State::Reloaded => vec!["reload"],
            State::Stopped if running => vec!["stop"],
            State::Restarted => vec!["stop", "start"],
            _ => vec![],
        };
        if !verbs.is_empty() {
            plan.diff.attr(
                &p.name,
                "state",
                if running { "running" } else { "stopped" },
                state.as_str(),
            );
            plan.actions.push(Action::Control(verbs));
        }
        // What ran, not a fresh status: a script may not report a bounced service yet.
        let shown = if state == State::Stopped {
            "stopped"
        } else {
            "started"
        };
        plan.result.insert("state".into(), json!(shown));
        if ctx.check && plan.actions.iter().any(|a| matches!(a, Action::Control(_))) {
            // Ansible's module stops there in check mode and says only this.
            plan.result = Map::new();
            plan.msg = Some("service state changed".into());
        }
    }
    Ok(plan)
}

pub fn apply(
    p: &Params,
    s: Probed,
    plan: &Plan<Action>,
) -> Result<Map<String, Value>, ModuleError> {
    let args = split_args(p.arguments.as_deref())?;
    for action in &plan.actions {
        match action {
            Action::Enable { on, defaults_first } => {
                let tool = which("update-rc.d").ok_or_else(|| missing(&p.name))?;
                if *defaults_first {
                    checked(run(&tool, &[&p.name, "defaults"])?)?;
                }
                checked(run(
                    &tool,
                    &[&p.name, if *on { "enable" } else { "disable" }],
                )?)?;
            }
            Action::Control(verbs) => {
                let mut total = super::Ran::default();
                let mut results = Vec::new();
                for (i, verb) in verbs.iter().enumerate() {
                    if i > 0 {
                        if let Some(secs) = p.sleep.filter(|s| *s > 0) {
                            // `sleep` is the module's documented pause between stop and start.
                            std::thread::sleep(std::time::Duration::from_secs(secs));
                        }
                    }
                    let mut argv = vec![p.name.as_str(), *verb];
                    argv.extend(args.iter().map(String::as_str));
                    results.push(run(&s.service, &argv)?);
                }
                // A restart whose stop failed (nothing was running) but whose start worked is
                // a success, as in Ansible.
                if results.len() == 2 && results[0].rc != 0 && results[1].rc == 0 {
                    total = results.pop().unwrap_or_default();
                } else {
                    for r in results {
                        total.rc += r.rc;
                        total.stdout += &r.stdout;
                        total.stderr += &r.stderr;
                    }
                }
                checked(total)?;
            }
        }
    }
    Ok(Map::new())
}

fn checked(ran: super::Ran) -> Result<(), ModuleError> {
    if ran.rc == 0 {
        return Ok(());
    }
    let msg = if ran.stderr.is_empty() {
        ran.stdout
    } else {
        ran.stderr
    };
    Err(ModuleError::Failed {
        msg: msg.trim_end().to_string(),
        result: [("rc".to_string(), json!(ran.rc))].into_iter().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_trusts_the_exit_status_first() {
        assert_eq!(
            status_says_running("cron", 3, "cron is running\n"),
            Some(false)
        );
        assert_eq!(
            status_says_running("cron", 0, "cron is running.\n"),
            Some(true)
        );
        assert_eq!(
            status_says_running("cron", 0, "cron is not running.\n"),
            Some(false)
        );
        assert_eq!(status_says_running("x", 0, "a\nb\nc\n"), Some(true));
        assert_eq!(status_says_running("x", 9, "a\nb\nc\n"), None);
    }
}
