//! Load-time half of the controller-side actions: each action's parameters, checked before any
//! host is touched, and where `copy`/`template` sources are found on the controller.
//!
//! Running the actions (rendering templates, `debug`, `assert`, ...) is the engine's part
//! (`engine::actions::prepare`); it reuses these parameter types so both halves accept the same keys.

use super::files::looked_in;
use fixpoint_modules::fs::{chattr, selinux};
use fixpoint_modules::params::{Bool, ModeSpec};
use fixpoint_modules::ParamError;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// `template`: a controller-side template rendered into `copy` content.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // Fields are read through serde for validation; rendering uses the raw map.
pub(crate) struct TemplateParams {
    pub(crate) src: String,
    pub(crate) dest: String,
    pub(crate) mode: Option<ModeSpec>,
    pub(crate) owner: Option<String>,
    pub(crate) group: Option<String>,
    pub(crate) backup: Option<Bool>,
    pub(crate) validate: Option<String>,
    pub(crate) force: Option<Bool>,
    pub(crate) follow: Option<Bool>,
    pub(crate) trim_blocks: Option<Bool>,
    pub(crate) lstrip_blocks: Option<Bool>,
    pub(crate) newline_sequence: Option<String>,
    pub(crate) block_start_string: Option<String>,
    pub(crate) block_end_string: Option<String>,
    pub(crate) variable_start_string: Option<String>,
    pub(crate) variable_end_string: Option<String>,
    pub(crate) comment_start_string: Option<String>,
    pub(crate) comment_end_string: Option<String>,
    pub(crate) output_encoding: Option<String>,
    /// fixpoint's compare-and-swap, handed to `copy` on the host (see `fs::cas`).
    pub(crate) if_checksum: Option<fixpoint_modules::fs::IfChecksum>,
    /// fixpoint's `if_unchanged_since_last_run`, handed to `copy` likewise.
    pub(crate) if_unchanged_since_last_run: Option<Bool>,
}

/// `debug`: a message or one variable.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DebugParams {
    pub(crate) msg: Option<Value>,
    pub(crate) var: Option<String>,
    #[serde(default)]
    pub(crate) verbosity: u8,
}

/// `include_vars`: a file, or every `.yml`/`.yaml`/`.json` file of a directory.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IncludeVarsParams {
    #[serde(alias = "_raw_params")]
    pub file: Option<String>,
    pub dir: Option<String>,
    /// Put the variables under this one name instead of at the top.
    pub name: Option<String>,
    #[serde(default)]
    pub depth: Option<u32>,
    /// A Python regex the names of a directory's files must match (searched, not anchored).
    #[serde(default)]
    pub files_matching: Option<String>,
    /// Python regexes (a list, or one string of them split on spaces) for the names of a
    /// directory's files to skip: each must match the name's end.
    #[serde(default)]
    pub ignore_files: Option<Value>,
    /// The extensions a directory's files may have (`''`: none); default `yaml`, `yml`, `json`.
    #[serde(default)]
    pub extensions: Option<Vec<String>>,
    /// Skip a directory's files of other extensions instead of failing on them.
    #[serde(default)]
    pub ignore_unknown_extensions: Option<Bool>,
    /// `merge`: a mapping the files set is merged into the variable's value (Ansible's
    /// `combine_vars`); `replace` (the default) sets it.
    #[serde(default)]
    pub hash_behaviour: Option<String>,
}

/// `setup`: the facts fixpoint gathers are a fixed set, so the subsets are accepted as given;
/// `filter` (fnmatch patterns) keeps only the facts it names (`engine::facts::filtered`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SetupParams {
    #[allow(dead_code)]
    gather_subset: Option<Value>,
    #[allow(dead_code)]
    gather_timeout: Option<Value>,
    #[allow(dead_code)]
    filter: Option<Value>,
}

/// `assert`: conditions (bare expressions) and the messages for each outcome.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AssertParams {
    pub(crate) that: Value,
    #[serde(alias = "msg")]
    pub(crate) fail_msg: Option<Value>,
    pub(crate) success_msg: Option<Value>,
    #[serde(default)]
    pub(crate) quiet: Bool,
}

/// `validate_argument_spec`: the spec (`options` of a role's entry point), the values given
/// beside the variables, and what to say the check was for (`engine::actions::argspec`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ValidateArgSpecParams {
    #[allow(dead_code)]
    argument_spec: Value,
    #[allow(dead_code)]
    provided_arguments: Option<Value>,
    #[allow(dead_code)]
    validate_args_context: Option<Value>,
}

/// `fail`: the message.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FailParams {
    pub(crate) msg: Option<Value>,
}

/// `gather_facts` as a task: `setup`'s parameters, and `parallel` (fixpoint's agent gathers
/// its one set of facts in one request, so it changes nothing).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GatherFactsParams {
    #[allow(dead_code)]
    parallel: Option<Bool>,
    #[allow(dead_code)]
    gather_subset: Option<Value>,
    #[allow(dead_code)]
    gather_timeout: Option<Value>,
    #[allow(dead_code)]
    filter: Option<Value>,
}

/// `pause`: a time (`seconds` or `minutes`), or a prompt answered on the terminal.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PauseParams {
    pub(crate) seconds: Option<Value>,
    pub(crate) minutes: Option<Value>,
    #[serde(default, deserialize_with = "fixpoint_modules::params::de_opt_string")]
    pub(crate) prompt: Option<String>,
    pub(crate) echo: Option<Bool>,
}

impl PauseParams {
    /// The pause in seconds, if one is given (Python's `int()` of the value, as ansible-core
    /// reads it: `1.9` is 1, `"2"` is 2, `"1.5"` is refused).
    pub(crate) fn duration_secs(&self) -> Result<Option<i64>, String> {
        let int = |what: &str, v: &Value| -> Result<i64, String> {
            match v {
                Value::Number(n) => n
                    .as_i64()
                    .or_else(|| n.as_f64().map(|f| f.trunc() as i64))
                    .ok_or_else(|| format!("`{what}`: {n} is not a number of {what}")),
                Value::String(s) => s
                    .trim()
                    .parse::<i64>()
                    .map_err(|_| format!("`{what}`: \"{s}\" is not a whole number of {what}")),
                other => Err(format!("`{what}`: {other} is not a number of {what}")),
            }
        };
        match (&self.seconds, &self.minutes) {
            (Some(s), Some(m)) if !s.is_null() && !m.is_null() => {
                Err("parameters are mutually exclusive: minutes|seconds".into())
            }
            (Some(s), _) if !s.is_null() => int("seconds", s).map(Some),
            (_, Some(m)) if !m.is_null() => int("minutes", m).map(|m| Some(m.saturating_mul(60))),
            _ => Ok(None),
        }
    }
}

/// `group_by`: the group named by `key`, below `parents`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GroupByParams {
    #[serde(deserialize_with = "fixpoint_modules::params::de_string")]
    pub(crate) key: String,
    pub(crate) parents: Option<fixpoint_modules::params::StringList>,
}

/// `add_host`: the host's name (with an optional `:port`), its groups, and every other key as
/// one of its variables.
#[derive(Debug)]
pub(crate) struct AddHostParams {
    pub(crate) name: String,
    pub(crate) groups: Vec<String>,
    pub(crate) vars: Map<String, Value>,
}

impl AddHostParams {
    /// As ansible-core's action reads them: the name from `name`, `hostname` or `host`; the
    /// groups from `groupname`, `groups` or `group` (a list, or names separated by commas).
    /// Every key but `name`, `hostname`, `groupname` and `groups` is a host variable (so
    /// `host` and `group` are both, as in ansible-core), and a port in the name becomes
    /// `ansible_ssh_port`.
    pub(crate) fn from_value(params: &Value) -> Result<AddHostParams, String> {
        let m = params
            .as_object()
            .ok_or_else(|| "the parameters of `add_host` must be a mapping".to_string())?;
        let given = ["name", "hostname", "host"]
            .iter()
            .find_map(|k| m.get(*k).filter(|v| !v.is_null()))
            .ok_or_else(|| "`name`, `host` or `hostname` needs to be provided".to_string())?;
        let raw = match given {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            other => return Err(format!("`name`: {other} is not a host name")),
        };
        let (name, port) = split_port(&raw);
        // In name order, as ansible-core's task arguments reach the action.
        let mut keys: Vec<&String> = m
            .keys()
            .filter(|k| !matches!(k.as_str(), "name" | "hostname" | "groupname" | "groups"))
            .collect();
        keys.sort();
        let mut vars: Map<String, Value> = keys
            .into_iter()
            .map(|k| (k.clone(), m[k].clone()))
            .collect();
        if let Some(port) = port {
            vars.insert("ansible_ssh_port".into(), Value::from(port));
        }
        let mut groups: Vec<String> = Vec::new();
        let listed = ["groupname", "groups", "group"]
            .iter()
            .find_map(|k| m.get(*k).filter(|v| !v.is_null()));
        let names: Vec<String> = match listed {
            None => Vec::new(),
            Some(Value::String(s)) => s.split(',').map(str::to_string).collect(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| match i {
                    Value::String(s) => Ok(s.clone()),
                    Value::Number(n) => Ok(n.to_string()),
                    other => Err(format!("`groups`: {other} is not a group name")),
                })
                .collect::<Result<_, _>>()?,
            Some(other) => return Err(format!("Groups must be specified as a list, not {other}")),
        };
        for g in names {
            let g = g.trim().to_string();
            if !g.is_empty() && !groups.contains(&g) {
                groups.push(g);
            }
        }
        Ok(AddHostParams { name, groups, vars })
    }
}

/// `host:port`, `[v6addr]:port` → the name and the port; anything else (a bare IPv6 address
/// too) is a name without a port, as ansible-core's `parse_address` leaves it.
fn split_port(raw: &str) -> (String, Option<u16>) {
    if let Some(rest) = raw.strip_prefix('[') {
        if let Some((addr, tail)) = rest.split_once(']') {
            if let Some(port) = tail.strip_prefix(':').and_then(|p| p.parse().ok()) {
                return (addr.to_string(), Some(port));
            }
            if tail.is_empty() {
                return (addr.to_string(), None);
            }
        }
        return (raw.to_string(), None);
    }
    match raw.split_once(':') {
        Some((host, port)) if !port.contains(':') && !host.is_empty() => match port.parse() {
            Ok(p) => (host.to_string(), Some(p)),
            Err(_) => (raw.to_string(), None),
        },
        _ => (raw.to_string(), None),
    }
}

/// The parameter names a module takes, from the same definitions `check_params` applies (for
/// the JSON Schema); `None` when any key is taken (`set_fact`) or the list is not known.
pub fn param_names(module: &str) -> Option<Vec<&'static str>> {
    use fixpoint_modules::params::struct_fields;
    let names = match module {
        // `template` hands Ansible's SELinux file arguments and `attributes` to `copy`.
        "template" => {
            let mut n = struct_fields::<TemplateParams>()?.to_vec();
            n.extend_from_slice(fixpoint_modules::fs::selinux::KEYS);
            n.extend_from_slice(fixpoint_modules::fs::chattr::KEYS);
            return Some(n);
        }
        "debug" => struct_fields::<DebugParams>(),
        "assert" => struct_fields::<AssertParams>(),
        "validate_argument_spec" => struct_fields::<ValidateArgSpecParams>(),
        "include_vars" => struct_fields::<IncludeVarsParams>(),
        "setup" => struct_fields::<SetupParams>(),
        "fail" => struct_fields::<FailParams>(),
        "gather_facts" => struct_fields::<GatherFactsParams>(),
        "pause" => struct_fields::<PauseParams>(),
        "group_by" => struct_fields::<GroupByParams>(),
        // Any other key of `add_host` becomes a host variable.
        "set_fact" | "add_host" => None,
        // `decrypt` and `local_follow` are the controller's (see `check_params`).
        "copy" => {
            let mut n = fixpoint_modules::registry::param_names("copy")?;
            n.extend(["decrypt", "local_follow"]);
            return Some(n);
        }
        other => return fixpoint_modules::registry::param_names(other),
    };
    names.map(<[&str]>::to_vec)
}

/// Module parameters through the modules crate's parser (same error paths as the modules).
pub(crate) fn parse<T: for<'de> Deserialize<'de>>(params: &Value) -> Result<T, ParamError> {
    fixpoint_modules::parse_params(params)
}

/// Where a `copy` `src` is found: in each directory of `dirs` (the role's, then the
/// playbook's), `files/` (or `templates/`) first, then the directory itself.
pub fn find_file(dirs: &[PathBuf], sub: &str, src: &str) -> Result<PathBuf, String> {
    let p = Path::new(src);
    if p.is_absolute() {
        return if p.exists() {
            Ok(p.to_path_buf())
        } else {
            Err(format!("source file {src} does not exist"))
        };
    }
    let candidates = candidates(dirs, sub, src);
    candidates
        .iter()
        .find(|c| c.exists())
        .cloned()
        .ok_or_else(|| {
            format!(
                "source `{src}` not found; looked in {}",
                looked_in(&candidates)
            )
        })
}

fn candidates(dirs: &[PathBuf], sub: &str, src: &str) -> Vec<PathBuf> {
    dirs.iter()
        .flat_map(|d| [d.join(sub).join(src), d.join(src)])
        .collect()
}

/// A `copy` source when the task runs (an earlier task may have made it: `check_params` only
/// warns), or ansible-core's message for one that is missing.
pub fn copy_source(dirs: &[PathBuf], src: &str) -> Result<PathBuf, String> {
    find_file(dirs, "files", src).map_err(|_| {
        let searched = match Path::new(src).is_absolute() {
            true => String::new(),
            false => format!(
                "\nSearched in:\n\t{}",
                candidates(dirs, "files", src)
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join("\n\t")
            ),
        };
        format!(
            "Could not find or access '{src}'{searched} on the Ansible Controller.\nIf you are \
             using a module and expect the file to exist on the remote, see the remote_src option"
        )
    })
}

/// Whether `check_params` refused a `copy` or `template` source because it is not there (yet).
pub(crate) fn is_missing_source(e: &ParamError) -> bool {
    e.path == "src" && e.msg.starts_with(MISSING_SOURCE)
}

/// How `check_params` says a source file is missing (`is_missing_source`).
const MISSING_SOURCE: &str = "source ";

/// Check a module's parameters at load time (templated values were already taken out).
pub fn check_params(module: &str, params: &Value, dirs: &[PathBuf]) -> Result<(), ParamError> {
    let missing_src = |e: String| ParamError {
        path: "src".into(),
        msg: e,
    };
    match module {
        "template" => {
            chattr::spec_of(params).map_err(|msg| ParamError {
                path: String::new(),
                msg,
            })?;
            let _: TemplateParams =
                parse(&selinux::without("copy", &chattr::without("copy", params)))?;
            if let Some(Value::String(src)) = params.get("src") {
                find_file(dirs, "templates", src).map_err(missing_src)?;
            }
            Ok(())
        }
        "copy" => {
            let mut p = params.as_object().cloned().unwrap_or_default();
            let remote = p
                .get("remote_src")
                .and_then(|v| serde_json::from_value::<Bool>(v.clone()).ok())
                .is_some_and(|b| b.0);
            // `decrypt` and `local_follow` are the controller's (`engine/actions/prepare.rs`):
            // flags, then gone.
            for k in ["decrypt", "local_follow"] {
                if let Some(d) = p.remove(k) {
                    serde_json::from_value::<Bool>(d).map_err(|e| ParamError {
                        path: k.into(),
                        msg: e.to_string(),
                    })?;
                }
            }
            if !remote {
                if let Some(src) = p.remove("src") {
                    if let Value::String(s) = &src {
                        // A directory is copied whole (`engine/actions/tree.rs`).
                        find_file(dirs, "files", s).map_err(missing_src)?;
                    }
                    p.insert("_content_b64".into(), Value::String(String::new()));
                }
            }
            fixpoint_modules::check_params("copy", &Value::Object(p))
        }
        "debug" => {
            let p: DebugParams = parse(params)?;
            if p.msg.is_some() && p.var.is_some() {
                return Err(ParamError {
                    path: String::new(),
                    msg: "`msg` and `var` are mutually exclusive".into(),
                });
            }
            Ok(())
        }
        "assert" => parse::<AssertParams>(params).map(|_| ()),
        "validate_argument_spec" => parse::<ValidateArgSpecParams>(params).map(|_| ()),
        "include_vars" => parse::<IncludeVarsParams>(params).and_then(|p| {
            if p.file.is_some() == p.dir.is_some() {
                return Err(ParamError {
                    path: String::new(),
                    msg: "give exactly one of `file` and `dir`".into(),
                });
            }
            let dir_only = p.depth.is_some()
                || p.files_matching.is_some()
                || p.ignore_files.is_some()
                || p.extensions.is_some()
                || p.ignore_unknown_extensions.is_some();
            if p.file.is_some() && dir_only {
                return Err(ParamError {
                    path: String::new(),
                    msg: "`depth`, `files_matching`, `ignore_files`, `extensions` and \
                          `ignore_unknown_extensions` go with `dir`, not `file`"
                        .into(),
                });
            }
            if let Some(h) = p.hash_behaviour.as_deref() {
                if h != "merge" && h != "replace" {
                    return Err(ParamError {
                        path: "hash_behaviour".into(),
                        msg: format!("`{h}` is neither `merge` nor `replace`"),
                    });
                }
            }
            Ok(())
        }),
        "setup" => parse::<SetupParams>(params).map(|_| ()),
        "gather_facts" => parse::<GatherFactsParams>(params).map(|_| ()),
        "pause" => parse::<PauseParams>(params).and_then(|p| {
            // Templated numbers are checked when they have values.
            let templated = [&p.seconds, &p.minutes].iter().any(
                |v| matches!(v, Some(Value::String(s)) if fixpoint_modules::params::is_template(s)),
            );
            if templated {
                return Ok(());
            }
            p.duration_secs().map(|_| ()).map_err(|msg| ParamError {
                path: String::new(),
                msg,
            })
        }),
        "group_by" => parse::<GroupByParams>(params).map(|_| ()),
        "add_host" => AddHostParams::from_value(params)
            .map(|_| ())
            .map_err(|msg| ParamError {
                path: String::new(),
                msg,
            }),
        "fail" => parse::<FailParams>(params).map(|_| ()),
        "set_fact" => {
            let m = params.as_object().cloned().unwrap_or_default();
            if m.keys().all(|k| k == "cacheable") {
                return Err(ParamError {
                    path: String::new(),
                    msg: "set_fact needs at least one variable to set".into(),
                });
            }
            Ok(())
        }
        other => fixpoint_modules::check_params(other, params),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn add_host_reads_names_ports_groups_and_vars_as_ansible() {
        let p = AddHostParams::from_value(&json!({
            "name": "web1:2222", "groups": " a, b,a ", "zeta": 1, "alpha": "x"
        }))
        .unwrap();
        assert_eq!(p.name, "web1");
        assert_eq!(p.groups, ["a", "b"]);
        let keys: Vec<&String> = p.vars.keys().collect();
        assert_eq!(keys, ["alpha", "zeta", "ansible_ssh_port"]);
        assert_eq!(p.vars["ansible_ssh_port"], 2222);
        // `host` and `group` name the host and its group, and stay variables too.
        let p = AddHostParams::from_value(&json!({"host": "h", "group": "g"})).unwrap();
        assert_eq!(
            (p.name.as_str(), p.groups.as_slice()),
            ("h", &["g".to_string()][..])
        );
        assert_eq!(p.vars["host"], "h");
        assert_eq!(p.vars["group"], "g");
        let e = AddHostParams::from_value(&json!({"groups": ["x"]})).unwrap_err();
        assert!(e.contains("`name`"), "{e}");
        assert!(AddHostParams::from_value(&json!({"name": "h", "groups": {"a": 1}})).is_err());
    }

    #[test]
    fn ports_split_off_as_parse_address_does() {
        assert_eq!(split_port("h:22"), ("h".into(), Some(22)));
        assert_eq!(split_port("h"), ("h".into(), None));
        assert_eq!(split_port("[::1]:2200"), ("::1".into(), Some(2200)));
        assert_eq!(split_port("[::1]"), ("::1".into(), None));
        assert_eq!(split_port("fe80::1"), ("fe80::1".into(), None));
        assert_eq!(split_port("h:notaport"), ("h:notaport".into(), None));
    }

    #[test]
    fn pause_durations_are_pythons_int() {
        let p = |v: Value| parse::<PauseParams>(&v).unwrap().duration_secs();
        assert_eq!(p(json!({"seconds": 1.9})), Ok(Some(1)));
        assert_eq!(p(json!({"seconds": "2"})), Ok(Some(2)));
        assert_eq!(p(json!({"minutes": 2})), Ok(Some(120)));
        assert_eq!(p(json!({"prompt": "go?"})), Ok(None));
        assert!(p(json!({"seconds": "1.5"})).is_err());
        assert!(p(json!({"seconds": 1, "minutes": 1}))
            .unwrap_err()
            .contains("mutually exclusive"));
        assert!(parse::<PauseParams>(&json!({"second": 1})).is_err());
    }
}
