//! The pool of live agents: one per (host, delegated host, become user, connection), started on
//! first use with the run's `Begin` handshake, and closed all together at the end of the run.
//!
//! A task with its own `remote_user`, `port` or `connection` reaches the host through another
//! agent of the same run. Each agent keeps its lock, journal and outbox in the state directory
//! of the user it runs as (its become user, else its remote user): a second remote user without
//! `become` has a state directory of its own, so its `once:` records and handler outbox are its
//! own, as they are for any run as that user; agents that run as the same user share one
//! directory and its lock, which this run holds already (the lock is per run, not per agent).

use crate::connection::{self, AgentBinary, AgentConn, ConnSpec, TransportError};
use fixpoint_agent::journal::OutboxEntry;
use fixpoint_agent::protocol::{Request, Response};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Which agent of a host: the host this task is delegated to (None: the host itself), the
/// become user, and how it is reached (`ConnSpec::route`).
pub type ConnKey = (Option<String>, Option<String>, String);

/// A host's agents, by (delegated host, become user).
pub type Conns = HashMap<ConnKey, AgentConn>;

/// The agent a spec reaches, among the agents of `host`.
pub fn key(host: &str, spec: &ConnSpec) -> ConnKey {
    let delegate = (spec.host != host).then(|| spec.host.clone());
    (delegate, spec.become_user.clone(), spec.route())
}

/// The agent to ship: the embedded one, or a `fixpoint_agent_path` override (read, hashed and
/// compressed on a blocking thread, each time: overrides are for testing agent builds).
pub async fn agent_binary(
    embedded: &Arc<AgentBinary>,
    spec: &ConnSpec,
) -> Result<Arc<AgentBinary>, TransportError> {
    match &spec.agent_path {
        Some(p) => {
            let path = p.clone();
            tokio::task::spawn_blocking(move || AgentBinary::load(&path).map(Arc::new))
                .await
                .map_err(|e| TransportError::Connect(format!("loading the agent failed: {e}")))?
        }
        None => Ok(embedded.clone()),
    }
}

/// What a new agent is sent as it starts: the run's `Begin` (and how long it may take), built
/// only when one starts, and a first `Batch`, taken when it goes right behind `Begin` (see
/// `start`).
pub struct Opening<'a, B> {
    pub begin: B,
    pub first: &'a mut Option<Request>,
}

/// The agent for `key`, started on first use with `opening`. A new agent gets `Begin` first:
/// it opens the host's state directory and takes the run lock before it does anything else,
/// and answers with the handler notifications earlier runs left pending, which are added to
/// `pending`. `waiting` hears what a start waits for (`connecting`, another run's host lock),
/// and `None` once it waits no more.
/// Errors say whether the host is unreachable (true) or failed (false).
pub async fn get_or_start<'c>(
    conns: &'c mut Conns,
    key: ConnKey,
    spec: &ConnSpec,
    binary: &Arc<AgentBinary>,
    opening: Opening<'_, impl FnOnce() -> (Request, Duration)>,
    pending: &mut Vec<OutboxEntry>,
    waiting: &(dyn Fn(Option<&str>) + Sync),
) -> Result<&'c mut AgentConn, (bool, String)> {
    // A channel left out of step by an earlier failure is replaced by a new agent (of the same
    // run, so it shares the host lock); the old one is closed on the side.
    if conns.get(&key).is_some_and(AgentConn::is_broken) {
        if let Some(old) = conns.remove(&key) {
            tokio::spawn(old.close());
        }
    }
    if !conns.contains_key(&key) {
        waiting(Some("connecting"));
        let started = start(spec, binary, opening, pending, waiting, key.0.is_some()).await;
        waiting(None);
        conns.insert(key.clone(), started?);
    }
    // Present already or inserted above.
    Ok(conns.get_mut(&key).expect("just inserted"))
}

/// Start one agent and begin the run on it (see `get_or_start`).
async fn start(
    spec: &ConnSpec,
    binary: &Arc<AgentBinary>,
    opening: Opening<'_, impl FnOnce() -> (Request, Duration)>,
    pending: &mut Vec<OutboxEntry>,
    waiting: &(dyn Fn(Option<&str>) + Sync),
    delegated: bool,
) -> Result<AgentConn, (bool, String)> {
    let (begin, timeout) = (opening.begin)();
    // `Begin` travels with the agent's `Hello` (one round trip for both), and the first batch
    // with them when the agent is the embedded build, which takes batches and gates; an
    // override (`fixpoint_agent_path`) may be older, and gets it once its `Hello` said so.
    let mut none = None;
    let first = if spec.agent_path.is_none() {
        opening.first
    } else {
        &mut none
    };
    let mut conn = connection::connect(
        spec,
        agent_binary(binary, spec),
        Some((begin, timeout)),
        first,
    )
    .await
    .map_err(|e| match &spec.become_user {
        // The host was reached and sudo or su did not give the agent (an unknown user, a
        // wrong password, a `nologin` shell): as in ansible-core ("Premature end of stream
        // waiting for become success"), the task fails and the host stays in the play. Not
        // reaching it, or no answer in time, is unreachable under both.
        Some(u) => (
            matches!(e, TransportError::Connect(_) | TransportError::Timeout(_)),
            format!(
                "{e} (while starting the agent as `{u}` through {})",
                spec.become_method.name()
            ),
        ),
        None => (true, e.to_string()),
    })?;
    let notice = |msg: &str| waiting(Some(msg));
    match conn.await_sent(&notice).await {
        Ok(Response::Begun { pending: found, .. }) => {
            // A delegated host's pending handlers belong to that host, not this one.
            let found = if delegated { Vec::new() } else { found };
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
    Ok(conn)
}

/// Close these agents and their master connections all at once: each close waits for the agent
/// to exit and the master to go, and doing them one by one adds up.
pub async fn close_all(conns: impl IntoIterator<Item = AgentConn>) {
    futures::future::join_all(conns.into_iter().map(AgentConn::close)).await;
}
