//! Tests of `command` and `shell`: Ansible's return values, the guards, check mode, the output cap.

use super::args::expand_vars;
use super::exec::format_timedelta;
use super::*;
use crate::{check_params, run, run_module, Outcome};
use std::fs;
use std::time::Duration;

fn ok(params: Value) -> Outcome {
    run::<Command>(&params, &Ctx::default()).unwrap()
}

fn sh(params: Value) -> Outcome {
    run::<Shell>(&params, &Ctx::default()).unwrap()
}

fn failure(r: Result<Outcome, ModuleError>) -> (String, Map<String, Value>) {
    match r {
        Err(ModuleError::Failed { msg, result }) => (msg, result),
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn huge_output_is_capped_keeping_head_and_tail_and_says_so() {
    // 5 MB on each stream, well past the cap; the start and the end must survive.
    let out = sh(
        json!({"cmd": "printf START; head -c 5000000 /dev/zero | tr '\\0' x; echo END; \
                                (printf ESTART; head -c 5000000 /dev/zero | tr '\\0' y; echo EEND) >&2"}),
    );
    let r = &out.result;
    for (key, first, last, fill) in [
        ("stdout", "START", "xEND", 'x'),
        ("stderr", "ESTART", "yEEND", 'y'),
    ] {
        let text = r[key].as_str().unwrap();
        assert!(text.starts_with(first), "{key} keeps its head");
        assert!(text.ends_with(last), "{key} keeps its tail");
        assert!(
            text.len() <= OUTPUT_CAP + 1024,
            "{key}: {} bytes",
            text.len()
        );
        assert!(
            text.contains("bytes omitted"),
            "{key} says where it was cut"
        );
        assert!(text.chars().filter(|c| *c == fill).count() > OUTPUT_CAP / 2);
        let t = &r[format!("{key}_truncated").as_str()];
        let total = 5_000_000 + first.len() as u64 + last.len() as u64;
        assert_eq!(t["total_bytes"], json!(total), "{key}: {t}");
        assert_eq!(t["cap_bytes"], json!(OUTPUT_CAP), "{key}: {t}");
        assert_eq!(
            t["omitted_bytes"],
            json!(total - OUTPUT_CAP as u64),
            "{key}: {t}"
        );
    }
    // Output under the cap is whole and carries no such key.
    let small = sh(json!({"cmd": "echo hi"}));
    assert_eq!(small.result["stdout"], json!("hi"));
    assert!(small.result.get("stdout_truncated").is_none());
    assert!(small.result.get("stderr_truncated").is_none());
}

#[test]
fn command_runs_and_returns_ansible_values() {
    let out = ok(json!({"cmd": "echo 'hello world' again"}));
    assert!(out.changed);
    let r = &out.result;
    assert_eq!(r["cmd"], json!(["echo", "hello world", "again"]));
    assert_eq!(r["rc"], json!(0));
    assert_eq!(r["stdout"], json!("hello world again"));
    assert_eq!(r["stdout_lines"], json!(["hello world again"]));
    assert_eq!(r["stderr"], json!(""));
    assert_eq!(r["stderr_lines"], json!([]));
    let dt = regex::Regex::new(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{6})?$").unwrap();
    assert!(dt.is_match(r["start"].as_str().unwrap()), "{}", r["start"]);
    assert!(dt.is_match(r["end"].as_str().unwrap()));
    let delta = regex::Regex::new(r"^\d+:\d\d:\d\d(\.\d{6})?$").unwrap();
    assert!(
        delta.is_match(r["delta"].as_str().unwrap()),
        "{}",
        r["delta"]
    );
}

#[test]
fn command_does_not_use_a_shell_and_hash_is_not_a_comment() {
    let out = ok(json!({"cmd": "echo a | b # c"}));
    assert_eq!(out.result["stdout"], json!("a | b # c"));
}

#[test]
fn argv_keeps_arguments_whole() {
    let out = ok(json!({"argv": ["printf", "%s|", "a b", "c"]}));
    assert_eq!(out.result["stdout"], json!("a b|c|"));
    assert_eq!(out.result["cmd"], json!(["printf", "%s|", "a b", "c"]));
}

#[test]
fn shell_runs_through_sh_and_reports_cmd_as_string() {
    let out = sh(json!({"cmd": "echo a | tr a b && echo two >&2"}));
    assert_eq!(out.result["cmd"], json!("echo a | tr a b && echo two >&2"));
    assert_eq!(out.result["stdout"], json!("b"));
    assert_eq!(out.result["stderr"], json!("two"));
    let out = sh(json!({"cmd": "echo $0", "executable": "/bin/bash"}));
    assert_eq!(out.result["stdout"], json!("/bin/bash"));
}

#[test]
fn registry_maps_shell_to_shell() {
    let out = run_module("shell", &json!({"cmd": "echo $((1+2))"}), &Ctx::default()).unwrap();
    assert_eq!(out.result["stdout"], json!("3"));
    let out = run_module("command", &json!({"cmd": "echo $((1+2))"}), &Ctx::default()).unwrap();
    assert_eq!(out.result["stdout"], json!("$((1+2))"));
    check_params("shell", &json!({"cmd": "x", "executable": "/bin/bash"})).unwrap();
    // command takes `executable` and ignores it, as ansible-core does: no shell runs.
    let out = run_module(
        "command",
        &json!({"cmd": "echo $0", "executable": "/bin/bash"}),
        &Ctx::default(),
    )
    .unwrap();
    assert_eq!(out.result["stdout"], json!("$0"));
    // ... with a warning that says so, as ansible-core's (its target checks it).
    let w = out.result["warnings"][0].as_str().unwrap();
    assert!(
        w.contains("no longer supported") && w.contains("/bin/bash"),
        "{w}"
    );
}

#[test]
fn non_zero_rc_fails_with_all_values() {
    let (msg, r) = failure(run::<Shell>(
        &json!({"cmd": "echo out; echo err >&2; exit 3"}),
        &Ctx::default(),
    ));
    assert_eq!(msg, "non-zero return code");
    assert_eq!(r["rc"], json!(3));
    assert_eq!(r["stdout"], json!("out"));
    assert_eq!(r["stderr"], json!("err"));
    assert_eq!(r["changed"], json!(true));
    assert!(r.contains_key("delta"));
}

#[test]
fn missing_program_fails_like_ansible() {
    let (msg, r) = failure(run::<Command>(
        &json!({"cmd": "fixpoint-no-such-program --x"}),
        &Ctx::default(),
    ));
    assert_eq!(
        msg,
        "[Errno 2] No such file or directory: 'fixpoint-no-such-program'"
    );
    assert_eq!(r["rc"], json!(2));
}

#[test]
fn creates_skips_when_path_exists_including_globs() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let cmd = format!("touch {}", marker.display());
    let out = ok(json!({"cmd": cmd, "creates": marker}));
    assert!(out.changed);
    assert!(marker.exists());
    let out = ok(json!({"cmd": cmd, "creates": marker}));
    assert!(!out.changed);
    let why = format!("skipped, since {} exists", marker.display());
    let msg = format!("Did not run command since '{}' exists", marker.display());
    assert_eq!(out.msg.as_deref(), Some(msg.as_str()));
    assert_eq!(out.result["stdout"], json!(why));
    assert_eq!(out.result["rc"], json!(0));
    let glob = format!("{}/r*", dir.path().display());
    assert!(!ok(json!({"cmd": "false", "creates": glob})).changed);
    let glob = format!("{}/zz*", dir.path().display());
    assert!(ok(json!({"cmd": "true", "creates": glob})).changed);
}

#[test]
fn removes_skips_when_path_missing() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("gone");
    let out = ok(json!({"argv": ["false"], "removes": f}));
    assert!(!out.changed);
    assert_eq!(
        out.result["stdout"],
        json!(format!("skipped, since {} does not exist", f.display()))
    );
    fs::write(&f, "").unwrap();
    let out = ok(json!({"argv": ["rm", f], "removes": f}));
    assert!(out.changed);
    assert!(!f.exists());
}

#[test]
fn unless_and_onlyif_guards() {
    let out = ok(json!({"cmd": "false", "unless": "true"}));
    assert!(!out.changed);
    assert_eq!(
        out.msg.as_deref(),
        Some("skipped, since `unless` succeeded")
    );
    assert!(ok(json!({"cmd": "true", "unless": "false"})).changed);
    let out = ok(json!({"cmd": "false", "onlyif": "test -e /fixpoint-nonexistent"}));
    assert!(!out.changed);
    assert_eq!(out.msg.as_deref(), Some("skipped, since `onlyif` failed"));
    assert!(ok(json!({"cmd": "true", "onlyif": "true"})).changed);
}

#[test]
fn guards_run_in_check_mode_but_the_command_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("m");
    let check = Ctx {
        check: true,
        diff: false,
    };
    let cmd = format!("touch {}", marker.display());
    let out = run::<Command>(&json!({"cmd": cmd, "unless": "true"}), &check).unwrap();
    assert!(!out.changed);
    let out = run::<Command>(&json!({"cmd": cmd, "unless": "false"}), &check).unwrap();
    assert!(out.changed);
    assert_eq!(
        out.msg.as_deref(),
        Some("Command would have run if not in check mode")
    );
    assert!(!marker.exists());
    // Without a guard it is skipped, as in Ansible.
    let out = run::<Command>(&json!({"cmd": cmd}), &check).unwrap();
    assert!(!out.changed);
    assert_eq!(out.result["skipped"], json!(true));
    assert!(!marker.exists());
}

#[test]
fn a_command_without_any_guard_is_skipped_in_check_mode() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("m");
    let check = Ctx {
        check: true,
        diff: false,
    };
    let cmd = format!("touch {}", marker.display());
    let out = run::<Command>(&json!({ "cmd": cmd }), &check).unwrap();
    assert!(!out.changed);
    assert_eq!(out.result["skipped"], json!(true));
    assert_eq!(out.result["rc"], json!(0));
    assert_eq!(
        out.msg.as_deref(),
        Some("Command would have run if not in check mode")
    );
    assert!(!marker.exists());
    // With `creates`, check mode says it would run (changed), as Ansible does.
    let creates = dir.path().join("c").display().to_string();
    let out = run::<Command>(&json!({"cmd": cmd, "creates": creates}), &check).unwrap();
    assert!(out.changed);
    assert!(out.result.get("skipped").is_none());
}

#[test]
fn chdir_applies_to_command_and_relative_creates() {
    let dir = tempfile::tempdir().unwrap();
    let real = fs::canonicalize(dir.path()).unwrap();
    let out = ok(json!({"cmd": "pwd", "chdir": real}));
    assert_eq!(out.result["stdout"], json!(real.to_string_lossy()));
    fs::write(real.join("here"), "").unwrap();
    let out = ok(json!({"cmd": "false", "chdir": real, "creates": "here"}));
    assert!(!out.changed);
    let out = sh(json!({"cmd": "false", "chdir": real, "unless": "test -e here"}));
    assert!(!out.changed);
    let (msg, _) = failure(run::<Command>(
        &json!({"cmd": "pwd", "chdir": real.join("nope")}),
        &Ctx::default(),
    ));
    assert!(msg.starts_with("Unable to change directory"), "{msg}");
}

#[test]
fn stdin_newline_and_strip_options() {
    let out = ok(json!({"cmd": "cat", "stdin": "abc"}));
    assert_eq!(out.result["stdout"], json!("abc"));
    let out = ok(json!({"cmd": "cat", "stdin": "abc", "strip_empty_ends": false}));
    assert_eq!(out.result["stdout"], json!("abc\n"));
    let out = ok(json!({
        "cmd": "cat", "stdin": "abc", "stdin_add_newline": "no", "strip_empty_ends": false
    }));
    assert_eq!(out.result["stdout"], json!("abc"));
    // Without stdin the child reads EOF rather than the agent's own input.
    let out = ok(json!({"cmd": "cat"}));
    assert_eq!(out.result["stdout"], json!(""));
}

#[test]
fn environment_reaches_command_guards_and_expansion() {
    let env = json!({"FIXPOINT_T": "v1", "FIXPOINT_N": 5});
    let out = sh(json!({"cmd": "echo $FIXPOINT_T-$FIXPOINT_N", "_env": env}));
    assert_eq!(out.result["stdout"], json!("v1-5"));
    let out = ok(json!({"cmd": "echo $FIXPOINT_T ${FIXPOINT_N} $FIXPOINT_UNSET", "_env": env}));
    assert_eq!(out.result["stdout"], json!("v1 5 $FIXPOINT_UNSET"));
    let out = ok(json!({"cmd": "echo $FIXPOINT_T", "_env": env, "expand_argument_vars": false}));
    assert_eq!(out.result["stdout"], json!("$FIXPOINT_T"));
    let out = ok(json!({"cmd": "false", "_env": env, "unless": "test \"$FIXPOINT_T\" = v1"}));
    assert!(!out.changed);
    let e = check_params("command", &json!({"cmd": "x", "_env": {"A": [1]}})).unwrap_err();
    assert!(e.to_string().contains("`A`"), "{e}");
}

#[test]
fn bad_parameters_are_rejected() {
    let e = check_params("command", &json!({"cmd": "a", "argv": ["a"]})).unwrap_err();
    assert!(e.to_string().contains("mutually exclusive"), "{e}");
    let e = check_params("command", &json!({})).unwrap_err();
    assert!(
        e.to_string()
            .contains("one of the following is required: _raw_params, cmd, argv"),
        "{e}"
    );
    let e = check_params("command", &json!({"cmd": " "})).unwrap_err();
    assert!(e.to_string().contains("no command given"), "{e}");
    let e = check_params("shell", &json!({"cmd": "  "})).unwrap_err();
    assert!(e.to_string().contains("no command given"), "{e}");
    let e = check_params("command", &json!({"cmd": "echo 'unterminated"})).unwrap_err();
    assert!(e.to_string().contains("unterminated quote"), "{e}");
    let e = check_params("command", &json!({"cmd": "x", "chdri": "/"})).unwrap_err();
    assert!(e.to_string().contains("chdri"), "{e}");
    let e = check_params("shell", &json!({"cmd": "x", "argv": ["x"]})).unwrap_err();
    assert!(e.to_string().contains("argv"), "{e}");
    let e = check_params(
        "command",
        &json!({"cmd": "x", "strip_empty_ends": "perhaps"}),
    )
    .unwrap_err();
    assert_eq!(e.path, "strip_empty_ends");
    check_params("command", &json!({"cmd": "echo '{{ x }}"})).unwrap();
}

#[test]
fn python_compatible_helpers() {
    assert_eq!(
        split_command("a 'b c' \"d\\\"e\" #f g#h"),
        Some(
            vec!["a", "b c", "d\"e", "#f", "g#h"]
                .into_iter()
                .map(String::from)
                .collect()
        )
    );
    assert_eq!(splitlines("a\r\nb\rc\n\nd\n"), vec!["a", "b", "c", "", "d"]);
    assert_eq!(
        format_timedelta(Duration::from_micros(1_500_000)),
        "0:00:01.500000"
    );
    assert_eq!(
        format_timedelta(Duration::from_secs(90_061)),
        "1 day, 1:01:01"
    );
    let env = [("HOME".to_string(), "/home/x/".to_string())];
    let l = EnvLookup(&env);
    assert_eq!(expand_path("~/a", &l), "/home/x/a");
    assert_eq!(expand_path("a~", &l), "a~");
    assert_eq!(expand_vars("${HOME}b $HOME", &l), "/home/x/b /home/x/");
}
