//! `fixpoint inventory` and host patterns through the binary, with group_vars beside the inventory.

use crate::fx::Fx;

fn fixture() -> Fx {
    let fx = Fx::new();
    fx.write(
        "inv/hosts.ini",
        "[web]\nweb[01:02] ansible_connection=local\n\n[db]\ndb1 ansible_connection=local role=primary\n\n[prod:children]\nweb\ndb\n\n[web:vars]\nenv=staging\n",
    );
    fx.write("inv/group_vars/prod.yml", "env: production\nport: 80\n");
    fx.write("inv/group_vars/web.yml", "port: 8080\n");
    fx.write("inv/host_vars/web02.yml", "port: 9090\n");
    fx
}

#[test]
fn list_graph_and_host_show_the_resolved_inventory() {
    let fx = fixture();
    let out = fx.run(&["inventory", "-i", "inv/hosts.ini", "--list"]);
    out.expect(0);
    let list: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(list["web"]["hosts"], serde_json::json!(["web01", "web02"]));
    assert_eq!(
        list["_meta"]["hostvars"]["web01"]["port"], 8080,
        "child group beats parent"
    );
    assert_eq!(
        list["_meta"]["hostvars"]["web02"]["port"], 9090,
        "host_vars beat groups"
    );
    assert_eq!(list["_meta"]["hostvars"]["db1"]["port"], 80);
    // As in Ansible, group_vars files beat inline group vars, even of a child group.
    assert_eq!(list["_meta"]["hostvars"]["web01"]["env"], "production");

    let graph = fx.run(&["inventory", "-i", "inv/hosts.ini", "--graph"]);
    graph.expect(0);
    assert!(
        graph.stdout.contains("@prod:") && graph.stdout.contains("|--web01"),
        "{}",
        graph.stdout
    );

    let host = fx.run(&["inventory", "-i", "inv/hosts.ini", "--host", "db1"]);
    host.expect(0);
    let vars: serde_json::Value = serde_json::from_str(&host.stdout).unwrap();
    assert_eq!(vars["role"], "primary");
    assert_eq!(vars["env"], "production");
}

/// Regression (issue 9): YAML's `.inf` and `.nan` are floats, which `--host` and `--list`
/// print as ansible-inventory does (`Infinity`, `NaN`: Python's JSON), not as null.
#[test]
fn non_finite_floats_print_as_ansible_inventory_prints_them() {
    let fx = fixture();
    fx.write(
        "inv/host_vars/db1.yml",
        "limits: [.inf, -.Inf, .NaN, 1.5]
",
    );
    let host = fx.run(&["inventory", "-i", "inv/hosts.ini", "--host", "db1"]);
    host.expect(0);
    let compact: String = host.stdout.split_whitespace().collect();
    assert!(
        compact.contains(r#""limits":[Infinity,-Infinity,NaN,1.5]"#),
        "{}",
        host.stdout
    );
    let list = fx.run(&["inventory", "-i", "inv/hosts.ini", "--list"]);
    list.expect(0);
    let compact: String = list.stdout.split_whitespace().collect();
    assert!(
        compact.contains("[Infinity,-Infinity,NaN,1.5]"),
        "{}",
        list.stdout
    );
}

#[test]
fn patterns_select_hosts_for_plays_and_limit() {
    let fx = fixture();
    fx.write(
        "site.yml",
        &format!(
            "- hosts: prod:!db\n  gather_facts: false\n  vars:\n    fixpoint_state_dir: \"{}/{{{{ inventory_hostname }}}}\"\n  tasks:\n    - name: mark\n      copy:\n        content: \"{{{{ port }}}} {{{{ group_names | join(',') }}}}\"\n        dest: \"{}/{{{{ inventory_hostname }}}}\"\n",
            fx.state_dir().display(),
            fx.path("t").display()
        ),
    );
    std::fs::create_dir_all(fx.path("t")).unwrap();
    fx.run(&[
        "apply",
        "-i",
        "inv/hosts.ini",
        "--limit",
        "web0*",
        "site.yml",
    ])
    .expect(0);
    assert_eq!(fx.read("t/web01"), "8080 prod,web");
    assert_eq!(fx.read("t/web02"), "9090 prod,web");
    assert!(!fx.path("t/db1").exists());
}

#[test]
fn a_broken_inventory_is_refused_with_its_location() {
    let fx = Fx::new();
    fx.write("bad.ini", "[web]\nweb1\n[web:kids]\nx\n");
    let out = fx.run(&["inventory", "-i", "bad.ini", "--list"]);
    out.expect(2);
    assert!(out.stderr.contains("bad.ini:3"), "{}", out.stderr);
}

#[test]
fn host_lists_and_several_sources_add_up_on_every_command() {
    let fx = fixture();
    // A file, then a host list: the listed host the file has keeps its group and port.
    let out = fx.run(&[
        "inventory",
        "-i",
        "inv/hosts.ini",
        "-i",
        "web01:2222, new1:2201,",
        "--list",
    ]);
    out.expect(0);
    let list: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(list["ungrouped"]["hosts"], serde_json::json!(["new1"]));
    assert_eq!(list["_meta"]["hostvars"]["new1"]["ansible_port"], 2201);
    assert_eq!(list["_meta"]["hostvars"]["web01"]["port"], 8080);
    assert!(list["_meta"]["hostvars"]["web01"]
        .get("ansible_port")
        .is_none());

    // `apply` with only a host list: an explicit localhost, run here through `-c local`.
    fx.write(
        "site.yml",
        &format!(
            "- hosts: all\n  gather_facts: false\n  vars:\n    fixpoint_state_dir: \"{}\"\n  tasks:\n    - copy:\n        content: \"{{{{ ansible_connection }}}} {{{{ group_names }}}}\"\n        dest: \"{}\"\n",
            fx.state_dir().display(),
            fx.path("mark").display()
        ),
    );
    fx.run(&["apply", "-i", "localhost,", "-c", "local", "site.yml"])
        .expect(0);
    assert_eq!(fx.read("mark"), "local ['ungrouped']");
    let hosts = fx.run(&["check", "-i", "a,b:2200,", "--list-hosts", "site.yml"]);
    hosts.expect(0);
    assert!(
        hosts.stdout.contains("hosts (2):\n      a\n      b\n"),
        "{}",
        hosts.stdout
    );
    fx.run(&[
        "validate",
        "-i",
        "a,b,",
        "-b",
        "--become-user",
        "x",
        "site.yml",
    ])
    .expect(0);

    // A source that is neither a path nor a host list says how to write a one-host list.
    let out = fx.run(&["apply", "-i", "web9", "site.yml"]);
    out.expect(2);
    assert!(out.stderr.contains("`-i web9,`"), "{}", out.stderr);
}
