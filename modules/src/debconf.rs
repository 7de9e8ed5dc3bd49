//! `debconf`: one debconf answer of a package, read with `debconf-show` (passwords with
//! `debconf-get-selections`) and set with `debconf-set-selections`, compared as Ansible does.

use crate::apt::exec::{base_env, failure, run};
use crate::params::{de_opt_string, is_template, Bool};
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

pub struct Debconf;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(alias = "pkg", deserialize_with = "de_opt_string")]
    pub name: Option<String>,
    #[serde(default, alias = "selection", alias = "setting")]
    pub question: Option<String>,
    #[serde(default)]
    pub vtype: Option<String>,
    #[serde(default, alias = "answer")]
    pub value: Option<Value>,
    #[serde(default)]
    pub unseen: Bool,
}

const VTYPES: &[&str] = &[
    "boolean",
    "error",
    "multiselect",
    "note",
    "password",
    "seen",
    "select",
    "string",
    "text",
    "title",
];

/// The package's answers, and whether the asked one differs.
pub struct Probed {
    prev: BTreeMap<String, String>,
    changed: bool,
    /// The value as it will be written.
    value: String,
}

fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// Python's `str()` of a scalar (the raw `value` reaches debconf as text).
fn py_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Null => "None".into(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

impl Module for Debconf {
    type Params = Params;
    type State = Probed;
    type Action = ();

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if p.name.as_deref().unwrap_or_default().is_empty() {
            return Err(ModuleError::Params(
                "missing required arguments: `name` (`pkg`)".into(),
            ));
        }
        let given = [p.question.is_some(), p.vtype.is_some(), p.value.is_some()];
        if given.iter().any(|g| *g) && !given.iter().all(|g| *g) {
            return Err(ModuleError::Params(
                "parameters are required together: `question` (`selection`, `setting`), `vtype`, `value` (`answer`)".into(),
            ));
        }
        if let Some(t) = &p.vtype {
            if !is_template(t) && !VTYPES.contains(&t.as_str()) {
                return Err(ModuleError::Params(format!(
                    "value of vtype must be one of: {}, got: {t}",
                    VTYPES.join(", ")
                )));
            }
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Probed, ModuleError> {
        let pkg = p.name.clone().unwrap_or_default();
        let ran = run(&argv(&["debconf-show", &pkg]), &base_env(), None)?;
        if ran.rc != 0 {
            return Err(failure(ran.stderr.clone(), &ran));
        }
        let mut prev = BTreeMap::new();
        for line in ran.stdout.lines() {
            if let Some((k, v)) = line.split_once(':') {
                prev.insert(
                    k.trim().trim_start_matches('*').trim().to_string(),
                    v.trim().to_string(),
                );
            }
        }
        let (Some(q), Some(vtype), Some(raw)) = (&p.question, &p.vtype, &p.value) else {
            return Ok(Probed {
                prev,
                changed: false,
                value: String::new(),
            });
        };
        let (value, changed) = match prev.get(q) {
            None => (written(vtype, raw), true),
            Some(existing) => match (vtype.as_str(), raw) {
                ("boolean", v) => {
                    let v = py_str(v).to_lowercase();
                    (v.clone(), v != existing.to_lowercase())
                }
                ("multiselect", Value::Array(items)) => {
                    if let Some(e) = unsortable(items) {
                        return Err(invalid_multiselect(e));
                    }
                    let mut want: Vec<String> = items.iter().map(py_str).collect();
                    want.sort();
                    let mut have: Vec<String> =
                        existing.split(',').map(|s| s.trim().to_string()).collect();
                    have.sort();
                    (written(vtype, raw), want != have)
                }
                ("password", v) => {
                    let current = password(&pkg, q, vtype)?;
                    (py_str(v), py_str(v) != current)
                }
                (_, v) => {
                    // A list or mapping never equals debconf's text (as in Ansible).
                    let same = !matches!(v, Value::Array(_) | Value::Object(_))
                        && matches!(v, Value::String(_))
                        && py_str(v) == *existing;
                    (py_str(v), !same)
                }
            },
        };
        Ok(Probed {
            prev,
            changed,
            value,
        })
    }

    fn plan(p: &Params, st: &Probed, ctx: &Ctx) -> Result<Plan<()>, ModuleError> {
        let mut plan = Plan::new();
        plan.result.insert("msg".into(), json!(""));
        let Some(q) = p.question.as_ref().filter(|_| st.changed) else {
            plan.result.insert("current".into(), json!(st.prev));
            return Ok(plan);
        };
        plan.actions.push(());
        let shown = match (&p.vtype, &p.value) {
            (Some(t), Some(Value::Array(_))) if t == "multiselect" => {
                p.value.clone().unwrap_or_default()
            }
            (Some(t), Some(v)) if t == "boolean" => json!(py_str(v).to_lowercase()),
            (_, Some(v)) => v.clone(),
            _ => Value::Null,
        };
        let before = st.prev.get(q).cloned().unwrap_or_default();
        let previous = json!({ q.clone(): before });
        plan.result
            .insert("current".into(), json!({ q.clone(): shown }));
        plan.result.insert("previous".into(), previous.clone());
        if ctx.diff {
            plan.result.insert(
                "diff".into(),
                json!({"before": previous, "after": { q.clone(): shown }}),
            );
        }
        let pkg = p.name.clone().unwrap_or_default();
        let secret = p.vtype.as_deref() == Some("password");
        plan.diff.attr(
            format!("debconf:{pkg}"),
            q,
            if secret { "********".into() } else { before },
            if secret {
                "********".into()
            } else {
                st.value.clone()
            },
        );
        Ok(plan)
    }

    fn apply(p: &Params, st: Probed, _: &Plan<()>) -> Result<Map<String, Value>, ModuleError> {
        // Ansible joins a multiselect list with `", ".join`, which takes only strings.
        if let (Some("multiselect"), Some(Value::Array(items))) = (p.vtype.as_deref(), &p.value) {
            if let Some((i, v)) = items.iter().enumerate().find(|(_, v)| !v.is_string()) {
                return Err(invalid_multiselect(format!(
                    "sequence item {i}: expected str instance, {} found",
                    py_type(v)
                )));
            }
        }
        let mut a = argv(&["debconf-set-selections"]);
        if p.unseen.0 {
            a.push("-u".into());
        }
        let line = format!(
            "{} {} {} {}",
            p.name.as_deref().unwrap_or_default(),
            p.question.as_deref().unwrap_or_default(),
            p.vtype.as_deref().unwrap_or_default(),
            st.value
        );
        let ran = run(&a, &base_env(), Some(line.as_bytes()))?;
        if ran.rc != 0 {
            return Err(failure(ran.stderr.clone(), &ran));
        }
        let mut out = Map::new();
        out.insert("msg".into(), json!(ran.stdout));
        Ok(out)
    }
}

/// Ansible's failure for a multiselect list it cannot sort or join.
fn invalid_multiselect(why: String) -> ModuleError {
    ModuleError::failed(format!("Invalid value provided for 'multiselect': {why}"))
}

/// Python's type name of a JSON value.
fn py_type(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "str",
        Value::Bool(_) => "bool",
        Value::Null => "NoneType",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// Python's `TypeError` when `sorted()` meets items it cannot order with `<`: numbers (and
/// booleans) order among themselves, strings among themselves, lists among lists; `None` and
/// mappings never. Named as Python names the first failing comparison, a later item against
/// the first.
fn unsortable(items: &[Value]) -> Option<String> {
    fn class(v: &Value) -> Option<u8> {
        match v {
            Value::Number(_) | Value::Bool(_) => Some(0),
            Value::String(_) => Some(1),
            Value::Array(_) => Some(2),
            Value::Null | Value::Object(_) => None,
        }
    }
    let first = items.first()?;
    if items.len() < 2 {
        return None;
    }
    let other = items[1..]
        .iter()
        .find(|v| class(v).is_none() || class(v) != class(first))?;
    Some(format!(
        "'<' not supported between instances of '{}' and '{}'",
        py_type(other),
        py_type(first)
    ))
}

/// The text written for `value`: a multiselect list joined with ", ", booleans lower-cased.
fn written(vtype: &str, v: &Value) -> String {
    match (vtype, v) {
        ("multiselect", Value::Array(items)) => {
            items.iter().map(py_str).collect::<Vec<_>>().join(", ")
        }
        ("boolean", v) => py_str(v).to_lowercase(),
        (_, v) => py_str(v),
    }
}

/// A password answer: only `debconf-get-selections` (package debconf-utils) shows it.
fn password(pkg: &str, question: &str, vtype: &str) -> Result<String, ModuleError> {
    let ran = run(&argv(&["debconf-get-selections"]), &base_env(), None).map_err(|_| {
        ModuleError::failed(
            "reading a password answer needs debconf-get-selections: install debconf-utils",
        )
    })?;
    if ran.rc != 0 {
        return Err(failure(
            format!(
                "Failed to get the value '{question}' from '{pkg}': {}",
                ran.stderr
            ),
            &ran,
        ));
    }
    for line in ran.stdout.lines().filter(|l| l.starts_with(pkg)) {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() <= 3 {
            return Ok(String::new());
        }
        if f[1] == question && f[2] == vtype {
            return Ok(f[3].to_string());
        }
    }
    Ok(String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_python_cannot_sort_is_named_as_python_does() {
        let mixed = [json!("group"), json!(1), json!("passwd")];
        assert_eq!(
            unsortable(&mixed).as_deref(),
            Some("'<' not supported between instances of 'int' and 'str'")
        );
        assert_eq!(unsortable(&[json!(2), json!(1.5), json!(true)]), None);
        assert_eq!(unsortable(&[json!("a"), json!("b")]), None);
        assert!(unsortable(&[json!(null), json!(null)]).is_some());
        assert_eq!(unsortable(&[json!(null)]), None);
    }
}
