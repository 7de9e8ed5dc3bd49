//! The on-host agent (`fixpoint agent`): reads framed requests on stdin, runs modules natively, answers on stdout.
//!
//! One agent serves a whole run on one host, so a converged task costs one request/response and
//! no process spawn. The controller starts it over one SSH channel (or as a local child process).

use crate::protocol::{read_frame_sync, write_frame_sync, Request, Response};
use fixpoint_modules::{run_module, Ctx, ModuleError};
use serde_json::{json, Map, Value};
use std::io::{BufReader, BufWriter};
use std::os::fd::{AsRawFd, FromRawFd};
use std::process::ExitCode;

/// Serve requests until stdin closes.
pub fn serve() -> ExitCode {
    // Keep the protocol on a private copy of stdout and point fd 1 at stderr, so that nothing a
    // module or a child process prints can corrupt a frame.
    let proto_fd = match nix::unistd::dup(std::io::stdout().as_raw_fd()) {
        Ok(fd) => fd,
        Err(e) => {
            eprintln!("fixpoint agent: cannot dup stdout: {e}");
            return ExitCode::from(1);
        }
    };
    if let Err(e) = nix::unistd::dup2(2, 1) {
        eprintln!("fixpoint agent: cannot redirect stdout: {e}");
        return ExitCode::from(1);
    }
    // SAFETY: proto_fd was just returned by dup() and is owned by nothing else.
    let out = unsafe { std::fs::File::from_raw_fd(proto_fd) };
    let mut out = BufWriter::new(out);
    // Tell the controller the agent (not a shell banner or sudo) is now speaking.
    if std::io::Write::write_all(&mut out, crate::transport::AGENT_MAGIC)
        .and_then(|_| std::io::Write::flush(&mut out))
        .is_err()
    {
        return ExitCode::from(1);
    }
    let mut input = BufReader::new(std::io::stdin().lock());
    loop {
        let body = match read_frame_sync(&mut input) {
            Ok(Some(b)) => b,
            Ok(None) => return ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("fixpoint agent: reading request: {e}");
                return ExitCode::from(1);
            }
        };
        let response = match serde_json::from_slice::<Request>(&body) {
            Ok(req) => handle(req),
            Err(e) => Response::Failed {
                msg: format!("agent could not decode the request: {e} (controller and agent versions differ?)"),
                result: Map::new(),
            },
        };
        if let Err(e) = write_frame_sync(&mut out, &response) {
            eprintln!("fixpoint agent: writing response: {e}");
            return ExitCode::from(1);
        }
    }
}

fn handle(req: Request) -> Response {
    match req {
        Request::Hello => Response::Hello {
            version: env!("CARGO_PKG_VERSION").to_string(),
            pid: std::process::id(),
            uid: nix::unistd::geteuid().as_raw(),
            user: fixpoint_modules::util::user_name(nix::unistd::geteuid().as_raw()),
        },
        Request::Run {
            module,
            params,
            check,
            diff,
        } => match run_module(&module, &params, &Ctx { check, diff }) {
            Ok(outcome) => Response::Done { outcome },
            Err(ModuleError::Failed { msg, result }) => Response::Failed { msg, result },
            Err(e) => Response::Failed {
                msg: e.to_string(),
                result: Map::new(),
            },
        },
        Request::Facts => Response::Facts { facts: facts() },
    }
}

/// Facts gathered natively from /proc, /etc/os-release and uname, in Ansible's names.
pub fn facts() -> Map<String, Value> {
    let uname = nix::sys::utsname::uname().ok();
    let node = uname
        .as_ref()
        .map(|u| u.nodename().to_string_lossy().into_owned())
        .unwrap_or_default();
    let os = read_os_release();
    let id = os.get("ID").cloned().unwrap_or_else(|| "linux".into());
    let distribution = match id.as_str() {
        "debian" => "Debian".to_string(),
        "ubuntu" => "Ubuntu".to_string(),
        "centos" => "CentOS".to_string(),
        "rhel" => "RedHat".to_string(),
        "fedora" => "Fedora".to_string(),
        "rocky" => "Rocky".to_string(),
        "almalinux" => "AlmaLinux".to_string(),
        "alpine" => "Alpine".to_string(),
        "arch" => "Archlinux".to_string(),
        other => os.get("NAME").cloned().unwrap_or_else(|| capitalize(other)),
    };
    let like = format!("{} {}", id, os.get("ID_LIKE").cloned().unwrap_or_default());
    let os_family = if like.contains("debian") || like.contains("ubuntu") {
        "Debian"
    } else if ["rhel", "fedora", "centos", "rocky", "almalinux"]
        .iter()
        .any(|x| like.contains(x))
    {
        "RedHat"
    } else if like.contains("suse") {
        "Suse"
    } else if like.contains("arch") {
        "Archlinux"
    } else if like.contains("alpine") {
        "Alpine"
    } else {
        "Linux"
    };
    let uid = nix::unistd::geteuid().as_raw();
    let env: Map<String, Value> = std::env::vars()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    let memtotal_mb = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| {
                    l.split_whitespace()
                        .nth(1)
                        .and_then(|k| k.parse::<u64>().ok())
                })
        })
        .map(|kb| kb / 1024)
        .unwrap_or(0);
    let mut facts = Map::new();
    let mut put = |k: &str, v: Value| {
        facts.insert(k.to_string(), v);
    };
    put(
        "hostname",
        json!(node.split('.').next().unwrap_or_default()),
    );
    put("nodename", json!(node));
    put("fqdn", json!(node));
    put("os_family", json!(os_family));
    put("distribution", json!(distribution));
    put(
        "distribution_version",
        json!(os.get("VERSION_ID").cloned().unwrap_or_default()),
    );
    put(
        "distribution_major_version",
        json!(os
            .get("VERSION_ID")
            .and_then(|v| v.split('.').next().map(str::to_string))
            .unwrap_or_default()),
    );
    put(
        "distribution_release",
        json!(os.get("VERSION_CODENAME").cloned().unwrap_or_default()),
    );
    put("system", json!("Linux"));
    put(
        "architecture",
        json!(uname
            .as_ref()
            .map(|u| u.machine().to_string_lossy().into_owned())
            .unwrap_or_default()),
    );
    put(
        "kernel",
        json!(uname
            .as_ref()
            .map(|u| u.release().to_string_lossy().into_owned())
            .unwrap_or_default()),
    );
    put("user_id", json!(fixpoint_modules::util::user_name(uid)));
    put("user_uid", json!(uid));
    put("env", Value::Object(env));
    put(
        "processor_vcpus",
        json!(std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)),
    );
    put("memtotal_mb", json!(memtotal_mb));
    put("default_ipv4", default_ipv4());
    facts
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

fn read_os_release() -> std::collections::HashMap<String, String> {
    let text = std::fs::read_to_string("/etc/os-release")
        .or_else(|_| std::fs::read_to_string("/usr/lib/os-release"))
        .unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
        .collect()
}

/// The interface of the default route (from /proc/net/route) and its IPv4 address.
fn default_ipv4() -> Value {
    let routes = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
    let iface = routes.lines().skip(1).find_map(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        (cols.len() > 2 && cols[1] == "00000000").then(|| cols[0].to_string())
    });
    let Some(iface) = iface else {
        return json!({});
    };
    let addr = nix::ifaddrs::getifaddrs().ok().and_then(|addrs| {
        addrs
            .filter(|a| a.interface_name == iface)
            .find_map(|a| a.address.and_then(|s| s.as_sockaddr_in().map(|v4| v4.ip())))
    });
    match addr {
        Some(ip) => json!({"interface": iface, "address": ip.to_string()}),
        None => json!({"interface": iface}),
    }
}
