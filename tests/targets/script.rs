//! Reads a script target's `runme.sh` by code: the `ansible-playbook` commands it runs, each with
//! its playbook, inventory, `-b`, `-e` values and the environment it runs in (`export`s before
//! it, assignments in front of it), so that each run can be repeated under both tools. Only
//! what fixpoint understands is taken; anything else makes the run not comparable, with why.
//! The script's other commands (greps of the output, `ln`, `pip`, ...) are not repeated.

// `ANSIBLE_*` settings fixpoint reads as ansible-core does (README, "ansible-core's settings").
use fixpoint::config::ANSIBLE_ENV as UNDERSTOOD_ENV;

use crate::shell::{
    assignment, for_loop, logical_lines, substitute, substitutions, words, Shell, Word,
};

/// `ANSIBLE_*` settings that change nothing on the runner's hosts, with why.
const NEUTRAL_ENV: &[(&str, &str)] = &[
    (
        "ANSIBLE_BECOME_ALLOW_SAME_USER",
        // It lets ansible-core become the user it logged in as (ansible-test logs in as root
        // and becomes root); the runner logs in as fpsudo and becomes root, never the same user.
        "never the same user here",
    ),
    (
        "ANSIBLE_DEBUG",
        // ansible-core's own debug lines, which the script greps; nothing a play does changes.
        "debug output only",
    ),
];

/// One `-i` of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inventory {
    /// ansible-test's inventory (`../../inventory`): the runner's loopback `testhost`.
    Shared,
    /// The target's own, as written (`-i inventory.handlers`, `-i host1,host2`), relative to
    /// the target's directory.
    Own(String),
}

/// One `ansible-playbook` command of a `runme.sh`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaybookRun {
    /// The playbook, relative to the target's directory.
    pub playbook: String,
    /// Its `-i`s, in order; none runs it on the implicit `localhost` (this machine, over the
    /// local connection).
    pub inventories: Vec<Inventory>,
    /// `-b`.
    pub become_: bool,
    /// The `-e` values, as written (`k=v`, `@file`, JSON), with `${OUTPUT_DIR}` left to the
    /// runner.
    pub extra_vars: Vec<String>,
    /// The `ANSIBLE_*` settings fixpoint reads, in order.
    pub env: Vec<(String, String)>,
    /// Options both tools take, as written: `--tags`/`--skip-tags`/`--limit`/`--forks`/
    /// `--vault-password-file` with their values, `--check`, `--diff`, `--force-handlers`.
    pub options: Vec<String>,
    /// Why the run cannot be compared, when it cannot.
    pub not_comparable: Option<String>,
    /// The script checks this run's output (a pipe or a redirection): not compared.
    pub output_checked: bool,
}

impl PlaybookRun {
    /// Whether it runs on the loopback `testhost` alone, as a role target does.
    pub fn on_testhost_only(&self) -> bool {
        self.inventories == [Inventory::Shared]
    }

    /// The row's name: the target for its first run, else the target with the playbook (and
    /// `-b` and the shared options), e.g. `fetch (run_fetch_tests.yml -b)`.
    pub fn label(&self, target: &str, first: bool) -> String {
        if first {
            return target.to_string();
        }
        let b = if self.become_ { " -b" } else { "" };
        let options: String = self.options.iter().map(|o| format!(" {o}")).collect();
        format!("{target} ({}{b}{options})", self.playbook)
    }
}

/// A run of a `runme.sh` and the values of the shell `for` loops around it.
#[derive(Debug)]
pub struct ScriptRun {
    pub run: PlaybookRun,
    /// `(variable, value, its place in the list from 1)` of each enclosing `for` loop,
    /// outermost first.
    pub bindings: Vec<(String, String, usize)>,
}

impl ScriptRun {
    /// The row's name: the target for its first run outside loops, else the target with the
    /// playbook (and `-b`, the shared options and the loop values), e.g.
    /// `fetch (run_fetch_tests.yml -b)`, `meta_tasks (test_end_host.yml, test_strategy=free)`.
    pub fn label(&self, target: &str, first: bool) -> String {
        if first && self.bindings.is_empty() {
            return self.run.label(target, true);
        }
        let plain = self.run.label(target, false);
        if self.bindings.is_empty() {
            return plain;
        }
        // A long value (a JSON `-e`) is named by its place in the loop's list.
        let values: Vec<String> = self
            .bindings
            .iter()
            .map(
                |(k, v, n)| match v.len() <= 24 && !v.contains(char::is_whitespace) {
                    true => format!("{k}={v}"),
                    false => format!("{k} #{n}"),
                },
            )
            .collect();
        format!("{}, {})", plain.trim_end_matches(')'), values.join(", "))
    }
}

/// The `ansible-playbook` runs of a `runme.sh`, in order, with the bodies of `for` loops over
/// literal words repeated for each word (a loop over `$(seq ...)` is read once, its variable
/// unknown). Function bodies (a `cleanup` run from a `trap`) and here-documents are not read:
/// they are not the target's runs in order.
pub fn parse(text: &str) -> Vec<ScriptRun> {
    let mut runs = Vec::new();
    walk(&logical_lines(text), &[], &mut Shell::default(), &mut runs);
    runs
}

/// Reads `lines` in order, repeating the bodies of literal `for` loops.
fn walk(
    lines: &[String],
    bindings: &[(String, String, usize)],
    shell: &mut Shell,
    runs: &mut Vec<ScriptRun>,
) {
    let mut i = 0;
    while i < lines.len() {
        let Some((name, values)) = for_loop(&lines[i]) else {
            command_line(&shell.expand(&lines[i]), bindings, shell, runs);
            i += 1;
            continue;
        };
        // A loop on one line (`for i in 1 2; do cmd; done`): its body is the text between.
        if let (Some(d), Some(e)) = (lines[i].find("; do "), lines[i].rfind("done")) {
            let body = [lines[i][d + 5..e].trim().trim_end_matches(';').to_string()];
            repeat(&body, &name, values, bindings, shell, runs);
            i += 1;
            continue;
        }
        // The body: up to the `done` that closes this loop (`do` may be on the next line).
        let mut depth = 1;
        let mut end = i + 1;
        while end < lines.len() {
            let first = lines[end].split([' ', ';']).next().unwrap_or("");
            if matches!(first, "for" | "while" | "until") {
                depth += 1;
            } else if first == "done" {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            end += 1;
        }
        let body: Vec<String> = lines[i + 1..end.min(lines.len())]
            .iter()
            .filter(|l| l.as_str() != "do")
            .cloned()
            .collect();
        repeat(&body, &name, values, bindings, shell, runs);
        i = end + 1;
    }
}

/// A loop's body read once per value of `name`, or once as written when its values are not
/// literal.
fn repeat(
    body: &[String],
    name: &str,
    values: Option<Vec<String>>,
    bindings: &[(String, String, usize)],
    shell: &mut Shell,
    runs: &mut Vec<ScriptRun>,
) {
    let Some(values) = values else {
        return walk(body, bindings, shell, runs);
    };
    for (n, v) in values.into_iter().enumerate() {
        let lines: Vec<String> = body.iter().map(|l| substitute(l, name, &v)).collect();
        let mut inner = bindings.to_vec();
        inner.push((name.to_string(), v, n + 1));
        walk(&lines, &inner, shell, runs);
    }
}

/// One logical line: `export`s, `unset`s and `ansible-playbook` commands, also those inside
/// `$( ... )` (whose output the script reads).
fn command_line(
    line: &str,
    bindings: &[(String, String, usize)],
    shell: &mut Shell,
    runs: &mut Vec<ScriptRun>,
) {
    let captured: Vec<&str> = substitutions(line)
        .into_iter()
        .filter(|s| s.contains("ansible-playbook"))
        .collect();
    if !captured.is_empty() {
        for inner in captured {
            let before = runs.len();
            command_line(inner, bindings, shell, runs);
            for r in &mut runs[before..] {
                r.run.output_checked = true;
            }
        }
        return;
    }
    let ws = words(line);
    let mut segments: Vec<&[Word]> = ws.split(|w| w.op).collect();
    // Whether each segment is followed by an operator that reads its output.
    let piped: Vec<bool> = {
        let ops: Vec<&str> = ws
            .iter()
            .filter(|w| w.op)
            .map(|w| w.text.as_str())
            .collect();
        (0..segments.len())
            .map(|i| {
                ops.get(i)
                    .is_some_and(|o| *o == "|" || o.starts_with('>') || o.starts_with("&>"))
            })
            .collect()
    };
    let in_condition = matches!(ws.first(), Some(w) if w.text == "if" || w.text == "!");
    for (i, seg) in segments.drain(..).enumerate() {
        let mut rest: &[Word] = seg;
        while let Some(w) = rest.first() {
            if matches!(
                w.text.as_str(),
                "if" | "then" | "!" | "elif" | "else" | "do"
            ) {
                rest = &rest[1..];
            } else {
                break;
            }
        }
        if rest.first().is_some_and(|w| w.text == "export") {
            for w in &rest[1..] {
                match assignment(&w.text) {
                    Some((k, v)) => shell.export(k, v),
                    None => shell.export_name(&w.text),
                }
            }
            continue;
        }
        if rest.first().is_some_and(|w| w.text == "unset") {
            for w in &rest[1..] {
                shell.unset(&w.text);
            }
            continue;
        }
        let mut env = shell.exported.clone();
        let mut assigned = Vec::new();
        while let Some((k, v)) = rest.first().and_then(|w| assignment(&w.text)) {
            env.retain(|(n, _)| n != k);
            env.push((k.to_string(), v.to_string()));
            assigned.push((k, v));
            rest = &rest[1..];
        }
        // Assignments alone set the script's variables (exported ones reach later commands).
        if rest.is_empty() {
            for (k, v) in assigned {
                shell.assign(k, v);
            }
            continue;
        }
        if rest.first().is_some_and(|w| w.text == "ansible-playbook") {
            let args: Vec<&str> = rest[1..].iter().map(|w| w.text.as_str()).collect();
            let mut run = playbook_run(&args, &env);
            run.output_checked = piped[i] || in_condition;
            runs.push(ScriptRun {
                run,
                bindings: bindings.to_vec(),
            });
        }
    }
}

/// One run from the words after `ansible-playbook` and the environment it runs in.
fn playbook_run(args: &[&str], env: &[(String, String)]) -> PlaybookRun {
    let mut run = PlaybookRun {
        playbook: String::new(),
        inventories: Vec::new(),
        become_: false,
        extra_vars: Vec::new(),
        env: Vec::new(),
        options: Vec::new(),
        not_comparable: None,
        output_checked: false,
    };
    let mut why = Vec::new();
    let mut it = args.iter();
    while let Some(&a) = it.next() {
        match a {
            // The arguments ansible-test passes to runme.sh: none here.
            "$@" | "${@}" => {}
            "-b" | "--become" => run.become_ = true,
            "-i" | "--inventory" => {
                let inv = it.next().copied().unwrap_or_default();
                run.inventories.push(
                    if matches!(
                        inv,
                        "../../inventory" | "${INVENTORY_PATH}" | "$INVENTORY_PATH"
                    ) {
                        Inventory::Shared
                    } else {
                        if let Some(var) = unknown_shell_var(inv) {
                            why.push(format!("its inventory is the script's `{var}`"));
                        }
                        Inventory::Own(inv.to_string())
                    },
                );
            }
            "-e" | "--extra-vars" => run.extra_vars.extend(it.next().map(|v| v.to_string())),
            a if a.starts_with("--extra-vars=") => {
                run.extra_vars.push(a["--extra-vars=".len()..].to_string())
            }
            "-t" | "--tags" | "--skip-tags" | "-l" | "--limit" => {
                let flag = match a {
                    "-t" => "--tags",
                    "-l" => "--limit",
                    long => long,
                };
                if let Some(v) = it.next() {
                    run.options.extend([flag.to_string(), v.to_string()]);
                }
            }
            "-f" | "--forks" | "--vault-password-file" => {
                let flag = if a == "-f" { "--forks" } else { a };
                if let Some(v) = it.next() {
                    run.options.extend([flag.to_string(), v.to_string()]);
                }
            }
            "-C" | "--check" | "-D" | "--diff" | "--force-handlers" => {
                let flag = match a {
                    "-C" => "--check",
                    "-D" => "--diff",
                    long => long,
                };
                run.options.push(flag.to_string());
            }
            a if a.starts_with('-') && a[1..].chars().all(|c| c == 'v') => {}
            a if a.starts_with('-') => why.push(format!("`ansible-playbook {a}`")),
            a if run.playbook.is_empty() => run.playbook = a.to_string(),
            a => why.push(format!("a second playbook `{a}`")),
        }
    }
    if run.playbook.contains('$') {
        why.push(format!(
            "the playbook is the script's variable `{}`",
            run.playbook
        ));
    }
    for v in &run.extra_vars {
        if let Some(var) = unknown_shell_var(v) {
            why.push(format!("`-e {v}` names the script's `{var}`"));
        }
    }
    for (k, v) in env {
        if UNDERSTOOD_ENV.contains(&k.as_str()) {
            run.env.push((k.clone(), v.clone()));
        } else if k.starts_with("ANSIBLE_") {
            if !NEUTRAL_ENV.iter().any(|(n, _)| n == k) {
                why.push(format!("`{k}={v}`, a setting fixpoint does not read"));
            }
        } else if !k.starts_with("LC_") && k != "LANG" {
            // The script's own variables, which playbooks read with `lookup('env')`
            // (`SELECTED_STRATEGY`); the locale is the test machine's (`en_US.UTF-8` is not
            // installed here).
            run.env.push((k.clone(), v.clone()));
        }
    }
    if !why.is_empty() {
        run.not_comparable = Some(format!("not comparable: {}", why.join("; ")));
    }
    run
}

/// A shell variable in `s` other than `OUTPUT_DIR` (which the runner sets).
fn unknown_shell_var(s: &str) -> Option<String> {
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        let after = &rest[i + 1..];
        let name: String = after
            .trim_start_matches('{')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name != "OUTPUT_DIR" {
            return Some(name);
        }
        rest = after;
    }
    None
}

#[test]
fn reads_the_runs_of_a_runme() {
    let text = r#"#!/usr/bin/env bash
set -eux
function cleanup {
    ansible-playbook -i "${INVENTORY_PATH}" cleanup.yml -e "output_dir=${OUTPUT_DIR}" -b "$@"
}
trap 'cleanup "$@"' EXIT
export ANSIBLE_ROLES_PATH=../
export ANSIBLE_BECOME_ALLOW_SAME_USER=1
ansible-playbook -i ../../inventory runme.yml -v "$@"
ansible-playbook -i ../../inventory runme.yml -e "output_dir=${OUTPUT_DIR}" -b "$@"
# a comment: ansible-playbook ignored.yml
ANSIBLE_REMOTE_TMP=./ansible ansible-playbook -i ../../inventory rel.yml -v "$@"
ansible-playbook auth.yml -i ../../inventory "$@" 2>&1 | tee "${ULOG}"
if ansible-playbook pause-3.yml > /dev/null ; then
    echo ok
fi
ansible-playbook own.yml -i inventory.own -e @vars.yml
export ANSIBLE_CACHE_PLUGIN=jsonfile
ansible-playbook -i "${INVENTORY_PATH}" cached.yml \
    -e ansible_user=fetcher
unset ANSIBLE_CACHE_PLUGIN
ansible-playbook -i ../../inventory last.yml -e "x=$MYTMPDIR"
ansible-playbook local.yml
ansible-playbook role_complete.yml -i ../../inventory -i fake, --tags x
ansible-playbook -i "$INV" inv.yml
"#;
    let runs: Vec<PlaybookRun> = parse(text).into_iter().map(|r| r.run).collect();
    let names: Vec<&str> = runs.iter().map(|r| r.playbook.as_str()).collect();
    assert_eq!(
        names,
        [
            "runme.yml",
            "runme.yml",
            "rel.yml",
            "auth.yml",
            "pause-3.yml",
            "own.yml",
            "cached.yml",
            "last.yml",
            "local.yml",
            "role_complete.yml",
            "inv.yml"
        ]
    );
    let roles = ("ANSIBLE_ROLES_PATH".to_string(), "../".to_string());
    assert_eq!(runs[0].env, [roles]);
    assert_eq!(runs[0].not_comparable, None);
    assert!(!runs[0].become_ && runs[1].become_);
    assert_eq!(runs[1].extra_vars, ["output_dir=${OUTPUT_DIR}"]);
    assert_eq!(runs[1].label("t", false), "t (runme.yml -b)");
    assert_eq!(runs[0].label("t", true), "t");
    assert!(runs[2]
        .not_comparable
        .as_ref()
        .unwrap()
        .contains("ANSIBLE_REMOTE_TMP=./ansible"));
    assert!(!runs[2].output_checked && runs[3].output_checked && runs[4].output_checked);
    assert_eq!(runs[3].not_comparable, None);
    assert_eq!(
        runs[5].inventories,
        [Inventory::Own("inventory.own".into())]
    );
    assert_eq!(runs[5].not_comparable, None);
    assert_eq!(runs[5].extra_vars, ["@vars.yml"]);
    assert!(runs[6]
        .not_comparable
        .as_ref()
        .unwrap()
        .contains("ANSIBLE_CACHE_PLUGIN"));
    assert_eq!(runs[6].extra_vars, ["ansible_user=fetcher"]);
    assert!(runs[7]
        .not_comparable
        .as_ref()
        .unwrap()
        .contains("MYTMPDIR"));
    assert_eq!(runs[8].inventories, []);
    assert_eq!(runs[8].not_comparable, None);
    assert!(runs[0].on_testhost_only());
    assert_eq!(
        runs[9].inventories,
        [Inventory::Shared, Inventory::Own("fake,".into())]
    );
    assert!(runs[10]
        .not_comparable
        .as_ref()
        .unwrap()
        .contains("inventory is the script's `INV`"));
}

#[test]
fn shared_options_are_taken_for_both_tools() {
    let runs: Vec<PlaybookRun> = parse(
        "ansible-playbook t.yml -i ../../inventory \"$@\" -t bar --skip-tags x,y -C --diff -l h\n",
    )
    .into_iter()
    .map(|r| r.run)
    .collect();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].not_comparable, None);
    assert_eq!(
        runs[0].options,
        [
            "--tags",
            "bar",
            "--skip-tags",
            "x,y",
            "--check",
            "--diff",
            "--limit",
            "h"
        ]
    );
}

#[test]
fn repeats_the_runs_of_literal_for_loops() {
    let runs = parse(
        r#"for s in linear free; do
  export ANSIBLE_STRATEGY=$s
  out="$(ansible-playbook a.yml -i inventory.yml -e test_strategy=$s -vv "$@")"
  [ "$(ANSIBLE_FORCE_HANDLERS=true ansible-playbook b.yml -i inv -v "$@" --tags normal \
  | grep -E -o CALLED_. | sort | xargs)" = "CALLED_B" ]
  unset ANSIBLE_STRATEGY
done
for seed in x y/z
do
	ansible-playbook c.yml -e "seed='${seed}'" "$@"
done
for i in $(seq 0 2); do ansible-playbook d.yml -e n=$i; done
for EXTRA in '{"a": ["x", "y"]}' \
             '{"b": 1}'
do
    ansible-playbook o.yml --forks 1 -i inventory -e "$EXTRA" "$@"
done
export PICKED
output_dir=/tmp
for s in linear; do
  PICKED="${s}"
  ansible-playbook f.yml -e output_dir=$output_dir
done
ansible-playbook e.yml
"#,
    );
    let seen: Vec<String> = runs.iter().map(|r| r.label("t", false)).collect();
    assert_eq!(
        seen,
        [
            "t (a.yml, s=linear)",
            "t (b.yml --tags normal, s=linear)",
            "t (a.yml, s=free)",
            "t (b.yml --tags normal, s=free)",
            "t (c.yml, seed=x)",
            "t (c.yml, seed=y/z)",
            "t (d.yml)",
            "t (o.yml --forks 1, EXTRA #1)",
            "t (o.yml --forks 1, EXTRA #2)",
            "t (f.yml, s=linear)",
            "t (e.yml)",
        ]
    );
    assert_eq!(runs[2].run.extra_vars, ["test_strategy=free"]);
    let strategy = ("ANSIBLE_STRATEGY".to_string(), "free".to_string());
    assert_eq!(runs[2].run.env, std::slice::from_ref(&strategy));
    let force = ("ANSIBLE_FORCE_HANDLERS".to_string(), "true".to_string());
    assert_eq!(runs[3].run.env, [strategy, force]);
    assert!(runs[..4].iter().all(|r| r.run.output_checked));
    assert_eq!(runs[3].run.options, ["--tags", "normal"]);
    assert_eq!(runs[5].run.extra_vars, ["seed='y/z'"]);
    assert!(!runs[5].run.output_checked);
    assert!(runs[6].run.not_comparable.as_ref().unwrap().contains("`i`"));
    assert_eq!(runs[7].run.extra_vars, [r#"{"a": ["x", "y"]}"#]);
    assert_eq!(runs[8].run.not_comparable, None);
    let picked = ("PICKED".to_string(), "linear".to_string());
    assert_eq!(runs[9].run.env, std::slice::from_ref(&picked));
    assert_eq!(runs[9].run.extra_vars, ["output_dir=/tmp"]);
    assert_eq!(runs[9].run.not_comparable, None);
    assert_eq!(runs[10].run.env, [picked]);
    assert_eq!(runs[10].label("t", true), "t");
    assert_eq!(runs[4].label("t", true), "t (c.yml, seed=x)");
}
