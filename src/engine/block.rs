//! `block` / `rescue` / `always`.

use super::state::PlayCtx;
use super::Engine;
use crate::playbook::Block;

impl Engine {
    /// `block` / `rescue` / `always`: hosts that fail in the block run the rescue, and count as
    /// rescued instead of failed as they enter it (as Ansible does: a failing rescue adds its
    /// own failure); every host that entered runs the always part.
    pub(super) async fn run_block(&mut self, ctx: &PlayCtx<'_>, block: &Block, entered: &[String]) {
        for h in entered {
            self.hosts.get_mut(h).expect("host state").last_failure = None;
        }
        let rescuable = !block.rescue.is_empty();
        self.rescue_depth += usize::from(rescuable);
        self.run_steps(ctx, &block.block, entered).await;
        self.rescue_depth -= usize::from(rescuable);
        let failed_here = |me: &Self| -> Vec<String> {
            entered
                .iter()
                .filter(|h| {
                    let hs = &me.hosts[*h];
                    hs.failed && !hs.unreachable
                })
                .cloned()
                .collect()
        };
        let to_rescue = failed_here(self);
        if !block.rescue.is_empty() && !to_rescue.is_empty() {
            for h in &to_rescue {
                let hs = self.hosts.get_mut(h).expect("host state");
                hs.failed = false;
                if std::mem::take(&mut hs.marked_now) {
                    // Failed by another host's fatal failure: rescued, but not counted so,
                    // and without a failure of its own to show.
                    continue;
                }
                hs.stats.failed = hs.stats.failed.saturating_sub(1);
                hs.stats.rescued += 1;
                let (task, result) = hs.last_failure.clone().unwrap_or_default();
                hs.set_var("ansible_failed_task", task);
                hs.set_var("ansible_failed_result", result);
            }
            self.run_steps(ctx, &block.rescue, &to_rescue).await;
        }
        if !block.always.is_empty() && !self.play_ended {
            // Hosts that failed in the block (and were not rescued) run `always` and stay failed,
            // unless the `always` clears host errors (`meta: clear_host_errors`): then they go on
            // with the play, as under ansible-core, whose host is still in the block then.
            let still_failed = failed_here(self);
            let mut cleared_before = Vec::new();
            for h in &still_failed {
                let hs = self.hosts.get_mut(h).expect("host state");
                hs.failed = false;
                cleared_before.push(hs.cleared);
            }
            let runners: Vec<String> = entered
                .iter()
                .filter(|h| !self.hosts[*h].unreachable)
                .cloned()
                .collect();
            self.run_steps(ctx, &block.always, &runners).await;
            for (h, before) in still_failed.iter().zip(cleared_before) {
                let hs = self.hosts.get_mut(h).expect("host state");
                if hs.cleared == before {
                    hs.failed = true;
                }
            }
        }
    }
}
