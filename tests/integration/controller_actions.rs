//! The controller actions that change the run itself: `add_host` (a host reached over SSH in a
//! later play, by the `name:port` it was given), `group_by` (a later play on the group), `pause`.

use crate::fx::Fx;
use crate::support::{self, SshHost};
use std::os::unix::fs::PermissionsExt;

/// `add_host` with `address:port` and no other connection variable: the later play reaches the
/// real sshd on that port (the port comes from `ansible_ssh_port`, which the name set, since
/// the ssh_config names no port), ships the agent, and runs there as the configured user;
/// `--twice` converges although `add_host` changes the run's inventory on both passes.
#[test]
fn add_host_reaches_a_new_host_over_ssh_in_a_later_play() {
    support::require_root();
    support::require_sshd();
    support::require_user("fpuser");
    let host = SshHost::start("fpuser");
    let fx = Fx::new();
    std::fs::set_permissions(fx.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = fx.path("t");
    std::fs::create_dir_all(&work).unwrap();
    // The remote user writes its state and the file there.
    std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o777)).unwrap();
    let known_hosts = fx.path("known_hosts");
    support::write_known_hosts(&[&host], &known_hosts);
    // No `Port` here: only the `:port` of the add_host name can bring ssh to this sshd.
    let config = fx.write(
        "ssh_config",
        &format!(
            "Host {addr}\n    User fpuser\n    IdentityFile {key}\n    IdentitiesOnly yes\n    \
             UserKnownHostsFile {kh}\n    GlobalKnownHostsFile /dev/null\n    \
             StrictHostKeyChecking yes\n    BatchMode yes\n    ControlMaster no\n",
            addr = host.addr(),
            key = host.key_path().display(),
            kh = known_hosts.display(),
        ),
    );
    fx.write(
        "hosts.ini",
        &format!(
            "ctl ansible_connection=local fixpoint_state_dir={}\n",
            fx.state_dir().display()
        ),
    );
    fx.write(
        "site.yml",
        &format!(
            "- hosts: ctl\n  gather_facts: false\n  tasks:\n\
             \x20   - name: add\n      add_host:\n        name: \"{addr}:{port}\"\n        groups: dyn\n\
             \x20       marker: from-add-host\n        fixpoint_state_dir: {work}/dyn.state\n\
             - hosts: dyn\n  gather_facts: true\n  tasks:\n\
             \x20   - name: write\n      copy: {{content: \"{{{{ marker }}}} {{{{ ansible_user_id }}}} {{{{ inventory_hostname }}}}\\n\", dest: {work}/out.txt, mode: \"0644\"}}\n",
            addr = host.addr(),
            port = host.port(),
            work = work.display(),
        ),
    );
    let args = [
        "apply",
        "--format",
        "json",
        "--twice",
        "-i",
        "hosts.ini",
        "--ssh-config",
        config.to_str().unwrap(),
        "site.yml",
    ];
    let out = fx.run(&args);
    out.expect(0);
    let add = out.task_events("add");
    assert_eq!(add.len(), 2, "once per pass, on ctl only: {}", out.stdout);
    assert!(add
        .iter()
        .all(|e| e["host"] == "ctl" && e["status"] == "changed"));
    let write = out.task_events("write");
    assert_eq!(write[0]["host"], host.addr().to_string(), "{}", out.stdout);
    assert_eq!(write[0]["status"], "changed", "{}", out.stdout);
    assert_eq!(write[1]["status"], "ok", "converged: {}", out.stdout);
    assert_eq!(
        std::fs::read_to_string(work.join("out.txt")).unwrap(),
        format!("from-add-host fpuser {}\n", host.addr())
    );
    assert!(
        host.log().contains("Accepted publickey for fpuser"),
        "{}",
        host.log()
    );
}

/// `group_by` from a fact, then a play on the new group: only the hosts that joined it run
/// there, and the group's `group_vars/` file beside the playbook applies to them.
#[test]
fn group_by_groups_select_hosts_and_bring_their_group_vars() {
    let fx = Fx::new();
    let state = fx.state_dir();
    fx.write(
        "hosts.ini",
        &format!(
            "a ansible_connection=local tier=web fixpoint_state_dir={s}/a\n\
             b ansible_connection=local tier=db fixpoint_state_dir={s}/b\n\
             c ansible_connection=local tier=web fixpoint_state_dir={s}/c\n",
            s = state.display()
        ),
    );
    fx.write("group_vars/tier_web.yml", "greeting: hello web\n");
    fx.write(
        "site.yml",
        &format!(
            "- hosts: all\n  gather_facts: false\n  tasks:\n\
             \x20   - name: sort\n      group_by: {{key: \"tier_{{{{ tier }}}}\"}}\n\
             \x20   - name: wait\n      pause: {{seconds: 1}}\n      register: waited\n\
             - hosts: tier_web\n  gather_facts: false\n  tasks:\n\
             \x20   - name: mark\n      copy: {{content: \"{{{{ greeting }}}}\\n\", dest: \"{t}/{{{{ inventory_hostname }}}}\", mode: \"0644\"}}\n",
            t = fx.path("t").display()
        ),
    );
    std::fs::create_dir_all(fx.path("t")).unwrap();
    let out = fx.run(&["apply", "--format", "json", "-i", "hosts.ini", "site.yml"]);
    out.expect(0);
    let sort: Vec<_> = out
        .task_events("sort")
        .iter()
        .map(|e| e["status"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(sort, ["changed", "changed", "changed"], "{}", out.stdout);
    // The pause ran once, for all three hosts, on the first.
    let wait = out.task_events("wait");
    assert_eq!(wait.len(), 1, "{}", out.stdout);
    assert_eq!(wait[0]["host"], "a");
    let mark: Vec<_> = out
        .task_events("mark")
        .iter()
        .map(|e| e["host"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(mark, ["a", "c"], "{}", out.stdout);
    assert_eq!(fx.read("t/a"), "hello web\n");
    assert_eq!(fx.read("t/c"), "hello web\n");
    assert!(!fx.path("t/b").exists());
}

/// Wrong parameters of these actions are refused before any host is touched, each at its place.
#[test]
fn bad_parameters_are_refused_at_load_with_their_place() {
    let fx = Fx::new();
    fx.play(concat!(
        "    - pause: {seconds: 1, minutes: 1}\n",
        "    - group_by: {parents: [a]}\n",
        "    - add_host: {groups: [a]}\n",
        "    - gather_facts: {fliter: 'ansible_*'}\n",
        "    - ping: {dat: x}\n",
        "    - pause: {seconds: \"1.5\"}\n",
    ));
    let out = fx.run(&["validate", "site.yml"]);
    out.expect(2);
    for (line, what) in [
        (7, "mutually exclusive"),
        (8, "key"),
        (9, "`name`, `host` or `hostname`"),
        (10, "fliter"),
        (11, "dat"),
        (12, "1.5"),
    ] {
        let at = format!("site.yml:{line}:");
        let block = out
            .stderr
            .split("error: ")
            .find(|b| b.contains(&at))
            .unwrap_or_else(|| panic!("no error at {at}:\n{}", out.stderr));
        assert!(block.contains(what), "{what} at {at}:\n{block}");
    }
}

/// `pause` and `add_host` run once for all hosts: a free play, whose hosts never wait for one
/// another, refuses them at load time (ansible-core stops the run when it reaches them).
#[test]
fn once_for_all_actions_are_refused_in_a_free_play() {
    let fx = Fx::new();
    for action in ["pause: {seconds: 1}", "add_host: {name: other}"] {
        fx.write(
            "free.yml",
            &format!(
                "- hosts: localhost\n  strategy: free\n  gather_facts: false\n  tasks:\n    - {action}\n"
            ),
        );
        let out = fx.run(&["validate", "free.yml"]);
        out.expect(2);
        assert!(out.stderr.contains("free.yml:5:7"), "{}", out.stderr);
        assert!(out.stderr.contains("strategy: free"), "{}", out.stderr);
    }
}
