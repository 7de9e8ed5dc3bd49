//! `apt_key`: keys in apt's trusted keyrings through the host's `apt-key` and `gpg`, as
//! Ansible's module drives them (Debian 12 still ships apt-key, deprecated; see the README for
//! the keyring-file way that replaces it).
//!
//! Probe finds the key id (given, or read from the key with `gpg --with-colons`) and lists the
//! keys apt-key knows; plan compares; apply runs `apt-key add` or `apt-key del` and lists the
//! keys again to prove the change. A `url` is fetched on the host with the HTTP client of
//! `get_url` (in the probe when the key's id must be read from it, else only to add it), as
//! Ansible's `download_key`; `keyserver` needs an HKP client and the network: refused at load.

use crate::apt::exec::{base_env, run, Ran};
use crate::params::{de_opt_string, is_template, Bool};
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};

pub struct AptKey;

/// Parameters of `apt_key`, as Ansible spells them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(default, deserialize_with = "de_opt_string")]
    pub id: Option<String>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub data: Option<String>,
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub keyring: Option<String>,
    /// For `url`'s download (default true).
    #[serde(default)]
    pub validate_certs: Option<Bool>,
    #[serde(default)]
    pub keyserver: Option<String>,
    #[serde(default = "present")]
    pub state: String,
    /// Environment from the play/task `environment`, passed by the controller.
    #[serde(default, rename = "_env")]
    pub env: Option<Map<String, Value>>,
}

fn present() -> String {
    "present".into()
}

/// Ansible's `parse_key_id`: 8, 16 or more hex digits (an optional `0x`), upper-cased; the
/// short id (last 8), the id `apt-key` lists (last 16) and the whole id.
pub fn parse_key_id(id: &str) -> Option<(String, String, String)> {
    let t = id.trim();
    let digits = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let key = id.to_uppercase();
    let key = key.strip_prefix("0X").unwrap_or(&key).to_string();
    let n = key.len();
    if n != 8 && n != 16 && n <= 16 {
        return None;
    }
    let short = key[n - 8..].to_string();
    let fp = if n > 16 {
        key[n - 16..].to_string()
    } else {
        key.clone()
    };
    Some((short, fp, key))
}

/// Ansible's `parse_output_for_keys`: the ids of the `pub`/`sub` lines that are not expired,
/// from `apt-key adv --list-public-keys` (`pub ed25519/ID ...`) or `gpg --with-colons`.
pub fn keys_in(output: &str, short: bool) -> Vec<String> {
    let mut found = Vec::new();
    for line in output.split('\n') {
        if !(line.starts_with("pub") || line.starts_with("sub")) || line.contains("expired") {
            continue;
        }
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let code = match tokens.get(1).and_then(|c| c.split_once('/')) {
            Some((_, code)) if !code.contains('/') => Some(code.to_string()),
            _ => line.split(':').nth(4).map(str::to_string),
        };
        if let Some(c) = code {
            found.push(c);
        }
    }
    if short {
        found = found
            .into_iter()
            .map(|k| k[k.len().saturating_sub(8)..].to_string())
            .collect();
    }
    found
}

pub struct Probed {
    env: Vec<(String, String)>,
    short: String,
    fp: String,
    key_id: String,
    /// The id as given, or as read from the key.
    id: String,
    short_format: bool,
    before: Vec<String>,
    /// The key `url` gave, when the probe had to fetch it to read its id.
    fetched: Option<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Add,
    Remove,
}

fn apt_key(p: &Params, rest: &[&str]) -> Vec<String> {
    let mut a = vec!["apt-key".to_string()];
    if let Some(k) = &p.keyring {
        a.push("--keyring".into());
        a.push(k.clone());
    }
    a.extend(rest.iter().map(|s| s.to_string()));
    a
}

fn failed(msg: String, ran: Option<&Ran>, mut extra: Map<String, Value>) -> ModuleError {
    if let Some(r) = ran {
        extra.insert("rc".into(), json!(r.rc));
        extra.insert("stdout".into(), json!(r.stdout));
        extra.insert("stderr".into(), json!(r.stderr));
    }
    ModuleError::Failed { msg, result: extra }
}

/// The keys apt-key knows (in `keyring`, or all of apt's trusted keys).
fn all_keys(p: &Params, env: &[(String, String)], short: bool) -> Result<Vec<String>, ModuleError> {
    let a = apt_key(p, &["adv", "--list-public-keys", "--keyid-format=long"]);
    let ran = run(&a, env, None)?;
    if ran.rc != 0 {
        return Err(failed(
            "Unable to list public keys".into(),
            Some(&ran),
            Map::new(),
        ));
    }
    Ok(keys_in(&ran.stdout, short))
}

/// The first key id in a key file (`-`: `data`), read by gpg in a throwaway home so that
/// reading a key creates nothing in root's ~/.gnupg.
fn key_id_of(
    file: &str,
    data: Option<&[u8]>,
    env: &[(String, String)],
) -> Result<Option<String>, ModuleError> {
    let home = tempfile::tempdir().map_err(|e| ModuleError::io("temp dir", e))?;
    let a = [
        "gpg",
        "--homedir",
        &home.path().display().to_string(),
        "--batch",
        "--with-colons",
        file,
    ]
    .map(String::from);
    let ran = run(&a, env, data)?;
    if ran.rc != 0 {
        let what = if data.is_some() { "inline data" } else { file };
        return Err(failed(
            format!("Unable to extract key from '{what}'"),
            None,
            [
                ("stdout".to_string(), json!(ran.stdout)),
                ("stderr".to_string(), json!(ran.stderr)),
            ]
            .into_iter()
            .collect(),
        ));
    }
    Ok(keys_in(&ran.stdout, false).into_iter().next())
}

/// Ansible's `download_key`: the key at `url`, fetched on the host.
fn download_key(p: &Params, url: &str, env: &[(String, String)]) -> Result<Vec<u8>, ModuleError> {
    let validate = p.validate_certs.is_none_or(|v| v.0);
    let shown = crate::http::mask_url(url);
    let mut resp = crate::http::get_ok(url, env, validate)
        .map_err(|m| ModuleError::failed(format!("Failed to download key at {shown}: {m}")))?;
    let mut key = Vec::new();
    std::io::Read::read_to_end(&mut resp.body, &mut key)
        .map_err(|_| ModuleError::failed(format!("Error getting key id from url: {shown}")))?;
    Ok(key)
}

impl Module for AptKey {
    type Params = Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        let err = |m: String| Err(ModuleError::Params(m));
        if !is_template(&p.state) && !["absent", "present"].contains(&p.state.as_str()) {
            return err(format!(
                "value of state must be one of: absent, present, got: {}",
                p.state
            ));
        }
        let given = [&p.data, &p.file, &p.keyserver, &p.url];
        if given.iter().filter(|g| g.is_some()).count() > 1 {
            return err("parameters are mutually exclusive: data|file|keyserver|url".into());
        }
        if p.keyserver.is_some() {
            return err(
                "`keyserver` needs an HKP client and the network on the host, which fixpoint's \
                 apt_key does not have; give the key with `url`, `file` or `data`, or better put \
                 it under /etc/apt/keyrings and name it in the source's signed-by (see the README)"
                    .into(),
            );
        }
        crate::command::env_pairs(&p.env)?;
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Probed, ModuleError> {
        let mut env = crate::command::env_pairs(&p.env)?;
        env.extend(base_env());
        let given_id = p.id.as_deref().filter(|id| !id.is_empty());
        let fetched = match (&p.url, given_id) {
            (Some(url), None) => Some(download_key(p, url, &env)?),
            _ => None,
        };
        let id = match (given_id, &p.file, &p.data, &fetched) {
            (Some(id), _, _, _) => Some(id.to_string()),
            (_, Some(f), _, _) => key_id_of(f, None, &env)?,
            (_, None, Some(d), _) if !d.is_empty() => key_id_of("-", Some(d.as_bytes()), &env)?,
            (_, _, _, Some(k)) if !k.is_empty() => key_id_of("-", Some(k), &env)?,
            _ => None,
        };
        let mut r = Map::new();
        r.insert("id".into(), json!(id));
        let Some((short, fp, key_id)) = id.as_deref().and_then(parse_key_id) else {
            return Err(failed("Invalid key_id".into(), None, r));
        };
        let short_format = key_id.len() == 8;
        let before = all_keys(p, &env, short_format)?;
        Ok(Probed {
            env,
            short,
            fp,
            key_id,
            id: id.unwrap_or_default(),
            short_format,
            before,
            fetched,
        })
    }

    fn plan(p: &Params, st: &Probed, _ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let mut plan = Plan::new();
        let known = |keys: &[String]| {
            if st.short_format {
                keys.contains(&st.short)
            } else {
                keys.contains(&st.fp)
            }
        };
        if p.state == "present" && !known(&st.before) {
            plan.actions.push(Action::Add);
        }
        if p.state == "absent" && st.before.contains(&st.fp) {
            plan.actions.push(Action::Remove);
        }
        let r = &mut plan.result;
        r.insert("changed".into(), json!(!plan.actions.is_empty()));
        r.insert("id".into(), json!(st.id));
        r.insert("short_id".into(), json!(st.short));
        r.insert("fp".into(), json!(st.fp));
        r.insert("key_id".into(), json!(st.key_id));
        r.insert("before".into(), json!(st.before));
        Ok(plan)
    }

    fn apply(
        p: &Params,
        st: Probed,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        let env = &st.env;
        let mut out = Map::new();
        if plan.actions.contains(&Action::Add) {
            // With an `id`, Ansible fetches `url` only now that the key is known missing.
            let fetched = match (&st.fetched, &p.url) {
                (Some(k), _) => Some(k.clone()),
                (None, Some(url)) => Some(download_key(p, url, env)?),
                (None, None) => None,
            };
            let (a, input) =
                match (&p.file, &p.data, &fetched) {
                    (Some(f), _, _) => (apt_key(p, &["add", f]), None),
                    (None, Some(d), _) => (apt_key(p, &["add", "-"]), Some(d.as_bytes())),
                    (None, None, Some(k)) => (apt_key(p, &["add", "-"]), Some(k.as_slice())),
                    _ => return Err(ModuleError::failed(
                        "the key is not installed and neither `file`, `data` nor `url` gives it",
                    )),
                };
            let ran = run(&a, env, input)?;
            if ran.rc != 0 {
                let msg = match &p.file {
                    Some(f) => format!("Unable to add a key from file {f}"),
                    None => "Unable to add a key from binary data".into(),
                };
                return Err(failed(msg, Some(&ran), Map::new()));
            }
            let after = all_keys(p, env, st.short_format)?;
            let ok = if st.short_format {
                after.contains(&st.short)
            } else {
                after.contains(&st.fp)
            };
            out.insert("after".into(), json!(after));
            if !ok {
                return Err(failed(
                    "apt-key did not return an error, but failed to add the key (check that the \
                     id is correct and *not* a subkey)"
                        .into(),
                    None,
                    out,
                ));
            }
        }
        if plan.actions.contains(&Action::Remove) {
            let ran = run(&apt_key(p, &["del", &st.short]), env, None)?;
            if ran.rc != 0 {
                return Err(failed(
                    format!("Unable to remove a key with id {}", st.short),
                    Some(&ran),
                    Map::new(),
                ));
            }
            let after = all_keys(p, env, st.short_format)?;
            let still = after.contains(&st.fp);
            out.insert("after".into(), json!(after));
            if still {
                return Err(failed(
                    "apt-key did not return an error, but the key was not removed (check that \
                     the id is correct and *not* a subkey)"
                        .into(),
                    None,
                    out,
                ));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_ids_as_ansible_splits_them() {
        assert_eq!(
            parse_key_id("0x5a65915f"),
            Some(("5A65915F".into(), "5A65915F".into(), "5A65915F".into()))
        );
        let long = "683C89D00E6E74CB59D7AF34C91526315A65915F";
        assert_eq!(
            parse_key_id(long),
            Some(("5A65915F".into(), "C91526315A65915F".into(), long.into()))
        );
        assert_eq!(parse_key_id("ABCDEF0"), None);
        assert_eq!(parse_key_id("nothex12"), None);
    }

    #[test]
    fn keys_are_read_from_apt_key_and_gpg_listings() {
        let apt = "/tmp/x/pubring.gpg\n------\npub   ed25519/C91526315A65915F 2026-11-30 [SC]\n      683C...\nuid   x\npub   rsa4096/0123456789ABCDEF 2020-01-01 [SC] [expired: 2021-01-01]\n";
        assert_eq!(keys_in(apt, false), vec!["C91526315A65915F"]);
        assert_eq!(keys_in(apt, true), vec!["5A65915F"]);
        let colons = "pub:-:255:22:C91526315A65915F:1796078186:::-:\nuid:::::::::x <x@l>:\n";
        assert_eq!(keys_in(colons, false), vec!["C91526315A65915F"]);
    }

    #[test]
    fn keyservers_are_refused_at_load_time() {
        let check = |v: Value| crate::registry::check_params("apt_key", &v);
        assert!(check(json!({"url": "https://x/k.asc"})).is_ok());
        assert!(check(json!({"id": "ABCD1234", "keyserver": "keyserver.ubuntu.com"})).is_err());
        assert!(check(json!({"file": "/k", "data": "x"}))
            .unwrap_err()
            .to_string()
            .contains("mutually exclusive"));
        assert!(check(json!({"id": "ABCD1234", "state": "absent", "keyring": "/k.gpg"})).is_ok());
    }
}
