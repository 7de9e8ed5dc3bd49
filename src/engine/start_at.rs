//! `--start-at-task`: the step a run starts at, found as ansible-core finds it.

use crate::diag::Diagnostic;
use crate::playbook::{Play, Playbook, Step};
use crate::report::listing::step_names;

/// `--start-at-task` must name a task some play holds (`play_holds_start`): one that names
/// none is refused before any host is touched. (ansible-core runs each play without its
/// tasks, then says so and exits 0; DEVIATIONS.md.)
pub fn check_start_at(pattern: Option<&str>, books: &[Playbook]) -> Result<(), Diagnostic> {
    let Some(want) = pattern else {
        return Ok(());
    };
    let plays = books.iter().flat_map(|b| &b.plays);
    if plays.into_iter().any(|p| play_holds_start(p, want)) {
        return Ok(());
    }
    Err(Diagnostic::new(format!(
        "--start-at-task `{want}`: no task of the playbooks has that name or `role : name`, \
         or matches it as a glob"
    ))
    .help(
        "name a task of the playbooks, their blocks, roles and imports; a task in the file of an \
         `include_tasks` or `include_role` cannot be started at (the file is read when a host \
         reaches the include), as in ansible-core: start at the include",
    ))
}

/// Whether `step` is where `--start-at-task pattern` starts: its name as written or its
/// `role : name` equals the pattern or matches it as a shell glob (Python's `fnmatch`), as
/// ansible-core compares `Task.name` and `Task.get_name()`. A block is never the start itself.
pub(super) fn is_start(step: &Step, pattern: &str) -> bool {
    let Some((named, full)) = step_names(step) else {
        return false;
    };
    let hits = |name: &str| name == pattern || crate::inventory::fnmatch(pattern, name);
    named.is_some_and(hits) || hits(&full)
}

/// Whether the play holds its start where ansible-core looks for it: among its tasks,
/// blocks, roles and what they import, not in the files of includes (loaded when a host
/// reaches them, so ansible-core cannot start inside one: "--start-at-task can only follow
/// static includes").
pub(super) fn play_holds_start(play: &Play, pattern: &str) -> bool {
    [&play.pre_tasks, &play.roles, &play.tasks, &play.post_tasks]
        .into_iter()
        .any(|steps| holds_start(steps, pattern))
}

fn holds_start(steps: &[Step], pattern: &str) -> bool {
    steps.iter().any(|s| match s {
        Step::Block(b) => [&b.block, &b.rescue, &b.always]
            .into_iter()
            .any(|steps| holds_start(steps, pattern)),
        _ => is_start(s, pattern),
    })
}
