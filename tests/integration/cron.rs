//! `cron` against Debian's cron: a job and a variable in the test user's crontab (through the
//! real `crontab` program, as root for `fpuser`) and a job in a cron.d file with the user
//! column; check mode inert, reruns unchanged, removal. The crontab and the cron.d file are
//! removed by guards, also when a test fails.

use crate::fx::{converge, Fx};
use crate::support::require_root;
use std::path::{Path, PathBuf};
use std::process::Command;

fn require_crontab() {
    assert!(
        Path::new("/usr/bin/crontab").exists(),
        "/usr/bin/crontab is missing: install cron (.ci/run does)"
    );
}

/// `fpuser`'s crontab, removed on drop.
struct UserCrontab;

impl UserCrontab {
    fn new() -> UserCrontab {
        require_root();
        require_crontab();
        let guard = UserCrontab;
        guard.remove();
        guard
    }

    fn remove(&self) {
        let _ = Command::new("crontab")
            .args(["-u", "fpuser", "-r"])
            .output();
    }

    /// What `crontab -l` shows for fpuser, without the header lines it adds; "none" when there
    /// is no crontab.
    fn text(&self) -> String {
        let out = Command::new("crontab")
            .args(["-u", "fpuser", "-l"])
            .output()
            .unwrap();
        if !out.status.success() {
            return "none".into();
        }
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.starts_with("# DO NOT EDIT") && !l.starts_with("# ("))
            .map(|l| format!("{l}\n"))
            .collect()
    }
}

impl Drop for UserCrontab {
    fn drop(&mut self) {
        self.remove();
    }
}

/// A file under /etc/cron.d with a test name, removed on drop.
struct CronD(PathBuf);

impl Drop for CronD {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn cron_manages_a_users_crontab() {
    let crontab = UserCrontab::new();
    let fx = Fx::new();
    fx.play(
        "    - name: job\n      cron: { name: fptest tick, user: fpuser, minute: '*/10', hour: 3, job: /bin/true }\n      register: j\n\
         \x20   - name: mailto\n      ansible.builtin.cron: { name: MAILTO, env: true, user: fpuser, job: ops@example.org }\n",
    );
    let first = converge(&|extra| fx.apply(extra), &|| crontab.text());
    assert_eq!(
        crontab.text(),
        "MAILTO=\"ops@example.org\"\n#Ansible: fptest tick\n*/10 3 * * * /bin/true\n"
    );
    let job = &first.task_events("job")[0]["result"];
    assert_eq!(job["jobs"], serde_json::json!(["fptest tick"]));
    assert_eq!(job["envs"], serde_json::json!([]));

    // A changed schedule replaces the line under the marker; --diff shows the crontab.
    fx.play("    - name: job\n      cron: { name: fptest tick, user: fpuser, special_time: daily, job: /bin/true }\n");
    let out = fx.apply(&["--diff"]);
    out.expect(0);
    assert_eq!(out.statuses(), ["changed"]);
    assert!(out.stdout.contains("@daily /bin/true"), "{}", out.stdout);
    assert_eq!(
        crontab.text(),
        "MAILTO=\"ops@example.org\"\n#Ansible: fptest tick\n@daily /bin/true\n"
    );

    fx.play("    - name: gone\n      cron: { name: fptest tick, user: fpuser, state: absent }\n    - name: env gone\n      cron: { name: MAILTO, env: true, user: fpuser, state: absent }\n");
    converge(&|extra| fx.apply(extra), &|| crontab.text());
    assert_eq!(crontab.text(), "");
}

#[test]
fn cron_manages_a_cron_d_file() {
    require_root();
    require_crontab();
    let name = format!("fptest-{}", std::process::id());
    let file = CronD(Path::new("/etc/cron.d").join(&name));
    let fx = Fx::new();
    fx.play(&format!(
        "    - name: job\n      cron: {{ name: nightly, cron_file: {name}, user: fpuser, hour: 2, minute: 30, job: 'echo hi >/dev/null' }}\n      register: j\n"
    ));
    let observe = || std::fs::read_to_string(&file.0).unwrap_or_else(|_| "missing".into());
    let first = converge(&|extra| fx.apply(extra), &observe);
    assert_eq!(
        observe(),
        "#Ansible: nightly\n30 2 * * * fpuser echo hi >/dev/null\n"
    );
    assert_eq!(first.task_events("job")[0]["result"]["cron_file"], name);
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file.0).unwrap().permissions());
    assert_eq!(
        mode & 0o7777,
        0o644,
        "cron ignores group/world-writable files"
    );

    // Its last job gone, the file goes too.
    fx.play(&format!(
        "    - name: gone\n      cron: {{ name: nightly, cron_file: {name}, state: absent }}\n"
    ));
    converge(&|extra| fx.apply(extra), &observe);
    assert_eq!(observe(), "missing");
}

#[test]
fn cron_refuses_bad_combinations_at_load() {
    let fx = Fx::new();
    fx.play("    - cron: { name: x, job: y, special_time: daily, hour: 2 }\n");
    let out = fx.apply(&[]);
    out.expect(2);
    assert!(out.stderr.contains("site.yml:"), "{}", out.stderr);
    assert!(
        out.stderr.contains("cannot combine special_time"),
        "{}",
        out.stderr
    );
}
