//! A host's connection variables (`ansible_connection`, `ansible_host`, `ansible_user`,
//! `ansible_become`...) turned into the `ConnSpec` the transports connect with.

use crate::config::Config;
use crate::connection::{BecomeMethod, ConnKind, ConnSpec, Secret};
use crate::playbook::{Play, Task};
use crate::vars::Scope;
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::sync::Arc;

/// The connection variables `from_vars` reads.
const CONN_VARS: &[&str] = &[
    "ansible_connection",
    "ansible_become",
    "ansible_become_user",
    "ansible_become_method",
    "ansible_become_password",
    "ansible_become_pass",
    "ansible_host",
    "ansible_ssh_host",
    "ansible_port",
    "ansible_ssh_port",
    "ansible_user",
    "ansible_ssh_user",
    "ansible_ssh_private_key_file",
    "fixpoint_agent_path",
    "fixpoint_state_dir",
    "ansible_become_exe",
    "ansible_become_flags",
];

/// The `connection` values fixpoint connects with (`smart` and `paramiko` mean ssh here).
pub const KNOWN_CONNECTIONS: &[&str] = &["ssh", "smart", "paramiko", "local"];

/// Whether `from_vars` would give, in a scope, the spec it gives from the inventory, the play's
/// `vars` and `-e` alone: every connection variable the scope defines comes, as written (no
/// template), from one of those maps. A connection variable any other map defines (a task's or
/// block's `vars:`, a role's, `set_fact`, `include_vars`) is read for the task, as in
/// ansible-core, so the spec is then computed for the task. Otherwise it is the same for every
/// task of the play with the same `become` keywords, and the engine computes it once per host
/// and play. `defining_map` says which map of the scope a variable comes from
/// (`Scope::defining_map`, or `vars::precedence::VarMaps::defining_map` without building the
/// scope).
pub fn fixed_in<'s>(
    inv_vars: &Arc<Map<String, Value>>,
    defining_map: impl Fn(&str) -> Option<&'s Arc<Map<String, Value>>>,
    play: &Play,
    task: Option<&Task>,
    cfg: &Config,
) -> bool {
    keywords_fixed(play, task, cfg) && vars_fixed(inv_vars, defining_map, play, cfg)
}

/// `fixed_in`'s half about the keywords: none of the task's or play's `become_method`,
/// `become_user` and connection keywords, nor their command-line defaults, is a template.
pub fn keywords_fixed(play: &Play, task: Option<&Task>, cfg: &Config) -> bool {
    let method_templated = task
        .and_then(|t| t.become_method.as_deref())
        .or(play.become_method.as_deref())
        .is_some_and(fixpoint_modules::params::is_template);
    // A templated `become_user` (`"{{ a_fact }}"`) is rendered for each task.
    let user_templated = task
        .and_then(|t| t.become_user.as_deref())
        .or(play.become_user.as_deref())
        .is_some_and(fixpoint_modules::params::is_template);
    // Templated connection keywords are rendered with the task's variables.
    let keywords_templated = play.conn.templated() || task.is_some_and(|t| t.conn.templated());
    !method_templated && !user_templated && !keywords_templated && !cfg.play_defaults.templated()
}

/// `fixed_in`'s half about the variables: every connection variable the scope defines comes,
/// as written, from the inventory, the play's `vars` or `-e`. It depends on the variable maps
/// alone (and which of them are those three), so the engine memoises it per host
/// (`vars::precedence::MapsMemo`).
pub fn vars_fixed<'s>(
    inv_vars: &Arc<Map<String, Value>>,
    defining_map: impl Fn(&str) -> Option<&'s Arc<Map<String, Value>>>,
    play: &Play,
    cfg: &Config,
) -> bool {
    let fixed_sources = [inv_vars, &play.vars, &cfg.extra_vars];
    CONN_VARS.iter().all(|k| match defining_map(k) {
        None => true,
        Some(m) => {
            fixed_sources.iter().any(|f| Arc::ptr_eq(f, m))
                && !crate::template::Templar::needs_render(&m[*k])
        }
    })
}

/// The connection spec for `host`, from its connection variables rendered in `scope` (the
/// host's scope for `task`). Only the variables `defines` says a variable map sets are looked
/// up (whichever map: the inventory, `vars:`, `set_fact`...; not the `ansible_connection` the
/// scope adds from the play's keyword, which the task's own keyword wins over). The variables
/// `ansible_become`, `ansible_become_user` and `ansible_become_method` win over the `become`,
/// `become_user` and `become_method` keywords of the task or play, as in ansible-core;
/// the `connection`, `remote_user` and `port` keywords of the task (its blocks, its role) or
/// else the play are used when no variable sets them, as in ansible-core.
pub fn from_vars(
    host: &str,
    scope: &Arc<Scope>,
    defines: impl Fn(&str) -> bool,
    play: &Play,
    task: Option<&Task>,
    cfg: &Config,
) -> Result<ConnSpec, String> {
    let get = |k: &str| -> Result<Option<Value>, String> {
        debug_assert!(CONN_VARS.contains(&k), "{k} missing from CONN_VARS");
        if !defines(k) {
            return Ok(None);
        }
        let v = scope.render(&json!(format!("{{{{ {k} }}}}")))?;
        Ok(Some(v))
    };
    let as_string = |v: Option<Value>| -> Option<String> {
        v.and_then(|v| match v {
            Value::String(s) => Some(s),
            Value::Null => None,
            other => Some(other.to_string()),
        })
    };
    let cli = &cfg.play_defaults;
    let keywords = match task {
        Some(t) => t.conn.or(&play.conn),
        None => play.conn.clone(),
    };
    let keyword = |v: &Option<String>, what: &str| -> Result<Option<String>, String> {
        match v {
            Some(s) if fixpoint_modules::params::is_template(s) => Ok(as_string(Some(
                scope
                    .render(&json!(s))
                    .map_err(|e| format!("cannot render `{what}`: {e}"))?,
            ))),
            other => Ok(other.clone()),
        }
    };
    // `-c` and `-u` are the defaults of the `connection` and `remote_user` keywords.
    let connection = match as_string(get("ansible_connection")?) {
        Some(c) => c,
        None => keyword(
            &keywords.connection.or(cli.connection.clone()),
            "connection",
        )?
        .unwrap_or_else(|| "ssh".into()),
    };
    // As in ansible-core (`PlayContext.set_task_and_variable_override`), a variable wins over
    // the keywords of the task (its blocks, its role) and the play, which win over the command
    // line's defaults (`-b`, `--become-user`, `--become-method`: the keywords' defaults there).
    let become_ = get("ansible_become")?
        .map(|v| {
            matches!(v, Value::Bool(true)) || v.as_str().is_some_and(|s| s == "true" || s == "yes")
        })
        .or(task.and_then(|t| t.become_))
        .or(play.become_)
        .unwrap_or(cli.become_);
    let become_user = if become_ {
        Some(
            as_string(get("ansible_become_user")?)
                .or_else(|| task.and_then(|t| t.become_user.clone()))
                .or_else(|| play.become_user.clone())
                .or_else(|| cli.become_user.clone())
                .unwrap_or_else(|| "root".into()),
        )
    } else {
        None
    };
    // The keyword may be a template (the variables above are rendered already).
    let become_user = match become_user {
        Some(u) if fixpoint_modules::params::is_template(&u) => {
            as_string(Some(scope.render(&json!(u))?))
        }
        other => other,
    };
    let become_method = if become_ {
        let method = as_string(get("ansible_become_method")?)
            .or_else(|| task.and_then(|t| t.become_method.clone()))
            .or_else(|| play.become_method.clone())
            .or_else(|| cli.become_method.clone())
            .unwrap_or_else(|| "sudo".into());
        let method = if fixpoint_modules::params::is_template(&method) {
            as_string(Some(scope.render(&json!(method))?)).unwrap_or_default()
        } else {
            method
        };
        match method.as_str() {
            "sudo" => BecomeMethod::Sudo,
            "su" => BecomeMethod::Su,
            _ => {
                return Err(format!(
                    "become_method `{method}` is not supported by fixpoint: it becomes through \
                     sudo or su; use `become_method: sudo` or `become_method: su`"
                ))
            }
        }
    } else {
        BecomeMethod::Sudo
    };
    let become_password = if become_user.is_some() {
        // A password variable becomes a `Secret` as soon as it is read: from here on it can
        // be logged or put in an error without being shown.
        cfg.become_password
            .clone()
            .or(as_string(get("ansible_become_password")?).map(Secret::new))
            .or(as_string(get("ansible_become_pass")?).map(Secret::new))
    } else {
        None
    };
    let kind = match connection.as_str() {
        "local" => ConnKind::Local,
        "ssh" | "smart" | "paramiko" => ConnKind::Ssh {
            address: as_string(get("ansible_host")?)
                .or(as_string(get("ansible_ssh_host")?))
                .unwrap_or_else(|| host.to_string()),
            port: match get("ansible_port")?
                .or(get("ansible_ssh_port")?)
                .or(keyword(&keywords.port, "port")?.map(|p| Value::String(p.trim().to_string())))
            {
                // A number that is not a port (70000, -1, 22.5) is refused, not cut to 16 bits.
                Some(Value::Number(n)) => Some(
                    n.as_u64()
                        .and_then(|p| u16::try_from(p).ok())
                        .ok_or_else(|| format!("ansible_port `{n}` is not a port number"))?,
                ),
                Some(Value::String(s)) => Some(
                    s.parse::<u16>()
                        .map_err(|_| format!("ansible_port `{s}` is not a port number"))?,
                ),
                _ => None,
            },
            user: match as_string(get("ansible_user")?).or(as_string(get("ansible_ssh_user")?)) {
                Some(u) => Some(u),
                None => keyword(
                    &keywords.remote_user.or(cli.remote_user.clone()),
                    "remote_user",
                )?,
            },
            key_file: as_string(get("ansible_ssh_private_key_file")?).map(PathBuf::from),
            ssh_config: cfg.ssh_config.clone(),
            accept_new_host_keys: cfg.accept_new_host_keys,
            handshakes: cfg.handshakes.clone(),
        },
        other => {
            return Err(format!(
                "ansible_connection `{other}` is not supported (use ssh or local)"
            ))
        }
    };
    // Root becoming root locally needs no sudo.
    let become_user = match (&kind, become_user) {
        (ConnKind::Local, Some(u)) if u == "root" && nix::unistd::geteuid().is_root() => None,
        (_, u) => u,
    };
    // `ansible_become_exe` / `ansible_become_flags` win over the keywords, as for the others.
    let become_exe = match as_string(get("ansible_become_exe")?) {
        Some(e) => Some(e),
        None => keyword(&keywords.become_exe, "become_exe")?,
    };
    let become_flags = match as_string(get("ansible_become_flags")?) {
        Some(f) => Some(f),
        None => keyword(&keywords.become_flags, "become_flags")?,
    };
    let become_flags = match become_flags {
        Some(f) => crate::playbook::become_flags_for(become_method, &f)?,
        None => Vec::new(),
    };
    // `fixpoint_state_dir` is the journal of the login user's and root's agents: an agent that
    // becomes another user can neither read nor write it, and keeps its journal in that user's
    // own default state directory.
    let state_dir = match become_user.as_deref() {
        Some(u) if u != "root" => None,
        _ => as_string(get("fixpoint_state_dir")?),
    };
    Ok(ConnSpec {
        host: host.to_string(),
        kind,
        become_user,
        become_password,
        become_method,
        become_exe,
        become_flags,
        agent_path: as_string(get("fixpoint_agent_path")?).map(PathBuf::from),
        state_dir,
        connect_timeout: cfg.connect_timeout,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::Templar;
    use crate::vars::Layer;

    fn cfg() -> Config {
        cfg_with(&[])
    }

    /// The configuration of `fixpoint apply <flags> site.yml`.
    fn cfg_with(flags: &[&str]) -> Config {
        use clap::Parser;
        let argv = ["fixpoint", "apply"]
            .iter()
            .chain(flags)
            .chain(&["site.yml"]);
        let crate::cli::Command::Apply(args) = crate::cli::Cli::parse_from(argv).command else {
            unreachable!("parsed an apply command")
        };
        Config::from_run_args(args, false).unwrap()
    }

    #[test]
    fn command_line_defaults_lose_to_keywords_which_lose_to_variables() {
        let cfg = cfg_with(&["-b", "--become-user", "cli", "-u", "bob", "-c", "ssh"]);
        let spec = |inv: Value, play: &Play| {
            let scope = Scope::new(
                Arc::new(Templar::new()),
                vec![Layer::shared(map(inv), true)],
            );
            from_vars("h", &scope, |k| scope.defines(k), play, None, &cfg).unwrap()
        };
        let mut play = Play::bare("all", false);
        play.become_ = None;
        let s = spec(json!({}), &play);
        assert_eq!(s.become_user.as_deref(), Some("cli"));
        assert!(
            format!("{:?}", s.kind).contains("user: Some(\"bob\")"),
            "{:?}",
            s.kind
        );
        // The play's keywords win over the command line...
        play.become_user = Some("kw".into());
        play.conn.remote_user = Some("carol".into());
        let s = spec(json!({}), &play);
        assert_eq!(s.become_user.as_deref(), Some("kw"));
        assert!(format!("{:?}", s.kind).contains("user: Some(\"carol\")"));
        // ... and the variables over the keywords.
        let s = spec(
            json!({"ansible_become_user": "var", "ansible_user": "dave"}),
            &play,
        );
        assert_eq!(s.become_user.as_deref(), Some("var"));
        assert!(format!("{:?}", s.kind).contains("user: Some(\"dave\")"));
        assert_eq!(
            spec(json!({"ansible_become": false}), &play).become_user,
            None
        );
        play.become_ = Some(false);
        assert_eq!(spec(json!({}), &play).become_user, None);
        assert!(spec(json!({"ansible_become": true}), &play)
            .become_user
            .is_some());

        // `-c local` is the connection of a host no keyword or variable gives one.
        let cfg = cfg_with(&["-c", "local"]);
        let play = Play::bare("all", false);
        let kind = |inv: Value| {
            let scope = Scope::new(
                Arc::new(Templar::new()),
                vec![Layer::shared(map(inv), true)],
            );
            let s = from_vars("h", &scope, |k| scope.defines(k), &play, None, &cfg).unwrap();
            format!("{:?}", s.kind)
        };
        assert_eq!(kind(json!({})), "Local");
        assert!(kind(json!({"ansible_connection": "ssh"})).starts_with("Ssh"));
    }

    #[test]
    fn su_is_a_method_of_its_own_with_its_own_flags() {
        let cfg = cfg();
        let mut play = Play::bare("all", false);
        play.become_ = Some(true);
        let spec = |inv: Value| {
            let scope = Scope::new(
                Arc::new(Templar::new()),
                vec![Layer::shared(map(inv), true)],
            );
            from_vars("h", &scope, |k| scope.defines(k), &play, None, &cfg)
        };
        let sudo = spec(json!({})).unwrap();
        let su = spec(json!({"ansible_become_method": "su", "ansible_become_flags": "-s /bin/sh"}))
            .unwrap();
        assert_eq!(su.become_method, BecomeMethod::Su);
        assert_eq!(su.become_exe(), "su");
        assert_eq!(su.become_flags, ["-s", "/bin/sh"]);
        // Another method is another agent, even for the same user.
        assert_ne!(sudo.route(), su.route());
        // A flag of the other method fails the task that would use it; an unknown method too.
        let err = spec(json!({"ansible_become_method": "su", "ansible_become_flags": "-H"}));
        assert!(err
            .unwrap_err()
            .contains("`-H` is not supported by fixpoint with become_method su"));
        let err = spec(json!({"ansible_become_flags": "-s /bin/sh"}));
        assert!(err.unwrap_err().contains("`/bin/sh`"));
        let err = spec(json!({"ansible_become_method": "doas"})).unwrap_err();
        assert!(err.contains("`doas` is not supported"), "{err}");
        // At load time the method may not be known yet: flags either method takes pass.
        assert!(crate::playbook::become_flags_of("-s /bin/sh").is_ok());
        assert!(crate::playbook::become_flags_of("-H -E").is_ok());
        assert!(crate::playbook::become_flags_of("-c id").is_err());
        assert!(crate::playbook::become_flags_of("-s").is_ok(), "sudo's -s");
    }

    fn map(v: Value) -> Arc<Map<String, Value>> {
        Arc::new(v.as_object().cloned().unwrap_or_default())
    }

    #[test]
    fn a_spec_is_fixed_only_when_its_variables_come_as_written_from_inventory_play_or_cli() {
        let cfg = cfg();
        let play = Play::bare("all", false);
        let inv = map(json!({"ansible_host": "10.0.0.1", "fixpoint_state_dir": "/s", "x": 1}));
        let scope_with = |task_vars: Value| {
            Scope::new(
                Arc::new(Templar::new()),
                vec![
                    Layer::shared(inv.clone(), true),
                    Layer::shared(play.vars.clone(), true),
                    Layer::shared(map(task_vars), true),
                    Layer::shared(cfg.extra_vars.clone(), true),
                ],
            )
        };
        // Task variables that are not connection variables change nothing.
        let plain = scope_with(json!({"x": 2}));
        assert!(fixed_in(&inv, |k| plain.defining_map(k), &play, None, &cfg));
        // A task's own `ansible_host` wins over the inventory's: computed per task.
        let over = scope_with(json!({"ansible_host": "10.0.0.2"}));
        assert!(!fixed_in(&inv, |k| over.defining_map(k), &play, None, &cfg));
        assert_eq!(
            from_vars("h", &over, |k| over.defines(k), &play, None, &cfg)
                .map(|s| format!("{:?}", s.kind))
                .unwrap(),
            format!(
                "{:?}",
                from_vars("h", &plain, |k| plain.defines(k), &play, None, &cfg)
                    .unwrap()
                    .kind
            )
            .replace("10.0.0.1", "10.0.0.2")
        );
        // A connection variable only a task sets (`become` through `vars:`, as ansible-core's
        // `setup_test_user` does) is read for that task, which is not the cached spec.
        let become_vars = scope_with(json!({"ansible_become": true, "ansible_become_user": "u"}));
        assert!(!fixed_in(
            &inv,
            |k| become_vars.defining_map(k),
            &play,
            None,
            &cfg
        ));
        // (A play without a `become` keyword: `bare` says `become: false`.)
        let mut open = Play::bare("all", false);
        open.become_ = None;
        let spec = from_vars(
            "h",
            &become_vars,
            |k| become_vars.defines(k),
            &open,
            None,
            &cfg,
        );
        assert_eq!(spec.unwrap().become_user.as_deref(), Some("u"));
        let spec = from_vars("h", &plain, |k| plain.defines(k), &open, None, &cfg);
        assert_eq!(spec.unwrap().become_user, None);
        // A template may read what tasks change (`set_fact`): computed per task.
        let templated = map(json!({"ansible_host": "{{ x }}"}));
        let scope = Scope::new(
            Arc::new(Templar::new()),
            vec![Layer::shared(templated.clone(), true)],
        );
        assert!(!fixed_in(
            &templated,
            |k| scope.defining_map(k),
            &play,
            None,
            &cfg
        ));
    }
}
