//! Soak: many runs of a playbook with `once:` steps and handlers over loopback sshd, each cut at a
//! random point (seeded) by dropping its TCP connection, killing the agent or killing the
//! controller, then a clean run; nothing is done twice, nothing torn, no lock left, no handler lost.
//!
//! The connection goes through a small TCP proxy in the test, which counts the bytes of the run's
//! connections and acts when a random byte budget is spent: that is how a kill lands in the middle
//! of a request (in the middle of an SSH packet, even) without any timing in the test.
//! `SOAK_RUNS` (default 200) and `SOAK_SEED` (default: from the clock, printed) steer it.

use crate::fx::Out;
use crate::ssh::Fleet;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Lines of the managed file: large enough (about 40 KB, ten pages) that a torn write would
/// show, small enough that its transfer is not most of a run's bytes.
const CONF_LINES: usize = 1000;
/// The version of the managed file the clean profile run starts from.
const PROFILE_VERSION: u64 = 1_000_000;
/// Runs share a version three at a time, so a handler left pending by one run is owed by a later
/// run that changes nothing itself.
const RUNS_PER_VERSION: u64 = 3;

const TASKS: &str = concat!(
    "    - name: dir\n      file:\n        path: \"{{ base }}\"\n        state: directory\n",
    "    - name: conf\n      template:\n        src: app.conf.j2\n        dest: \"{{ base }}/app.conf\"\n      notify: reload\n",
    // A new operation every run: it must happen at most once, and exactly once when recorded done.
    "    - name: mail\n      shell: echo {{ run }} >> {{ base }}/mail.log\n      once: \"mail-{{ run }}\"\n",
    // One operation for all runs: it happens once in the whole soak.
    "    - name: migrate\n      shell: echo migrated >> {{ base }}/migrate.log\n      once: migrate\n",
    "  handlers:\n",
    // Delivered once per version of the file, however many runs owe it. Its request is the
    // same in every run that owes it (no run number in it): a run that redelivers a handler
    // whose earlier delivery was cut after it finished replays the record instead of being
    // refused for reusing the key with another request.
    "    - name: reload\n      shell: echo {{ version }} reloaded >> {{ base }}/reload.log\n      once: \"reload-{{ version }}\"\n",
);

const TEMPLATE: &str =
    "{% for i in range(1000) %}version {{ version }} line {{ i }} of the managed file\n{% endfor %}";

fn conf_text(version: u64) -> String {
    (0..CONF_LINES)
        .map(|i| format!("version {version} line {i} of the managed file\n"))
        .collect()
}

/// splitmix64: a seeded generator, so that a failing soak can be replayed with its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Cut {
    /// Close both TCP sockets, mid-packet: the host and the controller each see the link die.
    Drop,
    /// SIGKILL the agent on the host: its flock goes with it, whatever it was writing is cut.
    KillAgent,
    /// SIGKILL the controller: the agent sees its input end.
    KillController,
}

/// What the proxy does for the current run.
#[derive(Default)]
struct Arm {
    /// Connections accepted from this generation on belong to the current run.
    generation: u64,
    /// Bytes (both directions) left before the cut; `None`: never cut.
    budget: Option<u64>,
    cut: Option<Cut>,
    controller: Option<i32>,
    fired: bool,
    /// How long after the cut's bytes are passed on the agent is killed.
    kill_delay: Duration,
    /// Why a cut that fired did not cut anything.
    note: Option<&'static str>,
    /// Bytes the current run's connections carried.
    carried: u64,
    socks: Vec<TcpStream>,
}

struct Proxy {
    port: u16,
    arm: Arc<Mutex<Arm>>,
}

impl Proxy {
    /// Listen on 127.0.0.1 and forward every connection to `to`. `reaper`: the sshd's reaper pid,
    /// below which the host's agent runs.
    fn start(to: std::net::SocketAddrV4, reaper: i32, lock_json: PathBuf) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let arm = Arc::new(Mutex::new(Arm::default()));
        let shared = arm.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(to) else {
                    continue;
                };
                let generation = {
                    let mut a = shared.lock().unwrap();
                    a.socks.push(client.try_clone().unwrap());
                    a.socks.push(server.try_clone().unwrap());
                    a.generation
                };
                for (from, into) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let arm = shared.clone();
                    let lock_json = lock_json.clone();
                    std::thread::spawn(move || {
                        pump(from, into, &arm, generation, reaper, &lock_json)
                    });
                }
            }
        });
        Proxy { port, arm }
    }

    /// A new run: its connections count from now on; `cut` happens after `budget` bytes.
    fn arm(&self, budget: Option<u64>, cut: Option<Cut>, kill_delay: Duration) {
        let mut a = self.arm.lock().unwrap();
        a.generation += 1;
        a.kill_delay = kill_delay;
        a.budget = budget;
        a.cut = cut;
        a.controller = None;
        a.fired = false;
        a.note = None;
        a.carried = 0;
        a.socks.clear();
    }

    fn set_controller(&self, pid: u32) {
        self.arm.lock().unwrap().controller = Some(pid as i32);
    }

    /// (whether the cut happened, the bytes the run carried)
    fn outcome(&self) -> (bool, u64) {
        let a = self.arm.lock().unwrap();
        (a.fired && a.note.is_none(), a.carried)
    }
}

fn pump(
    mut from: TcpStream,
    mut into: TcpStream,
    arm: &Mutex<Arm>,
    generation: u64,
    reaper: i32,
    lock_json: &Path,
) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut send = n;
        {
            let mut a = arm.lock().unwrap();
            if a.generation == generation {
                a.carried += n as u64;
                if let (Some(left), false) = (a.budget, a.fired) {
                    if (n as u64) >= left {
                        a.fired = true;
                        match a.cut.expect("a budget comes with a cut") {
                            Cut::Drop => {
                                // Forward the bytes up to the cut, then the link dies.
                                let _ = into.write_all(&buf[..left as usize]);
                                for s in &a.socks {
                                    let _ = s.shutdown(Shutdown::Both);
                                }
                                return;
                            }
                            // A kill comes after the bytes are passed on: a request the cut
                            // completes reaches the agent, which is killed while it works on it.
                            Cut::KillAgent => {
                                let _ = into.write_all(&buf[..n]);
                                // The agent needs a few milliseconds to receive a request and
                                // record it: a random wait lets the kill land anywhere in it.
                                std::thread::sleep(a.kill_delay);
                                if !kill_agent(lock_json, reaper) {
                                    a.note = Some("no agent running yet");
                                }
                            }
                            Cut::KillController => {
                                let _ = into.write_all(&buf[..n]);
                                if let Some(pid) = a.controller {
                                    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                                }
                            }
                        }
                        send = 0;
                    } else {
                        a.budget = Some(left - n as u64);
                    }
                }
            }
        }
        if send > 0 && into.write_all(&buf[..send]).is_err() {
            break;
        }
    }
    let _ = into.shutdown(Shutdown::Write);
}

/// Whether `pid` runs below `root` (a few parent links up: sshd, the session, the shell).
fn is_below(pid: i32, root: i32) -> bool {
    let mut p = pid;
    for _ in 0..16 {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            return false;
        };
        let Some(ppid) = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|x| x.parse::<i32>().ok())
        else {
            return false;
        };
        if ppid == root {
            return true;
        }
        if ppid <= 1 {
            return false;
        }
        p = ppid;
    }
    false
}

/// SIGKILL the host's agent; false when there was none. The lock holder's pid (`lock.json`) is
/// read first, which is quick enough to land inside a step; before the agent has taken the lock,
/// every agent below this host's sshd is looked for.
fn kill_agent(lock_json: &Path, reaper: i32) -> bool {
    let holder = std::fs::read_to_string(lock_json)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["pid"].as_i64());
    if let Some(pid) = holder {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.starts_with("fixpoint-agent")
            && is_below(pid as i32, reaper)
            && kill(Pid::from_raw(pid as i32), Signal::SIGKILL).is_ok()
        {
            return true;
        }
    }
    let mut any = false;
    for pid in crate::support::descendants(reaper) {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.starts_with("fixpoint-agent") {
            any |= kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok();
        }
    }
    any
}

/// The `once:` records of a state directory: key → status.
fn records(state: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(state.join("journal")) else {
        return out;
    };
    for e in dir.flatten() {
        let p = e.path();
        if p.extension().and_then(|x| x.to_str()) != Some("json") {
            continue;
        }
        let rec: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        out.insert(
            rec["key"].as_str().unwrap().to_string(),
            rec["status"].as_str().unwrap().to_string(),
        );
    }
    out
}

fn read_lines(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .map(|s| s.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Each value at most once in a log; returns the values.
fn unique(p: &Path, what: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for l in read_lines(p) {
        assert!(seen.insert(l.clone()), "{what} `{l}` happened twice");
    }
    seen
}

/// Poll until nobody holds the host lock (a cut agent may still be on its way out); panics if
/// it stays taken: that would be a stale lock.
fn wait_lock_free(state: &Path) {
    use nix::fcntl::{Flock, FlockArg};
    let path = state.join("lock");
    if !path.exists() {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let f = std::fs::File::open(&path).unwrap();
        match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
            Ok(_) => return,
            Err(_) => {
                assert!(
                    Instant::now() < deadline,
                    "the host lock was never released"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Where a run was when it ended: the last task the controller reported for the host.
fn reached(out: &Out) -> String {
    let mut last = "connect".to_string();
    for e in out.events() {
        if e["event"] == "task" {
            if let Some(t) = e["task"].as_str() {
                last = t.to_string();
            }
        }
    }
    last
}

#[derive(Default)]
struct Tally {
    not_cut: u64,
    /// (how, after which reported task) → runs
    cut_at: BTreeMap<(String, String), u64>,
    in_doubt: BTreeMap<String, u64>,
    /// Temp files left beside the managed file (a killed agent cannot remove its own).
    temp_left: BTreeSet<String>,
    /// The longest a cut run's agent kept the lock after its controller was done.
    lock_wait: Duration,
}

#[test]
fn soak_runs_cut_at_random_points_do_nothing_twice_tear_nothing_and_lose_no_handler() {
    let runs: u64 = std::env::var("SOAK_RUNS")
        .ok()
        .map(|s| s.parse().expect("SOAK_RUNS is a number"))
        .unwrap_or(200);
    let seed: u64 = std::env::var("SOAK_SEED")
        .ok()
        .map(|s| s.parse().expect("SOAK_SEED is a number"))
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("soak: {runs} runs, SOAK_SEED={seed}");
    let mut rng = Rng(seed);

    let fleet = Fleet::start(1, "fpuser");
    let host = &fleet.hosts[0];
    let alias = host.alias().to_string();
    let state: PathBuf = fleet.fx.path("t").join(format!("{alias}.state"));
    let proxy = Proxy::start(
        std::net::SocketAddrV4::new(host.addr(), host.port()),
        host.reaper_pid().unwrap(),
        state.join("lock.json"),
    );
    // The client reaches the host through the proxy (and knows its key under that address).
    let block = host
        .ssh_config_block(&fleet.known_hosts)
        .replace(&format!("HostName {}", host.addr()), "HostName 127.0.0.1")
        .replace(
            &format!("Port {}", host.port()),
            &format!("Port {}", proxy.port),
        );
    std::fs::write(&fleet.config, block).unwrap();
    let key = host.known_hosts_line();
    let key = key.split_once(' ').unwrap().1;
    std::fs::write(
        &fleet.known_hosts,
        format!("[127.0.0.1]:{} {key}\n", proxy.port),
    )
    .unwrap();
    fleet.play_full("  gather_facts: false\n", TASKS);
    fleet.fx.write("templates/app.conf.j2", TEMPLATE);
    let base = fleet.base(host);
    let versions: BTreeMap<String, u64> = (0..=runs / RUNS_PER_VERSION + 1)
        .chain([PROFILE_VERSION])
        .map(|v| (conf_text(v), v))
        .collect();

    // A run; with it, the bytes carried when each task's result was printed (the controller
    // prints a line as soon as a result is in).
    let run_marked = |run: u64, version: u64, extra: &[&str]| -> (Out, Vec<(String, u64)>) {
        use std::io::BufRead;
        let r = format!("run={run}");
        let v = format!("version={version}");
        let mut args = vec!["-e", &r, "-e", &v];
        args.extend_from_slice(extra);
        let mut child = fleet.spawn_apply(&args, std::process::Stdio::null());
        proxy.set_controller(child.id());
        let mut err = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let mut stdout = String::new();
        let mut marks = Vec::new();
        for line in std::io::BufReader::new(child.stdout.take().unwrap())
            .lines()
            .map_while(Result::ok)
        {
            if let Ok(ev) = serde_json::from_str::<serde_json::Value>(&line) {
                if let (Some("task"), Some(t)) = (ev["event"].as_str(), ev["task"].as_str()) {
                    marks.push((t.to_string(), proxy.outcome().1));
                }
            }
            stdout.push_str(&line);
            stdout.push('\n');
        }
        let status = child.wait().unwrap();
        let out = Out {
            code: status.code().unwrap_or(-1),
            stdout,
            stderr: stderr.join().unwrap(),
        };
        (out, marks)
    };
    let run_once = |run: u64, version: u64, extra: &[&str]| run_marked(run, version, extra).0;
    let journal = |args: &[&str]| -> Out {
        let mut full = vec![
            "journal",
            "-i",
            "hosts.ini",
            "--ssh-config",
            fleet.config.to_str().unwrap(),
        ];
        full.extend_from_slice(args);
        fleet.fx.run(&full)
    };

    // Clean runs first: the first caches the agent (if no test did yet) and does the one-off
    // step; the second changes the file (a version no soak run uses) and runs the handler, and
    // is the profile: how many bytes a run has carried when each step is done.
    proxy.arm(None, None, Duration::ZERO);
    run_once(0, PROFILE_VERSION, &[]).expect(0);
    proxy.arm(None, None, Duration::ZERO);
    let (out, marks) = run_marked(0, 0, &[]);
    out.expect(0);
    let (_, whole) = proxy.outcome();
    assert_eq!(
        marks.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(),
        ["dir", "conf", "mail", "migrate", "reload"],
        "{}",
        out.stdout
    );
    // The cut lands in a phase drawn evenly (connecting and `dir`, `conf`, `mail`, `migrate`,
    // the handler, the end of the run), then anywhere in it: spread over bytes, cuts would
    // mostly land in the SSH handshake and the file's content.
    let mut phases = vec![0u64];
    phases.extend(marks.iter().map(|(_, at)| *at));
    phases.push(whole);
    eprintln!("soak: a run that changes the file carries {whole} bytes; steps end at {phases:?}");
    let mut tally = Tally::default();
    let started = Instant::now();
    for run in 1..=runs {
        let version = run / RUNS_PER_VERSION + 1;
        let cut = match rng.below(4) {
            0 | 1 => Cut::Drop,
            2 => Cut::KillAgent,
            _ => Cut::KillController,
        };
        let phase = rng.below(phases.len() as u64 - 1) as usize;
        let budget = phases[phase] + rng.below(phases[phase + 1] - phases[phase]);
        let delay = Duration::from_micros(rng.below(20_000));
        proxy.arm(Some(budget), Some(cut), delay);
        // A cut agent may still be exiting when the next run connects: wait for the lock.
        let out = run_once(run, version, &["--lock-timeout", "60"]);
        let (fired, _) = proxy.outcome();
        proxy.arm(None, None, Duration::ZERO);
        if fired {
            *tally
                .cut_at
                .entry((format!("{cut:?}"), reached(&out)))
                .or_default() += 1;
        } else {
            tally.not_cut += 1;
            assert_eq!(
                out.code, 0,
                "run {run} was not cut ({cut:?} after {budget} bytes, seed {seed}) but failed\n{}\n{}",
                out.stdout, out.stderr
            );
        }
        assert!(
            [0, 1, -1].contains(&out.code),
            "run {run} (cut {cut:?} after {budget} bytes, seed {seed}) exited {}\n{}\n{}",
            out.code,
            out.stdout,
            out.stderr
        );
        assert!(
            !out.stderr.contains("panicked"),
            "run {run}: {}",
            out.stderr
        );

        // Invariants that hold after every run.
        let conf = base.join("app.conf");
        if conf.exists() {
            let text = std::fs::read_to_string(&conf).unwrap();
            assert!(
                versions.contains_key(&text),
                "run {run} (seed {seed}): app.conf is torn ({} bytes)",
                text.len()
            );
        }
        unique(&base.join("mail.log"), "mail");
        let reloaded: Vec<String> = read_lines(&base.join("reload.log"))
            .iter()
            .map(|l| l.split(' ').next().unwrap_or_default().to_string())
            .collect();
        assert_eq!(
            reloaded.iter().collect::<BTreeSet<_>>().len(),
            reloaded.len(),
            "run {run} (seed {seed}): a version reloaded twice: {reloaded:?}"
        );
        assert!(read_lines(&base.join("migrate.log")).len() <= 1);
        if let Ok(dir) = std::fs::read_dir(&base) {
            tally.temp_left.extend(
                dir.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with('.')),
            );
        }

        // In doubt: the operator looks at the effect and tells the journal what happened.
        let waited = Instant::now();
        wait_lock_free(&state);
        tally.lock_wait = tally.lock_wait.max(waited.elapsed());
        for (k, status) in records(&state) {
            if status != "started" {
                continue;
            }
            let (kind, happened) = if let Some(r) = k.strip_prefix("mail-") {
                (
                    "mail",
                    read_lines(&base.join("mail.log")).contains(&r.to_string()),
                )
            } else if k == "migrate" {
                ("migrate", !read_lines(&base.join("migrate.log")).is_empty())
            } else if let Some(v) = k.strip_prefix("reload-") {
                let v = format!("{v} ");
                (
                    "reload",
                    read_lines(&base.join("reload.log"))
                        .iter()
                        .any(|l| l.starts_with(&v)),
                )
            } else {
                panic!("unexpected key {k}")
            };
            *tally
                .in_doubt
                .entry(format!(
                    "{kind}, {}",
                    if happened { "done" } else { "not done" }
                ))
                .or_default() += 1;
            let how = if happened { "--done" } else { "--retry" };
            journal(&["resolve", &alias, &k, how]).expect(0);
        }
    }
    let soak_time = started.elapsed();

    // The final clean run: same version as the last one, a lock free at once (timeout 0).
    let last_version = runs / RUNS_PER_VERSION + 1;
    proxy.arm(None, None, Duration::ZERO);
    let fin = run_once(runs + 1, last_version, &[]);
    fin.expect(0);

    // Every `once` effect exactly once when recorded done, never when not.
    let recs = records(&state);
    assert!(
        recs.values().all(|s| s == "done" || s == "failed"),
        "nothing left in doubt after the clean run: {recs:?}"
    );
    let mails = unique(&base.join("mail.log"), "mail");
    for run in 1..=runs + 1 {
        let done = recs
            .get(&format!("mail-{run}"))
            .is_some_and(|s| s == "done");
        assert_eq!(
            mails.contains(&run.to_string()),
            done,
            "mail of run {run}: effect and record disagree (seed {seed})"
        );
    }
    assert!(recs
        .get(&format!("mail-{}", runs + 1))
        .is_some_and(|s| s == "done"));
    assert_eq!(read_lines(&base.join("migrate.log")).len(), 1);
    assert_eq!(recs.get("migrate").map(String::as_str), Some("done"));
    // Handlers: one delivery per version at most, each recorded, and the last version delivered.
    let reloads = unique(&base.join("reload.log"), "reload");
    let delivered: BTreeSet<u64> = reloads
        .iter()
        .map(|l| l.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(delivered.len(), reloads.len(), "one reload per version");
    for (k, s) in &recs {
        if let Some(v) = k.strip_prefix("reload-") {
            assert_eq!(
                delivered.contains(&v.parse().unwrap()),
                s == "done",
                "reload of version {v}: effect and record disagree (seed {seed})"
            );
        }
    }
    assert_eq!(
        std::fs::read_to_string(base.join("app.conf")).unwrap(),
        conf_text(last_version)
    );
    assert!(
        delivered.contains(&last_version),
        "the last change was delivered to its handler: {reloads:?} (seed {seed})"
    );
    let pending = std::fs::read_dir(state.join("outbox"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(pending, 0, "no handler left pending");
    // And the next run changes nothing.
    proxy.arm(None, None, Duration::ZERO);
    let again = run_once(runs + 1, last_version, &[]);
    again.expect(0);
    assert_eq!(again.recap()["hosts"][alias.as_str()]["changed"], 0);

    let cut: u64 = tally.cut_at.values().sum();
    eprintln!(
        "soak: {runs} runs in {:.0?} (seed {seed}): {cut} cut, {} finished before their cut",
        soak_time, tally.not_cut
    );
    for ((how, at), n) in &tally.cut_at {
        eprintln!("soak:   {how:<15} after `{at}`: {n}");
    }
    for (what, n) in &tally.in_doubt {
        eprintln!("soak:   in doubt: {what}: {n}");
    }
    eprintln!(
        "soak:   temp files left beside the managed file: {}; longest wait for a cut run's lock: {:?}",
        tally.temp_left.len(),
        tally.lock_wait
    );
}
