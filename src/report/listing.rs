//! `--list-hosts`, `--list-tasks`, `--list-tags`: what a run would do, printed as ansible-playbook does, without touching a host.

use crate::config::{Config, Listing};
use crate::diag::Diagnostic;
use crate::inventory::Inventory;
use crate::playbook::{Playbook, Step};
use std::collections::BTreeSet;

/// Print the listing for every play of every playbook.
pub fn print(
    books: &[Playbook],
    inv: &Inventory,
    cfg: &Config,
    what: Listing,
) -> Result<(), Diagnostic> {
    for book in books {
        println!("\nplaybook: {}", book.path.display());
        // `--syntax-check` found nothing wrong (what `validate` checks): it names each
        // playbook, and nothing more, as ansible-playbook does.
        if what == Listing::SyntaxCheck {
            continue;
        }
        for (i, play) in book.plays.iter().enumerate() {
            println!(
                "\n  play #{} ({}): {}\tTAGS: [{}]",
                i + 1,
                play.hosts,
                play.name,
                play.tags.join(", ")
            );
            match what {
                Listing::Hosts => {
                    let mut hosts = inv.select(&play.hosts).map_err(|e| {
                        Diagnostic::at(&play.pos, format!("bad host pattern: {}", e.msg))
                    })?;
                    if let Some(limit) = &cfg.limit {
                        let allowed = inv.select_limit(limit).map_err(|e| {
                            Diagnostic::new(format!("bad --limit pattern: {}", e.msg))
                        })?;
                        hosts.retain(|h| allowed.contains(h));
                    }
                    if let Some(shard) = &cfg.shard {
                        shard.retain(inv, &mut hosts);
                    }
                    println!("    pattern: ['{}']", play.hosts);
                    println!("    hosts ({}):", hosts.len());
                    for h in hosts {
                        println!("      {h}");
                    }
                }
                Listing::Tasks => {
                    println!("    tasks:");
                    for (name, tags) in listed(play, cfg) {
                        println!("      {}", task_line(name, &tags));
                    }
                }
                // The tags of the tasks `--list-tasks` shows, as ansible-core gathers them: an
                // include's own, not those of the tasks it brings; without `--tags` or
                // `--skip-tags`, those of every task (`never` ones too).
                Listing::Tags => {
                    let unfiltered;
                    let cfg = if cfg.tags.is_empty() && cfg.skip_tags.is_empty() {
                        unfiltered = Config {
                            tags: vec!["all".into(), "never".into()],
                            ..cfg.clone()
                        };
                        &unfiltered
                    } else {
                        cfg
                    };
                    let tags: BTreeSet<String> =
                        listed(play, cfg).into_iter().flat_map(|(_, t)| t).collect();
                    println!(
                        "      TASK TAGS: [{}]",
                        tags.into_iter().collect::<Vec<_>>().join(", ")
                    );
                }
                Listing::SyntaxCheck => {}
            }
        }
    }
    Ok(())
}

/// A step's name as written and as ansible-core's `Task.get_name` gives it (`role : name`
/// when named in a role, the action as written when unnamed): what `--list-tasks` shows and
/// `--start-at-task` matches. None for a block, which has no name of its own here.
pub fn step_names(s: &Step) -> Option<(Option<&str>, String)> {
    match s {
        Step::Task(t) => {
            let named = t.name.as_deref();
            Some((
                named,
                step_name(named, t.role.as_deref(), &t.display_name()),
            ))
        }
        Step::Include(i) => {
            // Unnamed, `shown` is the action as written, then ` : <role>` for a role.
            let action = i.shown.split(" : ").next().unwrap_or(i.action);
            let named = i.name.as_deref();
            Some((named, step_name(named, i.role.as_deref(), action)))
        }
        Step::Meta(m) => {
            // Unnamed, `Meta::name` is its action as written.
            let named = m.named.then_some(m.name.as_str());
            Some((named, step_name(named, m.role.as_deref(), &m.name)))
        }
        Step::Block(_) => None,
    }
}

/// What `--list-tasks` shows of a play, in run order: each task's name and tags.
fn listed(play: &crate::playbook::Play, cfg: &Config) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for section in [&play.pre_tasks, &play.roles, &play.tasks, &play.post_tasks] {
        list_tasks(section, cfg, &mut out);
    }
    out
}

/// One line of `--list-tasks`: the name, and the tags sorted as ansible-core sorts them.
fn task_line(name: String, tags: &[String]) -> String {
    let tags: BTreeSet<&String> = tags.iter().collect();
    let tags: Vec<&str> = tags.into_iter().map(String::as_str).collect();
    format!("{name}\tTAGS: [{}]", tags.join(", "))
}

/// A listed step's name as ansible-core lists it: `role : name` when named (in a role), the
/// action as written when not.
fn step_name(named: Option<&str>, role: Option<&crate::playbook::RoleCtx>, action: &str) -> String {
    match (named, role) {
        (Some(n), Some(r)) => format!("{} : {n}", r.name),
        (Some(n), None) => n.to_string(),
        (None, _) => action.to_string(),
    }
}

fn list_tasks(steps: &[Step], cfg: &Config, out: &mut Vec<(String, Vec<String>)>) {
    for s in steps {
        match s {
            Step::Block(b) => {
                list_tasks(&b.block, cfg, out);
                list_tasks(&b.rescue, cfg, out);
                list_tasks(&b.always, cfg, out);
            }
            // An include is decided when a host reaches it: listed as itself, as ansible-core
            // lists it, whether or not fixpoint loaded its tasks ahead.
            Step::Task(_) | Step::Include(_) | Step::Meta(_) => {
                let tags = match s {
                    Step::Task(t) => &t.tags,
                    Step::Include(i) => &i.tags,
                    Step::Meta(m) => &m.tags,
                    Step::Block(_) => continue,
                };
                if let (true, Some((_, name))) = (cfg.tag_selected(tags), step_names(s)) {
                    out.push((name, tags.clone()));
                }
            }
        }
    }
}
