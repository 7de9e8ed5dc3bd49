//! `--verify-commit`: the fetched commit runs only if `git verify-commit` accepts its signature
//! against the keys the operator gave, and no others: a GPG keyring imported into a GNUPGHOME
//! made for this check alone, or an SSH allowed-signers file (`gpg.ssh.allowedSignersFile`).

use super::fetch::{git, run};
use std::path::Path;

/// Where the signature may come from.
pub struct Keys<'a> {
    pub keyring: Option<&'a Path>,
    pub allowed_signers: Option<&'a Path>,
}

/// `Ok(signer)` when `commit` in `dir` carries a good signature by one of `keys`; otherwise why
/// it is refused.
pub fn verify(dir: &Path, commit: &str, keys: &Keys) -> Result<String, String> {
    // The GNUPGHOME holds the given keys only: a key the user's own keyring trusts is no reason
    // to run a commit.
    let home = tempfile::Builder::new()
        .prefix("fixpoint-pull-gpg-")
        .tempdir()
        .map_err(|e| format!("cannot make a GnuPG home for the check: {e}"))?;
    // Every key in this home was given by the operator for this purpose: it is trusted as such
    // (without this, gpg calls a good signature by an unsigned key of unknown validity).
    std::fs::write(home.path().join("gpg.conf"), "trust-model always\n")
        .map_err(|e| format!("cannot set up the GnuPG home for the check: {e}"))?;
    if let Some(keyring) = keys.keyring {
        let out = std::process::Command::new("gpg")
            .args(["--batch", "--quiet", "--homedir"])
            .arg(home.path())
            .arg("--import")
            .arg(keyring)
            .output()
            .map_err(|e| format!("cannot run gpg to read {}: {e}", keyring.display()))?;
        if !out.status.success() {
            return Err(format!(
                "cannot import the keyring {}: {}",
                keyring.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    let mut c = git(dir);
    c.env("GNUPGHOME", home.path());
    // Only the file given here: no allowed-signers file from the user's git configuration.
    let signers = keys
        .allowed_signers
        .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()))
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "/dev/null".into());
    c.args(["-c", &format!("gpg.ssh.allowedSignersFile={signers}")])
        .args(["-c", "gpg.program=gpg"])
        .args(["verify-commit", "--raw", commit]);
    let res = c
        .output()
        .map_err(|e| format!("cannot run git verify-commit: {e}"));
    // gpg may have started an agent for the throwaway home; it must not outlive the check.
    let _ = std::process::Command::new("gpgconf")
        .arg("--homedir")
        .arg(home.path())
        .args(["--kill", "all"])
        .output();
    let out = res?;
    let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if out.status.success() {
        return Ok(signer(&said));
    }
    let mut c = git(dir);
    c.args(["cat-file", "commit", commit]);
    let raw = run(c, "read the commit")?;
    if !raw.contains("\ngpgsig ") && !raw.starts_with("gpgsig ") {
        return Err(format!("commit {commit} is not signed"));
    }
    let why = said
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(4)
        .collect::<Vec<_>>()
        .join("; ");
    Err(format!(
        "the signature of commit {commit} does not verify against the given keys: {why}"
    ))
}

/// Who signed, from verify-commit's words: GPG's `GOODSIG <key> <name>`, or ssh-keygen's
/// `Good "git" signature for <principal> with <key>`.
fn signer(said: &str) -> String {
    for line in said.lines() {
        if let Some(rest) = line.strip_prefix("[GNUPG:] GOODSIG ") {
            return rest.to_string();
        }
        if let Some(rest) = line.strip_prefix("Good \"git\" signature for ") {
            return rest.to_string();
        }
    }
    "a given key".into()
}
