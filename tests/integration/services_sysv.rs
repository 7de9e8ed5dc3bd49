//! `service` and `sysvinit` against real SysV init: the test's own LSB init script (a small
//! daemon under start-stop-daemon, its pidfile in the test's directory) and Debian's `cron`.
//! Started/stopped/restarted/reloaded/enabled, each second run unchanged, check mode inert.
//!
//! The host has no systemd as PID 1, so `service` takes Ansible's SysV path here. The tests
//! share /etc/rc?.d (update-rc.d rewrites links), so they run one at a time.

use crate::fx::{Fx, Out};
use crate::support::require_root;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SYSV: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    SYSV.lock().unwrap_or_else(|e| e.into_inner())
}

fn require_tools() {
    for t in [
        "/usr/sbin/service",
        "/usr/sbin/update-rc.d",
        "/sbin/start-stop-daemon",
    ] {
        assert!(
            Path::new(t).exists(),
            "{t} is missing: install init-system-helpers and dpkg (.ci/run does)"
        );
    }
}

/// The test's own init script, installed as /etc/init.d/NAME; removed (daemon stopped, links
/// gone) on drop, also when the test panics.
struct Script {
    name: String,
    dir: PathBuf,
}

impl Script {
    fn install(fx: &Fx, tag: &str) -> Script {
        require_root();
        require_tools();
        let name = format!("fptest-{tag}-{}", std::process::id());
        let dir = fx.path("svc");
        std::fs::create_dir_all(&dir).unwrap();
        let d = dir.display();
        let text = format!(
            r#"#!/bin/sh
### BEGIN INIT INFO
# Provides:          {name}
# Required-Start:    $remote_fs
# Required-Stop:     $remote_fs
# Default-Start:     2 3 4 5
# Default-Stop:      0 1 6
# Short-Description: fixpoint test daemon
### END INIT INFO
PIDF={d}/pid
case "$1" in
  start)
    start-stop-daemon --start --quiet --oknodo --background --make-pidfile --pidfile $PIDF \
      --startas /bin/sh -- -c 'trap "echo reload >> {d}/reloads" HUP; echo start >> {d}/starts; while :; do sleep 1; done'
    ;;
  stop)
    start-stop-daemon --stop --quiet --oknodo --pidfile $PIDF --remove-pidfile --retry TERM/10/KILL/5
    ;;
  reload)
    start-stop-daemon --stop --quiet --signal HUP --pidfile $PIDF
    ;;
  restart)
    "$0" stop && "$0" start
    ;;
  status)
    start-stop-daemon --status --pidfile $PIDF
    rc=$?
    if [ $rc -eq 0 ]; then echo "{name} is running"; else echo "{name} is not running"; fi
    exit $rc
    ;;
  *) echo "Usage: $0 start|stop|reload|restart|status" >&2; exit 3 ;;
esac
exit 0
"#
        );
        let path = PathBuf::from("/etc/init.d").join(&name);
        std::fs::write(&path, text).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        Script { name, dir }
    }

    fn pid(&self) -> Option<String> {
        std::fs::read_to_string(self.dir.join("pid"))
            .ok()
            .map(|s| s.trim().to_string())
    }

    fn running(&self) -> bool {
        Command::new("/etc/init.d/".to_string() + &self.name)
            .arg("status")
            .output()
            .unwrap()
            .status
            .success()
    }

    fn count(&self, file: &str) -> usize {
        std::fs::read_to_string(self.dir.join(file))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }

    /// Wait (polling, with a deadline) until the daemon has written `n` lines to `file`: its
    /// HUP trap runs when its current `sleep 1` ends.
    fn wait_count(&self, file: &str, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.count(file) < n {
            assert!(
                Instant::now() < deadline,
                "{file}: {} lines, expected {n}",
                self.count(file)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        let script = format!("/etc/init.d/{}", self.name);
        let _ = Command::new(&script).arg("stop").output();
        let _ = Command::new("update-rc.d")
            .args(["-f", &self.name, "remove"])
            .output();
        let _ = std::fs::remove_file(&script);
    }
}

fn links(name: &str) -> Vec<String> {
    let mut v: Vec<String> = glob::glob(&format!("/etc/rc?.d/[SK]??{name}"))
        .unwrap()
        .flatten()
        .map(|p| p.display().to_string())
        .collect();
    v.sort();
    v
}

fn result(out: &Out, task: &str) -> serde_json::Value {
    let evs = out.task_events(task);
    assert_eq!(evs.len(), 1, "one result for {task}: {}", out.stdout);
    evs[0].clone()
}

/// `fx::converge` on this playbook, run locally.
fn converge(fx: &Fx, tasks: &str, observe: &dyn Fn() -> String) -> Out {
    fx.play(tasks);
    crate::fx::converge(&|a: &[&str]| fx.apply(a), observe)
}

#[test]
fn service_sysv_script_start_stop_enable() {
    let _g = lock();
    let fx = Fx::new();
    let s = Script::install(&fx, "svc");
    let name = s.name.clone();
    let observe = || {
        format!(
            "running={} pid={:?} links={:?}",
            s.running(),
            s.pid(),
            links(&s.name)
        )
    };

    let first = converge(
        &fx,
        &format!(
            "    - name: up\n      service: {{ name: {name}, state: started, enabled: true }}\n"
        ),
        &observe,
    );
    let r = result(&first, "up");
    assert_eq!(r["result"]["name"], name.as_str(), "{r}");
    assert_eq!(r["result"]["state"], "started", "{r}");
    assert_eq!(r["result"]["enabled"], true, "{r}");
    assert!(s.running());
    assert!(
        links(&name).iter().any(|l| l.contains("/etc/rc2.d/S")),
        "{:?}",
        links(&name)
    );

    converge(
        &fx,
        &format!(
            "    - name: down\n      ansible.builtin.service: {{ name: {name}, state: stopped, enabled: false }}\n"
        ),
        &observe,
    );
    assert!(!s.running());
    assert!(
        !links(&name).iter().any(|l| l.contains("/S")),
        "{:?}",
        links(&name)
    );
}

#[test]
fn service_sysv_restart_and_reload_always_act() {
    let _g = lock();
    let fx = Fx::new();
    let s = Script::install(&fx, "rst");
    let name = s.name.clone();
    fx.play(&format!(
        "    - name: up\n      service: {{ name: {name}, state: started }}\n"
    ));
    fx.apply(&[]).expect(0);
    s.wait_count("starts", 1);
    let pid = s.pid();

    // Restart: changed every time, a new process; check mode leaves the old one alone.
    fx.play(&format!(
        "    - name: bounce\n      service: {{ name: {name}, state: restarted }}\n"
    ));
    let check = fx.apply(&["--check"]);
    assert_eq!(check.expect(0).status_of("bounce"), "changed");
    assert_eq!(s.pid(), pid, "check mode restarted the daemon");
    let out = fx.apply(&["-v"]);
    assert_eq!(out.expect(0).status_of("bounce"), "changed");
    assert_eq!(result(&out, "bounce")["result"]["state"], "started");
    s.wait_count("starts", 2);
    assert_ne!(s.pid(), pid, "restart kept the old process");
    assert!(s.running());

    // Reload: changed every time, same process, the daemon got its HUP.
    fx.play(&format!(
        "    - name: reload\n      service: {{ name: {name}, state: reloaded }}\n"
    ));
    let pid = s.pid();
    let check = fx.apply(&["--check"]);
    assert_eq!(check.expect(0).status_of("reload"), "changed");
    let out = fx.apply(&[]);
    assert_eq!(out.expect(0).status_of("reload"), "changed");
    s.wait_count("reloads", 1);
    assert_eq!(s.pid(), pid, "reload replaced the process");
    assert_eq!(s.count("reloads"), 1, "check mode reloaded");
}

#[test]
fn sysvinit_module_reports_ansibles_status_dict() {
    let _g = lock();
    let fx = Fx::new();
    let s = Script::install(&fx, "sysv");
    let name = s.name.clone();
    let observe = || format!("running={} links={:?}", s.running(), links(&s.name));
    let first = converge(
        &fx,
        &format!(
            "    - name: sysv\n      sysvinit: {{ name: {name}, state: started, enabled: true, sleep: 0 }}\n"
        ),
        &observe,
    );
    let r = &result(&first, "sysv")["result"];
    assert_eq!(r["name"], name.as_str());
    assert_eq!(r["status"]["started"]["changed"], true, "{r}");
    assert_eq!(r["status"]["started"]["rc"], 0, "{r}");
    assert_eq!(r["status"]["enabled"]["changed"], true, "{r}");
    assert!(s.running());
    // A missing script fails clearly, touching nothing.
    fx.play("    - name: none\n      sysvinit: { name: fptest-no-such-service, state: started }\n");
    let out = fx.apply(&[]);
    out.expect(1);
    assert!(
        out.stdout
            .contains("Could not find the requested service fptest-no-such-service"),
        "{}",
        out.stdout
    );
}

/// Debian's cron through its own init script; left as found (stopped or running, enabled).
#[test]
fn service_drives_debians_cron() {
    let _g = lock();
    require_root();
    require_tools();
    assert!(
        Path::new("/etc/init.d/cron").exists(),
        "/etc/init.d/cron is missing: apt-get install cron (.ci/run does)"
    );
    let cron_running = || {
        Command::new("/usr/sbin/service")
            .args(["cron", "status"])
            .output()
            .unwrap()
            .status
            .success()
    };
    struct Restore(bool, bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = Command::new("/usr/sbin/service")
                .args(["cron", if self.0 { "start" } else { "stop" }])
                .output();
            let _ = Command::new("update-rc.d")
                .args(["cron", if self.1 { "enable" } else { "disable" }])
                .output();
        }
    }
    let _restore = Restore(
        cron_running(),
        !links("cron").iter().all(|l| l.contains("/K")),
    );
    let fx = Fx::new();
    let observe = || format!("running={} links={:?}", cron_running(), links("cron"));
    // From a known state: stopped.
    fx.play("    - name: prep\n      service: { name: cron, state: stopped }\n");
    fx.apply(&[]).expect(0);

    converge(
        &fx,
        "    - name: cron up\n      service: { name: cron, state: started }\n",
        &observe,
    );
    assert!(cron_running());
    converge(
        &fx,
        "    - name: cron off at boot\n      service: { name: cron, enabled: false }\n",
        &observe,
    );
    converge(
        &fx,
        "    - name: cron down\n      service: { name: cron, state: stopped, enabled: true }\n",
        &observe,
    );
    assert!(!cron_running());
}

#[test]
fn service_facts_lists_sysv_scripts_and_sets_the_fact() {
    let _g = lock();
    let fx = Fx::new();
    let s = Script::install(&fx, "facts");
    let name = s.name.clone();
    fx.play(&format!(
        "    - service: {{ name: {name}, state: started }}\n    - service_facts:\n    - name: show\n      debug: {{ msg: \"{{{{ ansible_facts.services['{name}'] }}}}\" }}\n"
    ));
    let out = fx.apply(&["-v"]);
    out.expect(0);
    let msg = &result(&out, "show")["result"]["msg"];
    assert_eq!(
        msg,
        &serde_json::json!({"name": name, "state": "running", "source": "sysv"}),
        "{}",
        out.stdout
    );
}

#[test]
fn bad_service_parameters_are_refused_at_load_time() {
    let fx = Fx::new();
    // `name` alone is a status query on a systemd host (Ansible hands it to systemd_service),
    // so it loads; on this host (not systemd) it fails where Ansible's `service` module does.
    fx.play("    - service: { name: cron }\n");
    let out = fx.apply(&[]);
    out.expect(1);
    assert!(
        out.stdout
            .contains("one of the following is required: state, enabled"),
        "{}",
        out.stdout
    );
    fx.play("    - service: { state: started }\n");
    let out = fx.apply(&[]);
    out.expect(2);
    assert!(
        out.stderr.contains("missing required arguments: name"),
        "{}",
        out.stderr
    );
    fx.play("    - service: { name: cron, state: started, use: openrc }\n");
    let out = fx.apply(&[]);
    out.expect(2);
    assert!(out.stderr.contains("not supported"), "{}", out.stderr);
    fx.play("    - systemd: { name: 'a*', state: started }\n");
    fx.apply(&[]).expect(2);
}

/// Enabling a script that `disable` left with stop links converges (Ansible's `sysvinit` runs
/// only `update-rc.d defaults`, which keeps it disabled and reports a change forever).
#[test]
fn sysvinit_reenables_a_disabled_script() {
    let _g = lock();
    let fx = Fx::new();
    let s = Script::install(&fx, "reen");
    let name = s.name.clone();
    fx.play(&format!(
        "    - sysvinit: {{ name: {name}, enabled: true }}\n    - sysvinit: {{ name: {name}, enabled: false }}\n"
    ));
    fx.apply(&[]).expect(0);
    assert!(
        links(&name).iter().all(|l| l.contains("/K")),
        "{:?}",
        links(&name)
    );
    let observe = || format!("{:?}", links(&s.name));
    converge(
        &fx,
        &format!("    - name: again\n      sysvinit: {{ name: {name}, enabled: true }}\n"),
        &observe,
    );
    assert!(
        links(&name).iter().any(|l| l.contains("/etc/rc2.d/S")),
        "{:?}",
        links(&name)
    );
}

/// Over SSH as an unprivileged user with `become`: the agent runs the init script and
/// update-rc.d as root; without `become` the same task fails and changes nothing.
#[test]
fn service_over_ssh_with_become() {
    let _g = lock();
    let fleet = crate::ssh::Fleet::start(1, "fpsudo");
    let s = Script::install(&fleet.fx, "become");
    let name = s.name.clone();
    fleet.play(&format!(
        "    - name: as user\n      service: {{ name: {name}, enabled: true }}\n      ignore_errors: true\n"
    ));
    let out = fleet.apply(&[]);
    out.expect(0);
    assert_eq!(out.status_of("as user"), "failed", "{}", out.stdout);
    assert!(links(&name).is_empty(), "{:?}", links(&name));
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
    fleet.play(&format!(
        "    - name: as root\n      service: {{ name: {name}, state: started, enabled: true }}\n      become: true\n"
    ));
    assert_eq!(fleet.apply(&[]).expect(0).status_of("as root"), "changed");
    assert!(s.running());
    assert!(
        links(&name).iter().any(|l| l.contains("/etc/rc2.d/S")),
        "{:?}",
        links(&name)
    );
    assert_eq!(fleet.apply(&[]).expect(0).status_of("as root"), "ok");
}
