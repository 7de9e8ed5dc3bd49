//! Secrets are never printed: the become password and a `no_log` value appear in no output (text
//! or JSON, `-vvvv`, debug logs), no file the run leaves behind, and no command line of any
//! process the run starts, on the controller or on the host.

use crate::fx::{self, Out};
use crate::ssh::{Fleet, CACHE_DIR_LOCK};
use crate::support;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `fppass`'s sudo password (set up by `.ci/run`).
const PASSWORD: &str = "fixpoint-test-pw";
const WRONG_PASSWORD: &str = "wrong-pw-4711-xyz";
/// The value only `no_log: true` tasks handle.
const SECRET: &str = "n0-log-s3cret-value-93";

/// Become tasks, and `no_log` tasks whose parameters and results carry the secret without
/// putting it on a command line: `copy` content, and a journalled `once:` step that gets it on
/// stdin and prints it.
fn playbook(fleet: &Fleet) -> String {
    format!(
        concat!(
            "- hosts: fleet\n",
            "  gather_facts: false\n",
            "  vars:\n",
            "    base: \"{t}/{{{{ inventory_hostname }}}}\"\n",
            "    secret: {secret}\n",
            "  tasks:\n",
            "    - name: as root\n      command: id -un\n      register: who\n      changed_when: false\n      become: true\n",
            "    - name: check\n      assert:\n        that: who.stdout == 'root'\n",
            "    - name: secret file\n      copy:\n        content: \"{{{{ secret }}}}\"\n        dest: \"{{{{ base }}}}-secret\"\n        mode: \"0600\"\n      become: true\n      no_log: true\n",
            "    - name: secret through a once step\n      shell: tee {{{{ base }}}}-piped\n      args:\n        stdin: \"{{{{ secret }}}}\"\n      once: pipe-the-secret\n      register: piped\n      become: true\n      no_log: true\n",
        ),
        t = fleet.fx.path("t").display(),
        secret = SECRET,
    )
}

/// One run and what was seen of it: its output, and the command line of every process below it
/// (or below the host's sshd) while it ran.
struct Observed {
    out: Out,
    cmdlines: BTreeSet<String>,
}

/// Run `fixpoint apply -vvvv` with `FIXPOINT_LOG=debug` under a reaper, so that every process
/// it starts stays below it, daemonised ones (the SSH master) included; `stdin` is written to
/// it (the `-K` answer). Until the reaper exits (every such process is gone), the command lines
/// of the processes below it and below the host's sshd are read, over and over.
fn run_observed(fleet: &Fleet, format: &str, extra: &[&str], stdin: &str) -> Observed {
    let mut cmd = Command::new(fx::bin());
    cmd.args(["apply", "-vvvv", "--format", format, "-i", "hosts.ini"])
        .arg("--ssh-config")
        .arg(&fleet.config)
        .args(extra)
        .arg("site.yml")
        .current_dir(fleet.fx.dir.path())
        .env("FIXPOINT_LOG", "debug")
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: the hook only makes async-signal-safe system calls (prctl, fork, close, waitpid,
    // _exit) and does not allocate.
    unsafe {
        cmd.pre_exec(support::interpose_reaper);
    }
    let mut child = cmd.spawn().expect("spawn fixpoint");
    let roots = [
        child.id() as i32,
        fleet.hosts[0].reaper_pid().expect("sshd runs"),
    ];
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            r.read_to_end(&mut v).unwrap();
            String::from_utf8_lossy(&v).into_owned()
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let mut cmdlines = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        for root in roots {
            for pid in support::descendants(root) {
                if let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) {
                    cmdlines.insert(String::from_utf8_lossy(&raw).replace('\0', " "));
                }
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the run did not end");
        // The sampling rate of the scan (it waits for nothing): a short-lived process may be
        // missed, the ones that live for the run (ssh, sudo, the agents) are not.
        std::thread::sleep(Duration::from_millis(1));
    };
    let out = Out {
        // The reaper exits with the run's status.
        code: status.code().unwrap_or(-1),
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    };
    Observed { out, cmdlines }
}

/// Every file under `dir` but `skip`, with its content as text.
fn files_under(dir: &Path, skip: &[PathBuf]) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&p) else {
            continue;
        };
        for e in rd.flatten() {
            let path = e.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() && !skip.contains(&path) {
                let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
                out.push((path, text));
            }
        }
    }
    out
}

/// `needle` appears in no output, no command line and no file of `files`.
fn appears_nowhere(needle: &str, what: &str, seen: &Observed, files: &[(PathBuf, String)]) {
    assert!(
        !seen.out.stdout.contains(needle),
        "the {what} is in stdout:\n{}",
        seen.out.stdout
    );
    assert!(
        !seen.out.stderr.contains(needle),
        "the {what} is in stderr:\n{}",
        seen.out.stderr
    );
    for c in &seen.cmdlines {
        assert!(!c.contains(needle), "the {what} is on a command line: {c}");
    }
    for (path, text) in files {
        assert!(
            !text.contains(needle),
            "the {what} is in {}:\n{text}",
            path.display()
        );
    }
}

#[test]
fn the_become_password_and_no_log_values_appear_in_no_output_file_or_command_line() {
    let _lock = CACHE_DIR_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let fleet = Fleet::start(1, "fppass");
    fleet.fx.write("site.yml", &playbook(&fleet));
    let pw_file = fleet
        .fx
        .write("pw.yml", &format!("ansible_become_password: {PASSWORD}\n"));
    let base = fleet.base(&fleet.hosts[0]);
    let with = |suffix: &str| PathBuf::from(format!("{}{suffix}", base.display()));
    // The inputs that hold the secrets, and the files the tasks write them to on purpose.
    let skip = [
        fleet.fx.path("site.yml"),
        pw_file,
        with("-secret"),
        with("-piped"),
    ];
    let runs: [(&str, &str, &[&str], String, i32); 4] = [
        ("text", "-K", &["-K"], format!("{PASSWORD}\n"), 0),
        ("json", "-K", &["-K"], format!("{PASSWORD}\n"), 0),
        ("json", "-e @pw.yml", &["-e", "@pw.yml"], String::new(), 0),
        (
            "text",
            "-K (wrong)",
            &["-K"],
            format!("{WRONG_PASSWORD}\n"),
            1,
        ),
    ];
    for (format, how, extra, stdin, code) in runs {
        let seen = run_observed(&fleet, format, extra, &stdin);
        seen.out.expect(code);
        let context = format!("--format {format}, password by {how}");
        // What makes the greps below mean something: the processes that live for the run (the
        // SSH master here, sudo and the agent on the host) were seen.
        for wanted in ["ssh", "sudo -A -k -p fixpoint", "fixpoint-agent-"] {
            assert!(
                seen.cmdlines.iter().any(|c| c.contains(wanted)),
                "{context}: no process `{wanted}` seen among {:#?}",
                seen.cmdlines
            );
        }
        let files = files_under(fleet.fx.dir.path(), &skip);
        appears_nowhere(PASSWORD, &format!("password ({context})"), &seen, &files);
        appears_nowhere(
            WRONG_PASSWORD,
            &format!("wrong password ({context})"),
            &seen,
            &files,
        );
        appears_nowhere(SECRET, &format!("no_log value ({context})"), &seen, &files);
        if code == 0 {
            assert_eq!(std::fs::read_to_string(with("-secret")).unwrap(), SECRET);
            assert_eq!(
                std::fs::read_to_string(with("-piped")).unwrap(),
                format!("{SECRET}\n")
            );
        } else {
            assert!(seen.out.stdout.contains("sudo"), "{}", seen.out.stdout);
            // What sudo said went through the debug log too.
            assert!(
                seen.out.stderr.contains("agent stderr"),
                "{}",
                seen.out.stderr
            );
        }
    }
    // The once step was journalled (so the journal above was worth reading).
    let state = fleet
        .fx
        .path(&format!("t/{}.state", fleet.hosts[0].alias()));
    assert!(
        files_under(&state, &[])
            .iter()
            .any(|(_, text)| text.contains("pipe-the-secret")),
        "no journal record in {}",
        state.display()
    );
}
