//! Under `--shard i/N` (without `--shard-allow-cross`): what in the playbooks needs the whole
//! fleet, which one shard's controller does not have, refused before any host is touched.
//!
//! Refused, each at the play or task that holds it: `run_once` (on a task, a block, an include
//! or a handler: every shard would run it once), `serial` with a percentage (of one shard's
//! hosts), `delegate_to` a host of the inventory that another shard runs (two controllers on
//! one host) or a templated `delegate_to` (which host it names is known only at run time;
//! `{{ inventory_hostname }}` excepted), and templates that read other hosts' state through
//! `hostvars` or the play's host lists (`template/cross.rs`: task strings, play variables, role
//! defaults and vars, and every template file the playbook reaches).
//!
//! Not seen here (docs/fleet.md says so): names reached through `vars[...]` or
//! `lookup('vars', …)`, templates inside inventory variables, files a templated
//! `include_role` name loads, and the per-shard meaning of what is not a whole-fleet promise
//! (`serial` counts, `any_errors_fatal`, `max_fail_percentage` apply to each shard's hosts).

use super::Validator;
use crate::diag::{Diagnostic, Pos};
use crate::playbook::{BatchSize, Include, IncludeSource, Play, Task};
use crate::template::{CrossRead, ScanAs, Templar};
use serde_json::Value;
use std::sync::Arc;

/// What the refusals need to know of the run: its shard and who runs which host.
pub struct Sharding<'a> {
    /// This run's shard, as `i/N`.
    pub shard: String,
    /// The shard (as `i/N`) that runs a host of the inventory, when it is not this one; `None`
    /// for this shard's hosts and for names outside the inventory (the controller's `localhost`).
    pub other_owner: &'a dyn Fn(&str) -> Option<String>,
}

/// The way out every refusal offers, with what it then means.
fn allow(meaning: &str) -> String {
    format!("or pass --shard-allow-cross to {meaning} (docs/fleet.md, \"Sharded push\")")
}

impl Validator<'_> {
    /// `serial` percentages, and the templates of the variables every task of the play sees.
    pub(super) fn fleet_play(&mut self, play: &Play) {
        let Some(sh) = self.sharding else {
            return;
        };
        if let Some(BatchSize::Percent(p)) = play
            .serial
            .iter()
            .find(|b| matches!(b, BatchSize::Percent(_)))
        {
            self.cross.push(
                Diagnostic::at(
                    &play.pos,
                    format!(
                        "`serial: {p}%` needs the whole fleet: under --shard {} this controller \
                         has only its shard's hosts, so it would be {p}% of those",
                        sh.shard
                    ),
                )
                .help(format!(
                    "give a count (each shard takes batches of it from its own hosts), run \
                     this play without --shard, {}",
                    allow("take the percentage of each shard's hosts")
                )),
            );
        }
        for vars in [&play.role_defaults, &play.role_vars, &play.vars_from_files] {
            for (k, v) in vars.iter() {
                self.fleet_value(v, &play.pos, &format!("variable `{k}`"));
            }
        }
    }

    /// `run_once` and `delegate_to` of a task or handler (a block's and an include's were
    /// given to the tasks they hold when loaded).
    pub(super) fn fleet_task(&mut self, t: &Task) {
        if self.sharding.is_none() {
            return;
        }
        if t.run_once {
            self.run_once(&t.pos);
        }
        if let Some(d) = &t.delegate_to {
            self.delegate(d, &t.pos);
        }
    }

    /// An include whose tasks load at run time carries its keywords to them then.
    pub(super) fn fleet_include(&mut self, i: &Include) {
        if self.sharding.is_none() {
            return;
        }
        let inherit = match &i.source {
            IncludeSource::TasksFile { inherit, .. } | IncludeSource::Role { inherit, .. } => {
                inherit
            }
            IncludeSource::Loaded(_) => return,
        };
        if inherit.run_once == Some(true) {
            self.run_once(&i.pos);
        }
        if let Some(d) = &inherit.delegate_to {
            self.delegate(d, &i.pos);
        }
    }

    fn run_once(&mut self, at: &Pos) {
        let Some(sh) = self.sharding else {
            return;
        };
        self.cross.push(
            Diagnostic::at(
                at,
                format!(
                    "`run_once` needs the whole fleet: under --shard {} this controller runs \
                     only its shard's hosts, so every shard would run the task once",
                    sh.shard
                ),
            )
            .help(format!(
                "run it in a play of its own without --shard, {}",
                allow("run it once in each shard")
            )),
        );
    }

    fn delegate(&mut self, target: &str, at: &Pos) {
        let Some(sh) = self.sharding else {
            return;
        };
        if Templar::is_template(target) {
            let own = Templar::single_expression_code(target)
                .is_some_and(|c| c.trim() == "inventory_hostname");
            if !own {
                self.cross.push(
                    Diagnostic::at(
                        at,
                        format!(
                            "`delegate_to: {target}` is templated: under --shard {} it may name \
                             a host that another shard's controller is working on",
                            sh.shard
                        ),
                    )
                    .help(format!(
                        "name the host (fixpoint then checks which shard runs it), {}",
                        allow("accept whichever host it names")
                    )),
                );
            }
            return;
        }
        if let Some(other) = (sh.other_owner)(target) {
            self.cross.push(
                Diagnostic::at(
                    at,
                    format!(
                        "`delegate_to: {target}` names a host of shard {other}, not of this one \
                         ({}): two controllers would work on it at once",
                        sh.shard
                    ),
                )
                .help(format!(
                    "delegate to the host itself, the controller or a host outside the \
                     inventory, {}",
                    allow("delegate anyway: the host lock makes one controller wait (give --lock-timeout)")
                )),
            );
        }
    }

    /// The reads of other hosts' state that a scan of a playbook string found.
    pub(super) fn fleet_reads(&mut self, reads: &[CrossRead], text: &str, at: &Pos, what: &str) {
        let Some(sh) = self.sharding else {
            return;
        };
        for r in reads {
            let shown: String = text.chars().take(60).collect();
            let cut = if shown.len() < text.len() { "…" } else { "" };
            self.cross.push(
                Diagnostic::at(
                    at,
                    format!(
                        "{}, in {what} `{shown}{cut}` (line {}, column {} of the text)",
                        cross_msg(r.name, &sh.shard),
                        r.line,
                        r.col
                    ),
                )
                .help(cross_help(r.name)),
            );
        }
    }

    /// The same, in a template file.
    pub(super) fn fleet_file_reads(&mut self, reads: &[CrossRead], file: &Arc<std::path::PathBuf>) {
        let Some(sh) = self.sharding else {
            return;
        };
        for r in reads {
            self.cross.push(
                Diagnostic::at(&Pos::new(file, r.line, r.col), cross_msg(r.name, &sh.shard))
                    .help(cross_help(r.name)),
            );
        }
    }

    /// Role defaults and vars are not checked by `validate` otherwise (a host may never
    /// render them); under --shard, their reads of other hosts are refused as any other.
    fn fleet_value(&mut self, v: &Value, at: &Pos, what: &str) {
        match v {
            Value::String(s) if Templar::is_template(s) => {
                let reads = self.templar.scan(s, ScanAs::Text).cross;
                self.fleet_reads(&reads, s, at, what);
            }
            Value::Array(a) => a.iter().for_each(|x| self.fleet_value(x, at, what)),
            Value::Object(m) => m.values().for_each(|x| self.fleet_value(x, at, what)),
            _ => {}
        }
    }
}

fn cross_msg(name: &str, shard: &str) -> String {
    if name == "hostvars" {
        format!(
            "`hostvars` of another host needs the whole fleet: under --shard {shard} the hosts \
             of other shards have no facts or results in this controller"
        )
    } else {
        format!(
            "`{name}` needs the whole fleet: under --shard {shard} it lists only this shard's hosts"
        )
    }
}

fn cross_help(name: &str) -> String {
    if name == "hostvars" {
        format!(
            "read only `hostvars[inventory_hostname]` or pass the value in as a variable, {}",
            allow("read other hosts' inventory variables, without their facts")
        )
    } else {
        format!(
            "use `groups[...]` (the inventory's, the same in every shard), {}",
            allow("list this shard's hosts")
        )
    }
}
