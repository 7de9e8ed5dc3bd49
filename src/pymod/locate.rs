//! Where a module fixpoint does not implement natively is found: the Ansible installed on the
//! controller (ansible-core's `ansible/modules`, and the `ansible_collections` trees of
//! `ANSIBLE_COLLECTIONS_PATH`, of `collections/` beside the playbook and of the installation's
//! own site-packages), and whether it can run as plain module code on the host.
//!
//! The installation is found once per process: `FIXPOINT_ANSIBLE_PYTHON` names a Python that can
//! `import ansible`; without it, the Python of `ansible-playbook` on PATH (its `#!` line); else
//! `python3` on PATH. Nothing of Ansible's is evaluated here: we only read files (the
//! playbook's Jinja plugins run in that Python, `bridge`).

use super::PyModule;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The Ansible installation this process uses.
#[derive(Debug, Default)]
pub struct Install {
    /// The `ansible` package directory of ansible-core (`.../site-packages/ansible`).
    pub core: Option<PathBuf>,
    /// How `core` was found (said by `fixpoint validate -v` and in "not found" errors).
    pub found_by: String,
    /// The Python that imports it.
    pub python: Option<PathBuf>,
    /// Directories that hold an `ansible_collections/` tree, in search order (without the
    /// playbook's own `collections/`, which depends on the playbook).
    pub collection_roots: Vec<PathBuf>,
}

static INSTALL: OnceLock<Install> = OnceLock::new();

/// The Ansible installation on the controller (looked up on first use).
pub fn install() -> &'static Install {
    INSTALL.get_or_init(find_install)
}

/// Ask `python` where its `ansible` package lives.
fn core_of(python: &Path) -> Option<PathBuf> {
    let out = std::process::Command::new(python)
        .args([
            "-c",
            "import os, ansible; print(os.path.dirname(ansible.__file__))",
        ])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    p.join("modules").is_dir().then_some(p)
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// The interpreter of a `#!` script (`#!/usr/bin/env python3` → `python3` on PATH).
fn shebang_python(script: &Path) -> Option<PathBuf> {
    let text = std::fs::read(script).ok()?;
    let first = text.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(first).ok()?.strip_prefix("#!")?.trim();
    let mut words = line.split_whitespace();
    let prog = words.next()?;
    if prog.ends_with("/env") {
        return on_path(words.next()?);
    }
    Some(PathBuf::from(prog))
}

/// The Python a template sees as `ansible_playbook_python`: the first this process would try for
/// its Ansible installation (`FIXPOINT_ANSIBLE_PYTHON`, the Python of `ansible-playbook`, or
/// `python3` on PATH), found by reading files only; none: no Python on the controller.
pub fn playbook_python() -> Option<&'static Path> {
    static PYTHON: OnceLock<Option<PathBuf>> = OnceLock::new();
    PYTHON
        .get_or_init(|| candidates().into_iter().next().map(|(py, _)| py))
        .as_deref()
}

/// The Pythons that may hold the Ansible installation, in the order they are tried, each with
/// how it was found.
fn candidates() -> Vec<(PathBuf, String)> {
    match std::env::var_os("FIXPOINT_ANSIBLE_PYTHON") {
        Some(p) => vec![(PathBuf::from(&p), "FIXPOINT_ANSIBLE_PYTHON".to_string())],
        None => {
            let mut c = Vec::new();
            if let Some(ap) = on_path("ansible-playbook") {
                if let Some(py) = shebang_python(&ap) {
                    c.push((py, format!("the Python of {}", ap.display())));
                }
            }
            if let Some(py) = on_path("python3") {
                c.push((py, "python3 on PATH".to_string()));
            }
            c
        }
    }
}

fn find_install() -> Install {
    let mut inst = Install::default();
    for (py, how) in candidates() {
        if let Some(core) = core_of(&py) {
            inst.found_by = format!("{how} ({})", py.display());
            inst.core = Some(core);
            inst.python = Some(py);
            break;
        }
    }

    // ANSIBLE_COLLECTIONS_PATH (ANSIBLE_COLLECTIONS_PATHS is its older spelling), else
    // Ansible's default of the user's and the system's collection directories.
    let var = std::env::var("ANSIBLE_COLLECTIONS_PATH")
        .or_else(|_| std::env::var("ANSIBLE_COLLECTIONS_PATHS"))
        .unwrap_or_else(|_| "~/.ansible/collections:/usr/share/ansible/collections".into());
    for entry in var.split(':').filter(|e| !e.is_empty()) {
        let p = match entry.strip_prefix("~/") {
            Some(rest) => match std::env::var_os("HOME") {
                Some(h) => PathBuf::from(h).join(rest),
                None => continue,
            },
            None => PathBuf::from(entry),
        };
        // A path may name the `ansible_collections` directory itself.
        let root = if p.file_name().is_some_and(|n| n == "ansible_collections") {
            p.parent().map(Path::to_path_buf).unwrap_or(p)
        } else {
            p
        };
        inst.collection_roots.push(root);
    }
    // The `ansible` package from PyPI installs its collections beside ansible-core.
    if let Some(site) = inst.core.as_ref().and_then(|c| c.parent()) {
        inst.collection_roots.push(site.to_path_buf());
    }
    inst
}

/// Where a lookup searched, for the error that says a module was found nowhere.
pub fn searched(play_dir: &Path) -> String {
    let inst = install();
    let mut parts = Vec::new();
    match &inst.core {
        Some(c) => parts.push(format!("{}/modules", c.display())),
        None => parts.push(
            "no ansible-core found (set FIXPOINT_ANSIBLE_PYTHON to a Python that can `import \
             ansible`, or put ansible-playbook on PATH)"
                .to_string(),
        ),
    }
    for r in roots(play_dir) {
        parts.push(format!("{}/ansible_collections", r.display()));
    }
    parts.join(", ")
}

/// The `meta/runtime.yml` of collection `ns.coll` (ansible-core's own
/// `config/ansible_builtin_runtime.yml` for `ansible.builtin`), found where modules are.
pub fn runtime_yml(collection: &str, play_dir: &Path) -> Option<PathBuf> {
    if collection == "ansible.builtin" {
        let p = install()
            .core
            .as_ref()?
            .join("config/ansible_builtin_runtime.yml");
        return p.is_file().then_some(p);
    }
    let (ns, coll) = collection.split_once('.')?;
    roots(play_dir)
        .into_iter()
        .map(|r| {
            r.join("ansible_collections")
                .join(ns)
                .join(coll)
                .join("meta/runtime.yml")
        })
        .find(|p| p.is_file())
}

/// The directories holding `ansible_collections/`: the playbook's `collections/`, then the
/// installation's.
pub fn roots(play_dir: &Path) -> Vec<PathBuf> {
    let mut r = vec![play_dir.join("collections")];
    r.extend(install().collection_roots.iter().cloned());
    r
}

/// Why a module that exists cannot run as module code on the host.
#[derive(Debug)]
pub enum Refusal {
    NotFound,
    Refused(String),
}

/// `meta/runtime.yml` (or ansible-core's `ansible_builtin_runtime.yml`): where a module name
/// redirects to, or the message of its tombstone.
fn routing(runtime_yml: &Path, name: &str) -> Option<Result<String, String>> {
    let text = std::fs::read_to_string(runtime_yml).ok()?;
    let node = crate::yaml::parse_str(&text, runtime_yml).ok()?;
    let v = node.to_json();
    let routes = v.get("plugin_routing")?;
    // A name may be routed as an action only (ansible-core 2.19's `yum` → `dnf`).
    let entry = routes
        .get("modules")
        .and_then(|m| m.get(name))
        .or_else(|| routes.get("action").and_then(|m| m.get(name)))?;
    if let Some(r) = entry.get("redirect").and_then(|r| r.as_str()) {
        return Some(Ok(r.to_string()));
    }
    if let Some(t) = entry.get("tombstone") {
        let why = t
            .get("warning_text")
            .and_then(|w| w.as_str())
            .unwrap_or("it was removed");
        return Some(Err(format!(
            "module `{name}` was removed from Ansible: {why}"
        )));
    }
    None
}

/// Find module `name` (short, `ansible.builtin.x`, `ansible.legacy.x` or a collection FQCN).
pub fn find(name: &str, play_dir: &Path) -> Result<Arc<PyModule>, Refusal> {
    find_depth(name, play_dir, 0)
}

fn find_depth(name: &str, play_dir: &Path, depth: u8) -> Result<Arc<PyModule>, Refusal> {
    if depth > 5 {
        return Err(Refusal::Refused(format!(
            "module `{name}`: too many redirects"
        )));
    }
    let short = name
        .strip_prefix("ansible.builtin.")
        .or_else(|| name.strip_prefix("ansible.legacy."));
    let parts: Vec<&str> = name.split('.').collect();
    if let Some(short) = short.or_else(|| (parts.len() == 1).then_some(name)) {
        let Some(core) = &install().core else {
            return Err(Refusal::NotFound);
        };
        let path = core.join("modules").join(format!("{short}.py"));
        if path.is_file() {
            let action = core.join("plugins/action").join(format!("{short}.py"));
            return checked(
                PyModule {
                    name: name.to_string(),
                    fqn: format!("ansible.modules.{short}"),
                    path,
                    collection: None,
                    module_utils: Vec::new(),
                },
                action.is_file(),
            );
        }
        return match routing(&core.join("config/ansible_builtin_runtime.yml"), short) {
            Some(Ok(to)) => find_depth(&to, play_dir, depth + 1).map(|m| renamed(m, name)),
            Some(Err(why)) => Err(Refusal::Refused(why)),
            None => Err(Refusal::NotFound),
        };
    }
    if parts.len() < 3 || parts.iter().any(|p| !is_identifier(p)) {
        return Err(Refusal::NotFound);
    }
    let (ns, coll, rest) = (parts[0], parts[1], &parts[2..]);
    for root in roots(play_dir) {
        let cdir = root.join("ansible_collections").join(ns).join(coll);
        if !cdir.is_dir() {
            continue;
        }
        let rel = rest.join("/");
        let path = cdir.join("plugins/modules").join(format!("{rel}.py"));
        if path.is_file() {
            let action = cdir.join("plugins/action").join(format!("{rel}.py"));
            return checked(
                PyModule {
                    name: name.to_string(),
                    fqn: format!(
                        "ansible_collections.{ns}.{coll}.plugins.modules.{}",
                        rest.join(".")
                    ),
                    path,
                    collection: Some(root.clone()),
                    module_utils: Vec::new(),
                },
                action.is_file(),
            );
        }
        if let Some(r) = routing(&cdir.join("meta/runtime.yml"), &rest.join(".")) {
            return match r {
                Ok(to) => find_depth(&to, play_dir, depth + 1).map(|m| renamed(m, name)),
                Err(why) => Err(Refusal::Refused(why)),
            };
        }
        // The first collection of that name found is the one Ansible uses.
        return Err(Refusal::NotFound);
    }
    Err(Refusal::NotFound)
}

fn renamed(m: Arc<PyModule>, name: &str) -> Arc<PyModule> {
    let mut m = (*m).clone();
    m.name = name.to_string();
    Arc::new(m)
}

fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// ansible-core modules whose action plugin only prepares the module run, so that running the
/// module itself on the host is what Ansible does, under conditions `doc::check_action` and
/// the engine check: `service` (the plugin picks a backend module; `service` itself drives
/// systemd and the others), `uri` without `src` and `unarchive` with `remote_src: true` (the
/// plugin only uploads a controller file), `package` (the plugin runs the module named by the
/// host's package manager, which the engine picks the same way), `dnf` (the plugin picks dnf or
/// dnf5 from facts; the `dnf` module itself runs, and says so on a host without dnf's Python).
pub const HOST_ONLY_ACTIONS: &[&str] = &["service", "uri", "unarchive", "package", "dnf"];

/// Refuse what is not a new-style Python module, or what Ansible runs through an action plugin
/// on the controller.
pub(super) fn checked(m: PyModule, has_action_plugin: bool) -> Result<Arc<PyModule>, Refusal> {
    let core_short = m.fqn.strip_prefix("ansible.modules.");
    if has_action_plugin && core_short.is_some_and(|s| HOST_ONLY_ACTIONS.contains(&s)) {
        return Ok(Arc::new(m));
    }
    if has_action_plugin {
        return Err(Refusal::Refused(format!(
            "module `{}` runs through an action plugin on the controller in Ansible ({}), which \
             fixpoint does not implement; only modules that run wholly on the host can run as \
             Ansible module code",
            m.name,
            m.path.display()
        )));
    }
    let src = std::fs::read(&m.path)
        .map_err(|e| Refusal::Refused(format!("module `{}`: {}: {e}", m.name, m.path.display())))?;
    let text = String::from_utf8_lossy(&src);
    let new_style = text.contains("AnsibleModule")
        && (text.contains("ansible.module_utils.") || text.contains("module_utils"));
    if text.contains("WANT_JSON") || !new_style {
        return Err(Refusal::Refused(format!(
            "module `{}` ({}) is not an AnsibleModule-based Python module (old-style or \
             WANT_JSON modules are not supported)",
            m.name,
            m.path.display()
        )));
    }
    Ok(Arc::new(m))
}

/// A module name written in a task that has no Python file (`.ps1`, binary) is refused by
/// `find` as not found; this says so when such a file exists beside where it was looked for.
pub fn non_python_hint(name: &str) -> Option<String> {
    let core = install().core.as_ref()?;
    let short = name.rsplit('.').next()?;
    for ext in ["ps1", "psm1"] {
        if core
            .join("modules")
            .join(format!("{short}.{ext}"))
            .is_file()
        {
            return Some(format!(
                "`{name}` is a PowerShell module: fixpoint runs only Python modules"
            ));
        }
    }
    None
}
