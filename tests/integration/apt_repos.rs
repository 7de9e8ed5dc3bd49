//! `apt_repository` against real apt: the test's own repository (see `apt.rs`), signed with a
//! key generated here by gpg and named by `signed-by`, served by file:, seen through the test's
//! `APT_CONFIG` so the machine's sources are never read or changed.

use crate::apt::{result, sh, Repo};
use crate::fx::{converge, Fx};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A gpg home with one signing key; the agent gpg starts for it is stopped on drop.
pub(crate) struct Signer {
    home: tempfile::TempDir,
}

impl Signer {
    pub(crate) fn new() -> Signer {
        let home = tempfile::tempdir().expect("gpg home");
        let s = Signer { home };
        s.gpg(&[
            "--quick-gen-key",
            "fixpoint test <fptest@localhost>",
            "ed25519",
            "sign",
            "never",
        ]);
        s
    }

    fn gpg(&self, args: &[&str]) -> std::process::Output {
        let mut a = vec![
            "gpg",
            "--homedir",
            self.home.path().to_str().unwrap(),
            "--batch",
            "--yes",
            "--pinentry-mode",
            "loopback",
            "--passphrase",
            "",
        ];
        a.extend_from_slice(args);
        let o = sh(&a);
        assert!(
            o.status.success(),
            "gpg {args:?} failed (install gnupg): {}",
            String::from_utf8_lossy(&o.stderr)
        );
        o
    }

    /// The public key, binary (`.gpg`) or armored (`.asc`), as apt reads either by extension.
    pub(crate) fn export(&self, dest: &Path) -> PathBuf {
        let armor = dest.extension().is_some_and(|e| e == "asc");
        let mut a = vec!["--export"];
        if armor {
            a.insert(0, "--armor");
        }
        let o = self.gpg(&a);
        std::fs::write(dest, o.stdout).unwrap();
        std::fs::set_permissions(dest, std::fs::Permissions::from_mode(0o644)).unwrap();
        dest.to_path_buf()
    }

    /// A flat repository's `Release` (the hash of `Packages`) and its signed `InRelease`.
    pub(crate) fn sign_repo(&self, dir: &Path) {
        let packages = std::fs::read(dir.join("Packages")).unwrap();
        let sum = sh(&["sha256sum", dir.join("Packages").to_str().unwrap()]);
        let sum = String::from_utf8_lossy(&sum.stdout);
        let date = sh(&["date", "-u", "+%a, %d %b %Y %H:%M:%S UTC"]);
        let release = format!(
            "Origin: fptest\nLabel: fptest\nDate: {}\nSHA256:\n {} {} Packages\n",
            String::from_utf8_lossy(&date.stdout).trim(),
            sum.split_whitespace().next().unwrap(),
            packages.len()
        );
        std::fs::write(dir.join("Release"), release).unwrap();
        self.gpg(&[
            "--clearsign",
            "-o",
            dir.join("InRelease").to_str().unwrap(),
            dir.join("Release").to_str().unwrap(),
        ]);
    }
}

impl Drop for Signer {
    fn drop(&mut self) {
        let _ = std::process::Command::new("gpgconf")
            .args(["--homedir", self.home.path().to_str().unwrap()])
            .args(["--kill", "gpg-agent"])
            .status();
    }
}

/// What apt would install for `name`, through the test's configuration.
pub(crate) fn candidate(repo: &Repo, name: &str) -> String {
    let o = std::process::Command::new("apt-cache")
        .args(["policy", name])
        .env("APT_CONFIG", repo.apt_config())
        .output()
        .expect("apt-cache");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Candidate: "))
        .unwrap_or("(none)")
        .to_string()
}

/// The sources.list.d files and the fetched lists: what a repository module changes.
pub(crate) fn apt_state(repo: &Repo) -> String {
    let mut out = String::new();
    for d in ["etc/sources.list.d", "lists"] {
        let mut names: Vec<_> = std::fs::read_dir(repo.path(d))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .collect();
        names.sort();
        for p in names {
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o7777;
            let text = if d == "lists" {
                String::new()
            } else {
                std::fs::read_to_string(&p).unwrap()
            };
            out.push_str(&format!("{} {mode:o}\n{text}", p.display()));
        }
    }
    out
}

/// Ansible's name for a file: repository's sources file (what is left of the URI, every run of
/// other characters than letters and digits turned into `_`).
fn derived_name(uri: &str) -> String {
    let parts: Vec<String> = uri
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    format!("{}.list", parts.join("_"))
}

fn repository_task(line: &str, extra: &str) -> String {
    format!("    - name: repo\n      apt_repository:\n        repo: \"{line}\"\n{extra}")
}

#[test]
fn apt_repository_adds_a_signed_repository_refreshes_and_removes_it() {
    let repo = Repo::new();
    let signer = Signer::new();
    signer.sign_repo(&repo.path("repo"));
    let key = signer.export(&repo.path("fptest.gpg"));
    let stranger = Signer::new().export(&repo.path("stranger.gpg"));
    // Only what apt_repository writes is a source: no trusted line of apt.rs's fixture.
    std::fs::write(repo.path("etc/sources.list"), "").unwrap();
    let uri = format!("file:{}", repo.path("repo").display());
    let line = format!("deb [signed-by={}] {uri} ./", key.display());
    let list = repo.path("etc/sources.list.d").join(derived_name(&uri));
    let fx = Fx::new();
    assert_eq!(candidate(&repo, "fptest-a"), "(none)");

    // Check mode writes nothing and fetches nothing; the run adds the line under Ansible's
    // name and update_cache (the default) fetches the signed index; the rerun is ok.
    repo.play(&fx, &repository_task(&line, ""));
    let first = converge(&|a| fx.apply(a), &|| apt_state(&repo));
    let r = result(&first, "repo");
    assert_eq!(
        r["sources_added"],
        serde_json::json!([list.display().to_string()])
    );
    assert_eq!(r["sources_removed"], serde_json::json!([]));
    assert_eq!(r["repo"], line.as_str());
    assert_eq!(r["state"], "present");
    assert_eq!(std::fs::read_to_string(&list).unwrap(), format!("{line}\n"));
    let mode = std::fs::metadata(&list).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
    assert_eq!(
        candidate(&repo, "fptest-a"),
        "2.0",
        "update_cache fetched the repository: {}",
        first.stdout
    );

    // Removal: the line goes, its file with it, and the refreshed cache forgets the packages.
    repo.play(&fx, &repository_task(&line, "        state: absent\n"));
    let gone = converge(&|a| fx.apply(a), &|| apt_state(&repo));
    assert_eq!(
        result(&gone, "repo")["sources_removed"],
        serde_json::json!([list.display().to_string()])
    );
    assert!(!list.exists());
    assert_eq!(candidate(&repo, "fptest-a"), "(none)");

    // A key that did not sign the repository: apt refuses the index, the task fails and the
    // sources are put back as they were (no file), as Ansible does.
    let bad = format!("deb [signed-by={}] {uri} ./", stranger.display());
    repo.play(
        &fx,
        &repository_task(&bad, "        update_cache_retries: 1\n"),
    );
    let before = apt_state(&repo);
    let failed = fx.apply(&["-v"]);
    failed.expect(1);
    assert!(
        failed
            .stdout
            .contains("Failed to update apt cache after 1 retries"),
        "{}",
        failed.stdout
    );
    assert!(!list.exists(), "the failed source was taken back");
    assert_eq!(apt_state(&repo), before);

    // update_cache: false only writes the line; a named file gets the requested mode.
    repo.play(
        &fx,
        &repository_task(
            &line,
            "        filename: fptest\n        mode: \"0600\"\n        update_cache: false\n",
        ),
    );
    fx.apply(&[]).expect(0);
    let named = repo.path("etc/sources.list.d/fptest.list");
    let mode = std::fs::metadata(&named).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(candidate(&repo, "fptest-a"), "(none)", "no refresh asked");
    assert_eq!(fx.apply(&[]).expect(0).status_of("repo"), "ok");
}

#[test]
fn deb822_repository_writes_a_sources_file_apt_reads_with_an_inline_key() {
    let repo = Repo::new();
    let signer = Signer::new();
    signer.sign_repo(&repo.path("repo"));
    let armored = std::fs::read_to_string(signer.export(&repo.path("fptest.asc"))).unwrap();
    std::fs::write(repo.path("etc/sources.list"), "").unwrap();
    let uri = format!("file:{}", repo.path("repo").display());
    let key_block: String = armored
        .lines()
        .map(|l| format!("          {l}\n"))
        .collect();
    let fx = Fx::new();
    let sources = repo.path("etc/sources.list.d/fptest-deb822.sources");

    // The key goes inline into Signed-By; apt must accept the file and verify the index with it.
    repo.play(
        &fx,
        &format!(
            "    - name: repo\n      deb822_repository:\n        name: FPtest deb822\n        uris: \"{uri}\"\n        suites: ./\n        signed_by: |\n{key_block}"
        ),
    );
    let first = converge(&|a| fx.apply(a), &|| apt_state(&repo));
    let r = result(&first, "repo");
    assert_eq!(r["dest"], sources.display().to_string());
    assert_eq!(r["key_filename"], serde_json::Value::Null);
    let text = std::fs::read_to_string(&sources).unwrap();
    assert_eq!(r["repo"], text.as_str());
    assert!(
        text.starts_with("X-Repolib-Name: FPtest deb822\nSigned-By:\n    -----BEGIN PGP PUBLIC KEY BLOCK-----\n    .\n"),
        "{text}"
    );
    assert!(
        text.ends_with(&format!("Suites: ./\nTypes: deb\nURIs: {uri}\n")),
        "{text}"
    );
    let mode = std::fs::metadata(&sources).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
    assert_eq!(
        candidate(&repo, "fptest-a"),
        "(none)",
        "deb822_repository fetches nothing"
    );
    repo.update();
    assert_eq!(
        candidate(&repo, "fptest-a"),
        "2.0",
        "apt read the file and trusted the key"
    );

    // A key file by path is named as is and returned as key_filename; then absent removes it.
    let key = signer.export(&repo.path("fptest.gpg"));
    repo.play(
        &fx,
        &format!(
            "    - name: repo\n      deb822_repository:\n        name: FPtest deb822\n        uris: \"{uri}\"\n        suites: ./\n        signed_by: {}\n        mode: \"0600\"\n",
            key.display()
        ),
    );
    let path = fx.apply(&["-v"]);
    path.expect(0);
    assert_eq!(path.status_of("repo"), "changed");
    assert_eq!(fx.apply(&[]).expect(0).status_of("repo"), "ok");
    assert_eq!(
        result(&path, "repo")["key_filename"],
        key.display().to_string()
    );
    assert!(std::fs::read_to_string(&sources)
        .unwrap()
        .contains(&format!("Signed-By: {}\n", key.display())));
    let mode = std::fs::metadata(&sources).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    repo.update();
    assert_eq!(candidate(&repo, "fptest-a"), "2.0");

    repo.play(
        &fx,
        "    - name: repo\n      deb822_repository:\n        name: FPtest deb822\n        state: absent\n",
    );
    converge(&|a| fx.apply(a), &|| apt_state(&repo));
    assert!(!sources.exists());
}

/// apt's trusted keyrings moved into the test's directory (apt-key reads them from apt-config).
fn own_trusted_keyrings(repo: &Repo) {
    let conf = repo.path("apt.conf");
    let mut text = std::fs::read_to_string(&conf).unwrap();
    text.push_str(&format!(
        "Dir::Etc::Trusted \"{}\";\nDir::Etc::TrustedParts \"{}\";\n",
        repo.path("etc/trusted.gpg").display(),
        repo.path("etc/trusted.gpg.d").display()
    ));
    std::fs::write(&conf, text).unwrap();
    std::fs::create_dir_all(repo.path("etc/trusted.gpg.d")).unwrap();
}

fn trusted_state(repo: &Repo) -> String {
    let o = std::process::Command::new("apt-key")
        .args(["adv", "--list-public-keys", "--keyid-format=long"])
        .env("APT_CONFIG", repo.apt_config())
        .output()
        .expect("apt-key");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.starts_with("pub"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn apt_key_adds_a_key_apt_then_trusts_and_removes_it() {
    let repo = Repo::new();
    own_trusted_keyrings(&repo);
    let signer = Signer::new();
    signer.sign_repo(&repo.path("repo"));
    let key = signer.export(&repo.path("fptest.asc"));
    // A source without trusted=yes or signed-by: only apt's trusted keys can vouch for it.
    std::fs::write(
        repo.path("etc/sources.list"),
        format!("deb file:{} ./\n", repo.path("repo").display()),
    )
    .unwrap();
    let fx = Fx::new();
    assert_eq!(trusted_state(&repo), "");

    // From a file: the id is read from the key, apt-key adds it, the rerun is ok.
    repo.play(
        &fx,
        &format!(
            "    - name: key\n      apt_key:\n        file: {}\n",
            key.display()
        ),
    );
    let first = converge(&|a| fx.apply(a), &|| trusted_state(&repo));
    let r = result(&first, "key");
    let fp = r["fp"].as_str().unwrap().to_string();
    assert_eq!(fp.len(), 16, "{r}");
    assert_eq!(r["id"], fp.as_str());
    assert_eq!(r["short_id"], &fp[8..]);
    assert_eq!(r["before"], serde_json::json!([]));
    assert_eq!(r["after"], serde_json::json!([fp.clone()]));
    repo.update();
    assert_eq!(
        candidate(&repo, "fptest-a"),
        "2.0",
        "apt trusts the added key"
    );

    // Removal by the short id (8 characters, as apt-key del wants it); check mode first.
    repo.play(
        &fx,
        &format!(
            "    - name: key\n      apt_key:\n        id: \"0x{}\"\n        state: absent\n",
            fp[8..].to_lowercase()
        ),
    );
    converge(&|a| fx.apply(a), &|| trusted_state(&repo));
    assert_eq!(trusted_state(&repo), "");

    // Inline data into a keyring of its own.
    let keyring = repo.path("etc/trusted.gpg.d/fptest.gpg");
    let armored: String = std::fs::read_to_string(&key)
        .unwrap()
        .lines()
        .map(|l| format!("          {l}\n"))
        .collect();
    repo.play(
        &fx,
        &format!(
            "    - name: key\n      apt_key:\n        keyring: {}\n        data: |\n{armored}",
            keyring.display()
        ),
    );
    converge(&|a| fx.apply(a), &|| trusted_state(&repo));
    assert!(keyring.exists());

    // From a URL on a real HTTP server: without an id the key is fetched to read it; with one,
    // it is fetched only when missing (the rerun asks the server nothing).
    std::fs::remove_file(&keyring).unwrap();
    assert_eq!(trusted_state(&repo), "");
    let www = crate::http_server::Server::start();
    www.route(
        "/k.asc",
        crate::http_server::Route::ok(&std::fs::read_to_string(&key).unwrap()),
    );
    repo.play(
        &fx,
        &format!(
            "    - name: key\n      apt_key:\n        url: {}\n",
            www.url("/k.asc")
        ),
    );
    let by_url = converge(&|a| fx.apply(a), &|| trusted_state(&repo));
    assert_eq!(result(&by_url, "key")["id"], fp.as_str());
    repo.play(
        &fx,
        &format!(
            "    - name: key\n      apt_key:\n        id: \"0x{}\"\n        state: absent\n",
            fp
        ),
    );
    fx.apply(&[]).expect(0);
    repo.play(
        &fx,
        &format!(
            "    - name: key\n      apt_key:\n        id: {fp}\n        url: {}\n",
            www.url("/k.asc")
        ),
    );
    converge(&|a| fx.apply(a), &|| trusted_state(&repo));
    assert!(
        trusted_state(&repo).contains(&fp),
        "{}",
        trusted_state(&repo)
    );
    repo.play(
        &fx,
        &format!(
            "    - name: key\n      apt_key:\n        url: {}\n",
            www.url("/nope.asc")
        ),
    );
    let missing = fx.apply(&["-v"]);
    missing.expect(1);
    assert!(
        missing.stdout.contains("Failed to download key at") && missing.stdout.contains("404"),
        "{}",
        missing.stdout
    );

    // What needs a key server is refused at load time, before anything runs.
    repo.play(
        &fx,
        "    - name: key\n      apt_key:\n        id: ABCD1234\n        keyserver: keyserver.ubuntu.com\n",
    );
    let refused = fx.apply(&[]);
    refused.expect(2);
    assert!(refused.stderr.contains("keyserver"), "{}", refused.stderr);
}
