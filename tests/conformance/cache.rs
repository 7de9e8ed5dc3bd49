//! A cache of what ansible-core did with each case, so that a rerun only runs fixpoint.
//!
//! ansible-playbook takes most of the harness's time (a second or two of a core per case, where
//! fixpoint takes a tenth), and what it does with a case depends only on the case, its own
//! version, and how the harness runs it and reads its output. The key is the sha256 of all of
//! these: the case's contents, [`ANSIBLE_VERSION`], and the source of the callback, of
//! `tools.rs` (how it is run) and of `tree.rs` (how its files are read), so that changing any
//! of them misses. The cache is never depended on: a missing or unwritable directory, or an
//! entry that does not read back, means ansible-core runs. `CONFORMANCE_CACHE=DIR` picks the
//! directory (default [`DEFAULT_DIR`], which `.ci/run` keeps), `CONFORMANCE_CACHE=off` turns it
//! off.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::case::Case;
use crate::tools::{Run, ANSIBLE_VERSION};

/// Where the cache lives unless `CONFORMANCE_CACHE` says otherwise.
pub const DEFAULT_DIR: &str = "/var/cache/fixpoint-ci/conformance-ansible";

/// What the key covers besides the case: each changes what ansible-core's run looks like here.
const HARNESS_SOURCES: &[&str] = &[
    include_str!("callback/fixpoint_events.py"),
    include_str!("tools.rs"),
    include_str!("tree.rs"),
    include_str!("cache.rs"),
];

/// A cached run: what [`Run`] holds, and the tree under `base` as it was read then.
pub struct Hit {
    pub run: Run,
    pub tree: Vec<String>,
}

/// The cache directory, or `None` when it is turned off.
pub fn dir() -> Option<PathBuf> {
    match std::env::var("CONFORMANCE_CACHE") {
        Ok(v) if v == "off" => None,
        Ok(v) if !v.is_empty() => Some(PathBuf::from(v)),
        _ => Some(PathBuf::from(DEFAULT_DIR)),
    }
}

/// The key of `case`'s ansible-core run.
pub fn key(case: &Case) -> String {
    let mut h = Sha256::new();
    let mut part = |s: &str| {
        // Each part with its length, so that two parts cannot run into each other.
        h.update((s.len() as u64).to_le_bytes());
        h.update(s.as_bytes());
    };
    part(ANSIBLE_VERSION);
    for src in HARNESS_SOURCES {
        part(src);
    }
    part(&case.playbook);
    part(&case.inventory);
    for (rel, content) in &case.files {
        part(rel);
        part(content);
    }
    for a in &case.args {
        part(a);
    }
    for (k, v) in &case.env {
        part(k);
        part(v);
    }
    hex::encode(h.finalize())
}

/// The cached run of `key`, if there is one that reads back whole.
pub fn load(dir: &Path, key: &str) -> Option<Hit> {
    let text = fs::read_to_string(dir.join(format!("{key}.json"))).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    let tree = v["tree"]
        .as_array()?
        .iter()
        .map(|l| l.as_str().map(str::to_string))
        .collect::<Option<Vec<String>>>()?;
    Some(Hit {
        run: Run {
            root: PathBuf::from(v["root"].as_str()?),
            exit: v["exit"].as_i64().map(|e| e as i32),
            stdout: v["stdout"].as_str()?.to_string(),
            stderr: v["stderr"].as_str()?.to_string(),
        },
        tree,
    })
}

/// Keeps `run` (and its `tree`) under `key`; a failure to write only costs the next run time.
/// A run that was killed is not kept: it says nothing about the case.
pub fn store(dir: &Path, key: &str, run: &Run, tree: &[String]) {
    if run.exit.is_none() {
        return;
    }
    let v = json!({
        "root": run.root.display().to_string(),
        "exit": run.exit,
        "stdout": run.stdout,
        "stderr": run.stderr,
        "tree": tree,
    });
    if fs::create_dir_all(dir).is_err() {
        return;
    }
    // Written whole under a temporary name and renamed: a concurrent reader never sees half.
    let tmp = dir.join(format!("{key}.json.{}.tmp", std::process::id()));
    let written = fs::write(&tmp, v.to_string())
        .and_then(|()| fs::rename(&tmp, dir.join(format!("{key}.json"))));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
}
