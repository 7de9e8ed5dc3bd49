//! `--list-hosts`, `--list-tasks`, `--list-tags`, `--syntax-check`, `--start-at-task`.

use crate::fx::Fx;

fn setup(fx: &Fx) {
    fx.write(
        "inventory.ini",
        &format!(
            "[web]\nw1 ansible_connection=local fixpoint_state_dir={s}/1\nw2 ansible_connection=local fixpoint_state_dir={s}/2\n[db]\nd1 ansible_connection=local fixpoint_state_dir={s}/3\n",
            s = fx.state_dir().display()
        ),
    );
    fx.write(
        "roles/base/tasks/main.yml",
        "- name: base task\n  debug:\n    msg: b\n  tags: [basetag]\n",
    );
    fx.write(
        "site.yml",
        concat!(
            "- name: web play\n  hosts: web\n  gather_facts: false\n  roles: [base]\n  tasks:\n",
            "    - name: first\n      debug:\n        msg: one\n      tags: [t1]\n",
            "    - block:\n        - name: in block\n          debug:\n            msg: two\n      tags: [t2]\n",
            "    - name: last\n      debug:\n        msg: three\n",
        ),
    );
}

#[test]
fn list_hosts_tasks_and_tags_print_without_running() {
    let fx = Fx::new();
    setup(&fx);
    let out = fx.run(&["apply", "-i", "inventory.ini", "--list-hosts", "site.yml"]);
    out.expect(0);
    assert!(
        out.stdout.contains("play #1 (web): web play"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("hosts (2):\n      w1\n      w2\n"),
        "{}",
        out.stdout
    );
    let out = fx.run(&[
        "apply",
        "-i",
        "inventory.ini",
        "--list-hosts",
        "-l",
        "w2",
        "site.yml",
    ]);
    assert!(
        out.stdout.contains("hosts (1):\n      w2\n"),
        "{}",
        out.stdout
    );

    let out = fx.run(&["apply", "-i", "inventory.ini", "--list-tasks", "site.yml"]);
    out.expect(0);
    let tasks: Vec<&str> = out
        .stdout
        .lines()
        .skip_while(|l| !l.contains("tasks:"))
        .skip(1)
        .map(str::trim)
        .collect();
    assert_eq!(
        tasks,
        [
            "base : base task\tTAGS: [basetag]",
            "first\tTAGS: [t1]",
            "in block\tTAGS: [t2]",
            "last\tTAGS: []"
        ]
    );
    let out = fx.run(&[
        "apply",
        "-i",
        "inventory.ini",
        "--list-tasks",
        "--tags",
        "t2",
        "site.yml",
    ]);
    assert!(
        out.stdout.contains("in block") && !out.stdout.contains("first"),
        "{}",
        out.stdout
    );

    let out = fx.run(&["apply", "-i", "inventory.ini", "--list-tags", "site.yml"]);
    out.expect(0);
    assert!(
        out.stdout.contains("TASK TAGS: [basetag, t1, t2]"),
        "{}",
        out.stdout
    );
    // Nothing ran: no state directory was created.
    assert!(!fx.state_dir().exists());
}

#[test]
fn syntax_check_is_validate() {
    let fx = Fx::new();
    setup(&fx);
    let out = fx.run(&["apply", "-i", "inventory.ini", "--syntax-check", "site.yml"]);
    out.expect(0);
    // As ansible-playbook: the playbook's name, nothing more (the conformance case
    // `syntax_check` compares the text).
    assert_eq!(out.stdout.trim(), "playbook: site.yml", "{}", out.stdout);
    fx.write(
        "roles/base/tasks/main.yml",
        "- name: bad\n  debug:\n    msg: \"{{ oops(\"\n",
    );
    let out = fx.run(&["apply", "-i", "inventory.ini", "--syntax-check", "site.yml"]);
    out.expect(2);
    assert!(
        out.stderr.contains("roles/base/tasks/main.yml:1:3"),
        "{}",
        out.stderr
    );
    assert!(!fx.state_dir().exists());
}

#[test]
fn start_at_task_skips_the_tasks_before_it() {
    let fx = Fx::new();
    setup(&fx);
    let out = fx.run(&[
        "apply",
        "--format",
        "json",
        "-i",
        "inventory.ini",
        "--start-at-task",
        "in block",
        "site.yml",
    ]);
    out.expect(0);
    let names: Vec<String> = out
        .events()
        .into_iter()
        .filter(|e| e["event"] == "task" && e["host"] == "w1")
        .map(|e| e["task"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["in block", "last"]);
    let out = fx.run(&[
        "apply",
        "--format",
        "json",
        "-i",
        "inventory.ini",
        "--start-at-task",
        "base : base task",
        "site.yml",
    ]);
    out.expect(0);
    assert_eq!(out.task_events("base task").len(), 2);
    let out = fx.run(&[
        "apply",
        "-i",
        "inventory.ini",
        "--start-at-task",
        "nope",
        "site.yml",
    ]);
    // Named by no task: refused before any host is touched.
    out.expect(2);
    assert!(
        out.stderr
            .contains("--start-at-task `nope`: no task of the playbooks"),
        "{}{}",
        out.stdout,
        out.stderr
    );
    assert!(!fx.state_dir().exists());
}
