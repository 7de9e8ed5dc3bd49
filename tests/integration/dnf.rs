//! `dnf`, `yum` and `package: use: dnf` against Debian's real dnf and rpm, in an installroot of
//! the test's own (this machine's dpkg database is never touched), from an rpm repository the
//! test builds with rpmbuild and indexes with createrepo_c, served by file://.

use crate::apt::{result, sh};
use crate::fx::{converge, Fx};
use std::path::PathBuf;

/// The repository, the dnf configuration that sees only it, and the installroot.
struct RpmRepo {
    dir: tempfile::TempDir,
}

const SPEC: &str = "Name: %{pkg}\nVersion: %{ver}\nRelease: 1\nSummary: fixpoint test package\n\
License: MIT\nBuildArch: noarch\n%description\nfixpoint test package\n%install\n\
mkdir -p %{buildroot}/usr/share/%{pkg}\necho %{ver} > %{buildroot}/usr/share/%{pkg}/version\n\
%files\n/usr/share/%{pkg}/version\n";

impl RpmRepo {
    fn new() -> RpmRepo {
        crate::support::require_root();
        for tool in ["rpmbuild", "createrepo_c", "dnf", "rpm"] {
            let found = std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).exists()))
                .unwrap_or(false);
            assert!(
                found,
                "`{tool}` is missing: install rpm, createrepo-c and dnf (.ci/run does)"
            );
        }
        let r = RpmRepo {
            dir: tempfile::tempdir().expect("temp dir"),
        };
        std::fs::write(r.path("fptest.spec"), SPEC).unwrap();
        std::fs::create_dir_all(r.path("root")).unwrap();
        std::fs::write(
            r.path("dnf.conf"),
            format!(
                "[main]\nreposdir=/dev/null\n[fptest]\nname=fptest\nbaseurl=file://{}\ngpgcheck=0\n",
                r.path("repo").display()
            ),
        )
        .unwrap();
        r.build("fptest-a", "1.0");
        r.build("fptest-b", "1.0");
        r
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Build `name-version-1.noarch.rpm` into the repository and index it again.
    fn build(&self, name: &str, version: &str) {
        let top = format!("_topdir {}", self.path("build").display());
        let out = format!("_rpmdir {}", self.path("repo").display());
        let o = sh(&[
            "rpmbuild",
            "--define",
            &top,
            "--define",
            &out,
            "--define",
            &format!("pkg {name}"),
            "--define",
            &format!("ver {version}"),
            "-bb",
            self.path("fptest.spec").to_str().unwrap(),
        ]);
        assert!(
            o.status.success(),
            "rpmbuild: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let o = sh(&["createrepo_c", "-q", self.path("repo").to_str().unwrap()]);
        assert!(
            o.status.success(),
            "createrepo_c: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    /// What rpm's database in the installroot holds.
    fn installed(&self) -> String {
        let o = sh(&[
            "rpm",
            "--root",
            self.path("root").to_str().unwrap(),
            "-qa",
            "--qf",
            "%{NAME}-%{VERSION}\\n",
        ]);
        let mut l: Vec<String> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        l.sort();
        l.join(" ")
    }

    /// One task of `module` with the installroot options and `body` (YAML, indented 8).
    fn task(&self, module: &str, body: &str) -> String {
        format!(
            "    - name: pkg\n      {module}:\n        installroot: {}\n        conf_file: {}\n        releasever: \"12\"\n{body}",
            self.path("root").display(),
            self.path("dnf.conf").display()
        )
    }
}

#[test]
fn dnf_installs_upgrades_and_removes_in_an_installroot() {
    let repo = RpmRepo::new();
    let fx = Fx::new();

    // download_only fetches and installs nothing; as in Ansible it is a change every time.
    fx.play(&repo.task(
        "dnf",
        "        name: fptest-a\n        download_only: true\n",
    ));
    for _ in 0..2 {
        let dl = fx.apply(&["-v"]);
        dl.expect(0);
        assert_eq!(
            result(&dl, "pkg")["results"],
            serde_json::json!(["Downloaded: fptest-a-1.0-1.noarch"])
        );
    }
    assert_eq!(repo.installed(), "");

    // Check mode installs nothing, the run installs both, the rerun is ok.
    fx.play(&repo.task("dnf", "        name: [fptest-a, fptest-b]\n"));
    let first = converge(&|a| fx.apply(a), &|| repo.installed());
    assert_eq!(repo.installed(), "fptest-a-1.0 fptest-b-1.0");
    let r = result(&first, "pkg");
    assert_eq!(
        r["results"],
        serde_json::json!([
            "Installed: fptest-a-1.0-1.noarch",
            "Installed: fptest-b-1.0-1.noarch"
        ])
    );
    assert_eq!(r["rc"], 0);
    assert_eq!(r["msg"], "");

    // A new version: `present` is satisfied, `latest` (with a refreshed cache) upgrades.
    repo.build("fptest-a", "2.0");
    fx.play(&repo.task("dnf", "        name: fptest-a\n"));
    assert_eq!(fx.apply(&[]).expect(0).status_of("pkg"), "ok");
    fx.play(&repo.task(
        "dnf",
        "        name: fptest-a\n        state: latest\n        update_cache: true\n",
    ));
    let latest = converge(&|a| fx.apply(a), &|| repo.installed());
    assert_eq!(repo.installed(), "fptest-a-2.0 fptest-b-1.0");
    assert_eq!(
        result(&latest, "pkg")["results"],
        serde_json::json!([
            "Installed: fptest-a-2.0-1.noarch",
            "Removed: fptest-a-1.0-1.noarch"
        ])
    );

    // A package the repository lacks fails before anything is installed.
    fx.play(&repo.task("dnf", "        name: [fptest-nope]\n"));
    let missing = fx.apply(&["-v"]);
    missing.expect(1);
    assert!(
        missing
            .stdout
            .contains("Failed to install some of the specified packages")
            && missing.stdout.contains("No package fptest-nope available."),
        "{}",
        missing.stdout
    );

    // `yum` is dnf under its old name; `package: use: dnf` reaches it too.
    fx.play(&repo.task("yum", "        name: fptest-b\n        state: absent\n"));
    converge(&|a| fx.apply(a), &|| repo.installed());
    assert_eq!(repo.installed(), "fptest-a-2.0");
    fx.play(&repo.task(
        "package",
        "        use: dnf\n        name: fptest-b\n        state: present\n",
    ));
    converge(&|a| fx.apply(a), &|| repo.installed());
    assert_eq!(repo.installed(), "fptest-a-2.0 fptest-b-1.0");
}

/// `package` without `use` picks the host's manager as Ansible does (`ansible_pkg_mgr`): on a
/// host whose os-release says Fedora and that has dnf, that is dnf. The run happens in a mount
/// namespace where a Fedora os-release is bound over this machine's, so nothing outside changes.
#[test]
fn package_picks_dnf_on_a_host_whose_manager_is_dnf() {
    let repo = RpmRepo::new();
    let fx = Fx::new();
    fx.write(
        "os-release",
        "NAME=\"Fedora Linux\"\nID=fedora\nVERSION_ID=40\nPRETTY_NAME=\"Fedora Linux 40\"\n",
    );
    let os_release = fx.path("os-release");
    let in_fedora = |extra: &[&str]| -> crate::fx::Out {
        let mut cmd = std::process::Command::new("unshare");
        cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg("mount --bind \"$1\" /etc/os-release && shift && exec \"$@\"")
            .arg("sh")
            .arg(&os_release)
            .arg(crate::fx::bin())
            .args(["apply", "--format", "json"])
            .args(extra)
            .arg("site.yml")
            .current_dir(fx.path(""))
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null());
        cmd.output().expect("unshare runs").into()
    };
    fx.play(&repo.task(
        "package",
        "        name: fptest-a\n        state: present\n",
    ));
    let first = converge(&in_fedora, &|| repo.installed());
    assert_eq!(repo.installed(), "fptest-a-1.0");
    assert_eq!(
        result(&first, "pkg")["results"],
        serde_json::json!(["Installed: fptest-a-1.0-1.noarch"])
    );
    // Outside the namespace the same task is apt's (this host is Debian), which has no
    // `installroot`: the manager was chosen from the host, not from the parameters.
    let debian = fx.apply(&["-v"]);
    debian.expect(1);
    assert!(debian.stdout.contains("installroot"), "{}", debian.stdout);
    assert_eq!(repo.installed(), "fptest-a-1.0");
}

/// `update_only` upgrades only what is installed, an older version is installed only with
/// `allow_downgrade`, `security` leaves an update without an advisory alone, `download_dir`
/// receives what `download_only` fetches, and `skip_broken`/`nobest` reach dnf.
#[test]
fn dnf_update_only_downgrade_security_and_download_dir() {
    let repo = RpmRepo::new();
    let fx = Fx::new();
    fx.play(&repo.task("dnf", "        name: fptest-a\n"));
    fx.apply(&[]).expect(0);
    repo.build("fptest-a", "2.0");

    // No advisory in the repository: nothing is a security update.
    fx.play(&repo.task(
        "dnf",
        "        name: fptest-a\n        state: latest\n        security: true\n        update_cache: true\n",
    ));
    assert_eq!(fx.apply(&[]).expect(0).status_of("pkg"), "ok");
    assert_eq!(repo.installed(), "fptest-a-1.0");

    fx.play(&repo.task(
        "dnf",
        "        name: [fptest-a, fptest-b]\n        state: latest\n        update_only: true\n",
    ));
    let up = converge(&|a| fx.apply(a), &|| repo.installed());
    assert_eq!(repo.installed(), "fptest-a-2.0");
    assert_eq!(
        result(&up, "pkg")["results"],
        serde_json::json!([
            "Packages providing fptest-b not installed due to update_only specified",
            "Installed: fptest-a-2.0-1.noarch",
            "Removed: fptest-a-1.0-1.noarch"
        ])
    );

    fx.play(&repo.task("dnf", "        name: fptest-a-1.0\n"));
    assert_eq!(fx.apply(&[]).expect(0).status_of("pkg"), "ok");
    assert_eq!(repo.installed(), "fptest-a-2.0");
    fx.play(&repo.task(
        "dnf",
        "        name: fptest-a-1.0\n        allow_downgrade: true\n",
    ));
    converge(&|a| fx.apply(a), &|| repo.installed());
    assert_eq!(repo.installed(), "fptest-a-1.0");

    let dir = fx.path("rpms");
    fx.play(&repo.task(
        "dnf",
        &format!(
            "        name: fptest-b\n        download_only: true\n        download_dir: {}\n",
            dir.display()
        ),
    ));
    fx.apply(&[]).expect(0);
    assert!(dir.join("fptest-b-1.0-1.noarch.rpm").exists());
    assert_eq!(repo.installed(), "fptest-a-1.0");

    fx.play(&repo.task(
        "dnf",
        "        name: fptest-b\n        skip_broken: true\n        nobest: true\n",
    ));
    converge(&|a| fx.apply(a), &|| repo.installed());
    assert_eq!(repo.installed(), "fptest-a-1.0 fptest-b-1.0");
}
