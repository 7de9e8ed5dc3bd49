//! `block` / `rescue` / `always`, inherited block keywords, the `rescued` counter.

use crate::fx::Fx;
use crate::roles::play_head;

fn recap(out: &crate::fx::Out) -> serde_json::Value {
    out.recap()["hosts"]["localhost"].clone()
}

#[test]
fn rescue_catches_a_failure_and_sees_the_failed_task() {
    let fx = Fx::new();
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            concat!(
                "  tasks:\n",
                "    - name: guarded\n      block:\n",
                "        - name: breaks\n          fail:\n            msg: it broke\n",
                "        - name: never\n          debug:\n            msg: unreachable\n",
                "      rescue:\n",
                "        - name: record\n          copy:\n            content: \"{{ ansible_failed_task.name }}: {{ ansible_failed_result.msg }}\"\n            dest: \"{{ base }}/rescued\"\n",
                "      always:\n",
                "        - name: cleanup\n          debug:\n            msg: always\n",
                "    - name: after\n      debug:\n        msg: after\n",
            ),
        ),
    );
    std::fs::create_dir_all(fx.path("t")).unwrap();
    let out = fx.apply(&[]);
    out.expect(0);
    assert!(out.task_events("never").is_empty());
    assert_eq!(out.status_of("cleanup"), "ok");
    assert_eq!(out.status_of("after"), "ok");
    let text = fx.read("t/rescued");
    assert!(text.starts_with("breaks: it broke"), "{text}");
    let r = recap(&out);
    assert_eq!(r["failed"], 0, "{r}");
    assert_eq!(r["rescued"], 1, "{r}");
}

#[test]
fn without_rescue_always_runs_and_the_host_stays_failed() {
    let fx = Fx::new();
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            concat!(
                "  tasks:\n",
                "    - block:\n",
                "        - name: breaks\n          fail:\n            msg: it broke\n",
                "      always:\n",
                "        - name: cleanup\n          copy:\n            content: c\n            dest: \"{{ base }}/cleanup\"\n",
                "    - name: after\n      debug:\n        msg: after\n",
            ),
        ),
    );
    std::fs::create_dir_all(fx.path("t")).unwrap();
    let out = fx.apply(&[]);
    out.expect(1);
    assert!(fx.path("t/cleanup").exists());
    assert!(out.task_events("after").is_empty());
    let r = recap(&out);
    assert_eq!(r["failed"], 1, "{r}");
    assert_eq!(r["rescued"], 0, "{r}");
}

#[test]
fn a_failing_rescue_fails_the_host_and_nested_blocks_pass_failures_out() {
    let fx = Fx::new();
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            concat!(
                "  tasks:\n",
                "    - block:\n",
                "        - block:\n",
                "            - name: inner breaks\n              fail:\n                msg: inner\n",
                "          always:\n",
                "            - name: inner always\n              debug:\n                msg: x\n",
                "      rescue:\n",
                "        - name: outer rescue\n          debug:\n            msg: \"{{ ansible_failed_task.name }}\"\n",
                "        - name: rescue breaks too\n          fail:\n            msg: again\n",
            ),
        ),
    );
    let out = fx.apply(&["-v"]);
    out.expect(1);
    assert_eq!(out.status_of("inner always"), "ok");
    assert_eq!(
        out.task_events("outer rescue")[0]["result"]["msg"],
        "inner breaks"
    );
    let r = recap(&out);
    // As ansible-core: entering the rescue counts the host rescued; the rescue's own failure
    // then counts as failed.
    assert_eq!(r["failed"], 1, "{r}");
    assert_eq!(r["rescued"], 1, "{r}");
}

#[test]
fn block_keywords_are_inherited_by_inner_tasks() {
    let fx = Fx::new();
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            concat!(
                "  tasks:\n",
                "    - block:\n",
                "        - name: uses block var\n          copy:\n            content: \"{{ colour }}\"\n            dest: \"{{ base }}/colour\"\n",
                "        - name: own var wins\n          debug:\n            msg: \"{{ colour }}\"\n          vars:\n            colour: green\n",
                "        - name: ignored failure\n          fail:\n            msg: nope\n",
                "      vars:\n        colour: red\n",
                "      when: go | default(true) | bool\n",
                "      tags: [blk]\n",
                "      ignore_errors: true\n",
                "    - name: untagged\n      debug:\n        msg: u\n",
            ),
        ),
    );
    std::fs::create_dir_all(fx.path("t")).unwrap();
    let out = fx.apply(&["-v"]);
    out.expect(0);
    assert_eq!(fx.read("t/colour"), "red");
    assert_eq!(out.task_events("own var wins")[0]["result"]["msg"], "green");
    assert_eq!(out.task_events("ignored failure")[0]["status"], "failed");
    assert_eq!(recap(&out)["ignored"], 1);
    let out = fx.apply(&["-e", "go=false"]);
    out.expect(0);
    assert_eq!(out.status_of("uses block var"), "skipped");
    let out = fx.apply(&["--tags", "blk"]);
    assert!(out.task_events("untagged").is_empty());
    assert_eq!(out.status_of("own var wins"), "ok");
}

#[test]
fn check_mode_and_diff_inside_blocks_behave_as_outside() {
    let fx = Fx::new();
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            concat!(
                "  tasks:\n",
                "    - block:\n",
                "        - name: in block\n          copy:\n            content: \"new\\n\"\n            dest: \"{{ base }}/f\"\n",
                "      rescue:\n        - debug:\n            msg: r\n",
            ),
        ),
    );
    std::fs::create_dir_all(fx.path("t")).unwrap();
    std::fs::write(fx.path("t/f"), "old\n").unwrap();
    let out = fx.run(&["check", "--format", "json", "site.yml"]);
    out.expect(0);
    assert_eq!(fx.read("t/f"), "old\n");
    let ev = &out.task_events("in block")[0];
    assert_eq!(ev["status"], "changed");
    assert_eq!(ev["diff"]["content"][0]["before"], "old\n");
    assert_eq!(ev["diff"]["content"][0]["after"], "new\n");
}

#[test]
fn rescue_without_block_is_a_load_error() {
    let fx = Fx::new();
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            "  tasks:\n    - rescue:\n        - debug:\n            msg: x\n",
        ),
    );
    let out = fx.apply(&[]);
    out.expect(2);
    assert!(out.stderr.contains("site.yml:7:7"), "{}", out.stderr);
    assert!(out.stderr.contains("needs a `block`"), "{}", out.stderr);
}

#[test]
fn a_tasks_own_false_wins_over_the_blocks_true() {
    let fx = Fx::new();
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            concat!(
                "  tasks:\n    - block:\n",
                "        - name: ignored\n          fail:\n            msg: a\n",
                "        - name: not ignored\n          fail:\n            msg: b\n          ignore_errors: false\n",
                "      ignore_errors: true\n",
            ),
        ),
    );
    let out = fx.apply(&[]);
    out.expect(1);
    assert_eq!(out.task_events("ignored")[0]["ignored"], true);
    assert!(out.task_events("not ignored")[0].get("ignored").is_none());
}
