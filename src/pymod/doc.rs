//! A Python module's parameters, read from its `DOCUMENTATION` block (YAML inside the module
//! source, plus the documentation fragments it extends) without running it, and the load-time
//! check of a task's parameters against them.

use super::PyModule;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// One documented option.
#[derive(Debug, Clone, Default)]
pub struct OptionSpec {
    pub aliases: Vec<String>,
    pub required: bool,
    pub choices: Vec<Value>,
}

/// The documented options; `complete` is false when a fragment could not be read, and then
/// unknown names are not refused (we do not know every name).
#[derive(Debug, Default)]
pub struct ArgSpec {
    pub options: Map<String, Value>,
    pub complete: bool,
}

/// The text of the string literal assigned to `var` (`DOCUMENTATION = r'''...'''`).
fn string_var(src: &str, var: &str) -> Option<String> {
    let mut from = 0;
    while let Some(i) = src[from..].find(var) {
        let at = from + i;
        from = at + var.len();
        // At the start of a line (possibly indented, inside a fragment class).
        let line_start = src[..at].rfind('\n').map_or(0, |n| n + 1);
        if !src[line_start..at].trim().is_empty() {
            continue;
        }
        let rest = src[from..].trim_start_matches([' ', '\t']);
        let Some(rest) = rest.strip_prefix('=') else {
            continue;
        };
        let rest = rest.trim_start_matches([' ', '\t']);
        let rest = rest.trim_start_matches(['r', 'R', 'u', 'U', 'b', 'B']);
        for q in ["'''", "\"\"\"", "'", "\""] {
            if let Some(body) = rest.strip_prefix(q) {
                let end = body.find(q)?;
                return Some(body[..end].to_string());
            }
        }
        return None;
    }
    None
}

fn yaml_of(text: &str, path: &Path) -> Option<Value> {
    crate::yaml::parse_str(text, path).ok().map(|n| n.to_json())
}

/// Where the fragment `name` (`files`, `ansible.builtin.files`, `ns.coll.frag.VAR`) is.
fn fragment(name: &str, m: &PyModule) -> Option<Value> {
    let inst = super::locate::install();
    let parts: Vec<&str> = name.split('.').collect();
    let (file, var): (PathBuf, String) = match parts.as_slice() {
        [f] => (
            inst.core
                .as_ref()?
                .join("plugins/doc_fragments")
                .join(format!("{f}.py")),
            "DOCUMENTATION".into(),
        ),
        [f, v] => (
            inst.core
                .as_ref()?
                .join("plugins/doc_fragments")
                .join(format!("{f}.py")),
            v.to_uppercase(),
        ),
        ["ansible", "builtin", f] => (
            inst.core
                .as_ref()?
                .join("plugins/doc_fragments")
                .join(format!("{f}.py")),
            "DOCUMENTATION".into(),
        ),
        ["ansible", "builtin", f, v] => (
            inst.core
                .as_ref()?
                .join("plugins/doc_fragments")
                .join(format!("{f}.py")),
            v.to_uppercase(),
        ),
        [ns, coll, f, rest @ ..] if rest.len() <= 1 => {
            let mut roots: Vec<PathBuf> = m.collection.iter().cloned().collect();
            roots.extend(inst.collection_roots.iter().cloned());
            let file = roots
                .iter()
                .map(|r| {
                    r.join("ansible_collections")
                        .join(ns)
                        .join(coll)
                        .join("plugins/doc_fragments")
                        .join(format!("{f}.py"))
                })
                .find(|p| p.is_file())?;
            let var = rest
                .first()
                .map_or("DOCUMENTATION".to_string(), |v| v.to_uppercase());
            (file, var)
        }
        _ => return None,
    };
    let src = std::fs::read_to_string(&file).ok()?;
    yaml_of(&string_var(&src, &var)?, &file)
}

/// The module's documented options, fragments merged in.
pub fn argspec(m: &PyModule) -> Option<ArgSpec> {
    let src = std::fs::read_to_string(&m.path).ok()?;
    let doc = yaml_of(&string_var(&src, "DOCUMENTATION")?, &m.path)?;
    let mut spec = ArgSpec {
        options: doc
            .get("options")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
        complete: true,
    };
    let frags: Vec<String> = match doc.get("extends_documentation_fragment") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    };
    for f in frags {
        match fragment(&f, m) {
            Some(fd) => {
                if let Some(opts) = fd.get("options").and_then(Value::as_object) {
                    for (k, v) in opts {
                        spec.options.entry(k.clone()).or_insert_with(|| v.clone());
                    }
                }
            }
            None => spec.complete = false,
        }
    }
    Some(spec)
}

fn option(v: &Value) -> OptionSpec {
    OptionSpec {
        aliases: v
            .get("aliases")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
        required: v.get("required").and_then(Value::as_bool).unwrap_or(false),
        choices: v
            .get("choices")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
    }
}

/// A parameter problem: the parameter it is about (for its position) and what is wrong.
#[derive(Debug)]
pub struct DocError {
    pub param: Option<String>,
    pub msg: String,
}

/// Check `params` (the untemplated ones; `templated` names those left out) against the
/// module's documentation. A module without readable documentation is not checked.
pub fn check(
    m: &PyModule,
    params: &Map<String, Value>,
    templated: &[String],
) -> Result<(), DocError> {
    // `package` hands every parameter to the module of the host's package manager, which
    // checks them when it runs; its own documentation lists only the common ones.
    if m.fqn == "ansible.modules.package" {
        return Ok(());
    }
    // `service` with options only `systemd` has runs the `systemd` module (see the engine):
    // checked against that module's options.
    let systemd;
    let m = if m.fqn == "ansible.modules.service" && systemd_only(&Value::Object(params.clone())) {
        match super::locate::find("systemd", std::path::Path::new(".")) {
            Ok(sd) => {
                systemd = sd;
                systemd.as_ref()
            }
            Err(_) => m,
        }
    } else {
        m
    };
    let Some(spec) = argspec(m) else {
        return Ok(());
    };
    let opts: Vec<(String, OptionSpec)> = spec
        .options
        .iter()
        .map(|(k, v)| (k.clone(), option(v)))
        .collect();
    let known = |k: &str| {
        opts.iter()
            .find(|(n, o)| n == k || o.aliases.iter().any(|a| a == k))
    };
    for (k, v) in params {
        match known(k) {
            None if spec.complete => {
                let all = opts
                    .iter()
                    .flat_map(|(n, o)| std::iter::once(n.clone()).chain(o.aliases.clone()));
                let names: Vec<String> = all.collect();
                let hint = match crate::diag::suggest(k, names.iter().map(String::as_str)) {
                    Some(s) => format!(" (did you mean `{s}`?)"),
                    None => String::new(),
                };
                return Err(DocError {
                    param: Some(k.clone()),
                    msg: format!(
                        "unsupported parameter `{k}` for module `{}`{hint}; its documented \
                         parameters: {}",
                        m.name,
                        opts.iter()
                            .map(|(n, _)| n.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
            None => {}
            Some((name, o)) => {
                let scalar_choices = o.choices.iter().all(|c| c.is_string());
                if !o.choices.is_empty()
                    && scalar_choices
                    && v.is_string()
                    && !o.choices.iter().any(|c| c == v)
                {
                    let listed: Vec<String> = o.choices.iter().map(shown).collect();
                    return Err(DocError {
                        param: Some(k.clone()),
                        msg: format!(
                            "parameter `{name}` of module `{}` must be one of: {}; got `{}`",
                            m.name,
                            listed.join(", "),
                            shown(v)
                        ),
                    });
                }
            }
        }
    }
    if spec.complete {
        for (name, o) in &opts {
            let given = |n: &str| params.contains_key(n) || templated.iter().any(|t| t == n);
            if o.required && !given(name) && !o.aliases.iter().any(|a| given(a)) {
                return Err(DocError {
                    param: None,
                    msg: format!(
                        "missing required parameter `{name}` for module `{}`",
                        m.name
                    ),
                });
            }
        }
    }
    Ok(())
}

fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The conditions under which a module with an ansible-core action plugin runs as its module
/// alone (see `locate::HOST_ONLY_ACTIONS`); checked at load time on literal values and again on
/// the rendered ones.
///
/// `on_controller`: the task is delegated to the controller itself (`delegate_to: localhost`),
/// where a "controller file" is already on the host the module runs on.
pub fn check_action(
    m: &PyModule,
    params: &Map<String, Value>,
    on_controller: bool,
) -> Result<(), DocError> {
    let short = m.fqn.strip_prefix("ansible.modules.").unwrap_or("");
    let truthy = |v: Option<&Value>| match v {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => matches!(s.to_lowercase().as_str(), "yes" | "true" | "on" | "1"),
        _ => false,
    };
    match short {
        "uri" if params.contains_key("src") => Err(DocError {
            param: Some("src".into()),
            msg: "`uri` with `src` uploads a controller file through Ansible's action plugin, \
                  which fixpoint does not implement; use `body` (e.g. with a lookup), or copy \
                  the file first and use `remote_src: true`"
                .into(),
        }),
        "unarchive" if !truthy(params.get("remote_src")) && !on_controller => Err(DocError {
            param: Some("src".into()),
            msg: "`unarchive` of a controller file goes through Ansible's action plugin, which \
                  fixpoint does not implement; copy the archive to the host first and set \
                  `remote_src: true`"
                .into(),
        }),
        _ => Ok(()),
    }
}

/// Options of `service` that only its `systemd` backend has.
pub fn systemd_only(params: &Value) -> bool {
    const ONLY: &[&str] = &[
        "daemon_reload",
        "daemon-reload",
        "daemon_reexec",
        "daemon-reexec",
        "scope",
        "no_block",
        "force",
        "masked",
    ];
    params
        .as_object()
        .is_some_and(|m| ONLY.iter().any(|k| m.contains_key(*k)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documentation_strings_are_found_at_line_starts_only() {
        let src = "x = 'DOCUMENTATION = \"no\"'\nDOCUMENTATION = r'''\noptions:\n  path: {}\n'''\n\
                   class ModuleDocFragment:\n    FILES = \"\"\"\noptions: {}\n\"\"\"\n";
        assert_eq!(
            string_var(src, "DOCUMENTATION").as_deref(),
            Some("\noptions:\n  path: {}\n")
        );
        assert_eq!(string_var(src, "FILES").as_deref(), Some("\noptions: {}\n"));
        assert_eq!(string_var(src, "EXAMPLES"), None);
    }
}
