//! The playbook's own Jinja plugins: `filter_plugins/`, `test_plugins/` and `lookup_plugins/`
//! beside each playbook and in every role loaded, and a collection's plugins named
//! `ns.coll.name`. Ansible adds a role's plugin directories when it loads the role, for the
//! whole run, as it does its `library/` (`library`). They run in the bridge (`bridge`), found
//! and called by ansible-core's own plugin loaders, so they behave as under ansible-playbook.
//!
//! Python starts only for a playbook that has such plugins (their names are listed when the
//! playbooks are loaded, so `validate` knows them) or names a collection's.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value as Json};

use super::bridge::Bridge;
use crate::template::{
    is_collection_name, set_foreign, Foreign, PluginCall, PluginFailure, PluginKind as Kind,
};

/// The run's plugins.
pub struct Plugins {
    /// The playbooks' directories, then the roles', in load order.
    dirs: Vec<PathBuf>,
    play_dirs: Vec<PathBuf>,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// `None` until first needed; `Err` when it could not start (said once, then every use
    /// of a plugin fails as not found).
    bridge: Option<Result<Bridge, String>>,
    /// The filters and tests of the playbook's own directories.
    local: BTreeMap<Kind, Vec<String>>,
    /// Collection plugins asked about (by `validate`), and whether they exist.
    resolved: BTreeMap<(Kind, String), bool>,
}

thread_local! {
    /// Set while this thread talks to the bridge: a lookup reading a variable whose template
    /// uses a plugin would otherwise wait for itself.
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// Find the plugins of these playbooks and of the roles loaded so far and make them the run's.
/// Returns a warning when the playbook has plugins that cannot run here.
pub fn install(play_dirs: &[PathBuf]) -> Option<String> {
    let mut dirs: Vec<PathBuf> = play_dirs.to_vec();
    for d in super::library::roles() {
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    let plugins = Plugins {
        dirs,
        play_dirs: play_dirs.to_vec(),
        inner: Mutex::new(Inner::default()),
    };
    let has_jinja_plugins = plugins.dirs.iter().any(|d| {
        ["filter_plugins", "test_plugins"]
            .iter()
            .any(|sub| has_python(&d.join(sub)))
    });
    let mut warning = None;
    if has_jinja_plugins {
        let mut inner = plugins.lock();
        if let Err(e) = plugins.started(&mut inner) {
            warning = Some(e.clone());
        }
    }
    set_foreign(Arc::new(plugins));
    warning
}

fn has_python(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.path().extension().is_some_and(|x| x == "py"))
    })
}

impl Plugins {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The bridge, started (and its filter and test names read) on first use.
    fn started<'a>(&self, inner: &'a mut Inner) -> Result<&'a mut Bridge, &'a String> {
        if inner.bridge.is_none() {
            // Where collections are is asked of the Ansible installation only now: a run
            // without plugins never starts Python.
            let mut collections = Vec::new();
            for p in &self.play_dirs {
                for r in super::locate::roots(p) {
                    if !collections.contains(&r) {
                        collections.push(r);
                    }
                }
            }
            let started = Bridge::start(&self.dirs, &collections).map(|(b, names)| {
                for kind in [Kind::Filter, Kind::Test] {
                    let list = names[kind.word()]
                        .as_array()
                        .map(|l| l.iter().filter_map(|n| n.as_str().map(String::from)))
                        .into_iter()
                        .flatten()
                        .collect();
                    inner.local.insert(kind, list);
                }
                b
            });
            inner.bridge = Some(started);
        }
        match inner.bridge.as_mut() {
            Some(Ok(b)) => Ok(b),
            Some(Err(e)) => Err(e),
            None => unreachable!("set above"),
        }
    }

    /// A lookup of the playbook's own `lookup_plugins/` (found by its file, as Ansible does).
    fn local_lookup(&self, name: &str) -> bool {
        !name.is_empty()
            && !name.contains(['.', '/'])
            && self.dirs.iter().any(|d| {
                d.join("lookup_plugins")
                    .join(format!("{name}.py"))
                    .is_file()
            })
    }
}

impl Foreign for Plugins {
    fn names(&self, kind: Kind) -> Vec<String> {
        self.lock().local.get(&kind).cloned().unwrap_or_default()
    }

    fn knows(&self, kind: Kind, name: &str) -> bool {
        let name = name.strip_prefix("ansible.legacy.").unwrap_or(name);
        if kind == Kind::Lookup && self.local_lookup(name) {
            return true;
        }
        if !is_collection_name(name) {
            return self
                .lock()
                .local
                .get(&kind)
                .is_some_and(|l| l.iter().any(|n| n == name));
        }
        if BUSY.get() {
            return false;
        }
        let mut inner = self.lock();
        let key = (kind, name.to_string());
        if let Some(found) = inner.resolved.get(&key) {
            return *found;
        }
        let found = match self.started(&mut inner) {
            Ok(b) => {
                BUSY.set(true);
                let r = b.ask(&json!({"op": "has", "kind": kind.word(), "name": name}));
                BUSY.set(false);
                r.ok().and_then(|r| r.get("ok").and_then(Json::as_bool)) == Some(true)
            }
            Err(_) => false,
        };
        inner.resolved.insert(key, found);
        found
    }

    fn call(&self, call: PluginCall<'_>) -> Result<Json, PluginFailure> {
        if BUSY.get() {
            return Err(PluginFailure::Run(
                "a variable this plugin read needs a plugin too; fixpoint cannot run plugins \
                 inside each other"
                    .into(),
            ));
        }
        let mut inner = self.lock();
        let bridge = self
            .started(&mut inner)
            .map_err(|e| PluginFailure::Load(e.clone()))?;
        BUSY.set(true);
        let out = bridge.call(call);
        BUSY.set(false);
        out
    }
}
