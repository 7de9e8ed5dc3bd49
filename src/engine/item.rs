//! One attempt of one task (or loop item) on one host: render its parameters, run it on the
//! controller or send it to the agent, and say what happened.

use super::actions::held;
use super::actions::include_vars;
use super::actions::prepare::{self as actions, Prepared};
use super::actions::upload::Upload;
use super::connect::conn_key;
use super::handlers::notify_spec;
use super::result::ItemResult;
use super::state::{HostState, PlayCtx};
use super::{display, playbook_scope, Shared};
use crate::connection::pool::ConnKey;
use crate::connection::{ConnSpec, TransportError};
use crate::playbook::{EnvPart, Task};
use crate::report::Status;
use crate::vars::Scope;
use fixpoint_agent::protocol::{OnceSpec, Request, Response};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// What rendering one item gives: its result, when the controller has it (a controller-side
/// action, a parameter that does not render), or the request to send to the agent.
// Made once per item and taken apart at once: boxing either variant would buy nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum ItemPlan {
    Done(Result<ItemResult, (bool, String)>),
    Agent(AgentItem),
}

/// A rendered request for the agent, and what reading its answer needs.
pub(super) struct AgentItem {
    pub(super) req: Request,
    pub(super) spec: ConnSpec,
    /// The controller files the agent may ask for (`NeedContent`).
    upload: Vec<Upload>,
    pub(super) timeout: Option<Duration>,
    diff: bool,
}

impl Shared<'_> {
    /// Render, prepare and execute one task (or one loop item) on the host.
    pub(super) async fn run_item(
        &self,
        ctx: &PlayCtx<'_>,
        task: &Task,
        h: &mut HostState,
        scope: &Arc<Scope>,
    ) -> Result<ItemResult, (bool, String)> {
        let item = match self.plan_item(ctx, task, h, scope).await {
            ItemPlan::Done(r) => return r,
            ItemPlan::Agent(item) => item,
        };
        let conn = self.conn(h, &item.spec, ctx).await?;
        let answer = conn.call(&item.req, item.timeout).await;
        self.agent_answer(ctx, h, &item, answer).await
    }

    /// Render and prepare one task (or loop item): a controller-side action runs here; an
    /// agent's module is only rendered (nothing is sent, and the host's state is not changed),
    /// which is what lets a pipelined section render its tasks before any runs.
    pub(super) async fn plan_item(
        &self,
        ctx: &PlayCtx<'_>,
        task: &Task,
        h: &mut HostState,
        scope: &Arc<Scope>,
    ) -> ItemPlan {
        match self.plan_item_inner(ctx, task, h, scope).await {
            Ok(plan) => plan,
            Err(e) => ItemPlan::Done(Err(e)),
        }
    }

    async fn plan_item_inner(
        &self,
        ctx: &PlayCtx<'_>,
        task: &Task,
        h: &mut HostState,
        scope: &Arc<Scope>,
    ) -> Result<ItemPlan, (bool, String)> {
        // Bare expressions (assert's `that`, debug's `var`) are evaluated by the action, not rendered.
        let raw_keys = actions::raw_param_keys(task.module);
        let mut params = task.params.clone();
        if let (Some(splat), Value::Object(m)) = (&task.args_splat, &mut params) {
            let layer = scope
                .render(&Value::String(splat.template.clone()))
                .map_err(|e| (false, format!("cannot render the parameters: {e}")))?;
            // As ansible-core warns: whoever controls the variable controls every argument.
            scope.warn(format!(
                "the arguments of `{}` are the template `{}`: a variable's value decides them all \
                 (a value from a host could add any argument); prefer writing them out",
                task.module, splat.template
            ));
            // `args: '{{ omit }}'` gives no arguments; anything else but a mapping fails, in
            // ansible-core's words (the module named as it names it).
            let layer = match crate::template::is_omit_json(&layer) {
                true => Value::Object(Map::new()),
                false => layer,
            };
            let Value::Object(layer) = layer else {
                let fqcn = match task.module.contains('.') {
                    true => task.module.to_string(),
                    false => format!("ansible.builtin.{}", task.module),
                };
                return Err((
                    false,
                    format!(
                        "Task failed: Finalization of task args for '{fqcn}' failed: Task args \
                         must resolve to a 'dict' not '{}'.",
                        match &layer {
                            Value::Array(_) => "list",
                            Value::String(_) => "str",
                            Value::Null => "NoneType",
                            Value::Bool(_) => "bool",
                            Value::Number(n) if n.is_f64() => "float",
                            _ => "int",
                        }
                    ),
                ));
            };
            let code = crate::template::Templar::single_expression_code(&splat.template);
            for (k, v) in layer {
                if !m.contains_key(&k) || splat.defaulted.contains(&k) {
                    // What a template rendered to is data, never rendered again; the
                    // expressions an action evaluates itself (`that`) stay code only if they
                    // are the playbook's own text.
                    let v = if raw_keys.contains(&k.as_str()) {
                        let path = code.map(|c| format!("{}.{k}", c.trim()));
                        super::actions::trust::vouch(v, path.as_deref(), scope)
                    } else {
                        crate::yaml::mark::mark(v)
                    };
                    m.insert(k, v);
                }
            }
        }
        // `ansible_package_use` chooses the manager of a `package` task that names none, as
        // ansible-core's package action reads it.
        if let (true, Value::Object(m)) = (task.module == "package", &mut params) {
            if !m.contains_key("use") {
                if let Ok(Value::String(u)) = scope.eval("ansible_package_use") {
                    m.insert("use".into(), Value::String(u));
                }
            }
        }
        if let (Some(all), Value::Object(m)) = (&task.module_defaults, &mut params) {
            if let Some(d) = manager_module(task.module, m, scope)
                .and_then(|mgr| crate::playbook::defaults::backend_defaults(all, &mgr))
            {
                for (k, v) in d {
                    m.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
        }
        let mut raw = Map::new();
        if let Value::Object(m) = &mut params {
            for k in raw_keys {
                if let Some(v) = m.remove(*k) {
                    raw.insert(k.to_string(), v);
                }
            }
        }
        let mut params = render_params(scope, &params)?;
        if let Value::Object(m) = &mut params {
            m.extend(raw);
        }
        // ansible-core's action plugin refuses `async` once the arguments are rendered.
        if let Some(msg) = &task.async_refused {
            return Ok(ItemPlan::Done(Ok(ItemResult::failed(
                msg.clone(),
                Map::new(),
            ))));
        }
        // ansible-core's shell action refuses command's `expand_argument_vars` in its words.
        if task.module == "shell" && params.get("expand_argument_vars").is_some() {
            return Ok(ItemPlan::Done(Ok(ItemResult::failed(
                "Unsupported parameters for (shell) module: expand_argument_vars".into(),
                Map::new(),
            ))));
        }
        // `debug` with `verbosity: N` shows only from N `-v` on; below that it is skipped, as in Ansible.
        if task.module == "debug" {
            let wanted = params.get("verbosity").and_then(Value::as_u64).unwrap_or(0);
            if wanted > u64::from(self.cfg.verbosity) {
                let mut reason = Map::new();
                reason.insert("skipped".into(), Value::Bool(true));
                reason.insert(
                    "skipped_reason".into(),
                    Value::from("Verbosity threshold not met."),
                );
                let mut skipped = ItemResult::ok(reason);
                skipped.status = Status::Skipped;
                return Ok(ItemPlan::Done(Ok(skipped)));
            }
        }
        let levels = ctx.play.environment.iter().chain(&task.environment);
        let environment = render_environment(scope, levels).map_err(|e| (false, e))?;
        // The rarer, larger steps are boxed: unboxed, their state would make every task's
        // future (copied into place once per task and host) as large as theirs (issue 13).
        if let Some(py) = &task.python {
            return Ok(ItemPlan::Done(
                Box::pin(self.run_python(ctx, task, h, scope, py, params, environment)).await,
            ));
        }
        let done = match task.module {
            "include_vars" => Some(Ok(include_vars(ctx, task, h, &params, scope))),
            "setup" | "gather_facts" => Some(Box::pin(self.setup(ctx, task, h, &params)).await),
            "pause" => Some(Ok(Box::pin(self.pause(task, scope, &params)).await)),
            "group_by" => Some(Ok(self.group_by(&h.name, &params))),
            "add_host" => Some(Ok(self.add_host(&params))),
            "fetch" => Some(Box::pin(self.fetch(ctx, task, h, scope, params.clone())).await),
            _ => None,
        };
        if let Some(done) = done {
            return Ok(ItemPlan::Done(done));
        }
        let prepared = actions::prepare(
            task.module,
            params,
            &task.search_dirs(&ctx.play.dir),
            scope,
            &environment,
        )
        .map_err(|f| (false, f.msg))?;
        let (module, params, upload) = match prepared {
            Prepared::Done(Ok(outcome)) => {
                return Ok(ItemPlan::Done(Ok(ItemResult::done(outcome))))
            }
            Prepared::Done(Err(f)) => {
                return Ok(ItemPlan::Done(Ok(ItemResult::failed(f.msg, f.result))))
            }
            Prepared::Agent {
                module,
                params,
                upload,
            } => (module, agent_floats(params), upload),
        };
        // Templated parameters are checked now that they have values. The module refuses
        // them, as Ansible's argument spec does: its failure, which `failed_when` may judge.
        if let Err(e) = fixpoint_modules::check_params(module, &params) {
            // ansible-core's words for a missing parameter stand alone, as its message does.
            let msg = if e.msg.starts_with(fixpoint_modules::MISSING_REQUIRED) {
                e.msg
            } else {
                format!("invalid parameters for `{}`: {e}", task.module)
            };
            return Ok(ItemPlan::Done(Ok(ItemResult::failed(msg, Map::new()))));
        }
        // In check mode a command does not run, even one declared read-only with
        // `changed_when: false` (as in Ansible): only `check_mode: false` runs it for real.
        let check = self.effective_check(Some(task));
        let diff = task.diff.unwrap_or(self.cfg.diff) || self.cfg.twice;
        let spec = self
            .task_conn_spec(h, ctx, task, scope)
            .map_err(|e| (false, e))?;
        let once = match &task.once {
            Some(raw) => {
                let key = scope
                    .render(&json!(raw))
                    .map_err(|e| (false, format!("cannot render `once`: {e}")))?;
                let once_scope = match &task.once_scope {
                    Some(raw) => {
                        Some(display(&scope.render(&json!(raw)).map_err(|e| {
                            (false, format!("cannot render `once_scope`: {e}"))
                        })?))
                    }
                    None => None,
                };
                Some(OnceSpec {
                    key: display(&key),
                    scope: once_scope,
                    playbook: playbook_scope(ctx.book),
                    request_sha256: fixpoint_agent::journal::request_hash(module, &params),
                    probe_guarded: ["creates", "removes", "unless", "onlyif"]
                        .iter()
                        .any(|k| params.get(*k).is_some_and(|v| !v.is_null())),
                    no_log: task.no_log,
                })
            }
            None => None,
        };
        let notify = notify_spec(ctx, task, scope, check).map_err(|e| (false, e))?;
        let inline = match check {
            true => Vec::new(),
            false => held::inline_for(&spec.route(), &upload),
        };
        let jid = task
            .async_job
            .map(|limit| (job_id(self.run_id, &h.name, task, module, &params), limit));
        let mut req = Request::Run {
            module: module.to_string(),
            params,
            check,
            diff,
            once,
            notify,
            inline,
        };
        // `poll: 0`: the same request, run as a background job (agent `job.rs`).
        if let Some((jid, limit_secs)) = jid {
            req = Request::AsyncStart {
                jid,
                limit_secs,
                run: Box::new(req),
            };
        }
        Ok(ItemPlan::Agent(AgentItem {
            req,
            spec,
            upload,
            timeout: task.timeout.map(Duration::from_secs),
            diff,
        }))
    }

    /// The item's result from the agent's answer to its request: content the agent asks for is
    /// sent (and the request repeated), and a channel that failed is dropped.
    pub(super) async fn agent_answer(
        &self,
        ctx: &PlayCtx<'_>,
        h: &mut HostState,
        item: &AgentItem,
        mut answer: Result<Response, TransportError>,
    ) -> Result<ItemResult, (bool, String)> {
        let AgentItem {
            req,
            spec,
            upload,
            timeout,
            diff,
        } = item;
        let (spec, timeout, diff) = (spec, *timeout, *diff);
        let mut sent = None;
        // The host's files differ from the controller's: send the contents, then ask again.
        if let Ok(Response::NeedContent { sha256, more, .. }) = &answer {
            let asked: Vec<&String> = std::iter::once(sha256)
                .chain(more.iter().map(|m| &m.sha256))
                .collect();
            let ups: Vec<&Upload> = asked
                .iter()
                .filter_map(|sha| upload.iter().find(|u| u.sha256 == **sha))
                .collect();
            if !ups.is_empty() && ups.len() == asked.len() {
                let conn = self.conn(h, spec, ctx).await?;
                let mut total = 0;
                let mut failed = None;
                for up in ups {
                    match Box::pin(up.send(conn, timeout)).await {
                        Ok(Ok(n)) => total += n,
                        Ok(Err(msg)) => {
                            failed = Some(Ok(Response::Failed {
                                msg,
                                result: Map::new(),
                            }));
                            break;
                        }
                        Err(e) => {
                            failed = Some(Err(e));
                            break;
                        }
                    }
                }
                answer = match failed {
                    Some(f) => f,
                    None => {
                        sent = Some(total);
                        conn.call(req, timeout).await
                    }
                };
            }
        }
        match answer {
            Ok(Response::Done {
                mut outcome,
                note,
                outbox_written,
            }) => Ok(ItemResult {
                note: {
                    if !upload.is_empty() && matches!(req, Request::Run { check: false, .. }) {
                        held::record(&spec.route(), upload);
                    }
                    for up in upload {
                        up.fill_diff(&mut outcome, diff);
                    }
                    let sent = sent.map(|n| format!("content sent: {n} bytes"));
                    match (note, sent) {
                        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
                        (a, b) => a.or(b),
                    }
                },
                outbox_written: (!outbox_written.is_empty())
                    .then(|| (conn_key(h, spec), outbox_written)),
                delegated_to: conn_key(h, spec).0,
                ..ItemResult::done(outcome)
            }),
            Ok(Response::Failed { msg, result }) => Ok(ItemResult {
                delegated_to: conn_key(h, spec).0,
                ..ItemResult::failed(msg, result)
            }),
            Ok(other) => Err((
                false,
                format!("unexpected answer from the agent: {other:?}"),
            )),
            Err(TransportError::TooLarge(msg)) => Ok(ItemResult {
                delegated_to: conn_key(h, spec).0,
                ..ItemResult::failed(msg, Map::new())
            }),
            Err(e) => {
                // The channel is gone or out of step: drop it so nothing else uses it.
                h.conns.remove(&conn_key(h, spec));
                Err((false, e.to_string()))
            }
        }
    }
}

/// The id of the background job a `poll: 0` task starts, derived from the run, the host, the
/// task's place and its rendered request (which holds the loop item), so that the same start
/// request, repeated after a dropped connection, names the same job and the host starts it
/// once. Shaped as ansible-core's (`j<digits>.<digits>`).
fn job_id(run_id: &str, host: &str, task: &Task, module: &str, params: &Value) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    for part in [
        run_id,
        host,
        &task.pos.to_string(),
        module,
        &params.to_string(),
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    let d = h.finalize();
    let a = u64::from_be_bytes(d[..8].try_into().expect("8 bytes")) % 1_000_000_000_000;
    let b = u32::from_be_bytes(d[8..12].try_into().expect("4 bytes")) % 100_000;
    format!("j{a:012}.{b}")
}

/// Which agent created outbox entries for this result, and for which handlers, if any.
pub(super) fn outbox_writer(
    r: &Result<ItemResult, (bool, String)>,
) -> Option<(ConnKey, Vec<String>)> {
    r.as_ref().ok().and_then(|i| i.outbox_written.clone())
}

/// The module `package` or `service` runs on this host, as ansible-core's actions pick it: the
/// task's `use`, else the host's `pkg_mgr` / `service_mgr` fact (None when not gathered).
fn manager_module(module: &str, params: &Map<String, Value>, scope: &Arc<Scope>) -> Option<String> {
    let fact = match module {
        "package" => "pkg_mgr",
        "service" => "service_mgr",
        _ => return None,
    };
    let given = match params.get("use") {
        Some(v) => scope.render(v).ok()?.as_str().map(str::to_lowercase),
        None => None,
    };
    match given {
        Some(m) if m != "auto" => Some(m),
        _ => scope
            .eval(&format!("ansible_facts.{fact}"))
            .ok()?
            .as_str()
            .map(str::to_string),
    }
}

/// The task's arguments rendered one at a time, so that an error names the argument as
/// ansible-core's does (`Error while resolving value for 'msg': 'y' is undefined`), which
/// playbooks look for in `msg`.
///
/// A `!vault` value still vaulted once rendered (no secret opened it) is an error here, where
/// the task uses it, as in ansible-core (`set_fact` too).
fn render_params(scope: &Arc<Scope>, params: &Value) -> Result<Value, (bool, String)> {
    let whole = |e: String| (false, format!("cannot render the parameters: {e}"));
    let Value::Object(m) = params else {
        return scope.render(params).map_err(whole);
    };
    if crate::yaml::mark::literal_of(params).is_some() {
        return scope.render(params).map_err(whole);
    }
    let mut out = Map::new();
    for (k, v) in m {
        // One argument at a time, its name rendered with it (a templated key stays one).
        let one = Value::Object(Map::from_iter([(k.clone(), v.clone())]));
        match scope.render(&one) {
            Ok(Value::Object(r)) => {
                if let Some(e) = r.values().find_map(undecryptable) {
                    return Err((
                        false,
                        format!(
                            "Error while resolving value for '{k}': Attempt to use undecryptable variable: {e}"
                        ),
                    ));
                }
                out.extend(r)
            }
            Ok(_) => return Err(whole(format!("`{k}` did not render to an argument"))),
            Err(e) => return Err((false, format!("Error while resolving value for '{k}': {e}"))),
        }
    }
    Ok(Value::Object(out))
}

/// Parameters for a module on the host, where an argument that is a non-finite float (a mark,
/// `yaml::mark::float`) is the text Python's str() gives it (`inf`, `-inf`, `nan`): what
/// Ansible's argument spec makes of a float given to a string parameter, and what a float or
/// integer parameter reads as it would (a float, an error). A float inside a list or mapping
/// stays marked.
fn agent_floats(params: Value) -> Value {
    let Value::Object(m) = params else {
        return params;
    };
    let m = m
        .into_iter()
        .map(|(k, v)| match crate::yaml::mark::float_of(&v) {
            Some(f) => (k, Value::String(crate::yaml::mark::python_str(f).into())),
            None => (k, v),
        })
        .collect();
    Value::Object(m)
}

/// Why a vaulted value left in a rendered argument could not be decrypted, if one is.
fn undecryptable(v: &Value) -> Option<String> {
    if let Some(text) = crate::yaml::mark::vault_text(v) {
        return crate::vault::decrypt_installed(text).err();
    }
    match v {
        Value::Array(a) => a.iter().find_map(undecryptable),
        Value::Object(m) => m.values().find_map(undecryptable),
        _ => None,
    }
}

/// The task's `environment`, each level rendered and merged in order (outermost first, inner
/// names winning), as ansible-core does.
fn render_environment<'e>(
    scope: &Arc<Scope>,
    levels: impl Iterator<Item = &'e EnvPart>,
) -> Result<Map<String, Value>, String> {
    let mut env = Map::new();
    for level in levels {
        let raw = match level {
            EnvPart::Map(m) => Value::Object(m.clone()),
            EnvPart::Template(t) => Value::String(t.clone()),
        };
        match scope.render(&raw) {
            Ok(Value::Object(m)) => env.extend(m),
            // As ansible-core: a level that gives no mapping is left out, with a warning.
            Ok(other) => scope.warn(format!(
                "could not parse environment value, skipping: `environment` gave {}",
                display(&other)
            )),
            Err(e) => return Err(format!("cannot render `environment`: {e}")),
        }
    }
    Ok(env)
}
