//! `known_hosts` over SSH as fpuser: keys added, replaced and removed in a file under the
//! fixture with the host's ssh-keygen; check mode inert, the rerun ok and the file untouched;
//! a key without a host and a list of names are refused at load.

use crate::fx::{stamp, Fx};
use crate::ssh::Fleet;

const K1: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMgMG2mEMtoT0KEemKgLZjV1D+A01IBTmBdosw32oH5h";
const K2: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMC6QYmEMXTihB7OVVw3Z0e8/nF+AyC3EXyRkKyvIxMk";

#[test]
fn known_hosts_converges_with_ssh_keygen_matching() {
    let fleet = Fleet::start(1, "fpuser");
    let base = fleet.base(&fleet.hosts[0]);
    std::fs::create_dir_all(&base).unwrap();
    std::fs::set_permissions(&base, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let kh = base.join("kh");
    // A file the user already has: another host, and web's old key of the same type.
    std::fs::write(&kh, format!("other.example {K1}\nweb.example {K2}\n")).unwrap();
    // The user's own file, as a known_hosts file is.
    let user = nix::unistd::User::from_name("fpuser")
        .unwrap()
        .expect("fpuser");
    nix::unistd::chown(&kh, Some(user.uid), Some(user.gid)).unwrap();
    fleet.play(&format!(
        "    - name: replace
      known_hosts: {{name: web.example, key: \"web.example {K1}\", path: \"{{{{ base }}}}/kh\"}}
    - name: port
      known_hosts: {{name: \"[db.example]:2222\", key: \"[db.example]:2222 {K2}\", path: \"{{{{ base }}}}/kh\", hash_host: true}}
    - name: drop other
      known_hosts: {{name: other.example, path: \"{{{{ base }}}}/kh\", state: absent}}
"
    ));
    let observe = || std::fs::read_to_string(&kh).unwrap();
    let first = crate::fx::converge(&|a: &[&str]| fleet.apply(a), &observe);
    let text = observe();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0], format!("web.example {K1}"));
    assert!(
        lines[1].starts_with("|1|") && lines[1].ends_with(K2),
        "{text}"
    );
    // The host's ssh-keygen finds the hashed [host]:port entry.
    let out = std::process::Command::new("ssh-keygen")
        .args(["-F", "[db.example]:2222", "-f"])
        .arg(&kh)
        .output()
        .expect("ssh-keygen");
    assert!(String::from_utf8_lossy(&out.stdout).contains("found: line 2"));
    let ev = first.task_events("replace");
    assert_eq!(
        ev[0]["result"]["diff"]["after"],
        format!("other.example {K1}\nweb.example {K1}\n")
    );
    // The rerun rewrote nothing.
    let before = stamp(&kh);
    fleet.apply(&[]).expect(0);
    assert_eq!(stamp(&kh), before);
}

#[test]
fn known_hosts_bad_params_are_refused_at_load() {
    let fx = Fx::new();
    for (tasks, expect) in [
        (
            "    - known_hosts: {name: a, path: /nonexistent/kh}\n",
            "No key specified",
        ),
        (
            "    - known_hosts: {name: a, key: x, state: gone}\n",
            "gone",
        ),
    ] {
        fx.play(tasks);
        let out = fx.run(&["validate", "site.yml"]);
        out.expect(2);
        assert!(out.stderr.contains(expect), "{tasks}: {}", out.stderr);
        assert!(out.stderr.contains("site.yml:"), "{}", out.stderr);
    }
}
