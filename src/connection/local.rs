//! The local transport: the bootstrap script runs as a child process of the controller.

use super::channel::{Keep, Started};
use super::TransportError;
use std::process::Stdio;

/// The child is not killed when the connection is dropped (no `kill_on_drop`): the agent sees
/// its stdin close, stops what it runs (killing a command's process group) and exits, which
/// releases the host lock. A SIGKILL would leave that command running.
pub(super) fn start(script: &str) -> Result<Started, TransportError> {
    let mut child = tokio::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Out of the controller's process group: a Ctrl-C on the terminal goes to the controller
        // alone, which lets the tasks in flight finish (see `engine::interrupt`).
        .process_group(0)
        .spawn()
        .map_err(|e| TransportError::Connect(format!("cannot start the local agent: {e}")))?;
    Ok(Started {
        writer: Box::new(child.stdin.take().expect("piped")),
        reader: Box::new(child.stdout.take().expect("piped")),
        stderr: Box::new(child.stderr.take().expect("piped")),
        keep: Keep::Local(child),
    })
}
