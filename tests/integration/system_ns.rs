//! `sysctl`, `hostname` and `timezone` on the local transport inside namespaces of their own, so
//! the test machine keeps its settings: a mount namespace where `/etc` and debconf's database are
//! copy-on-write overlays (writes land in the test's directory), a UTS namespace for the host
//! name and a network namespace whose `net.*` kernel parameters are its own.

use crate::fx::{converge, Fx, Out};
use crate::support::require_root;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A process holding the namespaces, entered by every run of one test (so a host name set by
/// one run is there for the next); killed on drop, which ends the namespaces and their mounts.
pub struct Ns {
    holder: Child,
}

impl Ns {
    /// New mount/UTS/net namespaces with `/etc` and `/var/cache/debconf` overlaid by
    /// directories under the fixture, and `/run/systemd` hidden (fixpoint's modules, like
    /// Ansible, would take the systemd path on a host that boots with systemd).
    pub fn new(fx: &Fx) -> Ns {
        require_root();
        for tool in ["unshare", "nsenter", "mount"] {
            assert!(
                which(tool),
                "`{tool}` is missing: install util-linux and mount (.ci/run does)"
            );
        }
        let root = fx.path("ns");
        let mut script = String::from("set -e\n");
        for (i, lower) in ["/etc", "/var/cache/debconf"].iter().enumerate() {
            let (up, work) = (root.join(format!("up{i}")), root.join(format!("work{i}")));
            std::fs::create_dir_all(&up).unwrap();
            std::fs::create_dir_all(&work).unwrap();
            script.push_str(&format!(
                "mount -t overlay overlay -o lowerdir={lower},upperdir={},workdir={} {lower}\n",
                up.display(),
                work.display()
            ));
        }
        script.push_str("if [ -d /run/systemd ]; then mount -t tmpfs tmpfs /run/systemd; fi\n");
        script.push_str("echo ready\nexec sleep 1000000\n");
        let mut holder = Command::new("unshare")
            .args(["--mount", "--uts", "--net", "--propagation", "private"])
            .args(["sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run unshare");
        let mut line = String::new();
        BufReader::new(holder.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let ns = Ns { holder };
        assert_eq!(line, "ready\n", "the namespaces could not be set up");
        ns
    }

    /// A command run inside the namespaces.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--target={}", self.holder.id()))
            .args(["--mount", "--uts", "--net", "--"])
            .arg(program);
        c
    }

    /// The output of `sh -c script` inside the namespaces.
    pub fn sh(&self, script: &str) -> String {
        let out = self.command("sh").args(["-c", script]).output().unwrap();
        assert!(out.status.success(), "{script}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `fixpoint apply --format json site.yml` inside the namespaces.
    pub fn apply(&self, fx: &Fx, extra: &[&str]) -> Out {
        let out = self
            .command(crate::fx::bin())
            .args(["apply", "--format", "json"])
            .args(extra)
            .arg(fx.path("site.yml"))
            .current_dir(fx.dir.path())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .expect("run fixpoint in the namespaces");
        Out::from(out)
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

fn which(tool: &str) -> bool {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|d| d.join(tool).is_file())
}

/// The result of the first task named `task` in a `-v` run.
fn result_of(out: &Out, task: &str) -> serde_json::Value {
    out.task_events(task)
        .first()
        .unwrap_or_else(|| panic!("no result for {task}: {}", out.stdout))["result"]
        .clone()
}

#[test]
fn sysctl_sets_the_kernel_and_the_file_and_reloads() {
    let fx = Fx::new();
    let ns = Ns::new(&fx);
    let conf = fx.write("t/sysctl.conf", "# test\nnet.ipv4.tcp_syn_retries = 6\n");
    fx.play(
        "    - name: forward\n      ansible.posix.sysctl:\n        name: net.ipv4.ip_forward\n        value: '1'\n        sysctl_set: true\n        sysctl_file: \"{{ base }}/sysctl.conf\"\n\
         \x20   - name: retries\n      sysctl: { name: net.ipv4.tcp_syn_retries, value: 4, sysctl_file: \"{{ base }}/sysctl.conf\" }\n",
    );
    let observe = || {
        format!(
            "{}|{}",
            ns.sh("sysctl -n net.ipv4.ip_forward net.ipv4.tcp_syn_retries"),
            std::fs::read_to_string(&conf).unwrap()
        )
    };
    assert_eq!(observe(), "0\n6\n|# test\nnet.ipv4.tcp_syn_retries = 6\n");
    converge(&|extra| ns.apply(&fx, extra), &observe);
    // The second task set nothing itself: its reload (`sysctl -p FILE`) did.
    assert_eq!(
        observe(),
        "1\n4\n|# test\nnet.ipv4.tcp_syn_retries=4\nnet.ipv4.ip_forward=1\n"
    );
    // The test machine's own value is untouched.
    assert_eq!(
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").unwrap(),
        "0\n"
    );

    fx.play("    - name: drop\n      sysctl: { name: net.ipv4.ip_forward, state: absent, reload: false, sysctl_file: \"{{ base }}/sysctl.conf\" }\n");
    let out = ns.apply(&fx, &["--diff"]);
    out.expect(0);
    assert_eq!(out.statuses(), ["changed"]);
    assert_eq!(
        std::fs::read_to_string(&conf).unwrap(),
        "# test\nnet.ipv4.tcp_syn_retries=4\n"
    );
}

#[test]
fn sysctl_failures_are_reported() {
    let fx = Fx::new();
    let ns = Ns::new(&fx);
    fx.play("    - name: bogus\n      sysctl: { name: fptest.no.such.key, value: 1, sysctl_set: true, reload: false, sysctl_file: \"{{ base }}/s.conf\" }\n");
    let out = ns.apply(&fx, &[]);
    out.expect(1);
    assert!(
        out.stdout.contains("setting fptest.no.such.key failed"),
        "{}",
        out.stdout
    );
}

#[test]
fn hostname_sets_the_running_and_the_permanent_name() {
    let fx = Fx::new();
    let ns = Ns::new(&fx);
    fx.play("    - name: name it\n      hostname: { name: fptest-host.example.org }\n      register: h\n    - name: show\n      debug: { msg: \"{{ ansible_hostname }} {{ ansible_domain }} {{ h.name }}\" }\n");
    let observe = || ns.sh("hostname; cat /etc/hostname");
    let before = observe();
    assert!(!before.contains("fptest"), "{before}");
    // `debug` reports ok in every run, so converge's all-changed/all-ok checks do not apply.
    let check = ns.apply(&fx, &["--check", "--diff"]);
    check.expect(0);
    assert_eq!(check.status_of("name it"), "changed");
    assert!(
        check.stdout.contains("hostname = fptest-host.example.org"),
        "{}",
        check.stdout
    );
    assert_eq!(observe(), before);
    let first = ns.apply(&fx, &["-v"]);
    first.expect(0);
    assert_eq!(first.status_of("name it"), "changed");
    assert!(
        first
            .stdout
            .contains("fptest-host example.org fptest-host.example.org"),
        "{}",
        first.stdout
    );
    assert_eq!(
        observe(),
        "fptest-host.example.org\nfptest-host.example.org\n"
    );
    let second = ns.apply(&fx, &[]);
    second.expect(0);
    assert_eq!(second.status_of("name it"), "ok");
    // The machine's own name did not move.
    assert_eq!(
        nix::unistd::gethostname().unwrap().to_string_lossy(),
        before.lines().next().unwrap()
    );

    // Only the running name differs: set again.
    ns.sh("hostname other");
    let third = ns.apply(&fx, &[]);
    assert_eq!(third.status_of("name it"), "changed");
    assert_eq!(ns.sh("hostname"), "fptest-host.example.org\n");
}

#[test]
fn hostname_refuses_strategies_at_load() {
    let fx = Fx::new();
    fx.play("    - hostname: { name: x, use: redhat }\n");
    let out = fx.apply(&[]);
    out.expect(2);
    assert!(out.stderr.contains("site.yml:"), "{}", out.stderr);
    assert!(
        out.stderr.contains("`use: redhat` is not supported"),
        "{}",
        out.stderr
    );
}

#[test]
fn timezone_links_localtime_and_writes_etc_timezone() {
    let fx = Fx::new();
    let ns = Ns::new(&fx);
    fx.play("    - name: zone\n      community.general.timezone: { name: Asia/Tokyo }\n");
    let observe = || ns.sh("cat /etc/timezone; readlink /etc/localtime; date +%Z");
    let first = converge(&|extra| ns.apply(&fx, extra), &observe);
    assert_eq!(
        observe(),
        "Asia/Tokyo\n/usr/share/zoneinfo/Asia/Tokyo\nJST\n"
    );
    assert_eq!(
        result_of(&first, "zone")["msg"],
        "Added 1 line and deleted 1 line(s) on /etc/timezone"
    );
    // The machine's own zone is untouched.
    assert!(!std::fs::read_to_string("/etc/timezone")
        .unwrap_or_default()
        .contains("Tokyo"));

    fx.play("    - name: zone\n      timezone: { name: Nowhere/Atlantis }\n");
    let out = ns.apply(&fx, &[]);
    out.expect(1);
    assert!(
        out.stdout
            .contains("given timezone \\\"Nowhere/Atlantis\\\" is not available"),
        "{}",
        out.stdout
    );
    assert!(Path::new("/usr/share/zoneinfo/Asia/Tokyo").is_file());
}

#[test]
fn mount_mounts_remounts_unmounts_and_removes() {
    let fx = Fx::new();
    let ns = Ns::new(&fx);
    let fstab = fx.write("t/fstab", "# test fstab\n");
    let mnt = fx.path("t/mnt/data");
    let task = |state: &str, opts: &str| {
        format!(
            "    - name: m\n      ansible.posix.mount: {{ path: \"{{{{ base }}}}/mnt/data\", src: fptest, fstype: tmpfs, opts: \"{opts}\", state: {state}, fstab: \"{{{{ base }}}}/fstab\" }}\n      register: r\n"
        )
    };
    let observe = || {
        format!(
            "{}|{}",
            ns.sh(&format!(
                "findmnt -n -o SOURCE,FSTYPE {} || echo none",
                mnt.display()
            ))
            .trim(),
            std::fs::read_to_string(&fstab).unwrap()
        )
    };
    fx.play(&task("mounted", "size=1m"));
    let first = converge(&|extra| ns.apply(&fx, extra), &observe);
    let line = format!("fptest {} tmpfs size=1m 0 0\n", mnt.display());
    assert_eq!(observe(), format!("fptest tmpfs|# test fstab\n{line}"));
    let r = &first.task_events("m")[0]["result"];
    assert_eq!(r["boot"], "yes");
    assert_eq!(r["dump"], "0");
    assert_eq!(r["fstab"], fstab.display().to_string());
    // The test machine has no such mount.
    assert!(
        !mnt.join("..").join("data").exists()
            || !std::fs::read_to_string("/proc/self/mountinfo")
                .unwrap()
                .contains(&mnt.display().to_string())
    );

    // New options: fstab rewritten in place and the mount remounted with them.
    fx.play(&task("mounted", "size=2m"));
    let out = ns.apply(&fx, &["--diff"]);
    out.expect(0);
    assert_eq!(out.statuses(), ["changed"]);
    assert!(out.stdout.contains("size=2m"), "{}", out.stdout);
    let opts = ns.sh(&format!("findmnt -n -o OPTIONS {}", mnt.display()));
    assert!(opts.contains("size=2048k"), "{opts}");

    fx.play(&task("remounted", "size=2m"));
    assert_eq!(ns.apply(&fx, &[]).statuses(), ["changed"]);

    fx.play(&task("unmounted", "size=2m"));
    converge(&|extra| ns.apply(&fx, extra), &observe);
    assert!(observe().starts_with("none|"), "{}", observe());

    fx.play(&task("absent", "size=2m"));
    converge(&|extra| ns.apply(&fx, extra), &|| {
        format!("{} {}", observe(), mnt.exists())
    });
    assert_eq!(observe(), "none|# test fstab\n");
    assert!(!mnt.exists());
}

#[test]
fn mount_ephemeral_leaves_fstab_alone() {
    let fx = Fx::new();
    let ns = Ns::new(&fx);
    let fstab = fx.write("t/fstab", "# untouched\n");
    let mnt = fx.path("t/eph");
    fx.play("    - name: e\n      ansible.posix.mount: { path: \"{{ base }}/eph\", src: fptest-eph, fstype: tmpfs, opts: size=1m, state: ephemeral, fstab: \"{{ base }}/fstab\" }\n");
    let where_ = format!("findmnt -n -o SOURCE,FSTYPE {} || echo none", mnt.display());
    assert_eq!(ns.sh(&where_), "none\n");
    let check = ns.apply(&fx, &["--check"]);
    assert_eq!(check.statuses(), ["changed"]);
    assert!(!mnt.exists());
    let first = ns.apply(&fx, &[]);
    first.expect(0);
    assert_eq!(first.statuses(), ["changed"]);
    assert_eq!(ns.sh(&where_), "fptest-eph tmpfs\n");
    // As in Ansible, an ephemeral mount of the same source is remounted (a change) every time.
    let again = ns.apply(&fx, &[]);
    again.expect(0);
    assert_eq!(again.statuses(), ["changed"]);
    assert_eq!(std::fs::read_to_string(&fstab).unwrap(), "# untouched\n");

    // Another source mounted there is refused.
    fx.play("    - name: e\n      ansible.posix.mount: { path: \"{{ base }}/eph\", src: other, fstype: tmpfs, state: ephemeral }\n");
    let other = ns.apply(&fx, &[]);
    other.expect(1);
    assert!(
        other
            .stdout
            .contains("already mounted with a different source"),
        "{}",
        other.stdout
    );
}
