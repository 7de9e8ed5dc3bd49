//! `user` and `group` against this machine's real account databases, through the shadow tools,
//! over SSH as fpsudo with `become`: each step's check run changes nothing, the run changes,
//! the rerun is `ok`. Accounts are named `fptest-u<pid>`/`fptest-g<pid>` and removed by a guard
//! (also when the test fails; leftovers of an earlier run are removed first).

use crate::fx::{Fx, Out};
use crate::ssh::Fleet;
use std::process::Command;

/// Removes the test's accounts (and the user's home) when dropped, and before use.
struct Accounts {
    user: String,
    group: String,
}

impl Accounts {
    fn new(tag: &str) -> Accounts {
        crate::support::require_root();
        for t in ["/usr/sbin/useradd", "/usr/sbin/groupadd", "/usr/bin/getent"] {
            assert!(
                std::path::Path::new(t).exists(),
                "{t} is missing: install passwd and libc-bin (.ci/run's base system has them)"
            );
        }
        let a = Accounts {
            user: format!("fptest-u{tag}{}", std::process::id()),
            group: format!("fptest-g{tag}{}", std::process::id()),
        };
        a.remove();
        a
    }

    fn remove(&self) {
        let _ = Command::new("userdel").args(["-r", &self.user]).output();
        let _ = Command::new("groupdel").arg(&self.group).output();
    }

    /// The lines of passwd, group and shadow that mention the test's names (shadow's
    /// last-change day included: a rewrite of the hash changes it only with the hash).
    fn lines(&self) -> String {
        let mut out = String::new();
        for f in ["/etc/passwd", "/etc/group", "/etc/shadow"] {
            for l in std::fs::read_to_string(f).unwrap().lines() {
                if l.contains(&self.user) || l.contains(&self.group) {
                    out.push_str(l);
                    out.push('\n');
                }
            }
        }
        out
    }
}

impl Drop for Accounts {
    fn drop(&mut self) {
        self.remove();
    }
}

fn result(out: &Out, task: &str) -> serde_json::Value {
    let evs = out.task_events(task);
    assert_eq!(evs.len(), 1, "one result for {task}: {}", out.stdout);
    evs[0]["result"].clone()
}

/// `fx::converge` on this playbook over the fleet.
fn converge(fleet: &Fleet, tasks: &str, observe: &dyn Fn() -> String) -> Out {
    fleet.play(tasks);
    crate::fx::converge(&|a: &[&str]| fleet.apply(a), observe)
}

const HASH: &str = "$6$saltsalt$Pc6RS3TY1n2wEC3Qx1HR3C4.oJEUzF2G3.cmq1pjqkR7bX7bHSuIbAkKXl0UW0lc8zXHxyU2hOsUtrxKqjGWX1";

#[test]
fn user_and_group_over_ssh_with_become() {
    let fleet = Fleet::start(1, "fpsudo");
    let acc = Accounts::new("a");
    let (u, g) = (acc.user.clone(), acc.group.clone());
    let home = fleet.fx.path("homes").join("u");
    let home = home.display();
    let observe = || {
        format!(
            "{}home={}",
            acc.lines(),
            std::path::Path::new(&home.to_string()).exists()
        )
    };

    // Without become: the shadow tools refuse, nothing changes.
    fleet.play(&format!(
        "    - name: as user\n      group: {{ name: {g} }}\n      ignore_errors: true\n"
    ));
    let out = fleet.apply(&[]);
    out.expect(0);
    assert_eq!(out.status_of("as user"), "failed", "{}", out.stdout);
    assert_eq!(acc.lines(), "");

    // The agent's state directory must belong to the user it runs as: root's own from here.
    let state = fleet.fx.path("root.state");
    fleet.fx.write(
        "hosts.ini",
        &format!(
            "[fleet]\n{} fixpoint_state_dir={}\n",
            fleet.hosts[0].alias(),
            state.display()
        ),
    );

    let first = converge(
        &fleet,
        &format!(
            "    - name: grp\n      group: {{ name: {g}, gid: 47311 }}\n      become: true\n\
             \x20   - name: usr\n      user:\n        name: {u}\n        uid: 47311\n        group: {g}\n        groups: [{g}, users]\n        comment: fixpoint test\n        shell: /bin/sh\n        home: {home}\n        password: \"{HASH}\"\n        expires: 1900000000\n      become: true\n"
        ),
        &observe,
    );
    let gr = result(&first, "grp");
    assert_eq!(gr["gid"], 47311, "{gr}");
    assert_eq!(gr["system"], false, "{gr}");
    let ur = result(&first, "usr");
    assert_eq!(ur["uid"], 47311, "{ur}");
    assert_eq!(ur["group"], 47311, "{ur}");
    assert_eq!(ur["groups"], format!("{g},users"), "{ur}");
    assert_eq!(ur["home"], home.to_string(), "{ur}");
    assert_eq!(ur["shell"], "/bin/sh", "{ur}");
    assert_eq!(ur["comment"], "fixpoint test", "{ur}");
    assert_eq!(ur["create_home"], true, "{ur}");
    assert_eq!(ur["password"], "NOT_LOGGING_PASSWORD", "{ur}");
    assert!(
        !first.stdout.contains("saltsalt"),
        "the hash leaked: {}",
        first.stdout
    );
    let lines = acc.lines();
    assert!(
        lines.contains(&format!("{u}:x:47311:47311:fixpoint test:{home}:/bin/sh")),
        "{lines}"
    );
    assert!(lines.contains(&format!("{u}:{HASH}:")), "{lines}");
    // 1900000000 s is day 21990 (2030-03-17).
    assert!(lines.contains(":21990:"), "{lines}");
    let meta = std::fs::metadata(home.to_string()).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!((meta.uid(), meta.gid()), (47311, 47311));

    // Change: shell, a group appended, locked, never expires, gid moved.
    converge(
        &fleet,
        &format!(
            "    - name: grp\n      group: {{ name: {g}, gid: 47312 }}\n      become: true\n\
             \x20   - name: usr\n      user: {{ name: {u}, shell: /bin/bash, groups: [audio], append: true, password_lock: true, expires: -1 }}\n      become: true\n"
        ),
        &observe,
    );
    let lines = acc.lines();
    assert!(lines.contains(&format!("{u}:!{HASH}:")), "{lines}");
    assert!(lines.contains(":/bin/bash\n"), "{lines}");
    let members = |grp: &str| {
        std::fs::read_to_string("/etc/group")
            .unwrap()
            .lines()
            .find(|l| l.starts_with(&format!("{grp}:")))
            .map(|l| l.rsplit(':').next().unwrap().split(',').any(|m| m == u))
            .unwrap()
    };
    assert!(members("audio") && members("users") && members(&g));

    // Replace the groups (no append): only audio stays.
    converge(
        &fleet,
        &format!(
            "    - name: usr\n      user: {{ name: {u}, groups: audio }}\n      become: true\n"
        ),
        &observe,
    );
    assert!(members("audio") && !members("users") && !members(&g));

    // Absent with remove: the account and its home are gone; then the group.
    converge(
        &fleet,
        &format!(
            "    - name: gone\n      user: {{ name: {u}, state: absent, remove: true }}\n      become: true\n\
             \x20   - name: ggone\n      group: {{ name: {g}, state: absent }}\n      become: true\n"
        ),
        &observe,
    );
    assert_eq!(acc.lines(), "");
    assert!(!std::path::Path::new(&home.to_string()).exists());
}

/// A home that went missing is made again from the skeleton (Ansible does so on every run
/// with `create_home`), and `create_home: false` leaves it missing.
#[test]
fn user_recreates_a_missing_home() {
    crate::support::require_root();
    let fx = Fx::new();
    let acc = Accounts::new("h");
    let u = acc.user.clone();
    let home = fx.path("h");
    fx.play(&format!(
        "    - name: mk\n      user: {{ name: {u}, home: {} }}\n",
        home.display()
    ));
    assert_eq!(fx.apply(&[]).expect(0).status_of("mk"), "changed");
    std::fs::remove_dir_all(&home).unwrap();
    fx.play(&format!(
        "    - name: keep\n      user: {{ name: {u}, create_home: false }}\n"
    ));
    assert_eq!(fx.apply(&[]).expect(0).status_of("keep"), "ok");
    assert!(!home.exists());
    fx.play(&format!("    - name: again\n      user: {{ name: {u} }}\n"));
    let check = fx.apply(&["--check"]);
    assert_eq!(check.expect(0).status_of("again"), "changed");
    assert!(!home.exists(), "check mode made the home");
    assert_eq!(fx.apply(&[]).expect(0).status_of("again"), "changed");
    assert!(home.join(".profile").exists() || home.is_dir());
    use std::os::unix::fs::MetadataExt;
    let uid = nix::unistd::User::from_name(&u)
        .unwrap()
        .unwrap()
        .uid
        .as_raw();
    assert_eq!(std::fs::metadata(&home).unwrap().uid(), uid);
    assert_eq!(fx.apply(&[]).expect(0).status_of("again"), "ok");
}

/// `local: true` drives libuser's tools: an account created with its groups and expiry
/// (luseradd, lgroupmod, lchage), changed, then removed, each converging (check mode changes
/// nothing, a rerun is `ok`).
#[test]
fn user_local_through_libuser() {
    crate::support::require_root();
    for t in ["luseradd", "lusermod", "luserdel", "lchage", "lgroupmod"] {
        assert!(
            std::path::Path::new("/usr/sbin").join(t).exists(),
            "/usr/sbin/{t} is missing: install libuser (.ci/run does)"
        );
    }
    let fx = Fx::new();
    let acc = Accounts::new("l");
    let (u, g) = (acc.user.clone(), acc.group.clone());
    let observe = || acc.lines();
    let run = |tasks: &str| {
        fx.play(tasks);
        crate::fx::converge(&|a: &[&str]| fx.apply(a), &observe)
    };
    run(&format!("    - group: {{ name: {g} }}\n"));
    // 2529881062 s is day 29281 (2050-03-03).
    run(&format!(
        "    - user: {{ name: {u}, local: true, groups: [{g}], expires: 2529881062, comment: lu }}\n"
    ));
    let lines = acc.lines();
    assert!(lines.contains(&format!(":{u}\n")), "not a member: {lines}");
    assert!(lines.contains(":29281:"), "no expiry: {lines}");
    assert!(lines.contains(":lu:"), "no comment: {lines}");
    run(&format!(
        "    - user: {{ name: {u}, local: true, groups: [], expires: -1, shell: /bin/bash }}\n"
    ));
    let lines = acc.lines();
    assert!(
        !lines.contains(&format!(":{u}\n")),
        "still a member: {lines}"
    );
    assert!(!lines.contains(":29281:"), "still expiring: {lines}");
    run(&format!(
        "    - user: {{ name: {u}, local: true, state: absent, remove: true }}\n"
    ));
    assert!(!acc.lines().contains(&format!("{u}:")), "{}", acc.lines());
}

#[test]
fn bad_account_parameters_are_refused_at_load_time() {
    let fx = Fx::new();
    for (task, says) in [
        (
            "user: { name: fptest-ux, password_expire_max: soon }",
            "password_expire_max",
        ),
        ("user: { name: fptest-ux, seuser: x }", "seuser"),
        (
            "user: { name: fptest-ux, local: true, umask: '077' }",
            "'umask' can not be used with 'local'",
        ),
        (
            "user: { name: fptest-ux, update_password: sometimes }",
            "update_password",
        ),
        (
            "group: { name: fptest-gx, local: true, force: true }",
            "force=True and local=True are mutually exclusive",
        ),
        ("group: { name: fptest-gx, gid: -3 }", "gid"),
    ] {
        fx.play(&format!("    - {task}\n"));
        let out = fx.apply(&[]);
        out.expect(2);
        assert!(out.stderr.contains(says), "{task}: {}", out.stderr);
        assert!(
            out.stderr.contains("site.yml:"),
            "{task}: no position: {}",
            out.stderr
        );
    }
}

/// Password ageing (chage's fields and useradd/usermod's `-f`) and a generated SSH key with a
/// passphrase: converged like the other fields; the key belongs to the user and opens with the
/// passphrase only; an existing key is kept (a link left alone) unless `force` replaces it.
#[test]
fn user_password_ageing_and_ssh_key() {
    crate::support::require_root();
    assert!(
        std::path::Path::new("/usr/bin/ssh-keygen").exists(),
        "/usr/bin/ssh-keygen is missing: install openssh-client"
    );
    let fx = Fx::new();
    let acc = Accounts::new("k");
    let u = acc.user.clone();
    let home = fx.path("kh");
    let key = home.join(".ssh/fpkey");
    let observe = || {
        format!(
            "{}key={:?}",
            acc.lines(),
            std::fs::read_to_string(&key).ok()
        )
    };
    let task = |extra: &str| {
        format!(
            "    - name: usr\n      user:\n        name: {u}\n        home: {}\n        password_expire_max: 10\n        password_expire_min: 5\n        password_expire_warn: 28\n        password_expire_account_disable: 15\n        generate_ssh_key: true\n        ssh_key_type: ed25519\n        ssh_key_file: .ssh/fpkey\n        ssh_key_comment: fp test\n        ssh_key_passphrase: s3cret pass\n{extra}",
            home.display()
        )
    };
    fx.play(&task(""));
    let first = crate::fx::converge(&|a: &[&str]| fx.apply(a), &observe);
    let r = result(&first, "usr");
    assert_eq!(r["ssh_key_file"], key.display().to_string(), "{r}");
    assert!(
        r["ssh_public_key"]
            .as_str()
            .is_some_and(|k| k.starts_with("ssh-ed25519 ") && k.ends_with(" fp test")),
        "{r}"
    );
    assert!(
        r["ssh_fingerprint"]
            .as_str()
            .is_some_and(|f| f.contains("SHA256:") && f.ends_with("(ED25519)")),
        "{r}"
    );
    assert!(!first.stdout.contains("s3cret"), "{}", first.stdout);
    let lines = acc.lines();
    assert!(lines.contains(":5:10:28:15:"), "{lines}");
    use std::os::unix::fs::MetadataExt;
    let uid = nix::unistd::User::from_name(&u)
        .unwrap()
        .unwrap()
        .uid
        .as_raw();
    for f in [key.clone(), home.join(".ssh/fpkey.pub"), home.join(".ssh")] {
        assert_eq!(std::fs::metadata(&f).unwrap().uid(), uid, "{}", f.display());
    }
    let opens = |pass: &str| {
        Command::new("ssh-keygen")
            .args(["-y", "-P", pass, "-f"])
            .arg(&key)
            .output()
            .unwrap()
            .status
            .success()
    };
    assert!(opens("s3cret pass") && !opens("") && !opens("other"));

    // The rerun keeps the key and says so; the values are still returned.
    let again = fx.apply(&["-v"]);
    let r2 = result(&again, "usr");
    assert_eq!(r2["ssh_public_key"], r["ssh_public_key"], "{r2}");
    assert!(again.stdout.contains("no force"), "{}", again.stdout);

    // New ageing values, 0 included, are set; the rest is left.
    fx.play(&format!(
        "    - name: usr\n      user: {{ name: {u}, password_expire_max: 0, password_expire_min: 0, password_expire_account_disable: 3 }}\n"
    ));
    crate::fx::converge(&|a: &[&str]| fx.apply(a), &observe);
    assert!(acc.lines().contains(":0:0:28:3:"), "{}", acc.lines());

    // A public key that is a link to root's file: kept without force, replaced with it.
    let pubf = home.join(".ssh/fpkey.pub");
    let flag = fx.write("flag", "root's\n");
    std::fs::remove_file(&key).unwrap();
    std::fs::remove_file(&pubf).unwrap();
    std::os::unix::fs::symlink(&flag, &pubf).unwrap();
    fx.play(&format!(
        "    - name: usr\n      user: {{ name: {u}, generate_ssh_key: true, ssh_key_file: .ssh/fpkey }}\n"
    ));
    assert_eq!(fx.apply(&[]).expect(0).status_of("usr"), "ok");
    assert!(pubf.symlink_metadata().unwrap().file_type().is_symlink());
    assert!(!key.exists());
    fx.play(&format!(
        "    - name: usr\n      user: {{ name: {u}, generate_ssh_key: true, ssh_key_file: .ssh/fpkey, force: true }}\n"
    ));
    assert_eq!(fx.apply(&[]).expect(0).status_of("usr"), "changed");
    let meta = pubf.symlink_metadata().unwrap();
    assert!(meta.file_type().is_file() && meta.uid() == uid);
    assert_eq!(std::fs::read_to_string(&flag).unwrap(), "root's\n");
    assert!(opens(""), "the forced key has no passphrase");
}
