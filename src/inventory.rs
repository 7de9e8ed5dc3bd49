//! Inventory: which hosts exist, how they are grouped and which variables each one carries.
//!
//! Reads Ansible INI and YAML inventories (a file or a directory of them) plus `group_vars/`
//! and `host_vars/` directories, merges variables with Ansible's precedence, and resolves the
//! host patterns (`web:&prod:!web3`, `~db\d+`, `webservers[0:2]`) that plays and `--limit` use.
//! Everything follows Ansible's semantics so existing inventories work unchanged.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// A variable mapping, as inventories and vars files hold them.
pub type Vars = Map<String, Value>;

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
}

impl InventoryError {
    fn new(file: &Path, line: Option<usize>, col: Option<usize>, msg: impl Into<String>) -> Self {
        InventoryError {
            file: file.to_path_buf(),
            line,
            col,
            msg: msg.into(),
        }
    }
}

const ALL: &str = "all";
const UNGROUPED: &str = "ungrouped";
/// Names that Ansible resolves to the implicit local host when the inventory lacks them.
const LOCALHOST_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

#[derive(Debug, Clone, Default)]
struct Group {
    /// Direct members, in the order they were added.
    hosts: Vec<String>,
    children: Vec<String>,
    parents: Vec<String>,
    /// Variables set in the inventory source itself (`[g:vars]`, `vars:`).
    vars: Vars,
    /// Whether a section or YAML entry defines the group (a `[g:vars]` section alone does not).
    declared: bool,
    /// Longest path from `all`; parents sort before children when merging vars.
    depth: usize,
}

/// Where something was declared, to point error messages at it.
#[derive(Debug, Clone)]
struct Loc {
    file: PathBuf,
    line: Option<usize>,
    col: Option<usize>,
}

/// The `group_vars/` and `host_vars/` contents of one directory.
#[derive(Debug, Clone, Default)]
struct VarsLayer {
    dir: PathBuf,
    groups: BTreeMap<String, Vars>,
    hosts: BTreeMap<String, Vars>,
}

/// Hosts, groups and variables; see the module documentation.
#[derive(Debug, Clone)]
pub struct Inventory {
    /// The file or directory it was loaded from (names pattern errors).
    source: PathBuf,
    /// Every host in order of first appearance: "inventory order".
    hosts: Vec<String>,
    host_index: HashMap<String, usize>,
    /// Variables set on hosts in the inventory source itself.
    host_vars: HashMap<String, Vars>,
    /// Groups each host is a direct member of (`all` excluded), so lookups need no scan.
    member_of: HashMap<String, Vec<String>>,
    groups: BTreeMap<String, Group>,
    /// Where each parent→child link was declared, for cycle errors.
    edge_locs: HashMap<(String, String), Loc>,
    /// One per `load_vars_dir` directory, in load order: later layers win.
    layers: Vec<VarsLayer>,
}

/// `[g:vars]` sections seen while loading, checked once every file is read (the group may be
/// defined in a later file of an inventory directory).
type PendingVars = Vec<(String, Loc)>;

impl Inventory {
    fn empty(source: &Path) -> Inventory {
        let mut inv = Inventory {
            source: source.to_path_buf(),
            hosts: Vec::new(),
            host_index: HashMap::new(),
            host_vars: HashMap::new(),
            member_of: HashMap::new(),
            groups: BTreeMap::new(),
            edge_locs: HashMap::new(),
            layers: Vec::new(),
        };
        inv.declare_group(ALL);
        inv.declare_group(UNGROUPED);
        inv.link(ALL, UNGROUPED, None);
        inv
    }

    /// Load an inventory file (INI or YAML) or a directory of them, then the `group_vars/` and
    /// `host_vars/` beside it.
    pub fn load(path: &Path) -> Result<Inventory, InventoryError> {
        let meta = fs::metadata(path).map_err(|e| {
            InventoryError::new(
                path,
                None,
                None,
                format!(
                    "cannot read inventory `{}`: {e}; pass an existing inventory file or directory",
                    path.display()
                ),
            )
        })?;
        let mut inv = Inventory::empty(path);
        let mut pending = PendingVars::new();
        let vars_dir = if meta.is_dir() {
            inv.load_dir(path, &mut pending)?;
            path.to_path_buf()
        } else {
            inv.load_file(path, &mut pending)?;
            match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            }
        };
        for (group, loc) in pending {
            if !inv.groups.get(&group).is_some_and(|g| g.declared) {
                return Err(InventoryError::new(
                    &loc.file,
                    loc.line,
                    loc.col,
                    format!(
                        "section `[{group}:vars]` sets variables for group `{group}`, which is never defined; \
                         add a `[{group}]` section or fix the group name"
                    ),
                ));
            }
        }
        inv.finalize()?;
        inv.load_vars_dir(&vars_dir)?;
        Ok(inv)
    }

    /// The inventory used when none is given: `localhost` on the local connection.
    pub fn implicit_localhost() -> Inventory {
        let mut inv = Inventory::empty(Path::new("localhost"));
        inv.add_host("localhost");
        inv.set_host_var("localhost", "ansible_connection", Value::from("local"));
        // Cannot fail: one host, no children links of its own.
        let _ = inv.finalize();
        inv
    }

    /// Every inventory file of a directory (recursively, in name order), as Ansible does.
    fn load_dir(&mut self, dir: &Path, pending: &mut PendingVars) -> Result<(), InventoryError> {
        let read_err = |e: std::io::Error| {
            InventoryError::new(
                dir,
                None,
                None,
                format!("cannot read inventory directory: {e}"),
            )
        };
        let mut entries: Vec<PathBuf> = fs::read_dir(dir)
            .map_err(read_err)?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(read_err)?;
        entries.sort();
        for p in entries {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if p.is_dir() {
                // group_vars/host_vars hold variables, not inventory sources.
                if name.starts_with('.') || name == "group_vars" || name == "host_vars" {
                    continue;
                }
                self.load_dir(&p, pending)?;
            } else if !is_ignored_inventory_file(name) {
                self.load_file(&p, pending)?;
            }
        }
        Ok(())
    }

    fn load_file(&mut self, path: &Path, pending: &mut PendingVars) -> Result<(), InventoryError> {
        let text = fs::read_to_string(path).map_err(|e| {
            InventoryError::new(path, None, None, format!("cannot read inventory file: {e}"))
        })?;
        if text.starts_with("#!") && is_executable(path) {
            return Err(InventoryError::new(
                path,
                Some(1),
                None,
                "dynamic inventory scripts are not supported; save the script's `--list` output \
                 as a static inventory, or remove the executable bit if this is an INI file",
            ));
        }
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or_default()
            .to_ascii_lowercase();
        if matches!(ext.as_str(), "yml" | "yaml" | "json") {
            let doc = parse_yaml(path, &text)?;
            return self.parse_yaml_inventory(path, &text, &doc);
        }
        // Without a telling extension, content decides: YAML only when it is shaped like a
        // YAML inventory, since many INI files are also (meaningless) valid YAML.
        if let Ok(doc) = parse_yaml(path, &text) {
            if looks_like_yaml_inventory(&doc) {
                return self.parse_yaml_inventory(path, &text, &doc);
            }
        }
        self.parse_ini(path, &text, pending)
    }

    /// Read `dir/group_vars/` and `dir/host_vars/` for the inventory's groups and hosts
    /// (`<name>`, `<name>.yml`, `<name>.yaml`, `<name>.json`, or a `<name>/` directory of such
    /// files merged in name order). Directories loaded later win over earlier ones, so
    /// playbook directories beat the inventory directory; loading a directory again replaces
    /// its earlier contents in place instead of adding a second copy.
    pub fn load_vars_dir(&mut self, dir: &Path) -> Result<(), InventoryError> {
        // A playbook in the current directory may come with an empty parent path.
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let key = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let mut layer = VarsLayer {
            dir: key.clone(),
            ..VarsLayer::default()
        };
        let gdir = dir.join("group_vars");
        if gdir.is_dir() {
            for g in self.groups.keys() {
                if let Some(v) = read_entity_vars(&gdir, g)? {
                    layer.groups.insert(g.clone(), v);
                }
            }
        }
        let hdir = dir.join("host_vars");
        if hdir.is_dir() {
            // The implicit localhost reads host_vars/localhost too, as in Ansible.
            let implicit = LOCALHOST_NAMES.iter().map(|s| s.to_string());
            for h in self.hosts.iter().cloned().chain(implicit) {
                if let Some(v) = read_entity_vars(&hdir, &h)? {
                    layer.hosts.insert(h, v);
                }
            }
        }
        match self.layers.iter_mut().find(|l| l.dir == key) {
            Some(existing) => *existing = layer,
            None => self.layers.push(layer),
        }
        Ok(())
    }

    // ---------------------------------------------------------------- building blocks

    fn declare_group(&mut self, name: &str) {
        self.groups.entry(name.to_string()).or_default().declared = true;
    }

    fn add_host(&mut self, host: &str) {
        if !self.host_index.contains_key(host) {
            self.host_index.insert(host.to_string(), self.hosts.len());
            self.hosts.push(host.to_string());
        }
    }

    fn add_host_to_group(&mut self, group: &str, host: &str) {
        self.add_host(host);
        // Every host is in `all`; storing it there too would only duplicate.
        if group == ALL {
            return;
        }
        let member_of = self.member_of.entry(host.to_string()).or_default();
        if member_of.iter().any(|g| g == group) {
            return;
        }
        member_of.push(group.to_string());
        self.groups
            .entry(group.to_string())
            .or_default()
            .hosts
            .push(host.to_string());
    }

    fn link(&mut self, parent: &str, child: &str, loc: Option<Loc>) {
        let p = self.groups.entry(parent.to_string()).or_default();
        if !p.children.iter().any(|c| c == child) {
            p.children.push(child.to_string());
        }
        let c = self.groups.entry(child.to_string()).or_default();
        if !c.parents.iter().any(|x| x == parent) {
            c.parents.push(parent.to_string());
        }
        if let Some(loc) = loc {
            self.edge_locs
                .entry((parent.to_string(), child.to_string()))
                .or_insert(loc);
        }
    }

    fn set_host_var(&mut self, host: &str, key: &str, value: Value) {
        self.host_vars
            .entry(host.to_string())
            .or_default()
            .insert(key.to_string(), value);
    }

    fn set_group_var(&mut self, group: &str, key: &str, value: Value) {
        self.groups
            .entry(group.to_string())
            .or_default()
            .vars
            .insert(key.to_string(), value);
    }

    /// What Ansible's `reconcile_inventory` does: hang parentless groups below `all`, put hosts
    /// without a group into `ungrouped` (and take grouped ones out), then reject cycles and
    /// compute depths.
    fn finalize(&mut self) -> Result<(), InventoryError> {
        let orphans: Vec<String> = self
            .groups
            .iter()
            .filter(|(n, g)| n.as_str() != ALL && g.parents.is_empty())
            .map(|(n, _)| n.clone())
            .collect();
        for o in orphans {
            self.link(ALL, &o, None);
        }
        let mut ungrouped = Vec::new();
        for h in &self.hosts {
            let groups = self.member_of.entry(h.clone()).or_default();
            groups.retain(|g| g != UNGROUPED);
            if groups.is_empty() {
                groups.push(UNGROUPED.to_string());
                ungrouped.push(h.clone());
            }
        }
        if let Some(g) = self.groups.get_mut(UNGROUPED) {
            g.hosts = ungrouped;
        }
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
                    format!(
                        "groups form a cycle: {}; a group cannot contain itself, so remove one of these children entries",
                        cycle.join(" → ")
                    ),
                ));
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

    fn has_host(&self, host: &str) -> bool {
        self.host_index.contains_key(host)
    }

    /// Localhost names that resolve to the implicit local host in this inventory.
    fn is_implicit(&self, host: &str) -> bool {
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
    pub fn host_vars(&self, host: &str) -> Vars {
        let implicit = self.is_implicit(host);
        let mut out = Vars::new();
        if !self.has_host(host) && !implicit {
            return out;
        }
        // The implicit localhost is in no group but still gets `all`'s variables, as in Ansible.
        let groups = if implicit {
            Vec::new()
        } else {
            self.merge_order(host)
        };
        merge(&mut out, &self.groups[ALL].vars);
        for g in &groups {
            merge(&mut out, &self.groups[g].vars);
        }
        for layer in &self.layers {
            if let Some(v) = layer.groups.get(ALL) {
                merge(&mut out, v);
            }
        }
        for layer in &self.layers {
            for g in &groups {
                if let Some(v) = layer.groups.get(g) {
                    merge(&mut out, v);
                }
            }
        }
        if implicit {
            out.insert("ansible_connection".into(), Value::from("local"));
        } else if let Some(v) = self.host_vars.get(host) {
            merge(&mut out, v);
        }
        for layer in &self.layers {
            if let Some(v) = layer.hosts.get(host) {
                merge(&mut out, v);
            }
        }
        out
    }

    /// Hosts of a group including those of its descendants, in inventory order.
    fn hosts_of_group(&self, group: &str) -> Vec<String> {
        if group == ALL {
            return self.hosts.clone();
        }
        let mut seen: HashSet<&str> = HashSet::new();
        let mut members: HashSet<&str> = HashSet::new();
        let mut todo = vec![group];
        while let Some(g) = todo.pop() {
            if !seen.insert(g) {
                continue;
            }
            if let Some(grp) = self.groups.get(g) {
                members.extend(grp.hosts.iter().map(String::as_str));
                todo.extend(grp.children.iter().map(String::as_str));
            }
        }
        self.in_inventory_order(members)
    }

    fn in_inventory_order<'a>(&self, hosts: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        let mut v: Vec<(usize, &str)> = hosts
            .into_iter()
            .filter_map(|h| self.host_index.get(h).map(|i| (*i, h)))
            .collect();
        v.sort();
        v.dedup();
        v.into_iter().map(|(_, h)| h.to_string()).collect()
    }

    /// Every group (`all` and `ungrouped` included) with its hosts, descendants' included,
    /// in inventory order: the `groups` magic variable.
    pub fn groups_map(&self) -> BTreeMap<String, Vec<String>> {
        self.groups
            .keys()
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
            Some(Value::Object(self.host_vars(host)))
        } else {
            None
        }
    }
}

/// Top-level merge: a later value replaces an earlier one (Ansible's `hash_behaviour=replace`).
fn merge(into: &mut Vars, from: &Vars) {
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

/// Files in an inventory directory that Ansible skips (besides hidden ones).
fn is_ignored_inventory_file(name: &str) -> bool {
    const SKIP: [&str; 7] = [".md", ".retry", ".orig", ".cfg", ".pyc", ".pyo", "~"];
    name.starts_with('.') || SKIP.iter().any(|s| name.ends_with(s))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(_path: &Path) -> bool {
    false
}

// -------------------------------------------------------------------- INI

#[derive(Clone, Copy, PartialEq)]
enum Section {
    Hosts,
    Children,
    Vars,
}

impl Inventory {
    fn parse_ini(
        &mut self,
        path: &Path,
        text: &str,
        pending: &mut PendingVars,
    ) -> Result<(), InventoryError> {
        // Hosts before any section header are ungrouped, as in Ansible.
        let mut group = UNGROUPED.to_string();
        let mut section = Section::Hosts;
        for (idx, raw) in text.lines().enumerate() {
            let lineno = idx + 1;
            let indent = raw.len() - raw.trim_start().len();
            let col_of = |byte_in_line: usize| raw[..indent + byte_in_line].chars().count() + 1;
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            let err = |col: usize, msg: String| {
                InventoryError::new(path, Some(lineno), Some(col_of(col)), msg)
            };
            if line.starts_with('[') && !starts_with_bracketed_ipv6(line) {
                let (name, kind) = parse_section_header(line).map_err(|m| err(0, m))?;
                section = match kind {
                    None => Section::Hosts,
                    Some("children") => Section::Children,
                    Some("vars") => Section::Vars,
                    Some(other) => {
                        return Err(err(
                            name.len() + 2,
                            format!(
                            "unknown section type `[{name}:{other}]`; expected :vars or :children"
                        ),
                        ))
                    }
                };
                group = name.to_string();
                let loc = Loc {
                    file: path.to_path_buf(),
                    line: Some(lineno),
                    col: Some(col_of(0)),
                };
                if section == Section::Vars {
                    self.groups.entry(group.clone()).or_default();
                    pending.push((group.clone(), loc));
                } else {
                    self.declare_group(&group);
                }
                continue;
            }
            match section {
                Section::Hosts => self.parse_ini_host_line(&group, line, &err)?,
                Section::Children => {
                    let child = parse_group_name_line(line).ok_or_else(|| {
                        err(
                            0,
                            format!(
                                "expected one group name per line in `[{group}:children]`, got `{line}`"
                            ),
                        )
                    })?;
                    // Groups only named as children exist, empty unless defined elsewhere.
                    self.declare_group(child);
                    let loc = Loc {
                        file: path.to_path_buf(),
                        line: Some(lineno),
                        col: Some(col_of(0)),
                    };
                    self.link(&group, child, Some(loc));
                }
                Section::Vars => {
                    let Some((k, v)) = line.split_once('=') else {
                        return Err(err(
                            0,
                            format!("expected `name=value` in `[{group}:vars]`, got `{line}`"),
                        ));
                    };
                    let k = k.trim();
                    if k.is_empty() {
                        return Err(err(
                            0,
                            format!("missing variable name before `=` in `{line}`"),
                        ));
                    }
                    self.set_group_var(&group, k, parse_value(v.trim()));
                }
            }
        }
        Ok(())
    }

    fn parse_ini_host_line(
        &mut self,
        group: &str,
        line: &str,
        err: &dyn Fn(usize, String) -> InventoryError,
    ) -> Result<(), InventoryError> {
        let tokens = shell_split(line).map_err(|(pos, m)| err(pos, m))?;
        let Some(first) = tokens.first() else {
            return Ok(()); // only a trailing comment
        };
        let (names, port) = expand_host_pattern(&first.text).map_err(|m| err(first.start, m))?;
        let mut vars: Vec<(String, Value)> = Vec::new();
        if let Some(p) = port {
            vars.push(("ansible_port".into(), Value::from(p)));
        }
        for t in &tokens[1..] {
            let Some(eq) = t.text.find('=') else {
                return Err(err(
                    t.start,
                    format!(
                        "expected `name=value` after the host name, got `{}`; quote values that contain spaces",
                        t.text
                    ),
                ));
            };
            let key = &t.text[..eq];
            if key.is_empty() {
                return Err(err(
                    t.start,
                    format!("missing variable name before `=` in `{}`", t.text),
                ));
            }
            let val = &t.text[eq + 1..];
            let quoted = t.quoted[eq + 1..].iter().all(|q| *q) && !val.is_empty();
            vars.push((key.to_string(), parse_inline_value(val, quoted)));
        }
        for name in names {
            self.add_host_to_group(group, &name);
            for (k, v) in &vars {
                self.set_host_var(&name, k, v.clone());
            }
        }
        Ok(())
    }
}

/// `[name]`, `[name:kind]`, optionally followed by a comment.
fn parse_section_header(line: &str) -> Result<(&str, Option<&str>), String> {
    let bad = || {
        format!(
            "malformed section header `{line}`; expected [group], [group:vars] or [group:children]"
        )
    };
    let close = line.find(']').ok_or_else(bad)?;
    let rest = line[close + 1..].trim_start();
    if !(rest.is_empty() || rest.starts_with('#') || rest.starts_with(';')) {
        return Err(bad());
    }
    let inner = &line[1..close];
    let (name, kind) = match inner.split_once(':') {
        Some((n, k)) => (n, Some(k)),
        None => (inner, None),
    };
    if name.is_empty() || name.chars().any(char::is_whitespace) || name.contains('[') {
        return Err(bad());
    }
    if let Some(k) = kind {
        if k.is_empty() || !k.chars().all(|c| c.is_alphanumeric() || c == '_') {
            return Err(bad());
        }
    }
    Ok((name, kind))
}

/// A group name alone on a line, optionally followed by a comment.
fn parse_group_name_line(line: &str) -> Option<&str> {
    let body = match line.find(['#', ';']) {
        Some(i) => &line[..i],
        None => line,
    }
    .trim();
    let valid = !body.is_empty()
        && !body
            .chars()
            .any(|c| c.is_whitespace() || c == ':' || c == ']' || c == '=');
    valid.then_some(body)
}

/// An IPv6 host written `[addr]` or `[addr]:port` at the start of a host line.
fn starts_with_bracketed_ipv6(line: &str) -> bool {
    line.strip_prefix('[')
        .and_then(|r| r.split_once(']'))
        .is_some_and(|(inner, _)| is_ipv6(inner))
}

fn is_ipv6(s: &str) -> bool {
    let colons = s.matches(':').count();
    (s.contains("::") || colons == 7)
        && s.chars()
            .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.' || c == '%')
}

/// One word of a host line after shell-like splitting.
#[derive(Debug)]
struct Token {
    text: String,
    /// For each byte of `text`: whether it came from inside quotes.
    quoted: Vec<bool>,
    /// Byte offset of the word's start in the line.
    start: usize,
}

/// Split like Python's `shlex.split(line, comments=True)` (what Ansible uses for host lines),
/// also recording which characters were quoted so that `port="22"` can stay a string.
fn shell_split(line: &str) -> Result<Vec<Token>, (usize, String)> {
    let mut out: Vec<Token> = Vec::new();
    let mut cur: Option<Token> = None;
    let mut chars = line.char_indices().peekable();
    fn push(cur: &mut Option<Token>, start: usize, c: char, quoted: bool) {
        let t = cur.get_or_insert_with(|| Token {
            text: String::new(),
            quoted: Vec::new(),
            start,
        });
        t.text.push(c);
        t.quoted.extend(std::iter::repeat_n(quoted, c.len_utf8()));
    }
    while let Some((i, c)) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if let Some(t) = cur.take() {
                    out.push(t);
                }
            }
            '#' => break,
            '\\' => match chars.next() {
                Some((_, n)) => push(&mut cur, i, n, false),
                None => push(&mut cur, i, '\\', false),
            },
            '\'' | '"' => {
                // An empty quoted string still makes a word.
                cur.get_or_insert_with(|| Token {
                    text: String::new(),
                    quoted: Vec::new(),
                    start: i,
                });
                let mut closed = false;
                while let Some((_, q)) = chars.next() {
                    if q == c {
                        closed = true;
                        break;
                    }
                    if c == '"' && q == '\\' {
                        if let Some(&(_, n)) = chars.peek() {
                            if matches!(n, '"' | '\\' | '$' | '`') {
                                chars.next();
                                push(&mut cur, i, n, true);
                                continue;
                            }
                        }
                    }
                    push(&mut cur, i, q, true);
                }
                if !closed {
                    return Err((
                        i,
                        format!("unterminated {c} quote; close it on the same line"),
                    ));
                }
            }
            c => push(&mut cur, i, c, false),
        }
    }
    if let Some(t) = cur.take() {
        out.push(t);
    }
    Ok(out)
}

/// Expand a host entry (`web[01:03].example.com:2222`) into host names and an optional port.
fn expand_host_pattern(entry: &str) -> Result<(Vec<String>, Option<u16>), String> {
    let (name, port) = split_host_port(entry)?;
    if name.is_empty() {
        return Err(format!("missing host name in `{entry}`"));
    }
    let names = if is_ipv6(&name) {
        vec![name]
    } else {
        expand_ranges(&name)?
    };
    Ok((names, port))
}

fn split_host_port(entry: &str) -> Result<(String, Option<u16>), String> {
    let bad_port = |p: &str| {
        format!("invalid port `{p}` in host `{entry}`; write host:port with a port from 1 to 65535")
    };
    let parse_port = |p: &str| -> Result<u16, String> {
        p.parse::<u16>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| bad_port(p))
    };
    if let Some(rest) = entry.strip_prefix('[') {
        if let Some((inner, after)) = rest.split_once(']') {
            if is_ipv6(inner) {
                return match after.strip_prefix(':') {
                    Some(p) => Ok((inner.to_string(), Some(parse_port(p)?))),
                    None if after.is_empty() => Ok((inner.to_string(), None)),
                    None => Err(format!(
                        "unexpected `{after}` after IPv6 address in `{entry}`"
                    )),
                };
            }
        }
    }
    // Colons inside brackets belong to ranges (`web[1:3]`), not to a port.
    let mut depth = 0i32;
    let mut colons = Vec::new();
    for (i, c) in entry.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ':' if depth == 0 => colons.push(i),
            _ => {}
        }
    }
    match colons.as_slice() {
        [] => Ok((entry.to_string(), None)),
        [i] => Ok((entry[..*i].to_string(), Some(parse_port(&entry[i + 1..])?))),
        // Several colons: a bare IPv6 address, which cannot carry a port.
        _ => Ok((entry.to_string(), None)),
    }
}

/// Expand `[a:b]` / `[a:b:step]` ranges (numeric, zero padding kept, or single letters).
fn expand_ranges(name: &str) -> Result<Vec<String>, String> {
    let Some(open) = name.find('[') else {
        if name.contains(']') {
            return Err(format!("unmatched `]` in host name `{name}`"));
        }
        return Ok(vec![name.to_string()]);
    };
    let close = name[open..]
        .find(']')
        .map(|i| open + i)
        .ok_or_else(|| format!("unclosed `[` in host name `{name}`"))?;
    let (head, inner, tail) = (&name[..open], &name[open + 1..close], &name[close + 1..]);
    let parts: Vec<&str> = inner.split(':').collect();
    if parts.len() != 2 && parts.len() != 3 {
        return Err(format!(
            "host range `[{inner}]` in `{name}` must be [start:end] or [start:end:step]"
        ));
    }
    let beg = if parts[0].is_empty() { "0" } else { parts[0] };
    let end = parts[1];
    if end.is_empty() {
        return Err(format!(
            "host range `[{inner}]` in `{name}` has no end value"
        ));
    }
    let step: usize = match parts.get(2) {
        None => 1,
        Some(s) => s.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
            format!("host range step `{s}` in `{name}` must be a positive number")
        })?,
    };
    const LETTERS: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let items: Vec<String> = if let (Some(b), Some(e)) = (
        LETTERS.find(beg).filter(|_| beg.len() == 1),
        LETTERS.find(end).filter(|_| end.len() == 1),
    ) {
        if b > e {
            return Err(format!(
                "host range `[{inner}]` in `{name}` must have start <= end"
            ));
        }
        LETTERS[b..=e]
            .chars()
            .step_by(step)
            .map(String::from)
            .collect()
    } else {
        let (Ok(b), Ok(e)) = (beg.parse::<u64>(), end.parse::<u64>()) else {
            return Err(format!(
                "host range `[{inner}]` in `{name}` must be numbers (`[01:20]`) or single letters (`[a:f]`)"
            ));
        };
        if b > e {
            return Err(format!(
                "host range `[{inner}]` in `{name}` must have start <= end"
            ));
        }
        // `01` pads every number to the width of the bounds.
        let width = if beg.len() > 1 && beg.starts_with('0') {
            if beg.len() != end.len() {
                return Err(format!(
                    "host range `[{inner}]` in `{name}`: a zero-padded start needs an end of the same width"
                ));
            }
            beg.len()
        } else {
            0
        };
        (b..=e)
            .step_by(step)
            .map(|n| format!("{n:0width$}"))
            .collect()
    };
    let tails = expand_ranges(tail)?;
    Ok(items
        .iter()
        .flat_map(|i| tails.iter().map(move |t| format!("{head}{i}{t}")))
        .collect())
}

/// A `[g:vars]` value: Python-literal evaluated like Ansible (`2222` → int, `'x'` → string),
/// with `true`/`false` also taken as booleans; anything else is the string itself.
fn parse_value(v: &str) -> Value {
    parse_literal(v).unwrap_or_else(|| Value::String(v.to_string()))
}

/// An inline host variable value after shell splitting: quoted scalars stay strings
/// (`port="22"`), quoted lists/dicts are still structures, unquoted text is literal-evaluated.
fn parse_inline_value(v: &str, quoted: bool) -> Value {
    if quoted {
        if v.starts_with(['[', '{']) {
            if let Some(x @ (Value::Array(_) | Value::Object(_))) = parse_literal(v) {
                return x;
            }
        }
        return Value::String(v.to_string());
    }
    parse_value(v)
}

/// Evaluate a Python literal (`ast.literal_eval`): numbers, strings, booleans, None, lists,
/// tuples and dicts. `None` when the text is not one.
fn parse_literal(s: &str) -> Option<Value> {
    let mut p = Lit {
        s: s.as_bytes(),
        src: s,
        i: 0,
    };
    let v = p.value()?;
    p.ws();
    (p.i == p.s.len()).then_some(v)
}

struct Lit<'a> {
    s: &'a [u8],
    src: &'a str,
    i: usize,
}

impl Lit<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
        // Python ignores a trailing comment.
        if self.s.get(self.i) == Some(&b'#') {
            self.i = self.s.len();
        }
    }

    fn eat(&mut self, b: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&b) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self) -> Option<Value> {
        self.ws();
        match *self.s.get(self.i)? {
            b'\'' | b'"' => self.string().map(Value::String),
            b'[' => {
                self.i += 1;
                self.seq(b']').map(Value::Array)
            }
            b'(' => {
                self.i += 1;
                self.seq(b')').map(Value::Array)
            }
            b'{' => {
                self.i += 1;
                self.dict()
            }
            b'-' | b'+' | b'.' | b'0'..=b'9' => self.number(),
            _ => {
                let start = self.i;
                while self.i < self.s.len()
                    && (self.s[self.i].is_ascii_alphanumeric() || self.s[self.i] == b'_')
                {
                    self.i += 1;
                }
                match &self.src[start..self.i] {
                    "True" | "true" => Some(Value::Bool(true)),
                    "False" | "false" => Some(Value::Bool(false)),
                    "None" => Some(Value::Null),
                    _ => None,
                }
            }
        }
    }

    fn seq(&mut self, close: u8) -> Option<Vec<Value>> {
        let mut items = Vec::new();
        loop {
            if self.eat(close) {
                return Some(items);
            }
            items.push(self.value()?);
            if !self.eat(b',') {
                return self.eat(close).then_some(items);
            }
        }
    }

    fn dict(&mut self) -> Option<Value> {
        let mut m = Map::new();
        loop {
            if self.eat(b'}') {
                return Some(Value::Object(m));
            }
            let key = match self.value()? {
                Value::String(s) => s,
                other => other.to_string(),
            };
            if !self.eat(b':') {
                return None;
            }
            m.insert(key, self.value()?);
            if !self.eat(b',') {
                return self.eat(b'}').then_some(Value::Object(m));
            }
        }
    }

    fn string(&mut self) -> Option<String> {
        let q = self.s[self.i];
        self.i += 1;
        let mut out = String::new();
        let rest = &self.src[self.i..];
        let mut it = rest.char_indices();
        while let Some((j, c)) = it.next() {
            if c as u32 == q as u32 {
                self.i += j + 1;
                return Some(out);
            }
            if c == '\\' {
                let (_, n) = it.next()?;
                match n {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    '0' => out.push('\0'),
                    '\\' | '\'' | '"' => out.push(n),
                    other => {
                        out.push('\\');
                        out.push(other);
                    }
                }
            } else {
                out.push(c);
            }
        }
        None
    }

    fn number(&mut self) -> Option<Value> {
        let start = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric()
                || matches!(self.s[self.i], b'.' | b'+' | b'-' | b'_'))
        {
            // A sign only starts the number or follows an exponent.
            if matches!(self.s[self.i], b'+' | b'-')
                && self.i > start
                && !matches!(self.s[self.i - 1], b'e' | b'E')
            {
                break;
            }
            self.i += 1;
        }
        let text = &self.src[start..self.i];
        let (neg, digits) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let sign = if neg { -1 } else { 1 };
        let radix = |prefix: &[&str], r: u32| {
            prefix
                .iter()
                .find_map(|p| digits.strip_prefix(p))
                .and_then(|d| i64::from_str_radix(d, r).ok())
        };
        if let Some(n) = radix(&["0x", "0X"], 16)
            .or_else(|| radix(&["0o", "0O"], 8))
            .or_else(|| radix(&["0b", "0B"], 2))
        {
            return Some(Value::from(sign * n));
        }
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            // Python 3 rejects leading zeros (`010`), which keeps such values strings.
            if digits.len() > 1 && digits.starts_with('0') && digits.bytes().any(|b| b != b'0') {
                return None;
            }
            return digits.parse::<i64>().ok().map(|n| Value::from(sign * n));
        }
        let float_like = digits.bytes().any(|b| b.is_ascii_digit())
            && digits
                .bytes()
                .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
        if float_like {
            let f: f64 = digits.parse().ok()?;
            return serde_json::Number::from_f64(if neg { -f } else { f }).map(Value::Number);
        }
        None
    }
}

// -------------------------------------------------------------------- YAML

impl Inventory {
    fn parse_yaml_inventory(
        &mut self,
        path: &Path,
        text: &str,
        doc: &serde_yaml::Value,
    ) -> Result<(), InventoryError> {
        match doc {
            serde_yaml::Value::Null => Ok(()),
            serde_yaml::Value::Mapping(m) => {
                for (k, data) in m {
                    let name = yaml_key(k);
                    self.parse_yaml_group(path, text, &name, data)?;
                }
                Ok(())
            }
            other => Err(InventoryError::new(
                path,
                Some(1),
                Some(1),
                format!(
                    "expected a mapping of group names at the top level (like `all:`), found {}",
                    yaml_kind(other)
                ),
            )),
        }
    }

    fn parse_yaml_group(
        &mut self,
        path: &Path,
        text: &str,
        group: &str,
        data: &serde_yaml::Value,
    ) -> Result<(), InventoryError> {
        use serde_yaml::Value as Y;
        let err =
            |key: &str, msg: String| InventoryError::new(path, find_key_line(text, key), None, msg);
        self.declare_group(group);
        let m = match data {
            Y::Null => return Ok(()),
            Y::Mapping(m) => m,
            other => {
                return Err(err(
                    group,
                    format!(
                        "group `{group}` must be a mapping with `hosts`, `vars` or `children`, found {}",
                        yaml_kind(other)
                    ),
                ))
            }
        };
        for (k, val) in m {
            let key = yaml_key(k);
            if !matches!(key.as_str(), "hosts" | "vars" | "children") {
                return Err(err(
                    &key,
                    format!(
                        "unexpected key `{key}` in group `{group}`; a group may only have `hosts`, `vars` and `children`"
                    ),
                ));
            }
            match (key.as_str(), val) {
                (_, Y::Null) => {}
                ("hosts", Y::String(h)) => self.add_yaml_host(path, text, group, h, &Y::Null)?,
                ("hosts", Y::Mapping(hosts)) => {
                    for (hk, hv) in hosts {
                        self.add_yaml_host(path, text, group, &yaml_key(hk), hv)?;
                    }
                }
                ("vars", Y::Mapping(vars)) => {
                    for (vk, vv) in vars {
                        self.set_group_var(group, &yaml_key(vk), yaml_to_json(vv));
                    }
                }
                ("children", Y::String(c)) => {
                    self.parse_yaml_group(path, text, c, &Y::Null)?;
                    self.link(group, c, Some(yaml_loc(path, text, c)));
                }
                ("children", Y::Mapping(children)) => {
                    for (ck, cv) in children {
                        let child = yaml_key(ck);
                        self.parse_yaml_group(path, text, &child, cv)?;
                        self.link(group, &child, Some(yaml_loc(path, text, &child)));
                    }
                }
                (_, other) => {
                    let hint = if key == "vars" {
                        "name: value pairs"
                    } else {
                        "names as keys (`web1:`), not a list"
                    };
                    return Err(err(
                        &key,
                        format!(
                            "`{key}` of group `{group}` must be a mapping of {hint}; found {}",
                            yaml_kind(other)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn add_yaml_host(
        &mut self,
        path: &Path,
        text: &str,
        group: &str,
        entry: &str,
        vars: &serde_yaml::Value,
    ) -> Result<(), InventoryError> {
        let at = |msg: String| InventoryError::new(path, find_key_line(text, entry), None, msg);
        let (names, port) = expand_host_pattern(entry).map_err(at)?;
        let vars = match vars {
            serde_yaml::Value::Null => Vars::new(),
            serde_yaml::Value::Mapping(_) => match yaml_to_json(vars) {
                Value::Object(m) => m,
                _ => Vars::new(),
            },
            other => {
                return Err(at(format!(
                    "variables of host `{entry}` must be a mapping (or empty), found {}",
                    yaml_kind(other)
                )))
            }
        };
        for name in names {
            self.add_host_to_group(group, &name);
            if let Some(p) = port {
                self.set_host_var(&name, "ansible_port", Value::from(p));
            }
            for (k, v) in &vars {
                self.set_host_var(&name, k, v.clone());
            }
        }
        Ok(())
    }
}

/// Parse YAML, reporting syntax errors at serde_yaml's location, with `<<:` merge keys applied.
fn parse_yaml(path: &Path, text: &str) -> Result<serde_yaml::Value, InventoryError> {
    let mut doc: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| {
        let loc = e.location();
        InventoryError::new(
            path,
            loc.as_ref().map(|l| l.line()),
            loc.as_ref().map(|l| l.column()),
            format!("invalid YAML: {e}"),
        )
    })?;
    doc.apply_merge().map_err(|e| {
        InventoryError::new(
            path,
            None,
            None,
            format!("invalid YAML merge key (`<<`): {e}"),
        )
    })?;
    Ok(doc)
}

fn looks_like_yaml_inventory(doc: &serde_yaml::Value) -> bool {
    use serde_yaml::Value as Y;
    let Y::Mapping(m) = doc else { return false };
    m.values().all(|v| matches!(v, Y::Mapping(_) | Y::Null))
        && m.values().any(|v| matches!(v, Y::Mapping(_)))
}

/// Best-effort line of `key:` in YAML text: `serde_yaml::Value` keeps no positions, and a
/// line that is right in the common case beats none.
fn find_key_line(text: &str, key: &str) -> Option<usize> {
    let forms = [
        format!("{key}:"),
        format!("\"{key}\":"),
        format!("'{key}':"),
    ];
    text.lines()
        .position(|l| {
            let t = l.trim_start().trim_start_matches("- ");
            forms.iter().any(|f| t.starts_with(f.as_str()))
        })
        .map(|i| i + 1)
}

fn yaml_loc(path: &Path, text: &str, key: &str) -> Loc {
    Loc {
        file: path.to_path_buf(),
        line: find_key_line(text, key),
        col: None,
    }
}

/// Mapping keys as strings: YAML allows `10.0.0.1:` or `8080:` keys that parse as numbers.
fn yaml_key(k: &serde_yaml::Value) -> String {
    match k {
        serde_yaml::Value::String(s) => s.clone(),
        serde_yaml::Value::Tagged(t) => yaml_key(&t.value),
        other => match yaml_to_json(other) {
            Value::String(s) => s,
            v => v.to_string(),
        },
    }
}

fn yaml_kind(v: &serde_yaml::Value) -> &'static str {
    use serde_yaml::Value as Y;
    match v {
        Y::Null => "nothing",
        Y::Bool(_) => "a boolean",
        Y::Number(_) => "a number",
        Y::String(_) => "a string",
        Y::Sequence(_) => "a list",
        Y::Mapping(_) => "a mapping",
        Y::Tagged(_) => "a tagged value",
    }
}

/// YAML to JSON values; tags (`!unsafe`, `!vault`) are dropped, keeping the tagged value.
fn yaml_to_json(v: &serde_yaml::Value) -> Value {
    use serde_yaml::Value as Y;
    match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(*b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                // JSON has no NaN/infinity: keep YAML's spelling instead of losing the value.
                serde_json::Number::from_f64(f)
                    .map(Value::Number)
                    .unwrap_or_else(|| Value::String(n.to_string()))
            }
        }
        Y::String(s) => Value::String(s.clone()),
        Y::Sequence(s) => Value::Array(s.iter().map(yaml_to_json).collect()),
        Y::Mapping(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (yaml_key(k), yaml_to_json(v)))
                .collect(),
        ),
        Y::Tagged(t) => yaml_to_json(&t.value),
    }
}

// -------------------------------------------------------------------- patterns

impl Inventory {
    /// Hosts matching an Ansible host pattern (`hosts:` of a play, `--limit`), in inventory
    /// order without duplicates. Terms are joined by `,` or `:`; `&term` intersects, `!term`
    /// excludes (applied after all unions, as in Ansible). A term is a group or host name, a
    /// glob (`web*`), a regex (`~web\d+`, anchored at the start), optionally with a subscript
    /// (`web[0]`, `web[-1]`, `web[0:2]` inclusive, `web[1:]`). Matching nothing gives an empty
    /// list; `localhost`/`127.0.0.1` match the implicit local host when the inventory lacks it.
    pub fn select(&self, pattern: &str) -> Result<Vec<String>, InventoryError> {
        let terms = split_pattern(pattern);
        let (mut regular, mut intersect, mut exclude) = (Vec::new(), Vec::new(), Vec::new());
        for t in &terms {
            if let Some(r) = t.strip_prefix('&') {
                intersect.push(r.trim());
            } else if let Some(r) = t.strip_prefix('!') {
                exclude.push(r.trim());
            } else {
                regular.push(t.as_str());
            }
        }
        // `!web` alone means "all but web".
        if regular.is_empty() && !(intersect.is_empty() && exclude.is_empty()) {
            regular.push(ALL);
        }
        let mut out: Vec<String> = Vec::new();
        let mut seen = HashSet::new();
        for t in regular {
            for h in self.match_term(t)? {
                if seen.insert(h.clone()) {
                    out.push(h);
                }
            }
        }
        for t in intersect {
            let keep: HashSet<String> = self.match_term(t)?.into_iter().collect();
            out.retain(|h| keep.contains(h));
        }
        for t in exclude {
            let drop: HashSet<String> = self.match_term(t)?.into_iter().collect();
            out.retain(|h| !drop.contains(h));
        }
        // Stable: implicit hosts (not in the inventory) stay last, in pattern order.
        out.sort_by_key(|h| self.host_index.get(h).copied().unwrap_or(usize::MAX));
        Ok(out)
    }

    /// Hosts of one pattern term, in inventory order, subscript applied.
    fn match_term(&self, term: &str) -> Result<Vec<String>, InventoryError> {
        if term.is_empty() {
            return Ok(Vec::new());
        }
        let (expr, subscript) = split_subscript(term);
        let matcher = Matcher::new(expr).map_err(|m| {
            InventoryError::new(
                &self.source,
                None,
                None,
                format!("invalid host pattern `{term}`: {m}"),
            )
        })?;
        let mut found: HashSet<String> = HashSet::new();
        let mut group_matched = false;
        for g in self.groups.keys() {
            if matcher.matches(g) {
                group_matched = true;
                found.extend(self.hosts_of_group(g));
            }
        }
        // Like Ansible: a plain name that names a group is the group; wildcards match both.
        if !group_matched || matcher.is_wildcard() {
            found.extend(self.hosts.iter().filter(|h| matcher.matches(h)).cloned());
        }
        let mut list = self.in_inventory_order(found.iter().map(String::as_str));
        if list.is_empty() && LOCALHOST_NAMES.contains(&expr) {
            list.push(expr.to_string());
        }
        Ok(match subscript {
            None => list,
            Some(s) => s.apply(list),
        })
    }
}

/// Split a pattern into terms on `,` and on `:` outside brackets (ranges and subscripts
/// contain colons), keeping IPv6 addresses whole.
fn split_pattern(pattern: &str) -> Vec<String> {
    let mut out = Vec::new();
    for piece in pattern.split(',') {
        let piece = piece.trim();
        if piece.is_empty() {
            continue;
        }
        if is_ipv6(piece.trim_start_matches(['&', '!'])) {
            out.push(piece.to_string());
            continue;
        }
        let mut depth = 0i32;
        let mut cur = String::new();
        for c in piece.chars() {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                ':' if depth <= 0 => {
                    let t = cur.trim();
                    if !t.is_empty() {
                        out.push(t.to_string());
                    }
                    cur.clear();
                    continue;
                }
                _ => {}
            }
            cur.push(c);
        }
        let t = cur.trim();
        if !t.is_empty() {
            out.push(t.to_string());
        }
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Subscript {
    Index(i64),
    /// Inclusive end; `None` runs to the last host.
    Range(usize, Option<usize>),
}

impl Subscript {
    fn apply(self, hosts: Vec<String>) -> Vec<String> {
        let len = hosts.len();
        match self {
            Subscript::Index(i) => {
                let idx = if i < 0 { len as i64 + i } else { i };
                usize::try_from(idx)
                    .ok()
                    .and_then(|i| hosts.get(i).cloned())
                    .into_iter()
                    .collect()
            }
            Subscript::Range(start, end) => {
                let end = end.unwrap_or(usize::MAX).min(len.saturating_sub(1));
                if start >= len || start > end {
                    return Vec::new();
                }
                hosts[start..=end].to_vec()
            }
        }
    }
}

/// `name[3]`, `name[-1]`, `name[0:2]`, `name[1:]` (not for regex terms, whose brackets are
/// character classes).
fn split_subscript(term: &str) -> (&str, Option<Subscript>) {
    if term.starts_with('~') || !term.ends_with(']') {
        return (term, None);
    }
    let Some(open) = term.rfind('[') else {
        return (term, None);
    };
    let (base, inner) = (&term[..open], &term[open + 1..term.len() - 1]);
    if base.is_empty() {
        return (term, None);
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some((a, b)) = inner.split_once([':', '-']) {
        if digits(a) && (b.is_empty() || digits(b)) {
            let (Ok(start), end) = (a.parse(), b.parse().ok()) else {
                return (term, None);
            };
            return (base, Some(Subscript::Range(start, end)));
        }
    }
    let unsigned = inner.strip_prefix('-').unwrap_or(inner);
    if digits(unsigned) {
        if let Ok(i) = inner.parse() {
            return (base, Some(Subscript::Index(i)));
        }
    }
    (term, None)
}

/// How one pattern term compares against group and host names.
enum Matcher {
    Exact(String),
    /// Globs (translated like Python's `fnmatch`) and `~` regexes.
    Regex(regex::Regex),
}

impl Matcher {
    fn new(expr: &str) -> Result<Matcher, String> {
        if let Some(re) = expr.strip_prefix('~') {
            // Python's `re.match`: anchored at the start only.
            return regex::Regex::new(&format!("^(?:{re})"))
                .map(Matcher::Regex)
                .map_err(|e| {
                    let detail = e.to_string();
                    let last = detail.lines().last().unwrap_or_default().trim().to_string();
                    format!("{last}; after `~` write a regular expression")
                });
        }
        if !expr.contains(['*', '?', '[']) {
            return Ok(Matcher::Exact(expr.to_string()));
        }
        regex::Regex::new(&glob_to_regex(expr))
            .map(Matcher::Regex)
            .map_err(|e| format!("cannot use it as a glob: {e}"))
    }

    fn matches(&self, name: &str) -> bool {
        match self {
            Matcher::Exact(s) => s == name,
            Matcher::Regex(r) => r.is_match(name),
        }
    }

    /// Wildcard terms match host names even when they also match groups (Ansible checks for
    /// `~`, `.`, `?`, `*` and `[` the same way).
    fn is_wildcard(&self) -> bool {
        match self {
            Matcher::Exact(s) => s.contains('.'),
            Matcher::Regex(_) => true,
        }
    }
}

/// Translate a shell glob to an anchored regex, like Python's `fnmatch.translate`.
fn glob_to_regex(glob: &str) -> String {
    let chars: Vec<char> = glob.chars().collect();
    let mut out = String::from("^");
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' => out.push_str(".*"),
            '?' => out.push('.'),
            '[' => {
                // A class closes at the first `]` that is not its first member.
                let mut j = i + 1;
                if chars.get(j) == Some(&'!') {
                    j += 1;
                }
                if chars.get(j) == Some(&']') {
                    j += 1;
                }
                while j < chars.len() && chars[j] != ']' {
                    j += 1;
                }
                if j >= chars.len() {
                    out.push_str("\\[");
                } else {
                    let mut class: String = chars[i + 1..j].iter().collect();
                    if let Some(rest) = class.strip_prefix('!') {
                        class = format!("^{rest}");
                    }
                    let class = class.replace('\\', "\\\\").replace('[', "\\[");
                    out.push('[');
                    out.push_str(&class);
                    out.push(']');
                    i = j;
                }
            }
            c => out.push_str(&regex::escape(&c.to_string())),
        }
        i += 1;
    }
    out.push('$');
    out
}

// -------------------------------------------------------------------- output

impl Inventory {
    /// The inventory as `ansible-inventory --list` prints it: `_meta.hostvars` with every
    /// host's merged variables, then each non-empty group with its direct `hosts` and
    /// `children` (`all` lists only children).
    pub fn to_list_json(&self) -> Value {
        let hostvars: Map<String, Value> = self
            .hosts
            .iter()
            .map(|h| (h.clone(), Value::Object(self.host_vars(h))))
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

// -------------------------------------------------------------------- vars files

/// The variables for one group or host in a `group_vars/` or `host_vars/` directory, looked up
/// like Ansible: `<name>` (file or directory), then `<name>.yml`, `.yaml`, `.json`.
fn read_entity_vars(base: &Path, name: &str) -> Result<Option<Vars>, InventoryError> {
    // Names come from the inventory; never let one walk out of the vars directory.
    if name.is_empty() || name.contains('/') || name.contains('\\') || name == "." || name == ".." {
        return Ok(None);
    }
    for suffix in ["", ".yml", ".yaml", ".json"] {
        let p = base.join(format!("{name}{suffix}"));
        if p.is_dir() {
            if !suffix.is_empty() {
                continue;
            }
            let mut files = Vec::new();
            collect_vars_files(&p, &mut files)?;
            let mut out = Vars::new();
            for f in files {
                merge(&mut out, &read_vars_file(&f)?);
            }
            return Ok(Some(out));
        }
        if p.is_file() {
            return read_vars_file(&p).map(Some);
        }
    }
    Ok(None)
}

/// Vars files of a `group_vars/<name>/` directory, recursively, in name order.
fn collect_vars_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), InventoryError> {
    let read_err = |e: std::io::Error| {
        InventoryError::new(dir, None, None, format!("cannot read vars directory: {e}"))
    };
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(read_err)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(read_err)?;
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.starts_with('.') || name.ends_with('~') {
            continue;
        }
        let ext = p.extension().and_then(|e| e.to_str());
        if p.is_dir() {
            if ext.is_none() {
                collect_vars_files(&p, out)?;
            }
        } else if matches!(ext, None | Some("yml" | "yaml" | "json")) {
            out.push(p);
        }
    }
    Ok(())
}

fn read_vars_file(path: &Path) -> Result<Vars, InventoryError> {
    let text = fs::read_to_string(path).map_err(|e| {
        InventoryError::new(path, None, None, format!("cannot read vars file: {e}"))
    })?;
    if text.trim_start().starts_with("$ANSIBLE_VAULT") {
        return Err(InventoryError::new(
            path,
            Some(1),
            Some(1),
            "vault-encrypted vars files are not supported; decrypt it (`ansible-vault decrypt`) \
             or move the secrets elsewhere",
        ));
    }
    match parse_yaml(path, &text)? {
        serde_yaml::Value::Null => Ok(Vars::new()),
        doc @ serde_yaml::Value::Mapping(_) => match yaml_to_json(&doc) {
            Value::Object(m) => Ok(m),
            _ => Ok(Vars::new()),
        },
        other => Err(InventoryError::new(
            path,
            Some(1),
            Some(1),
            format!(
                "a vars file must be a mapping of variable names to values, found {}",
                yaml_kind(&other)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
        let p = dir.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, text).unwrap();
        p
    }

    fn strs(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    const INI: &str = "\
# comment
jump ansible_host=192.0.2.1

[web]
web[01:03].example.com ansible_port=2222 role=\"front end\"
; another comment
[db]
db-[a:b] ansible_user=postgres
solo:2200

[prod:children]
web
db

[web:vars]
http_port=8080
enabled=true
name='quoted'
ratio=1.5

[prod:vars]
env=production
";

    #[test]
    fn ini_hosts_groups_and_typed_vars() {
        let dir = tempfile::tempdir().unwrap();
        let inv = Inventory::load(&write(dir.path(), "hosts", INI)).unwrap();
        let groups = inv.groups_map();
        assert_eq!(
            groups["all"],
            strs(&[
                "jump",
                "web01.example.com",
                "web02.example.com",
                "web03.example.com",
                "db-a",
                "db-b",
                "solo"
            ])
        );
        assert_eq!(groups["ungrouped"], strs(&["jump"]));
        assert_eq!(groups["db"], strs(&["db-a", "db-b", "solo"]));
        assert_eq!(groups["prod"].len(), 6);
        assert_eq!(inv.group_names("web02.example.com"), strs(&["prod", "web"]));
        assert!(inv.group_names("jump").is_empty());

        let v = inv.host_vars("web01.example.com");
        assert_eq!(v["ansible_port"], Value::from(2222));
        assert_eq!(v["role"], Value::from("front end"));
        assert_eq!(v["http_port"], Value::from(8080));
        assert_eq!(v["enabled"], Value::Bool(true));
        assert_eq!(v["name"], Value::from("quoted"));
        assert_eq!(v["ratio"], serde_json::json!(1.5));
        assert_eq!(v["env"], Value::from("production"));
        assert_eq!(inv.host_vars("solo")["ansible_port"], Value::from(2200));
        assert_eq!(
            inv.host_vars("jump")["ansible_host"],
            Value::from("192.0.2.1")
        );
        assert!(inv.host_vars("jump").get("env").is_none());
        assert!(inv.host_vars("nope").is_empty());
    }

    #[test]
    fn ranges_keep_padding_and_support_steps_and_letters() {
        assert_eq!(
            expand_ranges("web[08:10].x").unwrap(),
            strs(&["web08.x", "web09.x", "web10.x"])
        );
        assert_eq!(
            expand_ranges("n[1:10:4]").unwrap(),
            strs(&["n1", "n5", "n9"])
        );
        assert_eq!(
            expand_ranges("db-[a:c]").unwrap(),
            strs(&["db-a", "db-b", "db-c"])
        );
        assert_eq!(
            expand_ranges("r[1:2]c[a:b]").unwrap(),
            strs(&["r1ca", "r1cb", "r2ca", "r2cb"])
        );
        assert!(expand_ranges("web[01:100]").is_err());
        assert!(expand_ranges("web[5:1]").is_err());
        assert!(expand_ranges("web[1:3").is_err());
    }

    #[test]
    fn inline_values_follow_quoting() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "hosts",
            "h1 a=1 b=\"2\" c='x y' d=True e=None f=\"[1, 'two']\" g=010 h=-3 # trailing\n",
        );
        let v = Inventory::load(&p).unwrap().host_vars("h1");
        assert_eq!(v["a"], Value::from(1));
        assert_eq!(v["b"], Value::from("2"));
        assert_eq!(v["c"], Value::from("x y"));
        assert_eq!(v["d"], Value::Bool(true));
        assert_eq!(v["e"], Value::Null);
        assert_eq!(v["f"], serde_json::json!([1, "two"]));
        assert_eq!(v["g"], Value::from("010"));
        assert_eq!(v["h"], Value::from(-3));
        assert_eq!(v.len(), 8);
    }

    #[test]
    fn children_only_groups_are_created_empty() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "hosts",
            "[web]\nw1\n[site:children]\nweb\nfuture\n",
        );
        let inv = Inventory::load(&p).unwrap();
        let g = inv.groups_map();
        assert_eq!(g["future"], Vec::<String>::new());
        assert_eq!(g["site"], strs(&["w1"]));
        assert_eq!(inv.group_names("w1"), strs(&["site", "web"]));
    }

    #[test]
    fn ini_errors_name_file_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "hosts", "[web]\nw1\n\n[web:kids]\nx\n");
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!(e.file, p);
        assert_eq!(e.line, Some(4));
        assert_eq!(e.col, Some(6));
        assert!(
            e.msg.contains("unknown section type `[web:kids]`"),
            "{}",
            e.msg
        );
        assert!(e.msg.contains("expected :vars or :children"), "{}", e.msg);

        let p = write(dir.path(), "h2", "[web]\nw1 port=22 oops\n");
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!((e.line, e.col), (Some(2), Some(12)));
        assert!(e.msg.contains("`oops`"), "{}", e.msg);

        let p = write(dir.path(), "h3", "[web]\nw1\n[dbs:vars]\nx=1\n");
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!(e.line, Some(3));
        assert!(e.msg.contains("never defined"), "{}", e.msg);

        let p = write(dir.path(), "h4", "[web]\nw1 a=\"open\n");
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.msg.contains("unterminated"), "{}", e.msg);

        let p = write(dir.path(), "h5", "[web\nw1\n");
        assert!(Inventory::load(&p)
            .unwrap_err()
            .msg
            .contains("malformed section header"));
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

    const YAML: &str = "\
all:
  hosts:
    jump:
      ansible_host: 192.0.2.1
  children:
    web:
      hosts:
        web[01:03].example.com:
          ansible_port: 2222
          role: front end
      vars:
        http_port: 8080
        enabled: true
        name: quoted
        ratio: 1.5
    db:
      hosts:
        db-[a:b]: {ansible_user: postgres}
        solo:2200:
    prod:
      children:
        web:
        db:
      vars:
        env: production
";

    #[test]
    fn yaml_and_ini_inventories_are_equivalent() {
        let dir = tempfile::tempdir().unwrap();
        let ini = Inventory::load(&write(dir.path(), "ini/hosts", INI)).unwrap();
        let yml = Inventory::load(&write(dir.path(), "yml/hosts.yml", YAML)).unwrap();
        // Detected by content, without the extension.
        let sniffed = Inventory::load(&write(dir.path(), "sniff/hosts", YAML)).unwrap();
        assert_eq!(ini.groups_map(), yml.groups_map());
        assert_eq!(ini.groups_map(), sniffed.groups_map());
        for h in &ini.groups_map()["all"] {
            assert_eq!(ini.host_vars(h), yml.host_vars(h), "vars of {h}");
            assert_eq!(ini.group_names(h), yml.group_names(h), "groups of {h}");
        }
    }

    #[test]
    fn yaml_groups_merge_across_places_and_files() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "inv/a.yml",
            "all:\n  children:\n    web:\n      hosts:\n        w1:\n      vars: {x: 1}\n",
        );
        write(
            dir.path(),
            "inv/b.yaml",
            "site:\n  children:\n    web:\n      hosts:\n        w2:\n      vars: {y: 2}\n",
        );
        write(dir.path(), "inv/c", "[web]\nw3\n[db]\nd1\n");
        write(dir.path(), "inv/README.md", "# not an inventory [\n");
        write(dir.path(), "inv/old.retry", "w9\n");
        write(dir.path(), "inv/.hidden", "w8\n");
        write(dir.path(), "inv/group_vars/web.yml", "z: 3\n");
        let inv = Inventory::load(&dir.path().join("inv")).unwrap();
        let g = inv.groups_map();
        assert_eq!(g["web"], strs(&["w1", "w2", "w3"]));
        assert_eq!(g["site"], strs(&["w1", "w2", "w3"]));
        assert_eq!(g["all"], strs(&["w1", "w2", "w3", "d1"]));
        let v = inv.host_vars("w3");
        assert_eq!(
            (v["x"].clone(), v["y"].clone(), v["z"].clone()),
            (1.into(), 2.into(), 3.into())
        );
    }

    #[test]
    fn yaml_errors_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "hosts.yml", "all:\n  hosts:\n    a: [1\n");
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!(e.file, p);
        assert!(e.line.is_some() && e.col.is_some(), "{e:?}");
        assert!(e.msg.starts_with("invalid YAML"), "{}", e.msg);

        let p = write(
            dir.path(),
            "h2.yml",
            "all:\n  children:\n    web:\n      host:\n        w1:\n",
        );
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!(e.line, Some(4));
        assert!(
            e.msg.contains("unexpected key `host` in group `web`"),
            "{}",
            e.msg
        );

        let p = write(dir.path(), "h3.yml", "all:\n  hosts:\n    - w1\n");
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.msg.contains("not a list"), "{}", e.msg);

        let p = write(dir.path(), "h4.yml", "- all\n");
        assert!(Inventory::load(&p).unwrap_err().msg.contains("top level"));
    }

    /// Inventory with `all` > `site` > `web` > host, each setting `v`/`from_*` keys.
    fn precedence_fixture(dir: &Path) -> PathBuf {
        let inv = write(
            dir,
            "inv/hosts",
            "[web]\nw1 v=host from_host=1\nw2\n\
             [site:children]\nweb\n\
             [all:vars]\nv=all\nfrom_all=1\n\
             [site:vars]\nv=site\nfrom_site=1\n\
             [web:vars]\nv=web\nfrom_web=1\nfile_beats_inline=inline\n",
        );
        write(dir, "inv/group_vars/web.yml", "file_beats_inline: file\n");
        inv
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
    fn playbook_dir_vars_beat_inventory_dir_and_reload_does_not_duplicate() {
        let dir = tempfile::tempdir().unwrap();
        let mut inv = Inventory::load(&precedence_fixture(dir.path())).unwrap();
        write(
            dir.path(),
            "inv/group_vars/all.yml",
            "a: inv\nonly_inv: 1\n",
        );
        write(dir.path(), "inv/host_vars/w1", "h: inv\n");
        write(dir.path(), "play/group_vars/all.yaml", "a: play\n");
        write(dir.path(), "play/host_vars/w1.json", "{\"h\": \"play\"}");
        write(dir.path(), "play/group_vars/ghost.yml", ": not even yaml [");
        write(dir.path(), "play/host_vars/ghost.yml", ": not even yaml [");
        inv.load_vars_dir(&dir.path().join("inv")).unwrap();
        inv.load_vars_dir(&dir.path().join("play")).unwrap();
        let v = inv.host_vars("w1");
        assert_eq!(v["a"], Value::from("play"));
        assert_eq!(v["h"], Value::from("play"));
        assert_eq!(v["only_inv"], Value::from(1));
        // Loading the inventory dir again keeps its place below the playbook dir.
        inv.load_vars_dir(&dir.path().join("inv/../inv")).unwrap();
        assert_eq!(inv.layers.len(), 2);
        assert_eq!(inv.host_vars("w1")["a"], Value::from("play"));
    }

    #[test]
    fn group_vars_directory_form_merges_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "hosts", "[web]\nw1\n");
        write(dir.path(), "group_vars/web/10-base.yml", "a: 1\nb: 1\n");
        write(dir.path(), "group_vars/web/20-override.yaml", "b: 2\n");
        write(dir.path(), "group_vars/web/nested/30.json", "{\"c\": 3}");
        write(dir.path(), "group_vars/web/notes.txt", "d: 4\n");
        write(dir.path(), "group_vars/web/.hidden.yml", "e: 5\n");
        write(dir.path(), "group_vars/all", "f: 6\n");
        let v = Inventory::load(&p).unwrap().host_vars("w1");
        assert_eq!(
            serde_json::Value::Object(v),
            serde_json::json!({"a": 1, "b": 2, "c": 3, "f": 6})
        );
    }

    #[test]
    fn bad_vars_files_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "hosts", "[web]\nw1\n");
        let bad = write(dir.path(), "group_vars/web.yml", "a: 1\nb: [\n");
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!(e.file, bad);
        assert!(e.line.is_some());
        write(dir.path(), "group_vars/web.yml", "- a\n");
        assert!(Inventory::load(&p)
            .unwrap_err()
            .msg
            .contains("mapping of variable names"));
    }

    fn pattern_fixture() -> (tempfile::TempDir, Inventory) {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "hosts",
            "[web]\nweb1\nweb2\nweb3\n[db]\ndb1\ndb2\n[prod]\nweb1\ndb1\n[staging]\nweb2\n\
             [edge]\ncdn.example.com\n[all:vars]\nshared=1\n",
        );
        let inv = Inventory::load(&p).unwrap();
        (dir, inv)
    }

    #[test]
    fn patterns_union_intersection_exclusion() {
        let (_d, inv) = pattern_fixture();
        let sel = |p: &str| inv.select(p).unwrap();
        let every = strs(&["web1", "web2", "web3", "db1", "db2", "cdn.example.com"]);
        assert_eq!(sel("all"), every);
        assert_eq!(sel("*"), every);
        assert_eq!(sel("web"), strs(&["web1", "web2", "web3"]));
        assert_eq!(sel("db:web"), strs(&["web1", "web2", "web3", "db1", "db2"]));
        assert_eq!(sel("db, web2"), strs(&["web2", "db1", "db2"]));
        assert_eq!(sel("web:&prod"), strs(&["web1"]));
        assert_eq!(sel("web:!prod"), strs(&["web2", "web3"]));
        assert_eq!(sel("!prod:web"), strs(&["web2", "web3"]));
        assert_eq!(sel("&prod"), strs(&["web1", "db1"]));
        assert_eq!(sel("all:!web:!db"), strs(&["cdn.example.com"]));
        assert_eq!(sel("web:&prod,staging"), strs(&["web1"]));
        assert_eq!(sel("db1:db1:db"), strs(&["db1", "db2"]));
        assert!(sel("nope").is_empty());
        assert!(sel("").is_empty());
    }

    #[test]
    fn patterns_glob_regex_and_subscripts() {
        let (_d, inv) = pattern_fixture();
        let sel = |p: &str| inv.select(p).unwrap();
        assert_eq!(sel("web*"), strs(&["web1", "web2", "web3"]));
        assert_eq!(sel("*1"), strs(&["web1", "db1"]));
        assert_eq!(sel("db?"), strs(&["db1", "db2"]));
        assert_eq!(sel("*.example.com"), strs(&["cdn.example.com"]));
        assert_eq!(sel("web[!1]"), strs(&["web2", "web3"]));
        assert_eq!(sel("~web[12]"), strs(&["web1", "web2"]));
        assert_eq!(sel("~(web|db)1"), strs(&["web1", "db1"]));
        assert_eq!(
            sel("~eb"),
            Vec::<String>::new(),
            "regex is anchored at the start"
        );
        assert_eq!(
            sel("~stag"),
            strs(&["web2"]),
            "regex matches group names too"
        );
        assert_eq!(sel("web[0]"), strs(&["web1"]));
        assert_eq!(sel("web[-1]"), strs(&["web3"]));
        assert_eq!(sel("web[0:1]"), strs(&["web1", "web2"]));
        assert_eq!(sel("web[1:]"), strs(&["web2", "web3"]));
        assert_eq!(sel("web[1:]:&prod"), Vec::<String>::new());
        assert!(sel("web[7]").is_empty());

        let e = inv.select("~web[").unwrap_err();
        assert!(e.msg.contains("invalid host pattern `~web[`"), "{}", e.msg);
    }

    #[test]
    fn implicit_localhost_is_selectable_but_not_in_all() {
        let (_d, inv) = pattern_fixture();
        assert_eq!(inv.select("localhost").unwrap(), strs(&["localhost"]));
        assert_eq!(inv.select("127.0.0.1").unwrap(), strs(&["127.0.0.1"]));
        assert_eq!(
            inv.select("db2:localhost").unwrap(),
            strs(&["db2", "localhost"])
        );
        assert!(!inv
            .select("all")
            .unwrap()
            .contains(&"localhost".to_string()));
        assert!(!inv.groups_map()["all"].contains(&"localhost".to_string()));
        let v = inv.host_vars("localhost");
        assert_eq!(v["ansible_connection"], Value::from("local"));
        assert_eq!(
            v["shared"],
            Value::from(1),
            "implicit localhost still gets `all` vars"
        );
        assert!(inv.group_names("localhost").is_empty());

        // An inventory that defines localhost uses its own definition.
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "hosts",
            "[ctl]\nlocalhost ansible_connection=ssh\n",
        );
        let inv = Inventory::load(&p).unwrap();
        assert_eq!(inv.select("all").unwrap(), strs(&["localhost"]));
        assert_eq!(
            inv.host_vars("localhost")["ansible_connection"],
            Value::from("ssh")
        );
    }

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

    #[test]
    fn addresses_ports_and_string_shorthands() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "hosts",
            "[v6]\n[2001:db8::1]:2201\nfe80::2\n[v4]\n192.0.2.7:2222 a=1\n",
        );
        let inv = Inventory::load(&p).unwrap();
        assert_eq!(inv.groups_map()["v6"], strs(&["2001:db8::1", "fe80::2"]));
        assert_eq!(
            inv.host_vars("2001:db8::1")["ansible_port"],
            Value::from(2201)
        );
        assert!(inv.host_vars("fe80::2").get("ansible_port").is_none());
        assert_eq!(
            inv.host_vars("192.0.2.7")["ansible_port"],
            Value::from(2222)
        );
        assert_eq!(inv.select("fe80::2").unwrap(), strs(&["fe80::2"]));
        assert!(Inventory::load(&write(dir.path(), "bad", "h:99999\n"))
            .unwrap_err()
            .msg
            .contains("invalid port"));

        // YAML allows a single name instead of a mapping for hosts and children.
        let p = write(
            dir.path(),
            "s.yml",
            "all:\n  children:\n    web:\n      hosts: w1\n    site:\n      children: web\n",
        );
        let inv = Inventory::load(&p).unwrap();
        assert_eq!(inv.groups_map()["site"], strs(&["w1"]));

        // Making `all` a child closes a cycle through the implicit `all` → group link.
        let p = write(dir.path(), "loop", "[web]\nw1\n[web:children]\nall\n");
        let e = Inventory::load(&p).unwrap_err();
        assert!(e.msg.contains("cycle"), "{}", e.msg);
        assert_eq!(e.line, Some(4));

        let e = Inventory::load(&dir.path().join("missing")).unwrap_err();
        assert!(e.msg.contains("pass an existing inventory"), "{}", e.msg);
    }

    #[test]
    fn implicit_localhost_inventory() {
        let inv = Inventory::implicit_localhost();
        assert_eq!(inv.groups_map()["all"], strs(&["localhost"]));
        assert_eq!(inv.groups_map()["ungrouped"], strs(&["localhost"]));
        assert_eq!(
            inv.host_vars("localhost")["ansible_connection"],
            Value::from("local")
        );
    }

    #[test]
    fn literal_eval_subset() {
        assert_eq!(
            parse_literal("{'a': [1, 2.5], 'b': (True,)}"),
            Some(serde_json::json!({"a": [1, 2.5], "b": [true]}))
        );
        assert_eq!(parse_literal("0x1f"), Some(Value::from(31)));
        assert_eq!(parse_literal("1e3"), Some(serde_json::json!(1000.0)));
        assert_eq!(parse_literal("hello"), None);
        assert_eq!(parse_literal("1.2.3"), None);
        assert_eq!(parse_literal("'a' 'b'"), None);
    }
}
