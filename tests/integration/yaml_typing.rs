//! Every YAML source types scalars as Ansible's PyYAML (YAML 1.1) does, and INI inventory values
//! as Python literals, checked through the binary against what ansible-core shows.
//!
//! Observed with ansible-core 2.19.14 (Python 3.11, PyYAML), `ansible-inventory -i INV --host h1`,
//! for the values `enabled: no`, `yes`, `0644`, `12e4567`, `0x1F`, `0o17`, `1_000`, `~`,
//! `Null`, `"no"`:
//!
//! - YAML inventory (host vars and group `vars:`), `group_vars/all.yml` and `host_vars/h1.yml`
//!   beside either a YAML or an INI inventory, all the same:
//!   `enabled: false, yes_v: true, mode: 420, e_num: "12e4567", hex: 31, oct: "0o17",
//!   under: 1000, tilde: null, null_v: null, quoted_no: "no"`
//! - INI inventory, host line `h1 enabled=no yes_v=yes ... quoted_no="no"` and a `[g:vars]`
//!   section with one `k=v` per line, both the same:
//!   `enabled: "no", yes_v: "yes", mode: "0644", e_num: Infinity, hex: 31, oct: 15,
//!   under: 1000, tilde: "~", null_v: "Null", quoted_no: "no"`
//!
//! fixpoint matches all of these but one: Python's `literal_eval("12e4567")` is the float
//! infinity, which a JSON value cannot hold, so fixpoint keeps the INI text `"12e4567"`.

use crate::fx::{Fx, Out};
use serde_json::{json, Value};

/// The values under test, as written in YAML (`name: value`) and INI (`name=value`).
const VALUES: [(&str, &str); 10] = [
    ("enabled", "no"),
    ("yes_v", "yes"),
    ("mode", "0644"),
    ("e_num", "12e4567"),
    ("hex", "0x1F"),
    ("oct", "0o17"),
    ("under", "1_000"),
    ("tilde", "~"),
    ("null_v", "Null"),
    ("quoted_no", "\"no\""),
];

/// What ansible-core gives for [`VALUES`] from any YAML source.
fn yaml_expected() -> Value {
    json!({
        "enabled": false, "yes_v": true, "mode": 420, "e_num": "12e4567", "hex": 31,
        "oct": "0o17", "under": 1000, "tilde": null, "null_v": null, "quoted_no": "no",
    })
}

/// [`VALUES`] as YAML mapping lines, names prefixed, indented by `indent` spaces.
fn yaml_lines(prefix: &str, indent: usize) -> String {
    VALUES
        .iter()
        .map(|(k, v)| format!("{:indent$}{prefix}{k}: {v}\n", ""))
        .collect()
}

/// Assert that the variables `prefix<name>` of `vars` hold `expected`'s values.
fn assert_prefixed(vars: &Value, prefix: &str, expected: &Value, source: &str) {
    for (k, want) in expected.as_object().unwrap() {
        assert_eq!(
            &vars[format!("{prefix}{k}")],
            want,
            "{prefix}{k} from {source}"
        );
    }
}

fn host_vars(fx: &Fx, inventory: &str) -> Value {
    let out = fx.run(&["inventory", "-i", inventory, "--host", "h1"]);
    out.expect(0);
    serde_json::from_str(&out.stdout).unwrap()
}

/// A playbook on `h1` with, for each variable: a task `when <var>` (run only if it is true)
/// and a task `type <var>` printing its `type_debug`; `play_extra` goes before `tasks:`.
fn typing_play(fx: &Fx, play_extra: &str, names: &[&str]) {
    let mut tasks = String::new();
    for n in names {
        tasks.push_str(&format!(
            "    - name: when {n}\n      debug:\n        msg: ran\n      when: {n}\n\
             \x20   - name: type {n}\n      debug:\n        msg: \"{{{{ {n} | type_debug }}}}\"\n"
        ));
    }
    fx.write(
        "site.yml",
        &format!("- hosts: h1\n  gather_facts: false\n{play_extra}  tasks:\n{tasks}"),
    );
}

fn apply(fx: &Fx, inventory: &str) -> Out {
    let out = fx.run(&[
        "apply", "--format", "json", "-v", "-i", inventory, "site.yml",
    ]);
    out.expect(0);
    out
}

fn msg(out: &Out, task: &str) -> String {
    let evs = out.task_events(task);
    assert_eq!(evs.len(), 1, "one result for {task}: {}", out.stdout);
    evs[0]["result"]["msg"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The host line of `h1`, which runs locally with its own state directory.
fn local_host(fx: &Fx) -> String {
    format!(
        "h1 ansible_connection=local fixpoint_state_dir={}",
        fx.state_dir().display()
    )
}

#[test]
fn enabled_no_is_false_in_every_yaml_source_of_a_yaml_inventory() {
    let fx = Fx::new();
    fx.write(
        "inv/hosts.yml",
        &format!(
            "all:\n  hosts:\n    h1:\n      ansible_connection: local\n      fixpoint_state_dir: {}\n{}  vars:\n{}",
            fx.state_dir().display(),
            yaml_lines("inv_", 6),
            yaml_lines("grp_", 4),
        ),
    );
    fx.write("inv/group_vars/all.yml", &yaml_lines("gv_", 0));
    fx.write("inv/host_vars/h1.yml", &yaml_lines("hv_", 0));
    fx.write("vf.yml", &yaml_lines("vf_", 0));

    let vars = host_vars(&fx, "inv/hosts.yml");
    for (prefix, source) in [
        ("inv_", "host vars of the YAML inventory"),
        ("grp_", "group vars of the YAML inventory"),
        ("gv_", "group_vars/all.yml"),
        ("hv_", "host_vars/h1.yml"),
    ] {
        assert_prefixed(&vars, prefix, &yaml_expected(), source);
    }

    let enabled = [
        "inv_enabled",
        "grp_enabled",
        "gv_enabled",
        "hv_enabled",
        "vf_enabled",
        "play_enabled",
    ];
    typing_play(
        &fx,
        "  vars_files: [vf.yml]\n  vars:\n    play_enabled: no\n",
        &enabled,
    );
    let out = apply(&fx, "inv/hosts.yml");
    for n in enabled {
        assert_eq!(out.status_of(&format!("when {n}")), "skipped", "{n}");
        assert_eq!(msg(&out, &format!("type {n}")), "bool", "{n}");
    }
}

#[test]
fn group_vars_type_numbers_and_nulls_like_pyyaml() {
    let fx = Fx::new();
    fx.write("inv/hosts.ini", &format!("[g]\n{}\n", local_host(&fx)));
    fx.write("inv/group_vars/g.yml", &yaml_lines("", 0));
    let names = ["e_num", "hex", "oct", "under", "tilde", "null_v"];
    let mut tasks = String::new();
    for n in names {
        tasks.push_str(&format!(
            "    - name: type {n}\n      debug:\n        msg: \"{{{{ {n} | type_debug }}}} {{{{ {n} | to_json }}}}\"\n"
        ));
    }
    fx.write(
        "site.yml",
        &format!("- hosts: h1\n  gather_facts: false\n  tasks:\n{tasks}"),
    );
    let out = apply(&fx, "inv/hosts.ini");
    let got: Vec<String> = names
        .iter()
        .map(|n| msg(&out, &format!("type {n}")))
        .collect();
    assert_eq!(
        got,
        // ansible-playbook (2.19.14) prints exactly these for the same play.
        [
            "str \"12e4567\"",
            "int 31",
            "str \"0o17\"",
            "int 1000",
            "NoneType null",
            "NoneType null",
        ]
    );
}

#[test]
fn ini_values_are_python_literals_and_yaml_beside_them_is_yaml() {
    let fx = Fx::new();
    let line_vars: Vec<String> = VALUES.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let section_vars: Vec<String> = VALUES.iter().map(|(k, v)| format!("v_{k}={v}")).collect();
    fx.write(
        "inv/hosts.ini",
        &format!(
            "[g]\n{} {}\n\n[g:vars]\n{}\n",
            local_host(&fx),
            line_vars.join(" "),
            section_vars.join("\n")
        ),
    );
    fx.write("inv/group_vars/all.yml", &yaml_lines("gv_", 0));
    fx.write("inv/host_vars/h1.yml", &yaml_lines("hv_", 0));

    // ansible-core gives `e_num: Infinity` here; see the module comment.
    let ini_expected = json!({
        "enabled": "no", "yes_v": "yes", "mode": "0644", "e_num": "12e4567", "hex": 31,
        "oct": 15, "under": 1000, "tilde": "~", "null_v": "Null", "quoted_no": "no",
    });
    let vars = host_vars(&fx, "inv/hosts.ini");
    assert_prefixed(&vars, "", &ini_expected, "the INI host line");
    assert_prefixed(&vars, "v_", &ini_expected, "the INI [g:vars] section");
    assert_prefixed(&vars, "gv_", &yaml_expected(), "group_vars beside INI");
    assert_prefixed(&vars, "hv_", &yaml_expected(), "host_vars beside INI");

    typing_play(&fx, "", &["gv_enabled", "hv_enabled"]);
    let out = apply(&fx, "inv/hosts.ini");
    for n in ["gv_enabled", "hv_enabled"] {
        assert_eq!(out.status_of(&format!("when {n}")), "skipped", "{n}");
        assert_eq!(msg(&out, &format!("type {n}")), "bool", "{n}");
    }
}
