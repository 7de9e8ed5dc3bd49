//! The cap on SSH handshakes in flight at once (`--connect-concurrency`).
//!
//! A handshake is CPU work on both ends (OpenSSH 9's default key exchange, sntrup761x25519, costs
//! ~65 ms of client CPU), and sshd refuses unauthenticated connections past its `MaxStartups`
//! (10 by default). With `--forks 50` and no cap, a run's first task would start 50 handshakes at
//! once: they all slow each other down on a small controller, and a bastion or a host reached
//! under several inventory names drops the ones past its limit. So the transport takes a permit
//! for the handshake only (the master connection up to authentication) and gives it back before
//! the agent starts; hosts then connect in the order they asked (the semaphore is fair), a few at
//! a time, while the hosts already connected run their tasks.
//!
//! A handshake may also start ahead of its first use (`ssh::open_ahead`): the master connections
//! opened so wait here until the agent's start takes them (or the run's end closes them).

use super::TransportError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

/// A master connection being opened ahead of its first use.
type Ahead = JoinHandle<Result<openssh::Session, TransportError>>;

/// Handshakes in flight per core by default: a handshake also waits on the network (several
/// round trips) and on the remote sshd's fork and exec, so a few per core keep the CPU busy
/// without piling up.
const PER_CORE: usize = 4;
/// The default's ceiling: sshd's own default `MaxStartups` starts dropping new connections once
/// 10 are unauthenticated, and hosts behind one bastion (`ProxyJump`) all count against the
/// bastion's. Below it a default setup never drops one of ours, whatever the controller's size.
const SSHD_DEFAULT_MAX_STARTUPS: usize = 10;

/// The run's handshake cap, shared by every connection (clones share the permits).
#[derive(Clone, Debug)]
pub struct Handshakes {
    permits: Arc<Semaphore>,
    limit: usize,
    /// Master connections opened ahead, by destination (`ssh::destination`).
    ahead: Arc<Mutex<HashMap<String, Ahead>>>,
}

impl Handshakes {
    /// At most `limit` handshakes at once (at least 1).
    pub fn new(limit: usize) -> Handshakes {
        let limit = limit.clamp(1, Semaphore::MAX_PERMITS);
        Handshakes {
            permits: Arc::new(Semaphore::new(limit)),
            limit,
            ahead: Arc::default(),
        }
    }

    /// The default cap: `PER_CORE` handshakes per core of this machine, at most
    /// `SSHD_DEFAULT_MAX_STARTUPS`.
    pub fn default_limit() -> usize {
        (std::thread::available_parallelism().map_or(1, usize::from) * PER_CORE)
            .min(SSHD_DEFAULT_MAX_STARTUPS)
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Wait for a free slot; the handshake holds the permit until it is done.
    pub async fn acquire(&self) -> OwnedSemaphorePermit {
        self.permits
            .clone()
            .acquire_owned()
            .await
            .expect("the handshake semaphore is never closed")
    }
}

impl Handshakes {
    /// Open a master connection to `destination` ahead with `open`, unless one is opening
    /// already.
    pub(super) fn put_ahead(&self, destination: String, open: impl FnOnce() -> Ahead) {
        self.opened().entry(destination).or_insert_with(open);
    }

    /// The master connection opened ahead to `destination`, if any: the caller owns it now.
    pub(super) fn take_ahead(&self, destination: &str) -> Option<Ahead> {
        self.opened().remove(destination)
    }

    /// Close the master connections opened ahead that no agent took (a host whose tasks all
    /// ran on the controller, or through another route). A handshake still in flight is
    /// dropped, as one is when a run is interrupted: the run does not wait for it.
    pub async fn close_ahead(&self) {
        let left: Vec<Ahead> = self.opened().drain().map(|(_, a)| a).collect();
        for ahead in left {
            if !ahead.is_finished() {
                ahead.abort();
            } else if let Ok(Ok(session)) = ahead.await {
                let _ = session.close().await;
            }
        }
    }

    /// The lock only guards the map: a panic elsewhere cannot leave it half-changed.
    fn opened(&self) -> std::sync::MutexGuard<'_, HashMap<String, Ahead>> {
        self.ahead
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Default for Handshakes {
    fn default() -> Self {
        Handshakes::new(Handshakes::default_limit())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn no_more_than_the_limit_hold_a_permit_and_clones_share_them() {
        let h = Handshakes::new(2);
        let a = h.acquire().await;
        let _b = h.clone().acquire().await;
        assert_eq!(h.permits.available_permits(), 0);
        let waiting = tokio::spawn({
            let h = h.clone();
            async move { h.acquire().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(a);
        let _third = waiting
            .await
            .expect("the third handshake starts once one ends");
    }

    #[test]
    fn the_limit_is_at_least_one() {
        assert_eq!(Handshakes::new(0).limit(), 1);
        assert!(Handshakes::default_limit() >= PER_CORE);
    }
}
