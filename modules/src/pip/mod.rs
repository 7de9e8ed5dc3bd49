//! `pip`: Python packages through the host's own pip (in a virtualenv it creates when missing,
//! or for a given `executable`), with Ansible's parameters and return values.
//!
//! Probe reads what is installed (`pip list --format=freeze`, as Ansible's module does) and
//! decides a plain `name` list from it alone (`spec.rs` matches names and PEP 440 specifiers).
//! What the list cannot decide (`latest`, a `requirements` file, URLs and paths, `editable`,
//! `extra_args` that install elsewhere) is asked of pip itself with `pip install --dry-run`,
//! which resolves and stops. So a converged run runs no installing command, and check mode
//! answers from the same probe. Apply runs the one `pip install`/`uninstall` command Ansible
//! would, and reports `changed` as Ansible reads pip's output.

pub mod spec;

use crate::apt::exec::{run_in, Ran};
use crate::apt::params::de_pkg_list;
use crate::params::{de_opt_string, is_template, Bool};
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use spec::Requirement;
use std::path::{Path, PathBuf};

pub struct Pip;

/// Parameters of `pip`, as Ansible spells them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(default, deserialize_with = "de_pkg_list")]
    pub name: Option<Vec<String>>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub version: Option<String>,
    #[serde(default)]
    pub requirements: Option<String>,
    #[serde(default)]
    pub virtualenv: Option<String>,
    #[serde(default)]
    pub virtualenv_site_packages: Bool,
    #[serde(default = "default_virtualenv_command")]
    pub virtualenv_command: String,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub virtualenv_python: Option<String>,
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub extra_args: Option<String>,
    #[serde(default)]
    pub editable: Bool,
    #[serde(default)]
    pub chdir: Option<String>,
    #[serde(default)]
    pub executable: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub umask: Option<String>,
    #[serde(default)]
    pub break_system_packages: Bool,
    /// Environment from the play/task `environment`, passed by the controller.
    #[serde(default, rename = "_env")]
    pub env: Option<Map<String, Value>>,
}

fn default_virtualenv_command() -> String {
    "virtualenv".into()
}

const STATES: [&str; 4] = ["absent", "forcereinstall", "latest", "present"];

fn state_of(p: &Params) -> &str {
    p.state.as_deref().unwrap_or("present")
}

/// pip's arguments for each state, as Ansible's module maps them.
fn state_args(state: &str) -> &'static [&'static str] {
    match state {
        "absent" => &["uninstall", "-y"],
        "latest" => &["install", "-U"],
        "forcereinstall" => &["install", "-U", "--force-reinstall"],
        _ => &["install"],
    }
}

/// `extra_args` that put packages somewhere `pip list` of the environment does not look.
const ELSEWHERE: [&str; 5] = ["--user", "--target", "-t", "--prefix", "--root"];

/// Ansible's `type='path'`: `~` is the home directory.
fn expand_user(s: &str) -> String {
    match (s.strip_prefix('~'), std::env::var("HOME")) {
        (Some(rest), Ok(home)) if rest.is_empty() || rest.starts_with('/') => {
            format!("{home}{rest}")
        }
        _ => s.to_string(),
    }
}

/// The packages of `name`, after Ansible's comma repair and with `version` added.
fn packages(p: &Params) -> Result<Vec<Requirement>, ModuleError> {
    let Some(names) = &p.name else {
        return Ok(Vec::new());
    };
    let mut reqs: Vec<Requirement> = spec::recover_names(names)
        .iter()
        .map(|n| Requirement::parse(n))
        .collect();
    if let Some(v) = &p.version {
        if reqs.len() > 1 {
            return Err(ModuleError::Params(
                "'version' argument is ambiguous when installing multiple package distributions. \
                 Please specify version restrictions next to each package in 'name' argument."
                    .into(),
            ));
        }
        if reqs[0].has_specifier() {
            return Err(ModuleError::Params(
                "The 'version' argument conflicts with any version specifier provided along with \
                 a package name. Please keep the version specifier, but remove the 'version' \
                 argument."
                    .into(),
            ));
        }
        reqs[0] = Requirement::with_version(&reqs[0].to_string(), v);
    }
    Ok(reqs)
}

/// `extra_args` as words, with `-e` added for `editable` as Ansible adds it.
fn extra_words(p: &Params) -> Result<Vec<String>, ModuleError> {
    let mut extra = p.extra_args.clone().unwrap_or_default();
    if p.editable.0 && !extra.split(' ').any(|w| w == "-e") {
        extra = if extra.is_empty() {
            "-e".into()
        } else {
            format!("{extra} -e")
        };
    }
    crate::command::split_command(&extra)
        .ok_or_else(|| ModuleError::Params(format!("cannot split `extra_args`: {extra}")))
}

fn is_vcs(name: &str) -> bool {
    ["svn+", "git+", "hg+", "bzr+"]
        .iter()
        .any(|v| name.starts_with(v))
}

/// How the probe decides whether pip has anything to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decide {
    /// From `pip list` alone: plain names, installed where the environment's pip looks.
    List,
    /// From `pip install --dry-run` with the same arguments.
    DryRun,
    /// Not decidable without doing it (`forcereinstall`, `absent` of a requirements file):
    /// always run, as Ansible does.
    Always,
}

/// What the task runs commands with: the environment, the directory, the umask.
pub struct Runner {
    env: Vec<(String, String)>,
    chdir: PathBuf,
    umask: Option<String>,
}

impl Runner {
    fn new(p: &Params, venv: Option<&Path>) -> Result<Runner, ModuleError> {
        let mut env = crate::command::env_pairs(&p.env)?;
        if p.break_system_packages.0 {
            // The variable, not `--break-system-packages`, which pip before 23.0.1 refuses.
            env.push(("PIP_BREAK_SYSTEM_PACKAGES".into(), "1".into()));
        }
        if let Some(v) = venv {
            // Programs the install runs (a build backend's tools) come from the virtualenv first.
            let path = env
                .iter()
                .rev()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v.clone())
                .or_else(|| std::env::var("PATH").ok())
                .unwrap_or_default();
            env.push(("PATH".into(), format!("{}:{path}", v.join("bin").display())));
        }
        // As Ansible: without `chdir`, the temporary directory, so that a `become` user need not
        // be able to read the caller's working directory.
        let chdir = match &p.chdir {
            Some(c) => PathBuf::from(expand_user(c)),
            None => std::env::temp_dir(),
        };
        Ok(Runner {
            env,
            chdir,
            umask: p.umask.clone(),
        })
    }

    /// Run `argv` (with a parsable locale when `parse`), under the task's umask.
    fn run(&self, argv: &[String], parse: bool) -> Result<Ran, ModuleError> {
        let mut env = self.env.clone();
        if parse {
            for k in ["LANG", "LC_ALL", "LC_MESSAGES"] {
                env.push((k.into(), "C.UTF-8".into()));
            }
        }
        let argv: Vec<String> = match &self.umask {
            // Validated as octal digits: safe inside the script.
            Some(u) => ["/bin/sh", "-c", &format!("umask {u} && exec \"$@\""), "sh"]
                .iter()
                .map(|s| s.to_string())
                .chain(argv.iter().cloned())
                .collect(),
            None => argv.to_vec(),
        };
        run_in(&argv, &env, None, Some(&self.chdir))
    }
}

/// Ansible's failure of a pip command: its output in `msg`, the command in `cmd`.
fn fail(cmd: Value, out: &str, err: &str) -> ModuleError {
    let mut msg = String::new();
    if !out.is_empty() {
        msg.push_str(&format!("stdout: {out}"));
    }
    if !err.is_empty() {
        msg.push_str(&format!("\n:stderr: {err}"));
    }
    let mut result = Map::new();
    result.insert("cmd".into(), cmd);
    ModuleError::Failed { msg, result }
}

/// Where pip is, as Ansible's module finds it: `executable` (a path, or a name on `PATH`), the
/// virtualenv's `pip3` or `pip`, else the Python's `-m pip`, else `pip3` on `PATH`.
fn find_pip(p: &Params, venv: Option<&Path>, runner: &Runner) -> Result<Vec<String>, ModuleError> {
    if let Some(exe) = &p.executable {
        let exe = expand_user(exe);
        if exe.starts_with('/') {
            return Ok(vec![exe]);
        }
        return bin_path(&exe)
            .map(|w| vec![w.display().to_string()])
            .ok_or_else(|| {
                ModuleError::failed(format!(
                    "Unable to find any of {exe} to use.  pip needs to be installed."
                ))
            });
    }
    if let Some(v) = venv {
        let bin = v.join("bin");
        return ["pip3", "pip"]
            .iter()
            .map(|n| bin.join(n))
            .find(|c| is_executable(c))
            .map(|c| vec![c.display().to_string()])
            .ok_or_else(|| {
                ModuleError::failed(format!(
                    "Unable to find pip in the virtualenv, {}, under any of these names: pip3, \
                     pip. Make sure pip is present in the virtualenv.",
                    v.display()
                ))
            });
    }
    if let Some(py) = bin_path("python3") {
        let py = py.display().to_string();
        let probe = [
            py.clone(),
            "-c".into(),
            "import importlib.util, sys; sys.exit(importlib.util.find_spec('pip') is None)".into(),
        ];
        if runner.run(&probe, false)?.rc == 0 {
            return Ok(vec![py, "-m".into(), "pip".into()]);
        }
    }
    bin_path("pip3")
        .map(|w| vec![w.display().to_string()])
        .ok_or_else(|| {
            ModuleError::failed("Unable to find any of pip3 to use.  pip needs to be installed.")
        })
}

/// A program's path as Ansible's `get_bin_path` finds it: `PATH` first, then the sbin
/// directories a `become` session's `PATH` may lack.
fn bin_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/sbin", "/usr/sbin", "/usr/local/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// What `pip list --format=freeze` (or `pip freeze` for an old pip) said.
#[derive(Debug, Clone)]
pub struct Listed {
    cmd: String,
    out: String,
    err: String,
}

impl Listed {
    /// `name==version` lines, pip's own notices left out as Ansible leaves them out.
    fn packages(&self) -> Vec<(String, String)> {
        self.out
            .lines()
            .filter(|l| !l.starts_with("You are using") && !l.starts_with("You should consider"))
            .filter_map(|l| l.split_once("=="))
            .map(|(n, v)| (spec::canonical_name(n), v.trim().to_string()))
            .collect()
    }
}

fn list(pip: &[String], runner: &Runner) -> Result<Listed, ModuleError> {
    let mut cmd: Vec<String> = pip.to_vec();
    cmd.extend(["list".into(), "--format=freeze".into()]);
    let mut ran = runner.run(&cmd, true)?;
    if ran.rc != 0 {
        cmd = pip.to_vec();
        cmd.push("freeze".into());
        ran = runner.run(&cmd, true)?;
        if ran.rc != 0 {
            return Err(fail(json!(cmd), &ran.stdout, &ran.stderr));
        }
    }
    Ok(Listed {
        cmd: cmd.join(" "),
        out: ran.stdout,
        err: ran.stderr,
    })
}

/// The pip command of the task: the state's subcommand, `extra_args`, the packages or `-r`.
fn command(p: &Params, pip: &[String], reqs: &[Requirement]) -> Result<Vec<String>, ModuleError> {
    let mut cmd = pip.to_vec();
    cmd.extend(state_args(state_of(p)).iter().map(|s| s.to_string()));
    cmd.extend(extra_words(p)?);
    if !reqs.is_empty() {
        cmd.extend(reqs.iter().map(Requirement::to_string));
    } else if let Some(r) = &p.requirements {
        cmd.extend(["-r".into(), r.clone()]);
    }
    Ok(cmd)
}

pub struct Probed {
    runner: Runner,
    venv: Option<PathBuf>,
    /// The virtualenv's `bin/activate` is missing: it is created first, and pip is run then.
    create_venv: bool,
    reqs: Vec<Requirement>,
    /// How pip is run (empty until the virtualenv exists).
    pip: Vec<String>,
    /// The pip command apply runs (empty until the virtualenv exists).
    cmd: Vec<String>,
    /// What is installed, when the probe read it.
    listed: Option<Listed>,
    /// The command that decided, with its output (for check mode's `cmd`/`stdout`/`stderr`).
    decided_by: Option<(String, String, String)>,
    /// What pip would change (dry-run's `Would install ...`, names to install or remove).
    pending: Vec<String>,
    needed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    CreateVirtualenv,
    RunPip,
}

fn decide_mode(p: &Params, reqs: &[Requirement], extra: &[String]) -> Decide {
    let state = state_of(p);
    let plain = !reqs.is_empty() && reqs.iter().all(|r| r.key().is_some());
    let elsewhere = extra.iter().any(|w| {
        ELSEWHERE
            .iter()
            .any(|e| w == e || w.starts_with(&format!("{e}=")))
    });
    match state {
        "forcereinstall" => Decide::Always,
        "absent" if plain => Decide::List,
        "absent" => Decide::Always,
        "present" if plain && !elsewhere && !p.editable.0 => Decide::List,
        _ => Decide::DryRun,
    }
}

impl Module for Pip {
    type Params = Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        let err = |m: String| Err(ModuleError::Params(m));
        if let Some(s) = p.state.as_deref().filter(|s| !is_template(s)) {
            if !STATES.contains(&s) {
                return err(format!(
                    "value of state must be one of: {}, got: {s}",
                    STATES.join(", ")
                ));
            }
        }
        match (&p.name, &p.requirements) {
            (None, None) => {
                return err("one of the following is required: name, requirements".into())
            }
            (Some(_), Some(_)) => {
                return err("parameters are mutually exclusive: name|requirements".into())
            }
            _ => {}
        }
        if p.executable.is_some() && p.virtualenv.is_some() {
            return err("parameters are mutually exclusive: executable|virtualenv".into());
        }
        if let Some(u) = p.umask.as_deref().filter(|u| !is_template(u)) {
            if u.is_empty() || !u.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
                return err(format!("umask must be an octal integer, got: {u}"));
            }
        }
        if state_of(p) == "latest" && p.version.is_some() {
            return err("version is incompatible with state=latest".into());
        }
        let names = p.name.as_deref().unwrap_or_default();
        if !names.iter().any(|n| is_template(n)) && !p.version.as_deref().is_some_and(is_template) {
            packages(p)?;
        }
        if !p.extra_args.as_deref().is_some_and(is_template) {
            extra_words(p)?;
        }
        crate::command::env_pairs(&p.env)?;
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Probed, ModuleError> {
        let venv = p.virtualenv.as_ref().map(|v| {
            let v = PathBuf::from(expand_user(v));
            match &p.chdir {
                Some(c) => PathBuf::from(expand_user(c)).join(v),
                None => v,
            }
        });
        let runner = Runner::new(p, venv.as_deref())?;
        let reqs = packages(p)?;
        let mut probed = Probed {
            runner,
            create_venv: venv
                .as_ref()
                .is_some_and(|v| !v.join("bin/activate").exists()),
            venv,
            reqs,
            pip: Vec::new(),
            cmd: Vec::new(),
            listed: None,
            decided_by: None,
            pending: Vec::new(),
            needed: true,
        };
        if probed.create_venv {
            return Ok(probed);
        }
        let pip = find_pip(p, probed.venv.as_deref(), &probed.runner)?;
        probed.cmd = command(p, &pip, &probed.reqs)?;
        probed.pip = pip.clone();
        let extra = extra_words(p)?;
        let mode = decide_mode(p, &probed.reqs, &extra);
        let vcs = p.name.iter().flatten().any(|n| is_vcs(n));
        if mode == Decide::List || p.requirements.is_some() || vcs {
            probed.listed = Some(list(&pip, &probed.runner)?);
        }
        match mode {
            Decide::List => {
                let listed = probed.listed.as_ref().expect("listed above");
                let installed = listed.packages();
                let absent = state_of(p) == "absent";
                for r in &probed.reqs {
                    let key = r.key().expect("plain");
                    let mut versions = installed.iter().filter(|(n, _)| *n == key);
                    // pip uninstalls a name whatever version it is given, so `absent` asks
                    // only whether the name is installed.
                    let present = if absent {
                        versions.next().is_some()
                    } else {
                        versions.any(|(_, v)| r.satisfied_by(v))
                    };
                    if present == absent {
                        probed.pending.push(r.to_string());
                    }
                }
                probed.needed = !probed.pending.is_empty();
                probed.decided_by =
                    Some((listed.cmd.clone(), listed.out.clone(), listed.err.clone()));
            }
            Decide::DryRun => {
                let mut dry = probed.cmd.clone();
                let at = dry.iter().position(|w| w == "install").expect("install") + 1;
                dry.insert(at, "--dry-run".into());
                let ran = probed.runner.run(&dry, true)?;
                if ran.rc != 0 && ran.stderr.contains("no such option: --dry-run") {
                    // pip before 22.2 cannot say: run it, as Ansible always does.
                    probed.needed = true;
                } else if ran.rc != 0 {
                    return Err(fail(json!(dry), &ran.stdout, &ran.stderr));
                } else {
                    probed.pending = ran
                        .stdout
                        .lines()
                        .filter_map(|l| l.strip_prefix("Would install "))
                        .flat_map(|l| l.split_whitespace().map(str::to_string))
                        .collect();
                    probed.needed = !probed.pending.is_empty();
                    probed.decided_by = Some((dry.join(" "), ran.stdout, ran.stderr));
                }
            }
            Decide::Always => probed.needed = true,
        }
        Ok(probed)
    }

    fn plan(p: &Params, s: &Probed, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let mut plan = Plan::new();
        let mut prepared = Vec::new();
        if s.create_venv {
            plan.actions.push(Action::CreateVirtualenv);
            prepared.push(format!(
                "create virtualenv {}",
                s.venv.as_ref().expect("venv").display()
            ));
        }
        if s.create_venv || s.needed {
            plan.actions.push(Action::RunPip);
            let what = if s.pending.is_empty() {
                s.cmd.join(" ")
            } else {
                s.pending.join(" ")
            };
            let verb = if state_of(p) == "absent" {
                "uninstall"
            } else {
                "install"
            };
            prepared.push(format!("{verb} {what}"));
        }
        if !plan.actions.is_empty() {
            plan.diff.prepared = Some(prepared.join("\n") + "\n");
        }
        if ctx.check {
            // Ansible's check mode reports the command that decided and its output (nothing
            // but `changed` when the virtualenv is still to be made).
            if let Some((cmd, out, err)) = &s.decided_by {
                plan.result.insert("cmd".into(), json!(cmd));
                plan.result.insert("stdout".into(), json!(out));
                plan.result.insert("stderr".into(), json!(err));
            }
            return Ok(plan);
        }
        plan.result.insert("cmd".into(), json!(s.cmd));
        plan.result.insert("name".into(), json!(p.name));
        plan.result.insert("version".into(), json!(p.version));
        plan.result.insert("state".into(), json!(state_of(p)));
        plan.result
            .insert("requirements".into(), json!(p.requirements));
        plan.result.insert(
            "virtualenv".into(),
            json!(s.venv.as_ref().map(|v| v.display().to_string())),
        );
        plan.result.insert("stdout".into(), json!(""));
        plan.result.insert("stderr".into(), json!(""));
        Ok(plan)
    }

    fn apply(
        p: &Params,
        s: Probed,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        let (mut out, mut err) = (String::new(), String::new());
        let mut cmd = s.cmd.clone();
        let mut pip = s.pip.clone();
        let mut listed = s.listed.clone();
        for a in &plan.actions {
            match a {
                Action::CreateVirtualenv => {
                    let venv = s.venv.as_deref().expect("venv");
                    let ran = create_virtualenv(p, venv, &s.runner)?;
                    out.push_str(&ran.stdout);
                    err.push_str(&ran.stderr);
                    pip = find_pip(p, Some(venv), &s.runner)?;
                    cmd = command(p, &pip, &s.reqs)?;
                    let vcs = p.name.iter().flatten().any(|n| is_vcs(n));
                    if p.requirements.is_some() || vcs {
                        listed = Some(list(&pip, &s.runner)?);
                    }
                }
                Action::RunPip => {
                    let ran = s.runner.run(&cmd, false)?;
                    out.push_str(&ran.stdout);
                    err.push_str(&ran.stderr);
                    let absent = state_of(p) == "absent";
                    let not_installed = ran.stdout.contains("not installed")
                        || ran.stderr.contains("not installed");
                    if ran.rc != 0 && !(ran.rc == 1 && absent && not_installed) {
                        return Err(fail(json!(cmd), &out, &err));
                    }
                    let changed = if absent {
                        ran.stdout.contains("Successfully uninstalled")
                    } else if let Some(before) = &listed {
                        // A requirements file or a VCS link: whatever the installed set shows.
                        list(&pip, &s.runner)?.out != before.out
                    } else {
                        ran.stdout.contains("Successfully installed")
                    };
                    let mut r = Map::new();
                    r.insert("changed".into(), json!(changed || s.create_venv));
                    r.insert("cmd".into(), json!(cmd));
                    r.insert("stdout".into(), json!(out));
                    r.insert("stderr".into(), json!(err));
                    return Ok(r);
                }
            }
        }
        Ok(Map::new())
    }
}

/// Ansible's `setup_virtualenv`: `virtualenv_command` (a program on `PATH` or a path, with its
/// arguments), `--system-site-packages` or an old virtualenv's `--no-site-packages`, and
/// `-p<python>` unless the command is `venv`/`pyvenv` (which take no interpreter).
fn create_virtualenv(p: &Params, venv: &Path, runner: &Runner) -> Result<Ran, ModuleError> {
    let command = expand_user(&p.virtualenv_command);
    let mut cmd = crate::command::split_command(&command)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| {
            ModuleError::Params(format!("cannot split `virtualenv_command`: {command}"))
        })?;
    if !cmd[0].contains('/') {
        cmd[0] = bin_path(&cmd[0])
            .ok_or_else(|| {
                ModuleError::failed(format!(
                    "Failed to find required executable \"{}\" in paths: {}",
                    cmd[0],
                    std::env::var("PATH").unwrap_or_default()
                ))
            })?
            .display()
            .to_string();
    }
    if p.virtualenv_site_packages.0 {
        cmd.push("--system-site-packages".into());
    } else {
        let help = [cmd[0].clone(), "--help".into()];
        let ran = runner.run(&help, true)?;
        if ran.rc != 0 {
            return Err(ModuleError::failed(format!(
                "Could not get output from {} --help: {}{}",
                cmd[0], ran.stdout, ran.stderr
            )));
        }
        if ran
            .stdout
            .split_whitespace()
            .any(|w| w == "--no-site-packages")
        {
            cmd.push("--no-site-packages".into());
        }
    }
    let is_venv = {
        let base = Path::new(&cmd[0]).file_name().and_then(|f| f.to_str());
        base == Some("pyvenv")
            || cmd.windows(2).any(|w| w[0] == "-m" && w[1] == "venv")
            || cmd.iter().any(|w| w == "-mvenv")
    };
    match (&p.virtualenv_python, is_venv) {
        (Some(_), true) => {
            return Err(ModuleError::failed(
                "virtualenv_python should not be used when using the venv module or pyvenv as \
                 virtualenv_command",
            ))
        }
        (Some(py), false) => cmd.push(format!("-p{py}")),
        (None, false) => {
            // Ansible passes the Python running the module; here that is the host's python3.
            if let Some(py) = bin_path("python3") {
                cmd.push(format!("-p{}", py.display()));
            }
        }
        (None, true) => {}
    }
    cmd.push(venv.display().to_string());
    let ran = runner.run(&cmd, false)?;
    if ran.rc != 0 {
        return Err(fail(json!(cmd), &ran.stdout, &ran.stderr));
    }
    Ok(ran)
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
