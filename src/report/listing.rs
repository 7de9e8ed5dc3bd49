//! `--list-hosts`, `--list-tasks`, `--list-tags`: what a run would do, printed as ansible-playbook does, without touching a host.

use crate::config::{Config, Listing};
use crate::diag::Diagnostic;
use crate::inventory::Inventory;
use crate::playbook::{Include, IncludeSource, Playbook, Step, Task};
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
                    let mut lines = Vec::new();
                    for section in [&play.pre_tasks, &play.roles, &play.tasks, &play.post_tasks] {
                        list_tasks(section, cfg, &mut lines);
                    }
                    for l in lines {
                        println!("      {l}");
                    }
                }
                Listing::Tags => {
                    let mut tags = BTreeSet::new();
                    for t in play.all_tasks() {
                        tags.extend(t.tags.iter().cloned());
                    }
                    let mut incs = Vec::new();
                    for section in [&play.pre_tasks, &play.roles, &play.tasks, &play.post_tasks] {
                        includes(section, &mut incs);
                    }
                    for i in incs {
                        tags.extend(i.tags.iter().cloned());
                    }
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

/// Ansible's listing name: `role : task` inside a role.
pub fn listed_name(t: &Task) -> String {
    match &t.role {
        Some(r) => format!("{} : {}", r.name, t.display_name()),
        None => t.display_name(),
    }
}

fn list_tasks(steps: &[Step], cfg: &Config, out: &mut Vec<String>) {
    for s in steps {
        match s {
            Step::Task(t) => {
                if cfg.tag_selected(&t.tags) {
                    // ansible-core lists an unnamed task by its action alone, in a role too.
                    let name = match t.name {
                        Some(_) => listed_name(t),
                        None => t.display_name(),
                    };
                    out.push(format!("{name}\tTAGS: [{}]", t.tags.join(", ")));
                }
            }
            Step::Block(b) => {
                list_tasks(&b.block, cfg, out);
                list_tasks(&b.rescue, cfg, out);
                list_tasks(&b.always, cfg, out);
            }
            Step::Include(i) => {
                if !cfg.tag_selected(&i.tags) {
                    continue;
                }
                match &i.source {
                    IncludeSource::Loaded(steps) => list_tasks(steps, cfg, out),
                    // Chosen at run time: listed as the include itself.
                    IncludeSource::TasksFile { file, .. } => out.push(format!(
                        "include_tasks: {file}\tTAGS: [{}]",
                        i.tags.join(", ")
                    )),
                    IncludeSource::Role { name, .. } => out.push(format!(
                        "include_role: {name}\tTAGS: [{}]",
                        i.tags.join(", ")
                    )),
                }
            }
            Step::Meta(_) => {}
        }
    }
}

fn includes<'a>(steps: &'a [Step], out: &mut Vec<&'a Include>) {
    for s in steps {
        match s {
            Step::Block(b) => {
                includes(&b.block, out);
                includes(&b.rescue, out);
                includes(&b.always, out);
            }
            Step::Include(i) => {
                out.push(i);
                if let IncludeSource::Loaded(steps) = &i.source {
                    includes(steps, out);
                }
            }
            _ => {}
        }
    }
}
