//! The framed request/response protocol between the controller and the on-host agent.
//!
//! A frame is a 4-byte big-endian length followed by that many bytes of JSON. The agent answers
//! every request with exactly one response, in order, so the controller never has to match ids.

use fixpoint_modules::Outcome;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::io::{Read, Write};

/// Written by the agent before its first frame: the controller knows the agent (not a shell
/// message, a motd or sudo's lecture) is now speaking.
pub const AGENT_MAGIC: &[u8; 8] = b"FXPAGNT1";

/// Frames larger than this are refused: a corrupt length must not make either side allocate gigabytes.
pub const MAX_FRAME: usize = 256 * 1024 * 1024;

/// What the controller asks of the agent.
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
    },
    /// Collect facts natively, in one round trip.
    Facts,
    /// Open the state directory, take the host lock for this run, prune old records, and
    /// return the pending handler notifications of this playbook.
    Begin {
        run_id: String,
        playbook: String,
        state_dir: Option<String>,
        lock_timeout_secs: u64,
        retention_days: u64,
    },
    /// A handler ran: remove its outbox entry.
    HandlerDone {
        playbook: String,
        play: String,
        handler: String,
    },
    /// Operator access to the journal (`fixpoint journal`).
    Journal { action: JournalOp },
}

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
    Show { key: String },
    Resolve { key: String, done: bool },
    Prune { days: u64 },
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
    },
    Done {
        outcome: Outcome,
        /// Said about how the result came about ("replayed from the journal ...").
        #[serde(default)]
        note: Option<String>,
        /// Outbox entries were written for this change (the controller clears them if it
        /// decides, e.g. by `changed_when`, that nothing changed).
        #[serde(default)]
        outbox_written: bool,
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
    /// A plain acknowledgement.
    Ack,
    Journal {
        data: Value,
    },
}

/// Encode one message as a frame.
pub fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    let body = serde_json::to_vec(msg).expect("protocol messages always serialize");
    let mut out = Vec::with_capacity(body.len() + 4);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
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
    let n = u32::from_be_bytes(len) as usize;
    if n > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("frame of {n} bytes is larger than the limit"),
        ));
    }
    let mut body = vec![0u8; n];
    r.read_exact(&mut body)?;
    Ok(Some(body))
}

/// Write one message synchronously and flush it.
pub fn write_frame_sync<W: Write, T: Serialize>(w: &mut W, msg: &T) -> std::io::Result<()> {
    w.write_all(&encode(msg))?;
    w.flush()
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
        };
        let bytes = encode(&req);
        let body = read_frame_sync(&mut &bytes[..]).unwrap().unwrap();
        let back: Request = serde_json::from_slice(&body).unwrap();
        assert!(matches!(back, Request::Run { check: true, .. }));
        assert!(read_frame_sync(&mut &[][..]).unwrap().is_none());
    }
}
