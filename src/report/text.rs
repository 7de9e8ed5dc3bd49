//! Ansible-shaped text for people: result lines, the recap, journal listings and the
//! `--twice` verdict, colored when stdout is a terminal.

use super::{Reporter, Stats, Status, TaskEvent};
use fixpoint_modules::Diff;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

impl Reporter {
    /// A task result line; `msg`, `diff` and `result` are already censored for `no_log`.
    pub(super) fn task_text(
        &mut self,
        ev: &TaskEvent,
        msg: Option<&str>,
        diff: Option<&Diff>,
        result: Option<&Map<String, Value>>,
    ) {
        let color = match ev.status {
            Status::Ok => "32",
            Status::Changed => "33",
            Status::Failed | Status::Unreachable => "31",
            Status::Skipped => "36",
        };
        // Before the diff that would undo it: who changed the file last.
        if let Some(d) = result.and_then(|r| r.get("drift")) {
            let line = drift_line(ev.host, d);
            let painted = self.paint("35", &line);
            self.line(&painted);
        }
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
        let mut note = ev.note.map(|n| format!(" ({n})")).unwrap_or_default();
        if ev.python {
            note.push_str(" [python]");
        }
        // Ansible's `[web1 -> localhost]` for a delegated task.
        let host = match ev.delegated_to {
            Some(d) => format!("{} -> {d}", ev.host),
            None => ev.host.to_string(),
        };
        let text = match ev.status {
            Status::Failed => {
                let mut body = Map::new();
                if let Some(r) = result {
                    for k in ["rc", "stdout", "stderr", "module_stdout", "module_stderr"] {
                        if let Some(v) = r.get(k) {
                            body.insert(k.into(), v.clone());
                        }
                    }
                }
                body.insert("msg".into(), json!(msg.unwrap_or("failed")));
                let head = format!("fatal: [{host}]: FAILED!{item}");
                let tail = if ev.ignored { "\n...ignoring" } else { "" };
                format!(
                    "{head} => {}{}{tail}",
                    keys_sorted(Value::Object(body)),
                    task_at(ev.location)
                )
            }
            // ansible-core's `...ignoring` too when `ignore_unreachable` keeps the host.
            Status::Unreachable => format!(
                "fatal: [{host}]: UNREACHABLE!{item} => {}{}{}",
                json!({"msg": msg.unwrap_or("unreachable")}),
                task_at(ev.location),
                if ev.ignored { "\n...ignoring" } else { "" }
            ),
            s => {
                let mut t = format!("{}: [{host}]{item}{note}", s.word());
                // ansible-core always shows what `debug` and a non-quiet `assert` return
                // (`_ansible_verbose_always`); `assert`'s with its `changed`.
                // (A quiet one's `msg` is also the event's message: `prepare::assert`.)
                let assert_shown = ev.module == "assert"
                    && msg.is_none()
                    && result.is_some_and(|r| r.contains_key("msg"));
                let show_result = self.verbosity > 0 || ev.module == "debug" || assert_shown;
                if show_result {
                    if let Some(r) = result {
                        let shown: Map<String, Value> = r
                            .iter()
                            .filter(|(k, _)| {
                                self.verbosity > 0
                                    || *k != "failed" && (*k != "changed" || assert_shown)
                            })
                            // A registered `diff` (lineinfile, ini_file...) is shown as a diff
                            // with --diff; ansible-core prints it among the values only at -vvv.
                            .filter(|(k, _)| self.verbosity >= 3 || *k != "diff")
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect();
                        if !shown.is_empty() {
                            t.push_str(" => ");
                            // A non-finite float as ansible-core prints it (`Infinity`).
                            t.push_str(&crate::yaml::mark::python_json_floats(
                                serde_json::to_string_pretty(&keys_sorted(Value::Object(shown)))
                                    .unwrap_or_default(),
                            ));
                        }
                    }
                }
                t
            }
        };
        let painted = self.paint(color, &text);
        self.line(&painted);
    }

    pub(super) fn journal_text(&mut self, host: &str, data: &Value) {
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

    pub(super) fn recap_text(&mut self, stats: &BTreeMap<String, Stats>, pass: u8, twice: bool) {
        let mut title = if twice {
            format!("PLAY RECAP (pass {pass})")
        } else {
            "PLAY RECAP".to_string()
        };
        if let Some(shard) = self.shard {
            title.push_str(&format!(" [shard {shard}]"));
        }
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

    pub(super) fn not_converged_text(&mut self, culprits: &[(String, String, String, Diff)]) {
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

/// `drift: changed outside fixpoint since run <id> at <time>: [host] <path> (content, mode)`.
pub(super) fn drift_line(host: &str, d: &Value) -> String {
    let s = |k: &str| d[k].as_str().unwrap_or("?").to_string();
    let what: Vec<&str> = d["what"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let files = d["files"]
        .as_array()
        .map_or(String::new(), |f| format!(", {} files", f.len()));
    format!(
        "drift: changed outside fixpoint since run {} at {}: [{host}] {} ({}{files})",
        s("since_run"),
        s("at"),
        s("path"),
        what.join(", ")
    )
}

/// Where the failed task is written, under its result line (ansible-core's "The error appears
/// to be in ..."), when the engine knows it.
fn task_at(location: &str) -> String {
    if location.is_empty() {
        String::new()
    } else {
        format!("\n  task: {location}")
    }
}

/// `v` with every mapping's keys sorted, as Ansible's default output shows results (mappings
/// keep the order they were written in everywhere else).
fn keys_sorted(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(String, Value)> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, keys_sorted(v)))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.into_iter().map(keys_sorted).collect()),
        other => other,
    }
}
