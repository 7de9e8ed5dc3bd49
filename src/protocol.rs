//! The framed request/response protocol between the controller and the on-host agent.
//!
//! A frame is a 4-byte big-endian length followed by that many bytes of JSON. The agent answers
//! every request with exactly one response, in order, so the controller never has to match ids.

use fixpoint_modules::Outcome;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::io::{Read, Write};

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
    },
    /// Collect facts natively, in one round trip.
    Facts,
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
        };
        let bytes = encode(&req);
        let body = read_frame_sync(&mut &bytes[..]).unwrap().unwrap();
        let back: Request = serde_json::from_slice(&body).unwrap();
        assert!(matches!(back, Request::Run { check: true, .. }));
        assert!(read_frame_sync(&mut &[][..]).unwrap().is_none());
    }
}
