//! Fact gathering at the start of a play (`gather_facts`), and facts as variables.

use super::state::PlayCtx;
use super::{all_hold, Engine, Shared};
use crate::report::{Status, TaskEvent};
use fixpoint_agent::protocol::{Request, Response};
use serde_json::{Map, Value};
use std::sync::Arc;

impl Engine {
    pub(super) async fn gather_facts(&mut self, ctx: &PlayCtx<'_>) {
        let mut targets: Vec<String> = ctx
            .hosts
            .iter()
            .filter(|h| self.hosts[*h].active())
            .cloned()
            .collect();
        if targets.is_empty() {
            return;
        }
        self.reporter.task_start("Gathering Facts", false);
        // A play brought in by `import_playbook` with `when` gathers only where it holds.
        let mut skipped = Vec::new();
        if !ctx.play.gather_when.is_empty() {
            let shared = shared!(self);
            let mut held = Vec::new();
            for host in targets {
                let scope = shared.scope(ctx, None, &self.hosts[&host]);
                match all_hold(&scope, &ctx.play.gather_when) {
                    Ok(true) => held.push(host),
                    Ok(false) => skipped.push((host, None)),
                    Err(e) => skipped.push((host, Some(format!("cannot evaluate `when`: {e}")))),
                }
            }
            targets = held;
        }
        for (host, err) in skipped {
            let hs = self.hosts.get_mut(&host).expect("host state");
            let status = match &err {
                Some(_) => {
                    hs.failed = true;
                    hs.stats.failed += 1;
                    Status::Failed
                }
                None => {
                    hs.stats.skipped += 1;
                    Status::Skipped
                }
            };
            self.report_gathering(ctx, &host, status, err.as_deref());
        }
        if targets.is_empty() {
            return;
        }
        self.progress.queued(&targets, "Gathering Facts");
        let shared = shared!(self);
        let gather_timeout = ctx
            .play
            .gather_timeout
            .map_or(self.cfg.connect_timeout, std::time::Duration::from_secs);
        // At most MAX_PERMITS (2^61 - 1), which is the same as no bound (see `run_task`).
        let sem =
            tokio::sync::Semaphore::new(self.cfg.forks.min(tokio::sync::Semaphore::MAX_PERMITS));
        let futures = self
            .hosts
            .values_mut()
            .filter(|h| targets.contains(&h.name))
            .map(|h| {
                let sem = &sem;
                let shared = &shared;
                async move {
                    // The semaphore is local and never closed.
                    let _permit = sem.acquire().await.expect("semaphore open");
                    shared.progress.running(&h.name);
                    let name = h.name.clone();
                    let res = async {
                        let spec = match shared.conn_spec(h, ctx, None) {
                            Ok(s) => s,
                            Err(e) => return (h.name.clone(), Err((false, e))),
                        };
                        let res = match shared.conn(h, &spec, ctx).await {
                            Ok(conn) => conn
                                .call(&Request::Facts, Some(gather_timeout))
                                .await
                                .map_err(|e| (false, e.to_string())),
                            Err(e) => Err(e),
                        };
                        match res {
                            Ok(Response::Facts { facts }) => {
                                h.facts = Arc::new(add_gathered(&h.facts, facts));
                                (h.name.clone(), Ok(()))
                            }
                            Ok(other) => (
                                h.name.clone(),
                                Err((false, format!("unexpected answer to facts: {other:?}"))),
                            ),
                            Err(e) => (h.name.clone(), Err(e)),
                        }
                    }
                    .await;
                    shared.progress.finished(&name);
                    res
                }
            });
        let results = futures::future::join_all(futures).await;
        for (host, res) in results {
            let hs = self.hosts.get_mut(&host).expect("host state");
            let (status, msg) = match res {
                Ok(()) => {
                    hs.stats.ok += 1;
                    (Status::Ok, None)
                }
                Err((true, e)) => {
                    hs.unreachable = true;
                    hs.stats.unreachable += 1;
                    (Status::Unreachable, Some(e))
                }
                Err((false, e)) => {
                    hs.failed = true;
                    hs.stats.failed += 1;
                    (Status::Failed, Some(e))
                }
            };
            self.report_gathering(ctx, &host, status, msg.as_deref());
        }
    }

    fn report_gathering(
        &mut self,
        ctx: &PlayCtx<'_>,
        host: &str,
        status: Status,
        msg: Option<&str>,
    ) {
        self.reporter.task(&TaskEvent {
            host,
            task: "Gathering Facts",
            module: "setup",
            location: &ctx.play.pos.to_string(),
            status,
            item: None,
            diff: None,
            msg,
            result: None,
            ignored: false,
            censored: false,
            note: None,
            delegated_to: None,
            python: false,
        });
    }
}

/// Facts as variables: `ansible_<name>` (unless ANSIBLE_INJECT_FACT_VARS is false) and
/// `ansible_facts`.
pub(super) fn facts_vars(facts: Map<String, Value>) -> Map<String, Value> {
    let mut all = Map::new();
    if crate::config::inject_fact_vars() {
        for (k, v) in &facts {
            all.insert(format!("ansible_{k}"), v.clone());
        }
    }
    all.insert("ansible_facts".into(), Value::Object(facts));
    all
}

/// Gathered facts (`Response::Facts`: names without `ansible_`) added to the host's, as
/// ansible-core adds them: what a module or a cacheable `set_fact` added before stays.
pub(super) fn add_gathered(
    host: &Map<String, Value>,
    facts: Map<String, Value>,
) -> Map<String, Value> {
    let mut all = host.clone();
    for (k, v) in facts_vars(facts) {
        match (k.as_str(), v) {
            ("ansible_facts", Value::Object(f)) => add_to_ansible_facts(&mut all, &f),
            (_, v) => {
                all.insert(k, v);
            }
        }
    }
    all
}

/// `setup`'s `filter`: the facts whose `ansible_` name matches one of the shell patterns (a
/// pattern that does not start with `ansible_`, `facter` or `ohai` is tried with `ansible_`
/// before it too; an empty one matches all), as ansible-core filters them.
pub(super) fn filtered(facts: Map<String, Value>, patterns: &[String]) -> Map<String, Value> {
    let matches = |name: &str| {
        patterns.iter().any(|p| {
            p.is_empty()
                || crate::inventory::fnmatch(p, name)
                || !["ansible_", "facter", "ohai"]
                    .iter()
                    .any(|s| p.starts_with(s))
                    && crate::inventory::fnmatch(&format!("ansible_{p}"), name)
        })
    };
    facts
        .into_iter()
        .filter(|(k, _)| matches(&format!("ansible_{k}")))
        .collect()
}

/// Facts a module returned (`service_facts`, `getent`'s `getent_passwd`), added to the host's
/// as ansible-core does: under their own name (no `ansible_` added; unless
/// ANSIBLE_INJECT_FACT_VARS is false) and in `ansible_facts` without an `ansible_` prefix.
pub(super) fn merge_facts(host: &mut Map<String, Value>, new: &Map<String, Value>) {
    if crate::config::inject_fact_vars() {
        host.extend(new.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    add_to_ansible_facts(host, new);
}

/// Facts added to the host's `ansible_facts` alone, without an `ansible_` prefix: a
/// `set_fact` with `cacheable: true`, whose values are variables already.
pub(super) fn add_to_ansible_facts(host: &mut Map<String, Value>, new: &Map<String, Value>) {
    let Value::Object(all) = host
        .entry("ansible_facts")
        .or_insert_with(|| Value::Object(Map::new()))
    else {
        return;
    };
    for (k, v) in new {
        let short = k.strip_prefix("ansible_").unwrap_or(k);
        all.insert(short.to_string(), v.clone());
    }
}
