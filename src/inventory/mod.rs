//! Inventory: which hosts exist, how they are grouped and which variables each one carries.
//!
//! Reads Ansible INI and YAML inventories (a file or a directory of them) and host lists
//! (`-i web1,web2,`), one or several of them, plus `group_vars/` and `host_vars/` directories,
//! merges variables with Ansible's precedence, and resolves the host patterns
//! (`web:&prod:!web3`, `~db\d+`, `webservers[0:2]`) that plays and `--limit` use. Everything
//! follows Ansible's semantics so existing inventories work unchanged.
//!
//! `model` is the core every other file builds on and depends on nothing here; each format
//! (`ini`, `yaml`, `pyliteral` for INI values, `host_list`), `vars_dirs`, `pattern` and `output`
//! extends it, and `load` ties the readers together. This folder knows nothing about plays,
//! tasks, templating or connections: variables stay plain JSON data, rendered later by the
//! engine.

mod dynamic;
mod host_entry;
mod host_list;
mod ini;
mod load;
mod model;
mod output;
mod pattern;
pub(crate) mod pyliteral;
mod shard;
mod vars_dirs;
mod yaml;

#[cfg(test)]
mod testutil;

pub use dynamic::InventoryEdit;

/// Whether an inventory source is a host list (`web1,web2,`), not a path.
pub fn is_host_list(source: &std::path::Path) -> bool {
    host_list::as_host_list(source).is_some()
}
pub use model::{GroupHosts, Inventory, InventoryError, Vars};
pub use pattern::fnmatch;
/// The `literal_eval` reader of INI values, public for the fuzz targets (`fuzz/`).
pub use pyliteral::{parse_inline_value, parse_value};
pub use shard::Shard;
