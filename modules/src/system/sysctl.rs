//! `sysctl` (ansible.posix): a kernel parameter's line in a sysctl file (`/etc/sysctl.conf`),
//! optionally set at once with `sysctl -w` and the file reloaded with `sysctl -p`.

use super::{run_c, ConfFile};
use crate::fs::expand_user;
use crate::params::{de_opt_string, Bool};
use crate::text::Presence;
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{Map, Value};

pub struct Sysctl;

fn yes() -> Bool {
    Bool(true)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(default, alias = "key", deserialize_with = "de_opt_string")]
    pub name: Option<String>,
    #[serde(default, alias = "val", deserialize_with = "de_opt_string")]
    pub value: Option<String>,
    #[serde(default)]
    pub state: Presence,
    #[serde(default = "yes")]
    pub reload: Bool,
    #[serde(default)]
    pub sysctl_set: Bool,
    #[serde(default)]
    pub ignoreerrors: Bool,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub sysctl_file: Option<String>,
}

impl Params {
    fn name(&self) -> String {
        self.name.as_deref().unwrap_or_default().trim().to_string()
    }

    /// The value as Ansible writes it: booleans spelled any way become `1`/`0`, the rest trimmed.
    fn value(&self) -> String {
        let v = self.value.as_deref().unwrap_or_default();
        match v.to_ascii_lowercase().as_str() {
            "y" | "yes" | "on" | "1" | "true" | "t" | "1.0" => "1".into(),
            "n" | "no" | "off" | "0" | "false" | "f" | "0.0" => "0".into(),
            _ => v.trim().to_string(),
        }
    }

    fn file(&self) -> std::path::PathBuf {
        expand_user(self.sysctl_file.as_deref().unwrap_or("/etc/sysctl.conf"))
    }
}

/// What the probe found: the kernel's value (`None`: no such key) and the file.
#[derive(Debug)]
pub struct State {
    proc_value: Option<String>,
    file: ConfFile,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `sysctl -w name=value` (`sysctl_set`).
    Set,
    /// Rewrite the file with this content.
    Write(String),
    /// `sysctl -p FILE` (`reload`).
    Reload,
    /// `sysctl -n` itself failed: Ansible reports a change and has nothing to do for it.
    KernelLacksKey,
}

/// Lines that carry no `key=value`: blank, comments (`#`, `;`), or without `=`.
fn is_setting(line: &str) -> bool {
    !(line.is_empty() || line.starts_with('#') || line.starts_with(';') || !line.contains('='))
}

fn split_setting(line: &str) -> (&str, &str) {
    let (k, v) = line.split_once('=').unwrap_or((line, ""));
    (k.trim(), v.trim())
}

/// The value the file gives `name` (its last setting wins, as sysctl reads it) and the file's
/// text as Ansible rewrites it: every line trimmed, each key kept once (its first line),
/// `name`'s line set to `value` (or dropped for `absent`), appended when missing.
fn rewrite(text: &str, name: &str, value: Option<&str>) -> (Option<String>, String) {
    let mut current = None;
    let mut seen: Vec<&str> = Vec::new();
    let mut out = String::new();
    for line in text.lines().map(str::trim) {
        if !is_setting(line) {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let (k, v) = split_setting(line);
        if k == name {
            current = Some(v.to_string());
        }
        if seen.contains(&k) {
            continue;
        }
        seen.push(k);
        match (k == name, value) {
            (true, Some(value)) => out.push_str(&format!("{k}={value}\n")),
            (true, None) => {}
            (false, _) => out.push_str(&format!("{k}={v}\n")),
        }
    }
    if let (false, Some(value)) = (seen.contains(&name), value) {
        out.push_str(&format!("{name}={value}\n"));
    }
    (current, out)
}

/// Ansible compares the kernel's value and the wanted one word by word.
fn same_words(a: &str, b: &str) -> bool {
    a.split_whitespace().eq(b.split_whitespace())
}

/// `sysctl` exits 0 for some refused writes; these lines on stderr are failures all the same.
fn stderr_failed(err: &str) -> bool {
    err.lines().any(|l| {
        l.starts_with("sysctl: setting key \"")
            && (l.ends_with("\": Invalid argument") || l.ends_with("\": Read-only file system"))
    })
}

impl Module for Sysctl {
    type Params = Params;
    type State = State;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        let name = p.name.as_deref().unwrap_or_default();
        if p.name.is_none() {
            return Err(ModuleError::Params(
                "missing required arguments: name".into(),
            ));
        }
        if name.trim().is_empty() {
            return Err(ModuleError::Params("name cannot be blank".into()));
        }
        if p.state == Presence::Present {
            match p.value.as_deref() {
                None => {
                    return Err(ModuleError::Params(
                        "state is present but all of the following are missing: value".into(),
                    ))
                }
                Some("") => return Err(ModuleError::Params("value cannot be blank".into())),
                Some(_) => {}
            }
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<State, ModuleError> {
        let name = p.name();
        let ran = run_c(&["sysctl", "-e", "-n", &name])?;
        // `-e` hides "unknown key": it exits 0 with nothing on stdout, a value that matches no
        // wanted one (Ansible's reading too).
        let proc_value = (ran.rc == 0).then_some(ran.stdout);
        Ok(State {
            proc_value,
            file: ConfFile::probe(&p.file())?,
        })
    }

    fn plan(p: &Params, st: &State, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let mut plan = Plan::new();
        let name = p.name();
        let present = p.state == Presence::Present;
        let value = p.value();
        let text = st.file.text.as_deref().unwrap_or_default();
        let (in_file, new_text) = rewrite(text, &name, present.then_some(value.as_str()));
        let mut changed = false;
        let write = match (&in_file, present) {
            (None, true) => true,
            (None, false) => false,
            (Some(v), false) => !v.is_empty(),
            (Some(v), true) => *v != value,
        };
        if write {
            changed = true;
        } else if p.reload.0 && present {
            changed = !st
                .proc_value
                .as_deref()
                .is_some_and(|v| same_words(v, &value));
        }
        let mut set = false;
        if p.sysctl_set.0 && present {
            match &st.proc_value {
                None => changed = true,
                Some(v) if !same_words(v, &value) => {
                    changed = true;
                    set = true;
                }
                Some(_) => {}
            }
        }
        if set {
            plan.diff.attr(
                format!("sysctl:{name}"),
                "value",
                st.proc_value.as_deref().unwrap_or_default().trim_end(),
                value.clone(),
            );
            plan.actions.push(Action::Set);
        }
        if write {
            if ctx.diff {
                plan.diff.content.push(st.file.diff(&new_text));
            }
            plan.actions.push(Action::Write(new_text));
        }
        if changed && p.reload.0 {
            plan.actions.push(Action::Reload);
        }
        if changed && plan.actions.is_empty() {
            plan.diff
                .attr(format!("sysctl:{name}"), "value", "(unreadable)", value);
            plan.actions.push(Action::KernelLacksKey);
        }
        Ok(plan)
    }

    fn apply(
        p: &Params,
        st: State,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        let name = p.name();
        for action in &plan.actions {
            match action {
                Action::Set => {
                    let value = p.value();
                    let mut argv = vec!["sysctl"];
                    if p.ignoreerrors.0 {
                        argv.push("-e");
                    }
                    let setting = format!("{name}={value}");
                    argv.extend(["-w", &setting]);
                    let ran = run_c(&argv)?;
                    if ran.rc != 0 || stderr_failed(&ran.stderr) {
                        return Err(ModuleError::failed(format!(
                            "setting {name} failed: {}{}",
                            ran.stdout, ran.stderr
                        )));
                    }
                }
                Action::Write(text) => st.file.write(text)?,
                Action::Reload => {
                    let file = p.file().display().to_string();
                    let mut argv = vec!["sysctl"];
                    if p.ignoreerrors.0 {
                        argv.push("-e");
                    }
                    argv.extend(["-p", &file]);
                    let ran = run_c(&argv)?;
                    if ran.rc != 0 || stderr_failed(&ran.stderr) {
                        return Err(ModuleError::failed(format!(
                            "Failed to reload sysctl: {}{}",
                            ran.stdout, ran.stderr
                        )));
                    }
                }
                Action::KernelLacksKey => {}
            }
        }
        Ok(Map::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{read, setup, stamp, CHECK, RUN};
    use crate::{check_params, run};
    use serde_json::json;

    #[test]
    fn rewrite_keeps_comments_dedups_and_appends() {
        let text = "# c\n  a = 1 \n;x\nb=2\na=3\n\n";
        let (cur, out) = rewrite(text, "a", Some("5"));
        assert_eq!(cur.as_deref(), Some("3"));
        assert_eq!(out, "# c\na=5\n;x\nb=2\n\n");
        let (cur, out) = rewrite(text, "z", Some("1"));
        assert_eq!(cur, None);
        assert_eq!(out, "# c\na=1\n;x\nb=2\n\nz=1\n");
        let (_, out) = rewrite(text, "a", None);
        assert_eq!(out, "# c\n;x\nb=2\n\n");
    }

    #[test]
    fn values_as_ansible_spells_them() {
        let p: Params = serde_json::from_value(json!({"key": "k", "val": true})).unwrap();
        assert_eq!(p.value(), "1");
        let p: Params = serde_json::from_value(json!({"name": "k", "value": " 4 5 "})).unwrap();
        assert_eq!(p.value(), "4 5");
        assert!(same_words("4\t5\n", "4 5"));
    }

    #[test]
    fn file_only_converges_and_checks() {
        let (_d, path) = setup("# keep\nfp.test.key = 1\n");
        let params = json!({"name": "fp.test.key", "value": 2, "reload": false,
            "sysctl_file": path});
        let s = stamp(&path);
        let out = run::<Sysctl>(&params, &CHECK).unwrap();
        assert!(out.changed);
        assert_eq!(out.diff.content[0].after, "# keep\nfp.test.key=2\n");
        assert_eq!(stamp(&path), s);
        assert!(run::<Sysctl>(&params, &RUN).unwrap().changed);
        assert_eq!(read(&path), "# keep\nfp.test.key=2\n");
        let s = stamp(&path);
        assert!(!run::<Sysctl>(&params, &RUN).unwrap().changed);
        assert_eq!(stamp(&path), s);
        let absent = json!({"name": "fp.test.key", "state": "absent", "reload": false,
            "sysctl_file": path});
        assert!(run::<Sysctl>(&absent, &RUN).unwrap().changed);
        assert_eq!(read(&path), "# keep\n");
        assert!(!run::<Sysctl>(&absent, &RUN).unwrap().changed);
    }

    #[test]
    fn missing_file_is_created() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("new.conf");
        let params = json!({"name": "a.b", "value": "x y", "reload": "no", "sysctl_file": path});
        assert!(run::<Sysctl>(&params, &RUN).unwrap().changed);
        assert_eq!(read(&path), "a.b=x y\n");
    }

    #[test]
    fn bad_params_are_refused() {
        assert!(check_params("sysctl", &json!({"value": 1})).is_err());
        assert!(check_params("sysctl", &json!({"name": "a"})).is_err());
        assert!(check_params("sysctl", &json!({"name": "a", "value": ""})).is_err());
        assert!(check_params("sysctl", &json!({"name": "a", "state": "absent"})).is_ok());
        assert!(check_params("sysctl", &json!({"name": "a", "value": 1, "bogus": 1})).is_err());
    }
}
