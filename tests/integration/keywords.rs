//! Play and task keywords: run_once, delegate_to, until/retries, meta, serial, any_errors_fatal, max_fail_percentage.

use crate::fx::{Fx, Out};
use crate::roles::play_head;

/// An inventory of local hosts, each with its own `base` and state dir, and a play on them.
fn hosts_play(fx: &Fx, names: &[&str], play_keys: &str, tasks: &str) {
    let mut inv = String::from("[web]\n");
    for n in names {
        inv.push_str(&format!(
            "{n} ansible_connection=local base={} fixpoint_state_dir={}\n",
            fx.path(&format!("t/{n}")).display(),
            fx.path(&format!("state/{n}")).display()
        ));
        std::fs::create_dir_all(fx.path(&format!("t/{n}"))).unwrap();
    }
    fx.write("inventory.ini", &inv);
    fx.write(
        "site.yml",
        &format!("- hosts: web\n  gather_facts: false\n{play_keys}  tasks:\n{tasks}"),
    );
}

fn run(fx: &Fx, extra: &[&str]) -> Out {
    let mut args = vec!["apply", "--format", "json", "-i", "inventory.ini"];
    args.extend_from_slice(extra);
    args.push("site.yml");
    fx.run(&args)
}

fn hosts_of(out: &Out, task: &str) -> Vec<String> {
    out.task_events(task)
        .iter()
        .map(|e| e["host"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn run_once_runs_on_the_first_host_and_shares_its_result() {
    let fx = Fx::new();
    hosts_play(
        &fx,
        &["a", "b", "c"],
        "",
        concat!(
            "    - name: once\n      command: echo {{ inventory_hostname }}\n      changed_when: false\n      run_once: true\n      register: who\n",
            "    - name: record\n      copy:\n        content: \"{{ who.stdout }}\"\n        dest: \"{{ base }}/who\"\n",
        ),
    );
    let out = run(&fx, &[]);
    out.expect(0);
    assert_eq!(hosts_of(&out, "once"), ["a"]);
    for h in ["a", "b", "c"] {
        assert_eq!(
            std::fs::read_to_string(fx.path(&format!("t/{h}/who"))).unwrap(),
            "a"
        );
    }
}

#[test]
fn delegate_to_runs_through_the_other_host_with_this_hosts_variables() {
    let fx = Fx::new();
    hosts_play(
        &fx,
        &["a", "b"],
        "",
        "    - name: delegated\n      command: touch {{ base }}/by-{{ inventory_hostname }}\n      once: mark-{{ inventory_hostname }}\n      delegate_to: b\n      when: inventory_hostname == 'a'\n",
    );
    let out = run(&fx, &[]);
    out.expect(0);
    // The variables are a's...
    assert!(fx.path("t/a/by-a").exists());
    let ev = out
        .task_events("delegated")
        .into_iter()
        .find(|e| e["host"] == "a")
        .unwrap();
    assert_eq!(ev["delegated_to"], "b");
    // ...the journal record of the `once:` step is on b, where it ran.
    let records = |h: &str| {
        std::fs::read_dir(fx.path(&format!("state/{h}/journal")))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    assert_eq!(records("b"), 1);
    assert_eq!(records("a"), 0);
    // `localhost` is the implicit local host, even when the inventory does not name it.
    fx.write(
        "host_vars/localhost.yml",
        &format!("fixpoint_state_dir: {}\n", fx.path("state/local").display()),
    );
    hosts_play(
        &fx,
        &["a"],
        "",
        "    - name: to localhost\n      command: touch {{ base }}/local-{{ inventory_hostname }}\n      once: local-mark\n      delegate_to: localhost\n",
    );
    run(&fx, &[]).expect(0);
    assert!(fx.path("t/a/local-a").exists());
    assert_eq!(records("local"), 1);
    assert_eq!(records("a"), 0);
    // A host that is not in the inventory is made up from its name, as in ansible-core: one
    // that name does not reach is unreachable, named in the message.
    hosts_play(
        &fx,
        &["a"],
        "",
        "    - name: nowhere\n      command: \"true\"\n      changed_when: false\n      delegate_to: ghost.invalid\n",
    );
    let out = run(&fx, &[]);
    out.expect(1);
    let ev = &out.task_events("nowhere")[0];
    assert_eq!(ev["status"], "unreachable", "{ev}");
    let msg = ev["msg"].as_str().unwrap().to_string();
    assert!(msg.contains("ghost.invalid"), "{msg}");
}

#[test]
fn until_retries_until_the_condition_holds_or_attempts_run_out() {
    let fx = Fx::new();
    std::fs::create_dir_all(fx.path("t")).unwrap();
    let counter = concat!(
        "      shell: n=$(cat {{ base }}/n 2>/dev/null || echo 0); echo $((n+1)) > {{ base }}/n; cat {{ base }}/n\n",
        "      args:\n        creates: /nonexistent/fixpoint\n      register: c\n      delay: 0\n",
    );
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            &format!("  tasks:\n    - name: count\n{counter}      until: c.stdout == '3'\n      retries: 5\n    - name: show\n      debug:\n        msg: \"{{{{ c.attempts }}}}\"\n"),
        ),
    );
    let out = fx.apply(&["-v"]);
    out.expect(0);
    assert_eq!(fx.read("t/n"), "3\n");
    assert_eq!(out.task_events("show")[0]["result"]["msg"], 3);
    std::fs::remove_file(fx.path("t/n")).unwrap();
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            &format!("  tasks:\n    - name: count\n{counter}      until: c.stdout == '100'\n      retries: 2\n"),
        ),
    );
    let out = fx.apply(&[]);
    out.expect(1);
    // retries: 2 means three attempts, as in ansible-core.
    assert_eq!(fx.read("t/n"), "3\n");
    let msg = out.task_events("count")[0]["msg"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("after 3 attempts"), "{msg}");
}

#[test]
fn meta_flush_handlers_end_host_end_play_and_noop() {
    let fx = Fx::new();
    hosts_play(
        &fx,
        &["a", "b"],
        "  handlers:\n    - name: h\n      debug:\n        msg: handled\n",
        concat!(
            "    - name: change\n      copy:\n        content: x\n        dest: \"{{ base }}/x\"\n      notify: h\n",
            "    - meta: flush_handlers\n",
            "    - name: after flush\n      debug:\n        msg: x\n",
            "    - meta: noop\n",
            "    - meta: end_host\n      when: inventory_hostname == 'b'\n",
            "    - name: after end_host\n      debug:\n        msg: x\n",
            "    - meta: end_play\n",
            "    - name: after end_play\n      debug:\n        msg: x\n",
        ),
    );
    let out = run(&fx, &[]);
    out.expect(0);
    let order: Vec<String> = out
        .events()
        .into_iter()
        .filter(|e| e["event"] == "task")
        .map(|e| e["task"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        order,
        [
            "change",
            "change",
            "h",
            "h",
            "after flush",
            "after flush",
            // `end_host` whose `when` is false on `a`: skipped there, as ansible-core reports it.
            "meta",
            "after end_host"
        ]
    );
    assert_eq!(hosts_of(&out, "after end_host"), ["a"]);
    // Unknown meta actions are load errors.
    hosts_play(&fx, &["a"], "", "    - meta: explode\n");
    let out = run(&fx, &[]);
    out.expect(2);
    assert!(out.stderr.contains("site.yml:4:13"), "{}", out.stderr);
}

#[test]
fn serial_runs_the_play_in_batches() {
    let fx = Fx::new();
    hosts_play(
        &fx,
        &["a", "b", "c", "d", "e"],
        "  serial: [1, \"50%\"]\n",
        concat!(
            "    - name: one\n      debug:\n        msg: \"{{ ansible_play_batch | join(',') }}\"\n",
            "    - name: two\n      debug:\n        msg: x\n",
        ),
    );
    let out = run(&fx, &["-v"]);
    out.expect(0);
    let seq: Vec<String> = out
        .events()
        .into_iter()
        .filter(|e| e["event"] == "task")
        .map(|e| {
            format!(
                "{}@{}",
                e["task"].as_str().unwrap(),
                e["host"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        seq,
        [
            "one@a", "two@a", "one@b", "one@c", "two@b", "two@c", "one@d", "one@e", "two@d",
            "two@e"
        ]
    );
    assert_eq!(out.task_events("one")[1]["result"]["msg"], "b,c");
}

#[test]
fn any_errors_fatal_and_max_fail_percentage_end_the_play() {
    let fx = Fx::new();
    let tasks = concat!(
        "    - name: maybe fail\n      fail:\n        msg: no\n      when: inventory_hostname == 'a'\n",
        "    - name: next\n      debug:\n        msg: x\n",
    );
    hosts_play(
        &fx,
        &["a", "b", "c", "d"],
        "",
        &format!("{tasks}    - name: live\n      debug:\n        msg: \"{{{{ ansible_play_hosts | join(',') }}}}|{{{{ ansible_play_hosts_all | join(',') }}}}\"\n"),
    );
    let out = run(&fx, &["-v"]);
    out.expect(1);
    assert_eq!(hosts_of(&out, "next"), ["b", "c", "d"]);
    // ansible_play_hosts leaves out the failed host; ansible_play_hosts_all does not.
    assert_eq!(out.task_events("live")[0]["result"]["msg"], "b,c,d|a,b,c,d");

    hosts_play(
        &fx,
        &["a", "b", "c", "d"],
        "  any_errors_fatal: true\n",
        tasks,
    );
    let out = run(&fx, &[]);
    out.expect(1);
    assert!(out.task_events("next").is_empty());

    // 1 of 4 is 25%: not more than 25, so the play goes on; above 20 it ends.
    hosts_play(
        &fx,
        &["a", "b", "c", "d"],
        "  max_fail_percentage: 25\n",
        tasks,
    );
    run(&fx, &[]).expect(1);
    assert_eq!(hosts_of(&run(&fx, &[]), "next"), ["b", "c", "d"]);
    hosts_play(
        &fx,
        &["a", "b", "c", "d"],
        "  max_fail_percentage: 20\n",
        tasks,
    );
    let out = run(&fx, &[]);
    out.expect(1);
    assert!(out.task_events("next").is_empty());

    // A failure inside a block with a rescue still fails every other host at once, as in
    // ansible-core: both run the rescue and go on with the play. With no later play the run
    // succeeds (case any_errors_fatal_rescued_last_play); a later play would make b's
    // failure count (case any_errors_fatal_rescued_later_plays).
    hosts_play(
        &fx,
        &["a", "b"],
        "  any_errors_fatal: true\n",
        concat!(
            "    - block:\n        - fail:\n            msg: no\n          when: inventory_hostname == 'a'\n",
            "      rescue:\n        - debug:\n            msg: rescued\n",
            "    - name: next\n      debug:\n        msg: x\n",
        ),
    );
    let out = run(&fx, &[]);
    out.expect(0);
    assert_eq!(hosts_of(&out, "next"), ["a", "b"]);
}

#[test]
fn strategy_free_lets_each_host_go_at_its_own_pace() {
    let fx = Fx::new();
    let marker = fx.path("t/b-was-here");
    let signal = fx.path("t/b-is-through");
    // Host a's first task waits (bounded) for a file that host b writes in its *last* task,
    // after b's write and its flushed handler have been reported: under `linear` b cannot reach
    // those tasks before a's first one ends, so a fails; under `free` b goes ahead and a sees
    // the file. The order of the reports then follows from the file, not from timing.
    let tasks = format!(
        concat!(
            "    - name: a waits for b\n      shell: for i in $(seq 1 50); do test -e {s} && exit 0; sleep 0.1; done; exit 1\n",
            "      changed_when: false\n      when: inventory_hostname == 'a'\n",
            "    - name: b is slow to start\n      debug:\n        msg: x\n",
            "    - name: b writes\n      copy:\n        content: b\n        dest: {m}\n      when: inventory_hostname == 'b'\n      notify: done\n",
            "    - meta: flush_handlers\n",
            "    - name: b signals\n      copy:\n        content: b\n        dest: {s}\n      when: inventory_hostname == 'b'\n",
        ),
        m = marker.display(),
        s = signal.display()
    );
    let handlers = "  handlers:\n    - name: done\n      debug:\n        msg: handled\n";
    hosts_play(
        &fx,
        &["a", "b"],
        &format!("  strategy: free\n{handlers}"),
        &tasks,
    );
    let out = run(&fx, &[]);
    out.expect(0);
    let seq: Vec<String> = out
        .events()
        .into_iter()
        .filter(|e| e["event"] == "task")
        .map(|e| {
            format!(
                "{}@{}",
                e["task"].as_str().unwrap(),
                e["host"].as_str().unwrap()
            )
        })
        .collect();
    let pos = |s: &str| {
        seq.iter()
            .position(|x| x == s)
            .unwrap_or_else(|| panic!("{s}: {seq:?}"))
    };
    assert!(pos("b writes@b") < pos("a waits for b@a"), "{seq:?}");
    assert!(
        pos("done@b") < pos("a waits for b@a"),
        "b's handlers ran in its own lane: {seq:?}"
    );
    // --forks still bounds the hosts worked on at once: with one, a waits alone and fails.
    std::fs::remove_file(&marker).unwrap();
    std::fs::remove_file(&signal).unwrap();
    run(&fx, &["--forks", "1"]).expect(1);
    // The same play under `linear` cannot finish: a waits for a task b has not reached.
    std::fs::remove_file(&marker).unwrap();
    std::fs::remove_file(&signal).unwrap();
    hosts_play(&fx, &["a", "b"], handlers, &tasks);
    run(&fx, &[]).expect(1);
}

#[test]
fn strategy_free_refuses_what_coordinates_hosts_and_others_are_refused() {
    let fx = Fx::new();
    hosts_play(
        &fx,
        &["a"],
        "  strategy: free\n",
        "    - debug:\n        msg: x\n      run_once: true\n      register: r\n",
    );
    let out = run(&fx, &[]);
    out.expect(2);
    assert!(
        out.stderr.contains(
            "`run_once` on a task that registers its result is refused in a `strategy: free` play"
        ),
        "{}",
        out.stderr
    );
    hosts_play(
        &fx,
        &["a"],
        "  strategy: debug\n",
        "    - debug:\n        msg: x\n",
    );
    let out = run(&fx, &[]);
    out.expect(2);
    assert!(
        out.stderr.contains("not supported by fixpoint yet"),
        "{}",
        out.stderr
    );
}

#[test]
fn loop_control_extended_and_pause() {
    let fx = Fx::new();
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            concat!(
                "  tasks:\n    - name: ext\n      debug:\n        msg: \"{{ ansible_loop.index }}/{{ ansible_loop.length }} {{ ansible_loop.first }} {{ ansible_loop.last }} {{ ansible_loop.previtem | default('-') }} {{ ansible_loop.nextitem | default('-') }}\"\n",
                "      loop: [a, b, c]\n      loop_control:\n        extended: true\n        pause: 0.01\n",
            ),
        ),
    );
    let out = fx.apply(&["-v"]);
    out.expect(0);
    let msgs: Vec<String> = out
        .task_events("ext")
        .iter()
        .map(|e| e["result"]["msg"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        msgs,
        [
            "1/3 True False - b",
            "2/3 False False a c",
            "3/3 False True b -"
        ]
    );
    // An include takes neither.
    fx.write("inc.yml", "- debug:\n    msg: x\n");
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            "  tasks:\n    - include_tasks: inc.yml\n      loop: [1]\n      loop_control:\n        pause: 1\n",
        ),
    );
    let out = fx.apply(&[]);
    out.expect(2);
    assert!(
        out.stderr
            .contains("`pause` is not supported by fixpoint yet"),
        "{}",
        out.stderr
    );
}

#[test]
fn with_loops_dict_fileglob_sequence_nested_together_subelements() {
    let fx = Fx::new();
    fx.write("files/conf.d/a.conf", "a");
    fx.write("files/conf.d/b.conf", "b");
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            concat!(
                "    users:\n      - name: ann\n        keys: [k1, k2]\n      - name: bob\n        keys: [k3]\n",
                "  tasks:\n",
                "    - name: dict\n      debug:\n        msg: \"{{ item.key }}={{ item.value }}\"\n      with_dict:\n        x: 1\n        y: 2\n",
                "    - name: glob\n      debug:\n        msg: \"{{ item | basename }}\"\n      with_fileglob: conf.d/*.conf\n",
                "    - name: seq\n      debug:\n        msg: \"{{ item }}\"\n      with_sequence: start=1 end=5 stride=2 format=n%02d\n",
                "    - name: nested\n      debug:\n        msg: \"{{ item[0] }}{{ item[1] }}\"\n      with_nested:\n        - [a, b]\n        - \"{{ [1, 2] }}\"\n",
                "    - name: together\n      debug:\n        msg: \"{{ item[0] }}-{{ item[1] }}\"\n      with_together:\n        - [a, b]\n        - [1, 2]\n",
                "    - name: subs\n      debug:\n        msg: \"{{ item[0].name }}:{{ item[1] }}\"\n      with_subelements:\n        - \"{{ users }}\"\n        - keys\n",
                "    - name: items flattens after rendering\n      debug:\n        msg: \"{{ item }}\"\n      with_items: \"{{ [[1, 2], 3] }}\"\n",
            ),
        ),
    );
    let out = fx.apply(&["-v"]);
    out.expect(0);
    let msgs = |t: &str| -> Vec<String> {
        out.task_events(t)
            .iter()
            .map(|e| match &e["result"]["msg"] {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect()
    };
    assert_eq!(msgs("dict"), ["x=1", "y=2"]);
    // In the directory's own order, as Python's glob gives them.
    let mut glob = msgs("glob");
    glob.sort();
    assert_eq!(glob, ["a.conf", "b.conf"]);
    assert_eq!(msgs("seq"), ["n01", "n03", "n05"]);
    assert_eq!(msgs("nested"), ["a1", "a2", "b1", "b2"]);
    assert_eq!(msgs("together"), ["a-1", "b-2"]);
    assert_eq!(msgs("subs"), ["ann:k1", "ann:k2", "bob:k3"]);
    assert_eq!(msgs("items flattens after rendering"), ["1", "2", "3"]);
    // Two loops on one task are a load error.
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            "  tasks:\n    - debug:\n        msg: x\n      loop: [1]\n      with_items: [2]\n",
        ),
    );
    let out = fx.apply(&[]);
    out.expect(2);
    assert!(
        out.stderr.contains("has `loop` and `with_items`"),
        "{}",
        out.stderr
    );
}

#[test]
fn throttle_limits_the_hosts_running_a_task_at_once() {
    let fx = Fx::new();
    // Each host marks itself, then waits (bounded) for the other's mark: both succeed only
    // when they run the task at the same time.
    let meet = |extra: &str| {
        format!(
            concat!(
                "    - name: meet\n      shell: touch {t}/{{{{ inventory_hostname }}}}.here; for i in $(seq 1 50); do ls {t}/*.here | grep -qv {{{{ inventory_hostname }}}}.here && exit 0; sleep 0.1; done; exit 1\n",
                "      args:\n        creates: /nonexistent/fixpoint\n{extra}"
            ),
            t = fx.path("t").display(),
            extra = extra
        )
    };
    hosts_play(&fx, &["a", "b"], "", &meet(""));
    run(&fx, &[]).expect(0);
    for h in ["a", "b"] {
        std::fs::remove_file(fx.path(&format!("t/{h}.here"))).unwrap();
    }
    hosts_play(&fx, &["a", "b"], "", &meet("      throttle: 1\n"));
    run(&fx, &[]).expect(1);
}

#[test]
fn play_order_decides_the_host_order() {
    let fx = Fx::new();
    hosts_play(
        &fx,
        &["a", "b", "c"],
        "  serial: 1\n  order: reverse_sorted\n",
        "    - name: t\n      debug:\n        msg: \"{{ ansible_play_hosts_all | join(',') }}\"\n",
    );
    let out = run(&fx, &["-v"]);
    out.expect(0);
    assert_eq!(hosts_of(&out, "t"), ["c", "b", "a"]);
    // `ansible_play_hosts_all` keeps the inventory's order whatever `order` says, as in
    // ansible-core (conformance case `play_hosts_order_limit`).
    assert_eq!(out.task_events("t")[0]["result"]["msg"], "a,b,c");
}

#[test]
fn local_action_is_a_task_delegated_to_localhost() {
    let fx = Fx::new();
    fx.write(
        "host_vars/localhost.yml",
        &format!("fixpoint_state_dir: {}\n", fx.path("state/local").display()),
    );
    hosts_play(
        &fx,
        &["a"],
        "",
        concat!(
            "    - name: short form\n      local_action: command touch {{ base }}/short creates={{base}}/short\n",
            "    - name: long form\n      local_action:\n        module: copy\n        content: x\n        dest: \"{{ base }}/long\"\n",
        ),
    );
    let out = run(&fx, &[]);
    out.expect(0);
    assert!(fx.path("t/a/short").exists() && fx.path("t/a/long").exists());
    assert_eq!(
        out.task_events("short form")[0]["delegated_to"],
        "localhost"
    );
    assert_eq!(out.task_events("long form")[0]["delegated_to"], "localhost");
    hosts_play(
        &fx,
        &["a"],
        "",
        "    - local_action: command true\n      changed_when: false\n      delegate_to: a\n",
    );
    run(&fx, &[]).expect(2);
}

/// Issue 9, item 6: `action:` naming its module with a template runs it, resolved on the host
/// (with a warning that its arguments could not be checked at load); a name with a brace that
/// is not one template, or `action` beside `local_action`, is refused at load with its position.
#[test]
fn action_keyword_resolves_a_templated_module_and_refuses_a_second_action() {
    let fx = Fx::new();
    hosts_play(
        &fx,
        &["a"],
        "",
        "    - action: \"{{ mod }} path=/tmp state=directory\"\n      vars: {mod: file}\n",
    );
    let out = run(&fx, &[]);
    out.expect(0);
    assert!(
        out.stderr.contains("resolved at run time"),
        "{}",
        out.stderr
    );
    hosts_play(&fx, &["a"], "", "    - action: \"fi{le\"\n");
    let out = run(&fx, &[]);
    out.expect(2);
    assert!(out.stderr.contains("site.yml:4:15"), "{}", out.stderr);
    assert!(out.stderr.contains("must name a module"), "{}", out.stderr);
    hosts_play(
        &fx,
        &["a"],
        "",
        "    - action: debug msg=x\n      local_action: debug msg=y\n",
    );
    let out = run(&fx, &[]);
    out.expect(2);
    assert!(out.stderr.contains("site.yml:5:7"), "{}", out.stderr);
    assert!(
        out.stderr.contains("both `action` and `local_action`"),
        "{}",
        out.stderr
    );
}

/// `meta: reset_connection` logs in again: the tasks after it run under a new agent (another
/// parent process), which is what a user's new groups need; until then the agent stays.
#[test]
fn meta_reset_connection_logs_in_again() {
    let fleet = crate::ssh::Fleet::start(1, "fpuser");
    fleet.play(concat!(
        "    - shell: echo $PPID\n      register: a\n      changed_when: false\n",
        "    - shell: echo $PPID\n      register: b\n      changed_when: false\n",
        "    - meta: reset_connection\n",
        "    - shell: echo $PPID\n      register: c\n      changed_when: false\n",
        "    - debug:\n        msg: \"same agent {{ a.stdout == b.stdout }}, new agent {{ b.stdout != c.stdout }}\"\n",
    ));
    let out = fleet.apply(&["-v"]);
    out.expect(0);
    assert!(
        out.stdout.contains("same agent True, new agent True"),
        "{}",
        out.stdout
    );
}
