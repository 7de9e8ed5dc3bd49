//! JSON lines for machines (`--json`): one object per event, with an `event` field naming it.

use super::{Stats, TaskEvent};
use fixpoint_modules::Diff;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

pub(super) fn play(name: &str, pass: u8) -> Value {
    json!({"event": "play", "name": name, "pass": pass})
}

pub(super) fn warning(msg: &str) -> Value {
    json!({"event": "warning", "msg": msg})
}

pub(super) fn error(msg: &str) -> Value {
    json!({"event": "error", "msg": msg})
}

pub(super) fn note(host: &str, msg: &str) -> Value {
    json!({"event": "note", "host": host, "msg": msg})
}

/// A task result; `msg`, `diff` and `result` are already censored for `no_log`, and the whole
/// result is only shown from `-v` on.
pub(super) fn task(
    ev: &TaskEvent,
    msg: Option<&str>,
    diff: Option<&Diff>,
    result: Option<&Map<String, Value>>,
    verbosity: u8,
) -> Value {
    let mut o = json!({
        "event": "task",
        "host": ev.host,
        "task": ev.task,
        "module": ev.module,
        "status": ev.status,
        "diff": diff.filter(|d| !d.is_empty()),
        "msg": msg,
        "location": ev.location,
    });
    if let Some(item) = ev.item {
        // As ansible-core: a `no_log` item's result has no label at all.
        o["item"] = if ev.censored {
            Value::Null
        } else {
            json!(item)
        };
    }
    if ev.ignored {
        o["ignored"] = json!(true);
    }
    if let Some(n) = ev.note {
        o["note"] = json!(n);
    }
    if let Some(d) = ev.delegated_to {
        o["delegated_to"] = json!(d);
    }
    if ev.python {
        o["engine"] = json!("python");
    }
    // Files changed outside fixpoint since it last wrote them: shown at any verbosity.
    if let Some(d) = result.and_then(|r| r.get("drift")) {
        o["drift"] = d.clone();
    }
    if verbosity > 0 {
        o["result"] = json!(result);
    }
    o
}

/// A drifted file no task of the run compared (`fixpoint drift`).
pub(super) fn drift_journal(host: &str, entry: &Value) -> Value {
    json!({"event": "drift", "host": host, "journal_only": true, "drift": entry})
}

pub(super) fn journal(host: &str, data: &Value) -> Value {
    json!({"event": "journal", "host": host, "data": data})
}

pub(super) fn recap(
    stats: &BTreeMap<String, Stats>,
    pass: u8,
    twice: bool,
    shard: Option<crate::inventory::Shard>,
) -> Value {
    let hosts: Map<String, Value> = stats.iter().map(|(h, s)| (h.clone(), json!(s))).collect();
    let mut o = json!({"event": "recap", "hosts": hosts});
    if twice {
        o["pass"] = json!(pass);
    }
    if let Some(s) = shard {
        o["shard"] = json!({"index": s.index, "count": s.count});
    }
    o
}

pub(super) fn not_converged(culprits: &[(String, String, String, Diff)]) -> Value {
    let list: Vec<Value> = culprits
        .iter()
        .map(|(host, task, loc, diff)| {
            json!({"host": host, "task": task, "location": loc, "diff": diff})
        })
        .collect();
    json!({"event": "not_converged", "tasks": list})
}
