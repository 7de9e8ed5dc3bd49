//! Accounts: what the `user` and `group` modules share (reading the passwd, group and shadow
//! databases, running the shadow tools).
//!
//! The modules live beside this file: `user.rs` (`user`, with `ssh_key.rs` for its key
//! generation, `home.rs` for a home made again and `user_args.rs` for its tools' arguments),
//! `group.rs` (`group`) and `getent.rs` (`getent`, which only reads). Every change goes through
//! `useradd`, `usermod`, `userdel`, `chage`, `groupadd`, `groupmod` and `groupdel` (or, with
//! `local`, libuser's `luseradd`, `lusermod`, `luserdel`, `lchage`, `lgroupadd`, `lgroupmod`
//! and `lgroupdel`),
//! which take the databases' locks themselves: nothing here writes `/etc/passwd`,
//! `/etc/group` or `/etc/shadow`.

pub mod getent;
pub mod group;
pub mod home;
pub mod ssh_key;
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

/// One `/etc/shadow` line as Ansible reads it (`getspnam`): the hash, and the ageing fields in
/// days, -1 where the field is empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shadow {
    pub hash: String,
    pub min: i64,
    pub max: i64,
    pub warn: i64,
    pub inactive: i64,
    pub expire: i64,
}

impl Default for Shadow {
    fn default() -> Self {
        Shadow {
            hash: String::new(),
            min: -1,
            max: -1,
            warn: -1,
            inactive: -1,
            expire: -1,
        }
    }
}

/// The user's shadow entry; when there is none, the default (empty hash, every field -1)
/// but for the expiry, day 0: ansible-core reads a missing entry's expiry as `'0'`, so
/// `expires: -1` runs `usermod -e ''` there (which adds the entry).
pub fn shadow(user: &str) -> Result<Shadow, ModuleError> {
    let text =
        std::fs::read_to_string("/etc/shadow").map_err(|e| ModuleError::io("/etc/shadow", e))?;
    Ok(text
        .lines()
        .find_map(|l| parse_shadow_line(l, user))
        .unwrap_or(Shadow {
            expire: 0,
            ..Shadow::default()
        }))
}

fn parse_shadow_line(line: &str, user: &str) -> Option<Shadow> {
    let f: Vec<&str> = line.split(':').collect();
    if f.first() != Some(&user) {
        return None;
    }
    let day = |i: usize| {
        f.get(i)
            .and_then(|s| s.trim().parse::<i64>().ok())
            .unwrap_or(-1)
    };
    Some(Shadow {
        hash: f.get(1).unwrap_or(&"").to_string(),
        min: day(3),
        max: day(4),
        warn: day(5),
        inactive: day(6),
        expire: day(7),
    })
}

/// An optional number of days given as a number or as digits in a string (Ansible's
/// `type='int'`; a templated value arrives as a string).
pub fn de_opt_i64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    use serde::Deserialize;
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| serde::de::Error::custom(format!("expected a whole number, found {n}"))),
        Some(serde_json::Value::String(s)) => s.trim().parse::<i64>().map(Some).map_err(|_| {
            serde::de::Error::custom(format!("expected a whole number, found \"{s}\""))
        }),
        Some(other) => Err(serde::de::Error::custom(format!(
            "expected a whole number, found {other}"
        ))),
    }
}

/// Run a shadow tool. Another process holding the databases' lock makes the tools fail at
/// once ("cannot lock /etc/passwd; try again later"): retried until a deadline, because
/// parallel runs on one host must not fail each other.
pub fn shadow_tool(tool: &str, args: &[String]) -> Result<Ran, ModuleError> {
    let prog = which(tool).ok_or_else(|| {
        // `local: true` drives libuser's tools (luseradd, lgroupmod, lchage, ...).
        let package = if tool.starts_with('l') {
            "libuser"
        } else {
            "the shadow tools (passwd)"
        };
        ModuleError::failed(format!("cannot find {tool}: install {package}"))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shadow_fields_are_days_and_empty_is_minus_one() {
        let s = parse_shadow_line("u:$6$x:19000:5:10:28::21990:", "u").unwrap();
        assert_eq!(
            (s.hash.as_str(), s.min, s.max, s.warn, s.inactive, s.expire),
            ("$6$x", 5, 10, 28, -1, 21990)
        );
        assert!(parse_shadow_line("uu:x:1:2:3:4:5:6:", "u").is_none());
    }
}
