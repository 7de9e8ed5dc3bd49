//! Tests of the `file` module: each state, `follow`, `recurse`, times, check mode and bad parameters.

use super::params::parse_time;
use super::*;
use crate::testutil::{CHECK, RUN};
use crate::{check_params, run, Ctx};
use nix::sys::stat::UtimensatFlags;
use nix::sys::time::TimeSpec;
use serde_json::json;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

/// Everything observable about a tree (lstat, without following links), to prove "nothing changed".
fn snapshot(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    fn rec(p: &Path, out: &mut Vec<String>) {
        let m = fs::symlink_metadata(p).unwrap();
        let body = if m.file_type().is_symlink() {
            format!("-> {}", fs::read_link(p).unwrap().display())
        } else if m.is_file() {
            format!("{:?}", read_noatime(p))
        } else {
            String::new()
        };
        out.push(format!(
            "{} mode={:o} uid={} gid={} ino={} mtime={}.{} ctime={}.{} {}",
            p.display(),
            m.mode(),
            m.uid(),
            m.gid(),
            m.ino(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
            body
        ));
        if m.is_dir() {
            let mut names: Vec<_> = fs::read_dir(p)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            names.sort();
            for n in names {
                rec(&n, out);
            }
        }
    }
    rec(root, &mut out);
    out
}

/// Read without updating the access time, which some tests pin.
fn read_noatime(p: &Path) -> Vec<u8> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOATIME)
        .open(p)
        .unwrap();
    let mut v = Vec::new();
    f.read_to_end(&mut v).unwrap();
    v
}

fn mode_of(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

fn run_file(params: Value, ctx: &Ctx) -> crate::Outcome {
    run::<File>(&params, ctx).unwrap()
}

fn err_of(params: Value) -> String {
    run::<File>(&params, &RUN).unwrap_err().to_string()
}

#[test]
fn directory_is_created_with_parents_and_converges() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("a/b/c");
    let params = json!({"path": d, "state": "directory", "mode": "0750"});

    let before = snapshot(t.path());
    let checked = run_file(params.clone(), &CHECK);
    assert!(checked.changed);
    assert_eq!(
        snapshot(t.path()),
        before,
        "check mode must not touch the disk"
    );
    assert!(checked
        .diff
        .attrs
        .iter()
        .any(|a| a.attr == "state" && a.after == "directory" && a.path.ends_with("a/b/c")));

    let first = run_file(params.clone(), &RUN);
    assert!(first.changed);
    assert!(d.is_dir());
    // Like Ansible, every created directory gets the mode.
    assert_eq!(mode_of(&t.path().join("a")), 0o750);
    assert_eq!(mode_of(&d), 0o750);
    assert_eq!(first.result["state"], "directory");
    assert_eq!(first.result["mode"], "0750");

    let stable = snapshot(t.path());
    let second = run_file(params, &RUN);
    assert!(!second.changed);
    assert!(second.diff.is_empty());
    assert_eq!(second.result["mode"], "0750");
    assert_eq!(
        snapshot(t.path()),
        stable,
        "a converged run must not write anything"
    );
}

#[test]
fn directory_over_a_file_fails_clearly() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("f");
    fs::write(&f, "x").unwrap();
    let e = err_of(json!({"path": f, "state": "directory"}));
    assert!(e.contains("already exists as a file"), "{e}");
    let e = err_of(json!({"path": f.join("sub"), "state": "directory"}));
    assert!(e.contains("is not a directory"), "{e}");
}

#[test]
fn mode_owner_group_change_without_rewrite_and_converge() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("f");
    fs::write(&f, "data").unwrap();
    fs::set_permissions(&f, fs::Permissions::from_mode(0o644)).unwrap();
    let ino = fs::metadata(&f).unwrap().ino();
    let params = json!({"path": f, "mode": "0600", "owner": "65534", "group": 65534});

    let first = run_file(params.clone(), &RUN);
    assert!(first.changed);
    let m = fs::metadata(&f).unwrap();
    assert_eq!(
        (m.mode() & 0o7777, m.uid(), m.gid(), m.ino()),
        (0o600, 65534, 65534, ino)
    );
    assert_eq!(fs::read(&f).unwrap(), b"data");
    let mode_diff = first.diff.attrs.iter().find(|a| a.attr == "mode").unwrap();
    assert_eq!(
        (mode_diff.before.as_str(), mode_diff.after.as_str()),
        ("0644", "0600")
    );
    assert!(first.diff.attrs.iter().any(|a| a.attr == "owner"));
    assert!(first.diff.attrs.iter().any(|a| a.attr == "group"));
    assert_eq!(first.result["uid"], 65534);
    assert_eq!(first.result["state"], "file");

    let stable = snapshot(t.path());
    let second = run_file(params, &RUN);
    assert!(!second.changed);
    assert_eq!(snapshot(t.path()), stable);
}

#[test]
fn symbolic_mode_converges() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("f");
    fs::write(&f, "").unwrap();
    fs::set_permissions(&f, fs::Permissions::from_mode(0o666)).unwrap();
    let params = json!({"path": f, "state": "file", "mode": "go-w,u+x"});
    assert!(run_file(params.clone(), &RUN).changed);
    assert_eq!(mode_of(&f), 0o744);
    assert!(!run_file(params, &RUN).changed);
}

#[test]
fn chown_keeps_setuid_bit() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("suid");
    fs::write(&f, "").unwrap();
    fs::set_permissions(&f, fs::Permissions::from_mode(0o4755)).unwrap();
    let params = json!({"path": f, "owner": "65534"});
    assert!(run_file(params.clone(), &RUN).changed);
    assert_eq!(mode_of(&f), 0o4755, "chown must not lose the setuid bit");
    assert!(!run_file(params, &RUN).changed);
}

#[test]
fn state_file_on_missing_path_fails_like_ansible() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("nope");
    let e = err_of(json!({"path": f, "state": "file"}));
    assert!(e.contains("is absent, cannot continue"), "{e}");
    // No state and a missing path means state: file.
    let e = err_of(json!({"path": f, "mode": "0644"}));
    assert!(e.contains("is absent, cannot continue"), "{e}");
    assert!(!f.exists());
}

/// Set both times of `f` to an old instant, so a bump is visible.
fn age(f: &Path) {
    let old = TimeSpec::new(1_000_000, 0);
    nix::sys::stat::utimensat(None, f, &old, &old, UtimensatFlags::FollowSymlink).unwrap();
}

#[test]
fn touch_creates_then_bumps_times_unless_preserved() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("t");
    let params = json!({"path": f, "state": "touch", "mode": "0640"});

    let before = snapshot(t.path());
    assert!(run_file(params.clone(), &CHECK).changed);
    assert_eq!(snapshot(t.path()), before);

    let first = run_file(params.clone(), &RUN);
    assert!(first.changed);
    assert_eq!(mode_of(&f), 0o640);
    assert_eq!(first.result["dest"], f.display().to_string());

    // Touch means touch, as in Ansible: both times move to now, every run, and check mode
    // reports that without doing it.
    age(&f);
    let aged = snapshot(t.path());
    assert!(run_file(params.clone(), &CHECK).changed);
    assert_eq!(snapshot(t.path()), aged);
    assert!(run_file(params, &RUN).changed);
    let m = fs::metadata(&f).unwrap();
    assert!(m.mtime() > 1_000_000 && m.atime() > 1_000_000);

    // Both preserved: the idempotent form.
    age(&f);
    let aged = snapshot(t.path());
    let keep = json!({"path": f, "state": "touch", "modification_time": "preserve",
                      "access_time": "preserve"});
    assert!(!run_file(keep, &RUN).changed);
    assert_eq!(snapshot(t.path()), aged);

    // One preserved: only the other moves.
    let one = run_file(
        json!({"path": f, "state": "touch", "access_time": "preserve"}),
        &RUN,
    );
    assert!(one.changed);
    let m = fs::metadata(&f).unwrap();
    assert!(m.mtime() > 1_000_000);
    assert_eq!(m.atime(), 1_000_000, "access_time stays preserved");
}

#[test]
fn explicit_times_are_set_once() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("f");
    fs::write(&f, "").unwrap();
    let params = json!({
        "path": f,
        "state": "file",
        "modification_time": "2001-02-03 04:05:06",
        "modification_time_format": "%Y-%m-%d %H:%M:%S",
        "access_time": "200102030405.06",
    });
    let first = run_file(params.clone(), &RUN);
    assert!(first.changed);
    assert!(first.diff.attrs.iter().any(|a| a.attr == "mtime"));
    let m = fs::metadata(&f).unwrap();
    assert_eq!(m.mtime(), m.atime());
    assert_eq!(
        m.mtime(),
        parse_time("200102030405.06", "%Y%m%d%H%M.%S").unwrap()
    );
    let stable = snapshot(t.path());
    assert!(!run_file(params, &RUN).changed);
    assert_eq!(snapshot(t.path()), stable);
}

#[test]
fn parse_time_reads_fields_and_rejects_garbage() {
    let a = parse_time("202401311530.00", "%Y%m%d%H%M.%S").unwrap();
    let b = parse_time("202401311531.05", "%Y%m%d%H%M.%S").unwrap();
    assert_eq!(b - a, 65);
    assert!(parse_time("2024013115", "%Y%m%d%H%M.%S").is_err());
    assert!(parse_time("202413311530.00", "%Y%m%d%H%M.%S").is_err());
    assert!(parse_time("202401311530.00x", "%Y%m%d%H%M.%S").is_err());
    assert!(parse_time("2024", "%j").is_err());
}

#[test]
fn symlink_created_converges_and_retargets() {
    let t = tempfile::tempdir().unwrap();
    fs::write(t.path().join("one"), "1").unwrap();
    fs::write(t.path().join("two"), "2").unwrap();
    let l = t.path().join("l");
    let params = json!({"path": l, "state": "link", "src": "one"});

    let first = run_file(params.clone(), &RUN);
    assert!(first.changed);
    assert_eq!(fs::read_link(&l).unwrap(), Path::new("one"));
    assert_eq!(first.result["state"], "link");
    assert_eq!(first.result["src"], "one");
    assert_eq!(first.result["dest"], l.display().to_string());

    let stable = snapshot(t.path());
    assert!(!run_file(params, &RUN).changed);
    assert_eq!(snapshot(t.path()), stable);

    let re = run_file(json!({"path": l, "state": "link", "src": "two"}), &RUN);
    assert!(re.changed);
    let d = re.diff.attrs.iter().find(|a| a.attr == "src").unwrap();
    assert_eq!((d.before.as_str(), d.after.as_str()), ("one", "two"));
    assert_eq!(fs::read_to_string(&l).unwrap(), "2");
}

#[test]
fn symlink_refusals_and_force() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("f");
    fs::write(&f, "keep").unwrap();
    fs::write(t.path().join("target"), "").unwrap();

    let e = err_of(json!({"path": f, "state": "link", "src": "target"}));
    assert!(
        e.contains("refusing to convert from file to symlink"),
        "{e}"
    );
    assert_eq!(fs::read(&f).unwrap(), b"keep");

    let e = err_of(json!({"path": t.path().join("l"), "state": "link", "src": "missing"}));
    assert!(
        e.contains("src file does not exist") && e.contains("force"),
        "{e}"
    );

    // force: replaces the file; and allows a dangling link.
    assert!(
        run_file(
            json!({"path": f, "state": "link", "src": "target", "force": "yes"}),
            &RUN
        )
        .changed
    );
    assert!(fs::symlink_metadata(&f).unwrap().file_type().is_symlink());
    assert!(
        run_file(
            json!({"path": t.path().join("l"), "state": "link", "src": "missing", "force": true}),
            &RUN
        )
        .changed
    );

    let d = t.path().join("d");
    fs::create_dir(&d).unwrap();
    fs::write(d.join("x"), "").unwrap();
    let e = err_of(json!({"path": d, "state": "link", "src": "target", "force": true}));
    assert!(e.contains("not empty"), "{e}");
    fs::remove_file(d.join("x")).unwrap();
    assert!(
        run_file(
            json!({"path": d, "state": "link", "src": "target", "force": true}),
            &RUN
        )
        .changed
    );
    assert_eq!(fs::read_link(&d).unwrap(), Path::new("target"));
}

#[test]
fn link_without_src_keeps_an_existing_link_and_cannot_create_one() {
    let t = tempfile::tempdir().unwrap();
    let target = t.path().join("target");
    fs::write(&target, "").unwrap();
    fs::set_permissions(&target, fs::Permissions::from_mode(0o644)).unwrap();
    let l = t.path().join("l");
    std::os::unix::fs::symlink("target", &l).unwrap();
    // Ansible's file target: attributes of the link itself, its target untouched.
    let params = json!({"path": l, "state": "link", "mode": "0600", "follow": false});
    check_params("file", &params).unwrap();
    let out = run_file(params, &RUN);
    assert!(!out.changed);
    assert_eq!(fs::read_link(&l).unwrap(), Path::new("target"));
    assert_eq!(mode_of(&target), 0o644);
    let missing = json!({"path": t.path().join("new"), "state": "link"});
    let e = run::<File>(&missing, &RUN).unwrap_err().to_string();
    assert!(
        e.starts_with("src is required for creating new symlinks"),
        "{e}"
    );
    // Likewise `state: hard`: decided on the host, in ansible-core's words.
    check_params("file", &json!({"path": "/x", "state": "hard"})).unwrap();
    let missing = json!({"path": t.path().join("new"), "state": "hard"});
    let e = run::<File>(&missing, &RUN).unwrap_err().to_string();
    assert_eq!(e, "src is required for creating new hardlinks");
}

#[test]
fn follow_decides_where_link_attributes_go() {
    let t = tempfile::tempdir().unwrap();
    let target = t.path().join("target");
    fs::write(&target, "").unwrap();
    fs::set_permissions(&target, fs::Permissions::from_mode(0o644)).unwrap();
    let l = t.path().join("l");

    // Default follow: the mode lands on the target.
    let out = run_file(
        json!({"path": l, "state": "link", "src": "target", "mode": "0600"}),
        &RUN,
    );
    assert!(out.changed);
    assert_eq!(mode_of(&target), 0o600);
    assert!(
        !run_file(
            json!({"path": l, "state": "link", "src": "target", "mode": "0600"}),
            &RUN
        )
        .changed
    );

    // follow: false: owner goes on the link itself, mode is ignored, the target is untouched.
    let params = json!({"path": l, "state": "link", "src": "target", "mode": "0640",
                        "owner": "65534", "follow": false});
    assert!(run_file(params.clone(), &RUN).changed);
    assert_eq!(fs::symlink_metadata(&l).unwrap().uid(), 65534);
    let tm = fs::metadata(&target).unwrap();
    assert_eq!((tm.mode() & 0o7777, tm.uid()), (0o600, 0));
    let stable = snapshot(t.path());
    assert!(!run_file(params, &RUN).changed);
    assert_eq!(snapshot(t.path()), stable);

    // state: file through a link with follow changes the target and reports its path.
    let out = run_file(json!({"path": l, "state": "file", "mode": "0604"}), &RUN);
    assert_eq!(mode_of(&target), 0o604);
    assert_eq!(
        out.result["path"],
        fs::canonicalize(&target).unwrap().display().to_string()
    );
    let e = err_of(json!({"path": l, "state": "file", "follow": false}));
    assert!(e.contains("is link, cannot continue"), "{e}");
}

#[test]
fn no_state_on_a_hard_linked_file_is_hard_and_needs_no_src() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    fs::write(&a, "x").unwrap();
    fs::set_permissions(&a, fs::Permissions::from_mode(0o644)).unwrap();
    let b = t.path().join("b");
    fs::hard_link(&a, &b).unwrap();

    let out = run_file(json!({"path": b}), &RUN);
    assert!(!out.changed);
    assert_eq!(out.result["state"], "hard");
    assert_eq!(out.result["dest"], json!(b));
    assert_eq!(out.result["src"], Value::Null);
    assert!(out.result.get("path").is_none());

    let out = run_file(json!({"path": b, "mode": "0600"}), &RUN);
    assert!(out.changed);
    assert_eq!(mode_of(&a), 0o600);
    assert!(!run_file(json!({"path": b, "mode": "0600"}), &RUN).changed);
}

#[test]
fn hard_link_created_converges_and_needs_force_to_replace() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    fs::write(&src, "s").unwrap();
    let h = t.path().join("h");
    let params = json!({"path": h, "state": "hard", "src": src});

    let before = snapshot(t.path());
    assert!(run_file(params.clone(), &CHECK).changed);
    assert_eq!(snapshot(t.path()), before);

    let first = run_file(params.clone(), &RUN);
    assert!(first.changed);
    assert_eq!(
        fs::metadata(&h).unwrap().ino(),
        fs::metadata(&src).unwrap().ino()
    );
    assert_eq!(first.result["state"], "hard");

    let stable = snapshot(t.path());
    assert!(!run_file(params, &RUN).changed);
    assert_eq!(snapshot(t.path()), stable);

    let other = t.path().join("other");
    fs::write(&other, "o").unwrap();
    let e = err_of(json!({"path": other, "state": "hard", "src": "src"}));
    assert!(e.contains("Cannot link") && e.contains("force"), "{e}");
    assert!(
        run_file(
            json!({"path": other, "state": "hard", "src": "src", "force": true}),
            &RUN
        )
        .changed
    );
    assert_eq!(
        fs::metadata(&other).unwrap().ino(),
        fs::metadata(&src).unwrap().ino()
    );

    // Into an existing directory: the link is named like the source (Ansible).
    let d = t.path().join("d");
    fs::create_dir(&d).unwrap();
    assert!(run_file(json!({"path": d, "state": "hard", "src": src}), &RUN).changed);
    assert_eq!(
        fs::metadata(d.join("src")).unwrap().ino(),
        fs::metadata(&src).unwrap().ino()
    );

    let e = err_of(json!({"path": t.path().join("x"), "state": "hard", "src": "nope"}));
    assert!(e.contains("does not exist"), "{e}");
}

#[test]
fn absent_removes_trees_and_links_but_not_link_targets() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("d");
    fs::create_dir_all(d.join("sub")).unwrap();
    fs::write(d.join("sub/f"), "").unwrap();
    let keep = t.path().join("keep");
    fs::create_dir(&keep).unwrap();
    fs::write(keep.join("precious"), "").unwrap();
    let l = t.path().join("l");
    symlink(&keep, &l).unwrap();

    let before = snapshot(t.path());
    let checked = run_file(json!({"path": d, "state": "absent"}), &CHECK);
    assert!(checked.changed);
    assert_eq!(checked.diff.attrs[0].before, "directory");
    assert_eq!(snapshot(t.path()), before);

    assert!(run_file(json!({"path": d, "state": "absent"}), &RUN).changed);
    assert!(!d.exists());
    assert!(run_file(json!({"path": l, "state": "absent"}), &RUN).changed);
    assert!(fs::symlink_metadata(&l).is_err());
    assert!(keep.join("precious").exists());

    let e = check_params("file", &json!({"path": "/", "state": "absent"}));
    assert!(e.is_ok(), "the refusal is a run-time check");
    // Check mode: if this guard ever broke, the test must not remove the machine's files.
    let e = run::<File>(&json!({"path": "/", "state": "absent"}), &CHECK)
        .unwrap_err()
        .to_string();
    assert!(e.contains("refusing to remove /"), "{e}");

    let again = run_file(json!({"path": d, "state": "absent"}), &RUN);
    assert!(!again.changed);
    assert_eq!(again.result["state"], "absent");
}

#[test]
fn recurse_sets_the_whole_tree_and_converges() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("tree");
    fs::create_dir_all(root.join("a/b")).unwrap();
    fs::write(root.join("a/f"), "").unwrap();
    fs::write(root.join("a/b/g"), "").unwrap();
    let outside = t.path().join("outside");
    fs::write(&outside, "").unwrap();
    symlink(&outside, root.join("a/l")).unwrap();

    let params = json!({"path": root, "state": "directory", "recurse": true,
                        "owner": "65534", "mode": "u=rwX,go=rX", "follow": false});
    assert!(run_file(params.clone(), &RUN).changed);
    for p in ["", "a", "a/b", "a/f", "a/b/g"] {
        let m = fs::symlink_metadata(root.join(p)).unwrap();
        assert_eq!(m.uid(), 65534, "{p}");
        assert_eq!(
            m.mode() & 0o7777,
            if m.is_dir() { 0o755 } else { 0o644 },
            "{p}"
        );
    }
    assert_eq!(fs::symlink_metadata(root.join("a/l")).unwrap().uid(), 65534);
    assert_eq!(
        fs::metadata(&outside).unwrap().uid(),
        0,
        "follow: false stays in the tree"
    );

    let stable = snapshot(t.path());
    assert!(!run_file(params, &RUN).changed);
    assert_eq!(snapshot(t.path()), stable);

    // Default follow reaches the link's target, as Ansible does.
    let params = json!({"path": root, "recurse": true, "owner": "65534"});
    assert!(run_file(params, &RUN).changed);
    assert_eq!(fs::metadata(&outside).unwrap().uid(), 65534);
}

#[test]
fn check_mode_with_changes_leaves_disk_alone() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("f");
    fs::write(&f, "x").unwrap();
    let before = snapshot(t.path());
    for params in [
        json!({"path": f, "mode": "0700", "owner": "nobody"}),
        json!({"path": f, "state": "touch", "modification_time": "now"}),
        json!({"path": f, "state": "link", "src": "/etc", "force": true}),
        json!({"path": f, "state": "absent"}),
        json!({"path": t.path().join("n/m"), "state": "directory"}),
    ] {
        let out = run_file(params.clone(), &CHECK);
        assert!(out.changed, "{params}");
        assert!(!out.diff.is_empty(), "{params}");
        assert_eq!(snapshot(t.path()), before, "{params}");
    }
}

#[test]
fn aliases_and_bad_parameters() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("x");
    assert!(run_file(json!({"dest": d, "state": "directory"}), &RUN).changed);
    assert!(!run_file(json!({"name": d, "state": "directory"}), &RUN).changed);

    // `state: link` without `src` is decided on the host (an existing link keeps its target).
    check_params("file", &json!({"path": "/x", "state": "link"})).unwrap();
    let e = check_params("file", &json!({"path": "/x", "src": "/y"})).unwrap_err();
    assert!(e
        .to_string()
        .contains("src option requires state to be 'link' or 'hard'"));
    let e = check_params("file", &json!({"state": "hard"})).unwrap_err();
    assert_eq!(e.to_string(), "missing required arguments: path");
    let e = check_params("file", &json!({"path": "/x", "state": "dir"})).unwrap_err();
    assert_eq!(e.path, "state");
    let e = check_params("file", &json!({"path": "/x", "mode": "rw-r--r--"})).unwrap_err();
    assert_eq!(e.path, "mode");
    let e = check_params("file", &json!({"path": "/x", "colour": "red"})).unwrap_err();
    assert!(e.to_string().contains("colour"), "{e}");
    let e = check_params(
        "file",
        &json!({"path": "/x", "state": "file", "recurse": true}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("recurse"), "{e}");
    let e = check_params(
        "file",
        &json!({"path": "/x", "state": "touch", "src": "/y"}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("src"), "{e}");
    let e = check_params(
        "file",
        &json!({"path": "/x", "modification_time": "yesterday"}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("modification_time"), "{e}");
    let e = check_params("file", &json!({"path": "/x", "follow": "maybe"})).unwrap_err();
    assert_eq!(e.path, "follow");
    let e = check_params("file", &json!({"state": "file"})).unwrap_err();
    assert!(e.to_string().contains("path"), "{e}");
    assert!(check_params("file", &json!({"path": "/x", "state": "link", "src": "/y"})).is_ok());

    let e = err_of(json!({"path": d, "owner": "no-such-user-fixpoint"}));
    assert!(e.contains("no-such-user-fixpoint"), "{e}");
}
