//! The `group` module: a local group present (with a gid, as a system group) or absent, through
//! `groupadd`/`groupmod`/`groupdel`, with Ansible's return values (`name`, `state`, `gid`,
//! `system`).
//!
//! `local: true` is ansible-core's libuser variant: the group is looked for in `/etc/group`
//! itself (not through NSS), `lgroupadd`/`lgroupmod`/`lgroupdel` make the changes, and a `gid`
//! another group has fails first (libuser's tools would take it).

use super::{de_opt_u32, group_by_name, shadow_tool, tool_failed, GrEntry};
use crate::params::Bool;
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};

pub struct Group;

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum State {
    #[default]
    Present,
    Absent,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub name: String,
    #[serde(default)]
    pub state: State,
    #[serde(default, deserialize_with = "de_opt_u32")]
    pub gid: Option<u32>,
    #[serde(default)]
    pub system: Bool,
    #[serde(default)]
    pub force: Bool,
    #[serde(default)]
    pub non_unique: Bool,
    #[serde(default, deserialize_with = "de_opt_u32")]
    pub gid_min: Option<u32>,
    #[serde(default, deserialize_with = "de_opt_u32")]
    pub gid_max: Option<u32>,
    #[serde(default)]
    pub local: Bool,
}

/// What the host has: the group, and with `local` the group (another one) that has `gid`.
#[derive(Debug)]
pub struct Probed {
    group: Option<GrEntry>,
    gid_taken_by: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Add,
    /// `groupmod -g GID`.
    SetGid(u32),
    Del,
}

impl Module for Group {
    type Params = Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if p.name.trim().is_empty() {
            return Err(ModuleError::Params("`name` must not be empty".into()));
        }
        if p.local.0 {
            // ansible-core's words; it fails so when the task runs, fixpoint at load (or there,
            // for a task that may fail: `ignore_errors`, `when`, `failed_when`).
            let refused = if p.force.0 {
                Some("force is not a valid option for local, force=True and local=True are mutually exclusive".to_string())
            } else if p.gid_min.is_some() {
                Some("'gid_min' can not be used with 'local'".to_string())
            } else if p.gid_max.is_some() {
                Some("'gid_max' can not be used with 'local'".to_string())
            } else {
                None
            };
            if let Some(msg) = refused {
                return Err(ModuleError::Params(msg));
            }
        }
        if p.non_unique.0 && p.gid.is_none() {
            return Err(ModuleError::Params(
                "non_unique is True but all of the following are missing: gid".into(),
            ));
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Probed, ModuleError> {
        if !p.local.0 {
            return Ok(Probed {
                group: group_by_name(&p.name)?,
                gid_taken_by: None,
            });
        }
        let text =
            std::fs::read_to_string("/etc/group").map_err(|e| ModuleError::io("/etc/group", e))?;
        let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(':').collect()).collect();
        let in_file = lines.iter().any(|f| f[0] == p.name);
        let gid_taken_by = p.gid.and_then(|gid| {
            lines
                .iter()
                .find(|f| f.len() > 2 && f[0] != p.name && f[2].parse() == Ok(gid))
                .map(|f| f[0].to_string())
        });
        Ok(Probed {
            group: if in_file {
                group_by_name(&p.name)?
            } else {
                None
            },
            gid_taken_by,
        })
    }

    fn plan(p: &Params, probed: &Probed, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let s = &probed.group;
        // ansible-core checks the gid before lgroupadd (not in check mode, which stops
        // before) and before lgroupmod (whether or not it changes anything).
        if let Some(other) = &probed.gid_taken_by {
            if p.state == State::Present && (s.is_some() || !ctx.check) {
                return Err(ModuleError::failed(format!(
                    "GID '{}' already exists with group '{other}'",
                    p.gid.unwrap_or_default()
                )));
            }
        }
        let mut plan = Plan::new();
        plan.result.insert("name".into(), json!(p.name));
        let state = match p.state {
            State::Present => "present",
            State::Absent => "absent",
        };
        plan.result.insert("state".into(), json!(state));
        match (p.state, s) {
            (State::Absent, Some(_)) => {
                plan.actions.push(Action::Del);
                plan.diff.attr(&p.name, "state", "present", "absent");
            }
            (State::Absent, None) => {}
            (State::Present, None) => {
                plan.actions.push(Action::Add);
                plan.diff.attr(&p.name, "state", "absent", "present");
            }
            (State::Present, Some(g)) => {
                if let Some(gid) = p.gid.filter(|gid| *gid != g.gid) {
                    plan.actions.push(Action::SetGid(gid));
                    plan.diff
                        .attr(&p.name, "gid", g.gid.to_string(), gid.to_string());
                }
                plan.result.insert("system".into(), json!(p.system.0));
                plan.result.insert("gid".into(), json!(g.gid));
            }
        }
        if ctx.check && matches!(plan.actions.first(), Some(Action::Add | Action::Del)) {
            // Ansible's module stops there in check mode and returns nothing else.
            plan.result = Map::new();
        }
        Ok(plan)
    }

    fn apply(
        p: &Params,
        _s: Probed,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        let mut out = Map::new();
        for action in &plan.actions {
            let mut args: Vec<String> = Vec::new();
            let tool = match action {
                Action::Add => {
                    if let Some(gid) = p.gid {
                        args.extend(["-g".into(), gid.to_string()]);
                        if p.non_unique.0 {
                            args.push("-o".into());
                        }
                    }
                    if p.system.0 {
                        args.push("-r".into());
                    }
                    if let Some(min) = p.gid_min {
                        args.extend(["-K".into(), format!("GID_MIN={min}")]);
                    }
                    if let Some(max) = p.gid_max {
                        args.extend(["-K".into(), format!("GID_MAX={max}")]);
                    }
                    if p.local.0 {
                        "lgroupadd"
                    } else {
                        "groupadd"
                    }
                }
                Action::SetGid(gid) => {
                    args.extend(["-g".into(), gid.to_string()]);
                    if p.non_unique.0 {
                        args.push("-o".into());
                    }
                    if p.local.0 {
                        "lgroupmod"
                    } else {
                        "groupmod"
                    }
                }
                Action::Del => {
                    if p.force.0 {
                        args.push("-f".into());
                    }
                    if p.local.0 {
                        "lgroupdel"
                    } else {
                        "groupdel"
                    }
                }
            };
            args.push(p.name.clone());
            let ran = shadow_tool(tool, &args)?;
            if ran.rc != 0 {
                return Err(tool_failed(&p.name, &ran));
            }
            if !ran.stdout.is_empty() {
                out.insert("stdout".into(), json!(ran.stdout));
            }
            if !ran.stderr.is_empty() {
                out.insert("stderr".into(), json!(ran.stderr));
            }
        }
        if p.state == State::Present {
            let g = group_by_name(&p.name)?
                .ok_or_else(|| ModuleError::failed(format!("group {} vanished", p.name)))?;
            out.insert("system".into(), json!(p.system.0));
            out.insert("gid".into(), json!(g.gid));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_with_force_or_gid_bounds_and_non_unique_without_gid_are_refused() {
        let p: Params = serde_json::from_value(json!({"name": "g", "local": true})).unwrap();
        assert!(Group::validate(&p).is_ok());
        for (k, says) in [
            ("force", "mutually exclusive"),
            ("gid_min", "'gid_min' can not"),
        ] {
            let v = if k == "force" {
                json!(true)
            } else {
                json!(1000)
            };
            let p: Params =
                serde_json::from_value(json!({"name": "g", "local": true, k: v})).unwrap();
            let e = Group::validate(&p).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
        let p: Params = serde_json::from_value(json!({"name": "g", "non_unique": true})).unwrap();
        assert!(Group::validate(&p).is_err());
        let p: Params = serde_json::from_value(json!({"name": "g", "gid": 5000})).unwrap();
        assert!(Group::validate(&p).is_ok());
    }
}
