//! Python-style regular expressions as playbooks write them (`regexp`, `insertafter`...),
//! compiled for Rust's `regex` crate, with a per-thread cache.

use crate::ModuleError;
use regex::bytes::Regex;

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
    Regex::new(&translated).map_err(|e| {
        let hint = if pattern.contains("(?=")
            || pattern.contains("(?!")
            || pattern.contains("(?<=")
            || pattern.contains("(?<!")
            || pattern.contains("(?P=")
        {
            " (look-around and back-references are not supported; rewrite the pattern without them)"
        } else {
            ""
        };
        ModuleError::Params(format!(
            "`{field}` is not a valid regular expression{hint}: {e}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_end_of_string_is_translated_and_look_around_is_explained() {
        let re = compile_regex("regexp", r"^a\Z").unwrap();
        assert!(re.is_match(b"a"));
        assert!(!re.is_match(b"a\n"));
        let err = compile_regex("regexp", "a(?=b)").unwrap_err().to_string();
        assert!(
            err.contains("`regexp` is not a valid regular expression"),
            "{err}"
        );
        assert!(err.contains("look-around"), "{err}");
    }
}
