//! Ansible's `hostvars`: every inventory host's variables as another host sees them.
//!
//! Built for speed with many hosts (issue 13): each host's entry shares its inputs (the `Arc`
//! maps the engine holds) and is rendered only when a template reads it, once; a table of
//! entries is rebuilt per task in O(hosts) pointer comparisons, reusing every entry whose
//! inputs did not change, and every host's scope shares the same table.

use super::magic::{host_names, run_vars, GroupNames};
use super::PlayObjects;
use super::{HostVars, Layer, Scope};
use crate::config::Config;
use crate::inventory::Inventory;
use crate::template::Templar;
use minijinja::value::{Enumerator, Object, ObjectRepr};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// What every entry is rendered with besides the host's own maps: the templar, `-e`, and the
/// magic variables ansible-core gives a host outside any play (its `group_names`, `groups`,
/// `playbook_dir` and the run's settings).
#[derive(Debug, Clone)]
pub struct EntryCtx {
    templar: Arc<Templar>,
    extra_vars: Arc<Map<String, Value>>,
    /// The run's settings (`ansible_check_mode`, `ansible_version`...): `Cache::run_vars`.
    run: Arc<Map<String, Value>>,
    groups: minijinja::Value,
    group_names: GroupNames,
    playbook_dir: minijinja::Value,
}

impl EntryCtx {
    pub fn new(
        run: Arc<Map<String, Value>>,
        templar: &Arc<Templar>,
        extra_vars: &Arc<Map<String, Value>>,
        objects: &PlayObjects,
    ) -> EntryCtx {
        let (groups, group_names, playbook_dir) = objects.entry_magic();
        EntryCtx {
            templar: templar.clone(),
            extra_vars: extra_vars.clone(),
            run,
            groups,
            group_names,
            playbook_dir,
        }
    }

    /// Whether entries built with `other` are the same as with this (every part shared).
    fn same(&self, other: &EntryCtx) -> bool {
        Arc::ptr_eq(&self.templar, &other.templar)
            && Arc::ptr_eq(&self.extra_vars, &other.extra_vars)
            && Arc::ptr_eq(&self.run, &other.run)
            && Arc::ptr_eq(&self.group_names, &other.group_names)
            && self.playbook_dir == other.playbook_dir
    }

    /// The magic variables of `host` (its names, `group_names`, `groups`, the run's), as
    /// one layer.
    fn magic_layer(&self, host: &str) -> Layer {
        let mut names = host_names(host);
        names.extend(self.run.iter().map(|(k, v)| (k.clone(), v.clone())));
        let group_names = self
            .group_names
            .get(host)
            .cloned()
            .unwrap_or_else(|| minijinja::Value::from_serialize(Vec::<String>::new()));
        Layer::data(names).with_objects(vec![
            ("groups".to_string(), self.groups.clone()),
            ("group_names".to_string(), group_names),
            ("playbook_dir".to_string(), self.playbook_dir.clone()),
        ])
    }
}

/// One host's `hostvars` entry: its inventory variables rendered in its own scope, then its
/// facts and set facts as data, then its magic variables. Rendered on first read.
#[derive(Debug)]
pub struct Entry {
    name: String,
    inv_vars: Arc<Map<String, Value>>,
    facts: Arc<Map<String, Value>>,
    host_vars: Arc<Map<String, Value>>,
    ctx: Arc<EntryCtx>,
    value: OnceLock<minijinja::Value>,
}

impl Entry {
    fn new(h: &HostVars<'_>, ctx: &Arc<EntryCtx>) -> Entry {
        Entry {
            name: h.name.to_string(),
            inv_vars: h.inv_vars.clone(),
            facts: h.facts.clone(),
            host_vars: h.host_vars.clone(),
            ctx: ctx.clone(),
            value: OnceLock::new(),
        }
    }

    /// Whether this entry was built from exactly these maps (the engine changes a host's maps
    /// copy-on-write while an entry holds them, so a change always makes a new map).
    fn same_inputs(&self, h: &HostVars<'_>) -> bool {
        Arc::ptr_eq(&self.inv_vars, h.inv_vars)
            && Arc::ptr_eq(&self.facts, h.facts)
            && Arc::ptr_eq(&self.host_vars, h.host_vars)
    }

    /// The entry's own variables as data (its magic ones are added by `value`): inventory
    /// variables, facts, set facts, then `-e` over them, as ansible-core's `get_vars` stacks
    /// them for a host outside any play.
    fn data(&self) -> Map<String, Value> {
        let mut m = (*self.inv_vars).clone();
        m.insert("inventory_hostname".into(), json!(self.name));
        self.render_in_host(&mut m);
        m.extend(self.facts.iter().map(|(k, v)| (k.clone(), v.clone())));
        m.extend(self.host_vars.iter().map(|(k, v)| (k.clone(), v.clone())));
        let mut extra = (*self.ctx.extra_vars).clone();
        self.render_in_host(&mut extra);
        m.extend(extra);
        // A mapping on every host, empty before facts are gathered, as in ansible-core.
        m.entry("ansible_facts")
            .or_insert_with(|| Value::Object(Map::new()));
        m
    }

    /// The templates of `vars` (`db_name: "{{ app_name }}"` among inventory variables or
    /// `-e`) rendered in this host's own scope, as another host sees them through Ansible's
    /// `hostvars`.
    fn render_in_host(&self, vars: &mut Map<String, Value>) {
        // Templates anywhere inside a value, and `!unsafe` marks, which rendering unwraps.
        let is_template = Templar::needs_render;
        if !vars.values().any(is_template) {
            return;
        }
        let scope = Scope::new(
            self.ctx.templar.clone(),
            vec![
                Layer::shared(self.inv_vars.clone(), true),
                Layer::shared(self.facts.clone(), false),
                Layer::shared(self.host_vars.clone(), false),
                Layer::shared(self.ctx.extra_vars.clone(), true),
                self.ctx.magic_layer(&self.name),
            ],
        );
        for v in vars.values_mut() {
            if is_template(v) {
                // A value that cannot be rendered here stays as written, as Ansible shows it
                // (its `!unsafe` values unmarked: they are literal either way).
                *v = match scope.render(v) {
                    Ok(r) => r,
                    Err(_) => crate::yaml::mark::strip_marks(v),
                };
            }
        }
    }

    fn value(&self) -> minijinja::Value {
        // Rendering an entry never reads `hostvars` (its scope has no such variable), so this
        // cannot re-enter itself.
        self.value
            .get_or_init(|| {
                // The magic variables last: in ansible-core they override the host's own.
                let magic = self.ctx.magic_layer(&self.name);
                let own = self.data().into_iter().map(|(k, v)| {
                    let v = crate::template::json_to_value(&v);
                    (k, v)
                });
                let data = magic.vars.iter().map(|(k, v)| {
                    let v = crate::template::json_to_value(v);
                    (k.clone(), v)
                });
                let objects = magic.objects.iter().cloned();
                // A later pair replaces an earlier one of the same key.
                own.chain(data).chain(objects).collect()
            })
            .clone()
    }
}

/// `hostvars`: the entries of every inventory host, in inventory order (hosts added later
/// after them), as a template object.
#[derive(Debug, Default)]
pub struct Table {
    order: Vec<Arc<Entry>>,
    index: HashMap<String, usize>,
    /// The implicit localhost's names the inventory lacks: readable by name, not listed, as
    /// ansible-core's `hostvars` finds a host it does not iterate.
    implicit: Vec<Arc<Entry>>,
}

impl Table {
    fn push(&mut self, e: Arc<Entry>) {
        match self.index.get(&e.name) {
            Some(&i) => self.order[i] = e,
            None => {
                self.index.insert(e.name.clone(), self.order.len());
                self.order.push(e);
            }
        }
    }

    fn get(&self, name: &str) -> Option<&Arc<Entry>> {
        match self.index.get(name) {
            Some(&i) => Some(&self.order[i]),
            None => self.implicit.iter().find(|e| e.name == name),
        }
    }
}

impl Object for Table {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &minijinja::Value) -> Option<minijinja::Value> {
        Some(self.get(key.as_str()?)?.value())
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(
            self.order
                .iter()
                .map(|e| minijinja::Value::from(e.name.as_str()))
                .collect(),
        )
    }
}

/// The `hostvars` tables of a run: the idle entries (hosts no play has touched yet, built
/// once), and the last table built, whose entries the next one reuses when their inputs are
/// the same. Anything that changes the inventory must call [`invalidate`](Self::invalidate).
#[derive(Debug, Default)]
pub struct Cache {
    /// Shared with the caches of a free play's lanes (`fork`).
    idle: Arc<OnceLock<Arc<Table>>>,
    last: Option<Arc<Table>>,
    /// What the entries above were built with.
    ctx: Option<Arc<EntryCtx>>,
    /// The run's settings as variables, made once (shared by the lanes' caches).
    run: Arc<OnceLock<Arc<Map<String, Value>>>>,
}

impl Cache {
    /// Forget everything: the inventory changed (hosts, groups or their variables).
    pub fn invalidate(&mut self) {
        self.idle = Arc::default();
        self.last = None;
    }

    /// A cache for a free play's lane: the same idle entries, its own last table.
    pub fn fork(&self) -> Cache {
        Cache {
            idle: self.idle.clone(),
            last: self.last.clone(),
            ctx: self.ctx.clone(),
            run: self.run.clone(),
        }
    }

    /// The run's settings as variables (`magic::run_vars`), the same map for the whole run.
    pub fn run_vars(&self, cfg: &Config) -> Arc<Map<String, Value>> {
        self.run.get_or_init(|| Arc::new(run_vars(cfg))).clone()
    }

    fn idle(&self, inventory: &Inventory, ctx: &Arc<EntryCtx>) -> &Arc<Table> {
        self.idle.get_or_init(|| {
            let mut t = Table::default();
            let empty = Arc::new(Map::new());
            // In the order ansible-core's `hostvars` has them: the order hosts appeared in.
            for n in inventory.host_names() {
                let inv = Arc::new(inventory.host_vars(&n));
                let h = HostVars {
                    name: &n,
                    inv_vars: &inv,
                    facts: &empty,
                    host_vars: &empty,
                    host_trust: &empty,
                    included_vars: &empty,
                };
                t.push(Arc::new(Entry::new(&h, ctx)));
            }
            for n in ["localhost", "127.0.0.1", "::1"] {
                if inventory.is_implicit_localhost(n) {
                    let inv = Arc::new(inventory.host_vars(n));
                    let h = HostVars {
                        name: n,
                        inv_vars: &inv,
                        facts: &empty,
                        host_vars: &empty,
                        host_trust: &empty,
                        included_vars: &empty,
                    };
                    t.implicit.push(Arc::new(Entry::new(&h, ctx)));
                }
            }
            Arc::new(t)
        })
    }

    /// `hostvars` now: the idle entries, then `peers` (a free lane's other hosts as of its
    /// start), then the hosts this run works on, each entry reused from the last table when
    /// its inputs are the same. The same table as last time when nothing changed. Entries
    /// built with another `ctx` (other groups, `-e`...) are made again.
    pub fn table<'a>(
        &mut self,
        hosts: impl IntoIterator<Item = HostVars<'a>>,
        peers: Option<&Arc<Table>>,
        inventory: &Inventory,
        ctx: EntryCtx,
    ) -> Arc<Table> {
        let ctx = match &self.ctx {
            Some(c) if c.same(&ctx) => c.clone(),
            _ => {
                self.invalidate();
                let c = Arc::new(ctx);
                self.ctx = Some(c.clone());
                c
            }
        };
        let idle = self.idle(inventory, &ctx).clone();
        let mut t = Table {
            order: idle.order.clone(),
            index: idle.index.clone(),
            implicit: idle.implicit.clone(),
        };
        if let Some(p) = peers {
            for e in &p.order {
                t.push(e.clone());
            }
        }
        for h in hosts {
            let reused = self
                .last
                .as_ref()
                .and_then(|l| l.get(h.name))
                .filter(|e| e.same_inputs(&h))
                .cloned();
            t.push(reused.unwrap_or_else(|| Arc::new(Entry::new(&h, &ctx))));
        }
        if let Some(last) = &self.last {
            let same = last.order.len() == t.order.len()
                && last
                    .order
                    .iter()
                    .zip(&t.order)
                    .all(|(a, b)| Arc::ptr_eq(a, b));
            if same {
                return last.clone();
            }
        }
        let t = Arc::new(t);
        self.last = Some(t.clone());
        t
    }
}

/// A table as the template object every scope shares.
pub fn object(t: &Arc<Table>) -> minijinja::Value {
    minijinja::Value::from_dyn_object(t.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn inventory() -> Inventory {
        let text = "[web]\nw1 app=shop db=\"{{ app }}_db\"\nw2 app=blog\n";
        Inventory::parse_text(Path::new("hosts"), text, false).unwrap()
    }

    struct Host {
        name: String,
        inv: Arc<Map<String, Value>>,
        facts: Arc<Map<String, Value>>,
        set: Arc<Map<String, Value>>,
        no_trust: Arc<Map<String, Value>>,
    }

    impl Host {
        fn new(inv: &Inventory, name: &str) -> Host {
            Host {
                name: name.into(),
                inv: Arc::new(inv.host_vars(name)),
                facts: Arc::default(),
                set: Arc::default(),
                no_trust: Arc::default(),
            }
        }

        fn vars(&self) -> HostVars<'_> {
            HostVars {
                name: &self.name,
                inv_vars: &self.inv,
                facts: &self.facts,
                host_vars: &self.set,
                host_trust: &self.no_trust,
                included_vars: &self.set,
            }
        }
    }

    fn ctx(templar: &Arc<Templar>, extra: &Arc<Map<String, Value>>) -> EntryCtx {
        EntryCtx {
            templar: templar.clone(),
            extra_vars: extra.clone(),
            run: Arc::default(),
            groups: minijinja::Value::from(()),
            group_names: Arc::default(),
            playbook_dir: minijinja::Value::from("."),
        }
    }

    fn read(t: &Arc<Table>, expr: &str) -> Value {
        let templar = Templar::new();
        let mut m = std::collections::BTreeMap::new();
        m.insert("hostvars", object(t));
        let ctx = minijinja::Value::from_serialize(&m);
        templar
            .render_str(&format!("{{{{ {expr} }}}}"), &ctx)
            .unwrap()
    }

    #[test]
    fn entries_render_in_their_own_host_and_are_reused_until_an_input_changes() {
        let inv = inventory();
        let templar = Arc::new(Templar::new());
        let extra = Arc::new(Map::new());
        let c = ctx(&templar, &extra);
        let mut cache = Cache::default();
        let mut w1 = Host::new(&inv, "w1");
        let t1 = cache.table([w1.vars()], None, &inv, c.clone());
        assert_eq!(read(&t1, "hostvars.w1.db"), json!("shop_db"));
        assert_eq!(read(&t1, "hostvars.w2.app"), json!("blog"));
        assert_eq!(read(&t1, "hostvars | list"), json!(["w1", "w2"]));
        // The table answers as the plain map it replaces.
        for (expr, want) in [
            ("hostvars.keys() | list", json!(["w1", "w2"])),
            ("'w2' in hostvars", json!(true)),
            ("'w3' in hostvars", json!(false)),
            ("hostvars | length", json!(2)),
            ("hostvars['w1']['app']", json!("shop")),
            (
                "hostvars | dict2items | map(attribute='key') | list",
                json!(["w1", "w2"]),
            ),
            ("(hostvars | to_json | from_json).w1.db", json!("shop_db")),
            ("hostvars.w3 is defined", json!(false)),
        ] {
            assert_eq!(read(&t1, expr), want, "{expr}");
        }
        // Nothing changed: the very same table, not a copy.
        let t2 = cache.table([w1.vars()], None, &inv, c.clone());
        assert!(Arc::ptr_eq(&t1, &t2));
        // A register on w1 (copy-on-write, as the engine does it) gives w1 a new entry and
        // keeps w2's.
        Arc::make_mut(&mut w1.set).insert("reg".into(), json!({"rc": 0}));
        let t3 = cache.table([w1.vars()], None, &inv, c.clone());
        assert!(!Arc::ptr_eq(&t1, &t3));
        assert!(Arc::ptr_eq(t1.get("w2").unwrap(), t3.get("w2").unwrap()));
        assert_eq!(read(&t3, "hostvars.w1.reg.rc"), json!(0));
        assert_eq!(read(&t1, "hostvars.w1.reg is defined"), json!(false));
    }

    #[test]
    fn invalidate_forgets_the_idle_entries() {
        let inv = inventory();
        let templar = Arc::new(Templar::new());
        let extra = Arc::new(Map::new());
        let c = ctx(&templar, &extra);
        let mut cache = Cache::default();
        let none: [HostVars<'_>; 0] = [];
        let t1 = cache.table(none, None, &inv, c.clone());
        let bigger = Inventory::parse_text(
            Path::new("hosts"),
            "[web]\nw1 app=shop\nw2 app=blog\nw3 app=wiki\n",
            false,
        )
        .unwrap();
        cache.invalidate();
        let t2 = cache.table([], None, &bigger, c.clone());
        assert!(!Arc::ptr_eq(&t1, &t2));
        assert_eq!(read(&t2, "hostvars.w3.app"), json!("wiki"));
        assert_eq!(read(&t2, "hostvars.w1.app"), json!("shop"));
    }
}
