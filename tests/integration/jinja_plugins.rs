//! The playbook's own Jinja plugins (`filter_plugins/`, `test_plugins/`, `lookup_plugins/`)
//! as `fixpoint validate` sees them: known by the names they define, so a template using one
//! passes (also as a loop, `with_<lookup>`), while a name no plugin defines is still refused
//! with its place, all in one run; and
//! a playbook without plugins never starts Python. A collection's filters and tests run also
//! where `validate` cannot see them (a template file named by a variable, a file it includes,
//! a test named by a string). (What they compute is compared with ansible-core by the
//! conformance cases `python_plugins` and `python_plugins_collection`.)

use crate::fx::{Fx, Out};
use std::process::{Command, Stdio};

fn validate(fx: &Fx, python: &std::path::Path) -> Out {
    run(fx, python, &["validate", "site.yml"])
}

/// fixpoint with these arguments, the Ansible installation's Python and its collections.
fn run(fx: &Fx, python: &std::path::Path, args: &[&str]) -> Out {
    let out = Command::new(crate::fx::bin())
        .args(args)
        .current_dir(fx.dir.path())
        .env("FIXPOINT_ANSIBLE_PYTHON", python)
        .env(
            "ANSIBLE_COLLECTIONS_PATH",
            crate::python_modules::ansible_collections(),
        )
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run fixpoint");
    Out::from(out)
}

const PLAY: &str = "- hosts: localhost\n  gather_facts: false\n  tasks:\n";

#[test]
fn validate_knows_the_playbooks_plugins_and_refuses_every_other_name() {
    let fx = Fx::new();
    fx.write(
        "filter_plugins/mine.py",
        "class FilterModule:\n    def filters(self):\n        return {'twice': lambda v: v * 2}\n",
    );
    fx.write(
        "roles/r/test_plugins/odd.py",
        "class TestModule:\n    def tests(self):\n        return {'odd': lambda v: v % 2 == 1}\n",
    );
    fx.write(
        "roles/r/tasks/main.yml",
        "- debug: {msg: \"{{ 3 is odd }}\"}\n",
    );
    fx.write(
        "lookup_plugins/answer.py",
        "from ansible.plugins.lookup import LookupBase\nclass LookupModule(LookupBase):\n    def run(self, terms, variables=None, **kw):\n        return [42]\n",
    );
    fx.write(
        "site.yml",
        &[PLAY, "    - debug: {msg: \"{{ 2 | twice }} {{ lookup('answer') }}\"}\n    - include_role: {name: r}\n    - debug: {msg: \"{{ 2 | thrice }}\"}\n    - debug: {msg: \"{{ lookup('question') }}\"}\n    - debug: {msg: \"{{ item }}\"}\n      with_answer: [1]\n    - debug: {msg: \"{{ item }}\"}\n      with_riddle: [1]\n"].concat(),
    );
    let py = crate::python_modules::ansible_python();
    let out = validate(&fx, &py);
    out.expect(2);
    assert!(
        out.stderr.contains("unknown filter `thrice`") && out.stderr.contains("site.yml:6:"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("unknown lookup plugin `question`")
            && out.stderr.contains("site.yml:7:"),
        "{}",
        out.stderr
    );
    for known in ["twice", "odd", "answer"] {
        assert!(
            !out.stderr.contains(&format!("`{known}`")),
            "{}",
            out.stderr
        );
    }
    assert!(
        out.stderr
            .contains("unknown lookup plugin `riddle`, in `with_riddle`")
            && out.stderr.contains("site.yml:10:"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("3 problem(s) found"), "{}", out.stderr);

    // Without the unknown names it passes.
    fx.write(
        "site.yml",
        &[PLAY, "    - debug: {msg: \"{{ 2 | twice }} {{ lookup('answer') }}\"}\n    - include_role: {name: r}\n"].concat(),
    );
    validate(&fx, &py).expect(0);
}

#[test]
fn without_plugins_no_python_is_needed_and_with_them_a_missing_one_is_said() {
    let fx = Fx::new();
    fx.write(
        "site.yml",
        &[PLAY, "    - debug: {msg: \"{{ [1, 2] | sum }}\"}\n"].concat(),
    );
    let nowhere = fx.dir.path().join("no-python-here");
    let out = validate(&fx, &nowhere);
    out.expect(0);
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);

    fx.write(
        "filter_plugins/mine.py",
        "class FilterModule:\n    def filters(self):\n        return {'twice': lambda v: v * 2}\n",
    );
    fx.write(
        "site.yml",
        &[PLAY, "    - debug: {msg: \"{{ 2 | twice }}\"}\n"].concat(),
    );
    let out = validate(&fx, &nowhere);
    out.expect(2);
    assert!(
        out.stderr
            .contains("warning: the playbook's Jinja plugins are Python")
            && out.stderr.contains("unknown filter `twice`"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_collections_filter_validate_cannot_see_runs_and_a_missing_one_is_said() {
    let fx = Fx::new();
    fx.write(
        "templates/conf.j2",
        concat!(
            "{{ 'v' | community.general.dict_kv('k') | to_json }}\n",
            "{{ ['community.general.ini_file', 'x.y.nope'] | select('community.general.a_module') | list }}",
            " {{ 'community.general.ini_file' is community.general.a_module }}\n",
            "{% include 'part.j2' %}\n",
        ),
    );
    fx.write(
        "templates/part.j2",
        "{{ ['1.10', '1.9'] | community.general.version_sort | join(',') }}\n",
    );
    fx.write("templates/bad.j2", "{{ 1 | community.general.nope }}\n");
    let task = |tpl: &str| {
        [
            PLAY,
            "    - template: {src: \"{{ tpl }}\", dest: \"{{ playbook_dir }}/out\"}\n",
            &format!("      vars: {{tpl: {tpl}}}\n"),
        ]
        .concat()
    };
    let py = crate::python_modules::ansible_python();
    fx.write("site.yml", &task("conf.j2"));
    run(&fx, &py, &["apply", "site.yml"]).expect(0);
    assert_eq!(
        fx.read("out"),
        "{\"k\": \"v\"}\n['community.general.ini_file'] True\n1.9,1.10\n"
    );

    // A name the collection does not have fails the task in ansible-core's words.
    fx.write("site.yml", &task("bad.j2"));
    let out = run(&fx, &py, &["apply", "site.yml"]);
    out.expect(1);
    assert!(
        out.stdout
            .contains("No filter named 'community.general.nope'."),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    // Where validate sees it, it refuses it, with its place.
    fx.write(
        "site.yml",
        &[
            PLAY,
            "    - debug: {msg: \"{{ 1 | community.general.nope }}\"}\n",
        ]
        .concat(),
    );
    let out = validate(&fx, &py);
    out.expect(2);
    assert!(
        out.stderr
            .contains("unknown filter `community.general.nope`")
            && out.stderr.contains("site.yml:4:7"),
        "{}",
        out.stderr
    );
}
