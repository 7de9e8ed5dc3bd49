//! Ansible's INI inventory format: `[group]`, `[group:children]` and `[group:vars]` sections,
//! host lines split like Python's `shlex` with inline `key=value` variables.

use std::path::Path;

use serde_json::Value;

use super::host_entry::{expand_host_pattern, is_ipv6};
use super::model::{Inventory, InventoryError, Loc, UNGROUPED};
use super::pyliteral::{parse_inline_value, parse_value};

/// Groups that INI sections name without defining them (`[g:vars]`, or `g` under
/// `[parent:children]`), checked once every file is read: the group may be defined in a later
/// file of an inventory directory.
pub(super) type Pending = Vec<Reference>;

pub(super) struct Reference {
    pub(super) group: String,
    pub(super) loc: Loc,
    /// The group whose `:children` section names it; `None` for a `[group:vars]` section.
    pub(super) child_of: Option<String>,
}

#[derive(Clone, Copy, PartialEq)]
enum Section {
    Hosts,
    Children,
    Vars,
}

impl Inventory {
    pub(super) fn parse_ini(
        &mut self,
        path: &Path,
        text: &str,
        pending: &mut Pending,
    ) -> Result<(), InventoryError> {
        // Hosts before any section header are ungrouped, as in Ansible.
        let mut group = UNGROUPED.to_string();
        let mut section = Section::Hosts;
        for (idx, raw) in text.lines().enumerate() {
            let lineno = idx + 1;
            let indent = raw.len() - raw.trim_start().len();
            let col_of = |byte_in_line: usize| raw[..indent + byte_in_line].chars().count() + 1;
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            let err = |col: usize, msg: String| {
                InventoryError::new(path, Some(lineno), Some(col_of(col)), msg)
            };
            if line.starts_with('[') && !starts_with_bracketed_ipv6(line) {
                let (name, kind) = parse_section_header(line).map_err(|m| {
                    err(0, m).help(
                        "a section header is `[group]`, `[group:vars]` or `[group:children]`, \
                         alone on its line; a group name has no spaces",
                    )
                })?;
                section = match kind {
                    None => Section::Hosts,
                    Some("children") => Section::Children,
                    Some("vars") => Section::Vars,
                    Some(other) => {
                        return Err(err(
                            name.len() + 2,
                            format!(
                            "unknown section type `[{name}:{other}]`; expected :vars or :children"
                        ),
                        )
                        .help(format!(
                            "write `[{name}]` for hosts, `[{name}:vars]` for variables or \
                             `[{name}:children]` for groups"
                        )))
                    }
                };
                group = name.to_string();
                let loc = Loc {
                    file: path.to_path_buf(),
                    line: Some(lineno),
                    col: Some(col_of(0)),
                };
                if section == Section::Vars {
                    self.group_mut(&group);
                    pending.push(Reference {
                        group: group.clone(),
                        loc,
                        child_of: None,
                    });
                } else {
                    self.declare_group(&group);
                }
                continue;
            }
            match section {
                Section::Hosts => self.parse_ini_host_line(&group, line, &err)?,
                Section::Children => {
                    let child = parse_group_name_line(line).ok_or_else(|| {
                        err(
                            0,
                            format!(
                                "expected one group name per line in `[{group}:children]`, got `{line}`"
                            ),
                        )
                        .help(format!(
                            "list one group name per line here; hosts go under `[{group}]`"
                        ))
                    })?;
                    let loc = Loc {
                        file: path.to_path_buf(),
                        line: Some(lineno),
                        col: Some(col_of(0)),
                    };
                    // As in Ansible, the child must be defined somewhere (its own section).
                    pending.push(Reference {
                        group: child.to_string(),
                        loc: loc.clone(),
                        child_of: Some(group.clone()),
                    });
                    self.link(&group, child, Some(loc));
                }
                Section::Vars => {
                    let Some((k, v)) = line.split_once('=') else {
                        return Err(err(
                            0,
                            format!("expected `name=value` in `[{group}:vars]`, got `{line}`"),
                        )
                        .help("write one variable per line as `name=value`"));
                    };
                    let k = k.trim();
                    if k.is_empty() {
                        return Err(err(
                            0,
                            format!("missing variable name before `=` in `{line}`"),
                        )
                        .help("write one variable per line as `name=value`"));
                    }
                    self.set_group_var(&group, k, parse_value(v.trim()));
                }
            }
        }
        Ok(())
    }

    fn parse_ini_host_line(
        &mut self,
        group: &str,
        line: &str,
        err: &dyn Fn(usize, String) -> InventoryError,
    ) -> Result<(), InventoryError> {
        // Every mistake in a host line has the same remedy: the line's shape.
        let err = |col: usize, msg: String| {
            err(col, msg).help(
                "a host line is `name [name=value ...]` (name may be `host:port` or a range like \
                 `web[01:20]`); quote a value that has spaces: `name=\"a b\"`",
            )
        };
        let tokens = shell_split(line).map_err(|(pos, m)| err(pos, m))?;
        let Some(first) = tokens.first() else {
            return Ok(()); // only a trailing comment
        };
        let (names, port) = expand_host_pattern(&first.text).map_err(|m| err(first.start, m))?;
        let mut vars: Vec<(String, Value)> = Vec::new();
        if let Some(p) = port {
            vars.push(("ansible_port".into(), Value::from(p)));
        }
        for t in &tokens[1..] {
            let Some(eq) = t.text.find('=') else {
                return Err(err(
                    t.start,
                    format!(
                        "expected `name=value` after the host name, got `{}`",
                        t.text
                    ),
                ));
            };
            let key = &t.text[..eq];
            if key.is_empty() {
                return Err(err(
                    t.start,
                    format!("missing variable name before `=` in `{}`", t.text),
                ));
            }
            let val = &t.text[eq + 1..];
            let quoted = t.quoted[eq + 1..].iter().all(|q| *q) && !val.is_empty();
            vars.push((key.to_string(), parse_inline_value(val, quoted)));
        }
        for name in names {
            self.add_host_to_group(group, &name);
            for (k, v) in &vars {
                self.set_host_var(&name, k, v.clone());
            }
        }
        Ok(())
    }
}

/// `[name]`, `[name:kind]`, optionally followed by a comment.
fn parse_section_header(line: &str) -> Result<(&str, Option<&str>), String> {
    let bad = || {
        format!(
            "malformed section header `{line}`; expected [group], [group:vars] or [group:children]"
        )
    };
    let close = line.find(']').ok_or_else(bad)?;
    let rest = line[close + 1..].trim_start();
    if !(rest.is_empty() || rest.starts_with('#') || rest.starts_with(';')) {
        return Err(bad());
    }
    let inner = &line[1..close];
    let (name, kind) = match inner.split_once(':') {
        Some((n, k)) => (n, Some(k)),
        None => (inner, None),
    };
    if name.is_empty() || name.chars().any(char::is_whitespace) || name.contains('[') {
        return Err(bad());
    }
    if let Some(k) = kind {
        if k.is_empty() || !k.chars().all(|c| c.is_alphanumeric() || c == '_') {
            return Err(bad());
        }
    }
    Ok((name, kind))
}

/// A group name alone on a line, optionally followed by a `#` comment (a `;` starts a comment
/// only at the start of a line, as ansible-core's INI parser reads it).
fn parse_group_name_line(line: &str) -> Option<&str> {
    let body = match line.find('#') {
        Some(i) => &line[..i],
        None => line,
    }
    .trim();
    let valid = !body.is_empty()
        && !body
            .chars()
            .any(|c| c.is_whitespace() || c == ':' || c == ']' || c == '=');
    valid.then_some(body)
}

/// An IPv6 host written `[addr]` or `[addr]:port` at the start of a host line.
fn starts_with_bracketed_ipv6(line: &str) -> bool {
    line.strip_prefix('[')
        .and_then(|r| r.split_once(']'))
        .is_some_and(|(inner, _)| is_ipv6(inner))
}

/// One word of a host line after shell-like splitting.
#[derive(Debug)]
struct Token {
    text: String,
    /// For each byte of `text`: whether it came from inside quotes.
    quoted: Vec<bool>,
    /// Byte offset of the word's start in the line.
    start: usize,
}

/// Split like Python's `shlex.split(line, comments=True)` (what Ansible uses for host lines),
/// also recording which characters were quoted so that `port="22"` can stay a string.
fn shell_split(line: &str) -> Result<Vec<Token>, (usize, String)> {
    let mut out: Vec<Token> = Vec::new();
    let mut cur: Option<Token> = None;
    let mut chars = line.char_indices().peekable();
    fn push(cur: &mut Option<Token>, start: usize, c: char, quoted: bool) {
        let t = cur.get_or_insert_with(|| Token {
            text: String::new(),
            quoted: Vec::new(),
            start,
        });
        t.text.push(c);
        t.quoted.extend(std::iter::repeat_n(quoted, c.len_utf8()));
    }
    while let Some((i, c)) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if let Some(t) = cur.take() {
                    out.push(t);
                }
            }
            '#' => break,
            '\\' => match chars.next() {
                Some((_, n)) => push(&mut cur, i, n, false),
                None => push(&mut cur, i, '\\', false),
            },
            '\'' | '"' => {
                // An empty quoted string still makes a word.
                cur.get_or_insert_with(|| Token {
                    text: String::new(),
                    quoted: Vec::new(),
                    start: i,
                });
                let mut closed = false;
                while let Some((_, q)) = chars.next() {
                    if q == c {
                        closed = true;
                        break;
                    }
                    if c == '"' && q == '\\' {
                        if let Some(&(_, n)) = chars.peek() {
                            if matches!(n, '"' | '\\' | '$' | '`') {
                                chars.next();
                                push(&mut cur, i, n, true);
                                continue;
                            }
                        }
                    }
                    push(&mut cur, i, q, true);
                }
                if !closed {
                    return Err((
                        i,
                        format!("unterminated {c} quote; close it on the same line"),
                    ));
                }
            }
            c => push(&mut cur, i, c, false),
        }
    }
    if let Some(t) = cur.take() {
        out.push(t);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::testutil::{strs, write, INI};

    #[test]
    fn ini_hosts_groups_and_typed_vars() {
        let dir = tempfile::tempdir().unwrap();
        let inv = Inventory::load(&write(dir.path(), "hosts", INI)).unwrap();
        let groups = inv.groups_map();
        assert_eq!(
            groups["all"],
            strs(&[
                "jump",
                "web01.example.com",
                "web02.example.com",
                "web03.example.com",
                "db-a",
                "db-b",
                "solo"
            ])
        );
        assert_eq!(groups["ungrouped"], strs(&["jump"]));
        assert_eq!(groups["db"], strs(&["db-a", "db-b", "solo"]));
        assert_eq!(groups["prod"].len(), 6);
        assert_eq!(inv.group_names("web02.example.com"), strs(&["prod", "web"]));
        assert!(inv.group_names("jump").is_empty());

        let v = inv.host_vars("web01.example.com");
        assert_eq!(v["ansible_port"], Value::from(2222));
        assert_eq!(v["role"], Value::from("front end"));
        assert_eq!(v["http_port"], Value::from(8080));
        assert_eq!(v["enabled"], Value::Bool(true));
        assert_eq!(v["name"], Value::from("quoted"));
        assert_eq!(v["ratio"], serde_json::json!(1.5));
        assert_eq!(v["env"], Value::from("production"));
        assert_eq!(inv.host_vars("solo")["ansible_port"], Value::from(2200));
        assert_eq!(
            inv.host_vars("jump")["ansible_host"],
            Value::from("192.0.2.1")
        );
        assert!(inv.host_vars("jump").get("env").is_none());
        assert!(inv.host_vars("nope").is_empty());
    }

    #[test]
    fn inline_values_follow_quoting() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "hosts",
            "h1 a=1 b=\"2\" c='x y' d=True e=None f=\"[1, 'two']\" g=010 h=-3 # trailing\n",
        );
        let v = Inventory::load(&p).unwrap().shown_vars("h1");
        assert_eq!(v["a"], Value::from(1));
        assert_eq!(v["b"], Value::from("2"));
        assert_eq!(v["c"], Value::from("x y"));
        assert_eq!(v["d"], Value::Bool(true));
        assert_eq!(v["e"], Value::Null);
        assert_eq!(v["f"], serde_json::json!([1, "two"]));
        assert_eq!(v["g"], Value::from("010"));
        assert_eq!(v["h"], Value::from(-3));
        assert_eq!(v.len(), 8);
    }

    /// INI values are Python literals, not YAML: what ansible-core 2.19 (`ansible-inventory
    /// --host h1`) gives for each, on a host line and in `[g:vars]` alike. One difference is
    /// kept: Python reads `12e4567` as the float infinity, which JSON values cannot hold, so it
    /// stays the string `12e4567`.
    #[test]
    fn ini_values_are_python_literals_not_yaml() {
        let dir = tempfile::tempdir().unwrap();
        let vals = "enabled=no yes_v=yes mode=0644 e_num=12e4567 hex=0x1F oct=0o17 under=1_000 \
                    tilde=~ null_v=Null quoted_no=\"no\"";
        let p = write(
            dir.path(),
            "hosts",
            &format!(
                "[g]\nh1 {vals}\n[g:vars]\n{}\n",
                vals.split(' ')
                    .map(|kv| format!("v_{kv}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
        );
        let v = Inventory::load(&p).unwrap().host_vars("h1");
        for prefix in ["", "v_"] {
            let k = |name: &str| format!("{prefix}{name}");
            assert_eq!(v[&k("enabled")], Value::from("no"), "{prefix}");
            assert_eq!(v[&k("yes_v")], Value::from("yes"));
            assert_eq!(v[&k("mode")], Value::from("0644"));
            assert_eq!(v[&k("e_num")], Value::from("12e4567"));
            assert_eq!(v[&k("hex")], Value::from(31));
            assert_eq!(v[&k("oct")], Value::from(15));
            assert_eq!(v[&k("under")], Value::from(1000));
            assert_eq!(v[&k("tilde")], Value::from("~"));
            assert_eq!(v[&k("null_v")], Value::from("Null"));
            assert_eq!(v[&k("quoted_no")], Value::from("no"));
        }
    }

    #[test]
    fn a_children_entry_must_name_a_group_defined_somewhere() {
        let dir = tempfile::tempdir().unwrap();
        // Defined after it is named, or only by an empty section: fine, as in Ansible.
        let p = write(
            dir.path(),
            "hosts",
            "[site:children]\nweb\nfuture\n[web]\nw1\n[future]\n",
        );
        let inv = Inventory::load(&p).unwrap();
        let g = inv.groups_map();
        assert_eq!(g["future"], Vec::<String>::new());
        assert_eq!(g["site"], strs(&["w1"]));
        assert_eq!(inv.group_names("w1"), strs(&["site", "web"]));

        // Never defined: refused where it is named, with the near name.
        let p = write(dir.path(), "h2", "[webs]\nw1\n[site:children]\nweb\n");
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!((e.line, e.col), (Some(4), Some(1)));
        assert!(
            e.msg.contains("`[site:children]` names group `web`"),
            "{}",
            e.msg
        );
        assert!(e.help.unwrap().contains("did you mean `webs`?"));
    }

    #[test]
    fn ini_errors_name_file_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "hosts", "[web]\nw1\n\n[web:kids]\nx\n");
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!(e.file, p);
        assert_eq!(e.line, Some(4));
        assert_eq!(e.col, Some(6));
        assert!(
            e.msg.contains("unknown section type `[web:kids]`"),
            "{}",
            e.msg
        );
        assert!(e.msg.contains("expected :vars or :children"), "{}", e.msg);

        let p = write(dir.path(), "h2", "[web]\nw1 port=22 oops\n");
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!((e.line, e.col), (Some(2), Some(12)));
        assert!(e.msg.contains("`oops`"), "{}", e.msg);

        // `;` after a child group's name is no comment there: ansible-core refuses the line.
        let p = write(
            dir.path(),
            "h4",
            "[web]\nw1\n[all:children]\nweb ; note\nweb # ok\n",
        );
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!(e.line, Some(4));
        assert!(e.msg.contains("expected one group name"), "{}", e.msg);

        let p = write(dir.path(), "h3", "[web]\nw1\n[dbs:vars]\nx=1\n");
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!(e.line, Some(3));
        assert!(e.msg.contains("never defined"), "{}", e.msg);

        let p = write(dir.path(), "h4", "[web]\nw1 a=\"open\n");
        let e = Inventory::load(&p).unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.msg.contains("unterminated"), "{}", e.msg);

        let p = write(dir.path(), "h5", "[web\nw1\n");
        assert!(Inventory::load(&p)
            .unwrap_err()
            .msg
            .contains("malformed section header"));
    }
}
