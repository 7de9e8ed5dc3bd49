//! Script targets: a target whose entry is a `runme.sh` running its own playbooks (`raw`,
//! `unarchive`, `fetch`, `package_facts`, and language targets: `blocks`, `handlers`...). Each `ansible-playbook` command the script
//! runs (`script.rs` reads them) is one row of the table: the target's name for the first, the
//! target with the playbook for the others (`unarchive (test_relative_tmp_dir.yml)`). Each run is
//! laid out as ansible-test would: the target and the targets it needs copied side by side
//! (playbooks name roles as `../unarchive`), the playbook run from the target's directory with
//! the script's `-e` values, `ANSIBLE_ROLES_PATH`, and `-b` always (ansible-test logs in as root;
//! the runner logs in as fpsudo, as for role targets). A run the runner cannot repeat (a setting
//! fixpoint does not read) is a row that says so, not run. A run without an inventory, or with one
//! of its own (`-i host1,host2`, `-i inventory.handlers`), runs as ansible-test runs it: on this
//! machine as root, over the local connection or against the names it gives (the loopback host
//! is this machine too), each host's results compared.

use std::fs;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::run::{self, Host, Invocation, Measured};
use crate::script::{self, Inventory, PlaybookRun};
use crate::tools::{Tool, Tools, ANSIBLE_VERSION};
use crate::{cached_ansible, hash_host, prepare, run_on, tree_digest, Outcome, CACHE_FORMAT};

/// The targets that are scripts: of modules fixpoint implements, and of the language whose
/// runs the runner can repeat (a run it cannot is a row saying why).
pub const SCRIPT_TARGETS: &[&str] = &[
    "any_errors_fatal",
    "blocks",
    "check_mode",
    "debug",
    "error_from_connection",
    "fetch",
    "group_by",
    "handler_race",
    "handlers",
    "hosts_field",
    "ignore_errors",
    "ignore_unreachable",
    "include_import",
    "lookup_fileglob",
    "loop_control",
    "meta_tasks",
    "order",
    "package_facts",
    "playbook",
    "raw",
    "roles",
    "roles_arg_spec",
    "set_fact",
    "strategy_linear",
    "tags",
    "tasks",
    "templating_settings",
    "throttle",
    "unarchive",
    "var_blending",
    "var_templating",
];

/// Of those, the ones that change the machine (`package_facts` writes a mock `/usr/bin/apk`,
/// `unarchive` installs archivers and creates a user): on a booted root of their own.
const SCRIPT_ON_BOOTED_ROOT: &[&str] = &["package_facts", "unarchive"];

/// The `ansible-playbook` runs of a script target, each with its row's name.
pub fn runs(targets: &Path, target: &str) -> Result<Vec<(String, PlaybookRun)>, String> {
    let path = targets.join(target).join("runme.sh");
    let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let runs = script::parse(&text);
    if runs.is_empty() {
        return Err(format!("{}: no ansible-playbook command", path.display()));
    }
    // A run repeated with other settings (`privacy.yml` under each `ANSIBLE_PRIVATE_ROLE_VARS`)
    // would share its row's name: the later ones are numbered.
    let mut out: Vec<(String, PlaybookRun)> = Vec::new();
    for (i, r) in runs.into_iter().enumerate() {
        let label = r.label(target, i == 0);
        let r = r.run;
        let same = out
            .iter()
            .filter(|(l, _)| *l == label || l.starts_with(&format!("{label} #")))
            .count();
        let label = match same {
            0 => label,
            n => format!("{label} #{}", n + 1),
        };
        out.push((label, r));
    }
    Ok(out)
}

/// The targets a target's `aliases` say it needs (`needs/target/<name>`): ansible-test copies
/// them beside it.
fn needs(targets: &Path, target: &str) -> Vec<String> {
    fs::read_to_string(targets.join(target).join("aliases"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.strip_prefix("needs/target/"))
        .map(str::to_string)
        .collect()
}

/// Each colon-separated directory of a script's `ANSIBLE_ROLES_PATH`, relative to `cwd`.
fn resolved_path(value: &str, cwd: &Path) -> String {
    value
        .split(':')
        .filter(|p| !p.is_empty())
        .map(|p| cwd.join(p).display().to_string())
        .collect::<Vec<_>>()
        .join(":")
}

/// Runs every comparable playbook of a script target under both tools, in `scratch/<target>/`.
pub fn run_script_target(
    tools: &Tools,
    targets: &Path,
    target: &str,
    host: &Host,
    scratch: &Path,
) -> Result<Vec<Outcome>, String> {
    let booted = SCRIPT_ON_BOOTED_ROOT.contains(&target);
    let needs = needs(targets, target);
    let mut outcomes = Vec::new();
    for (i, (label, mut pb)) in runs(targets, target)?.into_iter().enumerate() {
        if booted && !pb.on_testhost_only() && pb.not_comparable.is_none() {
            pb.not_comparable = Some(
                "not comparable: it runs on this machine (no inventory, or one of its own), \
                 and the target changes the machine it runs on"
                    .into(),
            );
        }
        if let Some(why) = &pb.not_comparable {
            outcomes.push(Outcome {
                target: label,
                ansible: Measured::default(),
                fixpoint: Measured::default(),
                from_cache: false,
                prepared: prepare::Prepared::default(),
                not_comparable: Some(why.clone()),
            });
            continue;
        }
        let mut measured = Vec::new();
        let mut from_cache = false;
        let mut fixpoint_prep = None;
        for tool in [Tool::Ansible, Tool::Fixpoint] {
            let dir = scratch.join(target).join(format!(
                "{i}-{}",
                match tool {
                    Tool::Ansible => "ansible",
                    Tool::Fixpoint => "fixpoint",
                }
            ));
            let output_dir = dir.join("output");
            fs::create_dir_all(&output_dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let roles = dir.join("roles");
            let fixpoint = tool == Tool::Fixpoint;
            let mut prepared = prepare::copy_roles(
                targets,
                target,
                &needs,
                prepare::SCRIPT_STAND_INS,
                &roles,
                fixpoint,
            )?;
            let cwd: PathBuf = roles.join(target);
            if fixpoint {
                prepared.guard_file(&cwd.join(&pb.playbook), &roles)?;
                prepared.guard_lists_under(&cwd, &roles)?;
            }
            // On the loopback host the runner logs in as fpsudo where ansible-test is root:
            // `-b` always. On this machine's own hosts it runs as root already, as ansible-test.
            let mut args = Vec::new();
            if pb.become_ || pb.inventories.contains(&Inventory::Shared) {
                args.push("-b".to_string());
            }
            let output = output_dir.display().to_string();
            for e in &pb.extra_vars {
                args.push("-e".into());
                args.push(
                    e.replace("${OUTPUT_DIR}", &output)
                        .replace("$OUTPUT_DIR", &output),
                );
            }
            args.extend(pb.options.iter().cloned());
            let mut roles_path = run::roles_path(&dir, targets);
            let mut env = Vec::new();
            for (k, v) in &pb.env {
                if k == "ANSIBLE_ROLES_PATH" {
                    roles_path = format!("{}:{roles_path}", resolved_path(v, &cwd));
                } else {
                    env.push((k.clone(), v.clone()));
                }
            }
            let inv = Invocation {
                dir: &dir,
                cwd: &cwd,
                playbook: &pb.playbook,
                args: &args,
                roles_path,
                host_vars: format!(" remote_tmp_dir={}", dir.join("remote_tmp").display()),
                inventories: &pb.inventories,
                env: &env,
            };
            if tool == Tool::Ansible {
                // The cache key: the run as the script writes it, and what it runs.
                let mut h = Sha256::new();
                h.update(format!(
                    "{CACHE_FORMAT}\0{ANSIBLE_VERSION}\0script\0{label}\0{pb:?}\0"
                ));
                tree_digest(&roles, &mut h);
                hash_host(&mut h, &roles, booted);
                let (m, cached) =
                    cached_ansible(target, h, || run_on(tools, tool, &inv, booted, host))?;
                from_cache = cached;
                measured.push(m);
            } else {
                measured.push(run_on(tools, tool, &inv, booted, host)?);
                fixpoint_prep = Some(prepared);
            }
        }
        let fixpoint = measured.pop().unwrap();
        let ansible = measured.pop().unwrap();
        outcomes.push(Outcome {
            target: label,
            ansible,
            fixpoint,
            from_cache,
            prepared: fixpoint_prep.unwrap_or_default(),
            not_comparable: None,
        });
    }
    Ok(outcomes)
}
