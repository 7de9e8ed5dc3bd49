//! Unit tests of `user`: parameters, the ageing fields chage gets, expiry days.

use super::*;

fn params(v: Value) -> Params {
    serde_json::from_value(v).unwrap()
}

#[test]
fn unsupported_parameters_are_refused_by_name() {
    let p = params(json!({"name": "u", "seuser": "x"}));
    let e = User::validate(&p).unwrap_err().to_string();
    assert!(e.contains("seuser") && e.contains("not supported"), "{e}");
    let p = params(json!({"name": "u", "bogus": 1}));
    assert!(User::validate(&p)
        .unwrap_err()
        .to_string()
        .contains("unknown parameter `bogus`"));
    let p = params(json!({"name": "u", "generate_ssh_key": true, "ssh_key_bits": "4096"}));
    assert!(User::validate(&p).is_ok());
    assert_eq!(key_spec(&p).unwrap().file, ".ssh/id_rsa");
    assert_eq!(key_spec(&p).unwrap().bits, 4096);
    let p = params(json!({"user": "u", "createhome": false, "expires": "1700000000"}));
    assert!(User::validate(&p).is_ok());
    assert!(!p.create_home.0);
}

#[test]
fn only_the_ageing_fields_that_differ_go_to_chage() {
    let p = params(
        json!({"name": "u", "password_expire_min": 0, "password_expire_max": "10",
        "password_expire_warn": 7}),
    );
    let sh = Shadow {
        min: 0,
        max: 99999,
        warn: 7,
        ..Shadow::default()
    };
    assert_eq!(
        ageing_changes(&p, &sh),
        [("-M", "password_expire_max", 99999, 10)]
    );
    let none = params(json!({"name": "u"}));
    assert!(ageing_changes(&none, &sh).is_empty());
}

#[test]
fn expiry_is_a_day_and_negative_is_never() {
    assert_eq!(
        Expires(1_700_000_000.5).days().map(date_of),
        Some("2023-11-14".into())
    );
    assert_eq!(Expires(-1.0).days(), None);
}

#[test]
fn path_parameters_expand_the_home() {
    let p = params(json!({"name": "u", "shell": "~/sh", "home": "/h", "ssh_key_file": "k"}));
    assert!(
        !p.shell.as_deref().unwrap().starts_with('~'),
        "{:?}",
        p.shell
    );
    assert!(p.shell.as_deref().unwrap().ends_with("/sh"));
    assert_eq!(p.ssh_key_file.as_deref(), Some("k"));
}

#[test]
fn a_clear_password_is_told_from_a_hash() {
    let hash = "$6$saltsalt$Pc6RS3TY1n2wEC3Qx1HR3C4.oJEUzF2G3.cmq1pjqkR7bX7bHSuIbAkKXl0UW0lc8zXHxyU2hOsUtrxKqjGWX1";
    assert!(!looks_unhashed(hash));
    assert!(!looks_unhashed("!"));
    assert!(looks_unhashed("plaintextpassword"));
    assert!(looks_unhashed("$6$rounds=656000$tgK3$lAFr+++"));
    assert!(looks_unhashed("$6$x$short"));
}

fn probed(groups: &[(&str, u32)], member_of: &[&str], own_group: bool) -> Probed {
    Probed {
        pw: None,
        shadow: Shadow::default(),
        member_of: member_of.iter().map(|g| g.to_string()).collect(),
        group: None,
        groups: groups
            .iter()
            .map(|(n, gid)| {
                let e = GrEntry {
                    name: n.to_string(),
                    gid: *gid,
                };
                (n.to_string(), Some(e))
            })
            .collect(),
        own_group_exists: own_group,
        home_exists: true,
        old_home_exists: true,
        key: None,
    }
}

#[test]
fn local_creates_with_luseradd_then_lchage_and_lgroupmod() {
    let p = params(json!({"name": "u", "local": true, "groups": ["a", "b"], "expires": -5}));
    let (args, then) = add_args(&p, &probed(&[("a", 1), ("b", 2)], &[], true)).unwrap();
    // `-n` for the existing group of the user's name; no -G, -e or -m (luseradd lacks them).
    assert_eq!(args, ["-n", "u"]);
    let member = |add, g: &str| Action::Member {
        add,
        group: g.into(),
    };
    assert_eq!(
        then,
        [Action::Lchage(-1), member(true, "a"), member(true, "b")]
    );
    let plain = params(json!({"name": "u", "groups": ["a"]}));
    let (args, then) = add_args(&plain, &probed(&[("a", 1)], &[], true)).unwrap();
    assert_eq!(args, ["-N", "-G", "a", "-m", "u"]);
    assert!(then.is_empty());
}

#[test]
fn local_memberships_change_through_lgroupmod() {
    let pw = PwEntry {
        name: "u".into(),
        uid: 5,
        gid: 5,
        gecos: String::new(),
        home: "/h".into(),
        shell: "/bin/sh".into(),
    };
    let member = |add, g: &str| Action::Member {
        add,
        group: g.into(),
    };
    let s = probed(&[("b", 2), ("c", 3)], &["a", "b"], false);
    let set = params(json!({"name": "u", "local": true, "groups": ["b", "c"], "expires": 86400}));
    let (args, then) = mod_args(&set, &s, &pw, &mut Plan::new()).unwrap();
    assert!(args.is_empty(), "{args:?}");
    assert_eq!(
        then,
        [Action::Lchage(1), member(true, "c"), member(false, "a")]
    );
    let append = params(json!({"name": "u", "local": true, "groups": ["c"], "append": true}));
    let (_, then) = mod_args(&append, &s, &pw, &mut Plan::new()).unwrap();
    assert_eq!(then, [member(true, "c")]);
    let again = params(json!({"name": "u", "local": true, "groups": ["b"], "append": true}));
    let s = probed(&[("b", 2)], &["a", "b"], false);
    assert!(mod_args(&again, &s, &pw, &mut Plan::new())
        .unwrap()
        .1
        .is_empty());
}

#[test]
fn local_refuses_what_ansible_refuses_with_it() {
    for (k, v) in [("umask", json!("077")), ("uid_min", json!(1000))] {
        let p = params(json!({"name": "u", "local": true, k: v}));
        let e = User::validate(&p).unwrap_err().to_string();
        assert!(
            e.contains(&format!("'{k}' can not be used with 'local'")),
            "{e}"
        );
    }
}
