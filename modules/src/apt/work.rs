//! The transaction an `apt` task needs, worked out from dpkg's database, apt's candidates and
//! apt-get's simulation: one `Work` per task (what to run, what it changes, the simulation's
//! text for check mode and `--diff`).

use super::*;

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
pub(super) fn simulated(a: &[String], op: &str) -> Vec<String> {
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

pub(super) fn nothing(kind: Kind) -> Work {
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
/// `debs`: the `deb` files as local paths (a URL already downloaded, `mod.rs`).
pub(super) fn compute(
    p: &Params,
    debs: Option<&str>,
    env: &[(String, String)],
    want_sim: bool,
) -> Result<Work, ModuleError> {
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
    if let Some(deb) = debs {
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
