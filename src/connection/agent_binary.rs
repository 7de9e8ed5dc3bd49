//! The agent the controller ships to hosts: the one `build.rs` embedded, or a `fixpoint_agent_path` override.
//!
//! Hosts cache the agent under its sha256, so it crosses the wire once per host and version; it
//! travels zstd-compressed to a host that has `zstd`, gzip-compressed to others, and the
//! decompressor checks what it unpacked (zstd's content checksum, gzip's CRC-32).

use super::TransportError;
use flate2::{write::GzEncoder, Compression};
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::io::Write;
use std::path::Path;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/agent_binary.rs"));
}

/// The oldest C library the embedded agent runs on ("glibc 2.17" for a zig-linked build).
pub const BASELINE: &str = embedded::BASELINE;

pub struct AgentBinary {
    /// sha256 of the unpacked binary: its file name in the host's cache.
    pub sha256: String,
    /// Size of the unpacked binary.
    pub size: u64,
    /// What goes on the wire: the binary, gzip-compressed.
    pub gz: Cow<'static, [u8]>,
    /// The binary zstd-compressed, for hosts that have `zstd`: the embedded agent's (an
    /// override is only gzip-compressed, which costs the controller less CPU to make).
    pub zst: Option<Cow<'static, [u8]>>,
}

impl AgentBinary {
    /// The agent built with this controller: no I/O, nothing to hash.
    pub fn embedded() -> AgentBinary {
        AgentBinary {
            sha256: embedded::SHA256.to_string(),
            size: embedded::SIZE,
            gz: Cow::Borrowed(embedded::GZ),
            zst: Some(Cow::Borrowed(embedded::ZST)),
        }
    }

    /// An agent binary from a file (`fixpoint_agent_path`): read, hash and compress it
    /// (blocking: call it off the async runtime).
    pub fn load(path: &Path) -> Result<AgentBinary, TransportError> {
        let fail = |e: std::io::Error| {
            TransportError::Connect(format!("cannot read agent binary {}: {e}", path.display()))
        };
        let bytes = std::fs::read(path).map_err(fail)?;
        let mut gz = GzEncoder::new(Vec::new(), Compression::default());
        gz.write_all(&bytes).map_err(fail)?;
        Ok(AgentBinary {
            sha256: hex::encode(Sha256::digest(&bytes)),
            size: bytes.len() as u64,
            gz: Cow::Owned(gz.finish().map_err(fail)?),
            zst: None,
        })
    }

    /// The binary itself, unpacked (for tests and `fixpoint agent-binary`-style inspection).
    pub fn unpack(&self) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.size as usize);
        std::io::copy(&mut flate2::read::GzDecoder::new(&self.gz[..]), &mut out)?;
        Ok(out)
    }
}
