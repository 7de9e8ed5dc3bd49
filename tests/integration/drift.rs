//! Drift attribution over loopback sshd: a file fixpoint wrote and someone edited by hand is
//! reported with the run that last wrote it (text, JSON, `--diff`); `fixpoint drift` reports
//! without changing anything (exit 0 or 3), the journal's records alone when no task compares
//! a file; `if_unchanged_since_last_run` refuses to overwrite a hand edit; a shell appending
//! while fixpoint writes in a loop never loses a line.

use crate::fx::{snapshot, Out};
use crate::ssh::Fleet;
use sha2::Digest as _;
use std::process::{Command, Stdio};

fn sha(data: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(data))
}

const CONF: &str = concat!(
    "    - name: dir\n      file: {path: \"{{ base }}\", state: directory}\n",
    "    - name: conf\n      copy: {content: \"port=1\\n\", dest: \"{{ base }}/app.conf\", mode: \"0644\"}\n",
    "    - name: line\n      lineinfile: {path: \"{{ base }}/hand.conf\", line: managed, create: false}\n",
);

impl Fleet {
    /// `fixpoint drift` against the fleet (JSON unless `text`), with `playbooks`.
    fn drift(&self, playbooks: &[&str], text: bool) -> Out {
        let mut args = if text {
            vec![]
        } else {
            vec!["--format", "json"]
        };
        args.extend_from_slice(playbooks);
        self.run("drift", &args)
    }

    /// `fixpoint apply` with text output.
    fn apply_text(&self, extra: &[&str]) -> Out {
        self.run("apply", &[extra, &["site.yml"]].concat())
    }
}

fn run_id(out: &Out) -> String {
    out.recap()["run_id"]
        .as_str()
        .expect("the recap names the run")
        .to_string()
}

/// The play runs as root (become), so files the test writes by hand are the agent's to replace.
const BECOME: &str = "  gather_facts: false\n  become: true\n";

fn start() -> Fleet {
    let fleet = Fleet::start(1, "fpsudo");
    let base = fleet.base(&fleet.hosts[0]);
    std::fs::create_dir_all(&base).unwrap();
    std::fs::write(base.join("hand.conf"), "mine\n").unwrap();
    fleet.play_full(BECOME, CONF);
    fleet
}

#[test]
fn a_hand_edit_is_reported_with_the_run_that_wrote_the_file() {
    let fleet = start();
    let conf = fleet.base(&fleet.hosts[0]).join("app.conf");
    let first = fleet.apply(&[]);
    first.expect(0);
    let first_id = run_id(&first);
    // A file fixpoint did not write before (hand.conf) has no drift, even though it changes.
    assert!(
        first.events().iter().all(|e| e.get("drift").is_none()),
        "{}",
        first.stdout
    );

    // By hand: new content and mode.
    std::fs::write(&conf, "port=2\n").unwrap();
    std::fs::set_permissions(&conf, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let second = fleet.apply(&["-v"]);
    second.expect(0);
    let ev = &second.task_events("conf")[0];
    assert_eq!(ev["status"], "changed", "{ev}");
    let drift = &ev["drift"];
    assert_eq!(drift["since_run"], first_id.as_str(), "{ev}");
    assert_eq!(
        drift["what"],
        serde_json::json!(["content", "mode"]),
        "{ev}"
    );
    let real = std::fs::canonicalize(&conf).unwrap();
    assert_eq!(drift["path"], real.display().to_string(), "{ev}");
    assert!(drift["at"].as_str().unwrap().ends_with("UTC"), "{ev}");
    // Registered too, as part of the result.
    assert_eq!(ev["result"]["drift"], *drift, "{ev}");
    // Fixpoint itself changed the file (and hand.conf, its line added on the first run): no
    // drift on either now.
    let second_id = run_id(&second);
    let third = fleet.apply(&[]);
    third.expect(0);
    assert!(
        third.events().iter().all(|e| e.get("drift").is_none()),
        "{}",
        third.stdout
    );

    // In text, with --diff: the line before the diff that undoes the edit.
    std::fs::write(&conf, "port=3\n").unwrap();
    let text = fleet.apply_text(&["--diff"]);
    text.expect(0);
    let want = format!("drift: changed outside fixpoint since run {second_id} at ");
    let at = text
        .stdout
        .find(&want)
        .unwrap_or_else(|| panic!("{}", text.stdout));
    let diff_at = text.stdout.find("+port=1").expect("the diff");
    assert!(at < diff_at, "{}", text.stdout);
    assert!(text.stdout[at..]
        .lines()
        .next()
        .unwrap()
        .contains("app.conf (content)"));
}

#[test]
fn fixpoint_drift_reports_and_changes_nothing() {
    let fleet = start();
    let base = fleet.base(&fleet.hosts[0]);
    fleet.apply(&[]).expect(0);
    // No drift: exit 0.
    let clean = fleet.drift(&["site.yml"], false);
    clean.expect(0);
    assert!(clean.events().iter().all(|e| e.get("drift").is_none()));
    fleet.drift(&["-b"], false).expect(0);

    std::fs::write(base.join("app.conf"), "port=9\n").unwrap();
    std::fs::write(base.join("hand.conf"), "mine\n").unwrap();
    let before = snapshot(&base);
    let sums: Vec<String> = ["app.conf", "hand.conf"]
        .iter()
        .map(|n| sha(&std::fs::read(base.join(n)).unwrap()))
        .collect();

    let found = fleet.drift(&["site.yml"], false);
    found.expect(3);
    let conf = &found.task_events("conf")[0];
    assert_eq!(
        conf["drift"]["what"],
        serde_json::json!(["content"]),
        "{conf}"
    );
    // hand.conf: fixpoint added its line on the first run, and the hand edit removed it.
    let line = &found.task_events("line")[0];
    assert_eq!(
        line["drift"]["what"],
        serde_json::json!(["content"]),
        "{line}"
    );
    // Every file a task compared is not reported again from the journal.
    assert!(
        found.events().iter().all(|e| e["event"] != "drift"),
        "{}",
        found.stdout
    );

    // A playbook that no longer mentions the files: the journal's records alone, said so.
    fleet.fx.write(
        "other.yml",
        "- hosts: fleet\n  gather_facts: false\n  become: true\n  tasks:\n    - ping:\n",
    );
    let journal_only = fleet.drift(&["other.yml"], false);
    journal_only.expect(3);
    let mut paths: Vec<String> = journal_only
        .events()
        .into_iter()
        .filter(|e| e["event"] == "drift" && e["journal_only"] == true)
        .map(|e| e["drift"]["path"].as_str().unwrap().to_string())
        .collect();
    paths.sort();
    let real = std::fs::canonicalize(&base).unwrap();
    assert_eq!(
        paths,
        [
            real.join("app.conf").display().to_string(),
            real.join("hand.conf").display().to_string()
        ]
    );
    // Without a playbook (the become user's journal), in text.
    let text = fleet.drift(&["-b"], true);
    text.expect(3);
    assert!(
        text.stdout
            .contains("drift: changed outside fixpoint since run")
            && text.stdout.contains("journal only"),
        "{}",
        text.stdout
    );

    assert_eq!(snapshot(&base), before, "fixpoint drift changed a file");
    let after: Vec<String> = ["app.conf", "hand.conf"]
        .iter()
        .map(|n| sha(&std::fs::read(base.join(n)).unwrap()))
        .collect();
    assert_eq!(after, sums);

    // Bad input: exit 2, no host touched.
    fleet.fx.write(
        "bad.yml",
        "- hosts: fleet\n  tasks:\n    - copy: {nope: 1}\n",
    );
    let bad = fleet.drift(&["bad.yml"], false);
    bad.expect(2);
    assert!(bad.stderr.contains("bad.yml:"), "{}", bad.stderr);
}

#[test]
fn if_unchanged_since_last_run_refuses_to_overwrite_a_hand_edit() {
    let fleet = Fleet::start(1, "fpsudo");
    let base = fleet.base(&fleet.hosts[0]);
    let conf = base.join("app.conf");
    let task = |content: &str| {
        format!(
            concat!(
                "    - name: dir\n      file: {{path: \"{{{{ base }}}}\", state: directory}}\n",
                "    - name: conf\n      copy:\n        content: \"{}\\n\"\n        dest: \"{{{{ base }}}}/app.conf\"\n        if_unchanged_since_last_run: true\n",
            ),
            content
        )
    };
    // No record yet: the first run writes (as a first run of any task would).
    fleet.play_full(BECOME, &task("v1"));
    let first = fleet.apply(&[]);
    first.expect(0);
    assert_eq!(first.status_of("conf"), "changed");
    let first_id = run_id(&first);
    // Unchanged since: the next version goes in.
    fleet.play_full(BECOME, &task("v2"));
    let second = fleet.apply(&[]);
    second.expect(0);
    assert_eq!(second.status_of("conf"), "changed");
    let second_id = run_id(&second);
    assert_ne!(first_id, second_id);
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), "v2\n");

    // By hand; then v3 is refused, with both sums and the run, in check mode and for real.
    std::fs::write(&conf, "hand\n").unwrap();
    let stamp = crate::fx::stamp(&conf);
    fleet.play_full(BECOME, &task("v3"));
    for flags in [&["--check", "-v"][..], &["-v"][..]] {
        let out = fleet.apply(flags);
        out.expect(1);
        let ev = &out.task_events("conf")[0];
        assert_eq!(ev["status"], "failed", "{ev}");
        let msg = ev["msg"].as_str().unwrap_or_default();
        assert!(
            msg.contains(&sha(b"v2\n"))
                && msg.contains(&sha(b"hand\n"))
                && msg.contains(&second_id)
                && msg.starts_with("if_unchanged_since_last_run:"),
            "{flags:?}: {ev}"
        );
        assert_eq!(ev["result"]["since_run"], second_id.as_str(), "{ev}");
        assert_eq!(ev["drift"]["since_run"], second_id.as_str(), "{ev}");
        assert_eq!(std::fs::read_to_string(&conf).unwrap(), "hand\n");
        assert_eq!(crate::fx::stamp(&conf), stamp);
    }
}

#[test]
fn a_shell_appending_while_fixpoint_writes_never_loses_a_line() {
    let fleet = Fleet::start(1, "fpsudo");
    let base = fleet.base(&fleet.hosts[0]);
    let log = base.join("log");
    std::fs::create_dir_all(&base).unwrap();
    std::fs::write(&log, "").unwrap();
    std::fs::set_permissions(&base, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let play = |n: usize| {
        fleet.play_full(BECOME, &format!(
            "    - name: line\n      lineinfile: {{path: \"{{{{ base }}}}/log\", line: fixpoint-{n}, if_unchanged_since_last_run: true}}\n      ignore_errors: true\n"
        ))
    };
    // The first run has no record to compare with, so it writes unguarded: before the shell.
    play(0);
    fleet.apply(&[]).expect(0);
    let mut written = vec!["fixpoint-0".to_string()];
    // The shell appends numbered lines until fixpoint's loop is over (bounded: 3000 lines).
    let stop = base.join("stop");
    let shell = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "i=0; while [ ! -e {stop} ] && [ $i -lt 3000 ]; do i=$((i+1)); echo shell-$i >> {log}; sleep 0.01; done; echo $i",
            stop = stop.display(),
            log = log.display()
        ))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    for n in 1..6 {
        play(n);
        let out = fleet.apply(&["-v"]);
        out.expect(0);
        let ev = &out.task_events("line")[0];
        match ev["status"].as_str() {
            Some("changed") => written.push(format!("fixpoint-{n}")),
            Some("failed") => {
                let msg = ev["msg"].as_str().unwrap_or_default();
                assert!(msg.contains("nothing was changed"), "{ev}");
            }
            other => panic!("{other:?}: {ev}"),
        }
    }
    std::fs::write(&stop, "").unwrap();
    let out = shell.wait_with_output().unwrap();
    let appended: usize = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // Every line the shell appended is there, once and in order.
    let shell_lines: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("shell-"))
        .collect();
    let want: Vec<String> = (1..=appended).map(|i| format!("shell-{i}")).collect();
    assert_eq!(shell_lines, want);
    // And every line fixpoint reported writing.
    for w in &written {
        assert!(lines.contains(&w.as_str()), "{w} lost: {text}");
    }
}

#[test]
fn validate_takes_if_unchanged_since_last_run_where_if_checksum_goes() {
    let fx = crate::fx::Fx::new();
    fx.write("templates/t.j2", "x\n");
    fx.play(concat!(
        "    - copy: {content: x, dest: /tmp/a, if_unchanged_since_last_run: true}\n",
        "    - template: {src: t.j2, dest: /tmp/a, if_unchanged_since_last_run: yes}\n",
        "    - lineinfile: {path: /tmp/a, line: x, if_unchanged_since_last_run: true}\n",
        "    - blockinfile: {path: /tmp/a, block: x, if_unchanged_since_last_run: true}\n",
        "    - file: {path: /tmp/a, state: absent, if_unchanged_since_last_run: true}\n",
    ));
    fx.run(&["validate", "site.yml"]).expect(0);
    for (task, says) in [
        (
            "replace: {path: /tmp/a, regexp: x, if_unchanged_since_last_run: true}",
            "if_unchanged_since_last_run",
        ),
        (
            "copy: {content: x, dest: /tmp/a, if_unchanged_since_last_run: true, if_checksum: absent}",
            "give one of them",
        ),
        (
            "file: {path: /tmp/a, state: directory, if_unchanged_since_last_run: true}",
            "state: file, touch or absent",
        ),
    ] {
        fx.play(&format!("    - name: bad\n      {task}\n"));
        let out = fx.run(&["validate", "site.yml"]);
        out.expect(2);
        assert!(out.stderr.contains(says), "{task}: {}", out.stderr);
        assert!(out.stderr.contains("site.yml:"), "{task}: {}", out.stderr);
    }
}
