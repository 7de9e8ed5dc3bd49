//! The edits the runner makes to a target, on fixpoint's copy only. First, a guard on each unguarded
//! `command`/`shell` task, `unless: "false"`, on each unguarded `script` task (which takes
//! no `unless`), `creates` naming a path that never exists, and on each unguarded `raw` task
//! (which takes no guard parameter), a `when` reading its registered result that is always true:
//! each makes it run every time, as it does under Ansible (README, "The idempotency rules").
//! A `command`/`shell`/`script` task with `check_mode: true` gets `changed_when: false` instead:
//! in check mode a guard would decide its result, where ansible-core skips it.
//! Second, `when: false` on each task a `- target:` line of DEVIATIONS.md names with `at:`
//! ([`skip_task`]): a task that only tests what fixpoint deliberately lacks.
//! Done on the text, so that everything else in the file (comments, quoting, YAML 1.1 scalars
//! such as `mode: 0644`) stays byte for byte.

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// The module names whose tasks fixpoint refuses without a guard and that take a guard
/// parameter (`raw` takes none: [`RAWS`]).
const COMMANDS: &[&str] = &[
    "command",
    "shell",
    "script",
    "ansible.builtin.command",
    "ansible.builtin.shell",
    "ansible.builtin.script",
    "ansible.legacy.command",
    "ansible.legacy.shell",
    "ansible.legacy.script",
];

/// The names of `raw`.
const RAWS: &[&str] = &["raw", "ansible.builtin.raw", "ansible.legacy.raw"];

/// The result a guarded `raw` task registers when it registers none.
const RAW_REGISTER: &str = "fixpoint_targets_raw";

/// Module parameters and task keywords that already count as a guard for fixpoint.
const GUARDS: &[&str] = &["creates", "removes", "unless", "onlyif"];

/// The guard added to a command's parameters: `false` fails, so the command always runs; a
/// script's `creates` names a path that is never there, so the script always runs.
fn guard_of(module: &str) -> &'static str {
    if module.ends_with("script") {
        "creates: /nonexistent/fixpoint-targets-guard"
    } else {
        "unless: \"false\""
    }
}

/// A parsed YAML node with the source positions the rewrite needs.
enum Node {
    Scalar {
        value: String,
        mark: Marker,
    },
    Seq(Vec<Node>),
    Map {
        mark: Marker,
        entries: Vec<(Node, Node)>,
    },
    Alias,
}

/// Builds [`Node`]s from the parser's events.
#[derive(Default)]
struct Builder {
    stack: Vec<(Node, Option<Node>)>,
    docs: Vec<Node>,
}

impl Builder {
    fn push(&mut self, node: Node) {
        match self.stack.last_mut() {
            None => self.docs.push(node),
            Some((Node::Seq(items), _)) => items.push(node),
            Some((Node::Map { entries, .. }, pending)) => match pending.take() {
                None => *pending = Some(node),
                Some(key) => entries.push((key, node)),
            },
            Some(_) => unreachable!("only collections are on the stack"),
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        match ev {
            Event::Scalar(value, ..) => self.push(Node::Scalar { value, mark }),
            Event::Alias(_) => self.push(Node::Alias),
            Event::SequenceStart(..) => self.stack.push((Node::Seq(Vec::new()), None)),
            Event::MappingStart(..) => self.stack.push((
                Node::Map {
                    mark,
                    entries: Vec::new(),
                },
                None,
            )),
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((node, _)) = self.stack.pop() {
                    self.push(node);
                }
            }
            _ => {}
        }
    }
}

fn key_of(k: &Node) -> Option<&str> {
    match k {
        Node::Scalar { value, .. } => Some(value),
        _ => None,
    }
}

fn get<'a>(entries: &'a [(Node, Node)], key: &str) -> Option<&'a (Node, Node)> {
    entries.iter().find(|(k, _)| key_of(k) == Some(key))
}

/// Whether `changed_when` says the command only reads (fixpoint's read-only guard).
fn read_only(entries: &[(Node, Node)]) -> bool {
    matches!(
        get(entries, "changed_when"),
        Some((_, Node::Scalar { value, .. }))
            if matches!(value.as_str(), "false" | "False" | "no" | "No" | "false|bool")
    )
}

/// One insertion: `text` at character index `at` of the source.
struct Insert {
    at: usize,
    text: String,
}

/// Where a guard goes into the mapping `map` (its parameters): first in a flow mapping (after
/// `{`), or as a new first line of a block mapping, at its keys' column.
fn into_mapping(src: &[char], map: &Node, guard: &str) -> Option<Insert> {
    let Node::Map { mark, entries } = map else {
        return None;
    };
    if src.get(mark.index()) == Some(&'{') {
        let sep = if entries.is_empty() { "" } else { ", " };
        return Some(Insert {
            at: mark.index() + 1,
            text: format!("{guard}{sep}"),
        });
    }
    let (Node::Scalar { mark: first, .. }, _) = entries.first()? else {
        return None;
    };
    Some(Insert {
        at: first.index(),
        text: format!("{guard}\n{}", " ".repeat(first.col())),
    })
}

/// The guard for one task mapping, if it runs an unguarded command; `Err` when the task's shape
/// leaves no place for one (then fixpoint refuses the task, and the report says so).
fn guard_task(src: &[char], task: &Node) -> Result<Option<Insert>, String> {
    let Node::Map { mark, entries } = task else {
        return Ok(None);
    };
    if let Some((raw_key, _)) = entries
        .iter()
        .find(|(k, _)| key_of(k).is_some_and(|k| RAWS.contains(&k)))
    {
        return guard_raw(src, task, raw_key);
    }
    let Some((module_key, params)) = entries
        .iter()
        .find(|(k, _)| key_of(k).is_some_and(|k| COMMANDS.contains(&k)))
    else {
        return Ok(None);
    };
    if read_only(entries) || entries.iter().any(|(k, _)| key_of(k) == Some("once")) {
        return Ok(None);
    }
    let guard = guard_of(key_of(module_key).unwrap_or_default());
    let has_guard = |m: &Node| match m {
        Node::Map { entries, .. } => GUARDS.iter().any(|g| get(entries, g).is_some()),
        // Free form: `creates=/x` inside the command line.
        Node::Scalar { value, .. } => GUARDS.iter().any(|g| {
            value
                .split_whitespace()
                .any(|w| w.starts_with(&format!("{g}=")))
        }),
        _ => false,
    };
    let args = get(entries, "args").map(|(_, v)| v);
    if has_guard(params) || args.is_some_and(has_guard) {
        return Ok(None);
    }
    // In check mode the guard would decide the result (a guard saying it would run reports a
    // change); declared read-only, the command is skipped, as ansible-core skips it.
    if check_mode_on(entries) {
        return task_keys(src, task, module_key, &["changed_when: false".to_string()]);
    }
    if matches!(params, Node::Map { .. }) {
        return into_mapping(src, params, guard)
            .map(Some)
            .ok_or_else(|| "its parameters are an empty block mapping".to_string());
    }
    if let Some(args) = args {
        return into_mapping(src, args, guard)
            .map(Some)
            .ok_or_else(|| "its `args` are not a mapping".to_string());
    }
    // Free form without `args`: a new `args` key beside the module's.
    if src.get(mark.index()) == Some(&'{') {
        return Ok(Some(Insert {
            at: mark.index() + 1,
            text: format!("args: {{{guard}}}, "),
        }));
    }
    let Node::Scalar { mark: key_mark, .. } = module_key else {
        return Err("its module key is not a plain scalar".into());
    };
    Ok(Some(Insert {
        at: key_mark.index(),
        text: format!("args: {{{guard}}}\n{}", " ".repeat(key_mark.col())),
    }))
}

/// The guard of an unguarded `raw` task: `when: <its register> is undefined or true`, always
/// true, so the task runs as under Ansible, reading the result it registers (its own, or
/// [`RAW_REGISTER`] added), which fixpoint's guard rule accepts. A task with a `when` of its own
/// is left to fixpoint to judge; a `once` or `changed_when: false` is a guard already.
fn guard_raw(src: &[char], task: &Node, raw_key: &Node) -> Result<Option<Insert>, String> {
    let Node::Map { entries, .. } = task else {
        return Ok(None);
    };
    if read_only(entries) || ["once", "when"].iter().any(|k| get(entries, k).is_some()) {
        return Ok(None);
    }
    let (register, add) = match get(entries, "register") {
        Some((_, Node::Scalar { value, .. })) => (value.clone(), false),
        Some(_) => return Err("its `register` is not a plain name".into()),
        None => (RAW_REGISTER.to_string(), true),
    };
    let when = format!("when: {register} is undefined or true");
    let keys = if add {
        vec![when, format!("register: {register}")]
    } else {
        vec![when]
    };
    task_keys(src, task, raw_key, &keys)
}

/// Whether the task says `check_mode: true` (or `yes`).
fn check_mode_on(entries: &[(Node, Node)]) -> bool {
    matches!(
        get(entries, "check_mode"),
        Some((_, Node::Scalar { value, .. }))
            if matches!(value.as_str(), "true" | "True" | "yes" | "Yes" | "on")
    )
}

/// New keys for the task mapping `task`: first in a flow mapping, or on lines of their own
/// before its module key `module_key`.
fn task_keys(
    src: &[char],
    task: &Node,
    module_key: &Node,
    keys: &[String],
) -> Result<Option<Insert>, String> {
    let Node::Map { mark, .. } = task else {
        return Ok(None);
    };
    if src.get(mark.index()) == Some(&'{') {
        return Ok(Some(Insert {
            at: mark.index() + 1,
            text: format!("{}, ", keys.join(", ")),
        }));
    }
    let Node::Scalar { mark: key_mark, .. } = module_key else {
        return Err("its module key is not a plain scalar".into());
    };
    let indent = format!("\n{}", " ".repeat(key_mark.col()));
    Ok(Some(Insert {
        at: key_mark.index(),
        text: format!("{}{indent}", keys.join(&indent)),
    }))
}

/// Walks every task list (a sequence of mappings, blocks' `block`/`rescue`/`always` included).
fn walk(src: &[char], node: &Node, out: &mut Vec<Insert>, problems: &mut Vec<String>) {
    match node {
        Node::Seq(items) => {
            for item in items {
                match guard_task(src, item) {
                    Ok(Some(ins)) => out.push(ins),
                    Ok(None) => {}
                    Err(why) => {
                        if let Node::Map { mark, .. } = item {
                            problems.push(format!("line {}: {why}", mark.line()));
                        }
                    }
                }
                walk(src, item, out, problems);
            }
        }
        Node::Map { entries, .. } => {
            for (_, v) in entries {
                walk(src, v, out, problems);
            }
        }
        Node::Scalar { .. } | Node::Alias => {}
    }
}

/// The guarded text of a task file, the number of guards added, and the tasks that could not
/// be guarded. A file that does not parse is returned unchanged (both tools then report it).
pub fn guard_commands(text: &str) -> (String, usize, Vec<String>) {
    let mut builder = Builder::default();
    let mut parser = Parser::new_from_str(text);
    if parser.load(&mut builder, true).is_err() {
        return (text.to_string(), 0, Vec::new());
    }
    let src: Vec<char> = text.chars().collect();
    let mut inserts = Vec::new();
    let mut problems = Vec::new();
    for doc in &builder.docs {
        walk(&src, doc, &mut inserts, &mut problems);
    }
    inserts.sort_by_key(|i| std::cmp::Reverse(i.at));
    let mut out = src;
    let n = inserts.len();
    for ins in inserts {
        out.splice(ins.at..ins.at, ins.text.chars());
    }
    (out.into_iter().collect(), n, problems)
}

/// The task mapping that starts on 1-based `line`, anywhere in the task lists of `node`.
fn task_at(node: &Node, line: usize) -> Option<&Node> {
    match node {
        Node::Seq(items) => items.iter().find_map(|item| match item {
            Node::Map { mark, .. } if mark.line() == line => Some(item),
            _ => task_at(item, line),
        }),
        Node::Map { entries, .. } => entries.iter().find_map(|(_, v)| task_at(v, line)),
        Node::Scalar { .. } | Node::Alias => None,
    }
}

/// `text` with `when: false` added to the task that starts on `line` and is named `name` (its
/// `name`, or its module when it has none, as the task's result is named); an error when no
/// such task starts there, or it has a `when` of its own.
pub fn skip_task(text: &str, line: usize, name: &str) -> Result<String, String> {
    let mut builder = Builder::default();
    Parser::new_from_str(text)
        .load(&mut builder, true)
        .map_err(|e| e.to_string())?;
    let src: Vec<char> = text.chars().collect();
    let task = builder
        .docs
        .iter()
        .find_map(|d| task_at(d, line))
        .ok_or_else(|| format!("no task starts on line {line}"))?;
    let Node::Map { entries, .. } = task else {
        unreachable!("task_at finds mappings")
    };
    let named = match get(entries, "name") {
        Some((_, Node::Scalar { value, .. })) => value == name,
        _ => get(entries, name).is_some(),
    };
    if !named {
        return Err(format!("the task on line {line} is not named `{name}`"));
    }
    if get(entries, "when").is_some() {
        return Err(format!("the task on line {line} has a `when` of its own"));
    }
    let (first, _) = entries
        .first()
        .ok_or_else(|| format!("the task on line {line} is empty"))?;
    let ins = task_keys(&src, task, first, &["when: false".to_string()])?
        .ok_or_else(|| format!("the task on line {line} is not a mapping"))?;
    let mut out = src;
    out.splice(ins.at..ins.at, ins.text.chars());
    Ok(out.into_iter().collect())
}

#[test]
fn skips_the_task_named_at_its_line() {
    let text = "- name: a\n  debug: {msg: a}\n- block:\n    - assert: {that: x}\n      register: r\n- {assert: {that: y}}\n";
    assert_eq!(
        skip_task(text, 4, "assert").unwrap(),
        "- name: a\n  debug: {msg: a}\n- block:\n    - when: false\n      assert: {that: x}\n      register: r\n- {assert: {that: y}}\n"
    );
    assert_eq!(
        skip_task(text, 6, "assert").unwrap(),
        "- name: a\n  debug: {msg: a}\n- block:\n    - assert: {that: x}\n      register: r\n- {when: false, assert: {that: y}}\n"
    );
    assert!(skip_task(text, 1, "b").unwrap_err().contains("not named"));
    assert!(skip_task(text, 2, "a").unwrap_err().contains("no task"));
    let with_when = "- name: a\n  debug: {}\n  when: x\n";
    assert!(skip_task(with_when, 1, "a").unwrap_err().contains("`when`"));
}

#[test]
fn guards_each_unguarded_command_in_place() {
    let text = "\
# a comment stays
- name: free form
  command: echo hi
  register: r

- shell: echo there
- name: with args
  command: echo x
  args:
    chdir: /tmp
- name: dict form
  ansible.builtin.command:
    cmd: echo y
- name: flow
  command: {cmd: echo z}
- {name: all flow, shell: echo w}
- name: guarded
  command: touch /x creates=/x
- name: read only
  command: cat /x
  changed_when: false
- block:
    - command: echo nested
  rescue:
    - file: path=/x mode=0644
- name: a script
  script: 'list.sh x'
- block:
  - name: raw
    raw: '{{ lookup(\"vars\", \"x\") }}'
- {raw: echo a, register: a}
- name: raw read only
  raw: echo b
  changed_when: false
- name: raw with a when
  raw: echo c
  when: r is changed
- name: check mode
  command:
    cmd: \"true\"
  check_mode: yes
";
    let (out, n, problems) = guard_commands(text);
    assert_eq!(n, 11, "{out}");
    assert!(problems.is_empty());
    let want = "\
# a comment stays
- name: free form
  args: {unless: \"false\"}
  command: echo hi
  register: r

- args: {unless: \"false\"}
  shell: echo there
- name: with args
  command: echo x
  args:
    unless: \"false\"
    chdir: /tmp
- name: dict form
  ansible.builtin.command:
    unless: \"false\"
    cmd: echo y
- name: flow
  command: {unless: \"false\", cmd: echo z}
- {args: {unless: \"false\"}, name: all flow, shell: echo w}
- name: guarded
  command: touch /x creates=/x
- name: read only
  command: cat /x
  changed_when: false
- block:
    - args: {unless: \"false\"}
      command: echo nested
  rescue:
    - file: path=/x mode=0644
- name: a script
  args: {creates: /nonexistent/fixpoint-targets-guard}
  script: 'list.sh x'
- block:
  - name: raw
    when: fixpoint_targets_raw is undefined or true
    register: fixpoint_targets_raw
    raw: '{{ lookup(\"vars\", \"x\") }}'
- {when: a is undefined or true, raw: echo a, register: a}
- name: raw read only
  raw: echo b
  changed_when: false
- name: raw with a when
  raw: echo c
  when: r is changed
- name: check mode
  changed_when: false
  command:
    cmd: \"true\"
  check_mode: yes
";
    assert_eq!(out, want);
}
