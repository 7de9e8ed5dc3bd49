//! The reporter: the only thing that prints results. Ansible-shaped text for people, JSON lines for machines.

use fixpoint_modules::Diff;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Changed,
    Failed,
    Skipped,
    Unreachable,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Changed => "changed",
            Status::Failed => "failed",
            Status::Skipped => "skipping",
            Status::Unreachable => "unreachable",
        }
    }
}

/// Per-host counters for the recap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    pub ok: u32,
    pub changed: u32,
    pub failed: u32,
    pub skipped: u32,
    pub unreachable: u32,
    pub rescued: u32,
    pub ignored: u32,
}

/// One result line: a task (or one loop item of it) on one host.
pub struct TaskEvent<'a> {
    pub host: &'a str,
    pub task: &'a str,
    pub module: &'a str,
    pub location: &'a str,
    pub status: Status,
    pub item: Option<&'a str>,
    pub diff: Option<&'a Diff>,
    pub msg: Option<&'a str>,
    pub result: Option<&'a Map<String, Value>>,
    pub ignored: bool,
    /// `no_log`: parameters and results are hidden everywhere.
    pub censored: bool,
    /// Replayed from the journal instead of run (the `once:` contract).
    pub note: Option<&'a str>,
    /// `delegate_to`: the host it ran on, when not `host` itself.
    pub delegated_to: Option<&'a str>,
}

pub struct Reporter {
    json: bool,
    color: bool,
    verbosity: u8,
    show_diff: bool,
    out: Box<dyn Write + Send>,
}

const CENSORED: &str =
    "the output has been hidden due to the fact that 'no_log: true' was specified for this result";

impl Reporter {
    pub fn new(json: bool, verbosity: u8, show_diff: bool) -> Reporter {
        let stdout = std::io::stdout();
        let color = !json && stdout.is_terminal() && std::env::var_os("NO_COLOR").is_none();
        Reporter {
            json,
            color,
            verbosity,
            show_diff,
            out: Box::new(stdout),
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    fn line(&mut self, s: &str) {
        // A closed stdout (e.g. piped into `head`) must not abort the run half-way.
        let _ = writeln!(self.out, "{s}");
    }

    fn banner(&mut self, title: &str) {
        if self.json {
            return;
        }
        let stars = "*".repeat(79usize.saturating_sub(title.len() + 1).max(3));
        self.line("");
        self.line(&format!("{title} {stars}"));
    }

    fn emit(&mut self, v: Value) {
        let s = v.to_string();
        self.line(&s);
    }

    pub fn play_start(&mut self, name: &str, pass: u8) {
        if self.json {
            self.emit(json!({"event": "play", "name": name, "pass": pass}));
        } else {
            self.banner(&format!("PLAY [{name}]"));
        }
    }

    pub fn task_start(&mut self, name: &str, handler: bool) {
        if !self.json {
            let kind = if handler { "RUNNING HANDLER" } else { "TASK" };
            self.banner(&format!("{kind} [{name}]"));
        }
    }

    pub fn warn(&mut self, msg: &str) {
        if self.json {
            self.emit(json!({"event": "warning", "msg": msg}));
        } else {
            let w = self.paint("35", &format!("[WARNING]: {msg}"));
            self.line(&w);
        }
    }

    pub fn note(&mut self, host: &str, msg: &str) {
        if self.json {
            self.emit(json!({"event": "note", "host": host, "msg": msg}));
        } else {
            self.line(&format!("note: [{host}] {msg}"));
        }
    }

    pub fn task(&mut self, ev: &TaskEvent) {
        let (msg, diff, result) = if ev.censored {
            (Some(CENSORED), None, None)
        } else {
            (ev.msg, ev.diff, ev.result)
        };
        if self.json {
            let mut o = json!({
                "event": "task",
                "host": ev.host,
                "task": ev.task,
                "module": ev.module,
                "status": ev.status,
                "diff": diff.filter(|d| !d.is_empty()),
                "msg": msg,
                "location": ev.location,
            });
            if let Some(item) = ev.item {
                o["item"] = json!(if ev.censored { "(censored)" } else { item });
            }
            if ev.ignored {
                o["ignored"] = json!(true);
            }
            if let Some(n) = ev.note {
                o["note"] = json!(n);
            }
            if let Some(d) = ev.delegated_to {
                o["delegated_to"] = json!(d);
            }
            if self.verbosity > 0 {
                o["result"] = json!(result);
            }
            self.emit(o);
            return;
        }
        let color = match ev.status {
            Status::Ok => "32",
            Status::Changed => "33",
            Status::Failed | Status::Unreachable => "31",
            Status::Skipped => "36",
        };
        if self.show_diff {
            if let Some(d) = diff {
                self.diff(d);
            }
        }
        let item = ev
            .item
            .map(|i| {
                if ev.censored {
                    " => (item=(censored due to no_log))".to_string()
                } else {
                    format!(" => (item={i})")
                }
            })
            .unwrap_or_default();
        let note = ev.note.map(|n| format!(" ({n})")).unwrap_or_default();
        // Ansible's `[web1 -> localhost]` for a delegated task.
        let host = match ev.delegated_to {
            Some(d) => format!("{} -> {d}", ev.host),
            None => ev.host.to_string(),
        };
        let text = match ev.status {
            Status::Failed => {
                let mut body = Map::new();
                if let Some(r) = result {
                    for k in ["rc", "stdout", "stderr"] {
                        if let Some(v) = r.get(k) {
                            body.insert(k.into(), v.clone());
                        }
                    }
                }
                body.insert("msg".into(), json!(msg.unwrap_or("failed")));
                let head = format!("fatal: [{host}]: FAILED!{item}");
                let tail = if ev.ignored { "\n...ignoring" } else { "" };
                format!(
                    "{head} => {}\n  task: {}{tail}",
                    Value::Object(body),
                    ev.location
                )
            }
            Status::Unreachable => format!(
                "fatal: [{host}]: UNREACHABLE! => {}",
                json!({"msg": msg.unwrap_or("unreachable")})
            ),
            s => {
                let mut t = format!("{}: [{host}]{item}{note}", s.word());
                let show_result = self.verbosity > 0 || ev.module == "debug";
                if show_result {
                    if let Some(r) = result {
                        let shown: Map<String, Value> = r
                            .iter()
                            .filter(|(k, _)| {
                                self.verbosity > 0 || (*k != "changed" && *k != "failed")
                            })
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect();
                        if !shown.is_empty() {
                            t.push_str(" => ");
                            t.push_str(
                                &serde_json::to_string_pretty(&Value::Object(shown))
                                    .unwrap_or_default(),
                            );
                        }
                    }
                }
                t
            }
        };
        let painted = self.paint(color, &text);
        self.line(&painted);
    }

    fn diff(&mut self, d: &Diff) {
        for a in &d.attrs {
            let none = |s: &str| {
                if s.is_empty() {
                    "(none)".to_string()
                } else {
                    s.to_string()
                }
            };
            let line = format!(
                "{}: {} {} → {}",
                a.path,
                a.attr,
                none(&a.before),
                none(&a.after)
            );
            self.line(&line);
        }
        for c in &d.content {
            let text = render_unified(&c.path, &c.before, &c.after);
            for l in text.lines() {
                let painted = if l.starts_with('+') && !l.starts_with("+++") {
                    self.paint("32", l)
                } else if l.starts_with('-') && !l.starts_with("---") {
                    self.paint("31", l)
                } else {
                    l.to_string()
                };
                self.line(&painted);
            }
        }
    }

    /// The answer of a `fixpoint journal` action on one host.
    pub fn journal(&mut self, host: &str, data: &Value) {
        if self.json {
            self.emit(json!({"event": "journal", "host": host, "data": data}));
            return;
        }
        match data {
            Value::Array(records) => {
                if records.is_empty() {
                    self.line(&format!("[{host}] no journal records"));
                }
                for r in records {
                    let s = |k: &str| r[k].as_str().unwrap_or("-").to_string();
                    let line = format!(
                        "[{host}] {:<24} {:<8} playbook={} started={} finished={} run={}",
                        s("key"),
                        s("status"),
                        s("playbook"),
                        s("started_at"),
                        s("finished_at"),
                        s("run_id")
                    );
                    self.line(&line);
                }
            }
            other => {
                let line = format!("[{host}] {other}");
                self.line(&line);
            }
        }
    }

    pub fn recap(&mut self, stats: &BTreeMap<String, Stats>, pass: u8, twice: bool) {
        if self.json {
            let hosts: Map<String, Value> =
                stats.iter().map(|(h, s)| (h.clone(), json!(s))).collect();
            let mut o = json!({"event": "recap", "hosts": hosts});
            if twice {
                o["pass"] = json!(pass);
            }
            self.emit(o);
            return;
        }
        let title = if twice {
            format!("PLAY RECAP (pass {pass})")
        } else {
            "PLAY RECAP".to_string()
        };
        self.banner(&title);
        for (h, s) in stats {
            let line = format!(
                "{:<26} : ok={:<4} changed={:<4} unreachable={:<4} failed={:<4} skipped={:<4} rescued={:<4} ignored={}",
                h, s.ok, s.changed, s.unreachable, s.failed, s.skipped, s.rescued, s.ignored
            );
            let color = if s.failed > 0 || s.unreachable > 0 {
                "31"
            } else if s.changed > 0 {
                "33"
            } else {
                "32"
            };
            let painted = self.paint(color, &line);
            self.line(&painted);
        }
        self.line("");
    }

    /// The verdict of `--twice` when the second pass changed something.
    pub fn not_converged(&mut self, culprits: &[(String, String, String, Diff)]) {
        if self.json {
            let list: Vec<Value> = culprits
                .iter()
                .map(|(host, task, loc, diff)| {
                    json!({"host": host, "task": task, "location": loc, "diff": diff})
                })
                .collect();
            self.emit(json!({"event": "not_converged", "tasks": list}));
            return;
        }
        let head = self.paint(
            "31",
            &format!(
                "NOT CONVERGED: the second pass changed {} task result(s); these tasks undo each other or are not idempotent:",
                culprits.len()
            ),
        );
        self.line(&head);
        for (host, task, loc, diff) in culprits {
            self.line(&format!("  - [{host}] {task} ({loc})"));
            self.diff(diff);
        }
    }
}

/// A unified diff with `before`/`after` headers naming the path.
pub fn render_unified(path: &str, before: &str, after: &str) -> String {
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(&format!("before: {path}"), &format!("after: {path}"))
        .to_string()
}
