//! `module_defaults`: reading the keyword (play, role entry, block, include, task) and giving a
//! task the defaults of its module, as ansible-core does.
//!
//! ansible-core keeps the keyword as a list of mappings, the enclosing levels' first; later
//! mappings replace an earlier entry of the same action as a whole (not key by key). A task
//! gets the entries of the `group/...` action groups its module belongs to, then its module's
//! own entry, each under the task's own arguments. Values stay as written: templates in them
//! are rendered on each host when the task runs, as the task's own arguments are, so the
//! parameter check runs on the merged arguments (a templated default counts as given).

use super::keywords::short_name;
use crate::diag::Diagnostic;
use crate::yaml::{Kind, Node};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The key an action is known by in the merged defaults: a native module's canonical name,
/// another module's name without `ansible.builtin.`/`ansible.legacy.` (so `file`,
/// `ansible.builtin.file` and `ansible.legacy.file` are one entry, as ansible-core resolves
/// them to one action), or `group/<collection>.<group>`.
pub(crate) fn action_key(name: &str) -> String {
    if let Some(group) = name.strip_prefix("group/") {
        return format!("group/{}", fq_group(group));
    }
    fixpoint_modules::canonical_name(name)
        .map(str::to_string)
        .unwrap_or_else(|| short_name(name).to_string())
}

/// A group name as ansible-core qualifies it: `ns.coll.name` stays, anything else is
/// `ansible.builtin`'s.
fn fq_group(name: &str) -> String {
    if is_fqcr(name) {
        name.to_string()
    } else {
        format!("ansible.builtin.{name}")
    }
}

/// `ns.collection.name`, each part an identifier.
fn is_fqcr(name: &str) -> bool {
    let parts: Vec<&str> = name.split('.').collect();
    parts.len() >= 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

/// Add the `module_defaults` written on `node` (a mapping or a list of mappings) to `into`:
/// each action's entry replaces the enclosing level's.
pub(crate) fn read(node: &Node, into: &mut Map<String, Value>) -> Result<(), Diagnostic> {
    let dicts: Vec<&Node> = match &node.kind {
        Kind::Null => return Ok(()),
        Kind::Seq(items) => items.iter().collect(),
        _ => vec![node],
    };
    for d in dicts {
        let Some(entries) = d.as_map() else {
            return Err(d
                .err(format!(
                    "`module_defaults` must be a mapping (or a list of mappings) of module or \
                     `group/` names to their default arguments, found {}",
                    d.type_name()
                ))
                .help("e.g. `module_defaults: {file: {owner: root}}`; only the values may use templates"));
        };
        for (k, kpos, v) in entries {
            if fixpoint_modules::params::is_template(k) {
                return Err(Diagnostic::at(
                    kpos,
                    format!("`module_defaults` key `{k}` must name a module or a group as written"),
                )
                .help("only the values may use templates"));
            }
            let value = match &v.kind {
                Kind::Map(_) => v.to_json(),
                Kind::Null => Value::Object(Map::new()),
                Kind::Str(s) if fixpoint_modules::params::is_template(s) => {
                    return Err(v
                        .err(format!(
                            "the defaults of `{k}` given as one template are not supported by \
                             fixpoint yet"
                        ))
                        .help(
                            "write them as a mapping of arguments (each value may be a template)",
                        ))
                }
                _ => {
                    return Err(v
                        .err(format!(
                            "the defaults of `{k}` must be a mapping of its arguments, found {}",
                            v.type_name()
                        ))
                        .help("write each argument as `name: value` indented under the module"))
                }
            };
            into.insert(action_key(k), value);
        }
    }
    Ok(())
}

/// The defaults that apply to `module` (as the task wrote it, or its canonical name): those of
/// every group it belongs to, then its own entry over them.
pub(crate) fn for_module(
    defaults: &Map<String, Value>,
    module: &str,
    play_dir: &Path,
) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    let me = action_key(module);
    for (k, v) in defaults {
        let Some(group) = k.strip_prefix("group/") else {
            continue;
        };
        let members = group_members(group, play_dir)?;
        if members.iter().any(|m| action_key(m) == me) {
            if let Value::Object(args) = v {
                out.extend(args.clone());
            }
        }
    }
    if let Some(Value::Object(args)) = defaults.get(&me) {
        out.extend(args.clone());
    }
    Ok(out)
}

/// Put `defaults` under `params`: a parameter the task gives itself wins. Returns the names
/// taken from the defaults.
pub(crate) fn merge_under(
    params: &mut Map<String, Value>,
    defaults: Map<String, Value>,
) -> Vec<String> {
    let mut taken = Vec::new();
    for (k, v) in defaults {
        if !params.contains_key(&k) {
            taken.push(k.clone());
            params.insert(k, v);
        }
    }
    taken
}

/// The actions of group `ns.coll.name` (its FQCNs), from the collection's `meta/runtime.yml`
/// (`action_groups`; ansible-core's own `ansible_builtin_runtime.yml` for `ansible.builtin`),
/// with the groups it extends (`metadata: {extend_group: ...}`). Cached per process.
fn group_members(group: &str, play_dir: &Path) -> Result<Vec<String>, String> {
    type Groups = HashMap<(String, PathBuf), Vec<String>>;
    static CACHE: Mutex<Option<Groups>> = Mutex::new(None);
    let key = (group.to_string(), play_dir.to_path_buf());
    if let Some(v) = CACHE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .get(&key)
    {
        return Ok(v.clone());
    }
    let mut seen = Vec::new();
    let members = resolve_group(group, play_dir, true, &mut seen)?;
    CACHE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(key, members.clone());
    Ok(members)
}

fn resolve_group(
    group: &str,
    play_dir: &Path,
    mandatory: bool,
    seen: &mut Vec<String>,
) -> Result<Vec<String>, String> {
    if seen.iter().any(|s| s == group) {
        return Ok(Vec::new());
    }
    seen.push(group.to_string());
    let parts: Vec<&str> = group.splitn(3, '.').collect();
    let (collection, resource) = (format!("{}.{}", parts[0], parts[1]), parts[2]);
    let unresolved = || {
        format!(
            "`module_defaults` names the action group `group/{group}`, which no collection \
             defines"
        )
    };
    let groups = crate::pymod::locate::runtime_yml(&collection, play_dir)
        .and_then(|p| {
            let text = std::fs::read_to_string(&p).ok()?;
            crate::yaml::parse_str(&text, &p).ok()
        })
        .map(|n| n.to_json())
        .and_then(|v| v.get("action_groups").cloned());
    let entry = groups
        .as_ref()
        .and_then(|g| g.get(group).or_else(|| g.get(resource)))
        .and_then(Value::as_array)
        .cloned();
    let Some(entry) = entry else {
        return if mandatory {
            Err(unresolved())
        } else {
            Ok(Vec::new())
        };
    };
    let qualify = |n: &str| {
        if is_fqcr(n) {
            n.to_string()
        } else {
            format!("{collection}.{n}")
        }
    };
    let mut members = Vec::new();
    let mut extends = Vec::new();
    for a in entry {
        match a {
            Value::String(s) => members.push(qualify(&s)),
            Value::Object(m) => match m.get("metadata").and_then(|md| md.get("extend_group")) {
                Some(Value::String(s)) => extends.push(qualify(s)),
                Some(Value::Array(l)) => {
                    extends.extend(l.iter().filter_map(Value::as_str).map(qualify))
                }
                _ => {}
            },
            _ => {}
        }
    }
    for g in extends {
        members.extend(resolve_group(&g, play_dir, false, seen)?);
    }
    Ok(members)
}

/// The engine's half for `package` and `service`: ansible-core's actions pick the manager's
/// module on the host (`use`, else the `pkg_mgr` / `service_mgr` fact) and give it that
/// module's defaults too, under the task's arguments and `package`'s or `service`'s own
/// defaults. `manager`: the module they run there.
pub fn backend_defaults<'a>(
    defaults: &'a Map<String, Value>,
    manager: &str,
) -> Option<&'a Map<String, Value>> {
    defaults
        .get(&action_key(manager))
        .and_then(Value::as_object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_name_one_action_however_written() {
        assert_eq!(action_key("ansible.builtin.file"), action_key("file"));
        assert_eq!(action_key("ansible.legacy.file"), "file");
        assert_eq!(
            action_key("group/testgroup"),
            "group/ansible.builtin.testgroup"
        );
        assert_eq!(action_key("group/ns.coll.g"), "group/ns.coll.g");
        assert_eq!(action_key("ns.coll.module"), "ns.coll.module");
    }

    #[test]
    fn own_entry_wins_over_groups_and_task_args_win_over_both() {
        let d = json!({"file": {"mode": "0600", "owner": "root"}});
        let mut merged = for_module(d.as_object().unwrap(), "file", Path::new(".")).unwrap();
        assert_eq!(merged["mode"], "0600");
        let mut params = json!({"mode": "0644"}).as_object().cloned().unwrap();
        let taken = merge_under(&mut params, std::mem::take(&mut merged));
        assert_eq!(params["mode"], "0644");
        assert_eq!(params["owner"], "root");
        assert_eq!(taken, vec!["owner".to_string()]);
    }
}
