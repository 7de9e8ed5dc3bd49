//! Tests of `lineinfile`: placement of the line, regexps and backrefs, absent, modes, backups.

use super::*;
use crate::testutil::{read, setup, stamp, CHECK};
use crate::text::regex::Regex;
use crate::{check_params, run, Outcome};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

fn go(params: Value) -> Outcome {
    run::<LineInFile>(&params, &Ctx::default()).unwrap()
}

#[test]
fn an_empty_pattern_warns_as_ansible_does() {
    let (_d, path) = setup("a\nb\n");
    let out = go(json!({"path": path, "regexp": "", "line": "c"}));
    let w = out.result["warnings"][0].as_str().unwrap();
    assert!(
        w.starts_with("The regular expression is an empty string"),
        "{w}"
    );
    assert!(w.ends_with("avoid this warning."), "{w}");
    let out = go(json!({"path": path, "search_string": "", "line": "c"}));
    let w = out.result["warnings"][0].as_str().unwrap();
    assert!(w.ends_with("rather than appending."), "{w}");
    let out = go(json!({"path": path, "regexp": "^c", "line": "c"}));
    assert!(out.result.get("warnings").is_none());
}

#[test]
fn a_file_over_the_edit_limit_is_refused_and_left_alone() {
    let (_d, path) = setup("");
    // Sparse: the size is what counts, not the disk it would take.
    let big = crate::text::MAX_EDIT_SIZE + 1;
    fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(big)
        .unwrap();
    for (module, params) in [
        ("lineinfile", json!({"path": path, "line": "c"})),
        ("blockinfile", json!({"path": path, "block": "c"})),
    ] {
        let e = crate::registry::run_module(module, &params, &Ctx::default()).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("is {big} bytes, larger than the 32 MiB")),
            "{module}: {msg}"
        );
        assert!(msg.contains("`copy` or `template`"), "{msg}");
    }
    assert_eq!(fs::metadata(&path).unwrap().len(), big);
    // At the limit it is edited.
    fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(crate::text::MAX_EDIT_SIZE - 2)
        .unwrap();
    assert!(go(json!({"path": path, "line": "c"})).changed);
}

#[test]
fn appends_then_converges_without_rewriting() {
    let (_d, path) = setup("a\nb\n");
    let params = json!({"path": path, "line": "c"});
    let out = go(params.clone());
    assert!(out.changed);
    assert_eq!(out.msg.as_deref(), Some("line added"));
    assert_eq!(read(&path), "a\nb\nc\n");
    let before = stamp(&path);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let again = go(params);
    assert!(!again.changed);
    assert!(again.diff.is_empty());
    assert_eq!(stamp(&path), before);
}

#[test]
fn check_mode_reports_and_leaves_disk_alone_and_diff_is_filled() {
    let (_d, path) = setup("a\n");
    let before = stamp(&path);
    let out = run::<LineInFile>(&json!({"path": path, "line": "b"}), &CHECK).unwrap();
    assert!(out.changed);
    assert_eq!(read(&path), "a\n");
    assert_eq!(stamp(&path), before);
    assert_eq!(out.diff.content.len(), 1);
    assert_eq!(out.diff.content[0].before, "a\n");
    assert_eq!(out.diff.content[0].after, "a\nb\n");
}

#[test]
fn no_content_diff_unless_asked() {
    let (_d, path) = setup("a\n");
    let out = go(json!({"path": path, "line": "b"}));
    assert!(out.diff.content.is_empty());
}

#[test]
fn regexp_replaces_last_match_or_first_with_firstmatch() {
    let (_d, path) = setup("port=1\nx\nport=2\n");
    let out = go(json!({"path": path, "regexp": "^port=", "line": "port=80"}));
    assert_eq!(out.msg.as_deref(), Some("line replaced"));
    assert_eq!(read(&path), "port=1\nx\nport=80\n");
    fs::write(&path, "port=1\nx\nport=2\n").unwrap();
    go(json!({"path": path, "regexp": "^port=", "line": "port=80", "firstmatch": "yes"}));
    assert_eq!(read(&path), "port=80\nx\nport=2\n");
}

#[test]
fn regexp_dollar_matches_before_newline_like_python() {
    let (_d, path) = setup("key = old\n");
    go(json!({"path": path, "regexp": "^key = old$", "line": "key = new"}));
    assert_eq!(read(&path), "key = new\n");
}

#[test]
fn regexp_without_match_but_exact_line_present_is_ok() {
    let (_d, path) = setup("a\nport=80\n");
    let before = stamp(&path);
    let out = go(json!({"path": path, "regexp": "^nomatch", "line": "port=80"}));
    assert!(!out.changed);
    assert_eq!(stamp(&path), before);
}

#[test]
fn regexp_without_match_appends() {
    let (_d, path) = setup("a\n");
    go(json!({"path": path, "regexp": "^port=", "line": "port=80"}));
    assert_eq!(read(&path), "a\nport=80\n");
}

#[test]
fn search_string_replaces_literal_match() {
    let (_d, path) = setup("a.b=1\naxb=2\n");
    go(json!({"path": path, "search_string": "a.b", "line": "a.b=3"}));
    assert_eq!(read(&path), "a.b=3\naxb=2\n");
}

#[test]
fn insertafter_places_after_last_anchor_and_falls_back_to_eof() {
    let (_d, path) = setup("[main]\nx=1\n[other]\ny=1\n");
    go(json!({"path": path, "line": "z=2", "insertafter": "^\\[main\\]"}));
    assert_eq!(read(&path), "[main]\nz=2\nx=1\n[other]\ny=1\n");
    // Second run: the line exists, nothing moves.
    let out = go(json!({"path": path, "line": "z=2", "insertafter": "^\\[main\\]"}));
    assert!(!out.changed);
    // No anchor match: end of file.
    go(json!({"path": path, "line": "w=3", "insertafter": "^nothing"}));
    assert!(read(&path).ends_with("y=1\nw=3\n"));
}

#[test]
fn insertafter_last_of_several_anchors_unless_firstmatch() {
    let (_d, path) = setup("# c\na\n# c\nb\n");
    go(json!({"path": path, "line": "new", "insertafter": "^#"}));
    assert_eq!(read(&path), "# c\na\n# c\nnew\nb\n");
    fs::write(&path, "# c\na\n# c\nb\n").unwrap();
    go(json!({"path": path, "line": "new", "insertafter": "^#", "firstmatch": true}));
    assert_eq!(read(&path), "# c\nnew\na\n# c\nb\n");
}

#[test]
fn insertafter_anchor_on_unterminated_last_line() {
    let (_d, path) = setup("a\nanchor");
    go(json!({"path": path, "line": "new", "insertafter": "^anchor"}));
    assert_eq!(read(&path), "a\nanchor\nnew\n");
}

#[test]
fn insertbefore_and_bof() {
    let (_d, path) = setup("a\nb\n");
    go(json!({"path": path, "line": "before-b", "insertbefore": "^b"}));
    assert_eq!(read(&path), "a\nbefore-b\nb\n");
    go(json!({"path": path, "line": "top", "insertbefore": "BOF"}));
    assert_eq!(read(&path), "top\na\nbefore-b\nb\n");
    let out = go(json!({"path": path, "line": "top", "insertbefore": "BOF"}));
    assert!(!out.changed);
    // No anchor match: end of file.
    go(json!({"path": path, "line": "end", "insertbefore": "^zzz"}));
    assert!(read(&path).ends_with("b\nend\n"));
}

#[test]
fn final_newline_added_before_appending() {
    let (_d, path) = setup("a");
    go(json!({"path": path, "line": "b"}));
    assert_eq!(read(&path), "a\nb\n");
}

#[test]
fn backrefs_expand_python_groups_and_no_match_leaves_file() {
    let (_d, path) = setup("listen 8080 ssl\n");
    let out = go(json!({
        "path": path, "regexp": "^listen (\\d+)(?P<rest>.*)$",
        "line": "listen \\1 http2\\g<rest>", "backrefs": true
    }));
    assert!(out.changed);
    assert_eq!(read(&path), "listen 8080 http2 ssl\n");
    let before = stamp(&path);
    let out = go(json!({
        "path": path, "regexp": "^nomatch(.*)", "line": "x\\1", "backrefs": true
    }));
    assert!(!out.changed);
    assert_eq!(stamp(&path), before);
}

#[test]
fn absent_removes_every_match() {
    let (_d, path) = setup("a\n#x\nb\n#y\n");
    let out = go(json!({"path": path, "regexp": "^#", "state": "absent"}));
    assert_eq!(out.msg.as_deref(), Some("2 line(s) removed"));
    assert_eq!(out.result["found"], json!(2));
    assert_eq!(read(&path), "a\nb\n");
    let out = go(json!({"path": path, "line": "b", "state": "absent"}));
    assert_eq!(out.msg.as_deref(), Some("1 line(s) removed"));
    assert_eq!(read(&path), "a\n");
    let out = go(json!({"path": path, "search_string": "zz", "state": "absent"}));
    assert!(!out.changed);
}

#[test]
fn absent_on_missing_file_is_ok() {
    let dir = tempfile::tempdir().unwrap();
    let out = go(json!({"path": dir.path().join("nope"), "line": "x", "state": "absent"}));
    assert!(!out.changed);
    assert_eq!(out.msg.as_deref(), Some("file not present"));
}

#[test]
fn missing_file_fails_unless_create() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/new.conf");
    let err = run::<LineInFile>(&json!({"path": path, "line": "x"}), &Ctx::default()).unwrap_err();
    match err {
        ModuleError::Failed { msg, result } => {
            assert!(msg.starts_with(&format!("Destination {} does not exist !", path.display())));
            assert_eq!(result["rc"], json!(257));
        }
        other => panic!("unexpected {other:?}"),
    }
    let out = go(json!({"path": path, "line": "x", "create": true, "mode": "0600"}));
    assert!(out.changed);
    assert_eq!(read(&path), "x\n");
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
        0o600
    );
    assert!(!go(json!({"path": path, "line": "x", "create": true, "mode": "0600"})).changed);
}

#[test]
fn mode_only_change_does_not_rewrite_content() {
    let (_d, path) = setup("a\n");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    let ino = fs::metadata(&path).unwrap().ino();
    let out = go(json!({"path": path, "line": "a", "mode": "0640"}));
    assert!(out.changed);
    assert_eq!(
        out.msg.as_deref(),
        Some("ownership, perms or SE linux context changed")
    );
    assert_eq!(out.diff.attrs[0].attr, "mode");
    assert_eq!(out.diff.attrs[0].before, "0644");
    assert_eq!(out.diff.attrs[0].after, "0640");
    assert_eq!(fs::metadata(&path).unwrap().ino(), ino);
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
        0o640
    );
}

#[test]
fn rewrite_keeps_existing_mode() {
    let (_d, path) = setup("a\n");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    go(json!({"path": path, "line": "b"}));
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
        0o600
    );
}

#[test]
fn crlf_line_endings_kept() {
    let (_d, path) = setup("a=1\r\nb=2\r\n");
    go(json!({"path": path, "regexp": "^a=", "line": "a=9"}));
    assert_eq!(read(&path), "a=9\r\nb=2\r\n");
    go(json!({"path": path, "line": "c=3"}));
    assert_eq!(read(&path), "a=9\r\nb=2\r\nc=3\r\n");
    assert!(!go(json!({"path": path, "line": "c=3"})).changed);
}

#[test]
fn backup_made_when_changing() {
    let (_d, path) = setup("a\n");
    let out = go(json!({"path": path, "line": "b", "backup": true}));
    let backup = out.result["backup"].as_str().unwrap();
    assert_eq!(fs::read_to_string(backup).unwrap(), "a\n");
    let out = go(json!({"path": path, "line": "b", "backup": true}));
    assert_eq!(out.result["backup"], json!(""));
}

#[test]
fn validate_failure_leaves_file() {
    let (_d, path) = setup("a\n");
    let err = run::<LineInFile>(
        &json!({"path": path, "line": "b", "validate": "false %s"}),
        &Ctx::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("failed to validate"), "{err}");
    assert_eq!(read(&path), "a\n");
    go(json!({"path": path, "line": "b", "validate": "grep -q b %s"}));
    assert_eq!(read(&path), "a\nb\n");
}

#[test]
fn symlink_is_followed_and_kept() {
    let (d, path) = setup("a\n");
    let link = d.path().join("link");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    go(json!({"dest": link, "line": "b"}));
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(read(&path), "a\nb\n");
}

#[test]
fn directory_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let err =
        run::<LineInFile>(&json!({"path": dir.path(), "line": "x"}), &Ctx::default()).unwrap_err();
    assert!(err.to_string().contains("is a directory"), "{err}");
}

#[test]
fn numbers_are_strings_and_aliases_work() {
    let (_d, path) = setup("");
    go(json!({"destfile": path, "value": 8080}));
    assert_eq!(read(&path), "8080\n");
}

#[test]
fn bad_parameters_are_rejected_naming_the_field() {
    let e = check_params(
        "lineinfile",
        &json!({"path": "/x", "line": "a", "bogus": 1}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("bogus"), "{e}");
    let e = check_params(
        "lineinfile",
        &json!({"path": "/x", "line": "a", "state": "gone"}),
    )
    .unwrap_err();
    assert_eq!(e.path, "state");
    let e = check_params(
        "lineinfile",
        &json!({"path": "/x", "line": "a", "create": "maybe"}),
    )
    .unwrap_err();
    assert_eq!(e.path, "create");
    let e = check_params(
        "lineinfile",
        &json!({"path": "/x", "backrefs": true, "line": "a"}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("regexp"), "{e}");
    let e = check_params("lineinfile", &json!({"path": "/x"})).unwrap_err();
    assert!(e.to_string().contains("`line` is required"), "{e}");
    let e = check_params("lineinfile", &json!({"path": "/x", "state": "absent"})).unwrap_err();
    assert!(e.to_string().contains("state: absent"), "{e}");
    let e = check_params(
        "lineinfile",
        &json!({"path": "/x", "line": "a", "insertafter": "a", "insertbefore": "b"}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("mutually exclusive"), "{e}");
    let e = check_params(
        "lineinfile",
        &json!({"path": "/x", "line": "a", "regexp": "(a"}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("`regexp`"), "{e}");
    let e = check_params(
        "lineinfile",
        &json!({"path": "/x", "line": "a", "validate": "true"}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("%s"), "{e}");
    // Templated patterns are left for run time.
    check_params(
        "lineinfile",
        &json!({"path": "/x", "line": "a", "regexp": "{{ re }}("}),
    )
    .unwrap();
}

#[test]
fn python_template_expansion() {
    let re = Regex::new(r"(a)(b)?(?P<n>c)").unwrap();
    let caps = re.captures(b"ac").unwrap();
    assert_eq!(
        expand_template(br"\1-\2-\g<n>-\g<3>", &re, &caps).unwrap(),
        b"a--c-c"
    );
    assert_eq!(
        expand_template(br"x\ty\\z\.", &re, &caps).unwrap(),
        b"x\ty\\z\\."
    );
    assert_eq!(expand_template(br"\101", &re, &caps).unwrap(), b"A");
    assert!(expand_template(br"\9", &re, &caps).is_err());
    assert!(expand_template(br"\q", &re, &caps).is_err());
}
