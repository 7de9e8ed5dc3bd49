//! connection/: how the controller reaches a host and talks to its agent.
//!
//! It owns the agent binary that is shipped, the bootstrap script that caches and starts it, the
//! transports (local child process, SSH master connection) and the framed channel. It knows
//! nothing of playbooks or templating: it is given a `ConnSpec` and requests to send.

pub mod agent_binary;
mod bootstrap;
mod channel;
mod local;
mod ssh;

pub use agent_binary::AgentBinary;
pub use channel::{connect, AgentConn, ConnKind, ConnSpec, TransportError};
