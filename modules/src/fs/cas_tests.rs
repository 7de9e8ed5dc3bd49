//! Tests of `if_checksum` (compare-and-swap writes) at the write path and through the modules
//! that take it: the plan-time check, check mode, and an outside writer between the temp file's
//! write and the rename (simulated by the `atomic::hook`, not by timing).

use super::atomic::hook;
use super::cas::{Found, IfChecksum};
use crate::testutil::{setup, CHECK, RUN};
use crate::{parse_params, run, Ctx, Module, ModuleError, Outcome};
use serde_json::{json, Map, Value};
use sha2::Digest as _;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

fn sha(data: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(data))
}

/// The failure's message and result, for a run that must fail.
fn failure(r: Result<Outcome, ModuleError>) -> (String, Map<String, Value>) {
    match r {
        Err(ModuleError::Failed { msg, result }) => (msg, result),
        other => panic!("expected a task failure, got {other:?}"),
    }
}

/// Inode, mtime and content: "nothing was changed" means all three stay.
fn print(p: &Path) -> (u64, i64, i64, Vec<u8>) {
    let m = fs::metadata(p).unwrap();
    (m.ino(), m.mtime(), m.mtime_nsec(), fs::read(p).unwrap())
}

/// Names in `dir`: a failed write must not leave its temp file behind.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn copy(params: Value, ctx: &Ctx) -> Result<Outcome, ModuleError> {
    run::<crate::copy::Copy>(&params, ctx)
}

#[test]
fn if_checksum_reads_a_sha256_or_absent_and_refuses_anything_else() {
    let h = sha(b"x");
    assert_eq!(
        IfChecksum::parse(&h.to_uppercase()),
        Ok(IfChecksum::Sha256(h.clone()))
    );
    assert_eq!(
        IfChecksum::parse(&format!("sha256:{h}")),
        Ok(IfChecksum::Sha256(h.clone()))
    );
    assert_eq!(IfChecksum::parse("absent"), Ok(IfChecksum::Absent));
    for bad in ["", "abc", &h[..63], &format!("{h}0"), "sha1:abc", "Absent"] {
        let e = IfChecksum::parse(bad).unwrap_err();
        assert!(e.contains("64 hex digits") && e.contains("absent"), "{e}");
    }
    // Through a module's parameters, so `validate` refuses it at load with the field named.
    let e = parse_params::<crate::copy::Params>(
        &json!({"dest": "/x", "content": "", "if_checksum": "nope"}),
    )
    .unwrap_err();
    assert_eq!(e.path, "if_checksum");
}

#[test]
fn copy_writes_only_over_the_expected_content() {
    let (dir, path) = setup("old\n");
    let dest = path.to_str().unwrap();
    // Matching: written, with the usual result.
    let out = copy(
        json!({"dest": dest, "content": "new\n", "if_checksum": sha(b"old\n")}),
        &RUN,
    )
    .unwrap();
    assert!(out.changed);
    assert_eq!(fs::read_to_string(&path).unwrap(), "new\n");

    // Not matching (the file is "new\n" now): fails with both sums, changes nothing.
    let before = print(&path);
    let params = json!({"dest": dest, "content": "newer\n", "mode": "0600",
                        "if_checksum": sha(b"old\n")});
    for ctx in [&RUN, &CHECK] {
        let (msg, result) = failure(copy(params.clone(), ctx));
        assert!(
            msg.contains(&sha(b"old\n")) && msg.contains(&sha(b"new\n")),
            "{msg}"
        );
        assert!(
            msg.contains(dest) && msg.contains("nothing was changed"),
            "{msg}"
        );
        assert_eq!(result["expected_checksum"], json!(sha(b"old\n")));
        assert_eq!(result["found_checksum"], json!(sha(b"new\n")));
        assert_eq!(print(&path), before);
    }
    assert_eq!(names(dir.path()), ["f.conf"]);

    // A task that would change nothing is ok whatever the sum: the file already is its content.
    let out = copy(
        json!({"dest": dest, "content": "new\n", "if_checksum": sha(b"old\n")}),
        &RUN,
    )
    .unwrap();
    assert!(!out.changed);
}

#[test]
fn copy_attribute_change_is_guarded_too() {
    let (_dir, path) = setup("a\n");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    let dest = path.to_str().unwrap();
    let wrong = json!({"dest": dest, "content": "a\n", "mode": "0600", "if_checksum": sha(b"b")});
    let (_, result) = failure(copy(wrong, &RUN));
    assert_eq!(result["found_checksum"], json!(sha(b"a\n")));
    assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o644);
    let right = json!({"dest": dest, "content": "a\n", "mode": "0600", "if_checksum": sha(b"a\n")});
    assert!(copy(right, &RUN).unwrap().changed);
    assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
}

#[test]
fn absent_means_the_destination_must_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.conf");
    let dest = path.to_str().unwrap();
    let params = json!({"dest": dest, "content": "x\n", "if_checksum": "absent"});
    // Check mode says it would create it; the run creates it.
    assert!(copy(params.clone(), &CHECK).unwrap().changed);
    assert!(!path.exists());
    assert!(copy(params.clone(), &RUN).unwrap().changed);
    assert_eq!(fs::read_to_string(&path).unwrap(), "x\n");
    // Once it exists, another content is refused, with `absent` as the expected value.
    let (_, result) = failure(copy(
        json!({"dest": dest, "content": "y\n", "if_checksum": "absent"}),
        &RUN,
    ));
    assert_eq!(result["expected_checksum"], json!("absent"));
    assert_eq!(result["found_checksum"], json!(sha(b"x\n")));
    // The sha256 of nothing is an empty file, not a missing one.
    let other = dir.path().join("other.conf");
    let (_, result) = failure(copy(
        json!({"dest": other.to_str().unwrap(), "content": "z", "if_checksum": sha(b"")}),
        &RUN,
    ));
    assert_eq!(result["found_checksum"], json!("absent"));
    assert!(!other.exists());
}

#[test]
fn an_outside_write_between_the_temp_file_and_the_rename_fails_the_task() {
    let (dir, path) = setup("v1\n");
    let dest = path.to_str().unwrap().to_string();
    // The other writer appends in place (same inode) after our temp file is written.
    let _hook = hook::set(|p| {
        let mut f = fs::OpenOptions::new().append(true).open(p).unwrap();
        std::io::Write::write_all(&mut f, b"theirs\n").unwrap();
    });
    let (msg, result) = failure(copy(
        json!({"dest": dest, "content": "v2\n", "if_checksum": sha(b"v1\n")}),
        &RUN,
    ));
    assert!(msg.contains("another writer"), "{msg}");
    assert_eq!(result["expected_checksum"], json!(sha(b"v1\n")));
    assert_eq!(result["found_checksum"], json!(sha(b"v1\ntheirs\n")));
    // Their update is kept, and our temp file is gone.
    assert_eq!(fs::read_to_string(&path).unwrap(), "v1\ntheirs\n");
    assert_eq!(names(dir.path()), ["f.conf"]);
}

#[test]
fn an_outside_rename_over_the_destination_fails_the_task() {
    let (dir, path) = setup("v1\n");
    let dest = path.to_str().unwrap().to_string();
    // Same content, new inode: an editor's save-by-rename.
    let _hook = hook::set(|p| {
        let tmp = p.with_extension("editor");
        fs::write(&tmp, "v1\n").unwrap();
        fs::rename(&tmp, p).unwrap();
    });
    let e = copy(
        json!({"dest": dest, "content": "v2\n", "if_checksum": sha(b"v1\n")}),
        &RUN,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("changed since it was examined"),
        "{e}"
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), "v1\n");
    assert_eq!(names(dir.path()), ["f.conf"]);
}

#[test]
fn the_absent_guard_sees_a_file_created_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.conf");
    let _hook = hook::set(|p| fs::write(p, "theirs\n").unwrap());
    let e = copy(
        json!({"dest": path.to_str().unwrap(), "content": "ours\n", "if_checksum": "absent"}),
        &RUN,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("changed since it was examined"),
        "{e}"
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), "theirs\n");
}

#[test]
fn without_if_checksum_the_write_is_not_rechecked() {
    // Unguarded writes keep their behaviour: last writer wins, as before.
    let (_dir, path) = setup("v1\n");
    let _hook = hook::set(|p| fs::write(p, "theirs\n").unwrap());
    copy(
        json!({"dest": path.to_str().unwrap(), "content": "v2\n"}),
        &RUN,
    )
    .unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "v2\n");
}

#[test]
fn lineinfile_and_blockinfile_edit_only_the_expected_content() {
    let (_dir, path) = setup("a\nb\n");
    let p = path.to_str().unwrap();
    let line = |sum: &str| json!({"path": p, "line": "c", "if_checksum": sum});
    let before = print(&path);
    let (_, result) = failure(run::<crate::lineinfile::LineInFile>(
        &line(&sha(b"a\n")),
        &CHECK,
    ));
    assert_eq!(result["found_checksum"], json!(sha(b"a\nb\n")));
    failure(run::<crate::lineinfile::LineInFile>(
        &line(&sha(b"a\n")),
        &RUN,
    ));
    assert_eq!(print(&path), before);
    let out = run::<crate::lineinfile::LineInFile>(&line(&sha(b"a\nb\n")), &RUN).unwrap();
    assert!(out.changed);
    assert_eq!(fs::read_to_string(&path).unwrap(), "a\nb\nc\n");

    let block = |sum: String| json!({"path": p, "block": "x", "if_checksum": sum});
    failure(run::<crate::blockinfile::BlockInFile>(
        &block(sha(b"a\nb\n")),
        &RUN,
    ));
    assert_eq!(fs::read_to_string(&path).unwrap(), "a\nb\nc\n");
    let out = run::<crate::blockinfile::BlockInFile>(&block(sha(b"a\nb\nc\n")), &RUN).unwrap();
    assert!(out.changed);
    assert!(fs::read_to_string(&path).unwrap().contains("x\n"));

    // An outside append between our temp file and the rename is kept, and the task fails.
    let now = fs::read(&path).unwrap();
    let _hook = hook::set(|p| {
        let mut f = fs::OpenOptions::new().append(true).open(p).unwrap();
        std::io::Write::write_all(&mut f, b"theirs\n").unwrap();
    });
    let (msg, _) = failure(run::<crate::lineinfile::LineInFile>(
        &json!({"path": p, "line": "d", "if_checksum": sha(&now)}),
        &RUN,
    ));
    assert!(msg.contains("another writer"), "{msg}");
    assert!(fs::read_to_string(&path).unwrap().ends_with("theirs\n"));
}

#[test]
fn lineinfile_create_with_absent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("n.conf");
    let params = json!({"path": path.to_str().unwrap(), "line": "k=v", "create": true,
                        "if_checksum": "absent"});
    assert!(
        run::<crate::lineinfile::LineInFile>(&params, &RUN)
            .unwrap()
            .changed
    );
    // A second run finds the line there: nothing to change, so the guard is not consulted.
    assert!(
        !run::<crate::lineinfile::LineInFile>(&params, &RUN)
            .unwrap()
            .changed
    );
    let other = json!({"path": path.to_str().unwrap(), "line": "k2=v", "create": true,
                       "if_checksum": "absent"});
    failure(run::<crate::lineinfile::LineInFile>(&other, &RUN));
}

/// probe → plan → `meddle` → apply, as `run_hooked` does with its hook in that place.
fn file_meddled(params: Value, meddle: impl FnOnce()) -> Result<(), ModuleError> {
    type F = crate::file::File;
    let p: <F as Module>::Params = parse_params(&params).unwrap();
    F::validate(&p).unwrap();
    let state = F::probe(&p, &RUN)?;
    let plan = F::plan(&p, &state, &RUN)?;
    meddle();
    F::apply(&p, state, &plan).map(drop)
}

#[test]
fn file_checks_before_changing_attributes_touching_or_removing() {
    let (dir, path) = setup("a\n");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    let p = path.to_str().unwrap();
    let file = |v: Value| run::<crate::file::File>(&v, &RUN);
    // Attributes: mismatch fails and leaves the mode; match changes it.
    let (_, result) = failure(file(
        json!({"path": p, "mode": "0600", "if_checksum": sha(b"x")}),
    ));
    assert_eq!(result["found_checksum"], json!(sha(b"a\n")));
    assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o644);
    assert!(
        file(json!({"path": p, "mode": "0600", "if_checksum": sha(b"a\n")}))
            .unwrap()
            .changed
    );
    // A write between the plan and the chmod is seen (the re-check in `with_entry`).
    let e = file_meddled(
        json!({"path": p, "mode": "0640", "if_checksum": sha(b"a\n")}),
        || fs::write(&path, "b\n").unwrap(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("another writer"), "{e}");
    assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
    // Absent: removed only when it is the expected content, and re-checked before the unlink.
    failure(file(
        json!({"path": p, "state": "absent", "if_checksum": sha(b"a\n")}),
    ));
    assert!(path.exists());
    let e = file_meddled(
        json!({"path": p, "state": "absent", "if_checksum": sha(b"b\n")}),
        || fs::write(&path, "c\n").unwrap(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("another writer"), "{e}");
    assert_eq!(fs::read_to_string(&path).unwrap(), "c\n");
    assert!(
        file(json!({"path": p, "state": "absent", "if_checksum": sha(b"c\n")}))
            .unwrap()
            .changed
    );
    assert!(!path.exists());
    // Touch: `absent` creates a missing file; an existing one does not match `absent`.
    let t = dir.path().join("t");
    let touch = json!({"path": t.to_str().unwrap(), "state": "touch", "if_checksum": "absent"});
    assert!(file(touch.clone()).unwrap().changed);
    assert!(t.exists());
    let (_, result) = failure(file(json!({"path": t.to_str().unwrap(), "state": "touch",
                                          "mode": "0600", "if_checksum": "absent"})));
    assert_eq!(result["found_checksum"], json!(sha(b"")));
}

#[test]
fn file_refuses_if_checksum_where_there_is_no_content_to_compare() {
    let check = |v: Value| crate::check_params("file", &v).unwrap_err().msg;
    let h = sha(b"");
    for state in ["directory", "link", "hard"] {
        let mut v = json!({"path": "/x", "state": state, "if_checksum": h});
        if state != "directory" {
            v["src"] = json!("/y");
        }
        let e = check(v);
        assert!(e.contains("state: file, touch or absent"), "{state}: {e}");
    }
    let e = check(json!({"path": "/x", "state": "directory", "recurse": true, "if_checksum": h}));
    assert!(e.contains("if_checksum"), "{e}");
    // The modules Ansible writes files with but fixpoint does not guard do not take it.
    for (m, v) in [
        (
            "replace",
            json!({"path": "/x", "regexp": "a", "if_checksum": h}),
        ),
        (
            "ini_file",
            json!({"path": "/x", "section": "s", "if_checksum": h}),
        ),
        ("command", json!({"cmd": "true", "if_checksum": h})),
    ] {
        let e = crate::check_params(m, &v).unwrap_err();
        assert!(e.to_string().contains("if_checksum"), "{m}: {e}");
    }
}

#[test]
fn found_describes_what_has_no_content() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        Found::at_path(dir.path()).unwrap().to_string(),
        "a directory"
    );
    let link = dir.path().join("l");
    std::os::unix::fs::symlink("/etc/hostname", &link).unwrap();
    assert_eq!(Found::at_path(&link).unwrap().to_string(), "a symlink");
    assert_eq!(
        Found::at_path(&dir.path().join("missing")).unwrap(),
        Found::Absent
    );
}
