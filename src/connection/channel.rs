//! The channel to a running agent: start it through a transport, then exchange framed requests.

use super::agent_binary::AgentBinary;
use super::bootstrap;
use super::Secret;
use fixpoint_agent::protocol::{
    encode, frame_len, BatchStep, Request, RequestFrame, Response, ResponseFrame, AGENT_MAGIC,
    MAX_FRAME, MAX_RESPONSE_FRAME,
};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
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
    /// The request was not sent (the channel is as it was): it is larger than an agent takes.
    #[error("{0}")]
    TooLarge(String),
}

/// How to reach one host, from its connection variables. `Debug` shows no password: it is a
/// `Secret`.
#[derive(Clone, Debug)]
pub struct ConnSpec {
    pub host: String,
    pub kind: ConnKind,
    pub become_user: Option<String>,
    pub become_password: Option<Secret>,
    /// How the agent becomes `become_user`: sudo or su.
    pub become_method: BecomeMethod,
    /// `become_exe`: the sudo or su to run (default `sudo` or `su`).
    pub become_exe: Option<String>,
    /// `become_flags` that fixpoint passes to sudo or su (see `keywords::become_flags_of`).
    pub become_flags: Vec<String>,
    /// `fixpoint_agent_path`: an agent binary to ship instead of the embedded one.
    pub agent_path: Option<PathBuf>,
    /// `fixpoint_state_dir`: where the agent keeps its lock, journal and outbox.
    pub state_dir: Option<String>,
    pub connect_timeout: Duration,
}

/// The `become_method`s fixpoint becomes through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BecomeMethod {
    #[default]
    Sudo,
    /// `su`: the password, when the login user is not root, goes to su on its stdin.
    Su,
}

impl BecomeMethod {
    /// The method's name, which is also its default executable.
    pub fn name(self) -> &'static str {
        match self {
            BecomeMethod::Sudo => "sudo",
            BecomeMethod::Su => "su",
        }
    }
}

impl ConnSpec {
    /// The sudo or su to run.
    pub fn become_exe(&self) -> &str {
        self.become_exe
            .as_deref()
            .unwrap_or(self.become_method.name())
    }

    /// How this spec reaches its host: `local`, or the ssh user, address, port and key. Two
    /// specs with the same route (and become user) share an agent.
    pub fn route(&self) -> String {
        let reach = match &self.kind {
            ConnKind::Local => "local".into(),
            ConnKind::Ssh {
                address,
                port,
                user,
                key_file,
                ..
            } => format!(
                "ssh {}@{address}:{} {}",
                user.as_deref().unwrap_or(""),
                port.map(|p| p.to_string()).unwrap_or_default(),
                key_file
                    .as_ref()
                    .map(|k| k.display().to_string())
                    .unwrap_or_default()
            ),
        };
        // Another method, sudo or su, or other flags start another agent.
        match &self.become_user {
            Some(_) => format!(
                "{reach} {} {} {}",
                self.become_method.name(),
                self.become_exe(),
                self.become_flags.join(" ")
            ),
            None => reach,
        }
    }
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
        /// The run's cap on handshakes in flight (`--connect-concurrency`).
        handshakes: super::Handshakes,
    },
}

/// How much longer than a request's own timeout the controller waits for its answer: the agent
/// enforces the timeout itself (it kills what the request started and answers), and gives a
/// module that does not stop `watch::GRACE` before it answers for it and exits.
const ANSWER_GRACE: Duration = fixpoint_agent::watch::GRACE.saturating_add(Duration::from_secs(5));

/// A running agent and the channel to it.
pub struct AgentConn {
    host: String,
    /// The id of the last request sent; every answer must carry the id of its request.
    last_id: u64,
    /// Set when an exchange failed part way (lost, timed out, unreadable): the channel is out
    /// of step and no further request goes through it.
    broken: Option<String>,
    /// `--timeout`: the bound of each step of starting the agent, and of closing it.
    step_timeout: Duration,
    writer: Writer,
    reader: BufReader<Reader>,
    stderr: Arc<StderrTail>,
    /// The agent's `PROTOCOL_VERSION` (0: it predates batches).
    protocol: u32,
    /// Round trips (requests sent for an answer) so far, counted into the host's counter once
    /// `count_into` names one; until then here.
    round_trips: u64,
    counter: Option<Arc<AtomicU64>>,
    /// The batch in progress (its request id), whose steps `next_step` reads.
    batch: Option<u64>,
    /// A request `connect` sent behind `Hello` (its id and bound), whose answer `await_sent`
    /// reads.
    sent: Option<(u64, Duration)>,
    /// Requests sent with `post` whose answers (acknowledgements) are not read yet: they come
    /// before the answer of anything sent after them.
    unread: Vec<u64>,
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

mod stderr;
use stderr::{lost, StderrTail};

type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// A started bootstrap script: its stdin, stdout, stderr, and what keeps it alive.
pub(super) struct Started {
    pub writer: Writer,
    pub reader: Reader,
    pub stderr: Reader,
    pub keep: Keep,
}

/// Start the agent on a host and say hello. `binary` (the agent to ship) is awaited together
/// with the SSH handshake, so loading an override costs no extra wall time. `then` (the run's
/// `Begin`) goes right behind `Hello`, and `first` (a `Batch`) behind it when it fits: it is
/// taken then, and its answers come from `next_step` once `await_sent` read `then`'s.
pub async fn connect(
    spec: &ConnSpec,
    binary: impl std::future::Future<Output = Result<Arc<AgentBinary>, TransportError>>,
    then: Option<(Request, Duration)>,
    first: &mut Option<Request>,
) -> Result<AgentConn, TransportError> {
    let (started, bin) = match &spec.kind {
        ConnKind::Local => {
            let bin = binary.await?;
            let script = bootstrap::script(spec, &bin);
            (super::local::start(&script)?, bin)
        }
        ConnKind::Ssh { .. } => super::ssh::start(spec, binary).await?,
    };
    let stderr = StderrTail::collect(started.stderr, &spec.host);
    let mut conn = AgentConn {
        host: spec.host.clone(),
        last_id: 0,
        broken: None,
        step_timeout: spec.connect_timeout,
        writer: started.writer,
        reader: BufReader::new(started.reader),
        stderr,
        protocol: 0,
        round_trips: 0,
        counter: None,
        batch: None,
        sent: None,
        unread: Vec::new(),
        _keep: started.keep,
    };
    // Each step of the start is bounded by `--timeout`: a host that never prints the start
    // marker, or stops reading the upload, fails instead of holding the run.
    let t = spec.connect_timeout;
    if let Some(pw) = &spec.become_password {
        let line = format!("{}\n", pw.expose());
        bounded(
            t,
            "sending the become password",
            conn.write_raw(line.as_bytes()),
        )
        .await?;
    }
    // `Hello`, and `then` (the run's `Begin`) right behind it, go before the agent is known to
    // be there, after a line saying how long they are: the agent reads them as soon as it
    // starts, so the start costs no round trip of its own. A host that needs the agent first
    // drops them (`bootstrap::script`), and they are sent again once it runs. The agent
    // answers both in order; `await_sent` reads the second answer.
    let (id, mut bytes) = conn.frame(&Request::Hello, Some(t))?;
    let mut op = String::from("hello");
    if let Some((req, bound)) = then {
        let (then_id, more) = conn.frame(&req, Some(bound))?;
        bytes.extend(more);
        conn.sent = Some((then_id, bound));
    }
    // The first batch too, when the caller has it ready: the agent refuses it if `Begin`
    // fails (`not_begun`), so it never runs without the run's lock, and it costs no round trip
    // of its own. Too large a batch stays with the caller, whose `send_batch` says so.
    let mut early_batch = None;
    if let Some(req @ Request::Batch { steps }) = first.as_ref() {
        if let Ok((batch_id, more)) = conn.frame(req, None) {
            bytes.extend(more);
            op = format!("hello + {}", batch_op(steps));
            early_batch = Some(batch_id);
            *first = None;
        }
    }
    conn.count_round_trip(&op);
    let mut early = format!("{} {}\n", bootstrap::EARLY, bytes.len()).into_bytes();
    early.extend(&bytes);
    let wrote = bounded(t, "starting the agent", conn.write_raw(&early)).await;
    // The first 8 bytes say whether the cache needs the binary or the agent is already up.
    // A script that stops at once (`SU_NEEDS_PASSWORD`) may have closed its end before the
    // early bytes were all written: what it said decides, not the broken pipe.
    let mut magic = [0u8; 8];
    let said = match &wrote {
        Ok(()) | Err(TransportError::Lost(_)) => {
            bounded(
                t,
                "waiting for the agent to start",
                conn.read_exact_or_lost(&mut magic),
            )
            .await
        }
        Err(_) => Ok(()),
    };
    match (wrote, said) {
        (_, Ok(())) if &magic == bootstrap::SU_NEEDS_PASSWORD => {}
        (Err(e), _) | (Ok(()), Err(e)) => return Err(e),
        (Ok(()), Ok(())) => {}
    }
    let mut resend = false;
    let upload = match &magic {
        m if m == bootstrap::NEED_UPLOAD => Some(&bin.gz[..]),
        // The script asks for zstd only when the binary has a zstd form.
        m if m == bootstrap::NEED_UPLOAD_ZSTD => bin.zst.as_deref(),
        _ => None,
    };
    if let Some(upload) = upload {
        bounded(t, "sending the agent", conn.write_raw(upload)).await?;
        bounded(
            t,
            "waiting for the uploaded agent to start",
            conn.read_exact_or_lost(&mut magic),
        )
        .await?;
        resend = true;
    }
    if &magic == bootstrap::SU_NEEDS_PASSWORD {
        // As under ansible-core, where su waits for a password that never comes: unreachable.
        return Err(TransportError::Connect(format!(
            "become_method su needs the password of {} (the login user is not root): give it \
             with -K or ansible_become_password",
            spec.become_user.as_deref().unwrap_or("root")
        )));
    }
    if &magic != AGENT_MAGIC {
        // Something else spoke first (a login shell's `nologin` message, a profile's echo):
        // the rest of its line, as far as it comes at once, makes the message readable.
        let mut said = magic.to_vec();
        let mut rest = [0u8; 256];
        if let Ok(Ok(n)) =
            tokio::time::timeout(Duration::from_millis(500), conn.reader.read(&mut rest)).await
        {
            said.extend_from_slice(&rest[..n]);
        }
        let said = String::from_utf8_lossy(&said);
        let line = said.lines().next().unwrap_or_default();
        return Err(TransportError::Protocol(format!(
            "unexpected output from the host before the agent started: {line:?}"
        )));
    }
    let wait = t.saturating_add(ANSWER_GRACE);
    let hello = async {
        if resend {
            conn.write_raw(&bytes).await?;
        }
        conn.read_answer(id).await
    };
    let hello = tokio::time::timeout(wait, hello)
        .await
        .unwrap_or(Err(TransportError::Timeout(wait)))?;
    match hello {
        Response::Hello { protocol, .. } => {
            conn.protocol = protocol;
            conn.batch = early_batch;
            Ok(conn)
        }
        other => Err(TransportError::Protocol(format!(
            "agent answered hello with {other:?}"
        ))),
    }
}

/// `step` within `t`, or a timeout error that says which step it was.
async fn bounded<T>(
    t: Duration,
    what: &str,
    step: impl std::future::Future<Output = Result<T, TransportError>>,
) -> Result<T, TransportError> {
    tokio::time::timeout(t, step).await.map_err(|_| {
        TransportError::Connect(format!(
            "no progress within {t:?} while {what} (see --timeout)"
        ))
    })?
}

impl AgentConn {
    async fn write_raw(&mut self, bytes: &[u8]) -> Result<(), TransportError> {
        let res = async {
            self.writer.write_all(bytes).await?;
            self.writer.flush().await
        }
        .await;
        match res {
            Ok(()) => Ok(()),
            Err(e) => Err(lost(&self.stderr, e.to_string()).await),
        }
    }

    async fn read_exact_or_lost(&mut self, buf: &mut [u8]) -> Result<(), TransportError> {
        match self.reader.read_exact(buf).await {
            Ok(_) => Ok(()),
            Err(e) => Err(lost(&self.stderr, e.to_string()).await),
        }
    }

    /// What the host printed on stderr so far (for failures before the agent started).
    pub fn stderr_text(&self) -> String {
        self.stderr.text()
    }

    /// Send one request and wait for its answer. `timeout` goes to the agent, which stops the
    /// request when it passes and answers that it timed out; the controller waits
    /// `ANSWER_GRACE` longer for that answer before it gives up on the channel.
    pub async fn call(
        &mut self,
        req: &Request,
        timeout: Option<Duration>,
    ) -> Result<Response, TransportError> {
        self.call_noticed(req, timeout, &|_| {}).await
    }

    /// `call`, handing each `Response::Notice` the agent sends before its answer to `notice`
    /// (the wait is still bounded by `timeout` as a whole).
    pub async fn call_noticed(
        &mut self,
        req: &Request,
        timeout: Option<Duration>,
        notice: &(dyn Fn(&str) + Sync),
    ) -> Result<Response, TransportError> {
        self.ready_for_request()?;
        let (id, bytes) = self.frame(req, timeout)?;
        self.count_round_trip(match req {
            Request::Run { module, .. } => module,
            _ => req.op(),
        });
        let exchange = async {
            self.write_raw(&bytes).await?;
            self.read_unread().await?;
            loop {
                match self.read_answer(id).await? {
                    Response::Notice { msg } => notice(&msg),
                    resp => return Ok(resp),
                }
            }
        };
        let res = match timeout {
            Some(t) => {
                let wait = t.saturating_add(ANSWER_GRACE);
                tokio::time::timeout(wait, exchange)
                    .await
                    .unwrap_or(Err(TransportError::Timeout(wait)))
            }
            None => exchange.await,
        };
        if let Err(e) = &res {
            self.broken = Some(e.to_string());
        }
        res
    }

    /// A request may go: the channel is in step, and no batch is in progress.
    fn ready_for_request(&self) -> Result<(), TransportError> {
        if let Some(why) = &self.broken {
            return Err(TransportError::Protocol(format!(
                "the channel to the agent is out of step after an earlier failure ({why})"
            )));
        }
        if self.batch.is_some() {
            return Err(TransportError::Protocol(
                "internal error: a request while a batch is in progress".into(),
            ));
        }
        Ok(())
    }

    /// Send `req`, whose answer only acknowledges it (`HandlerDone`), without waiting for that
    /// answer: no round trip of its own. The answer is read before the next one the channel
    /// waits for; a failure it reports is logged.
    pub async fn post(&mut self, req: &Request) -> Result<(), TransportError> {
        self.ready_for_request()?;
        let (id, bytes) = self.frame(req, None)?;
        if let Err(e) = self.write_raw(&bytes).await {
            self.broken = Some(e.to_string());
            return Err(e);
        }
        self.unread.push(id);
        Ok(())
    }

    /// Read the answers to the requests `post` sent.
    async fn read_unread(&mut self) -> Result<(), TransportError> {
        for id in std::mem::take(&mut self.unread) {
            loop {
                match read_frame(&mut self.reader, &self.stderr, id).await? {
                    Response::Notice { .. } => continue,
                    Response::Failed { msg, .. } => {
                        tracing::warn!(host = %self.host, "the agent refused a request: {msg}");
                    }
                    _ => {}
                }
                break;
            }
        }
        Ok(())
    }

    /// The answer to the request `connect` sent behind `Hello`, handing each `Notice` before it
    /// to `notice` (as `call_noticed`).
    pub async fn await_sent(
        &mut self,
        notice: &(dyn Fn(&str) + Sync),
    ) -> Result<Response, TransportError> {
        let Some((id, bound)) = self.sent.take() else {
            return Err(TransportError::Protocol(
                "internal error: no request was sent with hello".into(),
            ));
        };
        let exchange = async {
            loop {
                match self.read_answer(id).await? {
                    Response::Notice { msg } => notice(&msg),
                    resp => return Ok(resp),
                }
            }
        };
        let wait = bound.saturating_add(ANSWER_GRACE);
        let res = tokio::time::timeout(wait, exchange)
            .await
            .unwrap_or(Err(TransportError::Timeout(wait)));
        if let Err(e) = &res {
            self.broken = Some(e.to_string());
        }
        res
    }

    /// The next request's id and its frame, or `TooLarge` (nothing sent, the id not used).
    fn frame(
        &mut self,
        req: &Request,
        timeout: Option<Duration>,
    ) -> Result<(u64, Vec<u8>), TransportError> {
        let id = self.last_id + 1;
        let frame = RequestFrame {
            id,
            timeout_ms: timeout.map(millis),
            req: req.clone(),
        };
        let bytes = encode(&frame);
        if bytes.len() - 4 > MAX_FRAME {
            return Err(TransportError::TooLarge(format!(
                "the request is {} bytes, larger than the {} MiB an agent takes; a `content` or a \
                 rendered template this large cannot be sent inline: write it to a file on the \
                 controller and use `copy` with `src`, which streams it",
                bytes.len() - 4,
                MAX_FRAME / (1024 * 1024)
            )));
        }
        self.last_id = id;
        Ok((id, bytes))
    }

    fn count_round_trip(&mut self, op: &str) {
        // `FIXPOINT_LOG=fixpoint::round_trips=debug` lists them, to see where a run's go.
        tracing::debug!(target: "fixpoint::round_trips", op, "round trip");
        match &self.counter {
            Some(c) => {
                c.fetch_add(1, Ordering::Relaxed);
            }
            None => self.round_trips += 1,
        }
    }

    /// Count this agent's round trips (those so far too) into `counter`, the host's.
    pub fn count_into(&mut self, counter: &Arc<AtomicU64>) {
        if self
            .counter
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(c, counter))
        {
            return;
        }
        counter.fetch_add(std::mem::take(&mut self.round_trips), Ordering::Relaxed);
        self.counter = Some(counter.clone());
    }

    /// Whether the agent takes `Batch` requests (an older one, shipped with
    /// `fixpoint_agent_path`, does not).
    pub fn takes_batches(&self) -> bool {
        self.protocol >= 1
    }

    /// Whether the agent takes gated batch steps and `OpenGate` (protocol 2).
    pub fn takes_gates(&self) -> bool {
        self.protocol >= 2
    }

    /// Open gate `upto` of the batch in progress (`Request::OpenGate`): no answer, so no
    /// round trip.
    pub async fn open_gate(&mut self, upto: u32) -> Result<(), TransportError> {
        let Some(id) = self.batch else {
            return Ok(());
        };
        let bytes = encode(&RequestFrame {
            id,
            timeout_ms: None,
            req: Request::OpenGate { upto },
        });
        if let Err(e) = self.write_raw(&bytes).await {
            self.broken = Some(e.to_string());
            return Err(e);
        }
        Ok(())
    }

    /// Send a `Batch` (one round trip, whatever its length); its answers come from
    /// `next_step`, in order, and no other request goes through the channel until `next_step`
    /// says it ended. `TooLarge`: nothing was sent.
    pub async fn send_batch(&mut self, steps: Vec<BatchStep>) -> Result<(), TransportError> {
        if let Some(why) = &self.broken {
            return Err(TransportError::Protocol(format!(
                "the channel to the agent is out of step after an earlier failure ({why})"
            )));
        }
        let op = batch_op(&steps);
        let (id, bytes) = self.frame(&Request::Batch { steps }, None)?;
        self.count_round_trip(&op);
        if let Err(e) = self.write_raw(&bytes).await {
            self.broken = Some(e.to_string());
            return Err(e);
        }
        self.batch = Some(id);
        Ok(())
    }

    /// The next answer of the batch in progress: `Some((step index, answer))`, or `None` once
    /// the batch ended. `wait` bounds the wait (the step's own timeout; `ANSWER_GRACE` is
    /// added). When `cancel` resolves first, the agent is told to start no further step
    /// (`CancelBatch`), and the wait goes on for the step in progress.
    pub async fn next_step(
        &mut self,
        wait: Option<Duration>,
        cancel: impl std::future::Future<Output = ()>,
    ) -> Result<Option<(usize, Response)>, TransportError> {
        let Some(id) = self.batch else {
            return Ok(None);
        };
        if !self.unread.is_empty() {
            if let Err(e) = self.read_unread().await {
                self.broken = Some(e.to_string());
                self.batch = None;
                return Err(e);
            }
        }
        let AgentConn {
            reader,
            writer,
            stderr,
            ..
        } = &mut *self;
        let stderr: &StderrTail = stderr;
        let exchange = async {
            tokio::pin!(cancel);
            let mut cancelled = false;
            loop {
                let read = read_frame(reader, stderr, id);
                tokio::pin!(read);
                let answer = loop {
                    tokio::select! {
                        answer = &mut read => break answer,
                        () = &mut cancel, if !cancelled => {
                            cancelled = true;
                            let bytes = encode(&RequestFrame {
                                id,
                                timeout_ms: None,
                                req: Request::CancelBatch,
                            });
                            let sent = async {
                                writer.write_all(&bytes).await?;
                                writer.flush().await
                            }
                            .await;
                            if let Err(e) = sent {
                                return Err(lost(stderr, e.to_string()).await);
                            }
                        }
                    }
                };
                match answer {
                    // Said about a step in progress (nothing asks for notices in a batch).
                    Ok(Response::Notice { .. }) => continue,
                    other => return other,
                }
            }
        };
        let res = match wait {
            Some(t) => {
                let wait = t.saturating_add(ANSWER_GRACE);
                tokio::time::timeout(wait, exchange)
                    .await
                    .unwrap_or(Err(TransportError::Timeout(wait)))
            }
            None => exchange.await,
        };
        let res = match res {
            Ok(Response::Step { index, resp }) => return Ok(Some((index, *resp))),
            Ok(Response::BatchEnd { .. }) => {
                self.batch = None;
                return Ok(None);
            }
            // The agent's watchdog answers for a step whose module did not stop, then exits:
            // the step's answer, and the batch's (and the channel's) end.
            Ok(resp @ Response::Failed { .. }) => {
                self.batch = None;
                self.broken = Some("the agent exited after a module that did not stop".into());
                return Ok(Some((usize::MAX, resp)));
            }
            Ok(other) => Err(TransportError::Protocol(format!(
                "the agent answered a batch with {other:?}"
            ))),
            Err(e) => Err(e),
        };
        if let Err(e) = &res {
            self.broken = Some(e.to_string());
            self.batch = None;
        }
        res
    }

    /// Read one frame from the agent, which must carry request `id`'s id.
    async fn read_answer(&mut self, id: u64) -> Result<Response, TransportError> {
        read_frame(&mut self.reader, &self.stderr, id).await
    }

    /// Whether an exchange failed part way, leaving the channel unusable.
    pub fn is_broken(&self) -> bool {
        self.broken.is_some()
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    /// Close stdin (the agent exits, stopping a request still in progress, which releases the
    /// host lock) and wait for the child / master connection to end. Each wait is bounded: an
    /// agent that does not go is killed (local) or its channel dropped (SSH). An SSH agent with
    /// nothing in progress and every answer read is not waited for: it only has to exit, and
    /// the master connection, told to stop listening, ends by itself once it has (its exit
    /// would cost a round trip).
    pub async fn close(self) {
        let settled = self.broken.is_none()
            && self.batch.is_none()
            && self.sent.is_none()
            && self.unread.is_empty();
        let AgentConn {
            mut writer,
            reader,
            _keep,
            step_timeout,
            ..
        } = self;
        // An answer still coming must not block the agent on a full pipe while it is waited for.
        drop(reader);
        let _ = tokio::time::timeout(step_timeout, writer.shutdown()).await;
        drop(writer);
        let bound = step_timeout.saturating_add(ANSWER_GRACE);
        match _keep {
            Keep::Local(mut child) => {
                if tokio::time::timeout(bound, child.wait()).await.is_err() {
                    let _ = child.kill().await;
                }
            }
            Keep::Ssh(child, session) => {
                if settled {
                    // It holds the session too: the session closes once it is the last.
                    drop(child);
                } else {
                    let _ = tokio::time::timeout(bound, child.wait()).await;
                }
                if let Ok(session) = Arc::try_unwrap(session) {
                    let _ = tokio::time::timeout(step_timeout, session.close()).await;
                }
            }
        }
    }
}

/// A batch as the round-trip trace names it: by its steps' modules, to see which tasks share
/// the round trip.
fn batch_op(steps: &[BatchStep]) -> String {
    steps.iter().fold(String::from("batch:"), |mut op, s| {
        if let Request::Run { module, .. } = &s.run {
            op.push(' ');
            op.push_str(module);
        }
        op
    })
}

/// A request's timeout in milliseconds, as the agent takes it.
fn millis(t: Duration) -> u64 {
    u64::try_from(t.as_millis()).unwrap_or(u64::MAX)
}

/// Read one frame from the agent, which must carry request `id`'s id.
async fn read_frame(
    reader: &mut BufReader<Reader>,
    stderr: &StderrTail,
    id: u64,
) -> Result<Response, TransportError> {
    let mut len = [0u8; 4];
    if let Err(e) = reader.read_exact(&mut len).await {
        return Err(lost(stderr, e.to_string()).await);
    }
    let n = frame_len(len, MAX_RESPONSE_FRAME)
        .map_err(|e| TransportError::Protocol(format!("the agent's answer: {e}")))?;
    // Grown as bytes arrive: a length that lies costs nothing.
    let mut body = Vec::new();
    let got = match reader.take(n as u64).read_to_end(&mut body).await {
        Ok(got) => got,
        Err(e) => return Err(lost(stderr, e.to_string()).await),
    };
    if got != n {
        return Err(lost(stderr, "the agent's channel closed inside an answer".into()).await);
    }
    let answer = serde_json::from_slice::<ResponseFrame>(&body).map_err(|e| {
        TransportError::Protocol(format!("the agent's answer is not readable: {e}"))
    })?;
    if answer.id != id {
        return Err(TransportError::Protocol(format!(
            "the agent answered request {} while request {id} was waiting: the channel is out of step",
            answer.id
        )));
    }
    Ok(answer.resp)
}
