//! `dnf` (and `yum`, its alias): RPM packages through the host's `dnf` command, run by the
//! agent (no Python bindings needed), in the host's root or an `installroot`.
//!
//! Probe reads rpm's database (`rpm --root <installroot> -qa`) to tell installed specs from
//! missing ones, then asks dnf itself what the transaction would be (`--assumeno`, which
//! resolves and stops before changing anything): the plan, check mode's `results` and `--diff`
//! come from that one answer. Apply runs the same command with `-y` and reports what rpm's
//! database gained and lost, as Ansible's `Installed: <nevra>` / `Removed: <nevra>` lines.

use crate::apt::exec::{base_env, run, shown, Ran};
use crate::apt::params::de_pkg_list;
use crate::params::{is_template, Bool};
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

pub struct Dnf;

/// Parameters of `dnf`, as Ansible spells them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(default, alias = "pkg", deserialize_with = "de_pkg_list")]
    pub name: Option<Vec<String>>,
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default = "root")]
    pub installroot: String,
    #[serde(default)]
    pub releasever: Option<String>,
    #[serde(default, deserialize_with = "de_pkg_list")]
    pub disablerepo: Option<Vec<String>>,
    #[serde(default, deserialize_with = "de_pkg_list")]
    pub enablerepo: Option<Vec<String>>,
    #[serde(default)]
    pub conf_file: Option<String>,
    #[serde(default)]
    pub disable_gpg_check: Bool,
    #[serde(default, alias = "expire-cache")]
    pub update_cache: Bool,
    #[serde(default)]
    pub download_only: Bool,
    /// `auto`, `dnf`, `dnf4`, `yum`, `yum4`, `dnf5`: fixpoint drives the host's `dnf` command.
    #[serde(default)]
    pub use_backend: Option<String>,
    /// Accepted: dnf reads its repositories' settings itself.
    #[serde(default)]
    pub validate_certs: Option<Bool>,
    #[serde(default)]
    pub sslverify: Option<Bool>,
    /// Accepted: fixpoint needs no Python bindings on the host.
    #[serde(default)]
    pub install_repoquery: Option<Bool>,
    /// Refused by `validate` when set (see the README).
    #[serde(default)]
    pub list: Option<Value>,
    #[serde(default)]
    pub autoremove: Option<Value>,
    #[serde(default)]
    pub exclude: Option<Value>,
    /// Only packages with a security (bugfix) advisory: dnf's `--security` (`--bugfix`).
    #[serde(default)]
    pub security: Bool,
    #[serde(default)]
    pub bugfix: Bool,
    /// Where `download_only` puts the packages (`--downloaddir`).
    #[serde(default)]
    pub download_dir: Option<String>,
    /// Upgrade the named packages that are installed; install none.
    #[serde(default)]
    pub update_only: Bool,
    /// A version older than the installed one is installed (a downgrade); else left out.
    #[serde(default)]
    pub allow_downgrade: Bool,
    #[serde(default)]
    pub skip_broken: Bool,
    /// `--nobest` / `--best`; unset: dnf.conf's `best`.
    #[serde(default)]
    pub nobest: Option<Bool>,
    #[serde(default)]
    pub enable_plugin: Option<Value>,
    #[serde(default)]
    pub disable_plugin: Option<Value>,
    #[serde(default)]
    pub allowerasing: Option<Value>,
    /// Environment from the play/task `environment`, passed by the controller.
    #[serde(default, rename = "_env")]
    pub env: Option<Map<String, Value>>,
}

fn root() -> String {
    "/".into()
}

/// The states Ansible accepts, and what each means here.
fn state_of(p: &Params) -> &str {
    match p.state.as_deref() {
        None | Some("present") | Some("installed") => "present",
        Some("absent") | Some("removed") => "absent",
        Some(other) => other,
    }
}

/// What the transaction does to one package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Installed(String),
    Removed(String),
}

impl Change {
    fn line(&self) -> String {
        match self {
            Change::Installed(n) => format!("Installed: {n}"),
            Change::Removed(n) => format!("Removed: {n}"),
        }
    }
}

/// dnf's transaction table (`Installing:`, `Upgrading:`, `Removing:`... then rows of
/// `name arch version repo size`) as installed and removed packages; an upgraded or downgraded
/// package also removes the version `installed` holds.
pub fn parse_transaction(out: &str, installed: &BTreeSet<String>) -> Vec<Change> {
    let mut section = "";
    let mut adds = Vec::new();
    let mut removes = Vec::new();
    for line in out.lines() {
        if !line.starts_with(' ') {
            section = if line.ends_with(':') { line } else { "" };
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 || section.is_empty() {
            continue;
        }
        let nevra = format!("{}-{}.{}", f[0], f[2], f[1]);
        if section.starts_with("Installing") || section.starts_with("Reinstalling") {
            adds.push(Change::Installed(nevra));
        } else if section.starts_with("Upgrading") || section.starts_with("Downgrading") {
            adds.push(Change::Installed(nevra));
            let prefix = format!("{}-", f[0]);
            for old in installed.iter().filter(|n| {
                n.strip_prefix(&prefix).is_some_and(|rest| {
                    rest.starts_with(|c: char| c.is_ascii_digit())
                        && n.ends_with(&format!(".{}", f[1]))
                })
            }) {
                removes.push(Change::Removed(old.clone()));
            }
        } else if section.starts_with("Removing") {
            removes.push(Change::Removed(nevra));
        }
    }
    adds.extend(removes);
    adds
}

pub struct Probed {
    env: Vec<(String, String)>,
    root: String,
    /// `update_cache` without names: refresh dnf's metadata, report no change (as Ansible).
    cache_only: bool,
    installed: BTreeSet<String>,
    /// The dnf commands to run (without `-y`/`--assumeno`), and what they would change.
    commands: Vec<Vec<String>>,
    changes: Vec<Change>,
    /// Ansible's `results` lines for names that need nothing (`absent` of a missing package).
    notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Run,
}

/// `dnf` with the task's options, ready for an operation.
fn dnf_base(p: &Params) -> Vec<String> {
    let mut a = vec!["dnf".to_string()];
    a.push(format!("--installroot={}", p.installroot));
    if let Some(c) = &p.conf_file {
        a.push("-c".into());
        a.push(c.clone());
    }
    if let Some(r) = &p.releasever {
        a.push(format!("--releasever={r}"));
    }
    for r in p.disablerepo.iter().flatten() {
        a.push(format!("--disablerepo={r}"));
    }
    for r in p.enablerepo.iter().flatten() {
        a.push(format!("--enablerepo={r}"));
    }
    if p.disable_gpg_check.0 {
        a.push("--nogpgcheck".into());
    }
    if p.update_cache.0 {
        a.push("--refresh".into());
    }
    if p.download_only.0 {
        a.push("--downloadonly".into());
        if let Some(d) = &p.download_dir {
            a.push(format!("--downloaddir={d}"));
        }
    }
    if p.skip_broken.0 {
        a.push("--skip-broken".into());
    }
    match p.nobest {
        Some(Bool(true)) => a.push("--nobest".into()),
        Some(Bool(false)) => a.push("--best".into()),
        None => {}
    }
    if p.security.0 {
        a.push("--security".into());
    }
    if p.bugfix.0 {
        a.push("--bugfix".into());
    }
    a
}

/// The names a transaction downgrades (its `Downgrading:` rows).
fn downgraded(out: &str) -> BTreeSet<String> {
    let mut section = "";
    let mut names = BTreeSet::new();
    for line in out.lines() {
        if !line.starts_with(' ') {
            section = line;
            continue;
        }
        if section.starts_with("Downgrading") {
            if let Some(n) = line.split_whitespace().next() {
                names.insert(n.to_string());
            }
        }
    }
    names
}

/// Every installed package in `root` as `name-version-release.arch`.
fn installed(root: &str, env: &[(String, String)]) -> Result<BTreeSet<String>, ModuleError> {
    let a = [
        "rpm",
        "--root",
        root,
        "-qa",
        "--qf",
        "%{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}\\n",
    ]
    .map(String::from);
    let ran = run(&a, env, None)?;
    if ran.rc != 0 {
        return Err(crate::apt::exec::failure(
            format!("'{}' failed: {}", shown(&a), ran.stderr.trim_end()),
            &ran,
        ));
    }
    Ok(ran.stdout.lines().map(str::to_string).collect())
}

/// Whether rpm knows `spec` (a name, `name-version`, `name-version-release`) in the root.
fn is_installed(p: &Params, spec: &str, env: &[(String, String)]) -> Result<bool, ModuleError> {
    let a = ["rpm", "--root", &p.installroot, "-q", spec].map(String::from);
    Ok(run(&a, env, None)?.rc == 0)
}

fn failed(msg: &str, ran: &Ran, failures: Vec<String>) -> ModuleError {
    let mut r = Map::new();
    r.insert("rc".into(), json!(ran.rc));
    r.insert("results".into(), json!([]));
    r.insert("failures".into(), json!(failures));
    ModuleError::Failed {
        msg: msg.to_string(),
        result: r,
    }
}

/// Ask dnf what `cmd` would do (`--assumeno`: resolve, then stop).
fn preview(
    cmd: &[String],
    installed: &BTreeSet<String>,
    env: &[(String, String)],
    what: &str,
) -> Result<(Vec<Change>, BTreeSet<String>), ModuleError> {
    let mut a = cmd.to_vec();
    a.insert(1, "--assumeno".into());
    let ran = run(&a, env, None)?;
    let text = format!("{}\n{}", ran.stdout, ran.stderr);
    if text.lines().any(|l| l.starts_with("Error: ")) {
        let failures = text
            .lines()
            .filter_map(|l| l.strip_prefix("No match for argument: "))
            .map(|n| format!("No package {n} available."))
            .collect::<Vec<_>>();
        let msg = if failures.is_empty() {
            format!("{what}: {}", ran.stderr.trim_end())
        } else {
            "Failed to install some of the specified packages".into()
        };
        return Err(failed(&msg, &ran, failures));
    }
    Ok((
        parse_transaction(&ran.stdout, installed),
        downgraded(&ran.stdout),
    ))
}

impl Module for Dnf {
    type Params = Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        let err = |m: String| Err(ModuleError::Params(m));
        if let Some(s) = p.state.as_deref().filter(|s| !is_template(s)) {
            let ok = ["absent", "present", "installed", "latest", "removed"];
            if !ok.contains(&s) {
                return err(format!(
                    "value of state must be one of: {}, got: {s}",
                    ok.join(", ")
                ));
            }
        }
        if let Some(b) = p.use_backend.as_deref().filter(|b| !is_template(b)) {
            if !["auto", "dnf", "dnf4", "yum", "yum4", "dnf5"].contains(&b) {
                return err(format!(
                    "value of use_backend must be one of: auto, yum, yum4, dnf, dnf4, dnf5, got: {b}"
                ));
            }
        }
        let unsupported = [
            ("list", &p.list),
            ("autoremove", &p.autoremove),
            ("exclude", &p.exclude),
            ("enable_plugin", &p.enable_plugin),
            ("disable_plugin", &p.disable_plugin),
            ("allowerasing", &p.allowerasing),
        ];
        if let Some((name, _)) = unsupported.iter().find(|(_, v)| v.is_some()) {
            return err(format!(
                "`{name}` is not supported by fixpoint's dnf yet (see the README); leave it out"
            ));
        }
        let names = p.name.as_deref().unwrap_or_default();
        if names.is_empty() && !p.update_cache.0 {
            return err("one of the following is required: name, update_cache".into());
        }
        for n in names.iter().filter(|n| !is_template(n)) {
            if n.starts_with('@') || n.contains("://") || n.ends_with(".rpm") || n == "*" {
                return err(format!(
                    "`name: {n}`: fixpoint's dnf handles package names and versions; groups, \
                     modules, URLs, .rpm files and `*` are not supported yet"
                ));
            }
        }
        crate::command::env_pairs(&p.env)?;
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Probed, ModuleError> {
        let mut env = crate::command::env_pairs(&p.env)?;
        env.extend(base_env());
        let installed = installed(&p.installroot, &env)?;
        let names = p.name.clone().unwrap_or_default();
        let mut present = Vec::new();
        let mut missing = Vec::new();
        for n in &names {
            if is_installed(p, n, &env)? {
                present.push(n.clone());
            } else {
                missing.push(n.clone());
            }
        }
        let mut commands = Vec::new();
        let mut changes = Vec::new();
        let mut notes = Vec::new();
        let mut add = |op: &str, specs: &[String], what: &str| -> Result<(), ModuleError> {
            let mut specs = specs.to_vec();
            loop {
                if specs.is_empty() {
                    return Ok(());
                }
                let mut cmd = dnf_base(p);
                cmd.push(op.into());
                cmd.extend(specs.iter().cloned());
                let (c, down) = preview(&cmd, &installed, &env, what)?;
                // dnf installs an older version named as a downgrade; Ansible leaves such a
                // spec out unless `allow_downgrade`.
                if op == "install" && !p.allow_downgrade.0 && !down.is_empty() {
                    specs.retain(|s| !down.iter().any(|n| names_version_of(s, n)));
                    continue;
                }
                if !c.is_empty() {
                    changes.extend(c);
                    commands.push(cmd);
                }
                return Ok(());
            }
        };
        match state_of(p) {
            _ if p.update_only.0 && state_of(p) != "absent" => {
                add("upgrade", &present, "upgrade")?;
                notes = missing
                    .iter()
                    .map(|n| {
                        format!("Packages providing {n} not installed due to update_only specified")
                    })
                    .collect();
            }
            "present" => add("install", &missing, "install")?,
            "latest" => {
                add("install", &missing, "install")?;
                add("upgrade", &present, "upgrade")?;
            }
            _ => {
                add("remove", &present, "remove")?;
                notes = missing
                    .iter()
                    .map(|n| format!("No match for argument: {n}"))
                    .collect();
            }
        }
        let cache_only = names.is_empty() && p.update_cache.0;
        if cache_only {
            let mut cmd = dnf_base(p);
            cmd.push("makecache".into());
            commands.push(cmd);
        }
        Ok(Probed {
            env,
            root: p.installroot.clone(),
            cache_only,
            installed,
            commands,
            changes,
            notes,
        })
    }

    fn plan(p: &Params, st: &Probed, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let mut plan = Plan::new();
        let r = &mut plan.result;
        r.insert("rc".into(), json!(0));
        if st.cache_only {
            plan.actions.push(Action::Run);
            r.insert("changed".into(), json!(false));
            r.insert("msg".into(), json!("Cache updated"));
            r.insert("results".into(), json!([]));
            return Ok(plan);
        }
        if st.commands.is_empty() {
            r.insert("msg".into(), json!("Nothing to do"));
            r.insert("results".into(), json!(st.notes));
            return Ok(plan);
        }
        plan.actions.push(Action::Run);
        let lines = result_lines(p, &st.changes);
        // update_only's notes come first, as Ansible appends them before the transaction's.
        let lines: Vec<String> = st.notes.iter().cloned().chain(lines).collect();
        plan.diff.prepared = Some(lines.join("\n"));
        r.insert("results".into(), json!(lines));
        r.insert(
            "msg".into(),
            json!(if ctx.check {
                "Check mode: No changes made, but would have if not in check mode"
            } else {
                ""
            }),
        );
        Ok(plan)
    }

    fn apply(
        p: &Params,
        st: Probed,
        _plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        for cmd in &st.commands {
            let mut a = cmd.clone();
            a.insert(1, "-y".into());
            let ran = run(&a, &st.env, None)?;
            if ran.rc != 0 {
                let mut r = Map::new();
                r.insert("rc".into(), json!(ran.rc));
                r.insert("results".into(), json!([]));
                r.insert("stdout".into(), json!(ran.stdout));
                r.insert("stderr".into(), json!(ran.stderr));
                return Err(ModuleError::Failed {
                    msg: format!("'{}' failed: {}", shown(&a), ran.stderr.trim_end()),
                    result: r,
                });
            }
        }
        // What rpm's database gained and lost (a download-only run changes nothing there).
        let mut out = Map::new();
        if st.cache_only {
            return Ok(out);
        }
        if p.download_only.0 {
            out.insert("results".into(), json!(result_lines(p, &st.changes)));
            return Ok(out);
        }
        let after = installed(&st.root, &st.env)?;
        let mut lines: Vec<String> = after
            .difference(&st.installed)
            .map(|n| Change::Installed(n.clone()).line())
            .collect();
        lines.extend(
            st.installed
                .difference(&after)
                .map(|n| Change::Removed(n.clone()).line()),
        );
        if !lines.is_empty() {
            let lines: Vec<String> = st.notes.iter().cloned().chain(lines).collect();
            out.insert("results".into(), json!(lines));
        }
        Ok(out)
    }
}

/// Whether `spec` names package `name` (the name itself, or it with a version after a dash).
fn names_version_of(spec: &str, name: &str) -> bool {
    spec == name
        || spec
            .strip_prefix(name)
            .and_then(|r| r.strip_prefix('-'))
            .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
}

/// Ansible's `results` for a transaction; a download-only one reports `Downloaded: <nevra>` for
/// what it fetched (and, as Ansible, is a change on every run).
fn result_lines(p: &Params, changes: &[Change]) -> Vec<String> {
    if p.download_only.0 {
        return changes
            .iter()
            .filter_map(|c| match c {
                Change::Installed(n) => Some(format!("Downloaded: {n}")),
                Change::Removed(_) => None,
            })
            .collect();
    }
    changes.iter().map(Change::line).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transactions_read_as_ansible_reports_them() {
        let out = "Dependencies resolved.\n====\n Package   Architecture  Version  Repository  Size\n====\nUpgrading:\n fptest-a  noarch  2.0-1  fptest  6.1 k\nInstalling dependencies:\n fptest-c  noarch  1.0-1  fptest  6.0 k\n\nTransaction Summary\n====\nUpgrade  1 Package\n";
        let installed: BTreeSet<String> = ["fptest-a-1.0-1.noarch".to_string()].into();
        let lines: Vec<String> = parse_transaction(out, &installed)
            .iter()
            .map(Change::line)
            .collect();
        assert_eq!(
            lines,
            vec![
                "Installed: fptest-a-2.0-1.noarch",
                "Installed: fptest-c-1.0-1.noarch",
                "Removed: fptest-a-1.0-1.noarch"
            ]
        );
        let rm = "Removing:\n fptest-a  noarch  2.0-1  @fptest  4  \n\nTransaction Summary\n";
        assert_eq!(
            parse_transaction(rm, &BTreeSet::new()),
            vec![Change::Removed("fptest-a-2.0-1.noarch".into())]
        );
    }

    #[test]
    fn load_time_checks() {
        let check = |v: Value| crate::registry::check_params("dnf", &v);
        assert!(check(json!({"name": "a", "state": "latest", "installroot": "/r"})).is_ok());
        assert!(check(json!({"name": "a", "state": "fixed"})).is_err());
        assert!(check(json!({"name": "@core"})).is_err());
        assert!(check(json!({"list": "installed"}))
            .unwrap_err()
            .to_string()
            .contains("not supported"));
        assert!(check(json!({"state": "present"})).is_err());
        let all = json!({"name": "a", "update_only": true, "allow_downgrade": true, "skip_broken": true,
            "nobest": true, "download_only": true, "download_dir": "/d", "security": true, "bugfix": true});
        assert!(check(all.clone()).is_ok());
        let p: Params = serde_json::from_value(all).unwrap();
        let base = dnf_base(&p).join(" ");
        for flag in [
            "--downloaddir=/d",
            "--skip-broken",
            "--nobest",
            "--security",
            "--bugfix",
        ] {
            assert!(base.contains(flag), "{base}");
        }
    }

    #[test]
    fn downgrades_are_told_by_name() {
        let out = "Downgrading:\n fptest-a  noarch  1.0-1  fptest  6 k\nInstalling:\n fptest-b  noarch  1.0-1  fptest  6 k\n";
        assert_eq!(downgraded(out), ["fptest-a".to_string()].into());
        assert!(names_version_of("fptest-a-1.0", "fptest-a"));
        assert!(names_version_of("fptest-a", "fptest-a"));
        assert!(!names_version_of("fptest-ab", "fptest-a"));
        assert!(!names_version_of("fptest-a-b", "fptest-a"));
    }
}
