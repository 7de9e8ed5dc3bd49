//! Changes a run makes to the inventory (`add_host`, `group_by`), applied as ansible-core's
//! `add_dynamic_host` / `add_dynamic_group` do, each saying whether it changed anything.
//!
//! The engine applies them through one function (`engine/actions/inventory.rs`); this file
//! only knows the model.

use super::model::{merge, HostSource, Inventory, InventoryError, Vars, ALL};
use std::collections::HashSet;
use std::path::Path;

/// One change to the inventory during a run.
#[derive(Debug, Clone, PartialEq)]
pub enum InventoryEdit {
    /// `add_host`: the host (created when missing), its variables merged over its own, and the
    /// groups it joins (created when missing).
    AddHost {
        name: String,
        groups: Vec<String>,
        vars: Vars,
    },
    /// `group_by`: `host` joins `group`, which becomes a child of each of `parents`.
    GroupBy {
        host: String,
        group: String,
        parents: Vec<String>,
    },
}

impl Inventory {
    /// Whether `host` is in this inventory, or is the implicit local host.
    pub fn knows_host(&self, host: &str) -> bool {
        self.has_host(host) || self.is_implicit(host)
    }

    /// Apply the run's edits again on sources read anew (`meta: refresh_inventory`): as in
    /// ansible-core, a `group_by` of a host the sources no longer have is dropped.
    pub fn replay_edits(&mut self, edits: &[InventoryEdit]) {
        for e in edits {
            if let InventoryEdit::GroupBy { host, .. } = e {
                if !self.knows_host(host) {
                    continue;
                }
            }
            // Each edit was accepted once, on the same groups or fewer: one that the sources
            // now make a cycle of is left out.
            let _ = self.apply_edit(e);
        }
    }

    /// Apply one edit; `Ok(true)` when the inventory changed. An edit that would make a group
    /// its own ancestor is refused before anything changes.
    pub fn apply_edit(&mut self, edit: &InventoryEdit) -> Result<bool, InventoryError> {
        let (groups_before, hosts_before) = (self.groups.len(), self.hosts.len());
        let changed = match edit {
            InventoryEdit::AddHost { name, groups, vars } => {
                self.add_dynamic_host(name, groups, vars)
            }
            InventoryEdit::GroupBy {
                host,
                group,
                parents,
            } => self.add_dynamic_group(host, group, parents)?,
        };
        if changed {
            // Orphan groups under `all`, `ungrouped` recomputed, depths: as on load. No cycle can
            // appear (checked above), so this cannot fail.
            self.finalize()?;
        }
        if self.groups.len() != groups_before || self.hosts.len() != hosts_before {
            let (groups, hosts) = match edit {
                InventoryEdit::AddHost { name, groups, .. } => (groups.clone(), vec![name.clone()]),
                InventoryEdit::GroupBy {
                    host,
                    group,
                    parents,
                } => {
                    let mut g = parents.clone();
                    g.push(group.clone());
                    (g, vec![host.clone()])
                }
            };
            self.load_vars_of(&groups, &hosts)?;
        }
        Ok(changed)
    }

    fn add_dynamic_host(&mut self, name: &str, groups: &[String], vars: &Vars) -> bool {
        let mut changed = false;
        if !self.has_host(name) {
            // ansible-core puts a new host directly in `all`, whose own hosts come before its
            // children's: `all` (and so `hosts: all`) lists added hosts first, in the order
            // they were added. It read no source: its `inventory_file` and `inventory_dir`
            // are null.
            self.current_source = Some(HostSource::Run);
            self.add_host_to_group(ALL, name);
            self.current_source = None;
            changed = true;
        }
        let own = self.host_vars.entry(name.to_string()).or_default();
        let mut merged = own.clone();
        merge(&mut merged, vars);
        if merged != *own {
            *own = merged;
            changed = true;
        }
        for g in groups {
            if !self.groups.contains_key(g) {
                self.declare_group(g);
                changed = true;
            }
            changed |= self.join(name, g);
        }
        changed
    }

    fn add_dynamic_group(
        &mut self,
        host: &str,
        group: &str,
        parents: &[String],
    ) -> Result<bool, InventoryError> {
        for p in parents {
            if p == group || self.descendants(group).contains(p.as_str()) {
                return Err(InventoryError::new(
                    Path::new(&self.source),
                    None,
                    None,
                    format!("group_by: making `{p}` a parent of `{group}` would put `{group}` inside itself"),
                ));
            }
        }
        if !self.has_host(host) {
            // The implicit localhost (not in the inventory file) becomes a real one, still local.
            self.add_host(host);
            self.set_host_var(host, "ansible_connection", "local".into());
        }
        // As ansible-core: creating the group alone is no change, creating a parent is.
        if !self.groups.contains_key(group) {
            self.declare_group(group);
        }
        let mut changed = false;
        for p in parents {
            if !self.groups.contains_key(p) {
                self.declare_group(p);
                changed = true;
            }
            if !self.groups[p].children.iter().any(|c| c == group) {
                self.link(p, group, None);
                changed = true;
            }
        }
        changed |= self.join(host, group);
        Ok(changed)
    }

    /// `host` becomes a direct member of `group`; true when it was not one.
    fn join(&mut self, host: &str, group: &str) -> bool {
        if group == ALL || self.groups[group].hosts.iter().any(|h| h == host) {
            return false;
        }
        self.add_host_to_group(group, host);
        true
    }

    /// Every group below `group` (its children, theirs...).
    fn descendants(&self, group: &str) -> HashSet<&str> {
        let mut out = HashSet::new();
        let mut todo = vec![group];
        while let Some(g) = todo.pop() {
            for c in self
                .groups
                .get(g)
                .map(|g| g.children.as_slice())
                .unwrap_or(&[])
            {
                if out.insert(c.as_str()) {
                    todo.push(c);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::testutil::{strs, write};
    use serde_json::{json, Value};

    fn inv(text: &str) -> (tempfile::TempDir, Inventory) {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "hosts", text);
        let inv = Inventory::load(&p).unwrap();
        (dir, inv)
    }

    fn add_host(name: &str, groups: &[&str], vars: Value) -> InventoryEdit {
        InventoryEdit::AddHost {
            name: name.into(),
            groups: strs(groups),
            vars: vars.as_object().cloned().unwrap_or_default(),
        }
    }

    fn group_by(host: &str, group: &str, parents: &[&str]) -> InventoryEdit {
        InventoryEdit::GroupBy {
            host: host.into(),
            group: group.into(),
            parents: strs(parents),
        }
    }

    #[test]
    fn add_host_creates_host_groups_and_vars_once() {
        let (_d, mut inv) = inv("h1\n[web]\nh2\n");
        let e = add_host(
            "new",
            &["n1", "n2"],
            json!({"foo": "bar", "ansible_ssh_port": 2222}),
        );
        assert!(inv.apply_edit(&e).unwrap());
        assert!(
            !inv.apply_edit(&e).unwrap(),
            "the same edit again changes nothing"
        );
        // Added hosts come first in `all`, as in ansible-core.
        assert_eq!(inv.select("all").unwrap(), strs(&["new", "h1", "h2"]));
        assert_eq!(inv.select("n1").unwrap(), strs(&["new"]));
        assert_eq!(inv.group_names("new"), strs(&["n1", "n2"]));
        assert_eq!(inv.host_vars("new")["foo"], "bar");
        // New variables on a known host are a change; its other variables stay.
        assert!(inv
            .apply_edit(&add_host("new", &[], json!({"x": 1})))
            .unwrap());
        assert_eq!(inv.host_vars("new")["foo"], "bar");
        let second = add_host("other", &[], json!({}));
        assert!(inv.apply_edit(&second).unwrap());
        assert_eq!(
            inv.select("all").unwrap(),
            strs(&["new", "other", "h1", "h2"])
        );
        // Hosts a source left ungrouped first, then those added later, as ansible-core's
        // `reconcile_inventory` appends them.
        assert_eq!(inv.select("ungrouped").unwrap(), strs(&["h1", "other"]));
    }

    #[test]
    fn group_by_adds_the_host_and_links_parents() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "group_vars/c-red.yml", "shade: crimson\n");
        let mut inv = Inventory::load(&write(d.path(), "hosts", "h1\nh2\n")).unwrap();
        assert!(inv
            .apply_edit(&group_by("h1", "c-red", &["colors"]))
            .unwrap());
        assert!(!inv
            .apply_edit(&group_by("h1", "c-red", &["colors"]))
            .unwrap());
        assert!(inv
            .apply_edit(&group_by("h2", "c-red", &["colors"]))
            .unwrap());
        assert_eq!(inv.select("colors").unwrap(), strs(&["h1", "h2"]));
        assert_eq!(inv.group_names("h1"), strs(&["c-red", "colors"]));
        assert!(inv.select("ungrouped").unwrap().is_empty());
        // The new group's group_vars apply to its members.
        assert_eq!(inv.host_vars("h1")["shade"], "crimson");
        // A new parent of an existing membership is a change too.
        assert!(inv
            .apply_edit(&group_by("h1", "c-red", &["all", "more"]))
            .unwrap());
        let e = inv
            .apply_edit(&group_by("h1", "colors", &["c-red"]))
            .unwrap_err();
        assert!(e.msg.contains("inside itself"), "{}", e.msg);
    }
}
