//! Bounded capture of a child's output: the first and last half of a cap are kept, the middle is
//! counted and dropped, so a command that prints gigabytes costs the agent (and the controller,
//! which receives the result) a fixed amount of memory.

use std::collections::VecDeque;
use std::io::Read;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What was read from one stream.
#[derive(Debug, Default)]
pub struct Captured {
    /// The first `cap / 2` bytes.
    pub head: Vec<u8>,
    /// The last bytes (up to `cap / 2`) after the head; empty when everything fit in the head.
    pub tail: Vec<u8>,
    /// Every byte the stream carried.
    pub total: u64,
}

impl Captured {
    /// Bytes read but not kept.
    pub fn omitted(&self) -> u64 {
        self.total
            .saturating_sub((self.head.len() + self.tail.len()) as u64)
    }
}

/// A capture being filled: the head, then a sliding tail of at most half the cap.
struct Capturing {
    half: usize,
    out: Captured,
    tail: VecDeque<u8>,
}

impl Capturing {
    fn new(cap: usize) -> Self {
        Capturing {
            half: cap / 2,
            out: Captured::default(),
            tail: VecDeque::new(),
        }
    }

    fn push(&mut self, mut chunk: &[u8]) {
        self.out.total += chunk.len() as u64;
        if self.out.head.len() < self.half {
            let take = chunk.len().min(self.half - self.out.head.len());
            self.out.head.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
        }
        self.tail.extend(chunk);
        if self.tail.len() > self.half {
            let excess = self.tail.len() - self.half;
            self.tail.drain(..excess);
        }
    }

    fn finish(self) -> Captured {
        let mut out = self.out;
        out.tail = self.tail.into();
        // When the middle was dropped, the cuts may fall inside a UTF-8 character: drop its
        // pieces, so that the text is not given replacement characters it never printed.
        if out.omitted() > 0 {
            let keep = utf8_complete_prefix(&out.head);
            out.head.truncate(keep);
            let skip = out
                .tail
                .iter()
                .take(3)
                .take_while(|b| is_continuation(**b))
                .count();
            out.tail.drain(..skip);
        }
        out
    }
}

/// Read one chunk, retrying an interrupted read; None at the end (or on an error: what arrived
/// is what the command said).
fn read_chunk<R: Read>(r: &mut R, buf: &mut [u8]) -> Option<usize> {
    loop {
        match r.read(buf) {
            Ok(0) => return None,
            Ok(n) => return Some(n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        }
    }
}

/// Read `r` to its end, keeping at most `cap` bytes (head and tail). Read errors end the
/// capture: what arrived is what the command said.
pub fn read_capped<R: Read>(mut r: R, cap: usize) -> Captured {
    let mut c = Capturing::new(cap);
    let mut buf = vec![0u8; 64 * 1024];
    while let Some(n) = read_chunk(&mut r, &mut buf) {
        c.push(&buf[..n]);
    }
    c.finish()
}

/// One stream of [`Streams`].
struct Slot {
    cap: Option<Capturing>,
    done: bool,
}

/// A process's output streams, each read on a thread of its own into a bounded capture, that
/// can be taken before the streams end: ansible-core stops reading a command's pipes once the
/// command has exited and they stay silent for a second, so a background child that keeps them
/// open (`sleep 10 &`) does not hold the task.
pub struct Streams {
    shared: Arc<(Mutex<Vec<Slot>>, Condvar)>,
}

impl Default for Streams {
    fn default() -> Self {
        Streams::new()
    }
}

impl Streams {
    pub fn new() -> Self {
        Streams {
            shared: Arc::new((Mutex::new(Vec::new()), Condvar::new())),
        }
    }

    /// Start reading `r` (none: an empty stream, already ended).
    pub fn add<R: Read + Send + 'static>(&mut self, r: Option<R>, cap: usize) {
        let mut slots = lock(&self.shared.0);
        let i = slots.len();
        slots.push(Slot {
            cap: Some(Capturing::new(cap)),
            done: r.is_none(),
        });
        drop(slots);
        let Some(mut r) = r else { return };
        let shared = self.shared.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = read_chunk(&mut r, &mut buf);
                let mut slots = lock(&shared.0);
                match (n, slots[i].cap.as_mut()) {
                    (Some(n), Some(c)) => c.push(&buf[..n]),
                    // Ended, or taken: the capture is closed (dropping `r` closes the pipe).
                    _ => {
                        slots[i].done = true;
                        shared.1.notify_all();
                        return;
                    }
                }
                shared.1.notify_all();
            }
        });
    }

    /// Once the process has exited: what each stream carried, when every stream has ended or
    /// none has carried anything for `quiet`, whichever comes first.
    pub fn finish(self, quiet: Duration) -> Vec<Captured> {
        let (mutex, cond) = &*self.shared;
        let mut slots = lock(mutex);
        let total = |s: &[Slot]| -> u64 {
            s.iter()
                .map(|s| s.cap.as_ref().map_or(0, |c| c.out.total))
                .sum()
        };
        let mut seen = total(&slots);
        let mut since = Instant::now();
        while !slots.iter().all(|s| s.done) {
            let left = quiet.saturating_sub(since.elapsed());
            if left.is_zero() {
                break;
            }
            slots = cond
                .wait_timeout(slots, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
            let now = total(&slots);
            if now != seen {
                (seen, since) = (now, Instant::now());
            }
        }
        slots
            .iter_mut()
            .map(|s| s.cap.take().map(Capturing::finish).unwrap_or_default())
            .collect()
    }
}

/// Captures cannot be left half-updated by a panic: a poisoned lock is used as is.
fn lock(m: &Mutex<Vec<Slot>>) -> std::sync::MutexGuard<'_, Vec<Slot>> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// The length of `b` without a multi-byte character cut off at its end.
fn utf8_complete_prefix(b: &[u8]) -> usize {
    // A character is at most 4 bytes: look back at most 3 for its first byte.
    for back in 1..=b.len().min(4) {
        let i = b.len() - back;
        let lead = b[i];
        if is_continuation(lead) {
            continue;
        }
        let need = match lead {
            0x00..=0x7F => 1,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            _ => 4,
        };
        return if back >= need { b.len() } else { i };
    }
    b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_output_is_kept_whole() {
        let c = read_capped(&b"hello"[..], 16);
        assert_eq!(
            (c.head.as_slice(), c.tail.len(), c.total),
            (&b"hello"[..], 0, 5)
        );
        let c = read_capped(&b"0123456789abcdef"[..], 16);
        assert_eq!(c.omitted(), 0);
        assert_eq!([c.head, c.tail].concat(), b"0123456789abcdef");
    }

    #[test]
    fn large_output_keeps_head_and_tail_and_counts_the_rest() {
        let data: Vec<u8> = (0..100u8).collect();
        let c = read_capped(&data[..], 20);
        assert_eq!(c.head, (0..10u8).collect::<Vec<_>>());
        assert_eq!(c.tail, (90..100u8).collect::<Vec<_>>());
        assert_eq!((c.total, c.omitted()), (100, 80));
    }

    #[test]
    fn streams_end_with_their_writers_or_after_a_quiet_spell() {
        // Ended streams are taken at once, whole.
        let mut s = Streams::new();
        s.add(Some(&b"out"[..]), 16);
        s.add(None::<&'static [u8]>, 16);
        let t0 = Instant::now();
        let got = s.finish(Duration::from_secs(5));
        assert!(t0.elapsed() < Duration::from_secs(2));
        assert_eq!(got[0].head, b"out");
        assert_eq!(got[1].total, 0);
        // A pipe whose other end stays open: what came is taken once it is quiet.
        let (r, mut w) = std::io::pipe().unwrap();
        std::io::Write::write_all(&mut w, b"early").unwrap();
        let mut s = Streams::new();
        s.add(Some(r), 16);
        let t0 = Instant::now();
        let got = s.finish(Duration::from_millis(300));
        assert!(t0.elapsed() >= Duration::from_millis(300));
        assert!(t0.elapsed() < Duration::from_secs(3));
        assert_eq!(got[0].head, b"early");
        drop(w);
    }

    #[test]
    fn cuts_do_not_split_characters() {
        let text = "é".repeat(50);
        let c = read_capped(text.as_bytes(), 21);
        assert!(std::str::from_utf8(&c.head).is_ok());
        assert!(std::str::from_utf8(&c.tail).is_ok());
        assert_eq!(c.omitted(), 100 - (c.head.len() + c.tail.len()) as u64);
    }
}
