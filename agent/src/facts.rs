//! Facts gathered natively on the host (`setup`/`gather_facts`), under Ansible's fact names.

use serde_json::{json, Map, Value};

/// Facts gathered natively from /proc, /etc/os-release and uname, in Ansible's names.
pub fn facts() -> Map<String, Value> {
    let uname = nix::sys::utsname::uname().ok();
    let node = uname
        .as_ref()
        .map(|u| u.nodename().to_string_lossy().into_owned())
        .unwrap_or_default();
    let os = read_os_release();
    let id = os.get("ID").cloned().unwrap_or_else(|| "linux".into());
    let distribution = match id.as_str() {
        "debian" => "Debian".to_string(),
        "ubuntu" => "Ubuntu".to_string(),
        "centos" => "CentOS".to_string(),
        "rhel" => "RedHat".to_string(),
        "fedora" => "Fedora".to_string(),
        "rocky" => "Rocky".to_string(),
        "almalinux" => "AlmaLinux".to_string(),
        "alpine" => "Alpine".to_string(),
        "arch" => "Archlinux".to_string(),
        other => os.get("NAME").cloned().unwrap_or_else(|| capitalize(other)),
    };
    let os_family =
        fixpoint_modules::pkg_mgr::os_family(&id, &os.get("ID_LIKE").cloned().unwrap_or_default());
    let uid = nix::unistd::geteuid().as_raw();
    // `vars_os`: `vars` panics on a variable that is not UTF-8, and the environment is the
    // host's to choose. Such bytes are shown replaced, as command output is.
    let env: Map<String, Value> = std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                Value::String(v.to_string_lossy().into_owned()),
            )
        })
        .collect();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memtotal_mb = Some(meminfo.as_str())
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| {
                    l.split_whitespace()
                        .nth(1)
                        .and_then(|k| k.parse::<u64>().ok())
                })
        })
        .map(|kb| kb / 1024)
        .unwrap_or(0);
    let mut facts = Map::new();
    let mut put = |k: &str, v: Value| {
        facts.insert(k.to_string(), v);
    };
    put(
        "hostname",
        json!(node.split('.').next().unwrap_or_default()),
    );
    put("nodename", json!(node));
    let fqdn = fqdn(&node);
    put("fqdn", json!(fqdn));

    put("os_family", json!(os_family));
    put(
        "pkg_mgr",
        json!(fixpoint_modules::pkg_mgr::pkg_mgr(os_family)),
    );
    put("distribution", json!(distribution));
    let debian_version = std::fs::read_to_string("/etc/debian_version").unwrap_or_default();
    let os_release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    for (k, v) in debian_file_facts(&os_release, &debian_version) {
        put(k, v);
    }
    put(
        "distribution_version",
        json!(best_version(
            &id,
            os.get("VERSION_ID").map(String::as_str).unwrap_or_default(),
            &debian_version
        )),
    );
    put(
        "distribution_major_version",
        json!(os
            .get("VERSION_ID")
            .and_then(|v| v.split('.').next().map(str::to_string))
            .unwrap_or_default()),
    );
    put(
        "distribution_release",
        json!(os.get("VERSION_CODENAME").cloned().unwrap_or_default()),
    );
    put("system", json!("Linux"));
    put(
        "architecture",
        json!(uname
            .as_ref()
            .map(|u| u.machine().to_string_lossy().into_owned())
            .unwrap_or_default()),
    );
    put(
        "kernel",
        json!(uname
            .as_ref()
            .map(|u| u.release().to_string_lossy().into_owned())
            .unwrap_or_default()),
    );
    put("user_id", json!(fixpoint_modules::fs::user_name(uid)));
    put("user_uid", json!(uid));
    put("env", Value::Object(env));
    put(
        "processor_vcpus",
        json!(std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)),
    );
    put("memtotal_mb", json!(memtotal_mb));
    put("default_ipv4", default_ipv4());
    put(
        "service_mgr",
        json!(fixpoint_modules::service::service_mgr()),
    );
    put("selinux", selinux());
    for (k, v) in crate::virt::facts() {
        put(&k, v);
    }
    if let Some(p) = crate::python::python_fact() {
        let v = &p["version"];
        if let (Some(a), Some(b), Some(c)) = (
            v["major"].as_u64(),
            v["minor"].as_u64(),
            v["micro"].as_u64(),
        ) {
            put("python_version", json!(format!("{a}.{b}.{c}")));
        }
        put("python", p);
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let nproc = std::thread::available_parallelism().map_or(1, |n| n.get());
    let more = [
        crate::facts_more::processors(&cpuinfo, nproc),
        crate::facts_more::memory(&meminfo),
        crate::facts_more::user(),
        crate::facts_more::network(),
    ];
    for (k, v) in more.into_iter().flatten() {
        put(k, v);
    }
    put("date_time", crate::facts_more::date_time());
    if let Some(lsb) = crate::facts_more::lsb(&os) {
        put("lsb", lsb);
    }
    let machine_id = ["/etc/machine-id", "/var/lib/dbus/machine-id"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok());
    if let Some(id) = machine_id {
        put("machine_id", json!(id.trim()));
    }
    put(
        "domain",
        json!(fqdn.split_once('.').map(|(_, d)| d).unwrap_or_default()),
    );
    if let Some(s) = systemd() {
        put("systemd", s);
    }
    put(
        "mounts",
        mounts(&std::fs::read_to_string("/proc/mounts").unwrap_or_default()),
    );
    facts
}

/// The facts ansible-core takes from the distribution file it parsed, on a host of the Debian
/// family (its `/etc/os-release` names Debian or Ubuntu): that file, its variety, and on
/// Debian the minor version `/etc/debian_version` gives (`12.11` → `11`).
fn debian_file_facts(os_release: &str, debian_version: &str) -> Vec<(&'static str, Value)> {
    let debian = os_release.contains("Debian") || os_release.contains("Raspbian");
    if !debian && !os_release.contains("Ubuntu") {
        return Vec::new();
    }
    let mut facts = vec![
        ("distribution_file_path", json!("/etc/os-release")),
        ("distribution_file_variety", json!("Debian")),
        ("distribution_file_parsed", json!(true)),
    ];
    // The last line with a `<digits>.<digits>`, as ansible-core's loop leaves it.
    let minor = debian_version.lines().rev().find_map(minor_of);
    if let (true, Some(m)) = (debian, minor) {
        facts.push(("distribution_minor_version", json!(m)));
    }
    facts
}

/// The digits after the first `.` that has a digit on each side (`12.11` → `11`).
fn minor_of(line: &str) -> Option<String> {
    let b = line.as_bytes();
    (1..b.len()).find_map(|i| {
        if b[i] != b'.' || !b[i - 1].is_ascii_digit() {
            return None;
        }
        // `.` is one byte: the text after it starts on a character.
        let minor: String = line[i + 1..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        (!minor.is_empty()).then_some(minor)
    })
}

/// `ansible_distribution_version`: os-release's `VERSION_ID`, but on Debian the more precise
/// `/etc/debian_version` when it is a version (`12.11` where os-release says `12`), as
/// ansible-core asks the `distro` library for Debian's best version.
fn best_version(id: &str, version_id: &str, debian_version: &str) -> String {
    let precise = debian_version.trim();
    let is_version = !precise.is_empty()
        && precise
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if id == "debian" && is_version && precise.split('.').count() > version_id.split('.').count() {
        return precise.to_string();
    }
    version_id.to_string()
}

/// `ansible_fqdn`: Python's `socket.getfqdn()`, which ansible-core calls: the host name
/// resolved to an address, and that address back to its name (`/etc/hosts`, DNS); the host
/// name itself when either fails.
fn fqdn(node: &str) -> String {
    use std::net::ToSocketAddrs;
    let addr = (node, 0).to_socket_addrs().ok().and_then(|mut a| a.next());
    addr.and_then(|a| name_of(&a))
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| node.to_string())
}

/// The name an address resolves back to (`getnameinfo`), if it has one.
fn name_of(addr: &std::net::SocketAddr) -> Option<String> {
    // SAFETY: zeroed sockaddr structs are valid; each is filled for its family and passed
    // with its own size; `getnameinfo` writes a NUL-terminated name into `host` (its size
    // given) and reads nothing else.
    unsafe {
        let mut v4: libc::sockaddr_in = std::mem::zeroed();
        let mut v6: libc::sockaddr_in6 = std::mem::zeroed();
        let (sa, len) = match addr {
            std::net::SocketAddr::V4(a) => {
                v4.sin_family = libc::AF_INET as libc::sa_family_t;
                v4.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
                let len = std::mem::size_of::<libc::sockaddr_in>();
                (std::ptr::from_ref(&v4).cast::<libc::sockaddr>(), len)
            }
            std::net::SocketAddr::V6(a) => {
                v6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                v6.sin6_addr.s6_addr = a.ip().octets();
                let len = std::mem::size_of::<libc::sockaddr_in6>();
                (std::ptr::from_ref(&v6).cast::<libc::sockaddr>(), len)
            }
        };
        let mut host = [0 as libc::c_char; 1025];
        let rc = libc::getnameinfo(
            sa,
            len as libc::socklen_t,
            host.as_mut_ptr(),
            host.len() as libc::socklen_t,
            std::ptr::null_mut(),
            0,
            libc::NI_NAMEREQD,
        );
        (rc == 0).then(|| {
            std::ffi::CStr::from_ptr(host.as_ptr())
                .to_string_lossy()
                .into_owned()
        })
    }
}

/// `ansible_systemd` on a host systemd manages: `systemctl --version`'s version number (its first
/// line's second word) and its features line, as ansible-core reports them.
fn systemd() -> Option<Value> {
    if fixpoint_modules::service::service_mgr() != "systemd" {
        return None;
    }
    let out = std::process::Command::new("systemctl")
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.split('\n');
    let version: u64 = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    Some(json!({"features": lines.next().unwrap_or_default(), "version": version}))
}

/// `ansible_selinux`, read from selinuxfs (Ansible asks libselinux): `status` `disabled` when
/// the kernel has no SELinux mounted, else `enabled` with `mode`, `config_mode`, `type` and
/// `policyvers`.
fn selinux() -> Value {
    let fs = std::path::Path::new("/sys/fs/selinux");
    let Ok(enforce) = std::fs::read_to_string(fs.join("enforce")) else {
        return json!({"status": "disabled"});
    };
    let mode = |n: &str| match n.trim() {
        "1" | "enforcing" => "enforcing",
        "0" | "permissive" => "permissive",
        _ => "disabled",
    };
    let config = std::fs::read_to_string("/etc/selinux/config").unwrap_or_default();
    let setting = |key: &str| {
        config.lines().find_map(|l| {
            let (k, v) = l.trim().split_once('=')?;
            (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
        })
    };
    let policyvers = std::fs::read_to_string(fs.join("policyvers"))
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok());
    json!({
        "status": "enabled",
        "mode": mode(&enforce),
        "config_mode": mode(&setting("SELINUX").unwrap_or_default()),
        "type": setting("SELINUXTYPE").unwrap_or_else(|| "unknown".into()),
        "policyvers": policyvers.map_or(json!("unknown"), |v| json!(v)),
    })
}

/// `ansible_mounts` from /proc/mounts, keeping what Ansible keeps: devices that are paths (or
/// `host:/path`), not fstype `none`. Each entry has `mount`, `device`, `fstype`, `options`,
/// `dump` and `passno`; Ansible's sizes and `uuid` are not gathered.
fn mounts(proc_mounts: &str) -> Value {
    // /proc/mounts escapes space, tab, newline and backslash as octal (`\040`).
    let unescape = |f: &str| {
        let mut out = String::new();
        let mut rest = f;
        while let Some(i) = rest.find('\\') {
            out.push_str(&rest[..i]);
            let code = rest
                .get(i + 1..i + 4)
                .filter(|c| c.bytes().all(|b| (b'0'..=b'7').contains(&b)));
            match code.and_then(|c| u8::from_str_radix(c, 8).ok()) {
                Some(b) => {
                    out.push(b as char);
                    rest = &rest[i + 4..];
                }
                None => {
                    out.push('\\');
                    rest = &rest[i + 1..];
                }
            }
        }
        out.push_str(rest);
        out
    };
    let list: Vec<Value> = proc_mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<String> = l.split_whitespace().map(unescape).collect();
            if f.len() < 6 {
                return None;
            }
            let (device, fstype) = (&f[0], &f[2]);
            let path_like =
                device.starts_with('/') || device.starts_with('\\') || device.contains(":/");
            if !path_like || fstype == "none" {
                return None;
            }
            Some(json!({
                "mount": f[1],
                "device": device,
                "fstype": fstype,
                "options": f[3],
                "dump": f[4].parse::<i64>().unwrap_or(0),
                "passno": f[5].parse::<i64>().unwrap_or(0),
            }))
        })
        .collect();
    Value::Array(list)
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

fn read_os_release() -> std::collections::HashMap<String, String> {
    let text = std::fs::read_to_string("/etc/os-release")
        .or_else(|_| std::fs::read_to_string("/usr/lib/os-release"))
        .unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
        .collect()
}

/// The interface of the default route (from /proc/net/route) and its IPv4 address.
fn default_ipv4() -> Value {
    let routes = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
    let iface = routes.lines().skip(1).find_map(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        (cols.len() > 2 && cols[1] == "00000000").then(|| cols[0].to_string())
    });
    let Some(iface) = iface else {
        return json!({});
    };
    let addr = nix::ifaddrs::getifaddrs().ok().and_then(|addrs| {
        addrs
            .filter(|a| a.interface_name == iface)
            .find_map(|a| a.address.and_then(|s| s.as_sockaddr_in().map(|v4| v4.ip())))
    });
    match addr {
        Some(ip) => json!({"interface": iface, "address": ip.to_string()}),
        None => json!({"interface": iface}),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn debian_versions_as_ansible_core_reads_them() {
        assert_eq!(super::best_version("debian", "12", "12.11\n"), "12.11");
        assert_eq!(super::best_version("debian", "12", "trixie/sid\n"), "12");
        assert_eq!(
            super::best_version("ubuntu", "22.04", "bookworm/sid\n"),
            "22.04"
        );
        assert_eq!(super::minor_of("12.11"), Some("11".into()));
        assert_eq!(super::minor_of("é1x.2 3.45"), Some("45".into()));
        assert_eq!(super::minor_of("trixie/sid"), None);
        let facts = super::debian_file_facts("NAME=\"Debian GNU/Linux\"\n", "12.11\n");
        assert!(facts.contains(&("distribution_minor_version", serde_json::json!("11"))));
        let ubuntu = super::debian_file_facts("NAME=\"Ubuntu\"\n", "bookworm/sid\n");
        assert_eq!(ubuntu.len(), 3, "{ubuntu:?}");
        assert!(super::debian_file_facts("NAME=Fedora\n", "").is_empty());
    }

    #[test]
    fn mounts_keep_path_devices_and_unescape() {
        let m = super::mounts(
            "proc /proc proc rw 0 0\n/dev/sda1 /mnt/a\\040b ext4 rw,relatime 0 1\nsrv:/x /nfs nfs4 rw 0 0\n/dev/sdb /z none rw 0 0\n",
        );
        let m = m.as_array().unwrap();
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!(m[0]["mount"], "/mnt/a b");
        assert_eq!(m[0]["passno"], 1);
        assert_eq!(m[1]["device"], "srv:/x");
    }
}
