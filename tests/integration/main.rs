//! Integration tests through the built `fixpoint` binary: one test crate, files by topic.

#[path = "../support/mod.rs"]
mod support;

mod fx;
mod inventory_cli;
mod journal;
mod local_engine;
mod local_modules;
mod ssh;
