//! The SSH transport: one multiplexed master connection per host (the system ssh client, through
//! the `openssh` crate), and the bootstrap script on one channel of it.

use super::agent_binary::AgentBinary;
use super::bootstrap;
use super::channel::{ConnKind, ConnSpec, Keep, Started};
use super::TransportError;
use std::sync::Arc;
use std::time::Duration;

/// Open the master connection (while `binary` loads), or take the one `open_ahead` opened,
/// then start the bootstrap script.
pub(super) async fn start(
    spec: &ConnSpec,
    binary: impl std::future::Future<Output = Result<Arc<AgentBinary>, TransportError>>,
) -> Result<(Started, Arc<AgentBinary>), TransportError> {
    let handshake = async {
        match ahead(spec) {
            Some(opening) => opening.await.map_err(|e| {
                TransportError::Connect(format!("opening the SSH connection failed: {e}"))
            })?,
            None => open_master(spec).await,
        }
    };
    let (session, bin) = tokio::join!(handshake, binary);
    let session = Arc::new(session?);
    let bin = bin?;
    let script = bootstrap::script(spec, &bin);
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
    let started = Started {
        writer: Box::new(child.stdin().take().expect("piped")),
        reader: Box::new(child.stdout().take().expect("piped")),
        stderr: Box::new(child.stderr().take().expect("piped")),
        keep: Keep::Ssh(Box::new(child), session),
    };
    Ok((started, bin))
}

/// Start opening the master connection `spec` reaches in the background, unless one is opening
/// already: the controller prepares the host's first batch during the handshake, and the
/// agent's start (`start`) takes the connection. One that no agent takes is closed at the
/// run's end (`Handshakes::close_ahead`). Nothing for a local connection.
pub fn open_ahead(spec: &ConnSpec) {
    let ConnKind::Ssh { handshakes, .. } = &spec.kind else {
        return;
    };
    let spec = spec.clone();
    handshakes.put_ahead(destination(&spec), || {
        tokio::spawn(async move { open_master(&spec).await })
    });
}

/// The master connection opened ahead for `spec`'s destination, if any.
fn ahead(
    spec: &ConnSpec,
) -> Option<tokio::task::JoinHandle<Result<openssh::Session, TransportError>>> {
    match &spec.kind {
        ConnKind::Ssh { handshakes, .. } => handshakes.take_ahead(&destination(spec)),
        ConnKind::Local => None,
    }
}

/// What a master connection depends on: two specs with the same destination may share one
/// opened ahead.
fn destination(spec: &ConnSpec) -> String {
    match &spec.kind {
        ConnKind::Ssh {
            address,
            port,
            user,
            key_file,
            ssh_config,
            accept_new_host_keys,
            ..
        } => format!(
            "{address}\0{port:?}\0{user:?}\0{key_file:?}\0{ssh_config:?}\0{accept_new_host_keys}\0{:?}",
            spec.connect_timeout
        ),
        ConnKind::Local => String::new(),
    }
}

/// The master connection: the handshake, under a permit of the run's cap.
async fn open_master(spec: &ConnSpec) -> Result<openssh::Session, TransportError> {
    let ConnKind::Ssh {
        address,
        port,
        user,
        key_file,
        ssh_config,
        accept_new_host_keys,
        handshakes,
    } = &spec.kind
    else {
        // `channel::connect` calls this for `ConnKind::Ssh` only.
        unreachable!("ssh::start is called for SSH connections only")
    };
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
    // The permit covers the handshake only (until the master is authenticated and up): the
    // agent's start that follows costs this machine little CPU.
    let _permit = handshakes.acquire().await;
    b.connect_mux(address).await.map_err(|e| {
        TransportError::Connect(describe_ssh_error(&e, address, *accept_new_host_keys))
    })
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
