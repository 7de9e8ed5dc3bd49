//! A controller file for `copy src:`: its sha256 and size go with the request, and its content
//! travels, streamed in chunks, only when the agent answers that the host's file differs.
//!
//! The four questions: after a timeout the controller repeats the whole `copy` (which sends the
//! hash again, never content blindly); the host recognises the content by its sha256; the
//! effect is the rename of a temp file whose hash the agent checked, which is also the only
//! "done" marker the destination needs (its content hash is the state); a run that dies
//! mid-upload leaves the destination untouched and the staged temp file is removed when the
//! agent's session ends.

use crate::connection::{AgentConn, TransportError};
use fixpoint_agent::protocol::{Request, Response, UPLOAD_CHUNK};
use fixpoint_modules::copy::{put_src, Side};
use fixpoint_modules::text::MAX_DIFF_SIZE;
use fixpoint_modules::Outcome;
use serde_json::Value;
use sha2::Digest as _;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// A controller file a `copy` may have to send.
#[derive(Clone, Debug)]
pub struct Upload {
    pub path: PathBuf,
    pub sha256: String,
    /// sha1 (hex), for a `copy` source: what Ansible's copy returns as `checksum`.
    pub sha1: Option<String>,
    pub size: u64,
    /// A file of a copied directory: its path below the copy's `dest`, to find its diff.
    pub rel: Option<String>,
}

/// The file's identity and version: (device, inode, size, mtime s, mtime ns).
type Version = (u64, u64, u64, i64, i64);

/// Hashes already computed this run: a file copied to many hosts is read once, not per host.
/// A file's sha256 and sha1 (hex).
type Sums = (String, String);

static HASHES: Mutex<Option<HashMap<(PathBuf, Version), Sums>>> = Mutex::new(None);

/// How long one chunk may take when the task has no `timeout`.
const CHUNK_TIMEOUT: Duration = Duration::from_secs(120);

impl Upload {
    /// Hash `path` (streamed; memory stays flat whatever its size).
    pub fn of(path: &Path) -> Result<Upload, String> {
        let err = |e: std::io::Error| format!("{}: {e}", path.display());
        let mut f = std::fs::File::open(path).map_err(err)?;
        let m = f.metadata().map_err(err)?;
        let version = (m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec());
        let key = (path.to_path_buf(), version);
        // A map of finished hashes cannot be left half-updated: a poisoned lock is used as is.
        let lock = || HASHES.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((sha256, sha1)) = lock().get_or_insert_with(HashMap::new).get(&key) {
            return Ok(Upload {
                path: path.to_path_buf(),
                sha256: sha256.clone(),
                sha1: Some(sha1.clone()),
                size: m.size(),
                rel: None,
            });
        }
        // Both sums in one read: sha256 names the content on the wire, sha1 is the result's.
        let mut h256 = sha2::Sha256::new();
        let mut h1 = sha1::Sha1::new();
        let mut buf = vec![0u8; 1 << 16];
        let mut size = 0u64;
        loop {
            let n = std::io::Read::read(&mut f, &mut buf).map_err(err)?;
            if n == 0 {
                break;
            }
            h256.update(&buf[..n]);
            h1.update(&buf[..n]);
            size += n as u64;
        }
        let sha256 = hex::encode(h256.finalize());
        let sha1 = hex::encode(h1.finalize());
        lock()
            .get_or_insert_with(HashMap::new)
            .insert(key, (sha256.clone(), sha1.clone()));
        Ok(Upload {
            path: path.to_path_buf(),
            sha256,
            sha1: Some(sha1),
            size,
            rel: None,
        })
    }

    /// Stream the content to the agent, which asked for it (`NeedContent`). Returns the bytes
    /// sent, or why the agent refused them; a transport error leaves the channel unusable.
    pub async fn send(
        &self,
        conn: &mut AgentConn,
        timeout: Option<Duration>,
    ) -> Result<Result<u64, String>, TransportError> {
        use base64::Engine as _;
        let mut f = match tokio::fs::File::open(&self.path).await {
            Ok(f) => f,
            Err(e) => return Ok(Err(format!("{}: {e}", self.path.display()))),
        };
        let mut buf = vec![0u8; UPLOAD_CHUNK];
        let mut offset = 0u64;
        while offset < self.size {
            let want = usize::try_from(self.size - offset)
                .unwrap_or(usize::MAX)
                .min(UPLOAD_CHUNK);
            if let Err(e) = f.read_exact(&mut buf[..want]).await {
                return Ok(Err(format!(
                    "{}: {e} (the file changed while it was sent?)",
                    self.path.display()
                )));
            }
            let req = Request::Upload {
                sha256: self.sha256.clone(),
                offset,
                data: base64::engine::general_purpose::STANDARD.encode(&buf[..want]),
            };
            match conn
                .call(&req, Some(timeout.unwrap_or(CHUNK_TIMEOUT)))
                .await?
            {
                Response::Ack => {}
                Response::Failed { msg, .. } => return Ok(Err(msg)),
                other => {
                    return Err(TransportError::Protocol(format!(
                        "the agent answered an upload with {other:?}"
                    )))
                }
            }
            offset += want as u64;
        }
        Ok(Ok(offset))
    }

    /// The agent cannot show the new text of a controller file it never received: fill it in.
    pub fn fill_diff(&self, outcome: &mut Outcome, diff: bool) {
        if !diff {
            return;
        }
        // A tree's file fills the entry of its own path (`dest` ends with `/`).
        let path = self.rel.as_ref().map(|rel| {
            match outcome.result.get("dest").and_then(|d| d.as_str()) {
                Some(d) if d.ends_with('/') => format!("{d}{rel}"),
                // A tree of one file returns that file's path.
                Some(d) => d.to_string(),
                None => rel.clone(),
            }
        });
        // The source as a diff shows it, read once (a large one never), for both diffs below.
        let mut read = None;
        let mut side = || {
            read.get_or_insert_with(|| {
                if self.size > MAX_DIFF_SIZE {
                    Side::Larger
                } else {
                    match std::fs::read(&self.path) {
                        Ok(b) => Side::of_src(&b),
                        Err(e) => Side::Text(format!("<{}: {e}>\n", self.path.display())),
                    }
                }
            })
            .clone()
        };
        for c in &mut outcome.diff.content {
            if !c.after.is_empty() || path.as_ref().is_some_and(|p| *p != c.path) {
                continue;
            }
            c.after = side().shown(self.size);
        }
        // The registered `diff` list of a single file's copy (`copy::result`) waits for it too.
        if self.rel.is_none() {
            if let Some(Value::Array(entries)) = outcome.result.get_mut("diff") {
                for e in entries.iter_mut().filter_map(Value::as_object_mut) {
                    if e.contains_key("after") {
                        continue;
                    }
                    // The header the agent left names the source; a binary or large source
                    // gets its marker without one, as under ansible-core.
                    let Some(Value::String(header)) = e.remove("after_header") else {
                        continue;
                    };
                    put_src(e, &side(), &header);
                }
            }
        }
    }
}
