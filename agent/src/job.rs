//! Background jobs (`async: N` with `poll: 0`): the agent's start request, and the detached
//! process that runs the module and writes its result.
//!
//! The order is what makes a job neither repeated nor lost: (1) the agent claims the job id
//! by creating its results file with `O_EXCL` (a repeated start finds it and answers with the
//! job that exists); (2) it starts a fresh copy of its own binary (`--async-job`) in a session
//! of its own, with no descriptor of the controller's channel, so that it survives the agent
//! and the SSH session; (3) it records that process's pid in the results file, durably; (4) only
//! then does it hand the process the module and its parameters (on its stdin), and the process
//! runs the module as the foreground task would and writes its result (temp file, fsync,
//! rename). A crash between (1) and (4) leaves a start record whose process is gone (or never
//! got the module): `async_status` reports it failed, never started again.

use crate::protocol::Request;
use fixpoint_modules::async_job::{self, Claim};
use fixpoint_modules::{Ctx, Outcome};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::time::Duration;

/// What the agent hands the job's process once its pid is recorded.
#[derive(Serialize, Deserialize)]
struct Spec {
    module: String,
    params: Value,
    check: bool,
    diff: bool,
}

/// The argument that makes the agent's binary a job's process (see `main.rs`).
pub const JOB_ARG: &str = "--async-job";

/// Start `run` as job `jid`: the start result, or why it could not start. `changed: true`, as
/// ansible-core reports the task that starts a job.
pub fn start(
    jid: &str,
    limit_secs: u64,
    run: Request,
) -> Result<(Outcome, Option<String>), String> {
    let Request::Run {
        module,
        params,
        check,
        diff,
        ..
    } = run
    else {
        return Err(
            "an async start must carry a `run` request (controller and agent versions differ?)"
                .into(),
        );
    };
    let outcome = |path: &std::path::Path| Outcome {
        changed: true,
        diff: Default::default(),
        result: async_job::start_result(jid, path),
        msg: None,
    };
    let path = match async_job::claim(jid)? {
        Claim::Existing(path) => {
            return Ok((
                outcome(&path),
                Some(format!(
                    "job {jid} was started by an earlier request: not started again"
                )),
            ))
        }
        Claim::New(path) => path,
    };
    let fail = |msg: String| {
        // The claim stays, with what happened: the job id is never started afresh.
        let _ = async_job::write_record(jid, &json!({"failed": true, "msg": msg}));
        msg
    };
    let mut cmd = std::process::Command::new("/proc/self/exe");
    cmd.arg(JOB_ARG)
        .arg(jid)
        .arg(limit_secs.to_string())
        .current_dir("/")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: setsid is async-signal-safe; it only detaches the child from the agent's session
    // (and its SSH session's signals).
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()
                .map(|_| ())
                .map_err(std::io::Error::from)
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| fail(format!("cannot start the job's process: {e}")))?;
    let pid = child.id();
    if let Err(e) = async_job::write_record(jid, &async_job::started_record(jid, pid)) {
        let _ = child.kill();
        let _ = child.wait();
        return Err(fail(e));
    }
    let spec = Spec {
        module,
        params,
        check,
        diff,
    };
    let sent = child.stdin.take().map(|mut stdin| {
        stdin.write_all(&serde_json::to_vec(&spec).expect("a spec always serializes"))
    });
    if let Some(Err(e)) = sent {
        // The process writes that it got no module; wait for it to say so.
        let _ = child.wait();
        return Err(format!("cannot hand the job its module: {e}"));
    }
    // Reaped when it ends, so that it is not left a zombie while this agent serves; if the
    // agent ends first, init reaps it.
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    Ok((outcome(&path), None))
}

/// The job's process: read the module from stdin, run it (at most `limit_secs`), write its
/// result into the job's results file. Returns the process's exit status.
pub fn run(jid: &str, limit_secs: &str) -> std::process::ExitCode {
    let limit = limit_secs.parse::<u64>().unwrap_or(0);
    let mut input = Vec::new();
    let spec = std::io::stdin()
        .read_to_end(&mut input)
        .ok()
        .and_then(|_| serde_json::from_slice::<Spec>(&input).ok());
    let Some(spec) = spec else {
        // The agent ended before it handed the module over: nothing ran.
        let _ = async_job::write_record(
            jid,
            &json!({"failed": true, "msg": "the job was never handed its module (the agent ended first): nothing ran"}),
        );
        return std::process::ExitCode::from(1);
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let ctx = Ctx {
            check: spec.check,
            diff: spec.diff,
        };
        let _ = tx.send(fixpoint_modules::run_module(
            &spec.module,
            &spec.params,
            &ctx,
        ));
    });
    let wait = match limit {
        0 => Duration::MAX,
        n => Duration::from_secs(n),
    };
    let record = match rx.recv_timeout(wait) {
        Ok(outcome) => async_job::finished_record(outcome),
        Err(_) => {
            // As ansible-core's async_wrapper: the module's processes are killed, and the
            // result says so.
            fixpoint_modules::children::kill_all();
            json!({"failed": true, "msg": "Timeout exceeded", "child_pid": std::process::id()})
        }
    };
    match async_job::write_record(jid, &record) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(_) => std::process::ExitCode::from(1),
    }
}
