//! The public roles of `tests/public-roles` listed by both tools: what `--list-tasks` and
//! `--list-tags` print for each of their playbooks is ansible-core's, to the character.

use std::path::Path;
use std::time::Duration;

use crate::tools::{self, Tool};

#[test]
fn public_roles_list_as_ansible_core_lists_them() {
    let tools = tools::locate().unwrap_or_else(|e| panic!("{e}"));
    let collections = tools.collections.clone().unwrap_or_else(|| {
        panic!(
            "os_hardening names modules of Ansible's collections: set FIXPOINT_ANSIBLE_COLLECTIONS \
             (`.ci/run` installs them)"
        )
    });
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/public-roles");
    let mut books: Vec<_> = std::fs::read_dir(dir.join("playbooks"))
        .unwrap_or_else(|e| panic!("tests/public-roles/playbooks: {e}"))
        .map(|e| e.unwrap().path())
        .collect();
    books.sort();
    assert!(
        books.len() >= 6,
        "the six public roles' playbooks: {books:?}"
    );
    let cfg = tempfile::tempdir().unwrap();
    std::fs::write(cfg.path().join("ansible.cfg"), "").unwrap();
    let mut differ = Vec::new();
    for book in &books {
        for what in ["--list-tasks", "--list-tags"] {
            let mut a = tools::clean_command(&tools.ansible_bin.join("ansible-playbook"));
            a.args(["-i", "localhost,", what])
                .arg(book)
                .env("ANSIBLE_CONFIG", cfg.path().join("ansible.cfg"))
                .env("ANSIBLE_HOME", cfg.path().join("home"))
                .env("ANSIBLE_ROLES_PATH", dir.join("roles"))
                .env("ANSIBLE_COLLECTIONS_PATH", &collections);
            let mut f = tools::clean_command(&tools.fixpoint);
            f.args(["apply", "-i", "localhost,", "--roles-path"])
                .arg(dir.join("roles"))
                .arg(what)
                .arg(book)
                .env("ANSIBLE_COLLECTIONS_PATH", &collections)
                // Modules fixpoint lacks are found in the same ansible-core installation.
                .env("FIXPOINT_ANSIBLE_PYTHON", tools.ansible_bin.join("python"));
            let limit = Duration::from_secs(120);
            let (a_out, _) = tools::run_limited(a.current_dir(&dir), Tool::Ansible, limit)
                .unwrap_or_else(|e| panic!("{e}"));
            let (f_out, _) = tools::run_limited(f.current_dir(&dir), Tool::Fixpoint, limit)
                .unwrap_or_else(|e| panic!("{e}"));
            let (a_text, f_text) = (
                String::from_utf8_lossy(&a_out.stdout),
                String::from_utf8_lossy(&f_out.stdout),
            );
            assert!(
                a_out.status.success(),
                "ansible-core {what} {}: {}",
                book.display(),
                String::from_utf8_lossy(&a_out.stderr)
            );
            if a_text.trim() != f_text.trim() || !f_out.status.success() {
                let diff = similar::TextDiff::from_lines(a_text.trim(), f_text.trim())
                    .unified_diff()
                    .header("ansible-core", "fixpoint")
                    .to_string();
                differ.push(format!(
                    "{} {what} (fixpoint exit {:?}):\n{diff}{}",
                    book.display(),
                    f_out.status.code(),
                    String::from_utf8_lossy(&f_out.stderr)
                ));
            }
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
