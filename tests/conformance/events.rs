//! The JSON lines of both tools read into one shape, [`Outcome`]: per host, the task results in
//! order (a loop task with its items), the debug output, the recap and the exit status.
//!
//! ansible-core's lines come from our callback (`callback/fixpoint_events.py`): an `item` line
//! per loop item, then a `task` line with the loop's overall status. fixpoint prints one `task`
//! line per item (with `item`) and no overall line, so its consecutive item lines of one task
//! are grouped here and the overall status is derived the way Ansible derives it.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::tools::Tool;

#[derive(Debug, Clone, PartialEq)]
pub struct ItemRecord {
    pub label: String,
    pub status: String,
    pub ignored: bool,
    pub debug: Option<Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    pub name: String,
    pub status: String,
    pub ignored: bool,
    /// `Some` for a task with a loop (possibly empty), `None` otherwise.
    pub items: Option<Vec<ItemRecord>>,
    /// What a `debug` task printed (`msg`, or the variable of `var`), when it ran.
    pub debug: Option<Value>,
    /// The task is an `include_role` itself (its name `include_role : r` is no role prefix).
    pub include_role: bool,
}

#[derive(Debug, Default, Clone)]
pub struct Outcome {
    pub hosts: BTreeMap<String, Vec<TaskRecord>>,
    /// host -> counter -> value, from the last recap line.
    pub recap: Option<BTreeMap<String, BTreeMap<String, i64>>>,
    /// In fixpoint's terms: 0 success, 1 a host failed or was unreachable, 2 invalid input.
    pub exit: Option<i32>,
    /// The final tree under `base` (see `tree.rs`).
    pub tree: Vec<String>,
    /// `host / task: message` of each failed result: not compared (the tools word errors
    /// differently), shown when a case fails.
    pub failures: Vec<String>,
}

/// Reads one tool's stdout. Lines that are not JSON objects (none are expected) are ignored.
pub fn parse(tool: Tool, stdout: &str) -> Result<Outcome, String> {
    let mut out = Outcome::default();
    // ansible-core: items seen for each host, waiting for their task line.
    let mut pending_items: BTreeMap<String, Vec<ItemRecord>> = BTreeMap::new();
    // fixpoint: the location of the loop task each host's last record belongs to.
    let mut open_loop: BTreeMap<String, String> = BTreeMap::new();
    for line in stdout.lines().filter(|l| l.starts_with('{')) {
        let ev: Value = serde_json::from_str(&python_floats_marked(line))
            .map_err(|e| format!("{}: bad JSON line ({e}): {line}", tool.name()))?;
        let kind = ev["event"].as_str().unwrap_or("");
        if ev["status"] == "failed" {
            let msg = ev["msg"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| ev["msg"].to_string());
            out.failures.push(format!(
                "{} / {}: {msg}",
                text(&ev["host"]),
                text(&ev["task"])
            ));
        }
        match (tool, kind) {
            (_, "recap") => out.recap = Some(read_recap(&ev["hosts"])),
            (Tool::Ansible, "item") => {
                let host = text(&ev["host"]);
                pending_items
                    .entry(host)
                    .or_default()
                    .push(item_record(&ev));
            }
            (Tool::Ansible, "task") => {
                let host = text(&ev["host"]);
                let mut rec = task_record(&ev);
                let items = pending_items.remove(&host).unwrap_or_default();
                // A loop's own line carries `results` (an empty loop too); its items, if any,
                // came just before it.
                if ev["result"].get("results").is_some() {
                    rec.debug = None;
                    rec.items = Some(items);
                }
                out.hosts.entry(host).or_default().push(rec);
            }
            (Tool::Fixpoint, "task") => {
                let host = text(&ev["host"]);
                let tasks = out.hosts.entry(host.clone()).or_default();
                let location = text(&ev["location"]);
                if ev.get("item").is_none() {
                    open_loop.remove(&host);
                    tasks.push(task_record(&ev));
                    continue;
                }
                let item = item_record(&ev);
                let same_loop = open_loop.get(&host) == Some(&location);
                match tasks.last_mut() {
                    Some(last) if same_loop => {
                        last.items.get_or_insert_with(Vec::new).push(item);
                        summarise_loop(last);
                    }
                    _ => {
                        let mut rec = task_record(&ev);
                        rec.debug = None;
                        rec.items = Some(vec![item]);
                        summarise_loop(&mut rec);
                        tasks.push(rec);
                        open_loop.insert(host, location);
                    }
                }
            }
            _ => {}
        }
    }
    // Ansible's callback hears of an ignored failure on the task only, never on an item, so
    // an item's flag (already summed up into its task's) is not compared; and it hears of an
    // unreachable item as of a failed one.
    for i in out
        .hosts
        .values_mut()
        .flatten()
        .flat_map(|t| t.items.iter_mut().flatten())
    {
        i.ignored = false;
        if i.status == "unreachable" {
            i.status = "failed".into();
        }
    }
    Ok(out)
}

/// Drops the `role : ` prefix from task names (see `deviations::What::RolePrefix`); whether
/// any name had one.
pub fn strip_role_prefix(o: &mut Outcome) -> bool {
    let mut any = false;
    for t in o.hosts.values_mut().flatten() {
        if let Some((_, name)) = t.name.split_once(" : ") {
            // `include_role : r` is the include's own name (both tools say it), not a role
            // task (a role may be named `include_role` too).
            if t.include_role {
                continue;
            }
            t.name = name.to_string();
            any = true;
        }
    }
    any
}

/// fixpoint's loop status from its items, as Ansible decides it: failed if any item failed,
/// else changed if any changed, else skipped if every item was skipped, else ok.
fn summarise_loop(rec: &mut TaskRecord) {
    let items = rec.items.as_deref().unwrap_or(&[]);
    let any = |s: &str| items.iter().any(|i| i.status == s);
    rec.status = if any("failed") {
        "failed"
    } else if any("changed") {
        "changed"
    } else if any("unreachable") {
        "unreachable"
    } else if !items.is_empty() && items.iter().all(|i| i.status == "skipped") {
        "skipped"
    } else {
        "ok"
    }
    .to_string();
    // Ignored only when every failed item ignored its failure (each item has its own
    // `ignore_errors` when a template of the item gives it).
    let mut failed = items.iter().filter(|i| i.status == "failed").peekable();
    rec.ignored = failed.peek().is_some() && failed.all(|i| i.ignored);
}

fn task_record(ev: &Value) -> TaskRecord {
    let status = text(&ev["status"]);
    TaskRecord {
        name: text(&ev["task"]),
        debug: debug_output(ev, &status),
        // ansible-core's callback hears whether a failure was ignored, not an unreachable
        // host (it prints `...ignoring` for both).
        ignored: status == "failed" && ev["ignored"].as_bool().unwrap_or(false),
        status,
        items: None,
        include_role: short_module(ev) == "include_role",
    }
}

fn item_record(ev: &Value) -> ItemRecord {
    let status = text(&ev["status"]);
    ItemRecord {
        label: label(&ev["item"]),
        debug: debug_output(ev, &status),
        status,
        ignored: ev["ignored"].as_bool().unwrap_or(false),
    }
}

/// The module name without its collection (`ansible.builtin.debug` is `debug`).
fn short_module(ev: &Value) -> String {
    let full = ev["action"]
        .as_str()
        .or(ev["module"].as_str())
        .unwrap_or("");
    full.rsplit('.').next().unwrap_or(full).to_string()
}

/// Result keys that are bookkeeping rather than what `debug` printed.
const NOT_PRINTED: &[&str] = &[
    "changed",
    "failed",
    "skipped",
    "skip_reason",
    "skipped_reason",
    "false_condition",
    "item",
    "ansible_loop_var",
    "ansible_index_var",
    "ansible_loop",
    "invocation",
];

/// What a `debug` task printed: its result without bookkeeping keys. Only for a debug that ran
/// (a failed one's message is an error text, which the tools word differently).
fn debug_output(ev: &Value, status: &str) -> Option<Value> {
    if short_module(ev) != "debug" || !matches!(status, "ok" | "changed") {
        return None;
    }
    let Some(result) = ev["result"].as_object() else {
        // fixpoint hides a `no_log` result entirely and says why in `msg`; Ansible's result is
        // `{"censored": <the same words>}`.
        return ev["msg"]
            .as_str()
            .filter(|m| m.contains("'no_log: true'"))
            .map(|m| serde_json::json!({ "censored": m }));
    };
    // Ansible's item result also carries the loop and index variables under their own names.
    let loop_vars: Vec<&str> = ["ansible_loop_var", "ansible_index_var"]
        .iter()
        .filter_map(|k| result.get(*k).and_then(Value::as_str))
        .collect();
    let printed: Map<String, Value> = result
        .iter()
        .filter(|(k, _)| !k.starts_with("_ansible") && !NOT_PRINTED.contains(&k.as_str()))
        .filter(|(k, _)| !loop_vars.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), without_drift(v)))
        .collect();
    Some(Value::Object(printed))
}

/// `v` without fixpoint's own `drift` entries (a registered result's report of a file changed
/// outside fixpoint since it last wrote it): Ansible has no such thing to print.
fn without_drift(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, d)| !(*k == "drift" && d.get("since_run").is_some()))
                .map(|(k, v)| (k.clone(), without_drift(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_drift).collect()),
        other => other.clone(),
    }
}

/// A JSON line with Python's non-finite floats (`Infinity`, `-Infinity`, `NaN`, which
/// ansible-core's `json.dumps` writes and JSON has not) written as fixpoint's `--format json`
/// writes them, `{"__fixpoint_float": "inf"}`, so both read alike. Strings are left as they are.
pub fn python_floats_marked(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let (mut in_string, mut escaped) = (false, false);
    let mut rest = line;
    while let Some(c) = rest.chars().next() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
        } else {
            let found = [("-Infinity", "-inf"), ("Infinity", "inf"), ("NaN", "nan")]
                .into_iter()
                .find(|(py, _)| rest.starts_with(py));
            if let Some((py, name)) = found {
                out.push_str(&format!("{{\"__fixpoint_float\": \"{name}\"}}"));
                rest = &rest[py.len()..];
                continue;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// An item's label as both tools show it: a string as it is, anything else as compact JSON
/// (fixpoint renders `loop_control.label` to text, Ansible keeps the rendered value's type).
pub fn label(v: &Value) -> String {
    match v {
        // fixpoint gives a structured item as JSON text, its keys in the order they were
        // written; compared with the keys sorted, as Ansible's structured label is.
        Value::String(s) if s.starts_with(['[', '{']) => match serde_json::from_str::<Value>(s) {
            Ok(parsed @ (Value::Array(_) | Value::Object(_))) => canonical(&parsed),
            _ => s.clone(),
        },
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        // A non-finite float (`python_floats_marked`) as Python's str() gives it.
        Value::Object(m) if m.len() == 1 && m.contains_key("__fixpoint_float") => {
            text(&m["__fixpoint_float"])
        }
        other => canonical(other),
    }
}

/// Compact JSON with object keys sorted, so that the two tools' key orders never differ.
pub fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", Value::String((*k).clone()), canonical(&m[*k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

fn read_recap(hosts: &Value) -> BTreeMap<String, BTreeMap<String, i64>> {
    let mut recap = BTreeMap::new();
    for (host, counts) in hosts.as_object().into_iter().flatten() {
        let counts = counts
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.as_i64().unwrap_or(-1)))
            .collect();
        recap.insert(host.clone(), counts);
    }
    recap
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or("").to_string()
}

/// ansible-playbook's exit status in fixpoint's terms. Ansible exits 2 when a host failed, 4
/// when one was unreachable and 8 when a play broke off; fixpoint says 1 for all of them.
/// Before the run starts (bad YAML, unknown keywords, bad options), Ansible exits 1, 4 or 5
/// and prints no recap; fixpoint exits 2 for invalid input.
pub fn ansible_exit(code: Option<i32>, recap_seen: bool) -> Option<i32> {
    match (code?, recap_seen) {
        (0, _) => Some(0),
        (_, true) => Some(1),
        (_, false) => Some(2),
    }
}

#[test]
fn both_tools_loop_lines_give_the_same_records() {
    // Lines as the two tools print them for `debug: msg={{ item }}` over [a, b] with `when: item != 'b'`.
    let ansible = r#"{"action": "debug", "event": "item", "host": "h", "item": "a", "msg": "a", "result": {"ansible_loop_var": "item", "changed": false, "item": "a", "msg": "a"}, "status": "ok", "task": "loop"}
{"action": "debug", "event": "item", "host": "h", "item": "b", "msg": null, "result": {"ansible_loop_var": "item", "changed": false, "item": "b", "skip_reason": "Conditional result was False"}, "status": "skipped", "task": "loop"}
{"action": "debug", "event": "task", "host": "h", "msg": "All items completed", "result": {"changed": false, "msg": "All items completed", "results": []}, "status": "ok", "task": "loop"}
{"action": "fail", "event": "task", "host": "h", "ignored": true, "msg": "boom", "result": {"msg": "boom"}, "status": "failed", "task": "f"}
{"event": "recap", "hosts": {"h": {"changed": 0, "failed": 0, "ignored": 1, "ok": 2, "rescued": 0, "skipped": 0, "unreachable": 0}}}"#;
    let fixpoint = r#"{"event":"play","name":"all","pass":1}
{"diff":null,"event":"task","host":"h","item":"a","location":"p.yml:3:7","module":"debug","msg":null,"result":{"changed":false,"failed":false,"msg":"a"},"status":"ok","task":"loop"}
{"diff":null,"event":"task","host":"h","item":"b","location":"p.yml:3:7","module":"debug","msg":null,"result":{},"status":"skipped","task":"loop"}
{"diff":null,"event":"task","host":"h","ignored":true,"location":"p.yml:6:7","module":"fail","msg":"boom (task \"f\" at p.yml:6:7)","result":{"failed":true,"msg":"boom"},"status":"failed","task":"f"}
{"event":"recap","hosts":{"h":{"changed":0,"failed":0,"ignored":1,"ok":2,"rescued":0,"skipped":0,"unreachable":0}}}"#;
    let a = parse(Tool::Ansible, ansible).unwrap();
    let f = parse(Tool::Fixpoint, fixpoint).unwrap();
    assert_eq!(a.hosts, f.hosts);
    assert_eq!(a.recap, f.recap);
    let tasks = &a.hosts["h"];
    assert_eq!((tasks[0].status.as_str(), tasks[0].ignored), ("ok", false));
    let items = tasks[0].items.as_ref().unwrap();
    assert_eq!(items[0].debug, Some(serde_json::json!({"msg": "a"})));
    assert_eq!(
        (items[1].status.as_str(), items[1].debug.as_ref()),
        ("skipped", None)
    );
    assert_eq!(
        (tasks[1].status.as_str(), tasks[1].ignored),
        ("failed", true)
    );
    assert_eq!(a.failures, ["h / f: boom"]);
}

#[test]
fn a_loop_is_failed_if_an_item_failed_and_skipped_only_if_all_were() {
    let line = |item: &str, status: &str| {
        format!(
            r#"{{"event":"task","host":"h","item":"{item}","location":"p:1","module":"command","status":"{status}","task":"t"}}"#
        )
    };
    let run = |lines: &[String]| {
        parse(Tool::Fixpoint, &lines.join("\n")).unwrap().hosts["h"][0]
            .status
            .clone()
    };
    assert_eq!(
        run(&[line("a", "skipped"), line("b", "skipped")]),
        "skipped"
    );
    assert_eq!(run(&[line("a", "skipped"), line("b", "ok")]), "ok");
    assert_eq!(run(&[line("a", "changed"), line("b", "failed")]), "failed");
    assert_eq!(run(&[line("a", "ok"), line("b", "changed")]), "changed");
}

#[test]
fn a_registered_drift_is_not_what_debug_printed() {
    let fixpoint = r#"{"diff":null,"event":"task","host":"h","location":"p.yml:3:7","module":"debug","msg":null,"result":{"changed":false,"r":{"changed":true,"dest":"/x","drift":{"since_run":"r1","at":"t","what":["content"],"path":"/x"}},"drift":"a variable"},"status":"ok","task":"show"}"#;
    let f = parse(Tool::Fixpoint, fixpoint).unwrap();
    assert_eq!(
        f.hosts["h"][0].debug,
        Some(serde_json::json!({"r": {"changed": true, "dest": "/x"}, "drift": "a variable"}))
    );
}

#[test]
fn python_non_finite_floats_read_as_fixpoint_marks_them() {
    let line = r#"{"msg": [Infinity, -Infinity, NaN, "NaN \" Infinity"]}"#;
    let v: Value = serde_json::from_str(&python_floats_marked(line)).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"msg": [{"__fixpoint_float": "inf"}, {"__fixpoint_float": "-inf"},
            {"__fixpoint_float": "nan"}, "NaN \" Infinity"]})
    );
}
