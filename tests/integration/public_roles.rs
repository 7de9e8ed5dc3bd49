//! Every public role of the project's unchanged copies loads (`fixpoint validate`, exit 0)
//! with an Ansible installation present, as issue 16 asks; and the loop forms those roles
//! need (`with_community.general.flattened`, os_hardening's).
//!
//! The copies are the project's, in `tests/public-roles/` (`roles/` and one playbook each in
//! `playbooks/`, taken unchanged from `../shared/public-roles`); `FIXPOINT_PUBLIC_ROLES` names
//! another tree of the same shape. Never edited: a playbook runs as it is.

use crate::fx::Fx;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The tree of public roles: `playbooks/` and `roles/`.
pub fn public_roles() -> PathBuf {
    let dir = std::env::var_os("FIXPOINT_PUBLIC_ROLES")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/public-roles"));
    assert!(
        dir.join("playbooks").is_dir() && dir.join("roles").is_dir(),
        "{} holds no playbooks/ and roles/: set FIXPOINT_PUBLIC_ROLES to a copy of the public \
         roles (geerlingguy.*, cloudalchemy.node_exporter, os_hardening, one playbook each)",
        dir.display()
    );
    dir
}

fn env_dir(var: &str, what: &str) -> PathBuf {
    let v = std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| panic!("{var} is not set: {what}"));
    PathBuf::from(v)
}

/// `fixpoint validate` with ansible-core on PATH and the collections of the `ansible` release.
fn validate(args: &[&str]) -> crate::fx::Out {
    let ansible = env_dir(
        "FIXPOINT_ANSIBLE",
        "set it to the bin/ of an ansible-core 2.19 virtualenv (.ci/run keeps one at \
         /var/cache/fixpoint-ci/ansible/bin)",
    );
    let collections = env_dir(
        "FIXPOINT_ANSIBLE_COLLECTIONS",
        "set it to a directory holding `ansible_collections/` (.ci/run installs ansible==12.3.0 \
         there)",
    );
    let path = std::env::join_paths(std::iter::once(ansible).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let out = Command::new(crate::fx::bin())
        .arg("validate")
        .args(args)
        .env("PATH", path)
        .env("ANSIBLE_COLLECTIONS_PATH", collections)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run fixpoint");
    crate::fx::Out::from(out)
}

#[test]
fn every_public_role_loads() {
    let root = public_roles();
    let mut books: Vec<PathBuf> = std::fs::read_dir(root.join("playbooks"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yml"))
        .collect();
    books.sort();
    assert!(books.len() >= 6, "{books:?}");
    let roles = root.join("roles");
    let mut failed = Vec::new();
    for book in &books {
        let role = book.file_stem().unwrap().to_string_lossy().to_string();
        let out = validate(&[
            "--roles-path",
            roles.to_str().unwrap(),
            book.to_str().unwrap(),
        ]);
        if out.code != 0 {
            failed.push(format!("{role}: exit {}\n{}", out.code, out.stderr));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// `with_<lookup>` named by its collection: os_hardening's `with_community.general.flattened`
/// flattens every level (the items checked against community.general 12.3.0's plugin), and
/// `with_ansible.builtin.items` is `with_items`.
#[test]
fn with_collection_lookup_loops() {
    let fx = Fx::new();
    fx.play(
        "    - name: flat\n      debug: { msg: \"{{ item }}\" }\n      with_community.general.flattened:\n        - [1, [2, [3]]]\n        - [[\" x \"], y]\n        - [[{k: 1}]]\n        - \"null\"\n        - never\n    - name: items\n      debug: { msg: \"{{ item }}\" }\n      with_ansible.builtin.items: [[a, b], c]\n",
    );
    let out = fx.apply(&["-v"]);
    out.expect(0);
    let items = |task: &str| -> Vec<serde_json::Value> {
        out.task_events(task)
            .iter()
            .map(|e| e["result"]["msg"].clone())
            .collect()
    };
    assert_eq!(
        items("flat"),
        serde_json::json!([1, 2, 3, "x", "y", {"k": 1}])
            .as_array()
            .unwrap()
            .clone(),
        "{}",
        out.stdout
    );
    assert_eq!(items("items"), vec!["a", "b", "c"], "{}", out.stdout);
}
