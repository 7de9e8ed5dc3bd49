//! `meta:` actions (flush_handlers, end_play, end_host, noop).

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
        // As ansible-core's linear strategy: `end_play` runs once, its `when` evaluated for the
        // first host only; the others are per host.
        let targets = match meta.action {
            MetaAction::EndPlay => &targets[..targets.len().min(1)],
            _ => targets,
        };
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
            self.fail_host(&host, "meta", "meta", &meta.pos.to_string(), msg);
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
            MetaAction::Noop => {}
        }
    }
}

impl Engine {
    /// The skipped results of a meta whose `when` is false on `hosts`.
    fn report_meta_skipped(&mut self, meta: &Meta, hosts: &[String]) {
        let name = meta.name.clone().unwrap_or_else(|| "meta".to_string());
        let location = meta.pos.to_string();
        let action = meta.action.as_str();
        self.reporter.task_start(&name, false);
        for host in hosts {
            let why = match meta.action {
                MetaAction::FlushHandlers => format!("not running handlers for {host}"),
                MetaAction::EndHost => format!("continuing execution for {host}"),
                MetaAction::EndPlay => "continuing play".to_string(),
                MetaAction::Noop => String::new(),
            };
            let reason = format!("{action} conditional evaluated to False, {why}");
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
