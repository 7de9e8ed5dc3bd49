//! The variables the engine defines itself, as Ansible does: `inventory_hostname`,
//! `group_names`, `ansible_play_hosts`, `role_path`, `ansible_loop`, `omit`...

use super::{PlayVars, VarSrc};
use crate::config::Config;
use serde_json::{json, Map, Value};
use std::path::Path;

/// Placeholder Ansible users write as `default(omit)`: a parameter rendered to it is dropped.
pub const OMIT: &str = "__fixpoint_omit_place_holder__";

/// `inventory_hostname` and `inventory_hostname_short`: the magic variables every scope of a
/// host has, including the one its `hostvars` entry is rendered in.
pub fn host_names(name: &str) -> Map<String, Value> {
    let mut magic = Map::new();
    magic.insert("inventory_hostname".into(), json!(name));
    magic.insert(
        "inventory_hostname_short".into(),
        json!(name.split('.').next().unwrap_or(name)),
    );
    magic
}

/// The magic variables of a task (or include) on a host during a play.
pub fn play_magic(
    cfg: &Config,
    ctx: &PlayVars<'_>,
    src: &VarSrc<'_>,
    host: &str,
) -> Map<String, Value> {
    let play = ctx.play;
    let mut magic = host_names(host);
    magic.insert("groups".into(), ctx.groups.clone());
    magic.insert("group_names".into(), json!(group_names(ctx.groups, host)));
    magic.insert("hostvars".into(), ctx.hostvars.clone());
    magic.insert("playbook_dir".into(), json!(abs(ctx.playbook_dir)));
    magic.insert("ansible_play_hosts_all".into(), json!(ctx.all_hosts));
    magic.insert("ansible_play_hosts".into(), json!(ctx.live_hosts));
    magic.insert("play_hosts".into(), json!(ctx.batch));
    magic.insert("ansible_play_batch".into(), json!(ctx.batch));
    magic.insert("ansible_play_name".into(), json!(play.name));
    // As in ansible-core, the command line's `--check` only: a `check_mode` keyword on the
    // play, block or task does not change it.
    magic.insert("ansible_check_mode".into(), json!(cfg.check));
    let mut search_path = Vec::new();
    if let Some(r) = src.role {
        magic.insert("role_path".into(), json!(abs(&r.path)));
        magic.insert("role_name".into(), json!(r.name));
        search_path.push(abs(&r.path));
    }
    search_path.push(abs(&play.dir));
    magic.insert("ansible_search_path".into(), json!(search_path));
    magic.insert("ansible_diff_mode".into(), json!(cfg.diff));
    magic.insert("ansible_version".into(), ansible_version());
    magic.insert("omit".into(), json!(OMIT));
    magic
}

/// `ansible_version`: the ansible-core release fixpoint follows, in Ansible's shape.
fn ansible_version() -> serde_json::Value {
    let v = crate::engine::python::ANSIBLE_VERSION;
    let n: Vec<u64> = v.split('.').filter_map(|p| p.parse().ok()).collect();
    json!({
        "string": v,
        "full": v,
        "major": n.first(),
        "minor": n.get(1),
        "revision": n.get(2),
    })
}

/// Ansible's `group_names`: the host's groups, sorted, without `all`.
pub fn group_names(groups: &Value, host: &str) -> Vec<String> {
    let mut names: Vec<String> = groups
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(g, members)| {
                    *g != "all"
                        && members
                            .as_array()
                            .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(host)))
                })
                .map(|(g, _)| g.clone())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// `ansible_loop` of `loop_control.extended` for item `i`.
pub fn extended_loop(items: &[Value], i: usize) -> Value {
    let len = items.len();
    let mut m = Map::new();
    m.insert("allitems".into(), Value::Array(items.to_vec()));
    m.insert("index".into(), json!(i + 1));
    m.insert("index0".into(), json!(i));
    m.insert("revindex".into(), json!(len - i));
    m.insert("revindex0".into(), json!(len - i - 1));
    m.insert("first".into(), json!(i == 0));
    m.insert("last".into(), json!(i + 1 == len));
    m.insert("length".into(), json!(len));
    if i > 0 {
        m.insert("previtem".into(), items[i - 1].clone());
    }
    if i + 1 < len {
        m.insert("nextitem".into(), items[i + 1].clone());
    }
    Value::Object(m)
}

/// A path as path variables show it (`playbook_dir`, `role_path`...): absolute, symlinks
/// resolved, or as given when it does not exist.
pub fn abs(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_shorten_at_the_first_dot() {
        let m = host_names("web1.example.com");
        assert_eq!(m["inventory_hostname"], json!("web1.example.com"));
        assert_eq!(m["inventory_hostname_short"], json!("web1"));
        assert_eq!(host_names("db")["inventory_hostname_short"], json!("db"));
    }

    #[test]
    fn group_names_are_sorted_and_leave_out_all() {
        let groups = json!({
            "all": ["a", "b"],
            "web": ["a"],
            "db": ["a", "b"],
            "ungrouped": ["b"],
        });
        assert_eq!(group_names(&groups, "a"), vec!["db", "web"]);
        assert_eq!(group_names(&groups, "b"), vec!["db", "ungrouped"]);
        assert!(group_names(&groups, "c").is_empty());
    }

    #[test]
    fn extended_loop_describes_the_item_and_its_neighbours() {
        let items = [json!("x"), json!("y"), json!("z")];
        let first = extended_loop(&items, 0);
        assert_eq!(first["index"], json!(1));
        assert_eq!(first["revindex0"], json!(2));
        assert_eq!(first["first"], json!(true));
        assert_eq!(first["nextitem"], json!("y"));
        assert!(first.get("previtem").is_none());
        let last = extended_loop(&items, 2);
        assert_eq!(last["last"], json!(true));
        assert_eq!(last["previtem"], json!("y"));
        assert!(last.get("nextitem").is_none());
        assert_eq!(last["length"], json!(3));
    }
}
