//! The on-host agent (`fixpoint agent`): reads framed requests on stdin, runs modules natively, answers on stdout.
//!
//! One agent serves a whole run on one host, so a converged task costs one request/response and
//! no process spawn. The controller starts it over one SSH channel (or as a local child process).

use crate::journal::{self, LockInfo, OnceStatus, OutboxEntry, Record, StateDir};
use crate::protocol::{
    read_frame_sync, write_frame_sync, JournalOp, NotifySpec, OnceSpec, Request, Response,
};
use fixpoint_modules::{run_module_hooked, Ctx, ModuleError, Outcome};
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
    let mut session = Session::default();
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
            Ok(req) => session.handle(req),
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

/// The agent's state across requests: the state directory and its lock, once `Begin` opened them.
#[derive(Default)]
struct Session {
    state: Option<StateDir>,
    run_id: String,
}

fn failed(msg: impl Into<String>) -> Response {
    Response::Failed {
        msg: msg.into(),
        result: Map::new(),
    }
}

fn me() -> String {
    fixpoint_modules::fs::user_name(nix::unistd::geteuid().as_raw())
}

impl Session {
    fn handle(&mut self, req: Request) -> Response {
        match req {
            Request::Hello => Response::Hello {
                version: env!("CARGO_PKG_VERSION").to_string(),
                pid: std::process::id(),
                uid: nix::unistd::geteuid().as_raw(),
                user: me(),
            },
            Request::Run {
                module,
                params,
                check,
                diff,
                once,
                notify,
            } => {
                let ctx = Ctx { check, diff };
                match once {
                    Some(once) => self.run_once(&module, &params, &ctx, &once, notify.as_ref()),
                    None => self.run(&module, &params, &ctx, notify.as_ref(), None),
                }
            }
            Request::Facts => Response::Facts { facts: facts() },
            Request::Begin {
                run_id,
                playbook,
                state_dir,
                lock_timeout_secs,
                retention_days,
            } => self.begin(
                run_id,
                playbook,
                state_dir,
                lock_timeout_secs,
                retention_days,
            ),
            Request::HandlerDone {
                playbook,
                play,
                handler,
            } => match &self.state {
                Some(st) => match st.outbox_remove(&playbook, &play, &handler) {
                    Ok(()) => Response::Ack,
                    Err(e) => failed(e),
                },
                None => Response::Ack,
            },
            Request::Journal { action } => self.journal(action),
        }
    }

    fn begin(
        &mut self,
        run_id: String,
        playbook: String,
        state_dir: Option<String>,
        lock_timeout_secs: u64,
        retention_days: u64,
    ) -> Response {
        let mut st = match StateDir::open(state_dir.as_deref()) {
            Ok(s) => s,
            Err(e) => return failed(e),
        };
        let info = LockInfo {
            run_id: run_id.clone(),
            pid: std::process::id(),
            user: me(),
            since: journal::now_text(),
            playbook: playbook.clone(),
        };
        if let Err(e) = st.lock(&info, std::time::Duration::from_secs(lock_timeout_secs)) {
            return failed(e);
        }
        let pruned = match st.prune(retention_days) {
            Ok(n) => n,
            Err(e) => return failed(e),
        };
        let pending = match st.outbox_pending() {
            Ok(p) => p,
            Err(e) => return failed(e),
        };
        let state_dir = st.path.display().to_string();
        self.state = Some(st);
        self.run_id = run_id;
        Response::Begun {
            state_dir,
            pending,
            pruned,
        }
    }

    /// Run a module; with `notify`, record the pending handlers durably before applying.
    fn run(
        &mut self,
        module: &str,
        params: &Value,
        ctx: &Ctx,
        notify: Option<&NotifySpec>,
        note: Option<String>,
    ) -> Response {
        let mut outbox_written = false;
        let state = self.state.as_ref();
        let run_id = self.run_id.clone();
        let mut before_apply = || -> Result<(), ModuleError> {
            let (Some(n), Some(st)) = (notify, state) else {
                return Ok(());
            };
            for h in &n.handlers {
                st.outbox_add(&OutboxEntry {
                    playbook: n.playbook.clone(),
                    play: n.play.clone(),
                    handler: h.clone(),
                    run_id: run_id.clone(),
                    task: n.task.clone(),
                    since: journal::now_text(),
                })
                .map_err(ModuleError::failed)?;
            }
            outbox_written = !n.handlers.is_empty();
            Ok(())
        };
        match run_module_hooked(module, params, ctx, &mut before_apply) {
            Ok(outcome) => Response::Done {
                outcome,
                note,
                outbox_written,
            },
            Err(ModuleError::Failed { msg, result }) => Response::Failed { msg, result },
            Err(e) => failed(e.to_string()),
        }
    }

    /// The `once:` contract: at most one effect per key, and an honest "in doubt" otherwise.
    fn run_once(
        &mut self,
        module: &str,
        params: &Value,
        ctx: &Ctx,
        once: &OnceSpec,
        notify: Option<&NotifySpec>,
    ) -> Response {
        let Some(st) = self.state.as_ref() else {
            return failed("the journal is not open on this host (internal error: no Begin)");
        };
        let user = me();
        let existing = match st.read_record(&user, &once.playbook, &once.key) {
            Ok(r) => r,
            Err(e) => return failed(e),
        };
        let mut note = None;
        if let Some(rec) = &existing {
            if rec.request_sha256 != once.request_sha256 {
                return failed(format!(
                    "key `{}` was used for a different request on {} (run {}); a key is never reused for another action: choose a new key, or remove the old record with `fixpoint journal resolve {} --retry`",
                    once.key, rec.started_at, rec.run_id, once.key
                ));
            }
            match rec.status {
                OnceStatus::Done => {
                    let mut result = rec.result.clone();
                    result.insert("replayed".into(), json!(true));
                    return Response::Done {
                        outcome: Outcome {
                            changed: false,
                            result,
                            ..Outcome::default()
                        },
                        note: Some(format!(
                            "replayed: key `{}` done on {}",
                            once.key,
                            rec.finished_at.as_deref().unwrap_or("?")
                        )),
                        outbox_written: false,
                    };
                }
                OnceStatus::Started if !once.probe_guarded => {
                    return failed(format!(
                        "in doubt: key `{}` was started on {} (run {}) but its end was never recorded, so its effect may or may not have happened; check the host, then run `fixpoint journal resolve <host> {} --done` (it happened) or `--retry` (run it again)",
                        once.key, rec.started_at, rec.run_id, once.key
                    ));
                }
                OnceStatus::Started => {
                    note = Some(format!(
                        "key `{}` was in doubt (started {}); the task's probe decided",
                        once.key, rec.started_at
                    ));
                }
                OnceStatus::Failed => {}
            }
        }
        if ctx.check {
            return self.run(module, params, ctx, None, note);
        }
        let mut rec = Record {
            key: once.key.clone(),
            user,
            playbook: once.playbook.clone(),
            module: module.to_string(),
            request_sha256: once.request_sha256.clone(),
            status: OnceStatus::Started,
            run_id: self.run_id.clone(),
            started_at: journal::now_text(),
            started_unix: journal::now_unix(),
            finished_at: None,
            finished_unix: None,
            changed: false,
            result: Map::new(),
        };
        // The `started` record is durable before the effect begins.
        if let Err(e) = st.write_record(&rec) {
            return failed(e);
        }
        let response = self.run(module, params, ctx, notify, note);
        let st = self.state.as_ref().expect("checked above");
        rec.finished_at = Some(journal::now_text());
        rec.finished_unix = Some(journal::now_unix());
        match &response {
            Response::Done { outcome, .. } => {
                rec.status = OnceStatus::Done;
                rec.changed = outcome.changed;
                rec.result = outcome.result.clone();
            }
            Response::Failed { result, .. } => {
                rec.status = OnceStatus::Failed;
                rec.result = result.clone();
            }
            _ => {}
        }
        if once.no_log {
            // What a no_log task returned must not outlive the run, on disk least of all.
            rec.result = Map::new();
            rec.result.insert(
                "censored".into(),
                json!("the output has been hidden due to the fact that 'no_log: true' was specified for this result"),
            );
        }
        if let Err(e) = st.write_record(&rec) {
            return failed(format!(
                "the step ran, but recording it failed: {e}; the key stays in doubt"
            ));
        }
        response
    }

    fn journal(&mut self, op: JournalOp) -> Response {
        let Some(st) = self.state.as_ref() else {
            return failed("the journal is not open on this host (internal error: no Begin)");
        };
        let user = me();
        let find = |key: &str| -> Result<Vec<Record>, String> {
            Ok(st
                .records()?
                .into_iter()
                .filter(|r| r.key == key && r.user == user)
                .collect())
        };
        let result = match op {
            JournalOp::List => st.records().map(|rs| {
                json!(rs
                    .into_iter()
                    .filter(|r| r.user == user)
                    .collect::<Vec<_>>())
            }),
            JournalOp::Show { key } => find(&key).map(|rs| json!(rs)),
            JournalOp::Prune { days } => st.prune(days).map(|n| json!({ "pruned": n })),
            JournalOp::Resolve { key, done } => find(&key).and_then(|rs| {
                if rs.is_empty() {
                    return Err(format!(
                        "no journal record with key `{key}` for user {user}"
                    ));
                }
                for mut r in rs.clone() {
                    if done {
                        r.status = OnceStatus::Done;
                        r.finished_at = Some(journal::now_text());
                        r.finished_unix = Some(journal::now_unix());
                        r.result
                            .insert("resolved".into(), json!("marked done by an operator"));
                        st.write_record(&r)?;
                    } else {
                        st.remove_record(&r)?;
                    }
                }
                Ok(json!({"resolved": rs.len(), "as": if done { "done" } else { "retry" }}))
            }),
        };
        match result {
            Ok(data) => Response::Journal { data },
            Err(e) => failed(e),
        }
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
    put("user_id", json!(fixpoint_modules::fs::user_name(uid)));
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
