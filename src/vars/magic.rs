//! The variables the engine defines itself, as Ansible does: `inventory_hostname`,
//! `group_names`, `ansible_play_hosts`, `role_path`, `ansible_loop`, `omit`...

use super::{Layer, PlayVars, VarSrc};
use crate::config::Config;
use crate::inventory::GroupHosts;
use crate::playbook::Play;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// What `omit` is once a template's result leaves the template engine: a parameter or fact
/// equal to it is dropped.
pub use crate::template::OMIT;

/// `inventory_hostname` and `inventory_hostname_short`: the magic variables every scope of a
/// host has, including the one its `hostvars` entry is rendered in.
pub fn host_names(name: &str) -> Map<String, Value> {
    let mut magic = Map::new();
    magic.insert("inventory_hostname".into(), json!(name));
    // An IP address is its own short name, as in ansible-core.
    let short = match name.parse::<std::net::IpAddr>() {
        Ok(_) => name,
        Err(_) => name.split('.').next().unwrap_or(name),
    };
    magic.insert("inventory_hostname_short".into(), json!(short));
    magic
}

/// The run's settings as ansible-core gives them to every task and `hostvars` entry (its
/// "options vars"): `ansible_check_mode`, `ansible_diff_mode`, the tags, `ansible_forks`,
/// `ansible_verbosity`, `ansible_limit` (with `--limit` only), `ansible_inventory_sources` and
/// `ansible_version`.
pub fn run_vars(cfg: &Config) -> Map<String, Value> {
    let mut magic = Map::new();
    // As in ansible-core, the command line's `--check` only: a `check_mode` keyword on the
    // play, block or task does not change it.
    magic.insert("ansible_check_mode".into(), json!(cfg.check));
    magic.insert("ansible_diff_mode".into(), json!(cfg.diff));
    // `--tags` / `--skip-tags` as given (`all` without `--tags`), as ansible-core shows them.
    let run_tags = if cfg.tags.is_empty() {
        vec!["all".to_string()]
    } else {
        cfg.tags.clone()
    };
    magic.insert("ansible_run_tags".into(), json!(run_tags));
    magic.insert("ansible_skip_tags".into(), json!(cfg.skip_tags));
    magic.insert("ansible_forks".into(), json!(cfg.forks));
    magic.insert("ansible_verbosity".into(), json!(cfg.verbosity));
    if let Some(limit) = &cfg.limit {
        magic.insert("ansible_limit".into(), json!(limit));
    }
    let sources: Vec<String> = cfg
        .inventory
        .iter()
        .map(|p| match crate::inventory::is_host_list(p) {
            true => p.display().to_string(),
            false => abs(p),
        })
        .collect();
    magic.insert("ansible_inventory_sources".into(), json!(sources));
    // fixpoint is not run by a Python: the controller's Python it would use for Ansible's own
    // modules stands in (`pymod::locate::playbook_python`; DEVIATIONS.md). It reads no
    // `ansible.cfg`, which is ansible-core's `None` when it finds none.
    if let Some(py) = crate::pymod::locate::playbook_python() {
        magic.insert("ansible_playbook_python".into(), json!(py));
    }
    magic.insert("ansible_config_file".into(), Value::Null);
    magic.insert(
        "ansible_version".into(),
        serde_json::to_value(ansible_version()).unwrap_or_default(),
    );
    magic
}

/// The magic variables that are the same for every host of a task (`groups`, `hostvars`, the
/// play's host lists, `playbook_dir`...), built once per play or per task as template objects
/// and shared by every host's scope: copying them into each scope cost O(hosts) per host and
/// task (issue 13). The magic variables of one host (its names, `group_names`, `role_path`...)
/// are kept too, per host and role, as long as the groups do not change.
#[derive(Clone, Debug, Default)]
pub struct PlayObjects {
    groups: minijinja::Value,
    /// `group_names` of every host, computed with `groups`.
    group_names: GroupNames,
    hostvars: minijinja::Value,
    all_hosts: minijinja::Value,
    live_hosts: minijinja::Value,
    /// The batch's hosts (`serial`), and those of them still live: `ansible_play_batch`.
    batch_hosts: Arc<Vec<String>>,
    batch: minijinja::Value,
    playbook_dir: minijinja::Value,
    /// `ansible_play_role_names` (and `role_names`), `ansible_dependent_role_names`,
    /// `ansible_role_names`: the same for the whole play.
    role_names: [minijinja::Value; 3],
    /// The play's directory, absolute (last of `ansible_search_path`).
    play_dir: String,
    /// `ansible_play_name`: the play's name as rendered (`named`), else as written.
    play_name: Option<String>,
    /// The objects above as one layer's objects, for every scope to share.
    shared: Arc<Vec<(String, minijinja::Value)>>,
    /// Each host's own magic layer, by host and role (see `host_magic`): the same for every
    /// task of the play with that role, until the groups change (`with_groups`).
    per_host: Arc<Mutex<HostMagic>>,
}

/// The magic layers built so far: host name → (role name and path, the task's directory,
/// layer).
type HostMagic = HashMap<String, Vec<(MagicKey, Layer)>>;
type MagicKey = (Option<(String, PathBuf)>, Option<PathBuf>);

impl PlayObjects {
    /// The objects of a play: its groups and host lists; `hostvars` is set per task by
    /// [`with_hosts`](Self::with_hosts).
    pub fn new(
        groups: &GroupHosts,
        play: &Play,
        batch: &[String],
        all_hosts: &[String],
    ) -> PlayObjects {
        let (groups, group_names) = group_objects(groups);
        PlayObjects {
            groups,
            group_names,
            hostvars: minijinja::Value::from(()),
            all_hosts: minijinja::Value::from_serialize(all_hosts),
            live_hosts: minijinja::Value::from_serialize(all_hosts),
            batch_hosts: Arc::new(batch.to_vec()),
            batch: minijinja::Value::from_serialize(batch),
            // The directory of the playbook file the play is written in (an imported
            // one's own), as ansible-core sets its loader's base directory for each play.
            playbook_dir: minijinja::Value::from(abs(&play.dir)),
            role_names: role_names(play),
            play_dir: abs(&play.dir),
            play_name: None,
            shared: Arc::default(),
            per_host: Arc::default(),
        }
        .share()
    }

    /// The same play with its name as rendered, for `ansible_play_name`.
    pub fn named(&self, name: &str) -> PlayObjects {
        PlayObjects {
            play_name: Some(name.to_string()),
            per_host: Arc::default(),
            ..self.clone()
        }
    }

    /// The same play with the hosts still live and the `hostvars` of now.
    pub fn with_hosts(
        &self,
        all_hosts: &[String],
        live_hosts: &[String],
        hostvars: minijinja::Value,
    ) -> PlayObjects {
        // As ansible-core: the batch without the hosts that failed or became unreachable.
        let live: std::collections::HashSet<&String> = live_hosts.iter().collect();
        let batch: Vec<&String> = self
            .batch_hosts
            .iter()
            .filter(|h| live.contains(h))
            .collect();
        PlayObjects {
            all_hosts: minijinja::Value::from_serialize(all_hosts),
            live_hosts: minijinja::Value::from_serialize(live_hosts),
            batch: minijinja::Value::from_serialize(batch),
            hostvars,
            ..self.clone()
        }
        .share()
    }

    /// The same play with the groups an `add_host`/`group_by` of this play left.
    pub fn with_groups(&self, groups: &GroupHosts) -> PlayObjects {
        let (groups, group_names) = group_objects(groups);
        PlayObjects {
            groups,
            group_names,
            // Every host's `group_names` may have changed.
            per_host: Arc::default(),
            ..self.clone()
        }
        .share()
    }

    /// These objects with `shared` made from them.
    fn share(mut self) -> PlayObjects {
        self.shared = Arc::new(vec![
            ("groups".to_string(), self.groups.clone()),
            ("hostvars".to_string(), self.hostvars.clone()),
            ("playbook_dir".to_string(), self.playbook_dir.clone()),
            ("ansible_play_hosts_all".to_string(), self.all_hosts.clone()),
            ("ansible_play_hosts".to_string(), self.live_hosts.clone()),
            ("play_hosts".to_string(), self.batch.clone()),
            ("ansible_play_batch".to_string(), self.batch.clone()),
            (
                "ansible_play_role_names".to_string(),
                self.role_names[0].clone(),
            ),
            ("role_names".to_string(), self.role_names[0].clone()),
            (
                "ansible_dependent_role_names".to_string(),
                self.role_names[1].clone(),
            ),
            ("ansible_role_names".to_string(), self.role_names[2].clone()),
        ]);
        self
    }

    /// What every `hostvars` entry shows of these objects: `groups`, every host's
    /// `group_names`, and `playbook_dir`.
    pub fn entry_magic(&self) -> (minijinja::Value, GroupNames, minijinja::Value) {
        (
            self.groups.clone(),
            self.group_names.clone(),
            self.playbook_dir.clone(),
        )
    }

    fn group_names_of(&self, host: &str) -> minijinja::Value {
        match self.group_names.get(host) {
            Some(v) => v.clone(),
            // A host in no group (not even `all`: an implicit localhost).
            None => minijinja::Value::from_serialize(Vec::<String>::new()),
        }
    }
}

/// The play's role names as ansible-core gives them: the roles it names and imports, those
/// they depend on, and both without repeats (ansible-core makes that one from a set, in no
/// particular order; here in the order of its parts).
fn role_names(play: &Play) -> [minijinja::Value; 3] {
    let mut all: Vec<&String> = Vec::new();
    for name in play
        .dependent_role_names
        .iter()
        .chain(&play.play_role_names)
    {
        if !all.contains(&name) {
            all.push(name);
        }
    }
    [
        minijinja::Value::from_serialize(&play.play_role_names),
        minijinja::Value::from_serialize(&play.dependent_role_names),
        minijinja::Value::from_serialize(&all),
    ]
}

/// Every host's `group_names`, as template objects.
pub type GroupNames = Arc<HashMap<String, minijinja::Value>>;

/// `groups` and every host's `group_names`, as template objects.
fn group_objects(groups: &GroupHosts) -> (minijinja::Value, GroupNames) {
    let groups_json = Value::Object(
        groups
            .iter()
            .map(|(g, hosts)| (g.clone(), json!(hosts)))
            .collect(),
    );
    let mut names: HashMap<String, minijinja::Value> = HashMap::new();
    for host in groups.values().flatten() {
        if !names.contains_key(host) {
            let v = minijinja::Value::from_serialize(group_names(&groups_json, host));
            names.insert(host.clone(), v);
        }
    }
    (
        minijinja::Value::from_serialize(&groups_json),
        Arc::new(names),
    )
}

/// The magic variables of a task (or include) on a host during a play: the host's own layer
/// (its names, `group_names`, the role's path...) and, on top, the objects every host shares.
/// Both are built once and shared, not per scope: a scope is built for every task on every
/// host.
pub fn play_magic(cfg: &Config, ctx: &PlayVars<'_>, src: &VarSrc<'_>, host: &str) -> [Layer; 2] {
    let o = ctx.objects;
    let task_dir = src.task_file.and_then(Path::parent);
    let same_role = |(role, dir): &MagicKey| {
        dir.as_deref() == task_dir
            && match (role, src.role) {
                (None, None) => true,
                (Some((name, path)), Some(r)) => *name == r.name && *path == r.path,
                _ => false,
            }
    };
    let mut cache = o.per_host.lock().expect("magic cache");
    let built = cache.get(host).and_then(|roles| {
        roles
            .iter()
            .find(|(k, _)| same_role(k))
            .map(|(_, l)| l.clone())
    });
    let own = match built {
        Some(l) => l,
        None => {
            let l = host_magic(cfg, ctx, src, host);
            let key = (
                src.role.map(|r| (r.name.clone(), r.path.clone())),
                task_dir.map(Path::to_path_buf),
            );
            cache
                .entry(host.to_string())
                .or_default()
                .push((key, l.clone()));
            l
        }
    };
    drop(cache);
    let shared = Layer {
        objects: o.shared.clone(),
        ..Layer::shared(empty_map(), false)
    };
    [own, shared]
}

/// A host's own magic variables for a play and role.
fn host_magic(cfg: &Config, ctx: &PlayVars<'_>, src: &VarSrc<'_>, host: &str) -> Layer {
    let play = ctx.play;
    let o = ctx.objects;
    let mut magic = host_names(host);
    let name = o.play_name.as_deref().unwrap_or(&play.name);
    magic.insert("ansible_play_name".into(), json!(name));
    let mut search_path = Vec::new();
    if let Some(r) = src.role {
        let role_path = abs(&r.path);
        magic.insert("role_path".into(), json!(role_path));
        magic.insert("role_name".into(), json!(r.short_name()));
        magic.insert("ansible_role_name".into(), json!(r.name));
        search_path.push(role_path);
    }
    // Then the directory of the file the task is written in, and the play's (each once).
    if let Some(dir) = src.task_file.and_then(Path::parent) {
        // A file named without a directory (`site.yml`) is in the current one.
        let dir = abs(if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        });
        if !search_path.contains(&dir) && dir != o.play_dir {
            search_path.push(dir);
        }
    }
    search_path.push(o.play_dir.clone());
    magic.insert("ansible_search_path".into(), json!(search_path));
    magic.extend(run_vars(cfg));
    Layer::data(magic).with_objects(vec![
        ("group_names".to_string(), o.group_names_of(host)),
        // An object of its own type in templates (`template::omit`), as in ansible-core 2.19.
        ("omit".to_string(), crate::template::omit()),
    ])
}

/// An empty map, shared.
fn empty_map() -> Arc<Map<String, Value>> {
    static EMPTY: OnceLock<Arc<Map<String, Value>>> = OnceLock::new();
    EMPTY.get_or_init(Arc::default).clone()
}

/// `ansible_version`: the ansible-core release fixpoint follows, in Ansible's shape.
fn ansible_version() -> minijinja::Value {
    static VERSION: OnceLock<minijinja::Value> = OnceLock::new();
    VERSION
        .get_or_init(|| {
            let v = crate::engine::python::ANSIBLE_VERSION;
            let n: Vec<u64> = v.split('.').filter_map(|p| p.parse().ok()).collect();
            minijinja::Value::from_serialize(json!({
                "string": v,
                "full": v,
                "major": n.first(),
                "minor": n.get(1),
                "revision": n.get(2),
            }))
        })
        .clone()
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
/// resolved, or as given when it does not exist. Resolved paths are kept for the run: a role's
/// path is asked for on every task of the role on every host.
pub fn abs(p: &Path) -> String {
    static RESOLVED: OnceLock<Mutex<HashMap<PathBuf, String>>> = OnceLock::new();
    let cache = RESOLVED.get_or_init(Mutex::default);
    if let Some(s) = cache.lock().expect("abs cache").get(p) {
        return s.clone();
    }
    match std::fs::canonicalize(p) {
        Ok(r) => {
            let s = r.display().to_string();
            cache
                .lock()
                .expect("abs cache")
                .insert(p.to_path_buf(), s.clone());
            s
        }
        Err(_) => p.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::playbook::RoleCtx;
    use crate::template::Templar;
    use crate::vars::Scope;

    fn cfg() -> Config {
        use clap::Parser;
        let crate::cli::Command::Apply(args) =
            crate::cli::Cli::parse_from(["fixpoint", "apply", "site.yml"]).command
        else {
            unreachable!("parsed an apply command")
        };
        Config::from_run_args(args, false).unwrap()
    }

    /// `expr` rendered in the magic layers of `host` with `role`.
    fn magic_of(
        cfg: &Config,
        play: &Play,
        objects: &PlayObjects,
        role: Option<&RoleCtx>,
        host: &str,
        expr: &str,
    ) -> Value {
        let empty = Arc::new(Map::new());
        let ctx = PlayVars {
            play,
            objects,
            files_vars: &empty,
            include_params: &empty,
            public_roles: &Default::default(),
        };
        let src = VarSrc {
            role,
            ..VarSrc::default()
        };
        let layers = play_magic(cfg, &ctx, &src, host);
        Scope::new(Arc::new(Templar::new()), layers.to_vec())
            .render(&json!(format!("{{{{ {expr} }}}}")))
            .unwrap()
    }

    #[test]
    fn kept_magic_layers_follow_groups_roles_and_hostvars() {
        let cfg = cfg();
        let play = Play::bare("all", false);
        let groups = |g: Value| -> GroupHosts { serde_json::from_value(g).unwrap() };
        let hosts = vec!["a".to_string(), "b".to_string()];
        let o = PlayObjects::new(
            &groups(json!({"all": ["a", "b"], "web": ["a"]})),
            &play,
            &hosts,
            &hosts,
        );
        assert_eq!(
            magic_of(&cfg, &play, &o, None, "a", "group_names"),
            json!(["web"])
        );
        assert_eq!(
            magic_of(&cfg, &play, &o, None, "b", "group_names"),
            json!([])
        );
        assert_eq!(
            magic_of(&cfg, &play, &o, None, "b", "inventory_hostname"),
            json!("b")
        );
        // A role's own layer is another entry for the same host, not the role-less one.
        let role = RoleCtx {
            name: "web".into(),
            path: PathBuf::from("/nonexistent/roles/web"),
            defaults: Arc::default(),
            inherited: Arc::default(),
            vars: Arc::default(),
            entry_vars: Arc::default(),
            params: Arc::default(),
            entry_params: false,
            dedup: None,
        };
        assert_eq!(
            magic_of(&cfg, &play, &o, Some(&role), "a", "role_name"),
            json!("web")
        );
        assert_eq!(
            magic_of(&cfg, &play, &o, None, "a", "role_name is defined"),
            json!(false)
        );
        // `group_by`/`add_host` on another host changed the groups: every host's layer is
        // made again (b is in a group now), and `hostvars` of a later task is the new one.
        let o2 = o.with_groups(&groups(
            json!({"all": ["a", "b"], "web": ["a"], "db": ["b"]}),
        ));
        assert_eq!(
            magic_of(&cfg, &play, &o2, None, "b", "group_names"),
            json!(["db"])
        );
        assert_eq!(
            magic_of(&cfg, &play, &o2, None, "a", "groups.db"),
            json!(["b"])
        );
        let mut all = hosts.clone();
        all.push("added".to_string());
        let o3 = o2.with_hosts(
            &all,
            &hosts[..1],
            minijinja::Value::from_serialize(json!({"a": {"x": 1}})),
        );
        assert_eq!(
            magic_of(&cfg, &play, &o3, None, "b", "hostvars.a.x"),
            json!(1)
        );
        assert_eq!(
            magic_of(&cfg, &play, &o3, None, "b", "ansible_play_hosts"),
            json!(["a"])
        );
        // The play's hosts now (an `add_host` added one), not those it started with.
        assert_eq!(
            magic_of(&cfg, &play, &o3, None, "b", "ansible_play_hosts_all"),
            json!(["a", "b", "added"])
        );
        assert_eq!(
            magic_of(&cfg, &play, &o3, None, "b", "group_names"),
            json!(["db"])
        );
    }

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
