//! `apt`: Debian packages through dpkg and apt-get, run by the agent itself (no Python).
//!
//! Probe reads dpkg's database (`dpkg-query`), apt's candidates (`apt-cache policy`) and, for
//! what only apt can decide (upgrades, autoremove, build-dep), a simulation (`apt-get -s`): all
//! read-only and lock-free. The plan is then one apt-get transaction for every package named,
//! built as Ansible's apt module builds it, so check mode and `--diff` (Ansible's `prepared`
//! text) come from the same simulation the real run would do. Apply waits for the dpkg lock up
//! to `lock_timeout` (apt's own `DPkg::Lock::Timeout`), never breaks it, and never prompts
//! (`DEBIAN_FRONTEND=noninteractive`, `--force-confdef --force-confold`).
//!
//! `update_cache` must happen before the packages are looked at again, so apply refreshes the
//! cache first and then recomputes the transaction from the fresh cache.

pub mod exec;
pub mod params;
pub mod query;

use crate::params::is_template;
use crate::{Ctx, Module, ModuleError, Plan};
use exec::{base_env, failure, lines, run, shown, Ran};
pub use params::Params;
use query::{fnmatch, Installed, Policy};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub struct Apt;

/// Ansible's default `dpkg_options`: keep changed conffiles, take the maintainer's for the rest.
pub const DPKG_OPTIONS: &str = "force-confdef,force-confold";
/// How apt-get says it would do nothing.
const APT_GET_ZERO: &str = "\n0 upgraded, 0 newly installed, 0 to remove";
const UPDATE_STAMP: &str = "/var/lib/apt/periodic/update-success-stamp";

/// What the package work of this task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `clean` alone.
    Clean,
    /// `update_cache`/`cache_valid_time` with nothing else to do.
    CacheOnly,
    Install,
    BuildDep,
    Remove,
    Upgrade,
    Autoremove,
    Autoclean,
    Deb,
}

/// The package work, as computed from the cache at probe time.
#[derive(Debug, Clone)]
pub struct Work {
    pub kind: Kind,
    /// The apt-get (or dpkg) command to run; None when everything is converged.
    pub argv: Option<Vec<String>>,
    /// Named packages (install): Ansible marks them manually installed after the transaction.
    pub names: Vec<String>,
    /// Named packages that are installed but marked automatically installed.
    pub auto_marked: Vec<String>,
    /// A simulation of `argv`, when it was needed to decide or asked for by check/diff mode.
    pub sim: Option<Ran>,
}

/// What the probe found.
pub struct Probed {
    env: Vec<(String, String)>,
    /// Seconds since the epoch of the last cache update (0 when unknown), as Ansible reports it.
    cache_time: i64,
    /// The cache must be refreshed before the packages are handled.
    cache_stale: bool,
    /// The work on the current cache; an error (a package the stale cache does not know yet)
    /// is only final when the cache will not be refreshed first.
    work: Result<Work, String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Clean,
    UpdateCache,
    Run,
    MarkManual,
}

impl Module for Apt {
    type Params = Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        params::validate(p)
    }

    fn probe(p: &Params, ctx: &Ctx) -> Result<Probed, ModuleError> {
        let env = environment(p)?;
        let (cache_time, mtime) = cache_mtime(&env);
        let wants_update =
            p.update_cache.map(bool::from).unwrap_or(false) || p.cache_valid_time != 0;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        let cache_stale = wants_update && mtime + (p.cache_valid_time as f64) < now;
        let work = match compute(p, &env, ctx.check || ctx.diff) {
            Ok(w) => Ok(w),
            Err(e) if cache_stale && !ctx.check => Err(e.to_string()),
            Err(e)
                if e.to_string()
                    .starts_with("no available installation candidate") =>
            {
                return Err(with_cache(e, false, cache_time))
            }
            Err(e) => return Err(e),
        };
        Ok(Probed {
            env,
            cache_time,
            cache_stale,
            work,
        })
    }

    fn plan(p: &Params, st: &Probed, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let mut plan = Plan::new();
        let w = match &st.work {
            Ok(w) => w,
            Err(_) => {
                // Refresh, then decide from the fresh cache (apply recomputes the work).
                plan.actions = vec![Action::UpdateCache, Action::Run];
                return Ok(plan);
            }
        };
        if p.clean.0 {
            plan.actions.push(Action::Clean);
        }
        if st.cache_stale && w.kind != Kind::Clean {
            plan.actions.push(Action::UpdateCache);
        }
        if w.argv.is_some() {
            plan.actions.push(Action::Run);
        }
        if w.kind == Kind::Install && !w.auto_marked.is_empty() {
            plan.actions.push(Action::MarkManual);
        }
        let r = &mut plan.result;
        let runs = w.argv.is_some();
        match w.kind {
            Kind::Clean => {}
            Kind::CacheOnly | Kind::Install | Kind::BuildDep => {
                // Check mode does not refresh, and says it would have (as Ansible does).
                r.insert("cache_updated".into(), json!(st.cache_stale && ctx.check));
                r.insert("cache_update_time".into(), json!(st.cache_time));
                if w.kind == Kind::CacheOnly {
                    r.insert("changed".into(), json!(st.cache_stale));
                } else {
                    r.insert("changed".into(), json!(runs));
                }
            }
            _ => {
                r.insert("changed".into(), json!(runs || p.clean.0));
            }
        }
        if let Some(sim) = &w.sim {
            // What the check run reports: the simulation's output, as Ansible's `--simulate` run.
            if runs || matches!(w.kind, Kind::Upgrade | Kind::Autoremove | Kind::Autoclean) {
                r.insert("stdout".into(), json!(sim.stdout));
                r.insert("stderr".into(), json!(sim.stderr));
                r.insert("stdout_lines".into(), lines(&sim.stdout));
                r.insert("stderr_lines".into(), lines(&sim.stderr));
                if w.kind == Kind::Upgrade {
                    r.insert("msg".into(), json!(sim.stdout));
                }
            }
            if runs {
                plan.diff.prepared = Some(prepared(&sim.stdout));
            }
        }
        if runs && w.kind != Kind::Upgrade {
            // Ansible's result carries its `diff` too (empty without --diff).
            let d = match &plan.diff.prepared {
                Some(t) if ctx.diff => json!({ "prepared": t }),
                _ => json!({}),
            };
            r.insert("diff".into(), d);
        }
        Ok(plan)
    }

    fn apply(
        p: &Params,
        st: Probed,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        let env = &st.env;
        let mut out = Map::new();
        let mut changed = false;
        if plan.actions.contains(&Action::Clean) {
            let ran = run(&argv(&["apt-get", "clean"]), env, None)?;
            if ran.rc != 0 || !ran.stderr.is_empty() {
                return Err(failure(
                    format!("apt-get clean failed: {}", ran.stderr.trim_end()),
                    &ran,
                ));
            }
            changed = true;
            if st.work.as_ref().is_ok_and(|w| w.kind == Kind::Clean) {
                put_output(&mut out, &ran);
                out.insert("msg".into(), json!(ran.stdout));
            }
        }
        let mut work = match &st.work {
            Ok(w) => w.clone(),
            Err(_) => nothing(Kind::Install),
        };
        if plan.actions.contains(&Action::UpdateCache) {
            update_cache(p, env)?;
            let (after, _) = cache_mtime(env);
            let updated = after != st.cache_time;
            out.insert("cache_updated".into(), json!(updated));
            out.insert("cache_update_time".into(), json!(after));
            if st.work.as_ref().is_ok_and(|w| w.kind == Kind::CacheOnly) {
                changed = updated;
            } else {
                // The fresh cache may change what the transaction is (`latest`, new packages).
                work = compute(p, env, false)?;
            }
            if !matches!(work.kind, Kind::CacheOnly | Kind::Install | Kind::BuildDep) {
                out.remove("cache_updated");
                out.remove("cache_update_time");
            }
        }
        if let Some(a) = &work.argv {
            let ran = run(a, env, None)?;
            if ran.rc != 0 {
                let e = run_failure(p, &work, a, &ran);
                if matches!(work.kind, Kind::Install | Kind::BuildDep) {
                    // Ansible's failed install still says what the cache was.
                    let updated = out.get("cache_updated").and_then(Value::as_bool);
                    let time = out.get("cache_update_time").and_then(Value::as_i64);
                    return Err(with_cache(
                        e,
                        updated.unwrap_or(false),
                        time.unwrap_or(st.cache_time),
                    ));
                }
                return Err(e);
            }
            changed = match work.kind {
                Kind::BuildDep | Kind::Upgrade => !ran.stdout.contains(APT_GET_ZERO),
                Kind::Autoremove => ran
                    .stdout
                    .contains("The following packages will be REMOVED"),
                Kind::Autoclean => ran.stdout.contains("Del "),
                _ => true,
            };
            put_output(&mut out, &ran);
            if work.kind == Kind::Upgrade {
                out.insert("msg".into(), json!(ran.stdout));
            }
        }
        if work.kind == Kind::Install && !work.names.is_empty() {
            mark_manual(&work.names, env)?;
        }
        out.insert("changed".into(), json!(changed));
        Ok(out)
    }
}

fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

fn put_output(out: &mut Map<String, Value>, ran: &Ran) {
    out.insert("stdout".into(), json!(ran.stdout));
    out.insert("stderr".into(), json!(ran.stderr));
    out.insert("stdout_lines".into(), lines(&ran.stdout));
    out.insert("stderr_lines".into(), lines(&ran.stderr));
}

/// The task's `environment`, then Ansible's apt variables over it (they win, as in Ansible).
fn environment(p: &Params) -> Result<Vec<(String, String)>, ModuleError> {
    let mut env = crate::command::env_pairs(&p.env)?;
    env.extend(base_env());
    Ok(env)
}

/// Ansible's `parse_diff`: apt's output from after "Reading state information..." to the
/// "N upgraded, ..." line.
pub fn prepared(output: &str) -> String {
    let l: Vec<&str> = output.lines().collect();
    let start = l
        .iter()
        .position(|x| *x == "Reading state information...")
        .map(|i| i + 1)
        .unwrap_or(0);
    let re = regex::Regex::new(r"^[0-9]+ (packages )?upgraded").expect("static regex");
    let end = l
        .iter()
        .position(|x| re.is_match(x))
        .map(|i| i + 1)
        .unwrap_or(l.len());
    l.get(start..end.max(start)).unwrap_or(&[]).join("\n")
}

/// The last cache update: the success stamp, else the lists directory (the one apt is
/// configured with, so a playbook's `APT_CONFIG` is honoured). Seconds, and the exact mtime.
fn cache_mtime(env: &[(String, String)]) -> (i64, f64) {
    let lists = lists_dir(env);
    let meta = std::fs::metadata(UPDATE_STAMP).or_else(|_| std::fs::metadata(&lists));
    match meta.and_then(|m| m.modified()) {
        Ok(t) => {
            let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
            (d.as_secs() as i64, d.as_secs_f64())
        }
        Err(_) => (0, 0.0),
    }
}

fn lists_dir(env: &[(String, String)]) -> String {
    let default = "/var/lib/apt/lists".to_string();
    let Ok(ran) = run(
        &argv(&["apt-config", "shell", "L", "Dir::State::Lists/d"]),
        env,
        None,
    ) else {
        return default;
    };
    ran.stdout
        .trim()
        .strip_prefix("L='")
        .and_then(|s| s.strip_suffix('\''))
        .map(|s| s.trim_end_matches('/').to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or(default)
}

/// `apt-get update`, retried with Ansible's back-off (doubling, capped at the max delay).
fn update_cache(p: &Params, env: &[(String, String)]) -> Result<(), ModuleError> {
    let mut a = argv(&["apt-get", "-q"]);
    a.push("-o".into());
    a.push(format!("DPkg::Lock::Timeout={}", p.lock_timeout));
    a.push("update".into());
    let mut last = Ran::default();
    let retries = p.update_cache_retries.max(1);
    for retry in 0..retries {
        last = run(&a, env, None)?;
        if last.rc == 0 {
            return Ok(());
        }
        if retry + 1 < retries {
            let jitter = f64::from(
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .subsec_millis(),
            ) / 1000.0;
            let max = p.update_cache_retry_max_delay as f64;
            let delay = (2f64.powi(retry as i32) + jitter).min(max + jitter);
            std::thread::sleep(Duration::from_secs_f64(delay));
        }
    }
    Err(failure(
        format!(
            "Failed to update apt cache after {retries} retries: {}",
            last.stderr.trim_end()
        ),
        &last,
    ))
}

fn mark_manual(names: &[String], env: &[(String, String)]) -> Result<(), ModuleError> {
    let mut a = argv(&["apt-mark", "manual"]);
    a.extend(names.iter().cloned());
    let ran = run(&a, env, None)?;
    if ran.rc != 0 {
        return Err(failure(
            format!("'{}' failed: {}", shown(&a), ran.stderr.trim_end()),
            &ran,
        ));
    }
    Ok(())
}

/// A failure with `cache_updated` and `cache_update_time` added to its values.
fn with_cache(e: ModuleError, updated: bool, time: i64) -> ModuleError {
    match e {
        ModuleError::Failed { msg, mut result } => {
            result.insert("cache_updated".into(), json!(updated));
            result.insert("cache_update_time".into(), json!(time));
            ModuleError::Failed { msg, result }
        }
        other => other,
    }
}

fn run_failure(p: &Params, w: &Work, a: &[String], ran: &Ran) -> ModuleError {
    let mut msg = match w.kind {
        Kind::Remove => {
            let pk = a
                .iter()
                .skip_while(|x| *x != "remove")
                .skip(1)
                .map(|x| format!("'{x}'"))
                .collect::<Vec<_>>()
                .join(" ");
            format!("'apt-get remove {pk}' failed: {}", ran.stderr.trim_end())
        }
        Kind::Autoremove | Kind::Autoclean => format!(
            "'apt-get {}' failed: {}",
            if w.kind == Kind::Autoremove {
                "autoremove"
            } else {
                "autoclean"
            },
            ran.stderr.trim_end()
        ),
        _ => format!("'{}' failed: {}", shown(a), ran.stderr.trim_end()),
    };
    if ran.stderr.contains("Could not get lock")
        || ran.stderr.contains("Unable to acquire the dpkg")
    {
        msg.push_str(&format!(
            " (fixpoint waited lock_timeout={} seconds for the lock and did not break it)",
            p.lock_timeout
        ));
    }
    failure(msg, ran)
}

/// Ansible's `package_split`: `name`, `name=version` or `name>=version`.
pub fn split_spec(spec: &str) -> (&str, Option<&str>, Option<&str>) {
    if let Some(i) = spec.find('=') {
        if i > 0 && spec.as_bytes()[i - 1] == b'>' {
            return (&spec[..i - 1], Some(">="), Some(&spec[i + 1..]));
        }
        return (&spec[..i], Some("="), Some(&spec[i + 1..]));
    }
    (spec, None, None)
}

/// The options every transaction gets: `dpkg_options` and the lock timeout.
fn dpkg_opts(p: &Params) -> Vec<String> {
    let mut v = Vec::new();
    for o in p.dpkg_options.as_deref().unwrap_or(DPKG_OPTIONS).split(',') {
        v.push("-o".into());
        v.push(format!("Dpkg::Options::=--{o}"));
    }
    v.push("-o".into());
    v.push(format!("DPkg::Lock::Timeout={}", p.lock_timeout));
    v
}

fn flag(v: &mut Vec<String>, on: bool, f: &str) {
    if on {
        v.push(f.into());
    }
}

/// Options after the package list, as Ansible appends them.
fn tail_opts(p: &Params, v: &mut Vec<String>) {
    if let Some(r) = &p.default_release {
        v.push("-t".into());
        v.push(r.clone());
    }
    match p.install_recommends.map(bool::from) {
        Some(false) => {
            v.push("-o".into());
            v.push("APT::Install-Recommends=no".into());
        }
        Some(true) => {
            v.push("-o".into());
            v.push("APT::Install-Recommends=yes".into());
        }
        None => {}
    }
    flag(v, p.allow_unauthenticated.0, "--allow-unauthenticated");
    flag(v, p.allow_downgrade.0, "--allow-downgrades");
    flag(
        v,
        p.allow_change_held_packages.0,
        "--allow-change-held-packages",
    );
}

/// Where a simulation flag goes: right before the operation word.
fn simulated(a: &[String], op: &str) -> Vec<String> {
    let mut v = Vec::with_capacity(a.len() + 1);
    let mut done = false;
    for x in a {
        if !done && x == op {
            v.push("--simulate".into());
            done = true;
        }
        v.push(x.clone());
    }
    v
}

fn simulate(a: &[String], op: &str, env: &[(String, String)]) -> Result<Ran, ModuleError> {
    let s = simulated(a, op);
    let ran = run(&s, env, None)?;
    if ran.rc != 0 {
        return Err(failure(
            format!("'{}' failed: {}", shown(&s), ran.stderr.trim_end()),
            &ran,
        ));
    }
    Ok(ran)
}

fn nothing(kind: Kind) -> Work {
    Work {
        kind,
        argv: None,
        names: Vec::new(),
        auto_marked: Vec::new(),
        sim: None,
    }
}

/// The package work of the task on the current cache, in the order Ansible's apt decides it.
/// `want_sim`: check or diff mode, which report what apt would do.
fn compute(p: &Params, env: &[(String, String)], want_sim: bool) -> Result<Work, ModuleError> {
    let has_pkgs = p.package.is_some();
    let upgrade = p.upgrade.as_deref().filter(|u| *u != "no");
    if p.clean.0 && !has_pkgs && upgrade.is_none() && p.deb.is_none() {
        return Ok(nothing(Kind::Clean));
    }
    let wants_update = p.update_cache.map(bool::from).unwrap_or(false) || p.cache_valid_time != 0;
    if wants_update && !has_pkgs && upgrade.is_none() && p.deb.is_none() {
        return Ok(nothing(Kind::CacheOnly));
    }
    if let Some(mode) = upgrade {
        return upgrade_work(p, mode, env);
    }
    if let Some(deb) = &p.deb {
        return deb_work(p, deb, env, want_sim);
    }
    let raw = p.package.clone().unwrap_or_default();
    let all_installed = raw.iter().any(|s| s == "*");
    let specs: Vec<String> = raw
        .iter()
        .filter(|s| *s != "*")
        .map(|s| s.trim().to_string())
        .collect();
    if p.state == "latest" && all_installed {
        return upgrade_work(p, "yes", env);
    }
    for s in &specs {
        if s.matches('=').count() > 1 {
            return Err(ModuleError::failed(format!("invalid package spec: {s}")));
        }
        if is_template(s) {
            return Err(ModuleError::failed(format!("invalid package spec: {s}")));
        }
    }
    if specs.is_empty() {
        if p.autoclean.0 {
            return cleanup_work(p, "autoclean", env);
        }
        if p.autoremove.map(bool::from).unwrap_or(false) {
            return cleanup_work(p, "autoremove", env);
        }
    }
    let specs = expand_wildcards(&specs, p.state == "build-dep", env)?;
    match p.state.as_str() {
        "absent" => remove_work(p, &specs, env, want_sim),
        "build-dep" => build_dep_work(p, &specs, env),
        _ => install_work(p, &specs, env, want_sim),
    }
}

/// Ansible's `expand_pkgspec_from_fnmatches`: a name with `*?[]!` becomes every matching name
/// apt knows (native ones unless the pattern names an architecture); the version is dropped.
fn expand_wildcards(
    specs: &[String],
    build_dep: bool,
    env: &[(String, String)],
) -> Result<Vec<String>, ModuleError> {
    let mut out = Vec::new();
    let mut names: [Option<Vec<String>>; 2] = [None, None];
    for spec in specs {
        let (name, _, _) = split_spec(spec);
        if build_dep || !name.contains(['*', '?', '[', ']', '!']) {
            out.push(spec.clone());
            continue;
        }
        let with_arch = name.contains(':');
        let slot = &mut names[usize::from(with_arch)];
        if slot.is_none() {
            *slot = Some(query::all_names(with_arch, env)?);
        }
        let matches: Vec<String> = slot
            .as_ref()
            .map(|v| v.iter().filter(|n| fnmatch(name, n)).cloned().collect())
            .unwrap_or_default();
        if matches.is_empty() {
            return Err(ModuleError::failed(format!(
                "No package(s) matching '{name}' available"
            )));
        }
        out.extend(matches);
    }
    Ok(out)
}

/// What `package_status` says of one package: installed at all, installed in the asked version,
/// and the version to install (None: none; Some(None): let apt pick, for virtual packages).
struct Status {
    installed: bool,
    version_ok: bool,
    installable: Option<Option<String>>,
}

fn status(
    name: &str,
    cmp: Option<&str>,
    version: Option<&str>,
    dpkg: &HashMap<String, Installed>,
    pol: &HashMap<String, Policy>,
    env: &[(String, String)],
    depth: u8,
) -> Result<Status, ModuleError> {
    let known = pol.get(name).filter(|x| !x.versions.is_empty());
    let Some(policy) = known else {
        // Not a real package: a virtual one is left to apt, unless its only provider is
        // installed already (then that provider's status is the answer, as in Ansible).
        let providers = query::providers(name, env)?;
        if providers.is_empty() {
            return Err(ModuleError::failed(format!(
                "No package matching '{name}' is available"
            )));
        }
        if providers.len() == 1 && depth == 0 {
            let prov = &providers[0];
            let d = query::installed(std::slice::from_ref(prov), env)?;
            let pp = query::policy(std::slice::from_ref(prov), None, env)?;
            if let Ok(s) = status(prov, cmp, version, &d, &pp, env, 1) {
                if s.installed {
                    return Ok(s);
                }
            }
        }
        return Ok(Status {
            installed: false,
            version_ok: false,
            installable: Some(None),
        });
    };
    let best = match (cmp, version) {
        (Some("="), Some(v)) => policy.versions.iter().find(|x| fnmatch(v, x)).cloned(),
        _ => policy.candidate.clone(),
    };
    let inst = dpkg.get(name).filter(|i| i.is_installed());
    let Some(inst) = inst else {
        return Ok(Status {
            installed: false,
            version_ok: false,
            installable: best.map(Some),
        });
    };
    let iv = &inst.version;
    let differs = |b: &String| b != iv;
    let (version_ok, installable) = match (cmp, version) {
        (Some("="), Some(v)) => (fnmatch(v, iv), best.filter(|b| differs(b) && fnmatch(v, b))),
        (Some(">="), Some(v)) => {
            let ok = query::version_cmp(iv, "ge", v)?;
            let inst_best = match best {
                Some(b) if differs(&b) && query::version_cmp(&b, "ge", v)? => Some(b),
                _ => None,
            };
            (ok, inst_best)
        }
        _ => (true, best.filter(differs)),
    };
    Ok(Status {
        installed: true,
        version_ok,
        installable: installable.map(Some),
    })
}

fn install_work(
    p: &Params,
    specs: &[String],
    env: &[(String, String)],
    want_sim: bool,
) -> Result<Work, ModuleError> {
    let names: Vec<String> = specs.iter().map(|s| split_spec(s).0.to_string()).collect();
    let dpkg = query::installed(&names, env)?;
    let pol = query::policy(&names, p.default_release.as_deref(), env)?;
    let latest = p.state == "latest";
    let mut pkgs = Vec::new();
    let mut marked = Vec::new();
    for spec in specs {
        let (name, cmp, version) = split_spec(spec);
        let s = status(name, cmp, version, &dpkg, &pol, env, 0)?;
        if !s.installed && p.only_upgrade.0 {
            continue;
        }
        marked.push(name.to_string());
        if !s.version_ok && s.installable.is_none() {
            return Err(ModuleError::failed(format!(
                "no available installation candidate for {spec}"
            )));
        }
        match &s.installable {
            Some(inst) if !s.installed || latest || !s.version_ok => match (inst, version) {
                (Some(v), _) => pkgs.push(format!("{name}={v}")),
                (None, Some(v)) => pkgs.push(format!("{name}={v}")),
                (None, None) => pkgs.push(name.to_string()),
            },
            Some(_) if s.version_ok && cmp == Some("=") => {
                // Ansible's legacy case: a wildcard version matching both the installed and a
                // newer version is handed to apt as written.
                pkgs.push(spec.clone());
            }
            _ => {}
        }
    }
    let auto = auto_marked(&marked, &dpkg, env)?;
    let mut w = Work {
        kind: Kind::Install,
        argv: None,
        names: marked,
        auto_marked: auto,
        sim: None,
    };
    if pkgs.is_empty() {
        return Ok(w);
    }
    let mut a = argv(&["apt-get", "-y"]);
    a.extend(dpkg_opts(p));
    flag(&mut a, p.only_upgrade.0, "--only-upgrade");
    flag(&mut a, p.state == "fixed", "--fix-broken");
    flag(&mut a, p.force.0, "--force-yes");
    flag(
        &mut a,
        p.autoremove.map(bool::from).unwrap_or(false),
        "--auto-remove",
    );
    flag(&mut a, p.fail_on_autoremove.0, "--no-remove");
    a.push("install".into());
    a.extend(pkgs);
    tail_opts(p, &mut a);
    if want_sim {
        w.sim = Some(simulate(&a, "install", env)?);
    }
    w.argv = Some(a);
    Ok(w)
}

/// Named packages that are installed but marked as automatically installed.
fn auto_marked(
    names: &[String],
    dpkg: &HashMap<String, Installed>,
    env: &[(String, String)],
) -> Result<Vec<String>, ModuleError> {
    let installed: Vec<String> = names
        .iter()
        .filter(|n| dpkg.get(*n).is_some_and(Installed::is_installed))
        .cloned()
        .collect();
    if installed.is_empty() {
        return Ok(Vec::new());
    }
    let mut a = argv(&["apt-mark", "showauto"]);
    a.extend(installed.iter().cloned());
    let ran = run(&a, env, None)?;
    Ok(ran
        .stdout
        .lines()
        .map(|l| l.split(':').next().unwrap_or(l).to_string())
        .filter(|n| installed.contains(n))
        .collect())
}

fn remove_work(
    p: &Params,
    specs: &[String],
    env: &[(String, String)],
    want_sim: bool,
) -> Result<Work, ModuleError> {
    let names: Vec<String> = specs.iter().map(|s| split_spec(s).0.to_string()).collect();
    let dpkg = query::installed(&names, env)?;
    let mut pkgs = Vec::new();
    for spec in specs {
        let (name, cmp, version) = split_spec(spec);
        let Some(rec) = dpkg.get(name) else { continue };
        let version_ok = rec.is_installed()
            && match (cmp, version) {
                (Some("="), Some(v)) => fnmatch(v, &rec.version),
                (Some(">="), Some(v)) => query::version_cmp(&rec.version, "ge", v)?,
                _ => true,
            };
        if version_ok || (rec.has_files() && p.purge.0) {
            pkgs.push(spec.clone());
        }
    }
    let mut w = nothing(Kind::Remove);
    if pkgs.is_empty() {
        return Ok(w);
    }
    let mut a = argv(&["apt-get", "-q", "-y"]);
    a.extend(dpkg_opts(p));
    flag(&mut a, p.purge.0, "--purge");
    flag(&mut a, p.force.0, "--force-yes");
    flag(
        &mut a,
        p.autoremove.map(bool::from).unwrap_or(false),
        "--auto-remove",
    );
    flag(
        &mut a,
        p.allow_change_held_packages.0,
        "--allow-change-held-packages",
    );
    a.push("remove".into());
    a.extend(pkgs);
    if want_sim {
        w.sim = Some(simulate(&a, "remove", env)?);
    }
    w.argv = Some(a);
    Ok(w)
}

/// `upgrade`: always apt-get (fixpoint does not drive aptitude; see DEVIATIONS.md). Whether
/// anything would change is asked of a simulation, so the plan is empty when nothing would.
fn upgrade_work(p: &Params, mode: &str, env: &[(String, String)]) -> Result<Work, ModuleError> {
    let mut a = argv(&["apt-get", "-y"]);
    a.extend(dpkg_opts(p));
    flag(&mut a, p.force.0, "--force-yes");
    flag(&mut a, p.fail_on_autoremove.0, "--no-remove");
    flag(&mut a, p.allow_unauthenticated.0, "--allow-unauthenticated");
    flag(&mut a, p.allow_downgrade.0, "--allow-downgrades");
    let op = if matches!(mode, "dist" | "full") {
        a.push("dist-upgrade".into());
        "dist-upgrade"
    } else {
        a.push("upgrade".into());
        a.push("--with-new-pkgs".into());
        "upgrade"
    };
    flag(
        &mut a,
        p.autoremove.map(bool::from).unwrap_or(false),
        "--auto-remove",
    );
    if let Some(r) = &p.default_release {
        a.push("-t".into());
        a.push(r.clone());
    }
    let sim = simulate(&a, op, env)?;
    let changes = !sim.stdout.contains(APT_GET_ZERO);
    Ok(Work {
        kind: Kind::Upgrade,
        argv: changes.then_some(a),
        names: Vec::new(),
        auto_marked: Vec::new(),
        sim: Some(sim),
    })
}

fn cleanup_work(p: &Params, op: &str, env: &[(String, String)]) -> Result<Work, ModuleError> {
    let mut a = argv(&["apt-get", "-y"]);
    a.extend(dpkg_opts(p));
    flag(&mut a, p.purge.0, "--purge");
    flag(&mut a, p.force.0, "--force-yes");
    a.push(op.into());
    let sim = simulate(&a, op, env)?;
    let (kind, changes) = if op == "autoremove" {
        (
            Kind::Autoremove,
            sim.stdout
                .contains("The following packages will be REMOVED"),
        )
    } else {
        (Kind::Autoclean, sim.stdout.contains("Del "))
    };
    Ok(Work {
        kind,
        argv: changes.then_some(a),
        names: Vec::new(),
        auto_marked: Vec::new(),
        sim: Some(sim),
    })
}

fn build_dep_work(
    p: &Params,
    specs: &[String],
    env: &[(String, String)],
) -> Result<Work, ModuleError> {
    let mut a = argv(&["apt-get", "-y"]);
    a.extend(dpkg_opts(p));
    flag(&mut a, p.only_upgrade.0, "--only-upgrade");
    flag(&mut a, p.force.0, "--force-yes");
    flag(&mut a, p.fail_on_autoremove.0, "--no-remove");
    a.push("build-dep".into());
    a.extend(specs.iter().cloned());
    tail_opts(p, &mut a);
    let sim = simulate(&a, "build-dep", env)?;
    let changes = !sim.stdout.contains(APT_GET_ZERO);
    Ok(Work {
        kind: Kind::BuildDep,
        argv: changes.then_some(a),
        names: Vec::new(),
        auto_marked: Vec::new(),
        sim: Some(sim),
    })
}

/// `deb`: local .deb files (comma-separated), installed unless that exact version is; one
/// apt-get transaction installs them with whatever they depend on.
fn deb_work(
    p: &Params,
    debs: &str,
    env: &[(String, String)],
    want_sim: bool,
) -> Result<Work, ModuleError> {
    let mut files = Vec::new();
    for f in debs.split(',') {
        let path = crate::fs::expand_user(f.trim());
        let path = std::path::absolute(&path).unwrap_or(path);
        let ran = run(
            &[
                "dpkg-deb".into(),
                "-f".into(),
                path.display().to_string(),
                "Package".into(),
                "Version".into(),
            ],
            env,
            None,
        )?;
        if ran.rc != 0 {
            return Err(failure(
                format!(
                    "Unable to install package: {}: {}",
                    path.display(),
                    ran.stderr.trim_end()
                ),
                &ran,
            ));
        }
        let field = |k: &str| {
            ran.stdout
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{k}: ")))
                .unwrap_or_default()
                .to_string()
        };
        let (name, version) = (field("Package"), field("Version"));
        let dpkg = query::installed(std::slice::from_ref(&name), env)?;
        if let Some(i) = dpkg.get(&name).filter(|i| i.is_installed()) {
            if query::version_cmp(&version, "eq", &i.version)? {
                continue;
            }
            if query::version_cmp(&i.version, "gt", &version)? && !p.allow_downgrade.0 && !p.force.0
            {
                return Err(ModuleError::failed("A later version is already installed"));
            }
        }
        files.push(path.display().to_string());
    }
    let mut w = nothing(Kind::Deb);
    if files.is_empty() {
        return Ok(w);
    }
    let mut a = argv(&["apt-get", "-y"]);
    a.extend(dpkg_opts(p));
    flag(&mut a, p.force.0, "--force-yes");
    flag(&mut a, p.fail_on_autoremove.0, "--no-remove");
    a.push("install".into());
    a.extend(files);
    tail_opts(p, &mut a);
    if want_sim {
        w.sim = Some(simulate(&a, "install", env)?);
    }
    w.argv = Some(a);
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_split_as_ansible_does() {
        assert_eq!(split_spec("a"), ("a", None, None));
        assert_eq!(split_spec("a=1.0"), ("a", Some("="), Some("1.0")));
        assert_eq!(split_spec("a>=1.0"), ("a", Some(">="), Some("1.0")));
    }

    #[test]
    fn prepared_is_the_part_between_apt_markers() {
        let out = "Reading package lists...\nBuilding dependency tree...\nReading state information...\nThe following NEW packages will be installed:\n  fptest-a\n0 upgraded, 1 newly installed, 0 to remove and 0 not upgraded.\nInst fptest-a (1.0 local)\n";
        assert_eq!(
            prepared(out),
            "The following NEW packages will be installed:\n  fptest-a\n0 upgraded, 1 newly installed, 0 to remove and 0 not upgraded."
        );
    }

    #[test]
    fn simulation_flag_goes_before_the_operation() {
        let a = argv(&["apt-get", "-y", "install", "x"]);
        assert_eq!(
            simulated(&a, "install"),
            argv(&["apt-get", "-y", "--simulate", "install", "x"])
        );
    }

    fn check(v: Value) -> Result<(), crate::ParamError> {
        crate::registry::check_params("apt", &v)
    }

    #[test]
    fn load_time_checks_follow_ansible() {
        assert!(check(json!({"name": "a"})).is_ok());
        assert!(check(json!({"name": "a", "state": "installed"}))
            .unwrap_err()
            .to_string()
            .contains("value of state must be one of"));
        assert!(check(json!({"state": "present"}))
            .unwrap_err()
            .to_string()
            .contains("one of the following is required"));
        assert!(check(json!({"name": "a", "deb": "/x.deb"}))
            .unwrap_err()
            .to_string()
            .contains("mutually exclusive"));
        assert!(check(json!({"deb": "https://example.org/x.deb"}))
            .unwrap_err()
            .to_string()
            .contains("local .deb files only"));
        assert!(check(json!({"name": "a=1=2"}))
            .unwrap_err()
            .to_string()
            .contains("invalid package spec"));
        assert!(check(json!({"name": "a", "policy_rc_d": 101})).is_err());
        assert!(check(json!({"name": "a", "lock_timeout": "5", "cache_valid_time": 3600})).is_ok());
        assert!(check(json!({"upgrade": true})).is_ok());
        assert!(check(json!({"pkg": "a,b", "allow-downgrades": "yes"})).is_ok());
        assert!(check(json!({"name": "a", "frobnicate": 1})).is_err());
    }
}
