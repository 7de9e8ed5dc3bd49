//! `dpkg_selections`: a package's dpkg selection (`install`, `hold`, `deinstall`, `purge`),
//! read with `dpkg --get-selections` and set with `dpkg --set-selections`.

use crate::apt::exec::{base_env, failure, run};
use crate::params::{de_opt_string, is_template};
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};

pub struct DpkgSelections;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(deserialize_with = "de_opt_string")]
    pub name: Option<String>,
    pub selection: String,
}

const CHOICES: &[&str] = &["install", "hold", "deinstall", "purge"];

fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

impl Module for DpkgSelections {
    type Params = Params;
    /// The current selection, `not present` when dpkg has none.
    type State = String;
    type Action = ();

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if p.name.as_deref().unwrap_or_default().is_empty() {
            return Err(ModuleError::Params(
                "missing required arguments: `name`".into(),
            ));
        }
        if !is_template(&p.selection) && !CHOICES.contains(&p.selection.as_str()) {
            return Err(ModuleError::Params(format!(
                "value of selection must be one of: {}, got: {}",
                CHOICES.join(", "),
                p.selection
            )));
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<String, ModuleError> {
        let name = p.name.clone().unwrap_or_default();
        let ran = run(
            &argv(&["dpkg", "--get-selections", "--", &name]),
            &base_env(),
            None,
        )?;
        if ran.rc != 0 {
            return Err(failure(
                format!("dpkg --get-selections failed: {}", ran.stderr.trim_end()),
                &ran,
            ));
        }
        if ran.stderr.contains("no packages found matching") {
            return Err(ModuleError::failed(format!(
                "Failed to find package '{name}' to perform selection '{}'.",
                p.selection
            )));
        }
        Ok(ran
            .stdout
            .split_whitespace()
            .nth(1)
            .unwrap_or("not present")
            .to_string())
    }

    fn plan(p: &Params, current: &String, _ctx: &Ctx) -> Result<Plan<()>, ModuleError> {
        let mut plan = Plan::new();
        let name = p.name.clone().unwrap_or_default();
        plan.result.insert("before".into(), json!(current));
        plan.result.insert("after".into(), json!(p.selection));
        if *current != p.selection {
            plan.actions.push(());
            plan.diff.attr(
                format!("dpkg:{name}"),
                "selection",
                current.clone(),
                p.selection.clone(),
            );
        }
        Ok(plan)
    }

    fn apply(p: &Params, _: String, _: &Plan<()>) -> Result<Map<String, Value>, ModuleError> {
        let line = format!("{} {}", p.name.as_deref().unwrap_or_default(), p.selection);
        let ran = run(
            &argv(&["dpkg", "--set-selections"]),
            &base_env(),
            Some(line.as_bytes()),
        )?;
        if ran.rc != 0 {
            return Err(failure(
                format!("dpkg --set-selections failed: {}", ran.stderr.trim_end()),
                &ran,
            ));
        }
        Ok(Map::new())
    }
}
