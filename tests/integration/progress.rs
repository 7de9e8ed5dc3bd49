//! Live progress on a terminal: runs under a real pseudo-terminal, their screen read with a
//! terminal emulator (`vt100`). A status line per host while a task blocks (on a FIFO the
//! test writes), the plain log after it; no control characters where progress is off; and
//! the host lock's holder named while another run has it.

use crate::fx::{bin, Fx};
use crate::ssh::Fleet;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a screen may take to show what a test waits for before the test fails.
const SCREEN_BOUND: Duration = Duration::from_secs(60);

const ROWS: u16 = 40;
const COLS: u16 = 150;

/// What the terminal got so far.
struct Term {
    parser: vt100::Parser,
    raw: Vec<u8>,
    eof: bool,
}

/// A fixpoint run whose stdout and stderr are a pseudo-terminal.
struct PtyRun {
    child: Child,
    term: Arc<(Mutex<Term>, Condvar)>,
}

impl PtyRun {
    /// Start `fixpoint args` in `dir` on a new pseudo-terminal, with `env` set (and `NO_COLOR`
    /// and `TERM` as a user's terminal has them unless `env` says otherwise).
    fn start(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> PtyRun {
        let size = nix::pty::Winsize {
            ws_row: ROWS,
            ws_col: COLS,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = nix::pty::openpty(Some(&size), None).expect("openpty");
        let child = {
            let mut cmd = Command::new(bin());
            cmd.args(args)
                .current_dir(dir)
                .env_remove("NO_COLOR")
                .env("TERM", "xterm-256color")
                .stdin(Stdio::null())
                .stdout(Stdio::from(pty.slave.try_clone().expect("dup")))
                .stderr(Stdio::from(pty.slave));
            for (k, v) in env {
                cmd.env(k, v);
            }
            cmd.spawn().expect("spawn fixpoint")
            // `cmd` and its copies of the slave end go here: the master sees EOF (EIO) once
            // the child and its descendants have closed theirs.
        };
        let term = Arc::new((
            Mutex::new(Term {
                parser: vt100::Parser::new(ROWS, COLS, 0),
                raw: Vec::new(),
                eof: false,
            }),
            Condvar::new(),
        ));
        let reader = term.clone();
        let mut master = std::fs::File::from(pty.master);
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                let n = master.read(&mut buf).unwrap_or(0);
                let mut t = reader.0.lock().unwrap();
                if n == 0 {
                    t.eof = true;
                    reader.1.notify_all();
                    return;
                }
                t.parser.process(&buf[..n]);
                t.raw.extend_from_slice(&buf[..n]);
                reader.1.notify_all();
            }
        });
        PtyRun { child, term }
    }

    /// Wait (woken by each output) until the screen's rows satisfy `done`; fail with the
    /// screen when they do not within `SCREEN_BOUND`.
    fn wait_screen(&self, what: &str, done: impl Fn(&[String]) -> bool) -> Vec<String> {
        let deadline = Instant::now() + SCREEN_BOUND;
        let mut t = self.term.0.lock().unwrap();
        loop {
            let rows = rows(&t.parser);
            if done(&rows) {
                return rows;
            }
            let now = Instant::now();
            assert!(
                now < deadline && !t.eof,
                "the screen never showed {what}:\n{}",
                rows.join("\n")
            );
            t = self.term.1.wait_timeout(t, deadline - now).unwrap().0;
        }
    }

    /// Wait for the run to end and its output to be read: exit status, final screen, and all
    /// the bytes written to the terminal.
    fn finish(mut self) -> (i32, Vec<String>, Vec<u8>) {
        let status = self.child.wait().expect("wait");
        let (lock, cv) = &*self.term;
        let mut t = lock.lock().unwrap();
        while !t.eof {
            t = cv.wait(t).unwrap();
        }
        (status.code().unwrap_or(-1), rows(&t.parser), t.raw.clone())
    }
}

fn rows(p: &vt100::Parser) -> Vec<String> {
    p.screen().rows(0, COLS).collect()
}

/// A FIFO anyone can open (the remote users of the loopback hosts too).
fn fifo(path: &Path) -> PathBuf {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o666)).expect("mkfifo");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).unwrap();
    path.to_path_buf()
}

/// Let the task reading this FIFO go: the open waits for its reader, so this also waits for
/// the task to have started reading.
fn release(fifo: &Path) {
    let mut w = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
    w.write_all(b"go\n").unwrap();
}

/// Wait for the task writing to this FIFO to have written (and closed) it.
fn await_signal(fifo: &Path) {
    let mut s = String::new();
    std::fs::File::open(fifo)
        .unwrap()
        .read_to_string(&mut s)
        .unwrap();
}

/// A localhost playbook whose task signals (the `ready` FIFO) that it runs, then blocks until
/// the test writes the `go` FIFO; the FIFOs' paths.
fn held_play(fx: &Fx) -> (PathBuf, PathBuf) {
    let t = fx.path("t");
    std::fs::create_dir_all(&t).unwrap();
    fx.play(concat!(
        "    - name: held\n      shell: \"echo started > {{ base }}/ready && cat {{ base }}/go\"\n",
        "      changed_when: false\n",
    ));
    (fifo(&t.join("ready")), fifo(&t.join("go")))
}

/// `fixpoint args` in `dir` with stdout and stderr piped, on a terminal's `TERM`.
fn spawn_piped(dir: &Path, args: &[&str]) -> Child {
    Command::new(bin())
        .args(args)
        .current_dir(dir)
        .env_remove("NO_COLOR")
        .env("TERM", "xterm-256color")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The flags and the environment of one run.
type Setting<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)]);

/// The status lines' marks: an activity, the barrier.
fn is_status_line(row: &str) -> bool {
    row.contains(": running ")
        || row.contains("waiting for other hosts")
        || row.contains("waiting for a fork slot")
        || row.contains("waiting for the host lock")
}

#[test]
fn a_terminal_shows_a_line_per_host_while_a_task_runs_and_the_plain_log_after() {
    let fleet = Fleet::start(2, "fpsudo");
    let t = fleet.fx.path("t");
    let fifos: Vec<PathBuf> = fleet
        .hosts
        .iter()
        .map(|h| fifo(&t.join(format!("{}.fifo", h.alias()))))
        .collect();
    fleet.play(concat!(
        "    - name: held\n      shell: cat {{ base }}.fifo\n      changed_when: false\n",
        "    - name: after\n      command: \"true\"\n      changed_when: false\n",
    ));
    let config = fleet.config.to_str().unwrap();
    let run = PtyRun::start(
        fleet.fx.dir.path(),
        &[
            "apply",
            "-i",
            "hosts.ini",
            "--ssh-config",
            config,
            "site.yml",
        ],
        &[],
    );
    let aliases: Vec<&str> = fleet.hosts.iter().map(|h| h.alias()).collect();
    // Each host's line: its name, tasks done of the play's, the task running and for how long.
    let screen = run.wait_screen("a running line per host", |rows| {
        aliases.iter().all(|a| {
            rows.iter()
                .any(|r| r.starts_with(a) && r.contains("0/2") && r.contains("held: running"))
        })
    });
    // The log scrolls above the lines: the task's banner is already there.
    let banner = screen.iter().position(|r| r.starts_with("TASK [held]"));
    let first_line = screen.iter().position(|r| is_status_line(r));
    assert!(
        banner.is_some() && banner < first_line,
        "{}",
        screen.join("\n")
    );
    for f in &fifos {
        release(f);
    }
    let (code, screen, raw) = run.finish();
    let text = screen.join("\n");
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("PLAY RECAP"), "{text}");
    for a in &aliases {
        assert!(
            screen
                .iter()
                .any(|r| r.starts_with(a) && r.contains("ok=2") && r.contains("failed=0")),
            "{text}"
        );
    }
    assert!(
        !screen.iter().any(|r| is_status_line(r)),
        "status lines left on the final screen:\n{text}"
    );
    // Both tasks' results are in the log, whole lines (the redraws did not cut into them).
    let all = String::from_utf8_lossy(&raw);
    for a in &aliases {
        assert!(all.contains(&format!("ok: [{a}]")), "{all}");
    }
}

#[test]
fn piped_output_json_no_color_dumb_terminals_and_no_progress_show_no_status_lines() {
    let fx = Fx::new();
    let (ready, go) = held_play(&fx);
    // Piped, with a terminal's TERM and no NO_COLOR: plain text, not a control character.
    let piped = spawn_piped(fx.dir.path(), &["apply", "site.yml"]);
    await_signal(&ready);
    release(&go);
    let out = piped.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("ok: [localhost]"), "{stdout}");
    assert!(
        !stdout.chars().any(|c| c.is_control() && c != '\n'),
        "{stdout:?}"
    );
    // On a terminal, each of these turns the lines off.
    let cases: [Setting; 4] = [
        (&["--format", "json"], &[]),
        (&[], &[("NO_COLOR", "1")]),
        (&[], &[("TERM", "dumb")]),
        (&["--no-progress"], &[]),
    ];
    for (flags, env) in cases {
        let mut args = vec!["apply"];
        args.extend_from_slice(flags);
        args.push("site.yml");
        let run = PtyRun::start(fx.dir.path(), &args, env);
        await_signal(&ready);
        // The task is running now: with progress on, its line would be drawn within a tick
        // (500 ms). Give it three before letting the task go; nothing is waited for here,
        // only time given for a line that must not appear.
        std::thread::sleep(Duration::from_millis(1500));
        release(&go);
        let (code, screen, raw) = run.finish();
        let what = format!("{flags:?} {env:?}");
        assert_eq!(code, 0, "{what}\n{}", screen.join("\n"));
        let all = String::from_utf8_lossy(&raw);
        assert!(
            !all.contains("held: running"),
            "{what}: a status line was drawn:\n{all:?}"
        );
        if flags != ["--no-progress"] {
            // The terminal turns "\n" into "\r\n" itself; fixpoint wrote no control character.
            assert!(
                !all.chars()
                    .any(|c| c.is_control() && c != '\n' && c != '\r'),
                "{what}: {all:?}"
            );
        }
    }
}

#[test]
fn a_run_waiting_for_the_host_lock_names_the_run_holding_it() {
    let fx = Fx::new();
    let (ready, go) = held_play(&fx);
    let holder = spawn_piped(fx.dir.path(), &["apply", "--format", "json", "site.yml"]);
    // Its task runs: it holds the host lock, and says so in the state directory.
    await_signal(&ready);
    let lock: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fx.state_dir().join("lock.json")).unwrap())
            .unwrap();
    let holder_id = lock["run_id"].as_str().unwrap().to_string();
    std::fs::rename(fx.path("site.yml"), fx.path("hold.yml")).unwrap();
    fx.play("    - name: after the lock\n      command: \"true\"\n      changed_when: false\n");
    let waiter = PtyRun::start(
        fx.dir.path(),
        &["apply", "--lock-timeout", "600", "site.yml"],
        &[],
    );
    let want = format!(
        "waiting for the host lock held by run {holder_id} (pid {}",
        lock["pid"]
    );
    waiter.wait_screen(&want, |rows| {
        rows.iter()
            .any(|r| r.starts_with("localhost") && r.contains(&want))
    });
    release(&go);
    let out = holder.wait_with_output().unwrap();
    assert!(out.status.success());
    let (code, screen, _) = waiter.finish();
    let text = screen.join("\n");
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("PLAY RECAP"), "{text}");
    assert!(!screen.iter().any(|r| is_status_line(r)), "{text}");
}
