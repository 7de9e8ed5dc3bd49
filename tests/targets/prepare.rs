//! Lays out one target for one tool: the target role and the roles its `meta/main.yml` depends
//! on, copied from ansible-core's `test/integration/targets/` into a scratch `roles/` directory,
//! with the generated playbook and inventory beside them.
//!
//! Two support targets are replaced, for both tools alike, by stand-ins written here:
//! `setup_remote_tmp_dir` (it makes the directory with the `tempfile` module and removes it from
//! a handler that is an `include_tasks`, which fixpoint refuses in handlers; the stand-in makes
//! the directory ansible-test's `remote_tmp_dir` names with `file`)
//! and `setup_nobody` (it makes sure of the `nobody` user with the `user` module; the stand-in
//! checks the user exists). Both support targets also run on their own as rows of the table, so
//! what fixpoint lacks there is measured, not hidden.

use std::fs;
use std::path::{Path, PathBuf};

use yaml_rust2::{Yaml, YamlLoader};

use crate::guard;

/// Support targets replaced by a stand-in, with the stand-in's `tasks/main.yml`.
pub const STAND_INS: &[(&str, &str)] = &[
    (
        "setup_remote_tmp_dir",
        "- name: create temporary directory\n  file:\n    path: \"{{ remote_tmp_dir }}\"\n    \
         state: directory\n",
    ),
    (
        "setup_nobody",
        "- name: the nobody user exists\n  command: id nobody\n  changed_when: false\n",
    ),
];

/// The stand-ins for a script target's playbooks: `setup_remote_tmp_dir` first gathers the
/// distribution facts when there are none, as the real one does (the playbooks of script targets
/// mostly gather no facts, and their roles read `ansible_facts.system`). Role targets keep
/// `STAND_INS`, with which their rows were measured.
pub const SCRIPT_STAND_INS: &[(&str, &str)] = &[
    (
        "setup_remote_tmp_dir",
        "- name: make sure we have the ansible_os_family and ansible_distribution_version facts\n  \
         setup:\n    gather_subset: distribution\n  when: ansible_facts == {}\n\n\
         - name: create temporary directory\n  file:\n    path: \"{{ remote_tmp_dir }}\"\n    \
         state: directory\n",
    ),
    STAND_INS[1],
];

/// What the runner did to fixpoint's copy of a target.
#[derive(Debug, Default)]
pub struct Prepared {
    /// The roles copied, the target first.
    pub roles: Vec<String>,
    /// Unguarded commands given `unless: "false"`.
    pub guards: usize,
    /// Commands the rewrite could not guard (fixpoint refuses them).
    pub unguardable: Vec<String>,
}

impl Prepared {
    /// Guards the unguarded commands of one copied task file or playbook under `roles`.
    pub fn guard_file(&mut self, file: &Path, roles: &Path) -> Result<(), String> {
        let text = fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let (out, n, problems) = guard::guard_commands(&text);
        if n > 0 {
            fs::write(file, out).map_err(|e| format!("{}: {e}", file.display()))?;
        }
        self.guards += n;
        let rel = file
            .strip_prefix(roles)
            .unwrap_or(file)
            .display()
            .to_string();
        self.unguardable
            .extend(problems.into_iter().map(|p| format!("{rel} {p}")));
        Ok(())
    }

    /// Guards every YAML file under a script target's directory that is a list (a playbook
    /// or a task file its playbooks include by path, `grandchild/block_include_tasks.yml`);
    /// maps (variables, inventories) are data and left alone.
    pub fn guard_lists_under(&mut self, dir: &Path, roles: &Path) -> Result<(), String> {
        for f in yaml_files(dir) {
            let text = fs::read_to_string(&f).unwrap_or_default();
            let is_list = YamlLoader::load_from_str(&text)
                .is_ok_and(|docs| docs.first().is_some_and(|d| matches!(d, Yaml::Array(_))));
            if is_list {
                self.guard_file(&f, roles)?;
            }
        }
        Ok(())
    }
}

/// How to run the target: the same playbook for both tools.
pub struct Layout<'a> {
    pub target: &'a str,
    pub gather_facts: bool,
    /// ansible-test's `output_dir`: a directory on the controller.
    pub output_dir: &'a Path,
    /// What `setup_remote_tmp_dir` would give: a directory on the host.
    pub remote_tmp_dir: &'a Path,
}

/// The playbook ansible-test generates for a role target (`hosts: testhost`, `output_dir`, the
/// role), with `become: true`: the hosts log in as an unprivileged user.
pub fn playbook(l: &Layout) -> String {
    format!(
        "- hosts: testhost\n  gather_facts: {}\n  become: true\n  vars:\n    output_dir: {}\n    \
         remote_tmp_dir: {}\n  roles:\n    - {}\n",
        l.gather_facts,
        l.output_dir.display(),
        l.remote_tmp_dir.display(),
        l.target
    )
}

/// Copies `target`, the targets in `needs` and their dependencies from `targets` into `roles`,
/// support targets replaced by their `stand_ins`; for fixpoint (`guard_commands`), with the
/// unguarded commands of their task files guarded.
pub fn copy_roles(
    targets: &Path,
    target: &str,
    needs: &[String],
    stand_ins: &[(&str, &str)],
    roles: &Path,
    guard_commands: bool,
) -> Result<Prepared, String> {
    let mut prepared = Prepared::default();
    let mut todo = needs.to_vec();
    todo.push(target.to_string());
    while let Some(name) = todo.pop() {
        if prepared.roles.contains(&name) {
            continue;
        }
        let dest = roles.join(&name);
        if let Some((_, tasks)) = stand_ins.iter().find(|(n, _)| *n == name) {
            fs::create_dir_all(dest.join("tasks")).map_err(|e| format!("{name}: {e}"))?;
            fs::write(dest.join("tasks/main.yml"), tasks).map_err(|e| format!("{name}: {e}"))?;
            prepared.roles.push(name);
            continue;
        }
        let src = targets.join(&name);
        if !src.is_dir() {
            return Err(format!(
                "{}: no such target (needed by {target})",
                src.display()
            ));
        }
        copy_tree(&src, &dest).map_err(|e| format!("copying {}: {e}", src.display()))?;
        if guard_commands {
            for file in task_files(&dest) {
                prepared.guard_file(&file, roles)?;
            }
        }
        todo.extend(dependencies(&dest.join("meta/main.yml")));
        prepared.roles.push(name);
    }
    Ok(prepared)
}

/// The role names a `meta/main.yml` depends on (`- name` or `- role: name`).
fn dependencies(meta: &Path) -> Vec<String> {
    let Ok(text) = fs::read_to_string(meta) else {
        return Vec::new();
    };
    let Ok(docs) = YamlLoader::load_from_str(&text) else {
        return Vec::new();
    };
    let Some(deps) = docs.first().and_then(|d| d["dependencies"].as_vec()) else {
        return Vec::new();
    };
    deps.iter()
        .filter_map(|d| match d {
            Yaml::String(s) => Some(s.clone()),
            Yaml::Hash(_) => d["role"].as_str().or(d["name"].as_str()).map(String::from),
            _ => None,
        })
        .collect()
}

/// The YAML files of a role that hold tasks: those under a `tasks/` directory (its own, or a
/// nested role's) or a `tests/` one (task files a target imports by path).
fn task_files(role: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = yaml_files(role)
        .into_iter()
        .filter(|f| {
            f.strip_prefix(role).is_ok_and(|rel| {
                rel.components()
                    .any(|c| c.as_os_str() == "tasks" || c.as_os_str() == "tests")
            })
        })
        .collect();
    out.sort();
    out
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(yaml_files(&p));
        } else if p.extension().is_some_and(|x| x == "yml" || x == "yaml") {
            out.push(p);
        }
    }
    out
}

/// Copies a directory tree; symlinks are copied as links (targets use a few).
fn copy_tree(src: &Path, dest: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dest)?;
    for e in fs::read_dir(src)? {
        let e = e?;
        let (from, to) = (e.path(), dest.join(e.file_name()));
        let ty = e.file_type()?;
        if ty.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&from)?, &to)?;
        } else if ty.is_dir() {
            copy_tree(&from, &to)?;
        } else {
            fs::copy(&from, &to)?;
        }
    }
    Ok(())
}
