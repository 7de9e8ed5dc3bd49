//! The arguments of the include and import steps: the file a task include names, its
//! `apply:`, key=value arguments, the `Include` a step becomes, and their not-found errors.

use super::*;

/// The file of `import_tasks`/`include_tasks`: a name, or a mapping with `file:` (and, for
/// `include_tasks`, `apply:`).
pub(super) fn file_arg(arg: &Node, key: &str) -> Result<String, Diagnostic> {
    match &arg.kind {
        Kind::Map(entries) => {
            let keys: &[&str] = if short_name(key) == "include_tasks" {
                &["file", "apply"]
            } else {
                &["file"]
            };
            check_keys(entries, keys, &["apply"], &format!("`{key}`"), |_| false)?;
            let f = arg
                .get("file")
                .ok_or_else(|| arg.err(format!("`{key}` needs `file:`")))?;
            string_of(f, "file")
        }
        _ => string_of(arg, key),
    }
}

/// A handler that includes tasks or is a `meta`: a task named (and listening) as written,
/// which runs the step when notified. Its `when` (and an include's loop) stay the step's.
pub(super) fn handler_step(node: &Node, step: Step) -> Result<Task, Diagnostic> {
    let listen = node
        .get("listen")
        .map(|n| strings_of(n, "listen"))
        .transpose()?
        .unwrap_or_default();
    let task = match &step {
        Step::Include(inc) => Task {
            name: inc.name.clone(),
            module: "include_tasks",
            pos: inc.pos.clone(),
            loop_var: inc.loop_var.clone(),
            tags: inc.tags.clone(),
            role: inc.role.clone(),
            vars: inc.inherited_vars.clone(),
            ..Task::default()
        },
        Step::Meta(m) => Task {
            name: m.named.then(|| m.name.clone()),
            module: "meta",
            pos: m.pos.clone(),
            tags: m.tags.clone(),
            role: m.role.clone(),
            vars: m.vars.clone(),
            ..Task::default()
        },
        _ => unreachable!("a handler step is an include or a meta"),
    };
    Ok(Task {
        params: Value::Null,
        listen,
        handler_step: Some(Box::new(step)),
        ..task
    })
}

/// An include's argument written as `k=v` words, as the mapping they stand for (each value a
/// string, at the argument's position); `None` for a mapping or a plain name.
pub(super) fn kv_arguments(arg: &Node) -> Option<Node> {
    let Kind::Str(s) = &arg.kind else {
        return None;
    };
    if !s.contains('=') {
        return None;
    }
    let map = crate::playbook::kv::parse_kv(s, &arg.pos).ok()?;
    // A name with `=` inside a template (`"{{ a if b == c }}.yml"`) stays a name, as fixpoint
    // always read it (ansible-core splits it and refuses the odd keys).
    if !map
        .keys()
        .all(|k| crate::playbook::keywords::is_var_name(k))
    {
        return None;
    }
    let entries = map
        .into_iter()
        .map(|(k, v)| {
            let text = v.as_str().unwrap_or_default().to_string();
            let value = Node {
                kind: Kind::Str(text),
                pos: arg.pos.clone(),
            };
            (k, arg.pos.clone(), value)
        })
        .collect();
    Some(Node {
        kind: Kind::Map(entries),
        pos: arg.pos.clone(),
    })
}

/// `apply:` of `include_tasks`/`include_role`: keywords given to the included tasks, as if a
/// block with them held those tasks (the include's own keywords only decide whether it runs).
pub(super) fn with_apply(arg: &Node, inh: &Inherited) -> Result<Inherited, Diagnostic> {
    let Some(apply) = arg.get("apply") else {
        return Ok(inh.clone());
    };
    let entries = map_of(apply, "`apply`")?;
    let keys: Vec<&str> = INHERITED_KEYS
        .iter()
        .copied()
        .filter(|k| *k != "name")
        .chain(["notify"])
        .collect();
    check_keys(entries, &keys, TASK_KEYS_NOT_YET, "`apply`", |_| false)?;
    inh.with_keywords(apply)
}

pub(super) fn not_found(at: &Node, what: &str, file: &str, dirs: &[PathBuf]) -> Diagnostic {
    at.err(format!(
        "{what} `{file}` not found; looked in {}",
        looked_in(dirs)
    ))
    .help("fix the name, or create the file in one of those directories")
}

/// The run-time part of `include_tasks` / `include_role`.
pub(super) fn include_of(
    node: &Node,
    inh: &Inherited,
    action: &'static str,
    target: String,
    source: IncludeSource,
) -> Result<Include, Diagnostic> {
    let lp = loop_of(node, false)?;
    if let Some(name) = &lp.lookup {
        return Err(node
            .err(format!("`with_{name}` on `{action}` is not supported yet"))
            .help(format!("write `loop: \"{{{{ query('{name}', ...) }}}}\"`")));
    }
    let mut tags = inh.tags.clone();
    tags.extend(
        node.get("tags")
            .map(|n| strings_of(n, "tags"))
            .transpose()?
            .unwrap_or_default(),
    );
    let name = node.get("name").map(|n| string_of(n, "name")).transpose()?;
    let shown = name.clone().unwrap_or_else(|| action.to_string());
    let own = inh.with_keywords(node)?;
    Ok(Include {
        role: inh.role.clone(),
        inherited_vars: Arc::new(inh.vars.clone()),
        handlers: Vec::new(),
        name,
        shown,
        pos: node.pos.clone(),
        // The enclosing blocks' and imports' conditions come first, as for a task: a host they
        // skip skips the include itself (its file name is not even rendered).
        when: {
            let mut when = inh.when.clone();
            when.extend(
                node.get("when")
                    .map(|n| conditions_of(n, "when"))
                    .transpose()?
                    .unwrap_or_default(),
            );
            when
        },
        loop_items: lp.items,
        loop_kind: lp.kind,
        loop_var: lp.var,
        index_var: lp.index_var,
        loop_extended: lp.extended,
        vars: match node.get("vars") {
            Some(v) => vars_of(v, "`vars`")?,
            None => Map::new(),
        },
        tags,
        action,
        source,
        register: node
            .get("register")
            .map(|n| string_of(n, "register"))
            .transpose()?,
        target,
        role_args: Map::new(),
        public: false,
        ignore_errors: own.ignore_errors.unwrap_or(false),
        run_once: own.run_once.unwrap_or(false),
    })
}

/// A role's path as `role_path` shows it: absolute, symlinks resolved.
pub(super) fn abs_path(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}
