//! The free strategy: every host runs a section in its own lane, all lanes at once.

use super::state::{HostState, PlayCtx};
use super::Engine;
use crate::playbook::Step;
use crate::report::Reporter;
use crate::vars::hostvars;
use serde_json::Map;
use std::collections::BTreeMap;
use std::sync::Arc;

impl Engine {
    /// `strategy: free`: every host runs the section (and then its handlers) in its own lane,
    /// all lanes at once, so no host waits for another between tasks. A lane is an engine that
    /// owns that one host's state; the other hosts' `hostvars` are those of the section start.
    pub(super) async fn run_free_section(
        &mut self,
        ctx: &PlayCtx<'_>,
        section: &[&[Step]],
        batch: &[String],
    ) {
        let objects = self.objects_now(ctx);
        let peers = self.hostvars_now(&objects);
        let mut lanes = Vec::new();
        for h in batch {
            if !self.hosts[h].active() {
                continue;
            }
            let hs = self.hosts.remove(h).expect("host state");
            lanes.push(self.lane(hs, peers.clone()));
        }
        let futures = lanes.into_iter().map(|mut lane| async move {
            let allowed: Vec<String> = lane.hosts.keys().cloned().collect();
            let lane_ctx = PlayCtx {
                hosts: allowed.clone(),
                ..ctx.with_params(Map::new())
            };
            for steps in section {
                lane.run_steps(&lane_ctx, steps, &allowed).await;
            }
            if !lane.play_ended {
                lane.flush_handlers(&lane_ctx).await;
            }
            lane
        });
        // --forks bounds how many hosts are worked on at once, as in the linear strategy.
        use futures::StreamExt;
        let done: Vec<Engine> = futures::stream::iter(futures)
            .buffer_unordered(self.cfg.forks)
            .collect()
            .await;
        for lane in done {
            self.hosts.extend(lane.hosts);
            self.replay_inventory(lane.inventory_log);
            self.changed_log.extend(lane.changed_log);
            self.reporter.add_drifts(lane.reporter.drifts());
            self.started |= lane.started;
            // `meta: end_play` in any lane ends the play (the other lanes finished the section).
            self.play_ended |= lane.play_ended;
            self.run_stopped |= lane.run_stopped;
            self.add_handlers(lane.handlers.to_vec());
        }
    }

    /// An engine for one host of a free play, sharing this one's configuration and caches.
    fn lane(&self, hs: HostState, peers: Arc<hostvars::Table>) -> Engine {
        let mut hosts = BTreeMap::new();
        hosts.insert(hs.name.clone(), hs);
        Engine {
            cfg: self.cfg.clone(),
            templar: self.templar.clone(),
            inventory: self.inventory.clone(),
            original_inventory: self.original_inventory.clone(),
            pending_inventory: Default::default(),
            inventory_log: Vec::new(),
            inventory_refreshed: false,
            play_hosts_all: self.play_hosts_all.clone(),
            inventory_groups: self.inventory_groups.clone(),
            grouped_objects: self.grouped_objects.clone(),
            reporter: Reporter::new(
                self.cfg.json,
                self.cfg.verbosity,
                self.cfg.diff || self.cfg.twice,
                self.progress.clone(),
            ),
            progress: self.progress.clone(),
            hosts,
            binary: self.binary.clone(),
            changed_log: Vec::new(),
            run_id: self.run_id.clone(),
            drift: self.drift,
            play_ended: false,
            playbook_stopped: false,
            run_stopped: false,
            free_throttles: self.free_throttles.clone(),
            handler_include: None,
            tag_scope: self.tag_scope.clone(),
            public_roles: self.public_roles.clone(),
            started: self.started,
            rescue_depth: 0,
            failed_before: Vec::new(),
            fatal_now: false,
            fatal_excused: Vec::new(),
            hostvars: self.hostvars.fork(),
            peer_hostvars: Some(peers),
            handlers: self.handlers.clone(),
            // One Ctrl-C stops every lane.
            interrupt: self.interrupt.clone(),
        }
    }
}
