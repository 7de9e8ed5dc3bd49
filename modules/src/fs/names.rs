//! User and group names and ids, looked up in the host's user database once and remembered:
//! a converged step still names its file's owner and group in its result, and each libc lookup
//! re-reads `/etc/nsswitch.conf` and the whole of `/etc/passwd` or `/etc/group`.
//!
//! What is remembered is only used while it can still be what libc would answer:
//! - each lookup first compares the identity and times of `/etc/nsswitch.conf` and of the
//!   database file it reads (`/etc/passwd` or `/etc/group`) with what they were when the answer
//!   was remembered (one `statx` each, against libc's open, read and parse), so that a change
//!   of those files, by this agent's own write path, a command or anything else, starts over;
//! - the agent [`forget`]s everything at each request batch and after every step whose module
//!   is not known to leave the database alone ([`leaves_alone`]): a database that is not a file
//!   (systemd's dynamic users, LDAP, sssd) changes without touching these files.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::sync::Mutex;

const NSSWITCH: &str = "/etc/nsswitch.conf";
const PASSWD: &str = "/etc/passwd";
const GROUP: &str = "/etc/group";

/// What identifies one version of a file: a rewrite by rename changes the inode, an edit in
/// place the size or the times (nanoseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// The stamps of nsswitch.conf and one database file; a file that cannot be read is `None`.
type Stamps = (Option<Stamp>, Option<Stamp>);

fn stamp(path: &str) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime: (m.mtime(), m.mtime_nsec()),
        ctime: (m.ctime(), m.ctime_nsec()),
    })
}

/// The answers remembered from one database while its files keep their stamps.
#[derive(Default)]
struct Table {
    stamps: Option<Stamps>,
    name_of: HashMap<u32, Option<String>>,
    id_of: HashMap<String, Option<u32>>,
}

impl Table {
    /// Drop what was remembered when the files changed since (or nothing was remembered yet).
    fn check(&mut self, db: &str) {
        let now = (stamp(NSSWITCH), stamp(db));
        if self.stamps != Some(now) {
            self.name_of.clear();
            self.id_of.clear();
            self.stamps = Some(now);
        }
    }
}

#[derive(Default)]
struct Cache {
    users: Table,
    groups: Table,
}

static CACHE: Mutex<Option<Cache>> = Mutex::new(None);

/// Look up in one table: `None` from `look` (libc failed, not "no such entry") is not
/// remembered, so the next lookup asks libc again.
fn cached<K, V>(
    pick: impl FnOnce(&mut Cache) -> (&mut Table, &str),
    map: impl Fn(&mut Table) -> &mut HashMap<K, Option<V>>,
    key: K,
    look: impl FnOnce(&K) -> Option<Option<V>>,
) -> Option<V>
where
    K: std::hash::Hash + Eq,
    V: Clone,
{
    let mut guard = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let (table, db) = pick(guard.get_or_insert_with(Cache::default));
    table.check(db);
    if let Some(v) = map(table).get(&key) {
        return v.clone();
    }
    let found = look(&key)?;
    map(table).insert(key, found.clone());
    found
}

/// The name of user `uid`, or `None` when the database has no such user (or cannot be read).
pub fn user_by_uid(uid: u32) -> Option<String> {
    cached(
        |c| (&mut c.users, PASSWD),
        |t| &mut t.name_of,
        uid,
        |uid| {
            nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(*uid))
                .ok()
                .map(|u| u.map(|u| u.name))
        },
    )
}

/// The name of group `gid`, or `None` when the database has no such group (or cannot be read).
pub fn group_by_gid(gid: u32) -> Option<String> {
    cached(
        |c| (&mut c.groups, GROUP),
        |t| &mut t.name_of,
        gid,
        |gid| {
            nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(*gid))
                .ok()
                .map(|g| g.map(|g| g.name))
        },
    )
}

/// The uid of the user called `name`, or `None` when there is none (or the database cannot be read).
pub fn uid_by_name(name: &str) -> Option<u32> {
    cached(
        |c| (&mut c.users, PASSWD),
        |t| &mut t.id_of,
        name.to_string(),
        |name| {
            nix::unistd::User::from_name(name)
                .ok()
                .map(|u| u.map(|u| u.uid.as_raw()))
        },
    )
}

/// The gid of the group called `name`, or `None` when there is none (or the database cannot be read).
pub fn gid_by_name(name: &str) -> Option<u32> {
    cached(
        |c| (&mut c.groups, GROUP),
        |t| &mut t.id_of,
        name.to_string(),
        |name| {
            nix::unistd::Group::from_name(name)
                .ok()
                .map(|g| g.map(|g| g.gid.as_raw()))
        },
    )
}

/// Forget every remembered answer (the agent calls it at each batch and after a step that may
/// have changed the database).
pub fn forget() {
    *CACHE.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

/// Whether a step of `module` leaves the user database alone, but for writing files (which the
/// stamps see): modules that only read or write files. Everything else (`user`, `group`,
/// commands, packages, services that may start a dynamic user, Python modules) is not.
pub fn leaves_alone(module: &str) -> bool {
    matches!(
        module,
        "file"
            | "copy"
            | "copy_tree"
            | "template"
            | "lineinfile"
            | "blockinfile"
            | "replace"
            | "ini_file"
            | "stat"
            | "slurp"
            | "find"
            | "fetch"
            | "ping"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_libcs() {
        forget();
        let me = nix::unistd::geteuid().as_raw();
        let name = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(me))
            .unwrap()
            .map(|u| u.name);
        assert_eq!(user_by_uid(me), name);
        // The second answer comes from the cache and is the same.
        assert_eq!(user_by_uid(me), name);
        if let Some(n) = &name {
            assert_eq!(uid_by_name(n), Some(me));
        }
        assert_eq!(group_by_gid(0).as_deref(), Some("root"));
        assert_eq!(gid_by_name("root"), Some(0));
        assert_eq!(uid_by_name("no-such-user-fixpoint"), None);
        assert_eq!(gid_by_name("no-such-group-fixpoint"), None);
    }

    #[test]
    fn a_changed_stamp_drops_the_table() {
        let mut t = Table::default();
        t.check(PASSWD);
        t.name_of.insert(4242, Some("x".into()));
        t.check(PASSWD);
        assert!(t.name_of.contains_key(&4242), "same files: kept");
        let (ns, db) = t.stamps.unwrap();
        t.stamps = Some((
            ns,
            db.map(|s| Stamp {
                ino: s.ino + 1,
                ..s
            }),
        ));
        t.check(PASSWD);
        assert!(t.name_of.is_empty(), "another inode: dropped");
    }
}
