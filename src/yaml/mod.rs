//! YAML with source positions: a node tree built from yaml-rust2's marked events, typed like PyYAML (YAML 1.1).
//!
//! serde_yaml drops positions, and every load error must point at `file:line:col`, so playbooks
//! and vars files are read through this tree. Scalars resolve the way Ansible's PyYAML does:
//! `yes`/`no`/`on`/`off` are booleans and `0644` is octal, so playbooks behave the same here.

use crate::diag::{Diagnostic, Pos};
use serde_json::{Map, Number, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// One YAML node and where it starts.
#[derive(Clone, Debug)]
pub struct Node {
    pub kind: Kind,
    pub pos: Pos,
}

#[derive(Clone, Debug)]
pub enum Kind {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    /// Keys in document order, each with its own position (for "unknown key" errors).
    Map(Vec<(String, Pos, Node)>),
}

impl Node {
    /// A short name of the node's type for error messages.
    pub fn type_name(&self) -> &'static str {
        match self.kind {
            Kind::Null => "null",
            Kind::Bool(_) => "a boolean",
            Kind::Int(_) | Kind::Float(_) => "a number",
            Kind::Str(_) => "a string",
            Kind::Seq(_) => "a list",
            Kind::Map(_) => "a mapping",
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            Kind::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&[(String, Pos, Node)]> {
        match &self.kind {
            Kind::Map(m) => Some(m),
            _ => None,
        }
    }

    pub fn get(&self, key: &str) -> Option<&Node> {
        self.as_map()?
            .iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, _, v)| v)
    }

    /// The scalar as text (numbers and booleans too), for keys like `name:` that accept any scalar.
    pub fn scalar_text(&self) -> Option<String> {
        match &self.kind {
            Kind::Str(s) => Some(s.clone()),
            Kind::Int(i) => Some(i.to_string()),
            Kind::Float(f) => Some(f.to_string()),
            Kind::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }

    /// Plain data, positions dropped (module parameters, variables).
    pub fn to_json(&self) -> Value {
        match &self.kind {
            Kind::Null => Value::Null,
            Kind::Bool(b) => Value::Bool(*b),
            Kind::Int(i) => Value::Number((*i).into()),
            Kind::Float(f) => Number::from_f64(*f)
                .map(Value::Number)
                .unwrap_or(Value::Null),
            Kind::Str(s) => Value::String(s.clone()),
            Kind::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            Kind::Map(entries) => {
                let mut m = Map::new();
                for (k, _, v) in entries {
                    m.insert(k.clone(), v.to_json());
                }
                Value::Object(m)
            }
        }
    }

    /// An error at this node.
    pub fn err(&self, msg: impl Into<String>) -> Diagnostic {
        Diagnostic::at(&self.pos, msg)
    }
}

/// Parse a YAML file into one node (the first document; an empty file is `null`).
pub fn load_file(path: &Path) -> Result<Node, Diagnostic> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Diagnostic::at(&Pos::file_only(path), format!("cannot read file: {e}"))
            .help("check the path; relative paths are relative to the current directory")
    })?;
    parse_str(&text, path)
}

/// Parse YAML text that came from `path` (the path is only used in positions).
pub fn parse_str(text: &str, path: &Path) -> Result<Node, Diagnostic> {
    let file = Arc::new(path.to_path_buf());
    let mut builder = Builder {
        file: file.clone(),
        stack: Vec::new(),
        anchors: HashMap::new(),
        docs: Vec::new(),
        error: None,
    };
    let mut parser = Parser::new_from_str(text);
    if let Err(e) = parser.load(&mut builder, false) {
        let m = e.marker();
        return Err(Diagnostic::at(
            &Pos::new(&file, m.line(), m.col() + 1),
            format!("invalid YAML: {}", e.info()),
        )
        .help("check indentation and quoting; a value starting with `{{` must be quoted"));
    }
    if let Some(e) = builder.error {
        return Err(e);
    }
    Ok(builder.docs.into_iter().next().unwrap_or(Node {
        kind: Kind::Null,
        pos: Pos::new(&file, 1, 1),
    }))
}

enum Frame {
    Seq(Node, usize),
    Map(Node, usize, Option<(String, Pos)>),
}

struct Builder {
    file: Arc<PathBuf>,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Node>,
    docs: Vec<Node>,
    error: Option<Diagnostic>,
}

impl Builder {
    fn pos(&self, m: Marker) -> Pos {
        // yaml-rust2 markers: line is 1-based, column 0-based.
        Pos::new(&self.file, m.line(), m.col() + 1)
    }

    fn push_value(&mut self, node: Node) {
        match self.stack.last_mut() {
            None => self.docs.push(node),
            Some(Frame::Seq(seq, _)) => {
                if let Kind::Seq(items) = &mut seq.kind {
                    items.push(node);
                }
            }
            Some(Frame::Map(map, _, pending)) => match pending.take() {
                None => {
                    // This node is a key. yaml-rust2 marks a block mapping's start after its
                    // first key, so the first key's position is where the mapping starts.
                    if let Kind::Map(entries) = &map.kind {
                        if entries.is_empty() {
                            map.pos = node.pos.clone();
                        }
                    }
                    let key = match &node.kind {
                        Kind::Str(s) => s.clone(),
                        Kind::Int(i) => i.to_string(),
                        Kind::Bool(b) => b.to_string(),
                        Kind::Float(f) => f.to_string(),
                        Kind::Null => "null".to_string(),
                        _ => {
                            if self.error.is_none() {
                                self.error = Some(
                                    node.err("mapping keys must be scalars, not lists or mappings"),
                                );
                            }
                            String::new()
                        }
                    };
                    *pending = Some((key, node.pos));
                }
                Some((key, kpos)) => {
                    if let Kind::Map(entries) = &mut map.kind {
                        if key == "<<" {
                            // YAML merge key: bring in the entries the current map does not set.
                            merge_into(entries, &node);
                        } else if let Some(slot) = entries.iter_mut().find(|(k, _, _)| *k == key) {
                            // Later duplicate keys win, as in PyYAML.
                            *slot = (key, kpos, node);
                        } else {
                            entries.push((key, kpos, node));
                        }
                    }
                }
            },
        }
    }
}

fn merge_into(entries: &mut Vec<(String, Pos, Node)>, src: &Node) {
    match &src.kind {
        Kind::Map(m) => {
            for (k, p, v) in m {
                if !entries.iter().any(|(ek, _, _)| ek == k) {
                    entries.push((k.clone(), p.clone(), v.clone()));
                }
            }
        }
        Kind::Seq(items) => items.iter().for_each(|i| merge_into(entries, i)),
        _ => {}
    }
}

/// PyYAML's YAML 1.1 resolution of plain scalars.
fn resolve_plain(s: &str) -> Kind {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Kind::Null,
        // PyYAML does not treat `y`/`n` as booleans, so neither does this.
        "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Kind::Bool(true)
        }
        "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Kind::Bool(false)
        }
        _ => {}
    }
    let t = s.replace('_', "");
    let (sign, digits) = match t.strip_prefix('-') {
        Some(rest) => (-1i64, rest),
        None => (1, t.strip_prefix('+').unwrap_or(&t)),
    };
    if !digits.is_empty() {
        let int = if let Some(h) = digits.strip_prefix("0x") {
            i64::from_str_radix(h, 16).ok()
        } else if let Some(o) = digits.strip_prefix("0o") {
            i64::from_str_radix(o, 8).ok()
        } else if let Some(b) = digits.strip_prefix("0b") {
            i64::from_str_radix(b, 2).ok()
        } else if digits.len() > 1
            && digits.starts_with('0')
            && digits.chars().all(|c| c.is_ascii_digit())
        {
            // YAML 1.1 octal: `mode: 0644` is 420, exactly as Ansible reads it.
            i64::from_str_radix(digits, 8).ok()
        } else if digits.chars().all(|c| c.is_ascii_digit()) {
            digits.parse::<i64>().ok()
        } else {
            None
        };
        if let Some(i) = int {
            return Kind::Int(sign * i);
        }
        let looks_float = digits
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || c == '.')
            && digits
                .chars()
                .all(|c| c.is_ascii_digit() || "eE.+-".contains(c))
            && digits.contains(['.', 'e', 'E']);
        if looks_float {
            if let Ok(f) = t.parse::<f64>() {
                return Kind::Float(f);
            }
        }
        match digits {
            ".inf" | ".Inf" | ".INF" => return Kind::Float(sign as f64 * f64::INFINITY),
            ".nan" | ".NaN" | ".NAN" => return Kind::Float(f64::NAN),
            _ => {}
        }
    }
    Kind::Str(s.to_string())
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        if self.error.is_some() {
            return;
        }
        let pos = self.pos(mark);
        match ev {
            Event::Scalar(value, style, anchor, tag) => {
                let kind = match (&style, &tag) {
                    (_, Some(t)) if t.handle == "!!" && t.suffix == "str" => Kind::Str(value),
                    (_, Some(t))
                        if t.handle == "!" && (t.suffix == "unsafe" || t.suffix == "vault") =>
                    {
                        if t.suffix == "vault" {
                            self.error = Some(
                                Diagnostic::at(&pos, "`!vault` values are not supported")
                                    .help("decrypt the value, or pass it with -e @file"),
                            );
                        }
                        Kind::Str(value)
                    }
                    (TScalarStyle::Plain, _) => resolve_plain(&value),
                    _ => Kind::Str(value),
                };
                let node = Node { kind, pos };
                if anchor > 0 {
                    self.anchors.insert(anchor, node.clone());
                }
                self.push_value(node);
            }
            Event::SequenceStart(anchor, _) => self.stack.push(Frame::Seq(
                Node {
                    kind: Kind::Seq(Vec::new()),
                    pos,
                },
                anchor,
            )),
            Event::MappingStart(anchor, _) => self.stack.push(Frame::Map(
                Node {
                    kind: Kind::Map(Vec::new()),
                    pos,
                },
                anchor,
                None,
            )),
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor) = match self.stack.pop() {
                    Some(Frame::Seq(n, a)) | Some(Frame::Map(n, a, _)) => (n, a),
                    None => return,
                };
                if anchor > 0 {
                    self.anchors.insert(anchor, node.clone());
                }
                self.push_value(node);
            }
            Event::Alias(id) => match self.anchors.get(&id).cloned() {
                Some(node) => self.push_value(node),
                None => self.error = Some(Diagnostic::at(&pos, "alias to an unknown anchor")),
            },
            _ => {}
        }
    }
}

/// Ansible-style YAML of a JSON value (used for vars files given with `-e @file.json` etc.).
pub fn json_to_node(v: &Value, pos: &Pos) -> Node {
    let kind = match v {
        Value::Null => Kind::Null,
        Value::Bool(b) => Kind::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Kind::Int(i),
            None => Kind::Float(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => Kind::Str(s.clone()),
        Value::Array(a) => Kind::Seq(a.iter().map(|x| json_to_node(x, pos)).collect()),
        Value::Object(m) => Kind::Map(
            m.iter()
                .map(|(k, x)| (k.clone(), pos.clone(), json_to_node(x, pos)))
                .collect(),
        ),
    };
    Node {
        kind,
        pos: pos.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Node {
        parse_str(s, Path::new("t.yml")).unwrap()
    }

    #[test]
    fn positions_are_one_based() {
        let n = parse("a: 1\nb:\n  c: x\n");
        let b = n.get("b").unwrap();
        let (_, kpos, c) = &b.as_map().unwrap()[0];
        assert_eq!((kpos.line, kpos.col), (3, 3));
        assert_eq!((c.pos.line, c.pos.col), (3, 6));
    }

    #[test]
    fn scalars_resolve_like_pyyaml() {
        let n = parse("a: yes\nb: 0644\nc: '0644'\nd: 1.5\ne: ~\nf: on\ng: 12\nh: y\n");
        let j = n.to_json();
        assert_eq!(j["a"], Value::Bool(true));
        assert_eq!(j["b"], Value::from(420));
        assert_eq!(j["c"], Value::from("0644"));
        assert_eq!(j["d"], Value::from(1.5));
        assert_eq!(j["e"], Value::Null);
        assert_eq!(j["f"], Value::Bool(true));
        assert_eq!(j["g"], Value::from(12));
        assert_eq!(j["h"], Value::from("y"));
    }

    #[test]
    fn anchors_aliases_and_merge_keys() {
        let n = parse("base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  y: 3\nlist: [*b]\n");
        let j = n.to_json();
        assert_eq!(j["other"]["x"], Value::from(1));
        assert_eq!(j["other"]["y"], Value::from(3));
        assert_eq!(j["list"][0]["y"], Value::from(2));
    }

    #[test]
    fn syntax_errors_have_positions() {
        let e = parse_str("a: [1, 2\nb: 3\n", Path::new("t.yml")).unwrap_err();
        assert!(e.msg.starts_with("invalid YAML"), "{e}");
        assert!(e.pos.unwrap().line >= 1);
    }
}
