//! `hostname`: the host's name, with the two strategies Ansible uses on Debian-family hosts:
//! hostnamectl's static, pretty and transient names where systemd runs (Ansible's `systemd`
//! strategy, also named `debian`), and otherwise `/etc/hostname` for the permanent name and
//! `sethostname(2)` for the running one.

use super::{get_bin_path, run_c, ConfFile};
use crate::params::de_opt_string;
use crate::{ContentDiff, Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

pub struct Hostname;

/// Where the permanent name lives on Debian.
const HOSTNAME_FILE: &str = "/etc/hostname";

/// Ansible's `use` choices.
const STRATEGIES: &[&str] = &[
    "alpine", "debian", "freebsd", "generic", "macos", "macosx", "darwin", "openbsd", "openrc",
    "redhat", "sles", "solaris", "systemd",
];

/// The `use` values that name Ansible's hostnamectl strategy (its `debian` is that one too);
/// the others are strategies of other systems, refused by name.
const SYSTEMD_NAMES: &[&str] = &["debian", "systemd"];

/// hostnamectl refuses longer names; Ansible checks before it runs it.
const SYSTEMD_MAX_LEN: usize = 64;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(default, deserialize_with = "de_opt_string")]
    pub name: Option<String>,
    #[serde(default, rename = "use", deserialize_with = "de_opt_string")]
    pub strategy: Option<String>,
}

/// How the names are read and set on this host.
#[derive(Debug)]
pub enum Strategy {
    /// `/etc/hostname` and `sethostname(2)`.
    File(ConfFile),
    /// `hostnamectl` (its path): `--static`/`--pretty` for the permanent name, `--transient`
    /// for the running one, through systemd-hostnamed.
    Systemd(PathBuf),
}

#[derive(Debug)]
pub struct State {
    /// The running name (`uname -n`, or hostnamectl's transient name).
    current: String,
    /// The permanent name: `/etc/hostname` trimmed (empty when missing), or hostnamectl's static
    /// name.
    permanent: String,
    strategy: Strategy,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    SetCurrent,
    SetPermanent,
}

/// The facts Ansible returns with the new name. `running` is the host's running name then
/// (in check mode the old one): its fqdn is taken as the node name, as fixpoint's gathered
/// `ansible_fqdn` is (no resolver lookup on the host).
fn facts(name: &str, running: &str) -> Value {
    let domain = running.split_once('.').map(|(_, d)| d).unwrap_or_default();
    json!({
        "ansible_hostname": name.split('.').next().unwrap_or_default(),
        "ansible_nodename": name,
        "ansible_fqdn": running,
        "ansible_domain": domain,
    })
}

/// Run hostnamectl with these arguments; its output, trimmed. A failure is reported as Ansible
/// reports it.
fn hostnamectl(ctl: &Path, args: &[&str]) -> Result<String, ModuleError> {
    let ctl = ctl.to_string_lossy();
    let argv: Vec<&str> = std::iter::once(ctl.as_ref())
        .chain(args.iter().copied())
        .collect();
    let ran = run_c(&argv)?;
    if ran.rc != 0 {
        // Ansible's message holds the output; its result has no rc/stdout/stderr keys.
        return Err(ModuleError::failed(format!(
            "Command failed rc={}, out={}, err={}",
            ran.rc, ran.stdout, ran.stderr
        )));
    }
    Ok(ran.stdout.trim().to_string())
}

/// The running name of this host, as the kernel has it.
fn running_name() -> Result<String, ModuleError> {
    Ok(nix::unistd::gethostname()
        .map_err(|e| ModuleError::failed(format!("cannot read the host name: {e}")))?
        .to_string_lossy()
        .into_owned())
}

/// Ansible's check before each hostnamectl `set-hostname` (so check mode never fails on it).
fn check_length(name: &str) -> Result<(), ModuleError> {
    if name.chars().count() > SYSTEMD_MAX_LEN {
        return Err(ModuleError::failed(
            "name cannot be longer than 64 characters on systemd servers, try a shorter name",
        ));
    }
    Ok(())
}

impl Module for Hostname {
    type Params = Params;
    type State = State;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if p.name.is_none() {
            return Err(ModuleError::Params(
                "missing required arguments: name".into(),
            ));
        }
        if let Some(u) = p
            .strategy
            .as_deref()
            .filter(|u| !crate::params::is_template(u))
        {
            if !STRATEGIES.contains(&u) {
                return Err(ModuleError::Params(format!(
                    "value of use must be one of: {}, got: {u}",
                    STRATEGIES.join(", ")
                )));
            }
            if !SYSTEMD_NAMES.contains(&u) {
                return Err(ModuleError::Params(format!(
                    "`use: {u}` is not supported: fixpoint's hostname does Ansible's systemd \
                     strategy (`use: systemd` or `debian`, and the default where systemd runs) \
                     and, when `use` is omitted on a Debian host without systemd, its file \
                     strategy"
                )));
            }
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<State, ModuleError> {
        // Ansible's choice: `use` when given (validated to name the systemd strategy), else
        // hostnamectl on a Linux host that systemd runs, else the distribution's strategy.
        if p.strategy.is_some() || crate::service::systemd_booted() {
            let ctl = get_bin_path("hostnamectl")?;
            let current = hostnamectl(&ctl, &["--transient", "status"])?;
            let permanent = hostnamectl(&ctl, &["--static", "status"])?;
            return Ok(State {
                current,
                permanent,
                strategy: Strategy::Systemd(ctl),
            });
        }
        let family = crate::pkg_mgr::host_os_family();
        if family != "Debian" {
            return Err(ModuleError::failed(format!(
                "hostname module cannot be used on platform Linux ({family}): fixpoint's \
                 hostname does only the systemd and the Debian strategies"
            )));
        }
        let current = running_name()?;
        let file = ConfFile::probe(Path::new(HOSTNAME_FILE))?;
        let permanent = file.text.as_deref().unwrap_or_default().trim().to_string();
        Ok(State {
            current,
            permanent,
            strategy: Strategy::File(file),
        })
    }

    fn plan(p: &Params, st: &State, _ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let name = p.name.clone().unwrap_or_default();
        let mut plan = Plan::new();
        let current = (st.current != name).then_some(Action::SetCurrent);
        let permanent = (st.permanent != name).then_some(Action::SetPermanent);
        // The order of Ansible's strategies: hostnamectl sets the permanent name first (so that
        // NetworkManager does not object to a transient one set behind its back).
        plan.actions = match st.strategy {
            Strategy::File(_) => [current, permanent],
            Strategy::Systemd(_) => [permanent, current],
        }
        .into_iter()
        .flatten()
        .collect();
        if !plan.actions.is_empty() {
            let before = if name != st.current {
                &st.current
            } else {
                &st.permanent
            };
            let (before, after) = (
                format!("hostname = {before}\n"),
                format!("hostname = {name}\n"),
            );
            // Ansible returns this diff in the result of every change, --diff or not.
            plan.result
                .insert("diff".into(), json!({"before": before, "after": after}));
            plan.diff.content.push(ContentDiff {
                path: "hostname".into(),
                before,
                after,
            });
        }
        plan.result.insert("name".into(), json!(name));
        plan.result
            .insert("ansible_facts".into(), facts(&name, &st.current));
        Ok(plan)
    }

    fn apply(
        p: &Params,
        st: State,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        let name = p.name.clone().unwrap_or_default();
        let mut out = Map::new();
        match &st.strategy {
            Strategy::File(file) => {
                for action in &plan.actions {
                    match action {
                        Action::SetCurrent => nix::unistd::sethostname(&name).map_err(|e| {
                            ModuleError::failed(format!("cannot set the host name to {name}: {e}"))
                        })?,
                        Action::SetPermanent => file.write(&format!("{name}\n"))?,
                    }
                }
                if plan.actions.contains(&Action::SetCurrent) {
                    out.insert("ansible_facts".into(), facts(&name, &name));
                }
            }
            Strategy::Systemd(ctl) => {
                for action in &plan.actions {
                    match action {
                        Action::SetPermanent => {
                            check_length(&name)?;
                            hostnamectl(ctl, &["--pretty", "--static", "set-hostname", &name])?;
                        }
                        // Read again, as Ansible does: hostnamed gives the running name the new
                        // static one, and then there is nothing left to set.
                        Action::SetCurrent => {
                            if hostnamectl(ctl, &["--transient", "status"])? != name {
                                check_length(&name)?;
                                hostnamectl(ctl, &["--transient", "set-hostname", &name])?;
                            }
                        }
                    }
                }
                out.insert("ansible_facts".into(), facts(&name, &running_name()?));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use crate::check_params;
    use serde_json::json;

    #[test]
    fn strategies_of_other_systems_are_refused_by_name() {
        let e = check_params("hostname", &json!({"name": "a", "use": "redhat"})).unwrap_err();
        assert!(e.msg.contains("`use: redhat` is not supported"), "{e}");
        for u in ["systemd", "debian"] {
            assert!(check_params("hostname", &json!({"name": "a", "use": u})).is_ok());
        }
        let e = check_params("hostname", &json!({"name": "a", "use": "nope"})).unwrap_err();
        assert!(e.msg.contains("must be one of"), "{e}");
        assert!(check_params("hostname", &json!({})).is_err());
        assert!(check_params("hostname", &json!({"name": "web1.example.org"})).is_ok());
    }

    #[test]
    fn facts_split_the_name() {
        let f = super::facts("web1.example.org", "old.lan");
        assert_eq!(f["ansible_hostname"], "web1");
        assert_eq!(f["ansible_domain"], "lan");
    }
}
