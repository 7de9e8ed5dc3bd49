//! validate/: everything wrong with loaded playbooks that can be found without a host, all of
//! it at once — `fixpoint validate`, `--syntax-check`, and the first step of `apply`/`check`
//! (which touch no host when anything is found).
//!
//! The loader (`playbook/`) already refused what is wrong in the YAML, the keywords, the
//! modules and their plain parameters, and unguarded commands. This folder reads what the
//! loader keeps as text: every template and bare expression of every task (syntax, and the
//! filters, tests, functions and lookups fixpoint lacks, through `template::Templar::scan`),
//! every template file the playbook can reach (`files`: `template` sources, the candidates of
//! `with_first_found`, `{% include %}`/`{% import %}`/`{% extends %}` targets and
//! `lookup('template', …)`), and the task files a templated `include_tasks` name can stand
//! for (`files`), each loaded and checked as if it were included.
//!
//! What is wrong in a file that only a templated include name may reach is a warning, not an
//! error: ansible-core fails such a file only when a host includes it, and roles carry per-OS
//! files (`setup-Solaris.yml` with `pkg5`) that a Debian host never includes. The run reports
//! the same problem as an error if a host does include it.
//!
//! It must not render anything: no variable has a value here.

mod files;
mod fleet;

pub use fleet::Sharding;

use crate::diag::{Diagnostic, Pos};
use crate::playbook::validate as guard;
use crate::playbook::{EnvPart, IncludeSource, Play, Playbook, Step, Task};
use crate::template::{ScanAs, Templar};
use crate::yaml::mark;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// What `validate` found: errors refuse the run; warnings are problems in files that only a
/// templated include may reach, printed and left to the run.
#[derive(Default)]
pub struct Findings {
    pub errors: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
}

/// Every problem in these playbooks, in the order found, each once.
pub fn validate(books: &[Playbook]) -> Findings {
    validate_sharded(books, None)
}

/// The same, and under `--shard` (without `--shard-allow-cross`) what needs the whole fleet
/// (`fleet.rs`).
pub fn validate_sharded(books: &[Playbook], sharding: Option<&Sharding<'_>>) -> Findings {
    let templar = Templar::new();
    let mut v = Validator {
        sharding,
        cross: Vec::new(),
        templar: &templar,
        out: Vec::new(),
        warnings: Vec::new(),
        files_seen: BTreeSet::new(),
        playbooks: books
            .iter()
            .map(|b| std::fs::canonicalize(&b.path).unwrap_or(b.path.clone()))
            .collect(),
        roles_path: Vec::new(),
        dirs: Vec::new(),
        registered: BTreeSet::new(),
        set_facts: Vec::new(),
        pending: Vec::new(),
    };
    for book in books {
        v.roles_path = book.roles_path.clone();
        for play in &book.plays {
            v.play(play);
        }
    }
    v.decide_guards();
    v.out.append(&mut v.cross);
    let mut seen = BTreeSet::new();
    let mut once = |list: Vec<Diagnostic>| -> Vec<Diagnostic> {
        list.into_iter()
            .filter(|d| seen.insert(d.to_string()))
            .collect()
    };
    Findings {
        errors: once(v.out),
        warnings: once(v.warnings),
    }
}

struct Validator<'a> {
    templar: &'a Templar,
    /// `--shard`: refuse what needs the whole fleet.
    sharding: Option<&'a Sharding<'a>>,
    /// What needs the whole fleet: errors wherever found, even in a file only a templated
    /// include reaches (the run cannot tell in advance that no host includes it).
    cross: Vec<Diagnostic>,
    out: Vec<Diagnostic>,
    /// Problems in files only a templated include name may reach (see the module comment).
    warnings: Vec<Diagnostic>,
    /// Template and task files already checked (canonical paths).
    files_seen: BTreeSet<PathBuf>,
    /// The playbooks themselves: never a candidate of a templated `include_tasks`.
    playbooks: Vec<PathBuf>,
    roles_path: Vec<PathBuf>,
    /// Where the task being checked finds its files (its role, then the playbook's directory).
    dirs: Vec<PathBuf>,
    /// Every `register:` name of the playbooks (with the files templated includes may load).
    registered: BTreeSet<String>,
    /// Every `set_fact` key, with the names its value's templates read.
    set_facts: Vec<(String, BTreeSet<String>)>,
    /// Commands whose only possible guard is their `when` (`Task::guard_pending`): the
    /// conditions, the error if they read no registered result, and the include position when
    /// found in a file a templated include loads (a warning then).
    pending: Vec<(Vec<String>, Diagnostic, Option<Pos>)>,
}

impl Validator<'_> {
    fn play(&mut self, play: &Play) {
        self.dirs = vec![play.dir.clone()];
        self.fleet_play(play);
        self.free_play(play);
        for (k, val) in play.vars.iter() {
            self.value(val, &play.pos, &format!("play variable `{k}`"));
        }
        for section in [&play.pre_tasks, &play.roles, &play.tasks, &play.post_tasks] {
            self.steps(section, play);
        }
        for h in &play.handlers {
            self.task(h, play);
        }
    }

    /// A free play's `any_errors_fatal`, `max_fail_percentage` and `run_once` are ignored, as
    /// ansible-core's free strategy ignores them (with a warning).
    fn free_play(&mut self, play: &Play) {
        if !play.free {
            return;
        }
        let task_fatal = play
            .all_tasks()
            .into_iter()
            .find(|t| t.any_errors_fatal == Some(true))
            .map(|t| &t.pos);
        let fatal = task_fatal.or(play.any_errors_fatal.then_some(&play.pos));
        let percentage = play.max_fail_percentage.is_some().then_some(&play.pos);
        let once = play
            .all_tasks()
            .into_iter()
            .find(|t| t.run_once || t.templated.contains_key("run_once"))
            .map(|t| &t.pos);
        let stop = "use the linear strategy for failures that stop every host";
        for (key, at, help) in [
            ("any_errors_fatal", fatal, stop),
            ("max_fail_percentage", percentage, stop),
            (
                "run_once",
                once,
                "the task runs on every host; use the linear strategy to run it once for all",
            ),
        ] {
            if let Some(at) = at {
                self.warnings.push(
                    Diagnostic::at(
                        at,
                        format!(
                            "`{key}` is ignored under `strategy: free`, as in ansible-core: \
                             each host runs its tasks without waiting for the others"
                        ),
                    )
                    .help(help),
                );
            }
        }
    }

    fn steps(&mut self, steps: &[Step], play: &Play) {
        for s in steps {
            match s {
                Step::Task(t) => self.task(t, play),
                Step::Block(b) => {
                    self.steps(&b.block, play);
                    self.steps(&b.rescue, play);
                    self.steps(&b.always, play);
                }
                Step::Meta(m) => self.conditions(&m.when, &m.pos, "when"),
                Step::Include(i) => {
                    self.fleet_include(i);
                    self.conditions(&i.when, &i.pos, "when");
                    if let Some(items) = &i.loop_items {
                        self.value(items, &i.pos, "loop");
                    }
                    for (k, val) in &i.vars {
                        self.value(val, &i.pos, &format!("variable `{k}`"));
                    }
                    match &i.source {
                        IncludeSource::Loaded(steps) => self.steps(steps, play),
                        IncludeSource::TasksFile {
                            file,
                            search,
                            inherit,
                        } => {
                            self.text(file, &i.pos, i.action);
                            self.include_candidates(file, search, inherit, &i.pos, play);
                        }
                        IncludeSource::Role { name, params, .. } => {
                            self.text(name, &i.pos, "name");
                            for (k, val) in params {
                                self.value(val, &i.pos, &format!("role parameter `{k}`"));
                            }
                        }
                    }
                }
            }
        }
    }

    fn task(&mut self, t: &Task, play: &Play) {
        let at = &t.pos;
        self.guard_facts(t);
        self.fleet_task(t);
        self.dirs = t.search_dirs(&play.dir);
        if let Some(n) = &t.name {
            self.text(n, at, "name");
        }
        self.module_params(t, play);
        self.conditions(&t.when, at, "when");
        for (what, conds) in [
            ("changed_when", &t.changed_when),
            ("failed_when", &t.failed_when),
            ("until", &t.until),
            ("break_when", &t.loop_break_when),
        ] {
            if let Some(c) = conds {
                self.conditions(c, at, what);
            }
        }
        if let Some(items) = &t.loop_items {
            self.value(items, at, "loop");
        }
        if let Some(name) = &t.loop_lookup {
            if !self.templar.knows_lookup(name) {
                self.out.push(
                    Diagnostic::at(
                        at,
                        format!("unknown lookup plugin `{name}`, in `with_{name}`"),
                    )
                    .help(
                        "fixpoint runs its own lookups (README, \"Templating\") and the \
                         playbook's `lookup_plugins/`; fix the name",
                    ),
                );
            }
        }
        for (k, val) in t.vars.iter() {
            self.value(val, at, &format!("variable `{k}`"));
        }
        for level in &t.environment {
            match level {
                EnvPart::Map(m) => {
                    for (k, val) in m {
                        self.value(val, at, &format!("environment `{k}`"));
                    }
                }
                EnvPart::Template(tmpl) => self.text(tmpl, at, "environment"),
            }
        }
        for (k, tmpl) in &t.templated {
            self.text(tmpl, at, k);
        }
        if let Some(module) = t.templated.get("action") {
            // Not an error: ansible-core names the module when the task runs, and so does the
            // engine; but nothing of its arguments could be checked here.
            self.warnings.push(
                Diagnostic::at(
                    at,
                    format!(
                        "the module of this task is `{module}`, resolved at run time on each \
                         host: its arguments are checked only then"
                    ),
                )
                .help("name the module (`apt:`) to have its arguments checked now"),
            );
        }
        for (what, s) in [("delegate_to", &t.delegate_to), ("label", &t.loop_label)] {
            if let Some(s) = s {
                self.text(s, at, what);
            }
        }
        self.task_files(t, play);
    }

    /// What the guard rule needs of this task: its registered name, the facts it sets and what
    /// they read, and whether it is a command waiting for its `when` to be judged.
    fn guard_facts(&mut self, t: &Task) {
        if let Some(r) = &t.register {
            self.registered.insert(r.clone());
        }
        if t.module == "set_fact" {
            if let Some(params) = t.params.as_object() {
                for (k, val) in params.iter().filter(|(k, _)| *k != "cacheable") {
                    let mut reads = BTreeSet::new();
                    template_names(val, &mut reads);
                    self.set_facts.push((k.clone(), reads));
                }
            }
        }
        if let Some(d) = &t.unknown_param {
            let mut d = d.clone();
            d.msg = if guard::fails_only_where_it_runs(t) {
                format!(
                    "{} (the task has {}: it fails only if a host runs it, as in ansible-core)",
                    d.msg,
                    if t.ignore_errors {
                        "`ignore_errors`"
                    } else if t.when.is_empty() {
                        "a `failed_when`"
                    } else {
                        "a `when`"
                    }
                )
            } else {
                // Only a `copy` source missing at load is kept so (`check_module_params`).
                format!(
                    "{} (an earlier task may make it on the controller: the task fails when it \
                     runs if it is still missing, as in ansible-core)",
                    d.msg
                )
            };
            self.warnings.push(d);
        }
        if let Some(pos) = &t.guard_pending {
            self.pending
                .push((t.when.clone(), guard::unguarded(t, pos), None));
        }
    }

    /// Once every task is seen: the commands whose `when` reads no registered result (nor a
    /// fact derived from one) are unguarded.
    fn decide_guards(&mut self) {
        let names = guard::guard_closure(std::mem::take(&mut self.registered), &self.set_facts);
        for (when, mut d, include_at) in std::mem::take(&mut self.pending) {
            if guard::when_reads_any(&when, &names) {
                continue;
            }
            match include_at {
                Some(at) => {
                    d.msg = format!(
                        "{} (in a file the include at {at} loads at run time: an error only if a host includes it)",
                        d.msg
                    );
                    self.warnings.push(d);
                }
                None => self.out.push(d),
            }
        }
        guard::set_guard_names(names);
    }

    /// Module parameters: templates, except those a module reads as bare expressions.
    fn module_params(&mut self, t: &Task, _play: &Play) {
        if let Some(splat) = &t.args_splat {
            self.text(
                &splat.template,
                &t.pos,
                &format!("`{}` arguments", t.module),
            );
        }
        let Some(params) = t.params.as_object() else {
            return;
        };
        for (k, val) in params {
            let what = format!("`{}` parameter `{k}`", t.module);
            match (t.module, k.as_str()) {
                ("assert", "that") => match val {
                    Value::String(s) => self.condition(s, &t.pos, &what),
                    Value::Array(a) => {
                        for c in a.iter().filter_map(Value::as_str) {
                            self.condition(c, &t.pos, &what);
                        }
                    }
                    _ => {}
                },
                ("debug", "var") => {
                    if let Some(s) = val.as_str() {
                        self.condition(s, &t.pos, &what);
                    }
                }
                _ => self.value(val, &t.pos, &what),
            }
        }
    }

    fn conditions(&mut self, conds: &[String], at: &Pos, what: &str) {
        for c in conds {
            self.condition(c, at, what);
        }
    }

    fn condition(&mut self, cond: &str, at: &Pos, what: &str) {
        self.scan(cond, ScanAs::Condition, at, what);
    }

    /// Every template string inside a value (keys of mappings too); `!unsafe` values are
    /// never rendered, so never checked.
    fn value(&mut self, v: &Value, at: &Pos, what: &str) {
        if mark::literal_of(v).is_some() {
            return;
        }
        match v {
            Value::String(s) => self.text(s, at, what),
            Value::Array(a) => a.iter().for_each(|x| self.value(x, at, what)),
            Value::Object(m) => {
                for (k, x) in m {
                    self.text(k, at, what);
                    self.value(x, at, what);
                }
            }
            _ => {}
        }
    }

    fn text(&mut self, s: &str, at: &Pos, what: &str) {
        if Templar::is_template(s) {
            self.scan(s, ScanAs::Text, at, what);
        }
    }

    /// Scan one string of the playbook; problems point at the task (or play) that holds it,
    /// naming the keyword and, for a text of several lines, the line inside it.
    fn scan(&mut self, s: &str, how: ScanAs, at: &Pos, what: &str) {
        let scan = self.templar.scan(s, how);
        self.fleet_reads(&scan.cross, s, at, what);
        for p in scan.problems {
            let inside = if s.contains('\n') {
                format!(" (line {} of the text)", p.line)
            } else {
                String::new()
            };
            let shown: String = s.chars().take(60).collect();
            let cut = if shown.len() < s.len() { "…" } else { "" };
            self.out.push(
                Diagnostic::at(at, format!("{}, in {what} `{shown}{cut}`{inside}", p.msg))
                    .help(p.help),
            );
        }
        for r in scan.refs {
            self.lookup_template(&r, at);
        }
    }
}

/// The names the templates inside a value read (see `guard::names_read`).
fn template_names(v: &Value, out: &mut BTreeSet<String>) {
    if mark::literal_of(v).is_some() {
        return;
    }
    match v {
        Value::String(s) if Templar::is_template(s) => out.extend(guard::names_read(s)),
        Value::Array(a) => a.iter().for_each(|x| template_names(x, out)),
        Value::Object(m) => m.values().for_each(|x| template_names(x, out)),
        _ => {}
    }
}
