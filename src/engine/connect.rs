//! Which agent a task runs through: the host's connection spec (or, with `delegate_to`, the
//! delegated host's), and the agent from the pool, started with this run's `Begin`.

use super::state::{HostState, PlayCtx, SpecKey};
use super::{display, playbook_scope, var_src, Shared};
use crate::connection::pool::{self, ConnKey};
use crate::connection::spec;
use crate::connection::{AgentConn, ConnSpec};
use crate::playbook::{Play, Task};
use crate::vars::precedence::VarMaps;
use crate::vars::{Layer, Scope};
use fixpoint_agent::protocol::Request;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

impl Shared<'_> {
    /// The connection spec for a host, from its (rendered) connection variables. Computed
    /// once per host and play (and `become` keywords) when no task can change it, which is
    /// when it comes from the inventory, play vars and `-e` as written (`spec::fixed_in`);
    /// otherwise for each task, from whichever map sets each variable (a task's `vars:`,
    /// `set_fact`...).
    pub(super) fn conn_spec(
        &self,
        h: &HostState,
        ctx: &PlayCtx<'_>,
        task: Option<&Task>,
    ) -> Result<ConnSpec, String> {
        let key: SpecKey = (
            std::ptr::from_ref(ctx.play) as usize,
            task.and_then(|t| t.become_),
            task.and_then(|t| t.become_user.clone()),
            task.and_then(|t| t.become_method.clone()),
            task.map(|t| t.conn.clone()),
        );
        // Where the connection variables come from is read from the scope's maps, without
        // building the scope: on the cached path (every task after the first) none is needed.
        let maps = VarMaps::new(self.cfg, ctx.vars(), var_src(task), h.vars());
        // The variables' half is memoised per host: it looks up every connection variable in
        // every map (a few hundred hash lookups), and the maps rarely change between tasks.
        let fixed = spec::keywords_fixed(ctx.play, task, self.cfg)
            && h.conn_vars_fixed.get_or(
                &maps,
                &[&h.inv_vars, &ctx.play.vars, &self.cfg.extra_vars],
                || spec::vars_fixed(&h.inv_vars, |k| maps.defining_map(k), ctx.play, self.cfg),
            );
        if fixed {
            let cache = h.spec_cache.lock().expect("spec cache");
            if let Some((k, spec)) = &*cache {
                if *k == key {
                    return Ok(spec.clone());
                }
            }
        }
        let scope = self.scope(ctx, task, h);
        let spec = spec::from_vars(
            &h.name,
            &scope,
            |k| maps.defining_map(k).is_some(),
            ctx.play,
            task,
            self.cfg,
        )?;
        if fixed {
            *h.spec_cache.lock().expect("spec cache") = Some((key, spec.clone()));
        }
        Ok(spec)
    }

    /// The connection a task runs through: the host's own, or with `delegate_to` the
    /// delegated host's (its connection variables; the task keeps the original host's vars).
    pub(super) fn task_conn_spec(
        &self,
        h: &HostState,
        ctx: &PlayCtx<'_>,
        task: &Task,
        scope: &Arc<Scope>,
    ) -> Result<ConnSpec, String> {
        let Some(raw) = &task.delegate_to else {
            return self.conn_spec(h, ctx, Some(task));
        };
        let target = display(
            &scope
                .render(&json!(raw))
                .map_err(|e| format!("cannot render `delegate_to`: {e}"))?,
        );
        if target == h.name {
            return self.conn_spec(h, ctx, Some(task));
        }
        // A name the inventory lacks is a host made up from it, as in ansible-core: reached
        // at that name, or reported unreachable.
        let inv_vars = self.inventory.delegated_host_vars(&target);
        let delegated = HostState::new(&target, Arc::new(inv_vars));
        self.conn_spec(&delegated, ctx, Some(task))
    }

    /// The host's agent for this spec's become user, started on first use. A new agent opens
    /// the host's state directory and takes the run lock before it does anything else.
    /// Errors say whether the host is unreachable (true) or failed (false).
    pub(super) async fn conn<'h>(
        &self,
        h: &'h mut HostState,
        spec: &ConnSpec,
        ctx: &PlayCtx<'_>,
    ) -> Result<&'h mut AgentConn, (bool, String)> {
        self.conn_sending(h, spec, ctx, &mut None).await
    }

    /// `conn`, and an agent it starts gets `first` (a `Batch`) in the bytes that start it,
    /// right behind `Begin`, which saves the batch a round trip: `first` is taken then (see
    /// `pool::get_or_start`), and left for the caller to send otherwise.
    pub(super) async fn conn_sending<'h>(
        &self,
        h: &'h mut HostState,
        spec: &ConnSpec,
        ctx: &PlayCtx<'_>,
        first: &mut Option<Request>,
    ) -> Result<&'h mut AgentConn, (bool, String)> {
        let key = conn_key(h, spec);
        let begin = || {
            let req = Request::Begin {
                run_id: self.run_id.to_string(),
                playbook: playbook_scope(ctx.book),
                state_dir: spec.state_dir.clone(),
                lock_timeout_secs: self.cfg.lock_timeout,
                retention_days: journal_retention(ctx.play),
                notices: self.progress.enabled(),
                host: h.name.clone(),
            };
            // The agent may wait for another run's lock before it answers. `--lock-timeout`
            // is any number of seconds: one too far to add up means no deadline.
            let timeout = self
                .cfg
                .connect_timeout
                .saturating_add(Duration::from_secs(self.cfg.lock_timeout));
            (req, timeout)
        };
        // The host's status line says what starting the agent waits for.
        let host = h.name.clone();
        let waiting = |what: Option<&str>| match what {
            Some(w) => self.progress.waiting(&host, w.to_string()),
            None => self.progress.resumed(&host),
        };
        // Boxed: starting a connection is a large future, and every task's future would
        // otherwise be as large (see `run_item`).
        let conn = Box::pin(pool::get_or_start(
            &mut h.conns,
            key,
            spec,
            self.binary,
            pool::Opening { begin, first },
            &mut h.pending,
            &waiting,
        ))
        .await?;
        conn.count_into(&h.round_trips);
        Ok(conn)
    }
}

impl Shared<'_> {
    /// `scope` with ansible-core's `ansible_delegated_vars` when `task` is delegated: the
    /// delegated host's variables as `hostvars` has them (a host the inventory lacks: the
    /// variables it gets from there) under its name, with `inventory_hostname` the task's own
    /// host, as `when` and the task's arguments see them.
    pub(super) fn with_delegated_vars(
        &self,
        play: &Play,
        task: &Task,
        scope: &Arc<Scope>,
    ) -> Arc<Scope> {
        let Some(raw) = &task.delegate_to else {
            return scope.clone();
        };
        // A `delegate_to` that does not render fails the task where its connection is
        // worked out (`task_conn_spec`).
        let Ok(target) = scope.render(&json!(raw)).map(|v| display(&v)) else {
            return scope.clone();
        };
        let ctx = scope.ctx();
        let known = ctx
            .get_attr("hostvars")
            .and_then(|hv| hv.get_item(&minijinja::Value::from(target.as_str())))
            .ok()
            .filter(|v| !v.is_undefined())
            .and_then(|v| serde_json::to_value(v).ok());
        let mut vars = match known {
            Some(Value::Object(m)) => m,
            _ => {
                let raw = Value::Object(self.inventory.delegated_host_vars(&target));
                match scope.render(&raw) {
                    Ok(Value::Object(m)) => m,
                    _ => raw.as_object().cloned().unwrap_or_default(),
                }
            }
        };
        let own = ctx.get_attr("inventory_hostname").ok();
        let own = own.and_then(|v| serde_json::to_value(v).ok());
        vars.insert("inventory_hostname".into(), own.unwrap_or_default());
        // As ansible-core fills them in when it works out the delegated connection: its
        // address is its name, its port the default, its user the `remote_user` keyword's,
        // unless its variables say otherwise.
        let transport = match vars.get("ansible_connection") {
            Some(Value::String(c)) => c.clone(),
            _ => "ssh".into(),
        };
        let fill = |vars: &mut Map<String, Value>, names: [&str; 3], value: Value| {
            if !names.iter().any(|n| vars.contains_key(*n)) {
                vars.insert(names[2].into(), value);
            }
        };
        let via = |what: &str| format!("ansible_{transport}_{what}");
        let (host, port, user) = (via("host"), via("port"), via("user"));
        fill(
            &mut vars,
            [&host, "ansible_ssh_host", "ansible_host"],
            json!(target),
        );
        fill(
            &mut vars,
            [&port, "ansible_ssh_port", "ansible_port"],
            Value::Null,
        );
        let keyword = task
            .conn
            .remote_user
            .as_ref()
            .or(play.conn.remote_user.as_ref());
        let keyword = keyword.and_then(|u| scope.render(&json!(u)).ok());
        fill(
            &mut vars,
            [&user, "ansible_ssh_user", "ansible_user"],
            keyword.unwrap_or_default(),
        );
        let mut layer = Map::new();
        layer.insert(
            "ansible_delegated_vars".into(),
            Value::Object(Map::from_iter([(target, Value::Object(vars))])),
        );
        scope.with(Layer::data(layer))
    }
}

impl Shared<'_> {
    /// Start the SSH handshake of the host's agent for `task` in the background when it has
    /// none yet (`connection::open_ahead`), so that the controller prepares the host's first
    /// batch meanwhile. A delegated task's agent is left to start when it runs.
    pub(super) fn open_ahead(&self, h: &HostState, ctx: &PlayCtx<'_>, task: &Task) {
        if task.delegate_to.is_some() {
            return;
        }
        if let Ok(spec) = self.conn_spec(h, ctx, Some(task)) {
            if !h.conns.contains_key(&conn_key(h, &spec)) {
                crate::connection::open_ahead(&spec);
            }
        }
    }
}

/// The agent a spec reaches, among the host's agents.
pub(super) fn conn_key(h: &HostState, spec: &ConnSpec) -> ConnKey {
    pool::key(&h.name, spec)
}

/// `journal_retention` (days) from the play's vars, default 90.
fn journal_retention(play: &Play) -> u64 {
    match play.vars.get("journal_retention") {
        Some(Value::Number(n)) => n.as_u64().unwrap_or(90),
        Some(Value::String(s)) => s.trim().parse().unwrap_or(90),
        _ => 90,
    }
}
