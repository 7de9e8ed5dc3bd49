//! connection/: how the controller reaches hosts: connection variables -> spec, the pool of
//! live agents; bootstrap and transports follow.
//!
//! It must NOT know the engine's plays, tasks' results or reporting: it is given a host's
//! rendered variables and hands back agents.

pub mod pool;
pub mod spec;
