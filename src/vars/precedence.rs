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
    // Every layer shares its map with where it comes from: building a scope copies no
    // variables (it runs for every task on every host).
    let templates = |vars: &Arc<Map<String, Value>>| Layer::shared(vars.clone(), true);
    let data = |vars: &Arc<Map<String, Value>>| Layer::shared(vars.clone(), false);
    let mut layers = Vec::with_capacity(16);
    layers.push(templates(&play.role_defaults));
    // A task's own role comes on top of the play's roles at each role level.
    if let Some(r) = src.role {
        layers.push(templates(&r.defaults));
    }
    layers.extend([
        templates(h.inv_vars),
        data(h.facts),
        templates(&play.vars),
        templates(&play.vars_from_files),
        templates(ctx.files_vars),
        templates(&play.role_vars),
    ]);
    if let Some(r) = src.role {
        layers.push(templates(&r.vars));
    }
    if let Some(v) = src.vars {
        layers.push(templates(v));
    }
    layers.push(templates(h.included_vars));
    layers.push(data(h.host_vars));
    if let Some(r) = src.role {
        layers.push(templates(&r.params));
    }
    layers.push(data(ctx.include_params));
    layers.push(templates(&cfg.extra_vars));
    layers.push(magic);
    Scope::new(templar.clone(), layers)
}
