//! The pull's result: the JSON lines a `--format json` run prints (collected from the reporter
//! while the run goes, whatever format stdout has), then one `pull` event, written atomically
//! to `--result-file` and/or POSTed to `--result-url` with bounded retries and backoff. Every
//! attempt of one run carries the same `Idempotency-Key`, so a receiver that got an attempt
//! whose answer was lost can tell the retry is the same result.

use fixpoint_modules::http::client;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The run's JSON lines, filled by the reporter (`Engine::tee_json`).
#[derive(Clone, Default)]
pub struct Collected(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Collected {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Collected {
    /// What was collected, followed by the `pull` event line.
    pub fn finish(&self, pull_event: &serde_json::Value) -> Vec<u8> {
        let mut out = self.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        out.extend_from_slice(pull_event.to_string().as_bytes());
        out.push(b'\n');
        out
    }
}

/// A key no other run uses: the host, the process, the time and randomness.
pub fn idempotency_key(host: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "fixpoint-pull-{host}-{}-{nanos}-{:016x}",
        std::process::id(),
        fastrand::u64(..)
    )
}

/// How long to wait before attempt `n` (1-based, n >= 2): 1 s, 2 s, 4 s... at most 30 s.
fn backoff(n: u32) -> Duration {
    Duration::from_secs((1u64 << (n.saturating_sub(2)).min(5)).min(30))
}

/// POST `body` to `url`, up to `attempts` times. A 2xx answer is success; a 4xx other than 408
/// and 429 is final (the receiver refuses this result; sending it again changes nothing).
pub fn post(url: &str, body: &[u8], key: &str, attempts: u32) -> Result<u16, String> {
    let attempts = attempts.max(1);
    let mut last = String::new();
    for n in 1..=attempts {
        if n > 1 {
            std::thread::sleep(backoff(n));
        }
        let mut req = client::Request::new(url, "POST");
        req.headers = vec![
            ("Content-Type".into(), "application/x-ndjson".into()),
            ("Idempotency-Key".into(), key.to_string()),
        ];
        req.body = Some(body.to_vec());
        req.timeout = Duration::from_secs(30);
        req.http_agent = format!("fixpoint/{}", env!("CARGO_PKG_VERSION"));
        req.follow = client::Follow::None;
        match client::send(&req) {
            Ok(resp) if (200..300).contains(&resp.status) => return Ok(resp.status),
            Ok(resp) => {
                last = format!("HTTP {} {}", resp.status, resp.reason);
                if (400..500).contains(&resp.status) && ![408, 429].contains(&resp.status) {
                    return Err(format!("{url} refused the result: {last}"));
                }
            }
            Err(e) => last = e.to_string(),
        }
        eprintln!("warning: posting the result to {url} (attempt {n} of {attempts}): {last}");
    }
    Err(format!(
        "could not post the result to {url} in {attempts} attempt(s): {last}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_a_bound() {
        let s: Vec<u64> = (2..=9).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(s, vec![1, 2, 4, 8, 16, 30, 30, 30]);
    }

    #[test]
    fn keys_differ_between_runs() {
        assert_ne!(idempotency_key("h"), idempotency_key("h"));
    }
}
