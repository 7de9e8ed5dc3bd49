//! `fixpoint validate --modules`: which modules a playbook uses, and for each whether it runs
//! natively or as Ansible's Python code (and from where), so a user sees where speed comes from.

use crate::playbook::Playbook;
use std::collections::BTreeMap;

/// One line per module: its name, how many tasks use it, the engine, and where it was found.
pub fn modules_table(books: &[Playbook]) -> String {
    let mut rows: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for book in books {
        for play in &book.plays {
            for task in play.all_tasks() {
                let how = match &task.python {
                    Some(py) => format!("python  {}", py.path.display()),
                    None => "native".to_string(),
                };
                let e = rows.entry(task.module.to_string()).or_insert((0, how));
                e.0 += 1;
            }
        }
    }
    let native = rows.values().filter(|(_, h)| h == "native").count();
    let width = rows.keys().map(String::len).max().unwrap_or(0);
    let mut out = format!(
        "modules: {} native, {} Ansible Python code (ansible-core found by {})\n",
        native,
        rows.len() - native,
        match &super::locate::install().core {
            Some(_) => super::locate::install().found_by.as_str(),
            None => "nothing: none found",
        }
    );
    for (name, (n, how)) in rows {
        out.push_str(&format!("  {name:<width$}  {n:>3} task(s)  {how}\n"));
    }
    out
}
