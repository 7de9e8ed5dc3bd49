//! Playbook repositories and signing keys for tests, made with the real `git`, `ssh-keygen` and
//! `gpg`: a work tree whose commits are pushed to a bare repository, unsigned or signed with an
//! SSH or a GPG key made in the test.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Run a command, panicking with its output on failure; its stdout, trimmed.
pub fn sh(mut c: Command) -> String {
    let out = c.output().expect("run a command");
    assert!(
        out.status.success(),
        "{c:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `git -C dir args...` as the test's committer.
pub fn git(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("git");
    c.args(["-c", "user.name=fp", "-c", "user.email=fp@example.org"])
        .arg("-C")
        .arg(dir)
        .args(args);
    c
}

/// A playbook repository: a work tree whose commits are pushed to a bare repository.
pub struct Repo {
    pub work: PathBuf,
    pub bare: PathBuf,
}

impl Repo {
    /// The work tree `<dir>/work` and the bare repository `<dir>/srv/site.git`, branch `main`.
    pub fn new(dir: &Path) -> Repo {
        let (work, bare) = (dir.join("work"), dir.join("srv/site.git"));
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&bare).unwrap();
        sh(git(&bare, &["init", "-q", "--bare", "-b", "main"]));
        sh(git(&work, &["init", "-q", "-b", "main"]));
        sh(git(
            &work,
            &["remote", "add", "origin", &bare.display().to_string()],
        ));
        Repo { work, bare }
    }

    pub fn url(&self) -> String {
        format!("file://{}", self.bare.display())
    }

    /// Write `files`, commit them unsigned, push; the new sha.
    pub fn commit(&self, files: &[(&str, &str)]) -> String {
        self.commit_with(files, &[], &[], &[])
    }

    /// Write `files`, commit them signed (`-S`) as `signing` configures git (`-c` pairs, see
    /// [`ssh_signing`]) with `env` set (e.g. `GNUPGHOME`), push; the new sha.
    pub fn commit_signed(
        &self,
        files: &[(&str, &str)],
        signing: &[String],
        env: &[(&str, &Path)],
    ) -> String {
        self.commit_with(files, signing, &["-S"], env)
    }

    fn commit_with(
        &self,
        files: &[(&str, &str)],
        config: &[String],
        commit_args: &[&str],
        env: &[(&str, &Path)],
    ) -> String {
        for (name, text) in files {
            std::fs::write(self.work.join(name), text).unwrap();
            sh(git(&self.work, &["add", name]));
        }
        let mut c = Command::new("git");
        c.args(["-c", "user.name=fp", "-c", "user.email=fp@example.org"])
            .args(config)
            .arg("-C")
            .arg(&self.work)
            .args(["commit", "-q", "--allow-empty", "-m", "change"])
            .args(commit_args);
        for (k, v) in env {
            c.env(k, v);
        }
        sh(c);
        sh(git(
            &self.work,
            &["push", "-q", "origin", "HEAD:refs/heads/main"],
        ));
        sh(git(&self.work, &["rev-parse", "HEAD"]))
    }
}

/// An SSH signing key `<dir>/keys/<name>` made with ssh-keygen, and its allowed-signers file
/// (for the committer's address).
pub fn ssh_key(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let key = dir.join(format!("keys/{name}"));
    std::fs::create_dir_all(key.parent().unwrap()).unwrap();
    let mut c = Command::new("ssh-keygen");
    c.args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&key);
    sh(c);
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    let allowed = dir.join(format!("keys/{name}.allowed"));
    std::fs::write(&allowed, format!("fp@example.org {public}")).unwrap();
    (key, allowed)
}

/// The git configuration that signs commits with the SSH key `key`.
pub fn ssh_signing(key: &Path) -> Vec<String> {
    vec![
        "-c".into(),
        "gpg.format=ssh".into(),
        "-c".into(),
        format!("user.signingkey={}", key.display()),
    ]
}

/// A GnuPG home `<dir>/gnupg-<name>` with a new signing key (no passphrase), its public key
/// exported (armored) to `<dir>/keys/<name>.asc`; the gpg-agent it starts is stopped on drop.
pub struct GpgKey {
    pub home: PathBuf,
    pub public: PathBuf,
    pub fingerprint: String,
}

impl GpgKey {
    pub fn new(dir: &Path, name: &str) -> GpgKey {
        let home = dir.join(format!("gnupg-{name}"));
        std::fs::create_dir_all(&home).unwrap();
        std::fs::set_permissions(&home, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        let gpg = || {
            let mut c = Command::new("gpg");
            c.arg("--homedir").arg(&home).arg("--batch");
            c
        };
        let mut c = gpg();
        c.args(["--passphrase", "", "--quick-gen-key"])
            .arg(format!("{name} <fp@example.org>"))
            .args(["ed25519", "sign", "never"]);
        sh(c);
        let mut c = gpg();
        c.args(["--with-colons", "--list-secret-keys"]);
        let listing = sh(c);
        let fingerprint = listing
            .lines()
            .find_map(|l| l.strip_prefix("fpr:"))
            .map(|l| l.trim_matches(':').to_string())
            .expect("a fingerprint");
        let public = dir.join(format!("keys/{name}.asc"));
        std::fs::create_dir_all(public.parent().unwrap()).unwrap();
        let mut c = gpg();
        c.args(["--armor", "--output"])
            .arg(&public)
            .args(["--export", &fingerprint]);
        sh(c);
        GpgKey {
            home,
            public,
            fingerprint,
        }
    }

    /// The git configuration that signs commits with this key (with `GNUPGHOME` = `home`).
    pub fn signing(&self) -> Vec<String> {
        vec![
            "-c".into(),
            "gpg.format=openpgp".into(),
            "-c".into(),
            format!("user.signingkey={}", self.fingerprint),
        ]
    }
}

impl Drop for GpgKey {
    fn drop(&mut self) {
        let _ = Command::new("gpgconf")
            .arg("--homedir")
            .arg(&self.home)
            .args(["--kill", "all"])
            .output();
    }
}
