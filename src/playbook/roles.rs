//! Roles: the search path, `meta/main.yml` (dependencies, `allow_duplicates`), a role's
//! `defaults/` and `vars/`, and which of its files hold its tasks and handlers.
//!
//! This file finds and reads a role; it does not parse task lists. The parser (`includes`)
//! expands a role's dependencies, tasks and handlers with what is found here, so nothing here
//! calls back into it.

use super::ast::{Inherited, RoleCtx, RoleFrom};
use super::files::{joined, load_vars_file, looked_in};
use super::keywords::{
    bool_of, check_var_name, string_of, vars_of, INHERITED_KEYS, TASK_KEYS_NOT_YET,
};
use crate::diag::Diagnostic;
use crate::yaml::{self, Kind, Node};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `tasks_from` and friends of `import_role` / `include_role`.
#[derive(Default)]
pub(crate) struct RoleOpts {
    pub from: RoleFrom,
    /// Entry of `roles:` or a dependency: de-duplicated as Ansible does.
    pub dedupe: bool,
    /// `import_role`'s `allow_duplicates`, over the role's own (`meta/main.yml`): `false`
    /// de-duplicates the import as a `roles:` entry is.
    pub allow_duplicates: Option<bool>,
    /// `roles:`, dependencies and `import_role`: the role's defaults and vars are visible to
    /// the whole play (Ansible's roles are not private); `include_role`'s are its own.
    pub export: bool,
    /// Which of the play's role-name lists the role joins.
    pub listed: Listed,
    /// A dependency's inherited variables (`RoleCtx::inherited`).
    pub inherited: Arc<Map<String, Value>>,
    /// A role imported or included from another role's tasks: that role's defaults, below its
    /// own (ansible-core's dependency chain).
    pub inherited_defaults: Arc<Map<String, Value>>,
    /// A `roles:` entry's (or dependency's) `when` and `tags` as written: part of the role's
    /// identity (`RoleDedup::id`), as in ansible-core.
    pub entry_keys: Value,
}

/// ansible-core's role deduplication, decided per host at run time: a host passes by, unreported,
/// every step of a role that does not allow duplicates once it completed the same role in the
/// play, where completed means that a task of the role ran there (ok, changed or failed; not
/// skipped, not unreachable). An entry whose tasks were all skipped by its `when` runs again at
/// the next entry; a role that allows duplicates still counts as run for a later one that does
/// not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoleDedup {
    /// The role's identity: its path, parameters, variables and the entry's `when` and
    /// `tags`, hashed (the same in every loader, so a role a run-time include brings in is
    /// known as the one the play ran).
    pub id: u64,
    /// This expansion of the role (unique in the process): a host decides once, at its first
    /// step, whether it passes the whole expansion by.
    pub expansion: u64,
    /// The role does not allow duplicates: hosts that completed it pass it by.
    pub once: bool,
    /// An earlier expansion in the same load had the same identity, or the role was loaded
    /// at run time: hosts may pass it by (when `once`), so a pipelined section does not run
    /// across its edges (`engine::section`), and each host decides at its first step.
    pub repeat: bool,
}

impl RoleDedup {
    /// Hosts may pass this expansion by.
    pub fn may_pass_by(&self) -> bool {
        self.once && self.repeat
    }
}

/// `RoleDedup::id` of a role: its directory, its variables, whether `roles:` (or a dependency)
/// loaded it, and `keys` (see `Loader::role`); mappings hashed whatever their key order, as
/// ansible-core compares them.
pub(crate) fn identity_hash(canon: &Path, vars: &RoleVars, entry: bool, keys: &Value) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    // The path as bytes: a directory name need not be UTF-8.
    let parts = serde_json::json!([
        canon.as_os_str().as_bytes(),
        entry,
        Value::Object(vars.entry.clone()),
        Value::Object(vars.params.clone()),
        keys
    ]);
    value_hash(&parts)
}

/// A hash of `v` in which a mapping's key order does not count.
pub(crate) fn value_hash(v: &Value) -> u64 {
    use std::hash::{Hash, Hasher};
    fn feed(v: &Value, h: &mut std::collections::hash_map::DefaultHasher) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<_> = m.keys().collect();
                keys.sort();
                "{".hash(h);
                for k in keys {
                    k.hash(h);
                    feed(&m[k], h);
                }
                "}".hash(h);
            }
            Value::Array(a) => {
                "[".hash(h);
                a.iter().for_each(|x| feed(x, h));
                "]".hash(h);
            }
            other => other.to_string().hash(h),
        }
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    feed(v, &mut h);
    h.finish()
}

/// A new `RoleDedup::expansion`.
pub(crate) fn next_expansion() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The play's role-name lists (`ansible_play_role_names`, `ansible_dependent_role_names`): a
/// role of `roles:` or `import_role` is the play's, a dependency is dependent; a role included
/// at run time (`include_role`) is in neither (ansible-core adds it when a host runs the
/// include, which fixpoint does not follow).
#[derive(Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listed {
    #[default]
    Neither,
    Play,
    Dependency,
}

/// What one invocation of a role gives it: the `vars:` of a `roles:` entry or `import_role`
/// (below block vars, `RoleCtx::entry_vars`) and the parameters (other keys of a role entry,
/// `include_role`'s `vars:`; above `set_fact`). Both tell one invocation from another, for
/// de-duplication and handlers, as ansible-core's role hash holds both.
#[derive(Default, Clone, PartialEq)]
pub(crate) struct RoleVars {
    pub entry: Map<String, Value>,
    pub params: Map<String, Value>,
}

/// `name`, `name.yml`, `name.yaml` in `dir`.
pub(crate) fn find_yaml(dir: &Path, name: &str) -> Option<PathBuf> {
    [
        dir.join(format!("{name}.yml")),
        dir.join(format!("{name}.yaml")),
        dir.join(name),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

/// One entry of `roles:` (or of a role's `dependencies`), read but not loaded.
pub(crate) struct RoleEntry<'n> {
    /// The node that names the role (for the name and for error positions).
    pub name: &'n Node,
    pub params: Map<String, Value>,
    /// The entry's `vars:`: the role's own variables (`RoleCtx::entry_vars`).
    pub vars: Map<String, Value>,
    /// The keywords around the role's tasks when the entry is a mapping; a bare name keeps
    /// the caller's.
    pub keywords: Option<Inherited>,
}

/// Keywords ansible-core reads on a role entry (its `Role` attributes) that fixpoint does not
/// implement there: refused, because taking them as role parameters (the other keys) would
/// silently change what the role sees (`port: 8080` would override the role's `port` variable).
const ROLE_KEYS_NOT_YET: &[&str] = &["timeout", "debugger", "delegate_facts"];

/// One entry of `roles:`: a name, or a mapping with `role:`, keywords and `vars:` (the role's
/// variables); other keys are role parameters, as in Ansible.
pub(crate) fn read_entry<'n>(
    entry: &'n Node,
    base: &Inherited,
) -> Result<RoleEntry<'n>, Diagnostic> {
    match &entry.kind {
        Kind::Str(_) => Ok(RoleEntry {
            name: entry,
            params: Map::new(),
            vars: Map::new(),
            keywords: None,
        }),
        Kind::Map(entries) => {
            let name = entry
                .get("role")
                .or(entry.get("name"))
                .ok_or_else(|| entry.err("a role entry needs `role: <name>`"))?;
            let vars = match entry.get("vars") {
                Some(v) => vars_of(v, "`vars`")?,
                None => Map::new(),
            };
            let mut params = Map::new();
            for (k, kpos, v) in entries {
                if k == "role" || k == "name" || INHERITED_KEYS.contains(&k.as_str()) {
                    continue;
                }
                if TASK_KEYS_NOT_YET.contains(&k.as_str()) {
                    return Err(Diagnostic::at(
                        kpos,
                        format!("`{k}` is not supported by fixpoint yet"),
                    ));
                }
                if ROLE_KEYS_NOT_YET.contains(&k.as_str()) {
                    return Err(Diagnostic::at(
                        kpos,
                        format!(
                            "`{k}` on a role entry is an Ansible keyword, not a role parameter, \
                             and fixpoint does not support it there yet"
                        ),
                    )
                    .help(format!(
                        "to give the role a variable named `{k}`, put it under the entry's `vars:`"
                    )));
                }
                check_var_name(k, kpos)?;
                params.insert(k.clone(), v.to_json());
            }
            let mut inner = base.with_keywords(entry)?;
            inner.vars = base.vars.clone();
            Ok(RoleEntry {
                name,
                params,
                vars,
                keywords: Some(inner),
            })
        }
        _ => Err(entry.err(format!(
            "a role entry must be a name or a mapping, found {}",
            entry.type_name()
        ))),
    }
}

/// The directories searched for a role, in order.
pub(crate) fn role_dirs(play_dir: &Path, roles_path: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs = vec![joined(play_dir, "roles")];
    dirs.extend(roles_path.iter().cloned());
    dirs.push(play_dir.to_path_buf());
    dirs
}

/// A role found on disk, with its `meta/main.yml` read.
pub(crate) struct Role {
    pub name: String,
    pub path: PathBuf,
    /// The canonical path: what identifies the role for cycles and de-duplication.
    pub canon: PathBuf,
    pub allow_duplicates: bool,
    meta: Option<Node>,
}

/// Find the role `name_node` names in `dirs` and read its meta. `loading`: the task files and
/// roles being loaded, to refuse a role that depends on itself.
pub(crate) fn find_role(
    name_node: &Node,
    dirs: &[PathBuf],
    play_dir: &Path,
    loading: &[PathBuf],
) -> Result<Role, Diagnostic> {
    let name = string_of(name_node, "role")?;
    let path = dirs
        .iter()
        .map(|d| joined(d, &name))
        .find(|p| p.is_dir())
        .or_else(|| collection_role(&name, play_dir))
        .ok_or_else(|| {
            name_node
                .err(format!(
                    "role `{name}` not found; looked in {}",
                    looked_in(dirs)
                ))
                .help(
                    "put the role in roles/ beside the playbook, or pass --roles-path; a \
                     collection's role (`ns.coll.role`) is looked for in the collections \
                     beside the playbook and on ANSIBLE_COLLECTIONS_PATH",
                )
        })?;
    let canon = std::fs::canonicalize(&path).unwrap_or(path.clone());
    if loading.contains(&canon) {
        return Err(name_node.err(format!("role `{name}` depends on itself")));
    }
    // Its `library/` modules are found from now on, for every play (as in Ansible).
    crate::pymod::library::note_role(&path);
    let meta = find_yaml(&path.join("meta"), "main")
        .map(|m| yaml::load_file(&m))
        .transpose()?;
    let allow_duplicates = match meta.as_ref().and_then(|m| m.get("allow_duplicates")) {
        Some(n) => bool_of(n, "allow_duplicates")?,
        None => false,
    };
    Ok(Role {
        name,
        path,
        canon,
        allow_duplicates,
        meta,
    })
}

/// The vars files of a directory, in name order, its subdirectories' among them: files with no
/// extension or `.yml`, `.yaml`, `.json`; hidden files and `~` backups left out.
fn dir_vars_files(dir: &Path) -> Vec<PathBuf> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    names.sort();
    let mut out = Vec::new();
    for p in names {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with('.') || name.ends_with('~') {
            continue;
        }
        let ext = p.extension().map(|e| e.to_string_lossy().into_owned());
        if p.is_dir() && ext.is_none() {
            out.extend(dir_vars_files(&p));
        } else if p.is_file()
            && ext
                .as_deref()
                .is_none_or(|e| ["yml", "yaml", "json"].contains(&e))
        {
            out.push(p);
        }
    }
    out
}

/// A collection's role named by its full name (`ns.coll.role`): `roles/<role>` of the
/// collection, in the collections beside the playbook, then the installation's
/// (`ANSIBLE_COLLECTIONS_PATH`, `~/.ansible/collections`...), as ansible-core searches them.
fn collection_role(name: &str, play_dir: &Path) -> Option<PathBuf> {
    let mut parts = name.split('.');
    let (Some(ns), Some(coll), Some(role), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    crate::pymod::locate::roots(play_dir)
        .into_iter()
        .map(|r| {
            r.join("ansible_collections")
                .join(ns)
                .join(coll)
                .join("roles")
                .join(role)
        })
        .find(|p| p.is_dir())
}

impl Role {
    /// The role entries of `dependencies` in `meta/main.yml`.
    pub(crate) fn dependencies(&self) -> Result<&[Node], Diagnostic> {
        match self.meta.as_ref().and_then(|m| m.get("dependencies")) {
            None => Ok(&[]),
            Some(deps) => match &deps.kind {
                Kind::Seq(items) => Ok(items.as_slice()),
                Kind::Null => Ok(&[]),
                _ => Err(deps.err("`dependencies` must be a list of roles")),
            },
        }
    }

    /// The argument spec of the entry point `entry` (`main`, or `tasks_from` as written), as
    /// ansible-core finds it: `meta/argument_specs.yml` (`.yaml`, `.json`) when there is one,
    /// else `argument_specs` in `meta/main.yml`; the two are not merged.
    pub(crate) fn argument_spec(&self, entry: &str) -> Result<Option<Node>, Diagnostic> {
        let meta = self.path.join("meta");
        let file = ["yml", "yaml", "json"]
            .iter()
            .map(|ext| meta.join(format!("argument_specs.{ext}")))
            .find(|p| p.is_file());
        let loaded;
        let specs = match file {
            Some(f) => {
                loaded = yaml::load_file(&f)?;
                loaded.get("argument_specs")
            }
            None => self.meta.as_ref().and_then(|m| m.get("argument_specs")),
        };
        let Some(spec) = specs.and_then(|s| s.get(entry)) else {
            return Ok(None);
        };
        match &spec.kind {
            Kind::Map(entries) if !entries.is_empty() => Ok(Some(spec.clone())),
            Kind::Map(_) | Kind::Null => Ok(None),
            _ => Err(spec.err(format!(
                "the argument spec `{entry}` must be a mapping (with `options`, \
                 `short_description`...), found {}",
                spec.type_name()
            ))),
        }
    }

    /// The file of `sub/` to read: `main`, or the one a `*_from` option names (which must exist).
    pub(crate) fn file_in(
        &self,
        sub: &str,
        from: &Option<String>,
        name_node: &Node,
    ) -> Result<Option<PathBuf>, Diagnostic> {
        let stem = from.as_deref().unwrap_or("main");
        let stem = stem.trim_end_matches(".yml").trim_end_matches(".yaml");
        match find_yaml(&self.path.join(sub), stem) {
            Some(p) => Ok(Some(p)),
            None if from.is_some() => {
                Err(name_node.err(format!("role `{}` has no {sub}/{stem}.yml", self.name)))
            }
            None => Ok(None),
        }
    }

    /// The role as one invocation sees it: its `defaults/` and `vars/` read, its parameters.
    pub(crate) fn context(
        &self,
        name_node: &Node,
        vars: RoleVars,
        opts: &RoleOpts,
    ) -> Result<RoleCtx, Diagnostic> {
        let from = &opts.from;
        let vars_in = |f: Option<PathBuf>| -> Result<Map<String, Value>, Diagnostic> {
            match f {
                Some(f) => load_vars_file(&f, &name_node.pos),
                None => Ok(Map::new()),
            }
        };
        // `defaults/main/` (or `vars/<name>/`) may be a directory: every vars file in it, in
        // name order, the later ones over the earlier, as ansible-core reads it.
        let vars_of = |sub: &str, from: &Option<String>| {
            let dir = self.path.join(sub).join(from.as_deref().unwrap_or("main"));
            if !dir.is_dir() {
                return vars_in(self.file_in(sub, from, name_node)?);
            }
            let mut out = Map::new();
            for f in dir_vars_files(&dir) {
                out.extend(load_vars_file(&f, &name_node.pos)?);
            }
            Ok(out)
        };
        let mut defaults = (*opts.inherited_defaults).clone();
        defaults.extend(vars_of("defaults", &from.defaults)?);
        let role_vars = vars_of("vars", &from.vars)?;
        Ok(RoleCtx {
            name: self.name.clone(),
            path: self.path.clone(),
            defaults: Arc::new(defaults),
            inherited: opts.inherited.clone(),
            vars: Arc::new(role_vars),
            entry_vars: Arc::new(vars.entry),
            params: Arc::new(vars.params),
            entry_params: opts.dedupe,
            dedup: None,
        })
    }
}
