//! The `user` module: a local account present (uid, primary group, supplementary groups,
//! comment, home, shell, password hash, lock, expiry, password ageing, an SSH key) or absent,
//! through `useradd`, `usermod`, `chage`, `ssh-keygen` and `userdel`, planned from `getpwnam`,
//! `/etc/group` and `/etc/shadow` as Ansible's module does, with its return values.
//!
//! `local: true` is ansible-core's libuser variant: the account is looked for in `/etc/passwd`
//! itself (not through NSS), and `luseradd`, `lusermod`, `luserdel`, `lchage -E` and
//! `lgroupmod` make the changes (`user_args.rs`). SELinux users and the other platforms'
//! parameters are refused at load time (README).

use super::ssh_key::{self, KeySpec};
use super::{
    de_opt_i64, de_opt_u32, group_lookup, memberships, shadow, shadow_tool, tool_failed,
    user_by_name, GrEntry, PwEntry, Shadow,
};
use crate::params::{de_opt_string, Bool, StringList};
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::path::Path;

#[path = "user_args.rs"]
mod args;
use args::{add_args, in_passwd_file, mod_args};

pub struct User;

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum State {
    #[default]
    Present,
    Absent,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum UpdatePassword {
    #[default]
    Always,
    OnCreate,
}

fn yes() -> Bool {
    Bool(true)
}

fn rsa() -> String {
    "rsa".into()
}

/// Ansible's `type='path'`: a leading `~` is the home of the user the module runs as.
fn de_opt_path<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(de_opt_string(d)?.map(|s| crate::fs::expand_user(&s).to_string_lossy().into_owned()))
}

/// Parameters this implementation does not support; refused by name in `validate`.
const REFUSED: &[&str] = &[
    "login_class",
    "hidden",
    "seuser",
    "profile",
    "authorization",
    "role",
];

/// Unknown and refused parameters land in `refused` (named by `validate`): serde cannot
/// combine `deny_unknown_fields` with the flattened map.
#[derive(Debug, Deserialize)]
pub struct Params {
    #[serde(alias = "user")]
    pub name: String,
    #[serde(default)]
    pub state: State,
    #[serde(default, deserialize_with = "de_opt_u32")]
    pub uid: Option<u32>,
    #[serde(default)]
    pub non_unique: Bool,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub group: Option<String>,
    #[serde(default)]
    pub groups: Option<StringList>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub comment: Option<String>,
    #[serde(default, deserialize_with = "de_opt_path")]
    pub home: Option<String>,
    #[serde(default, deserialize_with = "de_opt_path")]
    pub shell: Option<String>,
    #[serde(default)]
    pub password: Option<String>,
    #[serde(default)]
    pub update_password: UpdatePassword,
    #[serde(default)]
    pub password_lock: Option<Bool>,
    #[serde(default = "yes", alias = "createhome")]
    pub create_home: Bool,
    #[serde(default)]
    pub skeleton: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub umask: Option<String>,
    #[serde(default)]
    pub system: Bool,
    #[serde(default)]
    pub move_home: Bool,
    #[serde(default)]
    pub append: Bool,
    #[serde(default)]
    pub force: Bool,
    #[serde(default)]
    pub remove: Bool,
    /// Seconds since the epoch; negative: never.
    #[serde(default)]
    pub expires: Option<Expires>,
    #[serde(default, deserialize_with = "de_opt_u32")]
    pub uid_min: Option<u32>,
    #[serde(default, deserialize_with = "de_opt_u32")]
    pub uid_max: Option<u32>,
    #[serde(default)]
    pub generate_ssh_key: Option<Bool>,
    #[serde(default, deserialize_with = "de_opt_i64")]
    pub ssh_key_bits: Option<i64>,
    #[serde(default = "rsa")]
    pub ssh_key_type: String,
    #[serde(default, deserialize_with = "de_opt_path")]
    pub ssh_key_file: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub ssh_key_comment: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub ssh_key_passphrase: Option<String>,
    /// Days (chage `-M`, `-m`, `-W`); compared with the shadow entry.
    #[serde(default, deserialize_with = "de_opt_i64")]
    pub password_expire_max: Option<i64>,
    #[serde(default, deserialize_with = "de_opt_i64")]
    pub password_expire_min: Option<i64>,
    #[serde(default, deserialize_with = "de_opt_i64")]
    pub password_expire_warn: Option<i64>,
    /// Days after the password expires until the account is disabled (`-f`).
    #[serde(default, deserialize_with = "de_opt_i64")]
    pub password_expire_account_disable: Option<i64>,
    /// The libuser tools, on the accounts of the local files only.
    #[serde(default)]
    pub local: Bool,
    #[serde(flatten)]
    pub refused: Map<String, Value>,
}

/// `expires` as Ansible's `type='float'` takes it: a number or a numeric string.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Expires(pub f64);

impl<'de> Deserialize<'de> for Expires {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Number(n) => n.as_f64().map(Expires),
            Value::String(s) => s.trim().parse::<f64>().ok().map(Expires),
            _ => None,
        }
        .filter(|e| e.0.is_finite())
        .ok_or_else(|| serde::de::Error::custom("expected seconds since the epoch (a number)"))
    }
}

impl Expires {
    /// Days since the epoch, or None for "never" (a negative value).
    fn days(self) -> Option<i64> {
        (self.0 >= 0.0).then(|| (self.0.floor() as i64).div_euclid(86_400))
    }
}

/// What the host has.
#[derive(Debug)]
pub struct Probed {
    pw: Option<PwEntry>,
    shadow: Shadow,
    member_of: Vec<String>,
    /// `group`, resolved (None inside: no such group).
    group: Option<Option<GrEntry>>,
    /// `groups`, each resolved.
    groups: Vec<(String, Option<GrEntry>)>,
    /// A group named like the user exists (useradd then gets `-N`, as in Ansible).
    own_group_exists: bool,
    /// The home directory the task ends with exists.
    home_exists: bool,
    old_home_exists: bool,
    /// The key's files, for an account whose home is known.
    key: Option<ssh_key::KeyState>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Create the missing parents of `home` first: useradd makes only the last level.
    Parents(String),
    Add(Vec<String>),
    Mod(Vec<String>),
    /// Create the missing home directory from the skeleton, owned by the user.
    MakeHome(String),
    /// chage for the ageing fields that differ from the shadow entry then.
    Ageing,
    /// ssh-keygen for the account.
    SshKey,
    Del(Vec<String>),
    /// `local`: `lchage -E` to this day since the epoch (-1: never).
    Lchage(i64),
    /// `local`: `lgroupmod -M` (add) or `-m` (remove) the user as a member of `group`.
    Member {
        add: bool,
        group: String,
    },
}

/// The requested supplementary groups: comma lists split, blanks dropped (Ansible's
/// `','.join(groups)` then split).
fn wanted_groups(p: &Params) -> Option<Vec<String>> {
    p.groups.as_ref().map(|g| {
        let mut v: Vec<String> =
            g.0.join(",")
                .split(',')
                .map(|x| x.trim().to_string())
                .filter(|x| !x.is_empty())
                .collect();
        v.sort();
        v.dedup();
        v
    })
}

fn missing_group(name: &str) -> ModuleError {
    ModuleError::failed(format!("Group {name} does not exist"))
}

/// `YYYY-MM-DD` of a day since the epoch, useradd's `-e` format.
fn date_of(days: i64) -> String {
    let (y, m, d) = crate::time::civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

impl Module for User {
    type Params = Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if p.name.trim().is_empty() {
            return Err(ModuleError::Params("`name` must not be empty".into()));
        }
        if let Some(k) = p.refused.keys().next() {
            let msg = if REFUSED.contains(&k.as_str()) {
                format!("parameter `{k}` is not supported by fixpoint's user module")
            } else {
                format!("unknown parameter `{k}`")
            };
            return Err(ModuleError::Params(msg));
        }
        if p.non_unique.0 && p.uid.is_none() {
            return Err(ModuleError::Params(
                "non_unique is True but all of the following are missing: uid".into(),
            ));
        }
        if p.local.0 {
            // ansible-core's words; it fails so when the task runs, fixpoint at load (or there,
            // for a task that may fail: `ignore_errors`, `when`, `failed_when`).
            let with_local = [
                ("umask", p.umask.is_some()),
                ("uid_min", p.uid_min.is_some()),
                ("uid_max", p.uid_max.is_some()),
            ];
            if let Some((k, _)) = with_local.iter().find(|(_, given)| *given) {
                return Err(ModuleError::Params(format!(
                    "'{k}' can not be used with 'local'"
                )));
            }
        }
        if p.password.as_deref().is_some_and(|pw| pw.contains(':')) {
            return Err(ModuleError::Params(
                "`password` must be a crypt(3) hash (it contains `:`)".into(),
            ));
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Probed, ModuleError> {
        // With `local`, ansible-core looks for the name in /etc/passwd: an account NSS finds
        // elsewhere (a directory) is not there, and is created in the files.
        let pw = if p.local.0 && !in_passwd_file(&p.name)? {
            None
        } else {
            user_by_name(&p.name)?
        };
        // /etc/shadow is read only when a parameter needs it: it is root's alone, and a task
        // that sets no password, lock or expiry can be checked without it.
        let needs_shadow = p.password.is_some()
            || p.password_lock.is_some()
            || p.expires.is_some()
            || p.password_expire_account_disable.is_some()
            || ageing(p).iter().any(|(_, _, v)| v.is_some());
        let shadow = match &pw {
            Some(_) if needs_shadow => shadow(&p.name)?,
            _ => Shadow::default(),
        };
        let member_of = match &pw {
            Some(_) => memberships(&p.name)?,
            None => Vec::new(),
        };
        let group = p.group.as_deref().map(group_lookup).transpose()?;
        let groups = wanted_groups(p)
            .unwrap_or_default()
            .into_iter()
            .map(|g| group_lookup(&g).map(|e| (g, e)))
            .collect::<Result<_, _>>()?;
        let home = p
            .home
            .clone()
            .or_else(|| pw.as_ref().map(|u| u.home.clone()));
        let old_home = pw.as_ref().map(|u| u.home.clone());
        let key = match (&pw, key_spec(p)) {
            (Some(u), Some(k)) => Some(k.state(&u.home)),
            _ => None,
        };
        Ok(Probed {
            key,
            own_group_exists: group_lookup(&p.name)?.is_some(),
            home_exists: home.is_some_and(|h| Path::new(&h).exists()),
            old_home_exists: old_home.is_some_and(|h| Path::new(&h).exists()),
            pw,
            shadow,
            member_of,
            group,
            groups,
        })
    }

    fn plan(p: &Params, s: &Probed, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let mut plan = plan_account(p, s, ctx)?;
        // Ansible warns whatever the state, check mode included, before anything else.
        let mut first = Vec::new();
        if p.append.0 && p.groups.is_none() {
            first.push(json!(
                "'append' is set, but no 'groups' are specified. Use 'groups' for appending \
                 new groups.This will change to an error in Ansible 2.14."
            ));
        }
        if p.password.as_deref().is_some_and(looks_unhashed) {
            first.push(json!(
                "The input password appears not to have been hashed. The 'password' \
                 argument must be encrypted for this module to work properly."
            ));
        }
        if !first.is_empty() {
            match plan.result.get_mut("warnings") {
                Some(Value::Array(all)) => {
                    all.splice(0..0, first);
                }
                _ => {
                    plan.result.insert("warnings".into(), json!(first));
                }
            }
        }
        Ok(plan)
    }

    fn apply(
        p: &Params,
        _s: Probed,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        let mut out = Map::new();
        let (mut stdout, mut stderr) = (String::new(), String::new());
        for action in &plan.actions {
            let (tool, args) = match action {
                Action::Parents(dir) => {
                    std::fs::create_dir_all(dir).map_err(|e| ModuleError::io(dir, e))?;
                    continue;
                }
                Action::MakeHome(home) => {
                    super::home::make_home(&looked_up(p)?, p.skeleton.as_deref(), home)?;
                    continue;
                }
                Action::SshKey => {
                    let spec = key_spec(p).unwrap_or_else(|| unreachable!("planned with a key"));
                    let pw = looked_up(p)?;
                    let (path, warnings) = ssh_key::generate(&spec, &pw)?;
                    ssh_key::report(&path, &mut out)?;
                    if !warnings.is_empty() {
                        out.insert("warnings".into(), json!(warnings));
                    }
                    continue;
                }
                Action::Ageing => {
                    let flags: Vec<String> = ageing_changes(p, &shadow(&p.name)?)
                        .into_iter()
                        .flat_map(|(flag, _, _, after)| [flag.to_string(), after.to_string()])
                        .chain([p.name.clone()])
                        .collect();
                    if flags.len() == 1 {
                        continue;
                    }
                    ("chage", flags)
                }
                Action::Add(a) => (if p.local.0 { "luseradd" } else { "useradd" }, a.clone()),
                Action::Mod(a) => (if p.local.0 { "lusermod" } else { "usermod" }, a.clone()),
                Action::Del(a) => (if p.local.0 { "luserdel" } else { "userdel" }, a.clone()),
                Action::Lchage(days) => (
                    "lchage",
                    vec!["-E".into(), days.to_string(), p.name.clone()],
                ),
                Action::Member { add, group } => (
                    "lgroupmod",
                    vec![
                        if *add { "-M" } else { "-m" }.into(),
                        p.name.clone(),
                        group.clone(),
                    ],
                ),
            };
            let ran = shadow_tool(tool, &args)?;
            if ran.rc != 0 {
                return Err(tool_failed(&p.name, &ran));
            }
            stdout.push_str(&ran.stdout);
            stderr.push_str(&ran.stderr);
        }
        if !stdout.is_empty() {
            out.insert("stdout".into(), json!(stdout));
        }
        if !stderr.is_empty() {
            out.insert("stderr".into(), json!(stderr));
        }
        if p.state == State::Present {
            insert_info(&mut out, &looked_up(p)?, p);
        }
        Ok(out)
    }
}

/// The plan for the account, its home, key and ageing.
fn plan_account(p: &Params, s: &Probed, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
    let mut plan = Plan::new();
    plan.result.insert("name".into(), json!(p.name));
    let state = match p.state {
        State::Present => "present",
        State::Absent => "absent",
    };
    plan.result.insert("state".into(), json!(state));
    match (p.state, &s.pw) {
        (State::Absent, None) => {}
        (State::Absent, Some(_)) => {
            let mut args = Vec::new();
            // luserdel has no `-f`.
            if p.force.0 && !p.local.0 {
                args.push("-f".into());
            }
            if p.remove.0 {
                args.push("-r".into());
            }
            args.push(p.name.clone());
            plan.actions.push(Action::Del(args));
            plan.diff.attr(&p.name, "state", "present", "absent");
            if ctx.check {
                // Ansible's module stops there in check mode and returns nothing else.
                plan.result = Map::new();
            } else {
                plan.result.insert("force".into(), json!(p.force.0));
                plan.result.insert("remove".into(), json!(p.remove.0));
            }
        }
        (State::Present, None) => {
            plan.diff.attr(&p.name, "state", "absent", "present");
            if ctx.check {
                plan.actions.push(Action::Add(Vec::new()));
                plan.result = Map::new();
                return Ok(plan);
            }
            if let (Some(home), true) = (&p.home, p.create_home.0) {
                if let Some(parent) = Path::new(home).parent() {
                    if !parent.as_os_str().is_empty() && !parent.is_dir() {
                        plan.actions
                            .push(Action::Parents(parent.display().to_string()));
                    }
                }
            }
            let (args, libuser) = add_args(p, s)?;
            plan.actions.push(Action::Add(args));
            plan.actions.extend(libuser);
            // Ansible generates the key, then sets the ageing the new entry lacks.
            if key_spec(p).is_some() {
                plan.actions.push(Action::SshKey);
            }
            if ageing(p).iter().any(|(_, _, v)| v.is_some()) {
                plan.actions.push(Action::Ageing);
            }
            plan.result.insert("system".into(), json!(p.system.0));
            plan.result
                .insert("create_home".into(), json!(p.create_home.0));
            if p.password.is_some() {
                plan.result
                    .insert("password".into(), json!("NOT_LOGGING_PASSWORD"));
            }
        }
        (State::Present, Some(pw)) => {
            let (args, libuser) = mod_args(p, s, pw, &mut plan)?;
            let moves_home = args.iter().any(|a| a == "-d") && p.move_home.0;
            if !args.is_empty() {
                let mut args = args;
                args.push(p.name.clone());
                plan.actions.push(Action::Mod(args));
            }
            plan.actions.extend(libuser);
            // Ansible creates a missing home even for an account it did not change.
            let home = p.home.clone().unwrap_or_else(|| pw.home.clone());
            let moved_there = moves_home && s.old_home_exists && !ctx.check;
            if p.create_home.0 && !s.home_exists && !moved_there {
                plan.diff.attr(&home, "state", "absent", "directory");
                plan.actions.push(Action::MakeHome(home));
            }
            if let (Some(spec), Some(key)) = (key_spec(p), &s.key) {
                let (go, warnings) = spec.decide(key);
                if go {
                    plan.diff.attr(
                        key.path.display().to_string(),
                        "state",
                        if key.private_exists { "file" } else { "absent" },
                        "generated",
                    );
                    plan.actions.push(Action::SshKey);
                }
                ssh_key::report(&key.path, &mut plan.result)?;
                if !warnings.is_empty() {
                    plan.result.insert("warnings".into(), json!(warnings));
                }
            }
            let ageing_changes = ageing_changes(p, &s.shadow);
            for (_, attr, before, after) in &ageing_changes {
                plan.diff
                    .attr(&p.name, attr, before.to_string(), after.to_string());
            }
            if !ageing_changes.is_empty() {
                plan.actions.push(Action::Ageing);
            }
            plan.result.insert("append".into(), json!(p.append.0));
            plan.result.insert("move_home".into(), json!(p.move_home.0));
            if p.password.is_some() {
                plan.result
                    .insert("password".into(), json!("NOT_LOGGING_PASSWORD"));
            }
            insert_info(&mut plan.result, pw, p);
        }
    }
    Ok(plan)
}

/// Ansible's test for a password given in clear (it warns, and sets it anyway): not a crypt(3)
/// hash by its characters and, for the common schemes, its length.
fn looks_unhashed(pw: &str) -> bool {
    if ["*", "!", "*************"].contains(&pw) {
        return false;
    }
    if pw.contains([':', '*', '!']) || !pw.contains('$') {
        return true;
    }
    let fields: Vec<&str> = pw.split('$').collect();
    let Some(last) = fields.last().filter(|_| fields.len() >= 3) else {
        return true;
    };
    let bad_char = last
        .chars()
        .any(|c| !(c.is_ascii_alphanumeric() || "./=".contains(c)));
    let want = match fields[1] {
        "1" => Some(22),
        "5" | "y" => Some(43),
        "6" => Some(86),
        _ => None,
    };
    bad_char || want.is_some_and(|n| last.len() != n)
}

fn looked_up(p: &Params) -> Result<PwEntry, ModuleError> {
    user_by_name(&p.name)?
        .ok_or_else(|| ModuleError::failed(format!("failed to look up user name: {}", p.name)))
}

/// The key to generate, when `generate_ssh_key` asks for one.
fn key_spec(p: &Params) -> Option<KeySpec> {
    p.generate_ssh_key.filter(|g| g.0)?;
    Some(KeySpec {
        file: p
            .ssh_key_file
            .clone()
            .unwrap_or_else(|| format!(".ssh/id_{}", p.ssh_key_type)),
        kind: p.ssh_key_type.clone(),
        bits: p.ssh_key_bits.unwrap_or(0),
        comment: p.ssh_key_comment.clone(),
        passphrase: p.ssh_key_passphrase.clone(),
        force: p.force.0,
    })
}

/// The ageing parameters: chage's flag, the name, the value asked for.
fn ageing(p: &Params) -> [(&'static str, &'static str, Option<i64>); 3] {
    [
        ("-m", "password_expire_min", p.password_expire_min),
        ("-M", "password_expire_max", p.password_expire_max),
        ("-W", "password_expire_warn", p.password_expire_warn),
    ]
}

/// The ageing fields that differ from the shadow entry: flag, name, before, after.
fn ageing_changes(p: &Params, sh: &Shadow) -> Vec<(&'static str, &'static str, i64, i64)> {
    ageing(p)
        .into_iter()
        .zip([sh.min, sh.max, sh.warn])
        .filter_map(|((flag, name, want), have)| {
            want.filter(|w| *w != have).map(|w| (flag, name, have, w))
        })
        .collect()
}

/// The account's fields as Ansible returns them after the run.
fn insert_info(r: &mut Map<String, Value>, pw: &PwEntry, p: &Params) {
    r.insert("uid".into(), json!(pw.uid));
    r.insert("group".into(), json!(pw.gid));
    r.insert("comment".into(), json!(pw.gecos));
    r.insert("home".into(), json!(pw.home));
    r.insert("shell".into(), json!(pw.shell));
    if let Some(g) = &p.groups {
        // Ansible returns the joined parameter, not the account's groups.
        r.insert("groups".into(), json!(g.0.join(",")));
    }
}

#[cfg(test)]
#[path = "user_tests.rs"]
mod tests;
