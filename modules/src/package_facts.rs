//! `package_facts`: the installed packages as `ansible_facts.packages` (name → list of
//! `{name, version, arch, category, origin, source}`), read from dpkg and apt without Python.

use crate::apt::exec::{base_env, failure, run};
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::HashMap;

pub struct PackageFacts;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(default)]
    pub manager: Option<crate::params::StringList>,
    #[serde(default)]
    pub strategy: Option<String>,
}

/// The managers ansible-core's package_facts knows, with their aliases. fixpoint reads apt
/// (`auto` selects it); any other named is taken as not usable here, as ansible-core takes one
/// whose tool or Python library the host lacks, and the next one in the list is tried.
const MANAGERS: &[&str] = &[
    "auto",
    "apt",
    "apk",
    "pacman",
    "pkg",
    "pkg_info",
    "portage",
    "rpm",
    "dnf",
    "dnf5",
    "yum",
    "zypper",
    "pkg5",
    "pkgng",
    "openbsd_pkg",
];

fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

impl Module for PackageFacts {
    type Params = Params;
    type State = Map<String, Value>;
    type Action = ();

    fn validate(p: &Params) -> Result<(), ModuleError> {
        for m in p.manager.iter().flat_map(|l| l.0.iter()) {
            if !MANAGERS.contains(&m.to_lowercase().as_str()) && !crate::params::is_template(m) {
                return Err(ModuleError::Params(format!(
                    "Unsupported package managers requested: {m}"
                )));
            }
        }
        if let Some(s) = &p.strategy {
            if !["first", "all"].contains(&s.as_str()) && !crate::params::is_template(s) {
                return Err(ModuleError::Params(format!(
                    "value of strategy must be one of: first, all, got: {s}"
                )));
            }
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Map<String, Value>, ModuleError> {
        let managers: Vec<String> = match &p.manager {
            Some(l) => l.0.iter().map(|m| m.to_lowercase()).collect(),
            None => vec!["auto".into()],
        };
        // Only apt is read: a list without it (or `auto`) finds no usable manager.
        if !managers.iter().any(|m| m == "apt" || m == "auto") {
            let listed: Vec<String> = managers.iter().map(|m| format!("'{m}'")).collect();
            return Err(ModuleError::failed(format!(
                "Could not detect a supported package manager from the following list: [{}], \
                 or the required Python library is not installed. Check warnings for details.",
                listed.join(", ")
            )));
        }
        if crate::pkg_mgr::pkg_mgr(&crate::pkg_mgr::host_os_family()) != "apt" {
            return Err(ModuleError::failed(
                "Could not detect a supported package manager from the following list: ['apt']",
            ));
        }
        let env = base_env();
        let ran = run(
            &argv(&[
                "dpkg-query",
                "-W",
                "-f",
                "${db:Status-Abbrev}\\t${binary:Package}\\t${Package}\\t${Version}\\t${Architecture}\\t${Section}\\n",
            ]),
            &env,
            None,
        )?;
        if ran.rc != 0 {
            return Err(failure(
                format!("Unable to list packages: {}", ran.stderr.trim_end()),
                &ran,
            ));
        }
        let mut rows = Vec::new();
        for line in ran.stdout.lines() {
            let f: Vec<&str> = line.split('\t').collect();
            if f.len() == 6 && f[0].as_bytes().get(1) == Some(&b'i') {
                rows.push(f);
            }
        }
        // python-apt names native packages plainly and foreign ones `name:arch`.
        let names: Vec<String> = rows.iter().map(|f| f[1].to_string()).collect();
        let origins = origins(&names)?;
        let mut packages: Map<String, Value> = Map::new();
        for f in rows {
            let entry = json!({
                "name": f[1],
                "version": f[3],
                "arch": f[4],
                "category": f[5],
                "origin": origins.get(f[1]).cloned().unwrap_or_default(),
                "source": "apt",
            });
            match packages.get_mut(f[1]) {
                Some(Value::Array(v)) => v.push(entry),
                _ => {
                    packages.insert(f[1].to_string(), json!([entry]));
                }
            }
        }
        Ok(packages)
    }

    fn plan(_p: &Params, packages: &Map<String, Value>, _: &Ctx) -> Result<Plan<()>, ModuleError> {
        let mut plan = Plan::new();
        plan.result.insert(
            "ansible_facts".into(),
            json!({ "packages": packages.clone() }),
        );
        Ok(plan)
    }

    fn apply(
        _: &Params,
        _: Map<String, Value>,
        _: &Plan<()>,
    ) -> Result<Map<String, Value>, ModuleError> {
        Ok(Map::new())
    }
}

/// Each installed version's first origin, as python-apt's `origins[0].origin`: the `o=` of the
/// first package file that carries it (empty when only dpkg's status file knows it).
fn origins(names: &[String]) -> Result<HashMap<String, String>, ModuleError> {
    let env = base_env();
    // The package files and their release origin, from `apt-cache policy` without names.
    let files = run(&argv(&["apt-cache", "policy"]), &env, None)?;
    let mut file_origin: HashMap<String, String> = HashMap::new();
    let mut last: Option<String> = None;
    for line in files.stdout.lines() {
        let t = line.trim();
        if let Some(rel) = t.strip_prefix("release ") {
            if let Some(f) = last.take() {
                let o = rel
                    .split(',')
                    .find_map(|kv| kv.strip_prefix("o="))
                    .unwrap_or_default();
                file_origin.insert(f, o.to_string());
            }
        } else if line.starts_with(' ') && !line.starts_with("     ") {
            // " 500 http://... Packages": the source, after its priority.
            last = t.split_once(' ').map(|(_, src)| src.to_string());
        }
    }
    let mut out = HashMap::new();
    if names.is_empty() {
        return Ok(out);
    }
    let mut a = argv(&["apt-cache", "policy", "--"]);
    a.extend(names.iter().cloned());
    let ran = run(&a, &env, None)?;
    let mut pkg: Option<String> = None;
    let mut in_installed = false;
    for line in ran.stdout.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            pkg = Some(line.trim_end_matches(':').to_string());
            in_installed = false;
            continue;
        }
        if line.starts_with(" *** ") {
            in_installed = true;
            continue;
        }
        if line.starts_with("     ") && !line.starts_with("        ") {
            in_installed = false;
            continue;
        }
        if in_installed && line.starts_with("        ") {
            if let Some(p) = &pkg {
                let src = line.trim().split_once(' ').map(|(_, s)| s).unwrap_or("");
                let o = file_origin.get(src).cloned().unwrap_or_default();
                out.entry(p.clone()).or_insert(o);
            }
        }
    }
    Ok(out)
}
