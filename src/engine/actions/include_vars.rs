//! The controller side of `include_vars`: the variables of a file, or of the files of a directory
//! (`dir`, `depth`, `files_matching`, `ignore_files`, `extensions`), merged as `hash_behaviour` says.

use crate::playbook::actions::{parse, IncludeVarsParams};
use crate::playbook::files::looked_in;
use crate::yaml::mark;
use fixpoint_modules::ParamError;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

fn include_vars_params(params: &Value) -> Result<IncludeVarsParams, ParamError> {
    parse(params)
}
/// `include_vars`: the variables of a file, or of the files of a directory, found in `search`
/// when relative. `existing` gives a variable's current value, for `hash_behaviour: merge`.
/// Returns them with the files read.
pub fn include_vars(
    params: &Value,
    search: &[PathBuf],
    referenced_at: &crate::diag::Pos,
    existing: &dyn Fn(&str) -> Option<Value>,
) -> Result<(Map<String, Value>, Vec<PathBuf>), String> {
    let p = include_vars_params(params)
        .map_err(|e| format!("invalid parameters for `include_vars`: {e}"))?;
    let (rel, is_dir) = match (&p.file, &p.dir) {
        (Some(f), _) => (f.trim_end_matches('\n').to_string(), false),
        (None, Some(d)) => (d.clone(), true),
        // ansible-core looks for a file named by nothing (`file: null`, from a lookup that
        // found none) and fails in these words, which playbooks look for.
        (None, None) => {
            return Err(
                "Could not find file on the Ansible Controller.\nIf you are using a \
                        module and expect the file to exist on the remote, see the remote_src \
                        option"
                    .into(),
            )
        }
    };
    let found = if Path::new(&rel).is_absolute() {
        Some(PathBuf::from(&rel))
    } else {
        search.iter().map(|d| d.join(&rel)).find(|c| c.exists())
    };
    let Some(found) = found else {
        return Err(format!(
            "Could not find file or directory `{rel}`; looked in {}",
            looked_in(search)
        ));
    };
    // As ansible-core names them (`ansible_included_var_files`): the file or directory found,
    // links resolved, and a directory's files below it as the walk reached them (through a
    // link to a directory, that link's path).
    let found = std::fs::canonicalize(&found).unwrap_or(found);
    let files: Vec<PathBuf> = if is_dir {
        vars_dir_files(&found, &p)?
    } else {
        vec![found]
    };
    let mut vars = Map::new();
    for f in &files {
        vars.extend(crate::playbook::load_vars_file(f, referenced_at).map_err(|d| d.to_string())?);
    }
    let mut vars = match &p.name {
        Some(n) => {
            let mut m = Map::new();
            m.insert(n.clone(), Value::Object(vars));
            m
        }
        None => vars,
    };
    // `merge`: each mapping is merged into the variable's current value, recursively (the
    // value from the files wins on other types), as Ansible's `combine_vars`.
    if p.hash_behaviour.as_deref() == Some("merge") {
        for (k, v) in vars.iter_mut() {
            if let Some(old) = existing(k) {
                let new = std::mem::take(v);
                *v = merge_vars(old, new);
            }
        }
    }
    Ok((vars, files))
}

/// Ansible's recursive `merge_hash`: mappings merge key by key, anything else is replaced.
fn merge_vars(old: Value, new: Value) -> Value {
    match (old, new) {
        // A marked mapping (`mark::literal_data`) is replaced, never merged into.
        (Value::Object(mut a), Value::Object(b)) if !a.contains_key(mark::UNSAFE_KEY) => {
            // In place: a key keeps its position, new keys come last (as Python's dicts).
            for (k, v) in b {
                match a.get_mut(&k) {
                    Some(slot) => *slot = merge_vars(std::mem::take(slot), v),
                    None => {
                        a.insert(k, v);
                    }
                }
            }
            Value::Object(a)
        }
        (_, new) => new,
    }
}

/// The files `include_vars` reads from a directory, in Ansible's order: the directories of the
/// walk (links followed) sorted by path, each one's file names sorted; `depth` levels (0: all);
/// only names `files_matching` matches and no `ignore_files` pattern ends; a name of another
/// extension is skipped with `ignore_unknown_extensions`, else it fails the task.
fn vars_dir_files(root: &Path, p: &IncludeVarsParams) -> Result<Vec<PathBuf>, String> {
    if !root.is_dir() {
        return Err(format!("{} is not a directory", root.display()));
    }
    let python_re = |pattern: &str| {
        fancy_regex::Regex::new(pattern)
            .map_err(|_| format!("Invalid regular expression: {pattern}"))
    };
    let matcher = p.files_matching.as_deref().map(python_re).transpose()?;
    let ignore: Vec<String> = match &p.ignore_files {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => s.split_whitespace().map(str::to_string).collect(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect(),
        Some(other) => return Err(format!("{other} must be a list")),
    };
    let ignore = ignore
        .iter()
        .map(|pat| {
            python_re(&format!("{pat}$")).map_err(|_| format!("Invalid regular expression: {pat}"))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let extensions: Vec<String> = p
        .extensions
        .clone()
        .unwrap_or_else(|| vec!["yaml".into(), "yml".into(), "json".into()]);
    let skip_unknown = p.ignore_unknown_extensions.is_some_and(|b| b.0);
    let max_depth = p.depth.unwrap_or(0) as usize;
    let mut dirs = Vec::new();
    walk_dirs(root, &mut dirs, &mut Vec::new());
    dirs.sort_by(|a, b| a.0.as_os_str().cmp(b.0.as_os_str()));
    let mut out = Vec::new();
    for (dir, mut names) in dirs {
        let level = dir.strip_prefix(root).map_or(0, |r| r.components().count()) + 1;
        if max_depth != 0 && level > max_depth {
            continue;
        }
        names.sort();
        for name in names {
            let searched = |re: &fancy_regex::Regex| re.is_match(&name).unwrap_or(false);
            if matcher.as_ref().is_some_and(|m| !searched(m)) {
                continue;
            }
            let path = dir.join(&name);
            if !path.exists() || ignore.iter().any(searched) {
                continue;
            }
            let ext = Path::new(&name)
                .extension()
                .map(|e| e.to_string_lossy().into_owned())
                .unwrap_or_default();
            if !extensions.contains(&ext) {
                if skip_unknown {
                    continue;
                }
                return Err(format!(
                    "{} does not have a valid extension: {}",
                    path.display(),
                    extensions.join(", ")
                ));
            }
            out.push(path);
        }
    }
    Ok(out)
}

/// Every directory under `dir` (itself included) with the names of its entries that are not
/// directories, following links to directories as Python's `os.walk(followlinks=True)`; a
/// directory already on the way down (a link loop) is not entered again.
fn walk_dirs(dir: &Path, out: &mut Vec<(PathBuf, Vec<String>)>, up: &mut Vec<PathBuf>) {
    let Ok(real) = std::fs::canonicalize(dir) else {
        return;
    };
    if up.contains(&real) {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut names = Vec::new();
    let mut subdirs = Vec::new();
    for e in rd.filter_map(Result::ok) {
        let path = e.path();
        if path.is_dir() {
            subdirs.push(path);
        } else {
            names.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    out.push((dir.to_path_buf(), names));
    up.push(real);
    for d in subdirs {
        walk_dirs(&d, out, up);
    }
    up.pop();
}
