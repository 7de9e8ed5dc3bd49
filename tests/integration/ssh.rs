//! Hosts over SSH: real sshd processes on loopback addresses, the agent shipped and cached, many hosts at once.

use crate::fx::{Fx, Out};
use crate::support::{self, SshHost};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Tests that change a test user's agent cache directory take this lock (the user's home is shared).
pub static CACHE_DIR_LOCK: Mutex<()> = Mutex::new(());

/// A fleet of loopback hosts with one ssh_config and an inventory of aliases.
pub struct Fleet {
    pub hosts: Vec<SshHost>,
    pub fx: Fx,
    pub config: PathBuf,
    pub known_hosts: PathBuf,
}

impl Fleet {
    pub fn start(n: usize, user: &str) -> Fleet {
        support::require_root();
        support::require_sshd();
        support::require_user(user);
        let hosts: Vec<SshHost> = (0..n).map(|_| SshHost::start(user)).collect();
        let fx = Fx::new();
        // The remote user writes under the fixture directory.
        std::fs::set_permissions(fx.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let work = fx.path("t");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o777)).unwrap();
        let config = fx.path("ssh_config");
        let refs: Vec<&SshHost> = hosts.iter().collect();
        let known_hosts = support::write_ssh_config(&refs, &config);
        let names = hosts.iter().map(|h| (h.alias().to_string(), String::new()));
        fx.write(
            "hosts.ini",
            &support::hosts_inventory("fleet", names, &work),
        );
        Fleet {
            hosts,
            fx,
            config,
            known_hosts,
        }
    }

    /// The arguments of `fixpoint <sub>` against the fleet (its inventory and ssh_config),
    /// then `rest`.
    pub fn args(&self, sub: &str, rest: &[&str]) -> Vec<String> {
        let config = self.config.to_str().unwrap();
        [sub, "-i", "hosts.ini", "--ssh-config", config]
            .iter()
            .chain(rest)
            .map(|s| s.to_string())
            .collect()
    }

    /// Run `fixpoint <sub>` against the fleet, then `rest`, and wait for it.
    pub fn run(&self, sub: &str, rest: &[&str]) -> Out {
        let args = self.args(sub, rest);
        self.fx
            .run(&args.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// The arguments of `fixpoint apply` on `site.yml` against the fleet, JSON output.
    pub fn apply_args(&self, extra: &[&str]) -> Vec<String> {
        let rest: Vec<&str> = ["--format", "json"]
            .iter()
            .chain(extra)
            .chain(&["site.yml"])
            .copied()
            .collect();
        self.args("apply", &rest)
    }

    /// Run `fixpoint apply` against the fleet and wait for it.
    pub fn apply(&self, extra: &[&str]) -> Out {
        let args = self.apply_args(extra);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        self.fx.run(&refs)
    }

    /// Start `fixpoint apply` against the fleet without waiting; stdout and stderr are piped.
    pub fn spawn_apply(&self, extra: &[&str], stdin: Stdio) -> std::process::Child {
        Command::new(crate::fx::bin())
            .args(self.apply_args(extra))
            .current_dir(self.fx.dir.path())
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn fixpoint")
    }

    /// Write a playbook for `hosts: fleet` with per-host working paths under `{{ base }}`.
    pub fn play(&self, tasks: &str) {
        self.play_full("  gather_facts: false\n", tasks);
    }

    pub fn play_full(&self, play_extra: &str, tasks: &str) {
        let text = format!(
            "- hosts: fleet\n{play_extra}  vars:\n    base: \"{}/{{{{ inventory_hostname }}}}\"\n  tasks:\n{tasks}",
            self.fx.path("t").display()
        );
        self.fx.write("site.yml", &text);
    }

    pub fn base(&self, h: &SshHost) -> PathBuf {
        self.fx.path("t").join(h.alias())
    }
}

fn host_events(out: &Out, host: &str) -> Vec<serde_json::Value> {
    out.events()
        .into_iter()
        .filter(|e| e["event"] == "task" && e["host"] == host)
        .collect()
}

const CONVERGE: &str = concat!(
    "    - name: dir\n      file:\n        path: \"{{ base }}\"\n        state: directory\n        mode: \"0755\"\n",
    "    - name: conf\n      copy:\n        content: \"host={{ inventory_hostname }}\\n\"\n        dest: \"{{ base }}/conf\"\n",
    "    - name: line\n      lineinfile:\n        path: \"{{ base }}/env\"\n        line: \"managed=yes\"\n        create: true\n",
    "    - name: once\n      shell: echo ran >> {{ base }}/ran\n      args:\n        creates: \"{{ base }}/ran\"\n",
    "    - name: who\n      command: id -un\n      register: who\n      changed_when: false\n",
    "    - name: user\n      assert:\n        that: who.stdout == 'fpuser'\n",
);

#[test]
fn one_playbook_on_three_hosts_converges_with_one_connection_each() {
    let fleet = Fleet::start(3, "fpuser");
    fleet.play(CONVERGE);
    let first = fleet.apply(&[]);
    first.expect(0);
    let r = first.recap();
    for h in &fleet.hosts {
        assert_eq!(r["hosts"][h.alias()]["changed"], 4, "{}", first.stdout);
        let conf = std::fs::read_to_string(fleet.base(h).join("conf")).unwrap();
        assert_eq!(conf, format!("host={}\n", h.alias()));
        let env = std::fs::read_to_string(fleet.base(h).join("env")).unwrap();
        assert_eq!(env, "managed=yes\n");
    }
    let second = fleet.apply(&[]);
    second.expect(0);
    let r = second.recap();
    for h in &fleet.hosts {
        assert_eq!(r["hosts"][h.alias()]["changed"], 0, "{}", second.stdout);
        assert_eq!(r["hosts"][h.alias()]["ok"], 6);
        assert_eq!(
            std::fs::read_to_string(fleet.base(h).join("ran")).unwrap(),
            "ran\n"
        );
        // One SSH login per host per run: two runs, two logins.
        let logins = h.log().matches("Accepted publickey").count();
        assert_eq!(logins, 2, "one connection per host per run:\n{}", h.log());
    }
}

#[test]
fn gathered_facts_come_from_the_host() {
    let fleet = Fleet::start(1, "fpuser");
    fleet.play_full(
        "",
        "    - name: facts\n      assert:\n        that:\n          - ansible_user_id == 'fpuser'\n          - ansible_env.HOME == '/home/fpuser'\n          - ansible_facts.architecture == ansible_architecture\n          - ansible_processor_vcpus >= 1\n          - ansible_memtotal_mb > 0\n          - ansible_hostname | length > 0\n          - ansible_os_family | length > 0\n",
    );
    fleet.apply(&[]).expect(0);
}

#[test]
fn unknown_host_key_is_refused_while_the_others_succeed() {
    let fleet = Fleet::start(3, "fpuser");
    // Leave the middle host out of known_hosts.
    support::write_known_hosts(&[&fleet.hosts[0], &fleet.hosts[2]], &fleet.known_hosts);
    fleet.play(CONVERGE);
    let out = fleet.apply(&[]);
    out.expect(1);
    let r = out.recap();
    let bad = fleet.hosts[1].alias();
    assert_eq!(r["hosts"][bad]["unreachable"], 1, "{}", out.stdout);
    let msg = host_events(&out, bad)[0]["msg"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("host key verification failed"), "{msg}");
    assert!(msg.contains("--accept-new-host-keys"), "{msg}");
    for h in [&fleet.hosts[0], &fleet.hosts[2]] {
        assert_eq!(r["hosts"][h.alias()]["failed"], 0);
        assert_eq!(r["hosts"][h.alias()]["changed"], 4);
    }
    assert!(
        !fleet.base(&fleet.hosts[1]).exists(),
        "nothing ran on the refused host"
    );
}

#[test]
fn accept_new_host_keys_trusts_an_unknown_host() {
    let fleet = Fleet::start(1, "fpuser");
    support::write_known_hosts(&[], &fleet.known_hosts);
    fleet.play(CONVERGE);
    // The harness config says StrictHostKeyChecking yes; the flag overrides it for new hosts.
    let out = fleet.apply(&["--accept-new-host-keys"]);
    out.expect(0);
    let known = std::fs::read_to_string(&fleet.known_hosts).unwrap();
    assert!(
        known.contains(&fleet.hosts[0].addr().to_string()),
        "{known}"
    );
}

#[test]
fn unreachable_host_is_counted_and_the_others_go_on() {
    let mut fleet = Fleet::start(2, "fpuser");
    fleet.hosts[0].kill();
    fleet.play(CONVERGE);
    let out = fleet.apply(&[]);
    out.expect(1);
    let r = out.recap();
    assert_eq!(
        r["hosts"][fleet.hosts[0].alias()]["unreachable"],
        1,
        "{}",
        out.stdout
    );
    assert_eq!(r["hosts"][fleet.hosts[1].alias()]["changed"], 4);
}

#[test]
fn limit_restricts_the_hosts() {
    let fleet = Fleet::start(2, "fpuser");
    fleet.play(CONVERGE);
    let out = fleet.apply(&["--limit", fleet.hosts[1].alias()]);
    out.expect(0);
    let r = out.recap();
    assert!(
        r["hosts"].get(fleet.hosts[0].alias()).is_none(),
        "{}",
        out.stdout
    );
    assert!(!fleet.base(&fleet.hosts[0]).exists());
    assert!(fleet.base(&fleet.hosts[1]).exists());
}

const BECOME: &str = concat!(
    "    - name: as root\n      command: id -un\n      register: who\n      changed_when: false\n      become: true\n",
    "    - name: root wrote\n      copy:\n        content: secret\n        dest: \"{{ base }}-root-file\"\n        mode: \"0600\"\n      become: true\n",
    "    - name: check\n      assert:\n        that: who.stdout == 'root'\n",
);

#[test]
fn become_through_sudo_without_password() {
    let fleet = Fleet::start(1, "fpsudo");
    fleet.play(BECOME);
    fleet.apply(&[]).expect(0);
    let p = PathBuf::from(format!(
        "{}-root-file",
        fleet.base(&fleet.hosts[0]).display()
    ));
    let m = std::fs::metadata(&p).unwrap();
    assert_eq!(
        std::os::unix::fs::MetadataExt::uid(&m),
        0,
        "written as root"
    );
}

fn apply_with_stdin(fleet: &Fleet, extra: &[&str], stdin: &str) -> Out {
    use std::io::Write;
    let mut child = fleet.spawn_apply(extra, Stdio::piped());
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    Out::from(child.wait_with_output().unwrap())
}

#[test]
fn become_through_sudo_with_a_password() {
    let _lock = CACHE_DIR_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let fleet = Fleet::start(1, "fppass");
    fleet.play(BECOME);
    // Without -K, sudo needs a password: a clear per-host failure.
    let out = fleet.apply(&[]);
    out.expect(1);
    assert!(
        out.stdout.contains("password is required"),
        "{}",
        out.stdout
    );
    // A wrong password: a clear failure, and the password appears nowhere.
    let out = apply_with_stdin(&fleet, &["-K"], "wrong-password-xyz\n");
    out.expect(1);
    assert!(
        !out.stdout.contains("wrong-password-xyz") && !out.stderr.contains("wrong-password-xyz")
    );
    assert!(out.stdout.contains("sudo"), "{}", out.stdout);
    // The right one.
    let out = apply_with_stdin(&fleet, &["-K"], "fixpoint-test-pw\n");
    out.expect(0);
    assert!(!out.stdout.contains("fixpoint-test-pw") && !out.stderr.contains("fixpoint-test-pw"));
}

/// `become_method: su` to another unprivileged user: the user's password reaches su on its stdin,
/// and nothing of the controller's stream after it is lost (a 300 KB file goes through intact).
const BECOME_SU: &str = concat!(
    "    - name: as fppass through su\n      command: id -un\n      register: who\n      changed_when: false\n",
    "      become: true\n      become_method: su\n      become_user: fppass\n",
    "    - name: su wrote\n      copy:\n        content: \"{{ 'fixpoint su relay ' * 16000 }}\"\n        dest: \"{{ base }}-su-file\"\n",
    "      become: true\n      become_method: su\n      become_user: fppass\n",
    "    - name: check\n      assert:\n        that: who.stdout == 'fppass'\n",
);

#[test]
fn become_through_su_with_a_password() {
    let fleet = Fleet::start(1, "fpuser");
    support::require_user("fppass");
    fleet.play(BECOME_SU);
    let leftovers = || -> Vec<String> {
        std::fs::read_dir("/tmp")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with("fixpoint-su."))
            .collect()
    };
    let before = leftovers();
    // Without a password, a login user other than root cannot su: the host fails, saying so,
    // before su would read the controller's requests as the password.
    let out = fleet.apply(&[]);
    out.expect(1);
    assert!(
        out.stdout
            .contains("become_method su needs the password of fppass"),
        "{}",
        out.stdout
    );
    // A wrong one: su's own message, and the password appears nowhere.
    let out = apply_with_stdin(&fleet, &["-K"], "wrong-password-xyz\n");
    out.expect(1);
    assert!(
        out.stdout.contains("Authentication failure"),
        "{}",
        out.stdout
    );
    assert!(
        !out.stdout.contains("wrong-password-xyz") && !out.stderr.contains("wrong-password-xyz")
    );
    // The right one: the tasks run as fppass, and the file arrives whole.
    let out = apply_with_stdin(&fleet, &["-K"], "fixpoint-test-pw\n");
    out.expect(0);
    assert!(!out.stdout.contains("fixpoint-test-pw") && !out.stderr.contains("fixpoint-test-pw"));
    let p = PathBuf::from(format!("{}-su-file", fleet.base(&fleet.hosts[0]).display()));
    let m = std::fs::metadata(&p).unwrap();
    let fppass = nix::unistd::User::from_name("fppass").unwrap().unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&m), fppass.uid.as_raw());
    assert_eq!(
        std::fs::read_to_string(&p).unwrap(),
        "fixpoint su relay ".repeat(16000)
    );
    // The private pipe's directory goes once su has exited: the controller does not wait for
    // the host's shell at the end of the run, so it may still be removing it.
    let deadline = Instant::now() + Duration::from_secs(20);
    while leftovers() != before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(leftovers(), before);
}

#[test]
fn agent_cache_in_an_unsafe_directory_is_refused() {
    let _lock = CACHE_DIR_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let fleet = Fleet::start(1, "fppass");
    let cache = Path::new("/home/fppass/.cache/fixpoint");
    std::fs::create_dir_all(cache).unwrap();
    let owner = nix::unistd::User::from_name("fppass").unwrap().unwrap();
    nix::unistd::chown(cache, Some(owner.uid), Some(owner.gid)).unwrap();
    nix::unistd::chown(cache.parent().unwrap(), Some(owner.uid), Some(owner.gid)).unwrap();
    std::fs::set_permissions(cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    fleet.play(CONVERGE);
    let out = fleet.apply(&[]);
    std::fs::set_permissions(cache, std::fs::Permissions::from_mode(0o700)).unwrap();
    out.expect(1);
    let msg = host_events(&out, fleet.hosts[0].alias())[0]["msg"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("refusing the agent cache directory"), "{msg}");
    assert!(msg.contains("chmod 700"), "{msg}");
}

#[test]
fn killed_connection_fails_that_host_without_hanging_the_others() {
    let mut fleet = Fleet::start(2, "fpuser");
    let victim = fleet.hosts[0].alias().to_string();
    fleet.play(&format!(
        concat!(
            "    - name: dir\n      file:\n        path: \"{{{{ base }}}}\"\n        state: directory\n",
            "    - name: slow\n      shell: touch {{{{ base }}}}/started; sleep 60\n      args:\n        creates: \"{{{{ base }}}}/done\"\n      when: inventory_hostname == '{victim}'\n",
            "    - name: after\n      copy:\n        content: ok\n        dest: \"{{{{ base }}}}/after\"\n",
        ),
        victim = victim
    ));
    let child = fleet.spawn_apply(&[], Stdio::null());
    // Wait until the slow task is observably running on the victim (a condition with a
    // deadline, not a guessed delay), then cut the connection.
    let started = fleet.base(&fleet.hosts[0]).join("started");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !started.exists() {
        assert!(Instant::now() < deadline, "the slow task never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    fleet.hosts[0].kill();
    let out = Out::from(child.wait_with_output().unwrap());
    out.expect(1);
    let slow: Vec<_> = out
        .task_events("slow")
        .into_iter()
        .filter(|e| e["host"] == victim.as_str())
        .collect();
    assert_eq!(slow[0]["status"], "failed", "{}", out.stdout);
    let msg = slow[0]["msg"].as_str().unwrap();
    assert!(
        msg.contains("connection lost") && msg.contains("unknown"),
        "{msg}"
    );
    assert!(
        fleet.base(&fleet.hosts[1]).join("after").exists(),
        "the other host went on"
    );
    assert!(!fleet.base(&fleet.hosts[0]).join("after").exists());
}

#[test]
fn roles_and_delegation_to_the_controller_over_ssh() {
    let fleet = Fleet::start(2, "fpuser");
    fleet.fx.write("roles/site/files/motd", "from the role\n");
    fleet.fx.write(
        "roles/site/tasks/main.yml",
        concat!(
            "- name: dir\n  file:\n    path: \"{{ base }}\"\n    state: directory\n",
            "- name: motd\n  copy:\n    src: motd\n    dest: \"{{ base }}/motd\"\n",
            "- name: who runs it\n  command: id -un\n  register: remote_user\n  changed_when: false\n",
            "- name: on the controller\n  command: id -un\n  register: local_user\n  changed_when: false\n  delegate_to: localhost\n",
        ),
    );
    // The controller's user is whoever runs the test.
    let me = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
    let text = format!(
        "- hosts: fleet\n  gather_facts: false\n  vars:\n    base: \"{}/{{{{ inventory_hostname }}}}\"\n  roles: [site]\n  tasks:\n    - name: users\n      assert:\n        that:\n          - remote_user.stdout == 'fpuser'\n          - local_user.stdout == '{}'\n",
        fleet.fx.path("t").display(),
        me.trim()
    );
    // The implicit localhost takes its variables from host_vars/ beside the playbook.
    fleet.fx.write(
        "host_vars/localhost.yml",
        &format!(
            "fixpoint_state_dir: {}\n",
            fleet.fx.path("controller.state").display()
        ),
    );
    fleet.fx.write("site.yml", &text);
    let out = fleet.apply(&[]);
    out.expect(0);
    for h in &fleet.hosts {
        assert_eq!(
            std::fs::read_to_string(fleet.base(h).join("motd")).unwrap(),
            "from the role\n"
        );
    }
    // The delegated task ran on the controller, once per remote host, under its state dir.
    let evs = out.task_events("on the controller");
    assert_eq!(evs.len(), 2);
    assert!(
        evs.iter().all(|e| e["delegated_to"] == "localhost"),
        "{evs:?}"
    );
    assert!(fleet.fx.path("controller.state").exists());
}

/// The path of the embedded agent in a user's cache on a (loopback) host.
fn cached_agent(user: &str) -> PathBuf {
    let sha = fixpoint::connection::AgentBinary::embedded().sha256;
    PathBuf::from(format!("/home/{user}/.cache/fixpoint/fixpoint-agent-{sha}"))
}

#[test]
fn a_cold_host_receives_the_compressed_agent_once_even_with_a_become_password() {
    use sha2::Digest;
    use std::os::unix::fs::MetadataExt;
    let _lock = CACHE_DIR_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let fleet = Fleet::start(1, "fppass");
    let cached = cached_agent("fppass");
    let _ = std::fs::remove_file(&cached);
    // Agents of other builds: one uploaded 40 days ago (and an old whole-controller copy) go
    // with this upload, one from yesterday stays.
    let dir = cached.parent().unwrap();
    std::fs::create_dir_all(dir).unwrap();
    let owner = nix::unistd::User::from_name("fppass").unwrap().unwrap();
    for d in [dir, dir.parent().unwrap()] {
        nix::unistd::chown(d, Some(owner.uid), Some(owner.gid)).unwrap();
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let stale = [
        dir.join("fixpoint-agent-0000000000000000000000000000000000000000000000000000000000000000"),
        dir.join("fixpoint-1111111111111111111111111111111111111111111111111111111111111111"),
    ];
    let recent =
        dir.join("fixpoint-agent-2222222222222222222222222222222222222222222222222222222222222222");
    for (path, age_days) in [(&stale[0], 40), (&stale[1], 40), (&recent, 1)] {
        std::fs::write(path, b"old agent").unwrap();
        let when = std::time::SystemTime::now() - Duration::from_secs(age_days * 86_400);
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(when)
            .unwrap();
    }
    fleet.play(BECOME);
    // The password line and the upload share the channel's stdin: the upload must not eat it.
    apply_with_stdin(&fleet, &["-K"], "fixpoint-test-pw\n").expect(0);
    let bytes = std::fs::read(&cached).expect("the agent is cached under its sha256");
    let sha = hex::encode(sha2::Sha256::digest(&bytes));
    assert!(
        cached.ends_with(format!("fixpoint-agent-{sha}")),
        "{cached:?}"
    );
    let meta = std::fs::metadata(&cached).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o700);
    assert!(
        stale.iter().all(|p| !p.exists()),
        "agents unused for 30 days are pruned"
    );
    assert!(recent.exists(), "a recent agent of another build is kept");
    std::fs::remove_file(&recent).unwrap();
    let before = (meta.ino(), meta.mtime(), meta.mtime_nsec());
    // A warm host is not sent the agent again.
    apply_with_stdin(&fleet, &["-K"], "fixpoint-test-pw\n").expect(0);
    let meta = std::fs::metadata(&cached).unwrap();
    assert_eq!(before, (meta.ino(), meta.mtime(), meta.mtime_nsec()));
}

/// `remote_user`, `port` and `connection` on a task or block pick the connection it runs
/// through (the host's variables would win; this inventory sets none): another remote user
/// gets an agent of its own, `connection: local` runs on the controller, and a port nothing
/// listens on makes the host unreachable for that task only, with `ignore_unreachable`.
#[test]
fn connection_keywords_on_tasks_and_blocks_pick_user_port_and_transport() {
    let fleet = Fleet::start(1, "fpuser");
    support::require_user("fpsudo");
    let work = fleet.fx.path("t");
    let me = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
    let text = format!(
        r#"- hosts: fleet
  gather_facts: false
  tasks:
    - name: as the configured user
      command: id -un
      register: plain
      changed_when: false
    - name: as another remote user
      command: id -un
      register: other
      changed_when: false
      remote_user: fpsudo
      vars:
        fixpoint_state_dir: "{work}/fpsudo.state"
    - block:
        - name: on the controller
          command: id -un
          register: here
          changed_when: false
      connection: local
      vars:
        fixpoint_state_dir: "{work}/local.state"
    - name: through a port nothing listens on
      command: id -un
      changed_when: false
      port: 1
      ignore_unreachable: true
    - name: users
      assert:
        that:
          - plain.stdout == 'fpuser'
          - other.stdout == 'fpsudo'
          - here.stdout == '{me}'
"#,
        work = work.display(),
        me = me.trim()
    );
    fleet.fx.write("site.yml", &text);
    let out = fleet.apply(&[]);
    out.expect(0);
    assert_eq!(
        out.status_of("through a port nothing listens on"),
        "unreachable"
    );
    assert_eq!(out.status_of("users"), "ok");
    // The second remote user kept its own journal.
    assert!(work.join("fpsudo.state").exists());
}

/// `become_exe` and `become_flags` reach sudo: the flags that only shape the environment pass,
/// `-S`/`-n` are fixpoint's own to decide, and another sudo binary starts another agent (one
/// that does not exist cannot start, so the host is unreachable for that task only).
#[test]
fn become_exe_and_become_flags_reach_sudo() {
    let fleet = Fleet::start(1, "fpsudo");
    // The agent's state directory must belong to the user it runs as: root's own here.
    let state = fleet.fx.path("root.state");
    fleet.fx.write(
        "hosts.ini",
        &format!(
            "[fleet]\n{} fixpoint_state_dir={}\n",
            fleet.hosts[0].alias(),
            state.display()
        ),
    );
    fleet.fx.write(
        "site.yml",
        r#"- hosts: fleet
  gather_facts: false
  become: true
  become_flags: "-H -S -n"
  tasks:
    - name: as root through the play's flags
      command: id -un
      register: who
      changed_when: false
    - name: through the named sudo
      command: printenv HOME
      register: home
      changed_when: false
      become_exe: /usr/bin/sudo
    - name: through a sudo that is not there
      command: id -un
      changed_when: false
      become_exe: /nonexistent/sudo
      ignore_unreachable: true
      ignore_errors: true
    - name: check
      assert:
        that:
          - who.stdout == 'root'
          - home.stdout == '/root'
"#,
    );
    let out = fleet.apply(&[]);
    out.expect(0);
    assert_eq!(out.status_of("check"), "ok", "{}", out.stdout);
    assert_ne!(out.status_of("through a sudo that is not there"), "ok");
}

/// `-u` and `-b` say what tasks do where no keyword or variable does: the login user and
/// become; a task's `remote_user` and `become: false` win over them, as in ansible-playbook.
#[test]
fn user_and_become_flags_are_the_defaults_of_the_keywords() {
    let fleet = Fleet::start(1, "fpuser");
    support::require_user("fpsudo");
    let work = fleet.fx.path("t");
    let text = format!(
        r#"- hosts: fleet
  gather_facts: false
  tasks:
    - name: as -u's user, become through -b
      command: id -un
      register: become
      changed_when: false
      vars:
        fixpoint_state_dir: "{work}/root.state"
    - name: as -u's user
      command: id -un
      register: login
      changed_when: false
      become: false
      vars:
        fixpoint_state_dir: "{work}/fpsudo.state"
    - name: as the task's remote user
      command: id -un
      register: own
      changed_when: false
      become: false
      remote_user: fpuser
    - name: users
      assert:
        that:
          - become.stdout == 'root'
          - login.stdout == 'fpsudo'
          - own.stdout == 'fpuser'
"#,
        work = work.display(),
    );
    fleet.fx.write("site.yml", &text);
    let out = fleet.apply(&["-u", "fpsudo", "-b"]);
    out.expect(0);
    assert_eq!(out.status_of("users"), "ok");
}
