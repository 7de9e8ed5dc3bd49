//! The controller's side of `bridge.py`: one Python process of the user's Ansible
//! installation, started when the playbook first needs one of its own Jinja plugins, asked one
//! JSON line at a time (and answering a lookup's reads of the task's variables while it runs).
//!
//! Only values cross: what the bridge answers is data, never rendered again.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value as Json};

use crate::template::{PluginCall, PluginFailure};

const SCRIPT: &str = include_str!("bridge.py");

/// A running bridge.
pub struct Bridge {
    child: Child,
    to: ChildStdin,
    from: BufReader<ChildStdout>,
}

impl Bridge {
    /// Start it and hand it the plugin directories and collection roots; it answers with the
    /// names of the filters and tests those directories define.
    pub fn start(dirs: &[PathBuf], collections: &[PathBuf]) -> Result<(Bridge, Json), String> {
        let inst = super::locate::install();
        let python = inst.python.clone().ok_or_else(|| {
            format!(
                "the playbook's Jinja plugins are Python and need Ansible on the controller: \
                 {}",
                super::locate::searched(
                    dirs.first()
                        .map(PathBuf::as_path)
                        .unwrap_or_else(|| std::path::Path::new("."))
                )
            )
        })?;
        let mut child = Command::new(&python)
            .args(["-c", SCRIPT])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", python.display()))?;
        let (Some(to), Some(from)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("the plugin bridge has no pipes".into());
        };
        let mut b = Bridge {
            child,
            to,
            from: BufReader::new(from),
        };
        let names = b.ask(&json!({"op": "init", "dirs": dirs, "collections": collections}))?;
        if let Some(e) = names.get("error") {
            return Err(format!(
                "loading the playbook's Jinja plugins failed: {}",
                e.as_str().unwrap_or_default()
            ));
        }
        Ok((b, names))
    }

    fn send(&mut self, msg: &Json) -> Result<(), String> {
        let mut line = msg.to_string();
        line.push('\n');
        self.to
            .write_all(line.as_bytes())
            .and_then(|_| self.to.flush())
            .map_err(|e| format!("the plugin bridge is gone: {e}"))
    }

    fn read(&mut self) -> Result<Json, String> {
        let mut line = String::new();
        match self.from.read_line(&mut line) {
            Ok(0) | Err(_) => Err("the plugin bridge exited".into()),
            Ok(_) => serde_json::from_str(&line)
                .map_err(|e| format!("the plugin bridge answered nonsense: {e}")),
        }
    }

    pub(super) fn ask(&mut self, msg: &Json) -> Result<Json, String> {
        self.send(msg)?;
        self.read()
    }

    /// Run one plugin; `Err(Run)` too when the bridge itself broke.
    pub fn call(&mut self, call: PluginCall<'_>) -> Result<Json, PluginFailure> {
        let PluginCall {
            kind,
            name,
            args,
            kwargs,
            keys,
            basedir,
            var,
        } = call;
        let msg = if kind == crate::template::PluginKind::Lookup {
            json!({"op": "lookup", "name": name, "terms": args, "kwargs": kwargs,
                   "keys": keys, "basedir": basedir.unwrap_or_default()})
        } else {
            json!({"op": kind.word(), "name": name, "args": args, "kwargs": kwargs})
        };
        let mut reply = self.ask(&msg).map_err(PluginFailure::Run)?;
        // A lookup reading the task's variables, one at a time.
        while let Some(name) = reply.get("var").and_then(Json::as_str) {
            let answer = match var(name) {
                Some(v) => json!({"value": v}),
                None => json!({"missing": true}),
            };
            reply = self.ask(&answer).map_err(PluginFailure::Run)?;
        }
        if let Some(v) = reply.get_mut("ok") {
            return Ok(v.take());
        }
        let text = reply
            .get("error")
            .and_then(Json::as_str)
            .unwrap_or_default()
            .to_string();
        Err(match reply.get("why").and_then(Json::as_str) {
            Some("missing") => PluginFailure::Missing,
            Some("load") => PluginFailure::Load(text),
            Some("undefined") => PluginFailure::Undefined,
            _ => PluginFailure::Run(text),
        })
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
