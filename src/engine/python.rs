//! One attempt of a task whose module runs as Ansible's own Python code (`crate::pymod`): the
//! arguments as Ansible hands them to a module, the zip sent once per host (the agent caches it
//! by hash), and the module's answer turned into an item result.

use super::actions::upload::Upload;
use super::connect::conn_key;
use super::handlers::notify_spec;
use super::result::ItemResult;
use super::state::{HostState, PlayCtx};
use super::Shared;
use crate::playbook::Task;
use crate::pymod::{self, PyModule};
use crate::vars::Scope;
use fixpoint_agent::protocol::{PythonRun, Request, Response};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// The ansible-core version a module is told it runs under (`_ansible_version`): the one whose
/// behaviour fixpoint follows.
pub(crate) const ANSIBLE_VERSION: &str = "2.19.14";

impl Shared<'_> {
    /// Run `py` with the rendered `params` on the host.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn run_python(
        &self,
        ctx: &PlayCtx<'_>,
        task: &Task,
        h: &mut HostState,
        scope: &Arc<Scope>,
        py: &PyModule,
        params: Value,
        environment: Map<String, Value>,
    ) -> Result<ItemResult, (bool, String)> {
        let mut params = params;
        if let Value::Object(m) = &params {
            let local = task
                .delegate_to
                .as_deref()
                .is_some_and(|d| d == "localhost" || d == "127.0.0.1");
            pymod::doc::check_action(py, m, local).map_err(|e| (false, e.msg))?;
        }
        // `package`: ansible-core's action plugin runs the module of the host's package
        // manager (`use:`, else the `pkg_mgr` fact); so does this.
        let backend;
        let py = if py.fqn == "ansible.modules.package" {
            backend = self.package_backend(ctx, scope, &mut params)?;
            backend.as_ref()
        } else if py.fqn == "ansible.modules.service" && pymod::doc::systemd_only(&params) {
            // ansible-core's `service` plugin runs `systemd` on a systemd host, without the
            // options systemd lacks; options only systemd has mean such a host.
            if let Value::Object(m) = &mut params {
                for k in ["pattern", "runlevel", "sleep", "arguments", "args", "use"] {
                    m.remove(k);
                }
            }
            backend = match pymod::find("systemd", &ctx.play.dir) {
                Ok(Some(m)) => m,
                _ => return Err((false, "`service`: the `systemd` module is not found".into())),
            };
            backend.as_ref()
        } else {
            py
        };
        let check = self.effective_check(Some(task));
        let user_diff = task.diff.unwrap_or(self.cfg.diff);
        let diff = user_diff || self.cfg.twice;
        let pkg = pymod::package::package(py, &ctx.play.dir).map_err(|e| (false, e))?;
        let mut args = match params {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        // What ansible-core's action base tells every module about the run.
        for (k, v) in [
            ("_ansible_check_mode", json!(check)),
            ("_ansible_no_log", json!(task.no_log)),
            ("_ansible_debug", json!(false)),
            ("_ansible_diff", json!(diff)),
            ("_ansible_verbosity", json!(self.cfg.verbosity)),
            ("_ansible_version", json!(ANSIBLE_VERSION)),
            ("_ansible_module_name", json!(py.name)),
            ("_ansible_syslog_facility", json!("LOG_USER")),
            (
                "_ansible_selinux_special_fs",
                json!(["fuse", "nfs", "vboxsf", "ramfs", "9p", "vfat"]),
            ),
            ("_ansible_socket", Value::Null),
            ("_ansible_shell_executable", json!("/bin/sh")),
            ("_ansible_keep_remote_files", json!(false)),
            // No per-task temp dir: the module makes (and removes) its own under remote_tmp.
            ("_ansible_tmpdir", Value::Null),
            ("_ansible_remote_tmp", json!("~/.ansible/tmp")),
            ("_ansible_ignore_unknown_opts", json!(false)),
            ("_ansible_target_log_info", Value::Null),
            ("_ansible_tracebacks_for", json!([])),
        ] {
            args.insert(k.into(), v);
        }
        let interpreter = if scope.defines("ansible_python_interpreter") {
            match scope.eval("ansible_python_interpreter") {
                Ok(Value::String(s)) if !s.is_empty() => Some(s),
                Ok(Value::Null) | Ok(Value::String(_)) => None,
                Ok(other) => Some(other.to_string()),
                Err(e) => {
                    return Err((
                        false,
                        format!("cannot render `ansible_python_interpreter`: {e}"),
                    ))
                }
            }
        } else {
            None
        };
        let notify = notify_spec(ctx, task, scope, check).map_err(|e| (false, e))?;
        let spec = self
            .task_conn_spec(h, ctx, task, scope)
            .map_err(|e| (false, e))?;
        let req = Request::RunPython(Box::new(PythonRun {
            module: py.name.clone(),
            fqn: py.fqn.clone(),
            zip_sha256: pkg.sha256.clone(),
            zip_size: pkg.size,
            interpreter,
            bootstrap: pymod::BOOTSTRAP.to_string(),
            stdin: json!({ "ANSIBLE_MODULE_ARGS": args }),
            env: environment,
            check,
            notify,
        }));
        let timeout = task.timeout.map(Duration::from_secs);
        let conn = self.conn(h, &spec, ctx).await?;
        let mut answer = conn.call(&req, timeout).await;
        let mut note = None;
        // First use on this host (or a new version of the module): send the zip, ask again.
        if let Ok(Response::NeedContent { sha256, .. }) = &answer {
            if *sha256 == pkg.sha256 {
                let up = Upload {
                    path: pkg.zip.clone(),
                    sha256: pkg.sha256.clone(),
                    sha1: None,
                    size: pkg.size,
                    rel: None,
                };
                answer = match up.send(conn, timeout).await {
                    Ok(Ok(n)) => {
                        note = Some(format!("module code sent: {n} bytes"));
                        conn.call(&req, timeout).await
                    }
                    Ok(Err(msg)) => Ok(Response::Failed {
                        msg,
                        result: Map::new(),
                    }),
                    Err(e) => Err(e),
                };
            }
        }
        let key = conn_key(h, &spec);
        match answer {
            Ok(Response::PyDone {
                stdout,
                stderr,
                rc,
                interpreter: _,
                outbox_written,
            }) => {
                // A diff the module returns unasked is part of its result, as in Ansible (ini_file,
                // yum_repository); one asked for only by --twice is taken out again.
                let r = pymod::result::convert(&stdout, &stderr, rc, user_diff || !diff);
                for w in &r.warnings {
                    scope.warn(w.clone());
                }
                let mut item = if r.failed {
                    let msg = r
                        .outcome
                        .msg
                        .clone()
                        .unwrap_or_else(|| format!("module `{}` failed", py.name));
                    let mut result = r.outcome.result;
                    if r.outcome.changed {
                        result.insert("changed".into(), json!(true));
                    }
                    ItemResult::failed(msg, result)
                } else {
                    ItemResult::done(r.outcome)
                };
                item.note = note;
                item.outbox_written =
                    (!outbox_written.is_empty()).then(|| (key.clone(), outbox_written));
                item.delegated_to = key.0;
                Ok(item)
            }
            Ok(Response::Failed { msg, result }) => Ok(ItemResult {
                delegated_to: key.0,
                ..ItemResult::failed(
                    format!("module `{}` (Ansible's Python code): {msg}", py.name),
                    result,
                )
            }),
            Ok(other) => Err((
                false,
                format!("unexpected answer from the agent: {other:?}"),
            )),
            Err(e) => {
                h.conns.remove(&key);
                Err((false, e.to_string()))
            }
        }
    }

    /// The module `package` stands for on this host.
    fn package_backend(
        &self,
        ctx: &PlayCtx<'_>,
        scope: &Arc<Scope>,
        params: &mut Value,
    ) -> Result<Arc<PyModule>, (bool, String)> {
        let given = params
            .as_object_mut()
            .and_then(|m| m.remove("use"))
            .and_then(|v| v.as_str().map(String::from))
            .filter(|u| u != "auto");
        let fact = || {
            ["ansible_pkg_mgr", "ansible_facts.pkg_mgr"]
                .iter()
                .find_map(|v| match scope.eval(v) {
                    Ok(Value::String(s)) if !s.is_empty() && s != "unknown" => Some(s),
                    _ => None,
                })
        };
        let Some(name) = given.or_else(fact) else {
            return Err((
                false,
                "`package` runs the module of the host's package manager, named by the \
                 `pkg_mgr` fact, which was not gathered (or is `unknown`) here: gather facts, \
                 set `use:` (e.g. `use: apt`) or the variable `ansible_pkg_mgr`"
                    .into(),
            ));
        };
        match pymod::find(&name, &ctx.play.dir) {
            Ok(Some(m)) => Ok(m),
            Ok(None) => Err((
                false,
                format!("`package`: no module `{name}` for this host's package manager"),
            )),
            Err(why) => Err((false, format!("`package`: {why}"))),
        }
    }
}
