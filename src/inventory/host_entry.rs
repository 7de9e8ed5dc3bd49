//! Host entries as inventories write them: ranges (`web[01:03]`, `db-[a:c]`, steps), a `:port`
//! suffix, and IPv6 addresses (bare or `[addr]:port`), which carry colons of their own.

/// Expand a host entry (`web[01:03].example.com:2222`) into host names and an optional port.
pub(super) fn expand_host_pattern(entry: &str) -> Result<(Vec<String>, Option<u16>), String> {
    let (name, port) = split_host_port(entry)?;
    if name.is_empty() {
        return Err(format!("missing host name in `{entry}`"));
    }
    let names = if is_ipv6(&name) {
        vec![name]
    } else {
        expand_ranges(&name)?
    };
    Ok((names, port))
}

pub(super) fn split_host_port(entry: &str) -> Result<(String, Option<u16>), String> {
    let bad_port = |p: &str| {
        format!("invalid port `{p}` in host `{entry}`; write host:port with a port from 1 to 65535")
    };
    let parse_port = |p: &str| -> Result<u16, String> {
        p.parse::<u16>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| bad_port(p))
    };
    if let Some(rest) = entry.strip_prefix('[') {
        if let Some((inner, after)) = rest.split_once(']') {
            if is_ipv6(inner) {
                return match after.strip_prefix(':') {
                    Some(p) => Ok((inner.to_string(), Some(parse_port(p)?))),
                    None if after.is_empty() => Ok((inner.to_string(), None)),
                    None => Err(format!(
                        "unexpected `{after}` after IPv6 address in `{entry}`"
                    )),
                };
            }
        }
    }
    // Colons inside brackets belong to ranges (`web[1:3]`), not to a port.
    let mut depth = 0i32;
    let mut colons = Vec::new();
    for (i, c) in entry.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ':' if depth == 0 => colons.push(i),
            _ => {}
        }
    }
    match colons.as_slice() {
        [] => Ok((entry.to_string(), None)),
        [i] => Ok((entry[..*i].to_string(), Some(parse_port(&entry[i + 1..])?))),
        // Several colons: a bare IPv6 address, which cannot carry a port.
        _ => Ok((entry.to_string(), None)),
    }
}

/// The most hosts one entry may expand to. Ansible has no limit, and `web[0:99999999999]`
/// makes it build the list until memory runs out; here such an entry (a typo, or an inventory
/// written to exhaust the controller) is refused before anything is built.
const MAX_RANGE_HOSTS: u64 = 100_000;

/// Expand `[a:b]` / `[a:b:step]` ranges (numeric, zero padding kept, or single letters).
fn expand_ranges(name: &str) -> Result<Vec<String>, String> {
    expand_limited(name, MAX_RANGE_HOSTS).map_err(|e| match e {
        Expand::Bad(msg) => msg,
        Expand::TooMany => format!(
            "host entry `{name}` expands to more than {MAX_RANGE_HOSTS} hosts; \
             split it into several entries"
        ),
    })
}

enum Expand {
    Bad(String),
    /// More names than the budget: reported once, about the whole entry.
    TooMany,
}

impl From<String> for Expand {
    fn from(msg: String) -> Self {
        Expand::Bad(msg)
    }
}

/// `expand_ranges` giving up as soon as the entry would yield more than `budget` names.
fn expand_limited(name: &str, budget: u64) -> Result<Vec<String>, Expand> {
    let Some(open) = name.find('[') else {
        if name.contains(']') {
            return Err(format!("unmatched `]` in host name `{name}`").into());
        }
        return Ok(vec![name.to_string()]);
    };
    let close = name[open..]
        .find(']')
        .map(|i| open + i)
        .ok_or_else(|| format!("unclosed `[` in host name `{name}`"))?;
    let (head, inner, tail) = (&name[..open], &name[open + 1..close], &name[close + 1..]);
    let parts: Vec<&str> = inner.split(':').collect();
    if parts.len() != 2 && parts.len() != 3 {
        return Err(format!(
            "host range `[{inner}]` in `{name}` must be [start:end] or [start:end:step]"
        )
        .into());
    }
    let beg = if parts[0].is_empty() { "0" } else { parts[0] };
    let end = parts[1];
    if end.is_empty() {
        return Err(format!("host range `[{inner}]` in `{name}` has no end value").into());
    }
    let step: usize = match parts.get(2) {
        None => 1,
        Some(s) => s.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
            format!("host range step `{s}` in `{name}` must be a positive number")
        })?,
    };
    const LETTERS: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let items: Vec<String> = if let (Some(b), Some(e)) = (
        LETTERS.find(beg).filter(|_| beg.len() == 1),
        LETTERS.find(end).filter(|_| end.len() == 1),
    ) {
        if b > e {
            return Err(
                format!("host range `[{inner}]` in `{name}` must have start <= end").into(),
            );
        }
        if ((e - b) / step + 1) as u64 > budget {
            return Err(Expand::TooMany);
        }
        LETTERS[b..=e]
            .chars()
            .step_by(step)
            .map(String::from)
            .collect()
    } else {
        let (Ok(b), Ok(e)) = (beg.parse::<u64>(), end.parse::<u64>()) else {
            return Err(format!(
                "host range `[{inner}]` in `{name}` must be numbers (`[01:20]`) or single letters (`[a:f]`)"
            ).into());
        };
        if b > e {
            return Err(
                format!("host range `[{inner}]` in `{name}` must have start <= end").into(),
            );
        }
        // Counted before anything is built: `[0:18446744073709551615]` is one line of text.
        let count = ((e - b) / step as u64).saturating_add(1);
        if count > budget {
            return Err(Expand::TooMany);
        }
        // `01` pads every number to the width of the bounds.
        let width = if beg.len() > 1 && beg.starts_with('0') {
            if beg.len() != end.len() {
                return Err(format!(
                    "host range `[{inner}]` in `{name}`: a zero-padded start needs an end of the same width"
                ).into());
            }
            beg.len()
        } else {
            0
        };
        (b..=e)
            .step_by(step)
            .map(|n| format!("{n:0width$}"))
            .collect()
    };
    // The names so far multiply with the tail's: it gets what is left of the budget.
    let tails = expand_limited(tail, budget / items.len().max(1) as u64)?;
    Ok(items
        .iter()
        .flat_map(|i| tails.iter().map(move |t| format!("{head}{i}{t}")))
        .collect())
}

pub(super) fn is_ipv6(s: &str) -> bool {
    let colons = s.matches(':').count();
    (s.contains("::") || colons == 7)
        && s.chars()
            .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.' || c == '%')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::testutil::strs;

    #[test]
    fn ranges_keep_padding_and_support_steps_and_letters() {
        assert_eq!(
            expand_ranges("web[08:10].x").unwrap(),
            strs(&["web08.x", "web09.x", "web10.x"])
        );
        assert_eq!(
            expand_ranges("n[1:10:4]").unwrap(),
            strs(&["n1", "n5", "n9"])
        );
        assert_eq!(
            expand_ranges("db-[a:c]").unwrap(),
            strs(&["db-a", "db-b", "db-c"])
        );
        assert_eq!(
            expand_ranges("r[1:2]c[a:b]").unwrap(),
            strs(&["r1ca", "r1cb", "r2ca", "r2cb"])
        );
        assert!(expand_ranges("web[01:100]").is_err());
        assert!(expand_ranges("web[5:1]").is_err());
        assert!(expand_ranges("web[1:3").is_err());
    }

    #[test]
    fn ranges_past_the_host_limit_are_refused_before_expanding() {
        assert_eq!(expand_ranges("h[1:100000]").unwrap().len(), 100_000);
        let e = expand_ranges("h[0:100000]").unwrap_err();
        assert!(e.contains("more than 100000 hosts"), "{e}");
        // A product of ranges counts too, and a huge one is refused without being built.
        assert!(expand_ranges("a[1:1000]b[1:1000]").is_err());
        assert!(expand_ranges("h[0:18446744073709551615]").is_err());
        assert!(expand_ranges("a[0:9]b[0:18446744073709551615:2]c[a:z]").is_err());
    }
}
