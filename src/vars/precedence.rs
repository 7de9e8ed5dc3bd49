//! Variable precedence: which layers a host's scope has, and in what order they win.

use super::magic::play_magic;
use super::{HostVars, Layer, PlayVars, Scope, VarSrc};
use crate::config::Config;
use crate::template::Templar;
use serde_json::{Map, Value};
use std::sync::Arc;

/// The variable scope on a host, in Ansible's precedence order (later wins): role
/// defaults, inventory, facts, play vars, vars_files, role vars, block and task vars,
/// include_vars, set_fact and register, role parameters, include parameters, extra vars.
pub fn host_scope(
    cfg: &Config,
    templar: &Arc<Templar>,
    ctx: &PlayVars<'_>,
    src: VarSrc<'_>,
    h: &HostVars<'_>,
) -> Arc<Scope> {
    let play = ctx.play;
    let magic = play_magic(cfg, ctx, &src, h.name);
    // A task's own role comes on top of the play's roles at each role level.
    let shared = |vars: &Arc<Map<String, Value>>| Layer {
        vars: vars.clone(),
        templated: true,
    };
    let mut layers = vec![shared(&play.role_defaults)];
    if let Some(r) = src.role {
        layers.push(shared(&r.defaults));
    }
    layers.extend([
        Layer {
            vars: h.inv_vars.clone(),
            templated: true,
        },
        Layer::data(h.facts.clone()),
        Layer::templates(play.vars.clone()),
        Layer::templates(play.vars_from_files.clone()),
        Layer::templates(ctx.files_vars.clone()),
        shared(&play.role_vars),
    ]);
    if let Some(r) = src.role {
        layers.push(shared(&r.vars));
    }
    if let Some(v) = src.vars {
        layers.push(Layer::templates(v.clone()));
    }
    layers.push(Layer::templates(h.included_vars.clone()));
    layers.push(Layer::data(h.host_vars.clone()));
    if let Some(r) = src.role {
        layers.push(shared(&r.params));
    }
    layers.push(Layer::data(ctx.include_params.clone()));
    layers.push(Layer::templates(cfg.extra_vars.clone()));
    layers.push(Layer::data(magic));
    Scope::new(templar.clone(), layers)
}
