//! The public role cloudalchemy.node_exporter, unchanged, applied for real with `become` to the
//! booted systemd root of `services_systemd.rs`: system group and user, the binary, the systemd
//! unit, the service enabled and started, converging under `--twice`.
//!
//! The role downloads from github.com URLs written into its tasks (no variable names them), so
//! the test uses the role's own offline path instead, `node_exporter_binary_local_dir`: the
//! binary is copied from a directory on the controller, and the tasks that download, check the
//! checksum list and unpack are skipped by the role's own `when`. The binary is a stand-in
//! script that answers `--version` as node_exporter 1.1.2 does and otherwise stays running.
//!
//! The role's version check cannot run under ansible-core 2.19 (`command`'s `warn` is gone since
//! 2.14; ansible-core fails it too): an extra variable skips it, see below.

use crate::services_systemd::{SystemdHost, ROOT};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// What `--version` prints on stderr, like node_exporter 1.1.2; anything else runs as a daemon.
const FAKE_BINARY: &str = "#!/bin/sh\n# A stand-in for node_exporter 1.1.2 (fixpoint's integration test).\nif [ \"$1\" = --version ]; then\n  echo 'node_exporter, version 1.1.2 (branch: HEAD, revision: fixpoint-test)' >&2\n  exit 0\nfi\nexec sleep infinity\n";

#[test]
fn cloudalchemy_node_exporter_role_converges_on_systemd() {
    let roles = crate::public_roles::public_roles().join("roles");
    // The role becomes root with sudo: the root's recipe (.ci/run) includes it.
    assert!(
        Path::new(ROOT).join("usr/bin/sudo").exists(),
        "{ROOT} has no sudo: .ci/run rebuilds the root when its recipe (with sudo) changes"
    );
    let host = SystemdHost::boot();
    let fx = host.fx();
    let bin_dir = fx.path("release");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let bin = bin_dir.join("node_exporter");
    std::fs::write(&bin, FAKE_BINARY).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    fx.write(
        "site.yml",
        &format!(
            "- hosts: sd\n  vars:\n    node_exporter_binary_local_dir: {}\n    node_exporter_web_listen_address: 127.0.0.1:9100\n  roles:\n    - cloudalchemy.node_exporter\n",
            bin_dir.display()
        ),
    );

    // `seport` (skipped here: SELinux is off) is community.general's: fixpoint resolves the
    // name through the ansible-core installation and the `ansible` package's collections, as
    // Ansible does (`.ci/run` unpacks them into FIXPOINT_ANSIBLE_COLLECTIONS).
    let collections = std::env::var_os("FIXPOINT_ANSIBLE_COLLECTIONS")
        .filter(|v| !v.is_empty())
        .expect(
            "FIXPOINT_ANSIBLE_COLLECTIONS is not set: the role names community.general's seport; \
             set it to a directory holding `ansible_collections/` (`.ci/run` makes one)",
        );
    let cfg = host.ssh_config();
    let out: crate::fx::Out = Command::new(crate::fx::bin())
        .args([
            "apply",
            "--format",
            "json",
            "-i",
            "hosts.ini",
            "--ssh-config",
        ])
        .arg(&cfg)
        .args(["--twice", "--roles-path"])
        .arg(&roles)
        // The role's "Gather currently installed node_exporter version" passes `warn: false`
        // to `command`, a parameter ansible-core removed in 2.14: ansible-core 2.19 fails that
        // task as fixpoint does, on every run after the first. The role's own register is
        // pinned by an extra variable so that the task is skipped (the role then reinstalls
        // the binary every run, idempotently, as it does anyway with a local binary dir).
        .args([
            "-e",
            r#"{"__node_exporter_is_installed": {"stat": {"exists": false}}}"#,
        ])
        .arg("site.yml")
        .current_dir(fx.dir.path())
        .env(
            "FIXPOINT_ANSIBLE_PYTHON",
            crate::python_modules::ansible_python(),
        )
        .env("ANSIBLE_COLLECTIONS_PATH", collections)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run fixpoint")
        .into();
    out.expect(0);
    assert_eq!(
        out.recap()["hosts"]["sd"]["changed"],
        0,
        "second pass changed something: {}",
        out.stdout
    );
    // The first pass did the work; the unit's handler ran once.
    for task in [
        "Create the node_exporter group",
        "Create the node_exporter user",
        "propagate locally distributed node_exporter binary",
        "Copy the node_exporter systemd service file",
        "Create textfile collector dir",
        "restart node_exporter",
    ] {
        assert_eq!(
            out.task_events(task)[0]["status"],
            "changed",
            "{task}: {}",
            out.stdout
        );
    }
    assert_eq!(out.task_events("restart node_exporter").len(), 1);
    // The root has no Python: every task that ran, ran natively; the one module left to
    // ansible-core's code (`seport`) is skipped (SELinux is off), as its `when` says.
    let mut table = std::collections::BTreeSet::new();
    for e in out.events().iter().filter(|e| e["event"] == "task") {
        let engine = if e["engine"] == "python" {
            "python"
        } else {
            "native"
        };
        table.insert(format!(
            "{} | {} | {engine} | {}",
            e["task"].as_str().unwrap_or_default(),
            e["module"].as_str().unwrap_or_default(),
            e["status"].as_str().unwrap_or_default()
        ));
        if engine == "python" {
            assert_eq!(e["module"], "seport", "{e}");
            assert_eq!(e["status"], "skipped", "{e}");
        }
    }
    eprintln!(
        "task | module | engine | status\n{}",
        table.into_iter().collect::<Vec<_>>().join("\n")
    );

    assert_eq!(
        host.nsenter(&["stat", "-c", "%a %U:%G", "/usr/local/bin/node_exporter"])
            .trim(),
        "755 root:root"
    );
    let passwd = host.nsenter(&["getent", "passwd", "node-exp"]);
    assert!(
        passwd.trim().ends_with(":/:/usr/sbin/nologin"),
        "the system user: {passwd:?}"
    );
    let uid: u32 = passwd.split(':').nth(2).unwrap().parse().unwrap();
    assert!(uid < 1000, "node-exp is a system user: {passwd:?}");
    let unit = host.nsenter(&["cat", "/etc/systemd/system/node_exporter.service"]);
    assert!(
        unit.contains("User=node-exp")
            && unit.contains("--web.listen-address=127.0.0.1:9100")
            && unit.contains("--collector.textfile.directory=/var/lib/node_exporter"),
        "the unit: {unit}"
    );
    assert_eq!(
        host.nsenter(&["stat", "-c", "%a %U:%G", "/var/lib/node_exporter"])
            .trim(),
        "775 node-exp:node-exp"
    );
    assert_eq!(host.prop("node_exporter", "ActiveState"), "active");
    assert_eq!(host.prop("node_exporter", "UnitFileState"), "enabled");
    let pid = host.prop("node_exporter", "MainPID");
    let owner = host.nsenter(&["ps", "-o", "user=", "-p", &pid]);
    assert_eq!(owner.trim(), "node-exp", "the daemon's user");
}
