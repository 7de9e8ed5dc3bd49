//! A throwaway Debian host with its own systemd, dpkg database and sshd: the root that .ci/run
//! builds with debootstrap (cached under /var/cache/fixpoint-ci/systemd-root), booted as PID 1
//! in namespaces of its own (mount, PID, UTS, cgroup) over an overlay, so the cached root is
//! never written. Tests reach it over SSH as any host (`sd` in its ssh_config), and `nsenter`
//! serves their own checks. Killing the namespace's PID 1 ends every process in it, when the
//! host is dropped (the test ends or panics). Used by the integration tests of the service
//! modules and by the `targets` test, which runs Ansible's destructive targets against it.

use super::require_root;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const ROOT: &str = "/var/cache/fixpoint-ci/systemd-root";

/// Mounts the overlay and the API filesystems, moves into a cgroup of its own, and execs
/// systemd as PID 1 of the new PID namespace (`unshare --pid --fork` runs it as its child).
const BOOT: &str = r#"set -e
LOWER=$1; T=$2; CG=$3
mkdir -p "$CG"
echo 0 > "$CG/cgroup.procs"
exec unshare --cgroup --uts sh -c '
set -e
LOWER=$1; T=$2; M=$T/merged
mount --make-rprivate /
mount -t overlay overlay -o lowerdir=$LOWER,upperdir=$T/upper,workdir=$T/work $M
mount -t proc proc $M/proc
mount -t sysfs -o ro sysfs $M/sys
mount -t cgroup2 cgroup2 $M/sys/fs/cgroup
mount -t tmpfs -o mode=755 tmpfs $M/dev
for n in null zero full random urandom tty; do touch $M/dev/$n; mount --bind /dev/$n $M/dev/$n; done
mkdir $M/dev/pts $M/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts $M/dev/pts
ln -s pts/ptmx $M/dev/ptmx
mount -t tmpfs tmpfs $M/run
exec chroot $M /usr/bin/env -i container=fixpoint-test /lib/systemd/systemd
' sh "$LOWER" "$T"
"#;

/// A booted systemd host, reachable as `sd` over SSH.
pub struct SystemdHost {
    dir: tempfile::TempDir,
    unshare: Option<Child>,
    pid: i32,
    cgroup: PathBuf,
}

fn write(path: &Path, text: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Polls `f` every 100 ms until it gives a value; panics after `secs` seconds.
pub fn poll<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl SystemdHost {
    pub fn boot() -> SystemdHost {
        require_root();
        assert!(
            Path::new(ROOT).join("lib/systemd/systemd").exists(),
            "{ROOT} is missing: .ci/run builds it (debootstrap bookworm with systemd, dbus, \
             openssh-server and sudo; apt-get install debootstrap)"
        );
        let cg_parent = Path::new("/sys/fs/cgroup/unified");
        let cg_parent = if cg_parent.join("cgroup.procs").exists() {
            cg_parent
        } else {
            Path::new("/sys/fs/cgroup")
        };
        assert!(
            cg_parent.join("cgroup.procs").exists(),
            "no cgroup2 hierarchy at /sys/fs/cgroup/unified or /sys/fs/cgroup: systemd needs one"
        );
        let dir = tempfile::Builder::new()
            .prefix("fixpoint-systemd-")
            .tempdir()
            .unwrap();
        let t = dir.path();
        for d in ["upper", "work", "merged"] {
            std::fs::create_dir_all(t.join(d)).unwrap();
        }
        let upper = t.join("upper");
        // The address: loopback, outside the range the sshd fixtures use (127.0.0.x).
        let addr = Ipv4Addr::new(127, 0, 3, (std::process::id() % 250 + 1) as u8);
        let port = TcpListener::bind((addr, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        write(
            &upper.join("etc/ssh/sshd_config.d/fixpoint.conf"),
            &format!("ListenAddress {addr}:{port}\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nUsePAM no\n"),
            0o644,
        );
        // debootstrap leaves no /etc/hosts: without one the host's own name does not resolve,
        // and sudo warns about that on stderr, into what commands run with `become` print.
        let name = std::fs::read_to_string(Path::new(ROOT).join("etc/hostname"))
            .unwrap_or_else(|_| "localhost".into());
        write(
            &upper.join("etc/hosts"),
            &format!(
                "127.0.0.1 localhost\n127.0.1.1 {}\n::1 localhost ip6-localhost ip6-loopback\n",
                name.trim()
            ),
            0o644,
        );
        let key = t.join("id_ed25519");
        let st = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(&key)
            .status()
            .unwrap();
        assert!(st.success(), "ssh-keygen failed");
        let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
        write(&upper.join("root/.ssh/authorized_keys"), &public, 0o600);
        // Units that would reach the machine outside the namespaces (sysctl and kernel
        // modules are global) or that only add noise: masked before boot.
        for unit in [
            "systemd-sysctl.service",
            "systemd-modules-load.service",
            "apt-daily.timer",
            "apt-daily-upgrade.timer",
        ] {
            let p = upper.join("etc/systemd/system").join(unit);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            let _ = std::os::unix::fs::symlink("/dev/null", p);
        }
        // systemd-timedated tells the kernel the zone (`settimeofday`), which is the machine's
        // and not the namespace's: the first such call since the machine booted even moves its
        // clock by the zone's offset. Without CAP_SYS_TIME it skips that step (it is allowed to
        // fail) and still writes the zone and the RTC mode into the root's files.
        write(
            &upper.join("etc/systemd/system/systemd-timedated.service.d/fixpoint-test.conf"),
            "[Service]\nCapabilityBoundingSet=\n",
            0o644,
        );
        let host_key =
            std::fs::read_to_string(Path::new(ROOT).join("etc/ssh/ssh_host_ed25519_key.pub"))
                .expect("the root's sshd host key");
        let host_key: Vec<&str> = host_key.split_whitespace().take(2).collect();
        write(
            &t.join("known_hosts"),
            &format!("[{addr}]:{port} {}\n", host_key.join(" ")),
            0o644,
        );
        write(
            &t.join("ssh_config"),
            &format!(
                "Host sd\n  HostName {addr}\n  Port {port}\n  User root\n  IdentityFile {}\n  IdentitiesOnly yes\n  UserKnownHostsFile {}\n  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  BatchMode yes\n",
                key.display(),
                t.join("known_hosts").display()
            ),
            0o644,
        );
        let cgroup = cg_parent.join(format!(
            "fixpoint-{}",
            t.file_name().unwrap().to_string_lossy()
        ));
        let console = std::fs::File::create(t.join("console.log")).unwrap();
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--pid", "--fork", "sh", "-c", BOOT, "sh", ROOT])
            .arg(t)
            .arg(&cgroup)
            .stdin(Stdio::null())
            .stdout(console.try_clone().unwrap())
            .stderr(console)
            .process_group(0);
        let unshare = cmd.spawn().expect("run unshare");
        let upid = unshare.id() as i32;
        let mut host = SystemdHost {
            dir,
            unshare: Some(unshare),
            pid: 0,
            cgroup,
        };
        host.pid = poll("systemd to start", 30, || {
            let kids =
                std::fs::read_to_string(format!("/proc/{upid}/task/{upid}/children")).ok()?;
            let pid: i32 = kids.split_whitespace().next()?.parse().ok()?;
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            (comm.trim() == "systemd").then_some(pid)
        });
        let state = poll("systemd to finish booting", 90, || {
            let out = host.nsenter(&["systemctl", "is-system-running"]);
            let s = out.trim().to_string();
            matches!(s.as_str(), "running" | "degraded").then_some(s)
        });
        assert_eq!(
            state,
            "running",
            "failed units: {}",
            host.nsenter(&["systemctl", "--failed", "--no-pager"])
        );
        poll("the root's sshd to listen", 30, || {
            TcpStream::connect((addr, port)).ok()
        });
        host
    }

    /// Run a command inside the booted root (its mount and PID namespaces); stdout.
    pub fn nsenter(&self, args: &[&str]) -> String {
        let out = Command::new("nsenter")
            .args(["-t", &self.pid.to_string(), "-m", "-p", "-r", "-w"])
            .args(args)
            .env("SYSTEMD_PAGER", "")
            .output()
            .expect("nsenter");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn prop(&self, unit: &str, prop: &str) -> String {
        self.nsenter(&["systemctl", "show", unit, "-P", prop])
            .trim()
            .to_string()
    }

    /// The ssh_config that reaches this host as `sd`, logged in as root.
    pub fn ssh_config(&self) -> PathBuf {
        self.dir.path().join("ssh_config")
    }

    /// The booted systemd's PID, as this machine sees it.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Adds a login user with passwordless sudo, for tests that log in unprivileged and
    /// `become` root as ansible-test's targets do; returns an ssh_config that reaches the host
    /// as `sd` logged in as that user (with root's key).
    pub fn add_sudo_user(&self, user: &str) -> PathBuf {
        let public = std::fs::read_to_string(self.dir.path().join("id_ed25519.pub")).unwrap();
        // `*`, not useradd's `!`: with `UsePAM no` sshd refuses every login to a locked account.
        const ADD: &str = r#"set -e
useradd --create-home --shell /bin/bash "$1"
usermod --password '*' "$1"
install -d -m 700 -o "$1" -g "$1" "/home/$1/.ssh"
printf '%s' "$2" > "/home/$1/.ssh/authorized_keys"
chown "$1:$1" "/home/$1/.ssh/authorized_keys"
printf '%s ALL=(ALL) NOPASSWD: ALL\n' "$1" > "/etc/sudoers.d/$1"
chmod 440 "/etc/sudoers.d/$1"
"#;
        let out = Command::new("nsenter")
            .args(["-t", &self.pid.to_string(), "-m", "-p", "-r", "-w"])
            .args(["sh", "-c", ADD, "sh", user, &public])
            .output()
            .expect("nsenter");
        assert!(
            out.status.success(),
            "adding user {user} to the booted root failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let root_config = std::fs::read_to_string(self.ssh_config()).unwrap();
        let path = self.dir.path().join(format!("ssh_config-{user}"));
        write(
            &path,
            &root_config.replace("  User root\n", &format!("  User {user}\n")),
            0o644,
        );
        path
    }
}

impl Drop for SystemdHost {
    fn drop(&mut self) {
        // PID 1 of the namespace dies: the kernel kills every other process in it, and the
        // mounts go with the last process of the mount namespace.
        if self.pid > 0 {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        // `unshare --fork` exits once its child (PID 1) is gone, and reaps it: wait for that,
        // killing its group when PID 1 was never found (a failed boot).
        if let Some(mut c) = self.unshare.take() {
            let deadline = Instant::now() + Duration::from_secs(20);
            while c.try_wait().ok().flatten().is_none() {
                if self.pid == 0 || Instant::now() > deadline {
                    let _ = nix::sys::signal::killpg(
                        nix::unistd::Pid::from_raw(c.id() as i32),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                    let _ = c.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        // The cgroups systemd made, deepest first, once their processes are gone.
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.cgroup.exists() && Instant::now() < deadline {
            let mut dirs: Vec<PathBuf> = walk_dirs(&self.cgroup);
            dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
            for d in dirs {
                let _ = std::fs::remove_dir(d);
            }
            if self.cgroup.exists() {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

fn walk_dirs(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        if let Ok(rd) = std::fs::read_dir(&out[i]) {
            for e in rd.flatten() {
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    out.push(e.path());
                }
            }
        }
        i += 1;
    }
    out
}
