//! Running an Ansible module's own Python code on the host (the "python" engine): the module's
//! zip is cached by its sha256 in the user's `~/.cache/fixpoint/` (asked for once with
//! `NeedContent`, like the agent binary itself), and run with the host's Python under the
//! agent's timeout and kill handling (its process group is registered in `children`) and output
//! cap. The agent does not read the module's answer: it returns what the module printed.

use crate::protocol::{PythonRun, Response};
use fixpoint_modules::capture::read_capped;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// The interpreters tried when the inventory names none, in ansible-core 2.19's order
/// (`INTERPRETER_PYTHON_FALLBACK`); bare names are searched on PATH.
const FALLBACK: &[&str] = &[
    "python3.13",
    "python3.12",
    "python3.11",
    "python3.10",
    "python3.9",
    "python3.8",
    "/usr/bin/python3",
    "python3",
];

/// The interpreter discovery found, once per agent.
static DISCOVERED: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();

/// A module's answer is one JSON document: kept whole up to this size (a `slurp` of a large
/// file is large), within the controller's answer limit.
const STDOUT_CAP: usize = 40 * 1024 * 1024;
const STDERR_CAP: usize = 1024 * 1024;

/// The cache directory of the user the agent runs as (from the password database, not $HOME,
/// which sudo may leave pointing at another user's home).
fn cache_dir() -> Result<PathBuf, String> {
    let home = fixpoint_modules::fs::effective_home()
        .ok_or("the agent's user has no home directory for its module cache")?;
    let dir = home.join(".cache").join("fixpoint");
    if !dir.is_dir() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    Ok(dir)
}

use std::os::unix::fs::DirBuilderExt as _;
use std::os::unix::process::CommandExt as _;

/// The zip in the cache: present, just uploaded (moved into place), or to be asked for.
fn cached_zip(run: &PythonRun) -> Result<Result<PathBuf, Response>, String> {
    if run.zip_sha256.len() != 64 || !run.zip_sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("the module zip's sha256 is malformed".into());
    }
    let dir = cache_dir()?;
    let path = dir.join(format!("pymod-{}.zip", run.zip_sha256));
    if std::fs::metadata(&path).is_ok_and(|m| m.len() == run.zip_size) {
        return Ok(Ok(path));
    }
    if let Some(staged) = fixpoint_modules::fs::stage::take(&run.zip_sha256) {
        // The upload was hashed as it arrived: renaming it into place publishes the whole zip.
        let from = staged.dir.at(&staged.name);
        std::fs::rename(&from, &path).map_err(|e| format!("{}: {e}", path.display()))?;
        return Ok(Ok(path));
    }
    fixpoint_modules::fs::stage::begin(&dir, &run.zip_sha256, run.zip_size)
        .map_err(|e| e.to_string())?;
    Ok(Err(Response::NeedContent {
        sha256: run.zip_sha256.clone(),
        size: run.zip_size,
        more: Vec::new(),
    }))
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .chain(["/usr/local/bin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The interpreter to use: the inventory's, else the first of the fallback list present.
fn interpreter(given: Option<&str>) -> Result<PathBuf, String> {
    if let Some(g) = given {
        let p = if g.contains('/') {
            PathBuf::from(g)
        } else {
            on_path(g).unwrap_or_else(|| PathBuf::from(g))
        };
        if !is_executable(&p) {
            return Err(format!(
                "the Python interpreter `{g}` (ansible_python_interpreter) is not on this host"
            ));
        }
        return Ok(p);
    }
    DISCOVERED
        .get_or_init(|| {
            FALLBACK.iter().find_map(|c| {
                let p = if c.starts_with('/') {
                    is_executable(Path::new(c)).then(|| PathBuf::from(c))
                } else {
                    on_path(c)
                }?;
                // A name on PATH may be a wrapper that cannot run (a pyenv shim for a version
                // that is not selected): the interpreter must start.
                std::process::Command::new(&p)
                    .args(["-c", "import sys"])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .ok()
                    .filter(|s| s.success())
                    .map(|_| p)
            })
        })
        .clone()
        .ok_or_else(|| {
            format!(
                "no Python found on this host (looked for {}); this module is Ansible's Python \
                 code: install python3, or set ansible_python_interpreter",
                FALLBACK.join(", ")
            )
        })
}

/// What the `ansible_python` fact reports of the interpreter modules would run with here
/// (ansible-core reports the one running its setup module): printed by the interpreter itself.
const PYTHON_FACT: &str = "import json, sys
try:
    import ssl
    has_ctx = hasattr(ssl, 'SSLContext')
except ImportError:
    has_ctx = False
v = sys.version_info
print(json.dumps({
    'executable': sys.executable,
    'has_sslcontext': has_ctx,
    'type': sys.implementation.name,
    'version': {'major': v.major, 'minor': v.minor, 'micro': v.micro,
                'releaselevel': v.releaselevel, 'serial': v.serial},
    'version_info': list(v),
}))
";

/// The `ansible_python` fact: None when the host has no Python (ansible-core could not gather
/// facts there at all).
pub fn python_fact() -> Option<serde_json::Value> {
    let python = interpreter(None).ok()?;
    let out = std::process::Command::new(&python)
        .args(["-c", PYTHON_FACT])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

/// Run the module: `Ok` with its output, or the response to send instead (content needed,
/// failure before it ran).
pub fn run(run: &PythonRun) -> Result<Response, String> {
    let zip = match cached_zip(run)? {
        Ok(p) => p,
        Err(need) => return Ok(need),
    };
    let python = interpreter(run.interpreter.as_deref())?;
    let mut c = std::process::Command::new(&python);
    c.arg("-c")
        .arg(&run.bootstrap)
        .arg(&zip)
        .arg(&run.fqn)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in &run.env {
        let v = match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        c.env(k, v);
    }
    // A module and what it starts share a process group, killed on timeout or hang-up.
    c.process_group(0);
    let mut child = c
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", python.display()))?;
    let _running = fixpoint_modules::children::register(child.id());
    let input = serde_json::to_vec(&run.stdin).map_err(|e| e.to_string())?;
    let feeder = child.stdin.take().map(|mut pipe| {
        std::thread::spawn(move || {
            let _ = pipe.write_all(&input);
        })
    });
    let out = child
        .stdout
        .take()
        .map(|p| std::thread::spawn(move || read_capped(p, STDOUT_CAP)));
    let err = child
        .stderr
        .take()
        .map(|p| std::thread::spawn(move || read_capped(p, STDERR_CAP)));
    let status = child
        .wait()
        .map_err(|e| format!("waiting for the module: {e}"))?;
    let out = out.and_then(|t| t.join().ok()).unwrap_or_default();
    let err = err.and_then(|t| t.join().ok()).unwrap_or_default();
    if let Some(f) = feeder {
        let _ = f.join();
    }
    if out.omitted() > 0 {
        return Err(format!(
            "module `{}` printed {} bytes, more than the {STDOUT_CAP} bytes an answer may hold",
            run.module, out.total
        ));
    }
    let rc = status.code().unwrap_or_else(|| {
        use std::os::unix::process::ExitStatusExt;
        -status.signal().unwrap_or(0)
    });
    let text = |c: &fixpoint_modules::capture::Captured| {
        let mut s = String::from_utf8_lossy(&c.head).into_owned();
        s.push_str(&String::from_utf8_lossy(&c.tail));
        s
    };
    Ok(Response::PyDone {
        stdout: text(&out),
        stderr: text(&err),
        rc,
        interpreter: python.display().to_string(),
        outbox_written: Vec::new(),
    })
}
