//! The `authorized_key` module (ansible.posix): add or remove SSH public keys in a user's
//! `authorized_keys`, keeping the file as ansible.posix's authorized_key rewrites it (line order
//! by rank, options, comments), with its `.ssh` directory and the file owned by the user.

use crate::fs::WantedAttrs;
use crate::params::{de_opt_string, de_string, is_template, Bool, ModeSpec};
use crate::text::{
    add_path_info, apply_edit, plan_edit, probe_text_file, EditAction, Presence, TextFile,
};
use crate::{Ctx, Module, ModuleError, Plan};
use regex::Regex;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub struct AuthorizedKey;

fn yes() -> Bool {
    Bool(true)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(deserialize_with = "de_string")]
    pub user: String,
    #[serde(deserialize_with = "de_string")]
    pub key: String,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub path: Option<String>,
    #[serde(default = "yes")]
    pub manage_dir: Bool,
    #[serde(default)]
    pub state: Presence,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub key_options: Option<String>,
    #[serde(default)]
    pub exclusive: Bool,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub comment: Option<String>,
    /// Only meaningful for keys fetched from a URL, which are refused; accepted.
    #[serde(default = "yes")]
    pub validate_certs: Bool,
    #[serde(default)]
    pub follow: Bool,
}

/// The key types ansible.posix recognises in a line; the field after one is the key itself.
const KEY_TYPES: &[&str] = &[
    "sk-ecdsa-sha2-nistp256@openssh.com",
    "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com",
    "webauthn-sk-ecdsa-sha2-nistp256@openssh.com",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp256-cert-v01@openssh.com",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp384-cert-v01@openssh.com",
    "ecdsa-sha2-nistp521",
    "ecdsa-sha2-nistp521-cert-v01@openssh.com",
    "sk-ssh-ed25519@openssh.com",
    "sk-ssh-ed25519-cert-v01@openssh.com",
    "ssh-ed25519",
    "ssh-ed25519-cert-v01@openssh.com",
    "ssh-dss",
    "ssh-rsa",
    "ssh-xmss@openssh.com",
    "ssh-xmss-cert-v01@openssh.com",
    "rsa-sha2-256",
    "rsa-sha2-512",
    "ssh-rsa-cert-v01@openssh.com",
    "rsa-sha2-256-cert-v01@openssh.com",
    "rsa-sha2-512-cert-v01@openssh.com",
    "ssh-dss-cert-v01@openssh.com",
];

/// Key options in their order, a name repeated as often as it is given.
type Options = Vec<(String, Option<String>)>;

/// Options compare as the module compares them: by name, each name's values in order, whatever
/// the order of different names.
fn same_options(a: &Options, b: &Options) -> bool {
    fn canon(o: &Options) -> BTreeMap<&str, Vec<Option<&str>>> {
        let mut m: BTreeMap<&str, Vec<Option<&str>>> = BTreeMap::new();
        for (k, v) in o {
            m.entry(k.as_str()).or_default().push(v.as_deref());
        }
        m
    }
    canon(a) == canon(b)
}

/// One line of the file (or one key to put there): a key, or a line kept as it is.
#[derive(Clone, Debug)]
enum Entry {
    Key {
        blob: String,
        kind: String,
        options: Options,
        comment: String,
    },
    /// A comment, a blank line, or anything without a key: written back verbatim.
    Verbatim(String),
}

impl Entry {
    /// What the file's entries are looked up by: the key itself, or the whole line.
    fn id(&self) -> &str {
        match self {
            Entry::Key { blob, .. } => blob,
            Entry::Verbatim(line) => line,
        }
    }

    fn same(&self, other: &Entry) -> bool {
        match (self, other) {
            (
                Entry::Key {
                    blob,
                    kind,
                    options,
                    comment,
                },
                Entry::Key {
                    blob: b2,
                    kind: k2,
                    options: o2,
                    comment: c2,
                },
            ) => blob == b2 && kind == k2 && comment == c2 && same_options(options, o2),
            (Entry::Verbatim(a), Entry::Verbatim(b)) => a == b,
            _ => false,
        }
    }

    fn line(&self) -> String {
        match self {
            Entry::Verbatim(line) => line.clone(),
            Entry::Key {
                blob,
                kind,
                options,
                comment,
            } => {
                let opts: Vec<String> = options
                    .iter()
                    .map(|(k, v)| match v {
                        Some(v) => format!("{k}={v}"),
                        None => k.clone(),
                    })
                    .collect();
                let mut prefix = opts.join(",");
                if !opts.is_empty() {
                    prefix.push(' ');
                }
                format!("{prefix}{kind} {blob} {comment}\n")
            }
        }
    }
}

/// ssh key options (`no-pty,from="a,b"`): split at commas outside quotes.
fn parse_options(text: &str) -> Options {
    thread_local! {
        static PART: Regex = Regex::new(r#"(?:[^,"']|"[^"]*"|'[^']*')+"#).expect("valid pattern");
    }
    let mut out = Options::new();
    PART.with(|re| {
        let found: Vec<regex::Match> = re.find_iter(text).collect();
        for (i, m) in found.iter().enumerate() {
            let mut parts = vec![m.as_str()];
            // What lies between two parts is a part too unless it is the one comma.
            if let Some(next) = found.get(i + 1) {
                parts.push(&text[m.end()..next.start()]);
            }
            for part in parts {
                match part.split_once('=') {
                    Some((k, v)) => out.push((k.to_string(), Some(v.to_string()))),
                    None if part != "," => out.push((part.to_string(), None)),
                    None => {}
                }
            }
        }
    });
    out
}

/// One line as the module reads it: `None` when it holds no key type followed by a key.
fn parse_line(raw: &str) -> Option<Entry> {
    let raw = raw.replace(r"\#", "#");
    let parts: Vec<&str> = raw
        .split([' ', '\t', '\r', '\n'])
        .filter(|p| !p.is_empty())
        .collect();
    if parts.first() == Some(&"#") {
        return Some(Entry::Verbatim(raw));
    }
    let at = parts.iter().position(|p| KEY_TYPES.contains(p))?;
    let blob = parts.get(at + 1)?;
    Some(Entry::Key {
        blob: blob.to_string(),
        kind: parts[at].to_string(),
        options: parse_options(&parts[..at].join(" ")),
        comment: parts[at + 2..].join(" "),
    })
}

/// The keys `key` gives: its lines that are neither empty nor comments.
fn wanted_keys(p: &Params, key_text: &str) -> Result<Vec<Entry>, ModuleError> {
    key_text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut e = parse_line(l)
                .ok_or_else(|| ModuleError::failed(format!("invalid key specified: {l}")))?;
            if let Entry::Key {
                options, comment, ..
            } = &mut e
            {
                if let Some(o) = &p.key_options {
                    *options = parse_options(o);
                }
                if let Some(c) = &p.comment {
                    *comment = c.clone();
                }
            }
            Ok(e)
        })
        .collect()
}

/// The file's entries with their rank, looked up by [`Entry::id`]: a later line with the same
/// key (or the same verbatim text) takes the place of an earlier one, as in the module.
#[derive(Default)]
struct KeyFile {
    entries: Vec<(Entry, usize)>,
}

impl KeyFile {
    fn parse(text: &str) -> KeyFile {
        let mut f = KeyFile::default();
        for (rank, line) in text.split_inclusive('\n').enumerate() {
            let e = parse_line(line).unwrap_or_else(|| Entry::Verbatim(line.to_string()));
            match f.find(e.id()) {
                Some(i) => f.entries[i] = (e, rank),
                None => f.entries.push((e, rank)),
            }
        }
        f
    }

    fn find(&self, id: &str) -> Option<usize> {
        self.entries.iter().position(|(e, _)| e.id() == id)
    }

    fn text(&self) -> String {
        let mut sorted: Vec<&(Entry, usize)> = self.entries.iter().collect();
        sorted.sort_by_key(|(_, rank)| *rank);
        sorted.iter().map(|(e, _)| e.line()).collect()
    }
}

/// What `probe` finds: where the keys live, and the file.
#[derive(Debug)]
pub struct Found {
    /// `~user/.ssh` (or `path`'s directory), and the user's ids when the user exists.
    ssh_dir: PathBuf,
    ids: Option<(u32, u32)>,
    /// The path as the module reports it (`keyfile`), before any link is followed.
    keyfile: String,
    file: TextFile,
    /// `key`'s text (read from the host for a `file:` URL).
    key_text: String,
}

#[derive(Debug)]
pub enum Action {
    /// Create `~/.ssh` (0700) when missing, and give it to the user with mode 0700.
    SshDir {
        dir: PathBuf,
        uid: u32,
        gid: u32,
    },
    Edit(EditAction),
}

fn url_refusal(key: &str) -> ModuleError {
    ModuleError::Params(format!(
        "`key: {key}`: keys from a URL are not supported (the agent has no HTTP client); fetch \
         them on the controller, e.g. key: \"{{{{ lookup('url', '{key}', split_lines=False) }}}}\""
    ))
}

impl Module for AuthorizedKey {
    type Params = Params;
    type State = Found;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if is_template(&p.key) {
            return Ok(());
        }
        if p.key.starts_with("http") {
            return Err(url_refusal(&p.key));
        }
        if !p.key.starts_with("file") {
            wanted_keys(p, &p.key).map_err(|e| ModuleError::Params(e.to_string()))?;
        }
        Ok(())
    }

    fn probe(p: &Params, ctx: &Ctx) -> Result<Found, ModuleError> {
        if p.key.starts_with("http") {
            return Err(url_refusal(&p.key));
        }
        let key_text = match p
            .key
            .strip_prefix("file://")
            .or_else(|| p.key.strip_prefix("file:"))
        {
            Some(path) if p.key.starts_with("file") => {
                let path = Path::new(path);
                if !path.exists() {
                    return Err(ModuleError::failed(format!(
                        "Path to a key file not found: {}",
                        path.display()
                    )));
                }
                if !path.is_file() {
                    return Err(ModuleError::failed(format!(
                        "Path to a key is a directory and must be a file: {}",
                        path.display()
                    )));
                }
                std::fs::read_to_string(path).map_err(|e| ModuleError::io(path, e))?
            }
            _ => p.key.clone(),
        };
        let user =
            nix::unistd::User::from_name(&p.user).map_err(|e| ModuleError::io("/etc/passwd", e))?;
        let (ssh_dir, keyfile) = match (&p.path, &user) {
            (Some(path), _) => (
                Path::new(path)
                    .parent()
                    .unwrap_or(Path::new(""))
                    .to_path_buf(),
                path.clone(),
            ),
            (None, Some(u)) => {
                let dir = u.dir.join(".ssh");
                let file = dir.join("authorized_keys").display().to_string();
                (dir, file)
            }
            (None, None) if ctx.check => return Err(ModuleError::failed(
                "Either user must exist or you must provide full path to key file in check mode",
            )),
            (None, None) => {
                return Err(ModuleError::failed(format!(
                    "Failed to lookup user {}: \"getpwnam(): name not found: '{}'\"",
                    p.user, p.user
                )))
            }
        };
        // Check mode with a path needs no user; anything else does, as in the module.
        if user.is_none() && !(ctx.check && p.path.is_some()) {
            return Err(ModuleError::failed(format!(
                "Failed to lookup user {}: \"getpwnam(): name not found: '{}'\"",
                p.user, p.user
            )));
        }
        let file = probe_text_file(&keyfile)?;
        Ok(Found {
            ssh_dir,
            ids: user.map(|u| (u.uid.as_raw(), u.gid.as_raw())),
            keyfile,
            file,
            key_text,
        })
    }

    fn plan(p: &Params, found: &Found, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let mut plan = Plan::new();
        let text = match &found.file.content {
            Some(c) => String::from_utf8(c.clone()).map_err(|_| {
                ModuleError::failed(format!("{} is not valid UTF-8 text", found.keyfile))
            })?,
            None => String::new(),
        };
        let mut file = KeyFile::parse(&text);
        let wanted = wanted_keys(p, &found.key_text)?;
        let first_new_rank = file.entries.len();
        let mut write = false;
        let mut keep: Vec<String> = Vec::new();
        for (index, key) in wanted.into_iter().enumerate() {
            let existing = file.find(key.id());
            let present = p.state == Presence::Present;
            let matched = existing.is_some_and(|i| !present || file.entries[i].0.same(&key));
            if present {
                keep.push(key.id().to_string());
                if let (Some(i), false) = (existing, matched) {
                    file.entries.remove(i);
                    write = true;
                }
                if !matched {
                    file.entries.push((key, first_new_rank + index));
                    write = true;
                }
            } else if let (Some(i), true) = (existing, matched) {
                file.entries.remove(i);
                write = true;
            }
        }
        if p.state == Presence::Present && p.exclusive.0 {
            let before = file.entries.len();
            file.entries
                .retain(|(e, _)| keep.iter().any(|k| k == e.id()));
            write |= file.entries.len() != before;
        }

        for (k, v) in [
            ("user", json!(p.user)),
            ("key", json!(p.key)),
            ("path", json!(p.path)),
            ("manage_dir", json!(p.manage_dir.0)),
            (
                "state",
                json!(if p.state == Presence::Present {
                    "present"
                } else {
                    "absent"
                }),
            ),
            ("key_options", json!(p.key_options)),
            ("exclusive", json!(p.exclusive.0)),
            ("comment", json!(p.comment)),
            ("validate_certs", json!(p.validate_certs.0)),
            ("follow", json!(p.follow.0)),
            ("keyfile", json!(found.keyfile)),
        ] {
            plan.result.insert(k.into(), v);
        }
        if let Some(path) = &p.path {
            add_path_info(&mut plan.result, path)?;
        }
        if !write {
            return Ok(plan);
        }
        let new_text = file.text();
        let target = if p.follow.0 {
            found.file.target.display().to_string()
        } else {
            found.keyfile.clone()
        };
        if ctx.diff {
            plan.result.insert(
                "diff".into(),
                json!({"before_header": found.keyfile, "after_header": target,
                       "before": text, "after": new_text}),
            );
        }
        // The module gives the file (and `.ssh`) to the user, with 0600 (0700), when it writes.
        let (uid, gid) = found.ids.unwrap_or((u32::MAX, u32::MAX));
        if p.manage_dir.0 && found.ids.is_some() {
            plan.actions.push(Action::SshDir {
                dir: found.ssh_dir.clone(),
                uid,
                gid,
            });
        }
        let (mode, owner, group) = match found.ids {
            Some(_) => (
                Some(ModeSpec::Octal(0o600)),
                Some(uid.to_string()),
                Some(gid.to_string()),
            ),
            None => (None, None, None),
        };
        let attrs = WantedAttrs::new(&mode, &owner, &group);
        let mut edit = Plan::<EditAction>::new();
        plan_edit(
            &found.file,
            Some(new_text.into_bytes()),
            &attrs,
            false,
            ctx,
            String::new(),
            &mut edit,
        )?;
        plan.diff = edit.diff;
        plan.actions
            .extend(edit.actions.into_iter().map(Action::Edit));
        Ok(plan)
    }

    fn apply(
        p: &Params,
        found: Found,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        let mut edits = Vec::new();
        for a in &plan.actions {
            match a {
                Action::SshDir { dir, uid, gid } => ssh_dir(dir, *uid, *gid)?,
                Action::Edit(e) => edits.push(e.clone()),
            }
        }
        let mut out = apply_edit(&found.file, &edits, None, "backup_file")?;
        if let Some(path) = &p.path {
            add_path_info(&mut out, path)?;
        }
        Ok(out)
    }
}

/// `~/.ssh` as the module leaves it: created 0700 when missing (its parent must exist), owned
/// by the user, mode 0700.
fn ssh_dir(dir: &Path, uid: u32, gid: u32) -> Result<(), ModuleError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dir)
            .map_err(|e| {
                ModuleError::failed(format!(
                    "Failed to create directory {} : {e}",
                    dir.display()
                ))
            })?;
    }
    std::os::unix::fs::chown(dir, Some(uid), Some(gid)).map_err(|e| ModuleError::io(dir, e))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| ModuleError::io(dir, e))
}

#[cfg(test)]
#[path = "authorized_key_tests.rs"]
mod tests;
