//! The on-host agent: the serve loop, native facts, the journal, and the wire protocol it shares
//! with the controller.
//!
//! This crate is what runs on a managed host, built into the small `fixpoint-agent` binary the
//! controller ships (see `build.rs` at the workspace root). It owns everything that must happen
//! where the effects happen: running modules (from `fixpoint-modules`), the host lock, `once:`
//! records and the handler outbox. It must not know about playbooks, templating, inventories or
//! transports: it receives fully rendered module parameters and answers with results.

pub mod drift;
pub mod facts;
pub mod facts_more;
pub mod job;
pub mod journal;
pub mod protocol;
pub mod python;
pub mod serve;
pub mod virt;
pub mod watch;
