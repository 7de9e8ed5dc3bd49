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
    let magic = play_magic(cfg, ctx, &src, h.name);
    // Every layer shares its map with where it comes from: building a scope copies no
    // variables (it runs for every task on every host).
    let maps = VarMaps::new(cfg, *ctx, src, *h);
    let mut layers = Vec::with_capacity(maps.0.len() + magic.len());
    layers.extend(
        maps.0
            .iter()
            .map(|&(vars, templated)| Layer::shared(vars.clone(), templated)),
    );
    layers.extend(magic);
    Scope::new(templar.clone(), layers)
}

/// The variable maps a host's scope is made of, bottom (lowest precedence) to top, each with
/// whether it holds templates; the magic variables aside (none of them is a map a task or the
/// inventory writes). Borrowed, so it costs no copy: what asks only where a variable comes from
/// (`connection::spec::fixed_in`) needs no scope built.
pub struct VarMaps<'a>(Vec<(&'a Arc<Map<String, Value>>, bool)>);

impl<'a> VarMaps<'a> {
    pub fn new(cfg: &'a Config, ctx: PlayVars<'a>, src: VarSrc<'a>, h: HostVars<'a>) -> Self {
        let play = ctx.play;
        let mut maps = Vec::with_capacity(16);
        maps.push((&play.role_defaults, true));
        // A task's own role comes on top of the play's roles at each role level.
        if let Some(r) = src.role {
            maps.push((&r.defaults, true));
        }
        maps.extend([
            (h.inv_vars, true),
            (h.facts, false),
            (&play.vars, true),
            (&play.vars_from_files, true),
            (ctx.files_vars, true),
            (&play.role_vars, true),
        ]);
        if let Some(r) = src.role {
            maps.push((&r.vars, true));
        }
        if let Some(v) = src.vars {
            maps.push((v, true));
        }
        maps.push((h.included_vars, true));
        maps.push((h.host_vars, false));
        if let Some(r) = src.role {
            maps.push((&r.params, true));
        }
        maps.push((ctx.include_params, false));
        maps.push((&cfg.extra_vars, true));
        VarMaps(maps)
    }

    /// The map `name` is taken from (the topmost that sets it), as `Scope::defining_map`.
    pub fn defining_map(&self, name: &str) -> Option<&'a Arc<Map<String, Value>>> {
        self.0
            .iter()
            .rev()
            .find(|(m, _)| m.contains_key(name))
            .map(|&(m, _)| m)
    }
}
