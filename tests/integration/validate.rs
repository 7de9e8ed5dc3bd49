//! `fixpoint validate` finds every problem it can without a host, all in one run, each at its
//! `file:line:col`; `apply` and `check` refuse the same input with the same message before they
//! connect to any host (exit 2, nothing changed, no login on the sshd host).

use crate::fx::Fx;
use crate::ssh::Fleet;

/// One kind of bad input: extra files, the tasks after the marker task, what the message
/// says and where it points.
struct Case {
    what: &'static str,
    files: &'static [(&'static str, &'static str)],
    tasks: &'static str,
    message: &'static str,
    at: &'static str,
}

const CASES: &[Case] = &[
    Case {
        what: "YAML syntax",
        files: &[],
        tasks: "    - debug: {msg: [unclosed\n",
        message: "",
        at: "site.yml:",
    },
    Case {
        what: "unknown keyword",
        files: &[],
        tasks: "    - debug: msg=x\n      whne: true\n",
        message: "`whne` is neither a task keyword nor a module",
        at: "site.yml:8:7",
    },
    Case {
        what: "unknown module",
        files: &[],
        tasks: "    - frobnicate_the_host: {a: 1}\n",
        message: "frobnicate_the_host",
        at: "site.yml:7:",
    },
    Case {
        what: "unguarded command",
        files: &[],
        tasks: "    - command: touch /tmp/never\n",
        message: "unguarded `command` task",
        at: "site.yml:7:7",
    },
    Case {
        what: "bad module parameter",
        files: &[],
        tasks: "    - copy: {dest: /tmp/never, content: x, bogus: 1}\n",
        message: "invalid parameters for module `copy`",
        at: "site.yml:7:",
    },
    Case {
        what: "template syntax in a parameter",
        files: &[],
        tasks: "    - debug:\n        msg: \"{{ x | }}\"\n",
        message: "template syntax error",
        at: "site.yml:7:7",
    },
    Case {
        what: "unknown filter in a condition",
        files: &[],
        tasks: "    - debug: msg=x\n      when: x | no_such_filter\n",
        message: "unknown filter `no_such_filter`, in when",
        at: "site.yml:7:7",
    },
    Case {
        what: "unknown test",
        files: &[],
        tasks: "    - debug: msg=x\n      when: x is no_such_test\n",
        message: "unknown test `no_such_test`",
        at: "site.yml:7:7",
    },
    Case {
        what: "unknown lookup",
        files: &[],
        tasks: "    - debug:\n        msg: \"{{ lookup('no_such_lookup', 'a') }}\"\n",
        message: "unknown lookup plugin `no_such_lookup`",
        at: "site.yml:7:7",
    },
    Case {
        what: "template file syntax",
        files: &[("templates/a.j2", "one\n{% if x %}\ntwo\n")],
        tasks: "    - template: {src: a.j2, dest: \"{{ base }}/a\"}\n",
        message: "template syntax error",
        at: "--> templates/a.j2:3:",
    },
    Case {
        what: "unknown filter in an included template",
        files: &[
            ("templates/b.j2", "b\n{% include 'part.j2' %}\n"),
            ("templates/part.j2", "x\n  {{ y | no_such_filter }}\n"),
        ],
        tasks: "    - template: {src: b.j2, dest: \"{{ base }}/b\"}\n",
        message: "unknown filter `no_such_filter`",
        at: "--> templates/part.j2:2:10",
    },
    Case {
        what: "template named by a loop item",
        files: &[("templates/e.j2", "{{ e | no_such_loop_filter }}\n")],
        tasks: "    - template: {src: \"{{ item.src }}\", dest: \"{{ base }}/e\"}\n      loop:\n        - {src: e.j2}\n",
        message: "unknown filter `no_such_loop_filter`",
        at: "--> templates/e.j2:1:8",
    },
    Case {
        what: "unknown parameter beside a templated one",
        files: &[],
        tasks: "    - file: {path: \"{{ base }}/d\", state: directory, sefoo: x}\n",
        message: "unknown field `sefoo`",
        at: "--> site.yml:",
    },
    Case {
        what: "missing included template",
        files: &[("templates/c.j2", "c\n{% include 'gone.j2' %}\n")],
        tasks: "    - template: {src: c.j2, dest: \"{{ base }}/c\"}\n",
        message: "template `gone.j2` not found",
        at: "--> templates/c.j2:2:13",
    },
    Case {
        what: "template reached only through with_first_found",
        files: &[("templates/default.j2", "{{ z | no_such_ff_filter }}\n")],
        tasks: "    - template: {src: \"{{ item }}\", dest: \"{{ base }}/d\"}\n      with_first_found:\n        - \"{{ os }}.j2\"\n        - default.j2\n",
        message: "unknown filter `no_such_ff_filter`",
        at: "--> templates/default.j2:1:8",
    },
    Case {
        what: "vars file a templated with_first_found name can stand for",
        files: &[("vars/Debian.yml", "a: [unclosed\n")],
        tasks: "    - include_vars: \"{{ item }}\"\n      with_first_found:\n        - \"{{ os }}.yml\"\n",
        message: "",
        at: "--> vars/Debian.yml:",
    },
];

#[test]
fn every_kind_of_problem_is_refused_by_validate_apply_and_check_before_any_host_is_touched() {
    let fleet = Fleet::start(1, "fpuser");
    let fx = &fleet.fx;
    let marker = fx.path("t/marker");
    let config = fleet.config.to_str().unwrap().to_string();
    for case in CASES {
        for (rel, text) in case.files {
            fx.write(rel, text);
        }
        // The first task would create the marker on the host, were anything run.
        fx.write(
            "site.yml",
            &format!(
                "- hosts: fleet\n  gather_facts: false\n  vars:\n    base: {}\n  tasks:\n    - file: path={{{{ base }}}}/marker state=touch\n{}",
                fx.path("t").display(),
                case.tasks
            ),
        );
        let validate = fx.run(&["validate", "site.yml"]);
        let mut outs = vec![("validate", validate)];
        for cmd in ["apply", "check"] {
            outs.push((
                cmd,
                fx.run(&[cmd, "-i", "hosts.ini", "--ssh-config", &config, "site.yml"]),
            ));
        }
        let first = outs[0].1.stderr.clone();
        for (cmd, out) in &outs {
            assert_eq!(out.code, 2, "{}: `{cmd}` exit:\n{}", case.what, out.stderr);
            assert!(
                out.stderr.contains(case.message) && out.stderr.contains(case.at),
                "{}: `{cmd}` should say `{}` at `{}`:\n{}",
                case.what,
                case.message,
                case.at,
                out.stderr
            );
            assert!(
                out.stderr.contains("no host was touched"),
                "{}: {}",
                case.what,
                out.stderr
            );
            assert_eq!(
                out.stderr, first,
                "{}: `{cmd}` and `validate` should say the same",
                case.what
            );
        }
        assert!(!marker.exists(), "{}: a task ran", case.what);
        for (rel, _) in case.files {
            std::fs::remove_file(fx.path(rel)).unwrap();
        }
    }
    let log = fleet.hosts[0].log();
    assert!(
        !log.contains("Accepted publickey"),
        "a run logged in to the host:\n{log}"
    );
}

#[test]
fn validate_reports_every_problem_of_a_role_in_one_run() {
    let fx = crate::fx::Fx::new();
    fx.write(
        "site.yml",
        "- hosts: localhost\n  gather_facts: false\n  roles:\n    - web\n  tasks:\n    - debug: msg=x\n      whne: true\n    - command: echo unguarded\n",
    );
    fx.write(
        "roles/web/tasks/main.yml",
        concat!(
            "- template: src=filter.j2 dest=/tmp/never-a\n",
            "- template: src=syntax.j2 dest=/tmp/never-b\n",
            "- template:\n    src: \"{{ item }}\"\n    dest: /tmp/never-c\n",
            "  with_first_found:\n    - \"{{ ansible_os_family }}.j2\"\n    - fallback.j2\n",
        ),
    );
    fx.write(
        "roles/web/templates/filter.j2",
        "# managed\nport={{ port | no_such_filter }}\n",
    );
    fx.write("roles/web/templates/syntax.j2", "a\nb {{ x + }}\n");
    fx.write(
        "roles/web/templates/fallback.j2",
        "{% for x in y %}\n{{ x is no_such_test }}\n{% endfor %}\n",
    );
    let out = fx.run(&["validate", "site.yml"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    for (msg, at) in [
        ("`whne` is neither", "site.yml:7:7"),
        ("unguarded `command`", "site.yml:8:7"),
        (
            "unknown filter `no_such_filter`",
            "roles/web/templates/filter.j2:2:16",
        ),
        ("template syntax error", "roles/web/templates/syntax.j2:2:"),
        (
            "unknown test `no_such_test`",
            "roles/web/templates/fallback.j2:2:9",
        ),
    ] {
        let found = format!("\n{}", out.stderr)
            .split("\nerror: ")
            .any(|d| d.starts_with(msg) && d.contains(&format!("--> {at}")));
        assert!(found, "`{msg}` at `{at}` missing:\n{}", out.stderr);
    }
    assert!(out.stderr.contains("5 problem(s) found"), "{}", out.stderr);
}

/// A file that only a templated include name may reach (a role's per-OS file) is checked, but
/// what is wrong in it is a warning: ansible-core fails it only when a host includes it, so a
/// host that includes another file runs, and one that includes the bad file fails there.
#[test]
fn a_bad_file_a_templated_include_may_name_is_a_warning_until_a_host_includes_it() {
    let fx = crate::fx::Fx::new();
    fx.write(
        "Solaris.yml",
        "- name: in Solaris.yml\n  copy: {dest: /tmp/never, content: x, bogus: 1}\n",
    );
    let out_file = fx.path("out");
    fx.write(
        "Debian.yml",
        &format!("- copy: {{dest: {}, content: ok}}\n", out_file.display()),
    );
    fx.write(
        "site.yml",
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - include_tasks: \"{{ os }}.yml\"\n",
    );
    let validate = fx.run(&["validate", "site.yml"]);
    assert_eq!(validate.code, 0, "{}", validate.stderr);
    assert!(
        validate
            .stderr
            .contains("warning: invalid parameters for module `copy`")
            && validate.stderr.contains("Solaris.yml:2:")
            && validate
                .stderr
                .contains("an error only if a host includes it"),
        "{}",
        validate.stderr
    );
    let debian = fx.run(&["apply", "-e", "os=Debian", "site.yml"]);
    assert_eq!(debian.code, 0, "{}{}", debian.stdout, debian.stderr);
    assert_eq!(std::fs::read_to_string(&out_file).unwrap(), "ok");
    let solaris = fx.run(&["apply", "-e", "os=Solaris", "site.yml"]);
    assert_eq!(solaris.code, 1, "{}{}", solaris.stdout, solaris.stderr);
    assert!(
        format!("{}{}", solaris.stdout, solaris.stderr).contains("bogus"),
        "{}{}",
        solaris.stdout,
        solaris.stderr
    );
}

/// A parameter taken out because it is templated is decided after rendering, also when the
/// module's complaint names it bare ("one of the following is required: state, enabled", as
/// geerlingguy.nginx's `service` task with `state: "{{ nginx_service_state }}"` meets it);
/// a `sysvinit` task with neither parameter (another one templated) is still refused before any
/// host (`service` with neither loads: on systemd it is a status query, as in Ansible).
#[test]
fn a_required_choice_given_by_a_template_is_not_refused_at_load_time() {
    let fx = crate::fx::Fx::new();
    fx.write(
        "site.yml",
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - service:\n        name: nginx\n        state: \"{{ st }}\"\n        enabled: \"{{ en }}\"\n",
    );
    let ok = fx.run(&["validate", "site.yml"]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    fx.write(
        "site.yml",
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - sysvinit:\n        name: nginx\n        pattern: \"{{ p }}\"\n",
    );
    let bad = fx.run(&["validate", "site.yml"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(
        bad.stderr
            .contains("one of the following is required: state, enabled"),
        "{}",
        bad.stderr
    );
}

/// A plain `include_tasks` with its own `when` (a role's `setup-FreeBSD.yml`) is loaded when a
/// host reaches it, as in ansible-core: what is wrong in its file is a warning, a host that
/// skips it runs, one that includes it fails there. Without `when`, the same file refuses the run.
#[test]
fn a_conditional_include_of_a_bad_file_is_a_warning_until_a_host_includes_it() {
    let fx = crate::fx::Fx::new();
    fx.write(
        "setup-FreeBSD.yml",
        "- name: in setup-FreeBSD.yml\n  pkgng: {name: nginx}\n",
    );
    let out_file = fx.path("out");
    fx.write(
        "site.yml",
        &format!(
            "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - include_tasks: setup-FreeBSD.yml\n      when: os == 'FreeBSD'\n    - copy: {{dest: {}, content: ok}}\n",
            out_file.display()
        ),
    );
    let validate = fx.run(&["validate", "site.yml"]);
    assert_eq!(validate.code, 0, "{}", validate.stderr);
    assert!(
        validate.stderr.contains("warning: `pkgng`")
            && validate.stderr.contains("setup-FreeBSD.yml:2:")
            && validate
                .stderr
                .contains("an error only if a host includes it"),
        "{}",
        validate.stderr
    );
    let debian = fx.run(&["apply", "-e", "os=Debian", "site.yml"]);
    assert_eq!(debian.code, 0, "{}{}", debian.stdout, debian.stderr);
    assert_eq!(std::fs::read_to_string(&out_file).unwrap(), "ok");
    let freebsd = fx.run(&["apply", "-e", "os=FreeBSD", "site.yml"]);
    assert_eq!(freebsd.code, 1, "{}{}", freebsd.stdout, freebsd.stderr);
    assert!(
        format!("{}{}", freebsd.stdout, freebsd.stderr).contains("pkgng"),
        "{}{}",
        freebsd.stdout,
        freebsd.stderr
    );
    fx.write(
        "site.yml",
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - include_tasks: setup-FreeBSD.yml\n",
    );
    let plain = fx.run(&["validate", "site.yml"]);
    assert_eq!(plain.code, 2, "{}", plain.stderr);
    assert!(plain.stderr.contains("error: `pkgng`"), "{}", plain.stderr);
}

/// A conditional `include_tasks` of a file that does not exist is the same: a warning, and a
/// failure only on the hosts that reach it (ansible-core looks for the file then); without
/// `when` the run is refused.
#[test]
fn a_conditional_include_of_a_missing_file_is_a_warning_until_a_host_includes_it() {
    let fx = crate::fx::Fx::new();
    let play = |when: &str| {
        format!(
            "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - include_tasks: nope.yml\n{when}    - debug: {{msg: after}}\n"
        )
    };
    fx.write("site.yml", &play("      when: os == 'FreeBSD'\n"));
    let validate = fx.run(&["validate", "site.yml"]);
    assert_eq!(validate.code, 0, "{}", validate.stderr);
    assert!(
        validate
            .stderr
            .contains("warning: task file `nope.yml` not found")
            && validate.stderr.contains("site.yml:4:"),
        "{}",
        validate.stderr
    );
    let skipped = fx.run(&["apply", "-e", "os=Debian", "site.yml"]);
    assert_eq!(skipped.code, 0, "{}{}", skipped.stdout, skipped.stderr);
    let reached = fx.run(&["apply", "-e", "os=FreeBSD", "site.yml"]);
    assert_eq!(reached.code, 1, "{}{}", reached.stdout, reached.stderr);
    assert!(reached.stdout.contains("nope.yml"), "{}", reached.stdout);
    fx.write("site.yml", &play(""));
    let plain = fx.run(&["validate", "site.yml"]);
    assert_eq!(plain.code, 2, "{}", plain.stderr);
}

#[test]
fn an_unknown_parameter_on_a_conditional_task_is_a_warning_and_fails_only_where_it_runs() {
    let fx = Fx::new();
    fx.play(concat!(
        "    - name: skipped\n      command: \"echo {{ 'a' }}\"\n      args: {warn: false}\n",
        "      changed_when: false\n      when: false\n",
        "    - name: reached\n      command: \"echo {{ 'b' }}\"\n      args: {warn: false}\n",
        "      changed_when: false\n      when: true\n",
    ));
    let v = fx.run(&["validate", "site.yml"]);
    v.expect(0);
    assert!(
        v.stderr
            .contains("warning: invalid parameters for module `command`: parameter `warn`: unknown field `warn`")
            && v.stderr.contains("it fails only if a host runs it"),
        "{}",
        v.stderr
    );
    let out = fx.apply(&[]);
    out.expect(1);
    assert_eq!(out.task_events("skipped")[0]["status"], "skipped");
    let reached = &out.task_events("reached")[0];
    assert_eq!(reached["status"], "failed");
    assert!(
        reached["msg"].as_str().unwrap().contains("`warn`"),
        "{reached}"
    );
}

/// A mapping that gives a key twice (in a playbook, a role, a vars file): the later value is
/// used, as in Ansible, and `validate` and `apply` warn with both places, as ansible-core does.
#[test]
fn a_duplicate_mapping_key_is_a_warning_with_both_places() {
    let fx = crate::fx::Fx::new();
    fx.write("group_vars/all.yml", "color: red\ncolor: blue\n");
    fx.write(
        "site.yml",
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - debug:\n        msg: a\n        msg: \"{{ color }}\"\n",
    );
    for cmd in [&["validate", "site.yml"][..], &["apply", "site.yml"][..]] {
        let out = fx.run(cmd);
        assert_eq!(out.code, 0, "{}", out.stderr);
        for (at, first) in [
            ("site.yml:6:9", "site.yml:5:9"),
            ("group_vars/all.yml:2:1", "group_vars/all.yml:1:1"),
        ] {
            assert!(
                out.stderr.contains("warning: duplicate mapping key")
                    && out.stderr.contains(&format!("{at}\n"))
                    && out.stderr.contains(&format!("{first} is not")),
                "{cmd:?} {at}: {}",
                out.stderr
            );
        }
        if cmd[0] == "apply" {
            assert!(out.stdout.contains("\"msg\": \"blue\""), "{}", out.stdout);
        }
    }
}
