//! Integration tests through the built `fixpoint` binary: one test crate, files by topic.

#[path = "../support/mod.rs"]
mod support;

mod accounts;
mod agent_binary;
mod apt;
mod apt_repos;
mod bad_input;
mod blocks;
mod cli_listing;
mod cron;
mod dnf;
mod fx;
mod git;
mod guards;
mod hostile;
mod http;
mod http_server;
mod includes;
mod interrupt;
mod inventory_cli;
mod journal;
mod keywords;
mod library_modules;
mod local_engine;
mod local_modules;
mod memory;
mod misc_modules;
mod nginx;
mod no_log;
mod public_roles;
mod python_modules;
mod raw_script;
mod roles;
mod secrets;
mod services_systemd;
mod services_sysv;
mod soak;
mod ssh;
mod system_ns;
mod text_modules;
mod timeouts;
mod unarchive;
mod validate;
mod variables;
mod yaml_typing;
