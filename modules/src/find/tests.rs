//! `find` against real trees: each filter, the result keys, skipped paths and bad parameters.

use super::*;
use crate::{check_params, run};
use serde_json::json;
use std::os::unix::fs::{symlink, PermissionsExt};

/// A tree: a.txt, b.log, .hidden.txt, sub/c.txt, sub/deep/d.txt, .hdir/e.txt, link -> sub.
fn tree() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let p = t.path();
    std::fs::create_dir_all(p.join("sub/deep")).unwrap();
    std::fs::create_dir_all(p.join(".hdir")).unwrap();
    std::fs::write(p.join("a.txt"), "alpha\nport=80\n").unwrap();
    std::fs::write(p.join("b.log"), vec![b'x'; 2048]).unwrap();
    std::fs::write(p.join(".hidden.txt"), "h").unwrap();
    std::fs::write(p.join("sub/c.txt"), "gamma port=81").unwrap();
    std::fs::write(p.join("sub/deep/d.txt"), "delta").unwrap();
    std::fs::write(p.join(".hdir/e.txt"), "eps").unwrap();
    std::fs::set_permissions(p.join("a.txt"), std::fs::Permissions::from_mode(0o640)).unwrap();
    symlink("sub", p.join("link")).unwrap();
    t
}

fn names(params: Value) -> Vec<String> {
    let out = run::<Find>(&params, &Ctx::default()).unwrap();
    assert!(!out.changed);
    let mut v: Vec<String> = out.result["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect();
    let root = params["paths"].as_str().unwrap().to_string();
    for s in &mut v {
        *s = s.strip_prefix(&format!("{root}/")).unwrap_or(s).to_string();
    }
    v.sort();
    v
}

#[test]
fn each_filter_selects_what_ansible_does() {
    let t = tree();
    let root = t.path().to_str().unwrap();
    assert_eq!(names(json!({"paths": root})), ["a.txt", "b.log"]);
    assert_eq!(
        names(json!({"paths": root, "recurse": true})),
        // Hidden directories are entered; only hidden names are left out.
        [
            ".hdir/e.txt",
            "a.txt",
            "b.log",
            "sub/c.txt",
            "sub/deep/d.txt"
        ]
    );
    assert_eq!(
        names(json!({"paths": root, "recurse": true, "depth": 2})),
        [".hdir/e.txt", "a.txt", "b.log", "sub/c.txt"]
    );
    assert_eq!(
        names(json!({"paths": root, "hidden": true})),
        [".hidden.txt", "a.txt", "b.log"]
    );
    assert_eq!(
        names(json!({"paths": root, "patterns": "*.log,*.none"})),
        ["b.log"]
    );
    assert_eq!(
        names(json!({"paths": root, "patterns": ["*.txt", "*.log"], "excludes": "b*"})),
        ["a.txt"]
    );
    assert_eq!(
        names(json!({"paths": root, "patterns": "^[ab]\\.", "use_regex": true})),
        ["a.txt", "b.log"]
    );
    // Regexes match at the start only, like Python's re.match.
    assert_eq!(
        names(json!({"paths": root, "patterns": "txt", "use_regex": true})),
        Vec::<String>::new()
    );
    assert_eq!(
        names(json!({"paths": root, "recurse": true, "contains": "port=8"})),
        ["a.txt"],
        "contains matches at the start of a line (sub/c.txt has it in the middle)"
    );
    assert_eq!(
        names(json!({"paths": root, "recurse": true, "contains": "port=8\\d$"})),
        ["a.txt"]
    );
    assert_eq!(
        names(
            json!({"paths": root, "recurse": true, "contains": "port=8", "read_whole_file": true})
        ),
        ["a.txt", "sub/c.txt"]
    );
    // Python's `$` matches before the final newline of a whole file (a.txt's), `\Z` does not.
    let whole = |c: &str| {
        names(json!({"paths": root, "recurse": true, "contains": c, "read_whole_file": true}))
    };
    assert_eq!(whole("port=8\\d$"), ["a.txt", "sub/c.txt"]);
    assert_eq!(whole("port=80\\Z"), Vec::<String>::new());
    assert_eq!(whole("alpha$"), Vec::<String>::new());
    assert_eq!(names(json!({"paths": root, "size": "2k"})), ["b.log"]);
    assert_eq!(names(json!({"paths": root, "size": "-1k"})), ["a.txt"]);
    assert_eq!(names(json!({"paths": root, "mode": "0640"})), ["a.txt"]);
    assert_eq!(
        names(json!({"paths": root, "mode": "o=r", "exact_mode": false})),
        ["b.log"]
    );
    assert_eq!(
        names(json!({"paths": root, "age": "1d"})),
        Vec::<String>::new()
    );
    assert_eq!(
        names(json!({"paths": root, "age": "-1d"})),
        ["a.txt", "b.log"]
    );
    assert_eq!(
        names(json!({"paths": root, "file_type": "directory"})),
        ["sub"]
    );
    assert_eq!(names(json!({"paths": root, "file_type": "link"})), ["link"]);
    assert_eq!(
        names(json!({"paths": root, "file_type": "any", "size": "2k"})),
        ["b.log", "link", "sub"]
    );
    assert_eq!(
        names(json!({"paths": format!("{root}/link"), "file_type": "file"})),
        ["c.txt"]
    );
    let followed =
        names(json!({"paths": root, "recurse": true, "follow": true, "patterns": "c.txt"}));
    assert_eq!(followed, ["link/c.txt", "sub/c.txt"]);
}

#[test]
fn results_carry_statinfo_checksums_and_counts() {
    let t = tree();
    let root = t.path().to_str().unwrap();
    let out = run::<Find>(
        &json!({"paths": root, "patterns": "a.txt", "get_checksum": true}),
        &Ctx::default(),
    )
    .unwrap();
    let r = &out.result;
    assert_eq!(r["matched"], 1);
    // a.txt, b.log, .hidden.txt, sub, .hdir, link.
    assert_eq!(r["examined"], 6);
    assert_eq!(r["msg"], "All paths examined");
    assert_eq!(r["skipped_paths"], json!({}));
    let f = &r["files"][0];
    assert_eq!(f["mode"], "0640");
    assert_eq!(
        (&f["isreg"], &f["isdir"], &f["islnk"]),
        (&json!(true), &json!(false), &json!(false))
    );
    assert_eq!(f["size"], 14);
    assert_eq!(
        f["pw_name"],
        nix::unistd::User::from_uid(nix::unistd::getuid())
            .unwrap()
            .unwrap()
            .name
    );
    assert_eq!(
        (&f["rusr"], &f["wgrp"], &f["roth"]),
        (&json!(true), &json!(false), &json!(false))
    );
    assert_eq!(f["checksum"], "43fa977e149494d02616987eb087c985a63d37bc");
    let out = run::<Find>(
        &json!({"paths": root, "patterns": "a.txt", "get_checksum": true, "checksum_algorithm": "md5"}),
        &Ctx::default(),
    )
    .unwrap();
    assert_eq!(
        out.result["files"][0]["checksum"].as_str().unwrap().len(),
        32
    );

    let missing = t.path().join("nope");
    let out = run::<Find>(&json!({"paths": [root, missing]}), &Ctx::default()).unwrap();
    assert_eq!(
        out.result["skipped_paths"],
        json!({missing.display().to_string(): format!("'{}' is not a directory", missing.display())})
    );
    assert_eq!(
        out.result["msg"],
        "Not all paths examined, check warnings for details"
    );
    assert_eq!(out.result["matched"], 2);

    let out = run::<Find>(
        &json!({"paths": root, "recurse": true, "limit": 1}),
        &Ctx::default(),
    )
    .unwrap();
    assert_eq!(out.result["matched"], 1);
    assert_eq!(out.result["msg"], "Limit of matches reached");
}

#[test]
fn bad_parameters_are_rejected() {
    let e = check_params("find", &json!({"paths": "/x", "age": "3y"})).unwrap_err();
    assert!(e.to_string().contains("failed to process age"), "{e}");
    let e = check_params("find", &json!({"paths": "/x", "size": "k"})).unwrap_err();
    assert!(e.to_string().contains("failed to process size"), "{e}");
    let e = check_params("find", &json!({"paths": "/x", "file_type": "fifo"})).unwrap_err();
    assert_eq!(e.path, "file_type");
    let e = check_params("find", &json!({"paths": "/x", "mode": 420})).unwrap_err();
    assert!(e.to_string().contains("not a string"), "{e}");
    let e = check_params("find", &json!({"paths": "/x", "limit": 0})).unwrap_err();
    assert!(e.to_string().contains("limit cannot be 0"), "{e}");
    assert!(check_params(
        "find",
        &json!({"path": "/x", "pattern": "*.c", "checksum": "sha256"})
    )
    .is_ok());
}
