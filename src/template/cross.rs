//! The names through which a template reads other hosts' state — what `--shard` must refuse,
//! since one shard's controller never ran the other shards' hosts (`validate/fleet.rs`).
//!
//! Read from minijinja's compiled instructions, like the filters of `scan.rs`: a variable
//! lookup of `hostvars` (except `hostvars[inventory_hostname]`, the host itself) or of the
//! play's host lists, which under `--shard` hold only the shard's hosts. `groups` is not one:
//! it is the inventory's, the same in every shard. What cannot be seen here is left to the
//! documentation: a name reached through `vars[...]` or `lookup('vars', …)`, or a template
//! held in an inventory variable.

use minijinja::machinery::{Instruction, Instructions};
use std::collections::BTreeSet;

/// Variables whose value, under `--shard`, would hold other shards' hosts or lack them.
pub const FLEET_NAMES: &[&str] = &[
    "hostvars",
    "ansible_play_hosts",
    "ansible_play_hosts_all",
    "ansible_play_batch",
    "play_hosts",
];

/// One read of such a variable, at a 1-based line and column of the template's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrossRead {
    pub name: &'static str,
    pub line: usize,
    pub col: usize,
}

/// Every read of a fleet-wide variable in these instruction lists (the template's own locals
/// of the same name excluded): the name and the line of the compiled text, each pair once.
pub(super) fn cross_reads(
    lists: &[&Instructions<'_>],
    locals: &BTreeSet<&str>,
) -> Vec<(&'static str, usize)> {
    let mut out: Vec<(&'static str, usize)> = Vec::new();
    for ins in lists {
        for idx in 0..ins.len() as u32 {
            let Some(Instruction::Lookup(name)) = ins.get(idx) else {
                continue;
            };
            let Some(name) = FLEET_NAMES.iter().find(|n| *n == name) else {
                continue;
            };
            if locals.contains(name) {
                continue;
            }
            // `hostvars[inventory_hostname]` (also as `__fp_chain(hostvars, inventory_hostname, …)`
            // after `rewrite_chains`): the host's own variables.
            if *name == "hostvars"
                && matches!(
                    ins.get(idx + 1),
                    Some(Instruction::Lookup("inventory_hostname"))
                )
            {
                continue;
            }
            let read = (*name, ins.get_line(idx).unwrap_or(1));
            if !out.contains(&read) {
                out.push(read);
            }
        }
    }
    out
}

/// The 1-based column of the first `name` on `line` of `text` that is a variable (not a part of
/// a longer name, nor an attribute after a `.`).
pub(super) fn find_name(text: &str, line: usize, name: &str) -> Option<usize> {
    let l = text.lines().nth(line.checked_sub(1)?)?;
    let b = l.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    l.match_indices(name)
        .map(|(s, _)| s)
        .find(|&s| {
            let e = s + name.len();
            (s == 0 || !(word(b[s - 1]) || b[s - 1] == b'.')) && (e == b.len() || !word(b[e]))
        })
        .map(|s| l[..s].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use crate::template::{ScanAs, Templar};

    fn reads(src: &str, how: ScanAs) -> Vec<(String, usize, usize)> {
        Templar::new()
            .scan(src, how)
            .cross
            .into_iter()
            .map(|r| (r.name.to_string(), r.line, r.col))
            .collect()
    }

    #[test]
    fn other_hosts_are_found_with_their_place() {
        let t = |s| reads(s, ScanAs::Text);
        assert_eq!(
            t("{{ hostvars['db1'].ansible_default_ipv4.address }}"),
            vec![("hostvars".into(), 1, 4)]
        );
        assert_eq!(
            reads(
                "x\n{% for h in groups['web'] %}{{ hostvars[h]['ansible_host'] }}\n{% endfor %}",
                ScanAs::File
            ),
            vec![("hostvars".into(), 2, 32)]
        );
        assert_eq!(
            reads(
                "inventory_hostname == ansible_play_hosts[0]",
                ScanAs::Condition
            ),
            vec![("ansible_play_hosts".into(), 1, 23)]
        );
        assert_eq!(t("{{ play_hosts | length }}")[0].0, "play_hosts");
    }

    #[test]
    fn the_host_itself_and_the_inventory_are_not_other_hosts() {
        let none = [
            "{{ hostvars[inventory_hostname].x }}",
            "{{ hostvars[inventory_hostname]['x'] | default('d') }}",
            "{{ groups['web'] | length }} {{ inventory_hostname }} {{ group_names }}",
            "{% set hostvars = {} %}{{ hostvars.x }}",
            "{# hostvars['db1'] #}{{ 'hostvars' }}",
        ];
        for src in none {
            assert_eq!(reads(src, ScanAs::Text), vec![], "{src}");
        }
    }
}
