//! `add_host` and `group_by`: the actions that change the inventory during a run, and the one
//! place where the engine installs those changes (`Engine::commit_inventory`).
//!
//! A host future cannot change the engine's inventory while other hosts read it, so an edit
//! goes to a working copy (`PendingInventory`), which answers whether it changed anything (the
//! result's `changed`, as ansible-core decides it); the engine installs the copy after the task,
//! before the next one renders anything, and drops what was derived from the old inventory.

use super::super::result::ItemResult;
use super::super::{Engine, Shared};
use crate::inventory::{Inventory, InventoryEdit};
use crate::playbook::actions::{AddHostParams, GroupByParams};
use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex};

/// The inventory as the current task's edits left it (`None`: untouched), and those edits.
#[derive(Default)]
pub(in crate::engine) struct PendingInventory {
    inventory: Option<Inventory>,
    edits: Vec<InventoryEdit>,
    /// The hosts of the `add_host` edits that changed the inventory.
    added_hosts: Vec<String>,
}

/// The host an `add_host` edit names.
fn added_host(edit: &InventoryEdit) -> Option<&str> {
    match edit {
        InventoryEdit::AddHost { name, .. } => Some(name),
        _ => None,
    }
}

/// Shared by the host futures of one task.
pub(in crate::engine) type Pending = Mutex<PendingInventory>;

impl Shared<'_> {
    /// Apply `edit` to the task's working copy of the inventory; true when it changed anything.
    fn edit_inventory(&self, edit: InventoryEdit) -> Result<bool, String> {
        // A host future that panicked while holding the lock left the copy as it was.
        let mut p = self
            .pending_inventory
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let inv = p.inventory.get_or_insert_with(|| self.inventory.clone());
        let changed = inv.apply_edit(&edit).map_err(|e| e.msg)?;
        if let (true, Some(name)) = (changed, added_host(&edit)) {
            p.added_hosts.push(name.to_string());
        }
        p.edits.push(edit);
        Ok(changed)
    }

    /// `group_by`: the host joins the group named by `key` (spaces become `-`, as in
    /// ansible-core), below `parents` (default `all`).
    pub(in crate::engine) fn group_by(&self, host: &str, params: &Value) -> ItemResult {
        let p: GroupByParams = match crate::playbook::actions::parse(params) {
            Ok(p) => p,
            Err(e) => {
                return ItemResult::failed(
                    format!("invalid parameters for `group_by`: {e}"),
                    Map::new(),
                )
            }
        };
        let group = p.key.replace(' ', "-");
        let parents: Vec<String> = p
            .parents
            .map(|l| l.0)
            .unwrap_or_else(|| vec!["all".into()])
            .iter()
            .map(|g| g.replace(' ', "-"))
            .collect();
        let edit = InventoryEdit::GroupBy {
            host: host.to_string(),
            group: group.clone(),
            parents: parents.clone(),
        };
        match self.edit_inventory(edit) {
            Ok(changed) => ItemResult::done(fixpoint_modules::Outcome {
                changed,
                result: [
                    ("add_group".to_string(), json!(group)),
                    ("parent_groups".to_string(), json!(parents)),
                ]
                .into_iter()
                .collect(),
                ..Default::default()
            }),
            Err(msg) => ItemResult::failed(msg, Map::new()),
        }
    }

    /// `add_host`: a host (`name`, `name:port`) with groups and variables, for later plays.
    pub(in crate::engine) fn add_host(&self, params: &Value) -> ItemResult {
        let p = match AddHostParams::from_value(params) {
            Ok(p) => p,
            Err(e) => return ItemResult::failed(e, Map::new()),
        };
        let mut result = Map::new();
        result.insert(
            "add_host".into(),
            json!({"host_name": p.name, "groups": p.groups, "host_vars": p.vars}),
        );
        let edit = InventoryEdit::AddHost {
            name: p.name,
            groups: p.groups,
            vars: p.vars,
        };
        match self.edit_inventory(edit) {
            Ok(changed) => ItemResult::done(fixpoint_modules::Outcome {
                changed,
                result,
                ..Default::default()
            }),
            Err(msg) => ItemResult::failed(msg, result),
        }
    }
}

impl Engine {
    /// Install the inventory the last task's `add_host`/`group_by` left, if any: the one
    /// place the inventory changes during a run, so everything derived from it is dropped
    /// here (`hostvars` entries, connection specs, each host's inventory variables, `groups`).
    pub(in crate::engine) fn commit_inventory(&mut self) {
        let pending = std::mem::take(
            &mut *self
                .pending_inventory
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        let Some(inv) = pending.inventory else {
            return;
        };
        self.inventory_log.extend(pending.edits);
        self.install_inventory(Arc::new(inv));
        for h in pending.added_hosts {
            self.add_play_host(h);
        }
    }

    /// A host an `add_host` added or changed joins the running play's `ansible_play_hosts_all`
    /// (whatever the play's pattern), as ansible-core adds it to its strategy's host cache.
    fn add_play_host(&mut self, name: String) {
        if !self.play_hosts_all.contains(&name) {
            self.play_hosts_all.push(name);
        }
    }

    /// Replay edits made elsewhere (a `strategy: free` lane's) on this engine's inventory.
    pub(in crate::engine) fn replay_inventory(&mut self, edits: Vec<InventoryEdit>) {
        if edits.is_empty() {
            return;
        }
        let mut inv = (*self.inventory).clone();
        let mut added = Vec::new();
        for e in &edits {
            // Each edit was accepted by the lane's copy of this same inventory.
            if let (Ok(true), Some(name)) = (inv.apply_edit(e), added_host(e)) {
                added.push(name.to_string());
            }
        }
        self.inventory_log.extend(edits);
        self.install_inventory(Arc::new(inv));
        for h in added {
            self.add_play_host(h);
        }
    }

    /// `meta: refresh_inventory`: the `-i` sources read again, then this run's `add_host` and
    /// `group_by` edits made again on them, as ansible-core replays its dynamic hosts and
    /// groups. A host the sources no longer have runs no more of the play, as under
    /// ansible-core; a new one joins only later plays. An `Err` says why the sources cannot be
    /// read.
    pub(in crate::engine) fn refresh_inventory(&mut self) -> Result<(), String> {
        let mut inv = self.inventory.reloaded(&self.cfg.inventory).map_err(|e| {
            format!(
                "cannot refresh the inventory: {}: {}",
                e.file.display(),
                e.msg
            )
        })?;
        inv.replay_edits(&self.inventory_log);
        for hs in self.hosts.values_mut() {
            if !inv.knows_host(&hs.name) {
                hs.ended = true;
            }
        }
        self.install_inventory(Arc::new(inv));
        self.inventory_refreshed = true;
        Ok(())
    }

    /// Back to the inventory the run started with (each `--twice` pass starts from it).
    pub(in crate::engine) fn restore_inventory(&mut self) {
        if self.inventory_log.is_empty() && !self.inventory_refreshed {
            return;
        }
        self.inventory_refreshed = false;
        self.inventory_log.clear();
        self.install_inventory(self.original_inventory.clone());
    }

    fn install_inventory(&mut self, inv: Arc<Inventory>) {
        self.inventory = inv;
        self.inventory_groups = Some(self.inventory.groups_map());
        self.grouped_objects = None;
        // New `inv_vars` maps: `hostvars` entries notice a change by their address.
        for h in self.hosts.values_mut() {
            h.inv_vars = Arc::new(self.inventory.host_vars(&h.name));
        }
        self.hostvars_changed();
    }
}
