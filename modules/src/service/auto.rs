//! The `service` module: picks the manager as Ansible's `service` action does (the `use`
//! parameter, else the host's `service_mgr` fact) and runs `systemd_service`, `sysvinit` or the
//! generic SysV path (`legacy.rs`) with the same parameters.
//!
//! As in Ansible, `systemd` drops `pattern`, `runlevel`, `sleep` and `arguments` with a warning.
//! Another manager named in `use` (openrc, upstart, runit...) is refused.

use super::legacy;
use super::{service_mgr, systemd, systemd_booted, sysv};
use crate::{Ctx, Module, ModuleError, Plan};
use serde_json::{Map, Value};

pub struct Service;

/// The backend chosen on the host, with the parameters it runs with.
#[derive(Debug)]
pub enum Probed {
    Systemd(systemd::Params, systemd::Probed, Vec<String>),
    Sysvinit(sysv::Params, sysv::Probed),
    Legacy(legacy::Probed),
}

#[derive(Debug)]
pub enum Action {
    Systemd(systemd::Action),
    Sysvinit(sysv::Action),
    Legacy(legacy::Action),
}

/// The manager names `use` accepts (Ansible's module names of the managers fixpoint drives).
const USABLE: &[&str] = &["auto", "systemd", "sysvinit", "service"];

impl Module for Service {
    type Params = legacy::Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &legacy::Params) -> Result<(), ModuleError> {
        if let Some(u) = &p.use_ {
            if !crate::params::is_template(u) && !USABLE.contains(&u.to_lowercase().as_str()) {
                return Err(ModuleError::Params(format!(
                    "`use: {u}` is not supported: fixpoint drives {}",
                    USABLE.join(", ")
                )));
            }
        }
        legacy::validate(p)
    }

    fn probe(p: &legacy::Params, ctx: &Ctx) -> Result<Probed, ModuleError> {
        let mut mgr = p
            .use_
            .as_deref()
            .unwrap_or("auto")
            .to_lowercase()
            .to_string();
        if mgr == "auto" {
            mgr = service_mgr();
        }
        // Ansible's generic module itself drives systemctl when systemd is booted.
        if mgr == "systemd" || (mgr != "sysvinit" && systemd_booted()) {
            let mut warnings = Vec::new();
            for (given, name) in [
                (p.pattern.is_some(), "pattern"),
                (p.runlevel.is_some(), "runlevel"),
                (p.sleep.is_some(), "sleep"),
                (p.arguments.is_some(), "arguments"),
            ] {
                if given && mgr == "systemd" {
                    warnings.push(format!(
                        "Ignoring \"{name}\" as it is not used in \"systemd\""
                    ));
                }
            }
            let sp = systemd::Params {
                name: Some(p.name.clone()),
                state: p.state,
                enabled: p.enabled,
                ..Default::default()
            };
            let probed = systemd::SystemdService::probe(&sp, ctx)?;
            return Ok(Probed::Systemd(sp, probed, warnings));
        }
        if mgr == "sysvinit" {
            let sp = sysv::Params {
                name: p.name.clone(),
                state: p.state,
                enabled: p.enabled,
                sleep: p.sleep.unwrap_or(1),
                pattern: p.pattern.clone(),
                arguments: p.arguments.clone(),
                runlevels: None,
                daemonize: None,
            };
            let probed = sysv::Sysvinit::probe(&sp, ctx)?;
            return Ok(Probed::Sysvinit(sp, probed));
        }
        Ok(Probed::Legacy(legacy::probe(p, ctx)?))
    }

    fn plan(p: &legacy::Params, s: &Probed, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        Ok(match s {
            Probed::Systemd(sp, st, warnings) => {
                let mut plan = wrap(systemd::SystemdService::plan(sp, st, ctx)?, Action::Systemd);
                if !warnings.is_empty() {
                    let mut all = warnings.clone();
                    if let Some(Value::Array(w)) = plan.result.get("warnings") {
                        all.extend(w.iter().filter_map(|v| v.as_str().map(String::from)));
                    }
                    plan.result.insert("warnings".into(), all.into());
                }
                plan
            }
            Probed::Sysvinit(sp, st) => wrap(sysv::Sysvinit::plan(sp, st, ctx)?, Action::Sysvinit),
            Probed::Legacy(st) => wrap(legacy::plan(p, st, ctx)?, Action::Legacy),
        })
    }

    fn apply(
        p: &legacy::Params,
        s: Probed,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        match s {
            Probed::Systemd(sp, st, _) => {
                let inner = unwrap(plan, |a| match a {
                    Action::Systemd(x) => Some(x.clone()),
                    _ => None,
                });
                systemd::SystemdService::apply(&sp, st, &inner)
            }
            Probed::Sysvinit(sp, st) => {
                let inner = unwrap(plan, |a| match a {
                    Action::Sysvinit(x) => Some(x.clone()),
                    _ => None,
                });
                sysv::Sysvinit::apply(&sp, st, &inner)
            }
            Probed::Legacy(st) => {
                let inner = unwrap(plan, |a| match a {
                    Action::Legacy(x) => Some(x.clone()),
                    _ => None,
                });
                legacy::apply(p, st, &inner)
            }
        }
    }
}

fn wrap<A>(plan: Plan<A>, f: impl Fn(A) -> Action) -> Plan<Action> {
    Plan {
        actions: plan.actions.into_iter().map(f).collect(),
        diff: plan.diff,
        result: plan.result,
        msg: plan.msg,
    }
}

fn unwrap<A>(plan: &Plan<Action>, f: impl Fn(&Action) -> Option<A>) -> Plan<A> {
    Plan {
        actions: plan.actions.iter().filter_map(f).collect(),
        diff: plan.diff.clone(),
        result: plan.result.clone(),
        msg: plan.msg.clone(),
    }
}
