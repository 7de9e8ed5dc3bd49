//! `copy` of a controller directory over SSH as fpsudo with `become`: `src: dir` and `src: dir/`
//! into destinations that do not exist yet, with owner, group, mode and directory_mode; check
//! mode inert, the rerun ok with nothing rewritten; the contents sent in one go, and after one
//! controller file changes only that file travels and is rewritten.

use crate::fx::{snapshot, Out};
use crate::ssh::Fleet;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// Every entry under `dirs`, with inode: "nothing rewritten" means this does not move.
fn observe(dirs: &[&Path]) -> String {
    let mut s = String::new();
    for d in dirs {
        for (p, desc) in snapshot(d) {
            let ino = std::fs::symlink_metadata(&p).map(|m| m.ino()).unwrap_or(0);
            s.push_str(&format!("{} ino={ino} {desc}\n", p.display()));
        }
    }
    s
}

fn event(out: &Out, task: &str) -> serde_json::Value {
    let evs = out.task_events(task);
    assert_eq!(evs.len(), 1, "one result for {task}: {}", out.stdout);
    evs[0].clone()
}

#[test]
fn copy_of_a_directory_converges_and_sends_only_what_differs() {
    let fleet = Fleet::start(1, "fpsudo");
    let fx = &fleet.fx;
    fx.write("files/app/app.conf", "port=80\n");
    fx.write("files/app/conf.d/a.conf", "a\n");
    fx.write("files/app/conf.d/b.conf", "bb\n");
    fx.write("files/app/conf.d/deep/c.conf", "ccc\n");
    std::fs::create_dir_all(fx.path("files/app/empty")).unwrap();
    let user = nix::unistd::User::from_name("fpuser")
        .unwrap()
        .expect("fpuser");
    fleet.play(
        r#"    - name: whole
      copy: {src: app, dest: "{{ base }}/whole", owner: fpuser, mode: "0640", directory_mode: "0750"}
      become: true
    - name: contents
      copy: {src: app/, dest: "{{ base }}/contents/"}
      become: true
"#,
    );
    let base = fleet.base(&fleet.hosts[0]);
    let whole = base.join("whole");
    let contents = base.join("contents");
    let observed = || observe(&[&whole, &contents]);
    let first = crate::fx::converge(&|a: &[&str]| fleet.apply(a), &observed);

    // Every file of both copies went in one transfer per task (17 bytes of content).
    for task in ["whole", "contents"] {
        let ev = event(&first, task);
        assert_eq!(ev["note"], "content sent: 17 bytes", "{ev}");
        assert_eq!(ev["result"]["changed"], true);
    }
    assert_eq!(
        event(&first, "whole")["result"]["dest"],
        format!("{}/", whole.display())
    );
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    let uid = |p: &Path| std::fs::metadata(p).unwrap().uid();
    for d in ["", "app", "app/conf.d", "app/conf.d/deep", "app/empty"] {
        let p = whole.join(d);
        assert_eq!(mode(&p), 0o750, "{}", p.display());
        assert_eq!(uid(&p), user.uid.as_raw(), "{}", p.display());
    }
    for f in [
        "app/app.conf",
        "app/conf.d/a.conf",
        "app/conf.d/deep/c.conf",
    ] {
        let p = whole.join(f);
        assert_eq!(mode(&p), 0o640, "{}", p.display());
        assert_eq!(uid(&p), user.uid.as_raw(), "{}", p.display());
    }
    assert_eq!(
        std::fs::read_to_string(contents.join("conf.d/deep/c.conf")).unwrap(),
        "ccc\n"
    );
    assert!(contents.join("empty").is_dir());
    assert_eq!(uid(&contents.join("app.conf")), 0, "written as root");
    assert_eq!(mode(&contents.join("app.conf")), 0o644);

    // One controller file changes: only it travels, only it is rewritten.
    fx.write("files/app/conf.d/b.conf", "bbbbb\n");
    let before = observed();
    let out = fleet.apply(&[]);
    out.expect(0);
    for task in ["whole", "contents"] {
        let ev = event(&out, task);
        assert_eq!(ev["status"], "changed", "{ev}");
        assert_eq!(ev["note"], "content sent: 6 bytes", "{ev}");
    }
    let after = observed();
    let moved: Vec<_> = before
        .lines()
        .zip(after.lines())
        // A directory's mtime moves when a file is renamed into it: files only.
        .filter(|(a, b)| a != b && a.contains(" file "))
        .map(|(a, _)| a.split(' ').next().unwrap().to_string())
        .collect();
    let mut expected = vec![
        contents.join("conf.d/b.conf").display().to_string(),
        whole.join("app/conf.d/b.conf").display().to_string(),
    ];
    expected.sort();
    let mut moved = moved;
    moved.sort();
    assert_eq!(moved, expected, "only the changed file is rewritten");
    assert_eq!(
        std::fs::read_to_string(whole.join("app/conf.d/b.conf")).unwrap(),
        "bbbbb\n"
    );
    assert_eq!(mode(&whole.join("app/conf.d/b.conf")), 0o640);
}

#[test]
fn remote_src_copy_of_a_host_directory_converges_and_rewrites_only_what_differs() {
    let fleet = Fleet::start(1, "fpsudo");
    let base = fleet.base(&fleet.hosts[0]);
    let src = base.join("src");
    std::fs::create_dir_all(src.join("sub/deep")).unwrap();
    std::fs::write(src.join("a.conf"), "a\n").unwrap();
    std::fs::write(src.join("sub/deep/run.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(src.join("a.conf"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(
        src.join("sub/deep/run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::os::unix::fs::symlink("../a.conf", src.join("sub/link")).unwrap();
    let mirror = base.join("mirror");
    std::fs::create_dir_all(&mirror).unwrap();
    std::fs::write(mirror.join("extra"), "kept\n").unwrap();
    fleet.play(
        r#"    - name: mirror
      copy: {src: "{{ base }}/src/", dest: "{{ base }}/mirror", remote_src: true, owner: fpuser}
      become: true
"#,
    );
    let user = nix::unistd::User::from_name("fpuser")
        .unwrap()
        .expect("fpuser");
    let observed = || observe(&[&mirror]);
    crate::fx::converge(&|a: &[&str]| fleet.apply(a), &observed);
    let m = |p: &str| std::fs::symlink_metadata(mirror.join(p)).unwrap();
    assert_eq!(m("a.conf").mode() & 0o7777, 0o600, "the source's mode");
    assert_eq!(m("sub/deep/run.sh").mode() & 0o7777, 0o755);
    assert_eq!(
        std::fs::read_link(mirror.join("sub/link")).unwrap(),
        Path::new("../a.conf"),
        "a link stays a link"
    );
    for p in ["a.conf", "sub", "sub/deep/run.sh", "sub/link"] {
        assert_eq!(m(p).uid(), user.uid.as_raw(), "{p}");
    }
    assert_eq!(
        std::fs::read_to_string(mirror.join("extra")).unwrap(),
        "kept\n"
    );

    // One source file changes: only it is rewritten.
    std::fs::write(src.join("a.conf"), "a changed\n").unwrap();
    let run_sh = crate::fx::stamp(&mirror.join("sub/deep/run.sh"));
    let a_before = crate::fx::stamp(&mirror.join("a.conf"));
    let out = fleet.apply(&[]);
    out.expect(0);
    assert_eq!(out.status_of("mirror"), "changed");
    assert_eq!(
        std::fs::read_to_string(mirror.join("a.conf")).unwrap(),
        "a changed\n"
    );
    assert_ne!(crate::fx::stamp(&mirror.join("a.conf")), a_before);
    assert_eq!(crate::fx::stamp(&mirror.join("sub/deep/run.sh")), run_sh);
    assert_eq!(m("a.conf").uid(), user.uid.as_raw());
}
