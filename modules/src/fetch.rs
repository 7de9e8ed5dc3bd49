//! The host's half of `fetch`: describe `src` (missing, a directory, or a file with its sha1) and,
//! unless the controller already holds content with that sha1, return one chunk of it, base64.
//!
//! The controller (`src/engine/actions/fetch.rs`) sends the task's parameters plus `_have`
//! (the sha1 of its current copy, if any) and `_offset`, asks chunk after chunk until `eof`,
//! and writes the file itself, atomically. Read-only here: the plan is always empty.

use crate::fs::expand_user;
use crate::params::Bool;
use crate::stat::hash_file;
use crate::{Ctx, Module, ModuleError, Plan};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::io::{ErrorKind, Read, Seek, SeekFrom};

pub struct Fetch;

/// The bytes of one chunk: base64 makes it under 6 MiB, far inside the 64 MiB answer frame.
pub const FETCH_CHUNK: u64 = 4 * 1024 * 1024;

fn yes() -> Bool {
    Bool(true)
}

/// Parameters of `fetch` as the playbook writes them, and the two the controller adds.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub src: String,
    pub dest: String,
    #[serde(default)]
    pub flat: Bool,
    #[serde(default = "yes")]
    pub fail_on_missing: Bool,
    #[serde(default = "yes")]
    pub validate_checksum: Bool,
    /// The sha1 of the controller's copy: no content is returned when the host's file has it.
    #[serde(default, rename = "_have")]
    pub have: Option<String>,
    /// Where the chunk to return starts.
    #[serde(default, rename = "_offset")]
    pub offset: u64,
}

impl Module for Fetch {
    type Params = Params;
    /// exists, isdir, remote_checksum (first chunk only), size, content, eof.
    type State = Map<String, Value>;
    type Action = std::convert::Infallible;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if p.src.trim().is_empty() || p.dest.trim().is_empty() {
            return Err(ModuleError::Params("src and dest are required".into()));
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Map<String, Value>, ModuleError> {
        let src = expand_user(&p.src);
        let shown = src.display().to_string();
        let mut out = Map::new();
        out.insert("changed".into(), false.into());
        let meta = match std::fs::metadata(&src) {
            Ok(m) => m,
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                out.insert("exists".into(), false.into());
                return Ok(out);
            }
            Err(e) => return Err(ModuleError::io(&src, e)),
        };
        out.insert("exists".into(), true.into());
        out.insert("isdir".into(), meta.is_dir().into());
        if meta.is_dir() {
            return Ok(out);
        }
        let unreadable = |e: std::io::Error| match e.kind() {
            ErrorKind::PermissionDenied => {
                ModuleError::failed(format!("File is not readable: {shown}"))
            }
            _ => ModuleError::io(&src, e),
        };
        let mut f = std::fs::File::open(&src).map_err(unreadable)?;
        if p.offset == 0 {
            let sum = hash_file::<sha1::Sha1>(&src)?;
            let same = p.have.as_deref() == Some(sum.as_str());
            out.insert("remote_checksum".into(), sum.into());
            out.insert("size".into(), meta.len().into());
            if same {
                return Ok(out);
            }
        }
        f.seek(SeekFrom::Start(p.offset))
            .map_err(|e| ModuleError::io(&src, e))?;
        let mut data = Vec::new();
        (&mut f)
            .take(FETCH_CHUNK)
            .read_to_end(&mut data)
            .map_err(unreadable)?;
        out.insert("eof".into(), ((data.len() as u64) < FETCH_CHUNK).into());
        out.insert(
            "content".into(),
            base64::engine::general_purpose::STANDARD
                .encode(&data)
                .into(),
        );
        Ok(out)
    }

    fn plan(
        _: &Params,
        state: &Map<String, Value>,
        _ctx: &Ctx,
    ) -> Result<Plan<Self::Action>, ModuleError> {
        Ok(Plan::report(state))
    }

    fn apply(
        _: &Params,
        _: Map<String, Value>,
        plan: &Plan<Self::Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        plan.nothing_to_apply()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run;
    use serde_json::json;

    #[test]
    fn a_file_is_described_and_sent_unless_the_controller_has_it() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("f");
        std::fs::write(&f, "abc").unwrap();
        let params = |have: Option<&str>, offset: u64| json!({"src": f, "dest": "out", "_have": have, "_offset": offset});
        let out = run::<Fetch>(&params(None, 0), &Ctx::default()).unwrap();
        assert!(!out.changed);
        let r = &out.result;
        assert_eq!(
            r["remote_checksum"],
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(
            (&r["content"], &r["eof"], &r["size"]),
            (&json!("YWJj"), &json!(true), &json!(3))
        );
        let same = run::<Fetch>(
            &params(Some("a9993e364706816aba3e25717850c26c9cd0d89d"), 0),
            &Ctx::default(),
        )
        .unwrap();
        assert!(same.result.get("content").is_none());
        let rest = run::<Fetch>(&params(None, 1), &Ctx::default()).unwrap();
        assert_eq!(rest.result["content"], "YmM=");
        assert!(rest.result.get("remote_checksum").is_none());

        let missing = run::<Fetch>(
            &json!({"src": t.path().join("nope"), "dest": "out"}),
            &Ctx::default(),
        )
        .unwrap();
        assert_eq!(missing.result["exists"], false);
        let dir = run::<Fetch>(&json!({"src": t.path(), "dest": "out"}), &Ctx::default()).unwrap();
        assert_eq!(dir.result["isdir"], true);
        let e = crate::check_params("fetch", &json!({"src": "/x"})).unwrap_err();
        assert!(e.to_string().contains("dest"), "{e}");
    }
}
