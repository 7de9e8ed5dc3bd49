//! The linear strategy: each step on every host still in the play before the next step. A
//! `strategy: free` lane runs the same loop with its one host.

use super::section;
use super::state::PlayCtx;
use super::Engine;
use crate::playbook::Step;
use std::sync::Arc;

impl Engine {
    /// Run a list of steps on the hosts of `allowed` that are still active.
    pub(super) fn run_steps<'s>(
        &'s mut self,
        ctx: &'s PlayCtx<'s>,
        steps: &'s [Step],
        allowed: &'s [String],
    ) -> futures::future::BoxFuture<'s, ()> {
        Box::pin(async move {
            let mut at = 0;
            while at < steps.len() {
                let step = &steps[at];
                at += 1;
                let targets: Vec<String> = allowed
                    .iter()
                    .filter(|h| {
                        let hs = &self.hosts[*h];
                        let forced = self.handler_include == Some(true);
                        hs.active() || (forced && hs.failed && !hs.unreachable)
                    })
                    .cloned()
                    .collect();
                if targets.is_empty() || self.play_ended {
                    return;
                }
                let targets = self.outside_ended_role(step, targets);
                let targets = self.outside_completed_role(step, targets);
                if targets.is_empty() {
                    continue;
                }
                if let Some(sec) = self.section_at(ctx, &steps[at - 1..]) {
                    self.run_section(ctx, &sec, &targets).await;
                    at += sec.steps - 1;
                    self.check_fail_limits(ctx);
                    continue;
                }
                // --start-at-task: every step before it is passed by (an include too, whose
                // file is not looked into), a block's are looked at one by one.
                if let (false, Some(want)) = (self.started, &self.cfg.start_at_task) {
                    if !matches!(step, Step::Block(_)) {
                        if !super::start_at::is_start(step, want) {
                            continue;
                        }
                        self.started = true;
                    }
                }
                match step {
                    Step::Task(task) => {
                        if self.tag_selected(&task.tags) {
                            self.run_task(ctx, task, &targets, false).await;
                            self.task_fail_limits(task, &targets);
                            self.deliver_delegated_facts(&targets);
                        }
                    }
                    Step::Block(block) => self.run_block(ctx, block, &targets).await,
                    Step::Include(inc) => {
                        if self.tag_selected(&inc.tags) {
                            self.run_include(ctx, inc, &targets).await;
                        }
                    }
                    Step::Meta(meta) => {
                        if self.tag_selected(&meta.tags) {
                            self.run_meta(ctx, meta, &targets).await;
                        }
                    }
                }
                self.check_fail_limits(ctx);
            }
        })
    }

    /// `targets` without the hosts that ended the role invocation `step` belongs to (`meta:
    /// end_role`): as ansible-core, they pass by the rest of it, `rescue` and `always` too. A
    /// host that reaches a step of another invocation has left the ended one.
    fn outside_ended_role(&mut self, step: &Step, targets: Vec<String>) -> Vec<String> {
        let role = step.role();
        targets
            .into_iter()
            .filter(|h| {
                let hs = self.hosts.get_mut(h).expect("host state");
                match &hs.ended_role {
                    Some(ended) if role.is_some_and(|r| Arc::ptr_eq(r, ended)) => false,
                    Some(_) => {
                        hs.ended_role = None;
                        true
                    }
                    None => true,
                }
            })
            .collect()
    }

    /// `targets` without the hosts that pass `step` by because they completed its role in this
    /// play (`RoleDedup`), as ansible-core passes by, unreported, the tasks of a role that does
    /// not allow duplicates. A block is left to its steps: a block's steps may belong to
    /// different roles.
    fn outside_completed_role(&mut self, step: &Step, targets: Vec<String>) -> Vec<String> {
        let Some(dedup) = (match step {
            Step::Block(_) => None,
            _ => step.role().and_then(|r| r.dedup),
        })
        .filter(|d| d.may_pass_by()) else {
            return targets;
        };
        targets
            .into_iter()
            .filter(|h| {
                let hs = self.hosts.get_mut(h).expect("host state");
                let ran = hs.roles_ran.contains(&hs.role_identity(&dedup));
                !*hs.role_passed_by.entry(dedup.expansion).or_insert(ran)
            })
            .collect()
    }

    /// The section of tasks that starts at `steps[0]` (see `section`), when pipelining is on
    /// and the play leaves room for one: its failure limits are checked after every task.
    pub(super) fn section_at<'s>(
        &self,
        ctx: &PlayCtx<'_>,
        steps: &'s [Step],
    ) -> Option<section::Section<'s>> {
        let fail_limits = ctx.play.any_errors_fatal || ctx.play.max_fail_percentage.is_some();
        // A section could run on past the end of a role a host ended, and its hosts stop at a
        // failure where a forced handler's include goes on: step by step then.
        let role_ended = ctx
            .hosts
            .iter()
            .any(|h| self.hosts.get(h).is_some_and(|hs| hs.ended_role.is_some()));
        if !self.cfg.pipelining
            || !self.started
            || fail_limits
            || role_ended
            || self.handler_include == Some(true)
            || self.interrupt.requested()
        {
            return None;
        }
        section::section(steps, ctx.play, &self.templar, &|t| {
            self.tag_selected(&t.tags)
        })
    }

    /// `any_errors_fatal` and `max_fail_percentage`, after each step: a fatal failure fails
    /// every other host at once; outside a block with a rescue (where a failure may still be
    /// rescued), the play ends when the batch failed more than `max_fail_percentage` allows.
    fn check_fail_limits(&mut self, ctx: &PlayCtx<'_>) {
        let fatal_now = std::mem::take(&mut self.fatal_now);
        // A free play's hosts do not wait for each other: ansible-core ignores both there.
        if ctx.play.free {
            return;
        }
        let failed = ctx
            .hosts
            .iter()
            .filter(|h| {
                let hs = &self.hosts[*h];
                (hs.failed || hs.unreachable) && !self.failed_before.contains(*h)
            })
            .count();
        if failed == 0 {
            return;
        }
        // As in ansible-core, `any_errors_fatal` is the failing task's (inherited from its
        // block, role and play): a task that says false does not end the play.
        let fatal = fatal_now
            || ctx.play.any_errors_fatal
                && ctx.hosts.iter().any(|h| {
                    let hs = &self.hosts[h];
                    (hs.failed || hs.unreachable)
                        && !self.failed_before.contains(h)
                        && !self.fatal_excused.contains(h)
                });
        if fatal {
            // As ansible-core: every other host is marked failed at once (inside a block
            // with a `rescue` too), and goes through the `rescue` and `always` of the blocks
            // it is in, as a failed host does; what stays failed runs nothing more.
            let mut marked = 0;
            for h in &ctx.hosts {
                let hs = self.hosts.get_mut(h).expect("host state");
                if hs.active() {
                    hs.failed = true;
                    hs.marked_now = true;
                    hs.fatal_marked = true;
                    marked += 1;
                }
            }
            if marked > 0 {
                self.reporter.warn(&format!(
                    "play \"{}\": {failed} host(s) failed under any_errors_fatal: the other \
                     {marked} are failed too",
                    ctx.play.name
                ));
            }
            return;
        }
        if self.rescue_depth > 0 {
            return;
        }
        let over = ctx
            .play
            .max_fail_percentage
            .is_some_and(|max| (failed as f64) * 100.0 / (ctx.hosts.len() as f64) > max);
        if over {
            self.reporter.warn(&format!(
                "play \"{}\" ends for all hosts: {failed} host(s) failed (max_fail_percentage \
                 {} exceeded)",
                ctx.play.name,
                ctx.play.max_fail_percentage.unwrap_or_default()
            ));
            self.play_ended = true;
            self.playbook_stopped = true;
            // The hosts that did not fail did not finish the play either: the run fails.
            for h in &ctx.hosts {
                let hs = self.hosts.get_mut(h).expect("host state");
                if hs.active() {
                    hs.failed = true;
                }
            }
        }
    }

    /// A task that sets `any_errors_fatal` itself (or through its block or role) decides for
    /// the hosts it failed: true fails every host at the next check, false keeps the play's
    /// `any_errors_fatal` from counting them. Every target was active when the task began.
    fn task_fail_limits(&mut self, task: &crate::playbook::Task, targets: &[String]) {
        let Some(fatal) = task.any_errors_fatal else {
            return;
        };
        let failed: Vec<String> = targets
            .iter()
            .filter(|h| {
                let hs = &self.hosts[*h];
                hs.failed || hs.unreachable
            })
            .cloned()
            .collect();
        if failed.is_empty() {
            return;
        }
        if fatal {
            self.fatal_now = true;
        } else {
            self.fatal_excused.extend(failed);
        }
    }

    /// Facts a `delegate_facts` task set for the hosts it was delegated to (kept on the
    /// delegating host's state while the task ran): they join those hosts' facts now.
    fn deliver_delegated_facts(&mut self, targets: &[String]) {
        let mut moving = Vec::new();
        for h in targets {
            if let Some(hs) = self.hosts.get_mut(h) {
                moving.append(&mut hs.delegated_facts);
            }
        }
        for (to, facts, set_fact) in moving {
            let hs = self.host_state(&to);
            if set_fact {
                for (k, v) in facts {
                    hs.set_var(&k, v);
                }
            } else {
                super::facts::merge_facts(std::sync::Arc::make_mut(&mut hs.facts), &facts);
            }
        }
    }
}
