//! Host filesystem helpers shared by the modules: paths (`lstat`, `parent_of`, `~` expansion),
//! attributes (owner, group, mode, and their Ansible result fields) and safe replacement of a
//! file (atomic write, validate, backup).
//!
//! It knows nothing about any one module, their parameters (beyond the `mode` type) or text
//! editing; the dependency runs one way inside: `paths` <- `attrs` <- `atomic`.

mod atomic;
mod attrs;
mod paths;

pub use atomic::{atomic_write, backup_file, fsync_dir, run_validate, shell_quote};
pub use attrs::{
    current_umask, group_name, lookup_gid, lookup_uid, meta_info, mode_str, path_info, plan_attrs,
    set_attrs, state_of, user_name, Attrs, WantedAttrs,
};
pub use paths::{expand_user, expand_user_with, lstat, parent_of};
pub(crate) use paths::{missing_ancestors, resolve};
