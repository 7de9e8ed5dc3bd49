//! report/: the only thing that prints results. Ansible-shaped text for people (`text`), JSON
//! lines for machines (`json`), file diffs (`diff`), and what a run would do without running
//! (`listing`, for `--list-hosts`, `--list-tasks`, `--list-tags`).
//!
//! It decides nothing: the engine says what happened (`TaskEvent`, `Stats`...), and the
//! reporter only chooses how it looks. It must NOT know hosts' state, agents or variables.

mod diff;
mod json;
pub mod listing;
mod progress;
mod text;

pub use diff::render_unified;
pub use progress::Progress;

use fixpoint_modules::Diff;
use serde_json::{Map, Value};
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
    /// The module ran as Ansible's own Python code (`"engine":"python"`), not natively.
    pub python: bool,
}

/// Prints events to stdout, as text or JSON lines (`--json`).
pub struct Reporter {
    json: bool,
    color: bool,
    verbosity: u8,
    show_diff: bool,
    out: Box<dyn Write + Send>,
    /// `--shard`: named in the recap, so the shards' recaps can be merged.
    shard: Option<crate::inventory::Shard>,
    /// Requests each host's agents answered in the pass, for the JSON recap (`round_trips`).
    round_trips: BTreeMap<String, u64>,
    /// Where the JSON lines also go, whatever `json` says (`fixpoint pull`'s result).
    tee: Option<Box<dyn Write + Send>>,
    /// This run's id, carried by the JSON recap.
    run_id: String,
    /// Results that reported drift (files changed outside fixpoint), for `fixpoint drift`.
    drifts: usize,
    /// The live status lines the log scrolls above (a no-op when off).
    progress: Progress,
}

const CENSORED: &str =
    "the output has been hidden due to the fact that 'no_log: true' was specified for this result";

impl Reporter {
    pub fn new(json: bool, verbosity: u8, show_diff: bool, progress: Progress) -> Reporter {
        let stdout = std::io::stdout();
        let color = !json
            && stdout.is_terminal()
            && std::env::var_os("NO_COLOR").is_none()
            && std::env::var("TERM").map_or(true, |t| t != "dumb");
        Reporter {
            json,
            color,
            verbosity,
            show_diff,
            out: Box::new(stdout),
            shard: None,
            round_trips: BTreeMap::new(),
            tee: None,
            run_id: String::new(),
            drifts: 0,
            progress,
        }
    }

    /// The shard this run is (`--shard`), for the recap.
    /// The round trips of the pass ending, by host: the next JSON recap carries them.
    pub fn set_round_trips(&mut self, round_trips: BTreeMap<String, u64>) {
        self.round_trips = round_trips;
    }

    pub fn set_shard(&mut self, shard: Option<crate::inventory::Shard>) {
        self.shard = shard;
    }

    /// Also write every event as a JSON line to `sink`, whatever stdout shows.
    pub fn tee_json(&mut self, sink: Box<dyn Write + Send>) {
        self.tee = Some(sink);
    }

    /// Whether events are made as JSON at all: for stdout, or for the tee.
    fn wants_json(&self) -> bool {
        self.json || self.tee.is_some()
    }

    /// The run's id, for the JSON recap.
    pub fn set_run_id(&mut self, id: &str) {
        self.run_id = id.to_string();
    }

    /// Count the drift another reporter saw (a free play's lane).
    pub fn add_drifts(&mut self, n: usize) {
        self.drifts += n;
    }

    /// How many results (and journal-only files) reported drift so far.
    pub fn drifts(&self) -> usize {
        self.drifts
    }

    /// Whether a run printing through this reporter may show live status lines: on a
    /// terminal, as text, unless `NO_COLOR`, `TERM=dumb` or `--no-progress` say otherwise.
    pub fn progress_wanted(json: bool, no_progress: bool) -> bool {
        !json && !no_progress && progress::wanted()
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    fn line(&mut self, s: &str) {
        self.progress.println(&mut *self.out, s);
    }

    fn banner(&mut self, title: &str) {
        if self.json {
            return;
        }
        let stars = "*".repeat(79usize.saturating_sub(title.len() + 1).max(3));
        self.line("");
        self.line(&format!("{title} {stars}"));
    }

    /// A JSON event: to stdout under `--format json`, and to the tee.
    fn emit(&mut self, v: Value) {
        let s = v.to_string();
        if let Some(tee) = &mut self.tee {
            let _ = writeln!(tee, "{s}");
        }
        if self.json {
            self.line(&s);
        }
    }

    pub fn play_start(&mut self, name: &str, pass: u8) {
        if self.wants_json() {
            self.emit(json::play(name, pass));
        }
        if !self.json {
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
        self.notice(json::warning(msg), "35", &format!("[WARNING]: {msg}"));
    }

    /// An error that stops the run (not a host's failure).
    pub fn error(&mut self, msg: &str) {
        self.notice(json::error(msg), "31", &format!("[ERROR]: {msg}"));
    }

    /// A run-wide message: its JSON event, and its line in `colour` as text.
    fn notice(&mut self, event: Value, colour: &str, text: &str) {
        if self.wants_json() {
            self.emit(event);
        }
        if !self.json {
            let line = self.paint(colour, text);
            self.line(&line);
        }
    }

    pub fn note(&mut self, host: &str, msg: &str) {
        if self.wants_json() {
            self.emit(json::note(host, msg));
        }
        if !self.json {
            self.line(&format!("note: [{host}] {msg}"));
        }
    }

    pub fn task(&mut self, ev: &TaskEvent) {
        let (msg, diff, result) = if ev.censored {
            (Some(CENSORED), None, None)
        } else {
            (ev.msg, ev.diff, ev.result)
        };
        if ev.result.is_some_and(|r| r.contains_key("drift")) {
            self.drifts += 1;
        }
        if self.wants_json() {
            let o = json::task(ev, msg, diff, result, self.verbosity);
            self.emit(o);
        }
        if !self.json {
            self.task_text(ev, msg, diff, result);
        }
    }

    /// The answer of a `fixpoint journal` action on one host.
    pub fn journal(&mut self, host: &str, data: &Value) {
        if self.wants_json() {
            self.emit(json::journal(host, data));
        }
        if !self.json {
            self.journal_text(host, data);
        }
    }

    /// `fixpoint drift`'s comparison of the journal alone on one host: files fixpoint wrote that
    /// changed since, which no task of the run compared (`entries` as the agent answers).
    pub fn drift_journal(&mut self, host: &str, entries: &[Value]) {
        self.drifts += entries.len();
        for e in entries {
            if self.json {
                self.emit(json::drift_journal(host, e));
            } else {
                let line = format!(
                    "{} (journal only: no task of the playbook compared it)",
                    text::drift_line(host, e)
                );
                let painted = self.paint("35", &line);
                self.line(&painted);
            }
        }
    }

    pub fn recap(&mut self, stats: &BTreeMap<String, Stats>, pass: u8, twice: bool) {
        // The status lines go before the recap: the screen ends as the log would without them.
        self.progress.clear();
        // As in Ansible, a host that no result was counted for (only in plays whose tasks all
        // ran once on another host, say) is not in the recap.
        let counted: BTreeMap<String, Stats>;
        let stats = if stats.values().any(|s| *s == Stats::default()) {
            counted = stats
                .iter()
                .filter(|(_, s)| **s != Stats::default())
                .map(|(h, s)| (h.clone(), *s))
                .collect();
            &counted
        } else {
            stats
        };
        if self.wants_json() {
            let mut o = json::recap(stats, pass, twice, self.shard);
            o["run_id"] = Value::from(self.run_id.as_str());
            let trips: serde_json::Map<String, Value> = self
                .round_trips
                .iter()
                .filter(|(h, _)| stats.contains_key(*h))
                .map(|(h, n)| (h.clone(), Value::from(*n)))
                .collect();
            if !trips.is_empty() {
                o["round_trips"] = Value::Object(trips);
            }
            self.emit(o);
        }
        if !self.json {
            self.recap_text(stats, pass, twice);
        }
    }

    /// The verdict of `--twice` when the second pass changed something.
    pub fn not_converged(&mut self, culprits: &[(String, String, String, Diff)]) {
        if self.wants_json() {
            self.emit(json::not_converged(culprits));
        }
        if !self.json {
            self.not_converged_text(culprits);
        }
    }
}
