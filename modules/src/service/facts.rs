//! The `service_facts` module: `ansible_facts.services`, keyed by name, each `{name, state,
//! source}` (plus `status` for systemd units), gathered as Ansible does: `service --status-all`
//! for SysV scripts, then `systemctl list-units` and `list-unit-files` when systemd runs.
//!
//! Upstart, chkconfig and OpenRC listings are not gathered. When nothing is found the result
//! has an empty `services` and Ansible's message (Ansible reports the task skipped instead).

use super::{run, systemd_booted, which};
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};

pub struct ServiceFacts;

/// `service_facts` takes no parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {}

const BAD_STATES: &[&str] = &["not-found", "masked", "failed"];

/// `service --status-all`: `[ + ]  name` running, `[ - ]`/`[ ? ]` stopped.
pub fn parse_status_all(out: &str, services: &mut Map<String, Value>) {
    for line in out.lines() {
        let l = line.trim_start();
        let Some(rest) = l.strip_prefix("[ ") else {
            continue;
        };
        let mut chars = rest.chars();
        let mark = chars.next();
        let rest = chars.as_str();
        let Some(name) = rest.strip_prefix(" ]") else {
            continue;
        };
        // Ansible's pattern only takes `+` and `-`.
        let state = match mark {
            Some('+') => "running",
            Some('-') => "stopped",
            _ => continue,
        };
        let name = name.trim_start();
        if name.is_empty() || !name.starts_with(|c: char| !c.is_whitespace()) {
            continue;
        }
        services.insert(
            name.to_string(),
            json!({"name": name, "state": state, "source": "sysv"}),
        );
    }
}

/// `systemctl list-units --type service --all --plain`: UNIT LOAD ACTIVE SUB DESCRIPTION.
pub fn parse_list_units(out: &str, services: &mut Map<String, Value>) {
    for line in out.lines().filter(|l| l.contains(".service")) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 4 {
            continue;
        }
        let head = &fields[..fields.len() - 1];
        let status = BAD_STATES
            .iter()
            .find(|b| head.contains(b))
            .copied()
            .unwrap_or(fields[2]);
        let state = if fields[3] == "running" {
            "running"
        } else {
            "stopped"
        };
        services.insert(
            fields[0].to_string(),
            json!({"name": fields[0], "state": state, "status": status, "source": "systemd"}),
        );
    }
}

impl Module for ServiceFacts {
    type Params = Params;
    type State = Map<String, Value>;
    type Action = std::convert::Infallible;

    fn probe(_: &Params, _ctx: &Ctx) -> Result<Map<String, Value>, ModuleError> {
        let mut services = Map::new();
        if let Some(service) = which("service") {
            if which("chkconfig").is_none() && which("rc-status").is_none() {
                let r = run(&service, &["--status-all"])?;
                parse_status_all(&r.stdout, &mut services);
            }
        }
        if systemd_booted() {
            if let Some(ctl) = which("systemctl") {
                let r = run(
                    &ctl,
                    &[
                        "list-units",
                        "--no-pager",
                        "--type",
                        "service",
                        "--all",
                        "--plain",
                    ],
                )?;
                if r.rc == 0 {
                    parse_list_units(&r.stdout, &mut services);
                }
                let r = run(
                    &ctl,
                    &[
                        "list-unit-files",
                        "--no-pager",
                        "--type",
                        "service",
                        "--all",
                    ],
                )?;
                if r.rc == 0 {
                    for line in r.stdout.lines().filter(|l| l.contains(".service")) {
                        let mut f = line.split_whitespace();
                        let (Some(name), Some(status)) = (f.next(), f.next()) else {
                            return Err(ModuleError::failed(format!(
                                "Malformed output discovered from systemd list-unit-files: {line}"
                            )));
                        };
                        match services.get_mut(name) {
                            Some(Value::Object(s)) => {
                                let bad = s
                                    .get("status")
                                    .and_then(Value::as_str)
                                    .is_some_and(|v| BAD_STATES.contains(&v));
                                if !bad {
                                    s.insert("status".into(), json!(status));
                                }
                            }
                            _ => {
                                let st = run(&ctl, &["show", name, "--property=ActiveState"])?;
                                let state = if st.rc == 0 && !st.stdout.is_empty() {
                                    st.stdout.replace("ActiveState=", "").trim_end().to_string()
                                } else {
                                    "unknown".to_string()
                                };
                                services.insert(
                                    name.to_string(),
                                    json!({"name": name, "state": state, "status": status, "source": "systemd"}),
                                );
                            }
                        }
                    }
                }
            }
        }
        Ok(services)
    }

    fn plan(
        _: &Params,
        s: &Map<String, Value>,
        _ctx: &Ctx,
    ) -> Result<Plan<Self::Action>, ModuleError> {
        let mut plan = Plan::new();
        plan.result.insert(
            "ansible_facts".into(),
            json!({"services": Value::Object(s.clone())}),
        );
        if s.is_empty() {
            plan.msg = Some("Failed to find any services. This can be due to privileges or some other configuration issue.".into());
        }
        Ok(plan)
    }

    fn apply(
        _: &Params,
        _: Map<String, Value>,
        plan: &Plan<Self::Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        plan.nothing_to_apply()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_all_lines() {
        let mut m = Map::new();
        parse_status_all(" [ + ]  cron\n [ - ]  dbus\n [ ? ]  hwclock.sh\n", &mut m);
        assert_eq!(
            m["cron"],
            json!({"name": "cron", "state": "running", "source": "sysv"})
        );
        assert_eq!(m["dbus"]["state"], "stopped");
        assert!(!m.contains_key("hwclock.sh"));
    }

    #[test]
    fn list_units_lines() {
        let mut m = Map::new();
        parse_list_units(
            "cron.service loaded active running Regular background program processing daemon\nx.service not-found inactive dead x.service\n",
            &mut m,
        );
        assert_eq!(m["cron.service"]["state"], "running");
        assert_eq!(m["cron.service"]["status"], "active");
        assert_eq!(m["x.service"]["status"], "not-found");
        assert_eq!(m["x.service"]["state"], "stopped");
    }
}
