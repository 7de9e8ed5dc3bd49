//! `apt_repository`: one-line `deb`/`deb-src` sources in sources.list and sources.list.d/*.list,
//! added, re-enabled or removed as Ansible's module does, without python-apt.
//!
//! Probe reads every one-line sources file apt reads (the files apt-config names, so a task's
//! `APT_CONFIG` is honoured as python-apt honours it), parsed line by line the way Ansible
//! parses them. Plan applies the change to that parsed copy and compares the normalised texts
//! before and after: a repository already present anywhere (even commented out, which it then
//! re-enables) is no new line. Apply writes each file whose text changes atomically, removes
//! files left without lines, then refreshes apt's cache; a failed refresh puts the files back.

use crate::apt::exec::{apt_config, base_env};
use crate::fs::{atomic_write_path, Attrs};
use crate::params::{is_template, Bool, ModeSpec};
use crate::{ContentDiff, Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub struct AptRepository;

/// The source types a one-line entry may start with.
const TYPES: &[&str] = &["deb", "deb-src"];

/// Parameters of `apt_repository`, as Ansible spells them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub repo: String,
    #[serde(default = "present")]
    pub state: String,
    #[serde(default)]
    pub mode: Option<ModeSpec>,
    #[serde(default = "yes", alias = "update-cache")]
    pub update_cache: Bool,
    #[serde(default = "five", deserialize_with = "crate::apt::params::de_int")]
    pub update_cache_retries: i64,
    #[serde(default = "twelve", deserialize_with = "crate::apt::params::de_int")]
    pub update_cache_retry_max_delay: i64,
    #[serde(default, deserialize_with = "crate::params::de_opt_string")]
    pub filename: Option<String>,
    /// Accepted and ignored: fixpoint needs no python-apt on the host.
    #[serde(default)]
    pub install_python_apt: Option<Bool>,
    /// Accepted: Ansible uses it only to reach Launchpad for `ppa:` lines, refused here.
    #[serde(default)]
    pub validate_certs: Option<Bool>,
    /// Accepted: Ansible uses it only to expand `ppa:` lines, refused here.
    #[serde(default)]
    pub codename: Option<String>,
    /// Environment from the play/task `environment`, passed by the controller.
    #[serde(default, rename = "_env")]
    pub env: Option<Map<String, Value>>,
}

fn present() -> String {
    "present".into()
}
fn yes() -> Bool {
    Bool(true)
}
fn five() -> i64 {
    5
}
fn twelve() -> i64 {
    12
}

/// One line of a sources file, as Ansible's `_parse` sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub valid: bool,
    pub enabled: bool,
    pub source: String,
    pub comment: String,
}

/// One sources file as read: its path, the parsed lines, and its text on disk.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub path: PathBuf,
    pub lines: Vec<Line>,
    /// None when the file does not exist (a new one).
    pub raw: Option<String>,
}

pub struct Probed {
    env: Vec<(String, String)>,
    parts_dir: PathBuf,
    files: Vec<SourceFile>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Write {
        path: PathBuf,
        text: String,
        /// The file got a new line: the `mode` parameter applies to it (as in Ansible).
        mode: Option<ModeSpec>,
    },
    Remove(PathBuf),
    UpdateCache,
}

/// Ansible's `_parse`: a leading `#` disables, a later `#` starts a comment, and only lines
/// starting with `deb`/`deb-src` are sources (whitespace normalised to single spaces).
pub fn parse(text: &str) -> Line {
    let mut line = text.trim();
    let mut enabled = true;
    if let Some(rest) = line.strip_prefix('#') {
        enabled = false;
        line = rest;
    }
    let mut comment = String::new();
    if let Some(i) = line.find('#').filter(|i| *i > 0) {
        comment = line[i + 1..].trim().to_string();
        line = &line[..i];
    }
    let mut source = line.trim().to_string();
    let mut valid = false;
    let chunks: Vec<&str> = source.split_whitespace().collect();
    if chunks.first().is_some_and(|c| TYPES.contains(c)) {
        valid = true;
        source = chunks.join(" ");
    }
    Line {
        valid,
        enabled,
        source,
        comment,
    }
}

/// The text Ansible writes for parsed lines.
pub fn dump(lines: &[Line]) -> String {
    let mut out = String::new();
    for l in lines {
        if !l.enabled {
            out.push_str("# ");
        }
        out.push_str(&l.source);
        if !l.comment.is_empty() {
            out.push_str(" # ");
            out.push_str(&l.comment);
        }
        out.push('\n');
    }
    out
}

/// The file name Ansible derives from a source line: options and the URI scheme dropped, user
/// and password too, and what remains of the URI with every run of other characters than
/// ASCII letters and digits turned into one `_`.
pub fn suggest_filename(source: &str, filename: Option<&str>) -> Result<String, ModuleError> {
    if let Some(f) = filename {
        return Ok(format!("{f}.list"));
    }
    let options = regex::Regex::new(r"\[[^\]]+\]").expect("static regex");
    let scheme = regex::Regex::new(r"\w+://").expect("static regex");
    let line = options.replace_all(source, "");
    let line = scheme.replace_all(&line, "");
    let first = line
        .split_whitespace()
        .find(|p| !TYPES.contains(p))
        .ok_or_else(|| ModuleError::failed(format!("Invalid repository string: {source}")))?;
    let first = first.split_once('@').map(|(_, h)| h).unwrap_or(first);
    let cleaned: String = first
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { ' ' })
        .collect();
    Ok(format!(
        "{}.list",
        cleaned.split_whitespace().collect::<Vec<_>>().join("_")
    ))
}

fn read_file(path: &Path) -> Result<SourceFile, ModuleError> {
    let raw = std::fs::read(path).map_err(|e| ModuleError::io(path, e))?;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let lines = raw.split_inclusive('\n').map(parse).collect();
    Ok(SourceFile {
        path: path.to_path_buf(),
        lines,
        raw: Some(raw),
    })
}

/// Where apt reads one-line sources from: the main list, then `*.list` in the parts directory.
fn load(env: &[(String, String)]) -> Result<(PathBuf, Vec<SourceFile>), ModuleError> {
    let main =
        apt_config("Dir::Etc::sourcelist/f", env).unwrap_or_else(|| "/etc/apt/sources.list".into());
    let parts = apt_config("Dir::Etc::sourceparts/d", env)
        .unwrap_or_else(|| "/etc/apt/sources.list.d".into());
    let mut files = Vec::new();
    if Path::new(&main).is_file() {
        files.push(read_file(Path::new(&main))?);
    }
    let mut names: Vec<PathBuf> = match std::fs::read_dir(&parts) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.extension().is_some_and(|x| x == "list")
                    && !p
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
            })
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(ModuleError::io(&parts, e)),
    };
    names.sort();
    for p in names {
        files.push(read_file(&p)?);
    }
    Ok((PathBuf::from(parts), files))
}

/// The normalised text of every file that still has lines (Ansible's `dump`).
fn dumps(files: &[SourceFile]) -> BTreeMap<PathBuf, String> {
    files
        .iter()
        .filter(|f| !f.lines.is_empty())
        .map(|f| (f.path.clone(), dump(&f.lines)))
        .collect()
}

/// The source a `repo` line stands for; an invalid or commented-out line is refused.
fn wanted_source(repo: &str) -> Result<String, ModuleError> {
    let l = parse(repo);
    if !l.valid || !l.enabled {
        let shown = repo.trim().trim_start_matches('#');
        let shown = match shown.find('#').filter(|i| *i > 0) {
            Some(i) => &shown[..i],
            None => shown,
        };
        return Err(ModuleError::failed(format!(
            "Invalid repository string: {shown}"
        )));
    }
    Ok(l.source)
}

/// The files after the change, and the files that got a new line.
fn change(
    p: &Params,
    parts_dir: &Path,
    before: &[SourceFile],
) -> Result<(Vec<SourceFile>, Vec<PathBuf>), ModuleError> {
    let source = wanted_source(&p.repo)?;
    let mut files = before.to_vec();
    let mut added_to = Vec::new();
    if p.state == "present" {
        let mut found = false;
        for f in files.iter_mut() {
            for l in f.lines.iter_mut().filter(|l| l.valid && l.source == source) {
                l.enabled = true;
                found = true;
            }
        }
        if !found {
            let name = suggest_filename(&source, p.filename.as_deref())?;
            let path = parts_dir.join(name);
            let i = match files.iter().position(|f| f.path == path) {
                Some(i) => i,
                None => {
                    files.push(SourceFile {
                        path: path.clone(),
                        lines: Vec::new(),
                        raw: None,
                    });
                    files.len() - 1
                }
            };
            files[i].lines.push(Line {
                valid: true,
                enabled: true,
                source,
                comment: String::new(),
            });
            added_to.push(path);
        }
    } else {
        for f in files.iter_mut() {
            f.lines
                .retain(|l| !(l.valid && l.enabled && l.source == source));
        }
    }
    Ok((files, added_to))
}

impl Module for AptRepository {
    type Params = Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        let err = |m: String| Err(ModuleError::Params(m));
        if !is_template(&p.state) && !["absent", "present"].contains(&p.state.as_str()) {
            return err(format!(
                "value of state must be one of: absent, present, got: {}",
                p.state
            ));
        }
        let repo = p.repo.trim();
        if repo.is_empty() {
            return err("Please set argument 'repo' to a non-empty value".into());
        }
        if repo.starts_with("ppa:") {
            return err(format!(
                "`repo: {repo}`: PPAs need Launchpad over the network (the line and its signing \
                 key), which fixpoint's apt_repository does not fetch; give the `deb` line and a \
                 key file instead (deb822_repository with signed_by)"
            ));
        }
        if !is_template(&p.repo) {
            wanted_source(&p.repo).map_err(|e| ModuleError::Params(e.to_string()))?;
        }
        if let Some(f) = &p.filename {
            if f.contains('/') && !is_template(f) {
                return err(format!(
                    "`filename: {f}`: give a file name for sources.list.d (without `.list`), not a path"
                ));
            }
        }
        crate::command::env_pairs(&p.env)?;
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Probed, ModuleError> {
        let mut env = crate::command::env_pairs(&p.env)?;
        env.extend(base_env());
        let (parts_dir, files) = load(&env)?;
        Ok(Probed {
            env,
            parts_dir,
            files,
        })
    }

    fn plan(p: &Params, st: &Probed, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let (after_files, added_to) = change(p, &st.parts_dir, &st.files)?;
        let before = dumps(&st.files);
        let after = dumps(&after_files);
        let changed = before != after;
        let mut plan = Plan::new();
        let added: Vec<&PathBuf> = after.keys().filter(|k| !before.contains_key(*k)).collect();
        let removed: Vec<&PathBuf> = before.keys().filter(|k| !after.contains_key(*k)).collect();
        let mut ansible_diff = Vec::new();
        if changed {
            for f in &after_files {
                let old = before.get(&f.path);
                match after.get(&f.path) {
                    // Ansible saves every file it loaded; only the ones whose text differs
                    // from the disk are written here (the others would be rewritten unchanged).
                    Some(text) if f.raw.as_ref() != Some(text) => {
                        plan.actions.push(Action::Write {
                            path: f.path.clone(),
                            text: text.clone(),
                            mode: p.mode.clone().filter(|_| added_to.contains(&f.path)),
                        });
                    }
                    Some(_) => {}
                    None if f.raw.is_some() => plan.actions.push(Action::Remove(f.path.clone())),
                    None => {}
                }
                let new = after.get(&f.path);
                if old != new {
                    plan.diff.content.push(ContentDiff {
                        path: f.path.display().to_string(),
                        before: old.cloned().unwrap_or_default(),
                        after: new.cloned().unwrap_or_default(),
                    });
                }
            }
            if ctx.diff {
                for path in added.iter().chain(removed.iter()) {
                    let header = path.display().to_string();
                    ansible_diff.push(json!({
                        "before": before.get(*path).cloned().unwrap_or_default(),
                        "after": after.get(*path).cloned().unwrap_or_default(),
                        "before_header": if before.contains_key(*path) { header.clone() } else { "/dev/null".into() },
                        "after_header": if after.contains_key(*path) { header.clone() } else { "/dev/null".into() },
                    }));
                }
            }
            if p.update_cache.0 {
                plan.actions.push(Action::UpdateCache);
            }
        }
        let r = &mut plan.result;
        r.insert("changed".into(), json!(changed));
        r.insert("repo".into(), json!(p.repo));
        r.insert("state".into(), json!(p.state));
        let names = |v: &[&PathBuf]| {
            json!(v
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>())
        };
        r.insert("sources_added".into(), names(&added));
        r.insert("sources_removed".into(), names(&removed));
        r.insert("diff".into(), json!(ansible_diff));
        Ok(plan)
    }

    fn apply(
        p: &Params,
        st: Probed,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        let mut done = Vec::new();
        let result = write_all(plan, &st, &mut done);
        let result = result.and_then(|_| {
            if plan.actions.contains(&Action::UpdateCache) {
                crate::apt::refresh_cache(
                    p.update_cache_retries,
                    p.update_cache_retry_max_delay,
                    60,
                    &st.env,
                )
            } else {
                Ok(())
            }
        });
        if let Err(e) = result {
            // As Ansible does: sources that break the cache refresh are taken back.
            revert(&done);
            return Err(e);
        }
        Ok(Map::new())
    }
}

/// Write and remove the planned files, remembering each one's old text (for `revert`).
fn write_all(
    plan: &Plan<Action>,
    st: &Probed,
    done: &mut Vec<(PathBuf, Option<String>)>,
) -> Result<(), ModuleError> {
    let old = |path: &PathBuf| {
        st.files
            .iter()
            .find(|f| &f.path == path)
            .and_then(|f| f.raw.clone())
    };
    for a in &plan.actions {
        match a {
            Action::Write { path, text, mode } => {
                // A symlinked sources file is written where it points, as Ansible does.
                let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
                if let Some(dir) = target.parent() {
                    std::fs::create_dir_all(dir).map_err(|e| ModuleError::io(dir, e))?;
                }
                atomic_write_path(&target, text.as_bytes(), &Attrs::default(), None)?;
                done.push((target.clone(), old(path)));
                if let Some(m) = mode {
                    set_mode(&target, m)?;
                }
            }
            Action::Remove(path) => {
                std::fs::remove_file(path).map_err(|e| ModuleError::io(path, e))?;
                done.push((path.clone(), old(path)));
            }
            Action::UpdateCache => {}
        }
    }
    Ok(())
}

fn set_mode(path: &Path, m: &ModeSpec) -> Result<(), ModuleError> {
    let meta = std::fs::metadata(path).map_err(|e| ModuleError::io(path, e))?;
    let cur = meta.permissions().mode() & 0o7777;
    let want = m
        .resolve(cur, false)
        .map_err(ModuleError::Params)?
        .unwrap_or(cur);
    if want != cur {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(want))
            .map_err(|e| ModuleError::io(path, e))?;
    }
    Ok(())
}

/// Put back the files `write_all` changed: their old text, or no file where there was none.
fn revert(done: &[(PathBuf, Option<String>)]) {
    for (path, old) in done {
        match old {
            Some(raw) => {
                let _ = atomic_write_path(path, raw.as_bytes(), &Attrs::default(), None);
            }
            None => {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_follow_ansible() {
        let s = |l: &str| suggest_filename(l, None).unwrap();
        assert_eq!(
            s("deb http://deb.debian.org/debian bookworm main"),
            "deb_debian_org_debian.list"
        );
        assert_eq!(
            s("deb [arch=amd64 signed-by=/k.gpg] https://user:pw@example.org:8080/a-b/c bookworm main"),
            "example_org_8080_a_b_c.list"
        );
        assert_eq!(s("deb [trusted=yes] file:/tmp/r ./"), "file_tmp_r.list");
        assert_eq!(s("deb-src http://x.org/ stable main"), "x_org.list");
        assert_eq!(
            suggest_filename("deb http://x/ a", Some("mine")).unwrap(),
            "mine.list"
        );
    }

    #[test]
    fn lines_parse_and_dump_as_ansible() {
        let l = parse("#deb   http://x/  a main   # the x repo\n");
        assert!(l.valid && !l.enabled);
        assert_eq!(l.source, "deb http://x/ a main");
        assert_eq!(l.comment, "the x repo");
        assert_eq!(dump(&[l]), "# deb http://x/ a main # the x repo\n");
        let c = parse("# just a comment");
        assert!(!c.valid);
        assert_eq!(dump(&[c, parse("\n")]), "# just a comment\n\n");
    }

    fn files(texts: &[(&str, &str)]) -> Vec<SourceFile> {
        texts
            .iter()
            .map(|(p, t)| SourceFile {
                path: PathBuf::from(p),
                lines: t.split_inclusive('\n').map(parse).collect(),
                raw: Some(t.to_string()),
            })
            .collect()
    }

    fn params(v: Value) -> Params {
        crate::parse_params(&v).unwrap()
    }

    #[test]
    fn present_reenables_a_commented_line_and_absent_removes_empty_files() {
        let before = files(&[
            ("/s/sources.list", "# deb http://x/ a main\n"),
            ("/s/d/y.list", "deb http://y/ b main\n"),
        ]);
        let p = params(json!({"repo": "deb http://x/  a main"}));
        let (after, added) = change(&p, Path::new("/s/d"), &before).unwrap();
        assert!(added.is_empty());
        assert_eq!(dump(&after[0].lines), "deb http://x/ a main\n");
        let p = params(json!({"repo": "deb http://y/ b main", "state": "absent"}));
        let (after, _) = change(&p, Path::new("/s/d"), &before).unwrap();
        assert!(!dumps(&after).contains_key(Path::new("/s/d/y.list")));
        let p = params(json!({"repo": "deb http://z/ c main"}));
        let (after, added) = change(&p, Path::new("/s/d"), &before).unwrap();
        assert_eq!(added, vec![PathBuf::from("/s/d/z.list")]);
        assert_eq!(after[2].raw, None);
    }

    fn check(v: Value) -> Result<(), crate::ParamError> {
        crate::registry::check_params("apt_repository", &v)
    }

    #[test]
    fn load_time_checks() {
        assert!(check(json!({"repo": "deb http://x/ a main"})).is_ok());
        assert!(check(json!({"repo": "ppa:a/b"}))
            .unwrap_err()
            .to_string()
            .contains("Launchpad"));
        assert!(check(json!({"repo": "http://x/ a"}))
            .unwrap_err()
            .to_string()
            .contains("Invalid repository string"));
        assert!(check(json!({"repo": "deb http://x/ a", "state": "gone"})).is_err());
        assert!(check(json!({"repo": "deb http://x/ a", "filename": "a/b"})).is_err());
        assert!(check(
            json!({"repo": "deb http://x/ a", "mode": "0644", "codename": "x",
            "install_python_apt": false, "validate_certs": true, "update-cache": "no"})
        )
        .is_ok());
    }
}
