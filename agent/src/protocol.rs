//! The framed request/response protocol between the controller and the on-host agent.
//!
//! A frame is a 4-byte big-endian length followed by that many bytes of JSON. Each request
//! travels in a `RequestFrame` with an id the controller counts up per connection, and the agent
//! answers every request with exactly one `ResponseFrame` carrying that id, in
//! order (`Notice` frames aside), except two: a `Batch` is answered with one `Step` frame per
//! step run and a `BatchEnd`, and `CancelBatch` and `OpenGate` have no answer of their own. The
//! controller checks the id of every answer: a connection that is out of step (an
//! answer to an earlier request that timed out on the controller's side) is recognised and
//! dropped instead of handing one task another task's answer.

use fixpoint_modules::Outcome;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::io::Read;

pub mod reply;

/// Written by the agent before its first frame: the controller knows the agent (not a shell
/// message, a motd or sudo's lecture) is now speaking.
pub const AGENT_MAGIC: &[u8; 8] = b"FXPAGNT1";

/// What this agent's protocol understands beyond the first version, said in `Hello`: 1 adds
/// `Batch` and `CancelBatch`; 2 adds gated steps (`BatchStep::gate`) and `OpenGate`. An agent
/// that does not say (an older one) is never sent a `Batch`, and one below 2 no gated step.
pub const PROTOCOL_VERSION: u32 = 2;

/// Requests larger than this are refused by the agent (a corrupt length must not make it
/// allocate much), and never sent by the controller, which fails the task instead. The largest
/// requests are an `Upload` chunk (4 MiB, base64: under 6 MiB) and a `Run` whose parameters
/// carry a file's text (`copy content:`, a rendered `template`): those may reach this limit
/// (README, copy). Files beyond it go through `copy src:`, which streams.
pub const MAX_FRAME: usize = 16 * 1024 * 1024;

/// Answers larger than this fail the host on the controller, which holds one answer per host
/// at a time: a hostile or broken agent must not make it allocate 256 MiB for each of its hosts.
pub const MAX_RESPONSE_FRAME: usize = 64 * 1024 * 1024;

/// One request on the wire: its id, how long the agent may take over it, and the request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RequestFrame {
    pub id: u64,
    /// The task's `timeout` (or the controller's bound for a bookkeeping request), in
    /// milliseconds: past it the agent kills the process groups the request started and answers
    /// that it timed out. None: no limit (a command may legitimately run for hours).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    pub req: Request,
}

/// One answer on the wire, with the id of the request it answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResponseFrame {
    pub id: u64,
    #[serde(deserialize_with = "reply::response")]
    pub resp: Response,
}

/// What the controller asks of the agent.
// `Run` is large since JSON mappings keep their order (an index map each); a request is built
// once per task and moved a few times, so boxing it would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// First exchange: the agent says who and what it is.
    Hello,
    /// Run one module: probe → plan → apply (apply skipped in check mode).
    Run {
        module: String,
        params: Value,
        check: bool,
        diff: bool,
        #[serde(default)]
        once: Option<OnceSpec>,
        #[serde(default)]
        notify: Option<NotifySpec>,
        /// Contents the controller expects the host to lack, sent with the request so that the
        /// module's `NeedContent` is answered on the host without a round trip. An agent that
        /// does not know the field ignores it and asks as before.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        inline: Vec<Inline>,
    },
    /// Run these `Run` requests in order, as one request (pipelining: one round trip for a
    /// section of tasks whose inputs are all known). Each step is answered as soon as it is done
    /// with a `Step` frame under the batch's id, and the batch ends with `BatchEnd`. The agent
    /// stops at the first step that fails and is not ignored (or that asks for content,
    /// `NeedContent`: the controller sends it and goes on with the rest), and starts no further
    /// step once `CancelBatch` arrives. Each step keeps the timeout, host lock, journal and
    /// outbox semantics of a single `Run`. Only sent to an agent whose `Hello` says
    /// `protocol >= 1`, or, right behind `Begin` before any answer, to the agent the controller
    /// shipped itself (an agent whose `Begin` failed refuses it, as every request after it).
    Batch { steps: Vec<BatchStep> },
    /// Start no further step of the batch in progress (the controller stops the host, e.g. on
    /// Ctrl-C). It gets no answer of its own: the batch's `BatchEnd` follows as usual.
    CancelBatch,
    /// The controller has decided its steps up to gate `upto` of the batch in progress (they
    /// passed): its steps gated on `upto` or lower may change the host now. No answer of its
    /// own. A gate the controller's step did not pass is never opened: `CancelBatch` follows.
    OpenGate { upto: u32 },
    /// Run an Ansible module's own Python code (the "python" engine, for modules fixpoint
    /// does not implement natively): the zip of the module and its support code is cached on the
    /// host by its sha256 (`NeedContent` asks for it once), and run with the host's Python.
    RunPython(Box<PythonRun>),
    /// Start `run` (a `Run` request) as a background job (`async: N` with `poll: 0`) with the
    /// job id `jid` the controller derived for it, stopped after `limit_secs`: answered at once
    /// with the job's id and results file. A job id the host already holds is answered with that
    /// job, never started twice (the controller repeats the request after a dropped
    /// connection). May be a step of a `Batch`.
    AsyncStart {
        jid: String,
        limit_secs: u64,
        run: Box<Request>,
    },
    /// Collect facts natively, in one round trip.
    Facts,
    /// Open the state directory, take the host lock for this run, prune old records, and
    /// return the remote user's pending handler notifications (whichever playbook wrote them).
    Begin {
        run_id: String,
        playbook: String,
        state_dir: Option<String>,
        lock_timeout_secs: u64,
        retention_days: u64,
        /// The controller reads `Notice` frames before the answer (while the agent waits for
        /// another run's lock). An older agent ignores the field and sends none; an older
        /// controller does not set it and gets none.
        #[serde(default)]
        notices: bool,
        /// The inventory host the run works on through this agent: its handlers' outbox
        /// entries are its own (several inventory hosts may be one machine).
        #[serde(default)]
        host: String,
    },
    /// A handler ran: remove its outbox entry (one per handler name, remote user and
    /// inventory host).
    HandlerDone { handler: String },
    /// Operator access to the journal (`fixpoint journal`).
    Journal { action: JournalOp },
    /// One chunk of content the agent asked for with `NeedContent`, at `offset`, base64. The
    /// chunks come in order; the last one completes the upload, whose sha256 the agent checks.
    Upload {
        sha256: String,
        offset: u64,
        data: String,
    },
}

impl Request {
    /// The request's kind, as its `op` tag names it on the wire (for logs).
    pub fn op(&self) -> &'static str {
        match self {
            Request::Hello => "hello",
            Request::Run { .. } => "run",
            Request::Batch { .. } => "batch",
            Request::CancelBatch => "cancel_batch",
            Request::OpenGate { .. } => "open_gate",
            Request::RunPython(_) => "run_python",
            Request::AsyncStart { .. } => "async_start",
            Request::Facts => "facts",
            Request::Begin { .. } => "begin",
            Request::HandlerDone { .. } => "handler_done",
            Request::Journal { .. } => "journal",
            Request::Upload { .. } => "upload",
        }
    }
}

/// A content sent with a `Run` request, by its sha256 (checked when it is staged), base64.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Inline {
    pub sha256: String,
    pub data: String,
}

/// One step of a `Batch`: a `Run` request, its own timeout, and whether its failure is ignored
/// (`ignore_errors`: the batch goes on after it).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BatchStep {
    /// A `Request::Run`; anything else is answered as failed.
    pub run: Request,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub ignore_errors: bool,
    /// The step follows steps the controller decides itself (an `assert`, a `set_fact`): the
    /// agent may probe and plan it before they are decided, and answer it when it is converged
    /// (that changes nothing, so the answer stands whatever they decide), but changes the host
    /// only once the controller opens this gate (`OpenGate`). The controller discards the
    /// answers past a gate that did not pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<u32>,
}

/// One run of a Python module (see `Request::RunPython`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PythonRun {
    /// The module's name as the task wrote it, for messages.
    pub module: String,
    /// Its Python module name inside the zip (`ansible.modules.replace`).
    pub fqn: String,
    pub zip_sha256: String,
    pub zip_size: u64,
    /// `ansible_python_interpreter`; None: discovered on the host.
    #[serde(default)]
    pub interpreter: Option<String>,
    /// The Python that starts the module from the zip (argv: zip path, module name).
    pub bootstrap: String,
    /// The module's standard input: `{"ANSIBLE_MODULE_ARGS": {...}}`.
    pub stdin: Value,
    /// The task's `environment`.
    #[serde(default)]
    pub env: Map<String, Value>,
    /// Check mode: nothing is recorded in the outbox (the module itself knows it is a check).
    pub check: bool,
    #[serde(default)]
    pub notify: Option<NotifySpec>,
}

/// The bytes of content in one `Upload` request (before base64): a frame stays near 6 MiB, and
/// each chunk costs one round trip.
pub const UPLOAD_CHUNK: usize = 4 * 1024 * 1024;

// An upload chunk, base64 and in its frame, fits a request with room to spare.
const _: () = assert!(UPLOAD_CHUNK / 3 * 4 + 4096 < MAX_FRAME);

/// A `once:` key for a `Run` request: the journal makes the step happen at most once.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OnceSpec {
    pub key: String,
    /// `once_scope:`: the key is unique within it (default: per host and remote user).
    #[serde(default)]
    pub scope: Option<String>,
    /// The playbook, recorded for display only.
    pub playbook: String,
    pub request_sha256: String,
    /// The task also has a probe guard (`creates`, `removes`, `unless`, `onlyif`): an in-doubt
    /// record is settled by running the module, whose probe decides.
    pub probe_guarded: bool,
    /// `no_log`: the journal keeps a censored result instead of the real one.
    #[serde(default)]
    pub no_log: bool,
}

/// Handlers to record in the outbox before the change that notifies them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NotifySpec {
    pub playbook: String,
    pub play: String,
    pub task: String,
    pub handlers: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JournalOp {
    List,
    Show {
        key: String,
    },
    Resolve {
        key: String,
        done: bool,
    },
    Prune {
        days: u64,
    },
    /// The files of the journal's written-file records that differ from what fixpoint left,
    /// leaving out those a task of this agent's run already compared (`fixpoint drift`).
    Drift,
}

/// What the agent answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Response {
    Hello {
        version: String,
        pid: u32,
        uid: u32,
        user: String,
        /// `PROTOCOL_VERSION`; absent (0) from an agent that predates it.
        #[serde(default)]
        protocol: u32,
    },
    /// The answer of step `index` of a `Batch` (a `Done`, `Failed` or `NeedContent`).
    Step {
        index: usize,
        resp: Box<Response>,
    },
    /// The batch is over: `ran` steps were answered (fewer than sent when one failed, asked
    /// for content, or the batch was cancelled).
    BatchEnd {
        ran: usize,
    },
    Done {
        outcome: Outcome,
        /// Said about how the result came about ("replayed from the journal ...").
        #[serde(default)]
        note: Option<String>,
        /// The handlers whose outbox entries this change created (the controller withdraws
        /// them if it decides, e.g. by `changed_when`, that nothing changed). Entries that were
        /// already pending are not listed: they are owed from earlier, whatever this task did.
        #[serde(default)]
        outbox_written: Vec<String>,
    },
    /// The module failed; `result` keeps useful return values (rc, stdout...).
    Failed {
        msg: String,
        #[serde(default)]
        result: Map<String, Value>,
    },
    Facts {
        facts: Map<String, Value>,
    },
    Begun {
        state_dir: String,
        pending: Vec<crate::journal::OutboxEntry>,
        pruned: usize,
    },
    /// What a Python module printed and its exit status, with the interpreter that ran it;
    /// the controller reads the result from `stdout` as ansible-core does.
    PyDone {
        stdout: String,
        stderr: String,
        rc: i32,
        interpreter: String,
        /// The handlers whose outbox entries this request created (as in `Done`).
        #[serde(default)]
        outbox_written: Vec<String>,
    },
    /// A plain acknowledgement.
    Ack,
    /// Not an answer: said while the request is in progress (only to a request that asked
    /// for notices), under the request's id; its answer follows.
    Notice {
        msg: String,
    },
    Journal {
        data: Value,
    },
    /// The host's file differs from a controller file known by its sha256: send its content
    /// (`Upload`), then repeat the request. The agent has staged a temp file for it.
    NeedContent {
        sha256: String,
        size: u64,
        /// Further contents to send before repeating the request (a `copy` of a directory
        /// tree needs one per distinct file that differs): all of them travel in one go.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        more: Vec<Needed>,
    },
}

/// One more content a `NeedContent` asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Needed {
    pub sha256: String,
    pub size: u64,
}

/// Encode one message as a frame.
pub fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    // Serialized in place behind room for the length, which is filled in after: one buffer,
    // grown from a size most answers fit, not a body copied into a second one.
    let mut out = Vec::with_capacity(1024);
    out.extend_from_slice(&[0; 4]);
    serde_json::to_writer(&mut out, msg).expect("protocol messages always serialize");
    let len = (out.len() - 4) as u32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    out
}

/// Read one frame synchronously (the agent side). `Ok(None)` on a clean end of input.
pub fn read_frame_sync<R: Read>(r: &mut R) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let n = frame_len(len, MAX_FRAME)?;
    // Allocated from the length up to 64 KiB (a length that lies costs no more), grown past it
    // as bytes arrive.
    let mut body = Vec::with_capacity(n.min(64 * 1024));
    r.take(n as u64).read_to_end(&mut body)?;
    if body.len() != n {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!(
                "the input ended inside a frame ({} of {n} bytes)",
                body.len()
            ),
        ));
    }
    Ok(Some(body))
}

/// The length a frame header announces, refused above `limit`.
pub fn frame_len(header: [u8; 4], limit: usize) -> std::io::Result<usize> {
    let n = u32::from_be_bytes(header) as usize;
    if n > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a frame of {n} bytes is larger than the limit of {limit} bytes"),
        ));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        let req = Request::Run {
            module: "file".into(),
            params: serde_json::json!({"path": "/tmp/x"}),
            check: true,
            diff: false,
            once: None,
            notify: None,
            inline: Vec::new(),
        };
        let bytes = encode(&RequestFrame {
            id: 7,
            timeout_ms: Some(1500),
            req,
        });
        let body = read_frame_sync(&mut &bytes[..]).unwrap().unwrap();
        let back: RequestFrame = serde_json::from_slice(&body).unwrap();
        assert_eq!((back.id, back.timeout_ms), (7, Some(1500)));
        assert!(matches!(back.req, Request::Run { check: true, .. }));
        assert!(read_frame_sync(&mut &[][..]).unwrap().is_none());
    }

    #[test]
    fn an_older_hello_reads_as_protocol_zero() {
        let old = r#"{"reply":"hello","version":"0.1.0","pid":1,"uid":0,"user":"root"}"#;
        let back: Response = serde_json::from_str(old).unwrap();
        assert!(matches!(back, Response::Hello { protocol: 0, .. }));
    }

    #[test]
    fn a_lying_or_oversized_length_is_refused_without_allocating_it() {
        // Announces 12 MiB (under the request limit) and ends after three bytes.
        let mut short = (12u32 * 1024 * 1024).to_be_bytes().to_vec();
        short.extend_from_slice(b"{}x");
        let e = read_frame_sync(&mut &short[..]).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof, "{e}");
        let huge = u32::MAX.to_be_bytes();
        let e = read_frame_sync(&mut &huge[..]).unwrap_err();
        assert!(e.to_string().contains("larger than the limit"), "{e}");
        let over = ((MAX_FRAME + 1) as u32).to_be_bytes();
        assert!(read_frame_sync(&mut &over[..]).is_err());
        let e = frame_len(
            ((MAX_RESPONSE_FRAME + 1) as u32).to_be_bytes(),
            MAX_RESPONSE_FRAME,
        )
        .unwrap_err();
        assert!(e.to_string().contains("larger than the limit"), "{e}");
    }
}
