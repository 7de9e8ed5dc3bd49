//! Facts of the host's processors, memory, user, clock and network addresses, under the names
//! and in the forms ansible-core's fact collectors give them.

use serde_json::{json, Value};

/// `ansible_processor_count` (physical packages), `_cores` (per package), `_threads_per_core`
/// and `_nproc` (the CPUs this process may run on), read from /proc/cpuinfo as ansible-core
/// reads them on Linux.
pub fn processors(cpuinfo: &str, nproc: usize) -> Vec<(&'static str, Value)> {
    let field = |line: &str, key: &str| -> Option<String> {
        let (k, v) = line.split_once(':')?;
        (k.trim() == key).then(|| v.trim().to_string())
    };
    let mut packages = std::collections::BTreeSet::new();
    let (mut cores, mut siblings, mut processors) = (None, None, 0usize);
    for line in cpuinfo.lines() {
        if let Some(id) = field(line, "physical id") {
            packages.insert(id);
        }
        cores = cores.or_else(|| field(line, "cpu cores").and_then(|v| v.parse::<u64>().ok()));
        siblings = siblings.or_else(|| field(line, "siblings").and_then(|v| v.parse::<u64>().ok()));
        processors += usize::from(field(line, "processor").is_some());
    }
    // Without `physical id` lines (some virtual machines), each processor is its own package.
    let count = if packages.is_empty() {
        processors
    } else {
        packages.len()
    };
    let cores = cores.unwrap_or(1);
    let threads = match siblings {
        Some(s) if cores > 0 => s / cores,
        _ => 1,
    };
    vec![
        ("processor_count", json!(count)),
        ("processor_cores", json!(cores)),
        ("processor_threads_per_core", json!(threads)),
        ("processor_nproc", json!(nproc)),
    ]
}

/// `ansible_memfree_mb`, `_swaptotal_mb`, `_swapfree_mb` from /proc/meminfo (kB, as MiB).
pub fn memory(meminfo: &str) -> Vec<(&'static str, Value)> {
    let mb = |key: &str| {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |kb| kb / 1024)
    };
    vec![
        ("memfree_mb", json!(mb("MemFree"))),
        ("swaptotal_mb", json!(mb("SwapTotal"))),
        ("swapfree_mb", json!(mb("SwapFree"))),
    ]
}

/// The user the facts are gathered as: `ansible_user_dir`, `_shell`, `_gecos`, `_gid`, and
/// `ansible_real_user_id`/`_group_id`.
pub fn user() -> Vec<(&'static str, Value)> {
    let uid = nix::unistd::getuid();
    let mut facts = vec![
        ("real_user_id", json!(uid.as_raw())),
        ("real_group_id", json!(nix::unistd::getgid().as_raw())),
    ];
    if let Ok(Some(u)) = nix::unistd::User::from_uid(nix::unistd::geteuid()) {
        facts.push(("user_dir", json!(u.dir.to_string_lossy())));
        facts.push(("user_shell", json!(u.shell.to_string_lossy())));
        facts.push(("user_gecos", json!(u.gecos.to_string_lossy())));
        facts.push(("user_gid", json!(u.gid.as_raw())));
    }
    facts
}

/// `ansible_lsb`, when the host has `lsb_release` (or /etc/lsb-release), as ansible-core
/// gathers it only then: the values `lsb_release -a` prints, which it takes from os-release.
pub fn lsb(os: &std::collections::HashMap<String, String>) -> Option<Value> {
    let has = [
        "/usr/bin/lsb_release",
        "/bin/lsb_release",
        "/etc/lsb-release",
    ];
    if !has.iter().any(|p| std::path::Path::new(p).exists()) {
        return None;
    }
    let get = |k: &str| os.get(k).cloned().unwrap_or_default();
    let release = get("VERSION_ID");
    let id = get("NAME")
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    Some(json!({
        "codename": get("VERSION_CODENAME"),
        "description": get("PRETTY_NAME"),
        "id": id,
        "major_release": release.split('.').next().unwrap_or_default(),
        "release": release,
    }))
}

/// `ansible_interfaces` (the entries of /sys/class/net, in the order the directory lists
/// them), `ansible_all_ipv4_addresses` and `ansible_all_ipv6_addresses` (every address but
/// the host-scoped ones: loopback).
pub fn network() -> Vec<(&'static str, Value)> {
    let interfaces: Vec<String> = std::fs::read_dir("/sys/class/net")
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let (mut v4, mut v6) = (Vec::new(), Vec::new());
    if let Ok(addrs) = nix::ifaddrs::getifaddrs() {
        for a in addrs {
            let Some(addr) = a.address else { continue };
            if let Some(s) = addr.as_sockaddr_in() {
                let ip = s.ip();
                if !ip.is_loopback() {
                    v4.push((a.interface_name.clone(), ip.to_string()));
                }
            } else if let Some(s) = addr.as_sockaddr_in6() {
                let ip = s.ip();
                if !ip.is_loopback() {
                    v6.push((a.interface_name.clone(), ip.to_string()));
                }
            }
        }
    }
    // In the interfaces' order, as ansible-core collects them interface by interface.
    let ordered = |list: Vec<(String, String)>| -> Value {
        let at = |name: &str| {
            interfaces
                .iter()
                .position(|i| i == name)
                .unwrap_or(usize::MAX)
        };
        let mut list = list;
        list.sort_by_key(|(i, _)| at(i));
        json!(list.into_iter().map(|(_, a)| a).collect::<Vec<_>>())
    };
    vec![
        ("all_ipv4_addresses", ordered(v4)),
        ("all_ipv6_addresses", ordered(v6)),
        ("interfaces", json!(interfaces)),
    ]
}

/// `ansible_date_time`: the host's clock now, in its local time zone (the ISO 8601 forms in
/// UTC), each field a string as ansible-core gives it.
pub fn date_time() -> Value {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs() as libc::time_t;
    let micros = format!("{:06}", now.subsec_micros());
    let local = |f: &str| strftime(secs, f, false);
    let utc = |f: &str| strftime(secs, f, true);
    let epoch = now.as_secs().to_string();
    json!({
        "year": local("%Y"),
        "month": local("%m"),
        "weekday": local("%A"),
        "weekday_number": local("%w"),
        "weeknumber": local("%W"),
        "day": local("%d"),
        "hour": local("%H"),
        "minute": local("%M"),
        "second": local("%S"),
        "epoch": epoch,
        "epoch_int": epoch,
        "date": local("%Y-%m-%d"),
        "time": local("%H:%M:%S"),
        "iso8601_micro": format!("{}.{micros}Z", utc("%Y-%m-%dT%H:%M:%S")),
        "iso8601": utc("%Y-%m-%dT%H:%M:%SZ"),
        "iso8601_basic": format!("{}{micros}", local("%Y%m%dT%H%M%S")),
        "iso8601_basic_short": local("%Y%m%dT%H%M%S"),
        "tz": local("%Z"),
        "tz_dst": dst_name(secs),
        "tz_offset": local("%z"),
    })
}

/// The time zone's daylight-saving name (Python's `time.tzname[1]`): the name in whichever of
/// January and July is in DST this year, the zone's one name when it has none.
fn dst_name(now: libc::time_t) -> String {
    let year_start = now - now % (365 * 86_400);
    let probes = [year_start, year_start + 182 * 86_400];
    probes
        .iter()
        .find(|t| tm_of(**t, false).is_some_and(|tm| tm.tm_isdst > 0))
        .map_or_else(|| strftime(now, "%Z", false), |t| strftime(*t, "%Z", false))
}

/// The broken-down time of `t`, local or UTC.
fn tm_of(t: libc::time_t, utc: bool) -> Option<libc::tm> {
    // SAFETY: a zeroed `tm` is valid; the `_r` calls fill it from `t` and keep no pointer.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        let done = match utc {
            true => libc::gmtime_r(&t, &mut tm),
            false => libc::localtime_r(&t, &mut tm),
        };
        (!done.is_null()).then_some(tm)
    }
}

/// `t` formatted with C's `strftime`, local or UTC.
fn strftime(t: libc::time_t, format: &str, utc: bool) -> String {
    let (Some(tm), Ok(f)) = (tm_of(t, utc), std::ffi::CString::new(format)) else {
        return String::new();
    };
    let mut buf = [0u8; 128];
    // SAFETY: `buf` is writable for its length, `f` is NUL-terminated, `tm` is initialised;
    // strftime writes at most `buf.len()` bytes and returns how many (0 when they do not fit).
    let n = unsafe {
        libc::strftime(
            buf.as_mut_ptr().cast::<libc::c_char>(),
            buf.len(),
            f.as_ptr(),
            &tm,
        )
    };
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn processors_and_memory_read_as_ansible_core_reads_them() {
        let cpuinfo = "processor\t: 0\nphysical id\t: 0\nsiblings\t: 4\ncpu cores\t: 2\n\n\
                       processor\t: 1\nphysical id\t: 0\nsiblings\t: 4\ncpu cores\t: 2\n";
        let p = super::processors(cpuinfo, 2);
        assert!(p.contains(&("processor_count", json!(1))), "{p:?}");
        assert!(p.contains(&("processor_cores", json!(2))));
        assert!(p.contains(&("processor_threads_per_core", json!(2))));
        let bare = super::processors("processor\t: 0\nprocessor\t: 1\n", 2);
        assert!(bare.contains(&("processor_count", json!(2))), "{bare:?}");
        let m = super::memory("MemTotal: 2048000 kB\nMemFree: 1048576 kB\nSwapTotal: 0 kB\n");
        assert!(m.contains(&("memfree_mb", json!(1024))), "{m:?}");
        assert!(m.contains(&("swapfree_mb", json!(0))));
    }

    #[test]
    fn date_time_fields_agree_with_each_other() {
        let d = super::date_time();
        let date = d["date"].as_str().unwrap();
        assert_eq!(
            date,
            format!(
                "{}-{}-{}",
                d["year"].as_str().unwrap(),
                d["month"].as_str().unwrap(),
                d["day"].as_str().unwrap()
            )
        );
        assert_eq!(d["epoch"], d["epoch_int"]);
        assert!(d["iso8601"].as_str().unwrap().ends_with('Z'));
        assert_eq!(d["iso8601_basic"].as_str().unwrap().len(), 21, "{d}");
    }
}
