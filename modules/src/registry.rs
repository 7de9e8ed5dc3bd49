//! The one place that maps module names (`copy`, `ansible.builtin.copy`) to module implementations.

use crate::account::{getent, group, user};
use crate::fs::{chattr, selinux};
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
    "pip",
    "ping",
    "async_status",
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
    "validate_argument_spec",
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

/// The FQCNs of collection modules fixpoint runs natively, with their short names.
pub fn collection_modules() -> impl Iterator<Item = (&'static str, &'static str)> {
    COLLECTION_MODULES.iter().copied()
}

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

struct Check<'a>(&'a Value);

impl ModuleOp for Check<'_> {
    type Out = Result<(), ParamError>;
    fn on<M: Module>(self) -> Self::Out {
        let p: M::Params = parse_params(self.0)?;
        M::validate(&p).map_err(|e| ParamError {
            path: String::new(),
            msg: match e {
                ModuleError::Params(m) => m,
                other => other.to_string(),
            },
        })
    }
}

/// Check an agent module's parameters without touching anything (used at load time).
/// Controller-side modules are checked by the controller itself; they return Ok here.
pub fn check_params(name: &str, params: &Value) -> Result<(), ParamError> {
    match name {
        "package" => crate::package::check(params),
        _ => {
            if chattr::takes(name) {
                chattr::spec_of(params).map_err(|msg| ParamError {
                    path: String::new(),
                    msg,
                })?;
            }
            let params = chattr::without(name, params);
            dispatch(name, Check(&selinux::without(name, &params))).unwrap_or(Ok(()))
        }
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
    struct Run<'a, 'b> {
        params: &'a Value,
        ctx: &'a Ctx,
        before_apply: &'b mut dyn FnMut() -> Result<(), ModuleError>,
    }
    impl ModuleOp for Run<'_, '_> {
        type Out = Result<Outcome, ModuleError>;
        fn on<M: Module>(self) -> Self::Out {
            run_hooked::<M>(self.params, self.ctx, self.before_apply)
        }
    }
    selinux::check(params)?;
    if name == "package" {
        return crate::package::run(params, ctx, before_apply);
    }
    if chattr::takes(name) {
        chattr::spec_of(params).map_err(ModuleError::Params)?;
    }
    let own = selinux::without(name, params);
    let own = chattr::without(name, &own);
    // `remote_src` with a directory on the host: only the host can tell.
    let mut outcome = if name == "copy" && crate::copy_remote_tree::is_remote_dir(&own) {
        // Ansible sets `attributes` on each file of such a copy: not supported yet.
        if chattr::spec_of(params).ok().flatten().is_some() {
            return Err(ModuleError::failed(
                "`attributes` on a `copy` of a directory is not supported yet: set them with \
                 `file` (`recurse: true`) after the copy",
            ));
        }
        run_hooked::<crate::copy_remote_tree::CopyRemoteTree>(&own, ctx, before_apply)?
    } else {
        let run = Run {
            params: &own,
            ctx,
            before_apply: &mut *before_apply,
        };
        dispatch(name, run).unwrap_or_else(|| {
            Err(ModuleError::Params(format!(
                "module `{name}` does not run on the host"
            )))
        })?
    };
    // Ansible's `attributes`, after the module's own work (`fs/chattr.rs`).
    chattr::reconcile(name, params, ctx, &mut outcome, before_apply)?;
    Ok(outcome)
}

/// One operation over a module's implementation type, chosen by name in [`dispatch`]. (A
/// closure cannot be generic over the module type; a trait method can.)
pub trait ModuleOp {
    type Out;
    fn on<M: Module>(self) -> Self::Out;
}

/// The one table from an agent module's canonical name to its type; `None` for names that are
/// not agent modules or (`package`) that pick their type on the host.
pub fn dispatch<O: ModuleOp>(name: &str, op: O) -> Option<O::Out> {
    Some(match name {
        "file" => op.on::<file::File>(),
        "copy" => op.on::<copy::Copy>(),
        // A `copy` whose controller `src` is a directory: the controller sends it under this
        // internal name (not one a playbook can use: it is in neither module list).
        "copy_tree" => op.on::<crate::copy_tree::CopyTree>(),
        "lineinfile" => op.on::<lineinfile::LineInFile>(),
        "blockinfile" => op.on::<blockinfile::BlockInFile>(),
        "stat" => op.on::<stat::Stat>(),
        "command" => op.on::<command::Command>(),
        "shell" => op.on::<command::Shell>(),
        "service" => op.on::<auto::Service>(),
        "systemd_service" | "systemd" => op.on::<systemd::SystemdService>(),
        "sysvinit" => op.on::<sysv::Sysvinit>(),
        "service_facts" => op.on::<facts::ServiceFacts>(),
        "apt" => op.on::<apt::Apt>(),
        "dpkg_selections" => op.on::<crate::dpkg_selections::DpkgSelections>(),
        "debconf" => op.on::<crate::debconf::Debconf>(),
        "package_facts" => op.on::<crate::package_facts::PackageFacts>(),
        "user" => op.on::<user::User>(),
        "group" => op.on::<group::Group>(),
        "getent" => op.on::<getent::Getent>(),
        "sysctl" => op.on::<crate::system::sysctl::Sysctl>(),
        "hostname" => op.on::<crate::system::hostname::Hostname>(),
        "timezone" => op.on::<crate::system::timezone::Timezone>(),
        "cron" => op.on::<crate::system::cron::Cron>(),
        "mount" => op.on::<crate::system::mount::Mount>(),
        "get_url" => op.on::<crate::http::get_url::GetUrl>(),
        "uri" => op.on::<crate::http::uri::Uri>(),
        "find" => op.on::<crate::find::Find>(),
        "slurp" => op.on::<crate::slurp::Slurp>(),
        "tempfile" => op.on::<crate::tempfile::TempFile>(),
        "wait_for" => op.on::<crate::wait_for::WaitFor>(),
        // The host's half; the controller writes the file (src/engine/actions/fetch.rs).
        "fetch" => op.on::<crate::fetch::Fetch>(),
        "async_status" => op.on::<crate::async_job::AsyncStatus>(),
        "apt_repository" => op.on::<crate::apt_repository::AptRepository>(),
        "deb822_repository" => op.on::<crate::deb822_repository::Deb822Repository>(),
        "apt_key" => op.on::<crate::apt_key::AptKey>(),
        "dnf" | "yum" => op.on::<crate::dnf::Dnf>(),
        "replace" => op.on::<crate::replace::Replace>(),
        "ini_file" => op.on::<crate::ini_file::IniFile>(),
        "pam_limits" => op.on::<crate::pam_limits::PamLimits>(),
        "authorized_key" => op.on::<crate::authorized_key::AuthorizedKey>(),
        "git" => op.on::<crate::git::Git>(),
        "unarchive" => op.on::<crate::unarchive::Unarchive>(),
        "raw" => op.on::<crate::raw::Raw>(),
        "script" => op.on::<crate::script::Script>(),
        "known_hosts" => op.on::<crate::known_hosts::KnownHosts>(),
        "pip" => op.on::<crate::pip::Pip>(),
        "ping" => op.on::<crate::ping::Ping>(),
        _ => return None,
    })
}

/// The parameter names (with their aliases) an agent module's parameter struct accepts, read
/// from the struct's own `Deserialize` (the same definition `check_params` applies), or `None`
/// when the module takes other keys too (a catch-all map, or a hand-written reader).
pub fn param_names(name: &str) -> Option<Vec<&'static str>> {
    struct Names;
    impl ModuleOp for Names {
        type Out = Option<&'static [&'static str]>;
        fn on<M: Module>(self) -> Self::Out {
            crate::params::struct_fields::<M::Params>()
        }
    }
    let mut names = dispatch(name, Names).flatten()?.to_vec();
    if selinux::takes(name) {
        names.extend_from_slice(selinux::KEYS);
    }
    if chattr::takes(name) {
        names.extend_from_slice(chattr::KEYS);
    }
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_agent_module_but_package_has_a_type_and_lists_its_parameters() {
        let mut unlisted = Vec::new();
        for m in AGENT_MODULES.iter().filter(|m| **m != "package") {
            assert!(
                dispatch(m, Names).is_some(),
                "`{m}` is in AGENT_MODULES but not in dispatch"
            );
            if param_names(m).is_none() {
                unlisted.push(*m);
            }
        }
        // `user` reads unknown keys into a map to name the refused ones (see its `Params`).
        assert_eq!(
            unlisted,
            ["user"],
            "modules whose parameters cannot be listed"
        );
        let copy = param_names("copy").unwrap();
        assert!(
            copy.contains(&"dest") && copy.contains(&"content"),
            "{copy:?}"
        );
    }

    struct Names;
    impl ModuleOp for Names {
        type Out = ();
        fn on<M: Module>(self) {}
    }
}
