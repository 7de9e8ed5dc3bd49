//! Unit tests of `authorized_key`: the file as ansible.posix's authorized_key writes it.

use super::*;
use crate::testutil::{read, setup, stamp, CHECK};
use crate::{check_params, run, Outcome};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

const K1: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOne one@host";
const K2: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQTwo";

fn go(params: Value) -> Outcome {
    run::<AuthorizedKey>(&params, &Ctx::default()).unwrap()
}

#[test]
fn adds_a_key_owned_by_the_user_then_converges() {
    let (_d, path) = setup("# keys\n");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    let params = json!({"user": "nobody", "key": K1, "path": path, "manage_dir": false});
    let out = go(params.clone());
    assert!(out.changed);
    assert_eq!(read(&path), format!("# keys\n{K1}\n"));
    let m = fs::metadata(&path).unwrap();
    let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();
    assert_eq!(m.uid(), nobody.uid.as_raw());
    assert_eq!(m.permissions().mode() & 0o7777, 0o600);
    assert_eq!(out.result["keyfile"], json!(path));
    assert_eq!(out.result["user"], json!("nobody"));
    let before = stamp(&path);
    assert!(!go(params).changed);
    assert_eq!(stamp(&path), before);
}

#[test]
fn a_key_without_comment_gets_a_trailing_space_and_options_are_kept_in_order() {
    let (_d, path) = setup("");
    go(
        json!({"user": "root", "key": K2, "path": path, "manage_dir": false,
              "key_options": "no-pty,from=\"10.0.0.1,10.0.0.2\""}),
    );
    assert_eq!(
        read(&path),
        format!("no-pty,from=\"10.0.0.1,10.0.0.2\" {K2} \n")
    );
    // The same options in another order are the same key.
    let out = go(
        json!({"user": "root", "key": K2, "path": path, "manage_dir": false,
                        "key_options": "from=\"10.0.0.1,10.0.0.2\",no-pty"}),
    );
    assert!(!out.changed);
}

#[test]
fn changed_comment_moves_the_key_to_the_end_and_absent_removes_it() {
    let (_d, path) = setup(&format!("{K1}\n{K2} x\n"));
    go(json!({"user": "root", "key": K1, "path": path, "comment": "new", "manage_dir": false}));
    let k1_new = K1.replace("one@host", "new");
    assert_eq!(read(&path), format!("{K2} x\n{k1_new}\n"));
    go(json!({"user": "root", "key": K2, "path": path, "state": "absent", "manage_dir": false}));
    assert_eq!(read(&path), format!("{k1_new}\n"));
    assert!(!go(json!({"user": "root", "key": K2, "path": path, "state": "absent"})).changed);
}

#[test]
fn exclusive_drops_every_other_line() {
    let (_d, path) = setup(&format!("# c\n{K1}\n\n{K2} x\n"));
    go(
        json!({"user": "root", "key": format!("{K2} x"), "path": path, "exclusive": true, "manage_dir": false}),
    );
    assert_eq!(read(&path), format!("{K2} x\n"));
}

#[test]
fn ssh_dir_is_created_for_the_user_and_check_mode_is_inert() {
    let dir = tempfile::tempdir().unwrap();
    let ssh = dir.path().join(".ssh");
    let path = ssh.join("authorized_keys");
    let params = json!({"user": "nobody", "key": K1, "path": path});
    let out = run::<AuthorizedKey>(&params, &CHECK).unwrap();
    assert!(out.changed);
    assert!(!ssh.exists());
    assert_eq!(out.result["diff"]["after"], json!(format!("{K1}\n")));
    go(params);
    let m = fs::metadata(&ssh).unwrap();
    assert_eq!(m.permissions().mode() & 0o7777, 0o700);
    assert_eq!(
        m.uid(),
        nix::unistd::User::from_name("nobody")
            .unwrap()
            .unwrap()
            .uid
            .as_raw()
    );
    assert_eq!(read(&path), format!("{K1}\n"));
}

#[test]
fn bad_keys_urls_and_missing_users_are_refused() {
    let e = check_params("authorized_key", &json!({"user": "u", "key": "not a key"})).unwrap_err();
    assert!(e.to_string().contains("invalid key specified"), "{e}");
    let e = check_params(
        "authorized_key",
        &json!({"user": "u", "key": "https://github.com/u.keys"}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("no HTTP client"), "{e}");
    check_params("authorized_key", &json!({"user": "u", "key": "{{ k }}"})).unwrap();
    let e = check_params(
        "authorized_key",
        &json!({"user": "u", "key": K1, "state": "gone"}),
    )
    .unwrap_err();
    assert_eq!(e.path, "state");
    let err = run::<AuthorizedKey>(
        &json!({"user": "fp-no-such-user", "key": K1}),
        &Ctx::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("Failed to lookup user fp-no-such-user"),
        "{err}"
    );
    let err =
        run::<AuthorizedKey>(&json!({"user": "fp-no-such-user", "key": K1}), &CHECK).unwrap_err();
    assert!(err.to_string().contains("in check mode"), "{err}");
}
