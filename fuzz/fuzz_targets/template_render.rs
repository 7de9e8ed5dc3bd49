//! Fuzz target: rendering an arbitrary string as a template (and as a bare expression, and as
//! a template file) with a fixed context. Errors are fine; panics, hangs and runaway memory are
//! not. The engine is `Templar::untrusted`: no lookups (they run commands and read files) and
//! a fuel bound, so a loop of loops ends with an error instead of running for hours.
#![no_main]

use fixpoint::template::Templar;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

/// Templates are short; the bound keeps each run fast and repetition-heavy inputs small.
const MAX_INPUT: usize = 4 * 1024;
/// minijinja instructions per render: far above what any seed needs, far below a hang.
const FUEL: u64 = 50_000;

fn engine() -> &'static (Templar, minijinja::Value) {
    static ENGINE: OnceLock<(Templar, minijinja::Value)> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let ctx = serde_json::json!({
            "port": 8080,
            "name": "web1",
            "text": "a {{ b }} c",
            "users": [{"name": "alice", "uid": 1000}, {"name": "bob", "groups": ["wheel"]}],
            "conf": {"a": {"b": [1, 2, {"c": null}]}, "flag": true, "ratio": 0.5},
            "inventory_hostname": "web1",
            "groups": {"all": ["web1", "db1"], "web": ["web1"]},
            "omit": "__omit_place_holder__",
            "empty": "",
            "nums": [3, 1, 2],
        });
        (Templar::untrusted(FUEL), minijinja::Value::from_serialize(&ctx))
    })
}

fuzz_target!(|data: &[u8]| {
    if data.len() > MAX_INPUT {
        return;
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (templar, ctx) = engine();
    let _ = templar.render_str(text, ctx);
    let _ = templar.eval(text, ctx);
    let _ = templar.render_file("fuzz.j2", text, ctx);
});
