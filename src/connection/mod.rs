//! connection/: how the controller reaches a host and talks to its agent.
//!
//! It owns turning a host's connection variables into a `ConnSpec`, the pool of live agents, the
//! agent binary that is shipped, the bootstrap script that caches and starts it, the transports
//! (local child process, SSH master connection) and the framed channel. It must NOT know the
//! engine's plays, task results or reporting: it is given rendered variables and requests to
//! send, and hands back agents and responses.

pub mod agent_binary;
mod bootstrap;
mod channel;
pub mod fdlimit;
mod handshake;
mod local;
pub mod pool;
mod secret;
pub mod spec;
mod ssh;

pub use agent_binary::AgentBinary;
pub use channel::{connect, AgentConn, BecomeMethod, ConnKind, ConnSpec, TransportError};
pub use handshake::Handshakes;
pub use secret::Secret;
pub use ssh::open_ahead;
