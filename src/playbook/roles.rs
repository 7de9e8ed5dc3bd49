//! Roles: the search path, `meta/main.yml` dependencies and de-duplication, and a role's
//! directories (`tasks/`, `handlers/`, `defaults/`, `vars/`) expanded into steps for the loader.

use super::load::{
    bool_of, check_var_name, dir_of, joined, load_vars_file, string_of, vars_of, Inherited, Loader,
    RoleCtx, RoleFrom, Step, INHERITED_KEYS, TASK_KEYS_NOT_YET,
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
    /// `roles:`, dependencies and `import_role`: the role's defaults and vars are visible to
    /// the whole play (Ansible's roles are not private); `include_role`'s are its own.
    pub export: bool,
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

impl Loader<'_> {
    /// One entry of `roles:`: a name, or a mapping with `role:` and keywords; other keys are
    /// role parameters, as in Ansible.
    pub(crate) fn roles_entry(
        &mut self,
        entry: &Node,
        base: &Inherited,
    ) -> Result<Vec<Step>, Diagnostic> {
        match &entry.kind {
            Kind::Str(_) => self.role(
                entry,
                Map::new(),
                base,
                &RoleOpts {
                    dedupe: true,
                    export: true,
                    ..RoleOpts::default()
                },
            ),
            Kind::Map(entries) => {
                let name = entry
                    .get("role")
                    .or(entry.get("name"))
                    .ok_or_else(|| entry.err("a role entry needs `role: <name>`"))?;
                let mut params = match entry.get("vars") {
                    Some(v) => vars_of(v, "`vars`")?,
                    None => Map::new(),
                };
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
                    check_var_name(k, kpos)?;
                    params.insert(k.clone(), v.to_json());
                }
                let mut inner = base.with_keywords(entry)?;
                inner.vars = base.vars.clone();
                self.role(
                    name,
                    params,
                    &inner,
                    &RoleOpts {
                        dedupe: true,
                        export: true,
                        ..RoleOpts::default()
                    },
                )
            }
            _ => Err(entry.err(format!(
                "a role entry must be a name or a mapping, found {}",
                entry.type_name()
            ))),
        }
    }

    /// The directories searched for a role, in order.
    fn role_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = vec![joined(self.play_dir, "roles")];
        dirs.extend(self.roles_path.iter().cloned());
        dirs.push(self.play_dir.to_path_buf());
        dirs
    }

    /// Expand a role: its dependencies, then its tasks; its handlers go to the play.
    pub(crate) fn role(
        &mut self,
        name_node: &Node,
        params: Map<String, Value>,
        inh: &Inherited,
        opts: &RoleOpts,
    ) -> Result<Vec<Step>, Diagnostic> {
        let name = string_of(name_node, "role")?;
        if crate::templating::Templar::is_template(&name) {
            return Err(
                name_node.err("role names with variables are not supported by fixpoint yet")
            );
        }
        let dirs = self.role_dirs();
        let path = dirs
            .iter()
            .map(|d| joined(d, &name))
            .find(|p| p.is_dir())
            .ok_or_else(|| {
                name_node
                    .err(format!(
                        "role `{name}` not found; looked in {}",
                        dirs.iter()
                            .map(|d| d.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                    .help("put the role in roles/ beside the playbook, or pass --roles-path")
            })?;
        let canon = std::fs::canonicalize(&path).unwrap_or(path.clone());
        if self.stack.contains(&canon) {
            return Err(name_node.err(format!("role `{name}` depends on itself")));
        }
        let meta = find_yaml(&path.join("meta"), "main")
            .map(|m| yaml::load_file(&m))
            .transpose()?;
        let allow_duplicates = match meta.as_ref().and_then(|m| m.get("allow_duplicates")) {
            Some(n) => bool_of(n, "allow_duplicates")?,
            None => false,
        };
        if opts.dedupe && !allow_duplicates {
            let key = (canon.clone(), params.clone());
            if self.seen_roles.contains(&key) {
                return Ok(Vec::new());
            }
            self.seen_roles.push(key);
        }
        self.stack.push(canon.clone());
        let r = self.role_body(&name, &path, name_node, params, inh, opts, meta.as_ref());
        self.stack.pop();
        r
    }

    #[allow(clippy::too_many_arguments)]
    fn role_body(
        &mut self,
        name: &str,
        path: &Path,
        name_node: &Node,
        params: Map<String, Value>,
        inh: &Inherited,
        opts: &RoleOpts,
        meta: Option<&Node>,
    ) -> Result<Vec<Step>, Diagnostic> {
        let mut steps = Vec::new();
        if let Some(deps) = meta.and_then(|m| m.get("dependencies")) {
            let list = match &deps.kind {
                Kind::Seq(items) => items.as_slice(),
                Kind::Null => &[],
                _ => return Err(deps.err("`dependencies` must be a list of roles")),
            };
            // A dependency inherits the conditions and tags of the role that needs it.
            let mut dep_inh = inh.clone();
            dep_inh.role = None;
            for d in list {
                steps.extend(self.roles_entry(d, &dep_inh)?);
            }
        }
        let file_in = |sub: &str, from: &Option<String>| -> Result<Option<PathBuf>, Diagnostic> {
            let stem = from.as_deref().unwrap_or("main");
            let stem = stem.trim_end_matches(".yml").trim_end_matches(".yaml");
            match find_yaml(&path.join(sub), stem) {
                Some(p) => Ok(Some(p)),
                None if from.is_some() => {
                    Err(name_node.err(format!("role `{name}` has no {sub}/{stem}.yml")))
                }
                None => Ok(None),
            }
        };
        let vars_in = |f: Option<PathBuf>| -> Result<Map<String, Value>, Diagnostic> {
            match f {
                Some(f) => load_vars_file(&f, &name_node.pos),
                None => Ok(Map::new()),
            }
        };
        let ctx = Arc::new(RoleCtx {
            name: name.to_string(),
            path: path.to_path_buf(),
            defaults: Arc::new(vars_in(file_in("defaults", &opts.from.defaults)?)?),
            vars: Arc::new(vars_in(file_in("vars", &opts.from.vars)?)?),
            params: Arc::new(params),
        });
        if opts.export {
            self.exported_roles.push(ctx.clone());
        }
        let mut inner = inh.clone();
        inner.role = Some(ctx);
        if let Some(f) = file_in("tasks", &opts.from.tasks)? {
            steps.extend(self.task_file(&f, &name_node.pos, &inner)?);
        }
        // Each handlers file joins the play once, however often its role runs.
        if let Some(f) = file_in("handlers", &opts.from.handlers)? {
            let canon = std::fs::canonicalize(&f).unwrap_or(f.clone());
            if !self.handler_files.contains(&canon) {
                self.handler_files.push(canon);
                let node = yaml::load_file(&f)?;
                let mut handler_inh = inner.clone();
                handler_inh.when.clear();
                for s in self.steps_of(&node, "handlers", true, &handler_inh, &dir_of(&f))? {
                    if let Step::Task(t) = s {
                        self.role_handlers.push(*t);
                    }
                }
            }
        }
        Ok(steps)
    }
}
