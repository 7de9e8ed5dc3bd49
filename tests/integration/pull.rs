//! `fixpoint pull` against real repositories made with the real `git` in the test: over
//! `file://` and over `git daemon` on 127.0.0.1; SSH- and GPG-signed commits (keys made here)
//! against unsigned and foreign ones; a second pull that changes nothing and `--only-if-changed`
//! that skips the run; a pull while a push holds the host lock; the result POSTed to a real HTTP
//! server that fails first; and the timer, as a cron entry where systemd does not run and as a
//! systemd timer that fires inside the booted root of `tests/support/systemd.rs`.

use crate::fx::{stamp, Fx, Out};
use crate::support::git::{git, sh, ssh_key, ssh_signing, GpgKey, Repo};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The playbook every test pulls: writes `mark` with `text` under the fixture's `t/`.
fn local_yml(text: &str) -> String {
    format!(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - name: mark\n      copy:\n        content: \"{text}\\n\"\n        dest: \"{{{{ out }}}}/mark\"\n"
    )
}

/// The arguments of `fixpoint pull` of `url` into the fixture's checkout, its state under the
/// fixture.
fn pull_args(fx: &Fx, url: &str, extra: &[&str]) -> Vec<String> {
    std::fs::create_dir_all(fx.path("t")).unwrap();
    let co = fx.path("co").display().to_string();
    let out = format!("out={}", fx.path("t").display());
    let state = format!("fixpoint_state_dir={}", fx.state_dir().display());
    let result = fx.path("result.json").display().to_string();
    let mut args = vec!["pull", "--format", "json", "-U", url];
    args.extend_from_slice(&["-d", &co, "-e", &out, "-e", &state]);
    args.extend_from_slice(&["--result-file", &result]);
    args.extend_from_slice(extra);
    args.into_iter().map(String::from).collect()
}

fn pull(fx: &Fx, url: &str, extra: &[&str]) -> Out {
    let args = pull_args(fx, url, extra);
    fx.run(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// The result file's lines: the run's JSON events, then the `pull` event.
fn result_events(fx: &Fx) -> Vec<serde_json::Value> {
    fx.read("result.json")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each result line is JSON"))
        .collect()
}

/// Every one of `lines` is in what the run printed.
fn says(out: &Out, lines: &[&str]) {
    for line in lines {
        assert!(out.stdout.contains(line), "{line}: {}", out.stdout);
    }
}

/// The pull was refused as bad input (exit 2), saying `why`.
fn refused(out: &Out, why: &str) {
    out.expect(2);
    assert!(out.stderr.contains(why), "{why}: {}", out.stderr);
}

fn pull_event(fx: &Fx) -> serde_json::Value {
    let events = result_events(fx);
    let last = events.last().expect("a pull event").clone();
    assert_eq!(last["event"], "pull", "{events:?}");
    last
}

#[test]
fn a_pull_runs_the_commit_and_a_second_pull_changes_nothing() {
    let fx = Fx::new();
    let repo = Repo::new(fx.dir.path());
    let c1 = repo.commit(&[("local.yml", &local_yml("one"))]);

    let first = pull(&fx, &repo.url(), &[]);
    first.expect(0);
    assert_eq!(first.status_of("mark"), "changed", "{}", first.stdout);
    assert_eq!(fx.read("t/mark"), "one\n");
    let ev = pull_event(&fx);
    assert_eq!(ev["status"], "ok");
    assert_eq!(ev["commit"], c1.as_str());
    assert_eq!(ev["playbooks"], serde_json::json!(["local.yml"]));
    // The result holds what `--format json` printed, then the pull event.
    let events = result_events(&fx);
    assert_eq!(events[..events.len() - 1], first.events()[..], "{events:?}");

    // Nothing new: fetched again, run again, nothing changes.
    let mark = stamp(&fx.path("t/mark"));
    let second = pull(&fx, &repo.url(), &[]);
    second.expect(0);
    assert_eq!(second.status_of("mark"), "ok", "{}", second.stdout);
    assert_eq!(stamp(&fx.path("t/mark")), mark);

    // `--only-if-changed`: the same commit and inputs succeeded last time: no run at all.
    let skipped = pull(&fx, &repo.url(), &["--only-if-changed"]);
    skipped.expect(0);
    assert!(skipped.task_names().is_empty(), "{}", skipped.stdout);
    assert!(
        skipped.stdout.contains("skipped: commit"),
        "{}",
        skipped.stdout
    );
    let ev = pull_event(&fx);
    assert_eq!(ev["status"], "skipped");
    assert_eq!(result_events(&fx).len(), 1);
    // Other inputs (an extra variable), or a max age already passed, run it.
    let other = pull(&fx, &repo.url(), &["-o", "-e", "x=1"]);
    assert_eq!(other.status_of("mark"), "ok", "{}", other.stdout);
    let aged = pull(&fx, &repo.url(), &["-o", "--max-age", "0s"]);
    assert_eq!(aged.status_of("mark"), "ok", "{}", aged.stdout);

    // A new commit runs under `-o`.
    let c2 = repo.commit(&[("local.yml", &local_yml("two"))]);
    let changed = pull(&fx, &repo.url(), &["-o"]);
    changed.expect(0);
    assert_eq!(changed.status_of("mark"), "changed", "{}", changed.stdout);
    assert_eq!(fx.read("t/mark"), "two\n");
    assert_eq!(pull_event(&fx)["commit"], c2.as_str());

    // A failed run never counts as the last successful one: `-o` runs it again.
    let failing = format!(
        "{}    - name: boom\n      fail: {{ msg: no }}\n",
        local_yml("three")
    );
    repo.commit(&[("local.yml", &failing)]);
    pull(&fx, &repo.url(), &["-o"]).expect(1);
    assert_eq!(pull_event(&fx)["status"], "failed");
    let again = pull(&fx, &repo.url(), &["-o"]);
    again.expect(1);
    assert_eq!(again.status_of("boom"), "failed", "{}", again.stdout);
}

#[test]
fn the_playbook_is_the_named_one_else_the_hosts_own_else_local() {
    let fx = Fx::new();
    let repo = Repo::new(fx.dir.path());
    let node = nix::sys::utsname::uname()
        .unwrap()
        .nodename()
        .to_string_lossy()
        .into_owned();
    repo.commit(&[
        ("local.yml", &local_yml("local")),
        (&format!("{node}.yml"), &local_yml("mine")),
        ("site.yml", &local_yml("site")),
    ]);
    pull(&fx, &repo.url(), &[]).expect(0);
    assert_eq!(fx.read("t/mark"), "mine\n");
    pull(&fx, &repo.url(), &["-p", "site.yml"]).expect(0);
    assert_eq!(fx.read("t/mark"), "site\n");
    // A playbook that is not there: bad input, nothing run.
    let out = pull(&fx, &repo.url(), &["-p", "nope.yml"]);
    refused(&out, "playbook `nope.yml` is not in the checkout");
    assert_eq!(fx.read("t/mark"), "site\n");
}

/// `git daemon` serving the fixture's `srv/` on 127.0.0.1 and a free port; killed on drop.
struct GitDaemon {
    child: Child,
    port: u16,
}

impl GitDaemon {
    fn start(base: &Path) -> GitDaemon {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("git")
            .args([
                "daemon",
                "--reuseaddr",
                "--export-all",
                "--listen=127.0.0.1",
            ])
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", base.display()))
            .arg(base)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run git daemon");
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
            assert!(Instant::now() < deadline, "git daemon never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
        GitDaemon { child, port }
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_pull_over_git_daemon_and_from_a_bundle() {
    let fx = Fx::new();
    let repo = Repo::new(fx.dir.path());
    let c1 = repo.commit(&[("local.yml", &local_yml("daemon"))]);
    let daemon = GitDaemon::start(&fx.path("srv"));
    let url = format!("git://127.0.0.1:{}/site.git", daemon.port);
    let out = pull(&fx, &url, &["-C", "main"]);
    out.expect(0);
    assert_eq!(fx.read("t/mark"), "daemon\n");
    assert_eq!(pull_event(&fx)["commit"], c1.as_str());
    assert_eq!(pull_event(&fx)["ref"], "main");

    // A bundle file: the repository carried as one file.
    let c2 = repo.commit(&[("local.yml", &local_yml("bundle"))]);
    let bundle = fx.path("site.bundle");
    sh(git(
        &repo.work,
        &[
            "bundle",
            "create",
            &bundle.display().to_string(),
            "HEAD",
            "main",
        ],
    ));
    pull(&fx, &bundle.display().to_string(), &[]).expect(0);
    assert_eq!(fx.read("t/mark"), "bundle\n");
    assert_eq!(pull_event(&fx)["commit"], c2.as_str());
}

#[test]
fn only_a_commit_signed_by_a_given_ssh_key_runs() {
    let fx = Fx::new();
    let repo = Repo::new(fx.dir.path());
    let (key, allowed) = ssh_key(fx.dir.path(), "good");
    let (other, _) = ssh_key(fx.dir.path(), "other");
    let allowed_arg = allowed.display().to_string();
    let verify = ["--verify-commit", "--allowed-signers", allowed_arg.as_str()];

    repo.commit_signed(
        &[("local.yml", &local_yml("signed"))],
        &ssh_signing(&key),
        &[],
    );
    let out = pull(&fx, &repo.url(), &verify);
    out.expect(0);
    assert_eq!(fx.read("t/mark"), "signed\n");
    let signer = pull_event(&fx)["signed_by"].as_str().unwrap().to_string();
    assert!(signer.contains("fp@example.org"), "{signer}");

    // Unsigned: refused, exit 2, nothing run, the checkout not moved.
    let head = sh(git(&fx.path("co"), &["rev-parse", "HEAD"]));
    let unsigned = repo.commit(&[("local.yml", &local_yml("unsigned"))]);
    let out = pull(&fx, &repo.url(), &verify);
    refused(
        &out,
        &format!("commit {unsigned} is not signed; nothing was run"),
    );
    assert!(out.task_names().is_empty(), "{}", out.stdout);
    let ev = pull_event(&fx);
    assert_eq!(ev["status"], "refused");
    assert_eq!(ev["exit"], 2);
    assert_eq!(fx.read("t/mark"), "signed\n");
    assert_eq!(sh(git(&fx.path("co"), &["rev-parse", "HEAD"])), head);

    // Signed by a key that is not allowed: refused as well.
    repo.commit_signed(
        &[("local.yml", &local_yml("foreign"))],
        &ssh_signing(&other),
        &[],
    );
    let out = pull(&fx, &repo.url(), &verify);
    refused(&out, "does not verify against the given keys");
    assert_eq!(fx.read("t/mark"), "signed\n");

    // `--verify-commit` without keys is bad input.
    let out = pull(&fx, &repo.url(), &["--verify-commit"]);
    refused(&out, "needs the keys");
}

#[test]
fn only_a_commit_signed_by_a_key_of_the_keyring_runs() {
    let fx = Fx::new();
    let repo = Repo::new(fx.dir.path());
    let good = GpgKey::new(fx.dir.path(), "good");
    let other = GpgKey::new(fx.dir.path(), "other");
    let keyring = good.public.display().to_string();
    let verify = ["--verify-commit", "--keyring", keyring.as_str()];

    repo.commit_signed(
        &[("local.yml", &local_yml("gpg"))],
        &good.signing(),
        &[("GNUPGHOME", &good.home)],
    );
    pull(&fx, &repo.url(), &verify).expect(0);
    assert_eq!(fx.read("t/mark"), "gpg\n");
    let signer = pull_event(&fx)["signed_by"].as_str().unwrap().to_string();
    assert!(signer.contains("good <fp@example.org>"), "{signer}");

    repo.commit_signed(
        &[("local.yml", &local_yml("other"))],
        &other.signing(),
        &[("GNUPGHOME", &other.home)],
    );
    let out = pull(&fx, &repo.url(), &verify);
    refused(&out, "does not verify against the given keys");
    assert_eq!(pull_event(&fx)["status"], "refused");
    assert_eq!(fx.read("t/mark"), "gpg\n");
}

#[test]
fn a_pull_waits_for_the_host_lock_a_push_holds() {
    let fx = Fx::new();
    let repo = Repo::new(fx.dir.path());
    let log = fx.path("t/log");
    let fifo = fx.path("t/fifo");
    std::fs::create_dir_all(fx.path("t")).unwrap();
    sh({
        let mut c = Command::new("mkfifo");
        c.arg(&fifo);
        c
    });
    repo.commit(
        &[(
            "local.yml",
            "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - name: note\n      shell: echo pull >> {{ out }}/log\n      args: { creates: /nonexistent }\n",
        )],
    );
    // The push: a run on this host (same state directory, so the same host lock) that holds
    // its lock until the test writes to the fifo.
    fx.play(&format!(
        "    - name: hold\n      shell: echo push-start >> {log}; cat {fifo} >/dev/null; echo push-end >> {log}\n      args: {{ creates: /nonexistent }}\n",
        log = log.display(),
        fifo = fifo.display()
    ));
    let push = fx.spawn(&["apply", "--format", "json", "site.yml"]);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !std::fs::read_to_string(&log).is_ok_and(|l| l.contains("push-start")) {
        assert!(Instant::now() < deadline, "the push never started");
        std::thread::sleep(Duration::from_millis(20));
    }

    // Without waiting: the pull fails at once and says who holds the lock.
    let busy = pull(&fx, &repo.url(), &[]);
    busy.expect(1);
    assert!(busy.stdout.contains("locked by run"), "{}", busy.stdout);
    assert_eq!(pull_event(&fx)["status"], "failed");

    // Waiting: the pull's agent starts and waits; the push ends; then the pull runs.
    let args = pull_args(&fx, &repo.url(), &["--lock-timeout", "120"]);
    let waiting = fx.spawn(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let pid = waiting.id() as i32;
    while !crate::support::descendants(pid).into_iter().any(|p| {
        std::fs::read_to_string(format!("/proc/{p}/comm"))
            .is_ok_and(|c| c.starts_with("fixpoint-agent"))
    }) {
        assert!(Instant::now() < deadline, "the pull's agent never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "push-start\n");
    std::fs::write(&fifo, "go\n").unwrap();
    let pushed = Out::from(push.wait_with_output().unwrap());
    pushed.expect(0);
    let pulled = Out::from(waiting.wait_with_output().unwrap());
    pulled.expect(0);
    assert_eq!(pulled.status_of("note"), "changed", "{}", pulled.stdout);
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "push-start\npush-end\npull\n"
    );
}

#[test]
fn the_result_is_posted_with_retries_under_one_idempotency_key() {
    let fx = Fx::new();
    let repo = Repo::new(fx.dir.path());
    repo.commit(&[("local.yml", &local_yml("posted"))]);
    let server = crate::http_server::Server::start();
    server.route("/results", crate::http_server::Route::ok("thanks\n"));
    server.fail_next("/results", 1);
    let url = server.url("/results");
    let out = pull(&fx, &repo.url(), &["--result-url", &url]);
    out.expect(0);
    assert!(out.stderr.contains("attempt 1 of 5"), "{}", out.stderr);
    let posts: Vec<_> = server
        .log()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    assert_eq!(posts.len(), 2, "{posts:?}");
    let key = posts[0].headers["idempotency-key"].clone();
    assert_eq!(posts[1].headers["idempotency-key"], key);
    // The body is the result file's text.
    assert_eq!(posts[1].body, fx.read("result.json"));
    assert_eq!(pull_event(&fx)["idempotency_key"], key.as_str());

    // The next run has a key of its own; a receiver that keeps failing fails the pull after
    // the attempts it was given.
    server.fail_next("/results", 10);
    let out = pull(
        &fx,
        &repo.url(),
        &["--result-url", &url, "--result-attempts", "2"],
    );
    out.expect(1);
    assert!(
        out.stderr.contains("could not post the result") && out.stderr.contains("in 2 attempt(s)"),
        "{}",
        out.stderr
    );
    let later: Vec<_> = server
        .log()
        .into_iter()
        .filter(|r| r.method == "POST")
        .skip(2)
        .collect();
    assert_eq!(later.len(), 2);
    assert_ne!(later[0].headers["idempotency-key"], key);
    assert_eq!(
        later[0].headers["idempotency-key"],
        later[1].headers["idempotency-key"]
    );
}

#[test]
fn without_systemd_the_timer_is_a_cron_entry_with_a_splay() {
    let fx = Fx::new();
    let repo = Repo::new(fx.dir.path());
    repo.commit(&[("local.yml", &local_yml("cron"))]);
    let ns = crate::system_ns::Ns::new(&fx);
    let install = |extra: &[&str]| {
        let out = ns
            .command(crate::fx::bin())
            .args(["pull", "--install-timer", "-U", &repo.url()])
            .arg("-d")
            .arg(fx.path("co"))
            .arg("--result-file")
            .arg(fx.path("result.json"))
            .args(["-e", &format!("out={}", fx.path("t").display())])
            .args([
                "-e",
                &format!("fixpoint_state_dir={}", fx.state_dir().display()),
            ])
            .args(extra)
            .current_dir(fx.dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        Out::from(out)
    };
    let first = install(&["--interval", "30min", "--splay", "2min"]);
    first.expect(0);
    says(
        &first,
        &["changed: /etc/cron.d/fixpoint-pull", "cron entry: changed"],
    );
    let entry = ns.sh("cat /etc/cron.d/fixpoint-pull");
    let line = entry
        .lines()
        .find(|l| l.starts_with("*/30 * * * * root sleep $((RANDOM \\% 121)); "))
        .unwrap_or_else(|| panic!("{entry}"));
    assert!(entry.contains("SHELL=/bin/bash\n"), "{entry}");
    // The machine's own /etc is untouched.
    assert!(!Path::new("/etc/cron.d/fixpoint-pull").exists());

    // Again: nothing to change.
    let again = install(&["--interval", "30min", "--splay", "2min"]);
    again.expect(0);
    says(
        &again,
        &[
            "ok: /etc/cron.d/fixpoint-pull",
            "cron entry: nothing to change",
        ],
    );

    // What cron runs runs the pull (bash, after cron's `\%` unescaping; no splay for the test).
    let command = line
        .split_once(" root ")
        .unwrap()
        .1
        .replace("\\%", "%")
        .replace("sleep $((RANDOM % 121)); ", "")
        .replace(" >/dev/null", "");
    std::fs::create_dir_all(fx.path("t")).unwrap();
    let ran = ns.command("bash").args(["-c", &command]).output().unwrap();
    assert!(ran.status.success(), "{command}: {ran:?}");
    assert_eq!(fx.read("t/mark"), "cron\n");
    assert_eq!(pull_event(&fx)["status"], "ok");

    // An interval cron cannot keep, or a calendar spec, is bad input; nothing written.
    install(&["--interval", "7min"]).expect(2);
    install(&["--on-calendar", "hourly"]).expect(2);
    assert_eq!(ns.sh("cat /etc/cron.d/fixpoint-pull"), entry);

    let gone = ns
        .command(crate::fx::bin())
        .args(["pull", "--uninstall-timer"])
        .output()
        .unwrap();
    Out::from(gone).expect(0);
    assert_eq!(
        ns.sh("ls /etc/cron.d/fixpoint-pull 2>/dev/null || echo gone"),
        "gone\n"
    );
}

/// Copy host paths (relative to `/`) into the booted root, through `tar` across `nsenter`.
fn copy_into(h: &crate::services_systemd::SystemdHost, base: &Path, paths: &[&str], to: &str) {
    let mut tar = Command::new("tar")
        .arg("-C")
        .arg(base)
        .arg("-cf")
        .arg("-")
        .args(paths)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let st = Command::new("nsenter")
        .args(["-t", &h.pid().to_string(), "-m", "-p", "-r", "-w"])
        .args(["tar", "-C", to, "-xf", "-"])
        .stdin(tar.stdout.take().unwrap())
        .status()
        .unwrap();
    assert!(
        st.success(),
        "copying {paths:?} into the booted root failed"
    );
    assert!(tar.wait().unwrap().success(), "tar of {paths:?} failed");
}

#[test]
fn the_systemd_timer_is_installed_once_and_fires() {
    let h = crate::services_systemd::SystemdHost::boot();
    let fx = Fx::new();
    let repo = Repo::new(fx.dir.path());
    repo.commit(&[("local.yml", &local_yml("timer"))]);
    // The root has neither git nor fixpoint: this machine's (the same Debian release) go in.
    copy_into(
        &h,
        Path::new("/"),
        &["usr/bin/git", "usr/lib/git-core", "usr/share/git-core"],
        "/",
    );
    let bin = Path::new(crate::fx::bin());
    copy_into(&h, bin.parent().unwrap(), &["fixpoint"], "/usr/local/bin");
    copy_into(&h, &fx.path("srv"), &["site.git"], "/srv");
    let install = || {
        Out::from(
            Command::new("nsenter")
                .args(["-t", &h.pid().to_string(), "-m", "-p", "-r", "-w"])
                .args(["/usr/local/bin/fixpoint", "pull", "--install-timer"])
                .args([
                    "-U",
                    "file:///srv/site.git",
                    "-d",
                    "/var/lib/fixpoint/pull/site",
                ])
                .args(["--result-file", "/run/pull-result.json", "-e", "out=/run"])
                .args(["--interval", "2s", "--splay", "1s"])
                .env("HOME", "/root")
                .stdin(Stdio::null())
                .output()
                .unwrap(),
        )
    };
    let first = install();
    first.expect(0);
    says(
        &first,
        &[
            "changed: /etc/systemd/system/fixpoint-pull.service",
            "changed: /etc/systemd/system/fixpoint-pull.timer",
            "changed: fixpoint-pull.timer enabled and started",
            "systemd timer: changed",
        ],
    );
    let timer = h.nsenter(&["cat", "/etc/systemd/system/fixpoint-pull.timer"]);
    for line in [
        "OnUnitActiveSec=2s",
        "RandomizedDelaySec=1s",
        "Persistent=true",
    ] {
        assert!(timer.contains(line), "{line}: {timer}");
    }
    assert_eq!(
        h.nsenter(&["systemctl", "is-enabled", "fixpoint-pull.timer"]),
        "enabled\n"
    );

    // It fires: the service runs the pull, which writes its result and the playbook's file.
    let result = crate::services_systemd::poll("the timer's pull to write its result", 120, || {
        let text = h.nsenter(&["cat", "/run/pull-result.json"]);
        text.contains("\"event\":\"pull\"").then_some(text)
    });
    let last: serde_json::Value = serde_json::from_str(result.lines().last().unwrap()).unwrap();
    assert_eq!(last["status"], "ok", "{result}");
    assert_eq!(h.nsenter(&["cat", "/run/mark"]), "timer\n");
    assert_eq!(h.prop("fixpoint-pull.service", "Result"), "success");

    // Installing again with the same arguments changes nothing.
    let again = install();
    again.expect(0);
    assert!(
        again.stdout.contains("systemd timer: nothing to change"),
        "{}",
        again.stdout
    );
    assert!(!again.stdout.contains("changed:"), "{}", again.stdout);
    assert_eq!(
        h.nsenter(&["systemctl", "is-active", "fixpoint-pull.timer"]),
        "active\n"
    );

    let gone = Command::new("nsenter")
        .args(["-t", &h.pid().to_string(), "-m", "-p", "-r", "-w"])
        .args(["/usr/local/bin/fixpoint", "pull", "--uninstall-timer"])
        .output()
        .unwrap();
    Out::from(gone).expect(0);
    assert_eq!(
        h.nsenter(&[
            "sh",
            "-c",
            "ls /etc/systemd/system/fixpoint-pull.* 2>/dev/null | wc -l"
        ]),
        "0\n"
    );
    assert_ne!(
        h.nsenter(&["systemctl", "is-active", "fixpoint-pull.timer"]),
        "active\n"
    );
}
