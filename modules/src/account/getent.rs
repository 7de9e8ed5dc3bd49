//! The `getent` module: one NSS database (or one key of it) as the fact `getent_<database>`,
//! read with the host's `getent` program. Never changes anything.
//!
//! Records are split as Ansible splits them (Python's `str.split`): on `:` for passwd, shadow,
//! group and gshadow, on runs of whitespace otherwise, or on the given `split` string. A key
//! that occurs on several lines maps to a list of records.

use crate::params::{de_opt_string, Bool};
use crate::service::{run, which};
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};

pub struct Getent;

fn yes() -> Bool {
    Bool(true)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub database: String,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub key: Option<String>,
    #[serde(default)]
    pub service: Option<String>,
    #[serde(default)]
    pub split: Option<String>,
    #[serde(default = "yes")]
    pub fail_key: Bool,
}

/// The databases whose fields are separated by `:`.
const COLON: &[&str] = &["passwd", "shadow", "group", "gshadow"];

/// Python's `line.split(sep)`: `None` splits on whitespace runs and drops the ends.
fn split_line<'a>(line: &'a str, sep: Option<&str>) -> Vec<&'a str> {
    match sep {
        None => line.split_whitespace().collect(),
        Some(s) => line.split(s).collect(),
    }
}

/// `getent`'s output as Ansible's fact: first field → the other fields (a list of those when
/// the first field repeats).
pub fn records(out: &str, sep: Option<&str>) -> Map<String, Value> {
    let mut tree = Map::new();
    let mut seen: std::collections::HashMap<String, usize> = Default::default();
    for line in out.lines() {
        let rec = split_line(line, sep);
        // An empty line splits on whitespace into nothing; Python would fail on `record[0]`.
        let Some((first, rest)) = rec.split_first() else {
            continue;
        };
        let rest = json!(rest);
        let n = seen.entry(first.to_string()).or_insert(0);
        *n += 1;
        match *n {
            1 => {
                tree.insert(first.to_string(), rest);
            }
            2 => {
                let prev = tree.remove(*first).unwrap_or(Value::Null);
                tree.insert(first.to_string(), json!([prev, rest]));
            }
            _ => {
                if let Some(Value::Array(a)) = tree.get_mut(*first) {
                    a.push(rest);
                }
            }
        }
    }
    tree
}

impl Module for Getent {
    type Params = Params;
    type State = (Map<String, Value>, Option<String>);
    type Action = std::convert::Infallible;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if p.database.trim().is_empty() {
            return Err(ModuleError::Params("`database` must not be empty".into()));
        }
        if p.split.as_deref() == Some("") {
            return Err(ModuleError::Params("`split` must not be empty".into()));
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Self::State, ModuleError> {
        let getent =
            which("getent").ok_or_else(|| ModuleError::failed("cannot find getent (libc-bin)"))?;
        let mut args: Vec<&str> = vec![&p.database];
        if let Some(k) = &p.key {
            args.push(k);
        }
        if let Some(s) = &p.service {
            args.extend(["-s", s]);
        }
        let ran = run(&getent, &args)?;
        let sep = p
            .split
            .as_deref()
            .or(COLON.contains(&p.database.as_str()).then_some(":"));
        let msg = match ran.rc {
            0 => return Ok((records(&ran.stdout, sep), None)),
            1 => "Missing arguments, or database unknown.",
            2 => "One or more supplied key could not be found in the database.",
            3 => "Enumeration not supported on this database.",
            _ => "Unexpected failure!",
        };
        if ran.rc == 2 && !p.fail_key.0 {
            let mut tree = Map::new();
            tree.insert(p.key.clone().unwrap_or_default(), Value::Null);
            return Ok((tree, Some(msg.to_string())));
        }
        Err(ModuleError::failed(msg))
    }

    fn plan(p: &Params, s: &Self::State, _ctx: &Ctx) -> Result<Plan<Self::Action>, ModuleError> {
        let mut plan = Plan::new();
        let mut facts = Map::new();
        facts.insert(format!("getent_{}", p.database), Value::Object(s.0.clone()));
        plan.result
            .insert("ansible_facts".into(), Value::Object(facts));
        plan.msg = s.1.clone();
        Ok(plan)
    }

    fn apply(
        _p: &Params,
        _s: Self::State,
        _plan: &Plan<Self::Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        Ok(Map::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_split_like_python_and_repeat_as_lists() {
        let t = records("root:x:0:0:root:/root:/bin/bash\n", Some(":"));
        assert_eq!(
            t["root"],
            json!(["x", "0", "0", "root", "/root", "/bin/bash"])
        );
        let t = records(
            "http  80/tcp www\nhttp 80/udp\nssh 22/tcp\nhttp 8/x\n",
            None,
        );
        assert_eq!(t["http"], json!([["80/tcp", "www"], ["80/udp"], ["8/x"]]));
        assert_eq!(t["ssh"], json!(["22/tcp"]));
    }
}
