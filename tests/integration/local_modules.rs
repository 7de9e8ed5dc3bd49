//! Every module's contract on the local transport: check mode touches nothing and shows the
//! change, the first run changes, the second run is `ok` without writing, bad parameters fail
//! at load time with their location.

use crate::fx::{snapshot, stamp, Fx};

/// The contract every state-declaring module keeps. `target` is relative to `{{ base }}`.
fn contract(fx: &Fx, tasks: &str, target: &str, diff_fragment: Option<&str>) {
    fx.play(tasks);
    let base = fx.path("t");
    std::fs::create_dir_all(&base).unwrap();
    let before = snapshot(&base);

    let check = fx.apply(&["--check", "--diff"]);
    check.expect(0);
    assert!(
        check.events().iter().any(|e| e["status"] == "changed"),
        "check mode must report the change: {}",
        check.stdout
    );
    // A command has no content to diff: its check-mode report is the `changed` status above.
    if let Some(fragment) = diff_fragment {
        assert!(
            check.stdout.contains(fragment),
            "check --diff must show `{fragment}`: {}",
            check.stdout
        );
    }
    assert_eq!(snapshot(&base), before, "check mode changed the disk");

    let first = fx.apply(&[]);
    first.expect(0);
    assert!(
        first.events().iter().any(|e| e["status"] == "changed"),
        "first run must change: {}",
        first.stdout
    );
    let path = base.join(target);
    let s = stamp(&path);
    let tree = snapshot(&base);

    let second = fx.apply(&[]);
    second.expect(0);
    let statuses: Vec<_> = second
        .events()
        .into_iter()
        .filter(|e| e["event"] == "task")
        .map(|e| e["status"].as_str().unwrap().to_string())
        .collect();
    assert!(
        statuses.iter().all(|s| s == "ok" || s == "skipped"),
        "second run must change nothing: {}",
        second.stdout
    );
    assert_eq!(stamp(&path), s, "second run rewrote {target}");
    assert_eq!(snapshot(&base), tree, "second run touched the tree");
}

/// Bad parameters: exit 2, `site.yml:line:col` on stderr, nothing touched.
fn refused(fx: &Fx, tasks: &str, location: &str, words: &str) {
    fx.play(tasks);
    let out = fx.apply(&[]);
    out.expect(2);
    assert!(
        out.stderr.contains(location),
        "expected {location} in: {}",
        out.stderr
    );
    assert!(
        out.stderr.contains(words),
        "expected `{words}` in: {}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "nothing may run: {}", out.stdout);
    assert!(!fx.path("t").exists(), "nothing may be touched");
}

#[test]
fn file_directory_contract() {
    let fx = Fx::new();
    contract(
        &fx,
        "    - name: dir\n      file:\n        path: \"{{ base }}/d/e\"\n        state: directory\n        mode: \"0750\"\n",
        "d/e",
        Some("directory"),
    );
    let m = std::fs::metadata(fx.path("t/d/e")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777,
        0o750
    );
}

#[test]
fn file_mode_change_on_existing_file_contract() {
    let fx = Fx::new();
    fx.write("t/f", "x");
    contract(
        &fx,
        "    - name: mode\n      file:\n        path: \"{{ base }}/f\"\n        mode: \"u=rw,g=,o=\"\n",
        "f",
        Some("0600"),
    );
}

#[test]
fn file_link_contract() {
    let fx = Fx::new();
    fx.write("t/target", "x");
    contract(
        &fx,
        "    - name: link\n      file:\n        src: \"{{ base }}/target\"\n        dest: \"{{ base }}/ln\"\n        state: link\n",
        "ln",
        Some("link"),
    );
    assert_eq!(
        std::fs::read_link(fx.path("t/ln")).unwrap(),
        fx.path("t/target")
    );
}

#[test]
fn file_absent_contract() {
    let fx = Fx::new();
    fx.write("t/gone/inner", "x");
    fx.write("t/keep", "k");
    contract(
        &fx,
        "    - name: absent\n      file:\n        path: \"{{ base }}/gone\"\n        state: absent\n",
        "keep",
        Some("absent"),
    );
    assert!(!fx.path("t/gone").exists());
}

#[test]
fn file_bad_parameter_is_refused_with_location() {
    let fx = Fx::new();
    refused(
        &fx,
        "    - name: typo\n      file:\n        path: /tmp/x\n        stat: directory\n",
        "site.yml:10:9",
        "stat",
    );
}

#[test]
fn copy_content_contract() {
    let fx = Fx::new();
    contract(
        &fx,
        "    - name: content\n      copy:\n        content: \"hello {{ 40 + 2 }}\\n\"\n        dest: \"{{ base }}/hello.txt\"\n        mode: \"0640\"\n",
        "hello.txt",
        Some("hello 42"),
    );
    assert_eq!(fx.read("t/hello.txt"), "hello 42\n");
}

#[test]
fn copy_src_from_files_dir_contract() {
    let fx = Fx::new();
    fx.write("files/motd", "welcome\n");
    contract(
        &fx,
        "    - name: src\n      copy:\n        src: motd\n        dest: \"{{ base }}/\"\n",
        "motd",
        Some("welcome"),
    );
}

#[test]
fn copy_keeps_existing_owner_and_mode_when_not_set() {
    let fx = Fx::new();
    let p = fx.write("t/conf", "old\n");
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o604)).unwrap();
    nix::unistd::chown(&p, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    fx.play("    - name: rewrite\n      copy:\n        content: \"new\\n\"\n        dest: \"{{ base }}/conf\"\n");
    fx.apply(&[]).expect(0);
    let m = std::fs::metadata(&p).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777,
        0o604
    );
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&m), 65534);
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "new\n");
}

#[test]
fn copy_does_not_follow_a_symlink_at_dest() {
    let fx = Fx::new();
    fx.write("t/real", "real\n");
    std::os::unix::fs::symlink(fx.path("t/real"), fx.path("t/link")).unwrap();
    fx.play("    - name: over link\n      copy:\n        content: \"new\\n\"\n        dest: \"{{ base }}/link\"\n");
    fx.apply(&[]).expect(0);
    assert_eq!(fx.read("t/real"), "real\n");
    assert!(!std::fs::symlink_metadata(fx.path("t/link"))
        .unwrap()
        .file_type()
        .is_symlink());
}

/// A `copy` source missing when the playbook loads is a warning (an earlier task may make it
/// on the controller, as ansible-core looks for it only when the task runs); still missing
/// then, the task fails in ansible-core's words and nothing is written.
#[test]
fn copy_missing_src_warns_at_load_and_fails_when_it_runs() {
    let fx = Fx::new();
    fx.play(
        "    - name: missing\n      copy:\n        src: nope.txt\n        dest: \"{{ base }}/x\"\n",
    );
    let v = fx.run(&["validate", "site.yml"]);
    v.expect(0);
    assert!(
        v.stderr.contains("warning") && v.stderr.contains("nope.txt"),
        "{}",
        v.stderr
    );
    let out = fx.apply(&[]);
    out.expect(1);
    assert!(
        out.stdout.contains("Could not find or access 'nope.txt'"),
        "{}",
        out.stdout
    );
    assert!(!fx.path("t/x").exists());
}

#[test]
fn template_contract() {
    let fx = Fx::new();
    fx.write(
        "templates/app.conf.j2",
        "port = {{ port }}\n{% for u in users %}\nuser {{ u }}\n{% endfor %}\n",
    );
    contract(
        &fx,
        "    - name: tpl\n      template:\n        src: app.conf.j2\n        dest: \"{{ base }}/app.conf\"\n      vars:\n        port: 8080\n        users: [ann, bob]\n",
        "app.conf",
        Some("port = 8080"),
    );
    assert_eq!(fx.read("t/app.conf"), "port = 8080\nuser ann\nuser bob\n");
}

#[test]
fn template_bad_parameter_is_refused() {
    let fx = Fx::new();
    fx.write("templates/a.j2", "x");
    refused(
        &fx,
        "    - name: tpl\n      template:\n        src: a.j2\n        dest: /tmp/a\n        mdoe: \"0644\"\n",
        "site.yml:11:9",
        "mdoe",
    );
}

#[test]
fn lineinfile_contract() {
    let fx = Fx::new();
    fx.write("t/env", "A=1\nLOG_LEVEL=debug\nB=2\n");
    contract(
        &fx,
        "    - name: level\n      lineinfile:\n        path: \"{{ base }}/env\"\n        regexp: '^LOG_LEVEL='\n        line: LOG_LEVEL=info\n",
        "env",
        Some("LOG_LEVEL=info"),
    );
    assert_eq!(fx.read("t/env"), "A=1\nLOG_LEVEL=info\nB=2\n");
}

#[test]
fn lineinfile_bad_parameter_is_refused() {
    let fx = Fx::new();
    refused(
        &fx,
        "    - name: level\n      lineinfile:\n        path: /tmp/x\n        line: a\n        state: maybe\n",
        "site.yml:11:9",
        "state",
    );
}

#[test]
fn blockinfile_contract() {
    let fx = Fx::new();
    fx.write("t/hosts", "127.0.0.1 localhost\n");
    contract(
        &fx,
        "    - name: block\n      blockinfile:\n        path: \"{{ base }}/hosts\"\n        block: |\n          10.0.0.1 db\n          10.0.0.2 cache\n",
        "hosts",
        Some("10.0.0.2 cache"),
    );
    let text = fx.read("t/hosts");
    assert!(text.contains("# BEGIN ANSIBLE MANAGED BLOCK\n10.0.0.1 db\n10.0.0.2 cache\n# END ANSIBLE MANAGED BLOCK"), "{text}");
}

#[test]
fn blockinfile_bad_parameter_is_refused() {
    let fx = Fx::new();
    refused(
        &fx,
        "    - name: block\n      blockinfile:\n        path: /tmp/x\n        blok: x\n",
        "site.yml:10:9",
        "blok",
    );
}

#[test]
fn command_with_creates_runs_once() {
    let fx = Fx::new();
    contract(
        &fx,
        "    - name: init\n      command: touch {{ base }}/initialised\n      args:\n        creates: \"{{ base }}/initialised\"\n",
        "initialised",
        None,
    );
}

#[test]
fn shell_with_unless_runs_once_and_appends_once() {
    let fx = Fx::new();
    fx.play("    - name: append\n      shell: echo line >> {{ base }}/log\n      args:\n        unless: grep -q line {{ base }}/log\n");
    std::fs::create_dir_all(fx.path("t")).unwrap();
    std::fs::write(fx.path("t/log"), "").unwrap();
    for _ in 0..3 {
        fx.apply(&[]).expect(0);
    }
    assert_eq!(fx.read("t/log"), "line\n");
}

#[test]
fn unguarded_command_is_refused_before_anything_runs() {
    let fx = Fx::new();
    fx.play("    - name: first\n      file:\n        path: \"{{ base }}\"\n        state: directory\n    - name: raw\n      shell: echo hi > {{ base }}/x\n");
    let out = fx.apply(&[]);
    out.expect(2);
    assert!(out.stderr.contains("site.yml:12:7"), "{}", out.stderr);
    assert!(
        out.stderr.contains("unguarded `shell` task"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("creates"), "{}", out.stderr);
    assert!(!fx.path("t").exists(), "the first task must not have run");
}

#[test]
fn command_bad_parameter_is_refused() {
    let fx = Fx::new();
    refused(
        &fx,
        "    - name: cmd\n      command: /bin/true\n      args:\n        creates: /x\n        chdri: /tmp\n",
        "site.yml:8:7",
        "chdri",
    );
}

#[test]
fn read_only_command_is_skipped_in_check_mode_unless_check_mode_false() {
    // As in Ansible: `changed_when: false` does not make a command run in check mode; only
    // `check_mode: false` does.
    let fx = Fx::new();
    fx.play("    - name: read\n      command: echo hello\n      register: r\n      changed_when: false\n    - name: read for real\n      command: echo real\n      register: q\n      changed_when: false\n      check_mode: false\n    - name: show\n      debug:\n        msg: \"got [{{ r.stdout }}] {{ q.stdout }}\"\n");
    let out = fx.apply(&["--check", "-v"]);
    out.expect(0);
    assert_eq!(out.status_of("read"), "skipped");
    assert_eq!(out.status_of("read for real"), "ok");
    assert!(out.stdout.contains("got [] real"), "{}", out.stdout);
}

#[test]
fn failing_command_reports_rc_and_location() {
    let fx = Fx::new();
    fx.play("    - name: boom\n      shell: exit 7\n      args:\n        creates: /nonexistent/fixpoint\n");
    let out = fx.apply(&[]);
    out.expect(1);
    let ev = &out.task_events("boom")[0];
    assert_eq!(ev["status"], "failed");
    assert!(ev["msg"].as_str().unwrap().contains("site.yml:7:7"), "{ev}");
}

#[test]
fn stat_registers_and_never_changes() {
    let fx = Fx::new();
    fx.write("t/f", "abc");
    fx.play("    - name: look\n      stat:\n        path: \"{{ base }}/f\"\n      register: st\n    - name: check\n      assert:\n        that:\n          - st.stat.exists\n          - st.stat.size == 3\n          - st.stat.isreg\n");
    let out = fx.apply(&[]);
    out.expect(0);
    assert_eq!(out.status_of("look"), "ok");
    assert_eq!(out.status_of("check"), "ok");
}

/// `stat`'s MIME type comes from the host's `file`, whose answers the agent keeps in its state
/// directory between runs: kept for an unchanged file, never for one changed since, even when
/// its size and mtime are put back as they were (ctime gives it away).
#[test]
fn stat_mime_answers_are_kept_only_for_unchanged_files() {
    use std::os::unix::fs::MetadataExt;
    let fx = Fx::new();
    let f = fx.write("t/f", "hello\n");
    let mtime = std::fs::metadata(&f).unwrap().modified().unwrap();
    // The agent keeps an answer only for a file changed before the current clock tick (see
    // modules/src/stat/mime.rs): wait until this one is.
    let settle = |f: &std::path::Path| {
        let m = std::fs::metadata(f).unwrap();
        let changed = std::time::UNIX_EPOCH
            + std::time::Duration::new(m.ctime() as u64, m.ctime_nsec() as u32);
        while changed.elapsed().unwrap_or_default() < std::time::Duration::from_millis(200) {
            std::thread::yield_now();
        }
    };
    settle(&f);
    fx.play("    - name: look\n      stat:\n        path: \"{{ base }}/f\"\n      register: st\n    - name: show\n      debug:\n        msg: \"{{ st.stat.mimetype }} {{ st.stat.charset }}\"\n");
    let shown = |out: &crate::fx::Out| out.task_events("show")[0]["result"]["msg"].clone();
    let out = fx.apply(&["-v"]);
    out.expect(0);
    assert_eq!(shown(&out), "text/plain us-ascii");
    let cache = std::fs::read_to_string(fx.state_dir().join("mime-cache.json"))
        .expect("the agent keeps file's answer for a settled file");
    let ino = std::fs::metadata(&f).unwrap().ino();
    assert!(cache.contains(&format!(":{ino}\"")), "{cache}");

    // Same size, same mtime, other content: the kept answer must not be used.
    std::fs::write(&f, [0u8, 1, 2, 3, 255, 254]).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&f)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let out = fx.apply(&["-v"]);
    out.expect(0);
    assert_eq!(shown(&out), "application/octet-stream binary");
}

#[test]
fn stat_bad_parameter_is_refused() {
    let fx = Fx::new();
    refused(
        &fx,
        "    - name: look\n      stat:\n        path: /x\n        folow: true\n",
        "site.yml:10:9",
        "folow",
    );
}

#[test]
fn debug_assert_set_fact_and_fail() {
    let fx = Fx::new();
    fx.play("    - name: fact\n      set_fact:\n        greeting: \"hi {{ base | basename }}\"\n    - name: show\n      debug:\n        var: greeting\n    - name: holds\n      assert:\n        that: greeting == 'hi t'\n    - name: stop\n      fail:\n        msg: stopped on purpose\n      when: greeting is defined\n    - name: never\n      debug:\n        msg: unreachable\n");
    let out = fx.apply(&[]);
    out.expect(1);
    assert_eq!(out.status_of("holds"), "ok");
    let stop = &out.task_events("stop")[0];
    assert_eq!(stop["status"], "failed");
    assert!(stop["msg"].as_str().unwrap().contains("stopped on purpose"));
    assert!(
        out.task_events("never").is_empty(),
        "a failed host runs nothing more"
    );
}

#[test]
fn failed_assert_names_the_condition() {
    let fx = Fx::new();
    fx.play("    - name: holds\n      assert:\n        that:\n          - 1 == 1\n          - 2 == 3\n        fail_msg: arithmetic is broken\n");
    let out = fx.apply(&["-v"]);
    out.expect(1);
    let ev = &out.task_events("holds")[0];
    assert!(
        ev["msg"].as_str().unwrap().contains("arithmetic is broken"),
        "{ev}"
    );
    assert_eq!(ev["result"]["assertion"], "2 == 3");
}

#[test]
fn templated_parameters_are_checked_once_rendered() {
    let fx = Fx::new();
    fx.play("    - name: templated mode\n      file:\n        path: \"{{ base }}\"\n        state: directory\n        mode: \"{{ m }}\"\n      vars:\n        m: bogus\n");
    let out = fx.apply(&[]);
    out.expect(1);
    let msg = out.task_events("templated mode")[0]["msg"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("parameter `mode`") && msg.contains("bogus"),
        "{msg}"
    );
    assert!(msg.contains("site.yml:7:7"), "{msg}");
    assert!(!fx.path("t").exists());
}

#[test]
fn debug_verbosity_shows_only_from_that_many_v() {
    let fx = Fx::new();
    fx.play("    - name: chatty\n      debug:\n        msg: details\n        verbosity: 2\n");
    assert_eq!(fx.apply(&[]).status_of("chatty"), "skipped");
    assert_eq!(fx.apply(&["-vv"]).status_of("chatty"), "ok");
}
