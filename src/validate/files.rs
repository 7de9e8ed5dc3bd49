//! The files a playbook reaches besides its YAML: template files (a `template` source, each
//! existing candidate of its `with_first_found`, what they include, import or extend, and
//! `lookup('template', …)`), the vars files `include_vars` may pick through `with_first_found`,
//! and the task files a templated `include_tasks` name can stand for.

use super::Validator;
use crate::diag::{Diagnostic, Pos};
use crate::playbook::{load_vars_file, Inherited, Loader, LoopKind, Play, Task};
use crate::template::{Reference, ScanAs};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

impl Validator<'_> {
    /// The template and vars files a task names.
    pub(super) fn task_files(&mut self, t: &Task, play: &Play) {
        let dirs = t.search_dirs(&play.dir);
        let src = t.params.get("src").and_then(Value::as_str);
        match (t.module, t.loop_kind) {
            ("template", LoopKind::FirstFound(sub)) => {
                for path in self.first_found_candidates(t, sub, &dirs) {
                    self.template_file(&path, &dirs);
                }
            }
            ("template", _) => {
                let names = match src {
                    Some(s) if !crate::template::Templar::is_template(s) => vec![s.to_string()],
                    Some(s) => loop_sources(t, s),
                    None => Vec::new(),
                };
                for name in names {
                    // A missing plain source was refused by the loader already; one from a
                    // loop item is left to the run (a condition may skip that item).
                    if let Ok(path) = crate::playbook::actions::find_file(&dirs, "templates", &name)
                    {
                        self.template_file(&path, &dirs);
                    }
                }
            }
            ("include_vars", LoopKind::FirstFound(sub)) => {
                for path in self.first_found_candidates(t, sub, &dirs) {
                    if let Err(d) = load_vars_file(&path, &t.pos) {
                        self.out.push(d);
                    }
                }
            }
            _ => {}
        }
    }

    /// Every file of a `with_first_found` list that exists (each may be the one a host picks),
    /// found as the loop finds it.
    fn first_found_candidates(&self, t: &Task, sub: &str, dirs: &[PathBuf]) -> Vec<PathBuf> {
        let Some(items) = &t.loop_items else {
            return Vec::new();
        };
        let items = crate::playbook::loops::marked_terms(items).unwrap_or(items);
        let mut terms: Vec<(String, Value)> = Vec::new();
        let mut add_files = |v: &Value, paths: &Value| match v {
            Value::String(s) => {
                for f in s.split([',', ';']) {
                    terms.push((f.trim().to_string(), paths.clone()));
                }
            }
            Value::Array(a) => {
                for f in a.iter().filter_map(Value::as_str) {
                    terms.push((f.to_string(), paths.clone()));
                }
            }
            _ => {}
        };
        let list = match items {
            Value::Array(a) => a.clone(),
            other => vec![other.clone()],
        };
        for item in &list {
            match item {
                Value::Object(m) => add_files(
                    m.get("files").unwrap_or(&Value::Null),
                    m.get("paths").unwrap_or(&json!([])),
                ),
                other => add_files(other, &json!([])),
            }
        }
        let mut out = Vec::new();
        for (file, paths) in terms {
            let paths: Vec<String> = paths
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            if paths
                .iter()
                .any(|p| crate::template::Templar::is_template(p))
            {
                continue;
            }
            let found: Vec<PathBuf> = if crate::template::Templar::is_template(&file) {
                // `"{{ ansible_os_family }}.yml"`: every file the name can stand for, where
                // the loop would look for it.
                let mut roots: Vec<PathBuf> = Vec::new();
                for d in dirs {
                    if paths.is_empty() {
                        roots.push(d.join(sub));
                        // A bare directory (a role's, the playbook's) holds all sorts of
                        // files: listed only for a name that says which subdirectory.
                        if file.contains('/') {
                            roots.push(d.clone());
                        }
                    } else {
                        roots.extend(paths.iter().map(|p| d.join(p)));
                    }
                }
                // The first place that has any is where the loop would find them; the
                // playbooks themselves are never vars or template files.
                roots
                    .iter()
                    .map(|r| candidates(r, &file))
                    .find(|c| !c.is_empty())
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|p| {
                        let canon = std::fs::canonicalize(p).unwrap_or(p.clone());
                        !self.playbooks.contains(&canon)
                    })
                    .collect()
            } else {
                let one = json!([{"files": [file], "paths": paths, "skip": true}]);
                crate::template::first_found_file(&one, Some(sub), dirs)
                    .ok()
                    .flatten()
                    .into_iter()
                    .collect()
            };
            for p in found {
                let canon = std::fs::canonicalize(&p).unwrap_or(p.clone());
                if !out
                    .iter()
                    .any(|o: &PathBuf| std::fs::canonicalize(o).unwrap_or(o.clone()) == canon)
                {
                    out.push(p);
                }
            }
        }
        out
    }

    /// A template file: its syntax and names, then every template it reaches.
    pub(super) fn template_file(&mut self, path: &Path, dirs: &[PathBuf]) {
        // Positions read better relative to where fixpoint runs, as the loader's are.
        let cwd = std::env::current_dir().unwrap_or_default();
        let path = path.strip_prefix(&cwd).unwrap_or(path);
        let path = path.strip_prefix(".").unwrap_or(path);
        let canon = std::fs::canonicalize(path).unwrap_or(path.to_path_buf());
        if !self.files_seen.insert(canon) {
            return;
        }
        let file = Arc::new(path.to_path_buf());
        let source = match std::fs::read_to_string(path) {
            Ok(s) => s,
            Err(e) => {
                self.out.push(Diagnostic::at(
                    &Pos::file_only(path),
                    format!("cannot read template {}: {e}", path.display()),
                ));
                return;
            }
        };
        let scan = self.templar.scan(&source, ScanAs::File);
        self.fleet_file_reads(&scan.cross, &file);
        for p in scan.problems {
            self.out
                .push(Diagnostic::at(&Pos::new(&file, p.line, p.col), p.msg).help(p.help));
        }
        // `{% include %}` and the like: each search directory's `templates/`, then the
        // directory itself, then the template's own directory (as the engine renders it).
        let mut search: Vec<PathBuf> = Vec::new();
        for d in dirs
            .iter()
            .cloned()
            .chain(path.parent().map(Path::to_path_buf))
        {
            search.push(d.join("templates"));
            search.push(d);
        }
        for r in scan.refs {
            let at = Pos::new(&file, r.line, r.col);
            if r.lookup {
                self.reference(&r, &at, dirs);
                continue;
            }
            match search.iter().map(|d| d.join(&r.name)).find(|c| c.is_file()) {
                Some(found) => self.template_file(&found, dirs),
                None if r.optional => {}
                None => self.out.push(
                    Diagnostic::at(&at, format!("template `{}` not found", r.name))
                        .help(format!("looked in {}", crate::playbook::looked_in(&search))),
                ),
            }
        }
    }

    /// `lookup('template', name)` in a string of the task being checked.
    pub(super) fn lookup_template(&mut self, r: &Reference, at: &Pos) {
        let dirs = self.dirs.clone();
        self.reference(r, at, &dirs);
    }

    /// A `lookup('template', …)` file, searched as the lookup searches it; a missing one is
    /// left to the run (the lookup may sit behind a condition).
    fn reference(&mut self, r: &Reference, _at: &Pos, dirs: &[PathBuf]) {
        let p = Path::new(&r.name);
        let found = if p.is_absolute() {
            p.is_file().then(|| p.to_path_buf())
        } else {
            dirs.iter()
                .flat_map(|d| [d.join("templates").join(p), d.join(p)])
                .find(|c| c.is_file())
        };
        if let Some(f) = found {
            self.template_file(&f, dirs);
        }
    }

    /// `include_tasks: "{{ ansible_os_family }}.yml"`: every file the name can stand for
    /// (each `{{ … }}` read as `*`) in the first search directory that has any, loaded and
    /// checked as if a host included it.
    pub(super) fn include_candidates(
        &mut self,
        file: &str,
        search: &[PathBuf],
        inherit: &Inherited,
        at: &Pos,
        play: &Play,
    ) {
        let mut found: Vec<PathBuf> = Vec::new();
        for dir in search {
            found = candidates(dir, file);
            if !found.is_empty() {
                break;
            }
        }
        found.sort();
        // A conditional include of a missing file is left to run time (`playbook::includes`).
        if found.is_empty() && !fixpoint_modules::params::is_template(file) {
            self.warnings.push(Diagnostic::at(
                at,
                format!(
                    "task file `{file}` not found; looked in {} (an error only if a host \
                     reaches this conditional include)",
                    search
                        .iter()
                        .map(|d| d.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
            return;
        }
        // Whatever these files hold is found here but only warned about (module comment).
        let first_new = self.out.len();
        let first_pending = self.pending.len();
        for path in found {
            let canon = std::fs::canonicalize(&path).unwrap_or(path.clone());
            if self.playbooks.contains(&canon)
                || is_playbook(&path)
                || !self.files_seen.insert(canon)
            {
                continue;
            }
            let roles_path = self.roles_path.clone();
            let mut loader = Loader::new(&play.dir, &roles_path);
            let loaded = loader.task_file(&path, at, inherit);
            let handlers = std::mem::take(&mut loader.role_handlers);
            match loaded {
                Ok(steps) => {
                    let saved = self.dirs.clone();
                    self.steps(&steps, play);
                    for h in &handlers {
                        self.task(h, play);
                    }
                    self.dirs = saved;
                }
                Err(d) => self.out.push(d),
            }
        }
        for p in &mut self.pending[first_pending..] {
            p.2.get_or_insert_with(|| at.clone());
        }
        let found_here: Vec<Diagnostic> = self.out.drain(first_new..).collect();
        self.warnings.extend(found_here.into_iter().map(|mut d| {
            d.msg = format!(
                "{} (in a file the include at {at} loads at run time: an error only if a host includes it)",
                d.msg
            );
            d
        }));
    }
}

/// The files in `dir` a templated file name can stand for, each `{{ … }}` read as `*`; none
/// when the name is all template (`"{{ x }}"` could be any file).
fn candidates(dir: &Path, name: &str) -> Vec<PathBuf> {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    let re = RE.get_or_init(|| regex::Regex::new(r"\{\{.*?\}\}").expect("valid regex"));
    let pattern = re.replace_all(name, "*").to_string();
    if pattern.contains("{%") || !pattern.chars().any(|c| c.is_alphanumeric()) {
        return Vec::new();
    }
    let full = dir.join(&pattern);
    let Some(full) = full.to_str() else {
        return Vec::new();
    };
    let escaped: Vec<String> = full.split('*').map(glob::Pattern::escape).collect();
    let mut out: Vec<PathBuf> = match glob::glob(&escaped.join("*")) {
        Ok(paths) => paths.flatten().filter(|p| p.is_file()).collect(),
        Err(_) => Vec::new(),
    };
    out.sort();
    out
}

/// Whether a YAML file is a playbook (a list of plays), which a wildcard beside the playbooks
/// may match but no include means.
fn is_playbook(path: &Path) -> bool {
    let Ok(node) = crate::yaml::load_file(path) else {
        return false;
    };
    match &node.kind {
        crate::yaml::Kind::Seq(items) => items
            .iter()
            .any(|i| i.get("hosts").is_some() || i.get("import_playbook").is_some()),
        _ => false,
    }
}

/// The sources a `src: "{{ item }}"` (or `"{{ item.src }}"`) names, read from a loop written
/// out in the playbook (`loop: [a.j2, b.j2]`, `loop: [{src: a.j2, dest: …}]`).
fn loop_sources(t: &Task, src: &str) -> Vec<String> {
    let Some(code) = crate::template::Templar::single_expression_code(src) else {
        return Vec::new();
    };
    let code = code.trim();
    let field = match code.strip_prefix(t.loop_var.as_str()) {
        Some("") => None,
        Some(rest) => match rest.strip_prefix('.') {
            Some(f) if f.chars().all(|c| c.is_alphanumeric() || c == '_') => Some(f),
            _ => return Vec::new(),
        },
        None => return Vec::new(),
    };
    let Some(Value::Array(items)) = &t.loop_items else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|i| match field {
            None => i.as_str(),
            Some(f) => i.get(f).and_then(Value::as_str),
        })
        .filter(|s| !crate::template::Templar::is_template(s))
        .map(str::to_string)
        .collect()
}
