//! `--shard i/N`: which inventory hosts one of N independent controllers runs, by rendezvous
//! (highest-random-weight) hashing of the inventory hostname.
//!
//! Every host gets a weight per shard, the first 8 bytes (big-endian) of
//! SHA-256(`hostname` ‖ 0x00 ‖ the shard's index in decimal); it belongs to the shard with the
//! highest weight (the lower index on a tie). The assignment depends on the host's name and N
//! only, never on the other hosts, so adding or removing hosts moves no other host, and going
//! from N to N+1 shards moves only the hosts the new shard wins (about 1/(N+1) of them).
//! SHA-256 rather than Rust's hasher: its seed is random per process, and every controller (of
//! any fixpoint version) must agree. Indexes count from 0, as `JOB_COMPLETION_INDEX` does.
//!
//! Hosts outside the inventory (the implicit `localhost`: the controller itself) are in every
//! shard: each controller is its own localhost.

use super::Inventory;
use sha2::{Digest, Sha256};
use std::fmt;
use std::str::FromStr;

/// One shard of N: `index` in `0..count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// The shard (of `count`) that a host belongs to.
    pub fn of(host: &str, count: usize) -> usize {
        (0..count.max(1))
            .map(|j| (weight(host, j), std::cmp::Reverse(j)))
            .max()
            .map_or(0, |(_, std::cmp::Reverse(j))| j)
    }

    /// Whether this shard runs the host.
    pub fn owns(&self, host: &str) -> bool {
        Shard::of(host, self.count) == self.index
    }

    /// Keep the hosts this shard runs (those outside the inventory stay: every shard has them).
    pub fn retain(&self, inv: &Inventory, hosts: &mut Vec<String>) {
        hosts.retain(|h| !inv.has_host(h) || self.owns(h));
    }

    /// For a host of the inventory that another shard runs, that shard (`i/N`); `None` for
    /// this shard's hosts and for names outside the inventory (the controller's `localhost`, a
    /// machine no shard runs).
    pub fn other_owner(&self, inv: &Inventory, host: &str) -> Option<Shard> {
        if !inv.has_host(host) || inv.is_implicit(host) {
            return None;
        }
        let index = Shard::of(host, self.count);
        (index != self.index).then_some(Shard {
            index,
            count: self.count,
        })
    }
}

/// The host's weight for shard `j`.
fn weight(host: &str, j: usize) -> u64 {
    let mut h = Sha256::new();
    h.update(host.as_bytes());
    h.update([0u8]);
    h.update(j.to_string().as_bytes());
    let d = h.finalize();
    u64::from_be_bytes(d[..8].try_into().expect("a SHA-256 digest has 32 bytes"))
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    /// `i/N`, `i` counting from 0 (`0/4` … `3/4`).
    fn from_str(s: &str) -> Result<Shard, String> {
        let usage = "write the shard as INDEX/COUNT, the index counting from 0 \
                     (0/4, 1/4, 2/4, 3/4), e.g. --shard \"$JOB_COMPLETION_INDEX/4\"";
        let Some((i, n)) = s.trim().split_once('/') else {
            return Err(format!("`{s}` is not a shard: {usage}"));
        };
        let num = |part: &str, what: &str| {
            part.trim()
                .parse::<usize>()
                .map_err(|_| format!("`{s}`: the {what} `{part}` is not a whole number: {usage}"))
        };
        let (index, count) = (num(i, "index")?, num(n, "count")?);
        if count == 0 {
            return Err(format!("`{s}`: the count must be at least 1: {usage}"));
        }
        if index >= count {
            return Err(format!(
                "`{s}`: the index counts from 0, so it must be below {count} (0/{count} … {}/{count})",
                count - 1
            ));
        }
        Ok(Shard { index, count })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn names(range: std::ops::Range<usize>) -> Vec<String> {
        range.map(|i| format!("web{i:03}.example.com")).collect()
    }

    #[test]
    fn every_host_is_in_exactly_one_shard() {
        let hosts = names(0..200);
        for n in 1..=16 {
            for h in &hosts {
                let owners = (0..n)
                    .filter(|&i| Shard { index: i, count: n }.owns(h))
                    .count();
                assert_eq!(owners, 1, "{h} with N={n}");
            }
        }
    }

    #[test]
    fn adding_hosts_or_a_shard_moves_few() {
        let old = names(0..200);
        let more = names(0..220);
        for n in 1..=16 {
            // Adding 10 % hosts: a host's shard depends on its name and N only, so none moves.
            let before: BTreeMap<&String, usize> =
                old.iter().map(|h| (h, Shard::of(h, n))).collect();
            let after: BTreeMap<&String, usize> =
                more.iter().map(|h| (h, Shard::of(h, n))).collect();
            let moved = old.iter().filter(|h| before[h] != after[h]).count();
            assert!(
                moved as f64 <= 1.5 / n as f64 * old.len() as f64,
                "N={n}: {moved} moved"
            );
            assert_eq!(moved, 0, "N={n}");
            // One more shard: only the hosts the new shard wins move, about 1/(N+1).
            let moved: Vec<&String> = old
                .iter()
                .filter(|h| Shard::of(h, n) != Shard::of(h, n + 1))
                .collect();
            assert!(
                moved.iter().all(|h| Shard::of(h, n + 1) == n),
                "N={n}: a host moved between old shards"
            );
            let bound = 1.5 / (n + 1) as f64 * old.len() as f64;
            assert!(
                moved.len() as f64 <= bound,
                "N={n}→{}: {} of 200 moved, more than {bound}",
                n + 1,
                moved.len()
            );
        }
    }

    #[test]
    fn shards_are_balanced() {
        let hosts = names(0..200);
        for n in 1..=16 {
            let mut sizes: BTreeMap<usize, usize> = (0..n).map(|i| (i, 0)).collect();
            for h in &hosts {
                *sizes.get_mut(&Shard::of(h, n)).expect("index below N") += 1;
            }
            let mean = 200.0 / n as f64;
            for (i, size) in sizes {
                let size = size as f64;
                assert!(
                    size >= mean * 0.4 && size <= mean * 1.6,
                    "N={n}: shard {i} has {size} hosts, the mean is {mean}"
                );
            }
        }
    }

    /// The assignment is part of the interface (controllers of different versions must
    /// agree): these must never change.
    #[test]
    fn assignment_is_fixed() {
        let got: Vec<usize> = ["web1", "web2", "db1", "10.0.0.7", "host-with-a-long-name"]
            .iter()
            .map(|h| Shard::of(h, 8))
            .collect();
        assert_eq!(got, vec![2, 0, 7, 4, 0]);
    }

    #[test]
    fn parsing() {
        assert_eq!("3/8".parse(), Ok(Shard { index: 3, count: 8 }));
        assert_eq!(" 0/1 ".parse(), Ok(Shard { index: 0, count: 1 }));
        let err = |s: &str| s.parse::<Shard>().unwrap_err();
        assert!(
            err("8/8").contains("must be below 8 (0/8 … 7/8)"),
            "{}",
            err("8/8")
        );
        assert!(err("1/0").contains("at least 1"));
        assert!(err("3").contains("INDEX/COUNT"));
        assert!(err("a/4").contains("index `a`"));
        assert!(err("-1/4").contains("not a whole number"));
        assert_eq!(Shard { index: 2, count: 5 }.to_string(), "2/5");
    }
}
