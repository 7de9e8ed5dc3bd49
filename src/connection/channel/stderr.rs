//! The tail of what a host writes on the agent's stderr (sudo, the bootstrap script, the agent),
//! kept for the error message of a channel that is lost.

use super::{Reader, TransportError};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// The tail of what the host wrote on stderr (sudo, the bootstrap script, the agent), for
/// error messages. A chatty host must not grow memory without bound: past 64 KiB the oldest
/// 32 KiB go.
pub(super) struct StderrTail {
    text: Mutex<String>,
    /// Set when the host closed stderr: a lost channel's message waits for it (bounded), so
    /// that it carries everything the host said, not what had arrived by chance.
    closed: tokio::sync::watch::Sender<bool>,
}

impl Default for StderrTail {
    fn default() -> Self {
        StderrTail {
            text: Mutex::default(),
            closed: tokio::sync::watch::Sender::new(false),
        }
    }
}

impl StderrTail {
    /// Read the host's stderr into a new tail until it closes (each chunk also goes to the
    /// debug log under `host`).
    pub(super) fn collect(mut errpipe: Reader, host: &str) -> Arc<StderrTail> {
        let tail = Arc::new(StderrTail::default());
        let stderr = tail.clone();
        let host = host.to_string();
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = errpipe.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                tracing::debug!(host = %host, "agent stderr: {}", text.trim_end());
                stderr.push(&text);
            }
            stderr.closed.send_replace(true);
        });
        tail
    }

    /// Wait until the host closed stderr, at most `bound`.
    async fn closed(&self, bound: Duration) {
        let mut rx = self.closed.subscribe();
        let _ = tokio::time::timeout(bound, rx.wait_for(|closed| *closed)).await;
    }

    fn push(&self, text: &str) {
        let mut s = self.lock();
        if s.len() > 64 * 1024 {
            // Host text: 32 KiB may fall inside a character, so cut after it.
            let cut = s.ceil_char_boundary(32 * 1024);
            s.drain(..cut);
        }
        s.push_str(text);
    }

    pub(super) fn text(&self) -> String {
        self.lock().clone()
    }

    /// A panic while the lock was held cannot leave the text half-written (a push is one
    /// `drain` and one `push_str`, each complete or not run), so a poisoned lock is used as is:
    /// what the host said still belongs in the error message.
    fn lock(&self) -> std::sync::MutexGuard<'_, String> {
        self.text
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A "lost" error that carries what the host said on stderr (sudo, the bootstrap script...).
/// The host's stderr closes with the channel; its last words may still be in flight.
pub(super) async fn lost(stderr: &StderrTail, why: String) -> TransportError {
    stderr.closed(Duration::from_secs(2)).await;
    let said = stderr.text().trim().to_string();
    let why = if why.contains("early eof") || why.contains("unexpected end") {
        "the agent's channel closed".to_string()
    } else {
        why
    };
    if said.is_empty() {
        TransportError::Lost(why)
    } else {
        TransportError::Lost(format!("{why}; the host said: {said}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stderr_tail_is_cut_at_a_character_and_stays_bounded() {
        let tail = StderrTail::default();
        // Chunks of two-byte characters and a newline, as the reader gets them, after a first
        // line of one byte: 32 KiB falls inside a character.
        let chunk = format!("{}\n", "é".repeat(2047));
        tail.push("\n");
        for _ in 0..100 {
            tail.push(&chunk);
        }
        let text = tail.text();
        assert!(text.len() <= 64 * 1024 + chunk.len(), "{}", text.len());
        assert!(text.ends_with(&chunk));
        assert!(text.chars().all(|c| c == 'é' || c == '\n'));
    }

    #[test]
    fn a_poisoned_stderr_tail_is_still_read_and_written() {
        let tail = Arc::new(StderrTail::default());
        tail.push("sudo: a password is required\n");
        let t = tail.clone();
        let _ = std::thread::spawn(move || {
            let _guard = t.text.lock();
            panic!("poison the lock");
        })
        .join();
        assert!(tail.text.is_poisoned());
        tail.push("more\n");
        assert_eq!(tail.text(), "sudo: a password is required\nmore\n");
    }
}
