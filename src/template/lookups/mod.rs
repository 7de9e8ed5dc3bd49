//! The `lookup()`/`query()` plugins that run on the controller: `env`, `file`, `unvault`,
//! `template`, `vars`, `varnames`, `first_found`, `fileglob`, `lines`, `pipe`, `password`,
//! `url`, `ini` (`ini.rs`), `csvfile` (`csvfile.rs`), `inventory_hostnames` (`hosts.rs`), `config`
//! (the ansible-core settings fixpoint reads), and
//! the list makers shared with the `with_*` loops (`listing.rs`): `dict`, `subelements`,
//! `sequence`, `indexed_items`, `items`, `nested`, `together`, `random_choice`.
//!
//! Lookups see only the expression's variables (through minijinja's `State`) and the template
//! search path; they know nothing of hosts, connections or how variables were gathered (the
//! hosts `inventory_hostnames` matches are those of the `groups` variable, as in ansible-core).

mod csvfile;
mod fileglob;
mod first_found;
mod hosts;
mod ini;
pub mod listing;
pub(super) mod native;
mod options;
mod password;
mod url;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use minijinja::value::Kwargs;
use minijinja::{Error, ErrorKind, State, Value};

use super::filters::regex::match_err;
use super::foreign::Kind;
use super::pyrepr::py_string;
use super::rewrite::rewrite_chains;
use super::value::{defined, op_err, split_kwargs};
use super::VARIABLE_ORDER;
pub use fileglob::{fileglob, py_glob};
use first_found::first_found;

/// The lookup plugins `run_lookup` knows (`fixpoint validate` refuses the others).
pub(crate) const NAMES: &[&str] = &[
    "env",
    "file",
    "template",
    "vars",
    "varnames",
    "first_found",
    "fileglob",
    "lines",
    "pipe",
    "password",
    "url",
    "dict",
    "subelements",
    "sequence",
    "indexed_items",
    "list",
    "items",
    "nested",
    "together",
    "random_choice",
    "inventory_hostnames",
    "ini",
    "csvfile",
    "unvault",
    "config",
];

/// What fixpoint's `config` lookup gives, for `validate`'s help and its run-time error: the
/// ansible-core settings fixpoint reads. Any other name fails (also under `on_missing: skip`,
/// since fixpoint cannot tell a setting it does not read from one that does not exist).
pub fn config_refused(name: &str) -> String {
    format!(
        "fixpoint's `config` lookup gives the ansible-core settings fixpoint reads ({}), not \
         `{name}`: it reads no ansible.cfg, and its other settings are its command-line flags; \
         write the value the playbook needs as a variable",
        crate::config::ansible_setting_names()
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// `lookup('config', NAME...)`: each setting's value (`config_refused` for names it lacks);
/// a plugin's settings (`plugin_type`, `plugin_name`) are not among them.
fn config(terms: &[Value], kwargs: &Kwargs) -> Result<Vec<Value>, Error> {
    let _ = kwargs.get::<Option<String>>("on_missing")?;
    for k in ["plugin_type", "plugin_name"] {
        if kwargs
            .get::<Option<Value>>(k)?
            .is_some_and(|v| !v.is_none())
        {
            return Err(op_err(format!(
                "lookup('config'): `{k}` asks for a plugin's setting, which fixpoint does not have"
            )));
        }
    }
    kwargs.assert_all_used()?;
    terms
        .iter()
        .map(|t| {
            let name = t.as_str().ok_or_else(|| {
                op_err(format!(
                    "Invalid setting identifier, \"{t}\" is not a string"
                ))
            })?;
            crate::config::ansible_setting(name)
                .map(|v| Value::from_serialize(&v))
                .ok_or_else(|| op_err(config_refused(name)))
        })
        .collect()
}

/// The lookups that need nothing but the controller: `env`, `file` (searched like templates,
/// then relative to the working directory) and `vars`. Returns the values and `wantlist`.
/// A lookup's values and whether it was asked for a list (`wantlist`); `None` when it failed
/// and its `errors` option (`ignore` or `warn`) says to give nothing instead, as ansible-core
/// does (`lookup()` is then `None`, `query()` an empty list).
pub(super) fn run_lookup(
    state: &State,
    dirs: &[PathBuf],
    args: &[Value],
) -> Result<Option<(Vec<Value>, bool)>, Error> {
    let (_, kwargs) = split_kwargs(args)?;
    let errors: Option<String> = kwargs.get("errors")?;
    match (run_lookup_strict(state, dirs, args), errors.as_deref()) {
        (Ok(v), _) => Ok(Some(v)),
        (Err(_), Some("ignore" | "warn")) => Ok(None),
        (Err(e), _) => Err(e),
    }
}

/// The names of the variables `state` sees (not the environment's functions), in the order
/// ansible-core hands a lookup its variables: the order the context gives under
/// `VARIABLE_ORDER`, then any other (a template's own, or all of a context that gives none)
/// sorted.
pub(super) fn variable_names(state: &State) -> Vec<String> {
    let globals: Vec<&str> = state.env().globals().map(|(k, _)| k).collect();
    let mut rest: BTreeSet<String> = state
        .known_variables()
        .into_iter()
        .filter(|n| !globals.contains(&n.as_ref()))
        .map(|n| n.into_owned())
        .collect();
    let mut names = Vec::with_capacity(rest.len());
    if let Some(Ok(order)) = state.lookup(VARIABLE_ORDER).map(|o| o.try_iter()) {
        for name in order {
            if let Some(name) = name.as_str().and_then(|n| rest.take(n)) {
                names.push(name);
            }
        }
    }
    names.extend(rest);
    names
}

/// The task's `ansible_search_path`: its role, then the playbook's directory.
fn search_path(state: &State) -> Vec<PathBuf> {
    match state.lookup("ansible_search_path") {
        Some(v) if !v.is_undefined() => v
            .try_iter()
            .map(|it| it.filter_map(|d| d.as_str().map(PathBuf::from)).collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// A lookup's arguments without its plugin name.
fn terms_and_kwargs(args: &[Value]) -> &[Value] {
    args.get(1..).unwrap_or_default()
}

fn run_lookup_strict(
    state: &State,
    dirs: &[PathBuf],
    args: &[Value],
) -> Result<(Vec<Value>, bool), Error> {
    let (pos, kwargs) = split_kwargs(args)?;
    // Read by `run_lookup`.
    let _ = kwargs.get::<Option<String>>("errors");
    let wantlist: Option<bool> = kwargs.get("wantlist")?;
    let default: Option<Value> = kwargs.get("default")?;
    let Some((plugin, terms)) = pos.split_first() else {
        return Err(op_err("lookup needs a plugin name"));
    };
    let written = plugin.as_str().unwrap_or_default();
    // `ansible.builtin.env` is `env`: fixpoint's lookups are ansible.builtin's.
    let plugin = ["ansible.builtin.", "ansible.legacy."]
        .iter()
        .find_map(|p| written.strip_prefix(p))
        .unwrap_or(written)
        .to_string();
    // A name validate could not check (a template, which ansible-core does not render
    // either) fails here, in ansible-core's words, whatever the terms.
    if !NAMES.contains(&plugin.as_str()) && super::foreign::knows(Kind::Lookup, &plugin) {
        let base = search_path(state).last().cloned();
        let values = super::foreign::lookup(state, &plugin, terms_and_kwargs(args), base)?;
        return Ok((values, wantlist.unwrap_or(false)));
    }
    if !NAMES.contains(&plugin.as_str()) {
        let mut quoted = String::new();
        super::pyrepr::py_quote(written, &mut quoted);
        return Err(op_err(format!("The lookup plugin {quoted} was not found.")));
    }
    // Where relative names are found: the task's `ansible_search_path` (its role, then the
    // playbook's directory), each with `files/` or `templates/` first, then the given dirs.
    let mut search = search_path(state);
    // `lines` runs its command in the playbook's directory, the last of the task's search path.
    let base = search.last().cloned();
    search.extend(dirs.iter().cloned());
    let find = |sub: &str, term: &str| find_in(&search, Some(sub), term);
    if plugin == "first_found" {
        // Called as a lookup, ansible-core 2.19 looks in no subdirectory (`with_first_found`
        // looks in `files/`, `vars/` or `templates/`).
        let (found, skip) = first_found(terms, &kwargs, &|term| find_in(&search, None, term))?;
        kwargs.assert_all_used()?;
        return match (found, &default) {
            (Some(p), _) => Ok((vec![Value::from(p.display().to_string())], false)),
            (None, Some(d)) => Ok((vec![d.clone()], false)),
            (None, None) if skip => Ok((Vec::new(), true)),
            (None, None) => Err(op_err(NOT_FOUND)),
        };
    }
    if let Some(out) = run_listing(&plugin, terms, &kwargs)? {
        kwargs.assert_all_used()?;
        return Ok((out, wantlist.unwrap_or(false)));
    }
    // These take their options as ansible-core's plugins do, ignoring unknown keyword
    // arguments (which it ignores too).
    let find_file = |term: &str| find("files", term);
    let out = match plugin.as_str() {
        "ini" => Some(ini::lookup(terms, &kwargs, &find_file)?),
        "csvfile" => Some(csvfile::lookup(terms, &kwargs, &find_file)?),
        "inventory_hostnames" => Some(hosts::inventory_hostnames(state, terms)?),
        "config" => Some(config(terms, &kwargs)?),
        _ => None,
    };
    if let Some(out) = out {
        ignore_other_kwargs(&kwargs)?;
        return Ok((out, wantlist.unwrap_or(false)));
    }
    let _ = kwargs.get::<Option<bool>>("skip");
    // ansible-core's `unvault` takes no options and ignores any it is given.
    if plugin == "unvault" {
        ignore_other_kwargs(&kwargs)?;
    }
    // `file`'s options, as Python's str.lstrip()/rstrip() (all whitespace); rstrip by default.
    let (lstrip, rstrip) = if plugin == "file" {
        (
            kwargs.get::<Option<bool>>("lstrip")?.unwrap_or(false),
            kwargs.get::<Option<bool>>("rstrip")?.unwrap_or(true),
        )
    } else {
        (false, true)
    };
    // `template`'s delimiters, as its options name them (the defaults when not given).
    let mut delimiters: Vec<Option<String>> = Vec::new();
    let mut trim_blocks = None;
    let mut template_vars_arg: Option<Value> = None;
    if plugin == "template" {
        trim_blocks = kwargs.get::<Option<bool>>("trim_blocks")?;
        template_vars_arg = kwargs
            .get::<Option<Value>>("template_vars")?
            .filter(|v| !v.is_none());
        if let Some(v) = &template_vars_arg {
            if v.kind() != minijinja::value::ValueKind::Map {
                return Err(op_err(format!(
                    "lookup('template'): template_vars must be a dict, not {}",
                    v.kind()
                )));
            }
        }
        for k in [
            "block_start_string",
            "block_end_string",
            "variable_start_string",
            "variable_end_string",
            "comment_start_string",
            "comment_end_string",
        ] {
            delimiters.push(kwargs.get::<Option<String>>(k)?);
        }
    }
    let mut out = Vec::new();
    for term in terms {
        // `varnames` takes regexes: a term that is not a string is refused, as ansible-core
        // refuses it (rather than searching for its text).
        if plugin == "varnames" && defined(term)?.kind() != minijinja::value::ValueKind::String {
            return Err(op_err(format!(
                "Invalid setting identifier, \"{term}\" is not a string, it is a {}",
                term.kind()
            )));
        }
        if plugin == "vars" && defined(term)?.kind() != minijinja::value::ValueKind::String {
            return Err(op_err(format!(
                "Variable name must be 'str' not '{}'.",
                super::filters::types::filter_type_debug(term)
            )));
        }
        let term = py_string(defined(term)?)?;
        out.push(match plugin.as_str() {
            "template" => {
                let path = find("templates", &term)
                    .ok_or_else(|| op_err(format!("lookup('template'): {term} not found")))?;
                let source = read_decrypted(&path).map_err(|e| {
                    op_err(format!(
                        "lookup('template'): cannot read {}: {e}",
                        path.display()
                    ))
                })?;
                // The template sees the variables of the expression that looks it up.
                let mut vars = std::collections::BTreeMap::new();
                for name in state.known_variables() {
                    if let Some(v) = state.lookup(&name) {
                        vars.insert(name.to_string(), v);
                    }
                }
                // And, as ansible-core's lookup adds them, the `template_*` variables and (when
                // no variable sets it) the default `ansible_managed`.
                template_vars(&mut vars, &term, &path);
                if let Some(extra) = &template_vars_arg {
                    for k in extra.try_iter()? {
                        vars.insert(py_string(&k)?, extra.get_item(&k)?);
                    }
                }
                let code = rewrite_chains(&source);
                // `{% include %}` and `{% import %}` inside it search the template's own
                // directory first, then each search path's `templates/` and itself, as
                // ansible-core's template lookup does.
                let mut include_dirs: Vec<PathBuf> =
                    path.parent().map(Path::to_path_buf).into_iter().collect();
                for d in &search {
                    include_dirs.push(d.join("templates"));
                    include_dirs.push(d.clone());
                }
                let mut env = state.env().clone();
                env.set_loader(move |name| super::env::load_from_dirs(&include_dirs, name));
                if let Some(t) = trim_blocks {
                    env.set_trim_blocks(t);
                }
                if delimiters.iter().any(Option::is_some) {
                    let d = |i: usize, default: &'static str| {
                        delimiters[i].clone().unwrap_or_else(|| default.to_string())
                    };
                    let syntax = minijinja::syntax::SyntaxConfig::builder()
                        .block_delimiters(d(0, "{%"), d(1, "%}"))
                        .variable_delimiters(d(2, "{{"), d(3, "}}"))
                        .comment_delimiters(d(4, "{#"), d(5, "#}"))
                        .build()?;
                    env.set_syntax(syntax);
                }
                let name = path.display().to_string();
                let vars = Value::from(vars);
                // One expression: its value, as ansible-core's native rendering gives it.
                if delimiters.iter().all(Option::is_none) {
                    if let Some(v) = native::single_value(
                        &env,
                        &name,
                        &code,
                        &vars,
                        trim_blocks.unwrap_or(true),
                    )? {
                        out.push(v);
                        continue;
                    }
                }
                let mut rendered = env.render_named_str(&name, &code, vars)?;
                // A template that renders nothing at all (only a comment) is `None` to
                // ansible-core, not an empty string.
                if rendered.is_empty() {
                    out.push(Value::from(()));
                    continue;
                }
                // As the template module (`Templar::render_file`): at least as many trailing
                // newlines as the source, so `{% endfor %}` on the last line keeps its line end.
                let trailing = |t: &str| t.len() - t.trim_end_matches('\n').len();
                let missing = trailing(&source).saturating_sub(trailing(&rendered));
                rendered.push_str(&"\n".repeat(missing));
                Value::from(rendered)
            }
            "fileglob" => {
                for f in fileglob(&term, &search) {
                    out.push(Value::from(f.display().to_string()));
                }
                continue;
            }
            "lines" => {
                out.extend(
                    listing::lines(&term, base.as_deref())
                        .map_err(op_err)?
                        .iter()
                        .map(Value::from_serialize),
                );
                continue;
            }
            "pipe" => Value::from(listing::pipe(&term, base.as_deref()).map_err(op_err)?),
            "password" => password::password(&term, &kwargs, base.as_deref())?,
            "url" => {
                out.extend(url::lookup(&term, &kwargs)?);
                continue;
            }
            "env" => std::env::var(&term).map_or_else(
                |_| default.clone().unwrap_or_else(|| Value::from("")),
                Value::from,
            ),
            "file" => {
                let path = find("files", &term)
                    .filter(|p| p.is_file())
                    .unwrap_or_else(|| PathBuf::from(&term));
                let text = read_decrypted(&path).map_err(|e| {
                    op_err(format!(
                        "lookup('file'): cannot read {}: {e}",
                        path.display()
                    ))
                })?;
                let text = if lstrip { text.trim_start() } else { &text[..] };
                let text = if rstrip { text.trim_end() } else { text };
                Value::from(text.to_string())
            }
            // The file's text as it is (not stripped, unlike `file`), decrypted when vaulted.
            "unvault" => {
                let path = find("files", &term)
                    .ok_or_else(|| op_err(format!("Unable to find file matching \"{term}\" ")))?;
                let bytes = crate::vault::read_file(&path).map_err(|e| match e {
                    crate::vault::ReadError::Io(e) => op_err(format!(
                        "lookup('unvault'): cannot read {}: {e}",
                        path.display()
                    )),
                    vault => op_err(vault.to_string()),
                })?;
                Value::from(String::from_utf8_lossy(&bytes).into_owned())
            }
            "varnames" => {
                // The names of the variables that the Python regex `term` finds something
                // in, in the order ansible-core gives them.
                let re = fancy_regex::Regex::new(&term).map_err(|e| {
                    op_err(format!(
                        "Unable to use \"{term}\" as a search parameter: {}",
                        python_re_error(&term, &e)
                    ))
                })?;
                for name in variable_names(state) {
                    if re.is_match(&name).map_err(|e| match_err(&term, e))? {
                        out.push(Value::from(name));
                    }
                }
                continue;
            }
            "vars" => match state.lookup(&term) {
                Some(v) if !v.is_undefined() => v,
                _ => match &default {
                    Some(d) => d.clone(),
                    None => {
                        return Err(Error::new(
                            ErrorKind::UndefinedError,
                            // ansible-core's words, which playbooks test for.
                            format!("No variable named {} was found.", {
                                let mut q = String::new();
                                super::pyrepr::py_quote(&term, &mut q);
                                q
                            }),
                        ));
                    }
                },
            },
            other => {
                return Err(op_err(format!(
                    "lookup plugin `{other}` is not supported ({} are)",
                    NAMES.join(", ")
                )))
            }
        });
    }
    kwargs.assert_all_used()?;
    Ok((out, wantlist.unwrap_or(false)))
}

/// Mark every keyword argument as used, for the lookups whose ansible-core plugins ignore the
/// ones they do not know (rather than refusing them, as minijinja would).
fn ignore_other_kwargs(kwargs: &Kwargs) -> Result<(), Error> {
    for name in kwargs.args().map(str::to_string).collect::<Vec<_>>() {
        let _: Value = kwargs.get(&name)?;
    }
    Ok(())
}

/// The lookups of `listing.rs`, which take their terms as values (not strings); None for
/// the other plugins.
/// The variables ansible-core's template lookup adds for the template at `path` (found for
/// `term`): `template_path`, `template_fullpath`, `template_host`, `template_uid`, the times, and
/// its default `ansible_managed` unless a variable sets one.
fn template_vars(vars: &mut std::collections::BTreeMap<String, Value>, term: &str, path: &Path) {
    use std::os::unix::fs::MetadataExt;
    vars.insert("template_path".into(), Value::from(term));
    vars.insert(
        "template_fullpath".into(),
        Value::from(path.display().to_string()),
    );
    vars.insert("template_destpath".into(), Value::from(()));
    if let Ok(host) = nix::unistd::gethostname() {
        vars.insert(
            "template_host".into(),
            Value::from(host.to_string_lossy().into_owned()),
        );
    }
    vars.insert(
        "template_run_date".into(),
        super::python_local_time(std::time::SystemTime::now()),
    );
    if let Ok(meta) = std::fs::metadata(path) {
        vars.insert(
            "template_uid".into(),
            Value::from(fixpoint_modules::fs::user_name(meta.uid())),
        );
        if let Ok(mtime) = meta.modified() {
            vars.insert("template_mtime".into(), super::python_local_time(mtime));
        }
    }
    if vars.get("ansible_managed").is_none_or(Value::is_undefined) {
        // ansible-core's default (its DEFAULT_MANAGED_STR), as the template module gives it.
        vars.insert("ansible_managed".into(), Value::from("Ansible managed"));
    }
}

fn run_listing(
    plugin: &str,
    terms: &[Value],
    kwargs: &Kwargs,
) -> Result<Option<Vec<Value>>, Error> {
    let json: Vec<serde_json::Value> = terms
        .iter()
        .map(|t| serde_json::to_value(defined(t)?).map_err(|e| op_err(e.to_string())))
        .collect::<Result<_, Error>>()?;
    let out = match plugin {
        "dict" => listing::dict_items(&json),
        "subelements" => listing::subelements(&json),
        "indexed_items" => Ok(listing::indexed_items(json)),
        "items" => Ok(listing::items(json)),
        "nested" => listing::nested(json),
        "together" => listing::together(json),
        "random_choice" => Ok(listing::random_choice(json)),
        // ansible.builtin.list: the terms as they are.
        "list" => Ok(json),
        "sequence" => {
            // Keyword arguments are every term's defaults; alone, they make one sequence.
            let mut defaults = Vec::new();
            for k in ["start", "end", "count", "stride", "format"] {
                if let Some(v) = kwargs.get::<Option<Value>>(k)? {
                    defaults.push((k.to_string(), py_string(&v)?));
                }
            }
            let specs: Vec<String> = if terms.is_empty() && !defaults.is_empty() {
                vec![String::new()]
            } else {
                terms.iter().map(py_string).collect::<Result<_, _>>()?
            };
            let mut all = Vec::new();
            for spec in specs {
                all.extend(listing::sequence(&spec, &defaults).map_err(op_err)?);
            }
            Ok(all)
        }
        _ => return Ok(None),
    }
    .map_err(op_err)?;
    Ok(Some(out.iter().map(Value::from_serialize).collect()))
}

/// Where a relative name is found, as ansible-core's `path_dwim_relative_stack` looks: in each
/// search directory's `sub`directory (unless the name already starts with it), then in the
/// directory itself; then relative to the working directory.
fn find_in(search: &[PathBuf], sub: Option<&str>, term: &str) -> Option<PathBuf> {
    let p = Path::new(term);
    if p.is_absolute() {
        return p.exists().then(|| p.to_path_buf());
    }
    let sub = sub.filter(|s| term.split('/').next() != Some(*s));
    search
        .iter()
        .flat_map(|d| [sub.map(|s| d.join(s).join(term)), Some(d.join(term))])
        .flatten()
        .chain(std::iter::once(PathBuf::from(term)))
        .find(|c| c.exists())
}

/// `with_first_found`: the first of the names in `terms` (strings, lists, `{files, paths}`
/// mappings) found in `search`, each directory's `subdir` first. None when nothing is found
/// and a mapping said `skip: true`.
/// ansible-core's message when no candidate of `first_found` exists.
const NOT_FOUND: &str = "No file was found when using first_found.";

pub fn first_found_file(
    terms: &serde_json::Value,
    subdir: Option<&str>,
    search: &[PathBuf],
) -> Result<Option<PathBuf>, String> {
    let terms = match terms {
        serde_json::Value::Array(a) => a.iter().map(Value::from_serialize).collect(),
        other => vec![Value::from_serialize(other)],
    };
    let kwargs = Kwargs::from_iter(Vec::<(String, Value)>::new());
    let (found, skip) = first_found(&terms, &kwargs, &|term| find_in(search, subdir, term))
        .map_err(|e| e.detail().unwrap_or_default().to_string())?;
    match found {
        Some(p) => Ok(Some(std::path::absolute(&p).unwrap_or(p))),
        None if skip => Ok(None),
        None => Err(NOT_FOUND.into()),
    }
}

/// A regex compile error worded as Python's `re` words the common ones (Ansible's messages
/// quote it; its targets test for "nothing to repeat").
fn python_re_error(pattern: &str, e: &fancy_regex::Error) -> String {
    match e {
        fancy_regex::Error::ParseError(pos, fancy_regex::ParseError::TargetNotRepeatable) => {
            format!("nothing to repeat at position {pos}")
        }
        // A `[` never closed: Python names the position of the `[`.
        fancy_regex::Error::ParseError(pos, fancy_regex::ParseError::InvalidClass)
            if !pattern[(*pos).min(pattern.len())..].contains(']') =>
        {
            let open = pattern[..(*pos).min(pattern.len())].rfind('[').unwrap_or(0);
            format!("unterminated character set at position {open}")
        }
        other => other.to_string(),
    }
}

/// A controller file's text for the `file` and `template` lookups: decrypted with the run's
/// vault secrets when it is vault-encrypted, as ansible-core's lookups read it.
fn read_decrypted(path: &std::path::Path) -> Result<String, String> {
    let bytes = crate::vault::read_file(path).map_err(|e| match e {
        crate::vault::ReadError::Io(e) => e.to_string(),
        vault => vault.to_string(),
    })?;
    String::from_utf8(bytes).map_err(|_| "stream did not contain valid UTF-8".to_string())
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use crate::template::Templar;
    use serde_json::json;

    #[test]
    fn lookups() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("key.pub"), "ssh-ed25519 AAAA\n").unwrap();
        let t = Templar::new().with_search_path(vec![dir.path().to_path_buf()]);
        let c = vars();
        assert_eq!(
            t.eval("lookup('file', 'key.pub')", &c).unwrap(),
            json!("ssh-ed25519 AAAA")
        );
        let path = std::env::var("PATH").unwrap_or_default();
        assert_eq!(t.eval("lookup('env', 'PATH')", &c).unwrap(), json!(path));
        assert_eq!(
            t.eval("lookup('env', 'FIXPOINT_NOPE_X', default='d')", &c)
                .unwrap(),
            json!("d")
        );
        assert_eq!(t.eval("lookup('vars', 'x')", &c).unwrap(), json!("a"));
        assert_eq!(
            t.eval("query('vars', 'x', 'count')", &c).unwrap(),
            json!(["a", 3])
        );
        assert_eq!(
            t.eval("lookup('vars', 'x', 'y')", &c).unwrap(),
            json!("a,yes")
        );
        assert!(t.eval("lookup('file', 'missing.txt')", &c).is_err());
        assert_eq!(
            t.eval("query('varnames', '^u', 'ou')", &c).unwrap(),
            json!(["user", "users", "count"])
        );
        assert_eq!(
            t.eval("lookup('ansible.builtin.vars', 'x')", &c).unwrap(),
            json!("a")
        );
        assert_eq!(
            t.eval(
                "query('ansible.builtin.sequence', 'count=2', count=5, start=10)",
                &c
            )
            .unwrap(),
            json!(["10", "11"])
        );
        assert_eq!(
            t.eval("query('sequence', count=2, start=10)", &c).unwrap(),
            json!(["10", "11"])
        );
        assert_eq!(t.eval("query('sequence')", &c).unwrap(), json!([]));
        assert_eq!(
            t.eval("lookup('dict', {'k': 1})", &c).unwrap(),
            json!({"key": "k", "value": 1})
        );
        assert_eq!(
            t.eval("query('indexed_items', users)", &c).unwrap(),
            json!([[0, "alice"], [1, "bob"]])
        );
        assert_eq!(
            t.eval("query('subelements', [user], 'groups')", &c)
                .unwrap(),
            json!([[{"name": "bob", "uid": 1000}, "wheel"]])
        );
        assert!(t.eval("lookup('subelements', 9001, 'groups')", &c).is_err());
        assert_eq!(
            t.eval("query('lines', 'echo a; echo b')", &c).unwrap(),
            json!(["a", "b"])
        );
        assert_eq!(
            t.eval("lookup('pipe', 'printf \"a\\nb \\n\\n\"')", &c)
                .unwrap(),
            json!("a\nb")
        );
        assert_eq!(
            t.eval("query('pipe', 'echo x', 'echo y')", &c).unwrap(),
            json!(["x", "y"])
        );
        let e = t.eval("lookup('pipe', 'exit 3')", &c).unwrap_err();
        assert!(
            e.to_string()
                .contains("lookup_plugin.pipe(exit 3) returned 3"),
            "{e}"
        );
        let e = t.eval("lookup('nosuchlookup', 'ls')", &c).unwrap_err();
        assert!(
            e.to_string()
                .contains("The lookup plugin 'nosuchlookup' was not found."),
            "{e}"
        );
        // Without terms too: the name is checked first. (In a template, not a condition:
        // a condition renders a template in a string constant first, as ansible-core does.)
        let e = t
            .render_str("{{ lookup('{{ \"pipe\" }}') }}", &c)
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("The lookup plugin '{{ \"pipe\" }}' was not found."),
            "{e}"
        );
    }
}
