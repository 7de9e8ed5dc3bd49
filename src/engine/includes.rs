//! Run-time includes (`include_tasks`, `include_role`): which file each host includes, with which
//! parameters, and running the loaded steps for the hosts that include the same thing.

use super::state::PlayCtx;
use super::{display, shown_name, Engine, Shared};
use crate::playbook::{Include, IncludeSource, RoleFrom, Step};
use crate::report::{Status, TaskEvent};
use crate::vars::{Layer, Scope, VarSrc};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// Hosts that include the same file (None: the include's loaded steps) with the same parameters.
/// A role's `*_from` as the host rendered them (`None`: not a role named at run time).
type IncludeGroup = (
    Option<String>,
    Option<RoleFrom>,
    Map<String, Value>,
    Vec<String>,
);

/// One loop item (its label) of the include on a host: included (ok) or skipped.
type ItemReport = (Option<String>, Status);
/// What one host reports for the include itself, item by item.
type IncludeReport = (String, Vec<ItemReport>);

impl Engine {
    /// `include_tasks` / `include_role`: evaluated per host (and loop item); hosts that
    /// include the same file with the same parameters run it together.
    pub(super) async fn run_include(
        &mut self,
        ctx: &PlayCtx<'_>,
        inc: &Include,
        targets: &[String],
    ) {
        let targets = if inc.run_once {
            &targets[..targets.len().min(1)]
        } else {
            targets
        };
        let snap = self.snapshot(ctx);
        let shared = shared!(self);
        // (file, parameters) → hosts, in order of first appearance.
        let mut groups: Vec<IncludeGroup> = Vec::new();
        let mut failures: Vec<(String, String)> = Vec::new();
        let mut warnings: Vec<String> = Vec::new();
        let mut reports: Vec<IncludeReport> = Vec::new();
        // Each host's result, for `register`.
        let mut registered: Map<String, Value> = Map::new();
        // The include's name, rendered as a task's is: with the first host's variables.
        let mut shown: Option<String> = None;
        for host in targets {
            let mut report = Vec::new();
            let h = &self.hosts[host];
            let scope = shared.scope_with(
                &snap,
                VarSrc {
                    role: inc.role.as_deref(),
                    vars: Some(&inc.inherited_vars),
                    check_mode: None,
                    task_file: Some(inc.pos.file.as_path()),
                },
                h,
            );
            let items: Vec<Option<(usize, Value)>> = match &inc.loop_items {
                None => vec![None],
                Some(raw) => match scope.render_noting_undefined(raw).and_then(|v| {
                    // `with_first_found` searches the include's role, then the play's directory,
                    // as a task's does.
                    let search =
                        crate::playbook::files::search_dirs(inc.role.as_deref(), &ctx.play.dir);
                    crate::playbook::loops::expand(inc.loop_kind, v, &search)
                        .map_err(|e| (e, false))
                }) {
                    Ok(items) => items.into_iter().enumerate().map(Some).collect(),
                    // As for a task: a loop over an undefined variable is an error only if the
                    // include's `when`, decided without the item, does not skip it first.
                    Err((_, true)) if matches!(super::all_hold(&scope, &inc.when), Ok(false)) => {
                        registered
                            .insert(host.clone(), super::task::skip_result(&inc.when, &scope));
                        reports.push((host.clone(), vec![(None, Status::Skipped)]));
                        continue;
                    }
                    Err((e, _)) => {
                        failures.push((host.clone(), format!("cannot expand the loop: {e}")));
                        continue;
                    }
                },
            };
            // A name the playbook gives is rendered; the one made of the action and the role
            // (`include_role : {{ r }}`) is shown as written, as ansible-core shows it.
            if shown.is_none() {
                shown = Some(match inc.name {
                    Some(_) => {
                        let named = scope.with(Layer::templates(inc.vars.clone()));
                        shown_name(&named, &inc.shown, &|_| false)
                    }
                    None => inc.shown.clone(),
                });
            }
            // The name sees the include's own `vars` (lazily rendered templates, as in Ansible).
            let loop_var = match super::loop_items::loop_var_of(
                &inc.loop_var,
                &scope.with(Layer::templates(inc.vars.clone())),
            ) {
                Ok(v) => v,
                Err(e) => {
                    failures.push((host.clone(), e));
                    continue;
                }
            };
            let looped = inc.loop_items.is_some();
            let mut item_results: Vec<Value> = Vec::new();
            let all_items: Vec<Value> = items.iter().flatten().map(|(_, v)| v.clone()).collect();
            for item in items {
                let mut params = Map::new();
                if let Some((i, v)) = &item {
                    params.insert(loop_var.clone(), v.clone());
                    params.insert("ansible_loop_var".into(), json!(loop_var));
                    if let Some(iv) = &inc.index_var {
                        params.insert(iv.clone(), json!(i));
                        params.insert("ansible_index_var".into(), json!(iv));
                    }
                    if let Some(allitems) = inc.loop_extended {
                        let ext = super::loop_items::ansible_loop(&all_items, *i, allitems);
                        params.insert("ansible_loop".into(), ext);
                    }
                }
                let s = scope.with(Layer::data(params.clone()));
                let mut ok = true;
                for cond in &inc.when {
                    match s.eval_bool(cond) {
                        Ok(true) => {}
                        Ok(false) => {
                            ok = false;
                            break;
                        }
                        Err(e) => {
                            failures.push((
                                host.clone(),
                                format!("cannot evaluate `when: {cond}`: {e}"),
                            ));
                            ok = false;
                            break;
                        }
                    }
                }
                let label = item.as_ref().map(|(_, v)| display(v));
                if !ok {
                    let mut r = super::task::skip_result(&inc.when, &s);
                    r.as_object_mut().unwrap().extend(params.clone());
                    item_results.push(r);
                    report.push((label, Status::Skipped));
                    continue;
                }
                match s.render(&Value::Object(inc.vars.clone())) {
                    Ok(Value::Object(m)) => params.extend(m),
                    Ok(_) => {}
                    Err(e) => {
                        failures.push((host.clone(), format!("cannot render `vars`: {e}")));
                        continue;
                    }
                }
                // The file name sees the include's own `vars`, as its other arguments do (an
                // include_role's are the role's parameters, templates rendered when read).
                let mut s = s.with(Layer::data(params.clone()));
                if let IncludeSource::Role {
                    params: role_params,
                    ..
                } = &inc.source
                {
                    s = s.with(Layer::templates(role_params.clone()));
                }
                let file = match &inc.source {
                    IncludeSource::TasksFile { file: name, .. }
                    | IncludeSource::Role { name, .. } => match s.render(&json!(name)) {
                        Ok(v) => Some(display(&v)),
                        Err(e) => {
                            failures.push((
                                host.clone(),
                                format!("cannot render the name `{name}`: {e}"),
                            ));
                            continue;
                        }
                    },
                    IncludeSource::Loaded(_) => None,
                };
                let from = match &inc.source {
                    IncludeSource::Role { from, .. } => match rendered_from(from, &s) {
                        Ok(f) => Some(f),
                        Err(e) => {
                            failures.push((host.clone(), e));
                            continue;
                        }
                    },
                    _ => None,
                };
                // A host that includes the same file with the same parameters again (a loop
                // over `[foo, foo]`) runs it again, as in ansible-core: a group of its own.
                match groups.iter_mut().find(|(f, r, p, hosts)| {
                    *f == file && *r == from && *p == params && !hosts.contains(host)
                }) {
                    Some((_, _, _, hosts)) => hosts.push(host.clone()),
                    None => groups.push((file.clone(), from, params.clone(), vec![host.clone()])),
                }
                item_results.push(included_result(inc, file, &s, &params, looped));
                report.push((label, Status::Ok));
            }
            if inc.register.is_some() && !failures.iter().any(|(h, _)| h == host) {
                let r = if looped {
                    let statuses: Vec<Status> = report.iter().map(|(_, st)| *st).collect();
                    Value::Object(super::loop_items::loop_result(&statuses, item_results))
                } else {
                    item_results.pop().unwrap_or(Value::Null)
                };
                registered.insert(host.clone(), r);
            }
            if !failures.iter().any(|(h, _)| h == host) {
                reports.push((host.clone(), report));
            }
            for w in scope.take_warnings() {
                if !warnings.contains(&w) {
                    warnings.push(w);
                }
            }
        }
        let location = inc.pos.to_string();
        let name = shown.unwrap_or_else(|| inc.shown.clone());
        for w in warnings {
            self.reporter
                .warn(&format!("{} ({location}): {w}", inc.action));
        }
        // Files and roles chosen at run time are loaded before the include is counted: a host
        // whose file cannot load reports the include ok, then failed, and the recap counts only
        // the failure (as Ansible does).
        let mut loaded_groups = Vec::new();
        let mut load_failures: Vec<(String, String)> = Vec::new();
        for (file, from, params, hosts) in groups {
            let steps = match (&inc.source, &file) {
                (IncludeSource::Loaded(_), _) => {
                    self.add_included_handlers(ctx, inc.handlers.clone(), &params);
                    None
                }
                (source, Some(f)) => match self.load_include(ctx, inc, source, f, from, &params) {
                    Ok(steps) => Some(steps),
                    Err(e) => {
                        for h in &hosts {
                            load_failures.push((h.clone(), e.clone()));
                        }
                        continue;
                    }
                },
                (_, None) => continue,
            };
            if inc.public {
                let loaded = match (&inc.source, &steps) {
                    (IncludeSource::Loaded(s), _) | (_, Some(s)) => s.as_slice(),
                    _ => &[],
                };
                // The included role's own steps come last (its dependencies' first).
                if let Some(role) = loaded.iter().rev().find_map(crate::playbook::Step::role) {
                    self.publish_role(role);
                }
            }
            loaded_groups.push((params, hosts, steps));
        }
        let uncounted: Vec<&str> = load_failures.iter().map(|(h, _)| h.as_str()).collect();
        self.report_include(inc, &name, &location, reports, &uncounted);
        // A handler's include loads its file as handlers: a block there is one handler, a
        // block inside it is refused, and ansible-core stops the run right there, once the
        // include is reported.
        if self.handler_include.is_some() {
            let nested = loaded_groups.iter().find_map(|(_, _, steps)| {
                let steps = match (&inc.source, steps) {
                    (IncludeSource::Loaded(s), _) | (_, Some(s)) => s.as_slice(),
                    _ => &[],
                };
                nested_block(steps)
            });
            if let Some(at) = nested {
                self.reporter.error(&format!(
                    "Using a block as a handler is not supported (the block at {at}, in the \
                     file the handler at {location} includes)"
                ));
                self.run_stopped = true;
                self.play_ended = true;
                return;
            }
        }
        if let Some(reg) = &inc.register {
            // `run_once`: the first host's result is every reachable host's of the batch, as a
            // `run_once` task's is (`fanout::run_task`).
            if let (true, Some(r)) = (inc.run_once, registered.values().next().cloned()) {
                for h in &ctx.hosts {
                    if self.hosts.get(h).is_some_and(|hs| !hs.unreachable) {
                        registered.entry(h.clone()).or_insert_with(|| r.clone());
                    }
                }
            }
            for (host, r) in registered {
                self.hosts
                    .get_mut(&host)
                    .expect("host state")
                    .set_var(reg, r);
            }
        }
        let failed: Vec<(String, String)> = failures
            .into_iter()
            .map(|(h, msg)| (h, format!("{msg} (at {location})")))
            .chain(
                load_failures
                    .into_iter()
                    .map(|(h, e)| (h, format!("{e} (included at {location})"))),
            )
            .collect();
        for (host, msg) in failed {
            self.include_failed(inc, &host, &name, &location, msg);
        }
        for (params, hosts, steps) in loaded_groups {
            // Each inclusion (each loop item's) is a role invocation of its own: an `end_role`
            // in an earlier one does not end it, and whether a host passes a role by because
            // it completed it (`RoleDedup`) is decided again, a loop item's variables being
            // part of the role's identity.
            let expansions = match (&inc.source, &steps) {
                (IncludeSource::Loaded(steps), _) | (_, Some(steps)) => role_expansions(steps),
                _ => Vec::new(),
            };
            let item = inc
                .loop_items
                .is_some()
                .then(|| crate::playbook::roles::value_hash(&Value::Object(params.clone())));
            for h in &hosts {
                let hs = self.hosts.get_mut(h).expect("host state");
                hs.ended_role = None;
                for e in &expansions {
                    hs.role_passed_by.remove(e);
                    match item {
                        Some(i) => hs.role_item.insert(*e, i),
                        None => hs.role_item.remove(e),
                    };
                }
            }
            let sub = ctx.with_params(params);
            match (&inc.source, steps) {
                (IncludeSource::Loaded(steps), _) => self.run_steps(&sub, steps, &hosts).await,
                (_, Some(steps)) => {
                    let sub = PlayCtx {
                        handlers: self.handlers.clone(),
                        ..sub
                    };
                    self.run_steps(&sub, &steps, &hosts).await;
                }
                (_, None) => {}
            }
        }
    }

    /// Load the task file or role an include names at run time; the role's handlers join the
    /// play's.
    fn load_include(
        &mut self,
        ctx: &PlayCtx<'_>,
        inc: &Include,
        source: &IncludeSource,
        file: &str,
        from: Option<RoleFrom>,
        params: &Map<String, Value>,
    ) -> Result<Vec<crate::playbook::Step>, String> {
        let mut loader = crate::playbook::Loader::new(&ctx.play.dir, &ctx.book.roles_path);
        loader.extra_vars = (*self.cfg.extra_vars).clone();
        let steps = match source {
            IncludeSource::TasksFile {
                search, inherit, ..
            } => match crate::playbook::find_in(search, file) {
                Some(path) => loader
                    .task_file(&path, &inc.pos, inherit)
                    .map_err(|d| d.to_string()),
                None => Err(format!(
                    "task file `{file}` not found; looked in {}",
                    search
                        .iter()
                        .map(|d| d.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            },
            IncludeSource::Role {
                from: written,
                params,
                inherit,
                ..
            } => loader
                .runtime_role(
                    file,
                    &inc.pos,
                    from.as_ref().unwrap_or(written),
                    params.clone(),
                    inherit,
                )
                .map_err(|d| d.to_string()),
            IncludeSource::Loaded(steps) => Ok(steps.clone()),
        }?;
        self.add_included_handlers(ctx, std::mem::take(&mut loader.role_handlers), params);
        Ok(steps)
    }
}

impl Engine {
    /// An `include_role` with `public: true` was included: its role's defaults and vars are
    /// the play's from now on, for every host.
    fn publish_role(&mut self, role: &crate::playbook::RoleCtx) {
        let public = Arc::make_mut(&mut self.public_roles);
        for (from, to) in [
            (&role.defaults, &mut public.defaults),
            (&role.vars, &mut public.vars),
        ] {
            Arc::make_mut(to).extend(from.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }

    /// A host whose include failed: its result registered, and the host failed, or with
    /// `ignore_errors` the failure reported ignored and the host goes on.
    fn include_failed(
        &mut self,
        inc: &Include,
        host: &str,
        name: &str,
        location: &str,
        msg: String,
    ) {
        if let Some(reg) = &inc.register {
            let hs = self.hosts.get_mut(host).expect("host state");
            hs.set_var(reg, json!({"changed": false, "failed": true, "msg": msg}));
        }
        self.fail_host(host, (name, inc.action, location), msg, inc.ignore_errors);
    }

    /// The include's own result, as Ansible reports it: ok for each item included, skipped
    /// when `when` is false (or the loop is empty). The recap counts each included item as ok,
    /// or the include once as skipped when it included nothing; hosts in `uncounted` (their
    /// file failed to load) count only that failure.
    fn report_include(
        &mut self,
        inc: &Include,
        name: &str,
        location: &str,
        reports: Vec<IncludeReport>,
        uncounted: &[&str],
    ) {
        if reports.is_empty() {
            return;
        }
        self.reporter.task_start(name, false);
        for (host, mut report) in reports {
            if report.is_empty() {
                // A loop over nothing.
                report.push((None, Status::Skipped));
            }
            for (item, status) in &report {
                self.reporter.task(&TaskEvent {
                    host: &host,
                    task: name,
                    module: inc.action,
                    location,
                    status: *status,
                    item: item.as_deref(),
                    diff: None,
                    msg: None,
                    result: None,
                    ignored: false,
                    censored: false,
                    note: None,
                    delegated_to: None,
                    python: false,
                });
            }
            let included = report.iter().filter(|(_, s)| *s == Status::Ok).count();
            if uncounted.contains(&host.as_str()) {
                continue;
            }
            let hs = self.hosts.get_mut(&host).expect("host state");
            if included == 0 {
                hs.stats.skipped += 1;
            } else {
                hs.stats.ok += included as u32;
            }
        }
    }
}

/// The result of an include (or one loop item of it) that included its file or role, as
/// ansible-core registers it: the file (`include_tasks`) and the arguments besides it, with
/// the loop's variables for an item (and no `changed` then).
fn included_result(
    inc: &Include,
    file: Option<String>,
    scope: &Arc<Scope>,
    params: &Map<String, Value>,
    looped: bool,
) -> Value {
    let target = file.unwrap_or_else(|| {
        scope
            .render(&json!(inc.target))
            .map(|v| display(&v))
            .unwrap_or_else(|_| inc.target.clone())
    });
    let mut r = Map::new();
    if inc.action == "include_tasks" {
        r.insert("include".into(), json!(target));
        r.insert("include_args".into(), json!({}));
    } else {
        let mut args = match scope.render(&Value::Object(inc.role_args.clone())) {
            Ok(Value::Object(m)) => m,
            _ => inc.role_args.clone(),
        };
        args.insert("name".into(), json!(target));
        r.insert("include_args".into(), Value::Object(args));
    }
    if looped {
        for k in ["ansible_loop_var", "ansible_index_var"] {
            if let Some(var) = params.get(k).and_then(Value::as_str) {
                r.insert(var.into(), params.get(var).cloned().unwrap_or(Value::Null));
                r.insert(k.into(), json!(var));
            }
        }
    } else {
        r.insert("changed".into(), json!(false));
    }
    Value::Object(r)
}

/// A role's `tasks_from`, `vars_from`, `defaults_from` and `handlers_from` rendered for one
/// host (and item); one that renders to `omit` is left out, as ansible-core leaves it.
fn rendered_from(from: &RoleFrom, scope: &Arc<Scope>) -> Result<RoleFrom, String> {
    let render = |v: &Option<String>| -> Result<Option<String>, String> {
        let Some(text) = v else { return Ok(None) };
        let r = scope
            .render(&json!(text))
            .map_err(|e| format!("cannot render `{text}`: {e}"))?;
        Ok((!crate::template::is_omit_json(&r)).then(|| display(&r)))
    };
    Ok(RoleFrom {
        tasks: render(&from.tasks)?,
        vars: render(&from.vars)?,
        defaults: render(&from.defaults)?,
        handlers: render(&from.handlers)?,
        skip_argspec: from.skip_argspec,
    })
}

/// The role expansions (`RoleDedup::expansion`) whose steps are among `steps`.
fn role_expansions(steps: &[Step]) -> Vec<u64> {
    let mut out = Vec::new();
    for s in steps {
        match s {
            Step::Block(b) => {
                for list in [&b.block, &b.rescue, &b.always] {
                    out.extend(role_expansions(list));
                }
            }
            _ => out.extend(s.role().and_then(|r| r.dedup).map(|d| d.expansion)),
        }
    }
    out.dedup();
    out
}

/// Where a block inside a block of `steps` is (loaded as handlers, the outer block is one
/// handler and the inner one is refused).
fn nested_block(steps: &[Step]) -> Option<String> {
    steps.iter().find_map(|s| match s {
        Step::Block(b) => [&b.block, &b.rescue, &b.always]
            .into_iter()
            .flatten()
            .find_map(|inner| match inner {
                Step::Block(n) => Some(n.pos.to_string()),
                _ => None,
            }),
        _ => None,
    })
}
