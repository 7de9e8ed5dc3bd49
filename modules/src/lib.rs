//! The module contract: every module probes (read-only), plans a typed difference, and applies exactly that plan.
//!
//! The engine in this file owns the state machine, so no module can skip probing or apply in
//! check mode: `run` calls `probe`, then `plan`, and only calls `apply` when the plan is not empty
//! and the run is not a check. Modules live one per file; `registry` maps names to them; `fs`,
//! `text`, `params` and `time` hold what several modules share.

pub mod account;
pub mod apt;
pub mod apt_key;
pub mod apt_repository;
pub mod async_job;
pub mod authorized_key;
pub mod blockinfile;
pub mod capture;
pub mod children;
pub mod command;
pub mod copy;
pub mod copy_remote_tree;
pub mod copy_tree;
pub mod deb822_repository;
pub mod debconf;
pub mod dnf;
pub mod dpkg_selections;
pub mod fetch;
pub mod file;
mod file_diff;
pub mod find;
pub mod fs;
pub mod git;
pub mod http;
pub mod ini_file;
pub mod known_hosts;
pub mod lineinfile;
pub mod package;
pub mod package_facts;
pub mod pam_limits;
pub mod params;
pub mod ping;
pub mod pip;
pub mod pkg_mgr;
pub mod raw;
pub mod registry;
pub mod replace;
pub mod script;
pub mod service;
pub mod slurp;
pub mod stat;
#[cfg(test)]
mod swap_tests;
pub mod system;
pub mod tempfile;
#[cfg(test)]
mod testutil;
pub mod text;
pub mod time;
pub mod unarchive;
pub mod wait_for;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use registry::{canonical_name, check_params, run_module, run_module_hooked, ParamError};

/// What went wrong inside a module. The controller adds host and task context.
#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    /// Parameters that deserialized but do not make sense together (e.g. `state: link` without `src`).
    #[error("invalid parameters: {0}")]
    Params(String),
    /// A filesystem operation failed; the message names the path.
    #[error("{path}: {msg}")]
    Io { path: String, msg: String },
    /// `copy` of a controller file whose content the host lacks: the agent stages an upload in
    /// `dir` (see `fs::stage`), the controller sends the content, then repeats the request.
    #[error("the content {sha256} ({size} bytes) must be uploaded first")]
    NeedContent {
        dir: std::path::PathBuf,
        sha256: String,
        size: u64,
    },
    /// Like `NeedContent`, for several contents at once (a `copy` of a directory tree): each
    /// (directory, sha256, size). The agent stages them all, the controller sends them all, then
    /// repeats the request once.
    #[error("{} contents must be uploaded first", .0.len())]
    NeedContents(Vec<(std::path::PathBuf, String, u64)>),
    /// Anything else the module reports as a failure (non-zero exit, failed validation...).
    #[error("{msg}")]
    Failed {
        msg: String,
        /// Return values that are still useful on failure (rc, stdout, stderr of a command).
        result: Map<String, Value>,
    },
}

impl ModuleError {
    pub fn io(path: impl AsRef<std::path::Path>, err: impl std::fmt::Display) -> Self {
        ModuleError::Io {
            path: path.as_ref().display().to_string(),
            msg: err.to_string(),
        }
    }

    pub fn failed(msg: impl Into<String>) -> Self {
        ModuleError::Failed {
            msg: msg.into(),
            result: Map::new(),
        }
    }
}

/// One attribute of one path that changes, shown as `path: attr before → after`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct AttrChange {
    pub path: String,
    /// `state`, `mode`, `owner`, `group`, `src`, `mtime`...
    pub attr: String,
    pub before: String,
    pub after: String,
}

/// The content of one file before and after; the reporter renders it as a unified diff.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ContentDiff {
    pub path: String,
    pub before: String,
    pub after: String,
}

/// Everything a plan would change, for `--diff` and for naming the culprit under `--twice`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Diff {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attrs: Vec<AttrChange>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<ContentDiff>,
    /// What a package manager says it will do (Ansible's `prepared` diff of `apt`), shown as is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepared: Option<String>,
}

impl Diff {
    pub fn is_empty(&self) -> bool {
        self.attrs.is_empty() && self.content.is_empty() && self.prepared.is_none()
    }

    pub fn attr(
        &mut self,
        path: impl Into<String>,
        attr: &str,
        before: impl Into<String>,
        after: impl Into<String>,
    ) {
        self.attrs.push(AttrChange {
            path: path.into(),
            attr: attr.to_string(),
            before: before.into(),
            after: after.into(),
        });
    }
}

/// How the engine runs a module on this task.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Ctx {
    /// Stop after `plan`: report what would change, change nothing.
    pub check: bool,
    /// The caller wants content diffs; a module may skip reading large "before" content otherwise.
    pub diff: bool,
}

/// A typed plan: the list of actions `apply` will perform, and what they change.
/// An empty `actions` list means the target is converged and nothing will be written.
#[derive(Debug)]
pub struct Plan<A> {
    pub actions: Vec<A>,
    pub diff: Diff,
    /// Return values known from the probe (path, mode, state...), reported as-is when nothing changes.
    pub result: Map<String, Value>,
    /// Optional human message (e.g. "skipped, since /x exists").
    pub msg: Option<String>,
}

impl<A> Plan<A> {
    pub fn new() -> Self {
        Plan {
            actions: Vec::new(),
            diff: Diff::default(),
            result: Map::new(),
            msg: None,
        }
    }
}

impl Plan<std::convert::Infallible> {
    /// The plan of a module that only reads (`Action = Infallible`): no action, the probe's
    /// return values as the result.
    pub fn report(state: &Map<String, Value>) -> Self {
        Plan {
            result: state.clone(),
            ..Plan::new()
        }
    }

    /// `apply` of a module that only reads: its plan never holds an action, so the engine never
    /// calls it; the empty match proves that.
    pub fn nothing_to_apply(&self) -> Result<Map<String, Value>, ModuleError> {
        match self.actions.first() {
            Some(never) => match *never {},
            None => Ok(Map::new()),
        }
    }
}

impl<A> Default for Plan<A> {
    fn default() -> Self {
        Self::new()
    }
}

/// The outcome of one module run, as sent back from the agent to the controller.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Outcome {
    pub changed: bool,
    #[serde(default)]
    pub diff: Diff,
    /// Ansible-compatible return values (`rc`, `stdout`, `path`, `mode`, `stat`...).
    #[serde(default)]
    pub result: Map<String, Value>,
    #[serde(default)]
    pub msg: Option<String>,
}

/// One module: three phases with types that make "apply without a plan" unrepresentable.
pub trait Module {
    /// Parameters as the playbook spells them; structs use `deny_unknown_fields`.
    type Params: DeserializeOwned;
    /// What `probe` found on the host.
    type State;
    /// One step of a plan.
    type Action;

    /// Cross-field checks that serde cannot express. Runs at load time too (on untemplated tasks).
    fn validate(_params: &Self::Params) -> Result<(), ModuleError> {
        Ok(())
    }

    /// Read the current state. Must not change anything on the host.
    fn probe(params: &Self::Params, ctx: &Ctx) -> Result<Self::State, ModuleError>;

    /// Compute the difference between `state` and the desired state.
    fn plan(
        params: &Self::Params,
        state: &Self::State,
        ctx: &Ctx,
    ) -> Result<Plan<Self::Action>, ModuleError>;

    /// Perform exactly `plan.actions`. Returns return values to merge over `plan.result`.
    fn apply(
        params: &Self::Params,
        state: Self::State,
        plan: &Plan<Self::Action>,
    ) -> Result<Map<String, Value>, ModuleError>;
}

/// Deserialize parameters, naming the offending field. A string parameter given any other
/// value takes its Python `str()`, as ansible-core's argument spec converts it.
/// How ansible-core's argument spec begins the failure of a required parameter left out.
pub const MISSING_REQUIRED: &str = "missing required arguments: ";

pub fn parse_params<P: DeserializeOwned>(params: &Value) -> Result<P, ParamError> {
    serde_path_to_error::deserialize(params::Lenient(params)).map_err(|e| {
        let path = e.path().to_string();
        let msg = e.inner().to_string();
        // A required parameter left out: ansible-core's argument spec words it so, and
        // playbooks test that message.
        let missing = msg
            .strip_prefix("missing field `")
            .and_then(|m| m.strip_suffix('`'))
            .filter(|_| path.is_empty() || path == ".");
        match missing {
            Some(name) => ParamError {
                msg: format!("{MISSING_REQUIRED}{name}"),
                path,
            },
            None => ParamError { path, msg },
        }
    })
}

/// Drive one module through probe → plan → (apply unless check or converged).
pub fn run<M: Module>(params: &Value, ctx: &Ctx) -> Result<Outcome, ModuleError> {
    run_hooked::<M>(params, ctx, &mut || Ok(()))
}

/// Like [`run`], calling `before_apply` after planning a change and before applying it: the
/// agent records durable intents there (the handler outbox), so that a run that dies during
/// `apply` still knows afterwards that the change may have happened.
pub fn run_hooked<M: Module>(
    params: &Value,
    ctx: &Ctx,
    before_apply: &mut dyn FnMut() -> Result<(), ModuleError>,
) -> Result<Outcome, ModuleError> {
    let p: M::Params = parse_params(params).map_err(|e| ModuleError::Params(e.to_string()))?;
    M::validate(&p)?;
    let state = M::probe(&p, ctx)?;
    let plan = M::plan(&p, &state, ctx)?;
    if plan.actions.is_empty() {
        return Ok(Outcome {
            changed: false,
            diff: Diff::default(),
            result: plan.result,
            msg: plan.msg,
        });
    }
    if ctx.check {
        let result = plan.result;
        let changed = take_changed(&result);
        return Ok(Outcome {
            changed,
            diff: plan.diff,
            result,
            msg: plan.msg,
        });
    }
    before_apply()?;
    let extra = M::apply(&p, state, &plan)?;
    let mut result = plan.result;
    result.extend(extra);
    let changed = take_changed(&result);
    Ok(Outcome {
        changed,
        diff: plan.diff,
        result,
        msg: plan.msg,
    })
}

/// A plan is a change unless its module says otherwise with `changed: false` in its result: a
/// step Ansible does without reporting it (refreshing apt's cache alongside packages that are
/// already installed) still has to run, so its plan is not empty, yet it is no change.
fn take_changed(result: &Map<String, Value>) -> bool {
    result
        .get("changed")
        .and_then(Value::as_bool)
        .unwrap_or(true)
}
