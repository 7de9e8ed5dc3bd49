//! The differential harness: every case under `tests/conformance/cases/` runs under ansible-core
//! and under fixpoint, each in its own fresh directory, and the outcomes must agree (README,
//! "Development / conformance").
//!
//! Compared per case: the exit status, each host's task results in order (with loop items),
//! what `debug` printed, the recap, and the tree under `base`. A difference fails the test unless
//! `DEVIATIONS.md` lists it. Cases in `cases/pending/` show known bugs: they must differ, and
//! fail once they agree (the bug is fixed; move the case up). ansible-core comes from
//! `FIXPOINT_ANSIBLE` (the `bin` of its virtualenv); without it the test fails saying what to
//! install. `CONFORMANCE_CASES=a,b` runs only those cases (for working on them), and
//! `CONFORMANCE_SHOW=1` prints what ansible-core did in each (with `--nocapture`). What
//! ansible-core did is cached (`cache.rs`), so a rerun only runs fixpoint; only a run that
//! exited as the case expects is kept, and a kept one that did not runs again.

mod cache;
mod case;
mod compare;
mod deviations;
mod events;
mod public_roles;
mod tools;
mod tree;
mod www;

use std::collections::{BTreeSet, VecDeque};
use std::path::Path;
use std::sync::Mutex;
use std::thread;

use case::Case;
use compare::{differences, Section};
use deviations::{Deviation, What};
use tools::{Run, Tool, Tools};

/// Cases run this many at a time: ansible-playbook keeps a core busy for a second or two, and
/// the machines this runs on have two.
const WORKERS: usize = 2;

/// Lines of a tool's stderr shown when it exited differently than the other.
const STDERR_TAIL: usize = 15;

enum Verdict {
    /// Agrees with ansible-core (up to its listed deviations).
    Agrees,
    /// A pending case that still differs, as it should: the sections that differ, and the diff
    /// of the first (shown with `--nocapture`, to check that it is the bug the case names).
    StillDiffers(Vec<Section>, String),
    Fails(String),
}

#[test]
fn corpus_agrees_with_ansible_core() {
    let tools = tools::locate().unwrap_or_else(|e| panic!("{e}"));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    let mut cases = case::discover(&dir.join("cases")).unwrap_or_else(|e| panic!("{e}"));
    let devs_text = std::fs::read_to_string(dir.join("DEVIATIONS.md"))
        .unwrap_or_else(|e| panic!("tests/conformance/DEVIATIONS.md: {e}"));
    let devs = deviations::parse(&devs_text).unwrap_or_else(|e| panic!("{e}"));
    for d in &devs {
        for name in &d.cases {
            assert!(
                cases.iter().any(|c| &c.name == name),
                "DEVIATIONS.md:{}: no case is named `{name}`",
                d.line
            );
        }
    }
    if let Ok(only) = std::env::var("CONFORMANCE_CASES") {
        let wanted: BTreeSet<&str> = only.split(',').map(str::trim).collect();
        cases.retain(|c| wanted.contains(c.name.as_str()));
        assert!(!cases.is_empty(), "CONFORMANCE_CASES={only} names no case");
    }
    let total = cases.len();

    let queue = Mutex::new(cases.into_iter().collect::<VecDeque<Case>>());
    let verdicts = Mutex::new(Vec::new());
    thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| loop {
                let Some(case) = queue.lock().unwrap().pop_front() else {
                    break;
                };
                let verdict = judge(&tools, &case, &devs);
                verdicts.lock().unwrap().push((case, verdict));
            });
        }
    });
    let mut verdicts = verdicts.into_inner().unwrap();
    verdicts.sort_by(|a, b| a.0.name.cmp(&b.0.name));

    let mut failures = Vec::new();
    let (mut agree, mut pending) = (0, 0);
    for (case, verdict) in &verdicts {
        match verdict {
            Verdict::Agrees => agree += 1,
            Verdict::StillDiffers(sections, diff) => {
                pending += 1;
                let names: Vec<&str> = sections.iter().map(|s| s.name()).collect();
                println!(
                    "pending {}: differs in {} ({})\n{diff}",
                    case.name,
                    names.join(", "),
                    case.about
                );
            }
            Verdict::Fails(msg) => failures.push(format!(
                "=== case {} ({})\n    {}\n{msg}",
                case.name,
                case.path.display(),
                case.about
            )),
        }
    }
    println!(
        "conformance: {total} cases: {agree} agree with ansible-core, {pending} pending still \
         differ, {} fail",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {total} conformance cases fail:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Held by a case that changes real accounts while it runs (`Case::touches_accounts`).
static ACCOUNTS: Mutex<()> = Mutex::new(());

/// Held by a case that becomes a test user (`Case::becomes_test_user`).
static TEST_USERS: Mutex<()> = Mutex::new(());

/// Runs one case under both tools and decides.
fn judge(tools: &Tools, case: &Case, devs: &[Deviation]) -> Verdict {
    // A case that failed while holding it poisons nothing the next one needs.
    let _accounts = case
        .touches_accounts()
        .then(|| ACCOUNTS.lock().unwrap_or_else(|e| e.into_inner()));
    let _test_users = case
        .becomes_test_user()
        .then(|| TEST_USERS.lock().unwrap_or_else(|e| e.into_inner()));
    let scratch = match tempfile::Builder::new().prefix("fp-conformance-").tempdir() {
        Ok(d) => d,
        Err(e) => return Verdict::Fails(format!("temp dir: {e}")),
    };
    // A case with `www/` files gets its HTTP server for both runs (`www.rs`).
    let _www = match www::Www::start(case) {
        Ok(w) => w,
        Err(e) => return Verdict::Fails(e),
    };
    let run = |tool| tools::run(tools, case, tool, scratch.path());
    if case.lists() {
        return listing_verdict(case, run(Tool::Ansible), run(Tool::Fixpoint));
    }
    let outcome = |tool, run: &Run, tree: Vec<String>| -> Result<events::Outcome, String> {
        let mut o = events::parse(tool, &run.stdout)?;
        o.exit = match tool {
            Tool::Ansible => events::ansible_exit(run.exit, o.recap.is_some()),
            Tool::Fixpoint => run.exit,
        };
        o.tree = tree;
        Ok(o)
    };
    let ansible = |use_cache| -> Result<(Run, events::Outcome, bool), String> {
        let (a_run, tree, fresh) = ansible_run(case, &run, use_cache)?;
        let a = outcome(Tool::Ansible, &a_run, tree)?;
        Ok((a_run, a, fresh))
    };
    let first = match ansible(true) {
        // A kept run that did not do what the case expects (kept before runs were checked, or
        // disturbed): ansible-core runs again.
        Ok((_, a, false)) if a.exit != Some(case.expect_exit) => ansible(false),
        other => other,
    };
    let (a_run, a, fresh) = match first {
        Ok(r) => r,
        Err(e) => return Verdict::Fails(e),
    };
    let f_run = match run(Tool::Fixpoint) {
        Ok(f) => f,
        Err(e) => return Verdict::Fails(e),
    };
    let f_tree = tree::snapshot(&f_run.root.join("base"));
    let f = match outcome(Tool::Fixpoint, &f_run, f_tree) {
        Ok(f) => f,
        Err(e) => return Verdict::Fails(e),
    };

    // The case must do what it says under the oracle: a typo that makes Ansible refuse the
    // playbook would otherwise "agree" with a fixpoint that refuses it too.
    if a.exit != Some(case.expect_exit) {
        return Verdict::Fails(format!(
            "ansible-core exited {:?} (raw {:?}) where the case expects {}: the case is wrong\n{}{}",
            a.exit,
            a_run.exit,
            case.expect_exit,
            tail("ansible-core stderr", &a_run.stderr),
            a.failures.join("\n")
        ));
    }
    // Only a run that did what the case says is kept: one disturbed by something else on the
    // machine would otherwise be compared against until the case changes.
    if fresh {
        if let Some(d) = cache::dir() {
            cache::store(&d, &cache::key(case), &a_run, &a.tree);
        }
    }

    let accepted: BTreeSet<What> = devs
        .iter()
        .filter(|d| d.cases.contains(&case.name))
        .map(|d| d.what)
        .collect();
    let mut a = a;
    if accepted.contains(&What::RolePrefix) && !events::strip_role_prefix(&mut a) {
        return Verdict::Fails(
            "DEVIATIONS.md accepts `role-prefix` for this case, but no task of it is in a role: \
             remove the case from that line"
                .into(),
        );
    }
    let a_root = a_run.root.display().to_string();
    let f_root = f_run.root.display().to_string();
    let diffs = differences(&a, &a_root, &f, &f_root);
    if std::env::var_os("CONFORMANCE_SHOW").is_some() {
        let shown: Vec<String> = Section::ALL
            .iter()
            .map(|s| format!("-- {}\n{}", s.name(), compare::render(&a, *s, &a_root)))
            .collect();
        println!("=== {} under ansible-core\n{}", case.name, shown.concat());
    }
    let differing: BTreeSet<Section> = diffs.iter().map(|d| d.section).collect();
    let accepted: BTreeSet<Section> = accepted
        .into_iter()
        .filter_map(|w| match w {
            What::Section(s) => Some(s),
            What::RolePrefix => None,
        })
        .collect();
    if let Some(stale) = accepted.difference(&differing).next() {
        return Verdict::Fails(format!(
            "DEVIATIONS.md accepts a difference in `{}` for this case, but there is none any \
             more: remove the case from that line",
            stale.name()
        ));
    }
    let unexplained: Vec<&compare::Difference> = diffs
        .iter()
        .filter(|d| !accepted.contains(&d.section))
        .collect();
    let sections = unexplained.iter().map(|d| d.section).collect();
    match (case.pending, unexplained.is_empty()) {
        (false, true) => Verdict::Agrees,
        (true, false) => {
            Verdict::StillDiffers(sections, describe(&unexplained, (&a_run, &a), (&f_run, &f)))
        }
        (true, true) => Verdict::Fails(
            "this pending case now agrees with ansible-core: the bug it shows is fixed; move it \
             from cases/pending/ to cases/ (and its comment line to what it checks)"
                .into(),
        ),
        (false, false) => Verdict::Fails(describe(&unexplained, (&a_run, &a), (&f_run, &f))),
    }
}

/// A listing case (`--list-tasks`...): both tools print the same text (neither run
/// touches a host; ansible-core lists in well under a second, so its run is not cached).
fn listing_verdict(case: &Case, a: Result<Run, String>, f: Result<Run, String>) -> Verdict {
    let (a, f) = match (a, f) {
        (Ok(a), Ok(f)) => (a, f),
        (Err(e), _) | (_, Err(e)) => return Verdict::Fails(e),
    };
    if a.exit != Some(case.expect_exit) {
        return Verdict::Fails(format!(
            "ansible-core exited {:?} where the case expects {}: the case is wrong\n{}",
            a.exit,
            case.expect_exit,
            tail("ansible-core stderr", &a.stderr)
        ));
    }
    let text = |r: &Run| r.stdout.trim().to_string();
    if f.exit == a.exit && text(&a) == text(&f) {
        return Verdict::Agrees;
    }
    let diff = similar::TextDiff::from_lines(&text(&a), &text(&f))
        .unified_diff()
        .header("ansible-core", "fixpoint")
        .to_string();
    Verdict::Fails(format!(
        "listing differs (exit {:?} and {:?}):\n{diff}{}",
        a.exit,
        f.exit,
        tail("fixpoint stderr", &f.stderr)
    ))
}

/// ansible-core's run of `case` and the tree it left, from the cache (`cache.rs`) when it has
/// them and `use_cache`, else by running it; true when it ran (`judge` keeps a run that did
/// what the case expects).
fn ansible_run(
    case: &Case,
    run: &dyn Fn(Tool) -> Result<Run, String>,
    use_cache: bool,
) -> Result<(Run, Vec<String>, bool), String> {
    let cached = || cache::load(&cache::dir()?, &cache::key(case));
    if let Some(hit) = use_cache.then(cached).flatten() {
        return Ok((hit.run, hit.tree, false));
    }
    let a_run = run(Tool::Ansible)?;
    let tree = tree::snapshot(&a_run.root.join("base"));
    Ok((a_run, tree, true))
}

/// The first difference as a unified diff, and what else differs. When the exit differs, the
/// stderr of both runs (a refusal says why there) and the next difference too.
fn describe(
    unexplained: &[&compare::Difference],
    (a_run, a): (&Run, &events::Outcome),
    (f_run, f): (&Run, &events::Outcome),
) -> String {
    let first = unexplained[0];
    let others: Vec<&str> = unexplained[1..].iter().map(|d| d.section.name()).collect();
    let mut msg = format!(
        "first difference: {}\n{}",
        first.section.name(),
        first.diff()
    );
    if !others.is_empty() {
        msg.push_str(&format!("also differs: {}\n", others.join(", ")));
    }
    if first.section == Section::Exit {
        msg.push_str(&tail("ansible-core stderr", &a_run.stderr));
        msg.push_str(&tail("fixpoint stderr", &f_run.stderr));
        if let Some(next) = unexplained.get(1) {
            msg.push_str(&format!(
                "next difference: {}\n{}",
                next.section.name(),
                next.diff()
            ));
        }
    }
    for (tool, o) in [("ansible-core", a), ("fixpoint", f)] {
        if !o.failures.is_empty() {
            msg.push_str(&format!("--- {tool} failures\n{}\n", o.failures.join("\n")));
        }
    }
    msg
}

fn tail(what: &str, text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(STDERR_TAIL);
    format!(
        "--- {what} (last {} lines)\n{}\n",
        lines.len() - start,
        lines[start..].join("\n")
    )
}
