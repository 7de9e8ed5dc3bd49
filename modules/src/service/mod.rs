//! Services: what the service modules share (running the manager's programs, finding init
//! scripts and their rc?.d links, telling which service manager runs the host).
//!
//! The modules themselves live beside this file: `sysv.rs` (`sysvinit`), `systemd.rs`
//! (`systemd_service`/`systemd`), `legacy.rs` (`service` on a host that is neither),
//! `auto.rs` (`service`, which picks one of those as Ansible's `service` action does) and
//! `facts.rs` (`service_facts`). The agent runs `systemctl`, `service`, `update-rc.d` and the
//! init scripts itself: nothing is shipped to the host but the agent.

pub mod auto;
pub mod facts;
pub mod legacy;
pub mod systemd;
pub mod sysv;

use crate::ModuleError;
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where Ansible looks for the manager's programs before `PATH`: the agent may run with a
/// minimal `PATH` (sudo's secure_path, an ssh session without `/sbin`).
const SBIN_DIRS: &[&str] = &["/sbin", "/usr/sbin", "/bin", "/usr/bin", "/usr/local/bin"];

/// The absolute path of a program, as Ansible's `get_bin_path(name, opt_dirs=...)` finds it.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    SBIN_DIRS
        .iter()
        .map(PathBuf::from)
        .chain(std::env::split_paths(&path))
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// What one program run returned.
#[derive(Debug, Clone, Default)]
pub struct Ran {
    pub rc: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Run `prog args...` and wait for it. Output goes to temporary files, not pipes: an init
/// script's `start` leaves a daemon behind, and a daemon that kept our pipe open would make a
/// pipe reader wait for the daemon's end (Ansible daemonizes for the same reason). The child
/// gets a process group of its own, registered so that a task timeout stops it.
pub fn run(prog: &Path, args: &[&str]) -> Result<Ran, ModuleError> {
    let mut out = tempfile::tempfile().map_err(|e| ModuleError::io("temporary file", e))?;
    let mut err = tempfile::tempfile().map_err(|e| ModuleError::io("temporary file", e))?;
    let mut c = Command::new(prog);
    c.args(args)
        .stdin(Stdio::null())
        .stdout(
            out.try_clone()
                .map_err(|e| ModuleError::io("temporary file", e))?,
        )
        .stderr(
            err.try_clone()
                .map_err(|e| ModuleError::io("temporary file", e))?,
        )
        // Parsed output must not be translated; the sbin directories for the scripts' own calls.
        .env("LC_ALL", "C")
        .env("LANG", "C")
        .env("PATH", search_path());
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        // As Ansible's systemd module: `systemctl --user` finds the user's bus there.
        c.env(
            "XDG_RUNTIME_DIR",
            format!("/run/user/{}", nix::unistd::geteuid()),
        );
    }
    std::os::unix::process::CommandExt::process_group(&mut c, 0);
    let mut child = c
        .spawn()
        .map_err(|e| ModuleError::failed(format!("cannot run {}: {e}", prog.display())))?;
    let _reg = crate::children::register(child.id());
    let status = child
        .wait()
        .map_err(|e| ModuleError::failed(format!("waiting for {}: {e}", prog.display())))?;
    use std::os::unix::process::ExitStatusExt;
    let rc = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    Ok(Ran {
        rc,
        stdout: read_back(&mut out),
        stderr: read_back(&mut err),
    })
}

fn read_back(f: &mut std::fs::File) -> String {
    let mut buf = Vec::new();
    let _ = f.rewind();
    // Capped: a chatty script must not fill the agent's memory.
    let _ = f.take(1 << 20).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

fn search_path() -> std::ffi::OsString {
    let mut dirs: Vec<PathBuf> = SBIN_DIRS.iter().map(PathBuf::from).collect();
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    dirs.dedup();
    std::env::join_paths(dirs).unwrap_or_default()
}

/// The init script of a SysV service, when there is one.
pub fn sysv_script(name: &str) -> Option<PathBuf> {
    let p = Path::new("/etc/init.d").join(name);
    p.is_file().then_some(p)
}

/// Whether a start link `/etc/rcN.d/S??name` exists (in runlevel `runlevel`, or in any).
pub fn sysv_is_enabled(name: &str, runlevel: Option<&str>) -> bool {
    let pattern = format!(
        "/etc/rc{}.d/S??{}",
        runlevel.map(glob::Pattern::escape).unwrap_or("?".into()),
        glob::Pattern::escape(name)
    );
    glob::glob(&pattern)
        .map(|mut g| g.any(|p| p.is_ok()))
        .unwrap_or(false)
}

/// Ansible's "Could not find the requested service" failure.
pub fn missing(name: &str) -> ModuleError {
    ModuleError::failed(format!("Could not find the requested service {name}: host"))
}

/// Whether systemd runs this host now (sd_booted's canaries, as Ansible checks them).
pub fn systemd_booted() -> bool {
    which("systemctl").is_some()
        && [
            "/run/systemd/system/",
            "/dev/.run/systemd/",
            "/dev/.systemd/",
        ]
        .iter()
        .any(|c| Path::new(c).exists())
}

/// The `service_mgr` fact, computed as Ansible does on Linux: PID 1's name when it says
/// something (not `init`, not a shell), else systemd when booted, upstart, openrc, systemd when
/// `/sbin/init` links to it, sysvinit when `/etc/init.d` exists, dinit, and `service` last.
pub fn service_mgr() -> String {
    let comm = std::fs::read_to_string("/proc/1/comm")
        .ok()
        .or_else(|| {
            std::fs::read_link("/sbin/init")
                .ok()
                .map(|p| p.display().to_string())
        })
        .map(|s| {
            let s = s.trim_end_matches('\n');
            s.rsplit('/').next().unwrap_or(s).trim().to_string()
        });
    if let Some(c) = comm.filter(|c| c != "init" && !c.ends_with("sh") && !c.is_empty()) {
        return match c.as_str() {
            "procd" => "openwrt_init",
            "runit-init" => "runit",
            "svscan" => "svc",
            "openrc-init" => "openrc",
            other => other,
        }
        .to_string();
    }
    let init_is_systemd = std::fs::read_link("/sbin/init")
        .map(|t| t.file_name().is_some_and(|n| n == "systemd"))
        .unwrap_or(false);
    if systemd_booted() {
        "systemd"
    } else if which("initctl").is_some() && Path::new("/etc/init/").exists() {
        "upstart"
    } else if Path::new("/sbin/openrc").exists() {
        "openrc"
    } else if which("systemctl").is_some() && init_is_systemd {
        "systemd"
    } else if Path::new("/etc/init.d/").exists() {
        "sysvinit"
    } else if Path::new("/etc/dinit.d/").exists() {
        "dinit"
    } else {
        "service"
    }
    .to_string()
}

/// Whether a process's command line contains `pattern` (Ansible's `ps auxww` scan, read from
/// /proc instead; the agent's own process is left out).
pub fn process_matches(pattern: &str) -> bool {
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten().any(|e| {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !name.bytes().all(|b| b.is_ascii_digit()) || name == me {
            return false;
        }
        std::fs::read(e.path().join("cmdline"))
            .map(|b| {
                let line = String::from_utf8_lossy(&b).replace('\0', " ");
                line.contains(pattern)
            })
            .unwrap_or(false)
    })
}

/// Split `arguments` (a string, as in Ansible) into words with shell quoting rules.
pub fn split_args(arguments: Option<&str>) -> Result<Vec<String>, ModuleError> {
    match arguments.map(str::trim) {
        None | Some("") => Ok(Vec::new()),
        Some(a) => shlex::split(a)
            .ok_or_else(|| ModuleError::Params(format!("cannot split `arguments`: {a}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_captures_output_and_status() {
        let r = run(
            Path::new("/bin/sh"),
            &["-c", "echo out; echo err >&2; exit 3"],
        )
        .unwrap();
        assert_eq!(
            (r.rc, r.stdout.as_str(), r.stderr.as_str()),
            (3, "out\n", "err\n")
        );
    }

    #[test]
    fn run_does_not_wait_for_a_background_child_holding_stdout() {
        // The daemon case: the script exits, its child keeps the output open. `run` returning
        // while that child still lives proves it did not wait for the output to close.
        let r = run(
            Path::new("/bin/sh"),
            &["-c", "sleep 600 & echo $! ; echo started"],
        )
        .unwrap();
        let pid = nix::unistd::Pid::from_raw(r.stdout.lines().next().unwrap().parse().unwrap());
        let alive = nix::sys::signal::kill(pid, None).is_ok();
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        assert!(alive, "the background child had ended: run waited for it");
        assert!(r.stdout.ends_with("started\n"));
    }

    #[test]
    fn arguments_split_like_a_shell() {
        assert_eq!(
            split_args(Some("a 'b c'")).unwrap(),
            vec!["a".to_string(), "b c".to_string()]
        );
        assert!(split_args(None).unwrap().is_empty());
    }
}
