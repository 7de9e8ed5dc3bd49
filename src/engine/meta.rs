//! `meta:` actions (flush_handlers, end_play, end_host, end_batch, end_role, clear_facts,
//! clear_host_errors, reset_connection, refresh_inventory, noop).

use serde_json::{json, Map, Value};

use super::state::PlayCtx;
use super::{all_hold, Engine, Shared};
use crate::playbook::{Meta, MetaAction};
use crate::report::{Status, TaskEvent};
use crate::vars::VarSrc;

impl Engine {
    /// `meta:` actions.
    pub(super) async fn run_meta(&mut self, ctx: &PlayCtx<'_>, meta: &Meta, targets: &[String]) {
        let shared = shared!(self);
        let mut hit = Vec::new();
        let mut errors = Vec::new();
        let mut warnings: Vec<String> = Vec::new();
        let mut skipped = Vec::new();
        // As ansible-core's linear strategy: the actions for the whole play or batch run once,
        // their `when` evaluated for the first host only; the others are per host.
        let targets = match meta.action {
            MetaAction::EndPlay
            | MetaAction::EndBatch
            | MetaAction::ClearFacts
            | MetaAction::ClearHostErrors => &targets[..targets.len().min(1)],
            _ => targets,
        };
        if meta.action == MetaAction::RefreshInventory {
            // As ansible-core: once for the play, whatever its `when` says (it warns).
            if !meta.when.is_empty() {
                self.reporter.warn(&format!(
                    "meta ({}): `refresh_inventory` does not support `when`; the inventory is \
                     read again",
                    meta.pos
                ));
            }
            match self.refresh_inventory() {
                Ok(()) => self.select_play_hosts_again(ctx.play),
                Err(msg) => {
                    for h in targets {
                        let msg = format!("{msg} (meta at {})", meta.pos);
                        self.fail_host(h, ("meta", "meta", &meta.pos.to_string()), msg, false);
                    }
                }
            }
            return;
        }
        if meta.action == MetaAction::ResetConnection {
            // ansible-core resets every host's connection whatever its `when` says, and warns.
            if !meta.when.is_empty() {
                self.reporter.warn(&format!(
                    "meta ({}): `reset_connection` does not support `when`; every host's \
                     connection is reset",
                    meta.pos
                ));
            }
            let conns: Vec<_> = targets
                .iter()
                .flat_map(|h| self.hosts.get_mut(h).expect("host state").take_conns())
                .collect();
            // The next task logs in again: a new session sees what the play changed about the
            // login (a group the user joined), as after ansible-core's reset.
            crate::connection::pool::close_all(conns).await;
            return;
        }
        for host in targets {
            let src = VarSrc {
                role: meta.role.as_deref(),
                vars: Some(&meta.vars),
                check_mode: None,
                task_file: Some(meta.pos.file.as_path()),
            };
            let scope = shared.scope_with(ctx, src, &self.hosts[host]);
            match all_hold(&scope, &meta.when) {
                Ok(true) => hit.push(host.clone()),
                Ok(false) => skipped.push(host.clone()),
                Err(e) => errors.push((
                    host.clone(),
                    format!("cannot evaluate `when`: {e} (meta at {})", meta.pos),
                )),
            }
            for w in scope.take_warnings() {
                if !warnings.contains(&w) {
                    warnings.push(w);
                }
            }
        }
        for w in warnings {
            self.reporter.warn(&format!("meta ({}): {w}", meta.pos));
        }
        for (host, msg) in errors {
            self.fail_host(&host, ("meta", "meta", &meta.pos.to_string()), msg, false);
        }
        // ansible-core reports a meta whose `when` is false as skipped (`noop` has no condition),
        // without counting it in the recap.
        if meta.action != MetaAction::Noop && !skipped.is_empty() {
            self.report_meta_skipped(meta, &skipped);
        }
        if hit.is_empty() {
            return;
        }
        match meta.action {
            MetaAction::FlushHandlers => self.flush_handlers(ctx).await,
            MetaAction::EndPlay => self.play_ended = true,
            MetaAction::EndHost => {
                for h in &hit {
                    self.hosts.get_mut(h).expect("host state").ended = true;
                }
            }
            MetaAction::Noop | MetaAction::ResetConnection | MetaAction::RefreshInventory => {}
            MetaAction::EndRole => {
                // The loader keeps `end_role` to tasks of a role.
                for h in &hit {
                    self.hosts.get_mut(h).expect("host state").ended_role = meta.role.clone();
                }
            }
            MetaAction::EndBatch => {
                for h in &ctx.hosts {
                    let hs = self.hosts.get_mut(h).expect("host state");
                    if !hs.unreachable {
                        hs.ended = true;
                    }
                }
            }
            MetaAction::ClearFacts => {
                for h in &ctx.all_hosts {
                    if let Some(hs) = self.hosts.get_mut(h) {
                        // A new map, so `hostvars` sees the change (`HostState::facts`).
                        hs.facts = Default::default();
                    }
                }
            }
            MetaAction::ClearHostErrors => {
                // As in ansible-core, a host that failed does not come back in this play, but
                // it is no longer a failed host: later plays run on it, and a batch in which
                // it failed does not stop the playbook.
                for h in &ctx.all_hosts {
                    if let Some(hs) = self.hosts.get_mut(h) {
                        if hs.failed || hs.unreachable {
                            hs.failed = false;
                            hs.unreachable = false;
                            hs.ended = true;
                        }
                        hs.marked_now = false;
                        hs.fatal_marked = false;
                        hs.fatal_carried = false;
                        hs.cleared = (hs.stats.failed, hs.stats.unreachable);
                    }
                }
            }
        }
    }
}

impl Engine {
    /// The skipped results of a meta whose `when` is false on `hosts`.
    fn report_meta_skipped(&mut self, meta: &Meta, hosts: &[String]) {
        let name = meta.name.clone();
        let location = meta.pos.to_string();
        let action = meta.action.as_str();
        self.reporter.task_start(&name, false);
        for host in hosts {
            let why = match meta.action {
                MetaAction::FlushHandlers => format!("not running handlers for {host}"),
                MetaAction::EndHost => format!("continuing execution for {host}"),
                MetaAction::EndPlay => "continuing play".to_string(),
                MetaAction::EndBatch => "continuing current batch".to_string(),
                MetaAction::ClearFacts => format!("not clearing facts and fact cache for {host}"),
                MetaAction::ClearHostErrors => {
                    format!("not clearing host error state for {host}")
                }
                MetaAction::EndRole => format!(
                    "continuing role {} for {host}",
                    meta.role.as_ref().map_or("", |r| r.name.as_str())
                ),
                MetaAction::Noop | MetaAction::ResetConnection | MetaAction::RefreshInventory => {
                    String::new()
                }
            };
            // ansible-core 2.19 writes end_role's reason with no comma before its words.
            let sep = if meta.action == MetaAction::EndRole {
                ""
            } else {
                ", "
            };
            let reason = format!("{action} conditional evaluated to False{sep}{why}");
            let mut result = Map::new();
            result.insert("skipped".into(), Value::Bool(true));
            result.insert("skip_reason".into(), json!(reason));
            self.reporter.task(&TaskEvent {
                host,
                task: &name,
                module: "meta",
                location: &location,
                status: Status::Skipped,
                item: None,
                diff: None,
                msg: Some(&reason),
                result: Some(&result),
                ignored: false,
                censored: false,
                note: None,
                delegated_to: None,
                python: false,
            });
        }
    }
}
