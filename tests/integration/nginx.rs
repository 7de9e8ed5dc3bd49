//! A real web server converged by fixpoint: `playbooks/nginx/site.yml` installs nginx from
//! Debian's packages on a loopback sshd host (user fpsudo, `become`), and an HTTP GET proves
//! the templated site is served, before and after a changed variable reloads it.
//!
//! nginx goes into this machine's dpkg database and its SysV init links: the test holds the apt
//! tests' lock, and its guard stops nginx and purges exactly the packages it installed (also
//! when the test panics).

use crate::ssh::Fleet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SITE: &str = "fptest-nginx";

/// Installed packages (`ii`) and removed-with-conffiles ones (`rc`), by name.
fn dpkg_known() -> std::collections::BTreeSet<String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f", "${db:Status-Abbrev}|${binary:Package}\n"])
        .stdin(Stdio::null())
        .output()
        .expect("dpkg-query (package dpkg)");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('|'))
        .filter(|(st, _)| st.starts_with("ii") || st.starts_with("rc"))
        .map(|(_, p)| p.to_string())
        .collect()
}

/// Undoes what the test did to this machine, on drop: nginx stopped, the packages it installed
/// purged, the site's files removed, the default site restored if nginx stays.
struct Cleanup {
    _lock: std::sync::MutexGuard<'static, ()>,
    files: Vec<String>,
    before: std::collections::BTreeSet<String>,
    default_enabled: bool,
}

impl Cleanup {
    /// `files`: what the test writes beside the packages' own files, removed on drop.
    fn new(files: &[&str]) -> Cleanup {
        let lock = crate::apt::APT_LOCK
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        crate::support::require_root();
        for t in [
            "/usr/bin/apt-get",
            "/usr/sbin/service",
            "/usr/sbin/update-rc.d",
        ] {
            assert!(
                Path::new(t).exists(),
                "{t} is missing: install apt and init-system-helpers (.ci/run does)"
            );
        }
        Cleanup {
            _lock: lock,
            files: files.iter().map(|f| f.to_string()).collect(),
            before: dpkg_known(),
            default_enabled: Path::new("/etc/nginx/sites-enabled/default").exists(),
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
        let installed: Vec<String> = dpkg_known().difference(&self.before).cloned().collect();
        if installed.is_empty() {
            // nginx was there before the test: give it back its default site.
            if self.default_enabled {
                let _ = std::os::unix::fs::symlink(
                    "/etc/nginx/sites-available/default",
                    "/etc/nginx/sites-enabled/default",
                );
            }
            let _ = Command::new("service").args(["nginx", "reload"]).output();
            return;
        }
        let _ = Command::new("service").args(["nginx", "stop"]).output();
        let out = Command::new("apt-get")
            .args(["-y", "-q", "purge"])
            .args(&installed)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .output();
        if let Ok(o) = out {
            if !o.status.success() {
                eprintln!(
                    "purging {installed:?} failed: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
            }
        }
    }
}

/// A port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The body of `GET /` on this port, or None when nothing answers with 200.
fn get(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .ok()?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).ok()?;
    let (head, body) = resp.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

/// Poll (with a deadline) until the site serves `want`: a reload replaces nginx's workers
/// after `service nginx reload` has returned.
fn wait_body(port: u16, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = get(port);
        if got.as_deref() == Some(want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "port {port} serves {got:?}, expected {want:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn playbook() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("playbooks/nginx/site.yml")
}

fn apply(fleet: &Fleet, extra: &[&str]) -> crate::fx::Out {
    let mut args = vec![
        "apply",
        "--format",
        "json",
        "-i",
        "hosts.ini",
        "--ssh-config",
        fleet.config.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let pb = playbook();
    args.push(pb.to_str().unwrap());
    fleet.fx.run(&args)
}

#[test]
fn nginx_playbook_serves_its_site_and_reloads_on_change() {
    let _cleanup = Cleanup::new(&[
        &format!("/etc/nginx/sites-enabled/{SITE}"),
        &format!("/etc/nginx/sites-available/{SITE}"),
    ]);
    let fleet = Fleet::start(1, "fpsudo");
    let port = free_port();
    let port_var = format!("site_port={port}");
    let site_var = format!("site_name={SITE}");

    let out = apply(
        &fleet,
        &[
            "--twice",
            "-e",
            &port_var,
            "-e",
            &site_var,
            "-e",
            "site_message=first-body",
        ],
    );
    out.expect(0);
    let host = fleet.hosts[0].alias();
    let recap = out.recap();
    assert_eq!(
        recap["hosts"][&host]["changed"], 0,
        "second pass changed something: {}",
        out.stdout
    );
    for handler in ["validate nginx configuration", "reload nginx"] {
        assert_eq!(
            out.task_events(handler).len(),
            1,
            "{handler} runs once, in the first pass: {}",
            out.stdout
        );
    }
    assert_eq!(
        out.task_events("the site is configured")[0]["status"],
        "changed"
    );
    wait_body(port, "first-body\n");
    assert!(
        !Path::new("/etc/nginx/sites-enabled/default").exists(),
        "the default site is still enabled"
    );
    let links: Vec<_> = glob::glob("/etc/rc2.d/S??nginx").unwrap().collect();
    assert_eq!(
        links.len(),
        1,
        "nginx is enabled through update-rc.d: {links:?}"
    );

    // A changed variable: the template changes, the handlers run once, the new body is served.
    let out = apply(
        &fleet,
        &[
            "-e",
            &port_var,
            "-e",
            &site_var,
            "-e",
            "site_message=second-body",
        ],
    );
    out.expect(0);
    assert_eq!(
        out.status_of("the site is configured"),
        "changed",
        "{}",
        out.stdout
    );
    assert_eq!(out.status_of("the site is enabled"), "ok");
    assert_eq!(out.status_of("nginx is installed"), "ok");
    assert_eq!(out.status_of("validate nginx configuration"), "ok");
    assert_eq!(out.status_of("reload nginx"), "changed");
    assert_eq!(out.recap()["hosts"][&host]["changed"], 2, "{}", out.stdout);
    wait_body(port, "second-body\n");
}

/// The public role geerlingguy.nginx, unchanged, on the same kind of host: its vhost on a free
/// port (as its README shows), the modules fixpoint lacks (`apt_repository`, only in its Ubuntu
/// file) left to ansible-core's code, converging under `--twice`; then the vhost answers.
#[test]
fn geerlingguy_nginx_role_converges_and_serves() {
    // The project's read-only copy of public roles (taken unchanged from their repositories).
    let roles = crate::public_roles::public_roles().join("roles");
    let roles = roles.as_path();
    let _cleanup = Cleanup::new(&["/etc/nginx/sites-enabled/fptest-role.conf"]);
    let fleet = Fleet::start(1, "fpsudo");
    let port = free_port();
    fleet.fx.write(
        "site.yml",
        "- hosts: all\n  become: true\n  vars:\n    nginx_remove_default_vhost: true\n    nginx_listen_ipv6: false\n    nginx_vhosts:\n      - listen: \"{{ site_port }}\"\n        server_name: fptest-role\n        filename: fptest-role.conf\n        return: '200 \"served by geerlingguy.nginx\\n\"'\n  roles:\n    - geerlingguy.nginx\n",
    );
    let port_var = format!("site_port={port}");
    let args = fleet.apply_args(&[
        "--twice",
        "--roles-path",
        roles.to_str().unwrap(),
        "-e",
        &port_var,
    ]);
    let out: crate::fx::Out = Command::new(crate::fx::bin())
        .args(&args)
        .current_dir(fleet.fx.dir.path())
        .env(
            "FIXPOINT_ANSIBLE_PYTHON",
            crate::python_modules::ansible_python(),
        )
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run fixpoint")
        .into();
    out.expect(0);
    let host = fleet.hosts[0].alias();
    assert_eq!(
        out.recap()["hosts"][&host]["changed"],
        0,
        "second pass changed something: {}",
        out.stdout
    );
    assert_eq!(
        out.task_events("Ensure nginx is installed.")[0]["status"],
        "changed"
    );
    wait_body(port, "served by geerlingguy.nginx\n");
}
