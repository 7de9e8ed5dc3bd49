//! Accounts: what the `user` and `group` modules share (reading the passwd, group and shadow
//! databases, running the shadow tools).
//!
//! The modules live beside this file: `user.rs` (`user`), `group.rs` (`group`) and
//! `getent.rs` (`getent`, which only reads). Every change
//! goes through `useradd`, `usermod`, `userdel`, `groupadd`, `groupmod` and `groupdel`, which
//! take the databases' locks (`lckpwdf`) themselves: nothing here writes `/etc/passwd`,
//! `/etc/group` or `/etc/shadow`.

pub mod getent;
pub mod group;
pub mod user;

use crate::service::{run, which, Ran};
use crate::ModuleError;
use std::time::{Duration, Instant};

/// One passwd entry (from NSS, as Ansible's `pwd.getpwnam`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PwEntry {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub gecos: String,
    pub home: String,
    pub shell: String,
}

/// One group entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrEntry {
    pub name: String,
    pub gid: u32,
}

pub fn user_by_name(name: &str) -> Result<Option<PwEntry>, ModuleError> {
    let u = nix::unistd::User::from_name(name)
        .map_err(|e| ModuleError::failed(format!("looking up user {name}: {e}")))?;
    Ok(u.map(|u| PwEntry {
        name: u.name,
        uid: u.uid.as_raw(),
        gid: u.gid.as_raw(),
        gecos: u.gecos.to_string_lossy().into_owned(),
        home: u.dir.display().to_string(),
        shell: u.shell.display().to_string(),
    }))
}

/// A group by its name only (the `group` module: a numeric `name` is a name there).
pub fn group_by_name(name: &str) -> Result<Option<GrEntry>, ModuleError> {
    let g = nix::unistd::Group::from_name(name)
        .map_err(|e| ModuleError::failed(format!("looking up group {name}: {e}")))?;
    Ok(g.map(|g| GrEntry {
        name: g.name,
        gid: g.gid.as_raw(),
    }))
}

/// A group by name, or by number when the name is all digits (as Ansible's `group_exists`).
pub fn group_lookup(name: &str) -> Result<Option<GrEntry>, ModuleError> {
    let g = if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
        match name.parse::<u32>() {
            Ok(n) => nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(n)),
            Err(_) => Ok(None),
        }
    } else {
        nix::unistd::Group::from_name(name)
    }
    .map_err(|e| ModuleError::failed(format!("looking up group {name}: {e}")))?;
    Ok(g.map(|g| GrEntry {
        name: g.name,
        gid: g.gid.as_raw(),
    }))
}

/// An optional id given as a number or as digits in a string (a templated value arrives as
/// a string; Ansible's `type='int'` takes both).
pub fn de_opt_u32<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    use serde::Deserialize;
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::Number(n)) => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| {
                serde::de::Error::custom(format!("expected an id (0 to 4294967295), found {n}"))
            }),
        Some(serde_json::Value::String(s)) => s.trim().parse::<u32>().map(Some).map_err(|_| {
            serde::de::Error::custom(format!("expected an id (0 to 4294967295), found \"{s}\""))
        }),
        Some(other) => Err(serde::de::Error::custom(format!(
            "expected an id, found {other}"
        ))),
    }
}

/// The groups whose member list names `user` (Ansible's `grp.getgrall()` scan), from
/// `/etc/group`, in file order.
pub fn memberships(user: &str) -> Result<Vec<String>, ModuleError> {
    let text =
        std::fs::read_to_string("/etc/group").map_err(|e| ModuleError::io("/etc/group", e))?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() >= 4 && f[3].split(',').any(|m| m == user)).then(|| f[0].to_string())
        })
        .collect())
}

/// The shadow entry's password hash and account expiry (days since the epoch, -1 when empty),
/// as Ansible reads them. Empty when the user has no shadow line.
pub fn shadow(user: &str) -> Result<(String, i64), ModuleError> {
    let text =
        std::fs::read_to_string("/etc/shadow").map_err(|e| ModuleError::io("/etc/shadow", e))?;
    for l in text.lines() {
        let f: Vec<&str> = l.split(':').collect();
        if f.first() == Some(&user) {
            let expire = f
                .get(7)
                .and_then(|s| s.trim().parse::<i64>().ok())
                .unwrap_or(-1);
            return Ok((f.get(1).unwrap_or(&"").to_string(), expire));
        }
    }
    Ok((String::new(), -1))
}

/// Run a shadow tool. Another process holding the databases' lock makes the tools fail at
/// once ("cannot lock /etc/passwd; try again later"): retried until a deadline, because
/// parallel runs on one host must not fail each other.
pub fn shadow_tool(tool: &str, args: &[String]) -> Result<Ran, ModuleError> {
    let prog = which(tool).ok_or_else(|| {
        ModuleError::failed(format!(
            "cannot find {tool}: install the shadow tools (passwd)"
        ))
    })?;
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ran = run(&prog, &argv)?;
        let locked = ran.rc != 0 && ran.stderr.contains("cannot lock");
        if !locked || Instant::now() >= deadline {
            return Ok(ran);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A failed tool run as Ansible reports it: its stderr as the message, `rc` alongside.
pub fn tool_failed(name: &str, ran: &Ran) -> ModuleError {
    ModuleError::Failed {
        msg: ran.stderr.trim_end().to_string(),
        result: [
            ("name".to_string(), serde_json::json!(name)),
            ("rc".to_string(), serde_json::json!(ran.rc)),
        ]
        .into_iter()
        .collect(),
    }
}
