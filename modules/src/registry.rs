//! The one place that maps module names (`copy`, `ansible.builtin.copy`) to module implementations.

use crate::{blockinfile, command, copy, file, lineinfile, parse_params, run, stat, Ctx, Module};
use crate::{ModuleError, Outcome};
use serde_json::Value;

/// Modules that run inside the agent on the host. The controller runs the others
/// (`debug`, `assert`, `set_fact`, `fail`) and turns `template` into a `copy` of rendered content.
pub const AGENT_MODULES: &[&str] = &[
    "file",
    "copy",
    "lineinfile",
    "blockinfile",
    "stat",
    "command",
    "shell",
];

/// Every module name the loader accepts, in their short form.
pub const ALL_MODULES: &[&str] = &[
    "file",
    "copy",
    "template",
    "lineinfile",
    "blockinfile",
    "stat",
    "command",
    "shell",
    "debug",
    "assert",
    "set_fact",
    "fail",
];

/// `ansible.builtin.copy` → `copy`; unknown names → None.
pub fn canonical_name(name: &str) -> Option<&'static str> {
    let short = name
        .strip_prefix("ansible.builtin.")
        .or_else(|| name.strip_prefix("ansible.legacy."))
        .unwrap_or(name);
    ALL_MODULES.iter().copied().find(|m| *m == short)
}

/// A parameter problem, with the dotted path of the offending field (`mode`, `argv[2]`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{msg}", if path.is_empty() || path == "." { String::new() } else { format!("parameter `{path}`: ") })]
pub struct ParamError {
    pub path: String,
    pub msg: String,
}

fn check<M: Module>(params: &Value) -> Result<(), ParamError> {
    let p: M::Params = parse_params(params)?;
    M::validate(&p).map_err(|e| ParamError {
        path: String::new(),
        msg: match e {
            ModuleError::Params(m) => m,
            other => other.to_string(),
        },
    })
}

/// Check an agent module's parameters without touching anything (used at load time).
/// Controller-side modules are checked by the controller itself; they return Ok here.
pub fn check_params(name: &str, params: &Value) -> Result<(), ParamError> {
    match name {
        "file" => check::<file::File>(params),
        "copy" => check::<copy::Copy>(params),
        "lineinfile" => check::<lineinfile::LineInFile>(params),
        "blockinfile" => check::<blockinfile::BlockInFile>(params),
        "stat" => check::<stat::Stat>(params),
        "command" => check::<command::Command>(params),
        "shell" => check::<command::Shell>(params),
        _ => Ok(()),
    }
}

/// Run an agent module by its canonical name.
pub fn run_module(name: &str, params: &Value, ctx: &Ctx) -> Result<Outcome, ModuleError> {
    match name {
        "file" => run::<file::File>(params, ctx),
        "copy" => run::<copy::Copy>(params, ctx),
        "lineinfile" => run::<lineinfile::LineInFile>(params, ctx),
        "blockinfile" => run::<blockinfile::BlockInFile>(params, ctx),
        "stat" => run::<stat::Stat>(params, ctx),
        "command" => run::<command::Command>(params, ctx),
        "shell" => run::<command::Shell>(params, ctx),
        other => Err(ModuleError::Params(format!(
            "module `{other}` does not run on the host"
        ))),
    }
}
