//! Hostile-host tests: a local user swaps a file or a directory for a symlink between a module's
//! probe and its apply (the window a root-run task leaves open), or plants files at a backup's
//! name; nothing outside the managed path may change.

use crate::testutil::RUN;
use crate::{parse_params, Module, ModuleError};
use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::Path;

/// probe → plan → `swap` → apply, as `run_hooked` does with its hook in that place.
fn run_swapped<M: Module>(params: Value, swap: impl FnOnce()) -> Result<(), ModuleError> {
    let p: M::Params = parse_params(&params).unwrap();
    M::validate(&p).unwrap();
    let state = M::probe(&p, &RUN).unwrap();
    let plan = M::plan(&p, &state, &RUN).unwrap();
    assert!(!plan.actions.is_empty(), "the test needs a change to apply");
    swap();
    M::apply(&p, state, &plan).map(drop)
}

/// Owner, group, mode, mtime and content of a file, to show it did not change.
fn print(p: &Path) -> (u32, u32, u32, i64, Vec<u8>) {
    let m = fs::symlink_metadata(p).unwrap();
    let content = fs::read(p).unwrap_or_default();
    (m.uid(), m.gid(), m.mode(), m.mtime(), content)
}

/// Every name below `dir` with its owner and mode, following nothing.
fn listing(dir: &Path) -> Vec<(String, u32, u32)> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let m = fs::symlink_metadata(e.path()).unwrap();
        out.push((
            e.file_name().to_string_lossy().into_owned(),
            m.uid(),
            m.mode(),
        ));
        if m.is_dir() {
            for (n, u, md) in listing(&e.path()) {
                out.push((format!("{}/{n}", e.file_name().to_string_lossy()), u, md));
            }
        }
    }
    out.sort();
    out
}

/// A secret outside the tree, owned by root, mode 0600, as /etc/shadow would be.
fn secret(t: &Path) -> std::path::PathBuf {
    let out = t.join("outside");
    fs::create_dir(&out).unwrap();
    let s = out.join("shadow");
    fs::write(&s, "root:secret\n").unwrap();
    fs::set_permissions(&s, fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::chown(&s, Some(0), Some(0)).unwrap();
    s
}

fn recurse_params(tree: &Path, follow: bool) -> Value {
    json!({"path": tree, "state": "directory", "recurse": true, "owner": "65534",
           "group": "65534", "mode": "0755", "follow": follow})
}

#[test]
fn recursive_attrs_do_not_follow_a_file_swapped_for_a_link() {
    for follow in [true, false] {
        let t = tempfile::tempdir().unwrap();
        let shadow = secret(t.path());
        let tree = t.path().join("tree");
        fs::create_dir_all(tree.join("sub")).unwrap();
        fs::write(tree.join("sub/f"), "mine").unwrap();
        let before = print(&shadow);
        let r = run_swapped::<crate::file::File>(recurse_params(&tree, follow), || {
            fs::remove_file(tree.join("sub/f")).unwrap();
            symlink(&shadow, tree.join("sub/f")).unwrap();
        });
        assert_eq!(
            print(&shadow),
            before,
            "follow: {follow}: the secret was changed"
        );
        let err = r
            .expect_err("the swapped entry must be refused")
            .to_string();
        assert!(err.contains("changed since it was examined"), "{err}");
    }
}

#[test]
fn recursive_attrs_do_not_follow_a_directory_swapped_for_a_link() {
    let t = tempfile::tempdir().unwrap();
    let shadow = secret(t.path());
    let tree = t.path().join("tree");
    fs::create_dir_all(tree.join("sub")).unwrap();
    // Same name as the secret: a path-based chown of tree/sub/shadow would land on it.
    fs::write(tree.join("sub/shadow"), "mine").unwrap();
    let before = listing(&t.path().join("outside"));
    let r = run_swapped::<crate::file::File>(recurse_params(&tree, true), || {
        fs::rename(tree.join("sub"), t.path().join("moved")).unwrap();
        symlink(shadow.parent().unwrap(), tree.join("sub")).unwrap();
    });
    assert_eq!(listing(&t.path().join("outside")), before);
    assert!(r.is_err(), "the swapped directory must be refused");
}

#[test]
fn top_path_attrs_do_not_follow_a_file_swapped_for_a_link() {
    let t = tempfile::tempdir().unwrap();
    let shadow = secret(t.path());
    let f = t.path().join("f");
    fs::write(&f, "mine").unwrap();
    let before = print(&shadow);
    let params = json!({"path": f, "owner": "65534", "mode": "0644",
                        "modification_time": "202001010000.00"});
    let r = run_swapped::<crate::file::File>(params, || {
        fs::remove_file(&f).unwrap();
        symlink(&shadow, &f).unwrap();
    });
    assert_eq!(print(&shadow), before);
    assert!(r.is_err());
}

/// The destination's directory becomes a link to `outside` between probe and apply.
fn swap_dir_for_link(t: &Path) -> impl FnOnce() + '_ {
    move || {
        fs::rename(t.join("dir"), t.join("moved")).unwrap();
        symlink(t.join("outside"), t.join("dir")).unwrap();
    }
}

#[test]
fn copy_does_not_write_through_a_parent_swapped_for_a_link() {
    for existing in [false, true] {
        let t = tempfile::tempdir().unwrap();
        secret(t.path());
        fs::create_dir(t.path().join("dir")).unwrap();
        if existing {
            fs::write(t.path().join("dir/shadow"), "old").unwrap();
        }
        let before = listing(&t.path().join("outside"));
        let params = json!({"content": "owned\n", "dest": t.path().join("dir/shadow"),
                            "backup": true});
        let r = run_swapped::<crate::copy::Copy>(params, swap_dir_for_link(t.path()));
        assert_eq!(listing(&t.path().join("outside")), before);
        assert_eq!(
            fs::read(t.path().join("outside/shadow")).unwrap(),
            b"root:secret\n"
        );
        assert!(r.is_err());
    }
}

#[test]
fn copy_attrs_do_not_follow_a_file_swapped_for_a_link() {
    let t = tempfile::tempdir().unwrap();
    let shadow = secret(t.path());
    let f = t.path().join("f");
    fs::write(&f, "same\n").unwrap();
    let before = print(&shadow);
    let params = json!({"content": "same\n", "dest": f, "owner": "65534", "mode": "0644"});
    let r = run_swapped::<crate::copy::Copy>(params, || {
        fs::remove_file(&f).unwrap();
        symlink(&shadow, &f).unwrap();
    });
    assert_eq!(print(&shadow), before);
    assert!(r.is_err());
}

#[test]
fn lineinfile_does_not_write_through_a_parent_swapped_for_a_link() {
    for existing in [false, true] {
        let t = tempfile::tempdir().unwrap();
        secret(t.path());
        fs::create_dir(t.path().join("dir")).unwrap();
        if existing {
            fs::write(t.path().join("dir/shadow"), "a\n").unwrap();
        }
        let before = listing(&t.path().join("outside"));
        let params = json!({"path": t.path().join("dir/shadow"), "line": "evil",
                            "create": true, "backup": true});
        let r = run_swapped::<crate::lineinfile::LineInFile>(params, swap_dir_for_link(t.path()));
        assert_eq!(listing(&t.path().join("outside")), before);
        assert!(r.is_err());
    }
}

#[test]
fn lineinfile_does_not_create_parents_through_a_link() {
    let t = tempfile::tempdir().unwrap();
    secret(t.path());
    fs::create_dir(t.path().join("dir")).unwrap();
    let before = listing(&t.path().join("outside"));
    let params = json!({"path": t.path().join("dir/new/f"), "line": "x", "create": true});
    let r = run_swapped::<crate::lineinfile::LineInFile>(params, swap_dir_for_link(t.path()));
    assert_eq!(listing(&t.path().join("outside")), before);
    assert!(r.is_err());
}

/// The names an attacker can predict for a backup made now by this process: the old scheme
/// (`path.<pid>.<seconds>~`) over the next minutes.
fn predictable_names(path: &Path) -> Vec<std::path::PathBuf> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    (now.saturating_sub(2)..now + 300)
        .map(|s| {
            let mut n = path.as_os_str().to_os_string();
            n.push(format!(".{}.{s}~", std::process::id()));
            n.into()
        })
        .collect()
}

#[test]
fn backups_never_follow_or_overwrite_what_is_at_a_predictable_name() {
    for planted_link in [true, false] {
        let t = tempfile::tempdir().unwrap();
        let shadow = secret(t.path());
        let f = t.path().join("app.conf");
        fs::write(&f, "v1\n").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o640)).unwrap();
        let planted = predictable_names(&f);
        for p in &planted {
            if planted_link {
                symlink(&shadow, p).unwrap();
            } else {
                fs::write(p, "attacker's").unwrap();
            }
        }
        let before = print(&shadow);
        let params = json!({"content": "v2\n", "dest": f, "backup": true});
        let out = crate::run::<crate::copy::Copy>(&params, &RUN).unwrap();
        assert_eq!(print(&shadow), before);
        for p in &planted {
            if planted_link {
                assert_eq!(fs::read_link(p).unwrap(), shadow);
            } else {
                assert_eq!(fs::read(p).unwrap(), b"attacker's");
            }
        }
        let b = Path::new(out.result["backup_file"].as_str().unwrap());
        assert!(!planted.iter().any(|p| p == b), "{}", b.display());
        assert_eq!(b.parent(), f.parent());
        let m = fs::symlink_metadata(b).unwrap();
        assert!(m.is_file());
        assert_eq!(fs::read(b).unwrap(), b"v1\n");
        // As Ansible's backup: the original's mode, once the copy is complete.
        assert_eq!(m.mode() & 0o7777, 0o640);
        assert_eq!(fs::read(&f).unwrap(), b"v2\n");
    }
}

#[test]
fn backup_names_are_not_reused() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("app.conf");
    let mut seen = std::collections::HashSet::new();
    for i in 0..3 {
        let params = json!({"path": f, "line": format!("l{i}"), "create": true, "backup": true});
        let out = crate::run::<crate::lineinfile::LineInFile>(&params, &RUN).unwrap();
        // `backup` is "" when none was made (the run that creates the file), as in Ansible.
        if let Some(b) = out
            .result
            .get("backup")
            .and_then(|b| b.as_str())
            .filter(|b| !b.is_empty())
        {
            assert!(seen.insert(b.to_string()), "backup name {b} reused");
        }
    }
    // Three runs, the first creates the file: two backups, both kept.
    assert_eq!(seen.len(), 2);
}
