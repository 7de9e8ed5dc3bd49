//! Steps with a `once:` key: at most one effect per key, recorded in the host's journal
//! before it begins and after it ends, and an honest "in doubt" when a run died in between.

use super::{failed, me, Session};
use crate::journal::{self, OnceStatus, Record};
use crate::protocol::{NotifySpec, OnceSpec, Response};
use fixpoint_modules::{Ctx, Outcome};
use serde_json::{json, Map, Value};

impl Session {
    /// The `once:` contract: at most one effect per key, and an honest "in doubt" otherwise.
    pub(super) fn run_once(
        &mut self,
        module: &str,
        params: &Value,
        ctx: &Ctx,
        once: &OnceSpec,
        notify: Option<&NotifySpec>,
    ) -> Response {
        let Some(st) = self.state.as_ref() else {
            return failed("the journal is not open on this host (internal error: no Begin)");
        };
        let user = me();
        let existing = match st.read_record(&user, once.scope.as_deref(), &once.key) {
            Ok(r) => r,
            Err(e) => return failed(e),
        };
        let mut note = None;
        if let Some(rec) = &existing {
            if rec.request_sha256 != once.request_sha256 {
                return failed(format!(
                    "key `{}` was used for a different request on {} (run {}); a key is never reused for another action: choose a new key, or remove the old record with `fixpoint journal resolve {} --retry`",
                    once.key, rec.started_at, rec.run_id, once.key
                ));
            }
            match rec.status {
                OnceStatus::Done => {
                    let mut result = rec.result.clone();
                    result.insert("replayed".into(), json!(true));
                    return Response::Done {
                        outcome: Outcome {
                            changed: false,
                            result,
                            ..Outcome::default()
                        },
                        note: Some(format!(
                            "replayed: key `{}` done on {}",
                            once.key,
                            rec.finished_at.as_deref().unwrap_or("?")
                        )),
                        outbox_written: Vec::new(),
                    };
                }
                OnceStatus::Started if !once.probe_guarded => {
                    return failed(format!(
                        "in doubt: key `{}` was started on {} (run {}) but its end was never recorded, so its effect may or may not have happened; check the host, then run `fixpoint journal resolve <host> {} --done` (it happened) or `--retry` (run it again)",
                        once.key, rec.started_at, rec.run_id, once.key
                    ));
                }
                OnceStatus::Started => {
                    note = Some(format!(
                        "key `{}` was in doubt (started {}); the task's probe decided",
                        once.key, rec.started_at
                    ));
                }
                OnceStatus::Failed => {}
            }
        }
        if ctx.check {
            return self.run(module, params, ctx, None, note);
        }
        // The `started` record below is an effect: a gated step waits for its gate first.
        if let Err(e) = Session::pass_gate(
            &mut self.gate,
            self.stopped.as_ref(),
            &mut self.gate_refused,
        ) {
            return failed(e.to_string());
        }
        let mut rec = Record {
            key: once.key.clone(),
            user,
            scope: once.scope.clone(),
            playbook: once.playbook.clone(),
            module: module.to_string(),
            request_sha256: once.request_sha256.clone(),
            status: OnceStatus::Started,
            run_id: self.run_id.clone(),
            started_at: journal::now_text(),
            started_unix: journal::now_unix(),
            finished_at: None,
            finished_unix: None,
            changed: false,
            result: Map::new(),
        };
        // The `started` record is durable before the effect begins.
        if let Err(e) = st.write_record(&rec) {
            return failed(e);
        }
        let response = self.run(module, params, ctx, notify, note);
        if matches!(response, Response::NeedContent { .. }) {
            // Nothing happened yet: the step runs when the request is repeated with the content
            // there, so the record goes back to what it was. (`self.run` leaves `self.state`
            // as it was: Some.)
            let st = self.state.as_ref().expect("checked above");
            let restored = match &existing {
                Some(old) => st.write_record(old),
                None => st.remove_record(&rec),
            };
            return match restored {
                Ok(()) => response,
                Err(e) => failed(e),
            };
        }
        if self.stopped.as_ref().is_some_and(|w| w.stopped().is_some()) {
            // Killed part way: whether its effect happened is unknown, and the `started`
            // record already says so. Writing `failed` would let the next run repeat it.
            return response;
        }
        // `self.run` does not touch `self.state`, which was Some at the top of this function.
        let st = self.state.as_ref().expect("checked above");
        rec.finished_at = Some(journal::now_text());
        rec.finished_unix = Some(journal::now_unix());
        match &response {
            Response::Done { outcome, .. } => {
                rec.status = OnceStatus::Done;
                rec.changed = outcome.changed;
                rec.result = outcome.result.clone();
            }
            Response::Failed { result, .. } => {
                rec.status = OnceStatus::Failed;
                rec.result = result.clone();
            }
            _ => {}
        }
        if once.no_log {
            // What a no_log task returned must not outlive the run, on disk least of all.
            rec.result = Map::new();
            rec.result.insert(
                "censored".into(),
                json!("the output has been hidden due to the fact that 'no_log: true' was specified for this result"),
            );
        }
        if let Err(e) = st.write_record(&rec) {
            return failed(format!(
                "the step ran, but recording it failed: {e}; the key stays in doubt"
            ));
        }
        response
    }
}
