//! The one place that maps module names (`copy`, `ansible.builtin.copy`) to module implementations.

use crate::account::{getent, group, user};
use crate::service::{auto, facts, systemd, sysv};
use crate::{
    apt, blockinfile, command, copy, file, lineinfile, parse_params, run_hooked, stat, Ctx, Module,
};
use crate::{ModuleError, Outcome};
use serde_json::Value;

/// Modules that run inside the agent on the host (the controller's are `CONTROLLER_MODULES`).
pub const AGENT_MODULES: &[&str] = &[
    "file",
    "copy",
    "lineinfile",
    "blockinfile",
    "stat",
    "command",
    "shell",
    "service",
    "systemd_service",
    "systemd",
    "sysvinit",
    "service_facts",
    "apt",
    "package",
    "dpkg_selections",
    "debconf",
    "package_facts",
    "user",
    "group",
    "getent",
    "sysctl",
    "hostname",
    "timezone",
    "cron",
    "mount",
    "get_url",
    "uri",
    "find",
    "slurp",
    "tempfile",
    "wait_for",
    "fetch",
    "apt_repository",
    "deb822_repository",
    "apt_key",
    "dnf",
    "yum",
    "replace",
    "ini_file",
    "pam_limits",
    "authorized_key",
    "git",
    "unarchive",
    "raw",
    "script",
    "known_hosts",
    "ping",
];

/// Modules the controller runs itself (`template` becomes a `copy` of rendered content).
pub const CONTROLLER_MODULES: &[&str] = &[
    "template",
    "debug",
    "assert",
    "set_fact",
    "fail",
    "gather_facts",
    "pause",
    "group_by",
    "add_host",
];

/// Every module name the loader accepts, in their short form: the agent's and the controller's.
pub fn all_modules() -> impl Iterator<Item = &'static str> {
    AGENT_MODULES.iter().chain(CONTROLLER_MODULES).copied()
}

/// Modules Ansible keeps in collections, by the FQCN a playbook may use for them. (Their short
/// names resolve through `all_modules`, as Ansible's default collection search does.)
const COLLECTION_MODULES: &[(&str, &str)] = &[
    ("ansible.posix.sysctl", "sysctl"),
    ("ansible.posix.mount", "mount"),
    ("ansible.posix.authorized_key", "authorized_key"),
    ("community.general.timezone", "timezone"),
    ("community.general.ini_file", "ini_file"),
    ("community.general.pam_limits", "pam_limits"),
];

/// `ansible.builtin.copy` → `copy`, `ansible.posix.sysctl` → `sysctl`; unknown names → None.
pub fn canonical_name(name: &str) -> Option<&'static str> {
    if let Some((_, short)) = COLLECTION_MODULES.iter().find(|(fqcn, _)| *fqcn == name) {
        return Some(short);
    }
    let short = name
        .strip_prefix("ansible.builtin.")
        .or_else(|| name.strip_prefix("ansible.legacy."))
        .unwrap_or(name);
    all_modules().find(|m| *m == short)
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
        "service" => check::<auto::Service>(params),
        "systemd_service" | "systemd" => check::<systemd::SystemdService>(params),
        "sysvinit" => check::<sysv::Sysvinit>(params),
        "service_facts" => check::<facts::ServiceFacts>(params),
        "apt" => check::<apt::Apt>(params),
        "package" => crate::package::check(params),
        "dpkg_selections" => check::<crate::dpkg_selections::DpkgSelections>(params),
        "debconf" => check::<crate::debconf::Debconf>(params),
        "package_facts" => check::<crate::package_facts::PackageFacts>(params),
        "user" => check::<user::User>(params),
        "group" => check::<group::Group>(params),
        "getent" => check::<getent::Getent>(params),
        "sysctl" => check::<crate::system::sysctl::Sysctl>(params),
        "hostname" => check::<crate::system::hostname::Hostname>(params),
        "timezone" => check::<crate::system::timezone::Timezone>(params),
        "cron" => check::<crate::system::cron::Cron>(params),
        "mount" => check::<crate::system::mount::Mount>(params),
        "get_url" => check::<crate::http::get_url::GetUrl>(params),
        "uri" => check::<crate::http::uri::Uri>(params),
        "find" => check::<crate::find::Find>(params),
        "slurp" => check::<crate::slurp::Slurp>(params),
        "tempfile" => check::<crate::tempfile::TempFile>(params),
        "wait_for" => check::<crate::wait_for::WaitFor>(params),
        "fetch" => check::<crate::fetch::Fetch>(params),
        "apt_repository" => check::<crate::apt_repository::AptRepository>(params),
        "deb822_repository" => check::<crate::deb822_repository::Deb822Repository>(params),
        "apt_key" => check::<crate::apt_key::AptKey>(params),
        "dnf" | "yum" => check::<crate::dnf::Dnf>(params),
        "replace" => check::<crate::replace::Replace>(params),
        "ini_file" => check::<crate::ini_file::IniFile>(params),
        "pam_limits" => check::<crate::pam_limits::PamLimits>(params),
        "authorized_key" => check::<crate::authorized_key::AuthorizedKey>(params),
        "git" => check::<crate::git::Git>(params),
        "unarchive" => check::<crate::unarchive::Unarchive>(params),
        "raw" => check::<crate::raw::Raw>(params),
        "script" => check::<crate::script::Script>(params),
        "known_hosts" => check::<crate::known_hosts::KnownHosts>(params),
        "ping" => check::<crate::ping::Ping>(params),
        _ => Ok(()),
    }
}

/// Run an agent module by its canonical name.
pub fn run_module(name: &str, params: &Value, ctx: &Ctx) -> Result<Outcome, ModuleError> {
    run_module_hooked(name, params, ctx, &mut || Ok(()))
}

/// Run an agent module, calling `before_apply` between a non-empty plan and its apply.
pub fn run_module_hooked(
    name: &str,
    params: &Value,
    ctx: &Ctx,
    before_apply: &mut dyn FnMut() -> Result<(), ModuleError>,
) -> Result<Outcome, ModuleError> {
    match name {
        "file" => run_hooked::<file::File>(params, ctx, before_apply),
        "copy" => run_hooked::<copy::Copy>(params, ctx, before_apply),
        "lineinfile" => run_hooked::<lineinfile::LineInFile>(params, ctx, before_apply),
        "blockinfile" => run_hooked::<blockinfile::BlockInFile>(params, ctx, before_apply),
        "stat" => run_hooked::<stat::Stat>(params, ctx, before_apply),
        "command" => run_hooked::<command::Command>(params, ctx, before_apply),
        "shell" => run_hooked::<command::Shell>(params, ctx, before_apply),
        "service" => run_hooked::<auto::Service>(params, ctx, before_apply),
        "systemd_service" | "systemd" => {
            run_hooked::<systemd::SystemdService>(params, ctx, before_apply)
        }
        "sysvinit" => run_hooked::<sysv::Sysvinit>(params, ctx, before_apply),
        "service_facts" => run_hooked::<facts::ServiceFacts>(params, ctx, before_apply),
        "apt" => run_hooked::<apt::Apt>(params, ctx, before_apply),
        "package" => crate::package::run(params, ctx, before_apply),
        "dpkg_selections" => {
            run_hooked::<crate::dpkg_selections::DpkgSelections>(params, ctx, before_apply)
        }
        "debconf" => run_hooked::<crate::debconf::Debconf>(params, ctx, before_apply),
        "package_facts" => {
            run_hooked::<crate::package_facts::PackageFacts>(params, ctx, before_apply)
        }
        "user" => run_hooked::<user::User>(params, ctx, before_apply),
        "group" => run_hooked::<group::Group>(params, ctx, before_apply),
        "getent" => run_hooked::<getent::Getent>(params, ctx, before_apply),
        "sysctl" => run_hooked::<crate::system::sysctl::Sysctl>(params, ctx, before_apply),
        "hostname" => run_hooked::<crate::system::hostname::Hostname>(params, ctx, before_apply),
        "timezone" => run_hooked::<crate::system::timezone::Timezone>(params, ctx, before_apply),
        "cron" => run_hooked::<crate::system::cron::Cron>(params, ctx, before_apply),
        "mount" => run_hooked::<crate::system::mount::Mount>(params, ctx, before_apply),
        "get_url" => run_hooked::<crate::http::get_url::GetUrl>(params, ctx, before_apply),
        "uri" => run_hooked::<crate::http::uri::Uri>(params, ctx, before_apply),
        "find" => run_hooked::<crate::find::Find>(params, ctx, before_apply),
        "slurp" => run_hooked::<crate::slurp::Slurp>(params, ctx, before_apply),
        "tempfile" => run_hooked::<crate::tempfile::TempFile>(params, ctx, before_apply),
        "wait_for" => run_hooked::<crate::wait_for::WaitFor>(params, ctx, before_apply),
        // The host's half; the controller writes the file (src/engine/actions/fetch.rs).
        "fetch" => run_hooked::<crate::fetch::Fetch>(params, ctx, before_apply),
        "apt_repository" => {
            run_hooked::<crate::apt_repository::AptRepository>(params, ctx, before_apply)
        }
        "deb822_repository" => {
            run_hooked::<crate::deb822_repository::Deb822Repository>(params, ctx, before_apply)
        }
        "apt_key" => run_hooked::<crate::apt_key::AptKey>(params, ctx, before_apply),
        "dnf" | "yum" => run_hooked::<crate::dnf::Dnf>(params, ctx, before_apply),
        "replace" => run_hooked::<crate::replace::Replace>(params, ctx, before_apply),
        "ini_file" => run_hooked::<crate::ini_file::IniFile>(params, ctx, before_apply),
        "pam_limits" => run_hooked::<crate::pam_limits::PamLimits>(params, ctx, before_apply),
        "authorized_key" => {
            run_hooked::<crate::authorized_key::AuthorizedKey>(params, ctx, before_apply)
        }
        "git" => run_hooked::<crate::git::Git>(params, ctx, before_apply),
        "unarchive" => run_hooked::<crate::unarchive::Unarchive>(params, ctx, before_apply),
        "raw" => run_hooked::<crate::raw::Raw>(params, ctx, before_apply),
        "script" => run_hooked::<crate::script::Script>(params, ctx, before_apply),
        "known_hosts" => run_hooked::<crate::known_hosts::KnownHosts>(params, ctx, before_apply),
        "ping" => run_hooked::<crate::ping::Ping>(params, ctx, before_apply),
        other => Err(ModuleError::Params(format!(
            "module `{other}` does not run on the host"
        ))),
    }
}
