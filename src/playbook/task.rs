//! One task entry -> `Task`: the module and its arguments (mapping, `k=v` or free-form
//! command), `action`/`local_action`, and the task keywords.

use super::ast::{Inherited, LoopKind, Task, Templated};
use super::keywords::{
    become_method_of, bool_of, check_keys, check_var_name, conditions_of, conn_keywords_of, env_of,
    flag_of, loop_of, map_of, plain_names, short_name, string_of, strings_of, throttle_of, vars_of,
    Flag, TASK_KEYS, TASK_KEYS_NOT_YET,
};
use super::kv::{free_form_command, parse_kv};
use super::validate::{check_guard, check_module_params, param_pos};
use crate::diag::{suggest, Diagnostic, Pos};
use crate::yaml::{Kind, Node};
use serde_json::{Map, Value};
use std::path::Path;

mod action;
pub(crate) use action::{action_keyword, module_at_run_time};

/// Ansible's internal parameters of `copy`, which its action plugin refuses by name.
pub(crate) const COPY_INTERNAL: &[&str] = &["_original_basename", "_diff_peek"];

/// The longest task `timeout` ansible-core takes, in seconds (about three years).
const MAX_TIMEOUT: i64 = 100_000_000;

/// A task's `timeout` in seconds, as ansible-core takes it: 0 is no limit (its default).
pub(crate) fn timeout_of(secs: i64) -> Result<Option<u64>, String> {
    match secs {
        0 => Ok(None),
        1..=MAX_TIMEOUT => Ok(Some(secs as u64)),
        _ if secs > MAX_TIMEOUT => Err(format!(
            "`timeout` of {secs} seconds is too long: ansible-core takes at most {MAX_TIMEOUT}"
        )),
        _ => Err(format!(
            "`timeout` of {secs} seconds: it must be 0 (no limit) or more"
        )),
    }
}

/// Actions fixpoint runs itself on the controller (or through the agent's facts) rather than
/// as a module.
pub(crate) const CONTROLLER_ACTIONS: &[&str] = &["include_vars", "setup"];

fn controller_action(k: &str) -> Option<&'static str> {
    let short = short_name(k);
    CONTROLLER_ACTIONS.iter().copied().find(|a| *a == short)
}

/// One task entry (not a block, include or meta): its module and arguments, its keywords,
/// and the keywords inherited from around it; checked before it is returned.
/// `run_time_module`: the task's module is this template (`action: "{{ x }}"`, the entry's
/// key after `action_keyword`), named on each host when the task runs.
pub(crate) fn load_task(
    node: &Node,
    handler: bool,
    inh: &Inherited,
    play_dir: &Path,
    run_time_module: Option<&str>,
) -> Result<Task, Diagnostic> {
    let entries = map_of(node, "a task")?;
    let mut module: Option<(&'static str, &Node, &Pos)> = None;
    // The module key as written: `with_first_found` picks its subdirectory from it.
    let mut written = "";
    let mut alias = None;
    let mut python: Option<std::sync::Arc<crate::pymod::PyModule>> = None;
    for (k, kpos, v) in entries {
        if TASK_KEYS.contains(&k.as_str())
            || LoopKind::of_key(k).is_some()
            || LoopKind::lookup_of_key(k).is_some()
        {
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
        if run_time_module == Some(k.as_str()) {
            module = Some((crate::pymod::intern(k), v, kpos));
            written = k;
            continue;
        }
        if TASK_KEYS_NOT_YET.contains(&k.as_str()) {
            return Err(
                Diagnostic::at(kpos, format!("`{k}` is not supported by fixpoint yet")).help(
                    "remove it, or keep this playbook on ansible-playbook until support lands",
                ),
            );
        }
        // A module of the playbook's (or a role's) `library/` wins, as in Ansible; then native
        // modules; any other name is looked up in the controller's Ansible.
        let local = crate::pymod::library::find(k, play_dir).map_err(|why| {
            Diagnostic::at(kpos, why)
                .help("a module in `library/` must be an AnsibleModule-based Python module")
        })?;
        let native = match &local {
            Some(_) => None,
            None => fixpoint_modules::canonical_name(k).or_else(|| controller_action(k)),
        };
        let found = match local {
            None if native.is_none() && !k.contains('.') => {
                // `collections`: a short name is looked for in each listed collection first.
                let listed = match node.get("collections") {
                    Some(n) => strings_of(n, "collections")?,
                    None => inh.collections.clone(),
                };
                match in_collections(k, &listed, play_dir) {
                    Some((fqcn, py)) => {
                        python = py;
                        Some(fqcn)
                    }
                    None => match crate::pymod::find(k, play_dir) {
                        Ok(Some(m)) => {
                            python = Some(m);
                            Some(crate::pymod::intern(k))
                        }
                        // A local action plugin that only re-exports a builtin action.
                        Ok(None) => action_alias(k, play_dir, &mut alias),
                        Err(why) => return Err(Diagnostic::at(kpos, why).help(
                            "use a module fixpoint implements (see README.md, \"Modules\"), or \
                             keep this task on ansible-playbook",
                        )),
                    },
                }
            }
            Some(m) => {
                python = Some(m);
                Some(crate::pymod::intern(k))
            }
            None => match native {
                Some(m) => Some(m),
                None => match crate::pymod::find(k, play_dir) {
                    Ok(Some(m)) => {
                        python = Some(m);
                        Some(crate::pymod::intern(k))
                    }
                    // A local action plugin that only re-exports a builtin action.
                    Ok(None) => action_alias(k, play_dir, &mut alias),
                    Err(why) => return Err(Diagnostic::at(kpos, why).help(
                        "use a module fixpoint implements (see README.md, \"Modules\"), or keep \
                         this task on ansible-playbook",
                    )),
                },
            },
        };
        match found {
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
                written = k;
            }
            None if matches!(k.as_str(), "include" | "ansible.builtin.include") => {
                // As ansible-core 2.19 refuses it.
                return Err(Diagnostic::at(
                    kpos,
                    format!("`{k}` was removed from ansible-core (2.16)"),
                )
                .help("use `include_tasks` (at run time) or `import_tasks` (at load time)"));
            }
            None => {
                let all = TASK_KEYS
                    .iter()
                    .copied()
                    .chain(fixpoint_modules::registry::all_modules());
                let mut d = Diagnostic::at(
                    kpos,
                    format!("`{k}` is neither a task keyword nor a module fixpoint knows"),
                );
                d = match suggest(k, all) {
                    Some(s) => d.help(format!("did you mean `{s}`?")),
                    None => d.help(format!(
                        "native modules: {}; Ansible modules were looked for in: {}",
                        fixpoint_modules::registry::all_modules()
                            .collect::<Vec<_>>()
                            .join(", "),
                        crate::pymod::locate::searched(play_dir)
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

    // A module's arguments written as one template are rendered per host to a mapping, as in
    // ansible-core (not for the modules whose string argument is their free-form text).
    let mut splat: Option<String> = None;
    let takes_raw = matches!(
        module,
        "command"
            | "shell"
            | "raw"
            | "script"
            | "set_fact"
            | "include_vars"
            | "add_host"
            | "group_by"
    );
    let mut params = match &raw_params.kind {
        Kind::Str(s) if !takes_raw && is_all_template(s) => {
            splat = Some(s.trim().to_string());
            Map::new()
        }
        Kind::Map(_) => raw_params
            .to_json()
            .as_object()
            .cloned()
            .unwrap_or_default(),
        Kind::Null => Map::new(),
        Kind::Str(s) if matches!(module, "command" | "shell" | "raw" | "script") => {
            free_form_command(s, &raw_params.pos)?
        }
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
            return Err(raw_params
                .err(format!(
                    "the parameters of `{module}` must be a mapping, found {}",
                    raw_params.type_name()
                ))
                .help(format!(
                    "write each parameter as `name: value` indented under `{module}:`"
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
            Kind::Str(s) if is_all_template(s) && splat.is_none() => {
                splat = Some(s.trim().to_string());
            }
            _ => {
                return Err(args
                    .err("`args` must be a mapping of module parameters")
                    .help("write each parameter as `name: value` indented under `args:`"))
            }
        }
    }
    // `module_defaults` of the enclosing levels and of the task, under its own arguments.
    let mut all_defaults = inh.module_defaults.clone();
    if let Some(n) = node.get("module_defaults") {
        super::defaults::read(n, &mut all_defaults)?;
    }
    let mut late: Vec<String> = Vec::new();
    let mut backend_defaults = None;
    let mut defaulted = Vec::new();
    if !all_defaults.is_empty() && run_time_module.is_none() {
        let own = super::defaults::for_module(&all_defaults, module, play_dir)
            .map_err(|why| Diagnostic::at(mod_pos, why))?;
        defaulted = super::defaults::merge_under(&mut params, own);
        // `package` and `service` run the host's manager module, whose own defaults apply
        // too: known only on the host, so their names count as given until the task runs.
        if matches!(module, "package" | "service") {
            let me = super::defaults::action_key(module);
            for (k, v) in &all_defaults {
                if *k != me && !k.starts_with("group/") {
                    late.extend(v.as_object().into_iter().flat_map(|m| m.keys().cloned()));
                }
            }
            if !late.is_empty() {
                backend_defaults = Some(std::sync::Arc::new(all_defaults));
            }
        }
    }
    // Parameters starting with `_` are Ansible's own; a fact set by `set_fact` may be named so,
    // and `file`'s `_diff_peek` is one that playbooks (Ansible's own tests) pass and `file` takes.
    // `copy`'s action refuses `_diff_peek` and `_original_basename` itself when the task runs
    // (`engine/actions/prepare.rs`), which its target checks with `ignore_errors`.
    if let Some(k) = params.keys().find(|k| {
        k.starts_with('_')
            && module != "set_fact"
            && !(module == "file" && k.as_str() == "_diff_peek")
            && !(module == "copy" && COPY_INTERNAL.contains(&k.as_str()))
    }) {
        return Err(Diagnostic::at(
            &param_pos(raw_params, k).unwrap_or_else(|| mod_pos.clone()),
            format!("unknown parameter `{k}` for module `{module}`"),
        )
        .help("names starting with `_` are Ansible's internal parameters: remove it"));
    }

    let opt = |key: &str| node.get(key);
    let mut loop_label = None;
    let mut loop_pause = std::time::Duration::ZERO;
    let mut pause_template = None;
    let mut loop_break_when = None;
    if let Some(lc) = opt("loop_control") {
        let lce = map_of(lc, "`loop_control`")?;
        check_keys(
            lce,
            &[
                "loop_var",
                "index_var",
                "label",
                "pause",
                "extended",
                "extended_allitems",
                "break_when",
            ],
            &[],
            "`loop_control`",
            |_| false,
        )?;
        if let Some(v) = lc.get("label") {
            loop_label = Some(string_of(v, "label")?);
        }
        if let Some(v) = lc.get("pause") {
            let secs = match &v.kind {
                Kind::Int(i) if *i >= 0 => *i as f64,
                Kind::Float(f) if *f >= 0.0 => *f,
                // Rendered on the host when the loop runs (`engine::task`).
                Kind::Str(s) if s.contains("{{") => {
                    pause_template = Some(s.clone());
                    0.0
                }
                _ => {
                    return Err(v
                        .err("`pause` must be a number of seconds")
                        .help("e.g. `pause: 2`"))
                }
            };
            // `.inf` and 1e300 are floats too, but no wait that long can be counted.
            loop_pause = std::time::Duration::try_from_secs_f64(secs)
                .map_err(|_| v.err(format!("`pause` of {secs} seconds is too long to wait")))?;
        }
        if let Some(v) = lc.get("break_when") {
            loop_break_when = Some(conditions_of(v, "break_when")?);
        }
    }
    let lp = loop_of(node, true)?;

    let opt_bool = |key: &str| -> Result<Option<bool>, Diagnostic> {
        opt(key).map(|n| bool_of(n, key)).transpose()
    };
    let opt_string = |key: &str| -> Result<Option<String>, Diagnostic> {
        opt(key).map(|n| string_of(n, key)).transpose()
    };
    // Boolean keywords written as templates are rendered on each host at run time.
    let mut templated = std::collections::BTreeMap::new();
    let mut opt_flag = |key: &'static str| -> Result<Option<bool>, Diagnostic> {
        match opt(key).map(|n| flag_of(n, key)).transpose()? {
            Some(Flag::Tmpl(t)) => {
                templated.insert(key, t);
                Ok(None)
            }
            Some(Flag::Lit(v)) => Ok(Some(v)),
            None => Ok(None),
        }
    };
    let own_ignore_errors = opt_flag("ignore_errors")?;
    let own_no_log = opt_flag("no_log")?;
    let own_check_mode = opt_flag("check_mode")?;
    let own_diff = opt_flag("diff")?;
    let own_become = opt_flag("become")?;
    let own_ignore_unreachable = opt_flag("ignore_unreachable")?;
    let own_delegate_facts = opt_flag("delegate_facts")?;
    // `run_once: "{{ x }}"`: decided when the task runs, with the first host's variables.
    let own_run_once = opt_flag("run_once")?;
    // `throttle: "{{ n }}"` too.
    let throttle = match opt("throttle").map(throttle_of).transpose()? {
        Some(Flag::Lit(v)) => Some(v),
        Some(Flag::Tmpl(t)) => {
            templated.insert("throttle", t);
            None
        }
        None => None,
    };
    if let Some(t) = pause_template {
        templated.insert("pause", t);
    }
    // `timeout: "{{ t }}"` is rendered on each host when the task runs (`engine::task`).
    let timeout = match opt("timeout") {
        Some(n) => match &n.kind {
            Kind::Str(s) if s.contains("{{") => {
                templated.insert("timeout", s.clone());
                None
            }
            Kind::Int(i) => timeout_of(*i).map_err(|e| n.err(e))?,
            Kind::Str(s) if s.trim().parse::<i64>().is_ok() => {
                timeout_of(s.trim().parse().unwrap_or_default()).map_err(|e| n.err(e))?
            }
            _ => {
                return Err(n
                    .err("`timeout` must be a number of seconds")
                    .help("e.g. `timeout: 300`"))
            }
        },
        None => None,
    };
    let register = opt_string("register")?;
    if let (Some(r), Some(n)) = (&register, opt("register")) {
        check_var_name(r, &n.pos)?;
    }
    let mut task = Task {
        // `name:` left empty is no name, as in Ansible (the systemd target writes `- name:`).
        // Trimmed as ansible-core shows it (a folded `name: >` ends in a newline).
        name: opt("name")
            .filter(|n| !matches!(n.kind, Kind::Null))
            .map(|n| string_of(n, "name").map(|s| s.trim().to_string()))
            .transpose()?,
        module,
        module_written: if run_time_module.is_some() {
            String::new()
        } else {
            written.to_string()
        },
        params: Value::Object(params),
        pos: node.pos.clone(),
        when: opt("when")
            .map(|n| conditions_of(n, "when"))
            .transpose()?
            .unwrap_or_default(),
        loop_items: lp.items,
        loop_kind: match lp.kind {
            // ansible-core picks the subdirectory from the action's name.
            LoopKind::FirstFound(_) if written.contains("template") => {
                LoopKind::FirstFound("templates")
            }
            LoopKind::FirstFound(_) if written.contains("var") => LoopKind::FirstFound("vars"),
            other => other,
        },
        loop_lookup: lp.lookup,
        loop_var: lp.var,
        index_var: lp.index_var,
        loop_label,
        loop_pause,
        loop_extended: lp.extended,
        loop_break_when,
        register,
        notify: opt("notify")
            .map(|n| strings_of(n, "notify"))
            .transpose()?
            .unwrap_or_default(),
        listen: opt("listen")
            .map(|n| plain_names(n, "listen"))
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
        ignore_errors: own_ignore_errors.unwrap_or(false),
        check_mode: own_check_mode,
        diff: own_diff,
        vars: match opt("vars") {
            Some(v) => vars_of(v, "`vars`")?.into(),
            None => Default::default(),
        },
        once: opt_string("once")?,
        once_scope: opt_string("once_scope")?,
        become_: own_become,
        become_user: opt_string("become_user")?,
        become_method: opt("become_method").map(become_method_of).transpose()?,
        no_log: own_no_log.unwrap_or(false),
        templated,
        environment: match opt("environment") {
            Some(v) => env_of(v)?,
            None => Vec::new(),
        },
        timeout,
        role: None,
        python,
        throttle,
        delegate_to: opt_string("delegate_to")?,
        conn: conn_keywords_of(node)?,
        any_errors_fatal: opt_bool("any_errors_fatal")?,
        ignore_unreachable: own_ignore_unreachable,
        delegate_facts: own_delegate_facts.unwrap_or(false),
        run_once: own_run_once.unwrap_or(false),
        // `retries` without `until`: retried until it succeeds, as ansible-core does.
        until: match opt("until") {
            Some(n) => Some(conditions_of(n, "until")?),
            None => opt("retries").map(|_| vec![super::ast::UNTIL_SUCCEEDED.to_string()]),
        },
        retries: match opt("retries") {
            Some(n) => match &n.kind {
                Kind::Int(i) if *i >= 0 => Templated::Fixed(*i as u64),
                Kind::Str(s) if s.contains("{{") => Templated::Template(s.clone()),
                _ => {
                    return Err(n
                        .err("`retries` must be a number (or a template giving one)")
                        .help("e.g. `retries: 5`"))
                }
            },
            // Ansible's default when `until` is given.
            None => Templated::Fixed(3),
        },
        delay: match opt("delay") {
            Some(n) => match &n.kind {
                Kind::Int(i) if *i >= 0 => Templated::Fixed(*i as f64),
                Kind::Float(f) if *f >= 0.0 && f.is_finite() => Templated::Fixed(*f),
                Kind::Str(s) if s.contains("{{") => Templated::Template(s.clone()),
                _ => {
                    return Err(n
                        .err("`delay` must be a number of seconds (or a template giving one)")
                        .help("e.g. `delay: 10`"))
                }
            },
            None => Templated::Fixed(5.0),
        },
        guard_pending: None,
        unknown_param: None,
        async_refused: None,
        async_job: None,
        handler_step: None,
        handler_params: None,
        module_defaults: backend_defaults,
        alias,
        args_splat: splat.map(|template| {
            Box::new(super::ast::ArgsSplat {
                template,
                defaulted,
            })
        }),
    };
    let async_limit = async_limit(node)?;
    match async_limit {
        // The start request is answered at once; the job itself is stopped after `limit`.
        Some((limit, true)) => task.async_job = Some(limit),
        Some((limit, false)) => task.timeout = Some(task.timeout.map_or(limit, |t| t.min(limit))),
        None => {}
    }
    // A job's effect is its results file, recorded by the job itself; `once:` would need the
    // journal to wait for it.
    if let (Some(_), Some(_)) = (task.async_job, &task.once) {
        let at = node
            .get("poll")
            .map_or_else(|| mod_pos.clone(), |n| n.pos.clone());
        return Err(Diagnostic::at(
            &at,
            "`once` with `async` and `poll: 0` (a background job) is not supported by fixpoint yet",
        )
        .help("give `poll` a number of seconds to wait for the task, or remove `once`"));
    }
    if let (Some(_), Some(py)) = (task.async_job, &task.python) {
        let at = node
            .get("poll")
            .map_or_else(|| mod_pos.clone(), |n| n.pos.clone());
        return Err(Diagnostic::at(
            &at,
            format!(
                "`async` with `poll: 0` on `{}`, which runs as Ansible's own module code, is not supported by fixpoint yet",
                py.name
            ),
        )
        .help("give `poll` a number of seconds to wait for the task, or remove `async`"));
    }
    inh.apply(&mut task);
    // A value written on the task itself wins over the block's (or play's), also when false.
    for (key, own, field) in [
        ("ignore_errors", own_ignore_errors, &mut task.ignore_errors),
        ("no_log", own_no_log, &mut task.no_log),
        ("run_once", own_run_once, &mut task.run_once),
    ] {
        if let Some(v) = own {
            *field = v;
            task.templated.remove(key);
        }
    }
    if async_limit.is_some() && task.python.is_none() && NO_ASYNC.contains(&task.module) {
        let msg = format!("This action ({}) does not support async.", task.module);
        if task.when.is_empty() && !task.ignore_errors {
            let at = node
                .get("async")
                .map_or_else(|| mod_pos.clone(), |n| n.pos.clone());
            return Err(
                Diagnostic::at(&at, format!("`async` on `{}`: {msg}", task.module))
                    .help("remove `async` (ansible-core fails such a task when it runs)"),
            );
        }
        task.async_refused = Some(msg);
    }
    if let Some(template) = run_time_module {
        // Which module runs is known on the host only: its arguments are that module's to
        // check then (and a command's guard the engine's, `engine/task.rs`), as ansible-core
        // resolves `action` when the task runs.
        task.templated.insert("action", template.to_string());
        return Ok(task);
    }
    let dirs = task.search_dirs(play_dir);
    // Arguments given as one template are known only on the host: checked there, rendered.
    if task.args_splat.is_none() {
        check_module_params(&mut task, raw_params, mod_pos, &dirs, &late)?;
    }
    // A handler runs only when a change notified it, and that notification (durable in the
    // host's outbox) is its guard: its commands need none of their own.
    if !handler {
        check_guard(&mut task, mod_pos)?;
    }
    Ok(task)
}

/// A string that is all template (it starts and ends with Jinja delimiters), which ansible-core
/// takes for a module's whole argument mapping.
pub(super) fn is_all_template(s: &str) -> bool {
    let s = s.trim();
    (s.starts_with("{{") || s.starts_with("{%")) && (s.ends_with("}}") || s.ends_with("%}"))
}

/// The first of `collections` that holds module `short`: its full name (as the task's module),
/// and the Python module when it is not one fixpoint implements natively.
#[allow(clippy::type_complexity)]
fn in_collections(
    short: &str,
    collections: &[String],
    play_dir: &Path,
) -> Option<(&'static str, Option<std::sync::Arc<crate::pymod::PyModule>>)> {
    collections.iter().find_map(|c| {
        let fqcn = format!("{c}.{short}");
        if let Some(m) = fixpoint_modules::canonical_name(&fqcn) {
            return Some((m, None));
        }
        match crate::pymod::find(&fqcn, play_dir) {
            Ok(Some(m)) => Some((crate::pymod::intern(&fqcn), Some(m))),
            _ => None,
        }
    })
}

/// The actions whose ansible-core action plugin does not support `async` (it fails the task
/// with "This action (...) does not support async."); modules without an action plugin of
/// their own, `command`/`shell` and the package and service managers support it.
const NO_ASYNC: &[&str] = &[
    "add_host",
    "assemble",
    "assert",
    "async_status",
    "copy",
    "debug",
    "fail",
    "fetch",
    "gather_facts",
    "group_by",
    "include_vars",
    "pause",
    "raw",
    "reboot",
    "script",
    "set_fact",
    "set_stats",
    "template",
    "unarchive",
    "validate_argument_spec",
    "wait_for_connection",
];

/// `async: N`: its limit, and whether `poll` is 0. With `poll` above 0 ansible-core starts the
/// module in the background and waits for it at most N seconds, failing the task when it runs
/// over; fixpoint waits for the module as for any task, with N as its time limit (the agent
/// stops it then, as for `timeout`). `poll` without `async` means nothing, as in ansible-core.
///
/// `poll: 0` leaves the module running as a background job, checked with `async_status`. So
/// that a dropped connection or a crash neither repeats nor loses a job: (1) the controller
/// repeats only the *start request*, never the module; (2) the host recognises the same job by
/// the job id the controller derives from the run id, host, task position and item
/// (`engine::item`), so a repeated start finds the job's results file and answers with it
/// instead of starting a second one; (3) "started" is the agent creating that file, and
/// recording the job's pid in it, *before* the job gets its module; the effect is recorded by
/// the detached job itself (its result, written by fsync + rename when the module ends);
/// (4) a crash between them leaves a record with a pid and no result: `async_status` reports
/// `finished: false` while that process lives and a failed job ("ended without a result, what
/// it did is unknown") once it does not, never a silent rerun (agent `job.rs`).
fn async_limit(node: &Node) -> Result<Option<(u64, bool)>, Diagnostic> {
    let Some(n) = node.get("async") else {
        return Ok(None);
    };
    let limit = match n.kind {
        Kind::Int(i) if (0..=MAX_TIMEOUT).contains(&i) => i as u64,
        _ => {
            return Err(n
                .err("`async` must be a number of seconds")
                .help("e.g. `async: 300`"))
        }
    };
    if limit == 0 {
        return Ok(None);
    }
    let poll = match node.get("poll").map(|p| &p.kind) {
        None => 15,
        Some(Kind::Int(i)) if *i >= 0 => *i,
        Some(_) => {
            let p = node.get("poll").expect("just matched");
            return Err(p
                .err("`poll` must be a number of seconds")
                .help("e.g. `poll: 5`"));
        }
    };
    Ok(Some((limit, poll == 0)))
}

/// The module a local action plugin named `k` stands for when it only re-exports a builtin
/// action (`pymod::library::action_alias`); `alias` keeps the name as written, which results
/// carry as ansible-core's do.
fn action_alias(
    k: &str,
    play_dir: &Path,
    alias: &mut Option<&'static str>,
) -> Option<&'static str> {
    let found = crate::pymod::library::action_alias(k, play_dir)
        .and_then(|x| fixpoint_modules::canonical_name(&x).or_else(|| controller_action(&x)));
    if found.is_some() {
        *alias = Some(crate::pymod::intern(k));
    }
    found
}
