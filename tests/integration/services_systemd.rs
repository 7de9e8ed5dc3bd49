//! `systemd_service`, `service` and `service_facts` against a real systemd: the Debian root
//! that .ci/run builds with debootstrap, booted as PID 1 in namespaces of its own over an
//! overlay (`tests/support/systemd.rs`, shared with the `targets` test). Its own sshd listens
//! on a loopback address of its own and fixpoint connects to it over SSH as to any host;
//! `nsenter` serves the test's own checks.

use crate::fx::{Fx, Out};
pub(crate) use crate::support::systemd::{poll, SystemdHost, ROOT};

/// What only the integration tests do with the booted host: fixtures and `fixpoint apply`.
impl SystemdHost {
    pub(crate) fn fx(&self) -> Fx {
        let fx = Fx::new();
        fx.write("hosts.ini", "sd\n");
        fx
    }

    pub(crate) fn apply(&self, fx: &Fx, extra: &[&str]) -> Out {
        let cfg = self.ssh_config();
        let mut args = vec![
            "apply",
            "--format",
            "json",
            "-i",
            "hosts.ini",
            "--ssh-config",
            cfg.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        args.push("site.yml");
        fx.run(&args)
    }
}

fn play(fx: &Fx, tasks: &str) {
    fx.write(
        "site.yml",
        &format!("- hosts: sd\n  gather_facts: false\n  tasks:\n{tasks}"),
    );
}

/// `fx::converge` on this playbook, run against the booted root.
fn converge(h: &SystemdHost, fx: &Fx, tasks: &str, observe: &dyn Fn() -> String) -> Out {
    play(fx, tasks);
    crate::fx::converge(&|a: &[&str]| h.apply(fx, a), observe)
}

const UNIT: &str = "[Unit]\nDescription=fixpoint test daemon\n[Service]\nExecStart=/bin/sh -c 'trap \"echo reload >> /run/fptest.reloads\" HUP; while :; do sleep 1; done'\nExecReload=/bin/kill -HUP $MAINPID\n[Install]\nWantedBy=multi-user.target\n";

#[test]
fn systemd_units_in_a_booted_debian() {
    let h = SystemdHost::boot();
    let systemd_pid = h.pid();
    let fx = h.fx();
    let unit = "fptest.service";
    let observe = || {
        format!(
            "active={} enabled={} pid={}",
            h.prop(unit, "ActiveState"),
            h.nsenter(&["systemctl", "is-enabled", unit]).trim(),
            h.prop(unit, "MainPID")
        )
    };

    // The unit file, written by fixpoint where packages put theirs (a unit in /etc cannot be
    // masked: the mask is a link in its place); then started and enabled after a daemon-reload.
    let escaped = UNIT
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n");
    play(
        &fx,
        &format!(
            "    - copy: {{ dest: /usr/lib/systemd/system/{unit}, content: \"{escaped}\" }}\n"
        ),
    );
    h.apply(&fx, &[]).expect(0);
    let first = converge(
        &h,
        &fx,
        &format!("    - name: up\n      systemd: {{ name: {unit}, state: started, enabled: true, daemon_reload: true }}\n"),
        &observe,
    );
    let r = &first.task_events("up")[0]["result"];
    assert_eq!(r["name"], unit, "{r}");
    assert_eq!(r["state"], "started", "{r}");
    assert_eq!(r["enabled"], true, "{r}");
    assert_eq!(r["status"]["LoadState"], "loaded", "{r}");
    assert_eq!(
        r["status"]["ActiveState"], "inactive",
        "the status is the probe's: {r}"
    );
    assert_eq!(h.prop(unit, "ActiveState"), "active");

    // Restart: always changed, a new main process; check mode keeps the old one.
    play(
        &fx,
        &format!(
            "    - name: bounce\n      systemd_service: {{ name: {unit}, state: restarted }}\n"
        ),
    );
    let pid = h.prop(unit, "MainPID");
    assert_eq!(
        h.apply(&fx, &["--check"]).expect(0).status_of("bounce"),
        "changed"
    );
    assert_eq!(h.prop(unit, "MainPID"), pid, "check mode restarted");
    assert_eq!(h.apply(&fx, &[]).expect(0).status_of("bounce"), "changed");
    assert_ne!(h.prop(unit, "MainPID"), pid, "restart kept the process");

    // Reload: changed, same process, which got its HUP.
    play(
        &fx,
        &format!("    - name: reload\n      systemd: {{ name: {unit}, state: reloaded }}\n"),
    );
    let pid = h.prop(unit, "MainPID");
    assert_eq!(
        h.apply(&fx, &["--check"]).expect(0).status_of("reload"),
        "changed"
    );
    assert_eq!(
        h.nsenter(&["cat", "/run/fptest.reloads"]),
        "",
        "check mode reloaded"
    );
    assert_eq!(h.apply(&fx, &[]).expect(0).status_of("reload"), "changed");
    poll("the daemon's HUP trap", 20, || {
        (h.nsenter(&["cat", "/run/fptest.reloads"]) == "reload\n").then_some(())
    });
    assert_eq!(h.prop(unit, "MainPID"), pid);

    // Stopped and disabled, then masked, then unmasked.
    converge(
        &h,
        &fx,
        &format!(
            "    - name: down\n      systemd: {{ name: {unit}, state: stopped, enabled: false }}\n"
        ),
        &observe,
    );
    assert_eq!(h.prop(unit, "ActiveState"), "inactive");
    converge(
        &h,
        &fx,
        &format!("    - name: mask\n      systemd: {{ name: {unit}, masked: true }}\n"),
        &observe,
    );
    assert_eq!(
        h.nsenter(&["systemctl", "is-enabled", unit]).trim(),
        "masked"
    );
    converge(
        &h,
        &fx,
        &format!("    - name: unmask\n      systemd: {{ name: {unit}, masked: false }}\n"),
        &observe,
    );

    // daemon_reexec alone re-executes systemd and reports no change, as in Ansible.
    play(
        &fx,
        "    - name: reexec\n      systemd: { daemon_reexec: true }\n",
    );
    assert_eq!(h.apply(&fx, &[]).expect(0).status_of("reexec"), "ok");
    poll("systemd running again after the re-exec", 30, || {
        (h.nsenter(&["systemctl", "is-system-running"]).trim() == "running").then_some(())
    });

    // `service` picks systemd here (PID 1), as the `service_mgr` fact says.
    fx.write(
        "site.yml",
        &format!(
            "- hosts: sd\n  tasks:\n    - assert: {{ that: [\"ansible_service_mgr == 'systemd'\"] }}\n    - name: svc\n      service: {{ name: fptest, state: started }}\n    - service_facts:\n    - name: facts\n      debug: {{ msg: \"{{{{ ansible_facts.services['{unit}'] }}}}\" }}\n"
        ),
    );
    let out = h.apply(&fx, &["-v"]);
    out.expect(0);
    assert_eq!(out.status_of("svc"), "changed");
    assert_eq!(out.task_events("svc")[0]["result"]["status"]["Id"], unit);
    assert_eq!(
        out.task_events("facts")[0]["result"]["msg"],
        serde_json::json!({"name": unit, "state": "running", "status": "disabled", "source": "systemd"}),
        "{}",
        out.stdout
    );
    assert_eq!(h.prop(unit, "ActiveState"), "active");

    // `service` on a systemd host hands systemd_service's parameters on, as Ansible's action
    // does (geerlingguy.docker's `service: {daemon_reload: true}`, no name), and
    // `systemd_service` with `name` alone only reads the unit: its `status` after the reload.
    let edited = escaped.replace("fixpoint test daemon", "fixpoint test daemon, edited");
    play(
        &fx,
        &format!(
            "    - copy: {{ dest: /usr/lib/systemd/system/{unit}, content: \"{edited}\" }}\n    - name: reload units\n      service: {{ daemon_reload: true }}\n    - name: query\n      ansible.builtin.systemd_service: {{ name: {unit} }}\n      register: q\n    - name: seen\n      debug: {{ msg: \"{{{{ q.status.Description }}}} {{{{ q.changed }}}}\" }}\n"
        ),
    );
    let out = h.apply(&fx, &["-v"]);
    out.expect(0);
    assert_eq!(out.status_of("reload units"), "ok", "{}", out.stdout);
    assert_eq!(out.status_of("query"), "ok", "{}", out.stdout);
    assert_eq!(
        out.task_events("seen")[0]["result"]["msg"],
        "fixpoint test daemon, edited False",
        "{}",
        out.stdout
    );
    assert_eq!(h.prop(unit, "NeedDaemonReload"), "no");

    // A unit that does not exist fails clearly.
    play(
        &fx,
        "    - name: ghost\n      systemd: { name: fptest-ghost.service, state: started }\n",
    );
    let out = h.apply(&fx, &["-v"]);
    out.expect(1);
    assert!(
        out.stdout
            .contains("Could not find the requested service fptest-ghost.service"),
        "{}",
        out.stdout
    );

    // Teardown ends every process of the namespace.
    drop(h);
    assert!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(systemd_pid), None).is_err(),
        "systemd survived the teardown"
    );
}
