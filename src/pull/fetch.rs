//! Fetching the playbook repository with the host's `git`, as ansible-pull's git step does: an
//! existing checkout is fetched into, a missing one is initialised; the wanted commit is only
//! found here (`fetch`) and checked out later (`checkout`), once it has been verified.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A `git` command in `dir` with a fixed locale and no prompts: a pull runs unattended.
pub fn git(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.arg("-C")
        .arg(dir)
        .env("LC_ALL", "C")
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::null());
    c
}

/// Run a git command; its stdout, or what it said on failure.
pub fn run(mut c: Command, what: &str) -> Result<String, String> {
    let out = c
        .output()
        .map_err(|e| format!("cannot run git to {what}: {e} (is git installed?)"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!(
            "git could not {what}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A URL that names a local file rather than a repository: a `git bundle`.
fn is_bundle(url: &str) -> bool {
    Path::new(url).is_file()
}

/// Make `dir` a repository whose `origin` is `url`, then fetch `want` (a branch, tag or commit;
/// the remote's HEAD without one). Returns the fetched commit's id; nothing is checked out.
pub fn fetch(url: &str, want: Option<&str>, dir: &Path, full: bool) -> Result<String, String> {
    if !dir.join(".git").exists() {
        std::fs::create_dir_all(dir).map_err(|e| {
            format!(
                "cannot create the checkout directory {}: {e}",
                dir.display()
            )
        })?;
        let mut c = git(dir);
        c.args(["init", "--quiet"]);
        run(c, &format!("initialise {}", dir.display()))?;
    }
    // The remote's URL is set on every pull, so a changed `-U` takes effect.
    let url = absolute_local(url);
    let mut c = git(dir);
    c.args(["config", "remote.origin.url", &url]);
    run(c, "set the remote")?;
    let refspec = want.unwrap_or("HEAD");
    let mut c = git(dir);
    c.args(["fetch", "--quiet", "--no-tags", "--force"]);
    // A bundle holds what it holds; a depth means nothing to it.
    if !full && !is_bundle(&url) {
        c.arg("--depth=1");
    }
    c.args(["origin", refspec]);
    let fetched = run(c, &format!("fetch `{refspec}` from {url}"));
    if let Err(e) = fetched {
        // A commit id that no branch or tag names cannot be asked for by name: fetch everything
        // and look it up, as a full clone would.
        if want.is_some_and(looks_like_commit) {
            let mut c = git(dir);
            c.args([
                "fetch",
                "--quiet",
                "--force",
                "origin",
                "+refs/heads/*:refs/remotes/origin/*",
                "+refs/tags/*:refs/tags/*",
            ]);
            run(c, &format!("fetch from {url}"))?;
            let mut c = git(dir);
            c.args(["rev-parse", "--verify", "--quiet"])
                .arg(format!("{}^{{commit}}", want.unwrap_or_default()));
            return run(c, "find the commit")
                .map_err(|_| format!("{e}; and no commit `{refspec}` in {url}"));
        }
        return Err(e);
    }
    let mut c = git(dir);
    c.args(["rev-parse", "--verify", "FETCH_HEAD^{commit}"]);
    run(c, "read the fetched commit")
}

/// Check `commit` out in `dir`, discarding local changes to tracked files: the checkout is the
/// pull's, and what runs is exactly the verified commit.
pub fn checkout(dir: &Path, commit: &str) -> Result<(), String> {
    let mut c = git(dir);
    c.args(["checkout", "--quiet", "--force", "--detach", commit]);
    run(c, &format!("check out {commit}"))?;
    Ok(())
}

fn looks_like_commit(s: &str) -> bool {
    s.len() >= 7 && s.chars().all(|c| c.is_ascii_hexdigit())
}

/// A relative local path (a bundle or a repository directory) made absolute: git runs in the
/// checkout, not where `fixpoint pull` was started.
fn absolute_local(url: &str) -> String {
    let p = PathBuf::from(url);
    if !url.contains("://") && p.is_relative() && p.exists() {
        if let Ok(abs) = std::path::absolute(&p) {
            return abs.display().to_string();
        }
    }
    url.to_string()
}
