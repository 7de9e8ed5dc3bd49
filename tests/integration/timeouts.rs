//! Task timeouts and what an agent may send back: a timed-out command is killed on the host
//! with everything it started, and a garbage, oversized or out-of-step answer fails that host
//! alone.

use crate::fx::{Fx, Out};
use std::path::Path;

/// Whether a process still runs (a zombie waiting for its parent has finished running).
fn alive(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) {
        // The state is the field after the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

#[test]
fn a_task_timeout_kills_the_command_and_what_it_started_and_the_next_task_gets_its_own_answer() {
    let fx = Fx::new();
    fx.play(concat!(
        "    - name: dir\n      file:\n        path: \"{{ base }}\"\n        state: directory\n",
        // A background child and the shell: both must be gone after the timeout.
        "    - name: slow\n      shell: \"sleep 300 & echo $! > {{ base }}/bg; echo $$ > {{ base }}/sh; wait\"\n",
        "      args:\n        creates: \"{{ base }}/never\"\n      timeout: 2\n      ignore_errors: true\n",
        "    - name: next\n      command: echo next-answer\n      register: r\n      changed_when: false\n",
        "    - name: check\n      assert:\n        that: r.stdout == 'next-answer'\n",
    ));
    let out = fx.apply(&[]);
    out.expect(0);
    let slow = out.task_events("slow");
    assert_eq!(slow[0]["status"], "failed", "{}", out.stdout);
    let msg = slow[0]["msg"].as_str().unwrap();
    assert!(msg.contains("Timed out after 2 second(s)"), "{msg}");
    assert!(msg.contains("killed"), "{msg}");
    assert_eq!(out.status_of("next"), "ok");
    assert_eq!(out.status_of("check"), "ok");
    for f in ["bg", "sh"] {
        let pid = fx.read(&format!("t/{f}"));
        assert!(!alive(&pid), "the `{f}` process {pid} still runs");
    }
    // The lock went with the agent: the next run takes it at once.
    fx.apply(&[]).expect(0);
}

/// A stand-in agent that says it started, sends `frames` and then waits for the controller to
/// hang up.
fn stand_in(fx: &Fx, name: &str, frames: &[u8]) -> String {
    let bin = fx.path(&format!("{name}.frames"));
    std::fs::write(&bin, frames).unwrap();
    let script = fx.write(
        &format!("{name}.sh"),
        &format!(
            "#!/bin/sh\nprintf FXPAGNT1\ncat '{}'\nexec cat >/dev/null\n",
            bin.display()
        ),
    );
    script.display().to_string()
}

fn frame(json: &str) -> Vec<u8> {
    let mut f = (json.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(json.as_bytes());
    f
}

fn host_line(fx: &Fx, name: &str, agent: Option<&str>) -> String {
    let mut line = format!(
        "{name} ansible_connection=local fixpoint_state_dir={}",
        Path::new(&fx.state_dir()).join(name).display()
    );
    if let Some(a) = agent {
        line.push_str(&format!(" fixpoint_agent_path={a}"));
    }
    line + "\n"
}

fn event_of(out: &Out, host: &str) -> serde_json::Value {
    out.events()
        .into_iter()
        .find(|e| e["event"] == "task" && e["host"] == host)
        .unwrap_or_else(|| panic!("no result for {host}: {}", out.stdout))
}

#[test]
fn an_oversized_garbage_or_out_of_step_answer_fails_that_host_and_the_other_succeeds() {
    let fx = Fx::new();
    // 100 MiB announced, a few bytes sent: under the old 256 MiB limit it was allocated.
    let mut huge = (100u32 * 1024 * 1024).to_be_bytes().to_vec();
    huge.extend_from_slice(b"{\"id\":1");
    let huge = stand_in(&fx, "huge", &huge);
    let garbage = stand_in(&fx, "garbage", &frame("hello, this is not JSON"));
    // Answers hello (request 1) and begin (2), then answers the task (3) with request 2's id.
    let mut stale =
        frame(r#"{"id":1,"resp":{"reply":"hello","version":"0","pid":1,"uid":0,"user":"root"}}"#);
    stale.extend(frame(
        r#"{"id":2,"resp":{"reply":"begun","state_dir":"/nonexistent","pending":[],"pruned":0}}"#,
    ));
    stale.extend(frame(r#"{"id":2,"resp":{"reply":"ack"}}"#));
    let stale = stand_in(&fx, "stale", &stale);
    let inv = [
        host_line(&fx, "good", None),
        host_line(&fx, "huge", Some(&huge)),
        host_line(&fx, "garbage", Some(&garbage)),
        host_line(&fx, "stale", Some(&stale)),
    ]
    .concat();
    fx.write("hosts.ini", &format!("[all]\n{inv}"));
    fx.write(
        "site.yml",
        &format!(
            "- hosts: all\n  gather_facts: false\n  tasks:\n    - name: write\n      copy:\n        content: ok\n        dest: \"{}/{{{{ inventory_hostname }}}}\"\n",
            fx.path("t").display()
        ),
    );
    std::fs::create_dir_all(fx.path("t")).unwrap();
    let out = std::process::Command::new(crate::fx::bin())
        .args(["apply", "--format", "json", "-i", "hosts.ini", "site.yml"])
        .current_dir(fx.dir.path())
        // The stand-ins are cached like agents: in this fixture, not the user's cache.
        .env("XDG_CACHE_HOME", fx.path("cache"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let out = Out::from(out);
    out.expect(1);
    assert_eq!(
        event_of(&out, "good")["status"],
        "changed",
        "{}",
        out.stdout
    );
    assert_eq!(fx.read("t/good"), "ok");
    for (host, says) in [
        ("huge", "larger than the limit"),
        ("garbage", "not readable"),
        ("stale", "out of step"),
    ] {
        let ev = event_of(&out, host);
        let status = ev["status"].as_str().unwrap();
        assert!(status == "failed" || status == "unreachable", "{ev}");
        let msg = ev["msg"].as_str().unwrap();
        assert!(msg.contains(says), "{host}: {msg}");
        assert!(!fx.path(&format!("t/{host}")).exists());
    }
    let recap = out.recap();
    assert_eq!(recap["hosts"]["good"]["changed"], 1, "{}", out.stdout);
}
