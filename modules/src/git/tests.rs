//! Unit tests of `git` that need no repository: ls-remote parsing, URL comparison, refusals.

use super::*;

#[test]
fn ls_remote_picks_the_commit_an_annotated_tag_points_to() {
    let out = "1111 refs/tags/v1\n2222 refs/tags/v1^{}\n3333 refs/tags/v10\n";
    assert_eq!(ls_remote_sha(out, Some("v1")).as_deref(), Some("2222"));
    assert_eq!(
        ls_remote_sha("4444 refs/tags/v2\n", Some("v2")).as_deref(),
        Some("4444")
    );
    assert_eq!(ls_remote_sha(out, Some("v3")), None);
    assert_eq!(
        ls_remote_sha("5555\trefs/heads/main\n", None).as_deref(),
        Some("5555")
    );
    assert_eq!(ls_remote_sha("", None), None);
}

#[test]
fn urls_compare_as_ansible_unfracks_them() {
    assert!(same_url("https://h/r.git", "https://h/r"));
    assert!(same_url("file:///srv/r/", "file:///srv/r"));
    assert!(!same_url("https://h/r", "https://h/s"));
    assert!(looks_like_sha("4a7b4b1") && !looks_like_sha("main") && !looks_like_sha("abc"));
}

#[test]
fn unsupported_options_and_missing_dest_are_refused() {
    let bad = |v: Value| crate::registry::check_params("git", &v).is_err();
    assert!(bad(
        serde_json::json!({"repo": "r", "dest": "/d", "archive": "/a.zip"})
    ));
    assert!(bad(
        serde_json::json!({"repo": "r", "dest": "/d", "verify_commit": true})
    ));
    assert!(bad(serde_json::json!({"repo": "r"})));
    assert!(!bad(serde_json::json!({"repo": "r", "clone": false})));
    assert!(bad(
        serde_json::json!({"repo": "r", "dest": "/d", "accept_hostkey": true, "accept_newhostkey": true})
    ));
}
