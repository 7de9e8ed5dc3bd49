//! `stat`'s `mimetype` and `charset`: what the host's `file --mime-type --mime-encoding` says,
//! remembered across runs for files that have not changed since it said it.
//!
//! Running `file` costs a process and the load of its whole magic database (~7 ms of CPU) for
//! every `stat`, converged or not; on the reference playbook it was a third of what a converged
//! run cost the hosts beyond the SSH connection itself. The agent gives this module a cache file
//! in its state directory ([`use_file`], loaded on first use, written back by [`save`] at the end
//! of the run, under the host lock). An answer is reused only when it cannot differ from what
//! `file` would say now:
//! - only for regular files and directories (not links, devices, fifos) on filesystems whose
//!   times change with every write of the content (ext4, xfs, btrfs, tmpfs, overlayfs, f2fs,
//!   zfs: not procfs or sysfs, whose content changes under fixed times);
//! - keyed by device and inode, and valid while size, mtime and ctime (nanoseconds) are the
//!   same: any write of the content moves ctime, which no one can set back;
//! - only recorded when the file's ctime was older than the filesystem's timestamp granularity
//!   when `file` read it, and unchanged after, so a write in the same clock tick as the answer
//!   cannot hide behind an unchanged ctime ("racily clean", as git calls it);
//! - dropped whole when the tool may answer differently: another `file` version or binary,
//!   another magic database (the files `file --version` names, and their `.mgc`), another user
//!   (what it may read), or `MAGIC` / `POSIXLY_CORRECT` in the environment. What `file
//!   --version` said is kept too, and asked again only when the `file` binary changed: a run
//!   whose answers all come from the cache starts no process.
//!
//! A link whose target exists needs no `file` at all: its answer is fixed (see [`of`]).
//!
//! The cache is never needed for correctness: a missing, unreadable or foreign file is an empty
//! cache, and it is written without fsync (a crash loses answers, which are asked again).

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::Metadata;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// The directories searched for `file` besides `PATH`, as Ansible's `get_bin_path` does.
const SBIN_DIRS: &[&str] = &["/sbin", "/usr/sbin", "/usr/local/sbin"];

/// More entries than this and the ones this run did not use are dropped.
const MAX_ENTRIES: usize = 4096;

/// Filesystems whose ctime moves with every change of a file's content (`statfs` `f_type`).
const TIMED_FS: &[i64] = &[
    0xEF53,      // ext2/3/4
    0x5846_5342, // xfs
    0x9123_683E, // btrfs
    0x0102_1994, // tmpfs
    0x794C_7630, // overlayfs
    0xF2F5_2010, // f2fs
    0x2FC1_2FC1, // zfs
];

/// One remembered answer and the version of the file it is about.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
struct Entry {
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    mime: String,
    charset: String,
}

#[derive(Default, Serialize, Deserialize)]
struct Stored {
    /// What answered: see [`tool_identity`].
    tool: String,
    /// The stamp of the `file` binary (see [`stamp`]) and what its `--version` said: asked
    /// again only when the binary changed, which saves a process on every run.
    #[serde(default)]
    version: Option<(String, String)>,
    /// `"dev:ino"` → answer.
    entries: HashMap<String, Entry>,
}

/// Set only by the agent ([`use_file`]): elsewhere (unit tests, the controller) `file` answers
/// every time.
struct Cache {
    /// Where the agent keeps it.
    file: PathBuf,
    /// Read from `file` (or found unusable) and checked against this process's tool.
    loaded: Option<Stored>,
    /// Keys read or written by this process (kept when the cache is trimmed).
    used: std::collections::HashSet<String>,
    dirty: bool,
}

static CACHE: Mutex<Option<Cache>> = Mutex::new(None);

/// The agent's cache file for this run (its state directory's); loaded on first use.
pub fn use_file(path: PathBuf) {
    let mut c = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    *c = Some(Cache {
        file: path,
        loaded: None,
        used: Default::default(),
        dirty: false,
    });
}

/// Write the cache back when this run added to it: to a temp file beside it, then renamed over.
pub fn save() {
    let mut guard = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(c) = guard.as_mut() else { return };
    let (file, Some(stored), true) = (&c.file, &mut c.loaded, c.dirty) else {
        return;
    };
    if stored.entries.len() > MAX_ENTRIES {
        stored.entries.retain(|k, _| c.used.contains(k));
    }
    let Ok(text) = serde_json::to_vec(stored) else {
        return;
    };
    let tmp = file.with_extension(format!("tmp.{}", std::process::id()));
    // Private as the rest of the state directory: it names the host's files.
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(&text));
    if written.is_ok() && std::fs::rename(&tmp, file).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    c.dirty = false;
}

/// `mimetype` and `charset` as `file --mime-type --mime-encoding` reports them for `path`, or
/// `unknown` when the host has no `file` or it fails (as in Ansible).
pub fn of(path: &Path) -> (String, String) {
    let Some(file) = find_file() else {
        return unknown();
    };
    // A link whose target exists is `inode/symlink; charset=binary` to `file`, whatever its
    // magic database, unless POSIXLY_CORRECT makes it follow links: said without a process.
    // (A dangling link's answer has no charset: `file` is asked.)
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if is_link && path.exists() && std::env::var_os("POSIXLY_CORRECT").is_none() {
        return ("inode/symlink".into(), "binary".into());
    }
    let key = std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| cacheable(path, m))
        .map(|m| (format!("{}:{}", m.dev(), m.ino()), m));
    let mut guard = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    let (Some(cache), Some((key, before))) = (guard.as_mut(), key) else {
        drop(guard);
        return run_file(&file, path).unwrap_or_else(unknown);
    };
    if cache.loaded.is_none() {
        let (stored, asked) = load(&cache.file, &file);
        cache.loaded = Some(stored);
        // A version asked anew is kept for the next run even when no answer is added.
        cache.dirty |= asked;
    }
    let stored = cache.loaded.as_mut().expect("loaded above");
    if let Some(e) = stored.entries.get(&key).filter(|e| e.is_of(&before)) {
        cache.used.insert(key);
        return (e.mime.clone(), e.charset.clone());
    }
    let asked = SystemTime::now();
    let Some((mime, charset)) = run_file(&file, path) else {
        return unknown();
    };
    let after = std::fs::symlink_metadata(path).ok();
    let entry = Entry {
        size: before.size(),
        mtime: (before.mtime(), before.mtime_nsec()),
        ctime: (before.ctime(), before.ctime_nsec()),
        mime: mime.clone(),
        charset: charset.clone(),
    };
    if after.is_some_and(|a| entry.is_of(&a) && settled(&a, asked)) {
        stored.entries.insert(key.clone(), entry);
        cache.used.insert(key);
        cache.dirty = true;
    }
    (mime, charset)
}

fn unknown() -> (String, String) {
    ("unknown".to_string(), "unknown".to_string())
}

fn find_file() -> Option<PathBuf> {
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path_var)
        .chain(SBIN_DIRS.iter().map(Into::into))
        .map(|d| d.join("file"))
        .find(|p| p.is_file())
}

/// `file --mime-type --mime-encoding <path>`, parsed.
fn run_file(file: &Path, path: &Path) -> Option<(String, String)> {
    let out = Command::new(file)
        .args(["--mime-type", "--mime-encoding"])
        .arg(path)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let out = String::from_utf8_lossy(&out.stdout);
    // `<path>: text/plain; charset=us-ascii`: the path itself may hold `:`, the answer does not.
    let answer = out.trim_end().rsplit_once(':').map_or("", |(_, a)| a);
    let (mime, charset) = answer.split_once(';')?;
    let charset = charset.split_once('=').map_or(charset, |(_, c)| c);
    Some((mime.trim().to_string(), charset.trim().to_string()))
}

impl Entry {
    fn is_of(&self, m: &Metadata) -> bool {
        self.size == m.size()
            && self.mtime == (m.mtime(), m.mtime_nsec())
            && self.ctime == (m.ctime(), m.ctime_nsec())
    }
}

/// A regular file or directory on a filesystem whose times follow its content.
fn cacheable(path: &Path, m: &Metadata) -> bool {
    (m.is_file() || m.is_dir()) && fs_type(path).is_some_and(|t| TIMED_FS.contains(&t))
}

/// `statfs`'s `f_type`, whose C type differs between platforms.
#[allow(clippy::unnecessary_cast)]
fn fs_type(path: &Path) -> Option<i64> {
    rustix::fs::statfs(path).ok().map(|s| s.f_type as i64)
}

/// The file's ctime was older, when `file` was started at `asked`, than a write in that same
/// clock tick could give it. Times with nanoseconds come from a clock that ticks at least every
/// 10 ms; whole seconds may mean a filesystem that keeps only seconds (ext4 with 128-byte
/// inodes).
fn settled(m: &Metadata, asked: SystemTime) -> bool {
    let grain_ns: i128 = if m.ctime_nsec() == 0 {
        2_000_000_000
    } else {
        50_000_000
    };
    let ctime = m.ctime() as i128 * 1_000_000_000 + m.ctime_nsec() as i128;
    let asked = asked
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    asked - ctime > grain_ns
}

/// The stored cache when it was made by the same tool, else an empty one for this tool; and
/// whether `file --version` had to be asked.
fn load(cache_file: &Path, file: &Path) -> (Stored, bool) {
    let stored = std::fs::read(cache_file)
        .ok()
        .and_then(|b| serde_json::from_slice::<Stored>(&b).ok());
    let binary = stamp(file);
    let known = stored
        .as_ref()
        .and_then(|s| s.version.clone())
        .filter(|(b, _)| *b == binary);
    let asked = known.is_none();
    let version = known.map_or_else(|| file_version(file), |(_, v)| v);
    let tool = tool_identity(file, &version);
    let mut stored = stored.filter(|s| s.tool == tool).unwrap_or(Stored {
        tool,
        version: None,
        entries: HashMap::new(),
    });
    stored.version = Some((binary, version));
    (stored, asked)
}

/// What `file --version` prints: its version and the magic database it reads.
fn file_version(file: &Path) -> String {
    Command::new(file)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// A file's device, inode, size and times (`None` when missing): what changes when it is
/// replaced or written.
fn stamp(f: &Path) -> String {
    let stamp = std::fs::metadata(f).ok().map(|m| {
        (
            m.dev(),
            m.ino(),
            m.size(),
            (m.mtime(), m.mtime_nsec()),
            (m.ctime(), m.ctime_nsec()),
        )
    });
    format!("{} {stamp:?}", f.display())
}

/// Everything `file`'s answer depends on besides the file: its version and binary, the magic
/// database it reads, the user it runs as, and the environment variables it reads.
fn tool_identity(file: &Path, version: &str) -> String {
    // "magic file from /etc/magic:/usr/share/misc/magic": each, and its compiled `.mgc`.
    let magic = version
        .lines()
        .find_map(|l| l.split_once(" from ").map(|(_, m)| m.to_string()))
        .unwrap_or_default();
    let mut id = format!("{version}\neuid {}\n", nix::unistd::geteuid());
    for var in ["MAGIC", "POSIXLY_CORRECT"] {
        id.push_str(&format!("{var}={:?}\n", std::env::var_os(var)));
    }
    let files = std::iter::once(file.to_path_buf()).chain(
        magic
            .split(':')
            .flat_map(|m| [PathBuf::from(m), PathBuf::from(format!("{m}.mgc"))]),
    );
    for f in files {
        id.push_str(&stamp(&f));
        id.push('\n');
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need_file() -> PathBuf {
        find_file().expect("these tests need the `file` command: apt-get install file")
    }

    /// Serialises the tests that use the process-wide cache.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn old(path: &Path) {
        let t = SystemTime::now() - std::time::Duration::from_secs(10);
        let f = std::fs::File::options().write(true).open(path).unwrap();
        f.set_times(std::fs::FileTimes::new().set_modified(t).set_accessed(t))
            .unwrap();
    }

    #[test]
    fn answers_are_reused_only_while_the_file_is_unchanged_and_settled() {
        let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        need_file();
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("mime-cache.json");
        let f = dir.path().join("a.txt");
        std::fs::write(&f, "hello\n").unwrap();
        use_file(cache.clone());
        // set_times moves ctime to now: a settled file is one whose ctime is older than the
        // grain, so wait past it by checking, not sleeping a fixed time.
        old(&f);
        while !settled(&std::fs::symlink_metadata(&f).unwrap(), SystemTime::now()) {
            std::thread::yield_now();
        }
        assert_eq!(of(&f), ("text/plain".into(), "us-ascii".into()));
        save();
        let stored: Stored = serde_json::from_slice(&std::fs::read(&cache).unwrap()).unwrap();
        // (Other tests' `stat`s in this process may have added theirs.)
        let m = std::fs::symlink_metadata(&f).unwrap();
        let key = format!("{}:{}", m.dev(), m.ino());
        assert!(stored.entries.contains_key(&key));

        // A new process (a new run) reuses it: shown by planting a different answer.
        let mut planted = stored;
        planted.entries.get_mut(&key).unwrap().mime = "x/planted".into();
        std::fs::write(&cache, serde_json::to_vec(&planted).unwrap()).unwrap();
        use_file(cache.clone());
        assert_eq!(of(&f).0, "x/planted");

        // Any write of the content moves ctime: asked again.
        std::fs::write(&f, [0u8, 1, 2, 255]).unwrap();
        assert_ne!(
            std::fs::symlink_metadata(&f).unwrap().ctime_nsec(),
            m.ctime_nsec()
        );
        assert_eq!(of(&f).0, "application/octet-stream");

        // Another tool (here: a stored identity that differs) empties the cache.
        let mut foreign = planted;
        foreign.tool = "file-0.0".into();
        std::fs::write(&cache, serde_json::to_vec(&foreign).unwrap()).unwrap();
        use_file(cache);
        assert_eq!(of(&f).0, "application/octet-stream");
        *CACHE.lock().unwrap() = None;
    }

    #[test]
    fn file_version_is_asked_again_only_when_the_binary_changed() {
        let file = need_file();
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("mime-cache.json");
        let (first, asked) = load(&cache, &file);
        assert!(asked, "no cache yet");
        let (_, version) = first.version.clone().unwrap();
        assert!(version.contains("magic file from"), "{version}");
        std::fs::write(&cache, serde_json::to_vec(&first).unwrap()).unwrap();
        let (again, asked) = load(&cache, &file);
        assert!(!asked, "the same binary: its stored version is reused");
        assert_eq!(again.tool, first.tool);
        // A stored answer for another binary (its stamp differs) is not trusted.
        let mut other = first;
        other.version = Some(("/usr/bin/file None".into(), "file-0.0\n".into()));
        std::fs::write(&cache, serde_json::to_vec(&other).unwrap()).unwrap();
        let (fresh, asked) = load(&cache, &file);
        assert!(asked);
        assert_eq!(fresh.version.unwrap().1, version);
    }

    #[test]
    fn an_answer_is_kept_only_when_the_file_changed_before_the_current_tick() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, "x").unwrap();
        let m = std::fs::symlink_metadata(&f).unwrap();
        let changed =
            UNIX_EPOCH + std::time::Duration::new(m.ctime() as u64, m.ctime_nsec() as u32);
        let ms = std::time::Duration::from_millis;
        assert!(!settled(&m, changed + ms(10)));
        assert!(settled(&m, changed + ms(60)));
    }

    #[test]
    fn a_link_is_answered_as_file_answers_it() {
        let file = need_file();
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("t");
        std::fs::write(&target, "text\n").unwrap();
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(of(&link), run_file(&file, &link).unwrap());
        assert_eq!(of(&link), ("inode/symlink".into(), "binary".into()));
    }

    #[test]
    fn links_and_pseudo_files_are_always_asked() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("l");
        std::os::unix::fs::symlink("/etc/hostname", &link).unwrap();
        let m = std::fs::symlink_metadata(&link).unwrap();
        assert!(!cacheable(&link, &m));
        let cpuinfo = Path::new("/proc/cpuinfo");
        assert!(!cacheable(
            cpuinfo,
            &std::fs::symlink_metadata(cpuinfo).unwrap()
        ));
        let here = dir.path();
        let on_tmp = fs_type(here).unwrap();
        assert_eq!(
            cacheable(here, &std::fs::symlink_metadata(here).unwrap()),
            TIMED_FS.contains(&on_tmp)
        );
    }
}
