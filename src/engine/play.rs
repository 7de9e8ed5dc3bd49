//! One play: select and order its hosts, cut them in `serial` batches, gather facts, then run
//! its sections (pre_tasks, roles and tasks, post_tasks) with the play's strategy; and the
//! play-level variables (`vars_files` with templated paths, names shown in banners).

use super::state::{HostState, PlayCtx};
use super::{display, shown_name, Engine};
use crate::playbook::{BatchSize, HostOrder, Play, Playbook, Step};
use crate::vars::{hostvars, Layer, PlayObjects, Scope};
use fixpoint_modules::params::is_template;
use serde_json::{json, Map, Value};
use std::sync::Arc;

impl Engine {
    pub(super) async fn run_play(&mut self, book: &Playbook, play: &Play, pass: u8) {
        // A templated pattern (`hosts: "{{ target }}"`) is rendered with the play's variables
        // and `-e` before any host is known, as ansible-core does; a list it gives is a list of
        // patterns.
        let pattern = match self.play_pattern(play) {
            Ok(p) => p,
            Err(e) => {
                self.reporter.warn(&format!(
                    "play \"{}\": cannot render `hosts`: {e}",
                    play.name
                ));
                return;
            }
        };
        // `ANSIBLE_HOST_PATTERN_MISMATCH=error`: a term naming nothing stops the run.
        if self.cfg.pattern_mismatch_fails {
            if let Ok(Some(term)) = self.inventory.mismatched_term(&pattern) {
                self.reporter.error(&format!(
                    "play \"{}\" (at {}): could not match supplied host pattern `{term}`, and \
                     ANSIBLE_HOST_PATTERN_MISMATCH=error stops the run",
                    play.name, play.pos
                ));
                self.run_stopped = true;
                return;
            }
        }
        let mut selected = match self.inventory.select(&pattern) {
            Ok(h) => h,
            Err(e) => {
                self.reporter
                    .warn(&format!("play \"{}\": bad host pattern: {e}", play.name));
                return;
            }
        };
        // Ansible skips such a play with a warning; the warning says where it is and what to do.
        let pattern_hint = selected.is_empty().then(|| {
            let hint = if self.cfg.inventory.is_empty() {
                "without -i the only host is the implicit `localhost`, which `all` does not \
                 match (as in ansible-core): write `hosts: localhost`, or give the inventory \
                 with -i"
                    .into()
            } else {
                self.inventory.unmatched_pattern_hint(&pattern)
            };
            format!(" (written at {}); {hint}", play.pos)
        });
        if let Err(e) = self.limit_hosts(&mut selected) {
            self.reporter.warn(&e);
            return;
        }
        // `ansible_play_hosts_all` (and `ansible_play_hosts`) keep the pattern's order whatever
        // the play's `order`, as ansible-core computes them apart from the batches.
        self.play_hosts_all = selected.clone();
        order_hosts(&mut selected, play.order);
        // Its name as shown, which is also `ansible_play_name`: rendered with the play's
        // variables, as ansible-core templates the play's name before it runs.
        let play_name = shown_name(&self.play_scope(play), &play.name, &|_| true);
        self.reporter.play_start(&play_name, pass);
        if selected.is_empty() {
            let shard = match &self.cfg.shard {
                Some(s) => format!(" in shard {s}"),
                None => String::new(),
            };
            self.reporter.warn(&format!(
                "play \"{}\": no hosts matched `{}`{shard}{}",
                play.name,
                pattern,
                pattern_hint.unwrap_or_default()
            ));
            return;
        }
        // --start-at-task: a play before the one that holds it runs nothing, not even its
        // facts, as in ansible-core.
        if let (false, Some(want)) = (self.started, &self.cfg.start_at_task) {
            if !super::start_at::play_holds_start(play, want) {
                return;
            }
        }
        // A later play runs: hosts `any_errors_fatal` failed in an earlier one now count.
        for hs in self.hosts.values_mut() {
            hs.fatal_carried |= hs.fatal_marked;
        }
        // The `group_vars/`/`host_vars/` beside this play's own playbook file apply now.
        if self.inventory.play_dir_changes(&play.dir) {
            Arc::make_mut(&mut self.inventory).set_play_dir(&play.dir);
            for h in self.hosts.values_mut() {
                h.inv_vars = Arc::new(self.inventory.host_vars(&h.name));
            }
            self.hostvars_changed();
        }
        for h in &selected {
            self.host_state(h);
        }
        let files_vars = match self.templated_vars_files(play) {
            Ok(v) => v,
            Err(e) => return self.fail_play(play, &selected, &e),
        };
        // Templated tags are rendered with the play's variables before it runs, as
        // ansible-core does; one that cannot be rendered stops the run there.
        self.tag_scope = Some(self.tag_scope(play, &files_vars));
        self.public_roles = Arc::default();
        if let Err(e) = self.check_tags(play) {
            self.playbook_stopped = true;
            return self.fail_play(play, &selected, &e);
        }
        self.play_ended = false;
        for h in &selected {
            let hs = self.host_state(h);
            hs.ended = false;
            // ansible-core remembers the roles a host completed per play.
            hs.roles_ran.clear();
            hs.role_passed_by.clear();
            hs.role_item.clear();
            // A host that failed in an earlier play is out of the run, and so are the handlers
            // notified on it: ansible-core drops them with the host, even where a later play
            // forces handlers. (Its outbox keeps them for the next run.)
            if !hs.active() {
                hs.notified.clear();
            }
        }
        let groups = self.inventory.groups_map();
        self.inventory_groups = None;
        self.grouped_objects = None;
        let files_vars = Arc::new(files_vars);
        let mut handlers = play.handlers.clone();
        self.render_handler_names(play, &mut handlers);
        self.handlers = Arc::new(handlers);
        // What the status lines count a host's tasks against: those the tags select, as far
        // as is known before run-time includes load (they add theirs when they do).
        let total = usize::from(play.gather_facts)
            + [&play.pre_tasks, &play.roles, &play.tasks, &play.post_tasks]
                .into_iter()
                .flat_map(|s| crate::playbook::ast::all_tasks(s))
                .filter(|t| self.tag_selected(&t.tags))
                .count();
        for batch in batches(&selected, &play.serial) {
            self.progress.play(&batch, total);
            let mut ctx = PlayCtx::new(
                play,
                book,
                &groups,
                batch.clone(),
                self.play_hosts_all.clone(),
                files_vars.clone(),
                self.handlers.clone(),
            );
            ctx.objects = Arc::new(ctx.objects.named(&play_name));
            self.failed_before = batch
                .iter()
                .filter(|h| !self.hosts[*h].active())
                .cloned()
                .collect();
            if play.gather_facts {
                self.gather_facts(&ctx).await;
            }
            // Ansible's order: pre_tasks, handlers, roles then tasks, handlers, post_tasks, handlers.
            let sections: [&[&[Step]]; 3] = [
                &[&play.pre_tasks],
                &[&play.roles, &play.tasks],
                &[&play.post_tasks],
            ];
            for section in sections {
                if play.free {
                    self.run_free_section(&ctx, section, &batch).await;
                } else {
                    for steps in section {
                        self.run_steps(&ctx, steps, &batch).await;
                    }
                    if !self.play_ended {
                        self.flush_handlers(&ctx).await;
                    }
                }
                if self.play_ended {
                    break;
                }
            }
            // Hosts failed by another's failure under `any_errors_fatal` count as failed once
            // the play ends, even those a `rescue` took back, as in ansible-core.
            for h in &batch {
                let hs = self.host_state(h);
                if hs.fatal_marked {
                    hs.failed = true;
                }
            }
            // ansible-core stops the playbook when every host of a batch failed in it: later
            // batches and later plays do not run.
            let batch_failed = batch.iter().all(|h| {
                let hs = &self.hosts[h];
                (hs.failed || hs.unreachable) && !self.failed_before.contains(h)
            });
            if batch_failed {
                self.playbook_stopped = true;
            }
            if self.play_ended || batch_failed {
                break;
            }
        }
    }

    /// The inventory changed during the run (`add_host`, `group_by`): `hostvars` entries and
    /// connection specs built from it are stale. The one place to call for that (a host's own
    /// `inv_vars` must then be replaced too: its `hostvars` entry compares them by address).
    pub(super) fn hostvars_changed(&mut self) {
        self.hostvars.invalidate();
        for h in self.hosts.values_mut() {
            h.forget_spec();
        }
    }

    /// `hostvars` as they are now, as the template object scopes share, with the magic
    /// variables of `objects` (`groups`, `group_names`, `playbook_dir`).
    pub(super) fn hostvars_now(&mut self, objects: &PlayObjects) -> Arc<hostvars::Table> {
        let ctx = hostvars::EntryCtx::new(
            self.hostvars.run_vars(&self.cfg),
            &self.templar,
            &self.cfg.extra_vars,
            objects,
        );
        self.hostvars.table(
            self.hosts.values().map(HostState::vars),
            self.peer_hostvars.as_ref(),
            &self.inventory,
            ctx,
        )
    }

    /// `--limit` and `--shard` applied to a play's hosts.
    fn limit_hosts(&self, hosts: &mut Vec<String>) -> Result<(), String> {
        if let Some(limit) = &self.cfg.limit {
            let allowed = self
                .inventory
                .select_limit(limit)
                .map_err(|e| format!("bad --limit pattern: {e}"))?;
            hosts.retain(|h| allowed.contains(h));
        }
        if let Some(shard) = &self.cfg.shard {
            shard.retain(&self.inventory, hosts);
        }
        Ok(())
    }

    /// After `meta: refresh_inventory`: the play's hosts are its pattern's selection from the
    /// inventory as it is now (`--limit` applied), as ansible-core computes them again; the
    /// batches are those the play started with. A pattern that no longer selects anything
    /// leaves the lists empty.
    pub(super) fn select_play_hosts_again(&mut self, play: &Play) {
        let pattern = self.play_pattern(play).unwrap_or_default();
        let mut hosts = self.inventory.select(&pattern).unwrap_or_default();
        if self.limit_hosts(&mut hosts).is_err() {
            // The same limit was accepted when the play started.
            return;
        }
        self.play_hosts_all = hosts;
    }

    /// The play's objects with the groups as they are now (`add_host`/`group_by` may have
    /// changed them during this play).
    pub(super) fn objects_now(&mut self, ctx: &PlayCtx<'_>) -> PlayObjects {
        let Some(groups) = &self.inventory_groups else {
            return (*ctx.objects).clone();
        };
        match &self.grouped_objects {
            Some((base, made)) if Arc::ptr_eq(base, &ctx.objects) => made.clone(),
            _ => {
                let made = ctx.objects.with_groups(groups);
                self.grouped_objects = Some((ctx.objects.clone(), made.clone()));
                made
            }
        }
    }

    /// The play context with the hosts' variables and failures as they are now.
    pub(super) fn snapshot<'c>(&mut self, ctx: &'c PlayCtx<'c>) -> PlayCtx<'c> {
        let objects = self.objects_now(ctx);
        let table = self.hostvars_now(&objects);
        // A host `add_host` brought in has no state here: it has not failed.
        let live_hosts: Vec<String> = self
            .play_hosts_all
            .iter()
            .filter(|h| {
                self.hosts
                    .get(*h)
                    .is_none_or(|hs| !hs.failed && !hs.unreachable)
            })
            .cloned()
            .collect();
        let objects =
            objects.with_hosts(&self.play_hosts_all, &live_hosts, hostvars::object(&table));
        let objects = Arc::new(objects);
        PlayCtx {
            handlers: self.handlers.clone(),
            objects,
            live_hosts,
            public_roles: self.public_roles.clone(),
            ..ctx.with_params(Map::new())
        }
    }

    /// The variables known before any host is involved: play vars, plain `vars_files`, `-e`.
    /// Play and task names are rendered with them, as Ansible does.
    pub(super) fn play_scope(&self, play: &Play) -> Arc<Scope> {
        Scope::new(
            self.templar.clone(),
            vec![
                Layer::shared(play.vars.clone(), true),
                Layer::shared(play.vars_from_files.clone(), true),
                Layer::shared(self.cfg.extra_vars.clone(), true),
            ],
        )
    }

    /// The play's host pattern, rendered when it is a template.
    fn play_pattern(&self, play: &Play) -> Result<String, String> {
        if !is_template(&play.hosts) {
            return Ok(play.hosts.clone());
        }
        Ok(match self.play_scope(play).render(&json!(play.hosts))? {
            Value::Array(list) => list.iter().map(display).collect::<Vec<_>>().join(","),
            one => display(&one),
        })
    }

    /// A play that cannot start (a `vars_files` path or a tag that does not render): said,
    /// and every host of it failed.
    fn fail_play(&mut self, play: &Play, selected: &[String], e: &str) {
        self.reporter.warn(&format!("play \"{}\": {e}", play.name));
        for h in selected {
            let hs = self.host_state(h);
            hs.failed = true;
            hs.stats.failed += 1;
        }
    }

    /// The variables a play's templated tags see: those ansible-core knows for the play
    /// without a host (its roles' defaults, `vars`, `vars_files`, `-e`).
    fn tag_scope(&self, play: &Play, files_vars: &Map<String, Value>) -> Arc<Scope> {
        Scope::new(
            self.templar.clone(),
            vec![
                Layer::shared(play.role_defaults.clone(), true),
                Layer::shared(play.vars.clone(), true),
                Layer::shared(play.vars_from_files.clone(), true),
                Layer::shared(Arc::new(files_vars.clone()), true),
                Layer::shared(self.cfg.extra_vars.clone(), true),
            ],
        )
    }

    /// Every templated tag of the play's tasks renders (an undefined variable is an error
    /// before the play runs in ansible-core, whatever `--tags` says).
    fn check_tags(&self, play: &Play) -> Result<(), String> {
        let Some(scope) = &self.tag_scope else {
            return Ok(());
        };
        let sections = [&play.pre_tasks, &play.roles, &play.tasks, &play.post_tasks];
        for t in sections
            .into_iter()
            .flat_map(|s| crate::playbook::ast::all_tasks(s))
        {
            if t.tags.iter().any(|x| is_template(x)) {
                super::rendered_tags(scope, &t.tags)
                    .map_err(|e| format!("cannot render the tags of the task at {}: {e}", t.pos))?;
            }
        }
        Ok(())
    }

    /// Load the `vars_files` whose paths are templates, rendered with play vars and `-e`.
    fn templated_vars_files(&self, play: &Play) -> Result<Map<String, Value>, String> {
        let mut out = Map::new();
        if play.vars_files.is_empty() {
            return Ok(out);
        }
        let scope = self.play_scope(play);
        for (path, pos) in &play.vars_files {
            let rendered = scope
                .render(&json!(path))
                .map_err(|e| format!("cannot render vars_files entry `{path}` ({pos}): {e}"))?;
            let file = play.dir.join(display(&rendered));
            let vars = crate::playbook::load_vars_file(&file, pos).map_err(|d| d.msg)?;
            out.extend(vars);
        }
        Ok(out)
    }
}

/// Play `order`: the selection comes in inventory order.
fn order_hosts(hosts: &mut [String], order: HostOrder) {
    order_hosts_with(hosts, order, &mut fastrand::Rng::new());
}

/// `order_hosts` with the random source of `shuffle` given, so tests can pin its seed.
fn order_hosts_with(hosts: &mut [String], order: HostOrder, rng: &mut fastrand::Rng) {
    match order {
        HostOrder::Inventory => {}
        HostOrder::ReverseInventory => hosts.reverse(),
        HostOrder::Sorted => hosts.sort(),
        HostOrder::ReverseSorted => {
            hosts.sort();
            hosts.reverse();
        }
        // A new random order each run spreads the load, which is all `shuffle` is for.
        HostOrder::Shuffle => rng.shuffle(hosts),
    }
}

/// The hosts of a play in batches of `serial` sizes (the last size repeats).
fn batches(hosts: &[String], serial: &[BatchSize]) -> Vec<Vec<String>> {
    if serial.is_empty() {
        return vec![hosts.to_vec()];
    }
    let mut out = Vec::new();
    let mut rest = hosts;
    let mut i = 0;
    while !rest.is_empty() {
        let size = match serial[i.min(serial.len() - 1)] {
            BatchSize::Count(n) => n,
            // Ansible rounds a percentage down, but a batch has at least one host.
            BatchSize::Percent(p) => ((hosts.len() as f64) * p / 100.0).floor() as usize,
        }
        .clamp(1, rest.len());
        out.push(rest[..size].to_vec());
        rest = &rest[size..];
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("h{i:02}")).collect()
    }

    #[test]
    fn orders_other_than_shuffle_are_fixed() {
        let ordered = |order| {
            let mut h = vec!["b".to_string(), "c".to_string(), "a".to_string()];
            order_hosts(&mut h, order);
            h
        };
        assert_eq!(ordered(HostOrder::Inventory), ["b", "c", "a"]);
        assert_eq!(ordered(HostOrder::ReverseInventory), ["a", "c", "b"]);
        assert_eq!(ordered(HostOrder::Sorted), ["a", "b", "c"]);
        assert_eq!(ordered(HostOrder::ReverseSorted), ["c", "b", "a"]);
    }

    #[test]
    fn shuffle_is_a_permutation_deterministic_per_seed() {
        let inv = names(20);
        let shuffled = |seed| {
            let mut h = inv.clone();
            order_hosts_with(
                &mut h,
                HostOrder::Shuffle,
                &mut fastrand::Rng::with_seed(seed),
            );
            h
        };
        let a = shuffled(7);
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, inv, "the same hosts, each once");
        assert_ne!(a, inv, "20 hosts left in inventory order: not shuffled");
        assert_eq!(a, shuffled(7), "the same seed gives the same order");
        assert_ne!(a, shuffled(8), "another seed gives another order");
    }

    #[test]
    fn serial_cuts_batches_and_repeats_the_last_size() {
        let hosts = names(7);
        let sizes = |b: Vec<Vec<String>>| b.iter().map(Vec::len).collect::<Vec<_>>();
        assert_eq!(sizes(batches(&hosts, &[])), [7]);
        assert_eq!(sizes(batches(&hosts, &[BatchSize::Count(3)])), [3, 3, 1]);
        assert_eq!(
            sizes(batches(&hosts, &[BatchSize::Count(1), BatchSize::Count(4)])),
            [1, 4, 2]
        );
        // 7 * 10% rounds down to 0: a batch still has one host.
        assert_eq!(sizes(batches(&hosts, &[BatchSize::Percent(10.0)])), [1; 7]);
        assert_eq!(
            sizes(batches(&hosts, &[BatchSize::Percent(50.0)])),
            [3, 3, 1]
        );
        let flat: Vec<String> = batches(&hosts, &[BatchSize::Count(2)]).concat();
        assert_eq!(flat, hosts, "batches keep the play's host order");
    }
}
