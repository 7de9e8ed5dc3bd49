//! Tests of `pip`'s load-time checks, how the probe chooses between `pip list` and a dry run,
//! and the umask its commands run under (pip itself is exercised by tests/integration/pip.rs).

use super::*;
use crate::registry::check_params;
use serde_json::json;

fn params(v: Value) -> Params {
    crate::parse_params(&v).expect("params")
}

fn refused(v: Value) -> String {
    check_params("pip", &v).expect_err("refused").msg
}

#[test]
fn bad_combinations_are_refused_as_ansible_refuses_them() {
    assert!(refused(json!({"name": "x", "state": "installed"}))
        .contains("value of state must be one of: absent, forcereinstall, latest, present"));
    assert!(refused(json!({})).contains("one of the following is required: name, requirements"));
    assert!(refused(json!({"name": "x", "requirements": "r.txt"}))
        .contains("mutually exclusive: name|requirements"));
    assert!(
        refused(json!({"name": "x", "virtualenv": "/v", "executable": "pip3"}))
            .contains("mutually exclusive: executable|virtualenv")
    );
    assert!(
        refused(json!({"name": "x", "version": "1", "state": "latest"}))
            .contains("version is incompatible with state=latest")
    );
    assert!(refused(json!({"name": ["a", "b"], "version": "1"})).contains("ambiguous"));
    assert!(refused(json!({"name": "a>=1", "version": "2"})).contains("conflicts"));
    assert!(refused(json!({"name": "x", "umask": "0o22"})).contains("octal"));
    assert!(refused(json!({"name": "x", "nope": 1})).contains("unknown field"));
    check_params("pip", &json!({"name": "{{ pkgs }}", "version": "1"})).unwrap();
    check_params("pip", &json!({"requirements": "r.txt", "umask": "0022"})).unwrap();
}

#[test]
fn the_installed_list_decides_plain_names_only() {
    let mode = |v: Value| {
        let p = params(v);
        let reqs = packages(&p).unwrap();
        decide_mode(&p, &reqs, &extra_words(&p).unwrap())
    };
    assert_eq!(mode(json!({"name": "a>=1,<2,b[x]"})), Decide::List);
    assert_eq!(
        mode(json!({"name": "a", "extra_args": "--index-url http://i/"})),
        Decide::List
    );
    assert_eq!(mode(json!({"name": "a", "state": "absent"})), Decide::List);
    assert_eq!(
        mode(json!({"name": "a", "state": "latest"})),
        Decide::DryRun
    );
    assert_eq!(mode(json!({"requirements": "r.txt"})), Decide::DryRun);
    assert_eq!(
        mode(json!({"name": "./src", "editable": true})),
        Decide::DryRun
    );
    assert_eq!(mode(json!({"name": "a", "editable": true})), Decide::DryRun);
    assert_eq!(
        mode(json!({"name": "a", "extra_args": "--target=/opt/x"})),
        Decide::DryRun
    );
    assert_eq!(
        mode(json!({"name": "a", "extra_args": "--user"})),
        Decide::DryRun
    );
    assert_eq!(
        mode(json!({"name": "a", "state": "forcereinstall"})),
        Decide::Always
    );
    assert_eq!(
        mode(json!({"name": "git+https://h/x.git", "state": "absent"})),
        Decide::Always
    );
}

#[test]
fn the_command_is_ansibles() {
    let p =
        params(json!({"name": "Foo>=1,<2", "editable": true, "extra_args": "-i 'http://x/ y'"}));
    let cmd = command(&p, &["pip3".into()], &packages(&p).unwrap()).unwrap();
    assert_eq!(
        cmd,
        ["pip3", "install", "-i", "http://x/ y", "-e", "Foo<2,>=1"]
    );
    let p = params(json!({"requirements": "r.txt", "state": "absent"}));
    let cmd = command(&p, &["pip3".into()], &[]).unwrap();
    assert_eq!(cmd, ["pip3", "uninstall", "-y", "-r", "r.txt"]);
    let p = params(json!({"name": "foo", "version": "~=1.2"}));
    assert_eq!(packages(&p).unwrap()[0].to_string(), "foo~=1.2");
}

#[test]
fn listed_names_are_canonical_and_notices_skipped() {
    let l = Listed {
        cmd: String::new(),
        out: "Fp_Other==0.5\nYou are using pip version 1; x==2\n-e git+h#egg=y\npip==23.0\n".into(),
        err: String::new(),
    };
    assert_eq!(
        l.packages(),
        [
            ("fp-other".to_string(), "0.5".to_string()),
            ("pip".into(), "23.0".into())
        ]
    );
}

#[test]
fn commands_run_under_the_tasks_umask_in_chdir() {
    let dir = tempfile::tempdir().unwrap();
    let p = params(json!({"name": "x", "umask": "0027", "chdir": dir.path()}));
    let r = Runner::new(&p, None).unwrap();
    let ran = r
        .run(&["/bin/sh".into(), "-c".into(), "umask; pwd".into()], false)
        .unwrap();
    assert_eq!(ran.stdout, format!("0027\n{}\n", dir.path().display()));
}
