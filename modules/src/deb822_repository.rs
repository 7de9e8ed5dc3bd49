//! `deb822_repository`: one repository as a deb822 `.sources` file in sources.list.d, formatted
//! field for field as Ansible's module formats it (python-debian's layout), without Python.
//!
//! Probe reads the file (and, for `absent`, looks for the keyring files Ansible would remove);
//! plan renders the wanted text and compares it and the mode; apply writes it atomically. Keys
//! are given inline (written into `Signed-By`, as Ansible does) or as a path on the host; a key
//! URL would need an HTTP client on the host, so it is refused at load time.

use crate::apt::exec::{apt_config, base_env};
use crate::apt::params::{de_int, de_pkg_list};
use crate::fs::{atomic_write_path, Attrs};
use crate::params::{is_template, Bool, ModeSpec};
use crate::{ContentDiff, Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub struct Deb822Repository;

/// Where Ansible keeps the keys it downloads (and removes them from on `absent`).
const KEYRINGS_DIR: &str = "/etc/apt/keyrings";

/// Parameters of `deb822_repository`, as Ansible spells them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub name: String,
    #[serde(default)]
    pub allow_downgrade_to_insecure: Option<Bool>,
    #[serde(default)]
    pub allow_insecure: Option<Bool>,
    #[serde(default)]
    pub allow_weak: Option<Bool>,
    #[serde(default, deserialize_with = "de_pkg_list")]
    pub architectures: Option<Vec<String>>,
    #[serde(default)]
    pub by_hash: Option<Bool>,
    #[serde(default)]
    pub check_date: Option<Bool>,
    #[serde(default)]
    pub check_valid_until: Option<Bool>,
    #[serde(default, deserialize_with = "de_pkg_list")]
    pub components: Option<Vec<String>>,
    #[serde(default, deserialize_with = "de_opt_int")]
    pub date_max_future: Option<i64>,
    #[serde(default)]
    pub enabled: Option<Bool>,
    #[serde(default, deserialize_with = "crate::params::de_opt_string")]
    pub inrelease_path: Option<String>,
    #[serde(default, deserialize_with = "de_pkg_list")]
    pub languages: Option<Vec<String>>,
    #[serde(default)]
    pub pdiffs: Option<Bool>,
    #[serde(default, deserialize_with = "crate::params::de_opt_string")]
    pub signed_by: Option<String>,
    #[serde(default, deserialize_with = "de_pkg_list")]
    pub suites: Option<Vec<String>>,
    #[serde(default, deserialize_with = "de_pkg_list")]
    pub targets: Option<Vec<String>>,
    #[serde(default)]
    pub trusted: Option<Bool>,
    #[serde(default, deserialize_with = "de_pkg_list")]
    pub types: Option<Vec<String>>,
    #[serde(default, deserialize_with = "de_pkg_list")]
    pub uris: Option<Vec<String>>,
    #[serde(default = "default_mode")]
    pub mode: ModeSpec,
    #[serde(default = "present")]
    pub state: String,
    /// Environment from the play/task `environment`, passed by the controller.
    #[serde(default, rename = "_env")]
    pub env: Option<Map<String, Value>>,
}

fn default_mode() -> ModeSpec {
    ModeSpec::Octal(0o644)
}
fn present() -> String {
    "present".into()
}

fn de_opt_int<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(v) => de_int(v).map(Some).map_err(serde::de::Error::custom),
    }
}

/// Ansible's file name stem: lower case, runs of `_` and whitespace to `-`, then only
/// `a-z`, `0-9` and `-` kept.
pub fn slug(name: &str) -> String {
    let lower = name.to_lowercase();
    let mut dashed = String::new();
    let mut in_run = false;
    for c in lower.chars() {
        if c == '_' || c.is_whitespace() {
            if !in_run {
                dashed.push('-');
            }
            in_run = true;
        } else {
            dashed.push(c);
            in_run = false;
        }
    }
    dashed
        .chars()
        .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
        .collect()
}

/// Whether Python's `urlparse` would give `v` a scheme (`https:`, `file:`): Ansible fetches
/// such a `signed_by` as a URL.
pub fn has_scheme(v: &str) -> bool {
    let v: String = v
        .trim_start_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\r' | '\n'))
        .collect();
    match v.split_once(':') {
        Some((s, _)) => {
            s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        None => false,
    }
}

/// python-debian's field name for a parameter.
fn field_name(param: &str) -> String {
    match param {
        "name" => "X-Repolib-Name".into(),
        "uris" => "URIs".into(),
        _ => param
            .split('_')
            .map(|w| {
                let mut c = w.chars();
                match c.next() {
                    Some(f) => f
                        .to_uppercase()
                        .chain(c.flat_map(|x| x.to_lowercase()))
                        .collect(),
                    None => String::new(),
                }
            })
            .collect::<Vec<String>>()
            .join("-"),
    }
}

/// A value of several lines as a deb822 continuation: each line indented, empty ones as `.`.
fn multiline(v: &str) -> String {
    let lines: Vec<String> = v
        .trim()
        .lines()
        .map(|l| match l.trim() {
            "" => "    .".to_string(),
            t => format!("    {t}"),
        })
        .collect();
    format!("\n{}", lines.join("\n"))
}

/// The `.sources` text, fields in the order of their parameter names (as Ansible sorts them).
/// `signed_by` is the value to write: a path or the key itself.
pub fn render(p: &Params, signed_by: Option<&str>) -> String {
    let b = |v: &Option<Bool>| v.map(|b| if b.0 { "yes" } else { "no" }.to_string());
    let l = |v: &Option<Vec<String>>| v.as_ref().map(|v| v.join(" "));
    let types = Some(p.types.clone().unwrap_or_else(|| vec!["deb".into()]));
    let fields: [(&str, Option<String>); 20] = [
        (
            "allow_downgrade_to_insecure",
            b(&p.allow_downgrade_to_insecure),
        ),
        ("allow_insecure", b(&p.allow_insecure)),
        ("allow_weak", b(&p.allow_weak)),
        ("architectures", l(&p.architectures)),
        ("by_hash", b(&p.by_hash)),
        ("check_date", b(&p.check_date)),
        ("check_valid_until", b(&p.check_valid_until)),
        ("components", l(&p.components)),
        ("date_max_future", p.date_max_future.map(|i| i.to_string())),
        ("enabled", b(&p.enabled)),
        ("inrelease_path", p.inrelease_path.clone()),
        ("languages", l(&p.languages)),
        ("name", Some(p.name.clone())),
        ("pdiffs", b(&p.pdiffs)),
        ("signed_by", signed_by.map(str::to_string)),
        ("suites", l(&p.suites)),
        ("targets", l(&p.targets)),
        ("trusted", b(&p.trusted)),
        ("types", l(&types)),
        ("uris", l(&p.uris)),
    ];
    let mut out = String::new();
    for (param, value) in fields {
        let Some(mut v) = value else { continue };
        if v.contains('\n') {
            v = multiline(&v);
        }
        let sep = if v.is_empty() || v.starts_with('\n') {
            ":"
        } else {
            ": "
        };
        out.push_str(&format!("{}{sep}{v}\n", field_name(param)));
    }
    out
}

pub struct Probed {
    dest: PathBuf,
    /// The file's text and permission bits, when it exists.
    current: Option<(String, u32)>,
    /// `signed_by` names a file on the host (used as is, and returned as `key_filename`).
    key_is_file: bool,
    /// Keyring files Ansible's `absent` removes that exist.
    keyrings: Vec<PathBuf>,
    /// A `signed_by` URL's key, downloaded: where it is kept (`<slug>.asc` when armored, else
    /// `.gpg`, in /etc/apt/keyrings), its bytes, and that file's bytes and mode if it exists.
    key: Option<DownloadedKey>,
}

struct DownloadedKey {
    path: PathBuf,
    data: Vec<u8>,
    current: Option<(Vec<u8>, u32)>,
}

/// The mode of a downloaded key file, as Ansible sets it.
const KEY_MODE: u32 = 0o644;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Write(String),
    Chmod(u32),
    Remove(PathBuf),
    /// A downloaded key, written with mode 0644 (its directory made 0755 if missing).
    WriteKey(PathBuf, Vec<u8>),
    ChmodKey(PathBuf),
}

impl Module for Deb822Repository {
    type Params = Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        let err = |m: String| Err(ModuleError::Params(m));
        if !is_template(&p.state) && !["absent", "present"].contains(&p.state.as_str()) {
            return err(format!(
                "value of state must be one of: present, absent, got: {}",
                p.state
            ));
        }
        for t in p.types.iter().flatten().filter(|t| !is_template(t)) {
            if t != "deb" && t != "deb-src" {
                return err(format!(
                    "value of types must be one or more of: deb, deb-src. Got no match for: {t}"
                ));
            }
        }
        crate::command::env_pairs(&p.env)?;
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Probed, ModuleError> {
        let mut env = crate::command::env_pairs(&p.env)?;
        env.extend(base_env());
        // The sources directory apt is configured with: /etc/apt/sources.list.d unless a
        // task's APT_CONFIG says otherwise (Ansible's module always uses that path).
        let parts = apt_config("Dir::Etc::sourceparts/d", &env)
            .unwrap_or_else(|| "/etc/apt/sources.list.d".into());
        let s = slug(&p.name);
        let dest = Path::new(&parts).join(format!("{s}.sources"));
        let current = match std::fs::read(&dest) {
            Ok(b) => {
                let meta = std::fs::metadata(&dest).map_err(|e| ModuleError::io(&dest, e))?;
                Some((
                    String::from_utf8_lossy(&b).into_owned(),
                    meta.permissions().mode() & 0o7777,
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(ModuleError::io(&dest, e)),
        };
        let key_is_file = p
            .signed_by
            .as_deref()
            .is_some_and(|k| Path::new(k).is_file());
        // A `signed_by` URL is fetched (read-only) and kept under the repository's slug, as
        // Ansible's module does; a download that fails fails the task.
        let key = match p.signed_by.as_deref() {
            Some(url) if has_scheme(url) && !key_is_file => {
                let mut resp = crate::http::get_ok(url, &env, true).map_err(ModuleError::failed)?;
                let mut data = Vec::new();
                std::io::Read::read_to_end(&mut resp.body, &mut data)
                    .map_err(|e| ModuleError::failed(e.to_string()))?;
                let armored = data
                    .windows(b"-----BEGIN PGP PUBLIC KEY BLOCK-----".len())
                    .any(|w| w == b"-----BEGIN PGP PUBLIC KEY BLOCK-----");
                let ext = if armored { "asc" } else { "gpg" };
                let path = Path::new(KEYRINGS_DIR).join(format!("{s}.{ext}"));
                let current = match std::fs::read(&path) {
                    Ok(b) => {
                        let m = std::fs::metadata(&path).map_err(|e| ModuleError::io(&path, e))?;
                        Some((b, m.permissions().mode() & 0o7777))
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                    Err(e) => return Err(ModuleError::io(&path, e)),
                };
                Some(DownloadedKey {
                    path,
                    data,
                    current,
                })
            }
            _ => None,
        };
        let keyrings = ["asc", "gpg"]
            .iter()
            .map(|ext| Path::new(KEYRINGS_DIR).join(format!("{s}.{ext}")))
            .filter(|k| k.exists())
            .collect();
        Ok(Probed {
            dest,
            current,
            key_is_file,
            keyrings,
            key,
        })
    }

    fn plan(p: &Params, st: &Probed, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let mut plan = Plan::new();
        let dest = st.dest.display().to_string();
        // Ansible adds the attributes of `dest` when it exists as the module ends: as it is now
        // for a check run or an unchanged one (apply adds them again after a change).
        if st.current.is_some() && (ctx.check || p.state != "absent") {
            plan.result.extend(crate::fs::path_info(&st.dest)?);
        }
        let r = &mut plan.result;
        r.insert("dest".into(), json!(dest));
        if p.state == "absent" {
            if let Some((text, _)) = &st.current {
                plan.actions.push(Action::Remove(st.dest.clone()));
                plan.diff.content.push(ContentDiff {
                    path: dest.clone(),
                    before: text.clone(),
                    after: String::new(),
                });
            }
            for k in &st.keyrings {
                plan.actions.push(Action::Remove(k.clone()));
            }
            let key = Path::new(KEYRINGS_DIR).join(format!("{}.gpg", slug(&p.name)));
            r.insert("repo".into(), Value::Null);
            r.insert("key_filename".into(), json!(key.display().to_string()));
            return Ok(plan);
        }
        // A downloaded key is written (or its mode set) before the sources file that names it.
        if let Some(k) = &st.key {
            let shown = k.path.display().to_string();
            match &k.current {
                Some((data, _)) if *data == k.data => {}
                current => {
                    plan.actions
                        .push(Action::WriteKey(k.path.clone(), k.data.clone()));
                    plan.diff.content.push(ContentDiff {
                        path: shown.clone(),
                        before: current
                            .as_ref()
                            .map(|(d, _)| String::from_utf8_lossy(d).into_owned())
                            .unwrap_or_default(),
                        after: String::from_utf8_lossy(&k.data).into_owned(),
                    });
                }
            }
            if let Some((_, mode)) = k.current.as_ref().filter(|(_, m)| *m != KEY_MODE) {
                plan.actions.push(Action::ChmodKey(k.path.clone()));
                plan.diff.attr(
                    shown,
                    "mode",
                    format!("{mode:04o}"),
                    format!("{KEY_MODE:04o}"),
                );
            }
        }
        let key_path = st.key.as_ref().map(|k| k.path.display().to_string());
        let signed_by = key_path.as_deref().or(p.signed_by.as_deref());
        let text = render(p, signed_by);
        let before = st.current.as_ref().map(|(t, _)| t.as_str());
        if before != Some(text.as_str()) {
            plan.actions.push(Action::Write(text.clone()));
            plan.diff.content.push(ContentDiff {
                path: dest.clone(),
                before: before.unwrap_or_default().to_string(),
                after: text.clone(),
            });
        }
        // The mode a new file would have before `mode` is applied: 0666 less the umask.
        let cur = st
            .current
            .as_ref()
            .map(|(_, m)| *m)
            .unwrap_or(0o666 & !crate::fs::current_umask());
        let want = p
            .mode
            .resolve(cur, false)
            .map_err(ModuleError::Params)?
            .unwrap_or(cur);
        if want != cur {
            plan.actions.push(Action::Chmod(want));
            plan.diff.attr(
                dest.clone(),
                "mode",
                format!("{cur:04o}"),
                format!("{want:04o}"),
            );
        }
        r.insert("repo".into(), json!(text));
        let key_filename = key_path.or(p.signed_by.clone().filter(|_| st.key_is_file));
        r.insert("key_filename".into(), json!(key_filename));
        Ok(plan)
    }

    fn apply(
        _p: &Params,
        st: Probed,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        for a in &plan.actions {
            match a {
                Action::Write(text) => {
                    if let Some(dir) = st.dest.parent() {
                        std::fs::create_dir_all(dir).map_err(|e| ModuleError::io(dir, e))?;
                    }
                    atomic_write_path(&st.dest, text.as_bytes(), &Attrs::default(), None)?;
                }
                Action::Chmod(m) => {
                    std::fs::set_permissions(&st.dest, std::fs::Permissions::from_mode(*m))
                        .map_err(|e| ModuleError::io(&st.dest, e))?;
                }
                Action::Remove(path) => {
                    std::fs::remove_file(path).map_err(|e| ModuleError::io(path, e))?;
                }
                Action::WriteKey(path, data) => {
                    let dir = Path::new(KEYRINGS_DIR);
                    if !dir.is_dir() {
                        std::fs::DirBuilder::new()
                            .mode(0o755)
                            .recursive(true)
                            .create(dir)
                            .map_err(|e| ModuleError::io(dir, e))?;
                    }
                    let attrs = Attrs {
                        mode: Some(KEY_MODE),
                        ..Attrs::default()
                    };
                    atomic_write_path(path, data, &attrs, None)?;
                }
                Action::ChmodKey(path) => {
                    std::fs::set_permissions(path, std::fs::Permissions::from_mode(KEY_MODE))
                        .map_err(|e| ModuleError::io(path, e))?;
                }
            }
        }
        if st.dest.exists() {
            return crate::fs::path_info(&st.dest);
        }
        Ok(Map::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: Value) -> Params {
        crate::parse_params(&v).unwrap()
    }

    #[test]
    fn slugs_and_field_names_follow_ansible() {
        assert_eq!(slug("My_Repo  Name!"), "my-repo-name");
        assert_eq!(slug("docker-ce"), "docker-ce");
        assert_eq!(
            field_name("allow_downgrade_to_insecure"),
            "Allow-Downgrade-To-Insecure"
        );
        assert_eq!(field_name("uris"), "URIs");
        assert_eq!(field_name("name"), "X-Repolib-Name");
        assert_eq!(field_name("signed_by"), "Signed-By");
    }

    #[test]
    fn rendering_sorts_by_parameter_and_continues_multiline_keys() {
        let p = params(json!({
            "name": "example", "uris": "http://x.org/debian", "suites": ["bookworm"],
            "components": ["main", "contrib"], "enabled": true, "date_max_future": 10
        }));
        assert_eq!(
            render(&p, Some("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nabc\n-----END PGP PUBLIC KEY BLOCK-----\n")),
            "Components: main contrib\nDate-Max-Future: 10\nEnabled: yes\nX-Repolib-Name: example\n\
             Signed-By:\n    -----BEGIN PGP PUBLIC KEY BLOCK-----\n    .\n    abc\n    -----END PGP PUBLIC KEY BLOCK-----\n\
             Suites: bookworm\nTypes: deb\nURIs: http://x.org/debian\n"
        );
    }

    #[test]
    fn key_urls_are_told_from_paths_and_inline_keys() {
        assert!(has_scheme("https://example.org/key.asc"));
        assert!(!has_scheme("/etc/apt/keyrings/k.asc"));
        assert!(!has_scheme(
            "-----BEGIN PGP PUBLIC KEY BLOCK-----\nComment: a: b\n"
        ));
        let check = |v: Value| crate::registry::check_params("deb822_repository", &v);
        assert!(check(json!({"name": "x", "signed_by": "https://k/x.asc"})).is_ok());
        assert!(check(json!({"name": "x", "types": ["rpm"]})).is_err());
        assert!(check(json!({"name": "x", "types": "deb,deb-src", "mode": "0600"})).is_ok());
    }
}
