//! Test support for integration tests: real `sshd` servers on loopback addresses, with generated keys.
//!
//! Each [`SshHost`] is a private `/usr/sbin/sshd -D` started by the test on its
//! own 127.0.0.N address and port, with its own host key, client key,
//! `authorized_keys`, `known_hosts` and client `ssh_config` in a temp dir. It
//! logs in as one of the test users that `.ci/run` creates. Nothing is mocked.
//!
//! Missing prerequisites make the test fail (never skip) with a message saying
//! what to install or run.

// Every integration test binary compiles this module on its own and uses only
// part of it, so unused items are expected in each of them.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::{geteuid, Pid, User};

pub mod git;
pub mod systemd;

/// What every prerequisite failure tells the reader to do.
pub const SETUP_HINT: &str =
    "run .ci/run (it installs openssh-server and sudo and creates the test users)";

const SSHD: &str = "/usr/sbin/sshd";

/// How long sshd may take to print "Server listening on".
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long to wait, after killing sshd, for its stderr to reach EOF so the
/// log is complete. Only the killed processes hold the pipe, so this is quick.
const LOG_EOF_TIMEOUT: Duration = Duration::from_secs(5);

/// Panics unless the test runs as root (sshd must, to log in as other users).
pub fn require_root() {
    if !geteuid().is_root() {
        panic!(
            "this test must run as root: it starts sshd, which has to switch to \
             the test users; {SETUP_HINT}"
        );
    }
}

/// Panics unless user `name` exists and can log in with a key.
pub fn require_user(name: &str) {
    match User::from_name(name) {
        Ok(Some(_)) => {}
        Ok(None) => panic!("test user `{name}` does not exist; {SETUP_HINT}"),
        Err(e) => panic!("cannot look up test user `{name}` ({e}); {SETUP_HINT}"),
    }
    // With `UsePAM no`, sshd refuses every login to a locked account (`!` in
    // the shadow password field), which is what a bare `useradd` leaves.
    if let Ok(shadow) = fs::read_to_string("/etc/shadow") {
        let locked = shadow
            .lines()
            .filter_map(|l| l.split_once(':'))
            .any(|(user, rest)| user == name && rest.starts_with('!'));
        if locked {
            panic!(
                "test user `{name}` is locked (`!` in /etc/shadow), so sshd \
                 refuses key logins; `usermod -p '*' {name}` fixes it, or {SETUP_HINT}"
            );
        }
    }
}

/// Panics unless sshd, the ssh client and ssh-keygen are installed and sshd's
/// privilege-separation directory exists.
pub fn require_sshd() {
    if !Path::new(SSHD).is_file() {
        panic!("{SSHD} is missing (package openssh-server); {SETUP_HINT}");
    }
    for tool in ["ssh", "ssh-keygen"] {
        if find_in_path(tool).is_none() {
            panic!("`{tool}` is not on PATH (package openssh-client); {SETUP_HINT}");
        }
    }
    if !Path::new("/run/sshd").is_dir() {
        panic!("/run/sshd (sshd's privilege-separation directory) is missing; {SETUP_HINT}");
    }
}

fn find_in_path(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(tool))
        .find(|p| p.is_file())
}

/// Per-process sequence: gives each host a distinct alias and, mixed with the
/// pid, a distinct loopback address.
static NEXT_HOST: AtomicU64 = AtomicU64::new(0);

/// Picks 127.0.0.N. The pid term keeps test binaries that run at the same
/// time apart; the port is chosen free on that address anyway, so a rare
/// collision only shares an address, never a listener.
fn next_address() -> (u64, Ipv4Addr) {
    let seq = NEXT_HOST.fetch_add(1, Ordering::Relaxed);
    let pid = u64::from(std::process::id());
    let n = 10 + (pid.wrapping_mul(7).wrapping_add(seq)) % 240;
    (seq, Ipv4Addr::new(127, 0, 0, n as u8))
}

/// sshd's stderr as collected so far, shared with the draining thread.
#[derive(Default)]
struct LogState {
    text: String,
    /// stderr reached EOF: every sshd process has exited.
    eof: bool,
}

#[derive(Default)]
struct Log {
    state: Mutex<LogState>,
    changed: Condvar,
}

impl Log {
    fn lock(&self) -> std::sync::MutexGuard<'_, LogState> {
        // A panic elsewhere must not hide the log, which is most useful then.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Blocks until `done` holds for the log or `timeout` passes; returns
    /// whether it holds. Woken by each line sshd writes, so no polling.
    fn wait_until(&self, timeout: Duration, done: impl Fn(&LogState) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.lock();
        loop {
            if done(&state) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            state = self
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn drain(&self, stderr: impl Read) {
        let mut reader = BufReader::new(stderr);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    self.lock().text.push_str(&String::from_utf8_lossy(&line));
                    self.changed.notify_all();
                }
            }
        }
        self.lock().eof = true;
        self.changed.notify_all();
    }
}

/// A running sshd on 127.0.0.N:PORT that accepts the generated client key for
/// `user`. Dropping it kills sshd and everything it started, and removes its
/// temp dir; if the thread is panicking, the sshd log goes to stderr first.
pub struct SshHost {
    alias: String,
    addr: Ipv4Addr,
    port: u16,
    user: String,
    dir: tempfile::TempDir,
    host_key_line: String,
    child: Option<Child>,
    /// How sshd ended, once [`kill`](Self::kill) has run (the reaper exits
    /// with sshd's status, or 128 + signal).
    exit_status: Option<std::process::ExitStatus>,
    log: Arc<Log>,
}

impl SshHost {
    /// Starts sshd for `user` and returns once it is accepting connections.
    /// Panics (with the sshd log) if it does not come up.
    pub fn start(user: &str) -> SshHost {
        Self::start_with_max_startups(user, "100")
    }

    /// Like [`start`](Self::start), with sshd's `MaxStartups` (how many unauthenticated
    /// connections it takes at once, `start:rate:full`) set to `max_startups`.
    pub fn start_with_max_startups(user: &str, max_startups: &str) -> SshHost {
        require_root();
        require_sshd();
        require_user(user);
        // The free port is learnt by binding and released before sshd binds
        // it, so another process may take it in between: retry on a new
        // address and port in that case.
        let mut failures = Vec::new();
        for _ in 0..5 {
            match Self::try_start(user, max_startups) {
                Ok(host) => return host,
                Err(StartError::AddressInUse(log)) => failures.push(log),
                Err(StartError::Fatal(msg)) => panic!("{msg}"),
            }
        }
        panic!(
            "sshd could not bind a loopback address in 5 tries; last log:\n{}",
            failures.last().map(String::as_str).unwrap_or("")
        );
    }

    fn try_start(user: &str, max_startups: &str) -> Result<SshHost, StartError> {
        let (seq, addr) = next_address();
        let port = TcpListener::bind((addr, 0))
            .and_then(|l| l.local_addr())
            .map_err(|e| StartError::Fatal(format!("cannot bind {addr}:0 to find a port: {e}")))?
            .port();

        let dir = tempfile::Builder::new()
            .prefix("fixpoint-sshd-")
            .tempdir()
            .map_err(|e| StartError::Fatal(format!("cannot create temp dir: {e}")))?;
        // sshd reads authorized_keys with the user's privileges, so the
        // directory must be traversable by that user.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755))
            .map_err(|e| StartError::Fatal(format!("chmod temp dir: {e}")))?;
        let dir_str = dir.path().to_str().unwrap_or("");
        if dir_str.is_empty() || dir_str.chars().any(char::is_whitespace) {
            // Neither config file format is written with quoting here.
            return Err(StartError::Fatal(format!(
                "temp dir path {:?} is not usable in sshd/ssh configs (empty, \
                 non-UTF-8 or with whitespace); set TMPDIR to a plain path",
                dir.path()
            )));
        }

        let host_key = dir.path().join("host_ed25519_key");
        let client_key = dir.path().join("id_ed25519");
        keygen(&host_key, &format!("fixpoint-test-host-{addr}"))?;
        keygen(&client_key, &format!("fixpoint-test-client-{user}"))?;

        let authorized_keys = dir.path().join("authorized_keys");
        let client_pub = read(&client_key.with_extension("pub"))?;
        write(&authorized_keys, &client_pub, 0o644)?;

        let host_pub = read(&host_key.with_extension("pub"))?;
        // Keep "type base64" and drop the comment.
        let host_key_line = host_pub
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");

        let sshd_config = dir.path().join("sshd_config");
        let config = format!(
            "Port {port}\n\
             ListenAddress {addr}:{port}\n\
             HostKey {host_key}\n\
             AuthorizedKeysFile {authorized_keys}\n\
             PidFile {pid_file}\n\
             UsePAM no\n\
             PubkeyAuthentication yes\n\
             PasswordAuthentication no\n\
             KbdInteractiveAuthentication no\n\
             StrictModes no\n\
             PermitRootLogin yes\n\
             Subsystem sftp internal-sftp\n\
             LogLevel VERBOSE\n\
             MaxSessions 50\n\
             MaxStartups {max_startups}\n\
             PrintMotd no\n\
             PrintLastLog no\n",
            host_key = host_key.display(),
            authorized_keys = authorized_keys.display(),
            pid_file = dir.path().join("sshd.pid").display(),
        );
        write(&sshd_config, &config, 0o644)?;

        let mut cmd = Command::new(SSHD);
        cmd.arg("-D") // stay in the foreground: we own the process
            .arg("-e") // log to stderr, which we read
            .arg("-f")
            .arg(&sshd_config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: the hook only makes async-signal-safe system calls (prctl,
        // fork, close, waitpid, _exit) and does not allocate.
        unsafe {
            cmd.pre_exec(interpose_reaper);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| StartError::Fatal(format!("cannot run {SSHD}: {e}")))?;

        let log = Arc::new(Log::default());
        let stderr = child.stderr.take().expect("stderr was piped");
        let drain_log = Arc::clone(&log);
        std::thread::Builder::new()
            .name(format!("sshd-log-{addr}:{port}"))
            .spawn(move || drain_log.drain(stderr))
            .map_err(|e| StartError::Fatal(format!("cannot spawn log thread: {e}")))?;

        let mut host = SshHost {
            alias: format!("fphost{seq}"),
            addr,
            port,
            user: user.to_owned(),
            dir,
            host_key_line,
            child: Some(child),
            exit_status: None,
            log,
        };

        let ready = host.log.wait_until(READY_TIMEOUT, |s| {
            s.text.contains("Server listening on") || s.eof
        });
        let text = host.log();
        if !ready || !text.contains("Server listening on") {
            host.kill();
            let text = host.log();
            if text.contains("Address already in use") || text.contains("Cannot bind any address") {
                return Err(StartError::AddressInUse(text));
            }
            let why = if ready {
                let status = host.exit_status.map(|s| s.to_string()).unwrap_or_default();
                format!("exited ({status}) before it was listening")
            } else {
                format!("did not report \"Server listening on\" within {READY_TIMEOUT:?}")
            };
            return Err(StartError::Fatal(format!(
                "sshd on {addr}:{port} {why}; config:\n{config}\nlog:\n{text}"
            )));
        }

        host.trust_host_key();
        write(
            &host.ssh_config_path(),
            &host.ssh_config_block(&host.known_hosts_path()),
            0o644,
        )?;
        Ok(host)
    }

    /// The `Host` name in this host's ssh_config and the inventory.
    pub fn alias(&self) -> &str {
        &self.alias
    }

    /// The loopback address sshd listens on.
    pub fn addr(&self) -> Ipv4Addr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The account that the client key logs into.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The client's private key (accepted by this sshd for any user).
    pub fn key_path(&self) -> PathBuf {
        self.dir.path().join("id_ed25519")
    }

    /// This host's own known_hosts, holding only its host key (unless
    /// [`forget_host_key`](Self::forget_host_key) emptied it).
    pub fn known_hosts_path(&self) -> PathBuf {
        self.dir.path().join("known_hosts")
    }

    /// A client config with just this host, pointing at
    /// [`known_hosts_path`](Self::known_hosts_path).
    pub fn ssh_config_path(&self) -> PathBuf {
        self.dir.path().join("ssh_config")
    }

    /// The temp dir holding keys, configs and sshd's pid file.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Everything sshd has logged so far (LogLevel VERBOSE: connections,
    /// accepted keys, session opens and closes).
    pub fn log(&self) -> String {
        self.log.lock().text.clone()
    }

    /// Waits until the sshd log contains `needle` (e.g. "Accepted publickey")
    /// and returns whether it did within `timeout`. Woken by each log line.
    pub fn wait_for_log(&self, needle: &str, timeout: Duration) -> bool {
        self.log.wait_until(timeout, |s| s.text.contains(needle))
    }

    /// The line to put in a known_hosts file for this host:
    /// `[127.0.0.N]:PORT ssh-ed25519 AAAA...`.
    pub fn known_hosts_line(&self) -> String {
        format!("[{}]:{} {}", self.addr, self.port, self.host_key_line)
    }

    /// An Ansible INI inventory line for this host.
    pub fn inventory_line(&self) -> String {
        format!(
            "{} ansible_host={} ansible_port={} ansible_user={} ansible_ssh_private_key_file={}",
            self.alias,
            self.addr,
            self.port,
            self.user,
            self.key_path().display()
        )
    }

    /// The `Host` block for this host, trusting host keys from `known_hosts`
    /// only. Public so a test can compose a config with extra options.
    pub fn ssh_config_block(&self, known_hosts: &Path) -> String {
        format!(
            "Host {alias}\n\
             \x20   HostName {addr}\n\
             \x20   Port {port}\n\
             \x20   User {user}\n\
             \x20   IdentityFile {key}\n\
             \x20   IdentitiesOnly yes\n\
             \x20   UserKnownHostsFile {known_hosts}\n\
             \x20   GlobalKnownHostsFile /dev/null\n\
             \x20   StrictHostKeyChecking yes\n\
             \x20   UpdateHostKeys no\n\
             \x20   CheckHostIP no\n\
             \x20   BatchMode yes\n\
             \x20   ControlMaster no\n",
            alias = self.alias,
            addr = self.addr,
            port = self.port,
            user = self.user,
            key = self.key_path().display(),
            known_hosts = known_hosts.display(),
        )
    }

    /// `ssh -F <this host's config> <alias>`: append the remote command.
    pub fn ssh_command(&self) -> Command {
        let mut cmd = Command::new("ssh");
        cmd.arg("-F")
            .arg(self.ssh_config_path())
            .arg(&self.alias)
            .stdin(Stdio::null());
        cmd
    }

    /// Empties this host's own known_hosts, so that clients using its
    /// ssh_config refuse the (now unknown) host key.
    pub fn forget_host_key(&self) {
        write(&self.known_hosts_path(), "", 0o644).unwrap_or_else(|e| panic!("{e:?}"));
    }

    /// (Re)writes this host's own known_hosts with its host key.
    pub fn trust_host_key(&self) {
        write(
            &self.known_hosts_path(),
            &format!("{}\n", self.known_hosts_line()),
            0o644,
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
    }

    /// The pid of the reaper above sshd: every process sshd starts for a login (the
    /// per-connection sshd, the user's shell and what it runs) stays below it.
    pub fn reaper_pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    /// Whether sshd is still running (false after [`kill`](Self::kill)).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kills sshd and every process below it (the per-connection sshd
    /// processes and the users' commands), so live connections drop as if the
    /// host had gone away. Idempotent.
    pub fn kill(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // `child` is the reaper (see `interpose_reaper`): every process below
        // it stays below it even when its own parent dies, so repeated scans
        // find them all. A process that has been sent SIGKILL can no longer
        // fork, so once scans turn up nothing new, nothing is left alive.
        // Two empty scans in a row, because a /proc scan is not atomic: one
        // can miss a process whose parent is reaped while the scan runs, but
        // by the next scan that process has been re-parented to the reaper.
        let reaper = child.id() as i32;
        let mut killed: HashSet<i32> = HashSet::new();
        let mut empty_scans = 0;
        while empty_scans < 2 {
            let fresh: Vec<i32> = descendants(reaper)
                .into_iter()
                .filter(|p| !killed.contains(p))
                .collect();
            if fresh.is_empty() {
                empty_scans += 1;
                continue;
            }
            empty_scans = 0;
            for p in fresh {
                let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
                killed.insert(p);
            }
        }
        // The reaper exits once it has reaped them all.
        self.exit_status = child.wait().ok();
        // Every holder of the stderr pipe is gone: wait for the drain thread
        // to read the rest, so log() is complete from here on.
        self.log.wait_until(LOG_EOF_TIMEOUT, |s| s.eof);
    }
}

impl Drop for SshHost {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!(
                "---- sshd log for {} ({}:{}, user {}) ----\n{}---- end of sshd log ----",
                self.alias,
                self.addr,
                self.port,
                self.user,
                self.log()
            );
        }
    }
}

/// Writes one client config for several hosts, plus a known_hosts holding all
/// their host keys next to it (`path` with extension `known_hosts`), which the
/// config points at. Returns that known_hosts path, so a test can rewrite it
/// with [`write_known_hosts`] to leave a host out.
pub fn write_ssh_config(hosts: &[&SshHost], path: &Path) -> PathBuf {
    let known_hosts = path.with_extension("known_hosts");
    write_known_hosts(hosts, &known_hosts);
    let config: String = hosts
        .iter()
        .map(|h| h.ssh_config_block(&known_hosts))
        .collect::<Vec<_>>()
        .join("\n");
    write(path, &config, 0o644).unwrap_or_else(|e| panic!("{e:?}"));
    known_hosts
}

/// Writes a known_hosts file with the host keys of exactly `hosts`.
pub fn write_known_hosts(hosts: &[&SshHost], path: &Path) {
    let text: String = hosts
        .iter()
        .map(|h| format!("{}\n", h.known_hosts_line()))
        .collect();
    write(path, &text, 0o644).unwrap_or_else(|e| panic!("{e:?}"));
}

/// An Ansible INI inventory with `hosts` in group `group`.
pub fn inventory(group: &str, hosts: &[&SshHost]) -> String {
    let mut text = format!("[{group}]\n");
    for h in hosts {
        text.push_str(&h.inventory_line());
        text.push('\n');
    }
    text
}

/// An Ansible INI inventory of `hosts` in group `group`: each line a name, its connection
/// variables (may be empty), and a `fixpoint_state_dir` of its own, `<state>/<name>.state`:
/// hosts on loopback share this filesystem, and so would share one journal and host lock.
pub fn hosts_inventory(
    group: &str,
    hosts: impl IntoIterator<Item = (String, String)>,
    state: &Path,
) -> String {
    let mut text = format!("[{group}]\n");
    for (name, vars) in hosts {
        let dir = state.join(format!("{name}.state"));
        let line = [name, vars, format!("fixpoint_state_dir={}", dir.display())];
        text.push_str(
            &line
                .iter()
                .filter(|w| !w.is_empty())
                .cloned()
                .collect::<Vec<_>>()
                .join(" "),
        );
        text.push('\n');
    }
    text
}

#[derive(Debug)]
enum StartError {
    /// sshd could not bind: try another address and port.
    AddressInUse(String),
    Fatal(String),
}

fn keygen(path: &Path, comment: &str) -> Result<(), StartError> {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| StartError::Fatal(format!("cannot run ssh-keygen: {e}; {SETUP_HINT}")))?;
    if !out.status.success() {
        return Err(StartError::Fatal(format!(
            "ssh-keygen for {} failed ({}): {}",
            path.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

fn read(path: &Path) -> Result<String, StartError> {
    fs::read_to_string(path)
        .map_err(|e| StartError::Fatal(format!("cannot read {}: {e}", path.display())))
}

fn write(path: &Path, text: &str, mode: u32) -> Result<(), StartError> {
    fs::write(path, text)
        .and_then(|()| fs::set_permissions(path, fs::Permissions::from_mode(mode)))
        .map_err(|e| StartError::Fatal(format!("cannot write {}: {e}", path.display())))
}

/// `pre_exec` hook that puts a reaper process between the test and sshd (or any
/// program whose every descendant, daemonised or not, the test must find).
///
/// Killing sshd orphans its per-connection processes (they are its children
/// under `-D`), and orphans go to init, which here may never reap them: each
/// would stay a zombie holding a pid, and pids are scarce (pid_max can be
/// 32768). So the spawned process becomes a child subreaper, forks, and lets
/// the fork go on to exec sshd, while it stays behind reaping every process
/// that ends up below it, and exits with sshd's status when none is left.
/// Making the test process itself the subreaper would need reaping with
/// `waitpid(-1)`, stealing statuses from the tests' own children.
pub fn interpose_reaper() -> std::io::Result<()> {
    use nix::libc;

    nix::sys::prctl::set_child_subreaper(true)?;
    // SAFETY: async-signal-safe calls only, as required after fork in a
    // multi-threaded process.
    unsafe {
        let sshd = libc::fork();
        if sshd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if sshd == 0 {
            // The fork: the subreaper flag is not inherited; go on to exec.
            return Ok(());
        }
        // The reaper holds no descriptor open: not stderr (its EOF tells
        // that sshd is gone) nor spawn's exec-error pipe (spawn returns only
        // when every copy of that is closed).
        if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) != 0 {
            let max = libc::sysconf(libc::_SC_OPEN_MAX).clamp(1024, 1 << 20) as i32;
            for fd in 0..max {
                libc::close(fd);
            }
        }
        let mut code = 255;
        loop {
            let mut status = 0;
            let pid = libc::waitpid(-1, &mut status, 0);
            if pid == sshd {
                code = if libc::WIFEXITED(status) {
                    libc::WEXITSTATUS(status)
                } else {
                    128 + libc::WTERMSIG(status)
                };
            } else if pid < 0 && *libc::__errno_location() != libc::EINTR {
                // ECHILD: everything below has been reaped.
                libc::_exit(code);
            }
        }
    }
}

/// All processes below `root`, found through /proc by parent pid.
pub fn descendants(root: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    if let Ok(entries) = fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            if let Some(ppid) = parent_pid(pid) {
                children.entry(ppid).or_default().push(pid);
            }
        }
    }
    let mut found = Vec::new();
    let mut queue = vec![root];
    while let Some(p) = queue.pop() {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
            found.push(c);
            queue.push(c);
        }
    }
    found
}

/// The parent pid from /proc/PID/stat; the command name in parentheses may
/// itself contain spaces or parentheses, so parse after the last ')'.
fn parent_pid(pid: i32) -> Option<i32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    // Fields after the name: state, ppid, ...
    after.split_whitespace().nth(1)?.parse().ok()
}
