//! What `fixpoint inventory` prints: `--list` JSON and the `--graph` tree, as
//! `ansible-inventory` draws them.

use serde_json::{Map, Value};

use super::model::{Inventory, ALL};

impl Inventory {
    /// The inventory as `ansible-inventory --list` prints it: `_meta.hostvars` with every
    /// host's merged variables, then each non-empty group with its direct `hosts` and
    /// `children` (`all` lists only children).
    pub fn to_list_json(&self) -> Value {
        let hostvars: Map<String, Value> = self
            .hosts
            .iter()
            .map(|h| (h.clone(), Value::Object(self.shown_vars(h))))
            .collect();
        let mut out = Map::new();
        out.insert("_meta".into(), serde_json::json!({ "hostvars": hostvars }));
        for (name, g) in &self.groups {
            let mut entry = Map::new();
            if name != ALL {
                let hosts = self.in_inventory_order(g.hosts.iter().map(String::as_str));
                if !hosts.is_empty() {
                    entry.insert("hosts".into(), Value::from(hosts));
                }
            }
            let mut children = g.children.clone();
            children.sort();
            if !children.is_empty() {
                entry.insert("children".into(), Value::from(children));
            }
            // Like Ansible, groups with neither hosts nor children are left out.
            if !entry.is_empty() {
                out.insert(name.clone(), Value::Object(entry));
            }
        }
        Value::Object(out)
    }

    /// The group tree as `ansible-inventory --graph [group]` draws it, children and hosts
    /// sorted by name, ending with a newline. Empty for an unknown group.
    pub fn to_graph(&self, group: Option<&str>) -> String {
        let root = group.unwrap_or(ALL);
        if !self.groups.contains_key(root) {
            return String::new();
        }
        let mut lines = Vec::new();
        self.graph_group(root, 0, &mut lines);
        let mut s = lines.join("\n");
        s.push('\n');
        s
    }

    fn graph_group(&self, name: &str, depth: usize, out: &mut Vec<String>) {
        out.push(graph_line(&format!("@{name}:"), depth));
        let g = &self.groups[name];
        let mut kids = g.children.clone();
        kids.sort();
        for k in &kids {
            self.graph_group(k, depth + 1, out);
        }
        if name != ALL {
            let mut hosts = g.hosts.clone();
            hosts.sort();
            for h in &hosts {
                out.push(graph_line(h, depth + 1));
            }
        }
    }
}

fn graph_line(name: &str, depth: usize) -> String {
    if depth == 0 {
        name.to_string()
    } else {
        format!("{}--{name}", "  |".repeat(depth))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::testutil::write;

    #[test]
    fn list_json_and_graph_match_ansible_inventory() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "hosts",
            "lone\n[web]\nw2\nw1 x=1\n[db]\n[site:children]\nweb\ndb\n",
        );
        let inv = Inventory::load(&p).unwrap();
        let list = inv.to_list_json();
        assert_eq!(
            list["all"],
            serde_json::json!({"children": ["site", "ungrouped"]})
        );
        assert_eq!(list["site"], serde_json::json!({"children": ["db", "web"]}));
        assert_eq!(list["web"], serde_json::json!({"hosts": ["w2", "w1"]}));
        assert_eq!(list["ungrouped"], serde_json::json!({"hosts": ["lone"]}));
        assert!(list.get("db").is_none(), "empty groups are omitted");
        assert_eq!(list["_meta"]["hostvars"]["w1"], serde_json::json!({"x": 1}));
        assert_eq!(list["_meta"]["hostvars"]["lone"], serde_json::json!({}));

        assert_eq!(
            inv.to_graph(None),
            "@all:\n  |--@site:\n  |  |--@db:\n  |  |--@web:\n  |  |  |--w1\n  |  |  |--w2\n  |--@ungrouped:\n  |  |--lone\n"
        );
        assert_eq!(inv.to_graph(Some("web")), "@web:\n  |--w1\n  |--w2\n");
        assert_eq!(inv.to_graph(Some("nope")), "");
        assert_eq!(inv.host_json("w1"), Some(serde_json::json!({"x": 1})));
        assert_eq!(inv.host_json("ghost"), None);
    }
}
