//! Which controller files' contents each host is known to hold, remembered between runs on this
//! controller: a small file a host is expected to lack travels with its request (the agent
//! answers the module's `NeedContent` itself, without a round trip), one it holds does not (a
//! converged run sends hashes only).
//!
//! Only a hint, never trusted for correctness: the host still compares sha256s, so a stale entry
//! costs the round trip it would have cost anyway, and a missing one costs a few bytes. One file
//! per host under `$XDG_CACHE_HOME/fixpoint/controller/held/`, one sha256 per line, appended
//! (`O_APPEND`: concurrent runs add lines, never overwrite them), and rewritten with its newer
//! half once it grows past `MAX_LINES`.

use super::upload::Upload;
use base64::Engine as _;
use fixpoint_agent::protocol::Inline;
use sha2::Digest as _;
use std::collections::{HashMap, HashSet};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Mutex;

/// The largest file sent along with its request. Larger ones are streamed in chunks when asked
/// for: sent blindly, they would cost a converged run more than a round trip.
pub const INLINE_MAX: u64 = 16 * 1024;
/// The most sent along with one request.
const INLINE_TOTAL: u64 = 4 * INLINE_MAX;
const MAX_LINES: usize = 8192;

/// The contents each host (by its route) holds, read from its file the first time it is asked.
static HELD: Mutex<Option<HashMap<String, HashSet<String>>>> = Mutex::new(None);

fn file(route: &str) -> PathBuf {
    let name = hex::encode(sha2::Sha256::digest(route.as_bytes()));
    crate::pymod::package::cache_dir()
        .join("held")
        .join(&name[..32])
}

/// Run `f` on the set of `route`, loaded on first use.
fn with_set<T>(route: &str, f: impl FnOnce(&mut HashSet<String>) -> T) -> T {
    // A set of hints cannot be left in a state that matters: a poisoned lock is used as is.
    let mut g = HELD.lock().unwrap_or_else(|p| p.into_inner());
    let set = g
        .get_or_insert_with(HashMap::new)
        .entry(route.to_string())
        .or_insert_with(|| load(route));
    f(set)
}

fn load(route: &str) -> HashSet<String> {
    let Ok(text) = std::fs::read_to_string(file(route)) else {
        return HashSet::new();
    };
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.len() == 64 && l.bytes().all(|b| b.is_ascii_hexdigit()))
        .collect();
    if lines.len() > MAX_LINES {
        let keep = &lines[lines.len() - MAX_LINES / 2..];
        let _ = rewrite(route, keep);
        return keep.iter().map(|s| s.to_string()).collect();
    }
    lines.into_iter().map(str::to_string).collect()
}

fn rewrite(route: &str, lines: &[&str]) -> std::io::Result<()> {
    let path = file(route);
    let dir = path.parent().expect("a file under the cache directory");
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    for l in lines {
        writeln!(tmp, "{l}")?;
    }
    tmp.persist(&path).map(drop).map_err(|e| e.error)
}

/// The contents among `uploads` to send along with the request to the host at `route`: the small
/// ones it is not known to hold, read now and checked against the hash the request names.
pub fn inline_for(route: &str, uploads: &[Upload]) -> Vec<Inline> {
    let wanted: Vec<&Upload> = with_set(route, |set| {
        uploads
            .iter()
            .filter(|u| u.size <= INLINE_MAX && !set.contains(&u.sha256))
            .collect()
    });
    let mut total = 0;
    let mut out = Vec::new();
    for u in wanted {
        if total + u.size > INLINE_TOTAL || out.iter().any(|i: &Inline| i.sha256 == u.sha256) {
            continue;
        }
        // A file changed since it was hashed is left to the streamed path, which reports it.
        let Ok(bytes) = std::fs::read(&u.path) else {
            continue;
        };
        if hex::encode(sha2::Sha256::digest(&bytes)) != u.sha256 {
            continue;
        }
        total += u.size;
        out.push(Inline {
            sha256: u.sha256.clone(),
            data: base64::engine::general_purpose::STANDARD.encode(&bytes),
        });
    }
    out
}

/// The host at `route` now holds the contents of `uploads` (a request naming them is done).
pub fn record(route: &str, uploads: &[Upload]) {
    let new: Vec<String> = with_set(route, |set| {
        uploads
            .iter()
            .filter(|u| set.insert(u.sha256.clone()))
            .map(|u| u.sha256.clone())
            .collect()
    });
    if new.is_empty() {
        return;
    }
    // A hint that cannot be written costs the next run a round trip, nothing else.
    let path = file(route);
    let _ = std::fs::create_dir_all(path.parent().expect("a file under the cache directory"));
    let append = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path);
    if let Ok(mut f) = append {
        let _ = f.write_all(
            new.iter()
                .map(|s| format!("{s}\n"))
                .collect::<String>()
                .as_bytes(),
        );
    }
}
