//! The request in progress, its deadline, and what stops it: the task's `timeout` or the
//! controller hanging up.
//!
//! The serve loop runs one request at a time on the main thread. A reader thread takes frames
//! from the controller as they come, and a watchdog thread waits for the current request's
//! deadline. Either one stops a request the same way: it kills the process groups the module
//! started (`fixpoint_modules::children`), which ends the module's wait, and the serve loop
//! answers. A module that does not return even then (stuck in the kernel on a dead mount, a
//! FIFO where a file was expected) is given `GRACE`; after it the agent answers for it when the
//! controller still listens, and exits: the host lock is an flock, released with the process,
//! and a `once:` record left `started` says "in doubt", which is the truth.

use crate::protocol::{encode, Response, ResponseFrame};
use serde_json::{json, Map};
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How long a batch step's answer may wait in the buffer for the next ones (`Watch::answer`).
const HOLD: Duration = Duration::from_millis(20);

/// How long a stopped module has to return before the agent gives up on it and exits.
pub const GRACE: Duration = Duration::from_secs(5);

/// Why the current request was stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Its timeout passed (in milliseconds).
    TimedOut(u64),
    /// The controller closed the channel while it ran.
    HungUp,
}

#[derive(Default)]
struct State {
    /// The request being served: its id and its deadline.
    running: Option<(u64, Option<(Instant, u64)>)>,
    stopped: Option<Stop>,
    hung_up: bool,
    /// The id of the last `Batch` the controller cancelled (`CancelBatch`).
    cancelled_batch: Option<u64>,
    /// The last `OpenGate`: the batch's id and the gate opened (those below it are open too).
    open_gate: Option<(u64, u32)>,
}

/// Shared by the serve loop, the reader and the watchdog.
pub struct Watch {
    state: Mutex<State>,
    changed: Condvar,
    /// The protocol's stdout, shared so that the watchdog can answer for a stuck module, and
    /// when the oldest answer still in its buffer was written (`answer`).
    out: Mutex<(Box<dyn Write + Send>, Option<Instant>)>,
}

impl Watch {
    pub fn new(out: Box<dyn Write + Send>) -> Arc<Watch> {
        let w = Arc::new(Watch {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            out: Mutex::new((out, None)),
        });
        let dog = w.clone();
        std::thread::spawn(move || dog.watchdog());
        w
    }

    /// The state is plain values set in single assignments: a poisoned lock is used as is.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Write one answer (the serve loop, or the watchdog for a stuck module).
    pub fn answer(&self, id: u64, resp: Response) -> std::io::Result<()> {
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        let (w, since) = &mut *out;
        // A batch step's answer waits in the buffer for the next flush (the batch's end, a
        // step that may take long, a gate, `HOLD` passed): a converged batch goes back in a
        // few writes instead of one per step, which costs sshd, ssh and the controller a
        // wake-up each.
        let held = matches!(resp, Response::Step { .. });
        w.write_all(&encode(&ResponseFrame { id, resp }))?;
        match (held, *since) {
            (true, None) => *since = Some(Instant::now()),
            (true, Some(t)) if t.elapsed() < HOLD => {}
            _ => {
                *since = None;
                return w.flush();
            }
        }
        Ok(())
    }

    /// Send the answers held in the buffer (`answer`).
    pub fn flush(&self) -> std::io::Result<()> {
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        out.1 = None;
        out.0.flush()
    }

    /// Say something about the request in progress before its answer (`Response::Notice`).
    pub fn notice(&self, msg: String) -> std::io::Result<()> {
        let Some((id, _)) = self.lock().running else {
            return Ok(());
        };
        self.answer(id, Response::Notice { msg })
    }

    /// The controller cancelled batch `id`: it starts no further step.
    pub fn cancel_batch(&self, id: u64) {
        self.lock().cancelled_batch = Some(id);
        // A step waiting at a gate gives up.
        self.changed.notify_all();
    }

    /// The controller opened gate `upto` of batch `id` (`Request::OpenGate`).
    pub fn open_gate(&self, id: u64, upto: u32) {
        let mut s = self.lock();
        if s.open_gate.is_none_or(|(b, g)| b != id || g < upto) {
            s.open_gate = Some((id, upto));
        }
        drop(s);
        self.changed.notify_all();
    }

    /// Wait until gate `gate` of batch `id` is open. `false`: it never will be, or the step may
    /// no longer wait for it: the batch was cancelled (the controller's step did not pass, or
    /// Ctrl-C), the controller hung up, or the step's own timeout passed.
    pub fn wait_gate(&self, id: u64, gate: u32) -> bool {
        // The controller decides the gate from the answers before it: they must reach it.
        if self.flush().is_err() {
            return false;
        }
        let mut s = self.lock();
        loop {
            if s.open_gate.is_some_and(|(b, g)| b == id && g >= gate) {
                return true;
            }
            if s.hung_up || s.cancelled_batch == Some(id) || s.stopped.is_some() {
                return false;
            }
            s = self
                .changed
                .wait(s)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// Whether batch `id` must start no further step: cancelled, or the controller hung up.
    pub fn batch_stopped(&self, id: u64) -> bool {
        let s = self.lock();
        s.hung_up || s.cancelled_batch == Some(id)
    }

    /// Request `id` starts, with its timeout.
    pub fn start(&self, id: u64, timeout_ms: Option<u64>) {
        fixpoint_modules::children::reset();
        let mut s = self.lock();
        // A deadline too far to count is no deadline.
        let deadline = timeout_ms.and_then(|ms| {
            Instant::now()
                .checked_add(Duration::from_millis(ms))
                .map(|d| (d, ms))
        });
        s.running = Some((id, deadline));
        s.stopped = None;
        drop(s);
        self.changed.notify_all();
    }

    /// Whether (and why) the current request was stopped.
    pub fn stopped(&self) -> Option<Stop> {
        self.lock().stopped
    }

    /// Request `id` is answered (or about to be): what stopped it, if anything.
    pub fn finish(&self) -> Option<Stop> {
        let mut s = self.lock();
        s.running = None;
        let stopped = s.stopped.take();
        drop(s);
        self.changed.notify_all();
        stopped
    }

    /// The controller closed the channel (or sent something unreadable): stop the request in
    /// progress, and exit if it does not end within `GRACE`. Called by the reader thread.
    pub fn hang_up(&self) {
        let mut s = self.lock();
        s.hung_up = true;
        // A step waiting at a gate gives up.
        self.changed.notify_all();
        if s.running.is_some() {
            s.stopped.get_or_insert(Stop::HungUp);
            fixpoint_modules::children::kill_all();
            let until = Instant::now() + GRACE;
            while s.running.is_some() {
                let now = Instant::now();
                if now >= until {
                    eprintln!(
                        "fixpoint agent: the controller hung up and the module in progress did not stop within {GRACE:?}; exiting"
                    );
                    std::process::exit(1);
                }
                s = self
                    .changed
                    .wait_timeout(s, until - now)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
            }
        }
    }

    /// Wait for each request's deadline; stop it when it passes, and give up on a module that
    /// does not return after that.
    fn watchdog(&self) {
        let mut s = self.lock();
        loop {
            let (id, deadline) = match s.running {
                Some((id, Some((deadline, ms)))) if s.stopped.is_none() => (id, (deadline, ms)),
                Some((id, Some(_))) if matches!(s.stopped, Some(Stop::TimedOut(_))) => {
                    // Stopped already: wait out the grace for this same request.
                    let until = Instant::now() + GRACE;
                    while s.running.is_some_and(|(r, _)| r == id) {
                        let now = Instant::now();
                        if now >= until {
                            self.give_up(id, s);
                        }
                        s = self
                            .changed
                            .wait_timeout(s, until - now)
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .0;
                    }
                    continue;
                }
                _ => {
                    s = self
                        .changed
                        .wait(s)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    continue;
                }
            };
            let now = Instant::now();
            if now < deadline.0 {
                s = self
                    .changed
                    .wait_timeout(s, deadline.0 - now)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
                continue;
            }
            // Still the same request, past its deadline: stop it.
            if s.running.is_some_and(|(r, _)| r == id) && s.stopped.is_none() {
                s.stopped = Some(Stop::TimedOut(deadline.1));
                fixpoint_modules::children::kill_all();
                // A step waiting at a gate gives up.
                self.changed.notify_all();
            }
        }
    }

    /// The module did not return after it was stopped: answer for it and exit.
    fn give_up(&self, id: u64, s: MutexGuard<'_, State>) -> ! {
        let why = s.stopped;
        let hung_up = s.hung_up;
        drop(s);
        if !hung_up {
            let mut resp = stopped_response(why.unwrap_or(Stop::HungUp), Map::new());
            if let Response::Failed { msg, .. } = &mut resp {
                msg.push_str(&format!(
                    "; the module did not stop within {GRACE:?} after that, so the agent exited"
                ));
            }
            let _ = self.answer(id, resp);
        }
        eprintln!("fixpoint agent: a stopped module did not return within {GRACE:?}; exiting");
        std::process::exit(1);
    }
}

/// The answer for a request that was stopped, keeping what the module returned (a killed
/// command's rc and output).
pub fn stopped_response(why: Stop, mut result: Map<String, serde_json::Value>) -> Response {
    let msg = match why {
        Stop::TimedOut(ms) => {
            let period = if ms % 1000 == 0 {
                json!(ms / 1000)
            } else {
                json!(ms as f64 / 1000.0)
            };
            result.insert("timedout".into(), json!({ "period": period }));
            format!(
                "Timed out after {period} second(s): the agent killed the processes the task started, so its effect is unknown"
            )
        }
        Stop::HungUp => {
            "the controller hung up while the task ran: the agent killed the processes it started"
                .to_string()
        }
    };
    Response::Failed { msg, result }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gated_step_waits_for_its_own_batchs_gate() {
        let w = Watch::new(Box::new(std::io::sink()));
        let waiter = {
            let w = w.clone();
            std::thread::spawn(move || w.wait_gate(7, 2))
        };
        // Another batch's gate, and a lower one of this batch, leave it waiting.
        w.open_gate(6, 5);
        w.open_gate(7, 1);
        w.open_gate(7, 2);
        assert!(waiter.join().unwrap());
        assert!(w.wait_gate(7, 1), "a gate below the one opened is open");
    }

    /// What reached the "pipe" under the agent's buffer.
    #[derive(Clone, Default)]
    struct Pipe(Arc<Mutex<Vec<u8>>>);

    impl Write for Pipe {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn step_answers_wait_in_the_buffer_until_a_flush_a_gate_or_the_batch_end() {
        let pipe = Pipe::default();
        let w = Watch::new(Box::new(std::io::BufWriter::new(pipe.clone())));
        let step = |index| Response::Step {
            index,
            resp: Box::new(Response::Ack),
        };
        let sent = || pipe.0.lock().unwrap().len();
        w.answer(1, step(0)).unwrap();
        w.answer(1, step(1)).unwrap();
        assert_eq!(sent(), 0, "held");
        w.flush().unwrap();
        let two = sent();
        assert!(two > 0);
        // A step that waits at a gate sends what is held first: the controller decides the
        // gate from it.
        w.answer(1, step(2)).unwrap();
        w.open_gate(1, 1);
        assert!(w.wait_gate(1, 1));
        let three = sent();
        assert!(three > two);
        // Any other answer (the batch's end) sends at once, with what was held.
        w.answer(1, step(3)).unwrap();
        w.answer(1, Response::BatchEnd { ran: 4 }).unwrap();
        assert!(sent() > three);
    }

    #[test]
    fn a_cancelled_batch_or_a_hang_up_ends_the_wait() {
        let w = Watch::new(Box::new(std::io::sink()));
        let waiter = {
            let w = w.clone();
            std::thread::spawn(move || w.wait_gate(3, 1))
        };
        w.cancel_batch(3);
        assert!(!waiter.join().unwrap());
        assert!(!w.wait_gate(3, 1));
        let w = Watch::new(Box::new(std::io::sink()));
        let waiter = {
            let w = w.clone();
            std::thread::spawn(move || w.wait_gate(1, 1))
        };
        w.hang_up();
        assert!(!waiter.join().unwrap());
    }
}
