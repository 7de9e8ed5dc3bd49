//! Transports: start the agent on a host (local child process or over one SSH master connection) and exchange frames with it.
//!
//! Both transports run the same bootstrap shell script, so `localhost` and remote hosts share one
//! code path: check the host can run this build, find (or receive) the agent binary in a private
//! cache directory keyed by sha256, optionally go through sudo, and exec `fixpoint agent`.

use crate::protocol::{encode, Request, Response, MAX_FRAME};
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

/// Written by the agent before its first frame: the controller knows the agent (not a shell
/// message, a motd or sudo's lecture) is now speaking.
pub const AGENT_MAGIC: &[u8; 8] = b"FXPAGNT1";
/// Written by the bootstrap script when the cached agent is missing: send the binary now.
const NEED_UPLOAD: &[u8; 8] = b"FXPNEED1";

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

/// How to reach one host, from its connection variables.
#[derive(Clone, Debug)]
pub struct ConnSpec {
    pub host: String,
    pub kind: ConnKind,
    pub become_user: Option<String>,
    pub become_password: Option<String>,
    /// `fixpoint_agent_path`: an agent binary to ship instead of this executable.
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
    stderr: Arc<Mutex<String>>,
    /// Keeps the child process (and the SSH session) alive for as long as the connection is used.
    _keep: Keep,
}

enum Keep {
    Local(tokio::process::Child),
    Ssh(
        // Dropped in field order: the channel before the master connection.
        Box<openssh::Child<Arc<openssh::Session>>>,
        Arc<openssh::Session>,
    ),
}

/// The agent executable to ship: this binary (or `fixpoint_agent_path`), hashed once per run.
/// The bytes are read only when a host's cache lacks this digest.
pub struct AgentBinary {
    pub path: PathBuf,
    pub sha256: String,
    pub size: u64,
}

impl AgentBinary {
    /// Hash the file as a stream (blocking: call it off the async runtime).
    pub fn load(path: PathBuf) -> Result<AgentBinary, TransportError> {
        let fail = |e: std::io::Error| {
            TransportError::Connect(format!("cannot read agent binary {}: {e}", path.display()))
        };
        let mut file = std::fs::File::open(&path).map_err(fail)?;
        let mut hasher = Sha256::new();
        let size = std::io::copy(&mut file, &mut hasher).map_err(fail)?;
        Ok(AgentBinary {
            sha256: hex::encode(hasher.finalize()),
            path,
            size,
        })
    }
}

fn this_exe() -> PathBuf {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| std::env::current_exe().unwrap_or_else(|_| PathBuf::from("fixpoint")))
        .clone()
}

/// The architecture name `uname -m` reports for the machine this build runs on.
fn build_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86" => "i686",
        "arm" => "armv7l",
        other => other,
    }
}

fn sh_quote(s: &str) -> String {
    fixpoint_modules::fs::shell_quote(s)
}

/// The bootstrap script. `cached` = Some((sha, size)) ships the agent into the cache directory;
/// None runs `direct` as the agent (the local transport).
fn bootstrap_script(spec: &ConnSpec, cached: Option<(&str, u64)>, direct: &str) -> String {
    let mut s = String::from("set -u\numask 077\n");
    if let Some((sha, size)) = cached {
        s.push_str(&format!(
            r#"d="${{XDG_CACHE_HOME:-$HOME/.cache}}/fixpoint"
[ -d "$d" ] || mkdir -p "$d" || {{ echo "cannot create the agent cache directory $d" >&2; exit 98; }}
if [ -L "$d" ] || [ ! -O "$d" ] || [ -n "$(find "$d" -maxdepth 0 -perm /022)" ]; then
  echo "refusing the agent cache directory $d: it must be a directory owned by $(id -un) and not group- or world-writable (fix: chmod 700 $d, or remove it)" >&2; exit 98
fi
f="$d/fixpoint-{sha}"
if [ ! -x "$f" ]; then
  # Only a host without this agent needs the platform check (it costs two forks).
  os=$(uname -s); arch=$(uname -m)
  if [ "$os" != Linux ] || [ "$arch" != {arch} ]; then
    echo "host runs $os $arch, but this fixpoint agent is built for Linux {arch}; build fixpoint for that target and set the host variable fixpoint_agent_path to it" >&2; exit 96
  fi
  printf FXPNEED1
  t="$f.tmp.$$"
  if head -c {size} > "$t" && echo "{sha}  $t" | sha256sum -c --status; then
    chmod 700 "$t" && mv -f "$t" "$f"
  else
    rm -f "$t"; echo "the uploaded agent binary does not match its sha256 {sha}" >&2; exit 99
  fi
fi
"#,
            arch = build_arch(),
        ));
    } else {
        s.push_str(&format!("f={}\n", sh_quote(direct)));
    }
    match (&spec.become_user, &spec.become_password) {
        (None, _) => s.push_str("exec \"$f\" agent\n"),
        (Some(user), None) => s.push_str(&format!(
            "exec sudo -n -u {} -- \"$f\" agent\n",
            sh_quote(user)
        )),
        (Some(user), Some(_)) => {
            // The password arrives as the first line of stdin and reaches sudo through an askpass
            // helper that reads it from the environment: never in argv, never in a file or a log.
            s.push_str(&format!(
                r#"IFS= read -r FIXPOINT_BECOME_PASS; export FIXPOINT_BECOME_PASS
a=$(mktemp "${{TMPDIR:-/tmp}}/fixpoint-askpass.XXXXXX") || exit 98
printf '#!/bin/sh\nprintf "%%s\\n" "$FIXPOINT_BECOME_PASS"\n' > "$a"; chmod 700 "$a"
SUDO_ASKPASS="$a" sudo -A -k -p fixpoint -u {user} -- "$f" agent
r=$?; rm -f "$a"; exit $r
"#,
                user = sh_quote(user)
            ));
        }
    }
    s
}

type Reader = Box<dyn AsyncRead + Send + Unpin>;
type Writer = Box<dyn AsyncWrite + Send + Unpin>;
/// A started bootstrap: its stdin, stdout, stderr, what keeps it alive, and the binary to upload.
type Started = (Writer, Reader, Reader, Keep, Option<Arc<AgentBinary>>);

/// Start the agent on a host and say hello. `binary` (the agent to ship over SSH) is awaited
/// together with the SSH handshake, so hashing it costs no extra wall time.
pub async fn connect(
    spec: &ConnSpec,
    binary: impl std::future::Future<Output = Result<Arc<AgentBinary>, TransportError>>,
) -> Result<AgentConn, TransportError> {
    let stderr = Arc::new(Mutex::new(String::new()));
    let (writer, reader, errpipe, keep, upload): Started = match &spec.kind {
        ConnKind::Local => {
            let direct = match &spec.agent_path {
                Some(p) => p.clone(),
                None => this_exe(),
            };
            let script = bootstrap_script(spec, None, &direct.to_string_lossy());
            let mut child = tokio::process::Command::new("/bin/sh")
                .arg("-c")
                .arg(script)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| {
                    TransportError::Connect(format!("cannot start the local agent: {e}"))
                })?;
            let w = Box::new(child.stdin.take().expect("piped"));
            let r = Box::new(child.stdout.take().expect("piped"));
            let e = Box::new(child.stderr.take().expect("piped"));
            (w, r, e, Keep::Local(child), None)
        }
        ConnKind::Ssh {
            address,
            port,
            user,
            key_file,
            ssh_config,
            accept_new_host_keys,
        } => {
            let mut b = openssh::SessionBuilder::default();
            b.known_hosts_check(if *accept_new_host_keys {
                openssh::KnownHosts::Add
            } else {
                openssh::KnownHosts::Strict
            })
            .connect_timeout(spec.connect_timeout)
            .server_alive_interval(Duration::from_secs(15))
            .control_directory(std::env::temp_dir())
            // A controller killed with SIGKILL cannot close its master connection: let the
            // master go by itself once idle, so nothing lingers.
            .control_persist(openssh::ControlPersist::IdleFor(
                std::num::NonZeroUsize::new(60).expect("non-zero"),
            ));
            if let Some(p) = port {
                b.port(*p);
            }
            if let Some(u) = user {
                b.user(u.clone());
            }
            if let Some(k) = key_file {
                b.keyfile(k);
            }
            if let Some(c) = ssh_config {
                b.config_file(c);
            }
            let (session, bin) = tokio::join!(b.connect_mux(address), binary);
            let session = session.map_err(|e| {
                TransportError::Connect(describe_ssh_error(&e, address, *accept_new_host_keys))
            })?;
            let session = Arc::new(session);
            let bin = bin?;
            let script = bootstrap_script(spec, Some((&bin.sha256, bin.size)), "");
            let mut child = session
                .clone()
                .arc_command("sh")
                .arg("-c")
                .arg(&script)
                .stdin(openssh::Stdio::piped())
                .stdout(openssh::Stdio::piped())
                .stderr(openssh::Stdio::piped())
                .spawn()
                .await
                .map_err(|e| TransportError::Connect(format!("cannot start the agent: {e}")))?;
            let w = Box::new(child.stdin().take().expect("piped"));
            let r = Box::new(child.stdout().take().expect("piped"));
            let e = Box::new(child.stderr().take().expect("piped"));
            (w, r, e, Keep::Ssh(Box::new(child), session), Some(bin))
        }
    };
    {
        let stderr = stderr.clone();
        let host = spec.host.clone();
        let mut errpipe = errpipe;
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = errpipe.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                tracing::debug!(host = %host, "agent stderr: {}", text.trim_end());
                let mut s = stderr.lock().expect("stderr buffer");
                // Keep the tail only: a chatty agent must not grow memory without bound.
                if s.len() > 64 * 1024 {
                    s.drain(..32 * 1024);
                }
                s.push_str(&text);
            }
        });
    }
    let mut conn = AgentConn {
        host: spec.host.clone(),
        writer,
        reader: BufReader::new(reader),
        stderr,
        _keep: keep,
    };
    if let Some(pw) = &spec.become_password {
        conn.write_raw(format!("{pw}\n").as_bytes()).await?;
    }
    // The first 8 bytes say whether the cache needs the binary or the agent is already up.
    let mut magic = [0u8; 8];
    conn.read_exact_or_lost(&mut magic).await?;
    if &magic == NEED_UPLOAD {
        let bin = upload.expect("only the ssh transport asks for an upload");
        let bytes = tokio::fs::read(&bin.path).await.map_err(|e| {
            TransportError::Connect(format!(
                "cannot read agent binary {}: {e}",
                bin.path.display()
            ))
        })?;
        conn.write_raw(&bytes).await?;
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

fn describe_ssh_error(e: &openssh::Error, address: &str, accept_new: bool) -> String {
    let text = format!("{e}");
    let detail = match e {
        openssh::Error::Connect(io) => io.to_string(),
        _ => text.clone(),
    };
    if detail.contains("Host key verification failed")
        || detail.contains("REMOTE HOST IDENTIFICATION HAS CHANGED")
        || detail.contains("No ED25519 host key is known")
        || detail.contains("host key")
    {
        let hint = if accept_new {
            "the host key changed: if that is expected, remove the old key with `ssh-keygen -R`"
        } else {
            "strict host key checking is on: add the host's key to known_hosts (ssh-keyscan, or log in once with ssh), or pass --accept-new-host-keys to trust unknown hosts on first contact"
        };
        return format!("host key verification failed for {address}: {detail}; {hint}");
    }
    format!("cannot connect to {address}: {detail}")
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
        let said = self
            .stderr
            .lock()
            .expect("stderr buffer")
            .trim()
            .to_string();
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
        self.stderr.lock().expect("stderr buffer").clone()
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
