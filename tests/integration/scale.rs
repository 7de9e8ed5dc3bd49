//! Many hosts at once: the cap on SSH handshakes in flight (`--connect-concurrency`) and the
//! open-file budget checked before any host is touched.

use crate::fx::{Fx, Out};
use crate::support::{self, SshHost};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// One sshd that drops every unauthenticated connection past five (`MaxStartups 5:100:5`),
/// reached under `n` inventory names: as many handshakes against it as the run starts at once.
/// The margin of three over the cap of two the test gives is for sshd's listener, which learns
/// that a connection has authenticated a moment after the client does (under load, the next
/// handshake can arrive first); twenty at once are still far past it.
fn crowd(n: usize) -> (SshHost, Fx) {
    support::require_user("fpuser");
    let host = SshHost::start_with_max_startups("fpuser", "5:100:5");
    let fx = Fx::new();
    std::fs::set_permissions(fx.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = fx.path("t");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o777)).unwrap();
    // Each name is its own host to fixpoint: its own master connection and state directory.
    let via = format!(
        "ansible_host={} ansible_port={} ansible_user=fpuser ansible_ssh_private_key_file={}",
        host.addr(),
        host.port(),
        host.key_path().display(),
    );
    let names = (0..n).map(|i| (format!("h{i:02}"), via.clone()));
    fx.write(
        "hosts.ini",
        &support::hosts_inventory("crowd", names, &work),
    );
    fx.write(
        "ssh_config",
        &format!(
            "Host *\n    UserKnownHostsFile {}\n    GlobalKnownHostsFile /dev/null\n    StrictHostKeyChecking yes\n    IdentitiesOnly yes\n    BatchMode yes\n    CheckHostIP no\n    ControlMaster no\n",
            host.known_hosts_path().display()
        ),
    );
    fx.write(
        "site.yml",
        &format!(
            "- hosts: crowd\n  gather_facts: false\n  tasks:\n    - name: mark\n      copy:\n        content: \"{{{{ inventory_hostname }}}}\\n\"\n        dest: \"{}/{{{{ inventory_hostname }}}}\"\n",
            work.display()
        ),
    );
    (host, fx)
}

#[test]
fn a_handshake_cap_below_the_servers_max_startups_gets_every_host_in() {
    let (host, fx) = crowd(20);
    let out = fx.run(&[
        "apply",
        "--format",
        "json",
        "-i",
        "hosts.ini",
        "--ssh-config",
        "ssh_config",
        "--forks",
        "20",
        "--connect-concurrency",
        "2",
        "site.yml",
    ]);
    out.expect(0);
    let recap = out.recap();
    for i in 0..20 {
        let name = format!("h{i:02}");
        assert_eq!(recap["hosts"][&name]["unreachable"], 0, "{}", out.stdout);
        assert_eq!(recap["hosts"][&name]["changed"], 1, "{}", out.stdout);
        assert_eq!(fx.read(&format!("t/{name}")), format!("{name}\n"));
    }
    let log = host.log();
    assert!(
        !log.contains("past MaxStartups"),
        "sshd dropped a handshake:\n{log}"
    );
    assert_eq!(log.matches("Accepted publickey").count(), 20, "{log}");
}

#[test]
fn a_zero_handshake_cap_is_refused_before_any_host_is_touched() {
    let fx = Fx::new();
    fx.play("    - file:\n        path: \"{{ base }}\"\n        state: directory\n");
    let out = fx.apply(&["--connect-concurrency", "0"]);
    out.expect(2);
    assert!(out.stderr.contains("at least 1"), "{}", out.stderr);
    assert!(!fx.path("t").exists());
}

/// `fixpoint apply` over `n` local hosts under an open-file limit of `soft`:`hard`.
fn under_nofile(fx: &Fx, n: usize, soft: u64, hard: u64) -> Out {
    let hosts = (0..n).map(|i| (format!("m{i:03}"), "ansible_connection=local".to_string()));
    fx.write(
        "hosts.ini",
        &support::hosts_inventory("many", hosts, &fx.state_dir()),
    );
    fx.write(
        "site.yml",
        &format!(
            "- hosts: many\n  gather_facts: false\n  tasks:\n    - name: limit\n      shell: ulimit -Sn > {0}\n      args:\n        creates: {0}\n      run_once: true\n",
            fx.path("limit").display()
        ),
    );
    let mut cmd = Command::new(crate::fx::bin());
    cmd.args([
        "apply",
        "--format",
        "json",
        "-i",
        "hosts.ini",
        "--connect-concurrency",
        "4",
        "site.yml",
    ])
    .current_dir(fx.dir.path())
    .stdin(Stdio::null());
    // SAFETY: setrlimit is async-signal-safe and the hook allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, soft, hard)
                .map_err(std::io::Error::from)
        });
    }
    Out::from(cmd.output().expect("run fixpoint"))
}

#[test]
fn a_hard_open_file_limit_too_small_for_the_hosts_is_refused_naming_it_and_the_fix() {
    let fx = Fx::new();
    let out = under_nofile(&fx, 300, 200, 200);
    out.expect(2);
    assert!(out.stderr.contains("RLIMIT_NOFILE"), "{}", out.stderr);
    assert!(out.stderr.contains("300 hosts"), "{}", out.stderr);
    assert!(out.stderr.contains("ulimit -Hn"), "{}", out.stderr);
    assert!(!fx.path("limit").exists(), "no host was touched");
}

#[test]
fn a_soft_open_file_limit_too_small_for_the_hosts_is_raised() {
    let fx = Fx::new();
    let out = under_nofile(&fx, 300, 200, 8192);
    out.expect(0);
    // The local agent (and the shell it ran) inherited the raised soft limit.
    let soft: u64 = fx.read("limit").trim().parse().unwrap();
    assert!(soft > 200 && soft <= 8192, "soft limit {soft}");
}
