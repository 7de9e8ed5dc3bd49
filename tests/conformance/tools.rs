//! The two tools under comparison: finding ansible-core, and running one case under either tool
//! in its own fresh directory.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::sys::stat::{umask, Mode};
use nix::unistd::Pid;

use crate::case::Case;

/// The ansible-core release the corpus is checked against; `.ci/run` installs the same one.
pub const ANSIBLE_VERSION: &str = "2.19.14";

/// The umask both tools run under (the usual default).
const RUN_UMASK: u32 = 0o022;

/// A run that takes longer than this is stuck (a case takes a few seconds), and is killed so
/// that the test reports it instead of hanging.
const RUN_LIMIT: Duration = Duration::from_secs(180);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Ansible,
    Fixpoint,
}

impl Tool {
    pub fn name(self) -> &'static str {
        match self {
            Tool::Ansible => "ansible-core",
            Tool::Fixpoint => "fixpoint",
        }
    }

    fn dir(self) -> &'static str {
        match self {
            Tool::Ansible => "ansible",
            Tool::Fixpoint => "fixpoint",
        }
    }
}

pub struct Tools {
    /// The `bin` directory of ansible-core's virtualenv (`FIXPOINT_ANSIBLE`).
    pub ansible_bin: PathBuf,
    pub fixpoint: PathBuf,
    /// Where `fixpoint_events.py`, our stdout callback for ansible-playbook, lives.
    pub callback_dir: PathBuf,
    /// The Ansible collections (`FIXPOINT_ANSIBLE_COLLECTIONS`, the `ansible` package's tree)
    /// that ansible-core needs for the cases of modules Ansible keeps there (`ansible.posix.mount`).
    pub collections: Option<PathBuf>,
}

/// Names that only resolve with the collections installed (`community.general.ini_file`...):
/// both tools find them where `.ci/run` unpacks the `ansible` package
/// (`FIXPOINT_ANSIBLE_COLLECTIONS`).
const COLLECTION_PREFIXES: &[&str] = &["ansible.posix.", "community.general."];

/// What one tool did with one case.
pub struct Run {
    /// The directory the case's files were written to; `base` is `root/base`.
    pub root: PathBuf,
    /// The exit status; `None` when killed by a signal (or by [`RUN_LIMIT`]).
    pub exit: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

fn install_hint() -> String {
    format!(
        "the conformance tests compare fixpoint with ansible-core {ANSIBLE_VERSION}: set \
         FIXPOINT_ANSIBLE to the bin directory of a virtualenv that has it (`.ci/run` makes \
         /var/cache/fixpoint-ci/ansible; by hand: `python3 -m venv DIR && DIR/bin/pip install \
         ansible-core=={ANSIBLE_VERSION}`, then FIXPOINT_ANSIBLE=DIR/bin)"
    )
}

/// Finds ansible-core through `FIXPOINT_ANSIBLE` and checks its version, or says what to install.
pub fn locate() -> Result<Tools, String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tools = |bin: PathBuf| Tools {
        ansible_bin: bin,
        fixpoint: PathBuf::from(env!("CARGO_BIN_EXE_fixpoint")),
        callback_dir: manifest.join("tests/conformance/callback"),
        collections: std::env::var_os("FIXPOINT_ANSIBLE_COLLECTIONS")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from),
    };
    let bin = match std::env::var_os("FIXPOINT_ANSIBLE").filter(|v| !v.is_empty()) {
        Some(v) => PathBuf::from(v),
        None => return Err(format!("FIXPOINT_ANSIBLE is not set; {}", install_hint())),
    };
    let playbook = bin.join("ansible-playbook");
    if !playbook.is_file() {
        return Err(format!(
            "{} does not exist; {}",
            playbook.display(),
            install_hint()
        ));
    }
    let out = Command::new(&playbook)
        .arg("--version")
        .env("LC_ALL", "C.UTF-8")
        .output()
        .map_err(|e| format!("cannot run {}: {e}; {}", playbook.display(), install_hint()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or("").trim();
    if first != format!("ansible-playbook [core {ANSIBLE_VERSION}]") {
        return Err(format!(
            "{} says `{first}`, not core {ANSIBLE_VERSION}; {}",
            playbook.display(),
            install_hint()
        ));
    }
    Ok(tools(bin))
}

/// Runs `case` under `tool` in `scratch/<tool>/` (the case's files, and `base/` for what the
/// tasks touch); the tool's own state goes to `scratch/<tool>-private/`.
pub fn run(tools: &Tools, case: &Case, tool: Tool, scratch: &Path) -> Result<Run, String> {
    let root = scratch.join(tool.dir());
    let private = scratch.join(format!("{}-private", tool.dir()));
    let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
    fs::create_dir_all(root.join("base")).map_err(|e| io("base", e))?;
    fs::create_dir_all(&private).map_err(|e| io("private dir", e))?;
    fs::write(root.join("playbook.yml"), &case.playbook).map_err(|e| io("playbook", e))?;
    fs::write(root.join("inventory"), &case.inventory).map_err(|e| io("inventory", e))?;
    for (rel, content) in &case.files {
        let path = root.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|e| io(rel, e))?;
        }
        fs::write(&path, content).map_err(|e| io(rel, e))?;
    }
    // JSON extra vars: a value with spaces or `=` stays one value under both tools.
    let base = serde_json::json!({ "base": root.join("base") }).to_string();

    let needs_collections = COLLECTION_PREFIXES
        .iter()
        .any(|p| case.playbook.contains(p));
    let mut cmd = match tool {
        Tool::Ansible => {
            if needs_collections && tools.collections.is_none() {
                return Err(format!(
                    "case {} uses modules of Ansible's collections: set \
                     FIXPOINT_ANSIBLE_COLLECTIONS to the directory holding ansible_collections/ \
                     (`.ci/run` installs the `ansible` package's collections in \
                     /var/cache/fixpoint-ci/ansible-collections-*)",
                    case.name
                ));
            }
            let cfg = private.join("ansible.cfg");
            fs::write(&cfg, "").map_err(|e| io("ansible.cfg", e))?;
            let mut c = clean_command(&tools.ansible_bin.join("ansible-playbook"));
            c.args(["-i", "inventory", "playbook.yml", "-e", &base]);
            c.args(&case.args);
            // An empty config file of our own: no ansible.cfg of this machine or user applies.
            c.env("ANSIBLE_CONFIG", &cfg)
                .env("ANSIBLE_HOME", private.join("home"))
                .env("ANSIBLE_LOCAL_TEMP", private.join("tmp"))
                .env("ANSIBLE_REMOTE_TMP", private.join("remote-tmp"))
                .env("ANSIBLE_CALLBACK_PLUGINS", &tools.callback_dir)
                .env("ANSIBLE_STDOUT_CALLBACK", "fixpoint_events")
                .env(
                    "ANSIBLE_PYTHON_INTERPRETER",
                    tools.ansible_bin.join("python"),
                )
                .env("ANSIBLE_NOCOLOR", "1")
                .env("ANSIBLE_LOCALHOST_WARNING", "0")
                .env("ANSIBLE_DEPRECATION_WARNINGS", "0");
            // Only for the cases that name a collection module (at least once by its FQCN;
            // its short name then resolves too): the others run as they always have.
            if let (true, Some(dir)) = (needs_collections, &tools.collections) {
                c.env("ANSIBLE_COLLECTIONS_PATH", dir);
            }
            c
        }
        Tool::Fixpoint => {
            // Each host gets its own journal: hosts on the local transport would otherwise
            // share one state directory and its lock.
            let state = serde_json::json!({
                "fixpoint_state_dir": format!("{}/state/{{{{ inventory_hostname }}}}", private.display())
            })
            .to_string();
            let mut c = clean_command(&tools.fixpoint);
            c.args([
                "apply",
                "-i",
                "inventory",
                "--format",
                "json",
                "-v",
                "-e",
                &base,
            ]);
            c.args(["-e", &state]);
            c.args(&case.args);
            c.arg("playbook.yml");
            c.env("NO_COLOR", "1");
            // Modules fixpoint lacks run as the code of the same ansible-core installation.
            c.env("FIXPOINT_ANSIBLE_PYTHON", tools.ansible_bin.join("python"));
            if let (true, Some(dir)) = (needs_collections, &tools.collections) {
                c.env("ANSIBLE_COLLECTIONS_PATH", dir);
            }
            c
        }
    };
    cmd.envs(&case.env);
    cmd.current_dir(&root);
    let (out, killed) = run_limited(&mut cmd, tool, RUN_LIMIT)?;
    let mut stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if killed {
        stderr.push_str(&format!(
            "\n[conformance] killed after {}s\n",
            RUN_LIMIT.as_secs()
        ));
    }
    Ok(Run {
        root,
        exit: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr,
    })
}

/// Runs `cmd` as both tools' runs are made: C.UTF-8, no stdin, output captured, umask 022, in
/// its own process group, killed with all its children after `limit`. Returns the output and
/// whether the limit killed it.
pub fn run_limited(
    cmd: &mut Command,
    tool: Tool,
    limit: Duration,
) -> Result<(std::process::Output, bool), String> {
    cmd.env("LC_ALL", "C.UTF-8")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that a stuck run is killed with all its children.
        .process_group(0);
    // The modes of new files depend on the umask: both runs get the common default, whatever
    // the test runner's is.
    // SAFETY: umask(2) is async-signal-safe and touches only the child's own state.
    unsafe {
        cmd.pre_exec(|| {
            umask(Mode::from_bits_truncate(RUN_UMASK));
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", tool.name()))?;
    let pgid = Pid::from_raw(child.id() as i32);
    let (done, watch) = mpsc::channel::<()>();
    let watchdog = thread::spawn(move || {
        // Woken at once when the run ends; only a stuck run reaches the limit.
        if let Err(mpsc::RecvTimeoutError::Timeout) = watch.recv_timeout(limit) {
            let _ = killpg(pgid, Signal::SIGKILL);
            return true;
        }
        false
    });
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{}: {e}", tool.name()))?;
    let _ = done.send(());
    Ok((out, watchdog.join().unwrap_or(false)))
}

/// A command for `program` without the developer's Ansible settings (fixpoint reads
/// ANSIBLE_ROLES_PATH too) or fixpoint's log level; the caller sets what the run needs after this.
pub fn clean_command(program: &Path) -> Command {
    let mut c = Command::new(program);
    for (k, _) in std::env::vars_os() {
        let k_text = k.to_string_lossy();
        if k_text.starts_with("ANSIBLE_") || k_text == "FIXPOINT_LOG" {
            c.env_remove(&k);
        }
    }
    c
}
