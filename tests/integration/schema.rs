//! `fixpoint schema`: the JSON Schemas validate the playbooks, task files, role metadata and
//! inventories fixpoint loads (the bundled examples and the vendored public roles), and flag
//! what the loader refuses (a misspelt play keyword, a parameter a module does not take).
//! A real validator checks them: Python's `jsonschema` (Debian's python3-jsonschema).

use crate::fx::Fx;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Validate each file (YAML) against `fixpoint schema <kind>`; the errors of each, by file.
fn schema_errors(fx: &Fx, kind: &str, files: &[PathBuf]) -> Vec<(String, Vec<String>)> {
    let schema = fx.run(&["schema", kind]);
    schema.expect(0);
    let schema_path = fx.path(&format!("{kind}.schema.json"));
    std::fs::write(&schema_path, &schema.stdout).unwrap();
    let script = r#"
import json, sys, yaml, jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft7Validator.check_schema(schema)
v = jsonschema.Draft7Validator(schema)
out = []
for f in sys.argv[2:]:
    doc = yaml.safe_load(open(f))
    out.append([f, ["/".join(map(str, e.absolute_path)) + ": " + e.message[:200] for e in v.iter_errors(doc)]])
print(json.dumps(out))
"#;
    let out = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(script)
        .arg(&schema_path)
        .args(files)
        .output()
        .expect("/usr/bin/python3 runs");
    assert!(
        out.status.success(),
        "the schema check did not run (install python3-jsonschema and python3-yaml; \
         .ci/run does):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let errs = r[1].as_array().unwrap().iter();
            (
                r[0].as_str().unwrap().to_string(),
                errs.map(|e| e.as_str().unwrap().to_string()).collect(),
            )
        })
        .collect()
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `*.yml` files directly under each directory matching `<root>/**/<sub>/`.
fn files_under(root: &Path, sub: &str, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(root).unwrap().flatten() {
        let p = e.path();
        if !p.is_dir() {
            continue;
        }
        if p.file_name().unwrap() == sub {
            for f in std::fs::read_dir(&p).unwrap().flatten() {
                if f.path()
                    .extension()
                    .is_some_and(|x| x == "yml" || x == "yaml")
                {
                    out.push(f.path());
                }
            }
        } else {
            files_under(&p, sub, out);
        }
    }
}

fn assert_clean(results: &[(String, Vec<String>)]) {
    let bad: Vec<_> = results.iter().filter(|(_, e)| !e.is_empty()).collect();
    assert!(
        bad.is_empty(),
        "files the loader accepts fail the schema: {bad:#?}"
    );
}

#[test]
fn the_schemas_accept_the_examples_and_the_public_roles() {
    let fx = Fx::new();
    let r = repo();
    let mut playbooks: Vec<PathBuf> = [
        "playbooks/site.yml",
        "playbooks/nginx/site.yml",
        "playbooks/webapp/site.yml",
    ]
    .iter()
    .map(|p| r.join(p))
    .collect();
    for e in std::fs::read_dir(r.join("tests/public-roles/playbooks"))
        .unwrap()
        .flatten()
    {
        playbooks.push(e.path());
    }
    let results = schema_errors(&fx, "playbook", &playbooks);
    assert_eq!(results.len(), playbooks.len());
    assert_clean(&results);

    let (mut tasks, mut metas) = (Vec::new(), Vec::new());
    for root in ["playbooks", "tests/public-roles/roles"] {
        files_under(&r.join(root), "tasks", &mut tasks);
        files_under(&r.join(root), "handlers", &mut tasks);
        files_under(&r.join(root), "meta", &mut metas);
    }
    assert!(
        tasks.len() > 60 && metas.len() > 6,
        "{} task files, {} meta",
        tasks.len(),
        metas.len()
    );
    assert_clean(&schema_errors(&fx, "tasks", &tasks));
    metas.retain(|m| m.file_stem().unwrap() == "main");
    assert_clean(&schema_errors(&fx, "role-meta", &metas));

    fx.write(
        "inventory.yml",
        "all:\n  vars: {ntp: pool}\n  hosts:\n    a.example: {ansible_port: 2222}\n    b.example:\n  children:\n    web:\n      hosts: {w1.example: null}\n      children:\n        edge: {hosts: {e1.example: {}}}\n",
    );
    fx.run(&["inventory", "-i", "inventory.yml", "--list"])
        .expect(0);
    assert_clean(&schema_errors(
        &fx,
        "inventory",
        &[fx.path("inventory.yml")],
    ));
}

#[test]
fn the_schemas_flag_what_the_loader_refuses() {
    let fx = Fx::new();
    let cases = [
        (
            "playbook",
            "typo.yml",
            "- hosts: all\n  gather_facts: false\n  tasks:\n    - copy: {content: x, dset: /tmp/x}\n",
            "0/tasks/0/copy",
        ),
        (
            "playbook",
            "keyword.yml",
            "- hosts: all\n  gather_fact: false\n  tasks: []\n",
            "0: Additional properties are not allowed ('gather_fact'",
        ),
        (
            "playbook",
            "block.yml",
            "- hosts: all\n  tasks:\n    - block:\n        - debug: {msg: x}\n      rescu: []\n",
            "0/tasks/0: Additional properties are not allowed ('rescu'",
        ),
    ];
    for (kind, file, text, expected) in cases {
        fx.write(file, text);
        let errs = &schema_errors(&fx, kind, &[fx.path(file)])[0].1;
        assert!(
            errs.iter().any(|e| e.starts_with(expected)),
            "{file}: {errs:#?}"
        );
        // The loader refuses the same file.
        fx.run(&["validate", file]).expect(2);
    }
    fx.write("inv.yml", "all:\n  host:\n    a.example:\n");
    let errs = &schema_errors(&fx, "inventory", &[fx.path("inv.yml")])[0].1;
    assert!(errs.iter().any(|e| e.contains("'host'")), "{errs:#?}");
    fx.run(&["inventory", "-i", "inv.yml", "--list"]).expect(2);
    let bad = fx.run(&["schema", "nosuch"]);
    bad.expect(2);
}
