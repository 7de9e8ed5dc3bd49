//! Running the package manager's programs for the package modules: a fixed, parsable locale,
//! never a prompt, the task's `environment`, output captured (bounded) and the child registered
//! so a task timeout can stop it.

use crate::capture::read_capped;
use crate::ModuleError;
use serde_json::{json, Map, Value};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::Stdio;

/// What one program said.
#[derive(Debug, Clone, Default)]
pub struct Ran {
    pub rc: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Each stream keeps its first and last MiB: apt's output for a large transaction is long, but
/// it is the head (what will be installed) and the tail (errors) a reader needs.
const CAP: usize = 2 * 1024 * 1024;

/// The environment every package program gets, as Ansible sets it for apt: no debconf questions
/// (`noninteractive`, priority `critical`) and a locale whose messages are the ones parsed here.
pub fn base_env() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = [
        ("DEBIAN_FRONTEND", "noninteractive"),
        ("DEBIAN_PRIORITY", "critical"),
        ("LANG", "C.UTF-8"),
        ("LC_ALL", "C.UTF-8"),
        ("LC_MESSAGES", "C.UTF-8"),
        ("LC_CTYPE", "C.UTF-8"),
        ("LANGUAGE", "C.UTF-8"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    // apt-listchanges and friends must never wait for a reader either.
    v.push(("APT_LISTCHANGES_FRONTEND".into(), "none".into()));
    v
}

/// Run `argv` with `env` over the agent's environment (the task's `environment` last, so a
/// playbook can point `APT_CONFIG` somewhere), stdin from `input` or /dev/null.
pub fn run(
    argv: &[String],
    env: &[(String, String)],
    input: Option<&[u8]>,
) -> Result<Ran, ModuleError> {
    run_in(argv, env, input, None)
}

/// [`run`] in the directory `cwd` (pip runs where the task's `chdir` says).
pub fn run_in(
    argv: &[String],
    env: &[(String, String)],
    input: Option<&[u8]>,
    cwd: Option<&std::path::Path>,
) -> Result<Ran, ModuleError> {
    let mut c = std::process::Command::new(&argv[0]);
    if let Some(dir) = cwd {
        c.current_dir(dir);
    }
    c.args(&argv[1..])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // A process group of its own, registered while it runs: a task timeout kills apt and the
    // maintainer scripts it started (see `children`).
    c.process_group(0);
    let mut child = c.spawn().map_err(|e| {
        ModuleError::failed(format!(
            "cannot run `{}`: {e}; is it installed on the host?",
            argv[0]
        ))
    })?;
    let _running = crate::children::register(child.id());
    let feeder = match (child.stdin.take(), input) {
        (Some(mut pipe), Some(data)) => {
            let data = data.to_vec();
            Some(std::thread::spawn(move || {
                let _ = pipe.write_all(&data);
            }))
        }
        _ => None,
    };
    let out = child
        .stdout
        .take()
        .map(|p| std::thread::spawn(move || read_capped(p, CAP)));
    let err = child
        .stderr
        .take()
        .map(|p| std::thread::spawn(move || read_capped(p, CAP)));
    let status = child.wait();
    let text = |h: Option<std::thread::JoinHandle<crate::capture::Captured>>| {
        let c = h.and_then(|t| t.join().ok()).unwrap_or_default();
        let mut s = String::from_utf8_lossy(&c.head).into_owned();
        if c.omitted() > 0 {
            s.push_str(&format!(
                "\n[fixpoint: {} bytes omitted here]\n",
                c.omitted()
            ));
        }
        s.push_str(&String::from_utf8_lossy(&c.tail));
        s
    };
    let stdout = text(out);
    let stderr = text(err);
    if let Some(f) = feeder {
        let _ = f.join();
    }
    let status =
        status.map_err(|e| ModuleError::failed(format!("waiting for `{}`: {e}", argv[0])))?;
    use std::os::unix::process::ExitStatusExt;
    let rc = status
        .code()
        .unwrap_or_else(|| -status.signal().unwrap_or(0));
    Ok(Ran { rc, stdout, stderr })
}

/// A failure carrying the program's output, as Ansible's `fail_json(msg, stdout, stderr, rc)`.
pub fn failure(msg: String, ran: &Ran) -> ModuleError {
    let mut result = Map::new();
    result.insert("rc".into(), json!(ran.rc));
    result.insert("stdout".into(), json!(ran.stdout));
    result.insert("stderr".into(), json!(ran.stderr));
    result.insert("stdout_lines".into(), lines(&ran.stdout));
    result.insert("stderr_lines".into(), lines(&ran.stderr));
    ModuleError::Failed { msg, result }
}

/// `stdout_lines`: Python's `splitlines()` of the text (`\r` ends a line too).
pub fn lines(s: &str) -> Value {
    json!(crate::command::splitlines(s))
}

/// `argv` as a shell-like string, for messages (`'apt-get ... install x' failed: ...`).
pub fn shown(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '\'') {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// One value of apt's configuration as `apt-config` resolves it (`Dir::Etc::sourceparts/d`:
/// a directory, `/f`: a file), so an `APT_CONFIG` in the task's environment is honoured as
/// apt itself and python-apt honour it. None when apt-config cannot say.
pub fn apt_config(key: &str, env: &[(String, String)]) -> Option<String> {
    let a = ["apt-config", "shell", "V", key].map(String::from);
    let ran = run(&a, env, None).ok()?;
    ran.stdout
        .trim()
        .strip_prefix("V='")
        .and_then(|s| s.strip_suffix('\''))
        .map(|s| s.trim_end_matches('/').to_string())
        .filter(|s| !s.is_empty())
}
