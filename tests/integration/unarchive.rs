//! `unarchive` over SSH as fpsudo with `become`, on archives the test builds with the host's
//! tar, gzip, xz, bzip2, zstd and zip from a tree with modes, a symlink and a nested directory:
//! from the controller (uploaded once, then cached) and with `remote_src`; check mode inert,
//! the rerun ok and nothing rewritten (inode and mtime of every entry); include/exclude,
//! list_files, owner/mode; archives with an entry escaping `dest` refused, nothing written.

use crate::fx::{snapshot, Out};
use crate::ssh::Fleet;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

fn require_tools() {
    for t in ["tar", "gzip", "xz", "bzip2", "zstd", "zip"] {
        let ok = Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            ok,
            "{t} is missing: install tar, gzip, xz-utils, bzip2, zstd and zip (.ci/run does)"
        );
    }
}

fn sh(dir: &Path, script: &str) {
    let out = Command::new("sh")
        .args(["-ec", script])
        .current_dir(dir)
        .output()
        .expect("run sh");
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The tree every archive holds: `top/` with modes, a symlink, a nested directory; fixed mtimes.
fn make_tree(dir: &Path) {
    sh(
        dir,
        "mkdir -p tree/top/nested/deep
         printf 'alpha\\n' > tree/top/a.txt && chmod 0640 tree/top/a.txt
         printf 'beta\\n' > tree/top/nested/deep/b.txt && chmod 0600 tree/top/nested/deep/b.txt
         printf '#!/bin/sh\\n' > tree/top/run.sh && chmod 0755 tree/top/run.sh
         ln -s a.txt tree/top/link
         chmod 0750 tree/top/nested
         find tree -exec touch -h -d '2021-02-03 04:05:06 UTC' {} +
         tar -C tree -czf t.tar.gz top
         tar -C tree -cf t.tar top
         tar -C tree -cJf t.tar.xz top
         tar -C tree -cjf t.tar.bz2 top
         tar -C tree --zstd -cf t.tar.zst top
         (cd tree && zip -qry ../t.zip top)
         mkdir -p evil/d1 evil/d2/sub
         tar -P --transform 's,^,../,' -C tree -cf evil/dotdot.tar top/a.txt
         mkdir -p outside && ln -s \"$PWD/outside\" evil/d1/sub
         printf 'x\\n' > evil/d2/sub/x
         tar -cf evil/through-link.tar -C evil/d1 sub -C ../d2 sub/x",
    );
}

fn result(out: &Out, task: &str) -> serde_json::Value {
    let evs = out.task_events(task);
    assert_eq!(evs.len(), 1, "one result for {task}: {}", out.stdout);
    evs[0]["result"].clone()
}

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

/// Removes the controller archive from root's host cache (`~/.cache/fixpoint/archive-<sha256>`)
/// when dropped: the agent ran as root through `become`, so the cache is outside the fixture.
struct Cached(std::path::PathBuf);

impl Drop for Cached {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn unarchive_every_format_converges_and_refuses_escapes() {
    require_tools();
    let fleet = Fleet::start(1, "fpsudo");
    let work = fleet.fx.path("arch");
    std::fs::create_dir_all(&work).unwrap();
    make_tree(&work);
    // The controller's archive, found in files/ beside the playbook.
    std::fs::create_dir_all(fleet.fx.path("files")).unwrap();
    std::fs::copy(work.join("t.tar.gz"), fleet.fx.path("files/t.tar.gz")).unwrap();
    use sha2::Digest;
    let sha = hex::encode(sha2::Sha256::digest(
        std::fs::read(work.join("t.tar.gz")).unwrap(),
    ));
    let root_home = nix::unistd::User::from_uid(0.into()).unwrap().unwrap().dir;
    let cached = Cached(root_home.join(format!(".cache/fixpoint/archive-{sha}")));
    let base = fleet.base(&fleet.hosts[0]);
    let names = ["ctl", "tar", "xz", "bz2", "zst", "zip", "exc", "inc"];
    for n in names {
        std::fs::create_dir_all(base.join(n)).unwrap();
    }
    let w = work.display();
    let task = |name: &str, args: &str| {
        format!("    - name: {name}\n      unarchive: {{ {args}, dest: \"{{{{ base }}}}/{name}\" }}\n      become: true\n")
    };
    let mut tasks = task("ctl", "src: t.tar.gz, list_files: true");
    for (n, f) in [
        ("tar", "t.tar"),
        ("xz", "t.tar.xz"),
        ("bz2", "t.tar.bz2"),
        ("zst", "t.tar.zst"),
        ("zip", "t.zip"),
    ] {
        tasks.push_str(&task(n, &format!("src: \"{w}/{f}\", remote_src: true")));
    }
    tasks.push_str(&task(
        "exc",
        &format!("src: \"{w}/t.tar.xz\", remote_src: true, exclude: ['*.sh', top/nested]"),
    ));
    tasks.push_str(&task(
        "inc",
        &format!("src: \"{w}/t.zip\", remote_src: true, include: [top/a.txt], list_files: true"),
    ));
    fleet.play(&tasks);
    let dirs: Vec<_> = names.iter().map(|n| base.join(n)).collect();
    let refs: Vec<&Path> = dirs.iter().map(|d| d.as_path()).collect();
    let first = crate::fx::converge(&|a: &[&str]| fleet.apply(a), &|| observe(&refs));

    let r = result(&first, "ctl");
    // Uploaded once, kept in the host's cache by its sha256 (the rerun sent nothing).
    assert_eq!(r["src"], cached.0.display().to_string(), "{r}");
    assert!(cached.0.exists());
    assert_eq!(r["handler"], "TgzArchive", "{r}");
    let files: Vec<&str> = r["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for f in ["top/", "top/a.txt", "top/link", "top/nested/deep/b.txt"] {
        assert!(files.contains(&f), "{f} in {files:?}");
    }
    for (n, h) in [
        ("tar", "TarArchive"),
        ("xz", "TarArchive"),
        ("bz2", "TarArchive"),
        ("zst", "TarArchive"),
        ("zip", "ZipArchive"),
    ] {
        assert_eq!(result(&first, n)["handler"], h);
    }
    let mtime = 1612325106; // 2021-02-03 04:05:06 UTC
    for n in ["ctl", "tar", "xz", "bz2", "zst", "zip"] {
        let top = base.join(n).join("top");
        assert_eq!(
            std::fs::read_to_string(top.join("a.txt")).unwrap(),
            "alpha\n",
            "{n}"
        );
        assert_eq!(
            std::fs::read_to_string(top.join("nested/deep/b.txt")).unwrap(),
            "beta\n"
        );
        assert_eq!(
            std::fs::read_link(top.join("link")).unwrap(),
            Path::new("a.txt"),
            "{n}"
        );
        let mode = |p: &str| std::fs::metadata(top.join(p)).unwrap().permissions().mode() & 0o7777;
        assert_eq!(
            (
                mode("a.txt"),
                mode("run.sh"),
                mode("nested"),
                mode("nested/deep/b.txt")
            ),
            (0o640, 0o755, 0o750, 0o600),
            "{n}"
        );
        assert_eq!(
            std::fs::metadata(top.join("a.txt")).unwrap().mtime(),
            mtime,
            "{n}"
        );
    }
    assert!(!base.join("exc/top/run.sh").exists() && !base.join("exc/top/nested").exists());
    assert!(base.join("exc/top/a.txt").exists());
    let inc = result(&first, "inc");
    assert_eq!(inc["files"], serde_json::json!(["top/a.txt"]), "{inc}");
    assert!(base.join("inc/top/a.txt").exists() && !base.join("inc/top/run.sh").exists());

    fleet.play(&task("ctl", "src: t.tar.gz"));
    let again = fleet.apply(&["-v"]);
    again.expect(0);
    assert_eq!(again.status_of("ctl"), "ok", "{}", again.stdout);
    assert!(!again.stdout.contains("content sent"), "{}", again.stdout);

    // A file edited on the host is put back; only it is rewritten.
    let b = base.join("tar/top/nested/deep/b.txt");
    std::fs::write(&b, "changed\n").unwrap();
    let a_ino = std::fs::metadata(base.join("tar/top/a.txt")).unwrap().ino();
    fleet.play(&task(
        "tar",
        &format!("src: \"{w}/t.tar\", remote_src: true"),
    ));
    let out = fleet.apply(&[]);
    out.expect(0);
    assert_eq!(out.status_of("tar"), "changed", "{}", out.stdout);
    assert_eq!(std::fs::read_to_string(&b).unwrap(), "beta\n");
    assert_eq!(
        std::fs::metadata(base.join("tar/top/a.txt")).unwrap().ino(),
        a_ino
    );

    // owner and mode apply to every entry; then ok.
    let om = base.join("om");
    std::fs::create_dir_all(&om).unwrap();
    fleet.play(&task(
        "om",
        &format!("src: \"{w}/t.tar.gz\", remote_src: true, owner: fpuser, mode: \"u=rwX,g=rX,o=\""),
    ));
    crate::fx::converge(&|a: &[&str]| fleet.apply(a), &|| observe(&[&om]));
    let uid = nix::unistd::User::from_name("fpuser")
        .unwrap()
        .unwrap()
        .uid
        .as_raw();
    for p in ["top", "top/a.txt", "top/nested/deep/b.txt"] {
        let m = std::fs::metadata(om.join(p)).unwrap();
        assert_eq!(m.uid(), uid, "{p}");
        let want = if m.is_dir() || p.ends_with(".sh") {
            0o750
        } else {
            0o640
        };
        assert_eq!(m.permissions().mode() & 0o7777, want, "{p}");
    }

    // Archives whose entries leave dest: refused before anything is written.
    for (n, f) in [("dotdot", "dotdot.tar"), ("via", "through-link.tar")] {
        let d = base.join(n);
        std::fs::create_dir_all(&d).unwrap();
        fleet.play(&format!(
            "    - name: evil\n      unarchive: {{ src: \"{w}/evil/{f}\", remote_src: true, dest: \"{}\" }}\n      become: true\n",
            d.display()
        ));
        let out = fleet.apply(&[]);
        out.expect(1);
        assert_eq!(out.status_of("evil"), "failed", "{}", out.stdout);
        assert!(out.stdout.contains("refusing to extract"), "{}", out.stdout);
        assert_eq!(
            std::fs::read_dir(&d).unwrap().count(),
            0,
            "{n}: something was written"
        );
    }
    // Where the escapes aimed: beside dest (`..`), and the directory the symlink names.
    assert!(!base.join("top").exists() && !work.join("outside/x").exists());
}
