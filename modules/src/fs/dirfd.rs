//! Acting on a path that the host's users may be able to change, without being redirected: every
//! change goes through a directory file descriptor, never follows a symlink the probe did not
//! follow, and checks that the object is still the one the probe saw.
//!
//! The probe (or plan) turns a path into a [`Loc`]: the canonical path of its directory (no
//! symlink left in it, so the playbook's own links were followed once, as Ansible follows them),
//! the entry's name, and its device and inode. At apply time [`Dir::open`] reopens that directory
//! refusing any symlink on the way (`openat2` with `RESOLVE_NO_SYMLINKS` where the kernel has it,
//! else one `openat(O_NOFOLLOW)` per component), and [`Dir::entry`] pins the entry with
//! `O_PATH | O_NOFOLLOW`. Owner, mode and times are then set on the pinned inode itself, so a file
//! swapped for a link between probe and apply is refused, not followed. Temporary files and
//! backups are created `O_EXCL | O_NOFOLLOW`, mode 0600, with an unpredictable name, inside the
//! pinned directory.

use super::cas::{Found, IfChecksum};
use crate::ModuleError;
use nix::errno::Errno;
use nix::fcntl::{openat, AtFlags, OFlag};
use nix::sys::stat::{fstat, FileStat, Mode, SFlag};
use nix::sys::time::TimeSpec;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, Metadata};
use std::io::ErrorKind;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// Device and inode: which object a path named when it was probed.
pub type FileId = (u64, u64);

/// The identity of what `meta` describes.
pub fn id_of(meta: &Metadata) -> FileId {
    (meta.dev(), meta.ino())
}

/// Where an object is, fixed when it was probed: its directory with every symlink resolved, its
/// name in that directory, and its identity (`None` for an object the plan itself creates).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loc {
    pub dir: PathBuf,
    pub name: OsString,
    pub id: Option<FileId>,
    /// The task's `if_checksum`: the content the object must still have when it is changed,
    /// re-read immediately before the rename or attribute change (see `cas`).
    pub guard: Option<IfChecksum>,
}

impl Loc {
    /// This location, changed only while its content is `want` (`None`: unguarded).
    pub fn guarded(mut self, want: Option<&IfChecksum>) -> Loc {
        self.guard = want.cloned();
        self
    }
}

/// Locate `path` now: its parent directory is canonicalised (the links in the path as written
/// are followed here, once); directories that do not exist yet are kept by name after the
/// nearest one that does, so that the plan can create them without following anything.
pub fn locate(path: &Path, id: Option<FileId>) -> Result<Loc, ModuleError> {
    let (parent, name) = match (path.parent(), path.file_name()) {
        (Some(p), Some(n)) => (p, n.to_os_string()),
        // `/`, `.` or a path ending in `..`: the directory itself, as `.` of its canonical path.
        _ => (path, OsString::from(".")),
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let dir = match super::located::take(path) {
        Some(dir) => dir,
        None => canonical_prefix(parent)?,
    };
    Ok(Loc {
        dir,
        name,
        id,
        guard: None,
    })
}

/// [`locate`] `path` for the step about to run, and keep the directory found for the module's
/// own first `locate` of the same path (see `located`), which then reads no link again.
pub fn locate_for_step(path: &Path) -> Result<Loc, ModuleError> {
    let loc = locate(path, None)?;
    super::located::keep(path, &loc.dir);
    Ok(loc)
}

/// The canonical path of `dir`, or of its nearest existing ancestor followed by the missing names.
fn canonical_prefix(dir: &Path) -> Result<PathBuf, ModuleError> {
    let mut missing: Vec<&OsStr> = Vec::new();
    let mut cur = dir;
    loop {
        match fs::canonicalize(cur) {
            Ok(real) => {
                return Ok(missing.iter().rev().fold(real, |acc, n| acc.join(n)));
            }
            Err(e) if matches!(e.kind(), ErrorKind::NotFound) => {}
            Err(e) => return Err(ModuleError::io(cur, e)),
        }
        match (cur.parent(), cur.file_name()) {
            (Some(p), Some(n)) => {
                missing.push(n);
                cur = if p.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    p
                };
            }
            _ => return Err(ModuleError::io(dir, "no existing ancestor directory")),
        }
    }
}

/// A text for errors about `loc`.
fn shown(dir: &Path, name: &OsStr) -> PathBuf {
    if name == "." {
        dir.to_path_buf()
    } else {
        dir.join(name)
    }
}

/// An open directory, reached without following any symlink.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

/// `openat(2)` returning an owned descriptor.
fn open_at(dir: RawFd, name: &OsStr, flags: OFlag, mode: Mode) -> nix::Result<OwnedFd> {
    let fd = openat(Some(dir), name, flags | OFlag::O_CLOEXEC, mode)?;
    // SAFETY: `openat` just returned this descriptor and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The kernel lacks `openat2` (before 5.6) or a sandbox forbids it: walk component by component.
fn openat2_unavailable(e: Errno) -> bool {
    matches!(e, Errno::ENOSYS | Errno::EPERM | Errno::EOPNOTSUPP)
}

impl Dir {
    /// Open the directory `path` (absolute, or relative to the working directory) when no
    /// component of it is a symlink. `..` is allowed (it is not a link).
    pub fn open(path: &Path) -> Result<Dir, ModuleError> {
        Self::open_with(path, true)
    }

    /// Like [`Dir::open`], then check that it is still the directory with identity `id`.
    pub fn open_id(path: &Path, id: Option<FileId>) -> Result<Dir, ModuleError> {
        let d = Self::open(path)?;
        if let Some(want) = id {
            let st = fstat(d.fd.as_raw_fd()).map_err(|e| ModuleError::io(path, e))?;
            if (st.st_dev, st.st_ino) != want {
                return Err(changed(path));
            }
        }
        Ok(d)
    }

    /// `try_openat2: false` forces the component walk (tests use it to cover old kernels).
    fn open_with(path: &Path, try_openat2: bool) -> Result<Dir, ModuleError> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        if try_openat2 {
            let how = nix::fcntl::OpenHow::new().flags(flags).resolve(
                nix::fcntl::ResolveFlag::RESOLVE_NO_SYMLINKS
                    | nix::fcntl::ResolveFlag::RESOLVE_NO_MAGICLINKS,
            );
            match nix::fcntl::openat2(nix::libc::AT_FDCWD, path, how) {
                Ok(fd) => {
                    return Ok(Dir {
                        // SAFETY: `openat2` just returned this descriptor and nothing else owns it.
                        fd: unsafe { OwnedFd::from_raw_fd(fd) },
                        path: path.to_path_buf(),
                    });
                }
                Err(e) if openat2_unavailable(e) => {}
                Err(e) => return Err(open_error(path, e)),
            }
        }
        let comps = path.components();
        let start = if path.is_absolute() { "/" } else { "." };
        let mut fd = open_at(nix::libc::AT_FDCWD, OsStr::new(start), flags, Mode::empty())
            .map_err(|e| open_error(path, e))?;
        for c in comps {
            let name: &OsStr = match c {
                Component::RootDir | Component::CurDir => continue,
                Component::ParentDir => OsStr::new(".."),
                Component::Normal(n) => n,
                Component::Prefix(_) => continue,
            };
            fd = match open_at(fd.as_raw_fd(), name, flags, Mode::empty()) {
                Ok(next) => next,
                // O_DIRECTORY answers ENOTDIR before O_NOFOLLOW's ELOOP: say which it was.
                Err(Errno::ENOTDIR) if is_symlink_at(fd.as_raw_fd(), name) => {
                    return Err(open_error(path, Errno::ELOOP))
                }
                Err(e) => return Err(open_error(path, e)),
            };
        }
        Ok(Dir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// `mkdir -p path` (mode 0777 less the umask): every component is opened or created here
    /// without following a symlink, so a link planted on the way is refused.
    pub fn create_all(path: &Path) -> Result<Dir, ModuleError> {
        let start = if path.is_absolute() { "/" } else { "." };
        let mut dir = Dir::open(Path::new(start))?;
        for c in path.components() {
            let name: &OsStr = match c {
                Component::RootDir | Component::CurDir | Component::Prefix(_) => continue,
                Component::ParentDir => OsStr::new(".."),
                Component::Normal(n) => n,
            };
            if dir.entry(name)?.is_none() {
                dir.mkdir(name, 0o777)?;
            }
            dir = dir.subdir(name)?;
        }
        Ok(Dir {
            fd: dir.fd,
            path: path.to_path_buf(),
        })
    }

    /// The names in this directory (without `.` and `..`), sorted for a stable plan.
    pub fn names(&self) -> Result<Vec<OsString>, ModuleError> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let mut d = nix::dir::Dir::openat(Some(self.raw()), ".", flags, Mode::empty())
            .map_err(|e| ModuleError::io(&self.path, e))?;
        let mut out = Vec::new();
        for e in d.iter() {
            let e = e.map_err(|e| ModuleError::io(&self.path, e))?;
            let name = OsStr::from_bytes(e.file_name().to_bytes());
            if name != "." && name != ".." {
                out.push(name.to_os_string());
            }
        }
        out.sort();
        Ok(out)
    }

    /// Create the regular file `name` (mode 0666 less the umask); anything already there,
    /// including a symlink, is an error and is not opened.
    pub fn create_file(&self, name: &OsStr) -> Result<(), ModuleError> {
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW;
        open_at(self.raw(), name, flags, Mode::from_bits_truncate(0o666))
            .map(drop)
            .map_err(|e| ModuleError::io(self.at(name), format!("cannot create file: {e}")))
    }

    /// Remove the directory `name` and everything below it; a symlink inside is removed, never
    /// followed. (Through the descriptor's `/proc/self/fd` link, so the path up to here is the
    /// one pinned; std's `remove_dir_all` does the rest with `openat`/`unlinkat`.)
    pub fn remove_tree(&self, name: &OsStr) -> Result<(), ModuleError> {
        let sub = self.subdir(name)?;
        drop(sub);
        fs::remove_dir_all(proc_fd(self.raw()).join(name)).map_err(|e| {
            ModuleError::io(self.at(name), format!("cannot remove directory tree: {e}"))
        })
    }

    /// Remove the empty directory `name`.
    pub fn rmdir(&self, name: &OsStr) -> Result<(), ModuleError> {
        nix::unistd::unlinkat(
            Some(self.raw()),
            name,
            nix::unistd::UnlinkatFlags::RemoveDir,
        )
        .map_err(|e| ModuleError::io(self.at(name), format!("cannot remove directory: {e}")))
    }

    /// Create the symlink `name` holding `target`.
    pub fn symlink(&self, target: &Path, name: &OsStr) -> std::io::Result<()> {
        nix::unistd::symlinkat(target, Some(self.raw()), name).map_err(std::io::Error::from)
    }

    /// Create `name` as a hard link to `src` (a path; its last component is not followed).
    pub fn hard_link(&self, src: &Path, name: &OsStr) -> std::io::Result<()> {
        nix::unistd::linkat(
            None,
            src,
            Some(self.raw()),
            Path::new(name),
            AtFlags::empty(),
        )
        .map_err(std::io::Error::from)
    }

    /// The directory's path, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// This and `other` are one directory (one fsync makes both's renames durable).
    pub fn same_as(&self, other: &Dir) -> bool {
        let id = |d: &Dir| fstat(d.fd.as_raw_fd()).map(|s| (s.st_dev, s.st_ino));
        matches!((id(self), id(other)), (Ok(a), Ok(b)) if a == b)
    }

    /// Make a rename inside this directory durable.
    pub fn fsync(&self) -> Result<(), ModuleError> {
        nix::unistd::fsync(self.fd.as_raw_fd()).map_err(|e| ModuleError::io(&self.path, e))
    }

    /// The entry `name` without following it, or `None` when there is none.
    pub fn entry(&self, name: &OsStr) -> Result<Option<Handle<'_>>, ModuleError> {
        let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW;
        match open_at(self.fd.as_raw_fd(), name, flags, Mode::empty()) {
            Ok(fd) => {
                let stat = fstat(fd.as_raw_fd()).map_err(|e| ModuleError::io(self.at(name), e))?;
                Ok(Some(Handle {
                    dir: self,
                    name: name.to_os_string(),
                    fd,
                    stat,
                }))
            }
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(ModuleError::io(self.at(name), e)),
        }
    }

    /// Open the subdirectory `name`, refusing a symlink.
    pub fn subdir(&self, name: &OsStr) -> Result<Dir, ModuleError> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW;
        let fd = match open_at(self.raw(), name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::ENOTDIR) if is_symlink_at(self.raw(), name) => {
                return Err(open_error(&self.at(name), Errno::ELOOP))
            }
            Err(e) => return Err(open_error(&self.at(name), e)),
        };
        Ok(Dir {
            fd,
            path: self.at(name),
        })
    }

    /// `mkdir name` here; an existing directory (not a link to one) is fine.
    pub fn mkdir(&self, name: &OsStr, mode: u32) -> Result<(), ModuleError> {
        let m = Mode::from_bits_truncate(mode);
        match nix::sys::stat::mkdirat(Some(self.fd.as_raw_fd()), name, m) {
            Ok(()) => Ok(()),
            Err(Errno::EEXIST) if self.entry(name)?.is_some_and(|h| h.is_dir()) => Ok(()),
            Err(e) => Err(ModuleError::io(
                self.at(name),
                format!("cannot create directory: {e}"),
            )),
        }
    }

    /// Unlink the entry `name` itself (a file or a link; never what a link points to).
    pub fn unlink(&self, name: &OsStr) -> Result<(), ModuleError> {
        match nix::unistd::unlinkat(
            Some(self.fd.as_raw_fd()),
            name,
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        ) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(ModuleError::io(
                self.at(name),
                format!("cannot remove: {e}"),
            )),
        }
    }

    /// Rename `from` over `to`, both in this directory.
    pub fn rename(&self, from: &OsStr, to: &OsStr) -> Result<(), ModuleError> {
        let fd = self.fd.as_raw_fd();
        nix::fcntl::renameat(Some(fd), from, Some(fd), to)
            .map_err(|e| ModuleError::io(self.at(to), format!("cannot replace: {e}")))
    }

    /// Rename `from` in this directory to `to` in `other` (the same filesystem).
    pub fn rename_to(&self, from: &OsStr, other: &Dir, to: &OsStr) -> Result<(), ModuleError> {
        nix::fcntl::renameat(
            Some(self.fd.as_raw_fd()),
            from,
            Some(other.fd.as_raw_fd()),
            to,
        )
        .map_err(|e| ModuleError::io(other.at(to), format!("cannot replace: {e}")))
    }

    /// Create a new file with an unpredictable name starting with `prefix`, exclusively
    /// (`O_EXCL | O_NOFOLLOW`: nothing already there, link or file, is ever opened), mode 0600.
    pub fn create_temp(&self, prefix: &str, suffix: &str) -> Result<(File, OsString), ModuleError> {
        let flags = OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW;
        for _ in 0..64 {
            let mut name = OsString::from(prefix);
            name.push(format!("{:016x}", random_u64()));
            name.push(suffix);
            match open_at(
                self.fd.as_raw_fd(),
                &name,
                flags,
                Mode::from_bits_truncate(0o600),
            ) {
                Ok(fd) => return Ok((File::from(fd), name)),
                Err(Errno::EEXIST) => continue,
                Err(e) => {
                    return Err(ModuleError::io(
                        &self.path,
                        format!("cannot create a temporary file: {e}"),
                    ))
                }
            }
        }
        Err(ModuleError::io(
            &self.path,
            "cannot create a temporary file: every name tried exists",
        ))
    }

    /// Open the regular file `name` for reading, refusing a symlink (and, through `O_NONBLOCK`,
    /// never blocking on a fifo put in its place).
    pub fn open_read(&self, name: &OsStr) -> Result<File, ModuleError> {
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
        let fd = open_at(self.fd.as_raw_fd(), name, flags, Mode::empty())
            .map_err(|e| open_error(&self.at(name), e))?;
        let f = File::from(fd);
        let m = f
            .metadata()
            .map_err(|e| ModuleError::io(self.at(name), e))?;
        if !m.is_file() {
            return Err(ModuleError::io(self.at(name), "not a regular file"));
        }
        Ok(f)
    }

    /// The path of `name` here, for messages.
    pub fn at(&self, name: &OsStr) -> PathBuf {
        shown(&self.path, name)
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// `name` in `dir` is a symlink.
fn is_symlink_at(dir: RawFd, name: &OsStr) -> bool {
    nix::sys::stat::fstatat(Some(dir), name, AtFlags::AT_SYMLINK_NOFOLLOW)
        .is_ok_and(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK)
}

/// An error opening a path without links, worded for the likely cause.
fn open_error(path: &Path, e: Errno) -> ModuleError {
    match e {
        Errno::ELOOP => ModuleError::io(
            path,
            "a symlink was found where the probe saw a directory; refusing to follow it \
             (was it replaced since it was examined?)",
        ),
        e => ModuleError::io(path, e),
    }
}

/// The object at a path is not the one the probe saw.
fn changed(path: &Path) -> ModuleError {
    ModuleError::io(
        path,
        "changed since it was examined (replaced by another file or a symlink); nothing was \
         done to it, run again",
    )
}

/// 64 unpredictable bits: std seeds every `RandomState` from the OS's random source.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or_default(),
    );
    h.finish()
}

/// One entry of a [`Dir`], pinned with `O_PATH | O_NOFOLLOW`: what it is cannot change under us.
#[derive(Debug)]
pub struct Handle<'a> {
    dir: &'a Dir,
    name: OsString,
    fd: OwnedFd,
    stat: FileStat,
}

impl Handle<'_> {
    pub fn id(&self) -> FileId {
        (self.stat.st_dev, self.stat.st_ino)
    }

    pub fn is_link(&self) -> bool {
        SFlag::from_bits_truncate(self.stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK
    }

    pub fn is_dir(&self) -> bool {
        SFlag::from_bits_truncate(self.stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR
    }

    pub fn stat(&self) -> &FileStat {
        &self.stat
    }

    /// The pinned object's metadata (of a symlink itself, not its target).
    pub fn metadata(&self) -> Result<Metadata, ModuleError> {
        let f = self
            .fd
            .try_clone()
            .map(File::from)
            .map_err(|e| ModuleError::io(self.path(), e))?;
        f.metadata().map_err(|e| ModuleError::io(self.path(), e))
    }

    fn path(&self) -> PathBuf {
        self.dir.at(&self.name)
    }

    /// The extended attributes of this inode (none for a symlink: Linux keeps none there that
    /// a rewrite would carry over).
    pub fn xattrs(&self) -> Vec<(std::ffi::CString, Vec<u8>)> {
        if self.is_link() {
            return Vec::new();
        }
        super::xattrs::read_all(&proc_fd(self.fd.as_raw_fd()))
    }

    /// Owner and group of this very inode (a symlink's own, as lchown).
    pub fn chown(&self, uid: Option<u32>, gid: Option<u32>) -> Result<(), ModuleError> {
        nix::unistd::fchownat(
            Some(self.fd.as_raw_fd()),
            "",
            uid.map(nix::unistd::Uid::from_raw),
            gid.map(nix::unistd::Gid::from_raw),
            AtFlags::AT_EMPTY_PATH,
        )
        .map_err(|e| ModuleError::io(self.path(), format!("cannot set owner/group: {e}")))
    }

    /// Permission bits of this inode; a symlink has none (Linux), so it is refused.
    pub fn chmod(&self, mode: u32) -> Result<(), ModuleError> {
        if self.is_link() {
            return Err(ModuleError::io(
                self.path(),
                "cannot set mode: it is a symlink, which has no mode of its own",
            ));
        }
        chmod_fd(self.fd.as_fd(), mode, true)
            .map_err(|e| ModuleError::io(self.path(), format!("cannot set mode: {e}")))
    }

    /// Access and modification times of this inode (of the link itself for a symlink).
    pub fn set_times(&self, atime: &TimeSpec, mtime: &TimeSpec) -> Result<(), ModuleError> {
        let r = if self.is_link() {
            // The link's own times: by name with no-follow. Swapped since the pin, this only
            // touches whatever entry now has that name in the pinned directory, never a target.
            nix::sys::stat::utimensat(
                Some(self.dir.raw()),
                self.name.as_os_str(),
                atime,
                mtime,
                nix::sys::stat::UtimensatFlags::NoFollowSymlink,
            )
        } else {
            // Through /proc/self/fd: the magic link leads to the pinned inode, whatever the name
            // now holds.
            nix::sys::stat::utimensat(
                None,
                &proc_fd(self.fd.as_raw_fd()),
                atime,
                mtime,
                nix::sys::stat::UtimensatFlags::FollowSymlink,
            )
        };
        r.map_err(|e| ModuleError::io(self.path(), format!("cannot set times: {e}")))
    }
}

fn proc_fd(fd: RawFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{fd}"))
}

/// chmod an `O_PATH` descriptor: `fchmodat2(fd, "", AT_EMPTY_PATH)` (Linux 6.6), else through
/// `/proc/self/fd/N`, which reaches the same inode (how the C library does it too).
fn chmod_fd(fd: std::os::fd::BorrowedFd, mode: u32, try_fchmodat2: bool) -> nix::Result<()> {
    if try_fchmodat2 {
        // SAFETY: plain syscall with a valid descriptor and a NUL-terminated empty path.
        let r = unsafe {
            nix::libc::syscall(
                nix::libc::SYS_fchmodat2,
                fd.as_raw_fd(),
                c"".as_ptr(),
                mode as nix::libc::c_uint,
                nix::libc::AT_EMPTY_PATH,
            )
        };
        match Errno::result(r) {
            Ok(_) => return Ok(()),
            Err(Errno::ENOSYS | Errno::EINVAL | Errno::EPERM) => {}
            Err(e) => return Err(e),
        }
    }
    nix::sys::stat::fchmodat(
        None,
        &proc_fd(fd.as_raw_fd()),
        Mode::from_bits_truncate(mode),
        nix::sys::stat::FchmodatFlags::FollowSymlink,
    )
}

/// Open the entry at `loc` for a change: its directory without links, the entry without
/// following it, and a check that it is the object the probe saw (when `loc.id` is known) and
/// not a symlink unless `link_ok`. Calls `f` with the pinned entry.
pub fn with_entry<T>(
    loc: &Loc,
    link_ok: bool,
    f: impl FnOnce(&Handle) -> Result<T, ModuleError>,
) -> Result<T, ModuleError> {
    let dir = Dir::open(&loc.dir)?;
    let path = dir.at(&loc.name);
    let h = dir.entry(&loc.name)?.ok_or_else(|| {
        ModuleError::io(&path, "no longer exists (removed since it was examined)")
    })?;
    if loc.id.is_some_and(|id| id != h.id()) || (h.is_link() && !link_ok) {
        return Err(changed(&path));
    }
    recheck_guard(&dir, loc)?;
    // A regular file's attributes are part of what the journal keeps (drift attribution).
    if SFlag::from_bits_truncate(h.stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG {
        super::written::change(&path, None, || f(&h))
    } else {
        f(&h)
    }
}

/// The last `if_checksum` check (see `cas`), made immediately before a change: what is at `loc`
/// in `dir` now must still be the content the task expects. An outside writer since the probe
/// makes the task fail here, with both sums, instead of having its update overwritten.
pub fn recheck_guard(dir: &Dir, loc: &Loc) -> Result<(), ModuleError> {
    let Some(want) = &loc.guard else {
        return Ok(());
    };
    let path = dir.at(&loc.name);
    let found = match dir.entry(&loc.name)? {
        None => Found::Absent,
        Some(h) => {
            let meta = h.metadata()?;
            if meta.is_file() {
                let mut f = dir.open_read(&loc.name)?;
                Found::of_reader(&mut f).map_err(|e| ModuleError::io(&path, e))?
            } else {
                Found::other(&meta)
            }
        }
    };
    if found.matches(want) {
        Ok(())
    } else {
        Err(super::cas::mismatch(
            &path.display().to_string(),
            want,
            &found,
            " any more (another writer changed it since it was examined)",
        ))
    }
}

/// Set owner/group (then mode, since chown clears setuid/setgid) on the object at `loc`.
pub fn set_attrs_at(loc: &Loc, attrs: &super::Attrs) -> Result<(), ModuleError> {
    if *attrs == super::Attrs::default() {
        return Ok(());
    }
    with_entry(loc, false, |h| {
        if attrs.uid.is_some() || attrs.gid.is_some() {
            h.chown(attrs.uid, attrs.gid)?;
        }
        if let Some(mode) = attrs.mode {
            h.chmod(mode)?;
        }
        Ok(())
    })
}

/// Create the directory at `loc` (its parent must exist, reached without links) with `mode`.
pub fn mkdir_at(loc: &Loc, mode: u32) -> Result<(), ModuleError> {
    Dir::open(&loc.dir)?.mkdir(&loc.name, mode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    #[test]
    fn open_refuses_a_symlink_anywhere_with_and_without_openat2() {
        let t = tempfile::tempdir().unwrap();
        let real = fs::canonicalize(t.path()).unwrap();
        fs::create_dir_all(real.join("a/b")).unwrap();
        symlink(real.join("a"), real.join("l")).unwrap();
        for try_openat2 in [true, false] {
            let d = Dir::open_with(&real.join("a/b"), try_openat2).unwrap();
            assert!(d.entry(OsStr::new(".")).unwrap().unwrap().is_dir());
            let err = Dir::open_with(&real.join("l/b"), try_openat2).unwrap_err();
            assert!(err.to_string().contains("refusing to follow"), "{err}");
            assert!(Dir::open_with(&real.join("l"), try_openat2).is_err());
        }
    }

    #[test]
    fn open_id_refuses_another_directory() {
        let t = tempfile::tempdir().unwrap();
        let real = fs::canonicalize(t.path()).unwrap();
        fs::create_dir(real.join("a")).unwrap();
        let id = id_of(&fs::metadata(real.join("a")).unwrap());
        assert!(Dir::open_id(&real.join("a"), Some(id)).is_ok());
        fs::rename(real.join("a"), real.join("b")).unwrap();
        fs::create_dir(real.join("a")).unwrap();
        assert!(Dir::open_id(&real.join("a"), Some(id)).is_err());
    }

    #[test]
    fn locate_canonicalises_the_directory_and_keeps_missing_names() {
        let t = tempfile::tempdir().unwrap();
        let real = fs::canonicalize(t.path()).unwrap();
        fs::create_dir(real.join("d")).unwrap();
        symlink(real.join("d"), real.join("l")).unwrap();
        let loc = locate(&real.join("l/x"), None).unwrap();
        assert_eq!(loc.dir, real.join("d"));
        assert_eq!(loc.name, "x");
        let loc = locate(&real.join("l/new/deeper/x"), Some((1, 2))).unwrap();
        assert_eq!(loc.dir, real.join("d/new/deeper"));
        assert_eq!(loc.id, Some((1, 2)));
        assert_eq!(locate(Path::new("/"), None).unwrap().dir, Path::new("/"));
    }

    #[test]
    fn temp_files_are_exclusive_private_and_unpredictable() {
        let t = tempfile::tempdir().unwrap();
        let d = Dir::open(&fs::canonicalize(t.path()).unwrap()).unwrap();
        let (_, a) = d.create_temp("x.", "~").unwrap();
        let (_, b) = d.create_temp("x.", "~").unwrap();
        assert_ne!(a, b);
        let m = fs::symlink_metadata(d.at(&a)).unwrap();
        assert!(m.is_file());
        assert_eq!(m.mode() & 0o777, 0o600 & !crate::fs::current_umask());
    }

    #[test]
    fn pinned_entries_act_on_the_inode_and_never_follow() {
        let t = tempfile::tempdir().unwrap();
        let real = fs::canonicalize(t.path()).unwrap();
        fs::write(real.join("target"), "x").unwrap();
        fs::set_permissions(real.join("target"), fs::Permissions::from_mode(0o600)).unwrap();
        symlink(real.join("target"), real.join("l")).unwrap();
        let d = Dir::open(&real).unwrap();
        let l = d.entry(OsStr::new("l")).unwrap().unwrap();
        assert!(l.is_link());
        assert!(l.chmod(0o644).is_err());
        l.chown(Some(65534), None).unwrap();
        let target = fs::metadata(real.join("target")).unwrap();
        assert_eq!((target.uid(), target.mode() & 0o777), (0, 0o600));
        assert_eq!(fs::symlink_metadata(real.join("l")).unwrap().uid(), 65534);

        // The file is renamed after it was pinned: the pinned inode still gets the mode.
        let f = d.entry(OsStr::new("target")).unwrap().unwrap();
        fs::rename(real.join("target"), real.join("moved")).unwrap();
        f.chmod(0o640).unwrap();
        let moved = fs::metadata(real.join("moved")).unwrap();
        assert_eq!(moved.mode() & 0o777, 0o640);
        // Without fchmodat2 (kernels before 6.6), through /proc/self/fd.
        chmod_fd(f.fd.as_fd(), 0o604, false).unwrap();
        let moved = fs::metadata(real.join("moved")).unwrap();
        assert_eq!(moved.mode() & 0o777, 0o604);
    }

    #[test]
    fn create_all_makes_missing_directories_but_not_through_a_link() {
        let t = tempfile::tempdir().unwrap();
        let real = fs::canonicalize(t.path()).unwrap();
        Dir::create_all(&real.join("a/b/c")).unwrap();
        assert!(real.join("a/b/c").is_dir());
        fs::create_dir(real.join("outside")).unwrap();
        symlink(real.join("outside"), real.join("l")).unwrap();
        assert!(Dir::create_all(&real.join("l/x")).is_err());
        assert!(!real.join("outside/x").exists());
    }
}
