//! `no_log: true` hides a task's parameters and results from every output channel.

use crate::fx::Fx;
use crate::roles::play_head;

const SECRET: &str = "s3cr3t-value-42";

/// Every file under `dir`, read as text (the journal, the lock info, the outbox).
fn all_file_text(dir: &std::path::Path) -> String {
    let mut out = String::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&p) else {
            continue;
        };
        for e in rd.flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push_str(&String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
            }
        }
    }
    out
}

#[test]
fn no_log_hides_the_secret_from_stdout_stderr_json_diffs_errors_and_the_journal() {
    let fx = Fx::new();
    fx.write(
        "roles/sec/tasks/main.yml",
        "- name: role secret\n  copy:\n    content: \"{{ secret }}\"\n    dest: \"{{ base }}/role-secret\"\n  no_log: true\n",
    );
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            &format!(
                concat!(
                    "    secret: {}\n",
                    "  roles: [sec]\n",
                    "  tasks:\n",
                    "    - name: write\n      copy:\n        content: \"{{{{ secret }}}}\\n\"\n        dest: \"{{{{ base }}}}/secret-file\"\n      no_log: true\n",
                    "    - name: journaled\n      command: echo {{{{ secret }}}}\n      once: echo-it\n      register: echoed\n      no_log: true\n",
                    "    - name: show\n      debug:\n        msg: \"{{{{ secret }}}}\"\n      no_log: true\n",
                    "    - name: looped\n      debug:\n        msg: x\n      loop: [\"{{{{ secret }}}}\"]\n      no_log: true\n",
                    "    - name: fails\n      fail:\n        msg: \"{{{{ secret }}}}\"\n      no_log: true\n      ignore_errors: true\n",
                    "    - name: render error\n      copy:\n        content: \"{{{{ secret }}}}{{{{ nope }}}}\"\n        dest: \"{{{{ base }}}}/x\"\n      no_log: true\n      ignore_errors: true\n",
                    "    - block:\n        - name: fails in block\n          command: cat /nonexistent/{{{{ secret }}}}\n          changed_when: false\n          no_log: true\n",
                    "      rescue:\n        - name: rescue shows the failure\n          debug:\n            msg: \"{{{{ ansible_failed_result }}}}\"\n",
                    // A replayed once-step returns the journal's censored result, not the secret.
                    "    - name: registered stays usable\n      assert:\n        that: echoed.replayed is defined or echoed.stdout == secret\n        quiet: true\n",
                ),
                SECRET
            ),
        ),
    );
    std::fs::create_dir_all(fx.path("t")).unwrap();
    let text = fx.run(&["apply", "-vvv", "--diff", "site.yml"]);
    text.expect(0);
    let json = fx.apply(&["-vvv", "--diff"]);
    json.expect(0);
    // The tasks really ran with the secret.
    assert_eq!(fx.read("t/secret-file"), format!("{SECRET}\n"));
    assert_eq!(fx.read("t/role-secret"), SECRET);
    assert_eq!(json.status_of("fails"), "failed");
    assert_eq!(json.status_of("registered stays usable"), "ok");
    assert!(text.stdout.contains("censored"), "{}", text.stdout);
    for (what, s) in [
        ("text stdout", &text.stdout),
        ("text stderr", &text.stderr),
        ("json stdout", &json.stdout),
        ("json stderr", &json.stderr),
    ] {
        assert!(!s.contains(SECRET), "{what} shows the secret:\n{s}");
    }
    let state = all_file_text(&fx.state_dir());
    assert!(
        state.contains("echo-it"),
        "the journal has the once record: {state}"
    );
    assert!(
        !state.contains(SECRET),
        "the journal keeps the secret: {state}"
    );
}

#[test]
fn no_log_hides_the_diff_in_the_not_converged_verdict() {
    let fx = Fx::new();
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            &format!(
                concat!(
                    "  tasks:\n",
                    "    - name: whole\n      copy:\n        content: \"{}\\n\"\n        dest: \"{{{{ base }}}}/f\"\n      no_log: true\n",
                    "    - name: line\n      lineinfile:\n        path: \"{{{{ base }}}}/f\"\n        line: other-{}\n      no_log: true\n",
                ),
                SECRET, SECRET
            ),
        ),
    );
    std::fs::create_dir_all(fx.path("t")).unwrap();
    let out = fx.run(&["apply", "--twice", "site.yml"]);
    out.expect(3);
    assert!(out.stdout.contains("NOT CONVERGED"), "{}", out.stdout);
    assert!(!out.stdout.contains(SECRET), "{}", out.stdout);
    assert!(!out.stderr.contains(SECRET), "{}", out.stderr);
}
