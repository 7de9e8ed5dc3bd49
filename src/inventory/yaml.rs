//! YAML inventories: `group: {hosts, vars, children}` mappings, and the YAML reading shared
//! with `vars_dirs`.

use std::path::Path;

use serde_json::Value;

use super::host_entry::expand_host_pattern;
use super::model::{Inventory, InventoryError, Loc, Vars};

impl Inventory {
    pub(super) fn parse_yaml_inventory(
        &mut self,
        path: &Path,
        text: &str,
        doc: &serde_yaml::Value,
    ) -> Result<(), InventoryError> {
        match doc {
            serde_yaml::Value::Null => Ok(()),
            serde_yaml::Value::Mapping(m) => {
                for (k, data) in m {
                    let name = yaml_key(k);
                    self.parse_yaml_group(path, text, &name, data)?;
                }
                Ok(())
            }
            other => Err(InventoryError::new(
                path,
                Some(1),
                Some(1),
                format!(
                    "expected a mapping of group names at the top level (like `all:`), found {}",
                    yaml_kind(other)
                ),
            )),
        }
    }

    fn parse_yaml_group(
        &mut self,
        path: &Path,
        text: &str,
        group: &str,
        data: &serde_yaml::Value,
    ) -> Result<(), InventoryError> {
        use serde_yaml::Value as Y;
        let err =
            |key: &str, msg: String| InventoryError::new(path, find_key_line(text, key), None, msg);
        self.declare_group(group);
        let m = match data {
            Y::Null => return Ok(()),
            Y::Mapping(m) => m,
            other => {
                return Err(err(
                    group,
                    format!(
                        "group `{group}` must be a mapping with `hosts`, `vars` or `children`, found {}",
                        yaml_kind(other)
                    ),
                ))
            }
        };
        for (k, val) in m {
            let key = yaml_key(k);
            if !matches!(key.as_str(), "hosts" | "vars" | "children") {
                return Err(err(
                    &key,
                    format!(
                        "unexpected key `{key}` in group `{group}`; a group may only have `hosts`, `vars` and `children`"
                    ),
                ));
            }
            match (key.as_str(), val) {
                (_, Y::Null) => {}
                ("hosts", Y::String(h)) => self.add_yaml_host(path, text, group, h, &Y::Null)?,
                ("hosts", Y::Mapping(hosts)) => {
                    for (hk, hv) in hosts {
                        self.add_yaml_host(path, text, group, &yaml_key(hk), hv)?;
                    }
                }
                ("vars", Y::Mapping(vars)) => {
                    for (vk, vv) in vars {
                        self.set_group_var(group, &yaml_key(vk), yaml_to_json(vv));
                    }
                }
                ("children", Y::String(c)) => {
                    self.parse_yaml_group(path, text, c, &Y::Null)?;
                    self.link(group, c, Some(yaml_loc(path, text, c)));
                }
                ("children", Y::Mapping(children)) => {
                    for (ck, cv) in children {
                        let child = yaml_key(ck);
                        self.parse_yaml_group(path, text, &child, cv)?;
                        self.link(group, &child, Some(yaml_loc(path, text, &child)));
                    }
                }
                (_, other) => {
                    let hint = if key == "vars" {
                        "name: value pairs"
                    } else {
                        "names as keys (`web1:`), not a list"
                    };
                    return Err(err(
                        &key,
                        format!(
                            "`{key}` of group `{group}` must be a mapping of {hint}; found {}",
                            yaml_kind(other)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn add_yaml_host(
        &mut self,
        path: &Path,
        text: &str,
        group: &str,
        entry: &str,
        vars: &serde_yaml::Value,
    ) -> Result<(), InventoryError> {
        let at = |msg: String| InventoryError::new(path, find_key_line(text, entry), None, msg);
        let (names, port) = expand_host_pattern(entry).map_err(at)?;
        let vars = match vars {
            serde_yaml::Value::Null => Vars::new(),
            serde_yaml::Value::Mapping(_) => match yaml_to_json(vars) {
                Value::Object(m) => m,
                _ => Vars::new(),
            },
            other => {
                return Err(at(format!(
                    "variables of host `{entry}` must be a mapping (or empty), found {}",
                    yaml_kind(other)
                )))
            }
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

/// Parse YAML, reporting syntax errors at serde_yaml's location, with `<<:` merge keys applied.
pub(super) fn parse_yaml(path: &Path, text: &str) -> Result<serde_yaml::Value, InventoryError> {
    let mut doc: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| {
        let loc = e.location();
        InventoryError::new(
            path,
            loc.as_ref().map(|l| l.line()),
            loc.as_ref().map(|l| l.column()),
            format!("invalid YAML: {e}"),
        )
    })?;
    doc.apply_merge().map_err(|e| {
        InventoryError::new(
            path,
            None,
            None,
            format!("invalid YAML merge key (`<<`): {e}"),
        )
    })?;
    Ok(doc)
}

pub(super) fn looks_like_yaml_inventory(doc: &serde_yaml::Value) -> bool {
    use serde_yaml::Value as Y;
    let Y::Mapping(m) = doc else { return false };
    m.values().all(|v| matches!(v, Y::Mapping(_) | Y::Null))
        && m.values().any(|v| matches!(v, Y::Mapping(_)))
}

/// Best-effort line of `key:` in YAML text: `serde_yaml::Value` keeps no positions, and a
/// line that is right in the common case beats none.
fn find_key_line(text: &str, key: &str) -> Option<usize> {
    let forms = [
        format!("{key}:"),
        format!("\"{key}\":"),
        format!("'{key}':"),
    ];
    text.lines()
        .position(|l| {
            let t = l.trim_start().trim_start_matches("- ");
            forms.iter().any(|f| t.starts_with(f.as_str()))
        })
        .map(|i| i + 1)
}

fn yaml_loc(path: &Path, text: &str, key: &str) -> Loc {
    Loc {
        file: path.to_path_buf(),
        line: find_key_line(text, key),
        col: None,
    }
}

/// Mapping keys as strings: YAML allows `10.0.0.1:` or `8080:` keys that parse as numbers.
fn yaml_key(k: &serde_yaml::Value) -> String {
    match k {
        serde_yaml::Value::String(s) => s.clone(),
        serde_yaml::Value::Tagged(t) => yaml_key(&t.value),
        other => match yaml_to_json(other) {
            Value::String(s) => s,
            v => v.to_string(),
        },
    }
}

pub(super) fn yaml_kind(v: &serde_yaml::Value) -> &'static str {
    use serde_yaml::Value as Y;
    match v {
        Y::Null => "nothing",
        Y::Bool(_) => "a boolean",
        Y::Number(_) => "a number",
        Y::String(_) => "a string",
        Y::Sequence(_) => "a list",
        Y::Mapping(_) => "a mapping",
        Y::Tagged(_) => "a tagged value",
    }
}

/// YAML to JSON values; tags (`!unsafe`, `!vault`) are dropped, keeping the tagged value.
pub(super) fn yaml_to_json(v: &serde_yaml::Value) -> Value {
    use serde_yaml::Value as Y;
    match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(*b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                // JSON has no NaN/infinity: keep YAML's spelling instead of losing the value.
                serde_json::Number::from_f64(f)
                    .map(Value::Number)
                    .unwrap_or_else(|| Value::String(n.to_string()))
            }
        }
        Y::String(s) => Value::String(s.clone()),
        Y::Sequence(s) => Value::Array(s.iter().map(yaml_to_json).collect()),
        Y::Mapping(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (yaml_key(k), yaml_to_json(v)))
                .collect(),
        ),
        Y::Tagged(t) => yaml_to_json(&t.value),
    }
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
            assert_eq!(ini.host_vars(h), yml.host_vars(h), "vars of {h}");
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
        assert!(
            e.msg.contains("unexpected key `host` in group `web`"),
            "{}",
            e.msg
        );

        let p = write(dir.path(), "h3.yml", "all:\n  hosts:\n    - w1\n");
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.msg.contains("not a list"), "{}", e.msg);

        let p = write(dir.path(), "h4.yml", "- all\n");
        assert!(Inventory::load(&p).unwrap_err().msg.contains("top level"));
    }
}
