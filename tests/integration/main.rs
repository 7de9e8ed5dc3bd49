//! Integration tests through the built `fixpoint` binary: one test crate, files by topic.

#[path = "../support/mod.rs"]
mod support;

mod accounts;
mod agent_binary;
mod apt;
mod bad_input;
mod blocks;
mod cli_listing;
mod fx;
mod git;
mod hostile;
mod includes;
mod interrupt;
mod inventory_cli;
mod journal;
mod keywords;
mod local_engine;
mod local_modules;
mod memory;
mod nginx;
mod no_log;
mod python_modules;
mod roles;
mod secrets;
mod services_systemd;
mod services_sysv;
mod soak;
mod ssh;
mod timeouts;
mod unarchive;
mod validate;
mod variables;
mod yaml_typing;
