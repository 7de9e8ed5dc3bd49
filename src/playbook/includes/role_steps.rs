//! Expanding a role into steps for the loader: a `roles:` entry or dependency, an
//! `import_role` / `include_role`, or a role named at run time; its dependencies first, the
//! argument spec check ansible-core puts in front, its tasks, and its handlers for the play.

use super::*;

impl Loader<'_> {
    /// Load a role named at run time (`include_role` with a templated name); its handlers are
    /// left in `role_handlers`.
    pub fn runtime_role(
        &mut self,
        name: &str,
        at: &Pos,
        from: &RoleFrom,
        params: Map<String, Value>,
        inh: &Inherited,
    ) -> Result<Vec<Step>, Diagnostic> {
        let node = yaml::json_to_node(&Value::String(name.to_string()), at);
        let opts = RoleOpts {
            from: from.clone(),
            dedupe: false,
            allow_duplicates: None,
            export: false,
            listed: Listed::Neither,
            inherited: Arc::default(),
            inherited_defaults: Arc::default(),
            entry_keys: Value::Null,
        };
        let vars = RoleVars {
            entry: Map::new(),
            params,
        };
        self.role(&node, vars, inh, &opts)
    }

    /// One entry of `roles:`.
    pub(crate) fn roles_entry(
        &mut self,
        entry: &Node,
        base: &Inherited,
    ) -> Result<Vec<Step>, Diagnostic> {
        self.role_entry(entry, base, Listed::Play, Arc::default())
    }

    /// One entry of `roles:` or of a role's `dependencies`.
    fn role_entry(
        &mut self,
        entry: &Node,
        base: &Inherited,
        listed: Listed,
        inherited: Arc<Map<String, Value>>,
    ) -> Result<Vec<Step>, Diagnostic> {
        let e = roles::read_entry(entry, base)?;
        // `when` and `tags` of the entry make another role in ansible-core's eyes.
        let entry_keys = serde_json::json!([
            entry.get("when").map(Node::to_json),
            entry.get("tags").map(Node::to_json),
        ]);
        let opts = RoleOpts {
            dedupe: true,
            allow_duplicates: None,
            entry_keys,
            // Public unless ANSIBLE_PRIVATE_ROLE_VARS says otherwise.
            export: !crate::config::private_role_vars().unwrap_or(false),
            listed,
            inherited,
            ..RoleOpts::default()
        };
        let vars = RoleVars {
            entry: e.vars,
            params: e.params,
        };
        self.role(e.name, vars, e.keywords.as_ref().unwrap_or(base), &opts)
    }

    /// Expand a role: its dependencies, then its tasks; its handlers go to the play.
    pub(super) fn role(
        &mut self,
        name_node: &Node,
        vars: RoleVars,
        inh: &Inherited,
        opts: &RoleOpts,
    ) -> Result<Vec<Step>, Diagnostic> {
        let dirs = roles::role_dirs(self.play_dir, self.roles_path);
        // Only `roles:` and dependencies make a role depend on itself; a role may import or
        // include itself (another of its task files: a recursion through the same file is
        // refused by `task_file`, or left to run time for `include_role`), as in ansible-core.
        let loading: &[PathBuf] = if opts.dedupe { &self.stack } else { &[] };
        // A templated name is rendered now, with the variables known when the playbook loads,
        // as ansible-core does for `roles:` and `import_role`.
        let rendered;
        let name_node = match name_node.as_str() {
            Some(n) if is_template(n) => {
                let r = self
                    .static_name(n, inh)
                    .map_err(|why| super::static_role_err(name_node, &why))?;
                rendered = yaml::json_to_node(&Value::String(r), &name_node.pos);
                &rendered
            }
            _ => name_node,
        };
        let role = roles::find_role(name_node, &dirs, self.play_dir, loading)?;
        // Listed before de-duplication: ansible-core lists a role each time the play names it.
        match opts.listed {
            Listed::Play => self.play_role_names.push(role.name.clone()),
            Listed::Dependency if !self.dependent_role_names.contains(&role.name) => {
                self.dependent_role_names.push(role.name.clone())
            }
            _ => {}
        }
        // A role imported or included from another role's tasks (ansible-core's dependency
        // chain) sees that role's defaults and variables below its own (an included role's
        // are not the play's, so it would not see them otherwise) and its parameters: a role
        // entry's above the nested include's own `vars:`, an include's below them; and gets,
        // as include parameters, its parent's name and path in front of those the parent got
        // the same way (`ansible_parent_role_names`, `ansible_parent_role_paths`).
        let mut vars = vars;
        let nested;
        let opts = match (opts.dedupe, &inh.role) {
            (false, Some(parent)) => {
                for (k, v) in parent.params.iter() {
                    if parent.entry_params || !vars.params.contains_key(k) {
                        vars.params.insert(k.clone(), v.clone());
                    }
                }
                for (key, value) in [
                    ("ansible_parent_role_names", parent.name.clone()),
                    ("ansible_parent_role_paths", abs_path(&parent.path)),
                ] {
                    let mut list = vec![Value::String(value)];
                    if let Some(Value::Array(outer)) = parent.params.get(key) {
                        list.extend(outer.iter().cloned());
                    }
                    vars.params.insert(key.into(), Value::Array(list));
                }
                let mut inherited = (*parent.inherited).clone();
                for m in [&parent.vars, &parent.entry_vars] {
                    inherited.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
                nested = RoleOpts {
                    from: opts.from.clone(),
                    dedupe: false,
                    allow_duplicates: opts.allow_duplicates,
                    export: opts.export,
                    listed: opts.listed,
                    inherited: Arc::new(inherited),
                    inherited_defaults: parent.defaults.clone(),
                    entry_keys: Value::Null,
                };
                &nested
            }
            _ => opts,
        };
        // Roles are deduplicated per host at run time (`RoleDedup`): a host that completed
        // the same role passes by another expansion of it, unless it allows duplicates. The
        // same role: its path and variables, and a `roles:` entry's `when` and `tags` or an
        // import's or include's `*_from` files. ansible-core keeps a play's `roles:` (and
        // dependencies) apart from the roles its imports and includes load: the same role is
        // one of each. Imports and includes allow duplicates unless they say otherwise.
        let (keys, allow) = if opts.dedupe {
            (opts.entry_keys.clone(), role.allow_duplicates)
        } else {
            let f = &opts.from;
            let keys = serde_json::json!([f.tasks, f.vars, f.defaults, f.handlers]);
            (keys, true)
        };
        let id = roles::identity_hash(&role.canon, &vars, opts.dedupe, &keys);
        // Each inclusion is decided anew; a loader at run time (an include) cannot know what
        // the play ran before.
        let included = !opts.dedupe && opts.listed == Listed::Neither;
        let seen = self.seen_roles.contains(&id);
        if !seen {
            self.seen_roles.push(id);
        }
        let repeat = seen || included || self.collected.is_none();
        let dedup = RoleDedup {
            id,
            expansion: roles::next_expansion(),
            once: !opts.allow_duplicates.unwrap_or(allow),
            repeat,
        };
        self.stack.push(role.canon.clone());
        let r = self.role_body(&role, name_node, vars, inh, opts, dedup);
        self.stack.pop();
        r
    }

    fn role_body(
        &mut self,
        role: &Role,
        name_node: &Node,
        vars: RoleVars,
        inh: &Inherited,
        opts: &RoleOpts,
        dedup: RoleDedup,
    ) -> Result<Vec<Step>, Diagnostic> {
        let mut steps = Vec::new();
        let ctx = Arc::new(RoleCtx {
            dedup: Some(dedup),
            ..role.context(name_node, vars.clone(), opts)?
        });
        let deps = role.dependencies()?;
        if !deps.is_empty() {
            // A dependency inherits the conditions and tags of the role that needs it, and
            // its variables: its `vars:`, then its vars/main.yml (that order, as ansible-core
            // merges a parent's), over what it inherited itself.
            let mut dep_inh = inh.clone();
            dep_inh.role = None;
            let mut inherited = (*ctx.inherited).clone();
            inherited.extend(ctx.entry_vars.iter().map(|(k, v)| (k.clone(), v.clone())));
            inherited.extend(ctx.vars.iter().map(|(k, v)| (k.clone(), v.clone())));
            let inherited = Arc::new(inherited);
            for d in deps {
                steps.extend(self.role_entry(
                    d,
                    &dep_inh,
                    Listed::Dependency,
                    inherited.clone(),
                )?);
            }
        }
        if opts.export {
            self.exported_roles.push(ctx.clone());
        }
        let mut inner = inh.clone();
        inner.role = Some(ctx);
        if !opts.from.skip_argspec {
            // A role entry's parameters are what the check calls provided; an include's
            // `vars:` are not, as in ansible-core.
            let provided = if opts.dedupe {
                vars.params.clone()
            } else {
                Map::new()
            };
            steps.extend(self.argspec_task(role, &opts.from, provided, &inner)?);
        }
        if let Some(f) = role.file_in("tasks", &opts.from.tasks, name_node)? {
            steps.extend(self.task_file(&f, &name_node.pos, &inner)?);
        }
        // Each handlers file joins the play once per set of role variables, however often
        // its role runs: a role given other parameters (an `include_role` with other `vars`)
        // brings its handlers again with those, and as the last loaded they are the ones that
        // run, as in ansible-core.
        if let Some(f) = role.file_in("handlers", &opts.from.handlers, name_node)? {
            let canon = std::fs::canonicalize(&f).unwrap_or(f.clone());
            let key = (canon, vars);
            let new = !self.handler_files.contains(&key);
            if new || self.include_handlers.is_some() {
                let node = yaml::load_file(&f)?;
                let mut handler_inh = inner.clone();
                handler_inh.when.clear();
                handler_inh.notify.clear();
                for s in self.steps_of(&node, "handlers", true, &handler_inh, &dir_of(&f))? {
                    if let Step::Task(mut t) = s {
                        if let Some(all) = &mut self.include_handlers {
                            all.push((*t).clone());
                            // Until a host includes the role, the play has them without
                            // the include's parameters (`Engine::add_handlers`).
                            t.handler_params = Some(Arc::default());
                        }
                        if new {
                            self.role_handlers.push(*t);
                        }
                    }
                }
                if new {
                    self.handler_files.push(key);
                }
            }
        }
        Ok(steps)
    }

    /// The task ansible-core puts in front of a role's tasks when the role has an argument
    /// spec for its entry point (`main`, or `tasks_from` as written): `validate_argument_spec`
    /// of the spec's `options`, tagged `always`, named after the spec.
    fn argspec_task(
        &mut self,
        role: &Role,
        from: &RoleFrom,
        provided: Map<String, Value>,
        inh: &Inherited,
    ) -> Result<Vec<Step>, Diagnostic> {
        let entry = from.tasks.as_deref().unwrap_or("main");
        let Some(spec) = role.argument_spec(entry)? else {
            return Ok(Vec::new());
        };
        let mut name = format!("Validating arguments against arg spec '{entry}'");
        if let Some(d) = spec.get("short_description") {
            name.push_str(" - ");
            name.push_str(&d.scalar_text().unwrap_or_else(|| "None".into()));
        }
        let options = spec.get("options").map_or(Value::Null, Node::to_json);
        let task = serde_json::json!([{
            "name": name,
            "ansible.builtin.validate_argument_spec": {
                "argument_spec": if options.is_null() { serde_json::json!({}) } else { options },
                "provided_arguments": provided,
                "validate_args_context": {
                    "type": "role",
                    "name": inh.role.as_ref().map_or(role.name.as_str(), |r| r.short_name()),
                    "argument_spec_name": entry,
                    "path": abs_path(&role.path),
                },
            },
            "tags": ["always"],
        }]);
        let node = yaml::json_to_node(&task, &spec.pos);
        self.steps_of(&node, "tasks", false, inh, &role.path)
    }
}
