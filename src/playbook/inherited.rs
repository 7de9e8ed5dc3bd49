//! The keywords a play, block, role entry or import passes down to the tasks inside it
//! (`Inherited`), and the connection and `environment` keywords they share with tasks.

use super::ast::{add_tags, prepend_conditions, Conditions, RoleCtx, Task};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// `environment` as the levels that give it (play, block, role entry, task), outermost first:
/// ansible-core renders each when the task runs and merges them in order, inner names winning.
pub type Environment = Vec<EnvPart>;

/// One level's `environment`: a mapping as written (its values may be templates), or a
/// template that gives the whole mapping (`environment: "{{ proxy_env }}"`).
#[derive(Debug, Clone, PartialEq)]
pub enum EnvPart {
    Map(Map<String, Value>),
    Template(String),
}

/// The connection keywords of a play, block, role entry or task (`remote_user`, `port`,
/// `connection`), as written: each may be a template, rendered on the host when the task runs.
/// The host's connection variables (`ansible_user`, `ansible_port`, `ansible_connection`) win
/// over them, as in ansible-core.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnKeywords {
    pub remote_user: Option<String>,
    pub port: Option<String>,
    pub connection: Option<String>,
    /// `become_exe`: the sudo to run (a path or a name on the host's PATH).
    pub become_exe: Option<String>,
    /// `become_flags`: sudo flags (checked by `keywords::become_flags_of`).
    pub become_flags: Option<String>,
}

impl ConnKeywords {
    /// These keywords, each falling back to `outer`'s (an inner one wins).
    pub fn or(&self, outer: &ConnKeywords) -> ConnKeywords {
        ConnKeywords {
            remote_user: self
                .remote_user
                .clone()
                .or_else(|| outer.remote_user.clone()),
            port: self.port.clone().or_else(|| outer.port.clone()),
            connection: self.connection.clone().or_else(|| outer.connection.clone()),
            become_exe: self.become_exe.clone().or_else(|| outer.become_exe.clone()),
            become_flags: self
                .become_flags
                .clone()
                .or_else(|| outer.become_flags.clone()),
        }
    }

    /// Whether any of them is a template (then the spec depends on the host's variables).
    pub fn templated(&self) -> bool {
        [
            &self.remote_user,
            &self.port,
            &self.connection,
            &self.become_exe,
            &self.become_flags,
        ]
        .into_iter()
        .flatten()
        .any(|s| fixpoint_modules::params::is_template(s))
    }
}

/// Keywords of an enclosing block, role entry or import, inherited by every task inside.
#[derive(Debug, Clone, Default)]
pub struct Inherited {
    pub when: Conditions,
    pub tags: Vec<String>,
    pub vars: Map<String, Value>,
    pub become_: Option<bool>,
    pub become_user: Option<String>,
    pub become_method: Option<String>,
    pub ignore_errors: Option<bool>,
    pub no_log: bool,
    pub check_mode: Option<bool>,
    pub diff: Option<bool>,
    /// Keywords given as templates (`ignore_errors: "{{ x }}"`, `throttle`), by keyword.
    pub templated: BTreeMap<&'static str, String>,
    pub environment: Environment,
    pub delegate_to: Option<String>,
    pub run_once: Option<bool>,
    pub conn: ConnKeywords,
    pub any_errors_fatal: Option<bool>,
    pub ignore_unreachable: Option<bool>,
    /// `throttle` written as a number (0: no bound); a template is in `templated`.
    pub throttle: Option<usize>,
    /// `collections`: where a short module name is looked for (the innermost list wins).
    pub collections: Vec<String>,
    /// A block's `notify`: for its tasks that name none of their own (as in Ansible).
    pub notify: Vec<String>,
    pub role: Option<Arc<RoleCtx>>,
    /// `module_defaults` of the enclosing levels, merged (`playbook::defaults`): by action
    /// (`defaults::action_key`), the innermost level's entry.
    pub module_defaults: Map<String, Value>,
}

impl Inherited {
    /// Push these keywords down into `t`: conditions come first, tags and variables merge,
    /// and a value the task sets itself is kept.
    pub(crate) fn apply(&self, t: &mut Task) {
        prepend_conditions(&mut t.when, &self.when);
        add_tags(&mut t.tags, &self.tags);
        if !self.vars.is_empty() {
            let mut vars = self.vars.clone();
            vars.extend(t.vars.iter().map(|(k, v)| (k.clone(), v.clone())));
            t.vars = Arc::new(vars);
        }
        t.become_ = t.become_.or(self.become_);
        t.become_user = t.become_user.take().or_else(|| self.become_user.clone());
        t.become_method = t
            .become_method
            .take()
            .or_else(|| self.become_method.clone());
        t.ignore_errors = t.ignore_errors || self.ignore_errors.unwrap_or(false);
        t.no_log |= self.no_log;
        t.check_mode = t.check_mode.or(self.check_mode);
        t.diff = t.diff.or(self.diff);
        for (k, tmpl) in &self.templated {
            // A value the task writes itself wins (`ignore_errors`/`no_log` are settled by the
            // task parser, which knows whether the task wrote them).
            let own = match *k {
                "check_mode" => t.check_mode.is_some(),
                "diff" => t.diff.is_some(),
                "become" => t.become_.is_some(),
                "throttle" => t.throttle.is_some(),
                "ignore_unreachable" => t.ignore_unreachable.is_some(),
                "run_once" => t.run_once,
                _ => false,
            };
            if !own {
                t.templated.entry(k).or_insert_with(|| tmpl.clone());
            }
        }
        let mut env = self.environment.clone();
        env.extend(std::mem::take(&mut t.environment));
        t.environment = env;
        t.run_once = t.run_once || self.run_once.unwrap_or(false);
        t.delegate_to = t.delegate_to.take().or_else(|| self.delegate_to.clone());
        t.conn = t.conn.or(&self.conn);
        t.any_errors_fatal = t.any_errors_fatal.or(self.any_errors_fatal);
        if !t.templated.contains_key("ignore_unreachable") {
            t.ignore_unreachable = t.ignore_unreachable.or(self.ignore_unreachable);
        }
        if !t.templated.contains_key("throttle") {
            t.throttle = t.throttle.or(self.throttle);
        }
        if t.notify.is_empty() {
            t.notify = self.notify.clone();
        }
        if t.role.is_none() {
            t.role = self.role.clone();
        }
    }
}
