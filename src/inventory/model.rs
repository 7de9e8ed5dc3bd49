//! The inventory model: hosts, groups, their links and variables, and the queries on them.
//!
//! The readers (`ini`, `yaml`, `vars_dirs`) fill it through the building blocks below; it knows
//! no file format itself.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// A variable mapping, as inventories and vars files hold them.
pub type Vars = Map<String, Value>;

/// Every group's hosts (the `groups` magic variable), groups in the order they appeared.
pub type GroupHosts = indexmap::IndexMap<String, Vec<String>>;

/// What is wrong with an inventory (or a host pattern), and where.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{msg}")]
pub struct InventoryError {
    pub file: PathBuf,
    /// 1-based line, when the problem is tied to one.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub col: Option<usize>,
    pub msg: String,
    /// What to do about it, when the message alone does not say.
    pub help: Option<String>,
}

impl InventoryError {
    pub(super) fn new(
        file: &Path,
        line: Option<usize>,
        col: Option<usize>,
        msg: impl Into<String>,
    ) -> Self {
        InventoryError {
            file: file.to_path_buf(),
            line,
            col,
            msg: msg.into(),
            help: None,
        }
    }

    pub(super) fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

pub(super) const ALL: &str = "all";
pub(super) const UNGROUPED: &str = "ungrouped";
/// Names that Ansible resolves to the implicit local host when the inventory lacks them.
pub(super) const LOCALHOST_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

#[derive(Debug, Clone, Default)]
pub(super) struct Group {
    /// Direct members, in the order they were added.
    pub(super) hosts: Vec<String>,
    pub(super) children: Vec<String>,
    pub(super) parents: Vec<String>,
    /// Variables set in the inventory source itself (`[g:vars]`, `vars:`).
    pub(super) vars: Vars,
    /// Whether a section or YAML entry defines the group (a `[g:vars]` section alone does not).
    pub(super) declared: bool,
    /// Longest path from `all`; parents sort before children when merging vars.
    pub(super) depth: usize,
}

/// Where something was declared, to point error messages at it.
#[derive(Debug, Clone)]
pub(super) struct Loc {
    pub(super) file: PathBuf,
    pub(super) line: Option<usize>,
    pub(super) col: Option<usize>,
}

/// The `group_vars/` and `host_vars/` contents of one directory.
#[derive(Debug, Clone, Default)]
pub(super) struct VarsLayer {
    pub(super) dir: PathBuf,
    /// Beside a playbook, not an inventory source: above every inventory source's layer.
    pub(super) playbook: bool,
    pub(super) groups: BTreeMap<String, Vars>,
    pub(super) hosts: BTreeMap<String, Vars>,
}

/// The inventory source that first named a host: its `inventory_file` and `inventory_dir`.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum HostSource {
    /// A file, alone or in a directory source: absolute, symlinks kept.
    File(PathBuf),
    /// A host list (`-i web1,web2,`), as written.
    List(String),
    /// `add_host` during the run: both variables are null, as in ansible-core.
    Run,
}

/// Hosts, groups and variables; see the module documentation.
#[derive(Debug, Clone)]
pub struct Inventory {
    /// The file or directory it was loaded from (names pattern errors).
    pub(super) source: PathBuf,
    /// Every host in order of first appearance (ansible-core's `inventory.hosts`): the order
    /// of `hostvars` and of host names a pattern matches. A group's hosts have their own
    /// order (`hosts_of_group`).
    pub(super) hosts: Vec<String>,
    pub(super) host_index: HashMap<String, usize>,
    /// Variables set on hosts in the inventory source itself.
    pub(super) host_vars: HashMap<String, Vars>,
    /// Groups each host is a direct member of (`all` excluded), so lookups need no scan.
    pub(super) member_of: HashMap<String, Vec<String>>,
    /// Hosts named in `all` itself: adding one again needs no scan of `all`'s hosts (an
    /// `[all]` section of thousands of hosts was quadratic).
    pub(super) in_all: HashSet<String>,
    pub(super) groups: BTreeMap<String, Group>,
    /// Group names in order of first appearance: the order parentless groups join `all` in
    /// and groups match a pattern in, as ansible-core's dict of groups keeps them.
    pub(super) group_order: Vec<String>,
    /// The source each host came from (none for the implicit localhost).
    pub(super) host_sources: HashMap<String, HostSource>,
    /// The source being read: hosts first seen now come from it.
    pub(super) current_source: Option<HostSource>,
    /// Where each parent→child link was declared, for cycle errors.
    pub(super) edge_locs: HashMap<(String, String), Loc>,
    /// One per vars directory: inventory sources' in load order, then playbooks'; later layers win.
    pub(super) layers: Vec<VarsLayer>,
    /// The directory of the playbook file the current play is in (`set_play_dir`): of the
    /// playbooks' layers, only its own applies. None: all of them (no play yet).
    pub(super) play_dir: Option<PathBuf>,
}

impl Inventory {
    pub(super) fn empty(source: &Path) -> Inventory {
        let mut inv = Inventory {
            source: source.to_path_buf(),
            hosts: Vec::new(),
            host_index: HashMap::new(),
            host_vars: HashMap::new(),
            member_of: HashMap::new(),
            in_all: HashSet::new(),
            groups: BTreeMap::new(),
            group_order: Vec::new(),
            host_sources: HashMap::new(),
            current_source: None,
            edge_locs: HashMap::new(),
            layers: Vec::new(),
            play_dir: None,
        };
        inv.declare_group(ALL);
        inv.declare_group(UNGROUPED);
        inv.link(ALL, UNGROUPED, None);
        inv
    }

    /// The inventory used when none is given: no host, so `localhost` is the implicit local
    /// host (the local connection, in no group: `hosts: all` does not match it, as in
    /// ansible-core).
    pub fn implicit_localhost() -> Inventory {
        let mut inv = Inventory::empty(Path::new("localhost"));
        // Cannot fail: no host, no children links of its own.
        let _ = inv.finalize();
        inv
    }

    // ---------------------------------------------------------------- building blocks

    pub(super) fn declare_group(&mut self, name: &str) {
        self.group_mut(name).declared = true;
    }

    /// The group, created (and its place in `group_order` taken) when missing.
    pub(super) fn group_mut(&mut self, name: &str) -> &mut Group {
        if !self.groups.contains_key(name) {
            self.group_order.push(name.to_string());
        }
        self.groups.entry(name.to_string()).or_default()
    }

    pub(super) fn add_host(&mut self, host: &str) {
        if !self.host_index.contains_key(host) {
            self.host_index.insert(host.to_string(), self.hosts.len());
            self.hosts.push(host.to_string());
            if let Some(src) = &self.current_source {
                self.host_sources.insert(host.to_string(), src.clone());
            }
        }
    }

    pub(super) fn add_host_to_group(&mut self, group: &str, host: &str) {
        self.add_host(host);
        // A host named in `all` itself (YAML `all: hosts:`, `add_host`) is one of its own
        // hosts, listed before its children's; it is in no group for `member_of`.
        if group == ALL {
            if self.in_all.insert(host.to_string()) {
                self.group_mut(ALL).hosts.push(host.to_string());
            }
            return;
        }
        let member_of = self.member_of.entry(host.to_string()).or_default();
        if member_of.iter().any(|g| g == group) {
            return;
        }
        member_of.push(group.to_string());
        self.group_mut(group).hosts.push(host.to_string());
    }

    /// The groups a source defines (not those only referred to), for "did you mean" hints.
    pub(super) fn declared_groups(&self) -> impl Iterator<Item = &str> {
        self.groups
            .iter()
            .filter(|(_, g)| g.declared)
            .map(|(name, _)| name.as_str())
    }

    pub(super) fn link(&mut self, parent: &str, child: &str, loc: Option<Loc>) {
        let p = self.group_mut(parent);
        if !p.children.iter().any(|c| c == child) {
            p.children.push(child.to_string());
        }
        let c = self.group_mut(child);
        if !c.parents.iter().any(|x| x == parent) {
            c.parents.push(parent.to_string());
        }
        if let Some(loc) = loc {
            self.edge_locs
                .entry((parent.to_string(), child.to_string()))
                .or_insert(loc);
        }
    }

    pub(super) fn set_host_var(&mut self, host: &str, key: &str, value: Value) {
        self.host_vars
            .entry(host.to_string())
            .or_default()
            .insert(key.to_string(), value);
    }

    /// `fixpoint pull`'s `-c local` (ansible-pull's): these hosts use the local transport unless
    /// their own variables name a connection.
    pub fn default_to_local(&mut self, hosts: &[String]) {
        for h in hosts {
            if !self.host_vars(h).contains_key("ansible_connection") {
                self.set_host_var(h, "ansible_connection", Value::from("local"));
            }
        }
    }

    pub(super) fn set_group_var(&mut self, group: &str, key: &str, value: Value) {
        self.group_mut(group).vars.insert(key.to_string(), value);
    }

    /// What Ansible's `reconcile_inventory` does: hang parentless groups below `all` (in the
    /// order they appeared), put hosts without a group into `ungrouped` (and take grouped
    /// ones out), then reject cycles and compute depths.
    pub(super) fn finalize(&mut self) -> Result<(), InventoryError> {
        let orphans: Vec<String> = self
            .group_order
            .iter()
            .filter(|n| n.as_str() != ALL && self.groups[n.as_str()].parents.is_empty())
            .cloned()
            .collect();
        for o in orphans {
            self.link(ALL, &o, None);
        }
        // Hosts a source put in `ungrouped` keep their place; others join after them, in
        // the order they appeared.
        let before = self.groups[UNGROUPED].hosts.clone();
        let mut ungrouped = Vec::new();
        // Looked up in a set: a range such as `web[1:20000]` makes ungrouped hosts by the
        // thousand, and a scan of the list for each was quadratic.
        let mut seen = HashSet::new();
        for h in before.iter().chain(&self.hosts) {
            let groups = self.member_of.entry(h.clone()).or_default();
            groups.retain(|g| g != UNGROUPED);
            if groups.is_empty() && seen.insert(h.clone()) {
                ungrouped.push(h.clone());
            }
        }
        for h in &ungrouped {
            if let Some(groups) = self.member_of.get_mut(h) {
                groups.push(UNGROUPED.to_string());
            }
        }
        self.group_mut(UNGROUPED).hosts = ungrouped;
        self.check_cycles()?;
        self.compute_depths();
        Ok(())
    }

    fn check_cycles(&self) -> Result<(), InventoryError> {
        // Recursion is fine: group hierarchies are a few levels deep.
        fn visit<'a>(
            inv: &'a Inventory,
            name: &'a str,
            stack: &mut Vec<&'a str>,
            done: &mut HashSet<&'a str>,
        ) -> Option<Vec<String>> {
            if let Some(pos) = stack.iter().position(|s| *s == name) {
                let mut cycle: Vec<String> = stack[pos..].iter().map(|s| s.to_string()).collect();
                cycle.push(name.to_string());
                return Some(cycle);
            }
            if done.contains(name) {
                return None;
            }
            stack.push(name);
            if let Some(g) = inv.groups.get(name) {
                for c in &g.children {
                    if let Some(cycle) = visit(inv, c, stack, done) {
                        return Some(cycle);
                    }
                }
            }
            stack.pop();
            done.insert(name);
            None
        }
        let mut done = HashSet::new();
        for name in self.groups.keys() {
            let mut stack = Vec::new();
            if let Some(cycle) = visit(self, name, &mut stack, &mut done) {
                // Point at a link the user wrote (the implicit ones below `all` have no place).
                let loc = cycle
                    .windows(2)
                    .rev()
                    .find_map(|w| self.edge_locs.get(&(w[0].clone(), w[1].clone())));
                let (file, line, col) = match loc {
                    Some(l) => (l.file.clone(), l.line, l.col),
                    None => (self.source.clone(), None, None),
                };
                return Err(InventoryError::new(
                    &file,
                    line,
                    col,
                    format!("groups form a cycle: {}", cycle.join(" → ")),
                )
                .help("a group cannot contain itself: remove one of these children entries"));
            }
        }
        Ok(())
    }

    fn compute_depths(&mut self) {
        fn depth(inv: &Inventory, name: &str, memo: &mut HashMap<String, usize>) -> usize {
            if name == ALL {
                return 0;
            }
            if let Some(d) = memo.get(name) {
                return *d;
            }
            let parents = inv
                .groups
                .get(name)
                .map(|g| g.parents.clone())
                .unwrap_or_default();
            let d = parents
                .iter()
                .map(|p| depth(inv, p, memo) + 1)
                .max()
                .unwrap_or(1);
            memo.insert(name.to_string(), d);
            d
        }
        let mut memo = HashMap::new();
        let names: Vec<String> = self.groups.keys().cloned().collect();
        for n in &names {
            let d = depth(self, n, &mut memo);
            if let Some(g) = self.groups.get_mut(n) {
                g.depth = d;
            }
        }
    }

    // ---------------------------------------------------------------- queries

    /// Every host in the order it appeared (ansible-core's order of `hostvars`).
    pub fn host_names(&self) -> Vec<String> {
        self.hosts.clone()
    }

    pub(super) fn has_host(&self, host: &str) -> bool {
        self.host_index.contains_key(host)
    }

    /// Whether `host` names the implicit local host: a localhost name this inventory lacks.
    pub fn is_implicit_localhost(&self, host: &str) -> bool {
        self.is_implicit(host)
    }

    /// Localhost names that resolve to the implicit local host in this inventory.
    pub(super) fn is_implicit(&self, host: &str) -> bool {
        !self.has_host(host) && LOCALHOST_NAMES.contains(&host)
    }

    /// Every group the host belongs to, directly or through children, `all` included.
    fn groups_of(&self, host: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        if !self.has_host(host) {
            return out;
        }
        out.insert(ALL.to_string());
        let mut todo: Vec<String> = self.member_of.get(host).cloned().unwrap_or_default();
        while let Some(g) = todo.pop() {
            if out.insert(g.clone()) {
                if let Some(grp) = self.groups.get(&g) {
                    todo.extend(grp.parents.iter().cloned());
                }
            }
        }
        out
    }

    /// The host's groups other than `all`, in the order their variables merge: parents before
    /// children (depth), then `ansible_group_priority`, then name — Ansible's `sort_groups`.
    fn merge_order(&self, host: &str) -> Vec<String> {
        let mut gs: Vec<(usize, i64, String)> = self
            .groups_of(host)
            .into_iter()
            .filter(|g| g != ALL)
            .map(|g| {
                let grp = &self.groups[&g];
                (grp.depth, group_priority(&grp.vars), g)
            })
            .collect();
        gs.sort();
        gs.into_iter().map(|(_, _, g)| g).collect()
    }

    /// The host's variables merged with Ansible's precedence (later wins, top-level keys replace):
    /// inventory vars of `all`, then of the other groups in merge order; then `group_vars/all`
    /// of each vars directory, then the other groups' `group_vars` files; then the host's
    /// inventory vars; then its `host_vars` files. Later vars directories (playbook dirs) beat
    /// earlier ones (the inventory dir). Magic variables are not included.
    /// A host the inventory lacks (and that is not the implicit localhost) has none.
    pub fn host_vars(&self, host: &str) -> Vars {
        if !self.has_host(host) && !self.is_implicit(host) {
            return Vars::new();
        }
        self.vars_of(host)
    }

    /// The variables of the host `delegate_to` names: an inventory host's (`host_vars`), and
    /// for a name the inventory lacks those of a host ansible-core makes up from it
    /// (`Host(name)`, in no group, its address the name): `all`'s only.
    pub fn delegated_host_vars(&self, host: &str) -> Vars {
        self.vars_of(host)
    }

    /// The vars layers that apply now: every inventory source's, and the current play's
    /// playbook directory's.
    fn active_layers(&self) -> impl Iterator<Item = &VarsLayer> {
        self.layers
            .iter()
            .filter(|l| !l.playbook || self.play_dir.as_ref().is_none_or(|d| *d == l.dir))
    }

    /// Whether a play written in a playbook file in `dir` reads other `group_vars/` and
    /// `host_vars/` than the current play: ansible-core reads those beside each play's own
    /// playbook file (an imported playbook's own), not the top playbook's.
    pub fn play_dir_changes(&self, dir: &Path) -> bool {
        let key = vars_dir_key(dir);
        let applying = |current: Option<&PathBuf>| -> Vec<&PathBuf> {
            self.layers
                .iter()
                .filter(|l| l.playbook && current.is_none_or(|d| *d == l.dir))
                .map(|l| &l.dir)
                .collect()
        };
        applying(self.play_dir.as_ref()) != applying(Some(&key))
    }

    /// The play about to run is written in a playbook file in `dir`: of the playbooks'
    /// `group_vars/` and `host_vars/`, only those beside it apply.
    pub fn set_play_dir(&mut self, dir: &Path) {
        self.play_dir = Some(vars_dir_key(dir));
    }

    fn vars_of(&self, host: &str) -> Vars {
        let implicit = self.is_implicit(host);
        let mut out = Vars::new();
        // The implicit localhost, or a made-up host, is in no group but still gets `all`'s
        // variables, as in Ansible.
        let groups = if self.has_host(host) {
            self.merge_order(host)
        } else {
            Vec::new()
        };
        merge(&mut out, &self.groups[ALL].vars);
        for g in &groups {
            merge(&mut out, &self.groups[g].vars);
        }
        for layer in self.active_layers() {
            if let Some(v) = layer.groups.get(ALL) {
                merge(&mut out, v);
            }
        }
        for layer in self.active_layers() {
            for g in &groups {
                if let Some(v) = layer.groups.get(g) {
                    merge(&mut out, v);
                }
            }
        }
        // Host variables ansible-core sets as it meets the host, below the host's own.
        if let Some(src) = self.host_sources.get(host) {
            let (file, dir) = match src {
                HostSource::File(p) => (
                    Value::from(p.display().to_string()),
                    Value::from(p.parent().unwrap_or(p).display().to_string()),
                ),
                // ansible-core takes the directory of a host list that is no path as the
                // text `None`.
                HostSource::List(l) => (Value::from(l.as_str()), Value::from("None")),
                HostSource::Run => (Value::Null, Value::Null),
            };
            out.insert("inventory_file".into(), file);
            out.insert("inventory_dir".into(), dir);
        }
        if implicit {
            out.insert("ansible_connection".into(), Value::from("local"));
        } else if let Some(v) = self.host_vars.get(host) {
            merge(&mut out, v);
        }
        for layer in self.active_layers() {
            if let Some(v) = layer.hosts.get(host) {
                merge(&mut out, v);
            }
        }
        out
    }

    /// Hosts of a group including those of its descendants, in ansible-core's order: the
    /// group's own hosts, then its children's in the order they were named, then their
    /// children's, breadth first (for `all`: its own hosts, `ungrouped`'s, then each
    /// top-level group's).
    pub(super) fn hosts_of_group(&self, group: &str) -> Vec<String> {
        // ansible-core walks each level below the first in the order of a set of groups
        // (by address); here in the order the groups were named, which it mostly matches.
        let mut order: Vec<&str> = vec![group];
        let mut seen: HashSet<&str> = HashSet::from([group]);
        let mut i = 0;
        while let Some(g) = order.get(i) {
            if let Some(grp) = self.groups.get(*g) {
                for c in &grp.children {
                    if seen.insert(c) {
                        order.push(c);
                    }
                }
            }
            i += 1;
        }
        let mut hosts = Vec::new();
        let mut listed: HashSet<&str> = HashSet::new();
        for g in order {
            for h in self
                .groups
                .get(g)
                .map(|g| g.hosts.as_slice())
                .unwrap_or(&[])
            {
                if listed.insert(h) {
                    hosts.push(h.clone());
                }
            }
        }
        hosts
    }

    pub(super) fn in_inventory_order<'a>(
        &self,
        hosts: impl IntoIterator<Item = &'a str>,
    ) -> Vec<String> {
        let mut v: Vec<(usize, &str)> = hosts
            .into_iter()
            .filter_map(|h| self.host_index.get(h).map(|i| (*i, h)))
            .collect();
        v.sort();
        v.dedup();
        v.into_iter().map(|(_, h)| h.to_string()).collect()
    }

    /// Every group (`all` and `ungrouped` included) with its hosts, descendants' included,
    /// groups in the order they appeared: the `groups` magic variable.
    pub fn groups_map(&self) -> GroupHosts {
        self.group_order
            .iter()
            .map(|g| (g.clone(), self.hosts_of_group(g)))
            .collect()
    }

    /// The host's groups, sorted, without `all` and `ungrouped`: the `group_names` magic variable.
    pub fn group_names(&self, host: &str) -> Vec<String> {
        self.groups_of(host)
            .into_iter()
            .filter(|g| g != ALL && g != UNGROUPED)
            .collect()
    }

    /// The host's merged variables as JSON (`ansible-inventory --host`); `None` for unknown hosts.
    pub fn host_json(&self, host: &str) -> Option<Value> {
        if self.has_host(host) || self.is_implicit(host) {
            // As `ansible-inventory --host`: `!unsafe` values plain (`--list` keeps the mark).
            Some(crate::yaml::mark::strip_marks(&Value::Object(
                self.shown_vars(host),
            )))
        } else {
            None
        }
    }
}

impl Inventory {
    /// The host's variables as `ansible-inventory` shows them: without `inventory_file` and
    /// `inventory_dir`, which it leaves out as its own.
    pub(super) fn shown_vars(&self, host: &str) -> Vars {
        let mut vars = self.host_vars(host);
        for k in ["inventory_file", "inventory_dir"] {
            vars.shift_remove(k);
        }
        vars
    }
}

/// How a vars directory is known: canonical, the current one for an empty path.
pub(super) fn vars_dir_key(dir: &Path) -> PathBuf {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())
}

/// Top-level merge: a later value replaces an earlier one (Ansible's `hash_behaviour=replace`).
pub(super) fn merge(into: &mut Vars, from: &Vars) {
    for (k, v) in from {
        into.insert(k.clone(), v.clone());
    }
}

fn group_priority(vars: &Vars) -> i64 {
    match vars.get("ansible_group_priority") {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(1),
        Some(Value::String(s)) => s.trim().parse().unwrap_or(1),
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::testutil::{precedence_fixture, strs, write};

    #[test]
    fn a_delegated_name_the_inventory_lacks_gets_all_vars_only() {
        let mut inv = Inventory::implicit_localhost();
        inv.groups
            .get_mut(ALL)
            .expect("all")
            .vars
            .insert("ansible_port".into(), Value::from(1));
        let made_up = inv.delegated_host_vars("elsewhere.invalid");
        assert_eq!(made_up.get("ansible_port"), Some(&Value::from(1)));
        assert!(!made_up.contains_key("ansible_connection"));
        assert!(inv.host_vars("elsewhere.invalid").is_empty());
        assert_eq!(
            inv.delegated_host_vars("localhost")
                .get("ansible_connection"),
            Some(&Value::from("local"))
        );
    }

    #[test]
    fn cycles_are_rejected_with_their_location() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "hosts", "[a:children]\nb\n[b:children]\na\n");
        let e = Inventory::load(&p).unwrap_err();
        assert!(e.msg.contains("cycle"), "{}", e.msg);
        assert!(
            e.msg.contains("a → b → a") || e.msg.contains("b → a → b"),
            "{}",
            e.msg
        );
        assert_eq!(e.file, p);
        assert!(matches!(e.line, Some(2) | Some(4)));
    }

    #[test]
    fn precedence_all_parent_child_host_hostvars() {
        let dir = tempfile::tempdir().unwrap();
        let inv = Inventory::load(&precedence_fixture(dir.path())).unwrap();
        let w1 = inv.host_vars("w1");
        assert_eq!(w1["v"], Value::from("host"));
        for k in ["from_all", "from_site", "from_web", "from_host"] {
            assert_eq!(w1[k], Value::from(1), "{k}");
        }
        assert_eq!(w1["file_beats_inline"], Value::from("file"));
        assert_eq!(inv.host_vars("w2")["v"], Value::from("web"));

        write(dir.path(), "inv/host_vars/w1.yml", "v: host_file\n");
        let inv = Inventory::load(&dir.path().join("inv/hosts")).unwrap();
        assert_eq!(inv.host_vars("w1")["v"], Value::from("host_file"));
    }

    #[test]
    fn group_priority_and_depth_order_siblings() {
        let dir = tempfile::tempdir().unwrap();
        let base = "[a]\nh\n[b]\nh\n[a:vars]\nv=a\n[b:vars]\nv=b\n";
        let p = write(dir.path(), "one", base);
        // Same depth: by name, so `b` wins.
        assert_eq!(
            Inventory::load(&p).unwrap().host_vars("h")["v"],
            Value::from("b")
        );
        let p = write(
            dir.path(),
            "two",
            &base.replace("v=a\n", "v=a\nansible_group_priority=10\n"),
        );
        // A higher priority merges later and wins.
        assert_eq!(
            Inventory::load(&p).unwrap().host_vars("h")["v"],
            Value::from("a")
        );
        // Deeper groups win over shallower ones whatever their names.
        let p = write(
            dir.path(),
            "three",
            "[z]\nh\n[a]\nh\n[z:children]\na\n[z:vars]\nv=z\n[a:vars]\nv=a\n",
        );
        assert_eq!(
            Inventory::load(&p).unwrap().host_vars("h")["v"],
            Value::from("a")
        );
    }

    #[test]
    fn implicit_localhost_inventory() {
        let inv = Inventory::implicit_localhost();
        assert_eq!(inv.groups_map()["all"], strs(&[]));
        assert_eq!(inv.groups_map()["ungrouped"], strs(&[]));
        assert!(inv.is_implicit_localhost("localhost"));
        assert_eq!(
            inv.host_vars("localhost")["ansible_connection"],
            Value::from("local")
        );
    }
}
