//! A small fixture for driving the real binary: a temp dir, a playbook, a run, its output.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub struct Fx {
    pub dir: tempfile::TempDir,
}

/// What a run printed and how it exited.
#[derive(Debug)]
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<std::process::Output> for Out {
    fn from(out: std::process::Output) -> Out {
        Out {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Out {
    /// Assert the exit status, showing the output when it is wrong.
    pub fn expect(&self, code: i32) -> &Out {
        assert_eq!(
            self.code, code,
            "unexpected exit status\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// JSON events of a `--format json` run.
    pub fn events(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str(l).expect("each line is JSON"))
            .collect()
    }

    /// The status of every task event, in order.
    pub fn statuses(&self) -> Vec<String> {
        self.events()
            .into_iter()
            .filter(|e| e["event"] == "task")
            .map(|e| e["status"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// The task events with this task name.
    pub fn task_events(&self, task: &str) -> Vec<serde_json::Value> {
        self.events()
            .into_iter()
            .filter(|e| e["event"] == "task" && e["task"] == task)
            .collect()
    }

    /// The last recap line (under `--twice`, the second pass's).
    pub fn recap(&self) -> serde_json::Value {
        self.events()
            .into_iter()
            .rev()
            .find(|e| e["event"] == "recap")
            .expect("a recap line")
    }

    /// The names of the task results, in output order.
    pub fn task_names(&self) -> Vec<String> {
        self.events()
            .into_iter()
            .filter(|e| e["event"] == "task")
            .map(|e| e["task"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// The status of the only result of a task (asserts there is exactly one).
    pub fn status_of(&self, task: &str) -> String {
        let evs = self.task_events(task);
        assert_eq!(
            evs.len(),
            1,
            "expected one result for {task}: {}",
            self.stdout
        );
        evs[0]["status"].as_str().unwrap_or_default().to_string()
    }
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_fixpoint")
}

impl Fx {
    pub fn new() -> Fx {
        Fx {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// This fixture's own journal/lock directory: tests run in parallel, and every local run
    /// as root would otherwise share /var/lib/fixpoint and its lock.
    pub fn state_dir(&self) -> PathBuf {
        self.path("state")
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// The text of a file under the fixture directory.
    pub fn read(&self, rel: &str) -> String {
        let p = self.path(rel);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    pub fn write(&self, rel: &str, content: &str) -> PathBuf {
        let p = self.path(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&p, content).expect("write");
        p
    }

    /// Write `site.yml` with one play on localhost (no facts) running `tasks` (YAML, indented 4).
    pub fn play(&self, tasks: &str) -> PathBuf {
        self.play_with("", tasks)
    }

    /// Like `play`, with extra play-level YAML (e.g. handlers) after the tasks.
    pub fn play_with(&self, extra: &str, tasks: &str) -> PathBuf {
        let text = format!(
            "- hosts: localhost\n  gather_facts: false\n  vars:\n    base: {}\n    fixpoint_state_dir: {}\n  tasks:\n{}\n{}",
            self.path("t").display(),
            self.state_dir().display(),
            tasks,
            extra
        );
        self.write("site.yml", &text)
    }

    /// Run the binary with these arguments, in the fixture directory.
    pub fn run(&self, args: &[&str]) -> Out {
        let out = Command::new(bin())
            .args(args)
            .current_dir(self.dir.path())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .expect("run fixpoint");
        Out::from(out)
    }

    /// Start the binary with these arguments, in the fixture directory, without waiting for
    /// it: for a run the test acts on while it goes. Its stdout and stderr are piped.
    pub fn spawn(&self, args: &[&str]) -> std::process::Child {
        Command::new(bin())
            .args(args)
            .current_dir(self.dir.path())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start fixpoint")
    }

    /// `fixpoint apply --format json site.yml` plus extra args.
    pub fn apply(&self, extra: &[&str]) -> Out {
        let mut args = vec!["apply", "--format", "json"];
        args.extend_from_slice(extra);
        args.push("site.yml");
        self.run(&args)
    }
}

/// Identity of a file for "nothing was written": inode and mtime (ns).
pub fn stamp(p: &Path) -> (u64, i64, i64) {
    let m = std::fs::symlink_metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (m.ino(), m.mtime(), m.mtime_nsec())
}

/// Every path under `dir` with its type, mode, owner and content (or link target): a
/// byte-for-byte picture of a tree, to prove check mode changed nothing.
pub fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    if !dir.exists() {
        return out;
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m = std::fs::symlink_metadata(&p).expect("stat");
        let desc = if m.file_type().is_symlink() {
            format!("link -> {}", std::fs::read_link(&p).unwrap().display())
        } else if m.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
            format!(
                "dir {:o} {}:{} mtime={}",
                m.mode(),
                m.uid(),
                m.gid(),
                m.mtime_nsec()
            )
        } else {
            format!(
                "file {:o} {}:{} mtime={}.{} {:?}",
                m.mode(),
                m.uid(),
                m.gid(),
                m.mtime(),
                m.mtime_nsec(),
                std::fs::read(&p).unwrap()
            )
        };
        out.insert(p, desc);
    }
    out
}

/// Check mode reports `changed` and leaves `observe()` as it was; the run changes it; the rerun
/// is all `ok` and leaves it. `apply` runs the playbook already written, with extra flags.
/// Returns the first run's output (`-v`: with the return values).
pub fn converge(apply: &dyn Fn(&[&str]) -> Out, observe: &dyn Fn() -> String) -> Out {
    let before = observe();
    let check = apply(&["--check"]);
    check.expect(0);
    assert!(
        check.statuses().iter().all(|s| s == "changed"),
        "check mode must report the change: {}",
        check.stdout
    );
    assert_eq!(observe(), before, "check mode changed the host");
    let first = apply(&["-v"]);
    first.expect(0);
    assert!(
        first.statuses().iter().all(|s| s == "changed"),
        "first run must change: {}",
        first.stdout
    );
    let after = observe();
    assert_ne!(after, before, "the run changed nothing observable");
    let second = apply(&[]);
    second.expect(0);
    assert!(
        second.statuses().iter().all(|s| s == "ok"),
        "second run must change nothing: {}",
        second.stdout
    );
    assert_eq!(observe(), after, "second run changed the host");
    first
}
