//! How handlers and roles answer to names: a notification reaching a handler (by name, topic,
//! or either with its role's name in front), and a role's own name.

use super::ast::{RoleCtx, Task};

impl Task {
    /// Whether notifying `n` reaches this handler: its name or one of its `listen` topics,
    /// also prefixed with its role's name (`web : restart`, `ns.coll.web : restart`), as
    /// ansible-core names a role's handlers and topics.
    pub fn answers(&self, n: &str) -> bool {
        let own = |n: &str| self.name.as_deref() == Some(n) || self.listen.iter().any(|l| l == n);
        if own(n) {
            return true;
        }
        let Some(role) = &self.role else {
            return false;
        };
        [role.name.as_str(), role.short_name()].iter().any(|r| {
            n.strip_prefix(r)
                .and_then(|rest| rest.strip_prefix(" : "))
                .is_some_and(own)
        })
    }
}

impl RoleCtx {
    /// The role's own name: a collection's role (`ns.coll.web`, found in an
    /// `ansible_collections` tree) is `web` for `role_name`, as in ansible-core; any other
    /// role's is its name as written (`geerlingguy.docker`).
    pub fn short_name(&self) -> &str {
        let in_collection = self
            .path
            .components()
            .any(|c| c.as_os_str() == "ansible_collections");
        match self.name.rsplit_once('.') {
            Some((_, short)) if in_collection => short,
            _ => &self.name,
        }
    }
}
