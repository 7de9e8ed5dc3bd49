//! Run-time includes (`include_tasks`, `include_role`): which file each host includes, with which
//! parameters, and running the loaded steps for the hosts that include the same thing.

use super::state::PlayCtx;
use super::{display, Engine, Shared};
use crate::playbook::{Include, IncludeSource};
use crate::vars::{Layer, VarSrc};
use serde_json::{json, Map, Value};

/// Hosts that include the same file (None: the include's loaded steps) with the same parameters.
type IncludeGroup = (Option<String>, Map<String, Value>, Vec<String>);

impl Engine {
    /// `include_tasks` / `include_role`: evaluated per host (and loop item); hosts that
    /// include the same file with the same parameters run it together.
    pub(super) async fn run_include(
        &mut self,
        ctx: &PlayCtx<'_>,
        inc: &Include,
        targets: &[String],
    ) {
        let shared = shared!(self);
        let snap = self.snapshot(ctx);
        // (file, parameters) → hosts, in order of first appearance.
        let mut groups: Vec<IncludeGroup> = Vec::new();
        let mut failures: Vec<(String, String)> = Vec::new();
        let mut warnings: Vec<String> = Vec::new();
        for host in targets {
            let h = &self.hosts[host];
            let scope = shared.scope_with(
                &snap,
                VarSrc {
                    role: inc.role.as_deref(),
                    vars: Some(&inc.inherited_vars),
                    check_mode: None,
                },
                h,
            );
            let items: Vec<Option<(usize, Value)>> = match &inc.loop_items {
                None => vec![None],
                Some(raw) => match scope
                    .render(raw)
                    .and_then(|v| crate::playbook::loops::expand(inc.loop_kind, v, &[]))
                {
                    Ok(items) => items.into_iter().enumerate().map(Some).collect(),
                    Err(e) => {
                        failures.push((host.clone(), format!("cannot expand the loop: {e}")));
                        continue;
                    }
                },
            };
            for item in items {
                let mut params = Map::new();
                if let Some((i, v)) = &item {
                    params.insert(inc.loop_var.clone(), v.clone());
                    params.insert("ansible_loop_var".into(), json!(inc.loop_var));
                    if let Some(iv) = &inc.index_var {
                        params.insert(iv.clone(), json!(i));
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
                if !ok {
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
                // The file name sees the include's own `vars`, as its other arguments do.
                let s = s.with(Layer::data(params.clone()));
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
                match groups
                    .iter_mut()
                    .find(|(f, p, _)| *f == file && *p == params)
                {
                    Some((_, _, hosts)) => {
                        if !hosts.contains(host) {
                            hosts.push(host.clone())
                        }
                    }
                    None => groups.push((file, params, vec![host.clone()])),
                }
            }
            for w in scope.take_warnings() {
                if !warnings.contains(&w) {
                    warnings.push(w);
                }
            }
        }
        let location = inc.pos.to_string();
        let name = inc.name.clone().unwrap_or_else(|| inc.action.to_string());
        for w in warnings {
            self.reporter
                .warn(&format!("{} ({location}): {w}", inc.action));
        }
        for (host, msg) in failures {
            self.fail_host(
                &host,
                &name,
                inc.action,
                &location,
                format!("{msg} (at {location})"),
            );
        }
        for (file, params, hosts) in groups {
            let sub = ctx.with_params(params);
            let (source, file) = match (&inc.source, file) {
                (IncludeSource::Loaded(steps), _) => {
                    self.run_steps(&sub, steps, &hosts).await;
                    continue;
                }
                (source, Some(file)) => (source, file),
                (_, None) => continue,
            };
            let mut loader = crate::playbook::Loader::new(&ctx.play.dir, &ctx.book.roles_path);
            let loaded = match source {
                IncludeSource::TasksFile {
                    search, inherit, ..
                } => match crate::playbook::find_in(search, &file) {
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
                    from,
                    params,
                    inherit,
                    ..
                } => loader
                    .runtime_role(&file, &inc.pos, from, params.clone(), inherit)
                    .map_err(|d| d.to_string()),
                // The first match of the loop ran these and went on to the next group.
                IncludeSource::Loaded(_) => unreachable!("run above"),
            };
            match loaded {
                Ok(steps) => {
                    self.add_handlers(std::mem::take(&mut loader.role_handlers));
                    let sub = PlayCtx {
                        handlers: self.handlers.clone(),
                        ..sub
                    };
                    self.run_steps(&sub, &steps, &hosts).await;
                }
                Err(e) => {
                    for h in &hosts {
                        self.fail_host(
                            h,
                            &name,
                            inc.action,
                            &location,
                            format!("{e} (included at {location})"),
                        );
                    }
                }
            }
        }
    }
}
