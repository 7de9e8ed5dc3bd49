//! Live progress on a terminal: one status line per host (what it is doing, tasks done of the
//! play's, time since it started), redrawn in place under the scrolling log with `indicatif`.
//!
//! The engine says what each host is doing as it happens (a task queued, running, finished;
//! connecting; waiting for another run's host lock); a ticker thread turns that into lines
//! twice a second. With more hosts than the terminal has room for, the busiest take the
//! lines and one summary line counts the rest. Everything the reporter prints goes through
//! `println`, above the lines, so nothing tears. Off (every method does nothing) when stdout
//! is not a terminal, in `--format json`, with `NO_COLOR`, `TERM=dumb` or `--no-progress`.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// How often the lines are redrawn (the elapsed times move).
const TICK: Duration = Duration::from_millis(500);

/// At most this many host lines, however tall the terminal.
const MAX_LINES: usize = 12;

/// The shared handle: cloned into free-strategy lanes and host futures.
#[derive(Clone, Default)]
pub struct Progress(Option<Arc<Inner>>);

struct Inner {
    multi: MultiProgress,
    board: Mutex<Board>,
}

#[derive(Default)]
struct Board {
    /// The current play's hosts, in play order.
    order: Vec<String>,
    hosts: BTreeMap<String, HostLine>,
    /// The bars on screen, one per line shown (hosts, then the summary).
    slots: Vec<ProgressBar>,
}

struct HostLine {
    done: usize,
    total: usize,
    /// The task it is on (or last finished), as its banner names it.
    task: Option<String>,
    doing: Doing,
    /// When `doing` began.
    since: Instant,
    /// When the host joined the run.
    started: Instant,
}

#[derive(Clone, PartialEq, Eq)]
enum Doing {
    /// Waiting for a fork slot (`--forks`, `throttle`).
    Queued,
    Running,
    /// Finished its task; the play moves on when every host has (linear strategy).
    Barrier,
    /// Something before the task itself: connecting, another run's lock...
    Waiting(String),
    /// Nothing left for it in the play (failed, or the play is over).
    Idle,
}

impl Doing {
    /// Which hosts take the lines when not all fit: the ones something is happening to.
    fn busy(&self) -> u8 {
        match self {
            Doing::Waiting(_) => 0,
            Doing::Running => 1,
            Doing::Queued => 2,
            Doing::Barrier => 3,
            Doing::Idle => 4,
        }
    }
}

/// Whether this process's stdout wants live progress: a terminal that is not `dumb`, and no
/// `NO_COLOR` (a user who asked for plain output gets no redrawn lines either).
pub fn wanted() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none()
        && std::env::var("TERM").map_or(true, |t| t != "dumb")
}

impl Progress {
    /// Live progress on stdout when `on`, else a handle that does nothing.
    pub fn new(on: bool) -> Progress {
        if !on {
            return Progress(None);
        }
        let inner = Arc::new(Inner {
            multi: MultiProgress::with_draw_target(ProgressDrawTarget::stdout()),
            board: Mutex::default(),
        });
        let weak = Arc::downgrade(&inner);
        std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || ticker(weak))
            .ok();
        Progress(Some(inner))
    }

    pub fn enabled(&self) -> bool {
        self.0.is_some()
    }

    /// Print one log line above the status lines (or plainly when there are none).
    pub fn println(&self, out: &mut dyn Write, line: &str) {
        match &self.0 {
            Some(inner) => inner.multi.suspend(|| {
                let _ = writeln!(out, "{line}");
                let _ = out.flush();
            }),
            // A closed stdout (e.g. piped into `head`) must not abort the run half-way.
            None => {
                let _ = writeln!(out, "{line}");
            }
        }
    }

    fn board(&self) -> Option<MutexGuard<'_, Board>> {
        // The board is plain values set in single assignments: a poisoned lock is used as is.
        self.0.as_ref().map(|i| {
            i.board
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        })
    }

    /// A play starts on these hosts, with this many tasks to go (as far as is known before
    /// includes load).
    pub fn play(&self, hosts: &[String], total: usize) {
        let Some(mut b) = self.board() else { return };
        let now = Instant::now();
        b.order = hosts.to_vec();
        for h in hosts {
            let line = b.hosts.entry(h.clone()).or_insert(HostLine {
                done: 0,
                total: 0,
                task: None,
                doing: Doing::Idle,
                since: now,
                started: now,
            });
            line.done = 0;
            line.total = total;
            line.task = None;
            line.doing = Doing::Barrier;
            line.since = now;
        }
    }

    /// A task (its banner) starts on these hosts: each waits for a fork slot first.
    pub fn queued(&self, hosts: &[String], task: &str) {
        self.each(hosts, |l| {
            l.task = Some(task.to_string());
            l.doing = Doing::Queued;
        });
    }

    /// The host got its fork slot: the task runs there now.
    pub fn running(&self, host: &str) {
        self.each(&[host], |l| l.doing = Doing::Running);
    }

    /// Before its task, the host waits for something (`connecting`, another run's lock).
    pub fn waiting(&self, host: &str, what: String) {
        self.each(&[host], |l| l.doing = Doing::Waiting(what.clone()));
    }

    /// The wait is over: back to the task.
    pub fn resumed(&self, host: &str) {
        self.each(&[host], |l| {
            if matches!(l.doing, Doing::Waiting(_)) {
                l.doing = Doing::Running;
            }
        });
    }

    /// The host finished its task; in the linear strategy it waits for the others now.
    pub fn finished(&self, host: &str) {
        self.each(&[host], |l| {
            l.done += 1;
            l.total = l.total.max(l.done);
            l.doing = Doing::Barrier;
        });
    }

    /// Tasks loaded at run time (an include) add to the hosts' totals.
    pub fn more_tasks(&self, hosts: &[String], n: usize) {
        self.each(hosts, |l| l.total += n);
    }

    /// Run or pass over: the status lines go, leaving the log as it would be without them.
    pub fn clear(&self) {
        let Some(mut b) = self.board() else { return };
        for bar in b.slots.drain(..) {
            bar.finish_and_clear();
        }
        b.order.clear();
        if let Some(inner) = &self.0 {
            let _ = inner.multi.clear();
        }
    }

    fn each<S: AsRef<str>>(&self, hosts: &[S], f: impl Fn(&mut HostLine)) {
        let Some(mut b) = self.board() else { return };
        let now = Instant::now();
        for h in hosts {
            if let Some(l) = b.hosts.get_mut(h.as_ref()) {
                let before = l.doing.clone();
                f(l);
                if l.doing != before {
                    l.since = now;
                }
            }
        }
    }
}

/// Redraw the lines every `TICK` until the progress handle is gone.
fn ticker(inner: Weak<Inner>) {
    loop {
        std::thread::sleep(TICK);
        let Some(inner) = inner.upgrade() else { return };
        let mut b = inner
            .board
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let rows = console::Term::stdout()
            .size_checked()
            .map_or(24, |(r, _)| usize::from(r));
        // Keep most of the screen for the log.
        let cap = (rows / 2).clamp(2, MAX_LINES);
        let lines = b.lines(cap, Instant::now());
        while b.slots.len() < lines.len() {
            let bar = inner.multi.add(ProgressBar::new_spinner());
            bar.set_style(ProgressStyle::with_template("{wide_msg}").expect("a fixed template"));
            b.slots.push(bar);
        }
        while b.slots.len() > lines.len() {
            if let Some(bar) = b.slots.pop() {
                bar.finish_and_clear();
                inner.multi.remove(&bar);
            }
        }
        for (bar, line) in b.slots.iter().zip(lines) {
            bar.set_message(line);
        }
    }
}

impl Board {
    /// The text of the lines to show, at most `cap` of them.
    fn lines(&self, cap: usize, now: Instant) -> Vec<String> {
        let shown: Vec<&String> = self
            .order
            .iter()
            .filter(|h| self.hosts.contains_key(*h))
            .collect();
        let width = shown.iter().map(|h| h.len()).max().unwrap_or(0).min(30);
        let line = |h: &String| {
            let l = &self.hosts[h];
            format!(
                "{h:<width$}  {:>3}/{:<3} {}  [{}]",
                l.done,
                l.total,
                l.activity(now),
                clock(now - l.started)
            )
        };
        if shown.len() <= cap {
            return shown.into_iter().map(line).collect();
        }
        // The busiest first: something pending before the longest, then the running tasks
        // that have run longest; the rest are counted on one line.
        let mut busy = shown.clone();
        busy.sort_by_key(|h| {
            let l = &self.hosts[*h];
            (l.doing.busy(), l.since)
        });
        let (top, rest) = busy.split_at(cap - 1);
        let mut top = top.to_vec();
        // On screen in play order, so a line does not jump about as times change.
        top.sort_by_key(|h| self.order.iter().position(|o| o == *h));
        let mut out: Vec<String> = top.into_iter().map(line).collect();
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for h in rest {
            let what = match self.hosts[*h].doing {
                Doing::Queued => "queued",
                Doing::Running => "running",
                Doing::Barrier => "waiting for other hosts",
                Doing::Waiting(_) => "connecting or waiting",
                Doing::Idle => "idle",
            };
            *counts.entry(what).or_default() += 1;
        }
        let summary: Vec<String> = counts.iter().map(|(w, n)| format!("{n} {w}")).collect();
        out.push(format!(
            "… and {} more host(s): {}",
            rest.len(),
            summary.join(", ")
        ));
        out
    }
}

impl HostLine {
    fn activity(&self, now: Instant) -> String {
        let task = self.task.as_deref().unwrap_or("starting");
        match &self.doing {
            Doing::Queued => format!("{task}: waiting for a fork slot"),
            Doing::Running => format!("{task}: running {}", secs(now - self.since)),
            Doing::Barrier => match &self.task {
                Some(_) => format!("{task}: done, waiting for other hosts"),
                None => "starting".to_string(),
            },
            Doing::Waiting(what) => format!("{task}: {what} {}", secs(now - self.since)),
            Doing::Idle => "idle".to_string(),
        }
    }
}

/// `12s`, `3m04s`.
fn secs(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s}s")
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

/// `0:42`, `1:02:03`.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s < 3600 {
        format!("{}:{:02}", s / 60, s % 60)
    } else {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn board(n: usize) -> (Board, Instant) {
        let t0 = Instant::now();
        let mut b = Board::default();
        for i in 0..n {
            let h = format!("h{i:03}");
            b.order.push(h.clone());
            b.hosts.insert(
                h,
                HostLine {
                    done: 1,
                    total: 4,
                    task: Some("install".into()),
                    doing: Doing::Barrier,
                    since: t0,
                    started: t0,
                },
            );
        }
        (b, t0)
    }

    #[test]
    fn every_host_has_a_line_when_they_fit() {
        let (mut b, t0) = board(3);
        b.hosts.get_mut("h001").unwrap().doing = Doing::Running;
        let lines = b.lines(5, t0 + Duration::from_secs(12));
        assert_eq!(lines.len(), 3);
        assert!(lines[0].contains("waiting for other hosts"), "{lines:?}");
        assert!(lines[1].starts_with("h001"), "{lines:?}");
        assert!(lines[1].contains("1/4") && lines[1].contains("install: running 12s"));
        assert!(lines[1].ends_with("[0:12]"), "{lines:?}");
    }

    #[test]
    fn many_hosts_show_the_busiest_and_count_the_rest() {
        let (mut b, t0) = board(300);
        let lock = Doing::Waiting("waiting for host lock held by run r1 (pid 7)".into());
        b.hosts.get_mut("h250").unwrap().doing = lock;
        b.hosts.get_mut("h100").unwrap().doing = Doing::Running;
        let lines = b.lines(4, t0);
        assert_eq!(lines.len(), 4, "{lines:?}");
        // The lock wait and the running task take two of the three host lines; shown in play
        // order, after the first of the hosts that wait for the others.
        assert!(lines[0].starts_with("h000"), "{lines:?}");
        assert!(lines[1].starts_with("h100"), "{lines:?}");
        assert!(lines[2].starts_with("h250") && lines[2].contains("held by run r1"));
        assert_eq!(
            lines[3],
            "… and 297 more host(s): 297 waiting for other hosts"
        );
    }

    #[test]
    fn durations_read_as_a_clock() {
        assert_eq!(secs(Duration::from_secs(184)), "3m04s");
        assert_eq!(clock(Duration::from_secs(42)), "0:42");
        assert_eq!(clock(Duration::from_secs(3723)), "1:02:03");
    }
}
