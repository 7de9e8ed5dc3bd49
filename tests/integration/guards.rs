//! The guard rule's `when:` form: a command whose `when` reads a registered result, or a fact
//! `set_fact` derives from one (transitively, anywhere in the loaded playbook), is guarded (the
//! author tied it to a change: geerlingguy.mysql's root-password steps); a `when` on inventory
//! or play variables only is not.

use crate::fx::Fx;

/// A change registered by `copy`, carried through two `set_fact`s, guards a `shell` that
/// appends a line: it runs on the run that changed the file and is skipped on the next.
#[test]
fn when_reading_a_registered_change_is_a_guard_and_converges() {
    let fx = Fx::new();
    fx.play(
        "    - file: { path: \"{{ base }}\", state: directory }\n    - copy: { content: \"x\\n\", dest: \"{{ base }}/f\" }\n      register: wrote\n    - set_fact: { first: \"{{ wrote is changed }}\" }\n    - set_fact:\n        second: \"{{ first | bool }}\"\n    - name: derived\n      shell: echo derived >> {{ base }}/log\n      when: second | bool\n    - name: direct\n      command: touch {{ base }}/direct\n      when:\n        - wrote.changed\n",
    );
    fx.run(&["validate", "site.yml"]).expect(0);
    let first = fx.apply(&[]);
    first.expect(0);
    assert_eq!(first.status_of("derived"), "changed");
    assert_eq!(first.status_of("direct"), "changed");
    let second = fx.apply(&[]);
    second.expect(0);
    assert_eq!(second.status_of("derived"), "skipped");
    assert_eq!(second.status_of("direct"), "skipped");
    assert_eq!(fx.read("t/log"), "derived\n");
}

/// A `when` on a play variable (or a fact set from one) says nothing about whether the work is
/// done: refused at load time, with the guard help naming the `when` form.
#[test]
fn when_on_variables_alone_is_still_refused() {
    let fx = Fx::new();
    fx.write("group_vars/all.yml", "enabled_flag: true\n");
    fx.play(
        "    - set_fact: { also: \"{{ enabled_flag }}\" }\n    - name: raw\n      shell: echo hi > {{ base }}/x\n      when: enabled_flag and also\n",
    );
    let out = fx.run(&["validate", "site.yml"]);
    out.expect(2);
    assert!(
        out.stderr.contains("unguarded `shell` task \"raw\""),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("site.yml:9:7"), "{}", out.stderr);
    assert!(out.stderr.contains("reads a registered"), "{}", out.stderr);
    fx.apply(&[]).expect(2);
    assert!(!fx.path("t/x").exists());
}

/// A file a templated include loads at run time is judged with the playbook's names: a
/// command there guarded by a result registered in the playbook runs; one whose `when` reads
/// only a variable fails the host when it includes the file (a warning at load time).
#[test]
fn run_time_includes_are_judged_with_the_playbooks_registered_names() {
    let fx = Fx::new();
    fx.write(
        "tasks-good.yml",
        "- name: guarded in include\n  command: touch {{ base }}/inc\n  when: made is changed\n",
    );
    fx.write(
        "tasks-bad.yml",
        "- name: unguarded in include\n  command: touch {{ base }}/bad\n  when: which == 'bad'\n",
    );
    fx.play(
        "    - file: { path: \"{{ base }}\", state: directory }\n      register: made\n    - include_tasks: \"tasks-{{ which }}.yml\"\n",
    );
    let out = fx.run(&["validate", "site.yml"]);
    out.expect(0);
    assert!(
        out.stderr
            .contains("warning: unguarded `command` task \"unguarded in include\""),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("task \"guarded in include\""),
        "{}",
        out.stderr
    );
    let good = fx.apply(&["-e", "which=good"]);
    good.expect(0);
    assert_eq!(good.status_of("guarded in include"), "changed");
    let bad = fx.apply(&["-e", "which=bad"]);
    bad.expect(1);
    assert!(
        bad.stdout.contains("unguarded `command` task"),
        "{}",
        bad.stdout
    );
    assert!(!fx.path("t/bad").exists());
}
