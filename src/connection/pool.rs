//! The pool of live agents: one per (host, delegated host, become user), started on first use
//! with the run's `Begin` handshake, and closed all together at the end of the run.

use crate::journal::OutboxEntry;
use crate::protocol::{Request, Response};
use crate::transport::{self, AgentBinary, AgentConn, ConnSpec, TransportError};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Which agent of a host: the host this task is delegated to (None: the host itself), and the
/// become user.
pub type ConnKey = (Option<String>, Option<String>);

/// A host's agents, by (delegated host, become user).
pub type Conns = HashMap<ConnKey, AgentConn>;

/// The agent binary shipped to hosts, loaded and hashed once per run (or why it could not be).
pub type AgentCache = tokio::sync::OnceCell<Result<Arc<AgentBinary>, String>>;

/// The agent a spec reaches, among the agents of `host`.
pub fn key(host: &str, spec: &ConnSpec) -> ConnKey {
    let delegate = (spec.host != host).then(|| spec.host.clone());
    (delegate, spec.become_user.clone())
}

/// The agent to ship, hashed once per run on a blocking thread (`fixpoint_agent_path` names
/// another binary, loaded each time).
pub async fn agent_binary(
    cache: &AgentCache,
    spec: &ConnSpec,
) -> Result<Arc<AgentBinary>, TransportError> {
    let load = |path: PathBuf| async move {
        tokio::task::spawn_blocking(move || AgentBinary::load(path).map(Arc::new))
            .await
            .map_err(|e| TransportError::Connect(format!("hashing the agent failed: {e}")))?
    };
    if let Some(p) = &spec.agent_path {
        return load(p.clone()).await;
    }
    cache
        .get_or_init(|| async {
            let exe = std::env::current_exe().map_err(|e| e.to_string())?;
            load(exe).await.map_err(|e| e.to_string())
        })
        .await
        .clone()
        .map_err(TransportError::Connect)
}

/// The agent for `key`, started on first use. A new agent gets `begin()` first (the `Begin`
/// request and how long it may take): it opens the host's state directory and takes the run
/// lock before it does anything else, and answers with the handler notifications earlier runs
/// left pending, which are added to `pending`.
/// Errors say whether the host is unreachable (true) or failed (false).
pub async fn get_or_start<'c>(
    conns: &'c mut Conns,
    key: ConnKey,
    spec: &ConnSpec,
    binary: &AgentCache,
    begin: impl FnOnce() -> (Request, Duration),
    pending: &mut Vec<OutboxEntry>,
) -> Result<&'c mut AgentConn, (bool, String)> {
    if !conns.contains_key(&key) {
        let mut conn = transport::connect(spec, agent_binary(binary, spec))
            .await
            .map_err(|e| {
                let msg = match &spec.become_user {
                    Some(u) => format!("{e} (while starting the agent as `{u}` through sudo)"),
                    None => e.to_string(),
                };
                (true, msg)
            })?;
        let (begin, timeout) = begin();
        match conn.call(&begin, Some(timeout)).await {
            Ok(Response::Begun { pending: found, .. }) => {
                // A delegated host's pending handlers belong to that host, not this one.
                let found = if key.0.is_some() { Vec::new() } else { found };
                for p in found {
                    if !pending.contains(&p) {
                        pending.push(p);
                    }
                }
            }
            Ok(Response::Failed { msg, .. }) => {
                conn.close().await;
                return Err((false, msg));
            }
            Ok(other) => return Err((false, format!("unexpected answer to begin: {other:?}"))),
            Err(e) => return Err((true, e.to_string())),
        }
        conns.insert(key.clone(), conn);
    }
    Ok(conns.get_mut(&key).expect("just inserted"))
}

/// Close these agents and their master connections all at once: each close waits for the agent
/// to exit and the master to go, and doing them one by one adds up.
pub async fn close_all(conns: impl IntoIterator<Item = AgentConn>) {
    futures::future::join_all(conns.into_iter().map(AgentConn::close)).await;
}
