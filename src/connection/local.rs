//! The local transport: the bootstrap script runs as a child process of the controller.

use super::channel::{Keep, Started};
use super::TransportError;
use nix::sys::signal::{signal, SigHandler, Signal};
use std::process::Stdio;

/// The child is not killed when the connection is dropped (no `kill_on_drop`): the agent sees
/// its stdin close, stops what it runs (killing a command's process group) and exits, which
/// releases the host lock. A SIGKILL would leave that command running.
pub(super) fn start(script: &str) -> Result<Started, TransportError> {
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Out of the controller's process group: a Ctrl-C on the terminal goes to the controller
        // alone, which lets the tasks in flight finish (see `engine::interrupt`).
        .process_group(0);
    // Start the agent with the default signal dispositions an ssh login gives it: a controller
    // run under `nohup` (or anything else that ignores SIGHUP/SIGINT/SIGQUIT/SIGTERM) would
    // otherwise pass the ignores on, through the agent, to every command and daemon it starts —
    // and a shell cannot trap a signal ignored at its start (a SysV daemon's HUP-to-reload).
    // SAFETY: sigaction(2) is async-signal-safe and changes only the child's own state.
    unsafe {
        cmd.pre_exec(|| {
            for sig in [
                Signal::SIGHUP,
                Signal::SIGINT,
                Signal::SIGQUIT,
                Signal::SIGTERM,
            ] {
                signal(sig, SigHandler::SigDfl).map_err(std::io::Error::from)?;
            }
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| TransportError::Connect(format!("cannot start the local agent: {e}")))?;
    Ok(Started {
        writer: Box::new(child.stdin.take().expect("piped")),
        reader: Box::new(child.stdout.take().expect("piped")),
        stderr: Box::new(child.stderr.take().expect("piped")),
        keep: Keep::Local(child),
    })
}
