//! The `git` module: a checkout of `repo` at `version` in `dest`, made and moved by the host's
//! own `git` program, as Ansible's git module does.
//!
//! `probe` reads the checkout (HEAD, local modifications, the remote's URL) and asks the remote
//! which commit `version` names (`git ls-remote`); `plan` clones, or resets, re-points, fetches
//! and checks out only when that commit, the URL or the tree differ, so a converged checkout is
//! not fetched again (Ansible fetches on every run, but reports the same). Changed means HEAD
//! moved, a clone happened, local modifications were reset or the remote's URL changed.
//!
//! Not supported (refused at load): `verify_commit`/`gpg_allowlist`, `archive`,
//! `archive_prefix`, `separate_git_dir`, `track_submodules`, `umask`.

use crate::account::de_opt_u32;
use crate::apt::exec::{failure, run, shown, Ran};
use crate::fs::expand_user;
use crate::params::{de_opt_string, Bool};
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

pub struct Git;

fn default_true() -> Bool {
    Bool(true)
}
fn default_head() -> String {
    "HEAD".into()
}
fn default_origin() -> String {
    "origin".into()
}

/// Parameters of `git`, as Ansible names them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(alias = "name")]
    pub repo: String,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub dest: Option<String>,
    #[serde(default = "default_head", deserialize_with = "de_version")]
    pub version: String,
    #[serde(default = "default_origin")]
    pub remote: String,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub refspec: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub reference: Option<String>,
    #[serde(default)]
    pub force: Bool,
    #[serde(default, deserialize_with = "de_opt_u32")]
    pub depth: Option<u32>,
    #[serde(default = "default_true")]
    pub clone: Bool,
    #[serde(default = "default_true")]
    pub update: Bool,
    #[serde(default)]
    pub accept_hostkey: Bool,
    #[serde(default)]
    pub accept_newhostkey: Bool,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub key_file: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub ssh_opts: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub executable: Option<String>,
    #[serde(default)]
    pub bare: Bool,
    #[serde(default = "default_true")]
    pub recursive: Bool,
    #[serde(default)]
    pub single_branch: Bool,
    // Ansible's options fixpoint does not implement: accepted by name so the refusal is clear.
    #[serde(default)]
    pub verify_commit: Bool,
    #[serde(default, alias = "gpg_whitelist")]
    pub gpg_allowlist: Option<Value>,
    #[serde(default)]
    pub track_submodules: Bool,
    #[serde(default)]
    pub umask: Option<Value>,
    #[serde(default)]
    pub archive: Option<Value>,
    #[serde(default)]
    pub archive_prefix: Option<Value>,
    #[serde(default)]
    pub separate_git_dir: Option<Value>,
    /// Environment from the play/task `environment`, passed by the controller: Ansible runs
    /// git with it (`GIT_SSH_COMMAND`, proxies, commit dates...).
    #[serde(default, rename = "_env")]
    pub task_env: Option<Map<String, Value>>,
}

/// `version` may be typed by YAML as a number (a tag `1.0`, a sha of digits): take it as text.
fn de_version<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(de_opt_string(d)?.unwrap_or_else(default_head))
}

/// One step of a `git` plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `git clone` into a `dest` that holds no repository yet, then check out `version`.
    Clone,
    /// `clone: no` and no repository: Ansible reports the remote's commit as a change.
    ReportOnly,
    /// Local modifications and `force: true`: `git reset --hard HEAD`.
    Reset,
    /// The remote's URL differs from `repo`: `git remote set-url`.
    SetUrl,
    /// Fetch and check out `version` (HEAD would move).
    Update,
    /// Submodules are missing or not at the superproject's commits: `git submodule update`.
    Submodules,
}

/// What `probe` found.
#[derive(Debug, Default)]
pub struct Probed {
    /// `repo`, with a local absolute path turned into a `file://` URL (as Ansible does).
    pub url: String,
    pub dest: Option<PathBuf>,
    /// A repository is there (its `config` exists).
    pub exists: bool,
    /// HEAD's commit before the run.
    pub before: Option<String>,
    /// Tracked files differ from HEAD (untracked ones do not count, as in Ansible).
    pub local_mods: bool,
    /// The remote's URL differs from `repo`.
    pub url_changed: bool,
    /// The commit `version` names on the remote (or `version` itself when it looks like a sha).
    pub target: Option<String>,
    /// Submodules to initialise or move.
    pub submodules: bool,
}

impl Params {
    fn git(&self) -> String {
        self.executable.clone().unwrap_or_else(|| "git".into())
    }

    /// The environment of every git command: a parsable locale, no prompts, and ssh options
    /// built as Ansible builds `GIT_SSH_COMMAND`.
    fn env(&self) -> Result<Vec<(String, String)>, ModuleError> {
        let task = crate::command::env_pairs(&self.task_env)?;
        // A variable as the module process sees it: the task's environment over the agent's.
        let var = |k: &str| {
            task.iter()
                .rev()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
                .ok_or(())
                .or_else(|()| std::env::var(k))
        };
        let mut opts = var("GIT_SSH_OPTS").unwrap_or_default();
        if let Some(o) = &self.ssh_opts {
            opts.push(' ');
            opts.push_str(o);
        }
        if self.accept_hostkey.0 && !opts.contains("StrictHostKeyChecking=no") {
            opts.push_str(" -o StrictHostKeyChecking=no");
        }
        if self.accept_newhostkey.0 && !opts.contains("StrictHostKeyChecking=accept-new") {
            opts.push_str(" -o StrictHostKeyChecking=accept-new");
        }
        if !opts.contains("BatchMode=yes") {
            opts.push_str(" -o BatchMode=yes");
        }
        if let Some(k) = &self.key_file {
            let k = expand_user(k).display().to_string();
            opts.push_str(&format!(" -i {k}"));
            if !opts.contains("IdentitiesOnly=yes") {
                opts.push_str(" -o IdentitiesOnly=yes");
            }
        }
        let base = var("GIT_SSH")
            .or_else(|_| var("GIT_SSH_COMMAND"))
            .unwrap_or_else(|_| "ssh".into());
        let mut env = task.clone();
        env.extend(
            ["LANG", "LC_ALL", "LC_MESSAGES", "LANGUAGE"]
                .iter()
                .map(|k| (k.to_string(), "C".to_string())),
        );
        env.push(("GIT_TERMINAL_PROMPT".into(), "0".into()));
        env.push(("GIT_SSH_COMMAND".into(), format!("{base} {}", opts.trim())));
        Ok(env)
    }

    /// Run `git <args>` (in `dir` with `-C`), its output as it came.
    fn run_in(&self, dir: Option<&Path>, args: &[&str]) -> Result<Ran, ModuleError> {
        let mut argv = vec![self.git()];
        if let Some(d) = dir {
            argv.push("-C".into());
            argv.push(d.display().to_string());
        }
        argv.extend(args.iter().map(|s| s.to_string()));
        run(&argv, &self.env()?, None)
    }

    /// Like `run_in`, failing with the command's output when it exits non-zero: Ansible's
    /// "Failed to <what>: <stdout> <stderr>".
    fn must(&self, dir: Option<&Path>, args: &[&str], what: &str) -> Result<Ran, ModuleError> {
        self.checked(dir, args, |ran| {
            format!("Failed to {what}: {} {}", ran.stdout, ran.stderr.trim_end())
        })
    }

    /// Like `must`, with the message as given (the output goes in `stdout`/`stderr`), as
    /// Ansible's checkout failures say it.
    fn must_as(&self, dir: Option<&Path>, args: &[&str], msg: &str) -> Result<Ran, ModuleError> {
        self.checked(dir, args, |_| msg.to_string())
    }

    fn checked(
        &self,
        dir: Option<&Path>,
        args: &[&str],
        msg: impl FnOnce(&Ran) -> String,
    ) -> Result<Ran, ModuleError> {
        let ran = self.run_in(dir, args)?;
        if ran.rc != 0 {
            let mut argv = vec![self.git()];
            argv.extend(args.iter().map(|s| s.to_string()));
            let mut e = failure(msg(&ran), &ran);
            if let ModuleError::Failed { result, .. } = &mut e {
                result.insert("cmd".into(), shown(&argv).into());
            }
            return Err(e);
        }
        Ok(ran)
    }
}

/// The first word of `git ls-remote` output lines that end with `name` (a tag's peeled `^{}`
/// line wins, as Ansible picks the commit an annotated tag points to).
fn ls_remote_sha(out: &str, tag: Option<&str>) -> Option<String> {
    let mut found = None;
    for line in out.lines() {
        let mut words = line.split_whitespace();
        let (Some(sha), Some(name)) = (words.next(), words.next()) else {
            continue;
        };
        match tag {
            Some(t) if name == format!("refs/tags/{t}^{{}}") => return Some(sha.to_string()),
            Some(t) if name == format!("refs/tags/{t}") => found = Some(sha.to_string()),
            Some(_) => {}
            None => return Some(sha.to_string()),
        }
    }
    found
}

/// Ansible's `unfrackgitpath`: URLs compared without a trailing slash and `.git`.
fn same_url(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        s.trim_end_matches('/')
            .trim_end_matches(".git")
            .trim_end_matches('/')
            .to_string()
    };
    a == b || norm(a) == norm(b)
}

fn looks_like_sha(v: &str) -> bool {
    v.len() >= 4 && v.len() <= 64 && v.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Git {
    /// The branch a checkout follows: HEAD's branch, or the remote's default when detached.
    fn head_branch(p: &Params, dest: &Path) -> Result<String, ModuleError> {
        let r = p.run_in(Some(dest), &["symbolic-ref", "-q", "--short", "HEAD"])?;
        if r.rc == 0 && !r.stdout.trim().is_empty() {
            return Ok(r.stdout.trim().to_string());
        }
        let remote_head = format!("refs/remotes/{}/HEAD", p.remote);
        let r = p.run_in(Some(dest), &["symbolic-ref", "-q", "--short", &remote_head])?;
        let prefix = format!("{}/", p.remote);
        match r.stdout.trim().strip_prefix(&prefix) {
            Some(b) if r.rc == 0 => Ok(b.to_string()),
            _ => Err(ModuleError::failed(format!(
                "cannot tell which branch {} follows: HEAD is detached and {remote_head} is not set; give `version`",
                dest.display()
            ))),
        }
    }

    /// The commit `version` names on the remote at `url`.
    fn remote_commit(
        p: &Params,
        url: &str,
        dest: Option<&Path>,
        exists: bool,
    ) -> Result<String, ModuleError> {
        let ls = |args: &[&str]| -> Result<String, ModuleError> {
            let mut all = vec!["ls-remote", url];
            all.extend_from_slice(args);
            Ok(p.must(None, &all, "list the remote's refs")?.stdout)
        };
        if p.version == "HEAD" {
            let out = match dest {
                Some(d) if exists && !p.bare.0 => {
                    let branch = Self::head_branch(p, d)?;
                    ls(&["-h", &format!("refs/heads/{branch}")])?
                }
                _ => ls(&["HEAD"])?,
            };
            return ls_remote_sha(&out, None).ok_or_else(|| {
                ModuleError::failed(format!(
                    "Could not determine remote revision for {}",
                    p.version
                ))
            });
        }
        let heads = ls(&["-h", &format!("refs/heads/{}", p.version)])?;
        if let Some(sha) = ls_remote_sha(&heads, None) {
            return Ok(sha);
        }
        let tags = ls(&["-t", &format!("refs/tags/{}*", p.version)])?;
        if let Some(sha) = ls_remote_sha(&tags, Some(&p.version)) {
            return Ok(sha);
        }
        // Not a branch or tag: a commit. Ansible returns it as given; a known one is made full.
        if let Some(d) = dest.filter(|_| exists) {
            let spec = format!("{}^{{commit}}", p.version);
            let r = p.run_in(Some(d), &["rev-parse", "--verify", "-q", &spec])?;
            if r.rc == 0 && !r.stdout.trim().is_empty() {
                return Ok(r.stdout.trim().to_string());
            }
        }
        if !looks_like_sha(&p.version) {
            return Err(ModuleError::failed(format!(
                "version `{}` is not a branch or tag of {url}, nor a commit id",
                p.version
            )));
        }
        Ok(p.version.clone())
    }

    fn head(p: &Params, dest: &Path) -> Result<Option<String>, ModuleError> {
        let r = p.run_in(Some(dest), &["rev-parse", "HEAD"])?;
        Ok((r.rc == 0).then(|| r.stdout.trim().to_string()))
    }

    /// Ansible's `fetch`: the refs `version` needs (only those with `depth`), all tags otherwise.
    fn fetch(p: &Params, dest: &Path, url: &str) -> Result<(), ModuleError> {
        let mut args: Vec<String> = vec!["fetch".into()];
        let mut refspecs: Vec<String> = Vec::new();
        let remote = &p.remote;
        if let Some(depth) = p.depth {
            let v = &p.version;
            if let Some(r) = &p.refspec {
                refspecs.push(r.clone());
            } else if v == "HEAD" {
                refspecs.push(Self::head_branch(p, dest)?);
            } else {
                let heads = p.must(
                    None,
                    &["ls-remote", url, "-h", &format!("refs/heads/{v}")],
                    "list the remote's refs",
                )?;
                let tags = p.must(
                    None,
                    &["ls-remote", url, "-t", &format!("refs/tags/{v}")],
                    "list the remote's refs",
                )?;
                if heads.stdout.contains(v.as_str()) {
                    if Self::head_branch(p, dest).ok().as_deref() != Some(v) {
                        refspecs.push(format!("+refs/heads/{v}:refs/heads/{v}"));
                    }
                    refspecs.push(format!("+refs/heads/{v}:refs/remotes/{remote}/{v}"));
                } else if tags.stdout.contains(v.as_str()) {
                    refspecs.push(format!("+refs/tags/{v}:refs/tags/{v}"));
                }
            }
            if !refspecs.is_empty() {
                args.push("--depth".into());
                args.push(depth.to_string());
            }
        }
        if p.depth.is_none() || refspecs.is_empty() {
            if p.bare.0 {
                refspecs = vec![
                    "+refs/heads/*:refs/heads/*".into(),
                    "+refs/tags/*:refs/tags/*".into(),
                ];
            } else {
                args.push("--tags".into());
            }
            if let Some(r) = &p.refspec {
                refspecs.push(r.clone());
            }
        }
        if p.force.0 {
            args.push("--force".into());
        }
        args.push(remote.clone());
        args.extend(refspecs);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        p.must(Some(dest), &refs, "download remote objects and refs")?;
        Ok(())
    }

    /// Ansible's `switch_version`: check out `version` (a branch tracks the remote's).
    fn switch(p: &Params, dest: &Path) -> Result<(), ModuleError> {
        let d = Some(dest);
        let remote = &p.remote;
        let v = &p.version;
        let local_branch = |b: &str| -> Result<bool, ModuleError> {
            let r = p.run_in(
                d,
                &["show-ref", "--verify", "-q", &format!("refs/heads/{b}")],
            )?;
            Ok(r.rc == 0)
        };
        if v == "HEAD" {
            let branch = Self::head_branch(p, dest)?;
            p.must_as(
                d,
                &["checkout", "--force", &branch],
                &format!("Failed to checkout branch {branch}"),
            )?;
            let upstream = format!("{remote}/{branch}");
            p.must_as(
                d,
                &["reset", "--hard", &upstream, "--"],
                &format!("Failed to checkout branch {branch}"),
            )?;
            return Ok(());
        }
        let remote_ref = format!("refs/remotes/{remote}/{v}");
        let is_remote_branch = p
            .run_in(d, &["show-ref", "--verify", "-q", &remote_ref])?
            .rc
            == 0
            || {
                let url = p.run_in(d, &["remote", "get-url", remote])?.stdout;
                let out = p
                    .must(
                        None,
                        &["ls-remote", url.trim(), "-h", &format!("refs/heads/{v}")],
                        "list the remote's refs",
                    )?
                    .stdout;
                ls_remote_sha(&out, None).is_some()
            };
        if is_remote_branch {
            if let (Some(depth), false) = (p.depth, local_branch(v)?) {
                let depth = format!("--depth={depth}");
                let a = format!("+refs/heads/{v}:refs/heads/{v}");
                let b = format!("+refs/heads/{v}:refs/remotes/{remote}/{v}");
                p.must_as(
                    d,
                    &["fetch", &depth, remote, &a, &b],
                    &format!("Failed to fetch branch from remote: {v}"),
                )?;
            }
            let upstream = format!("{remote}/{v}");
            if !local_branch(v)? {
                p.must_as(
                    d,
                    &["checkout", "--track", "-b", v, &upstream],
                    &format!("Failed to checkout {v}"),
                )?;
            } else {
                p.must_as(
                    d,
                    &["checkout", "--force", v],
                    &format!("Failed to checkout branch {v}"),
                )?;
                p.must_as(
                    d,
                    &["reset", "--hard", &upstream],
                    &format!("Failed to checkout {v}"),
                )?;
            }
        } else {
            p.must_as(
                d,
                &["checkout", "--force", v],
                &format!("Failed to checkout {v}"),
            )?;
        }
        Ok(())
    }

    fn clone(p: &Params, dest: &Path, url: &str) -> Result<(), ModuleError> {
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| ModuleError::io(parent, e))?;
        }
        let mut args: Vec<String> = vec!["clone".into()];
        if p.bare.0 {
            args.push("--bare".into());
        } else {
            args.extend(["--origin".into(), p.remote.clone()]);
        }
        let v = &p.version;
        let branch_or_tag = v != "HEAD" && {
            let out = p
                .must(
                    None,
                    &[
                        "ls-remote",
                        url,
                        &format!("refs/heads/{v}"),
                        &format!("refs/tags/{v}"),
                    ],
                    "list the remote's refs",
                )?
                .stdout;
            out.contains(v.as_str())
        };
        if let Some(depth) = p.depth {
            if v == "HEAD" || p.refspec.is_some() {
                args.extend(["--depth".into(), depth.to_string()]);
            } else if branch_or_tag {
                args.extend([
                    "--depth".into(),
                    depth.to_string(),
                    "--branch".into(),
                    v.clone(),
                ]);
            }
        }
        if let Some(r) = &p.reference {
            args.extend(["--reference".into(), r.clone()]);
        }
        if p.single_branch.0 {
            args.push("--single-branch".into());
            if branch_or_tag && !args.iter().any(|a| a == "--branch") {
                args.extend(["--branch".into(), v.clone()]);
            }
        }
        args.extend([url.to_string(), dest.display().to_string()]);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        p.must(None, &refs, "clone")?;
        let d = Some(dest);
        if p.bare.0 && p.remote != "origin" {
            p.must(d, &["remote", "add", &p.remote, url], "add the remote")?;
        }
        if let Some(r) = &p.refspec {
            let mut a: Vec<String> = vec!["fetch".into()];
            if let Some(depth) = p.depth {
                a.extend(["--depth".into(), depth.to_string()]);
            }
            a.extend([p.remote.clone(), r.clone()]);
            let refs: Vec<&str> = a.iter().map(String::as_str).collect();
            p.must(d, &refs, "fetch the refspec")?;
        }
        Ok(())
    }

    fn submodules(p: &Params, dest: &Path) -> Result<(), ModuleError> {
        if !dest.join(".gitmodules").exists() {
            return Ok(());
        }
        let d = Some(dest);
        p.must(d, &["submodule", "sync"], "sync submodules")?;
        let mut a = vec!["submodule", "update", "--init", "--recursive"];
        if p.force.0 {
            a.push("--force");
        }
        p.must(d, &a, "init/update submodules")?;
        Ok(())
    }
}

impl Module for Git {
    type Params = Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        let unsupported = |what: &str| {
            Err(ModuleError::Params(format!(
                "`{what}` is not supported by fixpoint's git module"
            )))
        };
        if p.verify_commit.0 || p.gpg_allowlist.is_some() {
            return unsupported("verify_commit/gpg_allowlist");
        }
        if p.track_submodules.0 {
            return unsupported("track_submodules");
        }
        for (name, v) in [
            ("umask", &p.umask),
            ("archive", &p.archive),
            ("archive_prefix", &p.archive_prefix),
            ("separate_git_dir", &p.separate_git_dir),
        ] {
            if v.as_ref().is_some_and(|v| !v.is_null()) {
                return unsupported(name);
            }
        }
        if p.accept_hostkey.0 && p.accept_newhostkey.0 {
            return Err(ModuleError::Params(
                "parameters are mutually exclusive: accept_hostkey|accept_newhostkey".into(),
            ));
        }
        if p.repo.trim().is_empty() {
            return Err(ModuleError::Params("`repo` must not be empty".into()));
        }
        if p.dest.is_none() && p.clone.0 {
            return Err(ModuleError::Params(
                "the destination directory (`dest`) must be specified unless clone=no".into(),
            ));
        }
        if p.depth == Some(0) {
            return Err(ModuleError::Params("`depth` must be at least 1".into()));
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Probed, ModuleError> {
        let expanded = expand_user(&p.repo).display().to_string();
        let url = if expanded.starts_with('/') {
            format!("file://{expanded}")
        } else {
            p.repo.clone()
        };
        let dest = p.dest.as_deref().map(|d| {
            let d = expand_user(d);
            if d.is_absolute() {
                d
            } else {
                std::env::current_dir().unwrap_or_default().join(d)
            }
        });
        let mut st = Probed {
            url: url.clone(),
            dest: dest.clone(),
            ..Probed::default()
        };
        let Some(dest) = dest else {
            st.target = Some(Self::remote_commit(p, &url, None, false)?);
            return Ok(st);
        };
        let git_dir = if p.bare.0 {
            dest.clone()
        } else {
            dest.join(".git")
        };
        st.exists = git_dir.join("config").exists() || git_dir.is_file();
        if !st.exists {
            st.target = Some(Self::remote_commit(p, &url, None, false)?);
            return Ok(st);
        }
        st.before = Self::head(p, &dest)?;
        if !p.update.0 {
            return Ok(st);
        }
        if !p.bare.0 {
            let r = p.must(
                Some(&dest),
                &["status", "--porcelain"],
                "read the checkout's status",
            )?;
            st.local_mods = r.stdout.lines().any(|l| !l.starts_with("??"));
        }
        let r = p.run_in(Some(&dest), &["ls-remote", "--get-url", &p.remote])?;
        let current = r.stdout.trim();
        st.url_changed = r.rc == 0 && !same_url(current, &url) && !same_url(current, &p.repo);
        st.target = Some(Self::remote_commit(p, &url, Some(&dest), true)?);
        if p.recursive.0 && !p.bare.0 && dest.join(".gitmodules").exists() {
            let r = p.run_in(Some(&dest), &["submodule", "status", "--recursive"])?;
            st.submodules = r.rc != 0 || r.stdout.lines().any(|l| !l.starts_with(' '));
        }
        Ok(st)
    }

    fn plan(p: &Params, st: &Probed, _ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let mut plan = Plan::new();
        plan.result
            .insert("before".into(), st.before.clone().into());
        let target = st.target.clone();
        if !st.exists {
            plan.result.insert("after".into(), target.clone().into());
            plan.actions.push(if p.clone.0 && st.dest.is_some() {
                Action::Clone
            } else {
                Action::ReportOnly
            });
            plan.diff.prepared = Some(format!(
                ">> Newly checked out {}",
                target.unwrap_or_default()
            ));
            return Ok(plan);
        }
        plan.result.insert("after".into(), st.before.clone().into());
        if !p.update.0 {
            return Ok(plan);
        }
        if st.local_mods {
            if !p.force.0 {
                let mut result = plan.result.clone();
                result.insert("changed".into(), false.into());
                return Err(ModuleError::Failed {
                    msg: format!(
                        "Local modifications exist in the destination: {} (force=no).",
                        st.dest.as_deref().unwrap_or(Path::new("")).display()
                    ),
                    result,
                });
            }
            plan.actions.push(Action::Reset);
            plan.msg = Some(format!(
                "Local modifications exist in the destination: {}",
                st.dest.as_deref().unwrap_or(Path::new("")).display()
            ));
        }
        plan.result
            .insert("remote_url_changed".into(), st.url_changed.into());
        if st.url_changed {
            plan.actions.push(Action::SetUrl);
        }
        let before = st.before.as_deref().unwrap_or("");
        let target = target.unwrap_or_default();
        let at_target = before == target
            || (p.version != "HEAD"
                && looks_like_sha(&p.version)
                && before.starts_with(&p.version));
        if !at_target {
            plan.actions.push(Action::Update);
            plan.result.insert("after".into(), target.clone().into());
            plan.diff.prepared = Some(format!(">> {before} -> {target}"));
        } else if !plan.actions.is_empty() {
            // Re-pointing or resetting: Ansible fetches and checks out after these too.
            plan.actions.push(Action::Update);
        }
        if st.submodules {
            plan.actions.push(Action::Submodules);
            plan.result.insert("submodules_changed".into(), true.into());
        }
        Ok(plan)
    }

    fn apply(
        p: &Params,
        st: Probed,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        let mut out = Map::new();
        let Some(dest) = st.dest.as_deref() else {
            return Ok(out);
        };
        for a in &plan.actions {
            match a {
                Action::ReportOnly => return Ok(out),
                Action::Clone => {
                    Self::clone(p, dest, &st.url)?;
                    if !p.bare.0 {
                        Self::switch(p, dest)?;
                        if p.recursive.0 {
                            Self::submodules(p, dest)?;
                        }
                    }
                }
                Action::Reset => {
                    p.must(
                        Some(dest),
                        &["reset", "--hard", "HEAD"],
                        "reset local modifications",
                    )?;
                }
                Action::SetUrl => {
                    p.must(
                        Some(dest),
                        &["remote", "set-url", &p.remote, &st.url],
                        &format!("set a new url {} for {}", st.url, p.remote),
                    )?;
                }
                Action::Update => {
                    Self::fetch(p, dest, &st.url)?;
                    if !p.bare.0 {
                        Self::switch(p, dest)?;
                        if p.recursive.0 {
                            Self::submodules(p, dest)?;
                        }
                    }
                }
                Action::Submodules => Self::submodules(p, dest)?,
            }
        }
        let after = Self::head(p, dest)?;
        let changed = plan.actions.contains(&Action::Clone)
            || after != st.before
            || st.local_mods
            || st.url_changed
            || st.submodules;
        out.insert("after".into(), after.into());
        out.insert("changed".into(), changed.into());
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
