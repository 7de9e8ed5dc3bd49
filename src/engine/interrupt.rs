//! SIGINT (Ctrl-C): the first stops the run from starting new tasks and lets the tasks in flight
//! finish; the second stops those too. Either way the agents are then closed (which releases
//! the host locks), the recap is printed, and the run exits 130.
//!
//! ansible-playbook stops at once on the first Ctrl-C ("User interrupted execution", exit 99,
//! no recap); fixpoint finishes what is in flight first, because a task cut part way leaves its
//! host in an unknown state, and says so when a second Ctrl-C asks for exactly that.

use std::sync::atomic::{AtomicU32, Ordering};
use tokio::sync::Notify;

#[derive(Default)]
pub(super) struct Interrupt {
    count: AtomicU32,
    notify: Notify,
}

impl Interrupt {
    /// Count SIGINTs from now on (the default action, ending the process, is replaced).
    pub(super) fn listen(self: &std::sync::Arc<Self>) {
        use tokio::signal::unix::{signal, SignalKind};
        let mut sig = match signal(SignalKind::interrupt()) {
            Ok(s) => s,
            Err(e) => {
                // Without the handler Ctrl-C keeps its default action: the run still stops.
                tracing::warn!("cannot handle SIGINT: {e}");
                return;
            }
        };
        let me = self.clone();
        tokio::spawn(async move {
            while sig.recv().await.is_some() {
                let n = me.count.fetch_add(1, Ordering::SeqCst).saturating_add(1);
                // On stderr at once: the person who pressed Ctrl-C learns what happens now.
                if n == 1 {
                    eprintln!("fixpoint: interrupted: no new task starts; the tasks in flight finish, then the recap (Ctrl-C again stops them)");
                } else if n == 2 {
                    eprintln!("fixpoint: interrupted again: stopping the tasks in flight");
                }
                me.notify.notify_waiters();
            }
        });
    }

    /// A first SIGINT arrived: start nothing new.
    pub(super) fn requested(&self) -> bool {
        self.count.load(Ordering::SeqCst) >= 1
    }

    /// Resolves once a second SIGINT arrived: stop what runs.
    pub(super) async fn forced(&self) {
        self.reached(2).await;
    }

    /// Resolves once a first SIGINT arrived: a pipelined host tells its agent to start no
    /// further task of its batch.
    pub(super) async fn first(&self) {
        self.reached(1).await;
    }

    async fn reached(&self, n: u32) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before the check, so a signal between the two is not missed.
            notified.as_mut().enable();
            if self.count.load(Ordering::SeqCst) >= n {
                return;
            }
            notified.await;
        }
    }
}
