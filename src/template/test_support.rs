//! Shared fixtures for the folder's unit tests: a sample context and one-line render/eval
//! helpers that panic with the template text on failure.

use minijinja::Value;
use serde_json::{json, Value as Json};

use super::{Templar, TemplateError};

pub(in crate::template) fn ctx(j: Json) -> Value {
    Value::from_serialize(&j)
}

pub(in crate::template) fn vars() -> Value {
    ctx(json!({
        "users": ["alice", "bob"],
        "user": {"name": "bob", "uid": 1000, "groups": ["wheel"]},
        "count": 3,
        "flag": true,
        "x": "a",
        "y": "yes",
        "empty": "",
        "nothing": null,
        "path": "/etc/nginx/nginx.conf",
        "items": [{"key": "a", "value": 1}, {"key": "b", "value": 2}],
    }))
}

pub(in crate::template) fn render(s: &str) -> Json {
    Templar::new()
        .render_str(s, &vars())
        .unwrap_or_else(|e| panic!("{s}: {e}"))
}

pub(in crate::template) fn eval(expr: &str) -> Json {
    Templar::new()
        .eval(expr, &vars())
        .unwrap_or_else(|e| panic!("{expr}: {e}"))
}

pub(in crate::template) fn truth(expr: &str) -> bool {
    Templar::new()
        .eval_bool(expr, &vars())
        .unwrap_or_else(|e| panic!("{expr}: {e}"))
}

pub(in crate::template) fn undefined_name(err: TemplateError) -> String {
    match err {
        TemplateError::Undefined { name, .. } => name,
        other => panic!("expected an undefined error, got {other:?}"),
    }
}

pub(in crate::template) fn render_err(s: &str) -> TemplateError {
    Templar::new().render_str(s, &vars()).expect_err(s)
}
