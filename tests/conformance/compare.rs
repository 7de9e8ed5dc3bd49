//! Comparing two [`Outcome`]s section by section, as text, with a unified diff of a section that
//! differs.
//!
//! Each section is rendered to lines in which each run's own directory reads `<root>`, so the
//! two runs' temp paths never make a difference.

use similar::TextDiff;

use crate::events::{canonical, Outcome, TaskRecord};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Section {
    /// The exit status (in fixpoint's terms).
    Exit,
    /// Per host, in order: each task's name and status, with its loop items.
    Tasks,
    /// Per host, what each `debug` printed (messages and `var=` values).
    Debug,
    /// The recap counters per host.
    Recap,
    /// The files, directories and links under `base`: kind, mode, owner, content, target.
    Tree,
}

impl Section {
    /// In the order a difference is reported: the exit first (a refusal explains everything
    /// after it), then what the user reads.
    pub const ALL: [Section; 5] = [
        Section::Exit,
        Section::Tasks,
        Section::Debug,
        Section::Recap,
        Section::Tree,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Section::Exit => "exit",
            Section::Tasks => "tasks",
            Section::Debug => "debug",
            Section::Recap => "recap",
            Section::Tree => "tree",
        }
    }

    pub fn from_name(name: &str) -> Option<Section> {
        Section::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// One section of one outcome as lines; `root` is replaced by `<root>`.
pub fn render(o: &Outcome, section: Section, root: &str) -> String {
    let mut out = String::new();
    match section {
        Section::Exit => match o.exit {
            Some(code) => out.push_str(&format!("exit {code}\n")),
            None => out.push_str("killed by a signal\n"),
        },
        Section::Tasks => {
            for (host, tasks) in &o.hosts {
                out.push_str(&format!("[{host}]\n"));
                for t in tasks {
                    out.push_str(&format!("  {}: {}\n", t.name, status(&t.status, t.ignored)));
                    for i in t.items.iter().flatten() {
                        out.push_str(&format!(
                            "    item {}: {}\n",
                            i.label,
                            status(&i.status, i.ignored)
                        ));
                    }
                }
            }
        }
        Section::Debug => {
            for (host, tasks) in &o.hosts {
                let lines = debug_lines(tasks);
                if !lines.is_empty() {
                    out.push_str(&format!("[{host}]\n{lines}"));
                }
            }
        }
        Section::Recap => match &o.recap {
            None => out.push_str("no recap\n"),
            Some(recap) => {
                for (host, counts) in recap {
                    let c = |k: &str| counts.get(k).copied().unwrap_or(0);
                    out.push_str(&format!(
                        "{host}: ok={} changed={} unreachable={} failed={} skipped={} rescued={} ignored={}\n",
                        c("ok"),
                        c("changed"),
                        c("unreachable"),
                        c("failed"),
                        c("skipped"),
                        c("rescued"),
                        c("ignored")
                    ));
                }
            }
        },
        Section::Tree => {
            for line in &o.tree {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    if root.is_empty() {
        out
    } else {
        out.replace(root, "<root>")
    }
}

fn status(s: &str, ignored: bool) -> String {
    if ignored {
        format!("{s} (ignored)")
    } else {
        s.to_string()
    }
}

fn debug_lines(tasks: &[TaskRecord]) -> String {
    let mut out = String::new();
    for t in tasks {
        if let Some(d) = &t.debug {
            out.push_str(&format!("  {}: {}\n", t.name, canonical(d)));
        }
        for i in t.items.iter().flatten() {
            if let Some(d) = &i.debug {
                out.push_str(&format!(
                    "  {} (item {}): {}\n",
                    t.name,
                    i.label,
                    canonical(d)
                ));
            }
        }
    }
    out
}

/// A section where the two runs differ: each side's text, and a unified diff.
pub struct Difference {
    pub section: Section,
    pub ansible: String,
    pub fixpoint: String,
}

impl Difference {
    pub fn diff(&self) -> String {
        TextDiff::from_lines(&self.ansible, &self.fixpoint)
            .unified_diff()
            .context_radius(4)
            .header("ansible-core", "fixpoint")
            .to_string()
    }
}

/// Every section in which the two outcomes differ, in [`Section::ALL`] order.
pub fn differences(
    ansible: &Outcome,
    ansible_root: &str,
    fixpoint: &Outcome,
    fixpoint_root: &str,
) -> Vec<Difference> {
    Section::ALL
        .into_iter()
        .filter_map(|section| {
            let a = render(ansible, section, ansible_root);
            let f = render(fixpoint, section, fixpoint_root);
            (a != f).then_some(Difference {
                section,
                ansible: a,
                fixpoint: f,
            })
        })
        .collect()
}

#[test]
fn a_changed_status_is_a_difference_in_tasks_only() {
    use crate::events::ItemRecord;
    let task = |status: &str| TaskRecord {
        name: "make dir".into(),
        status: status.into(),
        ignored: false,
        items: Some(vec![ItemRecord {
            label: "a".into(),
            status: status.into(),
            ignored: false,
            debug: None,
        }]),
        debug: None,
        include_role: false,
    };
    let mut a = Outcome::default();
    a.hosts.insert("h".into(), vec![task("changed")]);
    a.tree = vec!["/r1/x file 0644 0:0 \"\"".into()];
    let mut f = a.clone();
    f.hosts.insert("h".into(), vec![task("ok")]);
    f.tree = vec!["/r2/x file 0644 0:0 \"\"".into()];
    let d = differences(&a, "/r1", &f, "/r2");
    assert_eq!(
        d.len(),
        1,
        "only the tasks differ, the roots are normalised"
    );
    assert_eq!(d[0].section, Section::Tasks);
    let text = d[0].diff();
    assert!(
        text.contains("-  make dir: changed") && text.contains("+  make dir: ok"),
        "{text}"
    );
    assert!(text.contains("+    item a: ok"), "{text}");
}
