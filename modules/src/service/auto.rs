//! The `service` module: picks the manager as Ansible's `service` action does (the `use`
//! parameter, else the host's `service_mgr` fact) and runs `systemd_service`, `sysvinit` or the
//! generic SysV path (`legacy.rs`) with the same parameters.
//!
//! As in Ansible, the parameters go to the chosen module: on a host whose `service_mgr` is
//! systemd, `systemd_service`'s own (`daemon_reload`, `masked`, `scope`...) pass and `pattern`,
//! `runlevel`, `sleep` and `arguments` are dropped with a warning; on any other manager the
//! task is checked as that module checks it (`name` required, `state` or `enabled`, and
//! systemd's parameters are unsupported), at run time, where Ansible fails it too.
//! Another manager named in `use` (openrc, upstart, runit...) is refused.

use super::legacy;
use super::{service_mgr, systemd, systemd_booted, sysv};
use crate::params::Bool;
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{Map, Value};

pub struct Service;

/// `service`'s parameters and those of `systemd_service` that Ansible's action hands on.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub state: Option<sysv::State>,
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
    // systemd_service's own: valid only when the host's manager is systemd.
    #[serde(default)]
    pub force: Option<Bool>,
    #[serde(default)]
    pub masked: Option<Bool>,
    #[serde(default, alias = "daemon-reload")]
    pub daemon_reload: Option<Bool>,
    #[serde(default, alias = "daemon-reexec")]
    pub daemon_reexec: Option<Bool>,
    #[serde(default)]
    pub scope: Option<systemd::Scope>,
    #[serde(default)]
    pub no_block: Option<Bool>,
}

impl Params {
    /// The systemd-only parameters given, in Ansible's (sorted) order.
    fn systemd_only(&self) -> Vec<&'static str> {
        [
            (self.daemon_reexec.is_some(), "daemon_reexec"),
            (self.daemon_reload.is_some(), "daemon_reload"),
            (self.force.is_some(), "force"),
            (self.masked.is_some(), "masked"),
            (self.no_block.is_some(), "no_block"),
            (self.scope.is_some(), "scope"),
        ]
        .into_iter()
        .filter_map(|(given, n)| given.then_some(n))
        .collect()
    }

    /// The parameters as `systemd_service` receives them from Ansible's action.
    fn for_systemd(&self) -> systemd::Params {
        systemd::Params {
            name: self.name.clone(),
            state: self.state,
            enabled: self.enabled,
            force: self.force,
            masked: self.masked,
            daemon_reload: self.daemon_reload.unwrap_or_default(),
            daemon_reexec: self.daemon_reexec.unwrap_or_default(),
            scope: self.scope.unwrap_or_default(),
            no_block: self.no_block.unwrap_or_default(),
        }
    }

    /// The parameters as Ansible's `service` (`module` = "service") or `sysvinit` module checks
    /// them: its first error, in Ansible's order (required, required one of, unsupported).
    fn for_sysv_module(
        &self,
        module: &str,
        extra: &[&str],
        supported: &str,
    ) -> Result<String, ModuleError> {
        let Some(name) = &self.name else {
            return Err(ModuleError::failed("missing required arguments: name"));
        };
        if self.state.is_none() && self.enabled.is_none() {
            return Err(ModuleError::failed(
                "one of the following is required: state, enabled",
            ));
        }
        let mut unsupported = self.systemd_only();
        unsupported.extend(extra);
        unsupported.sort_unstable();
        if !unsupported.is_empty() {
            return Err(ModuleError::failed(format!(
                "Unsupported parameters for (ansible.legacy.{module}) module: {}. Supported \
                 parameters include: {supported}.",
                unsupported.join(", ")
            )));
        }
        Ok(name.clone())
    }
}

/// The backend chosen on the host, with the parameters it runs with.
#[derive(Debug)]
pub enum Probed {
    Systemd(systemd::Params, systemd::Probed, Vec<String>),
    Sysvinit(sysv::Params, sysv::Probed),
    Legacy(legacy::Params, legacy::Probed),
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
    type Params = Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if let Some(u) = &p.use_ {
            if !crate::params::is_template(u) && !USABLE.contains(&u.to_lowercase().as_str()) {
                return Err(ModuleError::Params(format!(
                    "`use: {u}` is not supported: fixpoint drives {}",
                    USABLE.join(", ")
                )));
            }
        }
        // What every backend requires; the rest depends on the host's manager (run time).
        if p.name.is_none() && (p.state.is_some() || p.enabled.is_some() || p.masked.is_some()) {
            return Err(ModuleError::Params(
                "missing required arguments: name".into(),
            ));
        }
        if p.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
            return Err(ModuleError::Params("`name` must not be empty".into()));
        }
        Ok(())
    }

    fn probe(p: &Params, ctx: &Ctx) -> Result<Probed, ModuleError> {
        let mut mgr = p
            .use_
            .as_deref()
            .unwrap_or("auto")
            .to_lowercase()
            .to_string();
        if mgr == "auto" {
            mgr = service_mgr();
        }
        if mgr == "systemd" {
            // Ansible's action runs `systemd_service` with every parameter but these.
            let mut warnings = Vec::new();
            for (given, name) in [
                (p.pattern.is_some(), "pattern"),
                (p.runlevel.is_some(), "runlevel"),
                (p.sleep.is_some(), "sleep"),
                (p.arguments.is_some(), "arguments"),
            ] {
                if given {
                    warnings.push(format!(
                        "Ignoring \"{name}\" as it is not used in \"systemd\""
                    ));
                }
            }
            let sp = p.for_systemd();
            systemd::SystemdService::validate(&sp)?;
            let probed = systemd::SystemdService::probe(&sp, ctx)?;
            return Ok(Probed::Systemd(sp, probed, warnings));
        }
        if mgr == "sysvinit" {
            let mut extra = Vec::new();
            if p.runlevel.is_some() {
                extra.push("runlevel");
            }
            let name = p.for_sysv_module(
                "sysvinit",
                &extra,
                "arguments, daemonize, enabled, name, pattern, runlevels, sleep, state (args, service)",
            )?;
            let sp = sysv::Params {
                name,
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
        // Any other manager: Ansible runs its generic `service` module.
        let name = p.for_sysv_module(
            "service",
            &[],
            "arguments, enabled, name, pattern, runlevel, sleep, state (args)",
        )?;
        // That module itself drives systemctl when systemd is booted.
        if systemd_booted() {
            let sp = systemd::Params {
                name: Some(name),
                state: p.state,
                enabled: p.enabled,
                ..Default::default()
            };
            let probed = systemd::SystemdService::probe(&sp, ctx)?;
            return Ok(Probed::Systemd(sp, probed, Vec::new()));
        }
        let lp = legacy::Params {
            name,
            state: p.state,
            sleep: p.sleep,
            pattern: p.pattern.clone(),
            enabled: p.enabled,
            runlevel: p.runlevel.clone(),
            arguments: p.arguments.clone(),
            use_: None,
        };
        legacy::validate(&lp)?;
        let probed = legacy::probe(&lp, ctx)?;
        Ok(Probed::Legacy(lp, probed))
    }

    fn plan(_p: &Params, s: &Probed, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
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
            Probed::Legacy(lp, st) => wrap(legacy::plan(lp, st, ctx)?, Action::Legacy),
        })
    }

    fn apply(
        _p: &Params,
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
            Probed::Legacy(lp, st) => {
                let inner = unwrap(plan, |a| match a {
                    Action::Legacy(x) => Some(x.clone()),
                    _ => None,
                });
                legacy::apply(&lp, st, &inner)
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(v: Value) -> Params {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn systemd_parameters_load_and_pass_to_systemd_service() {
        let p = params(json!({"daemon_reload": true}));
        assert!(Service::validate(&p).is_ok());
        let sp = p.for_systemd();
        assert!(sp.daemon_reload.0 && sp.name.is_none());
        let p = params(json!({"name": "a", "daemon-reexec": "yes", "scope": "user"}));
        assert!(p.for_systemd().daemon_reexec.0);
        assert!(Service::validate(&params(json!({"state": "started"}))).is_err());
        assert!(serde_json::from_value::<Params>(json!({"name": "a", "bogus": 1})).is_err());
    }

    #[test]
    fn other_managers_check_as_ansibles_modules_do() {
        let msg = |v: Value| match params(v).for_sysv_module("service", &[], "S") {
            Err(ModuleError::Failed { msg, .. }) => msg,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            msg(json!({"daemon_reload": true})),
            "missing required arguments: name"
        );
        assert_eq!(
            msg(json!({"name": "a", "daemon_reload": true})),
            "one of the following is required: state, enabled"
        );
        assert_eq!(
            msg(json!({"name": "a", "enabled": true, "scope": "user", "daemon_reload": false})),
            "Unsupported parameters for (ansible.legacy.service) module: daemon_reload, scope. \
             Supported parameters include: S."
        );
    }
}
