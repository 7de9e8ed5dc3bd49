//! Python-style regular expressions as playbooks write them (`regexp`, `insertafter`...),
//! compiled for Rust's `regex` crate, with a per-thread cache. A pattern that crate refuses
//! because it uses Python's look-around or back-references (`^(REF) .* \1$`) is compiled by
//! `fancy-regex` instead, which matches text: a file that is not UTF-8 never matches it.

use crate::ModuleError;
use std::sync::Arc;

/// A compiled pattern: `regex`'s (bytes, linear time) or, for what only backtracking can do,
/// `fancy-regex`'s (text). Its methods mirror `regex::bytes::Regex`.
#[derive(Clone, Debug)]
pub(crate) enum Regex {
    Bytes(regex::bytes::Regex),
    Fancy(Arc<fancy_regex::Regex>),
}

/// One match: where it is in the searched bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Match<'t> {
    text: &'t [u8],
    start: usize,
    end: usize,
}

impl<'t> Match<'t> {
    pub(crate) fn start(&self) -> usize {
        self.start
    }
    pub(crate) fn end(&self) -> usize {
        self.end
    }
    pub(crate) fn as_bytes(&self) -> &'t [u8] {
        &self.text[self.start..self.end]
    }
}

/// The groups of one match, by number (0: the whole match) and by name.
#[derive(Clone, Debug)]
pub(crate) struct Captures<'t> {
    text: &'t [u8],
    groups: Vec<Option<(usize, usize)>>,
    names: Vec<Option<String>>,
}

impl<'t> Captures<'t> {
    pub(crate) fn get(&self, i: usize) -> Option<Match<'t>> {
        self.groups
            .get(i)
            .copied()
            .flatten()
            .map(|(start, end)| Match {
                text: self.text,
                start,
                end,
            })
    }
    pub(crate) fn name(&self, name: &str) -> Option<Match<'t>> {
        let i = self.names.iter().position(|n| n.as_deref() == Some(name))?;
        self.get(i)
    }
    pub(crate) fn len(&self) -> usize {
        self.groups.len()
    }
}

impl Regex {
    /// Compile a pattern as [`compile_regex`] does, without the cache or a field name.
    #[cfg(test)]
    pub(crate) fn new(pattern: &str) -> Result<Regex, String> {
        compile_regex_uncached("pattern", pattern).map_err(|e| e.to_string())
    }

    fn names(&self) -> Vec<Option<String>> {
        match self {
            Regex::Bytes(r) => r.capture_names().map(|n| n.map(str::to_string)).collect(),
            Regex::Fancy(r) => r.capture_names().map(|n| n.map(str::to_string)).collect(),
        }
    }

    pub(crate) fn captures_len(&self) -> usize {
        match self {
            Regex::Bytes(r) => r.captures_len(),
            Regex::Fancy(r) => r.captures_len(),
        }
    }

    pub(crate) fn capture_names(&self) -> impl Iterator<Item = Option<String>> {
        self.names().into_iter()
    }

    pub(crate) fn is_match(&self, text: &[u8]) -> bool {
        self.find(text).is_some()
    }

    pub(crate) fn find<'t>(&self, text: &'t [u8]) -> Option<Match<'t>> {
        match self {
            Regex::Bytes(r) => r.find(text).map(|m| Match {
                text,
                start: m.start(),
                end: m.end(),
            }),
            // A backtracking limit reached counts as no match.
            Regex::Fancy(r) => {
                let s = std::str::from_utf8(text).ok()?;
                let m = r.find(s).ok()??;
                Some(Match {
                    text,
                    start: m.start(),
                    end: m.end(),
                })
            }
        }
    }

    pub(crate) fn captures<'t>(&self, text: &'t [u8]) -> Option<Captures<'t>> {
        self.captures_iter(text).into_iter().next()
    }

    /// Every non-overlapping match, left to right, with its groups.
    pub(crate) fn captures_iter<'t>(&self, text: &'t [u8]) -> Vec<Captures<'t>> {
        let names = self.names();
        match self {
            Regex::Bytes(r) => r
                .captures_iter(text)
                .map(|c| Captures {
                    text,
                    groups: (0..c.len())
                        .map(|i| c.get(i).map(|m| (m.start(), m.end())))
                        .collect(),
                    names: names.clone(),
                })
                .collect(),
            Regex::Fancy(r) => {
                let Ok(s) = std::str::from_utf8(text) else {
                    return Vec::new();
                };
                r.captures_iter(s)
                    .map_while(Result::ok)
                    .map(|c| Captures {
                        text,
                        groups: (0..c.len())
                            .map(|i| c.get(i).map(|m| (m.start(), m.end())))
                            .collect(),
                        names: names.clone(),
                    })
                    .collect()
            }
        }
    }
}

/// Compile a Python-style regular expression (as playbooks write them) for matching lines.
/// `\Z` is Python's end-of-string, spelled `\z` in Rust; look-around and back-references
/// have no Rust equivalent and are reported as such.
pub(crate) fn compile_regex(field: &str, pattern: &str) -> Result<Regex, ModuleError> {
    // The same pattern is compiled by validate, probe and plan, on the controller and in the
    // agent, once per task: keep what was compiled (a Regex clone shares its program).
    thread_local! {
        static CACHE: std::cell::RefCell<std::collections::HashMap<String, Regex>> =
            std::cell::RefCell::new(std::collections::HashMap::new());
    }
    if let Some(re) = CACHE.with(|c| c.borrow().get(pattern).cloned()) {
        return Ok(re);
    }
    let re = compile_regex_uncached(field, pattern)?;
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        // Bounded: a playbook has few distinct patterns, a templated one could have many.
        if c.len() > 256 {
            c.clear();
        }
        c.insert(pattern.to_string(), re.clone());
    });
    Ok(re)
}

fn compile_regex_uncached(field: &str, pattern: &str) -> Result<Regex, ModuleError> {
    let mut translated = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('Z') => translated.push_str("\\z"),
                Some(n) => {
                    translated.push('\\');
                    translated.push(n);
                }
                None => translated.push('\\'),
            }
        } else {
            translated.push(c);
        }
    }
    let std_err = match regex::bytes::Regex::new(&translated) {
        Ok(re) => return Ok(Regex::Bytes(re)),
        Err(e) => e,
    };
    // Python's look-around and back-references: a backtracking engine (`\z` as translated
    // above is the end of the text there too).
    match fancy_regex::Regex::new(&translated) {
        Ok(re) => Ok(Regex::Fancy(Arc::new(re))),
        Err(_) => Err(ModuleError::Params(format!(
            "`{field}` is not a valid regular expression: {std_err}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_end_of_string_is_translated_and_look_around_is_explained() {
        let re = compile_regex("regexp", r"^a\Z").unwrap();
        assert!(re.is_match(b"a"));
        assert!(!re.is_match(b"a\n"));
        let err = compile_regex("regexp", "(a").unwrap_err().to_string();
        assert!(
            err.contains("`regexp` is not a valid regular expression"),
            "{err}"
        );
    }

    /// Ansible's lineinfile target: `^(REF) .* \1$`; look-around too, as Python's `re`.
    #[test]
    fn back_references_and_look_around_take_the_backtracking_engine() {
        let re = compile_regex("regexp", r"^(REF) .* \1$").unwrap();
        assert!(matches!(re, Regex::Fancy(_)));
        assert!(re.is_match(b"REF middle REF"));
        assert!(!re.is_match(b"REF middle FER"));
        let caps = re.captures(b"REF x REF").unwrap();
        assert_eq!(caps.get(1).unwrap().as_bytes(), b"REF");
        let re = compile_regex("regexp", r"a(?=b)").unwrap();
        assert_eq!(re.find(b"acab").map(|m| m.start()), Some(2));
        assert!(!re.is_match(b"a\xff"), "not UTF-8: no match");
        let re = compile_regex("regexp", r"(?P<x>a)(?!c)\Z").unwrap();
        assert!(re.is_match(b"ba") && !re.is_match(b"ba\n"));
        assert_eq!(re.captures_iter(b"ba").len(), 1);
        assert!(matches!(
            compile_regex("regexp", "^a+$").unwrap(),
            Regex::Bytes(_)
        ));
    }
}
