//! `group_vars/` and `host_vars/` directories: which files belong to a group or host, in which
//! order they merge, and reading each one (YAML or JSON, through the project's YAML loader).

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::model::{
    merge, vars_dir_key, Inventory, InventoryError, Vars, VarsLayer, LOCALHOST_NAMES,
};
use super::yaml::{error_at, parse_yaml};
use crate::yaml::Kind;

impl Inventory {
    /// Read `dir/group_vars/` and `dir/host_vars/` beside an inventory source for the
    /// inventory's groups and hosts (`<name>`, `<name>.yml`, `<name>.yaml`, `<name>.json`, or
    /// a `<name>/` directory of such files merged in name order). Directories loaded later win
    /// over earlier ones; loading a directory again replaces its earlier contents in place
    /// instead of adding a second copy.
    pub fn load_vars_dir(&mut self, dir: &Path) -> Result<(), InventoryError> {
        self.load_vars_layer(dir, false)
    }

    /// The same beside a playbook: these win over every inventory source's, even when the
    /// directory is also an inventory source's (ansible-core reads it then at both levels).
    pub fn load_playbook_vars_dir(&mut self, dir: &Path) -> Result<(), InventoryError> {
        self.load_vars_layer(dir, true)
    }

    fn load_vars_layer(&mut self, dir: &Path, playbook: bool) -> Result<(), InventoryError> {
        // A playbook in the current directory may come with an empty parent path.
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let key = vars_dir_key(dir);
        let mut layer = VarsLayer {
            dir: key.clone(),
            playbook,
            ..VarsLayer::default()
        };
        let gdir = dir.join("group_vars");
        if gdir.is_dir() {
            for g in self.groups.keys() {
                if let Some(v) = read_entity_vars(&gdir, g)? {
                    layer.groups.insert(g.clone(), v);
                }
            }
        }
        let hdir = dir.join("host_vars");
        if hdir.is_dir() {
            // The implicit localhost reads host_vars/localhost too, as in Ansible.
            let implicit = LOCALHOST_NAMES.iter().map(|s| s.to_string());
            for h in self.hosts.iter().cloned().chain(implicit) {
                if let Some(v) = read_entity_vars(&hdir, &h)? {
                    layer.hosts.insert(h, v);
                }
            }
        }
        match self
            .layers
            .iter_mut()
            .find(|l| l.dir == key && l.playbook == playbook)
        {
            Some(existing) => *existing = layer,
            // An inventory source's layer goes below the playbooks' ones.
            None if !playbook => {
                let at = self
                    .layers
                    .iter()
                    .position(|l| l.playbook)
                    .unwrap_or(self.layers.len());
                self.layers.insert(at, layer);
            }
            None => self.layers.push(layer),
        }
        Ok(())
    }
}

impl Inventory {
    /// Read the `group_vars/` and `host_vars/` files of groups and hosts that appeared during
    /// the run (`add_host`, `group_by`) from every vars directory already loaded, as Ansible's
    /// vars plugin reads them for any group or host it is asked about.
    pub(super) fn load_vars_of(
        &mut self,
        groups: &[String],
        hosts: &[String],
    ) -> Result<(), InventoryError> {
        for layer in &mut self.layers {
            let gdir = layer.dir.join("group_vars");
            for g in groups {
                if !layer.groups.contains_key(g) && gdir.is_dir() {
                    if let Some(v) = read_entity_vars(&gdir, g)? {
                        layer.groups.insert(g.clone(), v);
                    }
                }
            }
            let hdir = layer.dir.join("host_vars");
            for h in hosts {
                if !layer.hosts.contains_key(h) && hdir.is_dir() {
                    if let Some(v) = read_entity_vars(&hdir, h)? {
                        layer.hosts.insert(h.clone(), v);
                    }
                }
            }
        }
        Ok(())
    }
}

/// The variables for one group or host in a `group_vars/` or `host_vars/` directory, looked up
/// like Ansible: `<name>` (file or directory), then `<name>.yml`, `.yaml`, `.json`.
fn read_entity_vars(base: &Path, name: &str) -> Result<Option<Vars>, InventoryError> {
    // Names come from the inventory; never let one walk out of the vars directory.
    if name.is_empty() || name.contains('/') || name.contains('\\') || name == "." || name == ".." {
        return Ok(None);
    }
    for suffix in ["", ".yml", ".yaml", ".json"] {
        let p = base.join(format!("{name}{suffix}"));
        if p.is_dir() {
            if !suffix.is_empty() {
                continue;
            }
            let mut files = Vec::new();
            collect_vars_files(&p, &mut files)?;
            let mut out = Vars::new();
            for f in files {
                merge(&mut out, &read_vars_file(&f)?);
            }
            return Ok(Some(out));
        }
        if p.is_file() {
            return read_vars_file(&p).map(Some);
        }
    }
    Ok(None)
}

/// Vars files of a `group_vars/<name>/` directory, recursively, in name order.
fn collect_vars_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), InventoryError> {
    let read_err = |e: std::io::Error| {
        InventoryError::new(dir, None, None, format!("cannot read vars directory: {e}"))
    };
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(read_err)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(read_err)?;
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.starts_with('.') || name.ends_with('~') {
            continue;
        }
        let ext = p.extension().and_then(|e| e.to_str());
        if p.is_dir() {
            if ext.is_none() {
                collect_vars_files(&p, out)?;
            }
        } else if matches!(ext, None | Some("yml" | "yaml" | "json")) {
            out.push(p);
        }
    }
    Ok(())
}

fn read_vars_file(path: &Path) -> Result<Vars, InventoryError> {
    // A vault-encrypted vars file is decrypted with the run's secrets, as Ansible does.
    let bytes = crate::vault::read_file(path).map_err(|e| match e {
        crate::vault::ReadError::Io(e) => {
            InventoryError::new(path, None, None, format!("cannot read vars file: {e}"))
        }
        crate::vault::ReadError::Vault(e) => InventoryError::new(path, None, None, e),
    })?;
    let text = String::from_utf8(bytes).map_err(|_| {
        InventoryError::new(path, None, None, "cannot read vars file: not UTF-8 text")
    })?;
    let doc = parse_yaml(path, &text)?;
    match (&doc.kind, doc.to_json()) {
        (Kind::Null, _) => Ok(Vars::new()),
        (_, Value::Object(m)) => Ok(m),
        _ => Err(error_at(
            &doc.pos,
            format!(
                "a vars file must be a mapping of variable names to values, found {}",
                doc.type_name()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::testutil::{precedence_fixture, write};

    #[test]
    fn playbook_dir_vars_beat_inventory_dir_and_reload_does_not_duplicate() {
        let dir = tempfile::tempdir().unwrap();
        let mut inv = Inventory::load(&precedence_fixture(dir.path())).unwrap();
        write(
            dir.path(),
            "inv/group_vars/all.yml",
            "a: inv\nonly_inv: 1\n",
        );
        write(dir.path(), "inv/host_vars/w1", "h: inv\n");
        write(dir.path(), "play/group_vars/all.yaml", "a: play\n");
        write(dir.path(), "play/host_vars/w1.json", "{\"h\": \"play\"}");
        write(dir.path(), "play/group_vars/ghost.yml", ": not even yaml [");
        write(dir.path(), "play/host_vars/ghost.yml", ": not even yaml [");
        inv.load_vars_dir(&dir.path().join("inv")).unwrap();
        inv.load_playbook_vars_dir(&dir.path().join("play"))
            .unwrap();
        let v = inv.host_vars("w1");
        assert_eq!(v["a"], Value::from("play"));
        assert_eq!(v["h"], Value::from("play"));
        assert_eq!(v["only_inv"], Value::from(1));
        // Loading the inventory dir again keeps its place below the playbook dir.
        inv.load_vars_dir(&dir.path().join("inv/../inv")).unwrap();
        assert_eq!(inv.layers.len(), 2);
        assert_eq!(inv.host_vars("w1")["a"], Value::from("play"));
    }

    #[test]
    fn only_the_current_plays_playbook_dir_applies() {
        let dir = tempfile::tempdir().unwrap();
        let mut inv = Inventory::load(&precedence_fixture(dir.path())).unwrap();
        write(dir.path(), "play/group_vars/all.yml", "a: top\nt: 1\n");
        write(dir.path(), "play/sub/group_vars/all.yml", "a: sub\n");
        inv.load_playbook_vars_dir(&dir.path().join("play"))
            .unwrap();
        inv.load_playbook_vars_dir(&dir.path().join("play/sub"))
            .unwrap();
        let sub = dir.path().join("play/sub");
        assert!(inv.play_dir_changes(&sub));
        inv.set_play_dir(&sub);
        assert!(!inv.play_dir_changes(&sub));
        let v = inv.host_vars("w1");
        assert_eq!(v["a"], Value::from("sub"));
        assert!(!v.contains_key("t"));
        assert!(inv.play_dir_changes(&dir.path().join("play")));
        inv.set_play_dir(&dir.path().join("play"));
        assert_eq!(inv.host_vars("w1")["a"], Value::from("top"));
        // A play whose directory has no vars directory reads no playbook's.
        assert!(inv.play_dir_changes(dir.path()));
    }

    #[test]
    fn group_vars_directory_form_merges_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "hosts", "[web]\nw1\n");
        write(dir.path(), "group_vars/web/10-base.yml", "a: 1\nb: 1\n");
        write(dir.path(), "group_vars/web/20-override.yaml", "b: 2\n");
        write(dir.path(), "group_vars/web/nested/30.json", "{\"c\": 3}");
        write(dir.path(), "group_vars/web/notes.txt", "d: 4\n");
        write(dir.path(), "group_vars/web/.hidden.yml", "e: 5\n");
        write(dir.path(), "group_vars/all", "f: 6\n");
        let v = Inventory::load(&p).unwrap().shown_vars("w1");
        assert_eq!(
            serde_json::Value::Object(v),
            serde_json::json!({"a": 1, "b": 2, "c": 3, "f": 6})
        );
    }

    #[test]
    fn bad_vars_files_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "hosts", "[web]\nw1\n");
        let bad = write(dir.path(), "group_vars/web.yml", "a: 1\nb: [\n");
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!(e.file, bad);
        assert!(e.line.is_some());
        write(dir.path(), "group_vars/web.yml", "- a\n");
        assert!(Inventory::load(&p)
            .unwrap_err()
            .msg
            .contains("mapping of variable names"));
    }

    #[test]
    fn vars_file_errors_have_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "hosts", "[web]\nw1\n");
        let bad = write(dir.path(), "group_vars/web.yml", "a: 1\n!unsafe b: x\n");
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!(e.file, bad);
        assert_eq!(e.line, Some(2), "{e:?}");
        assert!(e.col.is_some(), "{e:?}");
        assert!(e.msg.contains("`!unsafe`"), "{}", e.msg);
        write(dir.path(), "group_vars/web.yml", "# vars\n- a\n");
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!((e.line, e.col), (Some(2), Some(1)), "{e:?}");
    }

    #[test]
    fn vars_files_type_scalars_like_pyyaml() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "hosts", "[web]\nw1\n");
        let pairs = [
            ("enabled", "no"),
            ("on_v", "yes"),
            ("mode", "0644"),
            ("hex", "0x1F"),
            ("under", "1_000"),
            ("tilde", "~"),
            ("null_v", "Null"),
            ("quoted_no", "\"no\""),
            ("e_num", "12e4567"),
            ("oct", "0o17"),
        ];
        let body = |suffix: &str| -> String {
            pairs
                .iter()
                .map(|(k, v)| format!("{k}{suffix}: {v}\n"))
                .collect()
        };
        write(dir.path(), "group_vars/web.yml", &body(""));
        // The directory form of host_vars goes through the same reader.
        write(dir.path(), "host_vars/w1/main.yml", &body("_h"));
        let v = Inventory::load(&p).unwrap().host_vars("w1");
        for suffix in ["", "_h"] {
            let k = |name: &str| format!("{name}{suffix}");
            assert_eq!(v[&k("enabled")], Value::Bool(false), "{suffix}");
            assert_eq!(v[&k("on_v")], Value::Bool(true));
            assert_eq!(v[&k("mode")], Value::from(420));
            assert_eq!(v[&k("hex")], Value::from(31));
            assert_eq!(v[&k("under")], Value::from(1000));
            assert_eq!(v[&k("tilde")], Value::Null);
            assert_eq!(v[&k("null_v")], Value::Null);
            assert_eq!(v[&k("quoted_no")], Value::from("no"));
            assert_eq!(v[&k("e_num")], Value::from("12e4567"));
            assert_eq!(v[&k("oct")], Value::from("0o17"));
        }
    }
}
