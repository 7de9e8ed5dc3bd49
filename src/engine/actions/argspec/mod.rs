//! `validate_argument_spec`: checks values against an argument spec as ansible-core's
//! `ArgumentSpecValidator` does (aliases, unsupported names, defaults, required, types with
//! their conversions, `elements`, choices, nested `options` with their `mutually_exclusive`,
//! `required_*` rules), with its messages in its order. The loader puts one such task in front
//! of a role whose `meta/argument_specs.yml` has a spec for the entry point (`roles::`).
//!
//! The values are only checked: what the conversions make of them is not handed back, as in
//! ansible-core (a role still sees `"7"` where its spec says `int`).

mod types;

use super::prepare::Failure;
use crate::vars::Scope;
use fixpoint_modules::Outcome;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use types::{class_name, convert, is_false_word, is_true_word, py_eq, text, truthy, type_name};

/// Runs the action: the spec's names that are variables, rendered, under the
/// `provided_arguments` (a role entry's parameters), checked against `argument_spec`.
pub(super) fn run(params: &Value, scope: &Arc<Scope>) -> Result<Outcome, Failure> {
    let context = params
        .get("validate_args_context")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let spec = match params.get("argument_spec") {
        Some(Value::Object(spec)) => spec,
        Some(other) => {
            return Err(Failure::msg(format!(
                "Incorrect type for argument_spec, expected dict and got <class '{}'>",
                type_name(other)
            )))
        }
        None => return Err(Failure::msg("\"argument_spec\" arg is required in args")),
    };
    let provided = match params.get("provided_arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p.clone(),
        Some(other) => {
            return Err(Failure::msg(format!(
                "Incorrect type for provided_arguments, expected dict and got <class '{}'>",
                type_name(other)
            )))
        }
    };
    if let Some((name, _)) = spec.iter().find(|(_, o)| !o.is_object()) {
        return Err(Failure::msg(format!(
            "the argument spec of `{name}` must be a mapping (of `type`, `required`, ...)"
        )));
    }
    let mut values = Map::new();
    for name in spec.keys() {
        if scope.defines(name) {
            let v = scope.eval(name).map_err(Failure::msg)?;
            values.insert(name.clone(), v);
        }
    }
    values.extend(provided);
    let errors = validate(spec, values);
    if errors.is_empty() {
        let mut result = Map::new();
        result.insert("msg".into(), json!("The arg spec validation passed"));
        result.insert("validate_args_context".into(), context);
        return Ok(Outcome {
            changed: false,
            result,
            ..Outcome::default()
        });
    }
    let mut result = Map::new();
    result.insert("argument_errors".into(), json!(errors));
    result.insert("argument_spec_data".into(), Value::Object(spec.clone()));
    result.insert("validate_args_context".into(), context);
    Err(Failure {
        msg: format!("Validation of arguments failed:\n{}", errors.join("\n")),
        result,
    })
}

/// The names found where no spec has them: each with the list of supported names its spec
/// gives (the message names the last one's, as ansible-core's does).
#[derive(Default)]
struct Unsupported {
    names: Vec<String>,
    supported: String,
}

/// The error messages of checking `values` against `spec`, in ansible-core's order.
fn validate(spec: &Map<String, Value>, mut values: Map<String, Value>) -> Vec<String> {
    let mut errors = Vec::new();
    let mut unsupported = Unsupported::default();
    let aliases = aliases(spec, &mut values, &mut errors);
    if let Err(e) = no_log_walk(spec, &values) {
        errors.push(e);
    }
    find_unsupported(spec, &values, &aliases, &[], &mut unsupported);
    set_defaults(spec, &mut values, false);
    required(spec, &values, &[], &mut errors);
    check_types(spec, &mut values, &[], &mut errors);
    check_choices(spec, &mut values, &[], &mut errors);
    set_defaults(spec, &mut values, true);
    sub_specs(
        spec,
        &mut values,
        &mut Vec::new(),
        &mut errors,
        &mut unsupported,
    );
    if !unsupported.names.is_empty() {
        let mut names = unsupported.names;
        names.sort();
        names.dedup();
        errors.push(format!(
            "{}. Supported parameters include: {}.",
            names.join(", "),
            unsupported.supported
        ));
    }
    errors
}

/// ` found in a -> b`: where a nested option is.
fn found_in(ctx: &[String]) -> String {
    if ctx.is_empty() {
        String::new()
    } else {
        format!(" found in {}", ctx.join(" -> "))
    }
}

fn spec_str<'a>(opts: &'a Value, key: &str) -> Option<&'a str> {
    opts.get(key).and_then(Value::as_str)
}

/// Copies each alias's value to its option; the alias → option map.
fn aliases(
    spec: &Map<String, Value>,
    values: &mut Map<String, Value>,
    errors: &mut Vec<String>,
) -> Map<String, Value> {
    let mut map = Map::new();
    for (name, opts) in spec {
        let has_default = opts.get("default").is_some_and(|d| !d.is_null());
        if has_default && truthy(opts.get("required")) {
            errors.push(format!(
                "internal error: required and default are mutually exclusive for {name}"
            ));
            return Map::new();
        }
        let list = match opts.get("aliases") {
            None | Some(Value::Null) => continue,
            Some(Value::Array(list)) => list,
            Some(_) => {
                errors.push("internal error: aliases must be a list or tuple".into());
                return Map::new();
            }
        };
        for alias in list {
            let alias = text(alias);
            map.insert(alias.clone(), json!(name));
            if let Some(v) = values.get(&alias).cloned() {
                values.insert(name.clone(), v);
            }
        }
    }
    map
}

/// The walk ansible-core makes for `no_log` values, for the one error it can raise: a nested
/// option's value that is no mapping (after reading a string as one).
fn no_log_walk(spec: &Map<String, Value>, values: &Map<String, Value>) -> Result<(), String> {
    for (name, opts) in spec {
        let Some(Value::Object(sub)) = opts.get("options") else {
            continue;
        };
        let wanted = spec_str(opts, "type");
        let dicts = wanted == Some("dict")
            || (wanted == Some("list") && spec_str(opts, "elements") == Some("dict"));
        let given = match values.get(name) {
            Some(v) if dicts && !v.is_null() => v,
            _ => continue,
        };
        let items = match given {
            Value::Array(items) => items.clone(),
            other => vec![other.clone()],
        };
        for item in items {
            let item = match item {
                Value::String(_) => convert("dict", &item)?,
                other => other,
            };
            match &item {
                Value::Object(m) => no_log_walk(sub, m)?,
                other => {
                    return Err(format!(
                        "Value '{}' in the sub parameter field '{name}' must be a {}, not '{}'",
                        text(other),
                        wanted.unwrap_or_default(),
                        class_name(other)
                    ))
                }
            }
        }
    }
    Ok(())
}

fn find_unsupported(
    spec: &Map<String, Value>,
    values: &Map<String, Value>,
    aliases: &Map<String, Value>,
    ctx: &[String],
    out: &mut Unsupported,
) {
    for name in values.keys() {
        if spec.contains_key(name) || aliases.contains_key(name) {
            continue;
        }
        let mut path = ctx.to_vec();
        path.push(name.clone());
        out.names.push(path.join("."));
        let mut supported: Vec<&String> = spec.keys().collect();
        supported.sort();
        let mut s = supported
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        if !aliases.is_empty() {
            let mut names: Vec<&String> = aliases.keys().collect();
            names.sort();
            let names: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
            s.push_str(&format!(" ({})", names.join(", ")));
        }
        out.supported = s;
    }
}

/// Missing options take their defaults: only those that have one (`all: false`), or every
/// option, a missing default being null (`all: true`).
fn set_defaults(spec: &Map<String, Value>, values: &mut Map<String, Value>, all: bool) {
    for (name, opts) in spec {
        let default = opts.get("default").cloned().unwrap_or(Value::Null);
        if !values.contains_key(name) && (!default.is_null() || all) {
            values.insert(name.clone(), default);
        }
    }
}

fn required(
    spec: &Map<String, Value>,
    values: &Map<String, Value>,
    ctx: &[String],
    errors: &mut Vec<String>,
) {
    let mut missing: Vec<&String> = spec
        .iter()
        .filter(|(name, opts)| truthy(opts.get("required")) && !values.contains_key(*name))
        .map(|(name, _)| name)
        .collect();
    if !missing.is_empty() {
        missing.sort();
        let names: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
        errors.push(format!(
            "missing required arguments: {}{}",
            names.join(", "),
            found_in(ctx)
        ));
    }
}

fn check_types(
    spec: &Map<String, Value>,
    values: &mut Map<String, Value>,
    ctx: &[String],
    errors: &mut Vec<String>,
) {
    let found = |sep: &str| {
        if ctx.is_empty() {
            String::new()
        } else {
            format!(" found in '{}'{sep}", ctx.join(" -> "))
        }
    };
    for (name, opts) in spec {
        let Some(value) = values.get(name).cloned() else {
            continue;
        };
        let has_default = opts.get("default").is_some_and(|d| !d.is_null());
        if value.is_null() && !truthy(opts.get("required")) && !has_default {
            continue;
        }
        let wanted = match opts.get("type") {
            None | Some(Value::Null) => "str".to_string(),
            Some(t) => text(t),
        };
        let converted = convert(&wanted, &value).and_then(|v| {
            let Some(elements) = opts.get("elements").filter(|e| !e.is_null()) else {
                return Ok(v);
            };
            let items = match &v {
                Value::Array(items) => items.clone(),
                other => {
                    errors.push(format!(
                        "Invalid type {wanted} for option '{}'{}, elements value check is \
                         supported only with 'list' type",
                        text(other),
                        found(".")
                    ));
                    match other {
                        Value::String(s) => s.chars().map(|c| json!(c.to_string())).collect(),
                        Value::Object(m) => m.keys().map(|k| json!(k)).collect(),
                        _ => return Err(format!("'{}' object is not iterable", type_name(other))),
                    }
                }
            };
            let elements = text(elements);
            let mut kept = Vec::new();
            for item in items {
                match convert(&elements, &item) {
                    Ok(c) => kept.push(c),
                    Err(e) => errors.push(format!(
                        "Elements value for option '{name}'{} is of type {} and we were unable \
                         to convert to {elements}: {e}",
                        found(""),
                        type_name(&item)
                    )),
                }
            }
            Ok(Value::Array(kept))
        });
        match converted {
            Ok(v) => {
                values.insert(name.clone(), v);
            }
            Err(e) => errors.push(format!(
                "argument '{name}' is of type {}{} and we were unable to convert to {wanted}: {e}",
                type_name(&value),
                found(".")
            )),
        }
    }
}

fn check_choices(
    spec: &Map<String, Value>,
    values: &mut Map<String, Value>,
    ctx: &[String],
    errors: &mut Vec<String>,
) {
    for (name, opts) in spec {
        let choices = match opts.get("choices") {
            None | Some(Value::Null) => continue,
            Some(Value::Array(c)) => c,
            Some(other) => {
                errors.push(format!(
                    "internal error: choices for argument {name} are not iterable: {}{}",
                    text(other),
                    found_in(ctx)
                ));
                continue;
            }
        };
        let Some(value) = values.get(name).cloned() else {
            continue;
        };
        let listed = |v: &Value| choices.iter().any(|c| py_eq(c, v));
        let all = || choices.iter().map(text).collect::<Vec<_>>().join(", ");
        if let Value::Array(items) = &value {
            let misses: Vec<String> = items.iter().filter(|i| !listed(i)).map(text).collect();
            if !misses.is_empty() {
                errors.push(format!(
                    "value of {name} must be one or more of: {}. Got no match for: {}{}",
                    all(),
                    misses.join(", "),
                    found_in(ctx)
                ));
            }
            continue;
        }
        if listed(&value) {
            continue;
        }
        // YAML 1.1 made a choice `no` into False: the text `False` matches the one choice
        // that means false, as in ansible-core.
        let mut value = value;
        for (word, means) in [
            ("False", is_false_word as fn(&Value) -> bool),
            ("True", is_true_word),
        ] {
            if value.as_str() == Some(word) {
                let same: Vec<&Value> = choices.iter().filter(|c| means(c)).collect();
                if let [only] = same[..] {
                    value = only.clone();
                    values.insert(name.clone(), value.clone());
                }
            }
        }
        if !listed(&value) {
            errors.push(format!(
                "value of {name} must be one of: {}, got: {}{}",
                all(),
                text(&value),
                found_in(ctx)
            ));
        }
    }
}

/// Options with `options` of their own (`type: dict`, or a list of dicts): each of their
/// values checked against those, with the rules the option gives for its members.
fn sub_specs(
    spec: &Map<String, Value>,
    values: &mut Map<String, Value>,
    ctx: &mut Vec<String>,
    errors: &mut Vec<String>,
    unsupported: &mut Unsupported,
) {
    for (name, opts) in spec {
        let wanted = spec_str(opts, "type");
        let dicts = wanted == Some("dict")
            || (wanted == Some("list") && spec_str(opts, "elements") == Some("dict"));
        if !dicts {
            continue;
        }
        let sub = opts.get("options").and_then(Value::as_object);
        if truthy(opts.get("apply_defaults")) {
            if sub.is_none() {
                continue;
            }
            if values.get(name).is_none_or(Value::is_null) {
                values.insert(name.clone(), json!({}));
            }
        }
        let (Some(sub), Some(given)) = (sub, values.get(name).filter(|v| !v.is_null())) else {
            continue;
        };
        let (mut items, listed) = match given.clone() {
            Value::Array(items) => (items, true),
            other => (vec![other], false),
        };
        ctx.push(name.clone());
        for item in &mut items {
            let Value::Object(members) = item else {
                errors.push(format!(
                    "value of '{name}' must be of type dict or list of dicts"
                ));
                continue;
            };
            let aliases = aliases(sub, members, errors);
            if let Err(e) = no_log_walk(sub, members) {
                errors.push(e);
            }
            find_unsupported(sub, members, &aliases, ctx, unsupported);
            rules(opts, "mutually_exclusive", members, ctx, errors);
            set_defaults(sub, members, false);
            required(sub, members, ctx, errors);
            check_types(sub, members, ctx, errors);
            check_choices(sub, members, ctx, errors);
            for rule in [
                "required_together",
                "required_one_of",
                "required_if",
                "required_by",
            ] {
                rules(opts, rule, members, ctx, errors);
            }
            set_defaults(sub, members, true);
            sub_specs(sub, members, ctx, errors, unsupported);
        }
        ctx.pop();
        let back = if listed {
            Value::Array(items)
        } else {
            items.pop().unwrap_or(Value::Null)
        };
        values.insert(name.clone(), back);
    }
}

/// How many of `terms` (a name or a list of names) are given.
fn count(terms: &Value, values: &Map<String, Value>) -> usize {
    match terms {
        Value::Array(names) => {
            let mut seen: Vec<String> = names.iter().map(text).collect();
            seen.sort();
            seen.dedup();
            seen.iter().filter(|n| values.contains_key(*n)).count()
        }
        other => usize::from(values.contains_key(&text(other))),
    }
}

fn names(terms: &Value, sep: &str) -> String {
    match terms {
        Value::Array(names) => names.iter().map(text).collect::<Vec<_>>().join(sep),
        other => text(other),
    }
}

/// One of an option's rules for its members; ansible-core reports the first term that fails.
fn rules(
    opts: &Value,
    rule: &str,
    values: &Map<String, Value>,
    ctx: &[String],
    errors: &mut Vec<String>,
) {
    let Some(terms) = opts.get(rule).filter(|t| !t.is_null()) else {
        return;
    };
    let list = |t: &Value| match t {
        Value::Array(items) => items.clone(),
        other => vec![other.clone()],
    };
    let msg = match rule {
        "mutually_exclusive" => {
            let hits: Vec<String> = list(terms)
                .iter()
                .filter(|t| count(t, values) > 1)
                .map(|t| names(t, "|"))
                .collect();
            (!hits.is_empty())
                .then(|| format!("parameters are mutually exclusive: {}", hits.join(", ")))
        }
        "required_one_of" => list(terms)
            .iter()
            .find(|t| count(t, values) == 0)
            .map(|t| format!("one of the following is required: {}", names(t, ", "))),
        "required_together" => list(terms)
            .iter()
            .find(|t| {
                let counts: Vec<usize> = list(t).iter().map(|f| count(f, values)).collect();
                counts.iter().any(|c| *c > 0) && counts.contains(&0)
            })
            .map(|t| format!("parameters are required together: {}", names(t, ", "))),
        "required_if" => list(terms).iter().find_map(|req| {
            let req = list(req);
            let (key, val, needed) = (text(req.first()?), req.get(1)?, list(req.get(2)?));
            let any = req.get(3).is_some_and(|v| truthy(Some(v)));
            if !values.get(&key).is_some_and(|v| py_eq(v, val)) {
                return None;
            }
            let missing: Vec<String> = needed
                .iter()
                .filter(|n| count(n, values) == 0)
                .map(text)
                .collect();
            let enough = if any { needed.len() } else { 0 };
            (!missing.is_empty() && missing.len() >= enough).then(|| {
                format!(
                    "{key} is {} but {} of the following are missing: {}",
                    text(val),
                    if any { "any" } else { "all" },
                    missing.join(", ")
                )
            })
        }),
        _ => terms.as_object().and_then(|by| {
            by.iter().find_map(|(key, needed)| {
                values.get(key).filter(|v| !v.is_null())?;
                let missing: Vec<String> = list(needed)
                    .iter()
                    .map(text)
                    .filter(|n| values.get(n).is_none_or(Value::is_null))
                    .collect();
                (!missing.is_empty()).then(|| {
                    format!(
                        "missing parameter(s) required by '{key}': {}",
                        missing.join(", ")
                    )
                })
            })
        }),
    };
    if let Some(m) = msg {
        errors.push(format!("{m}{}", found_in(ctx)));
    }
}

/// An action's argument that must be a string and is not (`debug`'s `var`), refused in
/// ansible-core's words (its `str` check that converts nothing).
pub(in crate::engine) fn not_a_string(name: &str, v: &Value) -> Option<String> {
    (!v.is_string()).then(|| {
        format!(
            "argument '{name}' is of type {} and we were unable to convert to \
             _check_type_str_no_conversion: '{}' is not a string and conversion is not allowed",
            types::type_name(v),
            types::text(v)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(spec: Value, values: Value) -> Vec<String> {
        validate(
            spec.as_object().unwrap(),
            values.as_object().unwrap().clone(),
        )
    }

    #[test]
    fn messages_in_ansible_cores_order() {
        let spec = json!({
            "i": {"type": "int"},
            "c": {"choices": ["a", "b"]},
            "req": {"required": true},
            "sub": {"type": "dict", "options": {"x": {"type": "int", "required": true}}},
            "subl": {"type": "list", "elements": "dict", "options": {"n": {"type": "bool"}}},
        });
        let errors = check(
            spec,
            json!({"i": "4.5", "c": "z", "sub": {"y": 1}, "subl": [{"n": 1}, 3], "zz": 1}),
        );
        assert_eq!(
            errors,
            [
                "Value '3' in the sub parameter field 'subl' must be a list, not \
                 '_AnsibleTaggedInt'",
                "missing required arguments: req",
                "argument 'i' is of type str and we were unable to convert to int: \"'4.5'\" \
                 cannot be converted to an int",
                "Elements value for option 'subl' is of type int and we were unable to \
                 convert to dict: <class 'ansible.module_utils._internal._datatag.\
                 _AnsibleTaggedInt'> cannot be converted to a dict",
                "value of c must be one of: a, b, got: z",
                "missing required arguments: x found in sub",
                "sub.y, zz. Supported parameters include: x.",
            ]
        );
    }

    #[test]
    fn booleans_of_yaml_one_one_choices() {
        let spec =
            json!({"s": {"choices": [true, false]}, "l": {"type": "list", "choices": ["a"]}});
        assert!(check(spec.clone(), json!({"s": "False"})).is_empty());
        assert_eq!(
            check(spec, json!({"l": "a,b,c"})),
            ["value of l must be one or more of: a. Got no match for: b, c"]
        );
    }

    #[test]
    fn rules_of_nested_options() {
        let spec = json!({"d": {"type": "dict", "options": {"a": {}, "b": {}},
            "mutually_exclusive": [["a", "b"]], "required_one_of": [["a", "b"]]}});
        assert_eq!(
            check(spec.clone(), json!({"d": {"a": 1, "b": 2}})),
            ["parameters are mutually exclusive: a|b found in d"]
        );
        assert_eq!(
            check(spec, json!({"d": {}})),
            ["one of the following is required: a, b found in d"]
        );
    }
}
