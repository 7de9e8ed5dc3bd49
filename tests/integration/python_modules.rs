//! Modules fixpoint does not implement, run as ansible-core's own Python code on loopback sshd
//! hosts with become: changes, convergence, check mode, the zip cached on the host, failures,
//! no_log, a task timeout, and a host whose Python is missing.

use crate::fx::Out;
use crate::ssh::Fleet;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The Python of the ansible-core installation the tests use (the one `.ci/run` keeps).
pub(crate) fn ansible_python() -> PathBuf {
    let bin = std::env::var_os("FIXPOINT_ANSIBLE")
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| {
            panic!(
                "FIXPOINT_ANSIBLE is not set: these tests run ansible-core's module code; set it \
                 to the bin directory of a virtualenv with ansible-core 2.19 (`.ci/run` makes \
                 /var/cache/fixpoint-ci/ansible)"
            )
        });
    let py = PathBuf::from(bin).join("python");
    assert!(py.exists(), "{} does not exist", py.display());
    py
}

/// The `ansible` package's collections (community.general, ...) that `.ci/run` unpacks.
pub(crate) fn ansible_collections() -> PathBuf {
    let dir = std::env::var_os("FIXPOINT_ANSIBLE_COLLECTIONS")
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| {
            panic!(
                "FIXPOINT_ANSIBLE_COLLECTIONS is not set: these tests run community.general \
                 modules; set it to a directory holding `ansible_collections/` (`.ci/run` runs \
                 `pip install --no-deps --target DIR ansible==12.3.0`)"
            )
        });
    let dir = PathBuf::from(dir);
    assert!(
        dir.join("ansible_collections/community/general").is_dir(),
        "{} has no community.general",
        dir.display()
    );
    dir
}

fn apply(fleet: &Fleet, extra: &[&str]) -> Out {
    apply_env(fleet, extra, &[])
}

fn apply_env(fleet: &Fleet, extra: &[&str], env: &[(&str, PathBuf)]) -> Out {
    let out = Command::new(crate::fx::bin())
        .args(fleet.apply_args(extra))
        .current_dir(fleet.fx.dir.path())
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("NO_COLOR", "1")
        .env("FIXPOINT_ANSIBLE_PYTHON", ansible_python())
        .stdin(Stdio::null())
        .output()
        .expect("run fixpoint");
    Out::from(out)
}

fn event<'a>(evs: &'a [serde_json::Value], task: &str) -> &'a serde_json::Value {
    evs.iter()
        .find(|e| e["event"] == "task" && e["task"] == task)
        .unwrap_or_else(|| panic!("no event for {task}"))
}

// `yum_repository` writes an INI file into `reposdir` and supports check mode and diffs, on
// Debian too: a file-editing builtin module fixpoint has no reason to make native, so it keeps
// the fallback tested (replace, which this test used before, is native now).
const PLAY: &str = concat!(
    "    - name: dir\n      file: {path: \"{{ base }}\", state: directory, mode: \"0755\"}\n",
    "    - name: conf\n      copy: {content: \"port=80\\nname=x\\n\", dest: \"{{ base }}/app.conf\", mode: \"0600\", force: false}\n",
    "    - name: repo\n      yum_repository: {name: fp, description: fixpoint test, baseurl: \"http://127.0.0.1/repo\", reposdir: \"{{ base }}\"}\n      register: r\n",
    "    - name: read as root (mode 0600, owner root)\n      ansible.builtin.slurp: {src: \"{{ base }}/app.conf\"}\n      register: s\n",
    "    - name: who\n      getent: {database: passwd, key: root}\n",
    "    - name: facts and registered values\n      when: not ansible_check_mode\n      assert:\n        that:\n          - (s.content | b64decode) == 'port=80\\nname=x\\n'\n          - getent_passwd.root[1] == '0'\n          - r.repo == 'fp'\n          - r.state == 'present'\n",
);

#[test]
fn python_modules_change_then_converge_over_ssh_with_become() {
    let fleet = Fleet::start(1, "fpsudo");
    // The whole play becomes root (one agent, one state directory owned by root).
    fleet.play_full("  gather_facts: false\n  become: true\n", PLAY);
    // Start from a cold module cache for root (only module zips: they are a cache).
    let root_cache = PathBuf::from("/root/.cache/fixpoint");
    for e in std::fs::read_dir(&root_cache)
        .into_iter()
        .flatten()
        .flatten()
    {
        if e.file_name().to_string_lossy().starts_with("pymod-") {
            let _ = std::fs::remove_file(e.path());
        }
    }
    let out = apply(&fleet, &[]);
    out.expect(0);
    let evs = out.events();
    let repo = event(&evs, "repo");
    assert_eq!(repo["status"], "changed", "{}", out.stdout);
    assert_eq!(repo["engine"], "python", "{repo}");
    assert!(
        event(&evs, "conf").get("engine").is_none(),
        "native stays native"
    );
    // The module's code went to the host once, as a zip named by its hash.
    assert!(
        repo["note"]
            .as_str()
            .unwrap_or("")
            .contains("module code sent"),
        "{repo}"
    );
    let file = fleet.base(&fleet.hosts[0]).join("fp.repo");
    let written = "[fp]\nbaseurl = http://127.0.0.1/repo\nname = fixpoint test\n\n";
    assert_eq!(std::fs::read_to_string(&file).unwrap(), written);
    // The second run changes nothing and sends no code: the host's cache has it.
    let out = apply(&fleet, &["--twice"]);
    out.expect(0);
    let evs = out.events();
    let repo = event(&evs, "repo");
    assert_eq!(repo["status"], "ok", "{}", out.stdout);
    assert!(repo.get("note").is_none(), "{repo}");
    // Check mode: the module plans a change, shows its diff, and writes nothing.
    std::fs::remove_file(&file).unwrap();
    let out = apply(&fleet, &["--check", "--diff"]);
    out.expect(0);
    let evs = out.events();
    let repo = event(&evs, "repo");
    assert_eq!(repo["status"], "changed", "{}", out.stdout);
    let diff = serde_json::to_string(&repo["diff"]).unwrap();
    assert!(diff.contains("baseurl = http://127.0.0.1/repo"), "{diff}");
    assert!(!file.exists());
}

#[test]
fn failures_no_log_timeouts_and_a_missing_python_are_reported() {
    let fleet = Fleet::start(1, "fpuser");
    fleet.play(concat!(
        "    - name: dir\n      file: {path: \"{{ base }}\", state: directory}\n",
        // Modules that stay Python (slurp, wait_for and ping, used here before, are native now):
        // `yum_repository` fails on a missing `reposdir` and returns the repository's name as
        // `repo`, `mount_facts` only reads, and a stand-in interpreter that sleeps keeps a
        // module running until the task timeout.
        "    - name: sleeper\n      copy: {content: \"#!/bin/sh\\nexec sleep 300\\n\", dest: \"{{ base }}/slowpy\", mode: \"0755\"}\n",
        "    - name: missing file\n      yum_repository: {name: fp, description: x, baseurl: \"http://127.0.0.1/r\", reposdir: \"{{ base }}/nope\"}\n      register: f\n      ignore_errors: true\n",
        "    - name: secret\n      yum_repository: {name: fp-secret-4711, description: x, baseurl: \"http://127.0.0.1/r\", reposdir: \"{{ base }}\"}\n      no_log: true\n",
        "    - name: slow\n      mount_facts: {}\n      vars: {ansible_python_interpreter: \"{{ base }}/slowpy\"}\n      timeout: 2\n      ignore_errors: true\n",
        "    - name: no python\n      mount_facts: {}\n      vars: {ansible_python_interpreter: /nonexistent/python3}\n      ignore_errors: true\n",
        "    - name: native after\n      copy: {content: ok, dest: \"{{ base }}/after\"}\n",
        "    - name: registered failure\n      assert:\n        that:\n          - f.failed\n          - f.msg is search('nope')\n",
    ));
    let out = apply(&fleet, &["-v"]);
    out.expect(0);
    let evs = out.events();
    let missing = event(&evs, "missing file");
    assert_eq!(missing["status"], "failed", "{}", out.stdout);
    assert_eq!(missing["ignored"], true);
    // no_log: neither the result nor the message leaves the controller's reporter.
    let secret = serde_json::to_string(event(&evs, "secret")).unwrap();
    assert!(!secret.contains("fp-secret-4711"), "{secret}");
    assert_eq!(event(&evs, "secret")["engine"], "python", "{secret}");
    assert!(secret.contains("no_log"), "{secret}");
    // The task timeout kills the module (its process group) and says so.
    let slow = event(&evs, "slow");
    assert_eq!(slow["status"], "failed", "{slow}");
    assert!(
        slow["msg"]
            .as_str()
            .unwrap_or("")
            .contains("Timed out after 2 second(s)"),
        "{slow}"
    );
    // No Python: a clear failure naming the module and the task; native tasks still run.
    let nopy = event(&evs, "no python");
    let msg = nopy["msg"].as_str().unwrap_or("");
    assert!(
        msg.contains("mount_facts") && msg.contains("no python"),
        "{msg}"
    );
    assert!(msg.contains("/nonexistent/python3"), "{msg}");
    assert_eq!(event(&evs, "native after")["status"], "changed");
    assert_eq!(event(&evs, "registered failure")["status"], "ok");
}

#[test]
fn collection_modules_run_from_ansible_collections_path() {
    let fleet = Fleet::start(1, "fpsudo");
    fleet.play_full(
        "  gather_facts: false\n  become: true\n",
        concat!(
            "    - name: dir\n      file: {path: \"{{ base }}\", state: directory}\n",
            // `community.general.filesize` runs as the collection's code; `mount` (ansible.posix's,
            // native in fixpoint) beside it changes only the fstab it is given. (ini_file and
            // pam_limits, which this test used before, are native now.)
            "    - name: fstab\n      mount: {path: /mnt/fpdummy, src: /dev/fpdummy, fstype: ext4, state: present, fstab: \"{{ base }}/fstab\"}\n      register: m\n",
            "    - name: size\n      community.general.filesize: {path: \"{{ base }}/blob\", size: 1K}\n      register: k\n",
            "    - name: registered\n      when: not ansible_check_mode\n      assert:\n        that: [m.opts == 'defaults', m.name == '/mnt/fpdummy', k.size == 1024]\n",
        ),
    );
    std::fs::create_dir_all(fleet.base(&fleet.hosts[0])).unwrap();
    std::fs::write(fleet.base(&fleet.hosts[0]).join("fstab"), "").unwrap();
    let env = [("ANSIBLE_COLLECTIONS_PATH", ansible_collections())];
    // Check mode first: nothing is written.
    let out = apply_env(&fleet, &["--check"], &env);
    out.expect(0);
    assert_eq!(out.status_of("size"), "changed", "{}", out.stdout);
    let base = fleet.base(&fleet.hosts[0]);
    assert!(!base.join("blob").exists());
    assert_eq!(std::fs::read_to_string(base.join("fstab")).unwrap(), "");
    let out = apply_env(&fleet, &[], &env);
    out.expect(0);
    assert_eq!(out.status_of("size"), "changed", "{}", out.stdout);
    assert_eq!(
        out.task_events("size")[0]["engine"],
        "python",
        "{}",
        out.stdout
    );
    assert_eq!(out.status_of("fstab"), "changed", "{}", out.stdout);
    assert_eq!(std::fs::metadata(base.join("blob")).unwrap().len(), 1024);
    assert_eq!(
        std::fs::read_to_string(base.join("fstab")).unwrap(),
        "/dev/fpdummy /mnt/fpdummy ext4 defaults 0 0\n"
    );
    // Converged: the second run (and --twice's second pass) changes nothing.
    apply_env(&fleet, &["--twice"], &env).expect(0);
}
