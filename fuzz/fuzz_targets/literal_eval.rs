//! Fuzz target: the Python `literal_eval` reader of INI inventory values, as a `[g:vars]` value
//! and as a quoted inline host variable.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// Values are one line of an inventory; nesting depth, not length, is what could hurt.
const MAX_INPUT: usize = 16 * 1024;

fuzz_target!(|data: &[u8]| {
    if data.len() > MAX_INPUT {
        return;
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = fixpoint::inventory::parse_value(text);
    let _ = fixpoint::inventory::parse_inline_value(text, true);
});
