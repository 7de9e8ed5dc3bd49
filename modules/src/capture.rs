//! Bounded capture of a child's output: the first and last half of a cap are kept, the middle is
//! counted and dropped, so a command that prints gigabytes costs the agent (and the controller,
//! which receives the result) a fixed amount of memory.

use std::collections::VecDeque;
use std::io::Read;

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

/// Read `r` to its end, keeping at most `cap` bytes (head and tail). Read errors end the
/// capture: what arrived is what the command said.
pub fn read_capped<R: Read>(mut r: R, cap: usize) -> Captured {
    let half = cap / 2;
    let mut out = Captured::default();
    let mut tail: VecDeque<u8> = VecDeque::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        out.total += n as u64;
        let mut chunk = &buf[..n];
        if out.head.len() < half {
            let take = chunk.len().min(half - out.head.len());
            out.head.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
        }
        tail.extend(chunk);
        if tail.len() > half {
            let excess = tail.len() - half;
            tail.drain(..excess);
        }
    }
    out.tail = tail.into();
    // When the middle was dropped, the cuts may fall inside a UTF-8 character: drop its pieces,
    // so that the text is not given replacement characters it never printed.
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
    fn cuts_do_not_split_characters() {
        let text = "é".repeat(50);
        let c = read_capped(text.as_bytes(), 21);
        assert!(std::str::from_utf8(&c.head).is_ok());
        assert!(std::str::from_utf8(&c.tail).is_ok());
        assert_eq!(c.omitted(), 100 - (c.head.len() + c.tail.len()) as u64);
    }
}
