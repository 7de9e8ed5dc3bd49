//! Ansible's own integration targets under fixpoint: each target of a module or feature fixpoint
//! implements runs under ansible-core and under fixpoint, on a loopback sshd host with `become`,
//! the way ansible-test runs a role target, and `CONFORMANCE.md` records how far fixpoint gets
//! (README, "Development / Ansible's integration targets").
//!
//! The targets come from the ansible-core sdist, unpacked by `.ci/run`; `FIXPOINT_ANSIBLE_TARGETS`
//! names its `test/integration/targets` directory (nothing of Ansible's is committed). For each
//! target the runner writes the playbook ansible-test would (`hosts: testhost`, `output_dir`,
//! the role), copies the target and the targets its `meta/main.yml` depends on, and, on
//! fixpoint's copy only, guards unguarded commands (`guard.rs`). The task results of both runs
//! are compared in order (name and status): the target passes when they are the same; otherwise
//! the row says how many agreed before the first divergence. A deliberate difference that
//! `tests/conformance/DEVIATIONS.md` accepts for one task counts as agreeing (`accepted.rs`).
//! A row may not get worse than the committed table says, and when it gets better the test
//! fails until the table is updated (`TARGETS_UPDATE=1` rewrites the measured columns). `TARGETS=a,b` runs only those targets.
//! Module targets that are scripts (`runme.sh`) get a row per playbook run (`scripted.rs`).
//! ansible-core's results are cached under `/var/cache/fixpoint-ci/targets-ansible/`, keyed by
//! the content of everything it ran and its version; without the cache it runs again. Targets
//! that would change this machine for good (`ON_BOOTED_ROOT`) run against a throwaway Debian
//! root booted with its own systemd (`tests/support/systemd.rs`) instead of the loopback host.

mod accepted;
#[path = "../conformance/case.rs"]
#[allow(dead_code)]
mod case;
#[path = "../conformance/events.rs"]
#[allow(dead_code)]
mod events;
mod guard;
mod prepare;
mod run;
mod script;
mod scripted;
mod shell;
#[path = "../support/mod.rs"]
mod support;
mod table;
#[path = "../conformance/tools.rs"]
#[allow(dead_code)]
mod tools;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::thread;
use std::time::Instant;

use sha2::{Digest, Sha256};

use prepare::Layout;
use run::{Host, Invocation, Measured};
use table::Row;
use tools::{Tool, Tools, ANSIBLE_VERSION};

/// The role targets of the modules and language features fixpoint implements. Script targets
/// of modules (a `runme.sh` running its own playbooks) are in `scripted::SCRIPT_TARGETS`; the
/// other script targets (`handlers`, `blocks`, `set_fact`, `debug`, ...) are listed in
/// CONFORMANCE.md instead.
const TARGETS: &[&str] = &[
    "apt",
    "apt_key",
    "apt_repository",
    "assert",
    "blockinfile",
    "changed_when",
    "command_shell",
    "copy",
    "cron",
    "deb822_repository",
    "debconf",
    "dnf",
    "dpkg_selections",
    "failed_when",
    "file",
    "filter_core",
    "filter_mathstuff",
    "find",
    "getent",
    "group",
    "hostname",
    "include_import_tasks_nested",
    "include_vars",
    "include_with_templating",
    "known_hosts",
    "lineinfile",
    "lookup_dict",
    "lookup_file",
    "lookup_first_found",
    "lookup_indexed_items",
    "lookup_items",
    "lookup_lines",
    "lookup_list",
    "lookup_nested",
    "lookup_sequence",
    "lookup_subelements",
    "lookup_template",
    "lookup_together",
    "lookup_vars",
    "lookup_varnames",
    "loop-until",
    "loops",
    "package",
    "replace",
    "script",
    "service",
    "service_facts",
    "setup_nobody",
    "setup_remote_tmp_dir",
    "shell",
    "slurp",
    "special_vars",
    "stat",
    "systemd",
    "tempfile",
    "template",
    "templating",
    "test_core",
    "test_files",
    "until",
    "user",
    "var_inheritance",
    "wait_for",
];

/// Targets that under ansible-core would change this machine for good (`destructive` or
/// `needs/root` in their aliases: they install and remove packages, users, groups, services and
/// apt sources): each run, of either tool, gets a Debian root of its own, booted with systemd
/// over a fresh overlay (`tests/support/systemd.rs`), so neither tool sees the other's changes.
/// The older rows above that are also `destructive` (`copy`, `file`, `find`, ...) stay on the
/// loopback host, where they were measured: they touch only paths of their own.
const ON_BOOTED_ROOT: &[&str] = &[
    "apt",
    "apt_key",
    "apt_repository",
    "cron",
    "deb822_repository",
    "debconf",
    "dnf",
    "dpkg_selections",
    "group",
    "hostname",
    "package",
    "service",
    "service_facts",
    "systemd",
    "user",
];

/// The fixpoint column of a script target's run that the runner does not make.
const NOT_COMPARABLE: &str = "not comparable";

/// Bumped when what the runner does changes, so that cached ansible-core results are not reused.
const CACHE_FORMAT: &str = "targets-2";
const CACHE_DIR: &str = "/var/cache/fixpoint-ci/targets-ansible";

/// Targets run one at a time, each tool after the other: targets touch fixed paths on the host
/// and create files relative to the remote user's home, which is cleaned after each run.
const WORKERS: usize = 1;

fn targets_dir() -> PathBuf {
    let hint = "set FIXPOINT_ANSIBLE_TARGETS to the test/integration/targets directory of the \
                ansible-core 2.19.14 sdist: `.ci/run` downloads it (`pip download --no-binary \
                :all: --no-deps ansible-core==2.19.14`) and unpacks it under \
                /var/cache/fixpoint-ci/ansible-sdist/";
    let dir = std::env::var_os("FIXPOINT_ANSIBLE_TARGETS")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("FIXPOINT_ANSIBLE_TARGETS is not set; {hint}"));
    assert!(
        dir.join("lineinfile/tasks/main.yml").is_file(),
        "{} holds no lineinfile target; {hint}",
        dir.display()
    );
    dir
}

/// Whether ansible-test gathers facts for the target.
fn gathers_facts(targets: &Path, target: &str) -> bool {
    let aliases = fs::read_to_string(targets.join(target).join("aliases")).unwrap_or_default();
    !aliases.lines().any(|l| l.trim() == "gather_facts/no")
}

/// A digest of every file under `dir` (relative path and content), in order.
fn tree_digest(dir: &Path, h: &mut Sha256) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .map(|r| r.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    entries.sort();
    for p in entries {
        h.update(p.file_name().unwrap().as_encoded_bytes());
        h.update([0]);
        if let Ok(target) = fs::read_link(&p) {
            h.update(target.as_os_str().as_encoded_bytes());
        } else if p.is_dir() {
            h.update(b"/");
            tree_digest(&p, h);
        } else {
            h.update(fs::read(&p).unwrap_or_default());
        }
        h.update([0]);
    }
}

/// Whether any file under `dir` holds `needle`.
fn tree_mentions(dir: &Path, needle: &[u8]) -> bool {
    fs::read_dir(dir)
        .map(|r| r.flatten().map(|e| e.path()).collect::<Vec<_>>())
        .unwrap_or_default()
        .iter()
        .any(|p| {
            if p.is_symlink() {
                false
            } else if p.is_dir() {
                tree_mentions(p, needle)
            } else {
                fs::read(p).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle))
            }
        })
}

/// What one target (or one playbook run of a script target) gave under both tools.
struct Outcome {
    /// The row's name.
    target: String,
    ansible: Measured,
    fixpoint: Measured,
    from_cache: bool,
    prepared: prepare::Prepared,
    /// Why the run was not made (`scripted.rs`): neither tool ran it.
    not_comparable: Option<String>,
}

/// ansible-core's results for the cache key `h` (everything ansible-core runs, with the run's
/// scratch paths left out), from the cache or by `run`, and whether they came from the cache.
fn cached_ansible(
    target: &str,
    h: Sha256,
    run: impl FnOnce() -> Result<Measured, String>,
) -> Result<(Measured, bool), String> {
    let key = format!("{CACHE_DIR}/{target}-{}.json", hex::encode(h.finalize()));
    let cached = fs::read(&key)
        .ok()
        .and_then(|b| serde_json::from_slice::<Measured>(&b).ok());
    if let Some(m) = cached {
        return Ok((m, true));
    }
    let m = run()?;
    // A cache that cannot be written only costs time next run; a killed run is not kept.
    if m.exit.is_some() && fs::create_dir_all(CACHE_DIR).is_ok() {
        let _ = fs::write(&key, serde_json::to_vec_pretty(&m).unwrap());
    }
    Ok((m, false))
}

/// Adds what the host holds to a cache key, where ansible-core's results depend on it: a booted
/// root's packages (its recipe); on the loopback host (this machine), whether it has `setfacl`
/// (package `acl`), for the targets that become an unprivileged user (ansible-core hands them
/// its files with it, and fails its transfers without it) or run it themselves (`lineinfile`'s
/// and `copy`'s ACL tests).
fn hash_host(h: &mut Sha256, roles: &Path, booted: bool) {
    if booted {
        h.update(b"\0booted root\0");
        h.update(fs::read(format!("{}.stamp", support::systemd::ROOT)).unwrap_or_default());
    } else if (tree_mentions(roles, b"become_user") || tree_mentions(roles, b"setfacl"))
        && ["/usr/bin/setfacl", "/bin/setfacl"]
            .iter()
            .any(|p| Path::new(p).exists())
    {
        h.update(b"\0setfacl\0");
    }
}

/// Runs one target under both tools in `scratch/<target>/`.
fn run_target(
    tools: &Tools,
    targets: &Path,
    target: &str,
    host: &Host,
    scratch: &Path,
) -> Result<Outcome, String> {
    let booted = ON_BOOTED_ROOT.contains(&target);
    let io = |what: &Path, e: std::io::Error| format!("{}: {e}", what.display());
    let mut measured = Vec::new();
    let mut from_cache = false;
    let mut fixpoint_prep = None;
    for tool in [Tool::Ansible, Tool::Fixpoint] {
        let dir = scratch.join(target).join(match tool {
            Tool::Ansible => "ansible",
            Tool::Fixpoint => "fixpoint",
        });
        let (output_dir, remote_tmp) = (dir.join("output"), dir.join("remote_tmp"));
        fs::create_dir_all(&output_dir).map_err(|e| io(&output_dir, e))?;
        let roles = dir.join("roles");
        let prepared = prepare::copy_roles(
            targets,
            target,
            &[],
            prepare::STAND_INS,
            &roles,
            tool == Tool::Fixpoint,
        )?;
        let layout = Layout {
            target,
            gather_facts: gathers_facts(targets, target),
            output_dir: &output_dir,
            remote_tmp_dir: &remote_tmp,
        };
        let site = dir.join("site.yml");
        fs::write(&site, prepare::playbook(&layout)).map_err(|e| io(&site, e))?;
        if tool == Tool::Ansible {
            // The cache key: what ansible-core runs, with this run's scratch paths left out.
            let mut h = Sha256::new();
            h.update(format!("{CACHE_FORMAT}\0{ANSIBLE_VERSION}\0{target}\0"));
            h.update(prepare::playbook(&Layout {
                output_dir: Path::new("OUTPUT"),
                remote_tmp_dir: Path::new("REMOTE_TMP"),
                ..layout
            }));
            tree_digest(&roles, &mut h);
            hash_host(&mut h, &roles, booted);
            // Results of targets that read OUTPUT_DIR from before the runner set it are stale;
            // the others' cached results stay good.
            if tree_mentions(&roles, b"OUTPUT_DIR") {
                h.update(b"\0env OUTPUT_DIR\0");
            }
            let inv = Invocation::site(&dir, targets);
            let (m, cached) =
                cached_ansible(target, h, || run_on(tools, tool, &inv, booted, host))?;
            from_cache = cached;
            measured.push(m);
        } else {
            let inv = Invocation::site(&dir, targets);
            measured.push(run_on(tools, tool, &inv, booted, host)?);
            fixpoint_prep = Some(prepared);
        }
    }
    let fixpoint = measured.pop().unwrap();
    let ansible = measured.pop().unwrap();
    Ok(Outcome {
        target: target.to_string(),
        ansible,
        fixpoint,
        from_cache,
        prepared: fixpoint_prep.unwrap_or_default(),
        not_comparable: None,
    })
}

/// Runs one invocation under `tool`: on the loopback host, or (`booted`) on a root booted
/// for this run alone, logged in as `fpsudo` with passwordless sudo as on the loopback host.
/// Whatever the run installed, removed or started goes with the root when it is dropped.
fn run_on(
    tools: &Tools,
    tool: Tool,
    inv: &Invocation,
    booted: bool,
    loopback: &Host,
) -> Result<Measured, String> {
    if !booted {
        return run::run(tools, tool, inv, loopback);
    }
    let root = support::systemd::SystemdHost::boot();
    let config = root.add_sudo_user("fpsudo");
    let host = Host {
        alias: "sd",
        ssh_config: &config,
        home: None,
    };
    run::run(tools, tool, inv, &host)
}

/// The measured row of one outcome (the reason column is left empty), and the lines of the
/// acceptances (DEVIATIONS.md) it used.
fn measure(o: &Outcome, accepted: &[accepted::Accepted]) -> (Row, BTreeSet<usize>) {
    if let Some(why) = &o.not_comparable {
        let row = Row {
            target: o.target.clone(),
            ansible: "not run".into(),
            fixpoint: NOT_COMPARABLE.into(),
            divergence: why.clone(),
            reason: String::new(),
        };
        return (row, BTreeSet::new());
    }
    let (a, f) = (
        &run::without_run_dirs(&o.ansible.results),
        &run::without_run_dirs(&o.fixpoint.results),
    );
    let agreement = accepted::agreement(&o.target, accepted, &pairs(a), &pairs(f));
    let agree = agreement.agree;
    let with_accepted = match agreement.used.len() {
        0 => String::new(),
        1 => " (1 deliberate difference accepted)".to_string(),
        n => format!(" ({n} deliberate differences accepted)"),
    };
    let ansible = match o.ansible.exit {
        Some(0) => a.len().to_string(),
        other => format!(
            "{} (exit {})",
            a.len(),
            other.map_or("killed".into(), |c| c.to_string())
        ),
    };
    if agree == a.len() && f.len() == a.len() && o.ansible.exit == o.fixpoint.exit {
        let row = Row {
            target: o.target.clone(),
            ansible,
            fixpoint: format!("passes{with_accepted}"),
            divergence: String::new(),
            reason: String::new(),
        };
        return (row, agreement.used);
    }
    let divergence = match (a.get(agree), f.get(agree)) {
        (Some(x), Some(y)) if x.name == y.name => format!(
            "`{}`: ansible-core {}, fixpoint {}{}",
            x.name,
            x.status,
            y.status,
            failure_of(&o.fixpoint, agree)
        ),
        (Some(x), Some(y)) => format!(
            "ansible-core ran `{}` ({}), fixpoint `{}` ({})",
            x.name, x.status, y.name, y.status
        ),
        (Some(x), None) => format!(
            "fixpoint stops before `{}` (exit {}): {}",
            x.name,
            o.fixpoint.exit.map_or("killed".into(), |c| c.to_string()),
            short(
                o.fixpoint
                    .failures
                    .last()
                    .map_or(&o.fixpoint.stderr_tail, |f| f)
            )
        ),
        (None, Some(y)) => format!("fixpoint goes on with `{}` ({})", y.name, y.status),
        (None, None) => format!(
            "same results, exit {:?} vs ansible-core {:?}",
            o.fixpoint.exit, o.ansible.exit
        ),
    };
    // A table cell keeps no trailing blank (a stop without a message ends in `: `).
    let divergence = divergence.trim_end().to_string();
    let row = Row {
        target: o.target.clone(),
        ansible,
        fixpoint: format!("{agree} of {}{with_accepted}", a.len()),
        divergence,
        reason: String::new(),
    };
    (row, agreement.used)
}

/// Task results as `(name, status)`.
fn pairs(r: &[run::Result1]) -> Vec<(&str, &str)> {
    r.iter()
        .map(|x| (x.name.as_str(), x.status.as_str()))
        .collect()
}

/// fixpoint's failure message for its result at `at`, if that failed: the failure of the task
/// with that very name (a name that merely contains it, such as `assert` in `verify that an
/// assertion...`, is another task) and as many earlier failures of that name as results before it.
fn failure_of(m: &Measured, at: usize) -> String {
    let Some(this) = m.results.get(at) else {
        return String::new();
    };
    if !this.status.starts_with("failed") {
        return String::new();
    }
    let earlier = m.results[..at]
        .iter()
        .filter(|r| r.name == this.name && r.status.starts_with("failed"))
        .count();
    let prefix = format!("{}: ", this.name);
    m.failures
        .iter()
        .filter(|f| {
            f.split_once(" / ")
                .is_some_and(|(_, rest)| rest.starts_with(&prefix))
        })
        .nth(earlier)
        .map(|f| format!(": {}", short(f)))
        .unwrap_or_default()
}

fn short(s: &str) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() > 160 {
        format!("{}…", one.chars().take(160).collect::<String>())
    } else {
        one
    }
}

/// What is wrong with the committed row `c` of `t` given the measured `row` (`total`: the
/// results ansible-core reported), if anything.
fn compare(t: &str, c: Option<&Row>, row: &Row, total: usize) -> Option<String> {
    let Some(c) = c else {
        return Some(format!(
            "{t}: no row in CONFORMANCE.md; add it (TARGETS_UPDATE=1 does), with its reason:\n{}",
            row.render()
        ));
    };
    if row.fixpoint == NOT_COMPARABLE || c.fixpoint == NOT_COMPARABLE {
        return (c.ansible != row.ansible
            || c.fixpoint != row.fixpoint
            || c.divergence != row.divergence)
            .then(|| {
                format!(
                    "{t}: measured `{} | {} | {}` where CONFORMANCE.md says `{} | {} | {}`: \
                     update the row (TARGETS_UPDATE=1) and its reason",
                    row.ansible, row.fixpoint, row.divergence, c.ansible, c.fixpoint, c.divergence
                )
            });
    }
    let (was, now) = (c.reached(total), row.reached(total).unwrap());
    if c.ansible != row.ansible {
        Some(format!(
            "{t}: ansible-core gave {} task results where CONFORMANCE.md says {}: \
             update the row (TARGETS_UPDATE=1)",
            row.ansible, c.ansible
        ))
    } else if was.is_none_or(|w| now < w) {
        Some(format!(
            "{t}: fixpoint got WORSE: it reached {} where CONFORMANCE.md says {}; \
             first divergence: {}",
            row.fixpoint, c.fixpoint, row.divergence
        ))
    } else if now > was.unwrap() || c.fixpoint != row.fixpoint {
        Some(format!(
            "{t}: fixpoint got better ({} where CONFORMANCE.md says {}): update the \
             table (TARGETS_UPDATE=1) and its reason",
            row.fixpoint, c.fixpoint
        ))
    } else if c.divergence != row.divergence {
        Some(format!(
            "{t}: the first divergence is now `{}` where CONFORMANCE.md says `{}`: \
             update the row (TARGETS_UPDATE=1) and its reason",
            row.divergence, c.divergence
        ))
    } else {
        None
    }
}

#[test]
fn ansible_integration_targets_under_fixpoint() {
    let started = Instant::now();
    let tools = tools::locate().unwrap_or_else(|e| panic!("{e}"));
    let targets = targets_dir();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc_path = manifest.join("CONFORMANCE.md");
    let doc = fs::read_to_string(&doc_path).unwrap_or_else(|e| panic!("CONFORMANCE.md: {e}"));
    let (committed, _, _) = table::parse(&doc).unwrap_or_else(|e| panic!("{e}"));
    // Every row the runner measures, in the table's order: a role target's, then each playbook
    // run of a script target (`scripted.rs`), by target.
    let mut all_rows: Vec<(&str, String)> = TARGETS.iter().map(|t| (*t, t.to_string())).collect();
    for t in scripted::SCRIPT_TARGETS {
        let runs = scripted::runs(&targets, t).unwrap_or_else(|e| panic!("{e}"));
        let at = all_rows
            .iter()
            .position(|(r, _)| r > t)
            .unwrap_or(all_rows.len());
        all_rows.splice(at..at, runs.into_iter().map(|(label, _)| (*t, label)));
    }
    let known: BTreeSet<&str> = all_rows.iter().map(|(_, l)| l.as_str()).collect();
    let devs_path = manifest.join("tests/conformance/DEVIATIONS.md");
    let devs = fs::read_to_string(&devs_path).unwrap_or_else(|e| panic!("DEVIATIONS.md: {e}"));
    let accepted = accepted::parse(&devs).unwrap_or_else(|e| panic!("{e}"));
    for a in &accepted {
        assert!(
            known.contains(a.target.as_str()),
            "DEVIATIONS.md:{}: no target is named `{}`",
            a.line,
            a.target
        );
    }
    for name in committed.keys() {
        assert!(
            known.contains(name.as_str()),
            "CONFORMANCE.md has a row for `{name}`, which the runner does not run (TARGETS in \
             tests/targets/main.rs, or a run of a script target's runme.sh)"
        );
    }
    let mut selected: Vec<&str> = TARGETS.to_vec();
    selected.extend(scripted::SCRIPT_TARGETS);
    if let Ok(only) = std::env::var("TARGETS") {
        let wanted: BTreeSet<&str> = only.split(',').map(str::trim).collect();
        selected.retain(|t| wanted.contains(t));
        assert!(!selected.is_empty(), "TARGETS={only} names no target");
    }

    let ssh = support::SshHost::start("fpsudo");
    let scratch = tempfile::Builder::new()
        .prefix("fp-targets-")
        .tempdir()
        .expect("scratch dir");
    // TARGETS_KEEP=1 keeps every run's directory (playbook, roles, stdout, stderr) to look into.
    let (scratch_path, _scratch) = if std::env::var_os("TARGETS_KEEP").is_some() {
        let kept = scratch.keep();
        println!("targets: runs kept in {}", kept.display());
        (kept, None)
    } else {
        (scratch.path().to_path_buf(), Some(scratch))
    };
    // The remote user (before `become`) must be able to reach the scratch paths.
    fs::set_permissions(&scratch_path, fs::Permissions::from_mode(0o755)).unwrap();
    let config = scratch_path.join("ssh_config");
    support::write_ssh_config(&[&ssh], &config);
    let home = nix::unistd::User::from_name("fpsudo")
        .ok()
        .flatten()
        .map(|u| u.dir)
        .expect("the home of fpsudo");
    let host = Host {
        alias: ssh.alias(),
        ssh_config: &config,
        home: Some(home),
    };

    let queue = Mutex::new(selected.iter().copied().collect::<VecDeque<&str>>());
    let outcomes = Mutex::new(Vec::new());
    thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| loop {
                let Some(t) = queue.lock().unwrap().pop_front() else {
                    break;
                };
                let r = if scripted::SCRIPT_TARGETS.contains(&t) {
                    scripted::run_script_target(&tools, &targets, t, &host, &scratch_path)
                } else {
                    run_target(&tools, &targets, t, &host, &scratch_path).map(|o| vec![o])
                };
                outcomes.lock().unwrap().push((t, r));
            });
        }
    });
    let mut outcomes = outcomes.into_inner().unwrap();
    outcomes.sort_by(|a, b| a.0.cmp(b.0));

    let mut problems = Vec::new();
    let mut measured: BTreeMap<String, Row> = BTreeMap::new();
    let runs = outcomes.into_iter().flat_map(|(t, r)| match r {
        Ok(os) => os.into_iter().map(Ok).collect::<Vec<_>>(),
        Err(e) => vec![Err(format!("{t}: {e}"))],
    });
    for r in runs {
        let o = match r {
            Ok(o) => o,
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        let t = o.target.as_str();
        let (mut row, used) = measure(&o, &accepted);
        for a in accepted
            .iter()
            .filter(|a| a.target == t && !used.contains(&a.line))
        {
            problems.push(format!(
                "{t}: DEVIATIONS.md:{} accepts `{}` being {} under ansible-core and {} under \
                 fixpoint, but the comparison met no such difference: remove the line, or say \
                 why the target no longer reaches it",
                a.line, a.task, a.ansible, a.fixpoint
            ));
        }
        if let Some(c) = committed.get(t) {
            row = row.as_committed(c).unwrap_or(row);
        }
        println!(
            "{t}: ansible-core {} results{} in {:.1}s, fixpoint {} in {:.1}s ({} guards added{}){}",
            o.ansible.results.len(),
            if o.from_cache { " (cached)" } else { "" },
            o.ansible.seconds,
            row.fixpoint,
            o.fixpoint.seconds,
            o.prepared.guards,
            if o.prepared.unguardable.is_empty() {
                String::new()
            } else {
                format!("; not guardable: {}", o.prepared.unguardable.join(", "))
            },
            if row.divergence.is_empty() {
                String::new()
            } else {
                format!("\n    first divergence: {}", row.divergence)
            }
        );
        problems.extend(compare(t, committed.get(t), &row, o.ansible.results.len()));
        measured.insert(t.to_string(), row);
    }

    if std::env::var_os("TARGETS_UPDATE").is_some() {
        let rows: Vec<Row> = all_rows
            .iter()
            .filter_map(|(_, t)| {
                let mut row = measured
                    .get(t)
                    .cloned()
                    .or_else(|| committed.get(t).cloned())?;
                row.reason = committed
                    .get(t)
                    .map(|c| c.reason.clone())
                    .unwrap_or_default();
                Some(row)
            })
            .collect();
        let text = table::rewrite(&doc, &rows).unwrap_or_else(|e| panic!("{e}"));
        fs::write(&doc_path, text).expect("write CONFORMANCE.md");
        println!("CONFORMANCE.md updated: check the reason of each row that changed");
        problems.retain(|p| !p.contains("TARGETS_UPDATE"));
    }
    println!(
        "targets: {} run in {:.0}s, {} pass under fixpoint",
        measured.len(),
        started.elapsed().as_secs_f64(),
        measured
            .values()
            .filter(|r| r.fixpoint.starts_with("passes"))
            .count()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn a_divergence_names_the_failure_of_that_task() {
    let r = |name: &str, status: &str| run::Result1 {
        name: name.into(),
        status: status.into(),
    };
    let m = Measured {
        results: vec![
            r("verify the assertion", "failed (ignored)"),
            r("assert", "failed"),
            r("assert", "failed"),
            r("assert", "ok"),
        ],
        exit: Some(1),
        failures: vec![
            "h / verify the assertion: one".into(),
            "h / assert: two".into(),
            "h / assert: three".into(),
        ],
        stderr_tail: String::new(),
        seconds: 0.0,
    };
    assert_eq!(failure_of(&m, 1), ": h / assert: two");
    assert_eq!(failure_of(&m, 2), ": h / assert: three");
    assert_eq!(failure_of(&m, 3), "");
}
