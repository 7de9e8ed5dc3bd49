//! The channel to a running agent: start it through a transport, then exchange framed requests.

use super::agent_binary::AgentBinary;
use super::bootstrap;
use super::Secret;
use fixpoint_agent::protocol::{encode, Request, Response, AGENT_MAGIC, MAX_FRAME};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("{0}")]
    Connect(String),
    #[error("connection lost: {0}. The effect of the task in flight is unknown")]
    Lost(String),
    #[error("agent did not answer within {0:?}")]
    Timeout(Duration),
    #[error("protocol error: {0}")]
    Protocol(String),
}

/// How to reach one host, from its connection variables. `Debug` shows no password: it is a
/// `Secret`.
#[derive(Clone, Debug)]
pub struct ConnSpec {
    pub host: String,
    pub kind: ConnKind,
    pub become_user: Option<String>,
    pub become_password: Option<Secret>,
    /// `fixpoint_agent_path`: an agent binary to ship instead of the embedded one.
    pub agent_path: Option<PathBuf>,
    /// `fixpoint_state_dir`: where the agent keeps its lock, journal and outbox.
    pub state_dir: Option<String>,
    pub connect_timeout: Duration,
}

#[derive(Clone, Debug)]
pub enum ConnKind {
    Local,
    Ssh {
        address: String,
        port: Option<u16>,
        user: Option<String>,
        key_file: Option<PathBuf>,
        ssh_config: Option<PathBuf>,
        accept_new_host_keys: bool,
    },
}

/// A running agent and the channel to it.
pub struct AgentConn {
    host: String,
    writer: Writer,
    reader: BufReader<Reader>,
    stderr: Arc<StderrTail>,
    /// Keeps the child process (and the SSH session) alive for as long as the connection is used.
    _keep: Keep,
}

pub(super) enum Keep {
    Local(tokio::process::Child),
    Ssh(
        // Dropped in field order: the channel before the master connection.
        Box<openssh::Child<Arc<openssh::Session>>>,
        Arc<openssh::Session>,
    ),
}

type Reader = Box<dyn AsyncRead + Send + Unpin>;

/// The tail of what the host wrote on stderr (sudo, the bootstrap script, the agent), for
/// error messages. A chatty host must not grow memory without bound: past 64 KiB the oldest
/// 32 KiB go.
#[derive(Default)]
struct StderrTail(Mutex<String>);

impl StderrTail {
    fn push(&self, text: &str) {
        let mut s = self.lock();
        if s.len() > 64 * 1024 {
            // Host text: 32 KiB may fall inside a character, so cut after it.
            let cut = s.ceil_char_boundary(32 * 1024);
            s.drain(..cut);
        }
        s.push_str(text);
    }

    fn text(&self) -> String {
        self.lock().clone()
    }

    /// A panic while the lock was held cannot leave the text half-written (a push is one
    /// `drain` and one `push_str`, each complete or not run), so a poisoned lock is used as is:
    /// what the host said still belongs in the error message.
    fn lock(&self) -> std::sync::MutexGuard<'_, String> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// A started bootstrap script: its stdin, stdout, stderr, and what keeps it alive.
pub(super) struct Started {
    pub writer: Writer,
    pub reader: Reader,
    pub stderr: Reader,
    pub keep: Keep,
}

/// Start the agent on a host and say hello. `binary` (the agent to ship) is awaited together
/// with the SSH handshake, so loading an override costs no extra wall time.
pub async fn connect(
    spec: &ConnSpec,
    binary: impl std::future::Future<Output = Result<Arc<AgentBinary>, TransportError>>,
) -> Result<AgentConn, TransportError> {
    let (started, bin) = match &spec.kind {
        ConnKind::Local => {
            let bin = binary.await?;
            let script = bootstrap::script(spec, &bin.sha256, bin.gz.len());
            (super::local::start(&script)?, bin)
        }
        ConnKind::Ssh { .. } => super::ssh::start(spec, binary).await?,
    };
    let stderr = Arc::new(StderrTail::default());
    {
        let stderr = stderr.clone();
        let host = spec.host.clone();
        let mut errpipe = started.stderr;
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
        });
    }
    let mut conn = AgentConn {
        host: spec.host.clone(),
        writer: started.writer,
        reader: BufReader::new(started.reader),
        stderr,
        _keep: started.keep,
    };
    if let Some(pw) = &spec.become_password {
        conn.write_raw(format!("{}\n", pw.expose()).as_bytes())
            .await?;
    }
    // The first 8 bytes say whether the cache needs the binary or the agent is already up.
    let mut magic = [0u8; 8];
    conn.read_exact_or_lost(&mut magic).await?;
    if &magic == bootstrap::NEED_UPLOAD {
        conn.write_raw(&bin.gz).await?;
        conn.read_exact_or_lost(&mut magic).await?;
    }
    if &magic != AGENT_MAGIC {
        return Err(TransportError::Protocol(format!(
            "unexpected output from the host before the agent started: {:?}",
            String::from_utf8_lossy(&magic)
        )));
    }
    match conn
        .call(&Request::Hello, Some(spec.connect_timeout))
        .await?
    {
        Response::Hello { .. } => Ok(conn),
        other => Err(TransportError::Protocol(format!(
            "agent answered hello with {other:?}"
        ))),
    }
}

impl AgentConn {
    async fn write_raw(&mut self, bytes: &[u8]) -> Result<(), TransportError> {
        let res = async {
            self.writer.write_all(bytes).await?;
            self.writer.flush().await
        }
        .await;
        res.map_err(|e| self.lost(e.to_string()))
    }

    async fn read_exact_or_lost(&mut self, buf: &mut [u8]) -> Result<(), TransportError> {
        match self.reader.read_exact(buf).await {
            Ok(_) => Ok(()),
            Err(e) => Err(self.lost(e.to_string())),
        }
    }

    /// A "lost" error that carries what the host said on stderr (sudo, the bootstrap script...).
    fn lost(&self, why: String) -> TransportError {
        let said = self.stderr.text().trim().to_string();
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

    /// What the host printed on stderr so far (for failures before the agent started).
    pub fn stderr_text(&self) -> String {
        self.stderr.text()
    }

    /// Send one request and wait for its response, with an optional timeout.
    pub async fn call(
        &mut self,
        req: &Request,
        timeout: Option<Duration>,
    ) -> Result<Response, TransportError> {
        let exchange = async {
            self.write_raw(&encode(req)).await?;
            let mut len = [0u8; 4];
            self.read_exact_or_lost(&mut len).await?;
            let n = u32::from_be_bytes(len) as usize;
            if n > MAX_FRAME {
                return Err(TransportError::Protocol(format!("frame of {n} bytes")));
            }
            let mut body = vec![0u8; n];
            self.read_exact_or_lost(&mut body).await?;
            serde_json::from_slice::<Response>(&body)
                .map_err(|e| TransportError::Protocol(format!("bad response: {e}")))
        };
        match timeout {
            Some(t) => tokio::time::timeout(t, exchange)
                .await
                .map_err(|_| TransportError::Timeout(t))?,
            None => exchange.await,
        }
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    /// Close stdin (the agent exits) and wait for the child / master connection to end.
    pub async fn close(self) {
        let AgentConn {
            mut writer, _keep, ..
        } = self;
        let _ = writer.shutdown().await;
        drop(writer);
        match _keep {
            Keep::Local(mut child) => {
                let _ = child.wait().await;
            }
            Keep::Ssh(child, session) => {
                let _ = child.wait().await;
                if let Ok(session) = Arc::try_unwrap(session) {
                    let _ = session.close().await;
                }
            }
        }
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
            let _guard = t.0.lock();
            panic!("poison the lock");
        })
        .join();
        assert!(tail.0.is_poisoned());
        tail.push("more\n");
        assert_eq!(tail.text(), "sudo: a password is required\nmore\n");
    }
}
