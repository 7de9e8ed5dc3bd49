//! `apt`'s parameters as Ansible spells them (aliases included), and the load-time checks.

use crate::params::{is_template, Bool};
use crate::ModuleError;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// Parameters of `apt`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(
        default,
        alias = "pkg",
        alias = "name",
        deserialize_with = "de_pkg_list"
    )]
    pub package: Option<Vec<String>>,
    #[serde(default = "present")]
    pub state: String,
    #[serde(default, alias = "update-cache")]
    pub update_cache: Option<Bool>,
    #[serde(default = "five", deserialize_with = "de_int")]
    pub update_cache_retries: i64,
    #[serde(default = "twelve", deserialize_with = "de_int")]
    pub update_cache_retry_max_delay: i64,
    #[serde(default, deserialize_with = "de_int")]
    pub cache_valid_time: i64,
    #[serde(default)]
    pub purge: Bool,
    #[serde(default)]
    pub deb: Option<String>,
    #[serde(default, alias = "default-release")]
    pub default_release: Option<String>,
    #[serde(default, alias = "install-recommends")]
    pub install_recommends: Option<Bool>,
    #[serde(default)]
    pub force: Bool,
    #[serde(default, deserialize_with = "de_upgrade")]
    pub upgrade: Option<String>,
    #[serde(default)]
    pub dpkg_options: Option<String>,
    #[serde(default)]
    pub autoremove: Option<Bool>,
    #[serde(default)]
    pub autoclean: Bool,
    #[serde(default)]
    pub fail_on_autoremove: Bool,
    /// The exit code `/usr/sbin/policy-rc.d` gives while the transaction runs (`apt/policy.rs`).
    #[serde(default, deserialize_with = "crate::account::de_opt_i64")]
    pub policy_rc_d: Option<i64>,
    #[serde(default)]
    pub only_upgrade: Bool,
    #[serde(default)]
    pub force_apt_get: Bool,
    #[serde(default)]
    pub clean: Bool,
    #[serde(default, alias = "allow-unauthenticated")]
    pub allow_unauthenticated: Bool,
    #[serde(
        default,
        alias = "allow-downgrade",
        alias = "allow_downgrades",
        alias = "allow-downgrades"
    )]
    pub allow_downgrade: Bool,
    #[serde(default)]
    pub allow_change_held_packages: Bool,
    #[serde(default = "sixty", deserialize_with = "de_int")]
    pub lock_timeout: i64,
    /// Accepted for compatibility: fixpoint needs no Python bindings on the host.
    #[serde(default)]
    pub auto_install_module_deps: Option<Bool>,
    /// Environment from the play/task `environment`, passed by the controller.
    #[serde(default, rename = "_env")]
    pub env: Option<Map<String, Value>>,
}

fn present() -> String {
    "present".into()
}
fn five() -> i64 {
    5
}
fn twelve() -> i64 {
    12
}
fn sixty() -> i64 {
    60
}

/// Ansible's `type='int'`: a number, or a string holding one (templated values are strings).
pub fn de_int<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    match Value::deserialize(d)? {
        Value::Number(n) if n.is_i64() => Ok(n.as_i64().unwrap_or_default()),
        Value::Number(n) => n
            .as_f64()
            .filter(|f| f.fract() == 0.0)
            .map(|f| f as i64)
            .ok_or_else(|| serde::de::Error::custom(format!("expected an integer, found {n}"))),
        Value::String(s) => s
            .trim()
            .parse::<i64>()
            .map_err(|_| serde::de::Error::custom(format!("expected an integer, found \"{s}\""))),
        other => Err(serde::de::Error::custom(format!(
            "expected an integer, found {other}"
        ))),
    }
}

/// Ansible's `type='list', elements='str'`: a list, or one string split at commas.
pub fn de_pkg_list<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    let item = |v: Value| match v {
        Value::String(s) => Ok(s),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(if b { "True" } else { "False" }.to_string()),
        other => Err(serde::de::Error::custom(format!(
            "expected a package name, found {other}"
        ))),
    };
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.split(',').map(|x| x.trim().to_string()).collect())),
        Some(Value::Array(a)) => a.into_iter().map(item).collect::<Result<_, _>>().map(Some),
        Some(other) => item(other).map(|s| Some(vec![s])),
    }
}

/// `upgrade`: a choice, where YAML's `yes`/`no` arrive as booleans.
fn de_upgrade<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(if b { "yes" } else { "no" }.into())),
        Some(Value::String(s)) => Ok(Some(match crate::params::parse_bool_str(&s) {
            Some(true) if s != "yes" => "yes".into(),
            Some(false) if s != "no" => "no".into(),
            _ => s,
        })),
        Some(other) => Err(serde::de::Error::custom(format!(
            "expected one of dist, full, no, safe, yes; found {other}"
        ))),
    }
}

fn err(msg: impl Into<String>) -> ModuleError {
    ModuleError::Params(msg.into())
}

/// The checks Ansible's argument spec makes, and the choices fixpoint refuses, at load time.
pub fn validate(p: &Params) -> Result<(), ModuleError> {
    let states = ["absent", "build-dep", "fixed", "latest", "present"];
    if !is_template(&p.state) && !states.contains(&p.state.as_str()) {
        return Err(err(format!(
            "value of state must be one of: {}, got: {}",
            states.join(", "),
            p.state
        )));
    }
    if let Some(u) = &p.upgrade {
        let ups = ["dist", "full", "no", "safe", "yes"];
        if !is_template(u) && !ups.contains(&u.as_str()) {
            return Err(err(format!(
                "value of upgrade must be one of: {}, got: {u}",
                ups.join(", ")
            )));
        }
    }
    let given = [p.deb.is_some(), p.package.is_some(), p.upgrade.is_some()];
    if given.iter().filter(|g| **g).count() > 1 {
        return Err(err(
            "parameters are mutually exclusive: deb|package|upgrade",
        ));
    }
    // `clean` and `autoclean` alone are tasks of their own (Ansible's required_one_of never
    // fails: `upgrade` and `autoremove` have defaults; its apt target runs them alone).
    if p.autoremove.is_none()
        && p.deb.is_none()
        && p.package.is_none()
        && p.update_cache.is_none()
        && p.upgrade.is_none()
        && !p.clean.0
        && !p.autoclean.0
    {
        return Err(err(
            "one of the following is required: `autoremove`, `deb`, `package` (`name`, `pkg`), \
             `update_cache` (`update-cache`), `upgrade`, `clean`, `autoclean`",
        ));
    }
    if p.deb.is_some() && p.state != "present" && !is_template(&p.state) {
        return Err(err("deb only supports state=present"));
    }
    if let Some(pkgs) = &p.package {
        for spec in pkgs.iter().filter(|s| !is_template(s)) {
            if spec.matches('=').count() > 1 {
                return Err(err(format!("invalid package spec: {spec}")));
            }
        }
        if p.state == "latest" && pkgs.iter().any(|s| s == "*") && pkgs.iter().any(|s| s != "*") {
            return Err(err(
                "unable to install additional packages when upgrading all installed packages",
            ));
        }
    }
    if let Some(o) = &p.dpkg_options {
        if o.contains(char::is_whitespace) && !is_template(o) {
            return Err(err(format!(
                "`dpkg_options: {o}`: give dpkg options comma-separated without spaces, e.g. force-confdef,force-confold"
            )));
        }
    }
    crate::command::env_pairs(&p.env)?;
    Ok(())
}
