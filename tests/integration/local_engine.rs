//! The engine on the local transport: `--twice`, handlers, loops, variables, tags, output formats, load errors.

use crate::fx::Fx;

#[test]
fn fighting_tasks_make_twice_exit_3_and_name_both_tasks() {
    let fx = Fx::new();
    fx.play(concat!(
        "    - name: dir\n      file:\n        path: \"{{ base }}\"\n        state: directory\n",
        "    - name: whole file\n      copy:\n        content: \"a=1\\n\"\n        dest: \"{{ base }}/conf\"\n",
        "    - name: one line\n      lineinfile:\n        path: \"{{ base }}/conf\"\n        line: b=2\n",
    ));
    let out = fx.run(&["apply", "--twice", "site.yml"]);
    out.expect(3);
    assert!(out.stdout.contains("NOT CONVERGED"), "{}", out.stdout);
    let verdict = &out.stdout[out.stdout.find("NOT CONVERGED").unwrap()..];
    assert!(
        verdict.contains("whole file (") && verdict.contains("site.yml:11:7"),
        "{verdict}"
    );
    assert!(
        verdict.contains("one line (") && verdict.contains("site.yml:15:7"),
        "{verdict}"
    );
    assert!(
        verdict.contains("+b=2"),
        "the diff of the culprit is shown: {verdict}"
    );
}

#[test]
fn plain_touch_does_not_converge_and_preserving_both_times_does() {
    // `touch` means touch, as in Ansible: it bumps the times on every run, so `--twice` names it.
    let fx = Fx::new();
    fx.play(concat!(
        "    - file: { path: \"{{ base }}\", state: directory }\n",
        "    - name: mark\n      file: { path: \"{{ base }}/m\", state: touch }\n",
    ));
    let out = fx.run(&["apply", "--twice", "site.yml"]);
    out.expect(3);
    let verdict = &out.stdout[out.stdout.find("NOT CONVERGED").unwrap()..];
    assert!(verdict.contains("mark ("), "{verdict}");
    assert!(
        verdict.contains("mtime"),
        "the diff says what moved: {verdict}"
    );

    let fx = Fx::new();
    fx.play(concat!(
        "    - file: { path: \"{{ base }}\", state: directory }\n",
        "    - name: mark\n      file: { path: \"{{ base }}/m\", state: touch,",
        " modification_time: preserve, access_time: preserve }\n",
    ));
    fx.run(&["apply", "--twice", "site.yml"]).expect(0);
}

#[test]
fn converging_playbook_passes_twice_with_two_recaps() {
    let fx = Fx::new();
    fx.play(
        "    - name: dir\n      file:\n        path: \"{{ base }}\"\n        state: directory\n",
    );
    let out = fx.apply(&["--twice"]);
    out.expect(0);
    let recaps: Vec<_> = out
        .events()
        .into_iter()
        .filter(|e| e["event"] == "recap")
        .collect();
    assert_eq!(recaps.len(), 2);
    assert_eq!(recaps[0]["pass"], 1);
    assert_eq!(recaps[0]["hosts"]["localhost"]["changed"], 1);
    assert_eq!(recaps[1]["pass"], 2);
    assert_eq!(recaps[1]["hosts"]["localhost"]["changed"], 0);
    assert_eq!(recaps[1]["hosts"]["localhost"]["ok"], 1);
}

const HANDLERS: &str = "  handlers:\n    - name: record\n      shell: echo ran >> {{ base }}/handler.log\n      args:\n        creates: /nonexistent/fixpoint\n";

#[test]
fn notified_handler_runs_once_at_the_end() {
    let fx = Fx::new();
    fx.play_with(
        HANDLERS,
        concat!(
            "    - name: a\n      copy:\n        content: a\n        dest: \"{{ base }}/a\"\n      notify: record\n",
            "    - name: b\n      copy:\n        content: b\n        dest: \"{{ base }}/b\"\n      notify: record\n",
            "    - name: marker\n      copy:\n        content: \"{{ lookup_order | default('') }}\"\n        dest: \"{{ base }}/c\"\n",
        ),
    );
    std::fs::create_dir_all(fx.path("t")).unwrap();
    let out = fx.apply(&[]);
    out.expect(0);
    assert_eq!(fx.read("t/handler.log"), "ran\n");
    // The handler ran after the last task.
    assert_eq!(out.task_names(), ["a", "b", "marker", "record"]);
    // Converged: nothing notifies, the handler does not run.
    fx.apply(&[]).expect(0);
    assert_eq!(fx.read("t/handler.log"), "ran\n");
}

#[test]
fn handler_of_a_failed_host_does_not_run() {
    let fx = Fx::new();
    fx.play_with(
        HANDLERS,
        concat!(
            "    - name: a\n      copy:\n        content: a\n        dest: \"{{ base }}/a\"\n      notify: record\n",
            "    - name: boom\n      fail:\n        msg: broken\n",
        ),
    );
    std::fs::create_dir_all(fx.path("t")).unwrap();
    fx.apply(&[]).expect(1);
    assert!(!fx.path("t/handler.log").exists());
}

#[test]
fn handlers_can_be_forced_on_failed_hosts() {
    let fx = Fx::new();
    fx.play_with(
        HANDLERS,
        concat!(
            "    - name: a\n      copy:\n        content: a\n        dest: \"{{ base }}/a\"\n      notify: record\n",
            "    - name: boom\n      fail:\n        msg: broken\n",
        ),
    );
    std::fs::create_dir_all(fx.path("t")).unwrap();
    fx.apply(&["--force-handlers"]).expect(1);
    assert_eq!(fx.read("t/handler.log"), "ran\n");
}

#[test]
fn loops_register_and_when() {
    let fx = Fx::new();
    fx.play(concat!(
        "    - name: dirs\n      file:\n        path: \"{{ base }}/{{ d }}\"\n        state: directory\n",
        "      loop: \"{{ names }}\"\n      loop_control:\n        loop_var: d\n      when: d != 'skipme'\n      register: made\n",
        "      vars:\n        names: [one, two, skipme]\n",
        "    - name: count\n      assert:\n        that:\n          - made.results | length == 3\n          - made.results | selectattr('changed') | list | length == 2\n          - made is changed\n",
    ));
    let out = fx.apply(&[]);
    out.expect(0);
    assert!(fx.path("t/one").is_dir() && fx.path("t/two").is_dir());
    assert!(!fx.path("t/skipme").exists());
    let dirs = out.task_events("dirs");
    assert_eq!(dirs.len(), 3);
    assert_eq!(dirs[2]["status"], "skipped");
    assert_eq!(dirs[2]["item"], "skipme");
    assert_eq!(out.status_of("count"), "ok");
}

#[test]
fn undefined_variable_names_the_variable_and_the_task() {
    let fx = Fx::new();
    fx.play("    - name: oops\n      copy:\n        content: \"{{ nope }}\"\n        dest: \"{{ base }}/x\"\n");
    let out = fx.apply(&[]);
    out.expect(1);
    let msg = out.task_events("oops")[0]["msg"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("nope"), "{msg}");
    assert!(
        msg.contains("oops") && msg.contains("site.yml:7:7"),
        "{msg}"
    );
}

#[test]
fn extra_vars_win_over_play_vars_and_vars_refer_to_each_other() {
    let fx = Fx::new();
    fx.write("vars.yml", "greeting: \"{{ word }} world\"\n");
    fx.write(
        "site.yml",
        &format!(
            "- hosts: localhost\n  gather_facts: false\n  vars_files: [vars.yml]\n  vars:\n    base: {}\n    fixpoint_state_dir: {}\n    word: hello\n  tasks:\n    - name: w\n      copy:\n        content: \"{{{{ greeting }}\"\n        dest: \"{{{{ base }}}}/g\"\n",
            fx.path("t").display(),
            fx.state_dir().display()
        )
        .replace("{{ greeting }", "{{ greeting }}"),
    );
    std::fs::create_dir_all(fx.path("t")).unwrap();
    fx.apply(&[]).expect(0);
    assert_eq!(fx.read("t/g"), "hello world");
    fx.apply(&["-e", "word=goodbye"]).expect(0);
    assert_eq!(fx.read("t/g"), "goodbye world");
    fx.apply(&["-e", "{\"word\": \"json\"}"]).expect(0);
    assert_eq!(fx.read("t/g"), "json world");
}

#[test]
fn tags_select_and_skip_tasks() {
    let fx = Fx::new();
    fx.play(concat!(
        "    - name: a\n      file:\n        path: \"{{ base }}/a\"\n        state: directory\n      tags: [alpha]\n",
        "    - name: b\n      file:\n        path: \"{{ base }}/b\"\n        state: directory\n      tags: beta\n",
        "    - name: c\n      file:\n        path: \"{{ base }}/c\"\n        state: directory\n      tags: [always]\n",
    ));
    std::fs::create_dir_all(fx.path("t")).unwrap();
    fx.apply(&["-t", "alpha"]).expect(0);
    assert!(fx.path("t/a").exists() && !fx.path("t/b").exists() && fx.path("t/c").exists());
    fx.apply(&["--skip-tags", "alpha"]).expect(0);
    assert!(fx.path("t/b").exists());
}

#[test]
fn text_output_has_ansible_shape() {
    let fx = Fx::new();
    fx.play("    - name: make dir\n      file:\n        path: \"{{ base }}\"\n        state: directory\n");
    let out = fx.run(&["apply", "site.yml"]);
    out.expect(0);
    assert!(
        out.stdout.contains("PLAY [localhost] ****"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("TASK [make dir] ****"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("changed: [localhost]"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("PLAY RECAP ****"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("localhost                  : ok=1    changed=1"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("\x1b["), "no colour when not a TTY");
}

/// As ansible-core, a non-quiet `assert` shows what it returns, with `changed`; a quiet one
/// shows nothing.
#[test]
fn text_output_shows_an_asserts_message_unless_quiet() {
    let fx = Fx::new();
    fx.play(concat!(
        "    - assert: {that: 1 == 1, success_msg: \"fine {{ 1 + 1 }}\"}\n",
        "    - assert: {that: 1 == 1, quiet: true}\n",
    ));
    let out = fx.run(&["apply", "site.yml"]);
    out.expect(0);
    let shown = "ok: [localhost] => {\n  \"changed\": false,\n  \"msg\": \"fine 2\"\n}";
    assert_eq!(out.stdout.matches(shown).count(), 1, "{}", out.stdout);
    assert_eq!(
        out.stdout.matches("ok: [localhost] => {").count(),
        1,
        "{}",
        out.stdout
    );
}

#[test]
fn diff_shows_attributes_before_and_after() {
    let fx = Fx::new();
    let p = fx.write("t/f", "x");
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    fx.play("    - name: tighten\n      file:\n        path: \"{{ base }}/f\"\n        mode: \"0600\"\n");
    let out = fx.run(&["check", "site.yml"]);
    out.expect(0);
    assert!(out.stdout.contains("mode 0644 → 0600"), "{}", out.stdout);
}

#[test]
fn load_errors_point_at_the_source() {
    let fx = Fx::new();
    fx.play("    - name: typo\n      file:\n        path: /tmp/x\n      whne: true\n");
    let out = fx.run(&["validate", "site.yml"]);
    out.expect(2);
    assert!(out.stderr.contains("site.yml:10:7"), "{}", out.stderr);
    assert!(
        out.stderr.contains("did you mean `when`?"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("10 |       whne: true"),
        "{}",
        out.stderr
    );

    fx.play("    - name: nope\n      frobnicate:\n        x: 1\n");
    let out = fx.run(&["validate", "site.yml"]);
    out.expect(2);
    assert!(
        out.stderr.contains("site.yml:8:7") && out.stderr.contains("frobnicate"),
        "{}",
        out.stderr
    );

    fx.play("    - name: scoped\n      command: /bin/true\n      args:\n        creates: /x\n      once_scope: db\n");
    let out = fx.run(&["validate", "site.yml"]);
    out.expect(2);
    assert!(
        out.stderr.contains("site.yml:11:7") && out.stderr.contains("has no `once`"),
        "{}",
        out.stderr
    );

    fx.write("site.yml", "- hosts: localhost\n  tasks: [\n");
    let out = fx.run(&["validate", "site.yml"]);
    out.expect(2);
    assert!(
        out.stderr.contains("invalid YAML") && out.stderr.contains("site.yml:"),
        "{}",
        out.stderr
    );
}

#[test]
fn validate_accepts_a_good_playbook_without_touching_anything() {
    let fx = Fx::new();
    fx.play(
        "    - name: dir\n      file:\n        path: \"{{ base }}\"\n        state: directory\n",
    );
    let out = fx.run(&["validate", "site.yml"]);
    out.expect(0);
    assert!(out.stdout.contains("1 task(s) valid"), "{}", out.stdout);
    assert!(!fx.path("t").exists());
}

#[test]
fn bundled_example_converges() {
    let fx = Fx::new();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/playbooks/site.yml");
    let base = format!("base={}", fx.path("demo").display());
    let state = format!("fixpoint_state_dir={}", fx.state_dir().display());
    let out = fx.run(&["apply", "--twice", "-e", &base, "-e", &state, example]);
    out.expect(0);
    assert!(fx.path("demo/etc/app.conf").exists());
    assert!(out.stdout.contains("PLAY RECAP (pass 2)"), "{}", out.stdout);
}

#[test]
fn json_events_have_the_documented_fields() {
    let fx = Fx::new();
    fx.play(
        "    - name: dir\n      file:\n        path: \"{{ base }}\"\n        state: directory\n",
    );
    let out = fx.apply(&["--diff"]);
    out.expect(0);
    let ev = &out.task_events("dir")[0];
    for k in ["event", "host", "task", "module", "status", "diff", "msg"] {
        assert!(ev.get(k).is_some(), "missing {k}: {ev}");
    }
    assert_eq!(ev["host"], "localhost");
    assert_eq!(ev["module"], "file");
    let last = out.events().pop().unwrap();
    assert_eq!(last["event"], "recap");
    assert_eq!(last["hosts"]["localhost"]["unreachable"], 0);
}

#[test]
fn bundled_example_in_check_mode_on_a_fresh_machine_touches_nothing() {
    // Regression: in check mode the directories earlier tasks would create do not exist, and
    // later tasks writing into them must report "would create", not fail.
    let fx = Fx::new();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/playbooks/site.yml");
    let base = format!("base={}", fx.path("demo").display());
    let state = format!("fixpoint_state_dir={}", fx.state_dir().display());
    let out = fx.run(&["check", "-e", &base, "-e", &state, example]);
    out.expect(0);
    assert!(!fx.path("demo").exists(), "check mode created files");
    assert!(
        out.stdout.contains("changed: [localhost]"),
        "{}",
        out.stdout
    );
}

/// A controller that ignores SIGHUP (started under `nohup`) does not pass the ignore on: the
/// local agent's commands start with default dispositions, as over ssh, so a daemon's
/// `trap … HUP` (a SysV reload) works. Checked in the command's own /proc status.
#[test]
fn commands_do_not_inherit_signals_the_controller_ignores() {
    use crate::fx::{bin, Out};
    let fx = Fx::new();
    fx.play(concat!(
        "    - name: mask\n      command: grep SigIgn /proc/self/status\n",
        "      changed_when: false\n      register: m\n",
    ));
    let out = Out::from(
        std::process::Command::new("nohup")
            .args([bin(), "apply", "-v", "--format", "json", "site.yml"])
            .current_dir(fx.path(""))
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run fixpoint under nohup (coreutils)"),
    );
    let line = out.expect(0).task_events("mask")[0]["result"]["stdout"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mask = u64::from_str_radix(line.trim_start_matches("SigIgn:").trim(), 16)
        .unwrap_or_else(|e| panic!("{line:?}: {e}"));
    // Bits are signal numbers minus one: SIGHUP 1, SIGINT 2, SIGQUIT 3, SIGTERM 15.
    for (name, num) in [("HUP", 1), ("INT", 2), ("QUIT", 3), ("TERM", 15)] {
        assert_eq!(mask & (1 << (num - 1)), 0, "SIG{name} ignored in {line:?}");
    }
}
