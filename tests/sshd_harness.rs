//! Tests of the real-sshd test harness itself (tests/support), driven with the plain `ssh` client.
//!
//! If these fail, every SSH integration test is suspect, so they check the
//! harness's promises directly: hosts start concurrently and accept the
//! generated key, host keys are verified, and `kill()` drops live connections.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use support::{write_known_hosts, write_ssh_config, SshHost};

/// Generous: ssh here only talks to loopback, but CI machines are small.
const SSH_TIMEOUT: Duration = Duration::from_secs(30);

/// Waits for `child` to exit, failing the test (after killing it) if it takes
/// longer than `timeout`; the wait happens on a thread so that its exit is
/// the event we block on.
fn wait_with_timeout(child: Child, timeout: Duration, what: &str) -> Output {
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(timeout) {
        Ok(out) => out.unwrap_or_else(|e| panic!("{what}: waiting for ssh failed: {e}")),
        Err(_) => {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            panic!("{what}: ssh did not finish within {timeout:?}");
        }
    }
}

fn run(mut cmd: Command, what: &str) -> Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot run ssh: {e}"));
    wait_with_timeout(child, SSH_TIMEOUT, what)
}

fn ssh(config: &std::path::Path, alias: &str, remote: &[&str]) -> Command {
    let mut cmd = Command::new("ssh");
    cmd.arg("-F").arg(config).arg(alias).args(remote);
    cmd
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn three_hosts_start_concurrently_and_accept_logins() {
    let starters: Vec<_> = (0..3)
        .map(|_| std::thread::spawn(|| SshHost::start("fpuser")))
        .collect();
    let hosts: Vec<SshHost> = starters
        .into_iter()
        .map(|t| t.join().expect("starting sshd panicked"))
        .collect();

    let mut endpoints: Vec<_> = hosts.iter().map(|h| (h.addr(), h.port())).collect();
    endpoints.sort();
    endpoints.dedup();
    assert_eq!(endpoints.len(), 3, "hosts share an endpoint: {endpoints:?}");

    let scratch = tempfile::tempdir().unwrap();
    let config = scratch.path().join("ssh_config");
    let refs: Vec<&SshHost> = hosts.iter().collect();
    write_ssh_config(&refs, &config);

    // Log into all three at once through the shared config.
    let logins: Vec<_> = hosts
        .iter()
        .map(|h| {
            let (config, alias) = (config.clone(), h.alias().to_owned());
            std::thread::spawn(move || {
                let t = run(ssh(&config, &alias, &["true"]), &alias);
                let id = run(ssh(&config, &alias, &["id", "-un"]), &alias);
                (alias, t, id)
            })
        })
        .collect();
    for login in logins {
        let (alias, t, id) = login.join().unwrap();
        assert!(
            t.status.success(),
            "`ssh {alias} true` failed: {}",
            text(&t.stderr)
        );
        assert!(
            id.status.success(),
            "`ssh {alias} id -un` failed: {}",
            text(&id.stderr)
        );
        assert_eq!(text(&id.stdout).trim(), "fpuser");
    }

    // Each host's own config works too, and sshd logged the key login.
    for h in &hosts {
        let out = run(
            {
                let mut c = h.ssh_command();
                c.args(["id", "-un"]);
                c
            },
            h.alias(),
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(text(&out.stdout).trim(), "fpuser");
        assert!(
            h.wait_for_log("Accepted publickey for fpuser", SSH_TIMEOUT),
            "sshd log lacks the key login:\n{}",
            h.log()
        );
    }
}

#[test]
fn unknown_host_key_is_refused() {
    let host = SshHost::start("fpuser");

    host.forget_host_key();
    let out = run(
        ssh(&host.ssh_config_path(), host.alias(), &["true"]),
        "forgotten key",
    );
    assert_eq!(out.status.code(), Some(255), "ssh should refuse the host");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("Host key verification failed"),
        "unexpected ssh stderr: {stderr}"
    );

    host.trust_host_key();
    let out = run(
        ssh(&host.ssh_config_path(), host.alias(), &["true"]),
        "trusted key",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));

    // Same through a shared config whose known_hosts leaves one host out.
    let other = SshHost::start("fpuser");
    let scratch = tempfile::tempdir().unwrap();
    let config = scratch.path().join("ssh_config");
    let known_hosts = write_ssh_config(&[&host, &other], &config);
    write_known_hosts(&[&other], &known_hosts);
    let refused = run(ssh(&config, host.alias(), &["true"]), "left-out host");
    assert_eq!(refused.status.code(), Some(255));
    assert!(
        text(&refused.stderr).contains("Host key verification failed"),
        "unexpected ssh stderr: {}",
        text(&refused.stderr)
    );
    let accepted = run(ssh(&config, other.alias(), &["true"]), "listed host");
    assert!(accepted.status.success(), "{}", text(&accepted.stderr));
}

#[test]
fn kill_drops_a_live_connection() {
    let mut host = SshHost::start("fpuser");
    let mut child = host
        .ssh_command()
        // `$$` is the remote shell, which `exec` turns into the sleep.
        .arg("echo $$; exec sleep 600")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run ssh");

    // The echoed pid proves the session is up before we pull the plug.
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let remote_pid: i32 = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("expected a pid from the remote shell, got {line:?}"));

    host.kill();
    assert!(!host.is_running());

    let out = wait_with_timeout(child, SSH_TIMEOUT, "ssh after kill");
    assert_eq!(
        out.status.code(),
        Some(255),
        "ssh should report the lost connection; stderr: {}",
        text(&out.stderr)
    );

    // The user's command died with its host (or is a zombie awaiting init).
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{remote_pid}/stat")) {
        let state = stat[stat.rfind(')').unwrap() + 1..]
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_owned();
        assert_eq!(
            state, "Z",
            "remote sleep {remote_pid} survived kill(): {stat}"
        );
    }

    // Nothing listens any more.
    let out = run(
        {
            let mut c = host.ssh_command();
            c.arg("true");
            c
        },
        "after kill",
    );
    assert_eq!(out.status.code(), Some(255));
    assert!(
        text(&out.stderr).contains("Connection refused"),
        "unexpected ssh stderr: {}",
        text(&out.stderr)
    );
}

/// The users that .ci/run creates log in, and their sudo rights are as set up:
/// fpsudo without a password, fppass only with one.
#[test]
fn test_users_have_the_promised_sudo_rights() {
    let sudo = SshHost::start("fpsudo");
    let out = run(
        {
            let mut c = sudo.ssh_command();
            c.arg("sudo -n id -un");
            c
        },
        "fpsudo",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "root");

    let pass = SshHost::start("fppass");
    let out = run(
        {
            let mut c = pass.ssh_command();
            c.arg("sudo -n true");
            c
        },
        "fppass without password",
    );
    assert!(
        !out.status.success(),
        "fppass must need a password for sudo"
    );
    let out = run(
        {
            let mut c = pass.ssh_command();
            c.arg("echo fixpoint-test-pw | sudo -S -p '' id -un");
            c
        },
        "fppass with password",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "root");
}
