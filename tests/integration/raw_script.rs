//! `script` and `raw` over SSH as fpuser: the script is uploaded once (then found in the host's
//! cache), runs with its quoted arguments, and a second run is skipped by `creates`; raw runs
//! behind a registered `stat`; check mode runs neither. Unguarded raw/script and parameters
//! Ansible's raw ignores are refused at load.

use crate::fx::{Fx, Out};
use crate::ssh::Fleet;

/// Removes the script from fpuser's host cache (`~/.cache/fixpoint/archive-<sha256>`) when
/// dropped: the cache lives outside the fixture.
struct Cached(std::path::PathBuf);

impl Drop for Cached {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn result(out: &Out, task: &str) -> serde_json::Value {
    let evs = out.task_events(task);
    assert_eq!(evs.len(), 1, "one result for {task}: {}", out.stdout);
    evs[0]["result"].clone()
}

const SCRIPT: &str =
    "#!/bin/sh\necho \"args: $# $2\"\necho warn >&2\nprintf '%s\\n' \"$2\" > \"$1\"\n";

#[test]
fn script_and_raw_run_once_and_check_mode_runs_nothing() {
    let fleet = Fleet::start(1, "fpuser");
    fleet.fx.write("files/mk.sh", SCRIPT);
    use sha2::Digest;
    let sha = hex::encode(sha2::Sha256::digest(SCRIPT.as_bytes()));
    let home = nix::unistd::User::from_name("fpuser")
        .unwrap()
        .expect("fpuser exists")
        .dir;
    let cached = Cached(home.join(format!(".cache/fixpoint/archive-{sha}")));
    let _ = std::fs::remove_file(&cached.0);
    let base = fleet.base(&fleet.hosts[0]);
    std::fs::create_dir_all(&base).unwrap();
    std::fs::set_permissions(&base, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    fleet.play(
        "    - name: script
      script: mk.sh {{ base }}/out 'two words'
      args: {creates: \"{{ base }}/out\", chdir: /tmp}
    - stat: {path: \"{{ base }}/raw\"}
      register: st
    - name: raw
      raw: echo made > {{ base }}/raw; echo hi
      when: not st.stat.exists
",
    );

    let check = fleet.apply(&["--check"]);
    check.expect(0);
    assert_eq!(check.status_of("script"), "changed", "{}", check.stdout);
    assert_eq!(check.status_of("raw"), "skipped", "{}", check.stdout);
    assert!(!base.join("out").exists() && !base.join("raw").exists());
    assert!(!cached.0.exists(), "check mode fetched the script");

    let first = fleet.apply(&["-v"]);
    first.expect(0);
    assert_eq!(first.status_of("script"), "changed", "{}", first.stdout);
    assert_eq!(first.status_of("raw"), "changed", "{}", first.stdout);
    assert_eq!(
        std::fs::read_to_string(base.join("out")).unwrap(),
        "two words\n"
    );
    assert_eq!(std::fs::read_to_string(base.join("raw")).unwrap(), "made\n");
    let s = result(&first, "script");
    assert_eq!(s["rc"], 0, "{s}");
    assert_eq!(s["stdout"], "args: 2 two words\n", "{s}");
    assert_eq!(s["stderr_lines"], serde_json::json!(["warn"]), "{s}");
    assert!(s.get("cmd").is_none() && s.get("delta").is_none(), "{s}");
    let r = result(&first, "raw");
    assert_eq!(r["stdout"], "hi\n", "{r}");
    assert!(cached.0.exists(), "the script is kept by its sha256");

    let second = fleet.apply(&["-v"]);
    second.expect(0);
    assert_eq!(second.status_of("script"), "skipped", "{}", second.stdout);
    assert_eq!(second.status_of("raw"), "skipped", "{}", second.stdout);
    assert!(
        result(&second, "script")["msg"]
            .as_str()
            .unwrap()
            .ends_with("/out exists, matching creates option"),
        "{}",
        second.stdout
    );
    // The run left no temp directory of its own behind.
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("fixpoint-script-")
                && std::os::unix::fs::MetadataExt::uid(&e.metadata().unwrap()) == home_uid("fpuser")
        })
        .collect();
    assert!(left.is_empty(), "temp dirs left: {left:?}");
}

fn home_uid(user: &str) -> u32 {
    nix::unistd::User::from_name(user)
        .unwrap()
        .expect("user exists")
        .uid
        .as_raw()
}

#[test]
fn unguarded_raw_and_script_and_bad_params_are_refused_at_load() {
    let fx = Fx::new();
    fx.write("files/s.sh", "#!/bin/sh\n");
    for (tasks, expect) in [
        (
            "    - name: r\n      raw: touch {{ base }}/x\n",
            "unguarded `raw` task \"r\"",
        ),
        (
            "    - name: s\n      script: s.sh\n",
            "unguarded `script` task \"s\"",
        ),
        (
            "    - raw: touch /nonexistent/x creates=/nonexistent/x\n",
            "`creates` is not a parameter of raw",
        ),
        (
            "    - script: s.sh\n      args: {chdir: tmp, creates: /x}\n",
            "must be an absolute path",
        ),
        (
            "    - script: s.sh\n      args: {creates: /x, nope: 1}\n",
            "nope",
        ),
        (
            "    - raw: echo\n      args: {executable: \"\"}\n      changed_when: false\n",
            "`executable` is empty",
        ),
    ] {
        fx.play(tasks);
        let out = fx.run(&["validate", "site.yml"]);
        out.expect(2);
        assert!(out.stderr.contains(expect), "{tasks}: {}", out.stderr);
        assert!(out.stderr.contains("site.yml:"), "{}", out.stderr);
        fx.apply(&[]).expect(2);
        assert!(!fx.path("t/x").exists());
    }
}
