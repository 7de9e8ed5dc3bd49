//! Unit tests of `ini_file`: the layouts community.general's ini_file writes.

use super::*;
use crate::testutil::{read, setup, stamp, CHECK};
use crate::{check_params, run, Outcome};
use std::fs;

fn go(params: Value) -> Outcome {
    run::<IniFile>(&params, &Ctx::default()).unwrap()
}

#[test]
fn new_file_gets_a_blank_line_then_the_section_and_converges() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/app.ini");
    let params = json!({"path": path, "section": "main", "option": "port", "value": 8080});
    let out = go(params.clone());
    assert!(out.changed);
    assert_eq!(out.msg.as_deref(), Some("section and option added"));
    assert_eq!(out.result["path"], json!(path));
    assert_eq!(read(&path), "\n[main]\nport = 8080\n");
    let before = stamp(&path);
    let again = go(params);
    assert!(!again.changed);
    assert_eq!(again.msg.as_deref(), Some("OK"));
    assert_eq!(stamp(&path), before);
}

#[test]
fn option_changed_in_place_and_added_after_last_live_line() {
    let (_d, path) = setup("[a]\nx = 1\n\n# note\n[b]\ny=2\n");
    let out = go(json!({"path": path, "section": "a", "option": "x", "value": "2"}));
    assert_eq!(out.msg.as_deref(), Some("option changed"));
    assert_eq!(read(&path), "[a]\nx = 2\n\n# note\n[b]\ny=2\n");
    let out = go(
        json!({"path": path, "section": "a", "option": "z", "value": "3", "no_extra_spaces": true}),
    );
    assert_eq!(out.msg.as_deref(), Some("option added"));
    assert_eq!(read(&path), "[a]\nx = 2\nz=3\n\n# note\n[b]\ny=2\n");
}

#[test]
fn commented_option_is_reused_unless_modify_inactive_option_is_false() {
    let (_d, path) = setup("[a]\n# port = 80\n");
    go(
        json!({"path": path, "section": "a", "option": "port", "value": "81", "modify_inactive_option": false}),
    );
    // Added after the last line that is not blank or a comment: the header.
    assert_eq!(read(&path), "[a]\nport = 81\n# port = 80\n");
    fs::write(&path, "[a]\n# port = 80\n").unwrap();
    go(json!({"path": path, "section": "a", "option": "port", "value": "81"}));
    assert_eq!(read(&path), "[a]\nport = 81\n");
}

#[test]
fn values_are_exclusive_by_default() {
    let (_d, path) = setup("[a]\nv = 1\nv = 2\nv = 3\n");
    go(json!({"path": path, "section": "a", "option": "v", "values": ["3", "4"]}));
    assert_eq!(read(&path), "[a]\nv = 4\nv = 3\n");
    go(json!({"path": path, "section": "a", "option": "v", "values": ["5"], "exclusive": false}));
    assert_eq!(read(&path), "[a]\nv = 4\nv = 3\nv = 5\n");
}

#[test]
fn no_section_means_before_the_first_section() {
    let (_d, path) = setup("[a]\nx = 1\n");
    go(json!({"path": path, "option": "top", "value": "t"}));
    assert_eq!(read(&path), "top = t\n[a]\nx = 1\n");
}

#[test]
fn absent_option_and_section() {
    let (_d, path) = setup("[a]\nx = 1\n;x = 0\ny = 2\n[b]\nz = 3\n");
    let out = go(json!({"path": path, "section": "a", "option": "x", "state": "absent"}));
    assert_eq!(out.msg.as_deref(), Some("option changed"));
    assert_eq!(read(&path), "[a]\n;x = 0\ny = 2\n[b]\nz = 3\n");
    let out = go(json!({"path": path, "section": "b", "state": "absent"}));
    assert_eq!(out.msg.as_deref(), Some("section removed"));
    assert_eq!(read(&path), "[a]\n;x = 0\ny = 2\n");
    assert!(!go(json!({"path": path, "section": "b", "state": "absent"})).changed);
}

#[test]
fn allow_no_value_writes_the_bare_option() {
    let (_d, path) = setup("[m]\n");
    go(
        json!({"path": path, "section": "m", "option": "skip-name-resolve", "allow_no_value": true}),
    );
    assert_eq!(read(&path), "[m]\nskip-name-resolve\n");
    assert!(!go(json!({"path": path, "section": "m", "option": "skip-name-resolve", "allow_no_value": true})).changed);
}

#[test]
fn ignore_spaces_keeps_the_spacing_of_an_unchanged_value() {
    let (_d, path) = setup("[a]\nx=1\n");
    let out = go(
        json!({"path": path, "section": "a", "option": "x", "value": "1", "ignore_spaces": true}),
    );
    assert!(!out.changed);
    let out = go(json!({"path": path, "section": "a", "option": "x", "value": "1"}));
    assert!(out.changed);
    assert_eq!(read(&path), "[a]\nx = 1\n");
}

#[test]
fn section_has_values_picks_the_matching_section() {
    let (_d, path) = setup("[s]\nname = a\n[s]\nname = b\n");
    go(
        json!({"path": path, "section": "s", "option": "k", "value": "v",
              "section_has_values": [{"option": "name", "value": "b"}]}),
    );
    assert_eq!(read(&path), "[s]\nname = a\n[s]\nname = b\nk = v\n");
    go(
        json!({"path": path, "section": "s", "option": "k", "value": "w",
              "section_has_values": [{"option": "name", "values": ["c"]}]}),
    );
    assert_eq!(
        read(&path),
        "[s]\nname = a\n[s]\nname = b\nk = v\n[s]\nname = c\nk = w\n"
    );
}

#[test]
fn missing_final_newline_and_crlf_are_normalised_only_on_change() {
    let (_d, path) = setup("[a]\r\nx = 1\r\n");
    assert!(!go(json!({"path": path, "section": "a", "option": "x", "value": "1"})).changed);
    assert_eq!(read(&path), "[a]\r\nx = 1\r\n");
    fs::write(&path, "[a]\nx = 1").unwrap();
    let out = go(json!({"path": path, "section": "a", "option": "x", "value": "1"}));
    assert!(out.changed);
    assert_eq!(read(&path), "[a]\nx = 1\n");
}

#[test]
fn check_mode_and_create_false() {
    let (_d, path) = setup("[a]\n");
    let out = run::<IniFile>(
        &json!({"path": path, "section": "a", "option": "x", "value": "1"}),
        &CHECK,
    )
    .unwrap();
    assert!(out.changed);
    assert_eq!(out.diff.content[0].after, "[a]\nx = 1\n");
    assert_eq!(read(&path), "[a]\n");
    let missing = path.with_file_name("nope.ini");
    let err = run::<IniFile>(
        &json!({"path": missing, "section": "a", "option": "x", "value": "1", "create": false}),
        &Ctx::default(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("Destination {} does not exist!", missing.display())
    );
}

#[test]
fn backup_file_is_returned() {
    let (_d, path) = setup("[a]\n");
    let out =
        go(json!({"path": path, "section": "a", "option": "x", "value": "1", "backup": true}));
    let b = out.result["backup_file"].as_str().unwrap();
    assert_eq!(fs::read_to_string(b).unwrap(), "[a]\n");
}

#[test]
fn bad_parameters_are_rejected() {
    let e = check_params(
        "ini_file",
        &json!({"path": "/x", "section": "a", "option": "o"}),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("`value` or `values` is required"),
        "{e}"
    );
    let e = check_params(
        "ini_file",
        &json!({"path": "/x", "option": "o", "value": "1", "values": ["2"]}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("mutually exclusive"), "{e}");
    let e = check_params(
        "ini_file",
        &json!({"path": "/x", "value": "1", "state": "gone"}),
    )
    .unwrap_err();
    assert_eq!(e.path, "state");
    check_params(
        "ini_file",
        &json!({"dest": "/x", "section": "a", "state": "absent"}),
    )
    .unwrap();
}
