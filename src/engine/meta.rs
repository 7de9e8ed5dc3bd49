//! `meta:` actions (flush_handlers, end_play, end_host, noop).

use super::state::PlayCtx;
use super::{all_hold, Engine, Shared};
use crate::playbook::{Meta, MetaAction};
use crate::vars::VarSrc;

impl Engine {
    /// `meta:` actions.
    pub(super) async fn run_meta(&mut self, ctx: &PlayCtx<'_>, meta: &Meta, targets: &[String]) {
        let shared = shared!(self);
        let mut hit = Vec::new();
        let mut errors = Vec::new();
        let mut warnings: Vec<String> = Vec::new();
        for host in targets {
            let src = VarSrc {
                role: meta.role.as_deref(),
                vars: Some(&meta.vars),
                check_mode: None,
            };
            let scope = shared.scope_with(ctx, src, &self.hosts[host]);
            match all_hold(&scope, &meta.when) {
                Ok(true) => hit.push(host.clone()),
                Ok(false) => {}
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
