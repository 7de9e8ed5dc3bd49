//! Variable precedence: which layers a host's scope has, and in what order they win.

use super::magic::play_magic;
use super::{HostVars, Layer, PlayVars, Scope, VarSrc};
use crate::config::Config;
use crate::template::Templar;
use serde_json::{Map, Value};
use std::sync::{Arc, Mutex, Weak};

/// The variable scope on a host, in Ansible's precedence order (later wins): role
/// defaults, inventory, facts, play vars, vars_files, role vars (then the role entry's
/// `vars:`), block and task vars,
/// include_vars, set_fact and register, role parameters, include parameters, extra vars.
pub fn host_scope(
    cfg: &Config,
    templar: &Arc<Templar>,
    ctx: &PlayVars<'_>,
    src: VarSrc<'_>,
    h: &HostVars<'_>,
) -> Arc<Scope> {
    let magic = play_magic(cfg, ctx, &src, h.name);
    // Every layer shares its map with where it comes from: building a scope copies no
    // variables (it runs for every task on every host).
    let maps = VarMaps::new(cfg, *ctx, src, *h);
    let mut layers = Vec::with_capacity(maps.0.len() + magic.len() + 1);
    // ansible-core adds the connection it uses, and the remote user when one is known, to a
    // task's variables when no variable names them (`PlayContext.update_vars`): under
    // everything else, so a variable still wins. The play's keywords, else `-c` / `-u`.
    let cli = &cfg.play_defaults;
    let connection = maps.defining_map("ansible_connection").is_none().then(|| {
        ctx.play
            .conn
            .connection
            .as_deref()
            .or(cli.connection.as_deref())
    });
    let user = match maps.defining_map("ansible_user") {
        None => ctx
            .play
            .conn
            .remote_user
            .as_deref()
            .or(cli.remote_user.as_deref()),
        Some(_) => None,
    };
    if let Some(layer) = connection_layer(connection, user) {
        layers.push(layer);
    }
    // ansible-core gives a task the address it connects to as `ansible_host` when no variable
    // sets it (`PlayContext.update_vars`): the inventory name. Only the task sees it; the
    // connection reads the variables the maps define (`connection::spec`).
    if maps.defining_map("ansible_host").is_none()
        && maps.defining_map("ansible_ssh_host").is_none()
    {
        let mut m = Map::with_capacity(1);
        m.insert("ansible_host".into(), Value::from(h.name));
        layers.push(Layer::data(m));
    }
    // `ansible_facts` is a mapping on every host, empty before facts are gathered (or after
    // `meta: clear_facts`), as in ansible-core.
    if maps.defining_map("ansible_facts").is_none() {
        layers.push(Layer::shared(no_facts(), false));
    }
    layers.extend(maps.0.iter().map(|&(vars, templated)| {
        let layer = Layer::shared(vars.clone(), templated);
        if Arc::ptr_eq(vars, h.host_vars) {
            layer.with_vouched(h.host_trust)
        } else {
            layer
        }
    }));
    layers.extend(magic);
    Scope::new(templar.clone(), layers)
}

/// `ansible_facts: {}`, shared.
pub(super) fn no_facts() -> Arc<Map<String, Value>> {
    static NONE: std::sync::OnceLock<Arc<Map<String, Value>>> = std::sync::OnceLock::new();
    NONE.get_or_init(|| {
        let mut m = Map::new();
        m.insert("ansible_facts".into(), Value::Object(Map::new()));
        Arc::new(m)
    })
    .clone()
}

/// `ansible_connection` for a host no variable gives one (`connection` is `Some`): the given
/// connection, or `ssh`; and `ansible_user` when a remote user is given (the `ssh`-only layer,
/// by far the most common, is built once and shared).
fn connection_layer(connection: Option<Option<&str>>, user: Option<&str>) -> Option<Layer> {
    static SSH: std::sync::OnceLock<Arc<Map<String, Value>>> = std::sync::OnceLock::new();
    let mut m = Map::new();
    match (connection, user) {
        (None, None) => return None,
        (Some(None), None) => {
            let ssh = SSH.get_or_init(|| {
                let mut m = Map::new();
                m.insert("ansible_connection".into(), Value::from("ssh"));
                Arc::new(m)
            });
            return Some(Layer::shared(ssh.clone(), false));
        }
        (connection, user) => {
            if let Some(c) = connection {
                m.insert("ansible_connection".into(), Value::from(c.unwrap_or("ssh")));
            }
            if let Some(u) = user {
                m.insert("ansible_user".into(), Value::from(u));
            }
        }
    }
    // A keyword may be a template, rendered when read, as the engine renders it.
    Some(Layer::templates(m))
}

/// The variable maps a host's scope is made of, bottom (lowest precedence) to top, each with
/// whether it holds templates; the magic variables aside (none of them is a map a task or the
/// inventory writes). Borrowed, so it costs no copy: what asks only where a variable comes from
/// (`connection::spec::fixed_in`) needs no scope built.
pub struct VarMaps<'a>(Vec<(&'a Arc<Map<String, Value>>, bool)>);

impl<'a> VarMaps<'a> {
    pub fn new(cfg: &'a Config, ctx: PlayVars<'a>, src: VarSrc<'a>, h: HostVars<'a>) -> Self {
        let play = ctx.play;
        let mut maps = Vec::with_capacity(16);
        maps.push((&play.role_defaults, true));
        maps.push((&ctx.public_roles.defaults, true));
        // A task's own role comes on top of the play's roles at each role level.
        if let Some(r) = src.role {
            maps.push((&r.defaults, true));
        }
        maps.extend([
            (h.inv_vars, true),
            (h.facts, false),
            (&play.vars, true),
            (&play.vars_from_files, true),
            (ctx.files_vars, true),
            (&play.role_vars, true),
            (&ctx.public_roles.vars, true),
        ]);
        if let Some(r) = src.role {
            maps.push((&r.inherited, true));
            maps.push((&r.vars, true));
            maps.push((&r.entry_vars, true));
        }
        if let Some(v) = src.vars {
            maps.push((v, true));
        }
        maps.push((h.included_vars, true));
        maps.push((h.host_vars, false));
        if let Some(r) = src.role {
            maps.push((&r.params, true));
        }
        maps.push((ctx.include_params, false));
        maps.push((&cfg.extra_vars, true));
        VarMaps(maps)
    }

    /// The map `name` is taken from (the topmost that sets it), as `Scope::defining_map`.
    pub fn defining_map(&self, name: &str) -> Option<&'a Arc<Map<String, Value>>> {
        self.0
            .iter()
            .rev()
            .find(|(m, _)| m.contains_key(name))
            .map(|&(m, _)| m)
    }
}

/// An answer that depends on a host's variable maps alone (which map defines what, with which
/// value), kept with the maps it was computed from so it is computed again only when one of
/// them changed. The maps are held weakly: a map changed with `Arc::make_mut` while a `Weak`
/// points at it moves to a new allocation (and a `Weak` keeps the old one from being reused),
/// so the same addresses mean the same contents, and the memo neither keeps a map alive nor
/// makes `make_mut` copy one. Empty maps are left out of the key: they define nothing, so they
/// cannot change the answer, and a task's own (often empty) `vars:` does not defeat the memo.
#[derive(Default)]
pub struct MapsMemo(Mutex<Option<MemoEntry>>);

/// The non-empty maps, bottom to top, each with whether it is one of the memo's `marked` maps
/// (the answer may treat them apart), and the answer.
type MemoEntry = (Vec<(Weak<Map<String, Value>>, bool)>, bool);

impl MapsMemo {
    /// The memoised answer for `maps`, or `compute()` when any non-empty map, or which of them
    /// are `marked`, differs from the last call.
    pub fn get_or(
        &self,
        maps: &VarMaps<'_>,
        marked: &[&Arc<Map<String, Value>>],
        compute: impl FnOnce() -> bool,
    ) -> bool {
        let current = || {
            maps.0
                .iter()
                .map(|&(m, _)| m)
                .filter(|m| !m.is_empty())
                .map(|m| (m, marked.iter().any(|f| Arc::ptr_eq(f, m))))
        };
        let mut memo = self.0.lock().expect("maps memo");
        if let Some((key, answer)) = &*memo {
            let mut now = current();
            let same = key.iter().all(|(w, marked)| {
                now.next()
                    .is_some_and(|(m, f)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(m)) && f == *marked)
            }) && now.next().is_none();
            if same {
                return *answer;
            }
        }
        let answer = compute();
        *memo = Some((
            current().map(|(m, f)| (Arc::downgrade(m), f)).collect(),
            answer,
        ));
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::playbook::{Play, RoleCtx};
    use crate::vars::PlayObjects;
    use serde_json::json;

    fn map(v: Value) -> Arc<Map<String, Value>> {
        Arc::new(v.as_object().cloned().unwrap_or_default())
    }

    /// The memo answers again only when a non-empty map, or which of them is marked, changed:
    /// a map changed in place by `make_mut` counts as changed, an empty map added does not.
    #[test]
    fn maps_memo_computes_again_when_a_map_changes() {
        let memo = MapsMemo::default();
        let calls = std::cell::Cell::new(0);
        let ask = |maps: &VarMaps<'_>, marked: &[&Arc<Map<String, Value>>]| {
            memo.get_or(maps, marked, || {
                calls.set(calls.get() + 1);
                true
            })
        };
        let inv = map(json!({"ansible_user": "u"}));
        let mut facts = map(json!({"f": 1}));
        let empty = map(json!({}));
        ask(&VarMaps(vec![(&inv, true), (&facts, false)]), &[&inv]);
        ask(&VarMaps(vec![(&inv, true), (&facts, false)]), &[&inv]);
        ask(
            &VarMaps(vec![(&inv, true), (&empty, true), (&facts, false)]),
            &[&inv],
        );
        assert_eq!(calls.get(), 1, "same maps: answered from the memo");
        Arc::make_mut(&mut facts).insert("ansible_user".into(), json!("fact"));
        ask(&VarMaps(vec![(&inv, true), (&facts, false)]), &[&inv]);
        assert_eq!(calls.get(), 2, "a map changed in place: computed again");
        ask(&VarMaps(vec![(&inv, true), (&facts, false)]), &[]);
        assert_eq!(calls.get(), 3, "another map marked: computed again");
        ask(&VarMaps(vec![(&facts, false)]), &[]);
        assert_eq!(calls.get(), 4, "a map fewer: computed again");
    }

    /// The borrowed maps answer "where does this variable come from" as the scope built from
    /// them does, so the connection spec's check may skip building the scope.
    #[test]
    fn var_maps_find_the_map_the_scope_takes_a_variable_from() {
        use clap::Parser;
        let crate::cli::Command::Apply(args) = crate::cli::Cli::parse_from([
            "fixpoint",
            "apply",
            "-e",
            "ansible_port=2200",
            "site.yml",
        ])
        .command
        else {
            unreachable!("parsed an apply command")
        };
        let cfg = Config::from_run_args(args, false).unwrap();
        let mut play = Play::bare("all", false);
        play.vars = map(json!({"ansible_user": "play", "p": 1}));
        let objects = PlayObjects::new(&Default::default(), &play, &[], &[]);
        let files = map(json!({"ansible_host": "files"}));
        let include = map(json!({"inc": 1}));
        let ctx = PlayVars {
            play: &play,
            objects: &objects,
            files_vars: &files,
            include_params: &include,
            public_roles: &Default::default(),
        };
        let role = RoleCtx {
            name: "r".into(),
            path: "roles/r".into(),
            defaults: map(json!({"ansible_user": "default", "d": 1})),
            inherited: map(json!({"rv": 0, "iv": 1})),
            vars: map(json!({"rv": 1, "ev": 1})),
            entry_vars: map(json!({"ev": 2, "ansible_user": "entry"})),
            params: map(json!({"ansible_become_user": "param"})),
            entry_params: false,
            dedup: None,
        };
        let task_vars = map(json!({"ansible_user": "task"}));
        let src = VarSrc {
            role: Some(&role),
            vars: Some(&task_vars),
            check_mode: None,
            task_file: None,
        };
        let inv = map(json!({"ansible_host": "inv", "fixpoint_state_dir": "/s"}));
        let facts = map(json!({"f": 1}));
        let set = map(json!({"ansible_host": "set_fact"}));
        let included = map(json!({"i": 1}));
        let no_trust = map(json!({}));
        let h = HostVars {
            name: "h",
            inv_vars: &inv,
            facts: &facts,
            host_vars: &set,
            host_trust: &no_trust,
            included_vars: &included,
        };
        let templar = Arc::new(Templar::new());
        let scope = host_scope(&cfg, &templar, &ctx, src, &h);
        let maps = VarMaps::new(&cfg, ctx, src, h);
        for name in [
            "ansible_user",
            "ansible_host",
            "ansible_port",
            "ansible_become_user",
            "fixpoint_state_dir",
            "p",
            "d",
            "rv",
            "ev",
            "iv",
            "f",
            "i",
            "inc",
            "missing",
            "groups",
        ] {
            let want = scope.defining_map(name).map(Arc::as_ptr);
            assert_eq!(maps.defining_map(name).map(Arc::as_ptr), want, "{name}");
        }
        assert!(Arc::ptr_eq(
            maps.defining_map("ansible_user").unwrap(),
            &task_vars
        ));
        assert!(Arc::ptr_eq(
            maps.defining_map("ansible_host").unwrap(),
            &set
        ));
        assert!(Arc::ptr_eq(
            maps.defining_map("ansible_port").unwrap(),
            &cfg.extra_vars
        ));
        // A role's vars/main.yml win over what it inherits as a dependency, its entry's `vars:`
        // over both, and task vars over all.
        assert!(Arc::ptr_eq(maps.defining_map("rv").unwrap(), &role.vars));
        assert!(Arc::ptr_eq(
            maps.defining_map("iv").unwrap(),
            &role.inherited
        ));
        assert!(Arc::ptr_eq(
            maps.defining_map("ev").unwrap(),
            &role.entry_vars
        ));
    }
}
