//! The local transport: the bootstrap script runs as a child process of the controller.

use super::channel::{Keep, Started};
use super::TransportError;
use std::process::Stdio;

pub(super) fn start(script: &str) -> Result<Started, TransportError> {
    let mut child = tokio::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| TransportError::Connect(format!("cannot start the local agent: {e}")))?;
    Ok(Started {
        writer: Box::new(child.stdin.take().expect("piped")),
        reader: Box::new(child.stdout.take().expect("piped")),
        stderr: Box::new(child.stderr.take().expect("piped")),
        keep: Keep::Local(child),
    })
}
