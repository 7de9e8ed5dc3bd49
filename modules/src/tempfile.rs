//! The `tempfile` module: create a uniquely named temporary file (mode 0600) or directory
//! (0700) and return its `path`. Like Ansible's, it is not idempotent: every run creates a new
//! one and reports `changed`; in check mode it is skipped (Ansible's module has no check mode).

use crate::fs::{expand_user, path_info};
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::path::PathBuf;

pub struct TempFile;

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum State {
    #[default]
    File,
    Directory,
}

fn default_prefix() -> String {
    "ansible.".into()
}

/// Parameters of `tempfile`, spelled as in Ansible.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(default)]
    pub state: State,
    /// The directory to create it in; default the host's temporary directory (`$TMPDIR`, /tmp).
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default = "default_prefix")]
    pub prefix: String,
    #[serde(default)]
    pub suffix: String,
}

/// The one step: create it.
#[derive(Debug)]
pub struct Create;

impl Params {
    fn dir(&self) -> PathBuf {
        match &self.path {
            Some(p) => expand_user(p),
            // Python's tempfile.gettempdir() looks at $TMPDIR first, then /tmp.
            None => std::env::var_os("TMPDIR")
                .filter(|d| !d.is_empty() && std::path::Path::new(d).is_dir())
                .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from),
        }
    }
}

impl Module for TempFile {
    type Params = Params;
    type State = ();
    type Action = Create;

    fn probe(_: &Params, _ctx: &Ctx) -> Result<(), ModuleError> {
        Ok(())
    }

    fn plan(_: &Params, _: &(), ctx: &Ctx) -> Result<Plan<Create>, ModuleError> {
        let mut plan = Plan::new();
        if ctx.check {
            plan.result.insert("changed".into(), false.into());
            plan.result.insert("skipped".into(), true.into());
            plan.msg = Some("remote module (tempfile) does not support check mode".into());
            return Ok(plan);
        }
        plan.actions.push(Create);
        Ok(plan)
    }

    fn apply(p: &Params, _: (), _plan: &Plan<Create>) -> Result<Map<String, Value>, ModuleError> {
        // A task failure (that `ignore_errors` can take), as in Ansible, not a load-time error.
        for (what, v) in [("prefix", &p.prefix), ("suffix", &p.suffix)] {
            if v.contains('/') {
                return Err(ModuleError::failed(format!(
                    "{what} must be a valid file name component, got '{v}'"
                )));
            }
        }
        let dir = p.dir();
        let path = create(&dir, p)?;
        // `exit_json(path=...)` adds the path's attributes in Ansible: the same keys here.
        let mut out = Map::new();
        out.insert("changed".into(), true.into());
        out.insert("path".into(), path.display().to_string().into());
        out.extend(path_info(&path)?);
        Ok(out)
    }
}

/// The characters of Python's `tempfile` names, so names look alike under both tools.
const NAME_CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789_";

/// Eight random name characters from the kernel's generator.
fn random_name() -> Result<String, ModuleError> {
    let mut bytes = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .map_err(|e| ModuleError::io("/dev/urandom", e))?;
    // 256 % 37 leaves a slight bias: harmless for a name that is only ever created exclusively.
    Ok(bytes
        .iter()
        .map(|b| NAME_CHARS[usize::from(*b) % NAME_CHARS.len()] as char)
        .collect())
}

/// Create `prefix + 8 characters + suffix` in `dir` exclusively (O_EXCL / mkdir), trying new
/// names while one exists, as Python's `mkstemp`/`mkdtemp` do.
fn create(dir: &std::path::Path, p: &Params) -> Result<PathBuf, ModuleError> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    for _ in 0..100 {
        let path = dir.join(format!("{}{}{}", p.prefix, random_name()?, p.suffix));
        let made = match p.state {
            State::File => std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .map(drop),
            State::Directory => std::fs::DirBuilder::new().mode(0o700).create(&path),
        };
        match made {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(ModuleError::failed(format!("{}: {e}", path.display()))),
        }
    }
    Err(ModuleError::failed(format!(
        "{}: no usable temporary name found",
        dir.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{check_params, run};
    use serde_json::json;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn file_and_directory_are_new_each_time() {
        let t = tempfile::tempdir().unwrap();
        let params = json!({"path": t.path(), "prefix": "fp.", "suffix": ".txt"});
        let a = run::<TempFile>(&params, &Ctx::default()).unwrap();
        let b = run::<TempFile>(&params, &Ctx::default()).unwrap();
        assert!(a.changed && b.changed);
        let (pa, pb) = (
            a.result["path"].as_str().unwrap(),
            b.result["path"].as_str().unwrap(),
        );
        assert_ne!(pa, pb);
        let name = std::path::Path::new(pa)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap();
        assert!(name.starts_with("fp.") && name.ends_with(".txt") && name.len() == 3 + 8 + 4);
        let m = std::fs::metadata(pa).unwrap();
        assert!(m.is_file());
        assert_eq!(m.permissions().mode() & 0o777, 0o600);
        assert_eq!(
            (&a.result["state"], &a.result["mode"]),
            (&json!("file"), &json!("0600"))
        );

        let d = run::<TempFile>(
            &json!({"path": t.path(), "state": "directory"}),
            &Ctx::default(),
        )
        .unwrap();
        let pd = d.result["path"].as_str().unwrap();
        assert!(std::fs::metadata(pd).unwrap().is_dir());
        assert!(std::path::Path::new(pd)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("ansible."));
        assert_eq!(d.result["mode"], "0700");
    }

    #[test]
    fn check_mode_is_skipped_and_creates_nothing() {
        let t = tempfile::tempdir().unwrap();
        let ctx = Ctx {
            check: true,
            diff: false,
        };
        let out = run::<TempFile>(&json!({"path": t.path()}), &ctx).unwrap();
        assert!(!out.changed);
        assert_eq!(out.result["skipped"], true);
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_prefix_with_a_slash_fails_the_task() {
        let t = tempfile::tempdir().unwrap();
        let e = run::<TempFile>(
            &json!({"path": t.path(), "prefix": "../../nested"}),
            &Ctx::default(),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "prefix must be a valid file name component, got '../../nested'"
        );
        let e = run::<TempFile>(
            &json!({"path": t.path(), "state": "directory", "suffix": "../world"}),
            &Ctx::default(),
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("suffix must be"), "{e}");
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 0);
        let e = check_params("tempfile", &json!({"state": "fifo"})).unwrap_err();
        assert_eq!(e.path, "state");
    }
}
