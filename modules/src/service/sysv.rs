//! The `sysvinit` module: start, stop, restart or reload a SysV init script and enable it at
//! boot with `update-rc.d`, with Ansible's status heuristics and its `status` return dict.
//!
//! Hosts without `update-rc.d` (chkconfig, insserv) fail with a message saying so.
//! `daemonize` is accepted: the script's output always goes to files, so a daemon that keeps
//! it open never holds the task (what Ansible's `daemonize` is for).

use super::{missing, process_matches, run, split_args, sysv_is_enabled, sysv_script, which};
use crate::params::Bool;
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::path::PathBuf;

pub struct Sysvinit;

/// A run-state request, as Ansible spells them.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Started,
    Stopped,
    Restarted,
    Reloaded,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Started => "started",
            State::Stopped => "stopped",
            State::Restarted => "restarted",
            State::Reloaded => "reloaded",
        }
    }
}

fn one() -> u64 {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(alias = "service")]
    pub name: String,
    #[serde(default)]
    pub state: Option<State>,
    #[serde(default)]
    pub enabled: Option<Bool>,
    /// Seconds between stop and start of a restart, and after the start (Ansible's default 1).
    #[serde(default = "one")]
    pub sleep: u64,
    #[serde(default)]
    pub pattern: Option<String>,
    #[serde(default, alias = "args")]
    pub arguments: Option<String>,
    #[serde(default)]
    pub runlevels: Option<Vec<String>>,
    #[serde(default)]
    pub daemonize: Option<Bool>,
}

/// What the host has: the script, its start links, whether it runs.
#[derive(Debug)]
pub struct Probed {
    script: PathBuf,
    /// Start links in any runlevel, or per asked runlevel.
    enabled: Vec<bool>,
    running: bool,
    warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `update-rc.d NAME defaults|disable [runlevels]`.
    Enable(bool),
    /// Run the script with these verbs in order (`stop`, `start` for a restart).
    Script(Vec<&'static str>),
}

/// Ansible's heuristics over `service NAME status`: exit status, then the one-line output.
pub fn status_says_running(name: &str, rc: i32, out: &str) -> Option<bool> {
    if name == "iptables" && out.contains("ACCEPT") {
        return Some(true);
    }
    if out.matches('\n').count() <= 1 {
        let clean = out.to_lowercase().replace(&name.to_lowercase(), "");
        let stopped = [
            "stop",
            "is dead ",
            "dead but ",
            "could not access pid file",
            "inactive",
        ];
        if stopped.iter().any(|s| clean.contains(s)) {
            return Some(false);
        }
        if ["run", "start", "active"]
            .iter()
            .any(|s| clean.contains(s) && !clean.contains("not "))
        {
            return Some(true);
        }
    }
    if [1, 2, 3, 4, 69].contains(&rc) {
        return Some(false);
    }
    (rc == 0).then_some(true)
}

impl Module for Sysvinit {
    type Params = Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if p.name.trim().is_empty() {
            return Err(ModuleError::Params("`name` must not be empty".into()));
        }
        if p.state.is_none() && p.enabled.is_none() {
            return Err(ModuleError::Params(
                "one of the following is required: state, enabled".into(),
            ));
        }
        if p.runlevels.is_some() && p.enabled.is_none() {
            return Err(ModuleError::Params(
                "`runlevels` only applies with `enabled`".into(),
            ));
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Probed, ModuleError> {
        let script = sysv_script(&p.name).ok_or_else(|| missing(&p.name))?;
        let enabled = match &p.runlevels {
            Some(rls) => rls
                .iter()
                .map(|rl| sysv_is_enabled(&p.name, Some(rl)))
                .collect(),
            None => vec![sysv_is_enabled(&p.name, None)],
        };
        let mut warnings = Vec::new();
        let running = if let Some(pat) = &p.pattern {
            process_matches(pat)
        } else {
            let ran = match which("service") {
                Some(svc) => run(&svc, &[&p.name, "status"])?,
                None => run(&script, &["status"])?,
            };
            match status_says_running(&p.name, ran.rc, &ran.stdout) {
                Some(r) => r,
                None if process_matches(&p.name) => {
                    warnings.push("Used ps output to match service name and determine it is up, this is very unreliable".to_string());
                    true
                }
                None => {
                    warnings.push(
                        "Unable to determine if service is up, assuming it is down".to_string(),
                    );
                    false
                }
            }
        };
        Ok(Probed {
            script,
            enabled,
            running,
            warnings,
        })
    }

    fn plan(p: &Params, s: &Probed, _ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let mut plan = Plan::new();
        let mut enabled_status =
            json!({"changed": false, "rc": null, "stdout": null, "stderr": null});
        if let Some(rls) = &p.runlevels {
            enabled_status["runlevels"] = json!(rls);
        }
        if let Some(want) = p.enabled {
            if s.enabled.iter().any(|e| *e != want.0) {
                enabled_status["changed"] = json!(true);
                plan.actions.push(Action::Enable(want.0));
                plan.diff.attr(
                    &p.name,
                    "enabled",
                    (!want.0).to_string(),
                    want.0.to_string(),
                );
            }
        }
        let mut status = Map::new();
        status.insert("enabled".into(), enabled_status);
        // Ansible keys the state's entry by the parameter, `null` when it is not given.
        let key = p.state.map(State::as_str).unwrap_or("null");
        let mut state_status =
            json!({"changed": false, "rc": null, "stdout": null, "stderr": null});
        if let Some(state) = p.state {
            let verbs: Vec<&'static str> = match state {
                State::Restarted => vec!["stop", "start"],
                State::Started if !s.running => vec!["start"],
                State::Stopped if s.running => vec!["stop"],
                // Ansible reloads a stopped service too (its script decides what that does).
                State::Reloaded => vec!["reload"],
                _ => vec![],
            };
            if !verbs.is_empty() {
                state_status["changed"] = json!(true);
                plan.diff.attr(
                    &p.name,
                    "state",
                    if s.running { "running" } else { "stopped" },
                    state.as_str(),
                );
                plan.actions.push(Action::Script(verbs));
            }
        }
        status.insert(key.into(), state_status);
        plan.result.insert("name".into(), json!(p.name));
        plan.result.insert("status".into(), Value::Object(status));
        if !s.warnings.is_empty() {
            plan.result.insert("warnings".into(), json!(s.warnings));
        }
        Ok(plan)
    }

    fn apply(
        p: &Params,
        s: Probed,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        let mut status = plan
            .result
            .get("status")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let key = p.state.map(State::as_str).unwrap_or("null");
        let args = split_args(p.arguments.as_deref())?;
        for action in &plan.actions {
            match action {
                Action::Enable(on) => {
                    let ran = update_rc_d(&p.name, *on, p.runlevels.as_deref())?;
                    status["enabled"]["rc"] = json!(ran.rc);
                    status["enabled"]["stdout"] = json!(ran.stdout);
                    status["enabled"]["stderr"] = json!(ran.stderr);
                    if ran.stderr.contains("illegal runlevel specified") {
                        return Err(ModuleError::Failed {
                            msg: format!(
                                "Illegal runlevel specified for enable operation on service {}",
                                p.name
                            ),
                            result: [("status".to_string(), status)].into_iter().collect(),
                        });
                    }
                }
                Action::Script(verbs) => {
                    let restart = verbs.len() > 1;
                    for verb in verbs {
                        let mut argv = vec![*verb];
                        argv.extend(args.iter().map(String::as_str));
                        let ran = run(&s.script, &argv)?;
                        if ran.rc != 0 {
                            let what = p.state.map(State::as_str).unwrap_or_default();
                            let what = what.strip_suffix("ped").or(what.strip_suffix("ed"));
                            return Err(ModuleError::Failed {
                                msg: format!(
                                    "Failed to {} service: {}",
                                    what.unwrap_or(verb),
                                    p.name
                                ),
                                result: [
                                    ("rc".to_string(), json!(ran.rc)),
                                    ("stdout".to_string(), json!(ran.stdout)),
                                    ("stderr".to_string(), json!(ran.stderr)),
                                ]
                                .into_iter()
                                .collect(),
                            });
                        }
                        if restart && p.sleep > 0 {
                            // Ansible's documented pause for scripts that return before the
                            // daemon is gone (or up): part of the module's contract.
                            std::thread::sleep(std::time::Duration::from_secs(p.sleep));
                        }
                        status[key]["rc"] = json!(ran.rc);
                        status[key]["stdout"] = json!(ran.stdout);
                        status[key]["stderr"] = json!(ran.stderr);
                    }
                }
            }
        }
        Ok([("status".to_string(), status)].into_iter().collect())
    }
}

/// `update-rc.d NAME defaults` / `disable`, or `enable|disable RUNLEVELS...` with `runlevels`.
pub fn update_rc_d(
    name: &str,
    on: bool,
    runlevels: Option<&[String]>,
) -> Result<super::Ran, ModuleError> {
    let tool = which("update-rc.d").ok_or_else(|| {
        ModuleError::failed(
            "cannot enable a SysV service without update-rc.d (chkconfig and insserv are not supported)",
        )
    })?;
    let mut args = vec![name];
    match (on, runlevels) {
        (true, None) => {
            // `defaults` adds links only to a script that has none: after a `disable` (stop
            // links everywhere) it changes nothing, and Ansible's module reports a change on
            // every run. `enable` then turns existing stop links into start links, so the
            // service really is enabled (tests/conformance/DEVIATIONS.md).
            let first = run(&tool, &[name, "defaults"])?;
            if first.rc != 0 {
                return Ok(first);
            }
            args.push("enable");
        }
        (false, None) => args.push("disable"),
        (on, Some(rls)) => {
            args.push(if on { "enable" } else { "disable" });
            args.extend(rls.iter().map(String::as_str));
        }
    }
    run(&tool, &args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_heuristics_follow_ansible() {
        assert_eq!(
            status_says_running("cron", 3, "cron is not running.\n"),
            Some(false)
        );
        assert_eq!(
            status_says_running("cron", 0, "cron is running.\n"),
            Some(true)
        );
        assert_eq!(status_says_running("x", 0, "a\nb\nc\n"), Some(true));
        assert_eq!(status_says_running("x", 4, "a\nb\nc\n"), Some(false));
        assert_eq!(status_says_running("x", 5, "a\nb\nc\n"), None);
        // The name is removed first: a service called "runner" is not "running".
        assert_eq!(status_says_running("runner", 7, "runner\n"), None);
    }

    #[test]
    fn state_or_enabled_is_required() {
        let p: Params = serde_json::from_value(json!({"name": "x"})).unwrap();
        assert!(Sysvinit::validate(&p).is_err());
    }
}
