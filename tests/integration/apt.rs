//! `apt`, `package` and the dpkg modules against the real dpkg database and a real apt
//! repository built by the test (`dpkg-deb --build`, `dpkg-scanpackages`), seen through an
//! `APT_CONFIG` of the test's own so the machine's sources are never refreshed.
//!
//! These tests install `fptest-*` packages into this machine's dpkg database: they run one at a
//! time (`APT_LOCK`), purge what they install when they end, and purge leftovers of an
//! interrupted earlier run when they begin.

use crate::fx::{Fx, Out};
use crate::ssh::Fleet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// dpkg has one database: one apt test at a time.
/// Shared with the other tests that install packages (`nginx.rs`).
pub(crate) static APT_LOCK: Mutex<()> = Mutex::new(());

const PACKAGES: &[&str] = &["fptest-b", "fptest-a", "fptest-c", "fptest-d", "fptest-e"];

pub(crate) fn sh(argv: &[&str]) -> std::process::Output {
    Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `{}` ({e}); install dpkg-dev and apt (.ci/run does)",
                argv[0]
            )
        })
}

fn purge_all() {
    let mut a = vec!["dpkg", "--purge"];
    a.extend(PACKAGES);
    let out = sh(&a);
    assert!(
        out.status.success(),
        "purging the test packages failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// dpkg's status of a package: `ii `, `rc `, or "" when dpkg does not know it.
fn dpkg_status(name: &str) -> (String, String) {
    let out = sh(&[
        "dpkg-query",
        "-W",
        "-f",
        "${db:Status-Abbrev}|${Version}",
        name,
    ]);
    let s = String::from_utf8_lossy(&out.stdout).to_string();
    let (st, v) = s.split_once('|').unwrap_or(("", ""));
    let st = if st.starts_with("un") { "" } else { st };
    (st.trim_end().to_string(), v.to_string())
}

/// A local repository and the apt configuration that sees only it.
pub(crate) struct Repo {
    _guard: std::sync::MutexGuard<'static, ()>,
    dir: tempfile::TempDir,
}

impl Repo {
    pub(crate) fn new() -> Repo {
        let guard = APT_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        crate::support::require_root();
        for tool in ["dpkg-deb", "dpkg-scanpackages", "apt-get"] {
            let found = std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).exists()))
                .unwrap_or(false);
            assert!(
                found,
                "`{tool}` is missing: install dpkg-dev and apt (.ci/run does)"
            );
        }
        purge_all();
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let r = Repo { _guard: guard, dir };
        r.build("fptest-a", "1.0", None, false);
        r.build("fptest-a", "2.0", None, false);
        r.build("fptest-b", "1.0", Some("fptest-a"), false);
        r.build("fptest-c", "1.0", None, true);
        r.index();
        let p = r.path("");
        for d in [
            "etc/sources.list.d",
            "lists/partial",
            "cache/archives/partial",
        ] {
            std::fs::create_dir_all(p.join(d)).unwrap();
        }
        std::fs::write(
            p.join("etc/sources.list"),
            format!("deb [trusted=yes] file:{} ./\n", p.join("repo").display()),
        )
        .unwrap();
        std::fs::write(
            p.join("apt.conf"),
            format!(
                "Dir::Etc::SourceList \"{0}/etc/sources.list\";\nDir::Etc::SourceParts \"{0}/etc/sources.list.d\";\nDir::State::Lists \"{0}/lists\";\nDir::Cache \"{0}/cache\";\n",
                p.display()
            ),
        )
        .unwrap();
        r
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub(crate) fn apt_config(&self) -> String {
        self.path("apt.conf").display().to_string()
    }

    /// Build `name_version_all.deb` into `repo/` (or anywhere with `out`).
    fn build_into(&self, out: &Path, name: &str, version: &str, dep: Option<&str>, conffile: bool) {
        let root = self.path(&format!("build/{name}_{version}"));
        std::fs::create_dir_all(root.join("DEBIAN")).unwrap();
        std::fs::create_dir_all(root.join(format!("usr/share/{name}"))).unwrap();
        std::fs::write(
            root.join(format!("usr/share/{name}/version")),
            format!("{version}\n"),
        )
        .unwrap();
        let mut control = format!(
            "Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: fixpoint tests <root@localhost>\nDescription: fixpoint test package\n"
        );
        if let Some(d) = dep {
            control.push_str(&format!("Depends: {d}\n"));
        }
        if conffile {
            std::fs::create_dir_all(root.join("etc")).unwrap();
            std::fs::write(root.join(format!("etc/{name}.conf")), "setting=1\n").unwrap();
            std::fs::write(root.join("DEBIAN/conffiles"), format!("/etc/{name}.conf\n")).unwrap();
        }
        std::fs::write(root.join("DEBIAN/control"), control).unwrap();
        std::fs::create_dir_all(out).unwrap();
        let deb = out.join(format!("{name}_{version}_all.deb"));
        let o = sh(&[
            "dpkg-deb",
            "--root-owner-group",
            "--build",
            root.to_str().unwrap(),
            deb.to_str().unwrap(),
        ]);
        assert!(
            o.status.success(),
            "dpkg-deb: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    fn build(&self, name: &str, version: &str, dep: Option<&str>, conffile: bool) {
        self.build_into(&self.path("repo"), name, version, dep, conffile);
    }

    /// `Packages` for every version in `repo/` (`-m`: several versions of one package).
    fn index(&self) {
        let o = Command::new("dpkg-scanpackages")
            .args(["-m", ".", "/dev/null"])
            .current_dir(self.path("repo"))
            .stderr(Stdio::null())
            .output()
            .expect("dpkg-scanpackages");
        assert!(o.status.success());
        std::fs::write(self.path("repo/Packages"), o.stdout).unwrap();
    }

    /// Refresh the test's own lists (what `update_cache` would do), directly.
    pub(crate) fn update(&self) {
        let o = Command::new("apt-get")
            .args(["-q", "update"])
            .env("APT_CONFIG", self.apt_config())
            .stdin(Stdio::null())
            .output()
            .expect("apt-get update");
        assert!(
            o.status.success(),
            "apt-get update: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    /// A localhost play with the test's apt configuration as its environment.
    pub(crate) fn play(&self, fx: &Fx, tasks: &str) {
        fx.play_with(
            &format!("  environment:\n    APT_CONFIG: {}\n", self.apt_config()),
            tasks,
        );
    }
}

impl Drop for Repo {
    fn drop(&mut self) {
        purge_all();
    }
}

/// The registered result of a task, from a `-v` JSON run.
pub(crate) fn result(out: &Out, task: &str) -> serde_json::Value {
    let evs = out.task_events(task);
    assert_eq!(evs.len(), 1, "one result for {task}: {}", out.stdout);
    evs[0]["result"].clone()
}

fn task(name: &str, body: &str) -> String {
    format!("    - name: {name}\n      apt:\n{body}")
}

#[test]
fn apt_installs_upgrades_pins_removes_and_purges() {
    let repo = Repo::new();
    repo.update();
    let fx = Fx::new();

    // Check mode: the change and apt's own plan are shown, nothing is installed.
    repo.play(&fx, &task("b", "        name: fptest-b\n"));
    let check = fx.apply(&["--check", "--diff", "-v"]);
    check.expect(0);
    assert_eq!(check.status_of("b"), "changed", "{}", check.stdout);
    let ev = &check.task_events("b")[0];
    let prepared = ev["diff"]["prepared"].as_str().unwrap_or_default();
    assert!(
        prepared.contains("The following NEW packages will be installed:")
            && prepared.contains("fptest-a"),
        "check --diff shows apt's plan: {}",
        check.stdout
    );
    assert_eq!(
        dpkg_status("fptest-b").0,
        "",
        "check mode installed nothing"
    );
    assert_eq!(dpkg_status("fptest-a").0, "");

    // Install (with its dependency), then a second run changes nothing.
    let first = fx.apply(&["-v"]);
    first.expect(0);
    assert_eq!(first.status_of("b"), "changed");
    let r = result(&first, "b");
    assert!(
        r["stdout"]
            .as_str()
            .unwrap()
            .contains("Setting up fptest-b (1.0)"),
        "{r}"
    );
    assert_eq!(r["cache_updated"], false);
    assert!(r["cache_update_time"].as_i64().unwrap() > 0, "{r}");
    assert_eq!(dpkg_status("fptest-b"), ("ii".into(), "1.0".into()));
    assert_eq!(dpkg_status("fptest-a"), ("ii".into(), "2.0".into()));
    let second = fx.apply(&["-v"]);
    second.expect(0);
    assert_eq!(second.status_of("b"), "ok", "{}", second.stdout);

    // A pinned older version is a downgrade: refused by apt unless allow_downgrade.
    repo.play(&fx, &task("pin", "        name: fptest-a=1.0\n"));
    let refused = fx.apply(&[]);
    refused.expect(1);
    assert!(
        refused.stdout.contains("--allow-downgrades"),
        "the refusal says how to allow it: {}",
        refused.stdout
    );
    assert_eq!(dpkg_status("fptest-a").1, "2.0");
    repo.play(
        &fx,
        &task(
            "pin",
            "        name: fptest-a=1.0\n        allow_downgrade: true\n",
        ),
    );
    fx.apply(&[]).expect(0);
    assert_eq!(dpkg_status("fptest-a").1, "1.0");
    assert_eq!(fx.apply(&[]).status_of("pin"), "ok");

    // latest upgrades the pinned package; a wildcard version is matched as Ansible does.
    repo.play(
        &fx,
        &task("latest", "        name: fptest-a\n        state: latest\n"),
    );
    let up = fx.apply(&["--twice"]);
    up.expect(0);
    assert_eq!(dpkg_status("fptest-a").1, "2.0");
    repo.play(&fx, &task("glob", "        name: \"fptest-a=2.*\"\n"));
    assert_eq!(fx.apply(&[]).expect(0).status_of("glob"), "ok");

    // A missing package fails clearly, and nothing of the list is installed.
    repo.play(
        &fx,
        &task("missing", "        name: [fptest-c, fptest-nope]\n"),
    );
    let missing = fx.apply(&[]);
    missing.expect(1);
    assert!(
        missing
            .stdout
            .contains("No package matching 'fptest-nope' is available"),
        "{}",
        missing.stdout
    );
    assert_eq!(dpkg_status("fptest-c").0, "", "nothing half-installed");

    // absent keeps the conffiles (`rc`), purge removes them; each second run is unchanged.
    repo.play(&fx, &task("c", "        name: fptest-c\n"));
    fx.apply(&[]).expect(0);
    assert_eq!(dpkg_status("fptest-c").0, "ii");
    assert!(Path::new("/etc/fptest-c.conf").exists());
    repo.play(
        &fx,
        &task("rm", "        name: fptest-c\n        state: absent\n"),
    );
    let rm = fx.apply(&["--twice"]);
    rm.expect(0);
    assert_eq!(dpkg_status("fptest-c").0, "rc");
    assert!(
        Path::new("/etc/fptest-c.conf").exists(),
        "remove keeps conffiles"
    );
    repo.play(
        &fx,
        &task(
            "purge",
            "        name: fptest-c\n        state: absent\n        purge: true\n",
        ),
    );
    let check = fx.apply(&["--check"]);
    assert_eq!(check.expect(0).status_of("purge"), "changed");
    assert_eq!(dpkg_status("fptest-c").0, "rc", "check mode purged nothing");
    let purge = fx.apply(&["--twice"]);
    purge.expect(0);
    assert_eq!(dpkg_status("fptest-c").0, "");
    assert!(
        !Path::new("/etc/fptest-c.conf").exists(),
        "purge removes conffiles"
    );

    // Wildcards expand to the names apt knows; removing them all is one transaction.
    repo.play(
        &fx,
        &task("all", "        name: \"fptest-*\"\n        state: absent\n"),
    );
    fx.apply(&["--twice"]).expect(0);
    assert_eq!(dpkg_status("fptest-a").0, "");
    assert_eq!(dpkg_status("fptest-b").0, "");
}

#[test]
fn apt_update_cache_honours_cache_valid_time() {
    let repo = Repo::new();
    let fx = Fx::new();
    repo.play(
        &fx,
        &task(
            "refresh",
            "        update_cache: true\n        cache_valid_time: 3600\n",
        ),
    );
    // Never updated: the lists directory is old, so the cache is refreshed.
    let lists = repo.path("lists");
    let old = SystemTime::now() - Duration::from_secs(7200);
    std::fs::File::open(&lists)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let first = fx.apply(&["-v"]);
    first.expect(0);
    assert_eq!(first.status_of("refresh"), "changed", "{}", first.stdout);
    let r = result(&first, "refresh");
    assert_eq!(r["cache_updated"], true, "{r}");
    assert!(
        std::fs::read_dir(&lists).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains("Packages")),
        "the test repository's index was fetched"
    );
    // Fresh: nothing to do.
    let second = fx.apply(&["-v"]);
    second.expect(0);
    assert_eq!(second.status_of("refresh"), "ok");
    assert_eq!(result(&second, "refresh")["cache_updated"], false);

    // With packages, the refresh comes first and is not itself a change (as in Ansible).
    std::fs::File::open(&lists)
        .unwrap()
        .set_modified(old)
        .unwrap();
    repo.play(
        &fx,
        &task(
            "both",
            "        name: fptest-a\n        update_cache: true\n        cache_valid_time: 60\n",
        ),
    );
    let both = fx.apply(&["-v"]);
    both.expect(0);
    assert_eq!(result(&both, "both")["cache_updated"], true);
    assert_eq!(dpkg_status("fptest-a").1, "2.0");
    std::fs::File::open(&lists)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let again = fx.apply(&["-v"]);
    again.expect(0);
    assert_eq!(again.status_of("both"), "ok", "{}", again.stdout);
    assert_eq!(result(&again, "both")["cache_updated"], true);
}

/// Hold dpkg's frontend lock the way apt does (a POSIX record lock), until dropped.
struct DpkgLock {
    _held: std::fs::File,
}

impl DpkgLock {
    fn hold() -> DpkgLock {
        use std::os::fd::AsRawFd;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open("/var/lib/dpkg/lock-frontend")
            .expect("open the dpkg lock");
        let fl = libc_flock();
        let r = nix::fcntl::fcntl(f.as_raw_fd(), nix::fcntl::FcntlArg::F_SETLK(&fl));
        assert!(r.is_ok(), "another process holds the dpkg lock: {r:?}");
        DpkgLock { _held: f }
    }
}

fn libc_flock() -> nix::libc::flock {
    // SAFETY: flock is plain data; zero is a valid start for every field.
    let mut fl: nix::libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = nix::libc::F_WRLCK as i16;
    fl.l_whence = nix::libc::SEEK_SET as i16;
    fl
}

/// Whether an apt-get of this test (its lock timeout is in its arguments) is running.
fn apt_get_waiting(marker: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| {
                let c = String::from_utf8_lossy(&c);
                c.starts_with("apt-get") && c.contains(marker)
            })
            .unwrap_or(false)
    })
}

#[test]
fn apt_waits_for_the_dpkg_lock_and_never_breaks_it() {
    let repo = Repo::new();
    repo.update();
    let fx = Fx::new();

    // Held for longer than lock_timeout: a clear failure, nothing installed, lock untouched.
    repo.play(
        &fx,
        &task(
            "locked",
            "        name: fptest-a\n        lock_timeout: 2\n",
        ),
    );
    let lock = DpkgLock::hold();
    let out = fx.apply(&[]);
    out.expect(1);
    assert!(
        out.stdout.contains("lock-frontend") && out.stdout.contains("lock_timeout=2"),
        "{}",
        out.stdout
    );
    assert_eq!(dpkg_status("fptest-a").0, "");

    // Released while the task waits: it proceeds.
    repo.play(
        &fx,
        &task(
            "waits",
            "        name: fptest-a\n        lock_timeout: 117\n",
        ),
    );
    let child = fx.spawn(&["apply", "--format", "json", "site.yml"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !apt_get_waiting("DPkg::Lock::Timeout=117") {
        assert!(Instant::now() < deadline, "apt-get never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        dpkg_status("fptest-a").0,
        "",
        "nothing installed while the lock is held"
    );
    drop(lock);
    let out = Out::from(child.wait_with_output().unwrap());
    out.expect(0);
    assert_eq!(out.status_of("waits"), "changed");
    assert_eq!(dpkg_status("fptest-a").0, "ii");
}

#[test]
fn apt_deb_files_and_the_package_module() {
    let repo = Repo::new();
    repo.update();
    let fx = Fx::new();
    let debs = repo.path("local");
    repo.build_into(&debs, "fptest-d", "1.0", Some("fptest-a"), false);
    let deb = debs.join("fptest-d_1.0_all.deb");
    repo.play(
        &fx,
        &format!(
            "    - name: deb\n      apt:\n        deb: {}\n    - name: generic\n      package:\n        name: fptest-c\n        state: present\n",
            deb.display()
        ),
    );
    let out = fx.apply(&["--twice"]);
    out.expect(0);
    assert_eq!(dpkg_status("fptest-d"), ("ii".into(), "1.0".into()));
    assert_eq!(
        dpkg_status("fptest-a").0,
        "ii",
        "the .deb's dependency came from the repo"
    );
    assert_eq!(dpkg_status("fptest-c").0, "ii");

    // The fact `package` dispatches on.
    fx.write(
        "facts.yml",
        &format!(
            "- hosts: localhost\n  vars:\n    fixpoint_state_dir: {}\n  tasks:\n    - assert:\n        that: ansible_pkg_mgr == 'apt'\n",
            fx.state_dir().display()
        ),
    );
    fx.run(&["apply", "facts.yml"]).expect(0);
}

/// `deb:` as a URL is downloaded on the host (from a real HTTP server) and installed, and
/// `policy_rc_d` is what `/usr/sbin/policy-rc.d` says while the package's maintainer scripts
/// run (the package's postinst copies it out), the host's own state of that file coming back.
#[test]
fn apt_deb_from_a_url_with_policy_rc_d() {
    let repo = Repo::new();
    repo.update();
    let fx = Fx::new();
    let seen = fx.path("policy-seen");
    let root = repo.path("build/fptest-e");
    std::fs::create_dir_all(root.join("DEBIAN")).unwrap();
    std::fs::write(
        root.join("DEBIAN/control"),
        "Package: fptest-e\nVersion: 1.0\nArchitecture: all\nMaintainer: fixpoint tests <root@localhost>\nDescription: fixpoint test package\n",
    )
    .unwrap();
    let postinst = root.join("DEBIAN/postinst");
    std::fs::write(
        &postinst,
        format!(
            "#!/bin/sh\ncat /usr/sbin/policy-rc.d > {0} 2>/dev/null || echo none > {0}\n",
            seen.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&postinst, std::fs::Permissions::from_mode(0o755)).unwrap();
    let deb = repo.path("fptest-e_1.0_all.deb");
    let o = sh(&[
        "dpkg-deb",
        "--root-owner-group",
        "--build",
        root.to_str().unwrap(),
        deb.to_str().unwrap(),
    ]);
    assert!(
        o.status.success(),
        "dpkg-deb: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let www = crate::http_server::Server::start();
    let mut route = crate::http_server::Route::ok("");
    route.body = std::fs::read(&deb).unwrap();
    www.route("/pool/fptest-e_1.0_all.deb", route);
    let policy_before = std::fs::read("/usr/sbin/policy-rc.d").ok();

    repo.play(
        &fx,
        &task(
            "deb",
            &format!(
                "        deb: {}\n        policy_rc_d: 101\n",
                www.url("/pool/fptest-e_1.0_all.deb")
            ),
        ),
    );
    let first = crate::fx::converge(&|a| fx.apply(a), &|| {
        format!("{:?}", dpkg_status("fptest-e"))
    });
    assert_eq!(result(&first, "deb")["changed"], true);
    assert_eq!(dpkg_status("fptest-e"), ("ii".into(), "1.0".into()));
    assert_eq!(
        std::fs::read_to_string(&seen).unwrap(),
        "#!/bin/sh\nexit 101\n"
    );
    assert_eq!(std::fs::read("/usr/sbin/policy-rc.d").ok(), policy_before);

    // A URL that answers 404 fails and says so.
    repo.play(
        &fx,
        &task(
            "deb",
            &format!("        deb: {}\n", www.url("/pool/missing.deb")),
        ),
    );
    let out = fx.apply(&["-v"]);
    out.expect(1);
    assert!(out.stdout.contains("HTTP Error 404"), "{}", out.stdout);
}

#[test]
fn apt_refuses_what_it_does_not_support_at_load_time() {
    let fx = Fx::new();
    fx.play("    - package:\n        name: x\n        state: present\n        use: zypper\n");
    let out = fx.apply(&[]);
    out.expect(2);
    assert!(
        out.stderr.contains("\"zypper\" package manager"),
        "{}",
        out.stderr
    );
}

/// The main case through the real transport: a loopback sshd host, `become` through sudo.
#[test]
fn apt_over_ssh_with_become_converges() {
    let repo = Repo::new();
    // Lists never fetched, and older than cache_valid_time: the task refreshes them first.
    let old = SystemTime::now() - Duration::from_secs(7200);
    std::fs::File::open(repo.path("lists"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    let fleet = Fleet::start(1, "fpsudo");
    fleet.play_full(
        &format!(
            "  gather_facts: false\n  become: true\n  environment:\n    APT_CONFIG: {}\n",
            repo.apt_config()
        ),
        "    - name: packages\n      apt:\n        name: [fptest-b, fptest-c]\n        update_cache: true\n        cache_valid_time: 3600\n",
    );
    let out = fleet.apply(&["--twice", "-v"]);
    out.expect(0);
    let evs = out.task_events("packages");
    assert_eq!(evs.len(), 2, "{}", out.stdout);
    assert_eq!(evs[0]["status"], "changed");
    assert_eq!(evs[0]["result"]["cache_updated"], true);
    assert_eq!(evs[1]["status"], "ok");
    for p in ["fptest-a", "fptest-b", "fptest-c"] {
        assert_eq!(dpkg_status(p).0, "ii", "{p}");
    }
}

/// Forget the debconf answers a test set for `pkg`.
fn debconf_purge(pkg: &str) {
    let mut c = Command::new("debconf-communicate")
        .arg(pkg)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("debconf-communicate (package debconf)");
    use std::io::Write;
    c.stdin.take().unwrap().write_all(b"PURGE\n").unwrap();
    c.wait().unwrap();
}

#[test]
fn dpkg_selections_debconf_and_package_facts() {
    let repo = Repo::new();
    repo.update();
    debconf_purge("fptest-a");
    let fx = Fx::new();
    repo.play(
        &fx,
        concat!(
            "    - name: install\n      apt:\n        name: fptest-a=1.0\n",
            "    - name: hold\n      dpkg_selections:\n        name: fptest-a\n        selection: hold\n",
            "    - name: held\n      apt:\n        name: fptest-a\n        state: latest\n      ignore_errors: true\n",
            "    - name: answer\n      debconf:\n        name: fptest-a\n        question: fptest-a/greeting\n        vtype: string\n        value: hello\n",
            "    - name: flag\n      debconf:\n        name: fptest-a\n        question: fptest-a/flag\n        vtype: boolean\n        value: true\n",
            "    - name: facts\n      package_facts:\n",
            "    - name: seen\n      assert:\n        that:\n          - ansible_facts.packages['fptest-a'][0].version == '1.0'\n          - ansible_facts.packages['fptest-a'][0].source == 'apt'\n          - \"'fptest-b' not in ansible_facts.packages\"\n",
        ),
    );
    let first = fx.apply(&["-v"]);
    first.expect(0);
    for t in ["install", "hold", "answer", "flag"] {
        assert_eq!(first.status_of(t), "changed", "{t}: {}", first.stdout);
    }
    // A held package is not upgraded by `latest` (apt refuses it without
    // allow_change_held_packages); the version stays.
    assert_eq!(dpkg_status("fptest-a").1, "1.0");
    let r = result(&first, "hold");
    assert_eq!(
        (r["before"].as_str(), r["after"].as_str()),
        (Some("install"), Some("hold"))
    );
    let shown = sh(&["debconf-show", "fptest-a"]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("fptest-a/greeting: hello"), "{shown}");
    assert!(shown.contains("fptest-a/flag: true"), "{shown}");
    let sel = sh(&["dpkg", "--get-selections", "fptest-a"]);
    assert!(String::from_utf8_lossy(&sel.stdout).contains("hold"));

    let second = fx.apply(&[]);
    second.expect(0);
    for t in ["install", "hold", "answer", "flag", "facts"] {
        assert_eq!(second.status_of(t), "ok", "{t}: {}", second.stdout);
    }
    // Check mode changes no selection; then unhold, so the purge at the end may remove it.
    repo.play(
        &fx,
        "    - name: unhold\n      dpkg_selections:\n        name: fptest-a\n        selection: install\n",
    );
    assert_eq!(
        fx.apply(&["--check"]).expect(0).status_of("unhold"),
        "changed"
    );
    let sel = sh(&["dpkg", "--get-selections", "fptest-a"]);
    assert!(
        String::from_utf8_lossy(&sel.stdout).contains("hold"),
        "check mode unheld"
    );
    fx.apply(&["--twice"]).expect(0);
    debconf_purge("fptest-a");
}
