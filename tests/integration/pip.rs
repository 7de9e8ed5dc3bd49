//! `pip` over SSH as fpsudo with `become`, into a virtualenv under the test's own directory (the
//! machine's Python is never changed), from a PEP 503 simple index the test serves on loopback
//! with wheels it builds with Python's `zipfile`: a converged run asks the index nothing and
//! runs no install, check mode changes nothing, versions, `latest`, `absent`, `requirements`,
//! `executable`, `umask`, and a bad parameter refused at load with its place.

use crate::fx::Out;
use crate::http_server::{Route, Server};
use crate::ssh::Fleet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Writes `<name>-<version>-py3-none-any.whl` files: a module, METADATA, WHEEL and RECORD.
const MKWHEEL: &str = r#"
import os, sys, zipfile
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for spec in sys.argv[2:]:
    name, ver = spec.split("==")
    dist = "%s-%s" % (name.replace("-", "_"), ver)
    files = {
        name.replace("-", "_") + "_mod.py": "VERSION = %r\n" % ver,
        dist + ".dist-info/METADATA": "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, ver),
        dist + ".dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: fixpoint-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[dist + ".dist-info/RECORD"] = "".join(k + ",,\n" for k in files) + dist + ".dist-info/RECORD,,\n"
    with zipfile.ZipFile(os.path.join(out, dist + "-py3-none-any.whl"), "w") as z:
        for k, v in files.items():
            z.writestr(k, v)
"#;

/// The index: wheels built into `dir/whl`, served under `/simple/<project>/` and `/files/`.
struct Index {
    server: Server,
    dir: PathBuf,
}

impl Index {
    fn new(dir: &Path) -> Index {
        let ok = Command::new("/usr/bin/python3")
            .args(["-c", "import venv, ensurepip, zipfile"])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(
            ok,
            "/usr/bin/python3 with venv and ensurepip is needed: install python3-venv (.ci/run does)"
        );
        Index {
            server: Server::start(),
            dir: dir.to_path_buf(),
        }
    }

    /// Build these `name==version` wheels and publish every wheel built so far.
    fn publish(&self, specs: &[&str]) {
        let whl = self.dir.join("whl");
        let out = Command::new("/usr/bin/python3")
            .args(["-c", MKWHEEL, whl.to_str().unwrap()])
            .args(specs)
            .output()
            .expect("run python3");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut projects: std::collections::BTreeMap<String, String> = Default::default();
        for e in std::fs::read_dir(&whl).unwrap() {
            let file = e.unwrap().file_name().to_str().unwrap().to_string();
            let body = std::fs::read(whl.join(&file)).unwrap();
            let project = file
                .split('-')
                .next()
                .unwrap()
                .replace('_', "-")
                .to_lowercase();
            projects
                .entry(project)
                .or_default()
                .push_str(&format!("<a href=\"/files/{file}\">{file}</a><br/>\n"));
            self.server.route(
                &format!("/files/{file}"),
                Route {
                    status: 200,
                    headers: vec![("Content-Type".into(), "application/octet-stream".into())],
                    body,
                    auth: None,
                },
            );
        }
        for (project, links) in projects {
            let html = format!("<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n");
            let route = Route {
                status: 200,
                headers: vec![("Content-Type".into(), "text/html".into())],
                body: html.into_bytes(),
                auth: None,
            };
            self.server
                .route(&format!("/simple/{project}/"), route.clone());
            self.server.route(&format!("/simple/{project}"), route);
        }
    }

    fn requests(&self) -> usize {
        self.server.log().len()
    }
}

/// What the virtualenv holds of the test's packages (`fp-*`), or that it is missing.
fn installed(venv: &Path) -> String {
    if !venv.join("bin/pip").exists() {
        return "no virtualenv".into();
    }
    let out = Command::new(venv.join("bin/pip"))
        .args(["list", "--format=freeze", "--disable-pip-version-check"])
        .output()
        .expect("run pip");
    // Names as PEP 503 compares them: `Fp_Other` is `fp-other`.
    let text = String::from_utf8_lossy(&out.stdout)
        .to_lowercase()
        .replace('_', "-");
    let mut l: Vec<&str> = text.lines().filter(|l| l.starts_with("fp")).collect();
    l.sort();
    l.join(" ")
}

fn result(out: &Out, task: &str) -> serde_json::Value {
    let evs = out.task_events(task);
    assert_eq!(evs.len(), 1, "one result for {task}: {}", out.stdout);
    evs[0]["result"].clone()
}

/// One `pip` task with become on the test's virtualenv and index; `body` is YAML at 8 spaces.
fn task(venv: &Path, index: &Index, body: &str) -> String {
    format!(
        "    - name: pip\n      become: true\n      pip:\n        virtualenv: {}\n        virtualenv_command: python3 -m venv\n        extra_args: --index-url {} --disable-pip-version-check\n{body}",
        venv.display(),
        index.server.url("/simple/"),
    )
}

#[test]
fn pip_installs_upgrades_and_removes_in_a_virtualenv_over_ssh_with_become() {
    let fleet = Fleet::start(1, "fpsudo");
    // The agent runs as root under become: its state directory must be root's own.
    let state = fleet.fx.path("root.state");
    fleet.fx.write(
        "hosts.ini",
        &format!(
            "[fleet]\n{} fixpoint_state_dir={}\n",
            fleet.hosts[0].alias(),
            state.display()
        ),
    );
    let index = Index::new(&fleet.fx.path("index"));
    index.publish(&["fp-demo==1.0", "fp-demo==2.0", "Fp_Other==0.5"]);
    let venv = fleet.fx.path("venv");
    let observe = || installed(&venv);

    // Check mode into a missing virtualenv creates nothing.
    fleet.play(&task(&venv, &index, "        name: fp-demo==1.0\n"));
    let check = fleet.apply(&["--check"]);
    check.expect(0);
    assert_eq!(check.status_of("pip"), "changed", "{}", check.stdout);
    assert!(!venv.exists(), "check mode made the virtualenv");

    // The run creates the virtualenv and installs.
    let first = fleet.apply(&["-v"]);
    first.expect(0);
    assert_eq!(first.status_of("pip"), "changed", "{}", first.stdout);
    assert_eq!(observe(), "fp-demo==1.0");
    let r = result(&first, "pip");
    let pip3 = venv.join("bin/pip3").display().to_string();
    assert_eq!(r["cmd"][0], pip3.as_str(), "{r}");
    assert_eq!(
        r["cmd"].as_array().unwrap().last().unwrap(),
        "fp-demo==1.0",
        "{r}"
    );
    assert_eq!(r["name"], serde_json::json!(["fp-demo==1.0"]), "{r}");
    assert_eq!(r["state"], "present", "{r}");
    assert_eq!(r["virtualenv"], venv.display().to_string(), "{r}");
    assert!(
        r["stdout"]
            .as_str()
            .unwrap()
            .contains("Successfully installed fp-demo-1.0"),
        "{r}"
    );
    assert!(index.requests() > 0, "pip never asked the index");

    // Converged: no install runs, so the index is not asked anything; check mode agrees.
    let asked = index.requests();
    let again = fleet.apply(&["-v"]);
    again.expect(0);
    assert_eq!(again.status_of("pip"), "ok", "{}", again.stdout);
    assert_eq!(
        result(&again, "pip")["stdout"],
        "",
        "an install command ran"
    );
    let check = fleet.apply(&["--check"]);
    check.expect(0);
    assert_eq!(check.status_of("pip"), "ok", "{}", check.stdout);
    assert_eq!(index.requests(), asked, "a converged run asked the index");

    // Another version through `version`, and a name spelled differently.
    fleet.play(&task(
        &venv,
        &index,
        "        name: FP_Demo\n        version: \"2.0\"\n",
    ));
    let two = crate::fx::converge(&|a| fleet.apply(a), &observe);
    assert_eq!(observe(), "fp-demo==2.0");
    assert_eq!(
        result(&two, "pip")["cmd"]
            .as_array()
            .unwrap()
            .last()
            .unwrap(),
        "FP_Demo==2.0"
    );

    // `latest` after a new release; a specifier list split at its comma is joined again.
    index.publish(&["fp-demo==2.1"]);
    fleet.play(&task(
        &venv,
        &index,
        "        name: \"fp-demo>=2,<3,Fp_Other\"\n        state: latest\n",
    ));
    let latest = crate::fx::converge(&|a| fleet.apply(a), &observe);
    assert_eq!(observe(), "fp-demo==2.1 fp-other==0.5");
    let cmd = result(&latest, "pip")["cmd"].clone();
    let words: Vec<&str> = cmd
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(words[1..3], ["install", "-U"], "{cmd}");
    assert_eq!(
        words[words.len() - 2..],
        ["fp-demo<3,>=2", "Fp_Other"],
        "{cmd}"
    );

    // Absent removes both, whatever their versions (`pip uninstall` takes no `--index-url`).
    fleet.play(&format!(
        "    - name: pip\n      become: true\n      pip:\n        virtualenv: {}\n        name: [fp-demo==9.9, fp-other]\n        state: absent\n",
        venv.display()
    ));
    converge_to(&fleet, &observe, "");

    // A requirements file on the host.
    let req = fleet
        .fx
        .write("requirements.txt", "fp-demo==1.0\nfp-other\n");
    fleet.play(&task(
        &venv,
        &index,
        &format!("        requirements: {}\n", req.display()),
    ));
    let r = crate::fx::converge(&|a| fleet.apply(a), &observe);
    assert_eq!(observe(), "fp-demo==1.0 fp-other==0.5");
    assert_eq!(result(&r, "pip")["requirements"], req.display().to_string());

    // `executable` names the pip to use (here the virtualenv's, without `virtualenv`): the
    // package is there, so nothing runs.
    fleet.play(&format!(
        "    - name: pip\n      become: true\n      pip:\n        executable: {pip3}\n        name: fp-demo==1.0\n"
    ));
    let exe = fleet.apply(&["-v"]);
    exe.expect(0);
    assert_eq!(exe.status_of("pip"), "ok", "{}", exe.stdout);
    assert_eq!(result(&exe, "pip")["cmd"][0], pip3.as_str());

    // `umask` applies to what pip writes: a forced reinstall under 0077 leaves private files.
    fleet.play(&task(
        &venv,
        &index,
        "        name: fp-demo==1.0\n        state: forcereinstall\n        umask: \"0077\"\n",
    ));
    let force = fleet.apply(&[]);
    force.expect(0);
    assert_eq!(force.status_of("pip"), "changed", "{}", force.stdout);
    let module = std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("site-packages/fp_demo_mod.py");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&module).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", module.display());

    // A bad parameter is refused at load, with its place, before any host is touched.
    fleet.play(&task(
        &venv,
        &index,
        "        name: fp-demo\n        state: installed\n",
    ));
    let bad = fleet.apply(&[]);
    bad.expect(2);
    assert!(
        bad.stderr.contains("value of state must be one of: absent, forcereinstall, latest, present, got: installed")
            && bad.stderr.contains("--> site.yml:8:7"),
        "{}",
        bad.stderr
    );
    assert_eq!(observe(), "fp-demo==1.0 fp-other==0.5");
}

/// `fx::converge`, then the observed state must be `want`.
fn converge_to(fleet: &Fleet, observe: &dyn Fn() -> String, want: &str) {
    crate::fx::converge(&|a| fleet.apply(a), observe);
    assert_eq!(observe(), want);
}
