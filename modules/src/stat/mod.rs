//! The `stat` module: report what is at a path (type, mode, owner, times, checksum) in Ansible's
//! `stat` result shape. It never changes anything: its plan is always empty.
//!
//! `get_mime` (default true, as in Ansible) adds `mimetype` and `charset` from the host's `file`
//! command (`unknown` without it). `get_attributes` (default true) adds `version`, `attributes`
//! and `attr_flags` as `lsattr -vd` gives them (read with its ioctls). `checksum_algorithm` supports every choice Ansible offers: sha1 (the
//! default), md5, sha224, sha256, sha384 and sha512.

pub mod mime;

use crate::fs::{expand_user, parent_of, stat_mode_str};
use crate::params::Bool;
use crate::{Ctx, Module, ModuleError, Plan};
use nix::unistd::AccessFlags;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use sha2::Digest;
use std::fs::{self, Metadata};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

pub struct Stat;

fn default_true() -> Bool {
    Bool(true)
}

/// Hash used for `stat.checksum`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    #[default]
    Sha1,
    Md5,
    Sha224,
    Sha256,
    Sha384,
    Sha512,
}

/// Parameters of `stat`, spelled as in Ansible.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(alias = "dest", alias = "name")]
    pub path: String,
    /// Report on a symlink's target instead of the link.
    #[serde(default)]
    pub follow: Bool,
    #[serde(default = "default_true")]
    pub get_checksum: Bool,
    #[serde(default, alias = "checksum", alias = "checksum_algo")]
    pub checksum_algorithm: Algorithm,
    /// Add `mimetype` and `charset` (default true).
    #[serde(default, alias = "mime", alias = "mime_type", alias = "mime-type")]
    pub get_mime: Option<Bool>,
    /// Accepted and ignored.
    #[serde(default, alias = "attr", alias = "attributes")]
    pub get_attributes: Option<Bool>,
}

impl Module for Stat {
    type Params = Params;
    /// The `stat` object, complete.
    type State = Map<String, Value>;
    /// stat never acts.
    type Action = std::convert::Infallible;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if p.path.trim().is_empty() {
            return Err(ModuleError::Params("`path` must not be empty".into()));
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Map<String, Value>, ModuleError> {
        let path = expand_user(&p.path);
        let read = if p.follow.0 {
            fs::metadata(&path)
        } else {
            fs::symlink_metadata(&path)
        };
        let meta = match read {
            Ok(m) => m,
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                let mut out = Map::new();
                out.insert("exists".into(), false.into());
                return Ok(out);
            }
            Err(e) => return Err(ModuleError::io(&path, e)),
        };
        let mut out = describe(&path, &meta);

        for (key, flag) in [
            ("readable", AccessFlags::R_OK),
            ("writeable", AccessFlags::W_OK),
            ("executable", AccessFlags::X_OK),
        ] {
            out.insert(key.into(), nix::unistd::access(&path, flag).is_ok().into());
        }

        if meta.file_type().is_symlink() {
            let target = fs::read_link(&path).map_err(|e| ModuleError::io(&path, e))?;
            // Like os.path.realpath: resolved when possible, else the link's text joined to its directory.
            let source = fs::canonicalize(&path).unwrap_or_else(|_| parent_of(&path).join(&target));
            out.insert("lnk_source".into(), source.display().to_string().into());
            out.insert("lnk_target".into(), target.display().to_string().into());
        }
        if let Some(u) = crate::fs::names::user_by_uid(meta.uid()) {
            out.insert("pw_name".into(), u.into());
        }
        if let Some(g) = crate::fs::names::group_by_gid(meta.gid()) {
            out.insert("gr_name".into(), g.into());
        }
        if p.get_checksum.0 && meta.is_file() && out["readable"] == true {
            let sum = match p.checksum_algorithm {
                Algorithm::Sha1 => hash_file::<sha1::Sha1>(&path)?,
                Algorithm::Md5 => hash_file::<md5::Md5>(&path)?,
                Algorithm::Sha224 => hash_file::<sha2::Sha224>(&path)?,
                Algorithm::Sha256 => hash_file::<sha2::Sha256>(&path)?,
                Algorithm::Sha384 => hash_file::<sha2::Sha384>(&path)?,
                Algorithm::Sha512 => hash_file::<sha2::Sha512>(&path)?,
            };
            out.insert("checksum".into(), sum.into());
        }
        // As Ansible's stat: the keys always, filled when `lsattr` could read the path.
        if p.get_attributes.is_none_or(|b| b.0) {
            let read = crate::fs::chattr::lsattr(&path);
            let version = read.map(|(v, _)| Value::from(v.to_string()));
            let flags = read.map(|(_, f)| f).unwrap_or(0);
            out.insert("version".into(), version.unwrap_or(Value::Null));
            out.insert("attributes".into(), json!(crate::fs::chattr::names(flags)));
            out.insert(
                "attr_flags".into(),
                crate::fs::chattr::letters(flags).into(),
            );
        }
        if p.get_mime.is_none_or(|b| b.0) {
            let (mimetype, charset) = mime::of(&path);
            out.insert("mimetype".into(), mimetype.into());
            out.insert("charset".into(), charset.into());
        }
        Ok(out)
    }

    fn plan(
        _: &Params,
        state: &Map<String, Value>,
        _ctx: &Ctx,
    ) -> Result<Plan<Self::Action>, ModuleError> {
        let mut plan = Plan::new();
        plan.result
            .insert("stat".into(), Value::Object(state.clone()));
        plan.result.insert("changed".into(), false.into());
        Ok(plan)
    }

    fn apply(
        _: &Params,
        _: Map<String, Value>,
        plan: &Plan<Self::Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        plan.nothing_to_apply()
    }
}

/// The keys Ansible's `stat` and `find` both report, in their order: `path`, `mode`, the type
/// flags, ids, size, inode numbers and the three times.
pub(crate) fn put_stat_numbers(out: &mut Map<String, Value>, path: &Path, m: &Metadata) {
    use std::os::unix::fs::FileTypeExt;
    let ft = m.file_type();
    let mode = m.mode();
    let secs = |s: i64, ns: i64| s as f64 + ns as f64 / 1e9;
    let mut put = |k: &str, v: Value| {
        out.insert(k.to_string(), v);
    };
    put("path", path.display().to_string().into());
    put("mode", stat_mode_str(mode).into());
    put("isdir", ft.is_dir().into());
    put("ischr", ft.is_char_device().into());
    put("isblk", ft.is_block_device().into());
    put("isreg", ft.is_file().into());
    put("isfifo", ft.is_fifo().into());
    put("islnk", ft.is_symlink().into());
    put("issock", ft.is_socket().into());
    put("uid", m.uid().into());
    put("gid", m.gid().into());
    put("size", m.size().into());
    put("inode", m.ino().into());
    put("dev", m.dev().into());
    put("nlink", m.nlink().into());
    put("atime", secs(m.atime(), m.atime_nsec()).into());
    put("mtime", secs(m.mtime(), m.mtime_nsec()).into());
    put("ctime", secs(m.ctime(), m.ctime_nsec()).into());
}

/// Ansible's `format_output`: type flags, permission bits and the raw stat numbers.
fn describe(path: &Path, m: &Metadata) -> Map<String, Value> {
    let mode = m.mode();
    let mut out = Map::new();
    out.insert("exists".into(), true.into());
    put_stat_numbers(&mut out, path, m);
    let mut put = |k: &str, v: Value| {
        out.insert(k.to_string(), v);
    };
    for (key, bit) in [
        ("rusr", 0o400),
        ("wusr", 0o200),
        ("xusr", 0o100),
        ("rgrp", 0o040),
        ("wgrp", 0o020),
        ("xgrp", 0o010),
        ("roth", 0o004),
        ("woth", 0o002),
        ("xoth", 0o001),
        ("isuid", 0o4000),
        ("isgid", 0o2000),
    ] {
        put(key, (mode & bit != 0).into());
    }
    put("blocks", m.blocks().into());
    put("block_size", m.blksize().into());
    put("device_type", m.rdev().into());
    out
}

/// Hex digest of a file, read in chunks so large files do not fill memory.
pub(crate) fn hash_file<D: Digest>(path: &Path) -> Result<String, ModuleError> {
    let mut f = fs::File::open(path).map_err(|e| ModuleError::io(path, e))?;
    let mut hasher = D::new();
    let len = f.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
    let mut buf = vec![0u8; crate::fs::chunk_len(len)];
    loop {
        let n = f.read(&mut buf).map_err(|e| ModuleError::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{check_params, run, Ctx};
    use serde_json::json;
    use std::os::unix::fs::{symlink, PermissionsExt};

    #[test]
    fn files_of_every_size_around_the_chunk_hash_whole() {
        // The read buffer follows the file's length up to 64 KiB: files of the sizes around
        // it must all be read to their end.
        let dir = tempfile::tempdir().unwrap();
        for len in [0usize, 1, 65_535, 65_536, 65_537, 200_000] {
            let p = dir.path().join(format!("f{len}"));
            let content: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            fs::write(&p, &content).unwrap();
            assert_eq!(
                hash_file::<sha2::Sha256>(&p).unwrap(),
                hex::encode(sha2::Sha256::digest(&content)),
                "{len} bytes"
            );
            let left = crate::fs::written::Left::of_file(&fs::File::open(&p).unwrap()).unwrap();
            assert!(
                matches!(&left, crate::fs::written::Left::File { sha256, .. }
                    if *sha256 == hex::encode(sha2::Sha256::digest(&content))),
                "{len} bytes: {left:?}"
            );
        }
    }

    fn stat_of(params: Value) -> Map<String, Value> {
        let out = run::<Stat>(&params, &Ctx::default()).unwrap();
        assert!(!out.changed);
        assert!(out.diff.is_empty());
        out.result["stat"].as_object().unwrap().clone()
    }

    #[test]
    fn regular_file_matches_ansible_keys() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("f");
        fs::write(&f, "abc").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o4750)).unwrap();
        let before = fs::metadata(&f).unwrap();

        let s = stat_of(json!({"path": f}));
        assert_eq!(s["exists"], true);
        assert_eq!(s["path"], f.display().to_string());
        assert_eq!(s["mode"], "4750");
        assert_eq!(
            (s["isreg"].clone(), s["isdir"].clone(), s["islnk"].clone()),
            (json!(true), json!(false), json!(false))
        );
        assert_eq!(s["size"], 3);
        assert_eq!(s["uid"], 0);
        assert_eq!(s["pw_name"], "root");
        assert_eq!(s["inode"], before.ino());
        assert_eq!(s["nlink"], 1);
        assert_eq!(s["isuid"], true);
        assert_eq!(s["isgid"], false);
        assert_eq!(s["xoth"], false);
        assert_eq!(s["readable"], true);
        assert_eq!(s["mtime"].as_f64().unwrap().floor() as i64, before.mtime());
        // sha1("abc"), Ansible's default algorithm.
        assert_eq!(s["checksum"], "a9993e364706816aba3e25717850c26c9cd0d89d");
        let s = stat_of(json!({"path": f, "checksum_algorithm": "sha256"}));
        assert_eq!(
            s["checksum"],
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        // md5("abc"): one of Ansible's choices too (the find target compares it with find's).
        let s = stat_of(json!({"path": f, "checksum_algorithm": "md5"}));
        assert_eq!(s["checksum"], "900150983cd24fb0d6963f7d28e17f72");
        let s = stat_of(json!({"path": f, "get_checksum": false, "get_mime": true, "attr": "no"}));
        assert!(s.get("checksum").is_none());
        // `file` is installed by .ci/run (the stat target of ansible-core checks these too).
        assert_eq!(
            (&s["mimetype"], &s["charset"]),
            (&json!("text/plain"), &json!("us-ascii"))
        );
        let s = stat_of(json!({"path": f, "get_mime": false}));
        assert!(s.get("mimetype").is_none() && s.get("charset").is_none());

        let after = fs::metadata(&f).unwrap();
        assert_eq!(
            (after.mtime_nsec(), after.ctime_nsec(), after.ino()),
            (before.mtime_nsec(), before.ctime_nsec(), before.ino())
        );
    }

    #[test]
    fn missing_path_reports_exists_false() {
        let t = tempfile::tempdir().unwrap();
        let s = stat_of(json!({"path": t.path().join("nope")}));
        assert_eq!(Value::Object(s), json!({"exists": false}));
        let s = stat_of(json!({"path": t.path().join("nope/deeper")}));
        assert_eq!(s["exists"], false);
    }

    #[test]
    fn links_are_described_unless_followed() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("dir");
        fs::create_dir(&d).unwrap();
        let l = t.path().join("l");
        symlink("dir", &l).unwrap();

        let s = stat_of(json!({"path": l}));
        assert_eq!(s["islnk"], true);
        assert_eq!(s["isdir"], false);
        assert_eq!(s["lnk_target"], "dir");
        assert_eq!(
            s["lnk_source"],
            fs::canonicalize(&d).unwrap().display().to_string()
        );
        assert!(s.get("checksum").is_none());

        let s = stat_of(json!({"path": l, "follow": true}));
        assert_eq!(s["islnk"], false);
        assert_eq!(s["isdir"], true);
        assert!(s.get("lnk_target").is_none());

        let dangling = t.path().join("dangling");
        symlink("missing", &dangling).unwrap();
        assert_eq!(stat_of(json!({"path": dangling}))["islnk"], true);
        assert_eq!(
            stat_of(json!({"path": dangling, "follow": true}))["exists"],
            false
        );
    }

    #[test]
    fn bad_parameters_are_rejected() {
        let e =
            check_params("stat", &json!({"path": "/x", "checksum_algorithm": "md4"})).unwrap_err();
        assert_eq!(e.path, "checksum_algorithm");
        let e = check_params("stat", &json!({"path": "/x", "recurse": true})).unwrap_err();
        assert!(e.to_string().contains("recurse"), "{e}");
        let e = check_params("stat", &json!({"follow": true})).unwrap_err();
        assert!(e.to_string().contains("path"), "{e}");
        let e = check_params("stat", &json!({"path": "/x", "follow": "sometimes"})).unwrap_err();
        assert_eq!(e.path, "follow");
        assert!(check_params(
            "stat",
            &json!({"name": "/x", "checksum": "sha256", "mime": true})
        )
        .is_ok());
    }
}
