//! Controller-side actions prepared before a task's request: `copy`/`template` sources read on
//! the controller and the modules that never leave it (`debug`, `assert`, `set_fact`, `fail`);
//! `include_vars` has its own file.
//!
//! Their parameters and load-time checks live in `playbook::actions`.

use super::trust::{note_templated_elements, untrusted, var_name, vouch};
use crate::playbook::actions::{
    copy_source, find_file, parse, AssertParams, DebugParams, FailParams, TemplateParams,
};
use crate::template::FileOptions;
use crate::vars::magic::OMIT;
use crate::vars::{Layer, Scope};
use crate::yaml::mark;
use fixpoint_modules::fs::{chattr, selinux};
use fixpoint_modules::params::Bool;
use fixpoint_modules::Outcome;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The mark of a `set_fact` with `cacheable: true` in its result, taken out by the engine.
pub const CACHEABLE: &str = "_ansible_facts_cacheable";

/// Parameters that must not be templated before the action sees them (bare expressions).
pub fn raw_param_keys(module: &str) -> &'static [&'static str] {
    match module {
        "assert" => &["that"],
        "debug" => &["var"],
        _ => &[],
    }
}

/// What to run for a task after its parameters were rendered.
pub enum Prepared {
    /// Send to the agent; with `upload`, the controller files the agent may ask for.
    Agent {
        module: &'static str,
        params: Value,
        upload: Vec<super::upload::Upload>,
    },
    /// Already decided on the controller.
    Done(Result<Outcome, Failure>),
}

/// A failed action on the controller, with the return values to register.
#[derive(Debug)]
pub struct Failure {
    pub msg: String,
    pub result: Map<String, Value>,
}

impl Failure {
    pub(super) fn msg(msg: impl Into<String>) -> Failure {
        Failure {
            msg: msg.into(),
            result: Map::new(),
        }
    }
}

/// Drop parameters rendered to `omit`.
pub fn strip_omit(params: &mut Value) {
    if let Value::Object(m) = params {
        m.retain(|_, v| v.as_str() != Some(OMIT));
    }
}

pub(super) fn display_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Renders a `template` source as ansible-core's template action does: `{% include %}`,
/// `{% import %}` and `{% extends %}` find files in each search directory's `templates/`, then
/// the directory itself (the role's, the playbook's, then the source's own directory), and the
/// template sees `ansible_managed` (unless a variable sets it) and the `template_*` variables.
/// The `template` parameters that shape the rendering; the rest goes to `copy`.
const TEMPLATE_ONLY: &[&str] = &[
    "src",
    "trim_blocks",
    "lstrip_blocks",
    "newline_sequence",
    "block_start_string",
    "block_end_string",
    "variable_start_string",
    "variable_end_string",
    "comment_start_string",
    "comment_end_string",
    "output_encoding",
];

/// The rendering options a `template` task gives, checked: newline sequences and encodings
/// fixpoint writes.
fn file_options(p: &TemplateParams) -> Result<(FileOptions, &'static str), Failure> {
    // As written in YAML (`'\r\n'`, backslashes) or as the characters themselves.
    let newline = match p.newline_sequence.as_deref() {
        None | Some("\\n") | Some("\n") => "\n",
        Some("\\r\\n") | Some("\r\n") => "\r\n",
        Some("\\r") | Some("\r") => "\r",
        Some(other) => {
            return Err(Failure::msg(format!(
                "newline_sequence must be one of \\n, \\r or \\r\\n, not {other:?}"
            )))
        }
    };
    output_encoding(p)?;
    let opts = FileOptions {
        trim_blocks: p.trim_blocks.map(|b| b.0),
        lstrip_blocks: p.lstrip_blocks.map(|b| b.0),
        delimiters: [
            p.block_start_string.clone(),
            p.block_end_string.clone(),
            p.variable_start_string.clone(),
            p.variable_end_string.clone(),
            p.comment_start_string.clone(),
            p.comment_end_string.clone(),
        ],
    };
    Ok((opts, newline))
}

/// The encoding `output_encoding` asks for; `None` for UTF-8 (the default, also for `''`).
/// ansible-core encodes the rendered text with Python's codec of that name; fixpoint takes
/// the WHATWG encoders (`encoding_rs`) whose own name is the one given, so that an alias that
/// means another table there than in Python (`latin-1` is windows-1252 for WHATWG) is refused
/// rather than written differently, as are the encodings it cannot write (UTF-16).
fn output_encoding(p: &TemplateParams) -> Result<Option<&'static encoding_rs::Encoding>, Failure> {
    let Some(asked) = p.output_encoding.as_deref() else {
        return Ok(None);
    };
    let label = asked.trim().to_ascii_lowercase().replace('_', "-");
    if matches!(label.as_str(), "" | "utf-8" | "utf8" | "u8") {
        return Ok(None);
    }
    let named =
        |e: &'static encoding_rs::Encoding| e.name().replace('_', "-").eq_ignore_ascii_case(&label);
    match encoding_rs::Encoding::for_label(label.as_bytes()) {
        Some(e) if named(e) && e.output_encoding() == e && e != encoding_rs::UTF_8 => Ok(Some(e)),
        _ => Err(Failure::msg(format!(
            "output_encoding `{asked}` is not supported by fixpoint: give UTF-8 or an encoding \
             by its WHATWG name (windows-1252, iso-8859-2, shift_jis, euc-kr, gbk, koi8-r...)"
        ))),
    }
}

/// The rendered text in `enc`; a character it cannot hold fails, as Python's strict codec.
fn encode_output(text: &str, enc: &'static encoding_rs::Encoding) -> Result<Vec<u8>, Failure> {
    let (bytes, _, unmappable) = enc.encode(text);
    if unmappable {
        return Err(Failure::msg(format!(
            "the rendered template has characters that {} cannot encode",
            enc.name()
        )));
    }
    Ok(bytes.into_owned())
}

fn render_template_file(
    path: &Path,
    p: &TemplateParams,
    dirs: &[PathBuf],
    scope: &Arc<Scope>,
    dest: Option<&Value>,
) -> Result<String, Failure> {
    let src = p.src.as_str();
    let (opts, newline) = file_options(p)?;
    // A vault-encrypted template is decrypted with the run's secrets, as Ansible does.
    let source = crate::vault::read_file(path)
        .map_err(|e| Failure::msg(format!("{}: {e}", path.display())))
        .and_then(|b| {
            String::from_utf8(b).map_err(|_| {
                Failure::msg(format!(
                    "{}: the template is not UTF-8 text",
                    path.display()
                ))
            })
        })?;
    let fullpath = crate::vars::magic::abs(path);
    let mut search = Vec::new();
    for d in dirs
        .iter()
        .cloned()
        .chain(Path::new(&fullpath).parent().map(Path::to_path_buf))
    {
        search.push(d.join("templates"));
        search.push(d);
    }
    let mut vars = Map::new();
    vars.insert("template_path".into(), json!(src));
    vars.insert("template_fullpath".into(), json!(fullpath));
    vars.insert(
        "template_destpath".into(),
        dest.cloned().unwrap_or(Value::Null),
    );
    if let Ok(host) = nix::unistd::gethostname() {
        vars.insert("template_host".into(), json!(host.to_string_lossy()));
    }
    // The source file's owner and modification time, and when it is rendered, as ansible-core
    // gives them to the template (the times as datetime values).
    let mut times = vec![(
        "template_run_date".to_string(),
        crate::template::python_local_time(std::time::SystemTime::now()),
    )];
    if let Ok(meta) = std::fs::metadata(path) {
        use std::os::unix::fs::MetadataExt;
        vars.insert(
            "template_uid".into(),
            json!(fixpoint_modules::fs::user_name(meta.uid())),
        );
        if let Ok(mtime) = meta.modified() {
            times.push((
                "template_mtime".into(),
                crate::template::python_local_time(mtime),
            ));
        }
    }
    if !scope.defines("ansible_managed") {
        // ansible-core's default `ansible_managed` (its DEFAULT_MANAGED_STR).
        vars.insert("ansible_managed".into(), json!("Ansible managed"));
    }
    let scope = scope.with(Layer::data(vars).with_objects(times));
    let rendered = scope
        .templar()
        .as_ref()
        .clone()
        .with_search_path(search)
        .with_file_options(&opts)
        .and_then(|t| t.render_file(&path.display().to_string(), &source, &scope.ctx()))
        .map_err(|e| Failure::msg(e.to_string()))?;
    // As Ansible: the rendered text's newlines become `newline_sequence`.
    Ok(if newline == "\n" {
        rendered
    } else {
        rendered.replace('\n', newline)
    })
}

/// Names Jinja gives a meaning of its own, which no variable can take (ansible-core's
/// `JINJA_KEYWORDS`).
const JINJA_KEYWORDS: &[&str] = &["true", "false", "none", "True", "False", "None", "not"];

/// Turn a rendered task into agent work, or run it here.
pub fn prepare(
    module: &'static str,
    mut params: Value,
    dirs: &[PathBuf],
    scope: &Arc<Scope>,
    environment: &Map<String, Value>,
) -> Result<Prepared, Failure> {
    strip_omit(&mut params);
    // A task's parameters are a mapping from the loader (`Task::params`), and rendering a
    // mapping gives a mapping.
    let obj = params.as_object_mut().expect("parameters are a mapping");
    match module {
        "copy" => {
            // As ansible-core's copy action, before it looks at anything else.
            for k in crate::playbook::task::COPY_INTERNAL {
                if obj.get(*k).is_some_and(|v| !v.is_null()) {
                    return Ok(Prepared::Done(Err(Failure::msg(format!(
                        "Invalid parameter specified: \"{k}\""
                    )))));
                }
            }
            let mut upload = Vec::new();
            let flag = |obj: &Map<String, Value>, k: &str| {
                obj.get(k)
                    .and_then(|v| serde_json::from_value::<Bool>(v.clone()).ok())
                    .map(|b| b.0)
            };
            let remote = flag(obj, "remote_src") == Some(true);
            let decrypt = flag(obj, "decrypt") != Some(false);
            let follow = flag(obj, "local_follow") != Some(false);
            obj.remove("decrypt");
            obj.remove("local_follow");
            if !remote {
                if let Some(Value::String(src)) = obj.remove("src") {
                    let path = copy_source(dirs, &src).map_err(Failure::msg)?;
                    if path.is_dir() {
                        let upload = super::tree::prepare(obj, &src, &path, follow, decrypt)?;
                        return Ok(Prepared::Agent {
                            module: "copy_tree",
                            params,
                            upload,
                        });
                    }
                    if !follow && path.is_symlink() {
                        return Err(Failure::msg(super::tree::no_follow(&path)));
                    }
                    let sent = match decrypt {
                        true => crate::vault::plain::plain_path(&path).map_err(Failure::msg)?,
                        false => path.clone(),
                    };
                    // Only the file's hash goes with the request: the agent asks for the
                    // content when the host's file differs, and it is then streamed.
                    let up = super::upload::Upload::of(&sent).map_err(Failure::msg)?;
                    obj.insert("_src_sha256".into(), json!(up.sha256));
                    obj.insert("_src_sha1".into(), json!(up.sha1));
                    obj.insert("_src_size".into(), json!(up.size));
                    obj.insert("_src_name".into(), json!(basename(&src)));
                    obj.insert("_src_path".into(), json!(absolute(&path)));
                    upload.push(up);
                    if obj.get("mode").and_then(Value::as_str) == Some("preserve") {
                        use std::os::unix::fs::PermissionsExt;
                        let m = std::fs::metadata(&path)
                            .map_err(|e| Failure::msg(format!("{}: {e}", path.display())))?
                            .permissions()
                            .mode()
                            & 0o7777;
                        obj.insert("_src_mode".into(), json!(m));
                    }
                }
            }
            Ok(Prepared::Agent {
                module: "copy",
                params,
                upload,
            })
        }
        "unarchive" => {
            // A controller archive travels like a `copy` source: its sha256 goes with the
            // request, and the bytes only when the host's archive cache lacks them.
            let flag = |k: &str| {
                obj.get(k)
                    .and_then(|v| serde_json::from_value::<Bool>(v.clone()).ok())
                    .map(|b| b.0)
            };
            let remote = flag("remote_src") == Some(true) || flag("copy") == Some(false);
            let mut upload = Vec::new();
            if !remote {
                if let Some(Value::String(src)) = obj.get("src").cloned() {
                    // Not a file to look for: ansible-core fails before it searches, and the
                    // message must not show the URL's credentials.
                    if src.contains("://") {
                        return Ok(Prepared::Done(Err(Failure::msg(format!(
                            "Unsupported option, an URI src ({}) is only supported when \
                             remote_src is True",
                            fixpoint_modules::http::mask_userinfo(&src)
                        )))));
                    }
                    let path = find_file(dirs, "files", &src).map_err(Failure::msg)?;
                    if path.is_dir() {
                        return Err(Failure::msg(format!(
                            "`{src}` is a directory, not an archive"
                        )));
                    }
                    let up = super::upload::Upload::of(&path).map_err(Failure::msg)?;
                    obj.insert("_src_sha256".into(), json!(up.sha256));
                    obj.insert("_src_size".into(), json!(up.size));
                    upload.push(up);
                }
            }
            Ok(Prepared::Agent {
                module: "unarchive",
                params,
                upload,
            })
        }
        "script" => {
            // The script travels like a `copy` source: its sha256 goes with the request, and
            // the bytes only when the host's cache lacks them and the script is going to run.
            let cmd = obj
                .get("cmd")
                .or_else(|| obj.get("_raw_params"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            // ansible-core checks its arguments before it looks for the script.
            if cmd.trim().is_empty() {
                return Ok(Prepared::Done(Err(Failure::msg(
                    "one of the following is required: _raw_params, cmd",
                ))));
            }
            let src = fixpoint_modules::script::script_path(cmd)
                .ok_or_else(|| Failure::msg(format!("cannot split the script's line: {cmd}")))?;
            let path = find_file(dirs, "files", &src).map_err(Failure::msg)?;
            if path.is_dir() {
                return Err(Failure::msg(format!(
                    "`{src}` is a directory, not a script"
                )));
            }
            // `decrypt` (default true): a vault-encrypted script runs as its plain text.
            let decrypt = obj
                .get("decrypt")
                .and_then(|v| serde_json::from_value::<Bool>(v.clone()).ok())
                .is_none_or(|b| b.0);
            let sent = match decrypt {
                true => crate::vault::plain::plain_path(&path).map_err(Failure::msg)?,
                false => path.clone(),
            };
            let up = super::upload::Upload::of(&sent).map_err(Failure::msg)?;
            obj.insert("_src_sha256".into(), json!(up.sha256));
            obj.insert("_src_size".into(), json!(up.size));
            obj.insert("_src_name".into(), json!(basename(&src)));
            if !environment.is_empty() {
                obj.insert("_env".into(), Value::Object(environment.clone()));
            }
            Ok(Prepared::Agent {
                module: "script",
                params,
                upload: vec![up],
            })
        }
        "template" => {
            // Ansible's SELinux file arguments and `attributes` go on to `copy`, which takes them.
            let p: TemplateParams =
                parse(&selinux::without("copy", &chattr::without("copy", &params)))
                    .map_err(|e| Failure::msg(e.to_string()))?;
            let path = find_file(dirs, "templates", &p.src).map_err(Failure::msg)?;
            let rendered = render_template_file(&path, &p, dirs, scope, params.get("dest"))?;
            // The same mapping as above.
            let obj = params.as_object_mut().expect("mapping");
            for k in TEMPLATE_ONLY {
                obj.remove(*k);
            }
            // `mode: preserve` gives the file the template's own mode, as copy does for its
            // `src`, and `output_encoding` other bytes than the text's UTF-8: the file then goes
            // as a source file's bytes (with that file's mode).
            let preserve = p.mode == Some(fixpoint_modules::params::ModeSpec::Preserve);
            let encoding = output_encoding(&p)?;
            if preserve || encoding.is_some() {
                use base64::Engine as _;
                use std::os::unix::fs::PermissionsExt as _;
                let bytes = match encoding {
                    Some(enc) => encode_output(&rendered, enc)?,
                    None => rendered.into_bytes(),
                };
                obj.insert(
                    "_content_b64".into(),
                    json!(base64::engine::general_purpose::STANDARD.encode(bytes)),
                );
                if preserve {
                    let bits = std::fs::metadata(&path)
                        .map_err(|e| Failure::msg(format!("{}: {e}", path.display())))?
                        .permissions()
                        .mode()
                        & 0o7777;
                    obj.insert("_src_mode".into(), json!(bits));
                }
            } else {
                obj.insert("content".into(), Value::String(rendered));
            }
            obj.insert("_template_src".into(), json!(p.src));
            obj.insert("_src_path".into(), json!(absolute(&path)));
            obj.insert(
                "_src_name".into(),
                // The file keeps the template's name, `.j2` included, as in Ansible.
                json!(basename(&p.src)),
            );
            Ok(Prepared::Agent {
                module: "copy",
                params,
                upload: Vec::new(),
            })
        }
        // The modules that run programs on the host get the task's `environment` (`apt` too:
        // `APT_CONFIG` and proxies reach apt that way, as in Ansible; `get_url` and `uri` read
        // `http_proxy`, `https_proxy` and `no_proxy` from it).
        "command" | "shell" | "apt" | "package" | "apt_repository" | "deb822_repository"
        | "apt_key" | "dnf" | "yum" | "get_url" | "uri" | "pip" | "git" => {
            if !environment.is_empty() {
                obj.insert("_env".into(), Value::Object(environment.clone()));
            }
            Ok(Prepared::Agent {
                module,
                params,
                upload: Vec::new(),
            })
        }
        "debug" => Ok(Prepared::Done(debug(&params, scope))),
        "assert" => Ok(Prepared::Done(assert(&params, scope))),
        "validate_argument_spec" => Ok(Prepared::Done(super::argspec::run(&params, scope))),
        "fail" => {
            let p: FailParams = parse(&params).map_err(|e| Failure::msg(e.to_string()))?;
            Ok(Prepared::Done(Err(Failure::msg(
                p.msg
                    .map(|m| display_value(&m))
                    .unwrap_or_else(|| "Failed as requested from task".into()),
            ))))
        }
        "set_fact" => {
            let mut facts = obj.clone();
            // `cacheable: true` makes the facts the host's facts too (`ansible_facts`), as
            // ansible-core's fact cache holds them; the engine reads the mark and drops it.
            let cacheable = match facts.remove("cacheable") {
                None => false,
                Some(v) => match serde_json::from_value::<Bool>(v.clone()) {
                    Ok(b) => b.0,
                    Err(_) => {
                        return Ok(Prepared::Done(Err(Failure::msg(format!(
                            "`cacheable` is {}, not a valid boolean",
                            display_value(&v)
                        )))))
                    }
                },
            };
            // A name a template gave is checked now, as ansible-core checks every name: an
            // identifier that is none of Jinja's own names (`true`, `none`, `not`...).
            if let Some(bad) = facts
                .keys()
                .find(|k| !crate::playbook::is_var_name(k) || JINJA_KEYWORDS.contains(&k.as_str()))
            {
                let typed = if bad.parse::<i64>().is_ok() {
                    " of type 'int'"
                } else {
                    ""
                };
                return Ok(Prepared::Done(Err(Failure::msg(format!(
                    "Task failed: Invalid variable name '{bad}'{typed}."
                )))));
            }
            let mut result: Map<String, Value> =
                [("ansible_facts".to_string(), Value::Object(facts))]
                    .into_iter()
                    .collect();
            if cacheable {
                result.insert(CACHEABLE.into(), Value::Bool(true));
            }
            Ok(Prepared::Done(Ok(Outcome {
                changed: false,
                result,
                ..Outcome::default()
            })))
        }
        other => Ok(Prepared::Agent {
            module: fixpoint_modules::canonical_name(other).unwrap_or("unknown"),
            params,
            upload: Vec::new(),
        }),
    }
}

/// A controller file's path as ansible-core's actions name it (the copy's diff header, the
/// `src` of a `force: false` result): absolute, links left as they are.
fn absolute(p: &Path) -> String {
    std::path::absolute(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

fn basename(p: &str) -> String {
    Path::new(p)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.to_string())
}

fn debug(params: &Value, scope: &Arc<Scope>) -> Result<Outcome, Failure> {
    if let Some(text) = params.get("var").and_then(mark::literal_of) {
        return Err(untrusted(text));
    }
    if let Some(msg) = params
        .get("var")
        .and_then(|v| super::argspec::not_a_string("var", v))
    {
        return Err(Failure::msg(msg));
    }
    // Checked when the playbook loads, and again here for arguments a template gave.
    if params.get("msg").is_some() && params.get("var").is_some() {
        return Err(Failure::msg("parameters are mutually exclusive: msg|var"));
    }
    let p: DebugParams = parse(params).map_err(|e| Failure::msg(e.to_string()))?;
    let mut result = Map::new();
    // `verbosity` was applied by the scheduler: a debug below it never gets here.
    let _ = p.verbosity;
    let var = match p.var {
        Some(var) => var_name(var, scope)?,
        None => None,
    };
    if let Some(var) = var {
        let (v, undefined) = scope.eval_var(&var).map_err(Failure::msg)?;
        let warning = if crate::template::is_omit_json(&v) {
            // ansible-core shows the value and says it could not leave it out.
            result.insert(var, json!("<<Omit>>"));
            Some(
                "The result of the `var` expression could not be omitted; a placeholder was \
                 used instead."
                    .to_string(),
            )
        } else {
            result.insert(var, v);
            undefined.map(|message| format!("Encountered 1 template error.\nerror 1 - {message}"))
        };
        if let Some(warning) = warning {
            result.insert("warnings".into(), json!([warning]));
        }
    } else {
        // Ansible's default is for a `msg` that is not given; `msg: null` stays null.
        let given = params.get("msg").map(|_| p.msg.unwrap_or(Value::Null));
        result.insert("msg".into(), given.unwrap_or_else(|| json!("Hello world!")));
    }
    Ok(Outcome {
        changed: false,
        result,
        ..Outcome::default()
    })
}

fn assert(params: &Value, scope: &Arc<Scope>) -> Result<Outcome, Failure> {
    // In ansible-core's words: a playbook's own assertions test them (an argument splat of
    // `{}`, `{that: }`).
    if params.get("that").is_none() {
        return Err(Failure::msg("missing required arguments: that"));
    }
    let p: AssertParams = parse(params).map_err(|e| Failure::msg(e.to_string()))?;
    // `that` written as one template of a list (`that: "{{ checks }}"`) is that list, its
    // strings conditions if they are the playbook's own, as ansible-core's assert resolves it.
    let listed = match &p.that {
        Value::String(s) => crate::template::Templar::single_expression_code(s)
            .and_then(|code| Some((code.trim(), scope.eval(code).ok()?)))
            .filter(|(_, v)| v.is_array())
            .map(|(code, v)| vouch(v, Some(code), scope)),
        _ => None,
    };
    if let (Value::String(that), Some(listed)) = (&p.that, &listed) {
        note_templated_elements(that, listed, scope);
    }
    let conditions: Vec<&Value> = match listed.as_ref().unwrap_or(&p.that) {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    for cond in conditions {
        if let Some(text) = mark::literal_of(cond) {
            return Err(untrusted(text));
        }
        if cond.is_null() || cond.as_str().is_some_and(|s| s.trim().is_empty()) {
            return Err(Failure::msg(
                "Empty conditional expressions are not allowed.",
            ));
        }
        let cond = &display_value(cond);
        let ok = scope
            .eval_bool(cond)
            .map_err(|e| Failure::msg(format!("assertion `{cond}` could not be evaluated: {e}")))?;
        if !ok {
            let msg = p
                .fail_msg
                .as_ref()
                .map(display_value)
                .unwrap_or_else(|| "Assertion failed".into());
            let mut result = Map::new();
            result.insert("assertion".into(), json!(cond));
            result.insert("evaluated_to".into(), json!(false));
            return Err(Failure { msg, result });
        }
    }
    let msg = p
        .success_msg
        .map(|m| display_value(&m))
        .unwrap_or_else(|| "All assertions passed".into());
    // Both register `msg`; a quiet one's is the outcome's message, which the text output
    // does not show without -v (as ansible-core shows only a non-quiet assert's result).
    let mut result = Map::new();
    if !p.quiet.0 {
        result.insert("msg".into(), json!(msg));
    }
    Ok(Outcome {
        changed: false,
        result,
        msg: p.quiet.0.then_some(msg),
        ..Outcome::default()
    })
}
