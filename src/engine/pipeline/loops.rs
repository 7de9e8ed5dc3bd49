//! A loop's items in one batch: sent on their own (`loop_batch`), or as steps of the batch
//! around the loop (`plan_loop`, used by `HostRunner::batch`), and each item's answer read in
//! its turn (`loop_item`).

use super::{answer_of, batch_step, local_files, LoopBatch};
use crate::connection::pool::ConnKey;
use crate::engine::item::{outbox_writer, AgentItem, ItemPlan};
use crate::engine::state::{HostState, PlayCtx};
use crate::engine::Shared;
use crate::vars::Scope;
use fixpoint_agent::protocol::{Request, Response};
use std::sync::Arc;

impl Shared<'_> {
    /// Render the items of a loop task and send them in one batch, when
    /// `section::loop_batchable` allows and at least two items run: the items that run, up to
    /// the first that cannot be rendered or runs elsewhere. `None`: every item runs on its own.
    pub(in crate::engine) async fn loop_batch(
        &self,
        ctx: &PlayCtx<'_>,
        task: &crate::playbook::Task,
        h: &mut HostState,
        scope: &Arc<Scope>,
        items: &[serde_json::Value],
        loop_var: &str,
    ) -> Option<LoopBatch> {
        let (runs, key, _) = self.plan_loop(ctx, task, h, scope, items, loop_var).await?;
        if runs.len() < 2 {
            return None;
        }
        let steps = runs
            .iter()
            .map(|(_, item)| batch_step(task, item, None))
            .collect();
        let spec = runs[0].1.spec.clone();
        // An agent started for it gets the batch with its start (`conn_sending`).
        let mut first = Some(Request::Batch { steps });
        let conn = self.conn_sending(h, &spec, ctx, &mut first).await.ok()?;
        if let Some(Request::Batch { steps }) = first {
            if !conn.takes_batches() || conn.send_batch(steps).await.is_err() {
                return None;
            }
        }
        Some(LoopBatch {
            key,
            runs: runs
                .into_iter()
                .enumerate()
                .map(|(step, (i, item))| (i, step, item))
                .collect(),
            shared: false,
            ended: false,
            settle: Vec::new(),
        })
    }

    /// The items of a loop task that go to one agent, rendered, when
    /// `section::loop_batchable` allows: those that run (their `when` holds), up to the first
    /// that cannot be rendered or runs elsewhere; and whether that is all of them.
    pub(super) async fn plan_loop(
        &self,
        ctx: &PlayCtx<'_>,
        task: &crate::playbook::Task,
        h: &mut HostState,
        scope: &Arc<Scope>,
        items: &[serde_json::Value],
        loop_var: &str,
    ) -> Option<(
        std::collections::VecDeque<(usize, AgentItem)>,
        ConnKey,
        bool,
    )> {
        if !crate::engine::section::loop_batchable(task, ctx.play, self.templar) {
            return None;
        }
        let mut runs = std::collections::VecDeque::new();
        let mut key: Option<ConnKey> = None;
        let mut complete = true;
        for i in 0..items.len() {
            let layer = crate::engine::loop_items::item_layer(task, items, i, loop_var);
            let item_scope = scope.with(layer);
            match self.when_holds(task, &item_scope) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(_) => {
                    complete = false;
                    break;
                }
            }
            let ItemPlan::Agent(item) = self.plan_item(ctx, task, h, &item_scope).await else {
                complete = false;
                break;
            };
            let this = crate::engine::connect::conn_key(h, &item.spec);
            if *key.get_or_insert_with(|| this.clone()) != this || local_files(task, &item) {
                // Another agent; or an item may write the controller's files the next reads.
                complete = false;
                break;
            }
            runs.push_back((i, item));
        }
        Some((runs, key?, complete))
    }

    /// Item `i`'s event from the batch; `None` when the batch does not hold it (any more): it
    /// runs on its own then.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::engine) async fn loop_item(
        &self,
        ctx: &PlayCtx<'_>,
        task: &crate::playbook::Task,
        h: &mut HostState,
        item_scope: &Arc<Scope>,
        b: &mut LoopBatch,
        i: usize,
        label: Option<String>,
    ) -> Option<crate::engine::result::Event> {
        if b.ended {
            return None;
        }
        if b.runs.front().is_none_or(|(j, _, _)| *j != i) {
            // Past the items sent: the batch's end is read before anything else is sent. (In
            // a larger batch every item that runs was sent: the item runs on its own, which
            // the channel refuses while that batch goes on, so it fails saying so.)
            self.end_loop_batch(h, b).await;
            return None;
        }
        let (_, step, item) = b.runs.pop_front()?;
        let Some(conn) = h.conns.get_mut(&b.key) else {
            b.ended = true;
            return None;
        };
        let answer = match conn.next_step(item.timeout, std::future::pending()).await {
            Ok(Some((index, resp))) => answer_of(step, index, resp),
            Ok(None) => {
                b.ended = true;
                return None;
            }
            Err(e) => Err(e),
        };
        b.ended |= answer.is_err();
        if let Ok(Response::NeedContent { .. }) = &answer {
            // The agent ended the batch there: the content is sent and the item asked again on
            // its own, and the items after it run on their own.
            while let Ok(Some(_)) = conn.next_step(None, std::future::pending()).await {}
            b.ended = true;
        }
        let r = self.agent_answer(ctx, h, &item, answer).await;
        let wrote = outbox_writer(&r);
        let ev = self.finish_item(task, h, item_scope, r, label);
        b.settle.push((wrote, ev.status));
        Some(ev)
    }

    /// The batch's end read (after a failure the loop stopped at), and the outbox settled.
    pub(in crate::engine) async fn loop_batch_done(&self, h: &mut HostState, mut b: LoopBatch) {
        self.end_loop_batch(h, &mut b).await;
        for (wrote, status) in std::mem::take(&mut b.settle) {
            self.settle_outbox(h, wrote, status).await;
        }
    }

    async fn end_loop_batch(&self, h: &mut HostState, b: &mut LoopBatch) {
        if b.ended {
            return;
        }
        b.ended = true;
        if b.shared {
            return;
        }
        if let Some(conn) = h.conns.get_mut(&b.key) {
            while let Ok(Some(_)) = conn.next_step(None, std::future::pending()).await {}
        }
    }
}
