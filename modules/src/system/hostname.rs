//! `hostname`: the host's name, with the strategy of Debian-family hosts that systemd does not
//! manage: `/etc/hostname` for the permanent name and `sethostname(2)` for the running one.

use super::ConfFile;
use crate::params::de_opt_string;
use crate::{ContentDiff, Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::path::Path;

pub struct Hostname;

/// Where the permanent name lives on Debian.
const HOSTNAME_FILE: &str = "/etc/hostname";

/// Ansible's `use` choices; none of them is the strategy done here (Ansible's `debian` is its
/// hostnamectl one), so each is refused by name.
const STRATEGIES: &[&str] = &[
    "alpine", "debian", "freebsd", "generic", "macos", "macosx", "darwin", "openbsd", "openrc",
    "redhat", "sles", "solaris", "systemd",
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(default, deserialize_with = "de_opt_string")]
    pub name: Option<String>,
    #[serde(default, rename = "use", deserialize_with = "de_opt_string")]
    pub strategy: Option<String>,
}

#[derive(Debug)]
pub struct State {
    /// The running name (`uname -n`).
    current: String,
    /// `/etc/hostname`, trimmed (empty when missing).
    permanent: String,
    file: ConfFile,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    SetCurrent,
    WritePermanent,
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
            return Err(ModuleError::Params(format!(
                "`use: {u}` is not supported: fixpoint's hostname does only the Debian file \
                 strategy (/etc/hostname and the running name), chosen when `use` is omitted"
            )));
        }
        Ok(())
    }

    fn probe(_p: &Params, _ctx: &Ctx) -> Result<State, ModuleError> {
        if Path::new("/run/systemd/system").is_dir() {
            return Err(ModuleError::failed(
                "this host runs systemd, where Ansible sets the name with hostnamectl; \
                 fixpoint's hostname does not do that strategy yet",
            ));
        }
        let family = crate::pkg_mgr::host_os_family();
        if family != "Debian" {
            return Err(ModuleError::failed(format!(
                "hostname module cannot be used on platform Linux ({family}): fixpoint's \
                 hostname does only the Debian strategy"
            )));
        }
        let current = nix::unistd::gethostname()
            .map_err(|e| ModuleError::failed(format!("cannot read the host name: {e}")))?
            .to_string_lossy()
            .into_owned();
        let file = ConfFile::probe(Path::new(HOSTNAME_FILE))?;
        let permanent = file.text.as_deref().unwrap_or_default().trim().to_string();
        Ok(State {
            current,
            permanent,
            file,
        })
    }

    fn plan(p: &Params, st: &State, _ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let name = p.name.clone().unwrap_or_default();
        let mut plan = Plan::new();
        if st.current != name {
            plan.actions.push(Action::SetCurrent);
        }
        if st.permanent != name {
            plan.actions.push(Action::WritePermanent);
        }
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
        for action in &plan.actions {
            match action {
                Action::SetCurrent => nix::unistd::sethostname(&name).map_err(|e| {
                    ModuleError::failed(format!("cannot set the host name to {name}: {e}"))
                })?,
                Action::WritePermanent => st.file.write(&format!("{name}\n"))?,
            }
        }
        let mut out = Map::new();
        if plan.actions.contains(&Action::SetCurrent) {
            out.insert("ansible_facts".into(), facts(&name, &name));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use crate::check_params;
    use serde_json::json;

    #[test]
    fn strategies_are_refused_by_name() {
        let e = check_params("hostname", &json!({"name": "a", "use": "systemd"})).unwrap_err();
        assert!(e.msg.contains("`use: systemd` is not supported"), "{e}");
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
