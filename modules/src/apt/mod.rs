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
//! cache first and then recomputes the transaction from the fresh cache. `policy_rc_d` puts
//! `/usr/sbin/policy-rc.d` in place around the transaction (`policy.rs`); a `deb:` URL is
//! downloaded on the host first (`http/client.rs`).

pub mod exec;
pub mod params;
mod policy;
pub mod query;
mod work;

use crate::params::is_template;
use crate::{Ctx, Module, ModuleError, Plan};
use exec::{base_env, failure, lines, run, shown, Ran};
pub use params::Params;
use query::{fnmatch, Installed, Policy};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use work::{compute, nothing};

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
    /// Where downloaded `deb` files wait until the module ends.
    _downloads: Option<tempfile::TempDir>,
    /// `deb` as local paths.
    debs: Option<String>,
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
        // A URL is fetched now, as Ansible's `fetch_file` does before anything else (check
        // mode included); the files live as long as the probe's state.
        let (downloads, debs) = match p.deb.as_deref() {
            Some(d) if d.contains("://") => {
                let dir = tempfile::tempdir().map_err(|e| ModuleError::io("temporary dir", e))?;
                let mut local = Vec::new();
                for u in d.split(',').map(str::trim) {
                    let f = if u.contains("://") {
                        crate::http::fetch_file(u, dir.path(), &env)?
                    } else {
                        u.into()
                    };
                    local.push(f.display().to_string());
                }
                (Some(dir), Some(local.join(",")))
            }
            d => (None, d.map(str::to_string)),
        };
        let work = match compute(p, debs.as_deref(), &env, ctx.check || ctx.diff) {
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
            _downloads: downloads,
            debs,
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
                work = compute(p, st.debs.as_deref(), env, false)?;
            }
            if !matches!(work.kind, Kind::CacheOnly | Kind::Install | Kind::BuildDep) {
                out.remove("cache_updated");
                out.remove("cache_update_time");
            }
        }
        // Held over the transaction and the marking after it, as Ansible's `with PolicyRcD`.
        let _policy = match p.policy_rc_d {
            Some(code) if work.argv.is_some() => Some(policy::PolicyRcD::install(code)?),
            _ => None,
        };
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
    exec::apt_config("Dir::State::Lists/d", env).unwrap_or_else(|| "/var/lib/apt/lists".into())
}

/// `apt-get update`, retried with Ansible's back-off (doubling, capped at the max delay).
fn update_cache(p: &Params, env: &[(String, String)]) -> Result<(), ModuleError> {
    refresh_cache(
        p.update_cache_retries,
        p.update_cache_retry_max_delay,
        p.lock_timeout,
        env,
    )
}

/// `apt-get update` with `retries` tries and Ansible's back-off between them; shared with the
/// repository modules, which refresh the cache after changing the sources.
pub fn refresh_cache(
    retries: i64,
    max_delay: i64,
    lock_timeout: i64,
    env: &[(String, String)],
) -> Result<(), ModuleError> {
    let mut a = argv(&["apt-get", "-q"]);
    a.push("-o".into());
    a.push(format!("DPkg::Lock::Timeout={lock_timeout}"));
    // An index that cannot be fetched fails the refresh, as python-apt's update fails Ansible's
    // modules; plain `apt-get update` only warns and exits 0 (apt older than 2.1.16 ignores the
    // option: its warning is looked for instead).
    a.push("-o".into());
    a.push("APT::Update::Error-Mode=any".into());
    a.push("update".into());
    let mut last = Ran::default();
    let retries = retries.max(1);
    for retry in 0..retries {
        last = run(&a, env, None)?;
        if last.rc == 0 && !last.stderr.contains("Some index files failed to download") {
            return Ok(());
        }
        if retry + 1 < retries {
            let jitter = f64::from(
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .subsec_millis(),
            ) / 1000.0;
            let max = max_delay as f64;
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

#[cfg(test)]
mod tests {
    use super::work::simulated;
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
        // Cleaning alone is a task of its own (Ansible's apt target).
        assert!(check(json!({"clean": true})).is_ok());
        assert!(check(json!({"autoclean": "yes"})).is_ok());
        assert!(check(json!({"name": "a", "deb": "/x.deb"}))
            .unwrap_err()
            .to_string()
            .contains("mutually exclusive"));
        assert!(check(json!({"deb": "https://example.org/x.deb"})).is_ok());
        assert!(check(json!({"name": "a=1=2"}))
            .unwrap_err()
            .to_string()
            .contains("invalid package spec"));
        assert!(check(json!({"name": "a", "policy_rc_d": 101})).is_ok());
        assert!(check(json!({"name": "a", "policy_rc_d": "x"})).is_err());
        assert!(check(json!({"name": "a", "lock_timeout": "5", "cache_valid_time": 3600})).is_ok());
        assert!(check(json!({"upgrade": true})).is_ok());
        assert!(check(json!({"pkg": "a,b", "allow-downgrades": "yes"})).is_ok());
        assert!(check(json!({"name": "a", "frobnicate": 1})).is_err());
    }
}
