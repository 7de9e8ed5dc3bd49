//! The file-descriptor budget of a run: how many descriptors the controller holds per connected
//! host, and raising `RLIMIT_NOFILE` to fit it before any host is touched.
//!
//! Every host keeps its agent for the whole run, so descriptors grow with the hosts, not with
//! `--forks`. What one SSH host holds in the controller, measured in `/proc/<pid>/fd` during
//! bench/run.sh (the most at once: 37 with 5 hosts, 112 with 20, so 5 per host; bench/RESULTS.md,
//! "Scale"): the agent channel's stdin, stdout and stderr pipes (their other ends are passed to
//! the ssh master through its control socket) and the control-socket connections that wait for
//! the channel's exit. The master itself is another process with its own limit. While a handshake
//! is in flight (at most `--connect-concurrency` of them) the `ssh` being started holds a few
//! more: the pipes it reports through.

use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// Descriptors one connected host holds in the controller: the 5 measured, and room for part
/// of a second (`become`) agent on the same host; `ensure` doubles the total besides.
pub const PER_HOST: u64 = 8;
/// Descriptors one handshake in flight holds on top (the starting `ssh` client's pipes).
pub const PER_HANDSHAKE: u64 = 4;
/// The controller's own: stdio, the async runtime (epoll, eventfds, one per worker), the
/// playbook and template files being read, the local agent of `localhost` tasks.
pub const BASE: u64 = 64;

/// Descriptors a run over `hosts` hosts with `handshakes` handshakes in flight may hold.
pub fn needed(hosts: usize, handshakes: usize) -> u64 {
    let hosts = hosts as u64;
    let handshakes = (handshakes as u64).min(hosts);
    BASE + hosts * PER_HOST + handshakes * PER_HANDSHAKE
}

/// What `ensure` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Raised {
    /// The soft limit was enough.
    No,
    /// The soft limit was raised from the first number to the second (at most the hard limit).
    From(u64, u64),
}

/// Make the soft `RLIMIT_NOFILE` fit a run over `hosts` hosts: raise it (up to the hard limit)
/// when it is too small, or say which limit to raise and how when even the hard one is.
pub fn ensure(hosts: usize, handshakes: usize) -> Result<Raised, String> {
    let need = needed(hosts, handshakes);
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)
        .map_err(|e| format!("cannot read the open-file limit (RLIMIT_NOFILE): {e}"))?;
    decide(need, soft, hard, hosts, handshakes).and_then(|new| match new {
        None => Ok(Raised::No),
        Some(new) => {
            setrlimit(Resource::RLIMIT_NOFILE, new, hard).map_err(|e| {
                format!(
                    "cannot raise the open-file limit (RLIMIT_NOFILE) from {soft} to {new}: {e}"
                )
            })?;
            Ok(Raised::From(soft, new))
        }
    })
}

/// The new soft limit (None: keep it), or the message for a hard limit below `need`.
fn decide(
    need: u64,
    soft: u64,
    hard: u64,
    hosts: usize,
    handshakes: usize,
) -> Result<Option<u64>, String> {
    if soft >= need {
        return Ok(None);
    }
    if hard < need {
        return Err(format!(
            "this run needs about {need} open files ({hosts} hosts × {PER_HOST} + {} handshakes \
             × {PER_HANDSHAKE} + {BASE}), but the hard open-file limit (RLIMIT_NOFILE) is {hard}: \
             raise it (`ulimit -Hn {need}` as root, `LimitNOFILE=` in a systemd unit, or `nofile` \
             in /etc/security/limits.conf), or run over fewer hosts at once (`--limit`, or \
             `serial:` in the play)",
            (handshakes as u64).min(hosts as u64)
        ));
    }
    // Twice what the estimate says, when the hard limit allows: `become` agents and `delegate_to`
    // add channels the count above cannot see. Not the hard limit itself, which may be huge:
    // the local agent's commands inherit the soft limit, and some programs walk every
    // descriptor up to it.
    Ok(Some(need.saturating_mul(2).min(hard)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_soft_limit_that_fits_is_kept() {
        assert_eq!(decide(needed(5, 8), 1024, 4096, 5, 8), Ok(None));
    }

    #[test]
    fn a_small_soft_limit_is_raised_towards_the_hard_one() {
        let need = needed(200, 8);
        assert!(need > 1024);
        assert_eq!(decide(need, 1024, 1 << 20, 200, 8), Ok(Some(2 * need)));
        assert_eq!(decide(need, 1024, need + 1, 200, 8), Ok(Some(need + 1)));
    }

    #[test]
    fn a_hard_limit_below_the_need_names_the_limit_and_the_fix() {
        let need = needed(1000, 8);
        let msg = decide(need, 1024, 1024, 1000, 8).unwrap_err();
        assert!(msg.contains("RLIMIT_NOFILE"), "{msg}");
        assert!(msg.contains("1000 hosts"), "{msg}");
        assert!(msg.contains(&format!("ulimit -Hn {need}")), "{msg}");
    }
}
