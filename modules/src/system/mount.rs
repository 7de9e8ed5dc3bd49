//! `mount` (ansible.posix): a mount point's line in fstab (`present`, `absent_from_fstab`) and
//! its state in the kernel (`mounted`, `unmounted`, `remounted`, `absent`, and `ephemeral`
//! without fstab), through the host's `mount` and `umount`, with the fstab line format and
//! change rules of Ansible.

use super::{run_c, ConfFile};
use crate::params::{de_opt_string, is_template, Bool};
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

pub struct Mount;

fn yes() -> Bool {
    Bool(true)
}

const STATES: &[&str] = &[
    "absent",
    "absent_from_fstab",
    "mounted",
    "present",
    "unmounted",
    "remounted",
    "ephemeral",
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(default, alias = "name", deserialize_with = "de_opt_string")]
    pub path: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub src: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub fstype: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub opts: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub dump: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub passno: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub fstab: Option<String>,
    #[serde(default = "yes")]
    pub boot: Bool,
    #[serde(default)]
    pub backup: Bool,
    #[serde(default)]
    pub opts_no_log: Bool,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub state: Option<String>,
}

/// The fstab entry wanted, as Ansible's `args` holds it (also its return values).
#[derive(Debug, Clone)]
struct Entry {
    name: String,
    src: Option<String>,
    fstype: Option<String>,
    opts: String,
    dump: String,
    passno: String,
    fstab: String,
    boot: &'static str,
}

impl Params {
    fn state(&self) -> &str {
        self.state.as_deref().unwrap_or_default()
    }

    fn entry(&self) -> Entry {
        let mut opts = self.opts.clone().unwrap_or_else(|| "defaults".into());
        let mut boot = "yes";
        // `boot: false` adds `noauto`, unless the options have it already.
        if !self.boot.0 && !opts.split(',').any(|o| o == "noauto") {
            boot = "no";
            opts.push_str(",noauto");
        }
        Entry {
            name: crate::fs::expand_user(self.path.as_deref().unwrap_or_default())
                .display()
                .to_string(),
            src: self.src.clone(),
            fstype: self.fstype.clone(),
            opts,
            dump: self.dump.clone().unwrap_or_else(|| "0".into()),
            passno: self.passno.clone().unwrap_or_else(|| "0".into()),
            fstab: self.fstab.clone().unwrap_or_else(|| "/etc/fstab".into()),
            boot,
        }
    }
}

/// fstab's escapes for the characters its fields cannot hold.
fn escape(v: &str) -> String {
    v.replace('\\', "\\134")
        .replace(' ', "\\040")
        .replace('&', "\\046")
}

impl Entry {
    fn line(&self) -> String {
        format!(
            "{} {} {} {} {} {}\n",
            escape(self.src.as_deref().unwrap_or_default()),
            escape(&self.name),
            escape(self.fstype.as_deref().unwrap_or_default()),
            escape(&self.opts),
            escape(&self.dump),
            escape(&self.passno)
        )
    }

    /// Whether an fstab line with these fields is this entry's: same mount point, and for swap
    /// (mount point `none`) the same source too.
    fn owns(&self, fields: &[&str], name: &str) -> bool {
        fields[1] == name
            && !(self.src.is_some()
                && fields[1] == "none"
                && fields[2] == "swap"
                && Some(fields[0]) != self.src.as_deref())
    }

    fn result(&self) -> Map<String, Value> {
        let mut r = Map::new();
        r.insert("name".into(), json!(self.name));
        r.insert("opts".into(), json!(self.opts));
        r.insert("dump".into(), json!(self.dump));
        r.insert("passno".into(), json!(self.passno));
        r.insert("fstab".into(), json!(self.fstab));
        r.insert("boot".into(), json!(self.boot));
        r.insert("backup_file".into(), json!(""));
        if let Some(s) = &self.src {
            r.insert("src".into(), json!(s));
        }
        if let Some(t) = &self.fstype {
            r.insert("fstype".into(), json!(t));
        }
        r
    }
}

/// The lines of fstab, each ending in a line break (Ansible adds one to a last line without).
fn fstab_lines(text: &str) -> Vec<String> {
    text.split_inclusive('\n')
        .map(|l| {
            if l.ends_with('\n') {
                l.to_string()
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

/// fstab with the entry set: its lines rewritten when a field differs, appended when missing.
/// `None` when nothing changes.
fn set_entry(text: &str, e: &Entry) -> Option<String> {
    let name = escape(&e.name);
    let wanted = [
        escape(e.src.as_deref().unwrap_or_default()),
        escape(e.fstype.as_deref().unwrap_or_default()),
        escape(&e.opts),
        escape(&e.dump),
        escape(&e.passno),
    ];
    let mut out = String::new();
    let (mut exists, mut changed) = (false, false);
    for line in fstab_lines(text) {
        let trimmed = line.trim();
        let fields: Vec<&str> = line
            .split('#')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        if trimmed.is_empty()
            || trimmed.starts_with('#')
            || !(4..=6).contains(&fields.len())
            || !e.owns(&fields, &name)
        {
            out.push_str(&line);
            continue;
        }
        exists = true;
        // A line without dump or passno always differs (Ansible compares its number 0 with
        // the text "0").
        let have = [0, 2, 3, 4, 5].map(|i| fields.get(i).copied());
        if have
            .iter()
            .zip(&wanted)
            .any(|(h, w)| *h != Some(w.as_str()))
        {
            changed = true;
        }
        if changed {
            out.push_str(&e.line());
        } else {
            out.push_str(&line);
        }
    }
    if !exists {
        out.push_str(&e.line());
        changed = true;
    }
    changed.then_some(out)
}

/// fstab without the entry's lines (only six-field lines count, as in Ansible); `None` when it
/// has none.
fn unset_entry(text: &str, e: &Entry) -> Option<String> {
    let name = escape(&e.name);
    let mut out = String::new();
    let mut changed = false;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim();
        let fields: Vec<&str> = line.split_whitespace().collect();
        if trimmed.is_empty()
            || trimmed.starts_with('#')
            || fields.len() != 6
            || !e.owns(&fields, &name)
        {
            out.push_str(line);
            continue;
        }
        changed = true;
    }
    changed.then_some(out)
}

/// Python's `os.path.ismount`: a different device than the parent, or the same inode as it.
fn ismount(path: &Path) -> bool {
    let Ok(m) = std::fs::symlink_metadata(path) else {
        return false;
    };
    if m.file_type().is_symlink() {
        return false;
    }
    let Ok(parent) = std::fs::symlink_metadata(path.join("..")) else {
        return false;
    };
    m.dev() != parent.dev() || m.ino() == parent.ino()
}

/// `/proc/self/mountinfo` as Ansible reads it: mount point → the source it computes (the
/// mounted root, under the parent mount's point, for a mount whose parent is known).
fn linux_mounts() -> HashMap<String, String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    struct Rec {
        parent: u64,
        root: String,
        dst: String,
        src: String,
    }
    let mut info: HashMap<u64, Rec> = HashMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 7 {
            continue;
        }
        let (Ok(id), Ok(parent)) = (f[0].parse(), f[1].parse()) else {
            continue;
        };
        info.insert(
            id,
            Rec {
                parent,
                root: f[3].to_string(),
                dst: f[4].to_string(),
                src: f[f.len() - 2].to_string(),
            },
        );
    }
    let mut mounts = HashMap::new();
    for m in info.values() {
        let src = match info.get(&m.parent).filter(|_| m.parent != 1) {
            Some(p) => {
                let mut root = m.root.clone();
                if p.root.len() > 1 && root.starts_with(&format!("{}/", p.root)) {
                    root = root[p.root.len()..].to_string();
                }
                if p.dst != "/" {
                    root = format!("{}{root}", p.dst);
                }
                root
            }
            None => m.src.clone(),
        };
        mounts.insert(m.dst.clone(), src);
    }
    mounts
}

#[derive(Debug)]
pub struct State {
    fstab: ConfFile,
    /// Whether something is mounted at the path (`ismount`, or a bind mount of `src`).
    mounted: bool,
    path_exists: bool,
    /// `ephemeral` on a mounted path: whether `src` is what is mounted there.
    same_src: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Copy fstab aside before rewriting it (`backup: true`).
    MakeBackup,
    /// Create the mount point's missing directories.
    MakeDirs,
    /// Rewrite fstab.
    WriteFstab(String),
    Mount,
    Umount,
    /// `mount -o remount`, falling back to umount + mount.
    Remount,
    /// Remove the (empty) mount point directory (`absent`).
    Rmdir,
}

/// What names the mount after `mount [-o ...]`: the fstab to read (`-T`, unless it is
/// /etc/fstab), or for `ephemeral` everything on the command line.
fn source_args(e: &Entry, ephemeral: bool) -> Vec<String> {
    let mut argv = Vec::new();
    if ephemeral {
        argv.extend(["-t".to_string(), e.fstype.clone().unwrap_or_default()]);
        if e.opts != "defaults" {
            argv.extend(["-o".to_string(), e.opts.clone()]);
        }
        argv.push(e.src.clone().unwrap_or_default());
    } else if e.fstab != "/etc/fstab" {
        argv.extend(["-T".to_string(), e.fstab.clone()]);
    }
    argv.push(e.name.clone());
    argv
}

fn mount_argv(e: &Entry, ephemeral: bool) -> Vec<String> {
    let mut argv = vec!["mount".to_string()];
    argv.extend(source_args(e, ephemeral));
    argv
}

fn run_argv(argv: &[String]) -> Result<(i32, String), ModuleError> {
    let refs: Vec<&str> = argv.iter().map(String::as_str).collect();
    let ran = run_c(&refs)?;
    Ok((ran.rc, format!("{}{}", ran.stdout, ran.stderr)))
}

fn umount(name: &str) -> Result<(), ModuleError> {
    let (rc, msg) = run_argv(&["umount".into(), name.into()])?;
    if rc != 0 {
        return Err(ModuleError::failed(format!(
            "Error unmounting {name}: {msg}"
        )));
    }
    Ok(())
}

/// `mount -o remount[,opts]`; when it fails, umount and mount (a remount with options
/// that fails is an error, as in Ansible).
fn remount(e: &Entry, with_opts: bool, ephemeral: bool) -> Result<(i32, String), ModuleError> {
    let mut argv = vec!["mount".to_string(), "-o".to_string()];
    argv.push(if with_opts && e.opts != "defaults" {
        format!("remount,{}", e.opts)
    } else {
        "remount".into()
    });
    argv.extend(source_args(e, ephemeral));
    let (rc, _) = run_argv(&argv)?;
    if rc == 0 {
        return Ok((0, String::new()));
    }
    if with_opts && e.opts != "defaults" {
        return Err(ModuleError::failed(
            "Options were specified with remounted, but the remount command failed. Failing \
             in order to prevent an unexpected mount result. Try replacing this command with a \
             \"state: unmounted\" followed by a \"state: mounted\" using the full desired mount \
             options instead.",
        ));
    }
    let (rc, msg) = run_argv(&["umount".into(), e.name.clone()])?;
    if rc != 0 {
        return Ok((rc, msg));
    }
    run_argv(&mount_argv(e, ephemeral))
}

/// Whether `src` is what is mounted at the entry's path: the source `/proc/self/mountinfo`
/// gives, or a `src on path` line of `mount -v`.
fn same_source(e: &Entry, mounts: &HashMap<String, String>) -> Result<bool, ModuleError> {
    let src = e.src.as_deref().unwrap_or_default();
    if mounts.get(&e.name).is_some_and(|s| s == src) {
        return Ok(true);
    }
    let ran = run_c(&["mount", "-v"])?;
    if ran.stdout.is_empty() {
        return Err(ModuleError::failed(
            "Unable to retrieve mount info with command 'mount -v'",
        ));
    }
    Ok(ran.stdout.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 2 && f[0] == src && f[2] == e.name
    }))
}

impl Module for Mount {
    type Params = Params;
    type State = State;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if p.path.is_none() {
            return Err(ModuleError::Params(
                "missing required arguments: path".into(),
            ));
        }
        let Some(state) = p.state.as_deref() else {
            return Err(ModuleError::Params(
                "missing required arguments: state".into(),
            ));
        };
        if is_template(state) {
            return Ok(());
        }
        if !STATES.contains(&state) {
            return Err(ModuleError::Params(format!(
                "value of state must be one of: {}, got: {state}",
                STATES.join(", ")
            )));
        }
        if p.opts_no_log.0 {
            return Err(ModuleError::Params(
                "`opts_no_log` is not supported by fixpoint's mount; use the task's `no_log`"
                    .into(),
            ));
        }
        if matches!(state, "mounted" | "present" | "ephemeral") {
            let missing: Vec<&str> = [("src", &p.src), ("fstype", &p.fstype)]
                .iter()
                .filter(|(_, v)| v.is_none())
                .map(|(k, _)| *k)
                .collect();
            if !missing.is_empty() {
                return Err(ModuleError::Params(format!(
                    "state is {state} but all of the following are missing: {}",
                    missing.join(", ")
                )));
            }
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<State, ModuleError> {
        let e = p.entry();
        let name = Path::new(&e.name);
        let mounts = linux_mounts();
        let is_mount = ismount(name);
        let mounted = is_mount
            || mounts
                .get(&e.name)
                .is_some_and(|src| match (p.state(), &e.src) {
                    // `mounted` and `ephemeral` ask for a bind mount of this very source; the
                    // others for any.
                    ("mounted" | "ephemeral", Some(want)) => src == want,
                    _ => true,
                });
        let same_src = p.state() == "ephemeral"
            && (is_mount || mounts.contains_key(&e.name))
            && same_source(&e, &mounts)?;
        Ok(State {
            fstab: ConfFile::probe(&PathBuf::from(&e.fstab))?,
            mounted,
            path_exists: name.exists(),
            same_src,
        })
    }

    fn plan(p: &Params, st: &State, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let e = p.entry();
        let mut plan = Plan::new();
        plan.result = e.result();
        let text = st.fstab.text.as_deref().unwrap_or_default();
        let write = |plan: &mut Plan<Action>, new: String| {
            if ctx.diff {
                plan.diff.content.push(st.fstab.diff(&new));
            }
            plan.actions.push(Action::WriteFstab(new));
        };
        match p.state() {
            "present" => {
                if let Some(new) = set_entry(text, &e) {
                    write(&mut plan, new);
                }
            }
            "absent_from_fstab" => {
                if let Some(new) = unset_entry(text, &e) {
                    write(&mut plan, new);
                }
            }
            "absent" => {
                if let Some(new) = unset_entry(text, &e) {
                    write(&mut plan, new);
                    if st.mounted {
                        plan.diff.attr(&e.name, "mounted", "yes", "no");
                        plan.actions.push(Action::Umount);
                    }
                    if st.path_exists {
                        plan.diff.attr(&e.name, "state", "directory", "absent");
                        plan.actions.push(Action::Rmdir);
                    }
                }
            }
            "unmounted" => {
                if st.mounted {
                    plan.diff.attr(&e.name, "mounted", "yes", "no");
                    plan.actions.push(Action::Umount);
                }
            }
            "remounted" => {
                plan.diff.attr(&e.name, "mounted", "yes", "remounted");
                plan.actions.push(Action::Remount);
            }
            "mounted" => {
                if !st.path_exists {
                    plan.diff.attr(&e.name, "state", "absent", "directory");
                    plan.actions.push(Action::MakeDirs);
                }
                let fstab_changed = match set_entry(text, &e) {
                    Some(new) => {
                        write(&mut plan, new);
                        true
                    }
                    None => false,
                };
                if st.mounted {
                    if fstab_changed {
                        plan.diff.attr(&e.name, "mounted", "yes", "remounted");
                        plan.actions.push(Action::Remount);
                    }
                } else {
                    plan.diff.attr(&e.name, "mounted", "no", "yes");
                    plan.actions.push(Action::Mount);
                }
            }
            "ephemeral" => {
                if !st.path_exists {
                    plan.diff.attr(&e.name, "state", "absent", "directory");
                    plan.actions.push(Action::MakeDirs);
                }
                if !st.mounted {
                    plan.diff.attr(&e.name, "mounted", "no", "yes");
                    plan.actions.push(Action::Mount);
                } else if st.same_src {
                    // Ansible remounts an ephemeral mount of the same source every time.
                    plan.diff.attr(&e.name, "mounted", "yes", "remounted");
                    plan.actions.push(Action::Remount);
                } else {
                    return Err(ModuleError::failed(
                        "Ephemeral mount point is already mounted with a different source than \
                         the specified one. Failing in order to prevent an unwanted unmount or \
                         override operation. Try replacing this command with a \"state: \
                         unmounted\" followed by a \"state: ephemeral\", or use a different \
                         destination path.",
                    ));
                }
            }
            other => {
                return Err(ModuleError::Params(format!(
                    "value of state must be one of: {}, got: {other}",
                    STATES.join(", ")
                )))
            }
        }
        if p.backup.0
            && plan
                .actions
                .iter()
                .any(|a| matches!(a, Action::WriteFstab(_)))
        {
            plan.actions.insert(0, Action::MakeBackup);
        }
        Ok(plan)
    }

    fn apply(
        p: &Params,
        st: State,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        let e = p.entry();
        let mut out = Map::new();
        let mut created: Vec<PathBuf> = Vec::new();
        let mut wrote = false;
        // A failed mount puts fstab back and removes the directories made for it, as Ansible.
        let undo = |created: &[PathBuf], wrote: bool| {
            if wrote {
                if let Some(old) = &st.fstab.text {
                    let _ = crate::fs::atomic_write_path(
                        Path::new(&e.fstab),
                        old.as_bytes(),
                        &crate::fs::Attrs::default(),
                        None,
                    );
                }
            }
            for d in created.iter().rev() {
                let _ = std::fs::remove_dir(d);
            }
        };
        for action in &plan.actions {
            match action {
                Action::MakeBackup => {
                    if st.fstab.text.is_some() {
                        let b = crate::fs::backup_file(&st.fstab.at)?;
                        out.insert("backup_file".into(), json!(b));
                    }
                }
                Action::MakeDirs => {
                    let mut cur = PathBuf::new();
                    for c in Path::new(&e.name).components() {
                        cur.push(c);
                        if !cur.exists() {
                            std::fs::create_dir(&cur).map_err(|err| {
                                undo(&created, wrote);
                                ModuleError::failed(format!("Error making dir {}: {err}", e.name))
                            })?;
                            created.push(cur.clone());
                        }
                    }
                }
                Action::WriteFstab(text) => {
                    st.fstab.write(text)?;
                    wrote = true;
                }
                Action::Mount | Action::Remount => {
                    let ephemeral = p.state() == "ephemeral";
                    let (rc, msg) = if *action == Action::Mount {
                        run_argv(&mount_argv(&e, ephemeral))?
                    } else {
                        remount(&e, p.state() == "remounted", ephemeral)?
                    };
                    if rc != 0 {
                        if p.state() == "remounted" {
                            return Err(ModuleError::failed(format!(
                                "Error remounting {}: {msg}",
                                e.name
                            )));
                        }
                        undo(&created, wrote);
                        return Err(ModuleError::failed(format!(
                            "Error mounting {}: {msg}",
                            e.name
                        )));
                    }
                }
                Action::Umount => umount(&e.name)?,
                Action::Rmdir => std::fs::remove_dir(&e.name)
                    .map_err(|err| ModuleError::failed(format!("Error rmdir {}: {err}", e.name)))?,
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check_params;

    fn entry(v: Value) -> Entry {
        serde_json::from_value::<Params>(v).unwrap().entry()
    }

    #[test]
    fn set_appends_rewrites_and_keeps_the_rest() {
        let e = entry(
            json!({"path": "/mnt/a b", "src": "/dev/x", "fstype": "ext4",
            "state": "present"}),
        );
        assert_eq!(e.line(), "/dev/x /mnt/a\\040b ext4 defaults 0 0\n");
        let text = "# c\n\n/dev/y / ext4 defaults 0 1\n";
        let added = set_entry(text, &e).unwrap();
        assert_eq!(added, format!("{text}{}", e.line()));
        assert_eq!(set_entry(&added, &e), None);
        // A differing field rewrites the line in place; a four-field line always differs.
        let e2 = entry(
            json!({"path": "/mnt/a b", "src": "/dev/x", "fstype": "ext4",
            "opts": "ro", "state": "present"}),
        );
        assert_eq!(
            set_entry(&added, &e2).unwrap(),
            format!("{text}/dev/x /mnt/a\\040b ext4 ro 0 0\n")
        );
        let short = "/dev/x /mnt/a\\040b ext4 defaults";
        assert_eq!(set_entry(short, &e).unwrap(), e.line());
    }

    #[test]
    fn unset_takes_only_six_field_lines() {
        let e = entry(json!({"path": "/srv", "state": "absent"}));
        let text = "/dev/a /srv ext4 defaults 0 0\n/dev/b /srv ext4 defaults\n# /srv\n";
        assert_eq!(
            unset_entry(text, &e).unwrap(),
            "/dev/b /srv ext4 defaults\n# /srv\n"
        );
        assert_eq!(unset_entry("# none\n", &e), None);
    }

    #[test]
    fn boot_false_adds_noauto() {
        let e = entry(
            json!({"path": "/srv", "src": "a", "fstype": "b", "boot": false,
            "opts": "ro", "state": "present"}),
        );
        assert_eq!((e.opts.as_str(), e.boot), ("ro,noauto", "no"));
    }

    #[test]
    fn bad_params_are_refused() {
        let refused = |v: Value, words: &str| {
            let e = check_params("mount", &v).unwrap_err();
            assert!(e.msg.contains(words), "{e}");
        };
        refused(json!({"path": "/x"}), "state");
        refused(
            json!({"path": "/x", "state": "mounted", "src": "a"}),
            "fstype",
        );
        refused(json!({"path": "/x", "state": "gone"}), "must be one of");
        refused(
            json!({"path": "/x", "state": "ephemeral", "src": "a"}),
            "fstype",
        );
        refused(
            json!({"path": "/x", "state": "unmounted", "opts_no_log": true}),
            "not supported",
        );
        assert!(check_params("mount", &json!({"name": "/x", "state": "unmounted"})).is_ok());
    }

    #[test]
    fn the_root_is_a_mount_point() {
        assert!(ismount(Path::new("/")));
        assert!(!ismount(Path::new("/nonexistent-fptest")));
    }
}
