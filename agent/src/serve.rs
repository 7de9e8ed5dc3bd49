//! The agent's serve loop: reads framed requests on stdin, runs modules natively, answers on stdout.
//!
//! One agent serves a whole run on one host, so a converged task costs one request/response and
//! no process spawn. The controller starts it over one SSH channel (or as a local child process).

use crate::facts::facts;
use crate::journal::{self, LockInfo, OnceStatus, OutboxEntry, Record, StateDir};
use crate::protocol::{
    read_frame_sync, Inline, JournalOp, NotifySpec, Request, RequestFrame, Response,
};
use crate::watch::{stopped_response, Watch};
use fixpoint_modules::{run_module_hooked, Ctx, ModuleError};
use serde_json::{json, Map, Value};
use std::io::{BufReader, BufWriter};
use std::os::fd::{AsRawFd, FromRawFd};
use std::process::ExitCode;
use std::sync::Arc;

mod once;

/// What the reader thread hands the serve loop.
enum Incoming {
    Request(Box<RequestFrame>),
    /// A frame that is not a request of this version: answered as failed, under its id when it
    /// has one.
    Undecodable(u64, String),
}

/// Serve requests until stdin closes.
pub fn serve() -> ExitCode {
    // Keep the protocol on a private copy of stdout and point fd 1 at stderr, so that nothing a
    // module or a child process prints can corrupt a frame.
    // Close-on-exec: a background job's process (`job.rs`) must not hold the channel open.
    let proto_fd = match nix::fcntl::fcntl(
        std::io::stdout().as_raw_fd(),
        nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(3),
    ) {
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
    // SAFETY: proto_fd was just returned by fcntl(F_DUPFD_CLOEXEC) and is owned by nothing else.
    let out = unsafe { std::fs::File::from_raw_fd(proto_fd) };
    let mut out = BufWriter::new(out);
    // Tell the controller the agent (not a shell banner or sudo) is now speaking.
    if std::io::Write::write_all(&mut out, crate::protocol::AGENT_MAGIC)
        .and_then(|_| std::io::Write::flush(&mut out))
        .is_err()
    {
        return ExitCode::from(1);
    }
    let watch = Watch::new(Box::new(out));
    // Frames are read on their own thread, so that the controller hanging up is noticed while
    // a module runs (and stops it) rather than after it.
    let (tx, rx) = std::sync::mpsc::channel::<Incoming>();
    {
        let watch = watch.clone();
        std::thread::spawn(move || {
            let mut input = BufReader::new(std::io::stdin().lock());
            let mut last_batch = 0;
            loop {
                let body = match read_frame_sync(&mut input) {
                    Ok(Some(b)) => b,
                    Ok(None) => break,
                    Err(e) => {
                        eprintln!("fixpoint agent: reading request: {e}");
                        break;
                    }
                };
                let incoming = match serde_json::from_slice::<RequestFrame>(&body) {
                    // Handled here, not queued: the serve loop is busy with the batch it
                    // cancels. It applies to the last batch read, which may not have started.
                    Ok(RequestFrame {
                        req: Request::CancelBatch,
                        ..
                    }) => {
                        watch.cancel_batch(last_batch);
                        continue;
                    }
                    // Likewise: the batch's gated step may be waiting for it.
                    Ok(RequestFrame {
                        req: Request::OpenGate { upto },
                        ..
                    }) => {
                        watch.open_gate(last_batch, upto);
                        continue;
                    }
                    Ok(frame) => {
                        if matches!(frame.req, Request::Batch { .. }) {
                            last_batch = frame.id;
                        }
                        Incoming::Request(Box::new(frame))
                    }
                    Err(e) => {
                        let id = serde_json::from_slice::<Value>(&body)
                            .ok()
                            .and_then(|v| v.get("id").and_then(Value::as_u64))
                            .unwrap_or(0);
                        Incoming::Undecodable(id, e.to_string())
                    }
                };
                if tx.send(incoming).is_err() {
                    return;
                }
            }
            // Dropping `tx` ends the serve loop once the request in progress is answered.
            drop(tx);
            watch.hang_up();
        });
    }
    let mut session = Session::default();
    while let Ok(incoming) = rx.recv() {
        // The user database's answers are remembered within one request (a batch) only: the
        // host may have changed it since the last one.
        fixpoint_modules::fs::names::forget();
        let (id, response) = match incoming {
            Incoming::Request(frame) => match frame.req {
                Request::Batch { steps } => match batch(&mut session, &watch, frame.id, steps) {
                    Ok(end) => (frame.id, end),
                    Err(e) => {
                        eprintln!("fixpoint agent: writing response: {e}");
                        return ExitCode::from(1);
                    }
                },
                req => (
                    frame.id,
                    serve_one(&mut session, &watch, frame.id, frame.timeout_ms, req),
                ),
            },
            Incoming::Undecodable(id, e) => (
                id,
                failed(format!(
                    "agent could not decode the request: {e} (controller and agent versions differ?)"
                )),
            ),
        };
        if let Err(e) = watch.answer(id, response) {
            eprintln!("fixpoint agent: writing response: {e}");
            return ExitCode::from(1);
        }
    }
    // An upload the controller did not complete leaves no temp file behind.
    fixpoint_modules::fs::stage::discard();
    // Still under the host lock (`session` holds it): the next run reads what this one learnt.
    fixpoint_modules::stat::mime::save();
    drop(session);
    ExitCode::SUCCESS
}

/// One request, under its timeout: what stopped it (timeout, hang-up) replaces its answer.
fn serve_one(
    session: &mut Session,
    watch: &Arc<Watch>,
    id: u64,
    timeout_ms: Option<u64>,
    req: Request,
) -> Response {
    watch.start(id, timeout_ms);
    session.stopped = Some(watch.clone());
    // A step that may have changed the user database (other than by writing its files, which
    // `names` sees) leaves nothing remembered for the next step of the batch.
    let keeps_names = matches!(&req, Request::Run { module, .. }
        if fixpoint_modules::fs::names::leaves_alone(module));
    let response = session.handle(req);
    // A path the step resolved ahead for its module never serves another step.
    fixpoint_modules::fs::located::forget();
    if !keeps_names {
        fixpoint_modules::fs::names::forget();
    }
    match watch.finish() {
        Some(why) => {
            let result = match response {
                Response::Failed { result, .. } => result,
                Response::Done { outcome, .. } => outcome.result,
                _ => Map::new(),
            };
            stopped_response(why, result)
        }
        None => response,
    }
}

/// Modules whose step reads and writes a few files: their answers may wait for the next ones.
const QUICK: &[&str] = &[
    "file",
    "copy",
    "template",
    "lineinfile",
    "blockinfile",
    "replace",
    "stat",
    "ini_file",
];

/// A `Batch`: each step as a `Run` of its own, answered as soon as it is done (held for the
/// next answers while they come quickly, see `Watch::answer`); the batch
/// stops after a failure that is not ignored, a `NeedContent` (the controller sends the
/// content and goes on itself), or once the controller cancels it or hangs up. Returns the
/// `BatchEnd` to send; an error is the protocol's stdout failing.
fn batch(
    session: &mut Session,
    watch: &Arc<Watch>,
    id: u64,
    steps: Vec<crate::protocol::BatchStep>,
) -> std::io::Result<Response> {
    let mut ran = 0;
    for (index, step) in steps.into_iter().enumerate() {
        if watch.batch_stopped(id) {
            break;
        }
        // The answers held so far go out before a step that may take long (a command, a
        // package, a download...): only steps that read and write files answer in bulk.
        let quick =
            matches!(&step.run, Request::Run { module, .. } if QUICK.contains(&module.as_str()));
        if !quick {
            watch.flush()?;
        }
        session.gate = step.gate.map(|g| (id, g));
        session.gate_refused = false;
        let resp = match step.run {
            run @ (Request::Run { .. } | Request::AsyncStart { .. }) => {
                serve_one(session, watch, id, step.timeout_ms, run)
            }
            _ => failed(
                "a batch step must be a `run` request (controller and agent versions differ?)",
            ),
        };
        session.gate = None;
        if session.gate_refused && watch.batch_stopped(id) {
            // It changed nothing, and the controller wants nothing more of this batch.
            break;
        }
        let go_on = match &resp {
            Response::Done { .. } => true,
            Response::Failed { .. } => step.ignore_errors,
            _ => false,
        };
        watch.answer(
            id,
            Response::Step {
                index,
                resp: Box::new(resp),
            },
        )?;
        ran += 1;
        if !go_on {
            break;
        }
    }
    Ok(Response::BatchEnd { ran })
}

/// One chunk of an upload (see `fixpoint_modules::fs::stage`).
fn upload(sha256: &str, offset: u64, data: &str) -> Response {
    use base64::Engine as _;
    let bytes = match base64::engine::general_purpose::STANDARD.decode(data) {
        Ok(b) => b,
        Err(e) => {
            fixpoint_modules::fs::stage::discard();
            return failed(format!("an upload chunk is not valid base64: {e}"));
        }
    };
    match fixpoint_modules::fs::stage::write_chunk(sha256, offset, &bytes) {
        Ok(()) => Response::Ack,
        Err(e) => failed(e.to_string()),
    }
}

/// For a `NeedContent` answer whose every content came with the request (`inline`): write them
/// into their stages and return the bytes written; `None` when the answer asks for nothing or
/// for a content that did not come along (the controller then sends it as before).
fn stage_inline(answer: &Response, inline: &[Inline]) -> Option<Result<u64, String>> {
    use base64::Engine as _;
    let Response::NeedContent { sha256, more, .. } = answer else {
        return None;
    };
    let asked: Vec<&Inline> = std::iter::once(sha256)
        .chain(more.iter().map(|m| &m.sha256))
        .map(|sha| inline.iter().find(|i| i.sha256 == *sha))
        .collect::<Option<_>>()?;
    let mut sent = 0;
    for i in asked {
        // A content named twice is staged once.
        if fixpoint_modules::fs::stage::ready(&i.sha256) {
            continue;
        }
        let bytes = match base64::engine::general_purpose::STANDARD.decode(&i.data) {
            Ok(b) => b,
            Err(e) => return Some(Err(format!("inline content is not valid base64: {e}"))),
        };
        if let Err(e) = fixpoint_modules::fs::stage::write_chunk(&i.sha256, 0, &bytes) {
            return Some(Err(e.to_string()));
        }
        sent += bytes.len() as u64;
    }
    Some(Ok(sent))
}

/// `response` with `note` added to a `Done`'s note.
fn with_note(mut response: Response, add: String) -> Response {
    if let Response::Done { note, .. } = &mut response {
        *note = Some(match note.take() {
            Some(n) => format!("{n}; {add}"),
            None => add,
        });
    }
    response
}

/// The agent's state across requests: the state directory and its lock, once `Begin` opened them.
#[derive(Default)]
struct Session {
    state: Option<StateDir>,
    run_id: String,
    /// The inventory host `Begin` named: the owner of the outbox entries this agent writes.
    host: String,
    /// Says whether the request in progress was stopped (timeout, hang-up).
    stopped: Option<Arc<Watch>>,
    /// The written-file records a task of this run compared (see `drift`).
    drift_checked: std::collections::HashSet<String>,
    /// The batch step in progress is gated (`BatchStep::gate`): its batch's id and its gate,
    /// until it passes the gate.
    gate: Option<(u64, u32)>,
    /// The step in progress gave up waiting at its gate: it changed nothing, and gets no answer
    /// when the batch was cancelled.
    gate_refused: bool,
    /// Why `Begin` failed (another run's lock, an unusable state directory): the controller
    /// may have sent its first batch behind `Begin` before it knew, and nothing of this run
    /// may touch the host without the lock, so every later request is refused.
    not_begun: Option<String>,
}

impl Session {
    /// Before a step changes the host: wait for its gate, if it has one (see `BatchStep::gate`).
    fn pass_gate(
        gate: &mut Option<(u64, u32)>,
        watch: Option<&Arc<Watch>>,
        refused: &mut bool,
    ) -> Result<(), ModuleError> {
        let (Some((id, g)), Some(watch)) = (*gate, watch) else {
            return Ok(());
        };
        if watch.wait_gate(id, g) {
            *gate = None;
            return Ok(());
        }
        *refused = true;
        Err(ModuleError::failed(
            "the step was not let change the host: a step before it, decided on the controller, \
             did not pass",
        ))
    }
}

/// Record the handlers `n` names in the outbox of this run, before the change that notifies
/// them: the names newly recorded, which the controller withdraws when no change came.
fn record_notified(
    st: &StateDir,
    run_id: &str,
    host: &str,
    n: &NotifySpec,
) -> Result<Vec<String>, String> {
    let mut written = Vec::new();
    for h in &n.handlers {
        let entry = OutboxEntry {
            playbook: n.playbook.clone(),
            play: n.play.clone(),
            handler: h.clone(),
            user: me(),
            host: host.to_string(),
            run_id: run_id.to_string(),
            task: n.task.clone(),
            since: journal::now_text(),
        };
        if st.outbox_add(&entry)? {
            written.push(h.clone());
        }
    }
    Ok(written)
}

fn failed(msg: impl Into<String>) -> Response {
    Response::Failed {
        msg: msg.into(),
        result: Map::new(),
    }
}

/// A task result with the drift its files showed before it ran (see `drift`).
fn with_drift(mut response: Response, drift: Option<Value>) -> Response {
    let Some(d) = drift else {
        return response;
    };
    match &mut response {
        Response::Done { outcome, .. } => {
            outcome.result.insert("drift".into(), d);
        }
        Response::Failed { result, .. } => {
            result.insert("drift".into(), d);
        }
        _ => {}
    }
    response
}

fn me() -> String {
    fixpoint_modules::fs::user_name(nix::unistd::geteuid().as_raw())
}

impl Session {
    fn handle(&mut self, req: Request) -> Response {
        if let Some(why) = &self.not_begun {
            if !matches!(req, Request::Hello | Request::Begin { .. }) {
                return failed(format!("the run did not begin on this host: {why}"));
            }
        }
        match req {
            Request::Hello => Response::Hello {
                version: env!("CARGO_PKG_VERSION").to_string(),
                pid: std::process::id(),
                uid: nix::unistd::geteuid().as_raw(),
                user: me(),
                protocol: crate::protocol::PROTOCOL_VERSION,
            },
            Request::Run {
                module,
                params,
                check,
                diff,
                once,
                notify,
                inline,
            } => {
                let ctx = Ctx { check, diff };
                let mut go = || match &once {
                    Some(once) => self.run_once(&module, &params, &ctx, once, notify.as_ref()),
                    None => self.run(&module, &params, &ctx, notify.as_ref(), None),
                };
                let first = go();
                // The module staged what it asked for; when the controller sent it along, it
                // is written there now and the module asked again, as the controller would.
                match stage_inline(&first, &inline) {
                    Some(Ok(sent)) => with_note(go(), format!("content sent: {sent} bytes")),
                    Some(Err(e)) => {
                        fixpoint_modules::fs::stage::discard();
                        failed(e)
                    }
                    None => first,
                }
            }
            Request::RunPython(run) => self.run_python(&run),
            Request::AsyncStart {
                jid,
                limit_secs,
                run,
            } => self.async_start(&jid, limit_secs, *run),
            Request::Facts => Response::Facts { facts: facts() },
            Request::Begin {
                run_id,
                playbook,
                state_dir,
                lock_timeout_secs,
                retention_days,
                notices,
                host,
            } => {
                // Nothing is written before `begin` has the lock (a refused one refuses all).
                self.host = host;
                let begun = self.begin(
                    run_id,
                    playbook,
                    state_dir,
                    lock_timeout_secs,
                    retention_days,
                    notices,
                );
                self.not_begun = match &begun {
                    Response::Failed { msg, .. } => Some(msg.clone()),
                    _ => None,
                };
                begun
            }
            Request::HandlerDone { handler } => match &self.state {
                Some(st) => match st.outbox_remove(&self.host, &me(), &handler) {
                    Ok(()) => Response::Ack,
                    Err(e) => failed(e),
                },
                None => Response::Ack,
            },
            Request::Journal { action } => self.journal(action),
            // Served by `batch` and the reader thread; they never reach here.
            Request::Batch { .. } | Request::CancelBatch | Request::OpenGate { .. } => {
                failed("internal error: a batch request reached the single-request path")
            }
            Request::Upload {
                sha256,
                offset,
                data,
            } => upload(&sha256, offset, &data),
        }
    }

    fn begin(
        &mut self,
        run_id: String,
        playbook: String,
        state_dir: Option<String>,
        lock_timeout_secs: u64,
        retention_days: u64,
        notices: bool,
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
        let watch = self.stopped.clone().filter(|_| notices);
        let mut waiting = |h: &LockInfo| {
            if let Some(w) = &watch {
                let _ = w.notice(format!(
                    "waiting for the host lock held by run {} (pid {}, user {}, since {}, playbook {})",
                    h.run_id, h.pid, h.user, h.since, h.playbook
                ));
            }
        };
        let timeout = std::time::Duration::from_secs(lock_timeout_secs);
        if let Err(e) = st.lock_telling(&info, timeout, &mut waiting) {
            return failed(e);
        }
        // Under the lock, before anything reads the journal: records of the first layout are
        // filed under their key.
        if let Err(e) = st.migrate_records() {
            return failed(e);
        }
        if let Err(e) = st.migrate_outbox(&me()) {
            return failed(e);
        }
        let pruned = match st.prune(retention_days).and_then(|n| {
            st.written()
                .prune(retention_days, journal::MAX_WRITTEN)
                .map(|m| n + m)
        }) {
            Ok(n) => n,
            Err(e) => return failed(e),
        };
        let pending = match st.outbox_pending(&self.host, &me()) {
            Ok(p) => p,
            Err(e) => return failed(e),
        };
        let state_dir = st.path.display().to_string();
        // `stat`'s answers of `file`, kept between runs (read and written under the lock).
        fixpoint_modules::stat::mime::use_file(st.path.join("mime-cache.json"));
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
        // Compared before the module runs: its own change updates the record.
        let drift = self.state.as_ref().and_then(|st| {
            crate::drift::of_task(&st.written(), module, params, &mut self.drift_checked)
        });
        let (guarded, since) = match crate::drift::unchanged_guard(
            self.state.as_ref().map(|s| s.written()).as_ref(),
            module,
            params,
        ) {
            Ok(g) => g,
            Err(msg) => return with_drift(failed(msg), drift),
        };
        let params = guarded.as_ref().unwrap_or(params);
        // Every change the module makes is recorded in the journal with what it left.
        let _watching = match (&self.state, ctx.check) {
            (Some(st), false) => Some(fixpoint_modules::fs::written::watch(Box::new(
                journal::Recorder::new(st, &self.run_id),
            ))),
            _ => None,
        };
        let mut outbox_written = Vec::new();
        let state = self.state.as_ref();
        let (run_id, host) = (self.run_id.clone(), self.host.clone());
        let (gate, watch, refused) = (
            &mut self.gate,
            self.stopped.as_ref(),
            &mut self.gate_refused,
        );
        let mut before_apply = || -> Result<(), ModuleError> {
            // A gated step probes and plans before the controller decides the steps before it;
            // it changes nothing (the outbox included) until then.
            Session::pass_gate(gate, watch, refused)?;
            let (Some(n), Some(st)) = (notify, state) else {
                return Ok(());
            };
            outbox_written = record_notified(st, &run_id, &host, n).map_err(ModuleError::failed)?;
            Ok(())
        };
        let response = match run_module_hooked(module, params, ctx, &mut before_apply) {
            Ok(outcome) => Response::Done {
                outcome,
                note,
                outbox_written,
            },
            Err(ModuleError::Failed { msg, mut result }) => {
                let msg = match &since {
                    Some(s) => crate::drift::reword_refusal(s, &msg, &mut result),
                    None => msg,
                };
                Response::Failed { msg, result }
            }
            Err(ModuleError::NeedContent { dir, sha256, size }) => {
                match fixpoint_modules::fs::stage::begin(&dir, &sha256, size) {
                    Ok(()) => Response::NeedContent {
                        sha256,
                        size,
                        more: Vec::new(),
                    },
                    Err(e) => failed(e.to_string()),
                }
            }
            Err(ModuleError::NeedContents(wanted)) => {
                match fixpoint_modules::fs::stage::begin_many(&wanted) {
                    Ok(()) => {
                        let mut all = wanted
                            .into_iter()
                            .map(|(_, sha256, size)| crate::protocol::Needed { sha256, size });
                        match all.next() {
                            Some(first) => Response::NeedContent {
                                sha256: first.sha256,
                                size: first.size,
                                more: all.collect(),
                            },
                            None => failed("internal error: no content named"),
                        }
                    }
                    Err(e) => failed(e.to_string()),
                }
            }
            Err(e) => failed(e.to_string()),
        };
        with_drift(response, drift)
    }

    /// Run a Python module. Its change cannot be seen before it happens, so the handlers it
    /// notifies are recorded first (outside check mode); the controller clears them when the
    /// module reports no change.
    fn run_python(&mut self, run: &crate::protocol::PythonRun) -> Response {
        let mut outbox_written = Vec::new();
        if let (Some(n), Some(st), false) = (&run.notify, &self.state, run.check) {
            match record_notified(st, &self.run_id, &self.host, n) {
                Ok(names) => outbox_written = names,
                Err(e) => return failed(e),
            }
        }
        match crate::python::run(run) {
            Ok(Response::PyDone {
                stdout,
                stderr,
                rc,
                interpreter,
                ..
            }) => Response::PyDone {
                stdout,
                stderr,
                rc,
                interpreter,
                outbox_written,
            },
            Ok(other) => other,
            Err(msg) => Response::Failed {
                msg,
                result: Map::new(),
            },
        }
    }

    /// Start a background job (`job.rs`). Its task reports changed whatever the module will do,
    /// as ansible-core's does, so the handlers it notifies are recorded first (outside check
    /// mode), as for a Python module.
    fn async_start(&mut self, jid: &str, limit_secs: u64, run: Request) -> Response {
        // Starting the job is its change: a gated step starts nothing until its gate opens.
        if let Err(e) = Session::pass_gate(
            &mut self.gate,
            self.stopped.as_ref(),
            &mut self.gate_refused,
        ) {
            return failed(e.to_string());
        }
        let mut outbox_written = Vec::new();
        if let (
            Request::Run {
                notify: Some(n),
                check: false,
                ..
            },
            Some(st),
        ) = (&run, &self.state)
        {
            match record_notified(st, &self.run_id, &self.host, n) {
                Ok(names) => outbox_written = names,
                Err(e) => return failed(e),
            }
        }
        match crate::job::start(jid, limit_secs, run) {
            Ok((outcome, note)) => Response::Done {
                outcome,
                note,
                outbox_written,
            },
            Err(msg) => failed(msg),
        }
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
            JournalOp::Prune { days } => st.prune(days).and_then(|n| {
                let m = st.written().prune(days, journal::MAX_WRITTEN)?;
                Ok(json!({ "pruned": n, "pruned_written": m }))
            }),
            JournalOp::Drift => crate::drift::of_journal(&st.written(), &self.drift_checked),
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
