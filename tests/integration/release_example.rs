//! The example `playbooks/release/site.yml` (issue 11), unchanged, applied with `become` to the
//! booted systemd root of `services_systemd.rs`: a release tarball the test builds, served by
//! the real HTTP server of `http_server.rs` and named by extra variables (URL and sha256), is
//! downloaded, unpacked on the host and run as a service by a system user, converging under
//! `--twice`; a new release restarts the service through the handler.

use crate::fx::{Fx, Out};
use crate::http_server::{Route, Server};
use crate::services_systemd::SystemdHost;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The program in the release: a stand-in that stays running.
const PROGRAM: &str = "#!/bin/sh\n# A stand-in release (fixpoint's release_example test): it stays running.\nexec sleep infinity\n";

/// `fptest-app-<version>.tar.gz` holding `fptest-app-<version>/fptest-app`; its path and sha256.
fn tarball(fx: &Fx, version: &str) -> (PathBuf, String) {
    let top = format!("fptest-app-{version}");
    let src = fx.path(&format!("build-{version}"));
    let program = src.join(&top).join("fptest-app");
    std::fs::create_dir_all(program.parent().unwrap()).unwrap();
    std::fs::write(&program, PROGRAM).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = fx.path(&format!("{top}.tar.gz"));
    let st = Command::new("tar")
        .arg("-C")
        .arg(&src)
        .arg("-czf")
        .arg(&out)
        .arg(&top)
        .status()
        .expect("run tar");
    assert!(st.success(), "tar failed");
    let sum = Command::new("sha256sum").arg(&out).output().unwrap();
    let sum = String::from_utf8_lossy(&sum.stdout);
    let sum = sum.split_whitespace().next().unwrap().to_string();
    (out, sum)
}

/// `fixpoint apply` of the example, unchanged, with this release in extra variables.
fn apply(host: &SystemdHost, fx: &Fx, server: &Server, version: &str, extra: &[&str]) -> Out {
    let (archive, sum) = tarball(fx, version);
    let name = archive.file_name().unwrap().to_string_lossy().to_string();
    server.route(
        &format!("/releases/{name}"),
        Route {
            status: 200,
            headers: vec![("Content-Type".into(), "application/gzip".into())],
            body: std::fs::read(&archive).unwrap(),
            auth: None,
        },
    );
    let vars = serde_json::json!({
        "app_name": "fptest-app",
        "app_user": "fptest-app",
        "app_args": "--listen 127.0.0.1:1",
        "release_version": version,
        "release_url": server.url(&format!("/releases/{name}")),
        "release_checksum": format!("sha256:{sum}"),
        "release_binary": format!("fptest-app-{version}/fptest-app"),
    });
    let site = Path::new(env!("CARGO_MANIFEST_DIR")).join("playbooks/release/site.yml");
    Command::new(crate::fx::bin())
        .args([
            "apply",
            "--format",
            "json",
            "-i",
            "hosts.ini",
            "--ssh-config",
        ])
        .arg(host.ssh_config())
        .args(extra)
        .args(["-e", &vars.to_string()])
        .arg(&site)
        .current_dir(fx.dir.path())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run fixpoint")
        .into()
}

#[test]
fn release_example_installs_and_runs_the_service() {
    let host = SystemdHost::boot();
    let fx = host.fx();
    let server = Server::start();

    let out = apply(&host, &fx, &server, "1.0", &["--twice"]);
    out.expect(0);
    assert_eq!(
        out.recap()["hosts"]["sd"]["changed"],
        0,
        "second pass changed something: {}",
        out.stdout
    );
    for task in [
        "the service group exists",
        "the service user exists",
        "the release directory exists",
        "the release tarball is downloaded and verified",
        "the release is unpacked",
        "the unit is installed",
        "the service is enabled and started",
        "restart the service",
    ] {
        assert_eq!(
            out.task_events(task)[0]["status"],
            "changed",
            "{task}: {}",
            out.stdout
        );
    }
    assert_eq!(out.task_events("restart the service").len(), 1);
    // The second pass found the tarball with its checksum and did not fetch it again.
    assert_eq!(
        server.count("GET", "/releases/fptest-app-1.0.tar.gz"),
        1,
        "{:?}",
        server.log()
    );

    let passwd = host.nsenter(&["getent", "passwd", "fptest-app"]);
    assert!(
        passwd
            .trim()
            .ends_with(":/opt/fptest-app:/usr/sbin/nologin"),
        "the system user: {passwd:?}"
    );
    let uid: u32 = passwd.split(':').nth(2).unwrap().parse().unwrap();
    assert!(uid < 1000, "fptest-app is a system user: {passwd:?}");
    let group = host.nsenter(&["getent", "group", "fptest-app"]);
    assert_eq!(
        group.split(':').nth(2),
        passwd.split(':').nth(3),
        "the user's group: {group:?}"
    );
    let program = "/opt/fptest-app/releases/1.0/fptest-app-1.0/fptest-app";
    assert_eq!(
        host.nsenter(&["stat", "-c", "%a %U:%G", program]).trim(),
        "755 root:root"
    );
    assert_eq!(host.nsenter(&["cat", program]), PROGRAM);
    let unit = host.nsenter(&["cat", "/etc/systemd/system/fptest-app.service"]);
    assert!(
        unit.contains("User=fptest-app\n")
            && unit.contains(&format!("ExecStart={program} --listen 127.0.0.1:1\n")),
        "the unit: {unit}"
    );
    assert_eq!(host.prop("fptest-app", "UnitFileState"), "enabled");
    assert_eq!(host.prop("fptest-app", "ActiveState"), "active");
    let pid = host.prop("fptest-app", "MainPID");
    let owner = host.nsenter(&["ps", "-o", "user=", "-p", &pid]);
    assert_eq!(owner.trim(), "fptest-app", "the service's user");

    // A new release: unpacked beside the old one, the unit points at it, the handler restarts
    // the service once.
    let out = apply(&host, &fx, &server, "1.1", &[]);
    out.expect(0);
    assert_eq!(out.status_of("the release is unpacked"), "changed");
    assert_eq!(out.status_of("the unit is installed"), "changed");
    assert_eq!(out.task_events("restart the service").len(), 1);
    assert_eq!(
        host.prop("fptest-app", "Description"),
        "fptest-app 1.1",
        "{}",
        out.stdout
    );
    assert_eq!(host.prop("fptest-app", "ActiveState"), "active");
    assert_ne!(host.prop("fptest-app", "MainPID"), pid, "not restarted");
}
