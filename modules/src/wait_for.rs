//! The `wait_for` module: wait on the host until a TCP port accepts connections (or stops), a
//! file appears (optionally holding a pattern) or goes away, or a port's connections drain.
//! Never a change. It polls every `sleep` seconds and gives up at `timeout` with Ansible's
//! messages; it also gives up when the agent stops the request (the task's own `timeout:` or
//! the controller hanging up), since it checks `children::stopped` while it waits.
//!
//! In check mode it is skipped, as Ansible's module (which has no check mode) is.

use crate::fs::expand_user;
use crate::params::{de_opt_string, Int, StringList};
use crate::text::compile_regex;
use crate::{children, Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::io::{ErrorKind, Read};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

pub struct WaitFor;

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum State {
    #[default]
    Started,
    Present,
    Stopped,
    Absent,
    Drained,
}

impl State {
    fn word(self) -> &'static str {
        match self {
            State::Started => "started",
            State::Present => "present",
            State::Stopped => "stopped",
            State::Absent => "absent",
            State::Drained => "drained",
        }
    }
}

fn default_host() -> String {
    "127.0.0.1".into()
}
fn int(n: i64) -> Int {
    Int(n)
}
fn default_timeout() -> Int {
    int(300)
}
fn default_connect_timeout() -> Int {
    int(5)
}
fn default_sleep() -> Int {
    int(1)
}
fn default_states() -> StringList {
    StringList(
        [
            "ESTABLISHED",
            "FIN_WAIT1",
            "FIN_WAIT2",
            "SYN_RECV",
            "SYN_SENT",
            "TIME_WAIT",
        ]
        .map(String::from)
        .to_vec(),
    )
}

/// Parameters of `wait_for`, spelled as in Ansible.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(default = "default_host")]
    pub host: String,
    #[serde(default = "default_timeout")]
    pub timeout: Int,
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout: Int,
    #[serde(default)]
    pub delay: Int,
    #[serde(default)]
    pub port: Option<Int>,
    #[serde(default = "default_states")]
    pub active_connection_states: StringList,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub search_regex: Option<String>,
    #[serde(default)]
    pub state: State,
    #[serde(default)]
    pub exclude_hosts: Option<StringList>,
    #[serde(default = "default_sleep")]
    pub sleep: Int,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub msg: Option<String>,
}

/// The TCP states of `/proc/net/tcp`, by the names Ansible takes.
const TCP_STATES: &[(&str, &str)] = &[
    ("ESTABLISHED", "01"),
    ("SYN_SENT", "02"),
    ("SYN_RECV", "03"),
    ("FIN_WAIT1", "04"),
    ("FIN_WAIT2", "05"),
    ("TIME_WAIT", "06"),
    ("CLOSE", "07"),
    ("CLOSE_WAIT", "08"),
    ("LAST_ACK", "09"),
    ("LISTEN", "0A"),
    ("CLOSING", "0B"),
];

impl Params {
    /// A port of 0 is no port, as Python's `if port` reads it.
    fn port(&self) -> Option<u16> {
        self.port.map(|p| p.0 as u16).filter(|p| *p != 0)
    }
}

impl Module for WaitFor {
    type Params = Params;
    /// The result: state, port, search_regex, match_groups, match_groupdict, path, elapsed.
    type State = Map<String, Value>;
    type Action = std::convert::Infallible;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        let bad = |m: &str| Err(ModuleError::Params(m.to_string()));
        if let Some(port) = p.port {
            if !(0..=65535).contains(&port.0) {
                return bad("`port` must be between 0 and 65535");
            }
        }
        for (name, v) in [
            ("timeout", p.timeout),
            ("connect_timeout", p.connect_timeout),
            ("delay", p.delay),
            ("sleep", p.sleep),
        ] {
            if v.0 < 0 {
                return Err(ModuleError::Params(format!(
                    "`{name}` must not be negative"
                )));
            }
        }
        let path = p.path.as_deref().is_some_and(|s| !s.is_empty());
        if p.port().is_some() && path {
            return bad("port and path parameter can not both be passed to wait_for");
        }
        if path && p.state == State::Stopped {
            return bad(
                "state=stopped should only be used for checking a port in the wait_for module",
            );
        }
        if path && p.state == State::Drained {
            return bad(
                "state=drained should only be used for checking a port in the wait_for module",
            );
        }
        if p.exclude_hosts.is_some() && p.state != State::Drained {
            return bad("exclude_hosts should only be with state=drained");
        }
        for s in &p.active_connection_states.0 {
            if !TCP_STATES.iter().any(|(n, _)| n == s) {
                return Err(ModuleError::Params(format!(
                    "unknown active_connection_state ({s}) defined"
                )));
            }
        }
        if let Some(re) = &p.search_regex {
            compile_regex("search_regex", &format!("(?m){re}"))?;
        }
        Ok(())
    }

    fn probe(p: &Params, ctx: &Ctx) -> Result<Map<String, Value>, ModuleError> {
        if ctx.check {
            let mut out = Map::new();
            out.insert("changed".into(), false.into());
            out.insert("skipped".into(), true.into());
            return Ok(out);
        }
        wait(p)
    }

    fn plan(
        _: &Params,
        state: &Map<String, Value>,
        ctx: &Ctx,
    ) -> Result<Plan<Self::Action>, ModuleError> {
        let mut plan = Plan::report(state);
        if ctx.check {
            plan.msg = Some("remote module (wait_for) does not support check mode".into());
        }
        Ok(plan)
    }

    fn apply(
        _: &Params,
        _: Map<String, Value>,
        plan: &Plan<Self::Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        plan.nothing_to_apply()
    }
}

/// Why a wait ended without success.
enum Stop {
    /// The agent stopped the request (task timeout, controller gone).
    Stopped,
    TimedOut,
    /// A failure that ends the wait at once (the path cannot be examined).
    Fail(String),
}

/// Sleep `d`, in slices, unless the request is stopped meanwhile.
fn nap(d: Duration) -> Result<(), Stop> {
    let end = Instant::now() + d;
    loop {
        if children::stopped() {
            return Err(Stop::Stopped);
        }
        let now = Instant::now();
        if now >= end {
            return Ok(());
        }
        std::thread::sleep((end - now).min(Duration::from_millis(100)));
    }
}

fn secs(n: Int) -> Duration {
    Duration::from_secs(n.0.max(0) as u64)
}

/// Whole seconds, rounded up (Python's `math.ceil` of the time left).
fn ceil_secs(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs() + u64::from(d.subsec_nanos() > 0))
}

/// What a search found: the groups in order and the named ones.
#[derive(Default)]
struct Found {
    groups: Vec<Value>,
    named: Map<String, Value>,
}

fn search(re: &crate::text::regex::Regex, data: &[u8]) -> Option<Found> {
    let caps = re.captures(data)?;
    let text = |m: Option<crate::text::regex::Match<'_>>| {
        m.map_or(Value::Null, |m| {
            String::from_utf8_lossy(m.as_bytes()).into_owned().into()
        })
    };
    let mut f = Found::default();
    for i in 1..caps.len() {
        f.groups.push(text(caps.get(i)));
    }
    for name in re.capture_names().flatten() {
        let value = text(caps.name(&name));
        f.named.insert(name, value);
    }
    Some(f)
}

/// A TCP connection to `host:port` within `limit`, trying each address the name resolves to.
fn connect(host: &str, port: u16, limit: Duration) -> Option<TcpStream> {
    let addrs: Vec<SocketAddr> = (host, port).to_socket_addrs().ok()?.collect();
    let limit = limit.max(Duration::from_millis(1));
    addrs
        .iter()
        .find_map(|a| TcpStream::connect_timeout(a, limit).ok())
}

/// Read from the connection until `re` matches what arrived, the peer closes, or `end`.
fn read_until(
    mut s: TcpStream,
    re: &crate::text::regex::Regex,
    end: Instant,
) -> Result<Option<Found>, Stop> {
    let mut data = Vec::new();
    let mut buf = [0u8; 1024];
    let found = loop {
        if children::stopped() {
            return Err(Stop::Stopped);
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break None;
        }
        // Short reads so that a stopped request is noticed.
        let _ = s.set_read_timeout(Some(left.min(Duration::from_millis(200))));
        match s.read(&mut buf) {
            Ok(0) => break None,
            Ok(n) => {
                data.extend_from_slice(&buf[..n]);
                if let Some(f) = search(re, &data) {
                    break Some(f);
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => break None,
        }
    };
    let _ = s.shutdown(Shutdown::Both);
    Ok(found)
}

/// An address as `/proc/net/tcp` spells it: each 32-bit word in host order, in hex.
fn proc_hex(ip: IpAddr) -> String {
    let words: Vec<[u8; 4]> = match ip {
        IpAddr::V4(v4) => vec![v4.octets()],
        IpAddr::V6(v6) => v6
            .octets()
            .chunks(4)
            .map(|c| [c[0], c[1], c[2], c[3]])
            .collect(),
    };
    words
        .iter()
        .map(|w| format!("{:08X}", u32::from_ne_bytes(*w)))
        .collect()
}

/// The addresses a name stands for, in `/proc` spelling, with their family (4 or 6).
fn host_hex(host: &str) -> Vec<(u8, String)> {
    let ips: Vec<IpAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => (host, 0)
            .to_socket_addrs()
            .map(|a| a.map(|a| a.ip()).collect())
            .unwrap_or_default(),
    };
    let mut out = Vec::new();
    for ip in ips {
        match ip {
            IpAddr::V4(v4) => {
                out.push((4, proc_hex(ip)));
                // An IPv4 address also appears IPv4-mapped on IPv6 sockets.
                out.push((6, proc_hex(IpAddr::V6(v4.to_ipv6_mapped()))));
            }
            IpAddr::V6(_) => out.push((6, proc_hex(ip))),
        }
    }
    out
}

/// Ansible's Linux connection count: connections in an active state on `port` whose local
/// address is `host` (or `host` is the wildcard), from peers not in `exclude_hosts`.
fn active_connections(p: &Params) -> usize {
    let Some(port) = p.port() else { return 0 };
    let port_hex = format!("{port:04X}");
    let ips = host_hex(&p.host);
    let excluded: Vec<(u8, String)> = p
        .exclude_hosts
        .iter()
        .flat_map(|l| l.0.iter())
        .flat_map(|h| host_hex(h))
        .collect();
    let states: Vec<&str> = p
        .active_connection_states
        .0
        .iter()
        .filter_map(|s| TCP_STATES.iter().find(|(n, _)| n == s).map(|(_, id)| *id))
        .collect();
    let any4 = "0".repeat(8);
    let any6 = "0".repeat(32);
    let mapped_any = format!("0000000000000000FFFF0000{}", "0".repeat(8));
    let mut count = 0;
    for (family, file) in [(4u8, "/proc/net/tcp"), (6u8, "/proc/net/tcp6")] {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 4 || !states.contains(&f[3]) {
                continue;
            }
            let (Some((lip, lport)), Some((rip, _))) = (f[1].split_once(':'), f[2].split_once(':'))
            else {
                continue;
            };
            if lport != port_hex || excluded.iter().any(|(fam, ip)| *fam == family && ip == rip) {
                continue;
            }
            let has = |ip: &str| ips.iter().any(|(fam, i)| *fam == family && i == ip);
            let any = if family == 4 { &any4 } else { &any6 };
            if has(lip)
                || has(any)
                || (lip.starts_with("0000000000000000FFFF0000") && has(&mapped_any))
            {
                count += 1;
            }
        }
    }
    count
}

/// One round of the wait: whether what is awaited has happened.
fn ready(
    p: &Params,
    path: Option<&std::path::Path>,
    port: Option<u16>,
    re: Option<&crate::text::regex::Regex>,
    end: Instant,
    found: &mut Found,
) -> Result<bool, Stop> {
    Ok(match (p.state, path, port) {
        (State::Drained, _, _) => active_connections(p) == 0,
        (State::Absent | State::Stopped, Some(path), _) => !path.exists(),
        (State::Absent | State::Stopped, None, Some(port)) => {
            connect(&p.host, port, secs(p.connect_timeout)).is_none()
        }
        (State::Started | State::Present, Some(path), _) => match std::fs::metadata(path) {
            Err(e) if e.kind() == ErrorKind::NotFound => false,
            Err(e) => {
                let why = e.to_string();
                let why = why.split(" (os error").next().unwrap_or(&why).to_string();
                return Err(Stop::Fail(format!(
                    "Failed to stat {}, {why}",
                    path.display()
                )));
            }
            Ok(_) => match re {
                None => true,
                Some(re) => {
                    let mut data = Vec::new();
                    let read = std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut data));
                    match read.ok().and_then(|_| search(re, &data)) {
                        Some(f) => {
                            *found = f;
                            true
                        }
                        None => false,
                    }
                }
            },
        },
        (State::Started | State::Present, None, Some(port)) => {
            let left = end.saturating_duration_since(Instant::now());
            let limit = secs(p.connect_timeout).min(ceil_secs(left));
            match (connect(&p.host, port, limit), re) {
                (None, _) => false,
                (Some(s), None) => {
                    let _ = s.shutdown(Shutdown::Both);
                    true
                }
                (Some(s), Some(re)) => match read_until(s, re, end)? {
                    Some(f) => {
                        *found = f;
                        true
                    }
                    None => false,
                },
            }
        }
        // Neither port nor path: the caller only sleeps.
        (_, None, None) => true,
    })
}

fn wait(p: &Params) -> Result<Map<String, Value>, ModuleError> {
    let start = Instant::now();
    let re = p
        .search_regex
        .as_deref()
        .map(|r| compile_regex("search_regex", &format!("(?m){r}")))
        .transpose()?;
    let path = p.path.as_deref().filter(|s| !s.is_empty()).map(expand_user);
    let port = p.port();
    let end = start + secs(p.timeout);
    let mut found = Found::default();

    let outcome: Result<(), Stop> = (|| {
        nap(secs(p.delay))?;
        if port.is_none() && path.is_none() && p.state != State::Drained {
            return nap(secs(p.timeout));
        }
        while Instant::now() < end {
            if ready(p, path.as_deref(), port, re.as_ref(), end, &mut found)? {
                return Ok(());
            }
            nap(secs(p.sleep))?;
        }
        Err(Stop::TimedOut)
    })();

    let failed = |msg: String| {
        let mut result = Map::new();
        result.insert("elapsed".into(), start.elapsed().as_secs().into());
        ModuleError::Failed { msg, result }
    };
    match outcome {
        Ok(()) => {}
        Err(Stop::Stopped) => {
            return Err(failed(
                "wait_for was stopped (the task's timeout passed or the controller left)".into(),
            ))
        }
        Err(Stop::Fail(msg)) => return Err(failed(p.msg.clone().unwrap_or(msg))),
        Err(Stop::TimedOut) => {
            let host = &p.host;
            let msg = match (p.state, &path, port, &p.search_regex) {
                (State::Drained, _, _, _) => format!(
                    "Timeout when waiting for {host}:{} to drain",
                    port.map_or("None".to_string(), |p| p.to_string())
                ),
                (State::Absent | State::Stopped, Some(path), _, _) => {
                    format!("Timeout when waiting for {} to be absent.", path.display())
                }
                (State::Absent | State::Stopped, None, Some(port), _) => {
                    format!("Timeout when waiting for {host}:{port} to stop.")
                }
                (_, Some(path), _, Some(re)) => format!(
                    "Timeout when waiting for search string {re} in {}",
                    path.display()
                ),
                (_, Some(path), _, None) => {
                    format!("Timeout when waiting for file {}", path.display())
                }
                (_, None, Some(port), Some(re)) => {
                    format!("Timeout when waiting for search string {re} in {host}:{port}")
                }
                (_, None, Some(port), None) => format!("Timeout when waiting for {host}:{port}"),
                (_, None, None, _) => "Timeout".to_string(),
            };
            return Err(failed(p.msg.clone().unwrap_or(msg)));
        }
    }
    let mut out = Map::new();
    out.insert("changed".into(), false.into());
    out.insert("state".into(), p.state.word().into());
    out.insert("port".into(), port.map_or(Value::Null, Value::from));
    out.insert(
        "search_regex".into(),
        p.search_regex.clone().map_or(Value::Null, Value::from),
    );
    out.insert("match_groups".into(), Value::Array(found.groups));
    out.insert("match_groupdict".into(), Value::Object(found.named));
    out.insert(
        "path".into(),
        path.as_ref()
            .map_or(Value::Null, |p| p.display().to_string().into()),
    );
    out.insert("elapsed".into(), start.elapsed().as_secs().into());
    // Ansible's `exit_json(path=...)` adds the path's attributes, its `state` (file,
    // directory, absent) over the module's own.
    if let Some(path) = &path {
        out.extend(crate::fs::path_info(path)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{check_params, run};
    use serde_json::json;

    fn closed_port() -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }

    #[test]
    fn an_open_port_and_a_closed_one() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let out = run::<WaitFor>(&json!({"port": port, "timeout": 5}), &Ctx::default()).unwrap();
        assert!(!out.changed);
        assert_eq!(out.result["state"], "started");
        assert_eq!(out.result["port"], port);
        assert_eq!(out.result["path"], Value::Null);
        assert_eq!(out.result["match_groups"], json!([]));

        let closed = closed_port();
        let out = run::<WaitFor>(
            &json!({"port": closed, "state": "stopped", "timeout": 5}),
            &Ctx::default(),
        )
        .unwrap();
        assert_eq!(out.result["state"], "stopped");
        let e =
            run::<WaitFor>(&json!({"port": closed, "timeout": 1}), &Ctx::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("Timeout when waiting for 127.0.0.1:{closed}")
        );
        let ModuleError::Failed { result, .. } = e else {
            panic!("a failure with a result")
        };
        assert!(result["elapsed"].as_u64().unwrap() >= 1);
        let e = run::<WaitFor>(
            &json!({"port": closed, "timeout": 0, "msg": "no service"}),
            &Ctx::default(),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "no service");
    }

    #[test]
    fn a_served_banner_is_searched() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            use std::io::Write;
            let (mut s, _) = l.accept().unwrap();
            s.write_all(b"SSH-2.0-Test_7.4\r\n").unwrap();
        });
        let out = run::<WaitFor>(
            &json!({"port": port, "search_regex": "^SSH-(?P<proto>[0-9.]+)-(\\w+)", "timeout": 10}),
            &Ctx::default(),
        )
        .unwrap();
        server.join().unwrap();
        assert_eq!(out.result["match_groups"], json!(["2.0", "Test_7"]));
        assert_eq!(out.result["match_groupdict"], json!({"proto": "2.0"}));
    }

    #[test]
    fn files_present_absent_and_searched() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("ready");
        std::fs::write(&f, "starting\nlistening on 8080\n").unwrap();
        let out = run::<WaitFor>(
            &json!({"path": f, "search_regex": "listening on (\\d+)$", "timeout": 5}),
            &Ctx::default(),
        )
        .unwrap();
        assert_eq!(out.result["match_groups"], json!(["8080"]));
        assert_eq!(out.result["path"], f.display().to_string());
        let e = run::<WaitFor>(
            &json!({"path": f, "search_regex": "stopped", "timeout": 1}),
            &Ctx::default(),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "Timeout when waiting for search string stopped in {}",
                f.display()
            )
        );
        let gone = t.path().join("gone");
        let out =
            run::<WaitFor>(&json!({"path": gone, "state": "absent"}), &Ctx::default()).unwrap();
        assert_eq!(out.result["state"], "absent");
        let e = run::<WaitFor>(&json!({"path": gone, "timeout": 1}), &Ctx::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("Timeout when waiting for file {}", gone.display())
        );
    }

    #[test]
    fn check_mode_skips_and_bad_combinations_are_refused() {
        let ctx = Ctx {
            check: true,
            diff: false,
        };
        let out = run::<WaitFor>(&json!({"port": closed_port(), "timeout": 1}), &ctx).unwrap();
        assert_eq!(out.result["skipped"], true);
        for (params, msg) in [
            (
                json!({"port": 22, "path": "/x"}),
                "port and path parameter can not both be passed",
            ),
            (
                json!({"path": "/x", "state": "stopped"}),
                "state=stopped should only be used",
            ),
            (
                json!({"port": 22, "exclude_hosts": ["10.0.0.1"]}),
                "exclude_hosts should only be with state=drained",
            ),
            (
                json!({"port": 22, "active_connection_states": ["BOGUS"]}),
                "unknown active_connection_state (BOGUS) defined",
            ),
        ] {
            let e = check_params("wait_for", &params).unwrap_err();
            assert!(e.to_string().contains(msg), "{e}");
        }
        let e = check_params("wait_for", &json!({"port": 22, "state": "up"})).unwrap_err();
        assert_eq!(e.path, "state");
        assert!(check_params("wait_for", &json!({"port": "22", "timeout": "10"})).is_ok());
    }

    #[test]
    fn a_drained_port_counts_connections_from_proc() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        // Only 127.0.0.1: on any address, another process's connection from 127.0.0.x can
        // have this port as its own ephemeral one (as it would under Ansible too).
        let p: Params =
            crate::parse_params(&json!({"port": port, "state": "drained", "host": "127.0.0.1"}))
                .unwrap();
        assert_eq!(active_connections(&p), 0);
        let c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (_s, _) = l.accept().unwrap();
        assert_eq!(
            active_connections(&p),
            1,
            "the accepted side is on the port"
        );
        let p: Params = crate::parse_params(
            &json!({"port": port, "state": "drained", "host": "127.0.0.1",
                    "exclude_hosts": ["127.0.0.1"]}),
        )
        .unwrap();
        assert_eq!(active_connections(&p), 0);
        drop(c);
        assert_eq!(proc_hex("127.0.0.1".parse().unwrap()), "0100007F");
    }
}
