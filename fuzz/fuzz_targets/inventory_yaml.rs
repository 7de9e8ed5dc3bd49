//! Fuzz target: the YAML inventory reader (`group: {hosts, vars, children}`), through the YAML
//! loader, then the group finalisation that `Inventory::load` does.
#![no_main]

use fixpoint::inventory::Inventory;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

/// Host ranges (`web[1:9999]`) multiply; the input bound keeps each run short, not safe.
const MAX_INPUT: usize = 16 * 1024;

fuzz_target!(|data: &[u8]| {
    if data.len() > MAX_INPUT {
        return;
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(inv) = Inventory::parse_text(Path::new("hosts.yml"), text, true) {
        for (_, hosts) in inv.groups_map() {
            for h in hosts {
                let _ = inv.host_vars(&h);
            }
        }
    }
});
