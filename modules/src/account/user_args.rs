//! The argument lists of `user`'s tools: `useradd`/`usermod` (or, with `local`, `luseradd`/
//! `lusermod`) in ansible-core's order, and what `local` does besides them (`lchage -E` for the
//! expiry, `lgroupmod` for each supplementary group), each planned from the probed state.

use super::*;

/// Whether `/etc/passwd` itself has a line for `name` (ansible-core's test with `local`).
pub(super) fn in_passwd_file(name: &str) -> Result<bool, ModuleError> {
    let text = std::fs::read("/etc/passwd").map_err(|e| {
        ModuleError::failed(format!(
            "'local: true' specified but unable to find local account file /etc/passwd to parse: {e}"
        ))
    })?;
    let prefix = format!("{name}:");
    Ok(text
        .split(|b| *b == b'\n')
        .any(|l| l.starts_with(prefix.as_bytes())))
}

/// `lchage -E`'s day for an expiry: the day since the epoch, -1 for never.
fn lchage_day(e: Expires) -> i64 {
    e.days().unwrap_or(-1)
}

fn resolved_group(s: &Probed, name: &str) -> Result<GrEntry, ModuleError> {
    match &s.group {
        Some(Some(g)) => Ok(g.clone()),
        _ => Err(missing_group(name)),
    }
}

fn resolved_groups(s: &Probed) -> Result<Vec<&GrEntry>, ModuleError> {
    s.groups
        .iter()
        .map(|(n, e)| e.as_ref().ok_or_else(|| missing_group(n)))
        .collect()
}

/// `useradd`'s (`luseradd`'s) arguments, in Ansible's order, and with `local` what follows
/// it: the expiry through lchage, then each supplementary group through lgroupmod (luseradd
/// takes neither).
pub(super) fn add_args(p: &Params, s: &Probed) -> Result<(Vec<String>, Vec<Action>), ModuleError> {
    let local = p.local.0;
    let mut a: Vec<String> = Vec::new();
    if let Some(uid) = p.uid {
        a.extend(["-u".into(), uid.to_string()]);
        if p.non_unique.0 {
            a.push("-o".into());
        }
    }
    if let Some(g) = &p.group {
        resolved_group(s, g)?;
        a.extend(["-g".into(), g.clone()]);
    } else if s.own_group_exists {
        // useradd would try to create the user's group (USERGROUPS_ENAB) and fail; luseradd
        // spells it `-n`.
        a.push(if local { "-n" } else { "-N" }.into());
    }
    resolved_groups(s)?;
    if !s.groups.is_empty() && !local {
        let names: Vec<&str> = s.groups.iter().map(|(n, _)| n.as_str()).collect();
        a.extend(["-G".into(), names.join(",")]);
    }
    if let Some(c) = &p.comment {
        a.extend(["-c".into(), c.clone()]);
    }
    if let Some(h) = &p.home {
        a.extend(["-d".into(), h.clone()]);
    }
    if let Some(sh) = &p.shell {
        a.extend(["-s".into(), sh.clone()]);
    }
    if let Some(e) = p.expires.filter(|_| !local) {
        a.push("-e".into());
        a.push(e.days().map(date_of).unwrap_or_default());
    }
    if let Some(days) = p.password_expire_account_disable {
        // luseradd has no `-f` either: ansible-core passes it all the same, and so it fails.
        a.extend(["-f".into(), days.to_string()]);
    }
    if let Some(pw) = &p.password {
        a.push("-p".into());
        a.push(if p.password_lock.is_some_and(|l| l.0) {
            format!("!{pw}")
        } else {
            pw.clone()
        });
    }
    if p.create_home.0 {
        // luseradd makes the home unless told `-M`.
        if !local {
            a.push("-m".into());
        }
        if let Some(k) = &p.skeleton {
            a.extend(["-k".into(), k.clone()]);
        }
        if let Some(u) = &p.umask {
            a.extend(["-K".into(), format!("UMASK={u}")]);
        }
    } else {
        a.push("-M".into());
    }
    if p.system.0 {
        a.push("-r".into());
    }
    if let Some(m) = p.uid_min {
        a.extend(["-K".into(), format!("UID_MIN={m}")]);
    }
    if let Some(m) = p.uid_max {
        a.extend(["-K".into(), format!("UID_MAX={m}")]);
    }
    a.push(p.name.clone());
    let mut then = Vec::new();
    if local {
        if let Some(e) = p.expires {
            then.push(Action::Lchage(lchage_day(e)));
        }
        // The groups as given (a gid stays a number), as ansible-core hands them to lgroupmod.
        then.extend(s.groups.iter().map(|(g, _)| Action::Member {
            add: true,
            group: g.clone(),
        }));
    }
    Ok((a, then))
}

/// `usermod`'s (`lusermod`'s) arguments for what differs (empty: nothing does), recording the
/// diff, and with `local` what follows it: lchage for the expiry, then lgroupmod adding the
/// user to the groups it lacks and (unless appending) removing it from the others.
pub(super) fn mod_args(
    p: &Params,
    s: &Probed,
    pw: &PwEntry,
    plan: &mut Plan<Action>,
) -> Result<(Vec<String>, Vec<Action>), ModuleError> {
    let name = &p.name;
    let local = p.local.0;
    let mut then = Vec::new();
    let mut a: Vec<String> = Vec::new();
    if let Some(uid) = p.uid.filter(|u| *u != pw.uid) {
        plan.diff
            .attr(name, "uid", pw.uid.to_string(), uid.to_string());
        a.extend(["-u".into(), uid.to_string()]);
        if p.non_unique.0 {
            a.push("-o".into());
        }
    }
    if let Some(g) = &p.group {
        let g = resolved_group(s, g)?;
        if g.gid != pw.gid {
            plan.diff
                .attr(name, "group", pw.gid.to_string(), g.gid.to_string());
            a.extend(["-g".into(), g.gid.to_string()]);
        }
    }
    if p.groups.is_some() {
        let want: Vec<String> = resolved_groups(s)?
            .into_iter()
            .map(|g| g.name.clone())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let current: std::collections::BTreeSet<&String> = s.member_of.iter().collect();
        let wanted: std::collections::BTreeSet<&String> = want.iter().collect();
        let differ = current != wanted;
        let need = if want.is_empty() {
            !s.member_of.is_empty() && !p.append.0
        } else if p.append.0 {
            // Appending changes something only when a wanted group is missing.
            !wanted.is_subset(&current)
        } else {
            differ
        };
        if need && local {
            // lusermod takes no groups: lgroupmod adds the missing memberships and, unless
            // appending, removes the others.
            then.extend(wanted.difference(&current).map(|g| Action::Member {
                add: true,
                group: g.to_string(),
            }));
            if !p.append.0 {
                then.extend(current.difference(&wanted).map(|g| Action::Member {
                    add: false,
                    group: g.to_string(),
                }));
            }
        } else if need && p.append.0 && !want.is_empty() {
            a.push("-a".into());
        }
        if need {
            plan.diff.attr(
                name,
                "groups",
                s.member_of.join(","),
                if p.append.0 {
                    let mut all: Vec<&String> = current.union(&wanted).copied().collect();
                    all.sort();
                    all.iter().map(|x| x.as_str()).collect::<Vec<_>>().join(",")
                } else {
                    want.join(",")
                },
            );
            if !local {
                a.extend(["-G".into(), want.join(",")]);
            }
        }
    }
    if let Some(c) = p.comment.as_ref().filter(|c| **c != pw.gecos) {
        plan.diff.attr(name, "comment", &pw.gecos, c);
        a.extend(["-c".into(), c.clone()]);
    }
    if let Some(h) = p.home.as_ref().filter(|h| **h != pw.home) {
        plan.diff.attr(name, "home", &pw.home, h);
        a.extend(["-d".into(), h.clone()]);
        if p.move_home.0 {
            a.push("-m".into());
        }
    }
    if let Some(sh) = p.shell.as_ref().filter(|sh| **sh != pw.shell) {
        plan.diff.attr(name, "shell", &pw.shell, sh);
        a.extend(["-s".into(), sh.clone()]);
    }
    if let Some(e) = p.expires {
        let current = if s.shadow.expire < 0 {
            None
        } else {
            Some(s.shadow.expire)
        };
        let want = e.days();
        // Ansible compares the day only, and "never" with any set expiry.
        let differ = match want {
            None => current.is_some(),
            Some(d) => current != Some(d),
        };
        if differ {
            let show = |d: Option<i64>| d.map(date_of).unwrap_or_else(|| "never".into());
            plan.diff.attr(name, "expires", show(current), show(want));
            if local {
                // lusermod has no expiry: lchage follows it.
                then.insert(0, Action::Lchage(lchage_day(e)));
            } else {
                a.extend(["-e".into(), want.map(date_of).unwrap_or_default()]);
            }
        }
    }
    if let Some(days) = p
        .password_expire_account_disable
        .filter(|d| *d != s.shadow.inactive)
    {
        // Ansible passes `-f` on every run, changing each time; fixpoint compares first
        // (DEVIATIONS.md).
        plan.diff.attr(
            name,
            "password_expire_account_disable",
            s.shadow.inactive.to_string(),
            days.to_string(),
        );
        a.extend(["-f".into(), days.to_string()]);
    }
    let locked = s.shadow.hash.starts_with('!');
    let mut lock_flag = None;
    match p.password_lock.map(|l| l.0) {
        Some(true) if !locked => lock_flag = Some("-L"),
        Some(false) if locked => lock_flag = Some("-U"),
        _ => {}
    }
    let set_password = p.update_password == UpdatePassword::Always
        && p.password
            .as_deref()
            .is_some_and(|pw| s.shadow.hash.trim_start_matches('!') != pw.trim_start_matches('!'));
    if set_password {
        // The hash is a secret: the diff says only that it changes.
        plan.diff.attr(name, "password", "********", "********");
        let pw = p.password.as_deref().unwrap_or_default();
        a.push("-p".into());
        a.push(if p.password_lock.is_some_and(|l| l.0) {
            format!("!{pw}")
        } else {
            pw.to_string()
        });
    } else if let Some(f) = lock_flag {
        plan.diff.attr(
            name,
            "password_lock",
            locked.to_string(),
            (!locked).to_string(),
        );
        a.push(f.into());
    }
    Ok((a, then))
}
