//! YAML inventories (`group: {hosts, vars, children}` mappings), and the YAML reading that
//! `vars_dirs` shares.
//!
//! Everything goes through the project's one YAML loader (`crate::yaml`), so inventories and
//! vars files type scalars as Ansible's PyYAML does (`enabled: no` is false, `0644` is 420)
//! and every error points at the `file:line:col` of the node it is about.

use std::path::Path;

use serde_json::Value;

use super::host_entry::expand_host_pattern;
use super::model::{Inventory, InventoryError, Loc, Vars};
use crate::diag::{Diagnostic, Pos};
use crate::yaml::{Kind, Node};

impl Inventory {
    pub(super) fn parse_yaml_inventory(&mut self, doc: &Node) -> Result<(), InventoryError> {
        match &doc.kind {
            Kind::Null => Ok(()),
            Kind::Map(m) => {
                for (name, at, data) in m {
                    self.parse_yaml_group(name, at, data)?;
                }
                Ok(())
            }
            _ => Err(error_at(
                &doc.pos,
                format!(
                    "expected a mapping of group names at the top level (like `all:`), found {}",
                    doc.type_name()
                ),
            )
            .help("start the file with `all:` and put hosts and groups under it")),
        }
    }

    /// One group entry; `at` is where its name is written.
    fn parse_yaml_group(
        &mut self,
        group: &str,
        at: &Pos,
        data: &Node,
    ) -> Result<(), InventoryError> {
        self.declare_group(group);
        let m = match &data.kind {
            Kind::Null => return Ok(()),
            Kind::Map(m) => m,
            _ => {
                return Err(error_at(
                    at,
                    format!(
                        "group `{group}` must be a mapping with `hosts`, `vars` or `children`, found {}",
                        data.type_name()
                    ),
                )
                .help(format!("indent `hosts:`, `vars:` or `children:` under `{group}:`")))
            }
        };
        for (key, kpos, val) in m {
            if !matches!(key.as_str(), "hosts" | "vars" | "children") {
                let fix = match crate::diag::suggest(key, ["hosts", "vars", "children"]) {
                    Some(near) => format!("did you mean `{near}`?"),
                    None => "a group may only have `hosts`, `vars` and `children`; a host goes under `hosts:`".into(),
                };
                return Err(
                    error_at(kpos, format!("unexpected key `{key}` in group `{group}`")).help(fix),
                );
            }
            match (key.as_str(), &val.kind) {
                (_, Kind::Null) => {}
                ("hosts", Kind::Str(h)) => self.add_yaml_host(group, h, &val.pos, None)?,
                ("hosts", Kind::Map(hosts)) => {
                    for (hk, hpos, hv) in hosts {
                        self.add_yaml_host(group, hk, hpos, Some(hv))?;
                    }
                }
                ("vars", Kind::Map(vars)) => {
                    for (vk, _, vv) in vars {
                        self.set_group_var(group, vk, vv.to_json());
                    }
                }
                ("children", Kind::Str(c)) => {
                    // A single child name: the group exists, with nothing of its own here.
                    let empty = Node {
                        kind: Kind::Null,
                        pos: val.pos.clone(),
                    };
                    self.parse_yaml_group(c, &val.pos, &empty)?;
                    self.link(group, c, Some(loc(&val.pos)));
                }
                ("children", Kind::Map(children)) => {
                    for (child, cpos, cv) in children {
                        self.parse_yaml_group(child, cpos, cv)?;
                        self.link(group, child, Some(loc(cpos)));
                    }
                }
                (_, _) => {
                    let hint = if key == "vars" {
                        "write `name: value` lines under `vars:`".to_string()
                    } else {
                        format!("write the names as keys under `{key}:` (`web1:`), not as a list")
                    };
                    return Err(error_at(
                        kpos,
                        format!(
                            "`{key}` of group `{group}` must be a mapping; found {}",
                            val.type_name()
                        ),
                    )
                    .help(hint));
                }
            }
        }
        Ok(())
    }

    /// One `hosts:` entry (a name or range, maybe with `:port`) written at `at`, with its
    /// variables (`None` for the single-name shorthand `hosts: web1`).
    fn add_yaml_host(
        &mut self,
        group: &str,
        entry: &str,
        at: &Pos,
        vars: Option<&Node>,
    ) -> Result<(), InventoryError> {
        let (names, port) = expand_host_pattern(entry).map_err(|m| {
            error_at(at, m).help("a host is a name, `host:port` or a range like `web[01:20]`")
        })?;
        let vars = match vars {
            None => Vars::new(),
            Some(v) => match (&v.kind, v.to_json()) {
                (Kind::Null, _) => Vars::new(),
                (_, Value::Object(m)) => m,
                _ => {
                    return Err(error_at(
                        at,
                        format!(
                            "variables of host `{entry}` must be a mapping (or empty), found {}",
                            v.type_name()
                        ),
                    )
                    .help(format!("indent `name: value` lines under `{entry}:`")))
                }
            },
        };
        for name in names {
            self.add_host_to_group(group, &name);
            if let Some(p) = port {
                self.set_host_var(&name, "ansible_port", Value::from(p));
            }
            for (k, v) in &vars {
                self.set_host_var(&name, k, v.clone());
            }
        }
        Ok(())
    }
}

/// Parse an inventory or vars file's text with the project's YAML loader.
pub(super) fn parse_yaml(path: &Path, text: &str) -> Result<Node, InventoryError> {
    crate::yaml::parse_str(text, path).map_err(|d| from_diagnostic(path, d))
}

/// The loader's diagnostic as an inventory error, its hint kept.
fn from_diagnostic(path: &Path, d: Diagnostic) -> InventoryError {
    let e = match d.pos {
        Some(p) if p.line > 0 => error_at(&p, d.msg),
        _ => InventoryError::new(path, None, None, d.msg),
    };
    InventoryError { help: d.help, ..e }
}

/// An error at a node's position.
pub(super) fn error_at(pos: &Pos, msg: impl Into<String>) -> InventoryError {
    InventoryError::new(&pos.file, Some(pos.line), Some(pos.col), msg)
}

fn loc(pos: &Pos) -> Loc {
    Loc {
        file: pos.file.to_path_buf(),
        line: Some(pos.line),
        col: Some(pos.col),
    }
}

/// Whether a file without a telling extension is a YAML inventory: a mapping of groups, at
/// least one of them a mapping itself (many INI files are also, meaninglessly, valid YAML).
pub(super) fn looks_like_yaml_inventory(doc: &Node) -> bool {
    let Some(m) = doc.as_map() else { return false };
    m.iter()
        .all(|(_, _, v)| matches!(v.kind, Kind::Map(_) | Kind::Null))
        && m.iter().any(|(_, _, v)| matches!(v.kind, Kind::Map(_)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::testutil::{write, INI, YAML};

    #[test]
    fn yaml_and_ini_inventories_are_equivalent() {
        let dir = tempfile::tempdir().unwrap();
        let ini = Inventory::load(&write(dir.path(), "ini/hosts", INI)).unwrap();
        let yml = Inventory::load(&write(dir.path(), "yml/hosts.yml", YAML)).unwrap();
        // Detected by content, without the extension.
        let sniffed = Inventory::load(&write(dir.path(), "sniff/hosts", YAML)).unwrap();
        assert_eq!(ini.groups_map(), yml.groups_map());
        assert_eq!(ini.groups_map(), sniffed.groups_map());
        for h in &ini.groups_map()["all"] {
            assert_eq!(ini.shown_vars(h), yml.shown_vars(h), "vars of {h}");
            assert_eq!(ini.group_names(h), yml.group_names(h), "groups of {h}");
        }
    }

    #[test]
    fn yaml_errors_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "hosts.yml", "all:\n  hosts:\n    a: [1\n");
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!(e.file, p);
        assert!(e.line.is_some() && e.col.is_some(), "{e:?}");
        assert!(e.msg.starts_with("invalid YAML"), "{}", e.msg);

        let p = write(
            dir.path(),
            "h2.yml",
            "all:\n  children:\n    web:\n      host:\n        w1:\n",
        );
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!(e.line, Some(4));
        assert_eq!(
            e.col,
            Some(7),
            "the key itself, from the loader's positions"
        );
        assert!(
            e.msg.contains("unexpected key `host` in group `web`"),
            "{}",
            e.msg
        );
        assert_eq!(e.help.as_deref(), Some("did you mean `hosts`?"));

        let p = write(dir.path(), "h3.yml", "all:\n  hosts:\n    - w1\n");
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!(e.line, Some(2));
        assert_eq!(e.col, Some(3));
        assert!(e.help.unwrap().contains("not as a list"));

        let p = write(dir.path(), "h4.yml", "- all\n");
        assert!(Inventory::load(&p).unwrap_err().msg.contains("top level"));
    }

    #[test]
    fn yaml_errors_point_at_the_node_not_the_first_line_with_its_name() {
        let dir = tempfile::tempdir().unwrap();
        // `web` appears as a key twice; the bad one is the second.
        let p = write(
            dir.path(),
            "h.yml",
            "all:\n  children:\n    site:\n      children:\n        web:\n    web:\n      hosts:\n        w[1:x]:\n",
        );
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!((e.line, e.col), (Some(8), Some(9)), "{e:?}");
        assert!(e.msg.contains("host range"), "{}", e.msg);

        let p = write(
            dir.path(),
            "v.yml",
            "all:\n  hosts:\n    w1:\n    w2: [a]\n",
        );
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!((e.line, e.col), (Some(4), Some(5)), "{e:?}");
        assert!(e.msg.contains("variables of host `w2`"), "{}", e.msg);
    }

    #[test]
    fn yaml_inventory_scalars_are_typed_like_pyyaml() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "hosts.yml",
            "all:\n  hosts:\n    h1:\n      enabled: no\n      on_v: yes\n      mode: 0644\n      \
             hex: 0x1F\n      under: 1_000\n      tilde: ~\n      null_v: Null\n      \
             quoted_no: \"no\"\n      e_num: 12e4567\n      oct: 0o17\n  vars:\n    g_enabled: no\n",
        );
        let v = Inventory::load(&p).unwrap().host_vars("h1");
        assert_eq!(v["enabled"], Value::Bool(false));
        assert_eq!(v["on_v"], Value::Bool(true));
        assert_eq!(v["mode"], Value::from(420));
        assert_eq!(v["hex"], Value::from(31));
        assert_eq!(v["under"], Value::from(1000));
        assert_eq!(v["tilde"], Value::Null);
        assert_eq!(v["null_v"], Value::Null);
        assert_eq!(v["quoted_no"], Value::from("no"));
        assert_eq!(v["e_num"], Value::from("12e4567"));
        assert_eq!(v["oct"], Value::from("0o17"));
        assert_eq!(v["g_enabled"], Value::Bool(false));
    }
}
