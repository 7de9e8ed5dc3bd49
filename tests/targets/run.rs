//! Runs one prepared target under one tool against the loopback sshd host (or, for a script's
//! run with no inventory or one of its own, against the hosts it names, on this machine), and
//! reads the task results it reported (through the conformance harness's event reader).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::events;
use crate::script::Inventory;
use crate::tools::{clean_command, run_limited, Tool, Tools};

/// How long a run may take before it is taken as stuck and killed. ansible-core needs about a
/// second per task over ssh (`copy` has some 500 results); fixpoint is much faster.
fn run_limit(tool: Tool) -> Duration {
    match tool {
        Tool::Ansible => Duration::from_secs(1800),
        Tool::Fixpoint => Duration::from_secs(300),
    }
}

/// The host both tools reach over ssh.
pub struct Host<'a> {
    /// The `Host` alias in `ssh_config`.
    pub alias: &'a str,
    pub ssh_config: &'a Path,
    /// The remote user's home, when it is this machine's: the working directory of every
    /// module, where targets create files with relative names (`dest: file.txt`), cleaned
    /// after each run. `None` for a booted root, which is thrown away after each run.
    pub home: Option<PathBuf>,
}

/// One `ansible-playbook` command: the playbook, where it runs and with what.
pub struct Invocation<'a> {
    /// The run's own directory: the inventory, `output/`, `private/` (its stdout and stderr).
    pub dir: &'a Path,
    /// The working directory; the playbook's path is relative to it.
    pub cwd: &'a Path,
    pub playbook: &'a str,
    /// Further arguments, the same for both tools (`-b`, `-e ...`).
    pub args: &'a [String],
    /// `ANSIBLE_ROLES_PATH` for ansible-core, `--roles-path` for fixpoint.
    pub roles_path: String,
    /// Host variables added to `testhost`'s inventory line (`remote_tmp_dir=...`).
    pub host_vars: String,
    /// Where the hosts come from: the loopback `testhost` (a role target, `[Shared]`), or
    /// also this machine (a script's run without an inventory, or with its own), as
    /// ansible-test runs it.
    pub inventories: &'a [Inventory],
    /// `ANSIBLE_*` settings both tools read (a script's `ANSIBLE_GATHERING`...), besides
    /// `roles_path`.
    pub env: &'a [(String, String)],
}

impl<'a> Invocation<'a> {
    /// A role target's run: the generated `site.yml` in `dir`, beside `roles/`.
    pub fn site(dir: &'a Path, targets: &Path) -> Self {
        Invocation {
            dir,
            cwd: dir,
            playbook: "site.yml",
            args: &[],
            roles_path: roles_path(dir, targets),
            host_vars: String::new(),
            inventories: &[Inventory::Shared],
            env: &[],
        }
    }
}

/// One task result as both tools report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Result1 {
    pub name: String,
    pub status: String,
}

/// What one tool did with one target.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Measured {
    pub results: Vec<Result1>,
    /// In fixpoint's terms (0 ok, 1 a host failed, 2 refused before running).
    pub exit: Option<i32>,
    /// The failure messages, in order (`host / task: msg`).
    pub failures: Vec<String>,
    /// The last lines of stderr (fixpoint's refusal, or a crash).
    pub stderr_tail: String,
    pub seconds: f64,
}

/// Runs one invocation under `tool`.
pub fn run(tools: &Tools, tool: Tool, inv: &Invocation, host: &Host) -> Result<Measured, String> {
    let dir = inv.dir;
    let inventory = dir.join("inventory");
    let private = dir.join("private");
    fs::create_dir_all(&private).map_err(|e| format!("{}: {e}", private.display()))?;
    let mut cmd = match tool {
        Tool::Ansible => {
            let line = format!(
                "testhost ansible_host={} ansible_python_interpreter=/usr/bin/python3 \
                 ansible_ssh_common_args='-F {}'{}\n",
                host.alias,
                host.ssh_config.display(),
                inv.host_vars
            );
            let cfg = private.join("ansible.cfg");
            fs::write(&cfg, "").map_err(|e| e.to_string())?;
            let mut c = clean_command(&tools.ansible_bin.join("ansible-playbook"));
            inventory_args(&mut c, inv.inventories, &inventory, &line)?;
            c.arg(inv.playbook)
                .args(inv.args)
                .env("ANSIBLE_CONFIG", &cfg)
                .env("ANSIBLE_HOME", private.join("home"))
                .env("ANSIBLE_LOCAL_TEMP", private.join("tmp"))
                .env("ANSIBLE_ROLES_PATH", &inv.roles_path)
                .env("ANSIBLE_CALLBACK_PLUGINS", &tools.callback_dir)
                .env("ANSIBLE_STDOUT_CALLBACK", "fixpoint_events")
                .env("ANSIBLE_NOCOLOR", "1")
                .env("ANSIBLE_HOST_KEY_CHECKING", "1")
                // One ssh round trip per task instead of three: the same modules, sooner.
                .env("ANSIBLE_PIPELINING", "1")
                .env("ANSIBLE_DEPRECATION_WARNINGS", "0");
            c
        }
        Tool::Fixpoint => {
            let line = format!(
                "testhost ansible_host={} ansible_python_interpreter=/usr/bin/python3 \
                 fixpoint_state_dir={}{}\n",
                host.alias,
                private.join("state").display(),
                inv.host_vars
            );
            let mut c = clean_command(&tools.fixpoint);
            c.args(["apply", "--format", "json"]);
            inventory_args(&mut c, inv.inventories, &inventory, &line)?;
            // On this machine's own hosts the state directory is the user's: this run's instead.
            c.env("XDG_STATE_HOME", private.join("state"))
                .arg("--ssh-config")
                .arg(host.ssh_config)
                .arg("--roles-path")
                .arg(&inv.roles_path)
                .arg(inv.playbook)
                .args(inv.args)
                .env("NO_COLOR", "1")
                // Modules fixpoint lacks run as the code of the same ansible-core installation,
                // as a user with Ansible installed would have them.
                .env("FIXPOINT_ANSIBLE_PYTHON", tools.ansible_bin.join("python"));
            c
        }
    };
    cmd.current_dir(inv.cwd);
    cmd.envs(inv.env.iter().map(|(k, v)| (k, v)));
    // ansible-test exports the output directory as OUTPUT_DIR too, and targets read it with
    // `lookup('env', 'OUTPUT_DIR')`; unset, they write beside `/` and find the last run's files.
    cmd.env("OUTPUT_DIR", dir.join("output"));
    let before = host.home.as_deref().map(entries).unwrap_or_default();
    let accounts_before = host.home.is_some().then(accounts);
    let start = Instant::now();
    let limit = run_limit(tool);
    let (out, killed) = run_limited(&mut cmd, tool, limit)?;
    let seconds = start.elapsed().as_secs_f64();
    // What the run left in the home directory would be found by the next run (the other tool,
    // or this target again): removed, so that each run starts from the same home.
    let home = host.home.as_deref();
    let after = home.map(entries).unwrap_or_default();
    for name in after.difference(&before) {
        let p = home.unwrap().join(name);
        let _ = if p.is_dir() && !p.is_symlink() {
            fs::remove_dir_all(&p)
        } else {
            fs::remove_file(&p)
        };
    }
    // So are the users and groups it made on this machine: a target that stops before its
    // clean-up handlers (`file` makes `test1`, `test2`...) would otherwise make the next run's
    // `user`/`group` tasks find them.
    if let Some(was) = accounts_before {
        let (users_was, groups_was) = was;
        let (users, groups) = accounts();
        for u in users.difference(&users_was) {
            let _ = std::process::Command::new("userdel")
                .args(["-r", "-f", u])
                .output();
        }
        for g in groups.difference(&groups_was) {
            let _ = std::process::Command::new("groupdel").arg(g).output();
        }
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if killed {
        stderr.push_str(&format!("\n[targets] killed after {}s\n", limit.as_secs()));
    }
    fs::write(private.join("stdout"), stdout.as_bytes()).map_err(|e| e.to_string())?;
    fs::write(private.join("stderr"), &stderr).map_err(|e| e.to_string())?;
    let mut o = events::parse(tool, &stdout)?;
    events::strip_role_prefix(&mut o);
    let exit = match tool {
        Tool::Ansible => events::ansible_exit(out.status.code(), o.recap.is_some()),
        Tool::Fixpoint => out.status.code(),
    };
    // On the loopback host: `testhost`'s results (a script target's playbook may run on the
    // implicit `localhost` instead, `fetch`). On a script's own hosts: every host's, host by
    // host, each name prefixed with its host when there are several.
    let hosts: Vec<(String, Vec<events::TaskRecord>)> = match inv.inventories {
        [Inventory::Shared] => {
            let one = o
                .hosts
                .remove("testhost")
                .or_else(|| o.hosts.remove("localhost"));
            vec![(String::new(), one.unwrap_or_default())]
        }
        _ if o.hosts.len() == 1 => vec![(String::new(), o.hosts.into_values().next().unwrap())],
        _ => o
            .hosts
            .into_iter()
            .map(|(h, tasks)| (format!("{h}: "), tasks))
            .collect(),
    };
    let results = hosts
        .into_iter()
        .flat_map(|(prefix, tasks)| {
            tasks.into_iter().map(move |t| Result1 {
                name: format!("{prefix}{}", t.name),
                status: if t.ignored {
                    "failed (ignored)".into()
                } else {
                    t.status
                },
            })
        })
        .collect();
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    // Messages name files under this run's scratch directory: shown relative to it, so that
    // the table's text is the same on every run.
    let here = format!("{}/", dir.display());
    let relative = |s: &str| s.replace(&here, "");
    Ok(Measured {
        results,
        exit,
        failures: o.failures.iter().map(|f| relative(f)).collect(),
        stderr_tail: relative(&first_refusal(&lines)),
        seconds,
    })
}

/// The `-i`s a run is given: the loopback `testhost` written to `file` as `line`, the
/// target's own inventories as written; none for the implicit `localhost`.
fn inventory_args(
    c: &mut std::process::Command,
    which: &[Inventory],
    file: &Path,
    line: &str,
) -> Result<(), String> {
    for i in which {
        match i {
            Inventory::Shared => {
                fs::write(file, line).map_err(|e| e.to_string())?;
                c.arg("-i").arg(file);
            }
            Inventory::Own(own) => {
                c.args(["-i", own]);
            }
        }
    }
    Ok(())
}

/// What stderr says first: the first `error:` with the lines after it up to the next problem
/// (fixpoint refuses with every problem at once, after any warnings), else the last lines (a
/// crash).
fn first_refusal(lines: &[&str]) -> String {
    match lines.iter().position(|l| l.starts_with("error:")) {
        Some(i) => {
            let end = lines[i + 1..]
                .iter()
                .position(|l| l.starts_with("error:") || l.starts_with("warning:"))
                .map_or(lines.len(), |n| i + 1 + n);
            lines[i..end.min(i + 8)].join("\n")
        }
        None => lines[lines.len().saturating_sub(8)..].join("\n"),
    }
}

/// The names in a directory.
fn entries(dir: &Path) -> BTreeSet<std::ffi::OsString> {
    fs::read_dir(dir)
        .map(|r| r.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default()
}

/// The copied roles first, then every target, as ansible-test's `ANSIBLE_ROLES_PATH`: a target
/// may include another by name at run time (`special_vars` includes `include_parent_role_vars`).
pub fn roles_path(dir: &Path, targets: &Path) -> String {
    format!("{}:{}", dir.join("roles").display(), targets.display())
}

/// The names of this machine's users and groups (`/etc/passwd`, `/etc/group`).
fn accounts() -> (BTreeSet<String>, BTreeSet<String>) {
    let names = |path: &str| -> BTreeSet<String> {
        fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split(':').next())
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect()
    };
    (names("/etc/passwd"), names("/etc/group"))
}

/// Results whose task names had a path under the run's own directory (`{{ throttledir }}`
/// in a name), with that directory left out: each tool runs in its own one
/// (`<scratch>/<target>/2-ansible/`), and a kept ansible-core result in an older scratch.
pub fn without_run_dirs(r: &[Result1]) -> Vec<Result1> {
    r.iter()
        .map(|x| Result1 {
            name: run_dirs_left_out(&x.name),
            status: x.status.clone(),
        })
        .collect()
}

/// `text` with each path up to a run's directory (`/.../<n>-ansible/`, `/.../<n>-fixpoint/`)
/// left out.
fn run_dirs_left_out(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(end) = ["-ansible/", "-fixpoint/"]
        .iter()
        .filter_map(|m| rest.find(m).map(|i| (i, i + m.len())))
        .min()
    {
        let (at, after) = end;
        let digits = rest[..at].len()
            - rest[..at]
                .trim_end_matches(|c: char| c.is_ascii_digit())
                .len();
        let start = rest[..at]
            .rfind(|c: char| c.is_whitespace() || c == '\'' || c == '"')
            .map_or(0, |i| i + 1);
        if digits == 0 || !rest[start..].starts_with('/') {
            out.push_str(&rest[..after]);
        } else {
            out.push_str(&rest[..start]);
        }
        rest = &rest[after..];
    }
    out.push_str(rest);
    out
}

#[test]
fn run_directories_are_left_out_of_names() {
    assert_eq!(
        run_dirs_left_out("Clean '/var/tmp/x/throttle/2-ansible/output/t.dir' and-ansible/"),
        "Clean 'output/t.dir' and-ansible/"
    );
    assert_eq!(run_dirs_left_out("/a/5-fixpoint/o"), "o");
}
