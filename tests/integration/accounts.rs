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

#[test]
fn bad_account_parameters_are_refused_at_load_time() {
    let fx = Fx::new();
    for (task, says) in [
        (
            "user: { name: fptest-ux, generate_ssh_key: true }",
            "generate_ssh_key",
        ),
        ("user: { name: fptest-ux, seuser: x }", "seuser"),
        (
            "user: { name: fptest-ux, update_password: sometimes }",
            "update_password",
        ),
        ("group: { name: fptest-gx, local: true }", "local"),
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
