//! Loading the inventory sources: files (INI or YAML, told apart by extension or content),
//! directories of them and host lists, then the `group_vars/` and `host_vars/` beside them.

use std::fs;
use std::path::{Component, Path, PathBuf};

use super::host_list::as_host_list;
use super::ini::Pending;
use super::model::{HostSource, Inventory, InventoryError};
use super::yaml::{looks_like_yaml_inventory, parse_yaml};

impl Inventory {
    /// Load an inventory file (INI or YAML) or a directory of them, then the `group_vars/` and
    /// `host_vars/` beside it.
    pub fn load(path: &Path) -> Result<Inventory, InventoryError> {
        Inventory::load_sources(&[path.to_path_buf()])
    }

    /// Load the `-i` sources into one inventory, in order, as ansible-core does: each an
    /// inventory file, a directory of them, or a host list (`host_list.rs`: `web1,web2:2222,`);
    /// then the `group_vars/` and `host_vars/` beside each file or directory, in the same order
    /// (later ones win), once every source's hosts and groups are known. Without any source,
    /// the implicit `localhost` on the local transport.
    pub fn load_sources(sources: &[PathBuf]) -> Result<Inventory, InventoryError> {
        let Some(first) = sources.first() else {
            return Ok(Inventory::implicit_localhost());
        };
        let mut inv = Inventory::empty(first);
        // One set of pending `[g:vars]`/`[p:children]` references for all the sources, as for
        // the files of a directory: a group may be defined in any of them.
        let mut pending = Pending::new();
        let mut vars_dirs = Vec::new();
        for path in sources {
            if let Some(list) = as_host_list(path) {
                inv.current_source = Some(HostSource::List(list.to_string()));
                inv.add_host_list(path, list)?;
                inv.current_source = None;
                continue;
            }
            let meta = fs::metadata(path).map_err(|e| {
                let listed = path.display().to_string();
                InventoryError::new(
                    path,
                    None,
                    None,
                    format!("cannot read inventory `{listed}`: {e}"),
                )
                .help(format!(
                    "pass an existing inventory file or directory with -i, or a host list with \
                     a comma after each host (`-i {listed},` for the one host `{listed}`)"
                ))
            })?;
            if meta.is_dir() {
                inv.load_dir(path, &mut pending)?;
                vars_dirs.push(path.to_path_buf());
            } else {
                inv.load_file(path, &mut pending)?;
                vars_dirs.push(match path.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                    _ => PathBuf::from("."),
                });
            }
        }
        inv.check_and_finalize(pending)?;
        for dir in vars_dirs {
            inv.load_vars_dir(&dir)?;
        }
        Ok(inv)
    }

    /// `meta: refresh_inventory`: the sources read again, as ansible-core re-reads them during
    /// a play. The vars directories are not read again: ansible-core's `host_group_vars`
    /// plugin keeps what it read (a `group_vars/` file written since is not seen), so this
    /// inventory's layers, and the play it is in, carry over.
    pub fn reloaded(&self, sources: &[PathBuf]) -> Result<Inventory, InventoryError> {
        let mut fresh = Inventory::load_sources(sources)?;
        fresh.layers = self.layers.clone();
        fresh.play_dir = self.play_dir.clone();
        Ok(fresh)
    }

    /// One inventory file's text read as INI (`yaml` false) or YAML, checked and finalised as
    /// `load` does, without reading the disk (no `group_vars/`): what the fuzz targets call.
    pub fn parse_text(path: &Path, text: &str, yaml: bool) -> Result<Inventory, InventoryError> {
        let mut inv = Inventory::empty(path);
        let mut pending = Pending::new();
        if yaml {
            let doc = parse_yaml(path, text)?;
            inv.parse_yaml_inventory(&doc)?;
        } else {
            inv.parse_ini(path, text, &mut pending)?;
        }
        inv.check_and_finalize(pending)?;
        Ok(inv)
    }

    /// Refuses `[g:vars]` sections and `[p:children]` entries of groups no source defined,
    /// then finalises the groups.
    fn check_and_finalize(&mut self, pending: Pending) -> Result<(), InventoryError> {
        for r in pending {
            if self.groups.get(&r.group).is_some_and(|g| g.declared) {
                continue;
            }
            let group = &r.group;
            let (msg, help) = match &r.child_of {
                None => (
                    format!("section `[{group}:vars]` sets variables for group `{group}`, which is never defined"),
                    format!("add a `[{group}]` section (it may be empty) or fix the group name"),
                ),
                Some(parent) => (
                    format!("`[{parent}:children]` names group `{group}`, which is never defined"),
                    match crate::diag::suggest(group, self.declared_groups()) {
                        Some(near) => format!("did you mean `{near}`? Else add a `[{group}]` section (it may be empty)"),
                        None => format!("add a `[{group}]` section (it may be empty), or fix the group name"),
                    },
                ),
            };
            return Err(InventoryError::new(&r.loc.file, r.loc.line, r.loc.col, msg).help(help));
        }
        self.finalize()
    }

    /// Every inventory file of a directory (recursively, in name order), as Ansible does.
    fn load_dir(&mut self, dir: &Path, pending: &mut Pending) -> Result<(), InventoryError> {
        let read_err = |e: std::io::Error| {
            InventoryError::new(
                dir,
                None,
                None,
                format!("cannot read inventory directory: {e}"),
            )
        };
        let mut entries: Vec<PathBuf> = fs::read_dir(dir)
            .map_err(read_err)?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(read_err)?;
        entries.sort();
        for p in entries {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if p.is_dir() {
                // group_vars/host_vars hold variables, not inventory sources.
                if name.starts_with('.') || name == "group_vars" || name == "host_vars" {
                    continue;
                }
                self.load_dir(&p, pending)?;
            } else if !is_ignored_inventory_file(name) {
                self.load_file(&p, pending)?;
            }
        }
        Ok(())
    }

    fn load_file(&mut self, path: &Path, pending: &mut Pending) -> Result<(), InventoryError> {
        // A vault-encrypted inventory file is decrypted with the run's secrets, as Ansible does.
        let bytes = crate::vault::read_file(path).map_err(|e| match e {
            crate::vault::ReadError::Io(e) => {
                InventoryError::new(path, None, None, format!("cannot read inventory file: {e}"))
            }
            crate::vault::ReadError::Vault(e) => InventoryError::new(path, None, None, e),
        })?;
        let text = String::from_utf8(bytes).map_err(|_| {
            InventoryError::new(
                path,
                None,
                None,
                "cannot read inventory file: not UTF-8 text",
            )
        })?;
        // The hosts first named here have this file as `inventory_file`: absolute, `..`
        // resolved, symlinks kept, as ansible-core's `unfrackpath(follow=False)` gives it.
        self.current_source = Some(HostSource::File(lexical_absolute(path)));
        let parsed = self.parse_file_text(path, &text, pending);
        self.current_source = None;
        parsed
    }

    /// An inventory file's text, read as what it is.
    fn parse_file_text(
        &mut self,
        path: &Path,
        text: &str,
        pending: &mut Pending,
    ) -> Result<(), InventoryError> {
        if text.starts_with("#!") && is_executable(path) {
            return Err(InventoryError::new(
                path,
                Some(1),
                None,
                "dynamic inventory scripts are not supported; save the script's `--list` output \
                 as a static inventory, or remove the executable bit if this is an INI file",
            ));
        }
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or_default()
            .to_ascii_lowercase();
        if matches!(ext.as_str(), "yml" | "yaml" | "json") {
            let doc = parse_yaml(path, text)?;
            return self.parse_yaml_inventory(&doc);
        }
        // Without a telling extension, content decides: YAML only when it is shaped like a
        // YAML inventory, since many INI files are also (meaningless) valid YAML.
        if let Ok(doc) = parse_yaml(path, text) {
            if looks_like_yaml_inventory(&doc) {
                return self.parse_yaml_inventory(&doc);
            }
        }
        self.parse_ini(path, text, pending)
    }
}

/// `path` made absolute against the current directory with `.` and `..` resolved by name
/// (a symlink stays as named), as Python's `os.path.abspath`.
fn lexical_absolute(path: &Path) -> PathBuf {
    let joined = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Files in an inventory directory that Ansible skips (besides hidden ones).
fn is_ignored_inventory_file(name: &str) -> bool {
    const SKIP: [&str; 7] = [".md", ".retry", ".orig", ".cfg", ".pyc", ".pyo", "~"];
    name.starts_with('.') || SKIP.iter().any(|s| name.ends_with(s))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(_path: &Path) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::testutil::{strs, write};
    use serde_json::Value;

    #[test]
    fn yaml_groups_merge_across_places_and_files() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "inv/a.yml",
            "all:\n  children:\n    web:\n      hosts:\n        w1:\n      vars: {x: 1}\n",
        );
        write(
            dir.path(),
            "inv/b.yaml",
            "site:\n  children:\n    web:\n      hosts:\n        w2:\n      vars: {y: 2}\n",
        );
        write(dir.path(), "inv/c", "[web]\nw3\n[db]\nd1\n");
        write(dir.path(), "inv/README.md", "# not an inventory [\n");
        write(dir.path(), "inv/old.retry", "w9\n");
        write(dir.path(), "inv/.hidden", "w8\n");
        write(dir.path(), "inv/group_vars/web.yml", "z: 3\n");
        let inv = Inventory::load(&dir.path().join("inv")).unwrap();
        let g = inv.groups_map();
        assert_eq!(g["web"], strs(&["w1", "w2", "w3"]));
        assert_eq!(g["site"], strs(&["w1", "w2", "w3"]));
        assert_eq!(g["all"], strs(&["w1", "w2", "w3", "d1"]));
        let v = inv.host_vars("w3");
        assert_eq!(
            (v["x"].clone(), v["y"].clone(), v["z"].clone()),
            (1.into(), 2.into(), 3.into())
        );
    }

    #[test]
    fn addresses_ports_and_string_shorthands() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "hosts",
            "[v6]\n[2001:db8::1]:2201\nfe80::2\n[v4]\n192.0.2.7:2222 a=1\n",
        );
        let inv = Inventory::load(&p).unwrap();
        assert_eq!(inv.groups_map()["v6"], strs(&["2001:db8::1", "fe80::2"]));
        assert_eq!(
            inv.host_vars("2001:db8::1")["ansible_port"],
            Value::from(2201)
        );
        assert!(inv.host_vars("fe80::2").get("ansible_port").is_none());
        assert_eq!(
            inv.host_vars("192.0.2.7")["ansible_port"],
            Value::from(2222)
        );
        assert_eq!(inv.select("fe80::2").unwrap(), strs(&["fe80::2"]));
        assert!(Inventory::load(&write(dir.path(), "bad", "h:99999\n"))
            .unwrap_err()
            .msg
            .contains("invalid port"));

        // YAML allows a single name instead of a mapping for hosts and children.
        let p = write(
            dir.path(),
            "s.yml",
            "all:\n  children:\n    web:\n      hosts: w1\n    site:\n      children: web\n",
        );
        let inv = Inventory::load(&p).unwrap();
        assert_eq!(inv.groups_map()["site"], strs(&["w1"]));

        // Making `all` a child closes a cycle through the implicit `all` → group link.
        let p = write(dir.path(), "loop", "[web]\nw1\n[web:children]\nall\n");
        let e = Inventory::load(&p).unwrap_err();
        assert!(e.msg.contains("cycle"), "{}", e.msg);
        assert_eq!(e.line, Some(4));

        let e = Inventory::load(&dir.path().join("missing")).unwrap_err();
        assert!(
            e.help
                .as_deref()
                .unwrap_or_default()
                .contains("pass an existing inventory"),
            "{e:?}"
        );
    }
}
