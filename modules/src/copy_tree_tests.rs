//! Tests of `copy_tree`: a controller tree copied, uploaded in one go, converged, in check mode.

use super::*;
use crate::{run, Ctx};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

const RUN: Ctx = Ctx {
    check: false,
    diff: true,
};

fn file(rel: &str, data: &[u8], mode: u32) -> (Value, Vec<u8>) {
    let v = json!({
        "rel": rel,
        "sha256": hex::encode(sha2::Sha256::digest(data)),
        "sha1": hex::encode(sha1::Sha1::digest(data)),
        "size": data.len(),
        "mode": mode,
    });
    (v, data.to_vec())
}

/// Run the tree copy as the agent and controller do: a first request that asks for the
/// contents, the contents staged and sent, the request repeated.
fn apply(params: &Value, contents: &[Vec<u8>]) -> crate::Outcome {
    match run::<CopyTree>(params, &RUN) {
        Err(ModuleError::NeedContents(wanted)) => {
            stage::begin_many(&wanted).unwrap();
            for (_, sha, _) in &wanted {
                let data = contents
                    .iter()
                    .find(|c| hex::encode(sha2::Sha256::digest(c)) == *sha)
                    .expect("asked for a content of the tree");
                stage::write_chunk(sha, 0, data).unwrap();
            }
            run::<CopyTree>(params, &RUN).unwrap()
        }
        other => other.unwrap(),
    }
}

fn mode_of(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

/// (inode, mtime ns, ctime ns, mode): a rewrite, chmod or chown shows up here.
fn stamp(p: &Path) -> (u64, i64, i64, i64, u32) {
    let m = fs::symlink_metadata(p).unwrap();
    (m.ino(), m.mtime_nsec(), m.ctime(), m.ctime_nsec(), m.mode())
}

// The stage is one per process: every test that uploads is in this one function.
#[test]
fn tree_is_created_uploaded_once_then_converges() {
    let t = tempfile::tempdir().unwrap();
    let dest = t.path().join("new/out");
    let (a, a_data) = file("d/a.conf", b"alpha\n", 0o600);
    let (b, b_data) = file("d/sub/b.sh", b"#!/bin/sh\n", 0o755);
    let (c, _) = file("d/sub/same.conf", b"alpha\n", 0o644);
    let params = json!({
        "_tree": {"dirs": ["d", "d/sub", "d/empty"], "files": [a, b, c]},
        "src": "/controller/files/d", "dest": format!("{}/", dest.display()),
        "directory_mode": "0750", "mode": "preserve",
    });
    let contents = vec![a_data, b_data];

    let checked = run::<CopyTree>(
        &params,
        &Ctx {
            check: true,
            diff: true,
        },
    )
    .unwrap();
    assert!(checked.changed);
    assert_eq!(checked.diff.content.len(), 3);
    assert!(!t.path().join("new").exists(), "check mode must not create");

    // One request asks for both distinct contents (the third file repeats the first's).
    match run::<CopyTree>(&params, &RUN) {
        Err(ModuleError::NeedContents(w)) => assert_eq!(w.len(), 2),
        other => panic!("expected a request for content, got {other:?}"),
    }
    let out = apply(&params, &contents);
    assert!(out.changed);
    assert_eq!(out.result["dest"], format!("{}/", dest.display()));
    assert_eq!(out.result["src"], "/controller/files/d");
    assert_eq!(fs::read(dest.join("d/a.conf")).unwrap(), b"alpha\n");
    assert_eq!(fs::read(dest.join("d/sub/same.conf")).unwrap(), b"alpha\n");
    assert_eq!(mode_of(&dest.join("d/a.conf")), 0o600, "mode: preserve");
    assert_eq!(mode_of(&dest.join("d/sub/b.sh")), 0o755);
    for d in [
        "new",
        "new/out",
        "new/out/d",
        "new/out/d/sub",
        "new/out/d/empty",
    ] {
        assert_eq!(mode_of(&t.path().join(d)), 0o750, "{d}: directory_mode");
    }

    let stamps: Vec<_> = ["d", "d/a.conf", "d/sub/b.sh", "d/sub/same.conf"]
        .iter()
        .map(|r| stamp(&dest.join(r)))
        .collect();
    let again = run::<CopyTree>(&params, &RUN).unwrap();
    assert!(!again.changed, "{:?}", again.diff);
    assert!(again.diff.is_empty());
    let after: Vec<_> = ["d", "d/a.conf", "d/sub/b.sh", "d/sub/same.conf"]
        .iter()
        .map(|r| stamp(&dest.join(r)))
        .collect();
    assert_eq!(stamps, after, "a converged tree is not touched");

    // One changed file: only it is sent and rewritten; a link in a file's place is replaced.
    fs::write(dest.join("d/sub/b.sh"), "changed").unwrap();
    fs::remove_file(dest.join("d/sub/same.conf")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", dest.join("d/sub/same.conf")).unwrap();
    fs::set_permissions(dest.join("d"), fs::Permissions::from_mode(0o700)).unwrap();
    let a_stamp = stamp(&dest.join("d/a.conf"));
    match run::<CopyTree>(&params, &RUN) {
        Err(ModuleError::NeedContents(w)) => assert_eq!(w.len(), 2),
        other => panic!("expected a request for content, got {other:?}"),
    }
    let out = apply(&params, &contents);
    assert!(out.changed);
    assert_eq!(fs::read(dest.join("d/sub/b.sh")).unwrap(), b"#!/bin/sh\n");
    assert!(fs::symlink_metadata(dest.join("d/sub/same.conf"))
        .unwrap()
        .is_file());
    assert_eq!(
        mode_of(&dest.join("d")),
        0o750,
        "existing tree dirs get directory_mode"
    );
    assert_eq!(stamp(&dest.join("d/a.conf")), a_stamp);

    // force: false leaves existing files alone, whatever their content.
    fs::write(dest.join("d/a.conf"), "mine").unwrap();
    let mut keep = params.clone();
    keep["force"] = json!(false);
    assert!(!run::<CopyTree>(&keep, &RUN).unwrap().changed);
    assert_eq!(fs::read(dest.join("d/a.conf")).unwrap(), b"mine");
}

#[test]
fn one_top_file_returns_the_file_result_and_bad_trees_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let (a, _) = file("a", b"x", 0o644);
    fs::write(t.path().join("a"), "x").unwrap();
    let out = run::<CopyTree>(
        &json!({"_tree": {"files": [a.clone()]}, "dest": format!("{}/", t.path().display())}),
        &RUN,
    )
    .unwrap();
    assert!(!out.changed);
    assert_eq!(out.result["dest"], t.path().join("a").display().to_string());
    assert_eq!(
        out.result["checksum"],
        hex::encode(sha1::Sha1::digest(b"x"))
    );

    let bad = |tree: Value| {
        run::<CopyTree>(&json!({"_tree": tree, "dest": "/tmp/x/"}), &RUN)
            .unwrap_err()
            .to_string()
    };
    let (up, _) = file("../up", b"x", 0o644);
    assert!(bad(json!({"files": [up]})).contains("plain relative"));
    let (lost, _) = file("d/f", b"x", 0o644);
    assert!(bad(json!({"files": [lost]})).contains("outside"));
    assert!(bad(json!({"dirs": ["d/e"]})).contains("parent"));

    // A symlink where a directory of the tree goes is not followed.
    std::os::unix::fs::symlink("/etc", t.path().join("d")).unwrap();
    let e = run::<CopyTree>(&json!({"_tree": {"dirs": ["d"]}, "dest": t.path()}), &RUN)
        .unwrap_err()
        .to_string();
    assert!(e.contains("symlink"), "{e}");
}
