//! One task entry -> `Task`: the module and its arguments (mapping, `k=v` or free-form
//! command), `local_action`, and the task keywords.

use super::ast::{Inherited, Task};
use super::keywords::{
    bool_of, check_keys, check_var_name, conditions_of, env_of, loop_of, map_of, short_name,
    string_of, strings_of, vars_of, TASK_KEYS, TASK_KEYS_NOT_YET,
};
use super::validate::{check_guard, check_module_params, param_pos};
use crate::diag::{suggest, Diagnostic, Pos};
use crate::yaml::{Kind, Node};
use serde_json::{Map, Value};
use std::path::Path;

/// The longest task `timeout` ansible-core takes, in seconds (about three years).
const MAX_TIMEOUT: i64 = 100_000_000;

/// Actions fixpoint runs itself on the controller (or through the agent's facts) rather than
/// as a module: `include_vars`, `setup`.
fn controller_action(k: &str) -> Option<&'static str> {
    match short_name(k) {
        "include_vars" => Some("include_vars"),
        "setup" => Some("setup"),
        _ => None,
    }
}

/// One task entry (not a block, include or meta): its module and arguments, its keywords,
/// and the keywords inherited from around it; checked before it is returned.
pub(crate) fn load_task(
    node: &Node,
    handler: bool,
    inh: &Inherited,
    play_dir: &Path,
) -> Result<Task, Diagnostic> {
    let entries = map_of(node, "a task")?;
    let mut module: Option<(&'static str, &Node, &Pos)> = None;
    for (k, kpos, v) in entries {
        if TASK_KEYS.contains(&k.as_str()) {
            if k == "listen" && !handler {
                return Err(Diagnostic::at(kpos, "`listen` is only valid on handlers"));
            }
            if k == "once_scope" && node.get("once").is_none() {
                return Err(Diagnostic::at(
                    kpos,
                    "`once_scope` names the key space of a `once:` key, but this task has no `once`",
                )
                .help("add `once: <key>`, or remove `once_scope`"));
            }
            continue;
        }
        if TASK_KEYS_NOT_YET.contains(&k.as_str()) {
            return Err(
                Diagnostic::at(kpos, format!("`{k}` is not supported by fixpoint yet")).help(
                    "remove it, or keep this playbook on ansible-playbook until support lands",
                ),
            );
        }
        match fixpoint_modules::canonical_name(k).or_else(|| controller_action(k)) {
            Some(m) => {
                if let Some((prev, _, _)) = module {
                    return Err(Diagnostic::at(
                        kpos,
                        format!(
                            "a task runs one module, but this one names both `{prev}` and `{k}`"
                        ),
                    )
                    .help("split it into two tasks"));
                }
                module = Some((m, v, kpos));
            }
            None => {
                let all = TASK_KEYS
                    .iter()
                    .chain(fixpoint_modules::registry::ALL_MODULES.iter())
                    .copied();
                let mut d = Diagnostic::at(
                    kpos,
                    format!("`{k}` is neither a task keyword nor a module fixpoint knows"),
                );
                d = match suggest(k, all) {
                    Some(s) => d.help(format!("did you mean `{s}`?")),
                    None => d.help(format!(
                        "modules: {}",
                        fixpoint_modules::registry::ALL_MODULES.join(", ")
                    )),
                };
                return Err(d);
            }
        }
    }
    let Some((module, raw_params, mod_pos)) = module else {
        return Err(node
            .err("this task names no module")
            .help("add one module, e.g. `copy:`, `file:`, `command:`"));
    };

    let mut params = match &raw_params.kind {
        Kind::Map(_) => raw_params
            .to_json()
            .as_object()
            .cloned()
            .unwrap_or_default(),
        Kind::Null => Map::new(),
        Kind::Str(s) if module == "command" || module == "shell" => free_form_command(s),
        Kind::Str(s) if module == "set_fact" || module == "debug" || module == "fail" => {
            parse_kv(s, &raw_params.pos)?
        }
        Kind::Str(s) if module == "include_vars" && !s.contains('=') => {
            let mut m = Map::new();
            m.insert("file".into(), Value::String(s.clone()));
            m
        }
        Kind::Str(s) => parse_kv(s, &raw_params.pos)?,
        _ => {
            return Err(raw_params.err(format!(
                "the parameters of `{module}` must be a mapping, found {}",
                raw_params.type_name()
            )))
        }
    };
    if let Some(args) = node.get("args") {
        match &args.kind {
            Kind::Map(_) => {
                for (k, v) in args.to_json().as_object().cloned().unwrap_or_default() {
                    params.insert(k, v);
                }
            }
            _ => return Err(args.err("`args` must be a mapping of module parameters")),
        }
    }
    if let Some(k) = params.keys().find(|k| k.starts_with('_')) {
        return Err(Diagnostic::at(
            &param_pos(raw_params, k).unwrap_or_else(|| mod_pos.clone()),
            format!("unknown parameter `{k}` for module `{module}`"),
        ));
    }

    let opt = |key: &str| node.get(key);
    let mut loop_label = None;
    let mut loop_pause = std::time::Duration::ZERO;
    let mut loop_extended = false;
    if let Some(lc) = opt("loop_control") {
        let lce = map_of(lc, "`loop_control`")?;
        check_keys(
            lce,
            &["loop_var", "index_var", "label", "pause", "extended"],
            &[],
            "`loop_control`",
            |_| false,
        )?;
        if let Some(v) = lc.get("label") {
            loop_label = Some(string_of(v, "label")?);
        }
        if let Some(v) = lc.get("pause") {
            let secs = match v.kind {
                Kind::Int(i) if i >= 0 => i as f64,
                Kind::Float(f) if f >= 0.0 => f,
                _ => return Err(v.err("`pause` must be a number of seconds")),
            };
            // `.inf` and 1e300 are floats too, but no wait that long can be counted.
            loop_pause = std::time::Duration::try_from_secs_f64(secs)
                .map_err(|_| v.err(format!("`pause` of {secs} seconds is too long to wait")))?;
        }
        if let Some(v) = lc.get("extended") {
            loop_extended = bool_of(v, "extended")?;
        }
    }
    let lp = loop_of(node, true)?;

    let opt_bool = |key: &str| -> Result<Option<bool>, Diagnostic> {
        opt(key).map(|n| bool_of(n, key)).transpose()
    };
    let opt_string = |key: &str| -> Result<Option<String>, Diagnostic> {
        opt(key).map(|n| string_of(n, key)).transpose()
    };
    let register = opt_string("register")?;
    if let (Some(r), Some(n)) = (&register, opt("register")) {
        check_var_name(r, &n.pos)?;
    }
    let mut task = Task {
        name: opt_string("name")?,
        module,
        params: Value::Object(params),
        pos: node.pos.clone(),
        when: opt("when")
            .map(|n| conditions_of(n, "when"))
            .transpose()?
            .unwrap_or_default(),
        loop_items: lp.items,
        loop_kind: lp.kind,
        loop_var: lp.var,
        index_var: lp.index_var,
        loop_label,
        loop_pause,
        loop_extended,
        register,
        notify: opt("notify")
            .map(|n| strings_of(n, "notify"))
            .transpose()?
            .unwrap_or_default(),
        listen: opt("listen")
            .map(|n| strings_of(n, "listen"))
            .transpose()?
            .unwrap_or_default(),
        tags: opt("tags")
            .map(|n| strings_of(n, "tags"))
            .transpose()?
            .unwrap_or_default(),
        changed_when: opt("changed_when")
            .map(|n| conditions_of(n, "changed_when"))
            .transpose()?,
        failed_when: opt("failed_when")
            .map(|n| conditions_of(n, "failed_when"))
            .transpose()?,
        ignore_errors: opt_bool("ignore_errors")?.unwrap_or(false),
        check_mode: opt_bool("check_mode")?,
        diff: opt_bool("diff")?,
        vars: match opt("vars") {
            Some(v) => vars_of(v, "`vars`")?,
            None => Map::new(),
        },
        once: opt_string("once")?,
        once_scope: opt_string("once_scope")?,
        become_: opt_bool("become")?,
        become_user: opt_string("become_user")?,
        no_log: opt_bool("no_log")?.unwrap_or(false),
        environment: match opt("environment") {
            Some(v) => env_of(v)?,
            None => Map::new(),
        },
        timeout: match opt("timeout") {
            Some(n) => match n.kind {
                Kind::Int(i) if i > 0 && i <= MAX_TIMEOUT => Some(i as u64),
                Kind::Int(i) if i > MAX_TIMEOUT => {
                    return Err(n.err(format!(
                        "`timeout` of {i} seconds is too long: ansible-core takes at most {MAX_TIMEOUT}"
                    )))
                }
                _ => return Err(n.err("`timeout` must be a positive number of seconds")),
            },
            None => None,
        },
        role: None,
        throttle: match opt("throttle") {
            Some(n) => match n.kind {
                Kind::Int(i) if i > 0 => Some(i as usize),
                _ => return Err(n.err("`throttle` must be a positive number of hosts")),
            },
            None => None,
        },
        delegate_to: opt_string("delegate_to")?,
        run_once: opt_bool("run_once")?.unwrap_or(false),
        until: opt("until")
            .map(|n| conditions_of(n, "until"))
            .transpose()?,
        retries: match opt("retries") {
            Some(n) => match n.kind {
                Kind::Int(i) if i >= 0 => i as u64,
                _ => return Err(n.err("`retries` must be a number")),
            },
            // Ansible's default when `until` is given.
            None => 3,
        },
        delay: match opt("delay") {
            Some(n) => match n.kind {
                Kind::Int(i) if i >= 0 => i as u64,
                _ => return Err(n.err("`delay` must be a number of seconds")),
            },
            None => 5,
        },
    };
    inh.apply(&mut task);
    // A value written on the task itself wins over the block's (or play's), also when false.
    for (key, field) in [
        ("ignore_errors", &mut task.ignore_errors),
        ("no_log", &mut task.no_log),
        ("run_once", &mut task.run_once),
    ] {
        if let Some(v) = opt_bool(key)? {
            *field = v;
        }
    }
    check_module_params(&task, raw_params, mod_pos, &task.search_dirs(play_dir))?;
    // A handler runs only when a change notified it, and that notification (durable in the
    // host's outbox) is its guard: its commands need none of their own.
    if !handler {
        check_guard(&task, mod_pos)?;
    }
    Ok(task)
}

/// `local_action: <module> <args>` (or `{module: …, args…}`) is shorthand for the module with
/// `delegate_to: localhost`: the task is rewritten so, keeping the source positions.
pub(crate) fn local_action(node: &Node) -> Result<Option<Node>, Diagnostic> {
    let Some(entries) = node.as_map() else {
        return Ok(None);
    };
    let Some(idx) = entries.iter().position(|(k, _, _)| k == "local_action") else {
        return Ok(None);
    };
    let (_, kpos, value) = &entries[idx];
    if let Some((_, dpos, _)) = entries.iter().find(|(k, _, _)| k == "delegate_to") {
        return Err(Diagnostic::at(
            dpos,
            "a task with `local_action` already runs on localhost; remove `delegate_to`",
        ));
    }
    let (module, args) = match &value.kind {
        Kind::Str(s) => {
            let s = s.trim();
            let (m, rest) = s.split_once(char::is_whitespace).unwrap_or((s, ""));
            let args = Node {
                kind: if rest.trim().is_empty() {
                    Kind::Null
                } else {
                    Kind::Str(rest.trim().to_string())
                },
                pos: value.pos.clone(),
            };
            (m.to_string(), args)
        }
        Kind::Map(m) => {
            let module = value
                .get("module")
                .ok_or_else(|| value.err("`local_action` needs `module:`"))?;
            let mut rest = m.clone();
            rest.retain(|(k, _, _)| k != "module");
            (
                string_of(module, "module")?,
                Node {
                    kind: Kind::Map(rest),
                    pos: value.pos.clone(),
                },
            )
        }
        _ => return Err(value.err("`local_action` must be a module with its arguments")),
    };
    let mut rewritten = entries.to_vec();
    rewritten[idx] = (module, kpos.clone(), args);
    rewritten.push((
        "delegate_to".into(),
        kpos.clone(),
        Node {
            kind: Kind::Str("localhost".into()),
            pos: kpos.clone(),
        },
    ));
    Ok(Some(Node {
        kind: Kind::Map(rewritten),
        pos: node.pos.clone(),
    }))
}

/// Split Ansible's `k=v k2="a b"` free-form arguments.
pub fn parse_kv(s: &str, pos: &Pos) -> Result<Map<String, Value>, Diagnostic> {
    let words = shlex::split(s).ok_or_else(|| {
        Diagnostic::at(
            pos,
            format!("cannot parse the arguments `{s}`: unbalanced quotes"),
        )
    })?;
    let mut m = Map::new();
    for w in words {
        match w.split_once('=') {
            Some((k, v)) if !k.is_empty() => {
                m.insert(k.to_string(), Value::String(v.to_string()));
            }
            _ => {
                return Err(Diagnostic::at(
                    pos,
                    format!("expected key=value arguments, found `{w}`"),
                )
                .help("write the module's parameters as a mapping under the module name"))
            }
        }
    }
    Ok(m)
}

/// The parameters `command`/`shell` accept inline in their free-form string.
const COMMAND_INLINE: &[&str] = &["creates", "removes", "chdir", "executable", "stdin", "warn"];

fn free_form_command(s: &str) -> Map<String, Value> {
    let mut m = Map::new();
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| {
        regex::Regex::new(
            r#"(?:^|\s)(creates|removes|chdir|executable|stdin|warn)=("[^"]*"|'[^']*'|\S+)"#,
        )
        .expect("static regex")
    });
    let mut rest = s.to_string();
    for cap in re.captures_iter(s) {
        let key = cap[1].to_string();
        let raw = &cap[2];
        let val = raw.trim_matches(|c| c == '"' || c == '\'').to_string();
        debug_assert!(COMMAND_INLINE.contains(&key.as_str()));
        if key != "warn" {
            m.insert(key, Value::String(val));
        }
        rest = rest.replacen(cap[0].trim_start(), "", 1);
    }
    m.insert("cmd".into(), Value::String(rest.trim().to_string()));
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_form_command_extracts_inline_guards() {
        let m = free_form_command("touch /tmp/x creates=/tmp/x chdir=/tmp");
        assert_eq!(m["cmd"], "touch /tmp/x");
        assert_eq!(m["creates"], "/tmp/x");
        assert_eq!(m["chdir"], "/tmp");
    }

    #[test]
    fn kv_arguments() {
        let pos = Pos::file_only(Path::new("x.yml"));
        let m = parse_kv("path=/tmp/a state=directory msg=\"a b\"", &pos).unwrap();
        assert_eq!(m["msg"], "a b");
        assert!(parse_kv("oops", &pos).is_err());
    }
}
