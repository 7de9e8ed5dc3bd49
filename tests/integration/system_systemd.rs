//! `hostname` and `timezone` on a host that systemd runs, where Ansible uses hostnamectl and
//! timedatectl: the booted Debian root of `services_systemd.rs` (its systemd-hostnamed and
//! systemd-timedated answer over D-Bus), reached over SSH. The names and the zone are checked
//! inside the root with hostnamectl/timedatectl through `nsenter`.

use crate::fx::{Fx, Out};
use crate::services_systemd::SystemdHost;

fn play(fx: &Fx, tasks: &str) {
    fx.write(
        "site.yml",
        &format!("- hosts: sd\n  gather_facts: false\n  tasks:\n{tasks}"),
    );
}

/// `fx::converge` (check mode inert, a change, then ok) on these tasks against the root.
fn converge(h: &SystemdHost, fx: &Fx, tasks: &str, observe: &dyn Fn() -> String) -> Out {
    play(fx, tasks);
    crate::fx::converge(&|a: &[&str]| h.apply(fx, a), observe)
}

fn result(out: &Out, task: &str) -> serde_json::Value {
    let events = out.task_events(task);
    assert!(!events.is_empty(), "no task {task}: {}", out.stdout);
    events[0]["result"].clone()
}

#[test]
fn hostname_uses_hostnamectl_where_systemd_runs() {
    let h = SystemdHost::boot();
    let fx = h.fx();
    let names = || {
        h.nsenter(&[
            "sh",
            "-c",
            "hostnamectl --static status; hostnamectl --transient status; \
             hostnamectl --pretty status; cat /etc/hostname",
        ])
    };
    let old = h.nsenter(&["hostnamectl", "--transient", "status"]);
    let old = old.trim();
    assert!(!old.is_empty() && old != "fptest-sd.example.org");

    // Static and pretty names first, then the transient one (hostnamed has already made it
    // the static one); check mode reads the names through hostnamectl and sets nothing.
    let tasks =
        "    - name: name it\n      hostname: { name: fptest-sd.example.org }\n      register: r\n";
    play(&fx, tasks);
    let check = h.apply(&fx, &["--check", "--diff"]);
    check.expect(0);
    assert!(
        check.stdout.contains("hostname = fptest-sd.example.org"),
        "{}",
        check.stdout
    );
    let first = converge(&h, &fx, tasks, &names);
    assert_eq!(names(), "fptest-sd.example.org\n".repeat(4));
    let r = result(&first, "name it");
    assert_eq!(r["name"], "fptest-sd.example.org", "{r}");
    assert_eq!(r["diff"]["before"], format!("hostname = {old}\n"), "{r}");
    assert_eq!(r["diff"]["after"], "hostname = fptest-sd.example.org\n");
    assert_eq!(r["ansible_facts"]["ansible_hostname"], "fptest-sd", "{r}");
    assert_eq!(r["ansible_facts"]["ansible_domain"], "example.org", "{r}");

    // Only the running (transient) name differs: it alone is set again. hostnamed keeps the
    // static name as the transient one, so the kernel's name is changed behind its back.
    play(
        &fx,
        "    - command: hostname other\n      changed_when: false\n",
    );
    h.apply(&fx, &[]).expect(0);
    play(&fx, tasks);
    assert_eq!(
        h.nsenter(&["hostnamectl", "--transient", "status"]),
        "other\n"
    );
    let out = h.apply(&fx, &["-v"]);
    out.expect(0);
    assert_eq!(out.status_of("name it"), "changed", "{}", out.stdout);
    assert_eq!(
        result(&out, "name it")["diff"]["before"],
        "hostname = other\n"
    );
    assert_eq!(names(), "fptest-sd.example.org\n".repeat(4));

    // `use: systemd` and `use: debian` name this strategy (Ansible's STRATS); the facts of the
    // task update the host's.
    play(
        &fx,
        "    - name: explicit\n      hostname: { name: fptest-sd.example.org, use: systemd }\n    - name: debian\n      hostname: { name: fptest-sd.example.org, use: debian }\n    - name: facts\n      debug: { msg: \"{{ ansible_hostname }} {{ ansible_nodename }}\" }\n",
    );
    let out = h.apply(&fx, &["-v"]);
    out.expect(0);
    assert_eq!(out.status_of("explicit"), "ok", "{}", out.stdout);
    assert_eq!(out.status_of("debian"), "ok", "{}", out.stdout);
    assert_eq!(
        result(&out, "facts")["msg"],
        "fptest-sd fptest-sd.example.org"
    );

    // hostnamectl's limit, checked before it runs, as Ansible does; nothing moved.
    let long = "x".repeat(65);
    play(
        &fx,
        &format!("    - name: long\n      hostname: {{ name: {long} }}\n"),
    );
    let out = h.apply(&fx, &[]);
    out.expect(1);
    assert!(
        out.stdout
            .contains("name cannot be longer than 64 characters on systemd servers"),
        "{}",
        out.stdout
    );
    assert_eq!(names(), "fptest-sd.example.org\n".repeat(4));
}

#[test]
fn timezone_uses_timedatectl_where_systemd_runs() {
    let h = SystemdHost::boot();
    // The harness keeps timedated away from the kernel's (the machine's) time zone.
    assert_eq!(
        h.prop("systemd-timedated.service", "CapabilityBoundingSet"),
        "",
        "systemd-timedated must run without CAP_SYS_TIME here (services_systemd.rs)"
    );
    let fx = h.fx();
    let settings = || {
        h.nsenter(&[
            "sh",
            "-c",
            "timedatectl show -p Timezone -p LocalRTC; readlink /etc/localtime",
        ])
    };
    assert!(
        settings().starts_with("Timezone=Etc/UTC\nLocalRTC=no\n"),
        "the root's settings: {}",
        settings()
    );

    let first = converge(
        &h,
        &fx,
        "    - name: zone\n      community.general.timezone: { name: Asia/Tokyo }\n",
        &settings,
    );
    assert_eq!(
        settings(),
        "Timezone=Asia/Tokyo\nLocalRTC=no\n../usr/share/zoneinfo/Asia/Tokyo\n"
    );
    let r = result(&first, "zone");
    assert_eq!(
        r["diff"],
        serde_json::json!({"before": {"name": "Etc/UTC"}, "after": {"name": "Asia/Tokyo"}}),
        "{r}"
    );
    // Ansible's message names timedatectl as found on PATH (sshd's PATH: /usr/bin first).
    assert_eq!(
        r["msg"], "executed `/usr/bin/timedatectl set-timezone Asia/Tokyo`",
        "{r}"
    );

    // The hardware clock's mode: `set-local-rtc`.
    let first = converge(
        &h,
        &fx,
        "    - name: rtc\n      timezone: { hwclock: local }\n",
        &settings,
    );
    assert_eq!(
        settings(),
        "Timezone=Asia/Tokyo\nLocalRTC=yes\n../usr/share/zoneinfo/Asia/Tokyo\n"
    );
    assert_eq!(
        result(&first, "rtc")["msg"],
        "executed `/usr/bin/timedatectl set-local-rtc yes`"
    );
    assert_eq!(h.nsenter(&["tail", "-n", "1", "/etc/adjtime"]), "LOCAL\n");

    // Both in one task: the mode first, then the zone, as Ansible orders them.
    let first = converge(
        &h,
        &fx,
        "    - name: both\n      community.general.timezone: { name: Etc/UTC, rtc: UTC }\n",
        &settings,
    );
    assert!(settings().starts_with("Timezone=Etc/UTC\nLocalRTC=no\n"));
    let r = result(&first, "both");
    assert_eq!(
        r["msg"],
        "executed `/usr/bin/timedatectl set-local-rtc no`\nexecuted `/usr/bin/timedatectl set-timezone Etc/UTC`",
        "{r}"
    );
    assert_eq!(
        r["diff"],
        serde_json::json!({"before": {"hwclock": "local", "name": "Asia/Tokyo"}, "after": {"hwclock": "UTC", "name": "Etc/UTC"}}),
        "{r}"
    );

    // A zone the host does not have fails before anything is set.
    play(
        &fx,
        "    - name: unknown\n      timezone: { name: Nowhere/Atlantis, hwclock: local }\n",
    );
    let out = h.apply(&fx, &[]);
    out.expect(1);
    assert!(
        out.stdout
            .contains("given timezone \\\"Nowhere/Atlantis\\\" is not available"),
        "{}",
        out.stdout
    );
    assert!(settings().starts_with("Timezone=Etc/UTC\nLocalRTC=no\n"));
}
