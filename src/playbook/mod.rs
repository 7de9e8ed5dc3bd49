//! playbook/: YAML playbooks, task files and roles turned into typed plays and tasks.

pub mod load;
pub mod loops;
pub mod roles;

pub use load::*;
