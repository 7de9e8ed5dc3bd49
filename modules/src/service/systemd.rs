//! The `systemd_service` module (also `systemd`): unit state, enablement and masking through
//! `systemctl`, with Ansible's parameters and its `status` dict (`systemctl show`'s properties).
//!
//! `daemon_reload`/`daemon_reexec` run before the probe (not in check mode), as in Ansible, so
//! the probe sees unit files written earlier in the play; they do not count as a change.

use super::{run, sysv_is_enabled, sysv_script, which};
use crate::params::Bool;
use crate::service::sysv::State;
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::path::PathBuf;

pub struct SystemdService;

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    #[default]
    System,
    User,
    Global,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(default, alias = "service", alias = "unit")]
    pub name: Option<String>,
    #[serde(default)]
    pub state: Option<State>,
    #[serde(default)]
    pub enabled: Option<Bool>,
    #[serde(default)]
    pub force: Option<Bool>,
    #[serde(default)]
    pub masked: Option<Bool>,
    #[serde(default, alias = "daemon-reload")]
    pub daemon_reload: Bool,
    #[serde(default, alias = "daemon-reexec")]
    pub daemon_reexec: Bool,
    #[serde(default)]
    pub scope: Scope,
    #[serde(default)]
    pub no_block: Bool,
}

/// What systemd says about the unit.
#[derive(Debug, Default)]
pub struct Probed {
    systemctl: Vec<String>,
    status: Map<String, Value>,
    found: bool,
    masked: bool,
    enabled: bool,
    warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `systemctl VERB UNIT`: mask, unmask, enable, disable, start, stop, restart, reload.
    Run(&'static str),
}

/// `systemctl show`'s `Key=value` lines; only `Exec*` values span lines (`{ ... }`).
pub fn parse_show(text: &str) -> Map<String, Value> {
    let mut out = Map::new();
    let mut key: Option<String> = None;
    let mut multi: Vec<&str> = Vec::new();
    for line in text.split('\n') {
        match &key {
            None => {
                if let Some((k, v)) = line.split_once('=') {
                    if k.starts_with("Exec")
                        && v.trim_start().starts_with('{')
                        && !v.trim_end().ends_with('}')
                    {
                        key = Some(k.to_string());
                        multi.push(v);
                        continue;
                    }
                    out.insert(k.to_string(), json!(v.trim()));
                }
            }
            Some(k) => {
                multi.push(line);
                if line.trim_end().ends_with('}') {
                    out.insert(k.clone(), json!(multi.join("\n").trim()));
                    multi.clear();
                    key = None;
                }
            }
        }
    }
    out
}

fn request_was_ignored(out: &str) -> bool {
    !out.contains('=') && (out.contains("ignoring request") || out.contains("ignoring command"))
}

/// The chroot test Ansible uses to tolerate a failing daemon-reload: `/` is not PID 1's root.
fn is_chroot() -> bool {
    match (std::fs::metadata("/"), std::fs::metadata("/proc/1/root/.")) {
        (Ok(a), Ok(b)) => {
            use std::os::unix::fs::MetadataExt;
            a.ino() != b.ino() || a.dev() != b.dev()
        }
        _ => false,
    }
}

impl Probed {
    fn ctl(&self, args: &[&str]) -> Result<super::Ran, ModuleError> {
        let mut argv: Vec<&str> = self.systemctl[1..].iter().map(String::as_str).collect();
        argv.extend(args);
        run(&PathBuf::from(&self.systemctl[0]), &argv)
    }

    fn running(&self) -> bool {
        matches!(
            self.status.get("ActiveState").and_then(Value::as_str),
            Some("active" | "activating")
        )
    }
}

impl Module for SystemdService {
    type Params = Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        // Ansible's `required_one_of` (state, enabled, masked, daemon_reload, daemon_reexec)
        // never fails: the reload flags default to false before it is checked, so a task with
        // `name` alone is a status query (`status` registered, nothing changed).
        for (given, what) in [
            (p.state.is_some(), "state"),
            (p.enabled.is_some(), "enabled"),
            (p.masked.is_some(), "masked"),
        ] {
            if given && p.name.is_none() {
                return Err(ModuleError::Params(format!(
                    "missing parameter(s) required by '{what}': name"
                )));
            }
        }
        if let Some(n) = &p.name {
            if let Some(g) = ["*", "?", "["].iter().find(|g| n.contains(**g)) {
                return Err(ModuleError::Params(format!(
                    "This module does not currently support using glob patterns, found '{g}' in service name: {n}"
                )));
            }
        }
        Ok(())
    }

    fn probe(p: &Params, ctx: &Ctx) -> Result<Probed, ModuleError> {
        let exe = which("systemctl").ok_or_else(|| {
            ModuleError::failed("Failed to find required executable \"systemctl\"")
        })?;
        let mut systemctl = vec![exe.display().to_string()];
        match p.scope {
            Scope::System => {}
            Scope::User => systemctl.push("--user".into()),
            Scope::Global => systemctl.push("--global".into()),
        }
        if p.no_block.0 {
            systemctl.push("--no-block".into());
        }
        if p.force.is_some_and(|f| f.0) {
            systemctl.push("--force".into());
        }
        let mut s = Probed {
            systemctl,
            ..Probed::default()
        };
        let offline = is_chroot() || std::env::var("SYSTEMD_OFFLINE").as_deref() == Ok("1");
        for (wanted, verb) in [
            (p.daemon_reload.0, "daemon-reload"),
            (p.daemon_reexec.0, "daemon-reexec"),
        ] {
            // Refreshes systemd's view of the unit files before reading it; changes no state
            // the play declares, so check mode skips it as Ansible does and nothing counts it.
            if wanted && !ctx.check {
                let r = s.ctl(&[verb])?;
                if r.rc != 0 {
                    if offline {
                        s.warnings.push(format!("{verb} failed, but target is a chroot or systemd is offline. Continuing. Error was: {} / {}", r.rc, r.stderr));
                    } else {
                        return Err(ModuleError::failed(format!(
                            "failure {} during {verb}: {}",
                            r.rc, r.stderr
                        )));
                    }
                }
            }
        }
        let Some(unit) = &p.name else {
            return Ok(s);
        };
        let is_initd = sysv_script(unit).is_some();
        let mut is_systemd = false;
        let show = s.ctl(&["show", unit])?;
        if show.rc == 0 && !request_was_ignored(&show.stdout) && !request_was_ignored(&show.stderr)
        {
            if !show.stdout.is_empty() {
                s.status = parse_show(&show.stdout);
                let load = s.status.get("LoadState").and_then(Value::as_str);
                is_systemd = load.is_some_and(|l| l != "not-found");
                if is_systemd && load != Some("masked") {
                    if let Some(e) = s.status.get("LoadError") {
                        return Err(ModuleError::failed(format!(
                            "Error loading unit file '{unit}': {}",
                            e.as_str().unwrap_or_default()
                        )));
                    }
                }
            }
        } else {
            let e = s.ctl(&["is-enabled", unit])?;
            is_systemd = [
                "enabled",
                "enabled-runtime",
                "linked",
                "linked-runtime",
                "masked",
                "masked-runtime",
                "static",
                "indirect",
                "disabled",
                "generated",
                "transient",
            ]
            .contains(&e.stdout.trim());
            if !is_systemd {
                is_systemd = s.ctl(&["list-unit-files", unit])?.rc == 0;
            }
            if !is_systemd {
                let bare = s.ctl(&[])?;
                if bare.rc != 0 {
                    // Ansible's `run_command(systemctl, check_rc=True)` failure.
                    return Err(ModuleError::Failed {
                        msg: bare.stderr.trim_end().to_string(),
                        result: [
                            ("cmd".to_string(), json!(s.systemctl.join(" "))),
                            ("rc".to_string(), json!(bare.rc)),
                            ("stdout".to_string(), json!(bare.stdout)),
                            ("stderr".to_string(), json!(bare.stderr)),
                        ]
                        .into_iter()
                        .collect(),
                    });
                }
            }
        }
        s.found = is_systemd || is_initd;
        if is_initd && !is_systemd {
            s.warnings.push(format!(
                "The service ({unit}) is actually an init script but the system is managed by systemd"
            ));
        }
        if p.masked.is_some() {
            s.masked = s.ctl(&["is-enabled", unit])?.stdout.trim() == "masked";
        }
        if p.enabled.is_some() {
            let e = s.ctl(&["is-enabled", unit, "-l"])?;
            s.enabled = match e.rc {
                // Asked to enable: these are not a permanent enablement Ansible trusts.
                0 => !["enabled-runtime", "indirect", "alias"].contains(&e.stdout.trim_end()),
                1 => {
                    p.scope == Scope::System
                        && is_initd
                        && !e.stdout.trim().ends_with("disabled")
                        && sysv_is_enabled(unit, None)
                }
                _ => false,
            };
        }
        Ok(s)
    }

    fn plan(p: &Params, s: &Probed, _ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let mut plan = Plan::new();
        plan.result.insert("name".into(), json!(p.name));
        plan.result
            .insert("status".into(), Value::Object(s.status.clone()));
        if !s.warnings.is_empty() {
            plan.result.insert("warnings".into(), json!(s.warnings));
        }
        let Some(unit) = &p.name else {
            return Ok(plan);
        };
        if let Some(want) = p.masked {
            if want.0 != s.masked {
                plan.actions
                    .push(Action::Run(if want.0 { "mask" } else { "unmask" }));
                plan.diff
                    .attr(unit, "masked", s.masked.to_string(), want.0.to_string());
            }
        }
        if let Some(want) = p.enabled {
            if !s.found {
                return Err(super::missing(unit));
            }
            plan.result.insert("enabled".into(), json!(want.0));
            if want.0 != s.enabled {
                plan.actions
                    .push(Action::Run(if want.0 { "enable" } else { "disable" }));
                plan.diff
                    .attr(unit, "enabled", s.enabled.to_string(), want.0.to_string());
            }
        }
        if let Some(state) = p.state {
            if !s.found {
                return Err(super::missing(unit));
            }
            plan.result.insert("state".into(), json!(state.as_str()));
            if s.status.contains_key("ActiveState") {
                let running = s.running();
                let verb = match state {
                    State::Started => (!running).then_some("start"),
                    State::Stopped => (running
                        || s.status.get("ActiveState").and_then(Value::as_str)
                            == Some("deactivating"))
                    .then_some("stop"),
                    State::Restarted | State::Reloaded => {
                        plan.result.insert("state".into(), json!("started"));
                        Some(if !running {
                            "start"
                        } else if state == State::Restarted {
                            "restart"
                        } else {
                            "reload"
                        })
                    }
                };
                if let Some(v) = verb {
                    plan.actions.push(Action::Run(v));
                    plan.diff.attr(
                        unit,
                        "state",
                        s.status
                            .get("ActiveState")
                            .and_then(Value::as_str)
                            .unwrap_or_default(),
                        state.as_str(),
                    );
                }
            } else if is_chroot() || std::env::var("SYSTEMD_OFFLINE").as_deref() == Ok("1") {
                let mut w = s.warnings.clone();
                w.push("Target is a chroot or systemd is offline. This can lead to false positives or prevent the init system tools from working.".into());
                plan.result.insert("warnings".into(), json!(w));
            } else {
                return Err(ModuleError::Failed {
                    msg: "Service is in unknown state".into(),
                    result: [("status".to_string(), Value::Object(s.status.clone()))]
                        .into_iter()
                        .collect(),
                });
            }
        }
        Ok(plan)
    }

    fn apply(
        p: &Params,
        s: Probed,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        let unit = p.name.as_deref().unwrap_or_default();
        for Action::Run(verb) in &plan.actions {
            let r = s.ctl(&[verb, unit])?;
            if r.rc != 0 {
                let msg = match *verb {
                    "mask" | "unmask" => {
                        format!("Failed to {verb} the service ({unit}): {}", r.stderr.trim())
                    }
                    "enable" | "disable" => {
                        format!("Unable to {verb} service {unit}: {}{}", r.stdout, r.stderr)
                    }
                    _ => format!("Unable to {verb} service {unit}: {}", r.stderr),
                };
                return Err(ModuleError::failed(msg));
            }
        }
        Ok(Map::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_output_parses_with_multiline_exec_values() {
        let text = "Id=a.service\nExecStart={ path=/bin/x ; argv[]=/bin/x\n  more }\nDescription={ odd\nActiveState=active\n";
        let m = parse_show(text);
        assert_eq!(m["Id"], "a.service");
        assert_eq!(m["ExecStart"], "{ path=/bin/x ; argv[]=/bin/x\n  more }");
        assert_eq!(m["Description"], "{ odd");
        assert_eq!(m["ActiveState"], "active");
    }

    #[test]
    fn validate_follows_ansibles_requirements() {
        let p: Params = serde_json::from_value(json!({"state": "started"})).unwrap();
        assert!(SystemdService::validate(&p).is_err());
        let p: Params = serde_json::from_value(json!({"name": "a*", "state": "started"})).unwrap();
        assert!(SystemdService::validate(&p).is_err());
        let p: Params = serde_json::from_value(json!({"daemon_reload": true})).unwrap();
        assert!(SystemdService::validate(&p).is_ok());
        // As ansible-core: `name` alone (or nothing) passes; it reads the unit's status.
        let p: Params = serde_json::from_value(json!({"name": "docker"})).unwrap();
        assert!(SystemdService::validate(&p).is_ok());
        let p: Params =
            serde_json::from_value(json!({"unit": "a", "daemon-reload": "yes"})).unwrap();
        assert!(p.daemon_reload.0 && p.name.as_deref() == Some("a"));
    }
}
