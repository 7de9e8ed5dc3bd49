//! The process groups of the commands a module is running, so the agent can stop them.
//!
//! `command`/`shell` (and their `unless`/`onlyif` guards) start each child in a process group of
//! its own and register it here while they wait for it. When a task's `timeout` passes, or the
//! controller hangs up, the agent calls `kill_all`: every registered group gets SIGKILL, which
//! also reaches what the command started in the background, and the module's wait returns.
//! Until the agent's next request (`reset`) a group registered afterwards is killed at once, so
//! a module cannot start its next command after it was stopped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());
static STOPPED: AtomicBool = AtomicBool::new(false);

/// Registered for as long as it lives: drop it once the child has been waited for.
pub struct Registered(i32);

impl Drop for Registered {
    fn drop(&mut self) {
        groups().retain(|g| *g != self.0);
    }
}

/// A vector of numbers cannot be left half-updated by a panic: a poisoned lock is used as is.
fn groups() -> std::sync::MutexGuard<'static, Vec<i32>> {
    GROUPS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Register the process group `pgid` (the pid of a child started with `process_group(0)`).
pub fn register(pgid: u32) -> Registered {
    let pgid = i32::try_from(pgid).unwrap_or(i32::MAX);
    let mut g = groups();
    // Checked under the lock `kill_all` takes: a group is either killed there or here.
    if STOPPED.load(Ordering::SeqCst) {
        kill(pgid);
    }
    g.push(pgid);
    Registered(pgid)
}

/// Kill every registered group (SIGKILL) and every group registered until `reset`. Returns how
/// many groups were running.
pub fn kill_all() -> usize {
    let g = groups();
    STOPPED.store(true, Ordering::SeqCst);
    for pgid in g.iter() {
        kill(*pgid);
    }
    g.len()
}

/// Whether the current request was stopped: a module that waits without a child (`wait_for`)
/// polls this to give up when the task's `timeout` passes or the controller hangs up.
pub fn stopped() -> bool {
    STOPPED.load(Ordering::SeqCst)
}

/// A new request begins: commands may run again.
pub fn reset() {
    let _g = groups();
    STOPPED.store(false, Ordering::SeqCst);
}

fn kill(pgid: i32) {
    // The group may be gone already (ESRCH): nothing left to stop.
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pgid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

// Tested through the agent binary (tests/integration/timeouts.rs): `kill_all` is process-wide,
// and the module tests that run commands in parallel threads would be killed by a unit test.
