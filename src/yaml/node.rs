//! The YAML node tree: each value with the position where it starts, and its plain-data view.

use super::mark::{mark, vault};
use crate::diag::{Diagnostic, Pos};
use serde_json::{Map, Value};

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
    /// A string, list or mapping tagged `!unsafe`: never templated (see `mark`). Numbers,
    /// booleans and null tagged so stay what they are, as in Ansible.
    Unsafe(Box<Node>),
    /// A scalar tagged `!vault`: its vault text, decrypted only when it is used (see `mark`).
    Vault(String),
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
            Kind::Unsafe(_) => "an `!unsafe` value (only variables and module parameters take one)",
            Kind::Vault(_) => "a `!vault` value (only variables and module parameters take one)",
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

    /// Plain data, positions dropped (module parameters, variables); `!unsafe` values keep
    /// their mark (see `mark`).
    pub fn to_json(&self) -> Value {
        self.json(true)
    }

    /// Plain data with `!unsafe` marks dropped, for data that is never rendered (`from_yaml`
    /// of a host's text).
    pub fn to_data_json(&self) -> Value {
        self.json(false)
    }

    fn json(&self, marks: bool) -> Value {
        match &self.kind {
            Kind::Null => Value::Null,
            Kind::Bool(b) => Value::Bool(*b),
            Kind::Int(i) => Value::Number((*i).into()),
            Kind::Float(f) => super::mark::float(*f),
            Kind::Str(s) => Value::String(s.clone()),
            Kind::Seq(items) => Value::Array(items.iter().map(|n| n.json(marks)).collect()),
            Kind::Map(entries) => {
                let mut m = Map::new();
                for (k, _, v) in entries {
                    m.insert(k.clone(), v.json(marks));
                }
                Value::Object(m)
            }
            // Everything inside is literal already: inner marks would add nothing.
            Kind::Unsafe(inner) if marks => mark(inner.json(false)),
            Kind::Unsafe(inner) => inner.json(false),
            Kind::Vault(text) => vault(text),
        }
    }

    /// An error at this node.
    pub fn err(&self, msg: impl Into<String>) -> Diagnostic {
        Diagnostic::at(&self.pos, msg)
    }
}
