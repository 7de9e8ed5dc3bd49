//! Ctrl-C over loopback sshd: the first SIGINT lets the tasks in flight finish and starts no
//! new one, the second stops them on the hosts; either way the recap is printed, the run exits
//! 130, and no host lock is left behind (a second run takes it at once and converges).

use crate::fx::Out;
use crate::ssh::Fleet;
use std::io::BufRead;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const SLOW: &str = concat!(
    "    - name: dir\n      file:\n        path: \"{{ base }}\"\n        state: directory\n",
    // Runs until the test says `go`; the shell's pid says whether it was stopped.
    "    - name: slow\n      shell: \"echo $$ > {{ base }}/pid; touch {{ base }}/started; while [ ! -e {{ base }}/go ]; do sleep 0.1; done; touch {{ base }}/finished\"\n",
    "      args:\n        creates: \"{{ base }}/finished\"\n",
    "    - name: after\n      copy:\n        content: ok\n        dest: \"{{ base }}/after\"\n",
);

/// A run in a process group of its own, as a terminal's foreground job: Ctrl-C is a SIGINT to
/// the whole group. Its stderr lines arrive on the channel as they are written.
struct Run {
    child: std::process::Child,
    lines: mpsc::Receiver<String>,
    stderr: std::thread::JoinHandle<String>,
}

impl Run {
    fn start(fleet: &Fleet) -> Run {
        let mut child = Command::new(crate::fx::bin())
            .args(fleet.apply_args(&[]))
            .current_dir(fleet.fx.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut all = String::new();
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                all.push_str(&line);
                all.push('\n');
                let _ = tx.send(line);
            }
            all
        });
        Run {
            child,
            lines,
            stderr,
        }
    }

    /// Ctrl-C, then wait until the controller says it took it.
    fn interrupt(&self, says: &str) {
        let pgid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGINT).unwrap();
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|e| panic!("the controller never said `{says}`: {e}"));
            if line.contains(says) {
                return;
            }
        }
    }

    fn finish(self) -> Out {
        let out = self.child.wait_with_output().unwrap();
        let mut out = Out::from(out);
        out.stderr = self.stderr.join().unwrap();
        out
    }
}

fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn alive(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

#[test]
fn a_first_sigint_lets_running_tasks_finish_starts_no_new_one_and_exits_130() {
    let fleet = Fleet::start(2, "fpuser");
    fleet.play(SLOW);
    let run = Run::start(&fleet);
    for h in &fleet.hosts {
        wait_for(&fleet.base(h).join("started"));
    }
    run.interrupt("no new task starts");
    // Only now may the tasks in flight end: they were running when the SIGINT came.
    for h in &fleet.hosts {
        std::fs::write(fleet.base(h).join("go"), "").unwrap();
    }
    let out = run.finish();
    out.expect(130);
    let recap = out.recap();
    for h in &fleet.hosts {
        let host = h.alias();
        assert_eq!(recap["hosts"][host]["changed"], 2, "{}", out.stdout);
        assert_eq!(recap["hosts"][host]["failed"], 0, "{}", out.stdout);
        assert!(fleet.base(h).join("finished").exists(), "{host} finished");
        assert!(
            !fleet.base(h).join("after").exists(),
            "{host} started no new task"
        );
    }
    assert!(out.task_events("after").is_empty(), "{}", out.stdout);
    // No stale lock: the default --lock-timeout is 0, so a lock left behind fails at once.
    let again = fleet.apply(&[]);
    again.expect(0);
    for ev in again.task_events("slow") {
        assert_eq!(
            ev["status"], "ok",
            "the finished step is not run again: {ev}"
        );
    }
    for h in &fleet.hosts {
        assert!(fleet.base(h).join("after").exists());
    }
    fleet.apply(&[]).expect(0);
}

#[test]
fn a_second_sigint_stops_the_running_tasks_on_the_hosts_and_exits_130() {
    let fleet = Fleet::start(2, "fpuser");
    fleet.play(SLOW);
    let run = Run::start(&fleet);
    for h in &fleet.hosts {
        wait_for(&fleet.base(h).join("started"));
    }
    run.interrupt("no new task starts");
    run.interrupt("stopping the tasks in flight");
    let out = run.finish();
    out.expect(130);
    let recap = out.recap();
    for h in &fleet.hosts {
        let host = h.alias();
        assert_eq!(recap["hosts"][host]["failed"], 1, "{}", out.stdout);
        let pid = std::fs::read_to_string(fleet.base(h).join("pid")).unwrap();
        assert!(!alive(&pid), "{host}: the task's shell {pid} still runs");
        assert!(!fleet.base(h).join("finished").exists());
    }
    for ev in out.task_events("slow") {
        assert_eq!(ev["status"], "failed", "{ev}");
        assert!(ev["msg"].as_str().unwrap().contains("interrupted"), "{ev}");
    }
    assert!(out.task_events("after").is_empty(), "{}", out.stdout);
    // No stale lock: a second run takes it at once and converges.
    for h in &fleet.hosts {
        std::fs::write(fleet.base(h).join("go"), "").unwrap();
    }
    fleet.apply(&[]).expect(0);
    let third = fleet.apply(&[]);
    third.expect(0);
    assert_eq!(third.recap()["hosts"][fleet.hosts[0].alias()]["changed"], 0);
}
