//! Fuzz target: `k=v k2="a b"` free-form task arguments (also `-e k=v`).
#![no_main]

use fixpoint::diag::Pos;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

const MAX_INPUT: usize = 16 * 1024;

fuzz_target!(|data: &[u8]| {
    if data.len() > MAX_INPUT {
        return;
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = fixpoint::playbook::parse_kv(text, &Pos::file_only(Path::new("fuzz.yml")));
});
