//! What `fixpoint validate` learns from a template without rendering it: its syntax, the
//! filters, tests, functions and lookups it names that fixpoint does not have, and the other
//! template files it reaches (`{% include %}`, `{% import %}`, `{% extends %}`,
//! `lookup('template', …)`).
//!
//! Filters, tests and functions are read from minijinja's compiled instructions (exact, and
//! blind to comments and string constants); lookup plugins and the names of reached files are
//! string arguments, so they are read from the source text. The template is compiled the way
//! the engine compiles it (`rewrite`), so both agree on every name.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use minijinja::machinery::{get_compiled_template, Instruction, Instructions};
use regex::Regex;

use super::file::parse_jinja2_header;
use super::foreign::{Kind as PluginKind, FILTER_FN, TEST_FN};
use super::rewrite::{escape_backslashes, mask_strings, rewrite_chains, rewrite_code};
use super::{lookups, Templar};

/// One thing wrong in a template, at a 1-based line and column of its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub line: usize,
    pub col: usize,
    pub msg: String,
    pub help: String,
}

/// Another template file a template reaches, by the name written in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub name: String,
    pub line: usize,
    pub col: usize,
    /// `{% include … ignore missing %}`: a missing file is not an error.
    pub optional: bool,
    /// `lookup('template', …)` (searched in `templates/`), not a statement of a template file.
    pub lookup: bool,
}

/// What a scan found.
#[derive(Debug, Default)]
pub struct Scan {
    pub problems: Vec<Problem>,
    pub refs: Vec<Reference>,
    /// Reads of other hosts' state, refused under `--shard` (`cross.rs`).
    pub cross: Vec<super::cross::CrossRead>,
}

/// How the text is used, which decides how it is compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanAs {
    /// A string of the playbook rendered as a template (module parameters, names, `vars`).
    Text,
    /// A bare expression (`when`, `changed_when`, `failed_when`, `until`).
    Condition,
    /// A template file (`template` module, included or looked up): `#jinja2:` header allowed.
    File,
}

/// Names a template may call that are not globals: its own macros and Jinja's specials.
const SPECIAL_CALLS: &[&str] = &["super", "loop", "caller", "varargs", "kwargs", "self"];

impl Templar {
    /// Compile `source` as the engine would and report what cannot work whatever the host's
    /// values: syntax errors, unknown filters, tests, functions and lookup plugins.
    pub fn scan(&self, source: &str, how: ScanAs) -> Scan {
        let mut scan = Scan::default();
        // Lines dropped before the compiled text starts (the `#jinja2:` header), and columns
        // added before it on its first line (the `{{ ` around a bare condition).
        let (code, line_shift, col_shift) = match how {
            ScanAs::Text => (rewrite_chains(&escape_backslashes(source)), 0, 0),
            ScanAs::Condition if Templar::is_template(source) => {
                (rewrite_chains(&escape_backslashes(source)), 0, 0)
            }
            ScanAs::Condition => (format!("{{{{ {} }}}}", rewrite_code(source)), 0, 3),
            ScanAs::File => match parse_jinja2_header(source) {
                Some((_, body)) => (rewrite_chains(body), 1, 0),
                None => (rewrite_chains(source), 0, 0),
            },
        };
        let at = |line: usize, col: usize| {
            let col = if line == 1 {
                col.saturating_sub(col_shift).max(1)
            } else {
                col
            };
            (line + line_shift, col)
        };
        // Where a name is in the text as written: the rewrite may have moved it on its line.
        let place = |line: usize, name: &str| {
            let fallback = at(line, find_word(&code, line, name).unwrap_or(1));
            match find_word(source, fallback.0, name) {
                Some(col) => (fallback.0, col),
                None => fallback,
            }
        };
        let env: &minijinja::Environment<'_> = &self.env;
        let tmpl = match env.template_from_named_str("<scan>", &code) {
            Ok(t) => t,
            Err(e) => {
                let (line, col) = match e.range() {
                    Some(r) => line_col(&code, r.start),
                    None => (e.line().unwrap_or(1), 1),
                };
                let (line, col) = at(line, col);
                scan.problems.push(Problem {
                    line,
                    col,
                    msg: format!(
                        "template syntax error: {}",
                        e.detail().unwrap_or("invalid syntax")
                    ),
                    help: "fix the Jinja2 syntax here".into(),
                });
                return scan;
            }
        };
        let compiled = get_compiled_template(&tmpl);
        let mut lists: Vec<&Instructions<'_>> = vec![&compiled.instructions];
        lists.extend(compiled.blocks.values());
        let locals: BTreeSet<&str> = lists
            .iter()
            .flat_map(|ins| (0..ins.len() as u32).filter_map(|i| ins.get(i)))
            .filter_map(|i| match i {
                Instruction::StoreLocal(n) | Instruction::BuildMacro(n, _, _) => Some(*n),
                _ => None,
            })
            .collect();
        for (name, line) in super::cross::cross_reads(&lists, &locals) {
            let col = super::cross::find_name(&code, line, name).unwrap_or(1);
            let (line, col) = at(line, col);
            scan.cross.push(super::cross::CrossRead { name, line, col });
        }
        let mut seen = BTreeSet::new();
        for ins in lists {
            for idx in 0..ins.len() as u32 {
                // `None`: a function.
                let (plugin, name) = match ins.get(idx) {
                    Some(Instruction::ApplyFilter(n, _, _)) => (Some(PluginKind::Filter), *n),
                    Some(Instruction::PerformTest(n, _, _)) => (Some(PluginKind::Test), *n),
                    Some(Instruction::CallFunction(n, _)) => (None, *n),
                    _ => continue,
                };
                let name: String = name.chars().filter(|c| !c.is_whitespace()).collect();
                let known = match plugin {
                    // Macros of a template file may come from the template including it.
                    None => {
                        how == ScanAs::File
                            || locals.contains(name.as_str())
                            || SPECIAL_CALLS.contains(&name.as_str())
                            || self.env.globals().any(|(g, _)| g == name)
                    }
                    Some(kind) => self.has(kind, &name) || super::foreign::knows(kind, &name),
                };
                let kind = plugin.map_or("function", PluginKind::word);
                if known || !seen.insert((kind, name.clone())) {
                    continue;
                }
                let line = ins.get_line(idx).unwrap_or(1);
                let (line, col) = place(line, &name);
                scan.problems.push(unknown(kind, &name, line, col));
            }
        }
        // A collection's filters and tests, called through the dispatcher (`rewrite`): their
        // names are its first argument.
        let masked = mask_strings(&code);
        for caps in dispatched_re().captures_iter(&masked) {
            let (fn_name, m) = (&caps[1], caps.get(2).expect("group exists"));
            let name = &code[m.range()];
            let kind = if fn_name == FILTER_FN {
                PluginKind::Filter
            } else {
                PluginKind::Test
            };
            if super::foreign::knows(kind, name) || !seen.insert((kind.word(), name.to_string())) {
                continue;
            }
            let (line, _) = line_col(&code, m.start());
            let (line, col) = place(line, name);
            scan.problems.push(unknown(kind.word(), name, line, col));
        }
        // Comments hold no lookups or includes.
        let code = blank_comments(&code);
        for caps in lookup_re().captures_iter(&code) {
            let m = caps.get(1).expect("group exists");
            let plugin = caps[2].trim();
            let plugin = ["ansible.builtin.", "ansible.legacy."]
                .iter()
                .find_map(|p| plugin.strip_prefix(p))
                .unwrap_or(plugin);
            let (line, col) = line_col(&code, m.start());
            let (line, col) = at(line, col);
            // A plugin name written as a template (`lookup('{{ "pipe" }}')`) is not rendered
            // by ansible-core: the run fails, as a task (which `ignore_errors` may keep).
            if fixpoint_modules::params::is_template(plugin) {
                continue;
            }
            if !self.knows_lookup(plugin) {
                scan.problems.push(Problem {
                    line,
                    col,
                    msg: format!("unknown lookup plugin `{plugin}`"),
                    help: format!(
                        "fixpoint's lookups are {}; a run would fail here",
                        lookups::NAMES.join(", ")
                    ),
                });
            } else if let Some(name) = caps
                .get(3)
                .filter(|n| {
                    plugin == "config" && !fixpoint_modules::params::is_template(n.as_str())
                })
                .map(|n| n.as_str())
                .filter(|n| crate::config::ansible_setting(n).is_none())
            {
                scan.problems.push(Problem {
                    line,
                    col,
                    msg: format!("`lookup('config', '{name}')`: a setting fixpoint does not read"),
                    help: format!("{}; a run would fail here", lookups::config_refused(name)),
                });
            } else if plugin == "template" {
                if let Some(file) = caps.get(3) {
                    let (line, col) = line_col(&code, file.start());
                    let (line, col) = at(line, col);
                    scan.refs.push(Reference {
                        name: file.as_str().to_string(),
                        line,
                        col,
                        optional: false,
                        lookup: true,
                    });
                }
            }
        }
        if how == ScanAs::File {
            for caps in include_re().captures_iter(&code) {
                let m = caps.get(2).expect("group exists");
                let (line, col) = line_col(&code, m.start());
                let (line, col) = at(line, col);
                scan.refs.push(Reference {
                    name: m.as_str().to_string(),
                    line,
                    col,
                    optional: caps[3].contains("ignore missing"),
                    lookup: false,
                });
            }
        }
        scan
    }

    /// Whether a lookup of this name exists: fixpoint's own, or one of the playbook's plugins.
    pub fn knows_lookup(&self, name: &str) -> bool {
        lookups::NAMES.contains(&name) || super::foreign::knows(PluginKind::Lookup, name)
    }

    /// Whether the environment has a filter or test of this name, asked through Jinja's own
    /// `is filter` / `is test`.
    fn has(&self, kind: PluginKind, name: &str) -> bool {
        let src = format!("{{{{ n is {} }}}}", kind.word());
        match self.env.render_str(&src, minijinja::context! { n => name }) {
            Ok(out) => out.eq_ignore_ascii_case("true"),
            // Cannot tell: leave it to the run.
            Err(_) => true,
        }
    }
}

/// The problem of a filter, test or function of no known name.
fn unknown(kind: &str, name: &str, line: usize, col: usize) -> Problem {
    Problem {
        line,
        col,
        msg: format!("unknown {kind} `{name}`"),
        help: format!(
            "fixpoint has no {kind} of that name (README, \"Templating\", lists those it has); \
             a run would fail here"
        ),
    }
}

/// A call of the dispatcher (group 1) with the plugin's name (group 2, masked), in code whose
/// string constants are masked (`mask_strings`).
fn dispatched_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(&format!(
            r#"(?-u:\b)({FILTER_FN}|{TEST_FN})\s*\(\s*"(\x01+)""#
        ))
        .expect("valid regex")
    })
}

/// `lookup('name', 'arg'…)`, `query(…)`, `q(…)` with a constant plugin name (group 2) and,
/// when constant too, its first term (group 3).
fn lookup_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r#"(?:^|[^0-9A-Za-z_.])(lookup|query|q)\s*\(\s*['"]([^'"]*)['"]\s*(?:,\s*['"]([^'"]*)['"])?"#,
        )
        .expect("valid regex")
    })
}

/// `{% include 'x' %}`, `{% import 'x' as y %}`, `{% from 'x' import y %}`,
/// `{% extends 'x' %}` with a constant name (group 2) and the rest of the statement (group 3).
fn include_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r#"\{%[-+]?\s*(include|import|from|extends)\s+['"]([^'"]+)['"]([^%]*)%\}"#)
            .expect("valid regex")
    })
}

/// The text with each `{# … #}` comment replaced by spaces (newlines kept, so places stay).
fn blank_comments(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(start) = rest.find("{#") {
        let end = rest[start..]
            .find("#}")
            .map_or(rest.len(), |e| start + e + 2);
        out.push_str(&rest[..start]);
        out.extend(
            rest[start..end]
                .chars()
                .map(|c| if c == '\n' { '\n' } else { ' ' }),
        );
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The 1-based line and column (in characters) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() + 1)
}

/// The 1-based column where `word` first appears as a whole name on `line` of `text`.
fn find_word(text: &str, line: usize, word: &str) -> Option<usize> {
    let l = text.lines().nth(line.checked_sub(1)?)?;
    let bytes = l.as_bytes();
    let is_name = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'.';
    let mut from = 0;
    while let Some(i) = l[from..].find(word) {
        let s = from + i;
        let e = s + word.len();
        if (s == 0 || !is_name(bytes[s - 1])) && (e == bytes.len() || !is_name(bytes[e])) {
            return Some(l[..s].chars().count() + 1);
        }
        from = e;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(src: &str, how: ScanAs) -> Vec<(usize, usize, String)> {
        Templar::new()
            .scan(src, how)
            .problems
            .into_iter()
            .map(|p| (p.line, p.col, p.msg))
            .collect()
    }

    #[test]
    fn known_names_pass() {
        let ok = [
            "{{ x | default('a') | to_json }}",
            "{{ x is defined and y is ansible.builtin.match('a') }}",
            "{{ lookup('env', 'HOME') }} {{ query('ansible.builtin.fileglob', '*') }}",
            "{% macro m() %}x{% endmacro %}{{ m() }}{{ range(3) | list }}{{ now() }}",
            "{# lookup('nosuch') is a comment #}{{ 'x' }}",
        ];
        for src in ok {
            assert_eq!(problems(src, ScanAs::Text), vec![], "{src}");
        }
        assert_eq!(
            problems("x | bool and item.a is defined", ScanAs::Condition),
            vec![]
        );
    }

    #[test]
    fn unknown_names_are_found_with_their_place() {
        assert_eq!(
            problems("a\n{{ x | nosuch_filter }}", ScanAs::File),
            vec![(2, 8, "unknown filter `nosuch_filter`".to_string())]
        );
        assert_eq!(
            problems("x is nosuch_test", ScanAs::Condition),
            vec![(1, 6, "unknown test `nosuch_test`".to_string())]
        );
        assert_eq!(
            problems("{{ lookup('nosuch', 'a') }}", ScanAs::Text),
            vec![(1, 4, "unknown lookup plugin `nosuch`".to_string())]
        );
        // A templated plugin name is left to the run, which fails it as ansible-core does.
        assert_eq!(
            problems("{{ lookup('{{ \"pipe\" }}') }}", ScanAs::Text),
            vec![]
        );
        assert_eq!(
            problems("{{ nosuch_fn(1) }}", ScanAs::Text),
            vec![(1, 4, "unknown function `nosuch_fn`".to_string())]
        );
        assert_eq!(
            problems("{{ x | community.general.json_query('a') }}", ScanAs::Text)[0].2,
            "unknown filter `community.general.json_query`"
        );
        // A collection's names are checked through the dispatcher's argument, and placed where
        // they are written (the rewrite moved them).
        assert_eq!(
            problems(
                "{{ a.b | default(1) }} {{ x | community.general.nope }}\n{{ 1 is x.y.t 2 }}",
                ScanAs::Text
            ),
            vec![
                (1, 31, "unknown filter `community.general.nope`".to_string()),
                (2, 9, "unknown test `x.y.t`".to_string())
            ]
        );
    }

    #[test]
    fn syntax_errors_point_into_the_text() {
        let p = problems(
            "#jinja2: trim_blocks: False\nok\n{% if x %}\n",
            ScanAs::File,
        );
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].2.starts_with("template syntax error"), "{p:?}");
        let p = problems("line\n{{ x | }}", ScanAs::Text);
        assert_eq!((p[0].0, p[0].2.contains("syntax")), (2, true), "{p:?}");
    }

    #[test]
    fn references_to_other_templates() {
        let s = Templar::new().scan(
            "{% include 'a.j2' %}\n{% import \"m.j2\" as m %}{% include 'b.j2' ignore missing %}\n{{ lookup('template', 'c.j2') }}",
            ScanAs::File,
        );
        let refs: Vec<(&str, usize, bool, bool)> = s
            .refs
            .iter()
            .map(|r| (r.name.as_str(), r.line, r.optional, r.lookup))
            .collect();
        assert_eq!(
            refs,
            vec![
                ("c.j2", 3, false, true),
                ("a.j2", 1, false, false),
                ("m.j2", 2, false, false),
                ("b.j2", 2, true, false),
            ]
        );
    }
}
