//! Magic variables, the `setup` module, and controller lookups (`file`, `template`, `env`,
//! `vars`, `first_found`, `fileglob`, `lines`).

use crate::fx::Fx;
use crate::roles::play_head;

#[test]
fn magic_variables_have_ansible_values() {
    let fx = Fx::new();
    fx.write(
        "inventory.ini",
        &format!(
            "[web]\nw1.example.com ansible_connection=local fixpoint_state_dir={s}/1\n[db]\nd1 ansible_connection=local fixpoint_state_dir={s}/2\n[other]\nspare ansible_connection=local label=\"{{{{ inventory_hostname }}}}-label\"\n",
            s = fx.state_dir().display()
        ),
    );
    fx.write(
        "roles/r/tasks/main.yml",
        "- name: in role\n  debug:\n    msg: \"{{ role_path }}|{{ role_name }}\"\n",
    );
    fx.write(
        "site.yml",
        concat!(
            "- hosts: web:db\n  gather_facts: false\n  roles: [r]\n  tasks:\n",
            "    - name: magic\n      debug:\n        msg: \"{{ inventory_hostname }}|{{ inventory_hostname_short }}|{{ group_names | join(',') }}|{{ groups['web'] | join(',') }}|{{ ansible_play_hosts | join(',') }}|{{ play_hosts | join(',') }}|{{ playbook_dir }}|{{ ansible_check_mode }}\"\n",
            "    - name: hostvars\n      debug:\n        msg: \"{{ hostvars['d1']['fixpoint_state_dir'] }}\"\n",
            // A host no play works on is in hostvars too, its templates rendered as itself.
            "    - name: idle host\n      debug:\n        msg: \"{{ hostvars['spare']['label'] }}\"\n",
        ),
    );
    let out = fx.run(&[
        "apply",
        "--format",
        "json",
        "-v",
        "-i",
        "inventory.ini",
        "site.yml",
    ]);
    out.expect(0);
    let dir = std::fs::canonicalize(fx.dir.path())
        .unwrap()
        .display()
        .to_string();
    let msg = |task: &str, host: &str| -> String {
        out.task_events(task)
            .into_iter()
            .find(|e| e["host"] == host)
            .unwrap()["result"]["msg"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        msg("magic", "w1.example.com"),
        // The play's hosts in inventory order, as Ansible lists them.
        format!(
            "w1.example.com|w1|web|w1.example.com|w1.example.com,d1|w1.example.com,d1|{dir}|False"
        )
    );
    assert_eq!(msg("magic", "d1").split('|').nth(2), Some("db"));
    assert_eq!(msg("in role", "d1"), format!("{dir}/roles/r|r"));
    assert_eq!(
        msg("hostvars", "w1.example.com"),
        format!("{}/2", fx.state_dir().display())
    );
    let out = fx.run(&[
        "check",
        "--format",
        "json",
        "-v",
        "-i",
        "inventory.ini",
        "site.yml",
    ]);
    out.expect(0);
    let m = out.task_events("magic")[0]["result"]["msg"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(m.ends_with("|True"), "{m}");
}

#[test]
fn setup_module_gathers_facts_with_any_subset() {
    let fx = Fx::new();
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            concat!(
                "  tasks:\n",
                "    - name: facts\n      setup:\n        gather_subset: [\"!all\", min]\n",
                "    - name: use\n      assert:\n        that:\n          - ansible_hostname is defined\n          - ansible_facts.hostname == ansible_hostname\n",
            ),
        ),
    );
    let out = fx.apply(&[]);
    out.expect(0);
    assert_eq!(out.status_of("facts"), "ok");
    assert_eq!(out.status_of("use"), "ok");
}

#[test]
fn lookups_run_on_the_controller_and_search_the_role_first() {
    let fx = Fx::new();
    fx.write("files/data.txt", "playbook data\n");
    fx.write("roles/r/files/data.txt", "role data\n");
    fx.write("files/conf.d/a.conf", "a");
    fx.write("files/conf.d/b.conf", "b");
    fx.write("files/conf.d/c.txt", "c");
    fx.write("templates/greet.j2", "hello {{ who }}");
    fx.write("second.yml", "x: 1\n");
    fx.write(
        "roles/r/tasks/main.yml",
        "- name: role file\n  debug:\n    msg: \"{{ lookup('file', 'data.txt') }}\"\n",
    );
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            concat!(
                "    who: world\n",
                "  roles: [r]\n",
                "  tasks:\n",
                "    - name: file\n      debug:\n        msg: \"{{ lookup('file', 'data.txt') }}\"\n",
                "    - name: template\n      debug:\n        msg: \"{{ lookup('template', 'greet.j2') }}\"\n",
                "    - name: env\n      debug:\n        msg: \"{{ lookup('env', 'FIXPOINT_TEST_ENV') }}\"\n",
                "    - name: vars\n      debug:\n        msg: \"{{ lookup('vars', 'who') }}\"\n",
                "    - name: first_found\n      debug:\n        msg: \"{{ lookup('first_found', ['missing.yml', 'second.yml']) | basename }}\"\n",
                "    - name: fileglob\n      debug:\n        msg: \"{{ query('fileglob', 'conf.d/*.conf') | map('basename') | sort | join(',') }}\"\n",
                "    - name: lines\n      debug:\n        msg: \"{{ query('lines', 'printf \\\"1\\\\n2\\\\n\\\"') }}\"\n",
            ),
        ),
    );
    let out = std::process::Command::new(crate::fx::bin())
        .args(["apply", "--format", "json", "-v", "site.yml"])
        .current_dir(fx.dir.path())
        .env("FIXPOINT_TEST_ENV", "from env")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let o = crate::fx::Out {
        code: 0,
        stdout,
        stderr: String::new(),
    };
    let msg = |t: &str| o.task_events(t)[0]["result"]["msg"].clone();
    assert_eq!(msg("role file"), "role data");
    assert_eq!(msg("file"), "playbook data");
    assert_eq!(msg("template"), "hello world");
    assert_eq!(msg("env"), "from env");
    assert_eq!(msg("vars"), "world");
    assert_eq!(msg("first_found"), "second.yml");
    assert_eq!(msg("fileglob"), "a.conf,b.conf");
    assert_eq!(msg("lines"), serde_json::json!(["1", "2"]));
}
