//! The on-host journal over real SSH: retried `once:` steps, concurrent runs, lost responses,
//! conflicts, durable handlers, and locks that die with their run.

use crate::fx::Out;
use crate::ssh::Fleet;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn lines(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

impl Fleet {
    /// `fixpoint journal` against the fleet.
    fn journal(&self, args: &[&str]) -> Out {
        self.run("journal", args)
    }
}

fn output(child: std::process::Child) -> Out {
    Out::from(child.wait_with_output().unwrap())
}

const APPEND_ONCE: &str = concat!(
    "    - name: dir\n      file:\n        path: \"{{ base }}\"\n        state: directory\n",
    "    - name: append\n      shell: echo line >> {{ base }}/log\n      once: append-v1\n      register: r\n",
    "    - name: rc\n      assert:\n        that: r.rc == 0\n",
);

#[test]
fn a_once_step_retried_three_times_appends_one_line() {
    let fleet = Fleet::start(1, "fpuser");
    fleet.play(APPEND_ONCE);
    let log = fleet.base(&fleet.hosts[0]).join("log");
    let first = fleet.apply(&[]);
    first.expect(0);
    assert_eq!(first.status_of("append"), "changed");
    for _ in 0..2 {
        let again = fleet.apply(&[]);
        again.expect(0);
        let ev = &again.task_events("append")[0];
        assert_eq!(ev["status"], "ok", "{}", again.stdout);
        assert!(ev["note"].as_str().unwrap().contains("replayed"), "{ev}");
    }
    assert_eq!(lines(&log), 1);
    let list = fleet.journal(&["list"]);
    list.expect(0);
    assert!(
        list.stdout.contains("append-v1") && list.stdout.contains("done"),
        "{}",
        list.stdout
    );
}

#[test]
fn two_runs_at_once_append_once_and_the_other_reports_the_lock() {
    let fleet = Fleet::start(1, "fpuser");
    let base = fleet.base(&fleet.hosts[0]);
    // The step holds the lock until the test releases it (bounded: 60 s), so the second run
    // certainly meets the first one's lock. `who` says which run wrote last: the second run's
    // first batch travels with its `Begin`, and must not run without the lock.
    fleet.play(concat!(
        "    - name: dir\n      file:\n        path: \"{{ base }}\"\n        state: directory\n",
        "    - name: who\n      copy:\n        dest: \"{{ base }}/who\"\n        content: \"{{ who }}\"\n",
        "    - name: append\n      shell: echo line >> {{ base }}/log; for i in $(seq 600); do test -e {{ base }}/release && break; sleep 0.1; done\n      once: append-v1\n",
    ));
    let a = fleet.spawn_apply(&["-e", "who=first"], Stdio::null());
    let deadline = Instant::now() + Duration::from_secs(60);
    while !base.join("log").exists() {
        assert!(
            Instant::now() < deadline,
            "the first run never reached its step"
        );
        std::thread::yield_now();
    }
    let b = output(fleet.spawn_apply(&["-e", "who=second"], Stdio::null()));
    std::fs::write(base.join("release"), "").unwrap();
    let a = output(a);
    assert_eq!(a.code, 0, "{}", a.stdout);
    assert_eq!(b.code, 1, "the second run is locked out:\n{}", b.stdout);
    assert!(b.stdout.contains("locked by run"), "{}", b.stdout);
    assert!(b.stdout.contains("playbook site.yml"), "{}", b.stdout);
    assert_eq!(lines(&base.join("log")), 1);
    assert_eq!(
        std::fs::read_to_string(base.join("who")).unwrap(),
        "first",
        "the locked-out run changed the host"
    );
}

#[test]
fn lost_response_is_in_doubt_until_resolved() {
    let fleet = Fleet::start(1, "fpuser");
    // The effect happens, then the agent dies before it can record `done`.
    fleet.play(concat!(
        "    - name: dir\n      file:\n        path: \"{{ base }}\"\n        state: directory\n",
        "    - name: append\n      shell: echo line >> {{ base }}/log; kill -9 $PPID\n      once: append-v1\n",
    ));
    let log = fleet.base(&fleet.hosts[0]).join("log");
    let first = fleet.apply(&[]);
    first.expect(1);
    let msg = first.task_events("append")[0]["msg"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("connection lost") && msg.contains("unknown"),
        "{msg}"
    );
    assert_eq!(lines(&log), 1);

    let second = fleet.apply(&[]);
    second.expect(1);
    let msg = second.task_events("append")[0]["msg"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("in doubt") && msg.contains("journal resolve"),
        "{msg}"
    );
    assert_eq!(lines(&log), 1, "an in-doubt step is not run again");

    let host = fleet.hosts[0].alias();
    fleet
        .journal(&["resolve", host, "append-v1", "--done"])
        .expect(0);
    let third = fleet.apply(&[]);
    third.expect(0);
    assert_eq!(third.status_of("append"), "ok");
    assert_eq!(lines(&log), 1);
}

#[test]
fn lost_response_with_a_probe_guard_is_settled_by_the_probe() {
    let fleet = Fleet::start(1, "fpuser");
    fleet.play(concat!(
        "    - name: dir\n      file:\n        path: \"{{ base }}\"\n        state: directory\n",
        "    - name: append\n      shell: echo line >> {{ base }}/log; touch {{ base }}/marker; kill -9 $PPID\n",
        "      args:\n        creates: \"{{ base }}/marker\"\n      once: append-v1\n",
    ));
    let log = fleet.base(&fleet.hosts[0]).join("log");
    fleet.apply(&[]).expect(1);
    let second = fleet.apply(&[]);
    second.expect(0);
    let ev = &second.task_events("append")[0];
    assert_eq!(ev["status"], "ok", "{}", second.stdout);
    assert!(ev["note"].as_str().unwrap().contains("in doubt"), "{ev}");
    assert_eq!(lines(&log), 1);
    // Repaired: the record is now done.
    let list = fleet.journal(&["list"]);
    assert!(list.stdout.contains("done"), "{}", list.stdout);
}

#[test]
fn resolve_retry_runs_the_step_again() {
    let fleet = Fleet::start(1, "fpuser");
    fleet.play(APPEND_ONCE);
    fleet.apply(&[]).expect(0);
    let host = fleet.hosts[0].alias().to_string();
    fleet
        .journal(&["--host", &host, "resolve", "append-v1", "--retry"])
        .expect(0);
    fleet.apply(&[]).expect(0);
    assert_eq!(lines(&fleet.base(&fleet.hosts[0]).join("log")), 2);
}

#[test]
fn same_key_for_a_different_command_is_a_conflict_and_runs_nothing() {
    let fleet = Fleet::start(1, "fpuser");
    fleet.play(APPEND_ONCE);
    fleet.apply(&[]).expect(0);
    fleet.play(&APPEND_ONCE.replace("echo line", "echo other"));
    let out = fleet.apply(&[]);
    out.expect(1);
    let msg = out.task_events("append")[0]["msg"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("key `append-v1` was used for a different request on"),
        "{msg}"
    );
    let text = std::fs::read_to_string(fleet.base(&fleet.hosts[0]).join("log")).unwrap();
    assert_eq!(text, "line\n");
}

#[test]
fn durable_handler_runs_on_the_next_run_after_a_failure() {
    let fleet = Fleet::start(1, "fpuser");
    fleet.play_full(
        concat!(
            "  gather_facts: false\n",
            "  handlers:\n    - name: record\n      shell: echo ran >> {{ base }}/handler.log\n      args:\n        creates: /nonexistent/fixpoint\n",
        ),
        concat!(
            "    - name: dir\n      file:\n        path: \"{{ base }}\"\n        state: directory\n",
            "    - name: conf\n      copy:\n        content: v1\n        dest: \"{{ base }}/conf\"\n      notify: record\n",
            "    - name: boom\n      fail:\n        msg: broken on purpose\n      when: fail_now | default(false) | bool\n",
        ),
    );
    let hlog = fleet.base(&fleet.hosts[0]).join("handler.log");
    fleet.apply(&["-e", "fail_now=true"]).expect(1);
    assert_eq!(lines(&hlog), 0, "a failed host runs no handler");

    let second = fleet.apply(&[]);
    second.expect(0);
    assert_eq!(second.status_of("conf"), "ok", "nothing changes this time");
    assert_eq!(lines(&hlog), 1, "the pending handler ran");
    let notes: Vec<_> = second
        .events()
        .into_iter()
        .filter(|e| e["event"] == "note")
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n["msg"].as_str().unwrap().contains("pending since")),
        "{}",
        second.stdout
    );

    fleet.apply(&[]).expect(0);
    assert_eq!(lines(&hlog), 1, "a third run runs nothing");
}

#[test]
fn a_killed_controller_leaves_no_stale_lock() {
    let fleet = Fleet::start(1, "fpuser");
    fleet.play(concat!(
        "    - name: dir\n      file:\n        path: \"{{ base }}\"\n        state: directory\n",
        "    - name: slow\n      shell: touch {{ base }}/started; sleep 2\n      args:\n        creates: \"{{ base }}/never\"\n",
    ));
    let mut child = fleet.spawn_apply(&[], Stdio::null());
    let started = fleet.base(&fleet.hosts[0]).join("started");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !started.exists() {
        assert!(Instant::now() < deadline, "the slow task never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    // The agent ends when its channel closes; the next run gets the lock (waiting for the
    // step in flight to end) instead of finding a stale one.
    let out = fleet.apply(&["--lock-timeout", "60"]);
    out.expect(0);
}

/// Run the fleet's play saved under another file name (another playbook, another repository).
fn apply_as(fleet: &Fleet, name: &str) -> Out {
    std::fs::copy(fleet.fx.path("site.yml"), fleet.fx.path(name)).unwrap();
    let mut args = fleet.apply_args(&[]);
    *args.last_mut().unwrap() = name.to_string();
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    fleet.fx.run(&refs)
}

#[test]
fn a_key_names_one_operation_whichever_playbook_reaches_it() {
    let fleet = Fleet::start(1, "fpuser");
    let log = fleet.base(&fleet.hosts[0]).join("log");
    fleet.play(APPEND_ONCE);
    fleet.apply(&[]).expect(0);
    // The same step reached from another playbook is the same operation: replayed, not rerun.
    let again = apply_as(&fleet, "other.yml");
    again.expect(0);
    assert_eq!(again.status_of("append"), "ok", "{}", again.stdout);
    assert_eq!(lines(&log), 1);
    // Another playbook using the key for something else is a conflict, not a new key.
    fleet.play(&APPEND_ONCE.replace("echo line", "echo other"));
    let clash = apply_as(&fleet, "third.yml");
    clash.expect(1);
    assert!(
        clash.task_events("append")[0]["msg"]
            .as_str()
            .unwrap()
            .contains("was used for a different request"),
        "{}",
        clash.stdout
    );
    // `once_scope` gives the step a key space of its own.
    fleet.play(&APPEND_ONCE.replace(
        "once: append-v1\n",
        "once: append-v1\n      once_scope: \"{{ inventory_hostname }}-logs\"\n",
    ));
    let scoped = apply_as(&fleet, "third.yml");
    scoped.expect(0);
    assert_eq!(scoped.status_of("append"), "changed", "{}", scoped.stdout);
    assert_eq!(lines(&log), 2);
}

#[test]
fn a_pending_handler_is_delivered_by_whichever_playbook_has_a_handler_of_that_name() {
    let fleet = Fleet::start(1, "fpuser");
    let handlers = |name: &str| {
        format!(
            "  gather_facts: false\n  handlers:\n    - name: {name}\n      shell: echo {name} >> {{{{ base }}}}/handler.log\n"
        )
    };
    fleet.play_full(
        &handlers("record"),
        concat!(
            "    - name: dir\n      file:\n        path: \"{{ base }}\"\n        state: directory\n",
            "    - name: conf\n      copy:\n        content: v1\n        dest: \"{{ base }}/conf\"\n      notify: record\n",
            "    - name: boom\n      fail:\n        msg: broken on purpose\n",
        ),
    );
    let hlog = fleet.base(&fleet.hosts[0]).join("handler.log");
    fleet.apply(&[]).expect(1);
    assert_eq!(lines(&hlog), 0, "a failed host runs no handler");
    // Another playbook (another file name, another play) without that handler leaves it pending.
    let dir_only =
        "    - name: dir\n      file:\n        path: \"{{ base }}\"\n        state: directory\n";
    fleet.play_full(&handlers("other"), dir_only);
    apply_as(&fleet, "elsewhere.yml").expect(0);
    assert_eq!(lines(&hlog), 0);
    // One that has a handler of that name delivers it: the name is the operation.
    fleet.play_full(&handlers("record"), dir_only);
    let text = std::fs::read_to_string(fleet.fx.path("site.yml")).unwrap();
    std::fs::write(
        fleet.fx.path("site.yml"),
        text.replace("- hosts: fleet\n", "- name: another play\n  hosts: fleet\n"),
    )
    .unwrap();
    let delivered = apply_as(&fleet, "deploy.yml");
    delivered.expect(0);
    assert_eq!(std::fs::read_to_string(&hlog).unwrap(), "record\n");
    assert!(
        delivered
            .events()
            .iter()
            .any(|n| n["event"] == "note" && n["msg"].as_str().unwrap().contains("pending since")),
        "{}",
        delivered.stdout
    );
    // Delivered once: neither playbook runs it again.
    apply_as(&fleet, "deploy.yml").expect(0);
    apply_as(&fleet, "elsewhere.yml").expect(0);
    assert_eq!(lines(&hlog), 1);
}

#[test]
fn a_change_that_counts_as_unchanged_withdraws_only_the_notifications_it_created() {
    let fleet = Fleet::start(1, "fpuser");
    fleet.play_full(
        concat!(
            "  gather_facts: false\n",
            "  handlers:\n    - name: record\n      shell: echo ran >> {{ base }}/handler.log\n",
        ),
        concat!(
            "    - name: dir\n      file:\n        path: \"{{ base }}\"\n        state: directory\n",
            "    - name: conf\n      copy:\n        content: \"{{ v }}\"\n        dest: \"{{ base }}/conf\"\n      notify: record\n      register: r\n      changed_when: r.changed and not (quiet | default(false) | bool)\n",
            "    - name: boom\n      fail:\n        msg: broken on purpose\n      when: fail_now | default(false) | bool\n",
        ),
    );
    let hlog = fleet.base(&fleet.hosts[0]).join("handler.log");
    // A change, then the run fails before its handlers: the notification is pending.
    fleet.apply(&["-e", "v=1", "-e", "fail_now=true"]).expect(1);
    // Another write that `changed_when` calls no change, and again a failure: the notification
    // still pending from the first run is not this task's to withdraw.
    let quiet = fleet.apply(&["-e", "v=2", "-e", "quiet=true", "-e", "fail_now=true"]);
    quiet.expect(1);
    assert_eq!(quiet.status_of("conf"), "ok", "{}", quiet.stdout);
    assert_eq!(lines(&hlog), 0);
    let third = fleet.apply(&["-e", "v=2"]);
    third.expect(0);
    assert_eq!(
        lines(&hlog),
        1,
        "the first run's notification was delivered"
    );
    // A quiet change with nothing pending leaves nothing behind.
    fleet.apply(&["-e", "v=3", "-e", "quiet=true"]).expect(0);
    fleet.apply(&["-e", "v=3"]).expect(0);
    assert_eq!(lines(&hlog), 1, "the quiet change notified nothing");
}
