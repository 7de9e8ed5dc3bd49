//! Unit tests of the `copy` module: content, attributes, backups, validation, links, remote_src.

use super::*;
use crate::{check_params, run, Ctx, Outcome};
use base64::Engine as _;
use serde_json::json;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

const RUN: Ctx = Ctx {
    check: false,
    diff: true,
};

fn go(params: Value, ctx: &Ctx) -> Outcome {
    run::<Copy>(&params, ctx).unwrap()
}

fn err_of(params: Value) -> String {
    run::<Copy>(&params, &RUN).unwrap_err().to_string()
}

/// (inode, mtime, mtime_nsec, ctime, ctime_nsec, mode, uid, gid, content): a rewrite or chmod shows up here.
fn fingerprint(p: &Path) -> (u64, i64, i64, i64, i64, u32, u32, u32, Vec<u8>) {
    let m = fs::symlink_metadata(p).unwrap();
    (
        m.ino(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
        m.mode(),
        m.uid(),
        m.gid(),
        fs::read(p).unwrap_or_default(),
    )
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn content_is_written_once_then_converges() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("motd");
    let params = json!({"content": "hello\n", "dest": f});

    let checked = go(
        params.clone(),
        &Ctx {
            check: true,
            diff: true,
        },
    );
    assert!(checked.changed);
    assert!(!f.exists(), "check mode must not write");
    assert_eq!(checked.diff.content[0].after, "hello\n");
    assert!(listing(t.path()).is_empty(), "no temp file left behind");

    let first = go(params.clone(), &RUN);
    assert!(first.changed);
    assert_eq!(fs::read(&f).unwrap(), b"hello\n");
    // sha1, as Ansible's copy returns.
    assert_eq!(
        first.result["checksum"],
        "f572d396fae9206628714fb2ce00f72e94f2258f"
    );
    assert_eq!(first.result["size"], 6);
    assert_eq!(first.result["state"], "file");
    assert_eq!(first.result["dest"], f.display().to_string());
    assert_eq!(first.result["owner"], "root");
    assert_eq!(first.result["mode"], mode_str(0o666 & !current_umask()));
    assert!(first
        .diff
        .attrs
        .iter()
        .any(|a| a.attr == "state" && a.after == "file"));

    let stable = fingerprint(&f);
    let second = go(params, &RUN);
    assert!(!second.changed);
    assert!(second.diff.is_empty());
    assert_eq!(second.result["changed"], false);
    assert_eq!(second.result["checksum"], first.result["checksum"]);
    assert_eq!(
        fingerprint(&f),
        stable,
        "a converged copy must not rewrite, chmod or chown"
    );
    assert_eq!(listing(t.path()), vec!["motd"]);
}

#[test]
fn changed_content_keeps_owner_group_mode_and_fills_diff() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("conf");
    fs::write(&f, "old\n").unwrap();
    fs::set_permissions(&f, fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::chown(&f, Some(65534), Some(65534)).unwrap();

    let quiet = go(
        json!({"content": "new\n", "dest": f}),
        &Ctx {
            check: true,
            diff: false,
        },
    );
    assert!(quiet.changed);
    assert_eq!(
        quiet.diff.content.len(),
        1,
        "the diff still names the changed file"
    );
    assert_eq!(quiet.diff.content[0].before, "", "no text without --diff");
    let untouched = fingerprint(&f);

    // Check mode with an owner change as well: nothing on disk moves.
    let checked = go(
        json!({"content": "new\n", "dest": f, "owner": "root"}),
        &Ctx {
            check: true,
            diff: true,
        },
    );
    assert!(checked.changed);
    assert!(checked
        .diff
        .attrs
        .iter()
        .any(|a| a.attr == "owner" && a.after == "root"));
    assert_eq!(fingerprint(&f), untouched);
    assert_eq!(listing(t.path()), vec!["conf"]);

    let out = go(json!({"content": "new\n", "dest": f}), &RUN);
    assert!(out.changed);
    assert_eq!(out.diff.content[0].before, "old\n");
    assert_eq!(out.diff.content[0].after, "new\n");
    assert!(
        out.diff.attrs.is_empty(),
        "no attribute changes: {:?}",
        out.diff.attrs
    );
    let m = fs::metadata(&f).unwrap();
    assert_eq!((m.mode() & 0o7777, m.uid(), m.gid()), (0o640, 65534, 65534));
    assert_eq!(fs::read(&f).unwrap(), b"new\n");
}

#[test]
fn attribute_only_change_does_not_rewrite() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("f");
    fs::write(&f, "same").unwrap();
    fs::set_permissions(&f, fs::Permissions::from_mode(0o644)).unwrap();
    let (ino, mtime, mtime_ns, ..) = fingerprint(&f);
    let params =
        json!({"content": "same", "dest": f, "mode": "0600", "owner": "nobody", "group": 65534});

    let out = go(params.clone(), &RUN);
    assert!(out.changed);
    assert!(out.diff.content.is_empty());
    let mode = out.diff.attrs.iter().find(|a| a.attr == "mode").unwrap();
    assert_eq!(
        (mode.before.as_str(), mode.after.as_str()),
        ("0644", "0600")
    );
    let after = fingerprint(&f);
    assert_eq!(
        (after.0, after.1, after.2),
        (ino, mtime, mtime_ns),
        "same inode, same mtime"
    );
    assert_eq!((after.5 & 0o7777, after.6, after.7), (0o600, 65534, 65534));
    assert_eq!(out.result["owner"], "nobody");

    let stable = fingerprint(&f);
    assert!(!go(params, &RUN).changed);
    assert_eq!(fingerprint(&f), stable);
}

#[test]
fn controller_file_into_directory_dest() {
    let t = tempfile::tempdir().unwrap();
    let b64 = base64::engine::general_purpose::STANDARD.encode(b"\x00\x01bin");
    let params = json!({"_content_b64": b64, "_src_name": "blob.bin", "src": "files/blob.bin",
                        "dest": t.path(), "mode": "preserve", "_src_mode": 0o750});
    let out = go(params.clone(), &RUN);
    assert!(out.changed);
    let f = t.path().join("blob.bin");
    assert_eq!(fs::read(&f).unwrap(), b"\x00\x01bin");
    assert_eq!(fs::metadata(&f).unwrap().mode() & 0o7777, 0o750);
    assert_eq!(out.result["src"], "files/blob.bin");
    assert!(
        out.diff.content[0].after.starts_with("<binary"),
        "binary is summarised"
    );
    let stable = fingerprint(&f);
    assert!(!go(params, &RUN).changed);
    assert_eq!(fingerprint(&f), stable);

    // A trailing slash creates the missing directories, with directory_mode.
    let dest = format!("{}/new/sub/", t.path().display());
    let params = json!({"_content_b64": b64, "_src_name": "blob.bin", "dest": dest,
                        "directory_mode": "0700"});
    assert!(go(params.clone(), &RUN).changed);
    assert!(t.path().join("new/sub/blob.bin").is_file());
    assert_eq!(
        fs::metadata(t.path().join("new")).unwrap().mode() & 0o7777,
        0o700
    );
    assert!(!go(params, &RUN).changed);
}

#[test]
fn content_into_a_directory_or_missing_parent_fails_clearly() {
    let t = tempfile::tempdir().unwrap();
    let e = err_of(json!({"content": "x", "dest": t.path()}));
    assert!(
        e.contains("is a directory") && e.contains("file name"),
        "{e}"
    );
    let e = err_of(json!({"content": "x", "dest": format!("{}/d/", t.path().display())}));
    assert!(e.contains("directory"), "{e}");
    let e = err_of(json!({"content": "x", "dest": t.path().join("nodir/f")}));
    assert!(e.contains("does not exist"), "{e}");
    assert!(listing(t.path()).is_empty());
}

#[test]
fn force_false_leaves_existing_files_alone() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("f");
    fs::write(&f, "mine").unwrap();
    let stable = fingerprint(&f);
    let out = go(
        json!({"content": "theirs", "dest": f, "force": "no", "mode": "0600"}),
        &RUN,
    );
    assert!(!out.changed);
    // ansible-core's action says nothing more than the task's dest and `changed`.
    assert_eq!(out.msg, None);
    assert_eq!(out.result["dest"], json!(f.display().to_string()));
    assert_eq!(fingerprint(&f), stable);
    let g = t.path().join("g");
    assert!(
        go(
            json!({"content": "theirs", "dest": g, "force": false}),
            &RUN
        )
        .changed
    );
    assert_eq!(fs::read(&g).unwrap(), b"theirs");
}

#[test]
fn backup_keeps_the_old_content() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("f");
    fs::write(&f, "v1").unwrap();
    let out = go(json!({"content": "v2", "dest": f, "backup": true}), &RUN);
    let b = out.result["backup_file"].as_str().unwrap();
    assert_eq!(fs::read(b).unwrap(), b"v1");
    assert_eq!(fs::read(&f).unwrap(), b"v2");
    let again = go(json!({"content": "v2", "dest": f, "backup": true}), &RUN);
    assert!(!again.changed);
    assert!(again.result.get("backup_file").is_none());
    assert_eq!(listing(t.path()).len(), 2, "no second backup");
}

#[test]
fn validate_runs_before_the_rename() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("sudoers");
    fs::write(&f, "good\n").unwrap();
    let e = run::<Copy>(
        &json!({"content": "bad\n", "dest": f, "validate": "grep -q good %s"}),
        &RUN,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("validate"), "{e}");
    assert_eq!(
        fs::read(&f).unwrap(),
        b"good\n",
        "a failed validate leaves dest alone"
    );
    assert_eq!(
        listing(t.path()),
        vec!["sudoers"],
        "no temp file left behind"
    );
    let ok = go(
        json!({"content": "good too\n", "dest": f, "validate": "grep -q good %s"}),
        &RUN,
    );
    assert!(ok.changed);
    assert_eq!(fs::read(&f).unwrap(), b"good too\n");
}

#[test]
fn symlink_dest_is_replaced_unless_followed() {
    let t = tempfile::tempdir().unwrap();
    let target = t.path().join("target");
    fs::write(&target, "target").unwrap();
    fs::set_permissions(&target, fs::Permissions::from_mode(0o600)).unwrap();
    let l = t.path().join("l");
    symlink(&target, &l).unwrap();

    let out = go(
        json!({"content": "followed", "dest": l, "follow": true}),
        &RUN,
    );
    assert!(out.changed);
    assert_eq!(fs::read(&target).unwrap(), b"followed");
    assert!(fs::symlink_metadata(&l).unwrap().file_type().is_symlink());
    assert_eq!(fs::metadata(&target).unwrap().mode() & 0o7777, 0o600);

    let out = go(json!({"content": "own file", "dest": l}), &RUN);
    assert!(out.changed);
    assert!(out
        .diff
        .attrs
        .iter()
        .any(|a| a.attr == "state" && a.before == "link"));
    let m = fs::symlink_metadata(&l).unwrap();
    assert!(m.is_file());
    assert_eq!(
        m.mode() & 0o7777,
        0o666 & !current_umask(),
        "not the target's mode"
    );
    assert_eq!(fs::read(&l).unwrap(), b"own file");
    assert_eq!(fs::read(&target).unwrap(), b"followed", "target untouched");
    assert!(!go(json!({"content": "own file", "dest": l}), &RUN).changed);
}

#[test]
fn remote_src_copies_a_host_file() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("script.sh");
    fs::write(&src, "#!/bin/sh\n").unwrap();
    fs::set_permissions(&src, fs::Permissions::from_mode(0o755)).unwrap();
    let dest = t.path().join("copy.sh");
    let params = json!({"src": src, "remote_src": true, "dest": dest});
    assert!(go(params.clone(), &RUN).changed);
    assert_eq!(fs::read(&dest).unwrap(), b"#!/bin/sh\n");
    assert_eq!(
        fs::metadata(&dest).unwrap().mode() & 0o7777,
        0o755,
        "new file gets src's mode"
    );
    assert!(!go(params, &RUN).changed);

    let dir = t.path().join("into");
    fs::create_dir(&dir).unwrap();
    assert!(go(json!({"src": src, "remote_src": "yes", "dest": dir}), &RUN).changed);
    assert!(dir.join("script.sh").is_file());

    let e = err_of(json!({"src": t.path().join("nope"), "remote_src": true, "dest": dest}));
    assert!(e.contains("not found"), "{e}");
    let e = err_of(json!({"src": dir, "remote_src": true, "dest": dest}));
    assert!(e.contains("directory"), "{e}");
    let e = err_of(json!({"src": "files/x", "dest": dest}));
    assert!(e.contains("remote_src"), "{e}");
}

#[test]
fn non_string_content_is_written_as_json() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("j");
    go(json!({"content": {"a": 1}, "dest": f}), &RUN);
    assert_eq!(fs::read_to_string(&f).unwrap(), r#"{"a":1}"#);
}

#[test]
fn bad_parameters_are_rejected_with_the_field_named() {
    let e = check_params("copy", &json!({"dest": "/x"}))
        .unwrap_err()
        .to_string();
    assert!(e.contains("content") && e.contains("src"), "{e}");
    let e = check_params("copy", &json!({"content": "x"}))
        .unwrap_err()
        .to_string();
    assert!(e.contains("dest"), "{e}");
    let e = check_params("copy", &json!({"content": "x", "src": "y", "dest": "/x"})).unwrap_err();
    assert!(e.to_string().contains("mutually exclusive"), "{e}");
    let e = check_params(
        "copy",
        &json!({"content": "x", "dest": "/x", "validate": "visudo -c"}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("%s"), "{e}");
    let e = check_params(
        "copy",
        &json!({"content": "x", "dest": "/x", "mode": "preserve"}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("preserve"), "{e}");
    let e = check_params(
        "copy",
        &json!({"remote_src": true, "dest": "/x", "content": "y"}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("remote_src"), "{e}");
    let e = check_params(
        "copy",
        &json!({"content": "x", "dest": "/x", "backup": "perhaps"}),
    )
    .unwrap_err();
    assert_eq!(e.path, "backup");
    let e = check_params(
        "copy",
        &json!({"content": "x", "dest": "/x", "mode": "0999"}),
    )
    .unwrap_err();
    assert_eq!(e.path, "mode");
    let e = check_params(
        "copy",
        &json!({"content": "x", "dest": "/x", "recurse": true}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("recurse"), "{e}");
    // At load time the controller has not yet turned `src` into content.
    assert!(check_params(
        "copy",
        &json!({"src": "files/a.conf", "dest": "/etc/a.conf", "mode": "preserve"})
    )
    .is_ok());
    assert!(check_params(
        "copy",
        &json!({"content": "x", "dest": "/x", "thirsty": "no"})
    )
    .is_ok());
    let e = err_of(json!({"_content_b64": "!!!", "dest": "/tmp/x"}));
    assert!(e.contains("_content_b64"), "{e}");
}
