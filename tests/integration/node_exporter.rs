//! The public role cloudalchemy.node_exporter, unchanged, applied for real with `become` to the
//! booted systemd root of `services_systemd.rs`: system group and user, the binary downloaded
//! and unpacked on the controller and copied to the host, the systemd unit, the service enabled
//! and started, converging under `--twice`.
//!
//! The role's tasks name `https://github.com/...` outright (no variable does), so the test plays
//! github.com: it builds a release (a tarball holding a stand-in binary that answers `--version`
//! as node_exporter 1.1.2 does and otherwise stays running, and the `sha256sums.txt` the role
//! reads with the `url` lookup), serves it over HTTPS from the test's own server (rustls, on
//! port 443 of a loopback address of its own) with a certificate for github.com signed by a CA
//! the test makes with openssl, and runs fixpoint in a mount namespace of its own where
//! `/etc/hosts` sends github.com to that address and `/tmp` (where the role downloads and
//! unpacks) is a directory of the test's. The controller and the local agent it starts for
//! `delegate_to: localhost` trust the CA through `SSL_CERT_FILE` (rustls-native-certs reads
//! it). Nothing outside the namespace changes.
//!
//! The role's version check cannot run under ansible-core 2.19 (`command`'s `warn` is gone since
//! 2.14; ansible-core fails it too): an extra variable skips it, see below.

use crate::http_server::{Route, Server};
use crate::services_systemd::{SystemdHost, ROOT};
use sha2::Digest;
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What `--version` prints on stderr, like node_exporter 1.1.2; anything else runs as a daemon.
const FAKE_BINARY: &str = "#!/bin/sh\n# A stand-in for node_exporter 1.1.2 (fixpoint's integration test).\nif [ \"$1\" = --version ]; then\n  echo 'node_exporter, version 1.1.2 (branch: HEAD, revision: fixpoint-test)' >&2\n  exit 0\nfi\nexec sleep infinity\n";

/// The role's default `node_exporter_version`.
const VERSION: &str = "1.1.2";

/// Where the role fetches a release's files from.
const RELEASE_PATH: &str = "/prometheus/node_exporter/releases/download/v1.1.2/";

/// Runs the rest of the command line in the mount namespace `unshare` made (private
/// propagation, its default): `$1` over /etc/hosts, the directory `$2` over /tmp, and each
/// directory before `--` (all under /tmp) bound back at its own path inside the new /tmp.
const NAMESPACE: &str = r#"set -e
hosts=$1 tmp=$2
shift 2
while [ "$1" != -- ]; do
  mount --bind "$1" "$tmp/${1#/tmp/}"
  shift
done
shift
mount --bind "$hosts" /etc/hosts
mount --rbind "$tmp" /tmp
exec "$@"
"#;

/// The `go_arch` the role derives from `ansible_architecture` (the host is this machine).
fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => panic!("no node_exporter release name for the architecture {other}"),
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("openssl is missing: apt-get install openssl (.ci/run does)");
    assert!(out.status.success(), "openssl {args:?}: {out:?}");
}

/// A CA (`ca.pem`, for `SSL_CERT_FILE`) and the server's certificate for github.com and
/// api.github.com it signed, made in `dir`: (CA file, certificate DER, PKCS#8 key DER).
fn make_pki(dir: &Path) -> (PathBuf, Vec<u8>, Vec<u8>) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("ca.cnf"),
        "[req]\ndistinguished_name = dn\nx509_extensions = ca\nprompt = no\n[dn]\nCN = fixpoint test CA\n\
         [ca]\nbasicConstraints = critical, CA:TRUE\nkeyUsage = critical, keyCertSign, cRLSign\n\
         subjectKeyIdentifier = hash\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("server.ext"),
        "basicConstraints = CA:FALSE\nkeyUsage = digitalSignature, keyEncipherment\n\
         extendedKeyUsage = serverAuth\nsubjectAltName = DNS:github.com, DNS:api.github.com\n",
    )
    .unwrap();
    #[rustfmt::skip]
    let steps: [&[&str]; 4] = [
        &["req", "-x509", "-config", "ca.cnf", "-newkey", "rsa:2048", "-nodes", "-days", "2",
          "-keyout", "ca.key", "-out", "ca.pem"],
        &["req", "-new", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=github.com",
          "-keyout", "server.key", "-out", "server.csr"],
        &["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
          "-CAcreateserial", "-days", "2", "-extfile", "server.ext", "-outform", "DER",
          "-out", "server.der"],
        &["pkcs8", "-topk8", "-nocrypt", "-in", "server.key", "-outform", "DER",
          "-out", "server.key.der"],
    ];
    for args in steps {
        openssl(dir, args);
    }
    (
        dir.join("ca.pem"),
        std::fs::read(dir.join("server.der")).unwrap(),
        std::fs::read(dir.join("server.key.der")).unwrap(),
    )
}

/// Port 443 on a loopback address no other test uses (127.0.4.x; the systemd hosts take
/// 127.0.3.x, the sshd fixtures 127.0.0.x).
fn listen_443() -> TcpListener {
    let first = std::process::id() % 250;
    (0..250)
        .map(|i| Ipv4Addr::new(127, 0, 4, ((first + i) % 250 + 1) as u8))
        .find_map(|addr| TcpListener::bind((addr, 443)).ok())
        .expect("no free 127.0.4.x:443 to listen on")
}

/// The release as github.com serves it: the tarball (a directory holding the binary) and the
/// checksum list, `<sha256>  <file>` a line, other architectures' lines included.
fn make_release(dir: &Path) -> (Vec<u8>, String) {
    let name = format!("node_exporter-{VERSION}.linux-{}", go_arch());
    let bin = dir.join(&name).join("node_exporter");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::write(&bin, FAKE_BINARY).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tarball = dir.join(format!("{name}.tar.gz"));
    let st = Command::new("tar")
        .arg("-C")
        .arg(dir)
        .args(["--owner=0", "--group=0", "-czf"])
        .arg(&tarball)
        .arg(&name)
        .status()
        .expect("run tar");
    assert!(st.success(), "tar failed");
    let tarball = std::fs::read(tarball).unwrap();
    let mut sums = String::new();
    for arch in [
        "darwin-amd64",
        "linux-386",
        "linux-amd64",
        "linux-arm64",
        "linux-armv7",
    ] {
        let file = format!("node_exporter-{VERSION}.{arch}.tar.gz");
        let sum = if arch == format!("linux-{}", go_arch()) {
            hex::encode(sha2::Sha256::digest(&tarball))
        } else {
            hex::encode(sha2::Sha256::digest(file.as_bytes()))
        };
        sums.push_str(&format!("{sum}  {file}\n"));
    }
    (tarball, sums)
}

fn octets(body: Vec<u8>, kind: &str) -> Route {
    Route {
        status: 200,
        headers: vec![("Content-Type".into(), kind.into())],
        body,
        auth: None,
    }
}

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
    fx.write(
        "site.yml",
        "- hosts: sd\n  vars:\n    node_exporter_web_listen_address: 127.0.0.1:9100\n  roles:\n    - cloudalchemy.node_exporter\n",
    );

    // github.com, played by the test's HTTPS server.
    let (ca, cert, key) = make_pki(&fx.path("pki"));
    let (tarball, sums) = make_release(&fx.path("release"));
    let listener = listen_443();
    let addr = listener.local_addr().unwrap().ip();
    let github = Server::start_tls(listener, vec![cert], key);
    let tar_name = format!("node_exporter-{VERSION}.linux-{}.tar.gz", go_arch());
    let tar_path = format!("{RELEASE_PATH}{tar_name}");
    let sums_path = format!("{RELEASE_PATH}sha256sums.txt");
    github.route(
        &tar_path,
        octets(tarball.clone(), "application/octet-stream"),
    );
    github.route(&sums_path, octets(sums.into_bytes(), "text/plain"));

    // The namespace's /etc/hosts: the machine's, and the two names on the server's address.
    let real_hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    let mut hosts = real_hosts.clone();
    hosts.push_str(&format!("\n{addr} github.com\n{addr} api.github.com\n"));
    let hosts_file = fx.write("hosts", &hosts);
    // The namespace's /tmp, where the role downloads and unpacks: the test's own, so that no
    // file of an earlier run is found there and none is left behind. The directories the run
    // needs from the real /tmp (the fixture's, the host's ssh_config and key) are bound back.
    let tmp = tempfile::Builder::new()
        .prefix("fixpoint-node-exporter-tmp-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let cfg = host.ssh_config();
    let mut binds = Vec::new();
    for dir in [fx.dir.path(), cfg.parent().unwrap()] {
        let dir = dir.canonicalize().unwrap();
        if let Ok(rel) = dir.strip_prefix("/tmp") {
            std::fs::create_dir_all(tmp.path().join(rel)).unwrap();
            binds.push(dir);
        }
    }

    // `seport` (skipped here: SELinux is off) is community.general's: fixpoint resolves the
    // name through the ansible-core installation and the `ansible` package's collections, as
    // Ansible does (`.ci/run` unpacks them into FIXPOINT_ANSIBLE_COLLECTIONS).
    let collections = std::env::var_os("FIXPOINT_ANSIBLE_COLLECTIONS")
        .filter(|v| !v.is_empty())
        .expect(
            "FIXPOINT_ANSIBLE_COLLECTIONS is not set: the role names community.general's seport; \
             set it to a directory holding `ansible_collections/` (`.ci/run` makes one)",
        );
    let out: crate::fx::Out = Command::new("unshare")
        .args(["--mount", "sh", "-c", NAMESPACE, "sh"])
        .arg(&hosts_file)
        .arg(tmp.path())
        .args(&binds)
        .arg("--")
        .arg(crate::fx::bin())
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
        // pinned by an extra variable so that the task is skipped (the role then runs its
        // install tasks on every pass, which must find their work done on the second).
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
        // The controller's `url` lookup and the local agent's get_url trust the test's CA.
        .env("SSL_CERT_FILE", &ca)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run unshare (util-linux)")
        .into();
    assert_eq!(
        std::fs::read_to_string("/etc/hosts").unwrap_or_default(),
        real_hosts,
        "the machine's /etc/hosts changed: the bind mount escaped the namespace"
    );
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
        "Download node_exporter binary to local folder",
        "Unpack node_exporter binary",
        "Propagate node_exporter binaries",
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
    // The second pass: the download finds its file (and its checksum) in place; the unpack is
    // skipped by its `creates`, as Ansible's unarchive action skips it.
    assert_eq!(
        out.task_events("Download node_exporter binary to local folder")[1]["status"],
        "ok"
    );
    assert_eq!(
        out.task_events("Unpack node_exporter binary")[1]["status"],
        "skipped"
    );
    // The checksum list is read on each pass (a lookup), the tarball fetched once: on the
    // second pass get_url finds the file with the checksum it was given and asks nothing.
    let log = github.log();
    let asked: Vec<&str> = log.iter().map(|r| r.target.as_str()).collect();
    assert_eq!(github.count("GET", &sums_path), 2, "requests: {asked:?}");
    assert_eq!(github.count("GET", &tar_path), 1, "requests: {asked:?}");
    assert_eq!(log.len(), 3, "requests: {asked:?}");
    for r in &log {
        assert_eq!(
            r.headers.get("host").map(String::as_str),
            Some("github.com"),
            "{r:?}"
        );
    }
    eprintln!("requests to github.com: {asked:?}");
    // The role picks its architecture's line out of the list the lookup returned, once a pass.
    // The task's name is rendered with the host's variables, as ansible-core shows it.
    let picked: Vec<String> = out
        .task_events(&format!("Get checksum for {} architecture", go_arch()))
        .iter()
        .filter(|e| e["status"] == "ok")
        .map(|e| e["item"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(picked.len(), 2, "{picked:?}");
    assert!(picked[0].ends_with(&format!("  {tar_name}")), "{picked:?}");
    // What was downloaded and unpacked on the controller is what the server sent.
    let unpacked = tmp.path().join(tar_name.trim_end_matches(".tar.gz"));
    assert_eq!(std::fs::read(tmp.path().join(&tar_name)).unwrap(), tarball);
    assert_eq!(
        std::fs::read_to_string(unpacked.join("node_exporter")).unwrap(),
        FAKE_BINARY
    );
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
    assert_eq!(
        host.nsenter(&["cat", "/usr/local/bin/node_exporter"]),
        FAKE_BINARY,
        "the binary on the host is the one served"
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
