//! Extended attributes kept when a file's content is replaced: its POSIX ACLs
//! (`system.posix_acl_access`), `user.*` attributes and SELinux label move to the new inode, as
//! ansible-core's `atomic_move` keeps them (Python's `shutil.copystat` copies every extended
//! attribute, skipping those it may not set).

use nix::errno::Errno;
use nix::libc;
use std::ffi::CString;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The extended attributes of the inode at `path` (a `/proc/self/fd` link of a pinned entry),
/// as (name, value) pairs; none when its filesystem has none or does not list them.
pub(crate) fn read_all(path: &Path) -> Vec<(CString, Vec<u8>)> {
    let Ok(cpath) = CString::new(path.as_os_str().as_bytes()) else {
        return Vec::new();
    };
    // SAFETY: a null buffer of size 0 asks for the size; the buffers passed are as long as said.
    let names = sized(|buf, len| unsafe { libc::listxattr(cpath.as_ptr(), buf.cast(), len) });
    names
        .split(|&b| b == 0)
        .filter(|n| !n.is_empty())
        .filter_map(|n| {
            let name = CString::new(n).ok()?;
            let value = sized(|buf, len| unsafe {
                libc::getxattr(cpath.as_ptr(), name.as_ptr(), buf.cast(), len)
            });
            Some((name, value))
        })
        .collect()
}

/// Calls `f(buffer, len)` (a list/get call: the size with a null buffer, then the bytes), again
/// while the value grows between the two; nothing when it fails.
fn sized(f: impl Fn(*mut u8, usize) -> isize) -> Vec<u8> {
    for _ in 0..4 {
        let n = f(std::ptr::null_mut(), 0);
        if n <= 0 {
            return Vec::new();
        }
        let mut buf = vec![0u8; n as usize];
        let got = f(buf.as_mut_ptr(), buf.len());
        if got >= 0 {
            buf.truncate(got as usize);
            return buf;
        }
        if Errno::last() != Errno::ERANGE {
            return Vec::new();
        }
    }
    Vec::new()
}

/// Sets `attrs` on the open file `to`, skipping what this user or filesystem may not set
/// (EPERM, ENOTSUP, ENODATA, EINVAL, as Python's `copystat` does: a `trusted.*` attribute
/// without root, a label the policy refuses).
pub(crate) fn write_all(to: &File, attrs: &[(CString, Vec<u8>)]) -> std::io::Result<()> {
    for (name, value) in attrs {
        // SAFETY: the name is NUL-terminated and the value's pointer and length agree.
        let r = unsafe {
            libc::fsetxattr(
                to.as_raw_fd(),
                name.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                0,
            )
        };
        if r != 0 {
            match Errno::last() {
                Errno::EPERM | Errno::ENOTSUP | Errno::ENODATA | Errno::EINVAL | Errno::EACCES => {}
                e => return Err(e.into()),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::fs::{atomic_write, id_of, locate, Attrs};
    use std::process::Command;

    fn run(cmd: &str, args: &[&str]) -> String {
        let out = Command::new(cmd)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{cmd}: {e} (install the `acl` package; .ci/run does)"));
        assert!(out.status.success(), "{cmd} {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    #[test]
    fn a_rewrite_keeps_the_files_acl() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        std::fs::write(&path, "TEST\n").unwrap();
        let p = path.to_str().unwrap();
        run("setfacl", &["-m", "u:nobody:rwx", p]);
        let before = run("getfacl", &["-cp", p]);
        assert!(before.contains("user:nobody:rwx"), "{before}");
        let meta = std::fs::metadata(&path).unwrap();
        let loc = locate(&path, Some(id_of(&meta))).unwrap();
        atomic_write(&loc, b"UPDATE\n", &Attrs::default(), None).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "UPDATE\n");
        assert_eq!(run("getfacl", &["-cp", p]), before);
    }
}
