//! fixpoint's `if_checksum` (compare-and-swap writes) over loopback sshd with become: `copy`,
//! `template`, `lineinfile`, `blockinfile` and `file` change a file only while it has the
//! expected sha256 (or, with `absent`, does not exist); a mismatch fails with both sums and
//! leaves the file, in check mode and with `--diff` too; `validate` takes the parameter on these
//! modules only.

use crate::fx::{stamp, Fx};
use crate::ssh::Fleet;
use sha2::Digest as _;
use std::path::Path;

fn sha(data: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(data))
}

const BECOME: &str = "  gather_facts: false\n  become: true\n";

/// The files the tasks below start from, written as they are before the play.
fn seed(base: &Path) {
    std::fs::create_dir_all(base).unwrap();
    for (name, text) in [
        ("app.conf", "v1\n"),
        ("lines.conf", "a\n"),
        ("block.conf", "top\n"),
        ("old.conf", "bye\n"),
    ] {
        std::fs::write(base.join(name), text).unwrap();
    }
}

/// One task of each module, each guarded by the sums of the seeded files (`absent` for the
/// template and the touched file, which do not exist yet). `sums` replaces the expected sums.
/// The touch keeps both times, the form of `touch` that converges (a plain one is changed on
/// every run, as in Ansible).
fn tasks(sums: &[(&str, String)]) -> String {
    let sum = |name: &str, default: String| {
        sums.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| s.clone())
            .unwrap_or(default)
    };
    format!(
        concat!(
            "    - name: copy\n      copy: {{content: \"v2\\n\", dest: \"{{{{ base }}}}/app.conf\", if_checksum: \"{{{{ app_sum }}}}\"}}\n      vars: {{app_sum: {}}}\n      ignore_errors: true\n      register: c\n",
            "    - name: template\n      template: {{src: app.conf.j2, dest: \"{{{{ base }}}}/tpl.conf\", if_checksum: {}}}\n      ignore_errors: true\n",
            "    - name: line\n      lineinfile: {{path: \"{{{{ base }}}}/lines.conf\", line: b, if_checksum: {}}}\n      ignore_errors: true\n",
            "    - name: block\n      blockinfile: {{path: \"{{{{ base }}}}/block.conf\", block: inside, if_checksum: {}}}\n      ignore_errors: true\n",
            "    - name: touch\n      file: {{path: \"{{{{ base }}}}/touched\", state: touch, modification_time: preserve, access_time: preserve, mode: \"0600\", if_checksum: {}}}\n      ignore_errors: true\n",
            "    - name: remove\n      file: {{path: \"{{{{ base }}}}/old.conf\", state: absent, if_checksum: {}}}\n      ignore_errors: true\n",
        ),
        sum("copy", sha(b"v1\n")),
        sum("template", "absent".into()),
        sum("line", sha(b"a\n")),
        sum("block", sha(b"top\n")),
        sum("touch", "absent".into()),
        sum("remove", sha(b"bye\n")),
    )
}

fn start() -> Fleet {
    let fleet = Fleet::start(1, "fpsudo");
    fleet
        .fx
        .write("templates/app.conf.j2", "port={{ 40 + 2 }}\n");
    seed(&fleet.base(&fleet.hosts[0]));
    fleet
}

#[test]
fn matching_checksums_write_and_converge() {
    let fleet = start();
    let base = fleet.base(&fleet.hosts[0]);
    fleet.play_full(BECOME, &tasks(&[]));
    let observe = || format!("{:?}", crate::fx::snapshot(&base));

    // Check mode: every task would change its file; nothing changes.
    let before = observe();
    let check = fleet.apply(&["--check", "--diff"]);
    check.expect(0);
    assert!(
        check.statuses().iter().all(|s| s == "changed"),
        "{}",
        check.stdout
    );
    assert_eq!(observe(), before, "check mode changed the host");

    // The run, with --diff: every guarded write happens and shows its diff.
    let run = fleet.apply(&["--diff"]);
    run.expect(0);
    assert!(
        run.statuses().iter().all(|s| s == "changed"),
        "{}",
        run.stdout
    );
    let diff = serde_json::to_string(&run.task_events("copy")[0]["diff"]).unwrap();
    assert!(diff.contains("v1") && diff.contains("v2"), "{diff}");
    let diff = serde_json::to_string(&run.task_events("template")[0]["diff"]).unwrap();
    assert!(diff.contains("port=42"), "{diff}");
    let read = |n: &str| std::fs::read_to_string(base.join(n)).unwrap();
    assert_eq!(read("app.conf"), "v2\n");
    assert_eq!(read("tpl.conf"), "port=42\n");
    assert_eq!(read("lines.conf"), "a\nb\n");
    assert!(read("block.conf").contains("inside\n"));
    assert_eq!(read("touched"), "");
    assert!(!base.join("old.conf").exists());

    // Again: each file already is what its task asks for, so the old sums do not matter.
    let after = observe();
    let again = fleet.apply(&[]);
    again.expect(0);
    assert!(
        again.statuses().iter().all(|s| s == "ok"),
        "{}",
        again.stdout
    );
    assert_eq!(observe(), after);
}

#[test]
fn a_mismatch_fails_with_both_sums_and_leaves_the_file() {
    let fleet = start();
    let base = fleet.base(&fleet.hosts[0]);
    // Someone changed every file since the sums were taken (and created the two new ones).
    for (name, text) in [
        ("app.conf", "hand\n"),
        ("lines.conf", "hand\n"),
        ("block.conf", "hand\n"),
        ("old.conf", "hand\n"),
        ("tpl.conf", "hand\n"),
        ("touched", "hand\n"),
    ] {
        std::fs::write(base.join(name), text).unwrap();
    }
    fleet.play_full(
        BECOME,
        &format!(
            "{}    - name: registered\n      assert:\n        that:\n          - c is failed\n          - c.expected_checksum == '{}'\n          - c.found_checksum == '{}'\n",
            tasks(&[]),
            sha(b"v1\n"),
            sha(b"hand\n")
        ),
    );
    let stamps = |b: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(b)
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                (p.clone(), stamp(&p), std::fs::read(&p).unwrap())
            })
            .collect();
        v.sort();
        v
    };
    let before = stamps(&base);
    for flags in [&["--check", "-v"][..], &["--diff", "-v"][..], &["-v"][..]] {
        let out = fleet.apply(flags);
        out.expect(0);
        let mut statuses = out.statuses();
        assert_eq!(statuses.pop().as_deref(), Some("ok"), "{}", out.stdout);
        assert!(
            statuses.iter().all(|s| s == "failed"),
            "{flags:?}: {}",
            out.stdout
        );
        let copy = &out.task_events("copy")[0];
        let msg = copy["result"]["msg"].as_str().unwrap_or_default();
        assert!(
            msg.contains(&sha(b"v1\n")) && msg.contains(&sha(b"hand\n")),
            "{flags:?}: {copy}"
        );
        assert!(
            copy["diff"].is_null(),
            "a refused write shows no diff: {copy}"
        );
        let tpl = &out.task_events("template")[0]["result"];
        assert_eq!(tpl["expected_checksum"], "absent", "{tpl}");
        assert_eq!(tpl["found_checksum"], sha(b"hand\n"), "{tpl}");
        assert_eq!(stamps(&base), before, "{flags:?} changed a file");
    }
}

#[test]
fn a_missing_file_is_absent_not_the_sum_of_nothing() {
    let fleet = start();
    let base = fleet.base(&fleet.hosts[0]);
    fleet.play_full(
        BECOME,
        concat!(
            "    - name: empty sum\n      copy: {content: x, dest: \"{{ base }}/new.conf\", if_checksum: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855}\n      ignore_errors: true\n      register: e\n",
            "    - name: absent\n      copy: {content: x, dest: \"{{ base }}/new.conf\", if_checksum: absent}\n",
            "    - name: seen\n      assert:\n        that: [\"e.found_checksum == 'absent'\"]\n",
        ),
    );
    let out = fleet.apply(&["-v"]);
    out.expect(0);
    assert_eq!(
        out.statuses(),
        ["failed", "changed", "ok"],
        "{}",
        out.stdout
    );
    assert_eq!(std::fs::read_to_string(base.join("new.conf")).unwrap(), "x");
}

#[test]
fn validate_takes_if_checksum_on_the_guarded_modules_only() {
    let fx = Fx::new();
    fx.write("templates/t.j2", "x\n");
    let h = sha(b"");
    fx.play(&format!(
        concat!(
            "    - copy: {{content: x, dest: /tmp/a, if_checksum: {h}}}\n",
            "    - template: {{src: t.j2, dest: /tmp/a, if_checksum: absent}}\n",
            "    - lineinfile: {{path: /tmp/a, line: x, if_checksum: {h}}}\n",
            "    - blockinfile: {{path: /tmp/a, block: x, if_checksum: {H}}}\n",
            "    - file: {{path: /tmp/a, state: absent, if_checksum: \"{{{{ s }}}}\"}}\n",
        ),
        h = h,
        H = h.to_uppercase()
    ));
    fx.run(&["validate", "site.yml"]).expect(0);

    for (task, says) in [
        (
            format!("replace: {{path: /tmp/a, regexp: x, if_checksum: {h}}}"),
            "if_checksum",
        ),
        (
            format!("community.general.ini_file: {{path: /tmp/a, section: s, if_checksum: {h}}}"),
            "if_checksum",
        ),
        (
            "copy: {content: x, dest: /tmp/a, if_checksum: abc}".into(),
            "64 hex digits",
        ),
        (
            format!("file: {{path: /tmp/a, state: directory, if_checksum: {h}}}"),
            "state: file, touch or absent",
        ),
        (
            "template: {src: t.j2, dest: /tmp/a, if_checksum: nope}".into(),
            "64 hex digits",
        ),
    ] {
        fx.play(&format!("    - name: bad\n      {task}\n"));
        let out = fx.run(&["validate", "site.yml"]);
        out.expect(2);
        assert!(out.stderr.contains(says), "{task}: {}", out.stderr);
        assert!(out.stderr.contains("site.yml:"), "{task}: {}", out.stderr);
    }
}

#[test]
fn a_writer_between_the_temp_file_and_the_rename_keeps_its_update() {
    // `validate` runs on the temp file after it is written and before the rename: a validate
    // command that appends to the destination is an outside writer in exactly that window.
    let fleet = start();
    let base = fleet.base(&fleet.hosts[0]);
    let conf = base.join("app.conf");
    fleet.play_full(
        BECOME,
        &format!(
            "    - name: copy\n      copy:\n        content: \"v2\\n\"\n        dest: \"{{{{ base }}}}/app.conf\"\n        if_checksum: {}\n        validate: \"sh -c 'echo theirs >> {}' -- %s\"\n      ignore_errors: true\n",
            sha(b"v1\n"),
            conf.display()
        ),
    );
    let out = fleet.apply(&["-v"]);
    out.expect(0);
    assert_eq!(out.status_of("copy"), "failed", "{}", out.stdout);
    let result = &out.task_events("copy")[0]["result"];
    let msg = result["msg"].as_str().unwrap_or_default();
    assert!(msg.contains("another writer"), "{result}");
    assert_eq!(result["found_checksum"], sha(b"v1\ntheirs\n"), "{result}");
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), "v1\ntheirs\n");
    // No temp file is left beside it.
    let mut names: Vec<String> = std::fs::read_dir(&base)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["app.conf", "block.conf", "lines.conf", "old.conf"]);
}
