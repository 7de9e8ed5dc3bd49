//! Builds the node tree from yaml-rust2's marked events: positions, anchors and aliases, merge
//! keys (`<<`), duplicate keys (the later wins), and the tags Ansible uses (`!!str`, `!unsafe`
//! on strings and collections, `!vault` on scalars).

use super::node::{Kind, Node};
use super::resolve::{resolve_json, resolve_plain};
use crate::diag::{Diagnostic, Pos};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A collection being built, with its anchor id (0: none) and whether it is tagged `!unsafe`;
/// a mapping holds its pending key.
enum Frame {
    Seq(Node, usize, bool),
    Map(Node, usize, bool, Option<(String, Pos)>),
}

/// The most nodes aliases may copy into one text. Each alias is a copy here (PyYAML shares the
/// object), so nine aliases of nine aliases of ... ("billion laughs") grow exponentially from a
/// few hundred bytes; real files use a few small anchors.
const MAX_ALIAS_NODES: usize = 100_000;

/// Receives the parser's events and assembles the documents.
pub(super) struct Builder {
    file: Arc<PathBuf>,
    stack: Vec<Frame>,
    /// Each anchored node with its number of nodes.
    anchors: HashMap<usize, (Node, usize)>,
    /// Nodes copied in by aliases so far (see `MAX_ALIAS_NODES`).
    alias_nodes: usize,
    docs: Vec<Node>,
    error: Option<Diagnostic>,
    /// The whole text is JSON: plain scalars are JSON literals, not YAML 1.1 ones.
    json: bool,
    /// Lines indented before parsing (`flow.rs`): their columns are given back.
    shifts: super::flow::Shifts,
}

impl Builder {
    /// `json`: the text is a JSON document (see `parse_str`).
    pub(super) fn new(file: Arc<PathBuf>, json: bool) -> Builder {
        Builder {
            file,
            stack: Vec::new(),
            anchors: HashMap::new(),
            alias_nodes: 0,
            docs: Vec::new(),
            error: None,
            json,
            shifts: Default::default(),
        }
    }

    /// This builder for a text whose lines were indented by these counts.
    pub(super) fn with_shifts(mut self, shifts: super::flow::Shifts) -> Builder {
        self.shifts = shifts;
        self
    }

    /// The first document (`None` for an empty text), or the first error met while building.
    pub(super) fn finish(self) -> Result<Option<Node>, Diagnostic> {
        if let Some(e) = self.error {
            return Err(e);
        }
        Ok(self.docs.into_iter().next())
    }

    /// Every document of the stream, in order.
    pub(super) fn finish_all(self) -> Result<Vec<Node>, Diagnostic> {
        if let Some(e) = self.error {
            return Err(e);
        }
        Ok(self.docs)
    }

    fn pos(&self, m: Marker) -> Pos {
        // yaml-rust2 markers: line is 1-based, column 0-based.
        Pos::new(
            &self.file,
            m.line(),
            super::flow::original_col(&self.shifts, &m),
        )
    }

    fn push_value(&mut self, node: Node) {
        match self.stack.last_mut() {
            None => self.docs.push(node),
            Some(Frame::Seq(seq, _, _)) => {
                if let Kind::Seq(items) = &mut seq.kind {
                    items.push(node);
                }
            }
            Some(Frame::Map(map, _, _, pending)) => match pending.take() {
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
                        Kind::Unsafe(_) => {
                            if self.error.is_none() {
                                self.error = Some(
                                    node.err("`!unsafe` on a mapping key is not supported")
                                        .help("tag the value instead"),
                                );
                            }
                            String::new()
                        }
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
                            // Later duplicate keys win, as in PyYAML; ansible-core warns.
                            super::warn(
                                Diagnostic::at(&kpos, format!("duplicate mapping key `{key}`"))
                                    .help(format!(
                                        "the value given here is used, the one at {} is not; \
                                         remove one of them",
                                        slot.1
                                    )),
                            );
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
        // Merged out of an `!unsafe` mapping, each value stays unsafe.
        Kind::Unsafe(inner) => {
            if let Kind::Map(m) = &inner.kind {
                for (k, p, v) in m {
                    if !entries.iter().any(|(ek, _, _)| ek == k) {
                        entries.push((k.clone(), p.clone(), unsafe_node(v.clone())));
                    }
                }
            }
        }
        _ => {}
    }
}

/// `node` tagged `!unsafe`. Ansible types the scalar as if it were untagged and plain (so
/// `!unsafe "123"` is the number 123); only strings and collections need the mark.
fn unsafe_node(node: Node) -> Node {
    match node.kind {
        Kind::Str(_) | Kind::Seq(_) | Kind::Map(_) => Node {
            pos: node.pos.clone(),
            kind: Kind::Unsafe(Box::new(node)),
        },
        _ => node,
    }
}

/// How many nodes a tree holds (itself included).
fn size(node: &Node) -> usize {
    1 + match &node.kind {
        Kind::Seq(items) => items.iter().map(size).sum(),
        Kind::Map(entries) => entries.iter().map(|(_, _, v)| size(v)).sum(),
        Kind::Unsafe(inner) => size(inner),
        _ => 0,
    }
}

fn is_unsafe_tag(tag: &Option<Tag>) -> bool {
    tag.as_ref()
        .is_some_and(|t| t.handle == "!" && t.suffix == "unsafe")
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
                    (_, Some(t)) if t.handle == "!" && t.suffix == "vault" => Kind::Vault(value),
                    _ if is_unsafe_tag(&tag) => resolve_plain(&value),
                    (TScalarStyle::Plain, _) if self.json => resolve_json(&value),
                    (TScalarStyle::Plain, _) => resolve_plain(&value),
                    _ => Kind::Str(value),
                };
                let node = Node { kind, pos };
                let node = if is_unsafe_tag(&tag) {
                    unsafe_node(node)
                } else {
                    node
                };
                if anchor > 0 {
                    self.anchors.insert(anchor, (node.clone(), 1));
                }
                self.push_value(node);
            }
            Event::SequenceStart(anchor, tag) => self.stack.push(Frame::Seq(
                Node {
                    kind: Kind::Seq(Vec::new()),
                    pos,
                },
                anchor,
                is_unsafe_tag(&tag),
            )),
            Event::MappingStart(anchor, tag) => self.stack.push(Frame::Map(
                Node {
                    kind: Kind::Map(Vec::new()),
                    pos,
                },
                anchor,
                is_unsafe_tag(&tag),
                None,
            )),
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor) = match self.stack.pop() {
                    Some(Frame::Seq(n, a, false)) | Some(Frame::Map(n, a, false, _)) => (n, a),
                    Some(Frame::Seq(n, a, true)) | Some(Frame::Map(n, a, true, _)) => {
                        (unsafe_node(n), a)
                    }
                    None => return,
                };
                if anchor > 0 {
                    self.anchors.insert(anchor, (node.clone(), size(&node)));
                }
                self.push_value(node);
            }
            Event::Alias(id) => match self.anchors.get(&id) {
                Some((_, n)) if self.alias_nodes.saturating_add(*n) > MAX_ALIAS_NODES => {
                    // The first error is kept; later events change nothing.
                    if self.error.is_none() {
                        self.error = Some(
                            Diagnostic::at(
                                &pos,
                                format!(
                                    "aliases expand to more than {MAX_ALIAS_NODES} values in this file"
                                ),
                            )
                            .help("use fewer or smaller aliases (`*name`)"),
                        );
                    }
                }
                Some((node, n)) => {
                    self.alias_nodes += n;
                    let node = node.clone();
                    self.push_value(node);
                }
                None => self.error = Some(Diagnostic::at(&pos, "alias to an unknown anchor")),
            },
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::yaml::mark::mark;
    use crate::yaml::{parse_str, Node};
    use serde_json::{json, Value};
    use std::path::Path;

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
    fn unsafe_marks_strings_and_collections_and_types_scalars_as_plain() {
        let n = parse(concat!(
            "a: !unsafe \"{{ x }}\"\n",
            "b: !unsafe '123'\n",
            "c: !unsafe\n",
            "d: !unsafe [\"{{ y }}\", 1]\n",
            "e: !unsafe {\"{{ k }}\": v}\n",
            "f: &base !unsafe {p: \"{{ z }}\"}\n",
            "g:\n  <<: *base\n  q: \"{{ t }}\"\n",
        ));
        let j = n.to_json();
        assert_eq!(j["a"], mark(json!("{{ x }}")));
        // As in Ansible, the tag does not keep a scalar a string: `!unsafe "123"` is 123.
        assert_eq!(j["b"], json!(123));
        assert_eq!(j["c"], Value::Null);
        assert_eq!(j["d"], mark(json!(["{{ y }}", 1])));
        assert_eq!(j["e"], mark(json!({"{{ k }}": "v"})));
        // Values merged out of an unsafe mapping stay unsafe; the others do not become so.
        assert_eq!(j["g"], json!({"p": mark(json!("{{ z }}")), "q": "{{ t }}"}));
        assert_eq!(n.to_data_json()["e"], json!({"{{ k }}": "v"}));
        let e = parse_str("!unsafe k: v\n", Path::new("t.yml")).unwrap_err();
        assert!(e.msg.contains("mapping key"), "{e}");
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
    fn aliases_of_aliases_are_bounded() {
        // "Billion laughs": nine aliases of nine aliases, 9^8 strings from 300 bytes. Through the
        // yaml_loader fuzz target this ran out of memory.
        let mut text = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
        for (prev, name) in ["a", "b", "c", "d", "e", "f", "g", "h"]
            .iter()
            .zip("bcdefghi".chars())
        {
            let refs = vec![format!("*{prev}"); 9].join(", ");
            text.push_str(&format!("{name}: &{name} [{refs}]\n"));
        }
        let e = parse_str(&text, Path::new("t.yml")).unwrap_err();
        assert!(e.msg.contains("aliases expand to more than"), "{}", e.msg);
        // Ordinary use is untouched.
        assert_eq!(
            parse("d: &d {k: 1}\nuse: [*d, *d]\n").to_json(),
            json!({"d": {"k": 1}, "use": [{"k": 1}, {"k": 1}]})
        );
    }
}
