//! A hostile host: its commands and facts print template syntax and Jinja expressions that
//! would run a command on the controller if anything there rendered or evaluated them again.
//! The controller must run nothing and show every such value literally, wherever it is used.
//!
//! Each payload, if ever rendered or evaluated, runs `touch` on the controller through the
//! `lines` (or `pipe`) lookup, creating its own marker file; every test checks that the marker
//! directory is still empty. Also here: conditions written as templates, compared with
//! ansible-core 2.19, and `!unsafe` values, which are never templated.

use crate::fx::{Fx, Out};
use serde_json::Value;
use std::os::unix::ffi::OsStringExt;

/// The payloads a host prints, as bytes (one is not UTF-8), each touching `markers/<n>`.
fn payloads(markers: &std::path::Path) -> Vec<Vec<u8>> {
    let m = |n: u32| markers.join(n.to_string()).display().to_string();
    let mut out: Vec<Vec<u8>> = [
        // A whole template.
        format!("{{{{ lookup('lines', 'touch {}') }}}}", m(1)),
        // Breaks out of a quoted `'{{ x }}'` when the rendered text is evaluated again: the
        // hole this file was written for (it ran `touch` before the fix).
        format!("x' ~ lookup('lines', 'touch {}') ~ '", m(2)),
        // A statement.
        format!(
            "{{% for l in lookup('lines', 'touch {}') %}}{{% endfor %}}",
            m(3)
        ),
        // A bare expression: ran wherever a rendered condition was evaluated again.
        format!("lookup('lines', 'touch {}')", m(4)),
        // Ansible's usual example, through the `pipe` lookup.
        format!("{{{{ lookup('pipe', 'touch {}') }}}}", m(5)),
        // Breaks out of a double-quoted `"{{ x }}"`.
        format!("x\" ~ lookup('lines', 'touch {}') ~ \"", m(6)),
    ]
    .into_iter()
    .map(String::into_bytes)
    .collect();
    // Invalid UTF-8 around a template.
    let mut bad = b"\xff\xfe".to_vec();
    bad.extend(format!("{{{{ lookup('lines', 'touch {}') }}}}", m(7)).as_bytes());
    bad.push(0xc3);
    out.push(bad);
    out
}

/// A fixture whose `payloads/<n>` files hold the payloads, with an empty marker directory.
struct Hostile {
    fx: Fx,
    /// Each payload as the controller shows it (invalid UTF-8 replaced, as the command module
    /// returns it).
    shown: Vec<String>,
}

impl Hostile {
    fn new() -> Hostile {
        let fx = Fx::new();
        let markers = fx.path("markers");
        std::fs::create_dir_all(&markers).unwrap();
        std::fs::create_dir_all(fx.path("t")).unwrap();
        let mut shown = Vec::new();
        for (i, p) in payloads(&markers).into_iter().enumerate() {
            fx.write(&format!("payloads/{}", i + 1), "");
            std::fs::write(fx.path(&format!("payloads/{}", i + 1)), &p).unwrap();
            shown.push(String::from_utf8_lossy(&p).into_owned());
        }
        Hostile { fx, shown }
    }

    /// Asserts the controller ran none of the payloads.
    fn assert_nothing_ran(&self, out: &Out) {
        let ran: Vec<String> = std::fs::read_dir(self.fx.path("markers"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            ran.is_empty(),
            "the controller ran payloads {ran:?}\n--- stdout\n{}\n--- stderr\n{}",
            out.stdout,
            out.stderr
        );
    }

    /// `apply -v` of `site.yml`, the payloads in the environment as `HOSTILE_<n>`: the agent
    /// inherits it and reports it as the `ansible_env` fact, invalid UTF-8 included.
    fn apply_with_env(&self) -> Out {
        let mut cmd = std::process::Command::new(crate::fx::bin());
        cmd.args(["apply", "--format", "json", "-v", "site.yml"])
            .current_dir(self.fx.dir.path())
            .env("NO_COLOR", "1");
        for (i, p) in payloads(&self.fx.path("markers")).into_iter().enumerate() {
            cmd.env(
                format!("HOSTILE_{}", i + 1),
                std::ffi::OsString::from_vec(p),
            );
        }
        Out::from(cmd.output().unwrap())
    }

    /// Writes `site.yml`: one play on localhost that reads each payload into `p<n>` (the
    /// host's command prints it), then runs `per_payload(n)`'s tasks.
    fn play(&self, gather_facts: bool, per_payload: impl Fn(usize) -> String) {
        let mut text = format!(
            "- hosts: localhost\n  gather_facts: {gather_facts}\n  vars:\n    base: {}\n    fixpoint_state_dir: {}\n  tasks:\n",
            self.fx.path("t").display(),
            self.fx.state_dir().display()
        );
        for n in 1..=self.shown.len() {
            text.push_str(&format!(
                "    - name: read {n}\n      command: cat {}\n      register: p{n}\n      changed_when: false\n",
                self.fx.path(&format!("payloads/{n}")).display()
            ));
            text.push_str(&per_payload(n));
        }
        self.fx.write("site.yml", &text);
    }
}

/// The only event of a task.
fn event(out: &Out, task: &str) -> Value {
    let evs = out.task_events(task);
    assert_eq!(evs.len(), 1, "one result for `{task}`:\n{}", out.stdout);
    evs[0].clone()
}

/// Each (task, expected status) that did not match, with the event.
fn wrong_statuses(out: &Out, expected: &[(String, &str)]) -> Vec<String> {
    expected
        .iter()
        .filter_map(|(task, want)| {
            let ev = event(out, task);
            (ev["status"] != *want).then(|| format!("{task}: want {want}, got {ev}"))
        })
        .collect()
}

/// The result's `msg` (with -v), else the event's message.
fn msg(out: &Out, task: &str) -> String {
    let ev = event(out, task);
    ev["result"]["msg"]
        .as_str()
        .or(ev["msg"].as_str())
        .unwrap_or_default()
        .to_string()
}

fn warnings(out: &Out) -> Vec<String> {
    out.events()
        .into_iter()
        .filter(|e| e["event"] == "warning")
        .map(|e| e["msg"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn conditions_never_evaluate_what_a_host_printed() {
    let h = Hostile::new();
    // Every task goes on after a failure, so one wrong answer does not hide the others.
    h.play(true, |n| {
        format!(
            concat!(
                // A template inside a string constant renders to the host's text, a string.
                "    - name: when quoted {n}\n      debug: msg=ran\n      when: \"'{{{{ p{n}.stdout }}}}' == 'x'\"\n      ignore_errors: true\n",
                "    - name: when quoted equal {n}\n      debug: msg=ran\n      when: \"'{{{{ p{n}.stdout }}}}' == p{n}.stdout\"\n      ignore_errors: true\n",
                "    - name: when bare {n}\n      debug: msg=ran\n      when: p{n}.stdout == 'x'\n      ignore_errors: true\n",
                // Template delimiters inside an expression are a syntax error, not a template.
                "    - name: when unquoted {n}\n      debug: msg=ran\n      when: \"{{{{ p{n}.stdout }}}} == 'x'\"\n      ignore_errors: true\n",
                // The whole condition a template: what a host printed is not an expression.
                "    - name: when template {n}\n      debug: msg=ran\n      when: \"{{{{ p{n}.stdout }}}}\"\n      ignore_errors: true\n",
                "    - name: when list {n}\n      debug: msg=ran\n      when:\n        - p{n}.rc == 0\n        - \"'{{{{ p{n}.stdout }}}}' != p{n}.stdout\"\n      ignore_errors: true\n",
                "    - name: changed_when {n}\n      debug: msg=x\n      changed_when: \"'{{{{ p{n}.stdout }}}}' == 'x'\"\n      ignore_errors: true\n",
                "    - name: changed_when template {n}\n      debug: msg=x\n      changed_when: \"{{{{ p{n}.stdout }}}}\"\n      ignore_errors: true\n",
                "    - name: failed_when {n}\n      debug: msg=x\n      failed_when: \"'{{{{ p{n}.stdout }}}}' == 'x'\"\n      ignore_errors: true\n",
                "    - name: failed_when template {n}\n      debug: msg=x\n      failed_when: \"{{{{ p{n}.stdout }}}}\"\n      ignore_errors: true\n",
                "    - name: until {n}\n      debug: msg=x\n      until: \"'{{{{ p{n}.stdout }}}}' == p{n}.stdout\"\n      retries: 0\n      delay: 0\n      ignore_errors: true\n",
                "    - name: until template {n}\n      debug: msg=x\n      until: \"{{{{ p{n}.stdout }}}}\"\n      retries: 0\n      delay: 0\n      ignore_errors: true\n",
                "    - name: assert {n}\n      assert:\n        that: \"'{{{{ p{n}.stdout }}}}' == p{n}.stdout\"\n      ignore_errors: true\n",
                // Arguments spread from a template, conditions a template lists, loop items.
                "    - name: assert splat {n}\n      assert: \"{{{{ {{'that': p{n}.stdout}} }}}}\"\n      ignore_errors: true\n",
                "    - name: assert list {n}\n      assert:\n        that: \"{{{{ [p{n}.stdout] }}}}\"\n      ignore_errors: true\n",
                "    - name: item template {n}\n      debug: msg=x\n      loop: \"{{{{ p{n}.stdout_lines }}}}\"\n      when: \"{{{{ item }}}}\"\n      ignore_errors: true\n",
                "    - name: set {n}\n      set_fact:\n        f{n}: \"{{{{ p{n}.stdout }}}}\"\n      ignore_errors: true\n",
                "    - name: fact when {n}\n      debug: msg=x\n      when: \"'{{{{ f{n} }}}}' == 'x'\"\n      ignore_errors: true\n",
                "    - name: fact template {n}\n      debug: msg=x\n      when: \"{{{{ f{n} }}}}\"\n      ignore_errors: true\n",
                "    - name: loop when {n}\n      debug: msg=x\n      loop: \"{{{{ p{n}.stdout_lines }}}}\"\n      when: \"'{{{{ item }}}}' == 'x'\"\n      ignore_errors: true\n",
                "    - name: vars when {n}\n      debug: msg=x\n      vars:\n        w: \"{{{{ p{n}.stdout }}}}\"\n      when: \"'{{{{ w }}}}' == 'x'\"\n      ignore_errors: true\n",
                "    - name: vars template {n}\n      debug: msg=x\n      vars:\n        w: \"{{{{ p{n}.stdout }}}}\"\n      when: \"{{{{ w }}}}\"\n      ignore_errors: true\n",
                "    - name: hostvars when {n}\n      debug: msg=x\n      when: \"'{{{{ hostvars[inventory_hostname].p{n}.stdout }}}}' == 'x'\"\n      ignore_errors: true\n",
                // A fact: the host's environment, which the test gives the agent.
                "    - name: env shown {n}\n      debug:\n        msg: \"{{{{ ansible_env.HOSTILE_{n} }}}}\"\n      ignore_errors: true\n",
                "    - name: env when {n}\n      debug: msg=x\n      when: \"'{{{{ ansible_env.HOSTILE_{n} }}}}' == 'x'\"\n      ignore_errors: true\n",
                "    - name: env template {n}\n      debug: msg=x\n      when: \"{{{{ ansible_env.HOSTILE_{n} }}}}\"\n      ignore_errors: true\n",
            ),
            n = n
        )
    });
    let out = h.apply_with_env();
    h.assert_nothing_ran(&out);
    out.expect(0);
    let mut expected = Vec::new();
    for n in 1..=h.shown.len() {
        for (task, status) in [
            ("when quoted", "skipped"),
            ("when quoted equal", "ok"),
            ("when bare", "skipped"),
            ("when unquoted", "failed"),
            ("when template", "failed"),
            ("when list", "skipped"),
            ("changed_when", "ok"),
            ("changed_when template", "failed"),
            ("failed_when", "ok"),
            ("failed_when template", "failed"),
            ("until", "ok"),
            ("until template", "failed"),
            ("assert", "ok"),
            ("assert splat", "failed"),
            ("assert list", "failed"),
            ("item template", "failed"),
            ("fact when", "skipped"),
            ("fact template", "failed"),
            ("loop when", "skipped"),
            ("vars when", "skipped"),
            ("vars template", "failed"),
            ("hostvars when", "skipped"),
            ("env when", "skipped"),
            ("env template", "failed"),
        ] {
            expected.push((format!("{task} {n}"), status));
        }
        for task in [
            "when template",
            "fact template",
            "vars template",
            "assert splat",
            "assert list",
        ] {
            let m = msg(&out, &format!("{task} {n}"));
            assert!(m.contains("untrusted"), "{task} {n}: {m}");
        }
        let m = msg(&out, &format!("when unquoted {n}"));
        assert!(m.contains("delimiters"), "{m}");
        assert_eq!(msg(&out, &format!("env shown {n}")), h.shown[n - 1]);
    }
    let wrong = wrong_statuses(&out, &expected);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // ansible-core 2.19 warns that a template inside a string constant is deprecated.
    assert!(
        warnings(&out)
            .iter()
            .any(|w| w.contains("when quoted 2") && w.contains("string constant")),
        "{:?}",
        warnings(&out)
    );
}

#[test]
fn host_values_arrive_literally_wherever_they_are_shown() {
    let h = Hostile::new();
    h.fx.write("templates/show.j2", "[{{ shown }}]\n");
    h.fx.write(
        "inc.yml",
        "- name: included\n  debug:\n    msg: \"{{ v }}\"\n",
    );
    h.play(false, |n| {
        format!(
            concat!(
                "    - name: debug {n}\n      debug:\n        msg: \"{{{{ p{n}.stdout }}}}\"\n",
                "    - name: debug var {n}\n      debug:\n        var: p{n}.stdout\n",
                "    - name: set {n}\n      set_fact:\n        f{n}: \"{{{{ p{n}.stdout }}}}\"\n        g{n}: \"<{{{{ p{n}.stdout }}}}>\"\n",
                "    - name: fact {n}\n      debug:\n        msg: \"{{{{ f{n} }}}}|{{{{ g{n} }}}}\"\n",
                "    - name: template {n}\n      template:\n        src: show.j2\n        dest: \"{{{{ base }}}}/tpl-{n}\"\n      vars:\n        shown: \"{{{{ p{n}.stdout }}}}\"\n",
                "    - name: loop {n}\n      debug:\n        msg: \"{{{{ item }}}}\"\n      loop: \"{{{{ p{n}.stdout_lines }}}}\"\n",
                "    - name: hostvars {n}\n      debug:\n        msg: \"{{{{ hostvars[inventory_hostname]['p{n}'].stdout }}}}|{{{{ hostvars.localhost.f{n} }}}}\"\n",
                "    - name: vars {n}\n      debug:\n        msg: \"{{{{ w }}}}\"\n      vars:\n        w: \"{{{{ p{n}.stdout }}}}\"\n",
                "    - name: copy {n}\n      copy:\n        content: \"{{{{ p{n}.stdout }}}}\"\n        dest: \"{{{{ base }}}}/copy-{n}\"\n",
                "    - include_tasks: inc.yml\n      vars:\n        v: \"{{{{ p{n}.stdout }}}}\"\n",
            ),
            n = n
        )
    });
    let out = h.fx.apply(&["-v"]);
    h.assert_nothing_ran(&out);
    out.expect(0);
    for (i, shown) in h.shown.iter().enumerate() {
        let n = i + 1;
        assert_eq!(&msg(&out, &format!("debug {n}")), shown);
        let var = &event(&out, &format!("debug var {n}"))["result"][format!("p{n}.stdout")];
        assert_eq!(var.as_str(), Some(shown.as_str()));
        assert_eq!(
            msg(&out, &format!("fact {n}")),
            format!("{shown}|<{shown}>")
        );
        assert_eq!(h.fx.read(&format!("t/tpl-{n}")), format!("[{shown}]\n"));
        assert_eq!(&h.fx.read(&format!("t/copy-{n}")), shown);
        assert_eq!(&msg(&out, &format!("loop {n}")), shown);
        assert_eq!(
            msg(&out, &format!("hostvars {n}")),
            format!("{shown}|{shown}")
        );
        assert_eq!(&msg(&out, &format!("vars {n}")), shown);
    }
    let included: Vec<String> = out
        .task_events("included")
        .iter()
        .map(|e| e["result"]["msg"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(included, h.shown);
}

#[test]
fn a_replayed_once_result_stays_data() {
    let h = Hostile::new();
    h.play(false, |n| {
        format!(
            concat!(
                "    - name: once {n}\n      command: cat {path}\n      once: hostile-{n}\n      register: o{n}\n",
                "    - name: replayed when {n}\n      debug:\n        msg: \"{{{{ o{n}.stdout }}}}\"\n      when: \"'{{{{ o{n}.stdout }}}}' != 'x'\"\n      ignore_errors: true\n",
            ),
            n = n,
            path = h.fx.path(&format!("payloads/{n}")).display()
        )
    });
    h.fx.apply(&[]).expect(0);
    let out = h.fx.apply(&["-v"]);
    h.assert_nothing_ran(&out);
    out.expect(0);
    for (i, shown) in h.shown.iter().enumerate() {
        let n = i + 1;
        assert_eq!(
            event(&out, &format!("once {n}"))["result"]["replayed"],
            true
        );
        assert_eq!(&msg(&out, &format!("replayed when {n}")), shown);
    }
}

/// `when: "{{ ... }}"` as ansible-core 2.19.14 runs it. The same play under
/// `ansible-playbook -i localhost, -c local` printed (cut short):
///
/// ```text
/// TASK [bool]          [DEPRECATION WARNING]: Conditionals should not be surrounded by
///                      templating delimiters such as {{ }} or {% %}. ...  / ok
/// TASK [string false]  skipping       (`sflag: "false"`: the string is evaluated, to false)
/// TASK [expression]    ok             (`expr: "1 == 1"`)
/// TASK [chain]         ok             (`ind: "{{ expr }}"`)
/// TASK [attribute]     ok             (`d: {k: "1 == 1"}`)
/// TASK [comparison]    [DEPRECATION WARNING]: Conditionals should not be surrounded ...
///                      / skipping
/// TASK [host string]   fatal: Task failed: Encountered untrusted template or expression.
/// TASK [host true]     fatal: Task failed: Encountered untrusted template or expression.
/// TASK [host empty]    fatal: Task failed: Empty conditional expressions are not allowed.
/// TASK [number]        [DEPRECATION WARNING]: ... / fatal: Task failed: Conditional result
///                      (True) was derived from value of type 'int' at '...:9:10'.
///                      Conditionals must have a boolean result.
/// TASK [list]          [DEPRECATION WARNING]: ... / fatal: ... of type 'list' ...
/// TASK [none value]    fatal: Task failed: Empty conditional expressions are not allowed.
/// TASK [yes word]      fatal: Task failed: Error while evaluating conditional: 'yes' is
///                      undefined
/// TASK [two templates] fatal: Task failed: Encountered untrusted template or expression.
/// TASK [mixed]         fatal: Task failed: Encountered untrusted template or expression.
/// TASK [block]         fatal: Task failed: Encountered untrusted template or expression.
/// TASK [filtered]      fatal: Task failed: Encountered untrusted template or expression.
/// TASK [trailing]      fatal: Task failed: Syntax error in expression. Template delimiters
///                      are not supported in expressions: expected token ':', got '}'
/// TASK [unsafe]        fatal: Task failed: Encountered untrusted template or expression.
/// ```
///
/// fixpoint's messages are its own words; the statuses are the same, and so is where the
/// deprecation warning comes, except that fixpoint does not add it to a condition that fails
/// anyway (`number`, `list`).
#[test]
fn conditions_written_as_templates_follow_ansible_core() {
    let fx = Fx::new();
    fx.write(
        "site.yml",
        &crate::roles::play_head(
            &fx,
            concat!(
                "    flag: true\n    sflag: \"false\"\n    expr: \"1 == 1\"\n    ind: \"{{ expr }}\"\n",
                "    d: {k: \"1 == 1\"}\n    num: 3\n    lst: [1]\n    nul: null\n    yesword: \"yes\"\n",
                "    mixed: \"x{{ expr }}\"\n    cond: !unsafe \"1 == 1\"\n",
                "  tasks:\n",
                "    - {name: out, command: echo true, register: t, changed_when: false}\n",
                "    - {name: out empty, command: echo, register: e, changed_when: false}\n",
                "    - {name: bool, debug: msg=x, when: \"{{ flag }}\"}\n",
                "    - {name: string false, debug: msg=x, when: \"{{ sflag }}\"}\n",
                "    - {name: expression, debug: msg=x, when: \"{{ expr }}\"}\n",
                "    - {name: chain, debug: msg=x, when: \"{{ ind }}\"}\n",
                "    - {name: attribute, debug: msg=x, when: \"{{ d.k }}\"}\n",
                "    - {name: comparison, debug: msg=x, when: \"{{ t.stdout == 'a' }}\"}\n",
                "    - {name: host string, debug: msg=x, when: \"{{ t.stdout ~ 'x' }}\", ignore_errors: true}\n",
                "    - {name: host true, debug: msg=x, when: \"{{ t.stdout }}\", ignore_errors: true}\n",
                "    - {name: host empty, debug: msg=x, when: \"{{ e.stdout }}\", ignore_errors: true}\n",
                "    - {name: number, debug: msg=x, when: \"{{ num }}\", ignore_errors: true}\n",
                "    - {name: list, debug: msg=x, when: \"{{ lst }}\", ignore_errors: true}\n",
                "    - {name: none value, debug: msg=x, when: \"{{ nul }}\", ignore_errors: true}\n",
                "    - {name: yes word, debug: msg=x, when: \"{{ yesword }}\", ignore_errors: true}\n",
                "    - {name: two templates, debug: msg=x, when: \"{{ flag }} and {{ flag }}\", ignore_errors: true}\n",
                "    - {name: mixed, debug: msg=x, when: \"{{ mixed }}\", ignore_errors: true}\n",
                "    - {name: block, debug: msg=x, when: \"{% if flag %}True{% endif %}\", ignore_errors: true}\n",
                "    - {name: filtered, debug: msg=x, when: \"{{ expr | trim }}\", ignore_errors: true}\n",
                "    - {name: trailing, debug: msg=x, when: \"{{ flag }} == True\", ignore_errors: true}\n",
                "    - {name: unsafe, debug: msg=x, when: \"{{ cond }}\", ignore_errors: true}\n",
            ),
        ),
    );
    let out = fx.apply(&[]);
    out.expect(0);
    let expected: Vec<(String, &str)> = [
        ("bool", "ok"),
        ("string false", "skipped"),
        ("expression", "ok"),
        ("chain", "ok"),
        ("attribute", "ok"),
        ("comparison", "skipped"),
        ("host string", "failed"),
        ("host true", "failed"),
        ("host empty", "failed"),
        ("number", "failed"),
        ("list", "failed"),
        ("none value", "failed"),
        ("yes word", "failed"),
        ("two templates", "failed"),
        ("mixed", "failed"),
        ("block", "failed"),
        ("filtered", "failed"),
        ("trailing", "failed"),
        ("unsafe", "failed"),
    ]
    .into_iter()
    .map(|(t, s)| (t.to_string(), s))
    .collect();
    let wrong = wrong_statuses(&out, &expected);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    for (task, words) in [
        ("host string", "untrusted"),
        ("host true", "untrusted"),
        ("host empty", "nothing"),
        ("number", "a number, not a boolean"),
        ("list", "a list, not a boolean"),
        ("none value", "nothing"),
        ("yes word", "'yes' is undefined"),
        ("two templates", "untrusted"),
        ("mixed", "untrusted"),
        ("block", "untrusted"),
        ("filtered", "untrusted"),
        ("trailing", "delimiters"),
        ("unsafe", "untrusted"),
    ] {
        let m = msg(&out, task);
        assert!(m.contains(words), "{task}: {m}");
    }
    // The deprecation warning comes where ansible-core gives it: a template that renders to a
    // boolean, and not for a trusted string named through a template.
    let w = warnings(&out);
    for task in ["\"bool\"", "\"comparison\""] {
        assert!(w.iter().any(|m| m.contains(task)), "{task}: {w:?}");
    }
    for task in ["\"string false\"", "\"expression\"", "\"chain\""] {
        assert!(!w.iter().any(|m| m.contains(task)), "{task}: {w:?}");
    }
}

/// `!unsafe` values are never templated, whichever YAML source they come from. ansible-core
/// 2.19.14 (`ansible-playbook -i localhost, -c local`) printed `{{ y }}` for each of these
/// (play vars, a nested and a whole tagged mapping, a variable naming one, `group_vars`,
/// `vars_files`, `-e @file`, a `debug` parameter, `copy` content, `set_fact` of one), and types
/// `!unsafe "123"` as the number 123.
#[test]
fn unsafe_values_are_never_templated() {
    let fx = Fx::new();
    let state = fx.state_dir();
    fx.write(
        "inventory.yml",
        &format!(
            "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n      fixpoint_state_dir: {}\n      iv: !unsafe \"{{{{ y }}}}\"\n",
            state.display()
        ),
    );
    fx.write("group_vars/all.yml", "gv: !unsafe \"{{ y }}\"\n");
    fx.write("host_vars/localhost.yml", "hv: !unsafe \"{{ y }}\"\n");
    fx.write("vf.yml", "vfv: !unsafe \"{{ y }}\"\n");
    fx.write("ef.yml", "efv: !unsafe \"{{ y }}\"\n");
    fx.write("iv.yml", "inc: !unsafe \"{{ y }}\"\n");
    fx.write("roles/r/defaults/main.yml", "rv: !unsafe \"{{ y }}\"\n");
    fx.write(
        "roles/r/tasks/main.yml",
        "- name: role\n  debug:\n    msg: \"{{ rv }}\"\n",
    );
    fx.write(
        "site.yml",
        &format!(
            concat!(
                "- hosts: localhost\n  gather_facts: false\n  vars_files: [vf.yml]\n",
                "  vars:\n    base: {base}\n    y: rendered\n",
                "    x: !unsafe \"{{{{ y }}}}\"\n",
                "    nested: {{a: !unsafe \"{{{{ y }}}}\", b: \"{{{{ y }}}}\"}}\n",
                "    whole: !unsafe {{a: \"{{{{ y }}}}\", \"{{{{ y }}}}\": 1}}\n",
                "    ref: \"{{{{ x }}}}\"\n",
                "    num: !unsafe \"123\"\n",
                "  roles: [r]\n",
                "  tasks:\n",
                "    - {{name: var, debug: {{msg: \"{{{{ x }}}}\"}}}}\n",
                "    - {{name: debug var, debug: {{var: x}}}}\n",
                "    - {{name: nested, debug: {{msg: \"{{{{ nested }}}}\"}}}}\n",
                "    - {{name: whole, debug: {{msg: \"{{{{ whole }}}}\"}}}}\n",
                "    - {{name: ref, debug: {{msg: \"{{{{ ref }}}}\"}}}}\n",
                "    - {{name: num, debug: {{msg: \"{{{{ num + 1 }}}}\"}}}}\n",
                "    - {{name: sources, debug: {{msg: \"{{{{ [iv, gv, hv, vfv, efv, jv] | join('|') }}}}\"}}}}\n",
                "    - {{name: param, debug: {{msg: !unsafe \"{{{{ y }}}}\"}}}}\n",
                "    - name: copy\n      copy:\n        content: !unsafe \"{{{{ y }}}}\\n\"\n        dest: \"{{{{ base }}}}/unsafe\"\n",
                "    - {{name: set, set_fact: {{sf: \"{{{{ x }}}}\"}}}}\n",
                "    - {{name: fact, debug: {{msg: \"{{{{ sf }}}}\"}}}}\n",
                "    - {{name: loop, debug: {{msg: \"{{{{ item }}}}\"}}, loop: !unsafe [\"{{{{ y }}}}\"]}}\n",
                "    - {{name: hostvars, debug: {{msg: \"{{{{ hostvars.localhost.iv }}}}\"}}}}\n",
                "    - include_vars: iv.yml\n",
                "    - {{name: included, debug: {{msg: \"{{{{ inc }}}}\"}}}}\n",
            ),
            base = fx.path("t").display()
        ),
    );
    std::fs::create_dir_all(fx.path("t")).unwrap();
    let out = fx.run(&[
        "apply",
        "--format",
        "json",
        "-v",
        "-i",
        "inventory.yml",
        "-e",
        "@ef.yml",
        // Ansible's JSON form of an unsafe string, as its `-e` JSON reading accepts it.
        "-e",
        r#"{"jv": {"__ansible_unsafe": "{{ y }}"}}"#,
        "site.yml",
    ]);
    out.expect(0);
    let lit = "{{ y }}";
    for task in [
        "var", "ref", "param", "fact", "loop", "hostvars", "included", "role",
    ] {
        assert_eq!(msg(&out, task), lit, "{task}");
    }
    let result = |task: &str| event(&out, task)["result"].clone();
    assert_eq!(result("debug var")["x"], lit);
    // Only the tagged value is literal: its untagged neighbour is rendered.
    assert_eq!(
        result("nested")["msg"],
        serde_json::json!({"a": lit, "b": "rendered"})
    );
    assert_eq!(
        result("whole")["msg"],
        serde_json::json!({"a": lit, lit: 1})
    );
    assert_eq!(result("num")["msg"], 124);
    assert_eq!(msg(&out, "sources"), [lit; 6].join("|"));
    assert_eq!(fx.read("t/unsafe"), "{{ y }}\n");

    // `ansible-inventory --list` shows the mark (`{"__ansible_unsafe": ...}`), `--host` the
    // plain value; so does `fixpoint inventory`.
    let list = fx.run(&["inventory", "-i", "inventory.yml", "--list"]);
    let list: Value = serde_json::from_str(&list.expect(0).stdout).unwrap();
    assert_eq!(
        list["_meta"]["hostvars"]["localhost"]["iv"],
        serde_json::json!({"__ansible_unsafe": lit})
    );
    let host = fx.run(&["inventory", "-i", "inventory.yml", "--host", "localhost"]);
    let host: Value = serde_json::from_str(&host.expect(0).stdout).unwrap();
    assert_eq!(host["iv"], lit);
}

/// A condition is code: one tagged `!unsafe` cannot be evaluated. ansible-core fails the task
/// when it reaches it ("Encountered untrusted template or expression"); fixpoint refuses the
/// playbook before touching any host.
#[test]
fn an_unsafe_condition_is_refused() {
    let fx = Fx::new();
    fx.play("    - name: t\n      debug: msg=x\n      when: !unsafe \"1 == 1\"\n");
    let out = fx.run(&["validate", "site.yml"]);
    out.expect(2);
    assert!(out.stderr.contains("!unsafe"), "{}", out.stderr);
}

/// The trust that `register`, `set_fact` and `include_vars` keep (ansible-core 2.19's tags)
/// never reaches what a host returned: not through a registered loop's `item` of a host's
/// list, a fact copied from a fact, a registered `debug` message, a copy of a registered
/// loop, nor `include_vars` merging a host's facts into its variables (which rendered them
/// before: the agent's environment ran `touch`).
#[test]
fn kept_trust_never_reaches_what_a_host_returned() {
    let h = Hostile::new();
    h.fx.write("merge.yml", "extra: 1\n");
    h.play(true, |n| {
        format!(
            concat!(
                "    - name: items {n}\n      command: {{argv: [echo, \"{{{{ item }}}}\"]}}\n      loop: \"{{{{ p{n}.stdout_lines }}}}\"\n      register: li{n}\n      changed_when: false\n",
                "    - name: registered item {n}\n      assert: {{that: \"{{{{ li{n}.results[0].item }}}}\"}}\n      ignore_errors: true\n",
                "    - name: set {n}\n      set_fact: {{g{n}: \"{{{{ p{n}.stdout }}}}\", r{n}: \"{{{{ li{n}.results }}}}\"}}\n",
                "    - name: set again {n}\n      set_fact: {{h{n}: \"{{{{ g{n} }}}}\"}}\n",
                "    - name: fact chain {n}\n      debug: msg=x\n      when: \"{{{{ h{n} }}}}\"\n      ignore_errors: true\n",
                "    - name: copied results {n}\n      assert: {{that: \"{{{{ r{n}[0].item }}}}\"}}\n      ignore_errors: true\n",
                "    - name: shown {n}\n      debug: {{msg: \"{{{{ p{n}.stdout }}}}\"}}\n      register: d{n}\n",
                "    - name: debug msg {n}\n      assert: {{that: \"{{{{ d{n}.msg }}}}\"}}\n      ignore_errors: true\n",
                "    - name: tag {n}\n      debug: {{msg: \"{{{{ h{n} is ansible._protomatter.tagged_with('TrustedAsTemplate') }}}}\"}}\n",
                "    - name: merged {n}\n      include_vars: {{file: merge.yml, name: ansible_env, hash_behaviour: merge}}\n",
                "    - name: merged shown {n}\n      debug: {{msg: \"{{{{ ansible_env.HOSTILE_{n} }}}}\"}}\n",
                "    - name: merged when {n}\n      debug: msg=x\n      when: \"{{{{ ansible_env.HOSTILE_{n} }}}}\"\n      ignore_errors: true\n",
            ),
            n = n
        )
    });
    let out = h.apply_with_env();
    h.assert_nothing_ran(&out);
    out.expect(0);
    let mut expected = Vec::new();
    for n in 1..=h.shown.len() {
        for (task, status) in [
            ("registered item", "failed"),
            ("fact chain", "failed"),
            ("copied results", "failed"),
            ("debug msg", "failed"),
            ("merged when", "failed"),
        ] {
            expected.push((format!("{task} {n}"), status));
            let m = msg(&out, &format!("{task} {n}"));
            assert!(m.contains("untrusted"), "{task} {n}: {m}");
        }
        let tag = event(&out, &format!("tag {n}"));
        assert_eq!(tag["result"]["msg"], false, "{tag}");
        assert_eq!(msg(&out, &format!("merged shown {n}")), h.shown[n - 1]);
    }
    let wrong = wrong_statuses(&out, &expected);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Kept trust vouches for a string at its own path only, and only while its variable holds
/// it: a host's string with the very text of a trusted one (`1 == 1`) at another path, a fact
/// named by a template key, a fact or a registered loop set again from a host, stay data.
#[test]
fn kept_trust_is_never_lent_to_equal_text() {
    let fx = Fx::new();
    fx.write(
        "site.yml",
        &format!(
            r#"- hosts: localhost
  gather_facts: false
  vars:
    fixpoint_state_dir: {}
    kname: k2
  tasks:
    - command: echo 1 == 1
      register: e
      changed_when: false
    - command: {{argv: [echo, "{{{{ item }}}}"]}}
      loop: ['1 == 1']
      register: cl
      changed_when: false
    - name: item
      assert: {{that: "{{{{ cl.results[0].item }}}}"}}
    - name: stdout
      assert: {{that: "{{{{ cl.results[0].stdout }}}}"}}
      ignore_errors: true
    - set_fact: {{t: "1 == 1", u: "{{{{ e.stdout }}}}"}}
    - name: literal fact
      assert: {{that: "{{{{ t }}}}"}}
    - name: host fact
      assert: {{that: "{{{{ u }}}}"}}
      ignore_errors: true
    - set_fact: {{"{{{{ kname }}}}": "{{{{ e.stdout }}}}", other: "1 == 1"}}
    - name: keyed fact
      assert: {{that: "{{{{ k2 }}}}"}}
      ignore_errors: true
    - set_fact: {{t: "{{{{ e.stdout }}}}"}}
    - name: fact set again
      assert: {{that: "{{{{ t }}}}"}}
      ignore_errors: true
    - command: {{argv: [echo, "{{{{ item }}}}"]}}
      loop: "{{{{ e.stdout_lines }}}}"
      register: cl
      changed_when: false
    - name: registered again
      assert: {{that: "{{{{ cl.results[0].item }}}}"}}
      ignore_errors: true
    - name: tag
      debug: {{msg: "{{{{ e.stdout is ansible._protomatter.tagged_with('TrustedAsTemplate') }}}}"}}
"#,
            fx.state_dir().display()
        ),
    );
    let out = fx.apply(&["-v"]);
    out.expect(0);
    let expected: Vec<(String, &str)> = [
        ("item", "ok"),
        ("stdout", "failed"),
        ("literal fact", "ok"),
        ("host fact", "failed"),
        ("keyed fact", "failed"),
        ("fact set again", "failed"),
        ("registered again", "failed"),
    ]
    .into_iter()
    .map(|(t, s)| (t.to_string(), s))
    .collect();
    let wrong = wrong_statuses(&out, &expected);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    for task in [
        "stdout",
        "host fact",
        "keyed fact",
        "fact set again",
        "registered again",
    ] {
        assert!(
            msg(&out, task).contains("untrusted"),
            "{task}: {}",
            msg(&out, task)
        );
    }
    let tag = event(&out, "tag");
    assert_eq!(tag["result"]["msg"], false, "{tag}");
}

/// A lookup renders the templates of the string constants written in its terms
/// (`lookup('pipe', 'echo {{ x }}')`, ansible-core's backward compatibility): a value a host
/// returned, passed as a term directly, inside a list or dict, through a conditional
/// expression or a variable, is a value, never a template, while a constant beside it is.
#[test]
fn lookup_terms_render_only_constants_never_host_values() {
    let h = Hostile::new();
    h.play(false, |n| {
        format!(
            concat!(
                "    - name: lookup {n}\n      debug:\n        msg: \"{{{{ query('list', p{n}.stdout, [p{n}.stdout, '{{{{ n }}}}'], {{'k': p{n}.stdout}}, p{n}.stdout if true else '{{{{ n }}}}', w) }}}}\"\n",
                "      vars:\n        n: {n}\n        w: \"{{{{ p{n}.stdout }}}}\"\n",
            ),
            n = n
        )
    });
    let out = h.fx.apply(&["-v"]);
    h.assert_nothing_ran(&out);
    out.expect(0);
    for (i, shown) in h.shown.iter().enumerate() {
        let n = i + 1;
        let ev = event(&out, &format!("lookup {n}"));
        assert_eq!(
            ev["result"]["msg"],
            serde_json::json!([shown, [shown, n], {"k": shown}, shown, shown]),
            "{}",
            out.stdout
        );
    }
}
