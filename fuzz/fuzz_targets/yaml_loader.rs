//! Fuzz target: the YAML loader every playbook, inventory and vars file goes through.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

/// Larger inputs only make each run slower: the parser's paths are all reached well below this.
const MAX_INPUT: usize = 64 * 1024;

fuzz_target!(|data: &[u8]| {
    if data.len() > MAX_INPUT {
        return;
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Errors are expected; panics, hangs and unbounded memory are the bugs.
    let _ = fixpoint::yaml::parse_str(text, Path::new("fuzz.yml"));
});
