//! The run entry points: all playbooks (twice under `--twice`) with the recap and verdict, and
//! `fixpoint journal`; and closing every agent at the end.

use super::state::{HostState, PlayCtx};
use super::{Engine, RunOutcome, Shared};
use crate::connection::pool;
use crate::playbook::{Play, Playbook};
use crate::report::Stats;
use fixpoint_agent::protocol::{JournalOp, Request, Response};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

impl Engine {
    /// Run all playbooks (twice under `--twice`) and say how it went.
    pub async fn run(&mut self, books: &[Playbook]) -> RunOutcome {
        let passes = if self.cfg.twice { 2 } else { 1 };
        let mut outcome = RunOutcome::Success;
        self.interrupt.listen();
        for pass in 1..=passes {
            for h in self.hosts.values_mut() {
                h.reset_for_pass();
            }
            self.restore_inventory();
            self.started = self.cfg.start_at_task.is_none();
            self.changed_log.clear();
            'books: for book in books {
                self.playbook_stopped = false;
                for play in &book.plays {
                    if self.interrupt.requested() {
                        break 'books;
                    }
                    self.run_play(book, play, pass).await;
                    if self.run_stopped {
                        break 'books;
                    }
                    if self.playbook_stopped {
                        break;
                    }
                }
            }
            // An error stops the run without a recap, as ansible-core's does.
            if self.run_stopped {
                outcome = RunOutcome::Stopped;
                break;
            }
            let stats: BTreeMap<String, Stats> = self
                .hosts
                .iter()
                .map(|(n, h)| (n.clone(), h.stats))
                .collect();
            let trips = self
                .hosts
                .iter()
                .map(|(n, h)| (n.clone(), h.pass_round_trips()))
                .collect();
            self.reporter.set_round_trips(trips);
            self.reporter.recap(&stats, pass, self.cfg.twice);
            if self.interrupt.requested() {
                outcome = RunOutcome::Interrupted;
                break;
            }
            // The plays that hold it ran on no host: said as ansible-core says it, which
            // does not fail the run for it.
            if !self.started {
                self.reporter.error(&format!(
                    "No matching task \"{}\" found: the plays that hold it ran on no host",
                    self.cfg.start_at_task.as_deref().unwrap_or_default()
                ));
            }
            if self.hosts.values().any(HostState::failed_run) {
                outcome = RunOutcome::Failed;
                break;
            }
            if pass == 2 && !self.changed_log.is_empty() {
                let culprits = std::mem::take(&mut self.changed_log);
                self.reporter.not_converged(&culprits);
                outcome = RunOutcome::NotConverged;
            }
        }
        if self.drift && outcome != RunOutcome::Interrupted {
            if !self.journal_drift().await {
                outcome = RunOutcome::Failed;
            }
            if self.reporter.drifts() > 0 {
                outcome = RunOutcome::Drifted;
            }
        }
        self.close_all().await;
        self.progress.clear();
        outcome
    }

    /// `fixpoint drift`: report drift instead of changing anything (the run is a check).
    pub fn report_drift(&mut self) {
        self.drift = true;
    }

    /// How many results and journal-only files reported drift.
    pub fn drifts(&self) -> usize {
        self.reporter.drifts()
    }

    /// Ask every agent the run opened for the journal's drifted files that no task compared,
    /// and report them. False when an agent could not answer.
    async fn journal_drift(&mut self) -> bool {
        let mut ok = true;
        let timeout = Some(self.cfg.connect_timeout);
        for (host, h) in self.hosts.iter_mut() {
            for conn in h.conns.values_mut() {
                let req = Request::Journal {
                    action: JournalOp::Drift,
                };
                match conn.call(&req, timeout).await {
                    Ok(Response::Journal { data }) => {
                        let entries = data.as_array().cloned().unwrap_or_default();
                        self.reporter.drift_journal(host, &entries);
                    }
                    Ok(Response::Failed { msg, .. }) => {
                        ok = false;
                        self.reporter.warn(&format!("[{host}] {msg}"));
                    }
                    Ok(other) => {
                        ok = false;
                        self.reporter
                            .warn(&format!("[{host}] unexpected answer: {other:?}"));
                    }
                    Err(e) => {
                        ok = false;
                        self.reporter.warn(&format!("[{host}] {e}"));
                    }
                }
            }
        }
        ok
    }

    /// `fixpoint journal`: run one journal action on every selected host; true when all succeeded.
    pub async fn journal(&mut self, pattern: &str, become_: bool, action: JournalOp) -> bool {
        let hosts = match self.inventory.select(pattern) {
            Ok(h) if !h.is_empty() => h,
            Ok(_) => {
                self.reporter.warn(&format!("no hosts matched `{pattern}`"));
                return false;
            }
            Err(e) => {
                self.reporter.warn(&format!("bad host pattern: {e}"));
                return false;
            }
        };
        let play = Play::bare(pattern, become_);
        let book = Playbook {
            path: PathBuf::from("journal"),
            dir: PathBuf::from("."),
            plays: Vec::new(),
            roles_path: Vec::new(),
        };
        let ctx = PlayCtx::new(
            &play,
            &book,
            &self.inventory.groups_map(),
            hosts.clone(),
            hosts.clone(),
            Arc::default(),
            Arc::default(),
        );
        let mut ok = true;
        for host in &hosts {
            self.host_state(host);
            let shared = shared!(self);
            let h = self.hosts.get_mut(host).expect("host state");
            let res = async {
                let spec = shared.conn_spec(h, &ctx, None)?;
                let conn = shared.conn(h, &spec, &ctx).await.map_err(|(_, e)| e)?;
                match conn
                    .call(
                        &Request::Journal {
                            action: action.clone(),
                        },
                        Some(shared.cfg.connect_timeout),
                    )
                    .await
                    .map_err(|e| e.to_string())?
                {
                    Response::Journal { data } => Ok(data),
                    Response::Failed { msg, .. } => Err(msg),
                    other => Err(format!("unexpected answer: {other:?}")),
                }
            }
            .await;
            match res {
                Ok(data) if matches!(action, JournalOp::Drift) => {
                    let entries = data.as_array().cloned().unwrap_or_default();
                    self.reporter.drift_journal(host, &entries);
                }
                Ok(data) => self.reporter.journal(host, &data),
                Err(e) => {
                    ok = false;
                    self.reporter.warn(&format!("[{host}] {e}"));
                }
            }
        }
        self.close_all().await;
        ok
    }

    /// Close every agent and master connection (see `pool::close_all`).
    async fn close_all(&mut self) {
        let conns = std::mem::take(&mut self.hosts)
            .into_values()
            .flat_map(|mut h| h.take_conns());
        pool::close_all(conns).await;
        self.cfg.handshakes.close_ahead().await;
    }
}
