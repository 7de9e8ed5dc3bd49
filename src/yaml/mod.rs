//! YAML with source positions: a node tree built from yaml-rust2's marked events, typed like PyYAML (YAML 1.1).
//!
//! Every YAML the project reads goes through here: playbooks, roles, inventories, group_vars and
//! host_vars, vars files, `include_vars`, `-e @file` and `from_yaml`. Errors point at
//! `file:line:col`, and scalars resolve the way Ansible's PyYAML does (`yes`/`no`/`on`/`off`
//! are booleans, `0644` is octal), so every source types a value the same way.
//!
//! yaml/ is the one YAML 1.1 loader of the project: `node` (the tree), `builder` (events ->
//! tree), `resolve` (scalar typing), `mark` (how an `!unsafe` or `!vault` value stays marked
//! once it is plain JSON). A vault-encrypted file is decrypted by `crate::vault` before it is
//! parsed. It must NOT know about playbooks, inventories or Ansible keywords: callers give the
//! tree its meaning.

mod builder;
mod flow;
pub mod mark;
mod node;
mod resolve;

pub use node::{Kind, Node};
pub use resolve::resolve_plain;

use crate::diag::{Diagnostic, Pos};
use builder::Builder;
use serde_json::Value;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use yaml_rust2::parser::Parser;

thread_local! {
    /// Where the texts parsed inside `collect_warnings` leave their warnings; none outside it,
    /// so the files a run reads later (`include_vars`) keep nothing nobody reads.
    static WARNINGS: RefCell<Option<Vec<Diagnostic>>> = const { RefCell::new(None) };
}

/// Runs `f` (loading playbooks, roles and vars files on this thread) and gives back the
/// warnings the YAML it parsed raised: a duplicate mapping key, which ansible-core warns of.
pub fn collect_warnings<T>(f: impl FnOnce() -> T) -> (T, Vec<Diagnostic>) {
    let outer = WARNINGS.with(|w| w.borrow_mut().replace(Vec::new()));
    let out = f();
    let found = WARNINGS.with(|w| std::mem::replace(&mut *w.borrow_mut(), outer));
    (out, found.unwrap_or_default())
}

/// Keeps a warning for `collect_warnings`, if one is collecting.
fn warn(d: Diagnostic) {
    WARNINGS.with(|w| {
        if let Some(v) = w.borrow_mut().as_mut() {
            v.push(d);
        }
    });
}

/// Parse a YAML file into one node (the first document; an empty file is `null`).
/// A vault-encrypted file is decrypted first, with the run's secrets (`crate::vault`).
pub fn load_file(path: &Path) -> Result<Node, Diagnostic> {
    parse_str(&read_text(path)?, path)
}

/// A YAML source's text: decrypted when it is vault-encrypted, UTF-8 checked.
pub fn read_text(path: &Path) -> Result<String, Diagnostic> {
    let at = Pos::file_only(path);
    let bytes = crate::vault::read_file(path).map_err(|e| match e {
        crate::vault::ReadError::Io(_) => Diagnostic::at(&at, e.to_string())
            .help("check the path; relative paths are relative to the current directory"),
        crate::vault::ReadError::Vault(_) => Diagnostic::at(&at, e.to_string()).help(
            "give the vault secret: --vault-password-file FILE, --vault-id [label@]FILE or --ask-vault-pass",
        ),
    })?;
    String::from_utf8(bytes)
        .map_err(|_| Diagnostic::at(&at, "cannot read file: stream did not contain valid UTF-8"))
}

/// Parse YAML text that came from `path` (the path is only used in positions).
pub fn parse_str(text: &str, path: &Path) -> Result<Node, Diagnostic> {
    let file = Arc::new(path.to_path_buf());
    let builder = build(text, &file, false)?;
    Ok(builder.finish()?.unwrap_or(Node {
        kind: Kind::Null,
        pos: Pos::new(&file, 1, 1),
    }))
}

/// Every document of a YAML stream (PyYAML's `load_all`; an empty text has none).
pub fn parse_str_all(text: &str, path: &Path) -> Result<Vec<Node>, Diagnostic> {
    let file = Arc::new(path.to_path_buf());
    build(text, &file, true)?.finish_all()
}

/// The builder after parsing the first document, or all of them with `multi`.
fn build(text: &str, file: &Arc<PathBuf>, multi: bool) -> Result<Builder, Diagnostic> {
    // Ansible tries `json.loads` before YAML, so a JSON document keeps JSON's number rules.
    let json = serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok();
    let mut shifts = flow::Shifts::new();
    let mut padded: Option<String> = None;
    let mut passes = 0;
    // Each pass may indent one more flow collection that PyYAML would read (`flow.rs`).
    let builder = loop {
        let mut builder = Builder::new(file.clone(), json).with_shifts(shifts.clone());
        let current = padded.as_deref().unwrap_or(text);
        let mut parser = Parser::new_from_str(current);
        match parser.load(&mut builder, multi) {
            Ok(()) => break builder,
            Err(e) => {
                // A collection indented once parses, or fails for another reason: each pass
                // moves on to a later one, and a handful is all a real file needs.
                passes += 1;
                if passes <= 64 {
                    if let Some(t) = flow::pad_flow(current, &e, &mut shifts) {
                        padded = Some(t);
                        continue;
                    }
                }
                let m = e.marker();
                return Err(Diagnostic::at(
                    &Pos::new(file, m.line(), flow::original_col(&shifts, m)),
                    format!("invalid YAML: {}", e.info()),
                )
                .help("check indentation and quoting; a value starting with `{{` must be quoted"));
            }
        }
    };
    Ok(builder)
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

    #[test]
    fn syntax_errors_have_positions() {
        let e = parse_str("a: [1, 2\nb: 3\n", Path::new("t.yml")).unwrap_err();
        assert!(e.msg.starts_with("invalid YAML"), "{e}");
        assert!(e.pos.unwrap().line >= 1);
    }
}
