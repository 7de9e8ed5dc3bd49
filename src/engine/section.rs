//! Section analysis, decided from the loaded playbook before anything runs: which consecutive
//! tasks the hosts may go through without waiting for each other (a section: no barrier inside,
//! see `pipeline.rs`), and which of those can travel to the agent together in one `Batch`.
//!
//! A barrier stays where Ansible's linear strategy makes one host's progress visible to another
//! or runs something once for all: `run_once`, `delegate_to`, `throttle`, a task's own `any_errors_fatal` or
//! `ignore_unreachable`, `pause`, `add_host`,
//! `group_by`, a read of `hostvars` or the play's host lists, and every step that is not a task
//! (blocks, includes, `meta`: the section ends before them). Inside a section a task is a batch
//! step when the agent decides all of its outcome: a module of the agent, its parameters and
//! `when` rendered before the batch is sent, so reading nothing an earlier step of the same
//! batch writes (`register`). A task whose failure or change the controller decides
//! (`failed_when`, `changed_when` other than a constant, `changed_when` with `notify`, a module
//! that sets facts) only ends a batch: the agent cannot know to stop after it. A loop whose
//! items could be such steps joins the batch with all its items. `assert`, `debug`, `fail` and
//! `set_fact` are gates: the controller decides them from the answers before them, and the
//! agent steps after them in the batch change nothing until it has (`BatchStep::gate`); those
//! steps must read nothing the gate sets, and a gate that sets a connection variable ends the
//! batch. Everything else (other controller-side actions, loops that read what an earlier item
//! leaves, `until`, Python modules, keywords given as templates) runs on its own, still without
//! a barrier.

use crate::playbook::{EnvPart, Play, Step, Task};
use crate::template::{ScanAs, Templar, FLEET_NAMES};
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// How one task takes part in a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fit {
    /// Every host finishes the tasks before it first: no section goes through it. Says why.
    Barrier(&'static str),
    /// In a section, but run by itself (the path of a single task). Says why.
    Alone(&'static str),
    /// A step of a batch; `last`: only as its last step.
    Step { last: bool },
    /// A step of a batch that the controller decides itself from the answers before it (an
    /// `assert`, a `set_fact`): the agent steps after it in the batch are gated on it, so they
    /// change nothing on the host unless it passes (`BatchStep::gate`).
    Gate,
}

/// A run of consecutive tasks the hosts go through without a barrier.
pub(super) struct Section<'a> {
    /// The tasks to run (the tags selected), in order.
    pub(super) tasks: Vec<&'a Task>,
    pub(super) fit: Vec<Fit>,
    /// Whether task `i` starts a new batch (it cannot join the one before it).
    pub(super) batch_start: Vec<bool>,
    /// How many of the steps given it covers (the unselected tasks among them included).
    pub(super) steps: usize,
    /// Its tasks are notified handlers (`handlers::flush_handlers`): banners say so.
    pub(super) handlers: bool,
}

/// What a task reads: these variables, or any (a name given at run time).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reads {
    Names(BTreeSet<String>),
    Any,
}

impl Reads {
    fn add(&mut self, more: Option<BTreeSet<String>>) {
        match (self, more) {
            (Reads::Names(n), Some(m)) => n.extend(m),
            (me, None) => *me = Reads::Any,
            (Reads::Any, Some(_)) => {}
        }
    }

    fn meets(&self, writes: &BTreeSet<String>) -> bool {
        match self {
            Reads::Names(n) => !n.is_disjoint(writes),
            Reads::Any => !writes.is_empty(),
        }
    }
}

/// Modules whose result the controller produces itself: never a batch step.
const CONTROLLER_ACTIONS: &[&str] = &[
    "debug",
    "assert",
    "fail",
    "set_fact",
    "include_vars",
    "setup",
    "gather_facts",
    "fetch",
    "validate_argument_spec",
];

/// Actions that run once for the play's hosts or change the run's inventory.
const PLAY_WIDE: &[&str] = &["pause", "add_host", "group_by"];

/// Controller actions that can be a batch's gate: they read variables and results only, write
/// variables whose names the task gives (`register`, `set_fact`'s keys), and change no host.
const GATE_ACTIONS: &[&str] = &["assert", "debug", "fail", "set_fact"];

/// Agent modules that return facts: the host's facts change when their answer arrives.
const FACT_SETTERS: &[&str] = &["service_facts", "package_facts", "getent", "hostname"];

/// The section that starts at `steps[0]`, when it holds at least two tasks to run (one task
/// runs as it always has). `selected` says whether a task runs at all (`--tags`); those that do
/// not are passed over.
pub(super) fn section<'a>(
    steps: &'a [Step],
    play: &Play,
    templar: &Templar,
    selected: &dyn Fn(&Task) -> bool,
) -> Option<Section<'a>> {
    let mut tasks = Vec::new();
    let mut fits = Vec::new();
    let mut reads = Vec::new();
    let mut used = 0;
    // Hosts that completed a role pass by a repeated expansion of it (`RoleDedup`): such an
    // expansion is a section of its own, run with the hosts that do not.
    let repeat = |t: &Task| {
        t.role
            .as_ref()
            .and_then(|r| r.dedup)
            .filter(|d| d.may_pass_by())
            .map(|d| d.expansion)
    };
    let first = match steps.first() {
        Some(Step::Task(t)) => repeat(t),
        _ => None,
    };
    for step in steps {
        let Step::Task(task) = step else { break };
        if repeat(task) != first {
            break;
        }
        if !selected(task) {
            used += 1;
            continue;
        }
        let (fit, r) = analyse(task, play, templar);
        if let Fit::Barrier(_) = fit {
            break;
        }
        used += 1;
        tasks.push(&**task);
        fits.push(fit);
        reads.push(r);
    }
    if tasks.len() < 2 {
        return None;
    }
    let mut batch_start = Vec::with_capacity(tasks.len());
    let mut writes: BTreeSet<String> = BTreeSet::new();
    for (i, task) in tasks.iter().enumerate() {
        // A gate reads what the steps before it leave: the controller decides it once their
        // answers are in. An agent step is rendered before the batch is sent, so it must read
        // nothing the batch writes.
        // Every agent step reads the connection variables (`ansible_become_user`,
        // `ansible_host`... and fixpoint's own), which choose its agent: a gate that sets one
        // ends the batch.
        let joins = i > 0
            && matches!(fits[i - 1], Fit::Step { last: false } | Fit::Gate)
            && match fits[i] {
                Fit::Step { .. } => {
                    !reads[i].meets(&writes) && !writes.iter().any(|w| connection_var(w))
                }
                Fit::Gate => true,
                _ => false,
            };
        if !joins {
            writes.clear();
        }
        batch_start.push(!joins);
        writes.extend(writes_of(task));
    }
    Some(Section {
        tasks,
        fit: fits,
        batch_start,
        steps: used,
        handlers: false,
    })
}

/// How `task` takes part in a section, and what it reads.
fn analyse(task: &Task, play: &Play, templar: &Templar) -> (Fit, Reads) {
    let reads = reads_of(task, play, templar);
    let fit = if task.run_once || task.templated.contains_key("run_once") {
        Fit::Barrier("run_once")
    } else if task.delegate_to.is_some() {
        Fit::Barrier("delegate_to")
    } else if task.throttle.is_some() || task.templated.contains_key("throttle") {
        Fit::Barrier("throttle")
    } else if task.any_errors_fatal.is_some() {
        // Whether the play ends for every host is decided once all hosts have run it.
        Fit::Barrier("any_errors_fatal")
    } else if task.ignore_unreachable.is_some() || task.templated.contains_key("ignore_unreachable")
    {
        // A host it cannot reach stays in the play: decided as a single task is.
        Fit::Barrier("ignore_unreachable")
    } else if PLAY_WIDE.contains(&task.module) {
        Fit::Barrier("an action for the whole play")
    } else if task.notify.iter().any(|n| Templar::is_template(n)) {
        // Whether a handler answers is known when it runs: one that none answers stops the
        // run right there, before any host goes on.
        Fit::Barrier("a templated notify")
    } else if matches!(&reads, Reads::Names(n) if FLEET_NAMES.iter().any(|f| n.contains(*f))) {
        Fit::Barrier("reads other hosts' state")
    } else if task.python.is_some() {
        Fit::Alone("a Python module")
    } else if task.loop_items.is_some() {
        // A loop's items join the batch as its steps when they could go in a batch of their
        // own (`loop_batchable`); their failures are the agent's to decide. With `notify`, it
        // only ends a batch: the outbox entries of items that did not change are withdrawn
        // once the batch is over, which must not reach a later step's notification.
        match loop_batchable(task, play, templar) {
            true => Fit::Step {
                last: !task.notify.is_empty(),
            },
            false => Fit::Alone("a loop"),
        }
    } else if task.until.is_some() {
        Fit::Alone("until")
    } else if !task.templated.is_empty() {
        Fit::Alone("keywords given as templates")
    } else if GATE_ACTIONS.contains(&task.module)
        && task.handler_step.is_none()
        && reads != Reads::Any
        && task
            .params
            .as_object()
            .is_some_and(|m| m.keys().all(|k| !Templar::is_template(k)))
    {
        Fit::Gate
    } else if CONTROLLER_ACTIONS.contains(&task.module) || task.handler_step.is_some() {
        Fit::Alone("runs on the controller")
    } else if reads == Reads::Any {
        // `lookup('vars', …)` may name another host's variables too: no batch, and no
        // promise beyond the single task's.
        Fit::Alone("reads variables named at run time")
    } else {
        let constant = |c: &Vec<String>| c.iter().all(|s| is_constant(s));
        let last = task.failed_when.is_some()
            || task
                .changed_when
                .as_ref()
                .is_some_and(|c| !constant(c) || !task.notify.is_empty())
            || FACT_SETTERS.contains(&task.module);
        Fit::Step { last }
    };
    (fit, reads)
}

/// Whether the items of `task`, a loop, can go to the agent in one batch: an agent module whose
/// failure and change the agent decides (as a batch step's, see `analyse`), no `until`, pause,
/// label or `break_when` (rendered with the item's result), and nothing in its parameters or `when` reading
/// what an earlier item leaves (its `register` name).
pub(super) fn loop_batchable(task: &Task, play: &Play, templar: &Templar) -> bool {
    let plain = task.loop_items.is_some()
        && task.until.is_none()
        && task.loop_pause.is_zero()
        && task.loop_label.is_none()
        && task.loop_break_when.is_none()
        && task.python.is_none()
        && task.delegate_to.is_none()
        && task.handler_step.is_none()
        // Keywords given as templates are known per host, some per item, only when it runs.
        && task.templated.is_empty()
        && !CONTROLLER_ACTIONS.contains(&task.module)
        && !PLAY_WIDE.contains(&task.module)
        && !FACT_SETTERS.contains(&task.module)
        && task.failed_when.is_none()
        && task
            .changed_when
            .as_ref()
            .is_none_or(|c| task.notify.is_empty() && c.iter().all(|s| is_constant(s)));
    if !plain {
        return false;
    }
    match reads_of(task, play, templar) {
        Reads::Any => false,
        Reads::Names(n) => !task.register.as_ref().is_some_and(|r| n.contains(r)),
    }
}

/// Whether the task reads controller files when it is rendered (`copy`'s and `unarchive`'s
/// `src`, `template`, `script`). On a host that is the controller itself (the local
/// connection) an earlier task may have written them, so such a task only starts a batch
/// there (`pipeline.rs`).
pub(super) fn reads_controller_files(task: &Task) -> bool {
    match task.module {
        "template" | "script" => true,
        "copy" | "unarchive" => {
            task.params.get("src").is_some()
                && !task.params.get("remote_src").is_some_and(|v| {
                    v == &Value::Bool(true) || v.as_str().is_some_and(|s| s != "false" && s != "no")
                })
        }
        _ => false,
    }
}

/// The variables a task sets for the tasks after it: its `register`, and a `set_fact`'s keys
/// (a gate's keys are never templates, see `analyse`).
fn writes_of(task: &Task) -> impl Iterator<Item = String> + '_ {
    let facts = task
        .params
        .as_object()
        .filter(|_| task.module == "set_fact")
        .into_iter()
        .flat_map(|m| m.keys().filter(|k| k.as_str() != "cacheable").cloned());
    task.register.iter().cloned().chain(facts)
}

/// Whether setting `name` may change how a host is reached: Ansible's connection variables and
/// fixpoint's own all start so.
fn connection_var(name: &str) -> bool {
    name.starts_with("ansible_") || name.starts_with("fixpoint_")
}

/// A condition that is a constant boolean.
fn is_constant(s: &str) -> bool {
    matches!(s.trim(), "false" | "False" | "no" | "true" | "True" | "yes")
}

/// Every variable the task's templates read, through the definitions of the play, its roles
/// and the task (`root: "{{ base }}/srv"` read means `base` read).
fn reads_of(task: &Task, play: &Play, templar: &Templar) -> Reads {
    let mut texts: Vec<&str> = Vec::new();
    strings(&task.params, &mut texts);
    if let Some(items) = &task.loop_items {
        strings(items, &mut texts);
    }
    for level in task.environment.iter().chain(&play.environment) {
        match level {
            EnvPart::Map(m) => m.values().for_each(|v| strings(v, &mut texts)),
            EnvPart::Template(t) => texts.push(t),
        }
    }
    texts.extend(
        [&task.once, &task.once_scope, &task.become_user]
            .into_iter()
            .flatten()
            .map(String::as_str),
    );
    let mut reads = Reads::Names(BTreeSet::new());
    for t in texts {
        reads.add(templar.names_read(t, ScanAs::Text));
    }
    let conditions = task
        .when
        .iter()
        .chain(task.changed_when.iter().flatten())
        .chain(task.failed_when.iter().flatten());
    for c in conditions {
        reads.add(templar.names_read(c, ScanAs::Condition));
    }
    // Parameters that are bare expressions, not templates: `assert`'s `that`, `debug`'s `var`
    // (`that: item in hostvars[inventory_hostname]` reads `hostvars`).
    let expressions = match task.module {
        "assert" => task.params.get("that"),
        "debug" => task.params.get("var"),
        _ => None,
    };
    let mut exprs = Vec::new();
    if let Some(v) = expressions {
        strings(v, &mut exprs);
    }
    for e in exprs {
        reads.add(templar.names_read(e, ScanAs::Condition));
    }
    if task.module == "template" {
        reads.add(template_file_reads(task, play, templar));
    }
    let mut defs: Vec<&Map<String, Value>> = vec![
        &task.vars,
        &play.vars,
        &play.vars_from_files,
        &play.role_vars,
    ];
    if let Some(r) = &task.role {
        defs.extend([
            &*r.params,
            &*r.entry_vars,
            &*r.vars,
            &*r.inherited,
            &*r.defaults,
        ]);
    }
    // Follow the definitions the names read lead to, each once.
    let Reads::Names(mut names) = reads else {
        return Reads::Any;
    };
    let mut todo: Vec<String> = names.iter().cloned().collect();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    while let Some(n) = todo.pop() {
        if !seen.insert(n.clone()) {
            continue;
        }
        for d in &defs {
            let Some(v) = d.get(&n) else { continue };
            let mut texts = Vec::new();
            strings(v, &mut texts);
            for t in texts {
                match templar.names_read(t, ScanAs::Text) {
                    Some(more) => {
                        for m in more {
                            if names.insert(m.clone()) {
                                todo.push(m);
                            }
                        }
                    }
                    None => return Reads::Any,
                }
            }
        }
    }
    Reads::Names(names)
}

/// What the `template` module's source file reads; `None` when the file is not known before
/// the run (a templated `src`) or cannot be read.
fn template_file_reads(task: &Task, play: &Play, templar: &Templar) -> Option<BTreeSet<String>> {
    let src = task.params.get("src")?.as_str()?;
    if Templar::is_template(src) {
        return None;
    }
    let path = task.search_dirs(&play.dir).into_iter().find_map(|d| {
        [d.join("templates").join(src), d.join(src)]
            .into_iter()
            .find(|p| p.is_file())
    })?;
    let text = std::fs::read_to_string(path).ok()?;
    templar.names_read(&text, ScanAs::File)
}

/// The strings inside a value (mapping keys too: they are rendered as well).
fn strings<'v>(v: &'v Value, out: &mut Vec<&'v str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(m) => {
            for (k, x) in m {
                out.push(k);
                strings(x, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::playbook::load::load_playbook;

    /// The tasks of a one-play playbook written from `tasks` (YAML, indented by four).
    fn analysed(tasks: &str) -> (Vec<(String, Fit, bool)>, usize) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("templates")).unwrap();
        std::fs::write(
            dir.path().join("templates/app.j2"),
            "port={{ port }} sum={{ sum.stdout }}\n",
        )
        .unwrap();
        let path = dir.path().join("site.yml");
        std::fs::write(
            &path,
            format!(
                "- hosts: all\n  gather_facts: false\n  vars:\n    root: \"{{{{ base }}}}/srv\"\n    base: /tmp\n  handlers:\n    - name: h\n      debug: {{msg: h}}\n  tasks:\n{tasks}"
            ),
        )
        .unwrap();
        let book = load_playbook(&path, &[]).unwrap();
        let play = &book.plays[0];
        let templar = Templar::new();
        let Some(s) = section(&play.tasks, play, &templar, &|_| true) else {
            return (Vec::new(), 0);
        };
        let rows = s
            .tasks
            .iter()
            .zip(&s.fit)
            .zip(&s.batch_start)
            .map(|((t, f), b)| (t.display_name(), *f, *b))
            .collect();
        (rows, s.steps)
    }

    const STEP: Fit = Fit::Step { last: false };
    const LAST: Fit = Fit::Step { last: true };

    #[test]
    fn agent_tasks_that_read_nothing_pending_make_one_batch() {
        let (rows, used) = analysed(
            "    - name: a\n      file: { path: \"{{ root }}\", state: directory }\n\
             \x20   - name: b\n      stat: { path: /etc }\n      register: st\n\
             \x20   - name: c\n      copy: { content: x, dest: /tmp/c }\n",
        );
        assert_eq!(used, 3);
        assert_eq!(
            rows,
            [
                ("a".into(), STEP, true),
                ("b".into(), STEP, false),
                ("c".into(), STEP, false)
            ]
        );
    }

    #[test]
    fn reading_a_result_of_the_same_batch_starts_a_new_one() {
        // Directly, through `when`, through a play variable's definition, and from a template file.
        let (rows, _) = analysed(
            "    - name: read\n      stat: { path: /etc }\n      register: base\n\
             \x20   - name: through root\n      file: { path: \"{{ root }}\", state: directory }\n\
             \x20   - name: sum\n      command: cat /etc/hostname\n      register: sum\n      changed_when: false\n\
             \x20   - name: when\n      file: { path: /tmp/w, state: directory }\n      when: sum.rc == 0\n\
             \x20   - name: other\n      stat: { path: /tmp }\n      register: sum\n\
             \x20   - name: file\n      template: { src: app.j2, dest: /tmp/app }\n",
        );
        let starts: Vec<bool> = rows.iter().map(|r| r.2).collect();
        assert_eq!(starts, [true, true, false, true, false, true]);
    }

    #[test]
    fn a_failure_the_controller_decides_only_ends_a_batch() {
        let (rows, _) = analysed(
            "    - name: guarded\n      command: cat /etc/hostname\n      register: r\n      changed_when: false\n      failed_when: r.rc > 1\n\
             \x20   - name: next\n      file: { path: /tmp/n, state: directory }\n\
             \x20   - name: notifying\n      file: { path: /tmp/m, state: directory }\n      changed_when: false\n      notify: h\n\
             \x20   - name: read only\n      command: cat /etc/hostname\n      changed_when: false\n\
             \x20   - name: after\n      file: { path: /tmp/o, state: directory }\n",
        );
        assert_eq!(
            rows.iter().map(|r| (r.1, r.2)).collect::<Vec<_>>(),
            [
                (LAST, true),
                (STEP, true),
                (LAST, false),
                (STEP, true),
                (STEP, false)
            ]
        );
    }

    #[test]
    fn a_controller_step_gates_the_agent_steps_after_it_in_the_batch() {
        // The gate reads the batch's result; the steps after it read nothing it or the batch
        // wrote, until one reads the fact it sets.
        let (rows, _) = analysed(
            "    - name: look\n      stat: { path: /etc }\n      register: st\n\
             \x20   - name: check\n      assert: { that: st.stat.exists }\n\
             \x20   - name: note\n      set_fact: { seen: \"{{ st.stat.mode }}\" }\n\
             \x20   - name: more\n      file: { path: /tmp/m, state: directory }\n\
             \x20   - name: uses\n      copy: { content: \"{{ seen }}\", dest: /tmp/s }\n\
             \x20   - name: templated name\n      set_fact: { \"{{ seen }}\": 1 }\n\
             \x20   - name: more again\n      file: { path: /tmp/m, state: directory }\n\
             \x20   - name: become\n      set_fact: { ansible_become_user: nobody }\n\
             \x20   - name: as nobody\n      file: { path: /tmp/n, state: directory }\n",
        );
        assert_eq!(
            rows.iter().map(|r| (r.1, r.2)).collect::<Vec<_>>(),
            [
                (STEP, true),
                (Fit::Gate, false),
                (Fit::Gate, false),
                (STEP, false),
                (STEP, true),
                (Fit::Alone("runs on the controller"), true),
                (STEP, true),
                (Fit::Gate, false),
                (STEP, true)
            ]
        );
    }

    #[test]
    fn a_loop_whose_items_could_be_a_batch_joins_the_batch_around_it() {
        let (rows, _) = analysed(
            "    - name: a\n      stat: { path: /tmp }\n      register: a\n\
             \x20   - name: each\n      file: { path: \"/tmp/{{ item }}\", state: directory }\n      loop: [x, y]\n      register: each\n\
             \x20   - name: b\n      file: { path: /tmp/b, state: directory }\n\
             \x20   - name: over a\n      file: { path: \"/tmp/{{ item }}\", state: directory }\n      loop: \"{{ a.stat.path | list }}\"\n      register: oa\n\
             \x20   - name: over oa\n      file: { path: \"/tmp/{{ item }}\", state: directory }\n      loop: \"{{ oa.results }}\"\n",
        );
        assert_eq!(
            rows.iter().map(|r| (r.1, r.2)).collect::<Vec<_>>(),
            [
                (STEP, true),
                (STEP, false),
                (STEP, false),
                (STEP, true),
                (STEP, true)
            ]
        );
    }

    #[test]
    fn controller_actions_loops_and_retries_run_alone_inside_the_section() {
        let (rows, _) = analysed(
            "    - name: a\n      file: { path: /tmp/a, state: directory }\n\
             \x20   - name: say\n      include_vars: { file: v.yml }\n\
             \x20   - name: each\n      file: { path: \"/tmp/{{ item }}\", state: directory }\n      loop: [x, y]\n      loop_control: { label: x }\n\
             \x20   - name: again\n      stat: { path: /tmp }\n      register: s\n      until: s.stat.exists\n\
             \x20   - name: b\n      file: { path: /tmp/b, state: directory }\n",
        );
        let fits: Vec<Fit> = rows.iter().map(|r| r.1).collect();
        assert_eq!(
            fits,
            [
                STEP,
                Fit::Alone("runs on the controller"),
                Fit::Alone("a loop"),
                Fit::Alone("until"),
                STEP
            ]
        );
        assert!(rows.iter().all(|r| r.2), "each starts its own batch");
    }

    #[test]
    fn a_loop_goes_in_one_batch_unless_an_item_reads_what_an_earlier_one_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("site.yml");
        std::fs::write(
            &path,
            "- hosts: all\n  gather_facts: false\n  tasks:\n\
             \x20   - file: { path: \"/tmp/{{ item }}\", state: directory }\n      loop: [a, b]\n      register: r\n\
             \x20   - file: { path: \"/tmp/{{ item }}\", state: directory }\n      loop: [a, b]\n      register: r\n      when: r is not defined\n\
             \x20   - file: { path: \"/tmp/{{ item }}\", state: directory }\n      loop: [a, b]\n      loop_control: { label: x }\n\
             \x20   - debug: { msg: \"{{ item }}\" }\n      loop: [a, b]\n",
        )
        .unwrap();
        let book = load_playbook(&path, &[]).unwrap();
        let play = &book.plays[0];
        let templar = Templar::new();
        let fits: Vec<bool> = play
            .tasks
            .iter()
            .map(|s| match s {
                Step::Task(t) => loop_batchable(t, play, &templar),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(fits, [true, false, false, false]);
    }

    #[test]
    fn barriers_end_the_section() {
        for (barrier, why) in [
            ("      run_once: true\n", "run_once"),
            ("      delegate_to: localhost\n", "delegate_to"),
            ("      throttle: 1\n", "throttle"),
            ("      when: hostvars['h2'].x is defined\n", "hostvars"),
        ] {
            let (rows, used) = analysed(&format!(
                "    - name: a\n      file: {{ path: /tmp/a, state: directory }}\n\
                 \x20   - name: b\n      file: {{ path: /tmp/b, state: directory }}\n\
                 \x20   - name: barrier\n      file: {{ path: /tmp/c, state: directory }}\n{barrier}\
                 \x20   - name: d\n      file: {{ path: /tmp/d, state: directory }}\n"
            ));
            assert_eq!((rows.len(), used), (2, 2), "{why}");
        }
        // A section needs two tasks: one before a barrier runs as it always has.
        let (rows, _) = analysed(
            "    - name: a\n      file: { path: /tmp/a, state: directory }\n\
             \x20   - name: p\n      pause: { seconds: 1 }\n\
             \x20   - name: b\n      file: { path: /tmp/b, state: directory }\n",
        );
        assert!(rows.is_empty());
    }
}
