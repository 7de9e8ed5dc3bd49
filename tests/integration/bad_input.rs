//! Input at the edges (non-ASCII text where a message cuts it, numbers too big to count with)
//! never panics: a value the loader can judge is refused with its `file:line:col` and exit 2, a
//! value known only at run time fails that host with a message, and one that can be honoured is.
//! And a table of the usual mistakes: each refusal names its `file:line:col` and a hint, and a
//! task that fails on a host names where it is written.

use crate::fx::Fx;

/// A run must end by itself, never by a panic (exit 101).
fn no_panic(out: &crate::fx::Out) {
    assert!(
        out.code != 101 && !out.stderr.contains("panicked"),
        "panic:\n{}",
        out.stderr
    );
}

#[test]
fn a_loop_over_non_ascii_text_that_is_not_a_list_fails_the_host_with_a_message() {
    let fx = Fx::new();
    fx.play("    - name: looped\n      debug:\n        msg: x\n      loop: \"{{ 'é' * 60 }}\"\n");
    let out = fx.apply(&[]);
    no_panic(&out);
    out.expect(1);
    let ev = &out.task_events("looped")[0];
    assert_eq!(ev["status"], "failed");
    let msg = ev["msg"].as_str().unwrap();
    assert!(msg.contains("`loop` must be a list"), "{msg}");
    assert!(msg.contains("éééé…"), "{msg}");
}

#[test]
fn with_sequence_at_the_end_of_the_integers_stops_there_and_refuses_what_it_cannot_count() {
    let fx = Fx::new();
    // As in ansible-core: the last two 64-bit integers, then the end.
    fx.play(concat!(
        "    - name: top\n      debug:\n        msg: \"{{ item }}\"\n",
        "      with_sequence: start=9223372036854775806 end=9223372036854775807\n",
        "    - name: bottom\n      debug:\n        msg: \"{{ item }}\"\n",
        "      with_sequence: start=-9223372036854775807 end=-9223372036854775808 stride=-1\n",
    ));
    let out = fx.apply(&["-v"]);
    no_panic(&out);
    out.expect(0);
    let items = |task: &str| -> Vec<String> {
        out.task_events(task)
            .iter()
            .map(|e| e["item"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(items("top"), ["9223372036854775806", "9223372036854775807"]);
    assert_eq!(
        items("bottom"),
        ["-9223372036854775807", "-9223372036854775808"]
    );
    for (spec, why) in [
        ("start=1 count=9223372036854775807 stride=2", "out of range"),
        ("start=1 end=1 format=%99999999999d", "width"),
    ] {
        fx.play(&format!(
            "    - name: seq\n      debug:\n        msg: \"{{{{ item }}}}\"\n      with_sequence: {spec}\n"
        ));
        let out = fx.apply(&[]);
        no_panic(&out);
        out.expect(1);
        let msg = out.task_events("seq")[0]["msg"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(msg.contains("with_sequence") && msg.contains(why), "{msg}");
    }
}

#[test]
fn durations_from_the_playbook_that_cannot_be_waited_are_refused_at_load_time() {
    let fx = Fx::new();
    for (keyword, value, line) in [
        // ansible-core refuses a task timeout above 100000000 seconds.
        ("timeout", "99999999999999", 10),
        ("timeout", "100000001", 10),
        ("pause", ".inf", 12),
        ("pause", "1e300", 12),
    ] {
        let extra = if keyword == "pause" {
            format!("      loop: [1, 2]\n      loop_control:\n        pause: {value}\n")
        } else {
            format!("      {keyword}: {value}\n")
        };
        fx.play(&format!(
            "    - name: t\n      command: \"true\"\n      changed_when: false\n{extra}"
        ));
        let out = fx.apply(&[]);
        no_panic(&out);
        out.expect(2);
        assert!(
            out.stderr.contains(&format!("site.yml:{line}:16")),
            "{keyword}: {value}:\n{}",
            out.stderr
        );
        assert!(
            out.stderr.contains(&format!("`{keyword}`")),
            "{}",
            out.stderr
        );
    }
    // The largest task timeout ansible-core takes is taken.
    fx.play("    - name: t\n      command: \"true\"\n      changed_when: false\n      timeout: 100000000\n");
    fx.apply(&[]).expect(0);
}

#[test]
fn retries_beyond_32_bits_are_not_cut_down() {
    let fx = Fx::new();
    // 2^32 retries: cut to 32 bits this was 0, and the task failed after one attempt.
    fx.play(concat!(
        "    - name: retried\n      command: \"true\"\n      register: r\n      changed_when: false\n",
        "      until: r.attempts >= 2\n      retries: 4294967296\n      delay: 0\n",
    ));
    let out = fx.apply(&["-v"]);
    no_panic(&out);
    out.expect(0);
    assert_eq!(out.task_events("retried")[0]["result"]["attempts"], 2);
}

#[test]
fn a_lock_timeout_or_forks_too_large_to_count_mean_no_bound() {
    let fx = Fx::new();
    fx.play(concat!(
        "    - name: t\n      command: \"true\"\n      changed_when: false\n",
        "    - name: throttled\n      command: \"true\"\n      changed_when: false\n      throttle: 9223372036854775807\n",
    ));
    let max = u64::MAX.to_string();
    for flag in ["--lock-timeout", "--forks"] {
        let out = fx.apply(&[flag, &max]);
        no_panic(&out);
        out.expect(0);
    }
    // Facts are gathered with the same bound.
    fx.write(
        "site.yml",
        &crate::roles::play_head(&fx, "  gather_facts: true\n  tasks: []\n")
            .replace("  gather_facts: false\n", ""),
    );
    let out = fx.apply(&["--forks", &max]);
    no_panic(&out);
    out.expect(0);
}

#[test]
fn a_port_number_out_of_range_fails_the_host_instead_of_wrapping_round() {
    let fx = Fx::new();
    fx.write(
        "hosts.ini",
        "web ansible_host=127.0.0.1 ansible_port=70000\n",
    );
    fx.write(
        "site.yml",
        "- hosts: web\n  gather_facts: false\n  tasks:\n    - name: t\n      command: \"true\"\n      changed_when: false\n",
    );
    let out = fx.apply(&["-i", "hosts.ini"]);
    no_panic(&out);
    out.expect(1);
    let msg = out.task_events("t")[0]["msg"].as_str().unwrap().to_string();
    assert!(
        msg.contains("ansible_port `70000` is not a port number"),
        "{msg}"
    );
}

/// One bad input: the playbook (`site.yml`), the inventory (`hosts.ini`) and command-line flags
/// it runs with, where the error must point (nothing for a flag), and a piece of the hint it
/// must give.
struct Bad {
    what: &'static str,
    playbook: String,
    inventory: Option<&'static str>,
    args: &'static [&'static str],
    at: Option<&'static str>,
    hint: &'static str,
}

/// A playbook on localhost whose task list is `tasks` (YAML, indented 4): its first task is at
/// line 4.
fn tasks(tasks: &str) -> String {
    format!("- hosts: localhost\n  gather_facts: false\n  tasks:\n{tasks}")
}

/// The mistakes people make, each refused before any host is touched with where it is
/// (`file:line:col`), what was expected and, where the fix is obvious, the fix.
fn table() -> Vec<Bad> {
    let bad = |what, playbook: String, at, hint| Bad {
        what,
        playbook,
        inventory: None,
        args: &[],
        at: Some(at),
        hint,
    };
    // A mistake in the inventory or on the command line, under a playbook that is fine.
    let run = |what, inventory, args, at, hint| Bad {
        what,
        playbook: tasks("    - name: t\n      debug: {msg: x}\n"),
        inventory,
        args,
        at,
        hint,
    };
    let hosts = Some("[web]\nw1 ansible_connection=local\n");
    vec![
        run(
            "an INI host line with a word that is not name=value",
            Some("[web]\nw1 port=22 oops\n"),
            &[],
            Some("hosts.ini:2:12"),
            "a host line is `name [name=value ...]`",
        ),
        run(
            "an INI section of an unknown type",
            Some("[web:kids]\nw1\n"),
            &[],
            Some("hosts.ini:1:6"),
            "`[web:children]` for groups",
        ),
        run(
            "an INI children section listing hosts",
            Some("[web]\nw1\n[site:children]\nweb w1\n"),
            &[],
            Some("hosts.ini:4:1"),
            "list one group name per line",
        ),
        run(
            "an INI vars line without `=`",
            Some("[web]\nw1\n[web:vars]\nport 80\n"),
            &[],
            Some("hosts.ini:4:1"),
            "`name=value`",
        ),
        run(
            "an INI children entry naming a group never defined",
            Some("[webs]\nw1\n[site:children]\nweb\n"),
            &[],
            Some("hosts.ini:4:1"),
            "did you mean `webs`?",
        ),
        run(
            "a YAML inventory key misspelt",
            Some("all:\n  children:\n    web:\n      host:\n        w1:\n"),
            &[],
            Some("hosts.ini:4:7"),
            "did you mean `hosts`?",
        ),
        run(
            "--limit matching no host",
            hosts,
            &["--limit", "webb"],
            None,
            "did you mean `web`?",
        ),
        run(
            "-e @file that does not exist",
            None,
            &["-e", "@missing.yml"],
            Some("missing.yml"),
            "relative paths are relative to the current directory",
        ),
        run(
            "-e with broken JSON",
            None,
            &["-e", "{\"a\": [1,}"],
            Some("<-e>:1:"),
            "write a JSON object",
        ),
        run(
            "--forks that is not a number",
            None,
            &["--forks", "many"],
            None,
            "write a whole number of at least 1",
        ),
        run(
            "--forks 0",
            None,
            &["--forks", "0"],
            None,
            "write a whole number of at least 1",
        ),
        run(
            "--shard without a count",
            None,
            &["--shard", "3"],
            None,
            "write the shard as INDEX/COUNT",
        ),
        run(
            "--shard with the index past the count",
            None,
            &["--shard", "2/2"],
            None,
            "the index counts from 0",
        ),
        bad(
            "a task keyword misspelt",
            tasks("    - name: t\n      debug: {msg: x}\n      whne: true\n"),
            "site.yml:6:7",
            "did you mean `when`?",
        ),
        bad(
            "a module misspelt",
            tasks("    - name: t\n      debgu: {msg: x}\n"),
            "site.yml:5:7",
            "did you mean `debug`?",
        ),
        bad(
            "a module parameter misspelt",
            tasks("    - name: t\n      copy:\n        content: x\n        dset: /tmp/x\n"),
            "site.yml:7:9",
            "did you mean `dest`?",
        ),
        bad(
            "a required parameter missing",
            tasks("    - name: t\n      copy:\n        content: x\n"),
            "site.yml:5:7",
            "see the `copy` module",
        ),
        bad(
            "a command without a guard",
            tasks("    - name: t\n      command: /bin/true\n"),
            "site.yml:5:7",
            "`changed_when: false` if the command only reads",
        ),
        bad(
            "two modules in one task",
            tasks("    - name: t\n      debug: {msg: x}\n      file: {path: /tmp}\n"),
            "site.yml:6:7",
            "split it into two tasks",
        ),
        bad(
            "a task without a module",
            tasks("    - name: t\n      when: true\n"),
            "site.yml:4:7",
            "add one module",
        ),
        bad(
            "an unclosed quote",
            tasks("    - name: t\n      debug: {msg: \"x}\n"),
            "site.yml:",
            "check indentation and quoting",
        ),
        bad(
            "a boolean keyword that is not one",
            tasks("    - name: t\n      debug: {msg: x}\n      ignore_errors: maybe\n"),
            "site.yml:6:22",
            "use true or false",
        ),
        bad(
            "a config lookup of a setting fixpoint does not read",
            tasks("    - name: t\n      debug:\n        msg: \"{{ lookup('config', 'DEFAULT_TIMEOUT') }}\"\n"),
            "site.yml:4:7",
            "the ansible-core settings fixpoint reads",
        ),
        bad(
            "an invalid register name",
            tasks("    - name: t\n      debug: {msg: x}\n      register: 1x\n"),
            "site.yml:6:17",
            "variable names start with a letter",
        ),
        bad(
            "a filter that does not exist",
            tasks("    - name: t\n      debug:\n        msg: \"{{ 1 | nosuchfilter }}\"\n"),
            // The task, the parameter named in the message.
            "site.yml:4:7",
            "fixpoint has no filter of that name",
        ),
        bad(
            "a template that does not parse",
            tasks("    - name: t\n      debug:\n        msg: \"{{ 1 + }}\"\n"),
            "site.yml:4:7",
            "fix the Jinja2 syntax",
        ),
        bad(
            "an imported task file that is missing",
            tasks("    - import_tasks: missing.yml\n"),
            "site.yml:4:21",
            "fix the name, or create the file",
        ),
        bad(
            "a role that is not found",
            "- hosts: localhost\n  gather_facts: false\n  roles:\n    - nosuchrole\n".into(),
            "site.yml:4:",
            "put the role in roles/",
        ),
        bad(
            "a play without hosts",
            "- gather_facts: false\n  tasks: []\n".into(),
            "site.yml:1:",
            "add `hosts: localhost`",
        ),
        bad(
            "a play keyword misspelt",
            "- hosts: localhost\n  gather_fact: false\n  tasks: []\n".into(),
            "site.yml:2:3",
            "did you mean `gather_facts`?",
        ),
        bad(
            "a strategy fixpoint does not run",
            "- hosts: localhost\n  strategy: debug\n  tasks: []\n".into(),
            "site.yml:2:",
            "fixpoint runs `linear`, `free` and `host_pinned`",
        ),
        bad(
            "an imported playbook that is missing",
            "- import_playbook: other.yml\n".into(),
            "site.yml:1:",
            "it is relative to the importing playbook's directory",
        ),
        bad(
            "module parameters written as a list",
            tasks("    - name: t\n      copy:\n        - dest: /tmp/x\n"),
            "site.yml:6:",
            "indented under `copy:`",
        ),
        bad(
            "a vars_prompt with no default and no terminal to ask on",
            "- hosts: localhost\n  vars_prompt:\n    - name: who\n  tasks: []\n".into(),
            "site.yml:3:7",
            "give it on the command line (`-e who=...`)",
        ),
        bad(
            "a sudo flag that would change who fixpoint runs as",
            tasks("    - name: t\n      debug: {msg: x}\n      become_flags: \"-H -u nobody\"\n"),
            "site.yml:6:21",
            "fixpoint passes sudo -H",
        ),
        bad(
            "once with a background job (async, poll: 0)",
            tasks("    - name: t\n      command: id\n      args: {creates: /x}\n      once: k\n      async: 10\n      poll: 0\n"),
            "site.yml:9:13",
            "remove `once`",
        ),
        bad(
            "a timeout that is not a number of seconds",
            tasks("    - name: t\n      debug: {msg: x}\n      timeout: soon\n"),
            "site.yml:6:16",
            "e.g. `timeout: 300`",
        ),
        bad(
            "a notify name no handler of the play answers",
            tasks("    - name: t\n      debug: {msg: x}\n      notify: nosuch\n"),
            "site.yml:4:7",
            "add a handler with that name",
        ),
        bad(
            "a listen topic given as a template (ansible-core never renders one)",
            format!(
                "{}  handlers:\n    - name: r\n      listen: \"restart {{{{ svc }}}}\"\n      debug: {{msg: x}}\n",
                tasks("    - name: t\n      debug: {msg: x}\n")
            ),
            "site.yml:8:15",
            "as plain text",
        ),
    ]
}

#[test]
fn every_refusal_names_where_it_is_and_how_to_fix_it() {
    let fx = Fx::new();
    let mut wrong = Vec::new();
    for case in table() {
        fx.write("site.yml", &case.playbook);
        let mut args = vec!["apply"];
        if let Some(inventory) = case.inventory {
            fx.write("hosts.ini", inventory);
            args.extend(["-i", "hosts.ini"]);
        }
        args.extend(case.args);
        args.push("site.yml");
        let out = fx.run(&args);
        no_panic(&out);
        let e = &out.stderr;
        let located = case.at.is_none_or(|at| {
            e.lines()
                .any(|l| l.trim_start().starts_with("--> ") && l.contains(at))
        });
        // A flag value clap refuses carries its hint in clap's own message.
        let hinted =
            (e.contains("= help: ") || e.contains("error: invalid value")) && e.contains(case.hint);
        if out.code != 2 || !located || !hinted || !out.stdout.is_empty() {
            wrong.push(format!(
                "{} (exit {}, want {:?} and a hint with {:?}):\n{e}",
                case.what, out.code, case.at, case.hint
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_play_whose_hosts_match_nothing_is_skipped_with_where_it_is_and_the_near_name() {
    // As ansible-playbook: a warning and the play skipped, not an error.
    let fx = Fx::new();
    fx.write("hosts.ini", "[web]\nw1 ansible_connection=local\n");
    fx.write(
        "site.yml",
        "- hosts: webb\n  gather_facts: false\n  tasks:\n    - debug: {msg: x}\n",
    );
    let out = fx.run(&["apply", "-i", "hosts.ini", "site.yml"]);
    out.expect(0);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(
        all.contains("no hosts matched `webb` (written at site.yml:1:"),
        "{all}"
    );
    assert!(all.contains("did you mean `web`?"), "{all}");
    // Without -i, the hint is the inventory.
    let out = fx.run(&["apply", "site.yml"]);
    out.expect(0);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(all.contains("give the inventory with -i"), "{all}");
}

#[test]
fn a_task_failing_on_a_host_names_where_the_task_is_written() {
    let fx = Fx::new();
    fx.play("    - name: fails\n      command: /bin/false\n      changed_when: false\n");
    let out = fx.run(&["apply", "site.yml"]);
    out.expect(1);
    // The line under the result says where the task is, as ansible-core's "The error appears
    // to be in ..." does.
    let task_at = |out: &crate::fx::Out, at: &str| {
        out.stdout
            .lines()
            .any(|l| l.starts_with("  task: ") && l.ends_with(at))
    };
    assert!(
        out.stdout.contains("fatal: [localhost]: FAILED!"),
        "{}",
        out.stdout
    );
    assert!(task_at(&out, "site.yml:7:7"), "{}", out.stdout);
    // An unreachable host's line names the task it could not run too.
    fx.write(
        "hosts.ini",
        "web ansible_host=127.0.0.1 ansible_port=1 ansible_user=nobody\n",
    );
    fx.write(
        "site.yml",
        "- hosts: web\n  gather_facts: false\n  tasks:\n    - name: t\n      command: \"true\"\n      changed_when: false\n",
    );
    let out = fx.run(&["apply", "-i", "hosts.ini", "--timeout", "5", "site.yml"]);
    out.expect(1);
    assert!(
        out.stdout.contains("fatal: [web]: UNREACHABLE!"),
        "{}",
        out.stdout
    );
    assert!(task_at(&out, "site.yml:4:7"), "{}", out.stdout);
}
