//! Host filesystem helpers shared by the modules: paths (`lstat`, `parent_of`, `~` expansion),
//! attributes (owner, group, mode, and their Ansible result fields) and safe replacement of a
//! file (atomic write, validate, backup), and `dirfd`: every change to a path the host's users
//! may control goes through a directory descriptor, without following links the probe did not.
//!
//! It knows nothing about any one module, their parameters (beyond the `mode` type) or text
//! editing; the dependency runs one way inside: `paths` <- `attrs` <- `cas` <- `dirfd` <- `atomic`.
//! `cas` holds fixpoint's `if_checksum` (compare-and-swap writes): `Loc::guard` carries it to
//! the write path, which re-checks it immediately before the change. `written` tells the agent's
//! journal what each change left (drift attribution); `names` remembers the user database's answers. `chattr` holds Ansible's `attributes`
//! argument (inode flags), applied after a module ran, as `selinux` holds the SELinux ones.

mod atomic;
mod attrs;
pub mod cas;
#[cfg(test)]
mod cas_tests;
pub mod chattr;
mod dirfd;
pub mod located;
pub mod names;
mod paths;
pub mod selinux;
pub mod stage;
pub mod written;
mod xattrs;

pub use atomic::{
    atomic_write, atomic_write_from, atomic_write_path, backup_file, fsync_dir, install_staged,
    install_temp, run_validate, shell_quote,
};
pub use attrs::{
    current_umask, effective_home, group_name, lookup_gid, lookup_uid, meta_info, mode_str,
    path_info, plan_attrs, stat_mode_str, state_of, user_name, Attrs, WantedAttrs,
};
pub use cas::{Found, IfChecksum};
pub use dirfd::{
    id_of, locate, locate_for_step, mkdir_at, recheck_guard, set_attrs_at, with_entry, Dir, FileId,
    Handle, Loc,
};
pub use paths::{expand_user, expand_user_with, lstat, parent_of};
pub(crate) use paths::{missing_ancestors, resolve};

/// The buffer size for reading a file of `len` bytes in chunks (to hash it): 64 KiB, or the
/// file's length plus the byte that shows its end when that is less. A probe hashes many small
/// files, and zeroing a 64 KiB buffer for each cost more than reading them.
pub(crate) fn chunk_len(len: u64) -> usize {
    const MAX: u64 = 64 * 1024;
    len.saturating_add(1).min(MAX) as usize
}
