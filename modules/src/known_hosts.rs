//! The `known_hosts` module: add, replace or remove one host's key in an SSH known_hosts file,
//! matching entries as Ansible does, with the host's own `ssh-keygen -F` (lookup, hashed names
//! and `[host]:port` included) and `ssh-keygen -R` (remove every key of a host).

use crate::fs::expand_user;
use crate::fs::WantedAttrs;
use crate::params::{de_opt_string, Bool};
use crate::text::{
    add_path_info, apply_edit, plan_edit, probe_text_file, EditAction, Presence, TextFile,
};
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::io::{Read, Write};
use std::process::{Command, Stdio};

pub struct KnownHosts;

fn default_path() -> String {
    "~/.ssh/known_hosts".into()
}

/// Parameters of `known_hosts`, as Ansible names them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(alias = "host", deserialize_with = "crate::params::de_string")]
    pub name: String,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub key: Option<String>,
    #[serde(
        default = "default_path",
        deserialize_with = "crate::params::de_string"
    )]
    pub path: String,
    #[serde(default)]
    pub hash_host: Bool,
    #[serde(default)]
    pub state: Presence,
}

/// What `ssh-keygen -F` and the file say.
#[derive(Debug)]
pub struct Probed {
    file: TextFile,
    /// The key line to write (hashed when asked), ending in a newline.
    key: Option<String>,
    found: bool,
    replace_or_add: bool,
    found_line: Option<usize>,
    /// The file's lines after the change (Ansible's `compute_diff`).
    after: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `ssh-keygen -R host -f path`: every key of the host goes.
    RemoveAll,
    Edit(EditAction),
}

fn keygen(args: &[&str]) -> Result<(i32, String, String), ModuleError> {
    let out = Command::new("ssh-keygen")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            ModuleError::failed(format!(
                "cannot run ssh-keygen ({e}): install openssh-client on the host"
            ))
        })?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// A key line split as Ansible's `normalize_known_hosts_key`: options, host, type, key.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    options: Option<String>,
    host: String,
    kind: String,
    key: String,
}

fn entry(line: &str) -> Option<Entry> {
    let w: Vec<&str> = line.split_whitespace().collect();
    let (options, rest) = match w.first() {
        Some(f) if f.starts_with('@') => (Some(f.to_string()), &w[1..]),
        Some(_) => (None, &w[..]),
        None => return None,
    };
    Some(Entry {
        options,
        host: rest.first()?.to_string(),
        kind: rest.get(1)?.to_string(),
        key: rest.get(2)?.to_string(),
    })
}

/// `|1|salt|hmac` of the host name, as `ssh-keygen -H` writes it (HMAC-SHA1, random salt).
fn hash_key(host: &str, key: &str) -> Result<String, ModuleError> {
    use base64::Engine as _;
    use sha1::{Digest, Sha1};
    let mut salt = [0u8; 20];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut salt))
        .map_err(|e| ModuleError::io("/dev/urandom", e))?;
    let mut block = [0u8; 64];
    block[..20].copy_from_slice(&salt);
    let pad = |b: u8| block.iter().map(|k| k ^ b).collect::<Vec<u8>>();
    let inner = Sha1::new()
        .chain_update(pad(0x36))
        .chain_update(host.as_bytes())
        .finalize();
    let mac = Sha1::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize();
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut parts: Vec<String> = key.split_whitespace().map(String::from).collect();
    let i = usize::from(parts.first().is_some_and(|p| p.starts_with('@')));
    if let Some(p) = parts.get_mut(i) {
        *p = format!("|1|{}|{}", b64.encode(salt), b64.encode(mac));
    }
    Ok(parts.join(" "))
}

/// The given key must name the host (ssh-keygen finds it there), as Ansible checks.
fn sanity_check(host: &str, key: &str) -> Result<(), ModuleError> {
    let mut tmp = tempfile::NamedTempFile::new().map_err(|e| ModuleError::io("tmp", e))?;
    tmp.write_all(key.as_bytes())
        .and_then(|_| tmp.flush())
        .map_err(|e| ModuleError::io(tmp.path(), e))?;
    let (_, stdout, _) = keygen(&["-F", host, "-f", &tmp.path().to_string_lossy()])?;
    if stdout.is_empty() {
        return Err(ModuleError::failed(
            "Host parameter does not match hashed host field in supplied key",
        ));
    }
    Ok(())
}

/// Ansible's `search_for_host_key`: (found, replace_or_add, found_line).
fn search(
    host: &str,
    key: Option<&str>,
    path: &str,
) -> Result<(bool, bool, Option<usize>), ModuleError> {
    if !std::path::Path::new(path).exists() {
        return Ok((false, false, None));
    }
    let (rc, stdout, stderr) = keygen(&["-F", host, "-f", path])?;
    if stdout.is_empty() && stderr.is_empty() && (rc == 0 || rc == 1) {
        return Ok((false, false, None));
    }
    if rc != 0 {
        return Err(ModuleError::failed(format!(
            "ssh-keygen failed (rc={rc}, stdout='{stdout}',stderr='{stderr}')"
        )));
    }
    let Some(key) = key else {
        return Ok((true, false, None));
    };
    let mut new = entry(key).ok_or_else(|| ModuleError::failed(format!("not a key: {key}")))?;
    let re = regex::Regex::new(r"found: line (\d+)").expect("a valid pattern");
    let mut found_line = None;
    for l in stdout.split('\n') {
        if l.is_empty() {
            continue;
        }
        if l.starts_with('#') {
            found_line = re.captures(l).and_then(|c| c[1].parse().ok());
            if found_line.is_none() {
                return Err(ModuleError::failed(format!(
                    "failed to parse output of ssh-keygen for line number: '{l}'"
                )));
            }
            continue;
        }
        let Some(found) = entry(l) else { continue };
        let special = found
            .options
            .as_deref()
            .is_some_and(|o| o.starts_with("@cert-authority") || o.starts_with("@revoke"));
        if special {
            if new == found {
                return Ok((true, false, found_line));
            }
            continue;
        }
        // An already hashed name is not rehashed (a new salt would change it every run).
        if new.host.starts_with("|1|") && found.host.starts_with("|1|") {
            new.host = found.host.clone();
        }
        if new == found {
            return Ok((true, false, found_line));
        }
        if new.kind == found.kind {
            return Ok((true, true, found_line));
        }
    }
    Ok((true, true, None))
}

impl Module for KnownHosts {
    type Params = Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if p.key.is_none() && p.state == Presence::Present {
            return Err(ModuleError::Params(
                "No key specified when adding a host: give `key`".into(),
            ));
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Probed, ModuleError> {
        // A failure of the task with Ansible's exact message (its target compares it), so it
        // is checked here, on the host, rather than as a parameter at load time.
        let comma = regex::Regex::new(r"\S+(\s+)?,(\s+)?").expect("a valid pattern");
        if p.key.is_some() && comma.is_match(&p.name) {
            return Err(ModuleError::failed(
                "Comma separated list of names is not supported. Please pass a single name to \
                 lookup in the known_hosts file.",
            ));
        }
        let host = p.name.to_lowercase();
        let path = expand_user(&p.path).to_string_lossy().into_owned();
        let mut key = p.key.clone().filter(|k| !k.is_empty());
        if let (Some(k), true) = (&key, p.hash_host.0) {
            key = Some(hash_key(&host, k)?);
        }
        if let Some(k) = &mut key {
            if !k.ends_with('\n') {
                k.push('\n');
            }
            sanity_check(&host, k)?;
        }
        let (found, replace_or_add, found_line) = search(&host, key.as_deref(), &path)?;
        let file = probe_text_file(&path)?;
        let before =
            String::from_utf8_lossy(file.content.as_deref().unwrap_or_default()).into_owned();
        let mut lines: Vec<&str> = before.split_inclusive('\n').collect();
        if let Some(n) = found_line {
            if (replace_or_add || p.state == Presence::Absent) && (1..=lines.len()).contains(&n) {
                lines.remove(n - 1);
            }
        }
        let mut after = lines.concat();
        if p.state == Presence::Present && (replace_or_add || found_line.is_none()) {
            after.push_str(key.as_deref().unwrap_or_default());
        }
        Ok(Probed {
            file,
            key,
            found,
            replace_or_add,
            found_line,
            after,
        })
    }

    fn plan(p: &Params, st: &Probed, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let mut plan = Plan::new();
        let path = st.file.path.clone();
        plan.result.insert("name".into(), json!(p.name));
        plan.result.insert("key".into(), json!(p.key));
        plan.result.insert("path".into(), json!(path));
        plan.result.insert("hash_host".into(), json!(p.hash_host.0));
        plan.result.insert(
            "state".into(),
            json!(if p.state == Presence::Present {
                "present"
            } else {
                "absent"
            }),
        );
        let exists = st.file.meta.is_some();
        let before = String::from_utf8_lossy(st.file.content.as_deref().unwrap_or_default());
        plan.result.insert(
            "diff".into(),
            json!({"before_header": if exists { path.as_str() } else { "/dev/null" },
                   "after_header": path, "before": before, "after": st.after}),
        );
        add_path_info(&mut plan.result, &path)?;
        let present = p.state == Presence::Present;
        if !present && st.found_line.is_none() && st.key.is_some() {
            return Ok(plan);
        }
        if ctx.check {
            // As Ansible: past that point, check mode answers `changed` and `diff` only.
            plan.result.retain(|k, _| k == "diff");
        }
        if st.found && st.key.is_none() && !present {
            plan.actions.push(Action::RemoveAll);
            plan.diff
                .attr(&path, "keys of", p.name.to_lowercase(), "removed");
            return Ok(plan);
        }
        if st.replace_or_add || st.found != present {
            if let Some(dir) = st.file.target.parent() {
                if !dir.as_os_str().is_empty() && !dir.is_dir() {
                    return Err(ModuleError::failed(format!(
                        "Failed to write to file '{path}': {} does not exist",
                        dir.display()
                    )));
                }
            }
            let mut edit = Plan::<EditAction>::new();
            let (mode, owner, group) = (None, None, None);
            let attrs = WantedAttrs::new(&mode, &owner, &group);
            plan_edit(
                &st.file,
                Some(st.after.clone().into_bytes()),
                &attrs,
                false,
                ctx,
                String::new(),
                &mut edit,
            )?;
            plan.diff = edit.diff;
            plan.actions
                .extend(edit.actions.into_iter().map(Action::Edit));
        }
        Ok(plan)
    }

    fn apply(
        p: &Params,
        st: Probed,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        let mut out = plan.result.clone();
        let mut edits = Vec::new();
        for a in &plan.actions {
            match a {
                Action::RemoveAll => {
                    let (rc, so, se) =
                        keygen(&["-R", &p.name.to_lowercase(), "-f", &st.file.path])?;
                    if rc != 0 {
                        return Err(ModuleError::failed(format!(
                            "ssh-keygen -R failed (rc={rc}): {so}{se}"
                        )));
                    }
                }
                Action::Edit(e) => edits.push(e.clone()),
            }
        }
        apply_edit(&st.file, &edits, None, "backup_file")?;
        add_path_info(&mut out, &st.file.path)?;
        Ok(out)
    }
}
