//! The `copy` module (placeholder until it is written).

use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{Map, Value};

pub struct Copy;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {}

impl Module for Copy {
    type Params = Params;
    type State = ();
    type Action = ();

    fn probe(_: &Params, _: &Ctx) -> Result<(), ModuleError> {
        Err(ModuleError::failed("not implemented yet"))
    }

    fn plan(_: &Params, _: &(), _: &Ctx) -> Result<Plan<()>, ModuleError> {
        Ok(Plan::new())
    }

    fn apply(_: &Params, _: (), _: &Plan<()>) -> Result<Map<String, Value>, ModuleError> {
        Ok(Map::new())
    }
}
