//! The `lookup()`/`query()` plugins that run on the controller: `env`, `file`, `template`,
//! `vars`, `first_found`, `fileglob` and `lines`.
//!
//! Lookups see only the expression's variables (through minijinja's `State`) and the template
//! search path; they know nothing of hosts, connections or how variables were gathered.

mod fileglob;
mod first_found;

use std::path::{Path, PathBuf};

use minijinja::value::Kwargs;
use minijinja::{Error, ErrorKind, State, Value};

use super::pyrepr::py_string;
use super::rewrite::rewrite_chains;
use super::value::{defined, op_err, split_kwargs};
pub use fileglob::fileglob;
use first_found::first_found;

/// The lookups that need nothing but the controller: `env`, `file` (searched like templates,
/// then relative to the working directory) and `vars`. Returns the values and `wantlist`.
pub(super) fn run_lookup(
    state: &State,
    dirs: &[PathBuf],
    args: &[Value],
) -> Result<(Vec<Value>, bool), Error> {
    let (pos, kwargs) = split_kwargs(args)?;
    let wantlist: Option<bool> = kwargs.get("wantlist")?;
    let default: Option<Value> = kwargs.get("default")?;
    let Some((plugin, terms)) = pos.split_first() else {
        return Err(op_err("lookup needs a plugin name"));
    };
    let plugin = plugin.as_str().unwrap_or_default().to_string();
    // Where relative names are found: the task's `ansible_search_path` (its role, then the
    // playbook's directory), each with `files/` or `templates/` first, then the given dirs.
    let mut search: Vec<PathBuf> = match state.lookup("ansible_search_path") {
        Some(v) if !v.is_undefined() => v
            .try_iter()
            .map(|it| it.filter_map(|d| d.as_str().map(PathBuf::from)).collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    search.extend(dirs.iter().cloned());
    let find = |sub: &str, term: &str| -> Option<PathBuf> {
        let p = Path::new(term);
        if p.is_absolute() {
            return p.exists().then(|| p.to_path_buf());
        }
        search
            .iter()
            .flat_map(|d| [d.join(sub).join(term), d.join(term)])
            .chain(std::iter::once(PathBuf::from(term)))
            .find(|c| c.exists())
    };
    if plugin == "first_found" {
        let found = first_found(terms, &kwargs, &find)?;
        kwargs.assert_all_used()?;
        return match (found, &default) {
            (Some(p), _) => Ok((vec![Value::from(p.display().to_string())], false)),
            (None, Some(d)) => Ok((vec![d.clone()], false)),
            (None, None) if kwargs_skip(&kwargs) => Ok((Vec::new(), true)),
            (None, None) => Err(op_err("lookup('first_found'): none of the files was found")),
        };
    }
    let _ = kwargs.get::<Option<bool>>("skip");
    let mut out = Vec::new();
    for term in terms {
        let term = py_string(defined(term)?)?;
        out.push(match plugin.as_str() {
            "template" => {
                let path = find("templates", &term).ok_or_else(|| {
                    op_err(format!("lookup('template'): {term} not found"))
                })?;
                let source = std::fs::read_to_string(&path).map_err(|e| {
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
                let code = rewrite_chains(&source);
                let rendered = state
                    .env()
                    .render_named_str(&path.display().to_string(), &code, Value::from(vars))?;
                Value::from(rendered)
            }
            "fileglob" => {
                for f in fileglob(&term, &search) {
                    out.push(Value::from(f.display().to_string()));
                }
                continue;
            }
            "lines" => {
                let o = std::process::Command::new("sh")
                    .arg("-c")
                    .arg(&term)
                    .stdin(std::process::Stdio::null())
                    .output()
                    .map_err(|e| op_err(format!("lookup('lines'): cannot run `{term}`: {e}")))?;
                if !o.status.success() {
                    return Err(op_err(format!(
                        "lookup('lines'): `{term}` failed ({}): {}",
                        o.status,
                        String::from_utf8_lossy(&o.stderr).trim()
                    )));
                }
                for l in String::from_utf8_lossy(&o.stdout).lines() {
                    out.push(Value::from(l.to_string()));
                }
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
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    op_err(format!(
                        "lookup('file'): cannot read {}: {e}",
                        path.display()
                    ))
                })?;
                // Ansible strips the trailing newline (rstrip=True).
                Value::from(text.trim_end_matches(['\n', '\r']).to_string())
            }
            "vars" => match state.lookup(&term) {
                Some(v) if !v.is_undefined() => v,
                _ => match &default {
                    Some(d) => d.clone(),
                    None => {
                        return Err(Error::new(
                            ErrorKind::UndefinedError,
                            format!("lookup('vars'): no variable `{term}`"),
                        ))
                    }
                },
            },
            other => {
                return Err(op_err(format!(
                    "lookup plugin `{other}` is not supported (env, file, template, vars, first_found, fileglob and lines are)"
                )))
            }
        });
    }
    kwargs.assert_all_used()?;
    Ok((out, wantlist.unwrap_or(false)))
}

fn kwargs_skip(kwargs: &Kwargs) -> bool {
    kwargs
        .get::<Option<bool>>("skip")
        .ok()
        .flatten()
        .unwrap_or(false)
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
        let e = t.eval("lookup('pipe', 'ls')", &c).unwrap_err();
        assert!(e.to_string().contains("not supported"), "{e}");
    }
}
