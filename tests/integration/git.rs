//! `git` against a bare repository the test makes with the real `git`, over SSH as fpsudo with
//! `become`: clone (check mode inert, rerun ok), a moved branch updates, a tag, a sha, depth 1,
//! a dirty checkout fails without `force` and is reset with it, `update: no` stays put. The
//! repository is reached as a `file://` URL and as a local path. Everything lives in the
//! fixture's temp directory.

use crate::fx::Out;
use crate::ssh::Fleet;
use std::path::Path;
use std::process::Command;

fn require_git() {
    let ok = Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(ok, "git is missing: install git (.ci/run does)");
}

/// Run git in `dir`, panicking with its output on failure; its stdout, trimmed.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=fp", "-c", "user.email=fp@example.invalid"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "protocol.file.allow=always",
        ])
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Commit a file in the work tree and push the branch to the bare repository; the new sha.
fn commit(work: &Path, file: &str, text: &str, branch: &str) -> String {
    std::fs::write(work.join(file), text).unwrap();
    git(work, &["add", file]);
    git(work, &["commit", "-q", "-m", text]);
    git(
        work,
        &["push", "-q", "origin", &format!("HEAD:refs/heads/{branch}")],
    );
    git(work, &["rev-parse", "HEAD"])
}

fn result(out: &Out, task: &str) -> serde_json::Value {
    let evs = out.task_events(task);
    assert_eq!(evs.len(), 1, "one result for {task}: {}", out.stdout);
    evs[0]["result"].clone()
}

fn head(dir: &Path) -> String {
    if !dir.join(".git").exists() {
        return "absent".into();
    }
    git(dir, &["rev-parse", "HEAD"])
}

#[test]
fn git_clones_updates_and_refuses_a_dirty_checkout() {
    require_git();
    let fleet = Fleet::start(1, "fpsudo");
    let root = fleet.fx.path("repos");
    std::fs::create_dir_all(&root).unwrap();
    let bare = root.join("origin.git");
    git(&root, &["init", "-q", "--bare", "origin.git"]);
    let work = root.join("work");
    git(&root, &["clone", "-q", bare.to_str().unwrap(), "work"]);
    git(&work, &["checkout", "-q", "-b", "main"]);
    let c1 = commit(&work, "a.txt", "one\n", "main");
    git(&bare, &["symbolic-ref", "HEAD", "refs/heads/main"]);
    git(&work, &["tag", "-a", "v1", "-m", "release one"]);
    git(&work, &["push", "-q", "origin", "v1"]);
    let c2 = commit(&work, "a.txt", "two\n", "main");

    let co = fleet.base(&fleet.hosts[0]).join("co");
    let url = format!("file://{}", bare.display());
    let task = |extra: &str| {
        format!(
            "    - name: checkout\n      git:\n        repo: \"{url}\"\n        dest: \"{{{{ base }}}}/co\"\n{extra}      become: true\n"
        )
    };
    let converge = |tasks: &str| {
        fleet.play(tasks);
        // HEAD and the tracked file: a reset changes the file, not HEAD.
        let observe = || {
            format!(
                "{} {:?}",
                head(&co),
                std::fs::read_to_string(co.join("a.txt")).ok()
            )
        };
        crate::fx::converge(&|a: &[&str]| fleet.apply(a), &observe)
    };

    // Clone: check mode inert, then changed, then ok.
    let first = converge(&task(""));
    let r = result(&first, "checkout");
    assert_eq!(r["before"], serde_json::Value::Null, "{r}");
    assert_eq!(r["after"], c2.as_str(), "{r}");
    assert_eq!(head(&co), c2);

    // The branch moves on the remote: the checkout follows it.
    let c3 = commit(&work, "a.txt", "three\n", "main");
    let moved = converge(&task(""));
    let r = result(&moved, "checkout");
    assert_eq!(
        (r["before"].as_str(), r["after"].as_str()),
        (Some(c2.as_str()), Some(c3.as_str())),
        "{r}"
    );
    assert_eq!(r["remote_url_changed"], false, "{r}");

    // A tag (annotated: the commit it points to), through a plain path this time.
    let by_path = |extra: &str| {
        format!(
            "    - name: checkout\n      git:\n        repo: \"{}\"\n        dest: \"{{{{ base }}}}/co\"\n{extra}      become: true\n",
            bare.display()
        )
    };
    converge(&by_path("        version: v1\n"));
    assert_eq!(head(&co), c1);
    // A sha.
    converge(&by_path(&format!("        version: {c2}\n")));
    assert_eq!(head(&co), c2);

    // A dirty checkout: refused without force (nothing touched), reset with it.
    converge(&task("        version: main\n"));
    assert_eq!(head(&co), c3);
    std::fs::write(co.join("a.txt"), "local edit\n").unwrap();
    fleet.play(&task("        version: main\n"));
    let out = fleet.apply(&[]);
    out.expect(1);
    assert_eq!(out.status_of("checkout"), "failed", "{}", out.stdout);
    assert!(
        out.stdout
            .contains("Local modifications exist in the destination"),
        "{}",
        out.stdout
    );
    assert_eq!(
        std::fs::read_to_string(co.join("a.txt")).unwrap(),
        "local edit\n"
    );
    let forced = converge(&task("        version: main\n        force: true\n"));
    assert_eq!(result(&forced, "checkout")["after"], c3.as_str());
    assert_eq!(
        std::fs::read_to_string(co.join("a.txt")).unwrap(),
        "three\n"
    );

    // update: no leaves the checkout where it is, however the remote moves.
    let c4 = commit(&work, "a.txt", "four\n", "main");
    fleet.play(&task("        update: false\n"));
    let out = fleet.apply(&[]);
    out.expect(0);
    assert_eq!(out.status_of("checkout"), "ok", "{}", out.stdout);
    assert_eq!(head(&co), c3);

    // depth 1 into a new directory: one commit of history.
    let shallow = fleet.base(&fleet.hosts[0]).join("shallow");
    fleet.play(&format!(
        "    - name: shallow\n      git:\n        repo: \"{url}\"\n        dest: \"{{{{ base }}}}/shallow\"\n        depth: 1\n      become: true\n"
    ));
    crate::fx::converge(&|a: &[&str]| fleet.apply(a), &|| head(&shallow));
    assert_eq!(head(&shallow), c4);
    assert_eq!(git(&shallow, &["rev-list", "--count", "HEAD"]), "1");
}

/// An `ssh://` repository on the loopback sshd: `key_file`, `accept_hostkey` (with `ssh_opts`
/// keeping root's known_hosts untouched) reach git's ssh through `GIT_SSH_COMMAND`.
#[test]
fn git_clones_over_ssh_with_key_file_and_accept_hostkey() {
    require_git();
    let fleet = Fleet::start(1, "fpsudo");
    let h = &fleet.hosts[0];
    let root = fleet.fx.path("repos");
    std::fs::create_dir_all(&root).unwrap();
    let bare = root.join("origin.git");
    git(&root, &["init", "-q", "--bare", "origin.git"]);
    let work = root.join("work");
    git(&root, &["clone", "-q", bare.to_str().unwrap(), "work"]);
    git(&work, &["checkout", "-q", "-b", "main"]);
    let c1 = commit(&work, "a.txt", "one\n", "main");
    git(&bare, &["symbolic-ref", "HEAD", "refs/heads/main"]);
    // git refuses to serve a repository its user does not own: the ssh user's own.
    let chown = Command::new("chown")
        .args(["-R", "fpsudo", bare.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(chown.success());
    let url = format!(
        "ssh://{}@{}:{}{}",
        h.user(),
        h.addr(),
        h.port(),
        bare.display()
    );
    fleet.play(&format!(
        "    - name: over ssh\n      git:\n        repo: \"{url}\"\n        dest: \"{{{{ base }}}}/co\"\n        key_file: \"{}\"\n        accept_hostkey: true\n        ssh_opts: \"-o UserKnownHostsFile=/dev/null\"\n      become: true\n",
        h.key_path().display()
    ));
    let co = fleet.base(h).join("co");
    let first = crate::fx::converge(&|a: &[&str]| fleet.apply(a), &|| head(&co));
    assert_eq!(result(&first, "over ssh")["after"], c1.as_str());
    assert_eq!(head(&co), c1);
}
