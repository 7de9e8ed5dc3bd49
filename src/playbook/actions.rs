//! Load-time half of the controller-side actions: each action's parameters, checked before any
//! host is touched, and where `copy`/`template` sources are found on the controller.
//!
//! Running the actions (rendering templates, `debug`, `assert`, ...) is the engine's part
//! (`engine::actions::prepare`); it reuses these parameter types so both halves accept the same keys.

use super::files::looked_in;
use fixpoint_modules::params::{Bool, ModeSpec};
use fixpoint_modules::ParamError;
use serde::Deserialize;
use serde_json::Value;
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
    // Ansible's SELinux file arguments, handed to `copy` on the host (see `fs::selinux`).
    pub(crate) seuser: Option<String>,
    pub(crate) serole: Option<String>,
    pub(crate) setype: Option<String>,
    pub(crate) selevel: Option<String>,
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
    #[serde(default)]
    pub files_matching: Option<String>,
}

/// `setup`: the facts fixpoint gathers are a fixed set, so the subsets are accepted as given
/// (`filter`, which would change what is returned, is refused as an unknown parameter).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SetupParams {
    #[allow(dead_code)]
    gather_subset: Option<Value>,
    #[allow(dead_code)]
    gather_timeout: Option<Value>,
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

/// `fail`: the message.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FailParams {
    pub(crate) msg: Option<Value>,
}

/// The parameter names a module takes, from the same definitions `check_params` applies (for
/// the JSON Schema); `None` when any key is taken (`set_fact`) or the list is not known.
pub fn param_names(module: &str) -> Option<&'static [&'static str]> {
    use fixpoint_modules::params::struct_fields;
    match module {
        "template" => struct_fields::<TemplateParams>(),
        "debug" => struct_fields::<DebugParams>(),
        "assert" => struct_fields::<AssertParams>(),
        "include_vars" => struct_fields::<IncludeVarsParams>(),
        "setup" => struct_fields::<SetupParams>(),
        "fail" => struct_fields::<FailParams>(),
        "set_fact" => None,
        other => fixpoint_modules::registry::param_names(other),
    }
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
    let candidates: Vec<PathBuf> = dirs
        .iter()
        .flat_map(|d| [d.join(sub).join(src), d.join(src)])
        .collect();
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

/// Check a module's parameters at load time (templated values were already taken out).
pub fn check_params(module: &str, params: &Value, dirs: &[PathBuf]) -> Result<(), ParamError> {
    let missing_src = |e: String| ParamError {
        path: "src".into(),
        msg: e,
    };
    match module {
        "template" => {
            let _: TemplateParams = parse(params)?;
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
            if !remote {
                if let Some(src) = p.remove("src") {
                    if let Value::String(s) = &src {
                        let found = find_file(dirs, "files", s).map_err(missing_src)?;
                        if found.is_dir() {
                            return Err(missing_src(format!(
                                "`{s}` is a directory; copying directories is not supported yet (copy each file, or use `remote_src`)"
                            )));
                        }
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
        "include_vars" => parse::<IncludeVarsParams>(params).and_then(|p| {
            if p.file.is_some() == p.dir.is_some() {
                return Err(ParamError {
                    path: String::new(),
                    msg: "give exactly one of `file` and `dir`".into(),
                });
            }
            Ok(())
        }),
        "setup" => parse::<SetupParams>(params).map(|_| ()),
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
