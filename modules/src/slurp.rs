//! The `slurp` module: a file's content, base64-encoded, in the result (`content`, `source`,
//! `encoding`). Read-only. The whole file travels in one answer, so files above
//! `MAX_SLURP_SIZE` are refused with a message instead of filling the controller's memory.

use crate::fs::expand_user;
use crate::{Ctx, Module, ModuleError, Plan};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::io::{ErrorKind, Read};

pub struct Slurp;

/// The largest file `slurp` returns: base64 makes it 43 MiB, inside the 64 MiB answer frame.
pub const MAX_SLURP_SIZE: u64 = 32 * 1024 * 1024;

/// Parameters of `slurp`, spelled as in Ansible.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(alias = "path")]
    pub src: String,
}

impl Module for Slurp {
    type Params = Params;
    /// The result: content, source, encoding.
    type State = Map<String, Value>;
    type Action = std::convert::Infallible;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if p.src.trim().is_empty() {
            return Err(ModuleError::Params("`src` must not be empty".into()));
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Map<String, Value>, ModuleError> {
        let src = expand_user(&p.src);
        let shown = src.display().to_string();
        let fail = |e: std::io::Error| {
            ModuleError::failed(match (e.kind(), e.raw_os_error()) {
                (ErrorKind::NotFound, _) => format!("File not found: {shown}"),
                (ErrorKind::PermissionDenied, _) => format!("File is not readable: {shown}"),
                (_, Some(nix::libc::EISDIR)) => {
                    format!("Source is a directory and must be a file: {shown}")
                }
                _ => format!("Unable to slurp file: {shown}: {e}"),
            })
        };
        let mut f = std::fs::File::open(&src).map_err(fail)?;
        let size = f.metadata().map_err(fail)?.len();
        if size > MAX_SLURP_SIZE {
            return Err(ModuleError::failed(format!(
                "{shown} is {size} bytes, larger than the {} MiB slurp limit (the content \
                 travels in one answer); use `fetch` to bring a large file to the controller",
                MAX_SLURP_SIZE >> 20
            )));
        }
        let mut data = Vec::with_capacity(size as usize);
        // `take`: a file that grows while it is read still stays under the limit.
        (&mut f)
            .take(MAX_SLURP_SIZE + 1)
            .read_to_end(&mut data)
            .map_err(fail)?;
        if data.len() as u64 > MAX_SLURP_SIZE {
            return Err(ModuleError::failed(format!(
                "{shown} grew past the {} MiB slurp limit while it was read",
                MAX_SLURP_SIZE >> 20
            )));
        }
        let mut out = Map::new();
        out.insert(
            "content".into(),
            base64::engine::general_purpose::STANDARD
                .encode(&data)
                .into(),
        );
        out.insert("source".into(), shown.into());
        out.insert("encoding".into(), "base64".into());
        out.insert("changed".into(), false.into());
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
    fn content_is_base64_and_errors_are_ansibles() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("f");
        std::fs::write(&f, b"hi\x00\xff").unwrap();
        let out = run::<Slurp>(&json!({"path": f}), &Ctx::default()).unwrap();
        assert!(!out.changed);
        assert_eq!(out.result["content"], "aGkA/w==");
        assert_eq!(out.result["encoding"], "base64");
        assert_eq!(out.result["source"], f.display().to_string());

        let missing = t.path().join("nope");
        let e = run::<Slurp>(&json!({"src": missing}), &Ctx::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("File not found: {}", missing.display())
        );
        let e = run::<Slurp>(&json!({"src": t.path()}), &Ctx::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "Source is a directory and must be a file: {}",
                t.path().display()
            )
        );
    }

    #[test]
    fn files_over_the_limit_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("big");
        let file = std::fs::File::create(&f).unwrap();
        // Sparse: no 32 MiB written to the disk.
        file.set_len(MAX_SLURP_SIZE + 1).unwrap();
        let e = run::<Slurp>(&json!({"src": f}), &Ctx::default()).unwrap_err();
        assert!(
            e.to_string().contains("larger than the 32 MiB slurp limit"),
            "{e}"
        );
    }
}
