//! Modules of the playbook's own: `library/` beside the playbook and in a role, with the
//! `module_utils/` beside the playbook, found and run as Ansible's Python code as ansible-core
//! does: a short name (or `ansible.legacy.`) takes the local module even over a native one,
//! `ansible.builtin.` never does, and a role's modules serve the play's tasks too.

use crate::fx::{Fx, Out};
use std::process::{Command, Stdio};

const MODULE_HEAD: &str =
    "#!/usr/bin/python\nfrom ansible.module_utils.basic import AnsibleModule\n";

fn apply(fx: &Fx) -> Out {
    let py = crate::python_modules::ansible_python();
    let out = Command::new(crate::fx::bin())
        .args(["apply", "--format", "json", "-v", "site.yml"])
        .current_dir(fx.dir.path())
        .env("FIXPOINT_ANSIBLE_PYTHON", py)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run fixpoint");
    Out::from(out)
}

#[test]
fn library_modules_beside_the_playbook_and_in_roles_run_as_ansible_finds_them() {
    let fx = Fx::new();
    // Named like fixpoint's native `stat`: the short name takes this one, as Ansible does.
    fx.write(
        "library/stat.py",
        &format!("{MODULE_HEAD}m = AnsibleModule(argument_spec=dict(path=dict(type='str')))\nm.exit_json(changed=False, where='library')\n"),
    );
    fx.write(
        "module_utils/h16util.py",
        "def greet(x):\n    return 'util-' + x\n",
    );
    fx.write(
        "library/usesutil.py",
        &format!("{MODULE_HEAD}from ansible.module_utils.h16util import greet\nm = AnsibleModule(argument_spec=dict(who=dict(type='str', required=True)))\nm.exit_json(changed=False, msg=greet(m.params['who']))\n"),
    );
    fx.write(
        "roles/r/library/rolemod.py",
        &format!("{MODULE_HEAD}m = AnsibleModule(argument_spec=dict())\nm.exit_json(changed=True, where='role')\n"),
    );
    fx.write("roles/r/tasks/main.yml", "- name: in role\n  rolemod: {}\n");
    fx.write(
        "site.yml",
        "- hosts: localhost\n  gather_facts: false\n  vars:\n    fixpoint_state_dir: \"{{ playbook_dir }}/state\"\n  roles: [r]\n  tasks:\n    - name: short\n      stat: { path: / }\n      register: a\n    - name: legacy\n      ansible.legacy.stat: { path: / }\n      register: b\n    - name: builtin\n      ansible.builtin.stat: { path: / }\n      register: c\n    - name: util\n      usesutil: { who: me }\n      register: u\n    - name: role module in the play\n      rolemod: {}\n      register: d\n    - name: seen\n      debug: { msg: \"{{ a.where }} {{ b.where }} {{ c.stat.isdir }} {{ u.msg }} {{ d.where }}\" }\n",
    );
    fx.run(&["validate", "site.yml"]).expect(0);
    let out = apply(&fx);
    out.expect(0);
    assert_eq!(
        out.task_events("seen")[0]["result"]["msg"],
        "library library True util-me role",
        "{}",
        out.stdout
    );
    assert_eq!(out.status_of("in role"), "changed");
    assert_eq!(out.task_events("short")[0]["module"], "stat");
}

/// A file in `library/` that is not an AnsibleModule module is refused at load time, where the
/// task names it.
#[test]
fn a_library_file_that_is_no_module_is_refused_at_load() {
    let fx = Fx::new();
    fx.write("library/script.py", "#!/usr/bin/python\nprint('{}')\n");
    fx.play("    - script: {}\n");
    let out = fx.run(&["validate", "site.yml"]);
    out.expect(2);
    assert!(
        out.stderr.contains("not an AnsibleModule-based"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("site.yml:7:7"), "{}", out.stderr);
}
