//! The variables a template reads, without rendering it: what the engine's section analysis
//! (`engine/section.rs`) needs to know that a task does not read a result still on its way.
//!
//! Read from minijinja's compiled instructions, like `cross.rs`: every variable lookup that is
//! not one of the template's own locals. What cannot be seen that way makes the answer
//! "anything" (`None`): `vars`, the `lookup`/`query` functions (`lookup('vars', …)` and
//! `lookup('template', …)` read names given as strings), and a template file that includes,
//! imports or extends another.

use std::collections::BTreeSet;

use minijinja::machinery::{get_compiled_template, Instruction, Instructions};

use super::file::parse_jinja2_header;
use super::rewrite::{escape_backslashes, rewrite_chains, rewrite_code};
use super::{ScanAs, Templar};

/// Functions that read variables named by their arguments.
const OPAQUE_CALLS: &[&str] = &["lookup", "query", "q"];

impl Templar {
    /// The variables `source` reads, compiled as `how` says; `None` when that cannot be known
    /// (it does not compile, or reads names it is given at run time).
    pub fn names_read(&self, source: &str, how: ScanAs) -> Option<BTreeSet<String>> {
        let code = match how {
            ScanAs::Text | ScanAs::Condition if Templar::is_template(source) => {
                rewrite_chains(&escape_backslashes(source))
            }
            ScanAs::Text => return Some(BTreeSet::new()),
            ScanAs::Condition => format!("{{{{ {} }}}}", rewrite_code(source)),
            ScanAs::File => {
                let body = match parse_jinja2_header(source) {
                    Some((_, body)) => body,
                    None => source,
                };
                rewrite_chains(body)
            }
        };
        let tmpl = self.env.template_from_named_str("<reads>", &code).ok()?;
        let compiled = get_compiled_template(&tmpl);
        let mut lists: Vec<&Instructions<'_>> = vec![&compiled.instructions];
        lists.extend(compiled.blocks.values());
        let all = || {
            lists
                .iter()
                .flat_map(|ins| (0..ins.len() as u32).filter_map(|i| ins.get(i)))
        };
        let locals: BTreeSet<&str> = all()
            .filter_map(|i| match i {
                Instruction::StoreLocal(n) | Instruction::BuildMacro(n, _, _) => Some(*n),
                _ => None,
            })
            .collect();
        let mut names = BTreeSet::new();
        for i in all() {
            match i {
                Instruction::Lookup("vars") => return None,
                Instruction::Lookup(n) if !locals.contains(n) => {
                    names.insert((*n).to_string());
                }
                Instruction::CallFunction(n, _) if OPAQUE_CALLS.contains(n) => return None,
                // `include`, `import` and `extends` read what another template reads, with the
                // caller's context: not followed, so anything. (Plain text saying "include", as
                // nginx configurations do, is no such statement.)
                Instruction::Include(_) | Instruction::LoadBlocks => return None,
                _ => {}
            }
        }
        Some(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(src: &str, how: ScanAs) -> Option<Vec<String>> {
        Templar::new()
            .names_read(src, how)
            .map(|s| s.into_iter().collect())
    }

    #[test]
    fn the_names_a_template_reads_leave_out_its_locals() {
        assert_eq!(
            names(
                "{{ base }}/{% for x in items %}{{ x }}{% endfor %}",
                ScanAs::Text
            ),
            Some(vec!["base".into(), "items".into()])
        );
        assert_eq!(
            names("conf.stat.exists and mode == '0640'", ScanAs::Condition),
            Some(vec!["conf".into(), "mode".into()])
        );
        assert_eq!(names("plain text", ScanAs::Text), Some(vec![]));
    }

    #[test]
    fn names_given_at_run_time_read_anything() {
        assert_eq!(names("{{ lookup('vars', 'x') }}", ScanAs::Text), None);
        assert_eq!(names("{{ vars['x'] }}", ScanAs::Text), None);
        assert_eq!(names("{% include 'a.j2' %}", ScanAs::File), None);
        assert_eq!(names("{% import 'm.j2' as m %}", ScanAs::File), None);
        assert_eq!(names("{% from 'm.j2' import f %}", ScanAs::File), None);
        assert_eq!(names("{% extends 'base.j2' %}", ScanAs::File), None);
        assert_eq!(
            names("include {{ base }}/h.conf;", ScanAs::File),
            Some(vec!["base".into()])
        );
        assert_eq!(names("{{ unclosed", ScanAs::Text), None);
    }
}
