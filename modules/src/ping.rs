//! The `ping` module: proves the host's agent answers a module request, and echoes `data`
//! (`pong` by default) as `ping`. Read-only; `data: crash` fails on purpose, as Ansible's does,
//! so playbooks can test their failure handling.

use crate::params::de_opt_string;
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{Map, Value};

pub struct Ping;

/// Parameters of `ping`, spelled as in Ansible.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Returned as `ping`; a number or boolean becomes its text, as Ansible's `type: str`.
    #[serde(default, deserialize_with = "de_opt_string")]
    pub data: Option<String>,
}

impl Module for Ping {
    type Params = Params;
    type State = Map<String, Value>;
    type Action = std::convert::Infallible;

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Map<String, Value>, ModuleError> {
        let data = p.data.as_deref().unwrap_or("pong");
        if data == "crash" {
            // Ansible's module raises an exception here, which ansible-core 2.19 reports with
            // this message and no traceback.
            let mut result = Map::new();
            result.insert("exception".into(), "(traceback unavailable)".into());
            return Err(ModuleError::Failed {
                msg: "Task failed: Module failed: boom".into(),
                result,
            });
        }
        let mut out = Map::new();
        out.insert("ping".into(), data.into());
        Ok(out)
    }

    fn plan(
        _: &Params,
        state: &Map<String, Value>,
        _: &Ctx,
    ) -> Result<Plan<Self::Action>, ModuleError> {
        Ok(Plan::report(state))
    }

    fn apply(
        _: &Params,
        _: Map<String, Value>,
        plan: &Plan<Self::Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        plan.nothing_to_apply()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run;
    use serde_json::json;

    #[test]
    fn echoes_data_and_crashes_on_request() {
        let out = run::<Ping>(&json!({}), &Ctx::default()).unwrap();
        assert!(!out.changed);
        assert_eq!(out.result["ping"], "pong");
        let out = run::<Ping>(&json!({"data": 42}), &Ctx::default()).unwrap();
        assert_eq!(out.result["ping"], "42");
        let check = Ctx {
            check: true,
            ..Ctx::default()
        };
        let out = run::<Ping>(&json!({"data": "hi"}), &check).unwrap();
        assert_eq!(out.result["ping"], "hi");
        match run::<Ping>(&json!({"data": "crash"}), &Ctx::default()) {
            Err(ModuleError::Failed { msg, result }) => {
                assert_eq!(msg, "Task failed: Module failed: boom");
                assert_eq!(result["exception"], "(traceback unavailable)");
            }
            other => panic!("expected a failure, got {other:?}"),
        }
        assert!(run::<Ping>(&json!({"dat": 1}), &Ctx::default()).is_err());
    }
}
