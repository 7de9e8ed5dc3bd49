//! Reading an archive for `unarchive`: its format from its first bytes, the list of its entries
//! (names checked so that none can leave `dest`), and the data of the entries to write.
//!
//! Tar is read in-process with the `tar` crate; gzip is decompressed with flate2, xz, bzip2 and
//! zstd by the host's `xz`/`bzip2`/`zstd` (as GNU tar itself does), so the agent carries no C
//! library. Zip is read by `zipread.rs`.

use crate::ModuleError;
use std::collections::HashSet;
use std::fs::File;
use std::io::{BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Component, Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// What wraps a tar stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Bzip2,
    Xz,
    Zstd,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Tar(Compression),
    Zip,
}

impl Format {
    /// Ansible's handler class for this format (the result's `handler`). Ansible tries its
    /// handlers in order, and GNU tar reads every compression without a flag, so everything
    /// but zip and gzip is its plain `TarArchive`.
    pub fn handler(self) -> &'static str {
        match self {
            Format::Zip => "ZipArchive",
            Format::Tar(Compression::Gzip) => "TgzArchive",
            Format::Tar(_) => "TarArchive",
        }
    }
}

/// Tell the format from the magic numbers at the start of the file (and tar's `ustar` at 257).
pub fn detect(path: &Path) -> Result<Format, ModuleError> {
    let mut head = [0u8; 512];
    let mut f = File::open(path).map_err(|e| ModuleError::io(path, e))?;
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) => return Err(ModuleError::io(path, e)),
        }
    }
    let h = &head[..n];
    Ok(
        if h.starts_with(b"PK\x03\x04") || h.starts_with(b"PK\x05\x06") {
            Format::Zip
        } else if h.starts_with(&[0x1f, 0x8b]) {
            Format::Tar(Compression::Gzip)
        } else if h.starts_with(b"BZh") {
            Format::Tar(Compression::Bzip2)
        } else if h.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
            Format::Tar(Compression::Xz)
        } else if h.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Format::Tar(Compression::Zstd)
        } else if (n >= 262 && &h[257..262] == b"ustar") || (n == 512 && h.iter().all(|b| *b == 0))
        {
            Format::Tar(Compression::None)
        } else {
            return Err(ModuleError::failed(format!(
                "Failed to find handler for \"{}\". Make sure the required command to extract the \
             file is installed. (not a tar, tar.gz, tar.bz2, tar.xz, tar.zst or zip archive)",
                path.display()
            )));
        },
    )
}

/// What an entry is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink(PathBuf),
    /// A hard link to an earlier entry (its path below `dest`).
    Hardlink(PathBuf),
}

/// One entry as the archive describes it.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The name as stored (what Ansible lists in `files`).
    pub name: String,
    /// The name made relative and clean (`./a//b` → `a/b`); empty for the archive's `./`.
    pub path: PathBuf,
    pub kind: Kind,
    pub size: u64,
    /// Permission bits (0o7777).
    pub mode: u32,
    pub mtime: i64,
    pub uid: u64,
    pub gid: u64,
    pub uname: Option<String>,
    pub gname: Option<String>,
    /// The CRC-32 of a zip entry's data (a tar entry has none): Ansible compares it with the
    /// file's on disk.
    pub crc: Option<u32>,
}

/// `name` as a path below `dest`, or why it would leave it.
pub fn clean(name: &str) -> Result<PathBuf, String> {
    let p = Path::new(name);
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(s) => out.push(s),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!("entry `{name}` has an absolute path"))
            }
            Component::ParentDir => return Err(format!("entry `{name}` contains `..`")),
        }
    }
    Ok(out)
}

/// The decompressed stream of a tar archive; a host program's exit is checked at the end.
struct Stream {
    inner: Box<dyn Read>,
    child: Option<(Child, &'static str, crate::children::Registered)>,
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.inner.read(buf)
    }
}

impl Stream {
    fn open(path: &Path, c: Compression) -> Result<Stream, ModuleError> {
        let file = File::open(path).map_err(|e| ModuleError::io(path, e))?;
        let prog = match c {
            Compression::None => {
                return Ok(Stream {
                    inner: Box::new(BufReader::new(file)),
                    child: None,
                })
            }
            Compression::Gzip => {
                return Ok(Stream {
                    inner: Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(file))),
                    child: None,
                })
            }
            Compression::Bzip2 => "bzip2",
            Compression::Xz => "xz",
            Compression::Zstd => "zstd",
        };
        let mut cmd = Command::new(prog);
        cmd.arg("-dc")
            .stdin(Stdio::from(file))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0);
        let mut child = cmd.spawn().map_err(|e| {
            ModuleError::failed(format!(
                "cannot run `{prog}` to decompress {}: {e}; install it on the host",
                path.display()
            ))
        })?;
        let reg = crate::children::register(child.id());
        let out = child.stdout.take().expect("piped");
        Ok(Stream {
            inner: Box::new(BufReader::new(out)),
            child: Some((child, prog, reg)),
        })
    }

    /// Wait for the decompressor; a failure means the archive was damaged.
    fn finish(mut self, path: &Path) -> Result<(), ModuleError> {
        // Drain what is left (tar's end blocks and padding) so the program can exit.
        let _ = std::io::copy(&mut self.inner, &mut std::io::sink());
        if let Some((mut child, prog, _reg)) = self.child.take() {
            let st = child.wait().map_err(|e| ModuleError::io(path, e))?;
            if !st.success() {
                return Err(ModuleError::failed(format!(
                    "`{prog} -dc` failed on {}: the archive is damaged",
                    path.display()
                )));
            }
        }
        Ok(())
    }
}

fn tar_err(path: &Path, e: std::io::Error) -> ModuleError {
    ModuleError::failed(format!(
        "Unable to list files in the archive {}: {e}",
        path.display()
    ))
}

/// Turn one tar header into an `Entry`, refusing what cannot be extracted safely.
fn tar_entry<R: Read>(e: &tar::Entry<'_, R>, archive: &Path) -> Result<Option<Entry>, ModuleError> {
    let escape = |m: String| refused(archive, &m);
    use tar::EntryType as T;
    let h = e.header();
    let raw = e.path_bytes();
    let name = String::from_utf8_lossy(&raw).into_owned();
    let kind = match h.entry_type() {
        T::Regular | T::Continuous | T::GNUSparse => Kind::File,
        T::Directory => Kind::Dir,
        T::Symlink | T::Link => {
            let target = e
                .link_name_bytes()
                .map(|b| PathBuf::from(String::from_utf8_lossy(&b).into_owned()))
                .unwrap_or_default();
            if h.entry_type() == T::Symlink {
                Kind::Symlink(target)
            } else {
                let t = target.to_str().unwrap_or_default();
                Kind::Hardlink(clean(t).map_err(|m| escape(format!("hard link {m}")))?)
            }
        }
        // Metadata records the crate has already applied, or ignores.
        T::XGlobalHeader | T::XHeader | T::GNULongName | T::GNULongLink => return Ok(None),
        other => {
            return Err(ModuleError::failed(format!(
                "{}: entry `{name}` is a {other:?}, which unarchive does not extract",
                archive.display()
            )))
        }
    };
    Ok(Some(Entry {
        path: clean(&name).map_err(escape)?,
        name,
        size: if kind == Kind::File { e.size() } else { 0 },
        kind,
        mode: h.mode().unwrap_or(0o644) & 0o7777,
        mtime: h.mtime().unwrap_or(0) as i64,
        uid: h.uid().unwrap_or(0),
        gid: h.gid().unwrap_or(0),
        uname: h.username().ok().flatten().map(str::to_string),
        gname: h.groupname().ok().flatten().map(str::to_string),
        crc: None,
    }))
}

/// Every entry of the archive, in order.
pub fn list(path: &Path, fmt: Format) -> Result<Vec<Entry>, ModuleError> {
    match fmt {
        Format::Zip => zip_list(path),
        Format::Tar(c) => {
            let mut stream = Stream::open(path, c)?;
            let mut out = Vec::new();
            {
                let mut ar = tar::Archive::new(&mut stream);
                for e in ar.entries().map_err(|e| tar_err(path, e))? {
                    let e = e.map_err(|e| tar_err(path, e))?;
                    if let Some(x) = tar_entry(&e, path)? {
                        out.push(x);
                    }
                }
            }
            stream.finish(path)?;
            Ok(out)
        }
    }
}

pub fn refused(path: &Path, why: &str) -> ModuleError {
    ModuleError::failed(format!(
        "refusing to extract {}: {why} (it would be written outside dest)",
        path.display()
    ))
}

/// Call `f` with the data of each entry whose index is in `wanted`, in archive order.
pub fn each_data(
    path: &Path,
    fmt: Format,
    wanted: &HashSet<usize>,
    f: &mut dyn FnMut(usize, &mut dyn Read) -> Result<(), ModuleError>,
) -> Result<(), ModuleError> {
    match fmt {
        Format::Zip => {
            let mut file = File::open(path).map_err(|e| ModuleError::io(path, e))?;
            let list = super::zipread::entries(&mut file).map_err(|m| zip_err(path, &m))?;
            for (i, e) in list.iter().enumerate() {
                if wanted.contains(&i) {
                    super::zipread::with_data(&mut file, e, |r| f(i, r))
                        .map_err(|m| zip_err(path, &m))??;
                }
            }
            Ok(())
        }
        Format::Tar(c) => {
            let mut stream = Stream::open(path, c)?;
            {
                let mut ar = tar::Archive::new(&mut stream);
                let mut i = 0;
                for e in ar.entries().map_err(|e| tar_err(path, e))? {
                    let mut e = e.map_err(|e| tar_err(path, e))?;
                    // The same numbering as `list`: metadata records are not entries.
                    if matches!(tar_entry(&e, path), Ok(None)) {
                        continue;
                    }
                    if wanted.contains(&i) {
                        f(i, &mut e)?;
                    }
                    i += 1;
                }
            }
            stream.finish(path)
        }
    }
}

fn zip_err(path: &Path, m: &str) -> ModuleError {
    ModuleError::failed(format!("{}: {m}", path.display()))
}

fn zip_list(path: &Path) -> Result<Vec<Entry>, ModuleError> {
    let mut file = File::open(path).map_err(|e| ModuleError::io(path, e))?;
    let list = super::zipread::entries(&mut file).map_err(|m| {
        ModuleError::failed(format!(
            "Unable to list files in the archive {}: {m}",
            path.display()
        ))
    })?;
    let mut out = Vec::new();
    for z in list {
        let kind = if z.is_dir() {
            Kind::Dir
        } else if z.is_symlink() {
            let mut t = String::new();
            super::zipread::with_data(&mut file, &z, |r| r.read_to_string(&mut t))
                .map_err(|m| zip_err(path, &m))?
                .map_err(|e| ModuleError::io(path, e))?;
            Kind::Symlink(PathBuf::from(t))
        } else {
            Kind::File
        };
        let default_mode = if kind == Kind::Dir { 0o755 } else { 0o644 };
        let crc = (kind == Kind::File).then_some(z.crc);
        out.push(Entry {
            path: clean(&z.name).map_err(|m| refused(path, &m))?,
            size: if kind == Kind::File { z.size } else { 0 },
            mode: z.unix_mode.map(|m| m & 0o7777).unwrap_or(default_mode),
            name: z.name,
            kind,
            mtime: z.mtime,
            uid: 0,
            gid: 0,
            uname: None,
            gname: None,
            crc,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cleaned_and_escapes_refused() {
        assert_eq!(clean("./a//b/").unwrap(), PathBuf::from("a/b"));
        assert_eq!(clean("./").unwrap(), PathBuf::new());
        assert!(clean("/etc/passwd").is_err());
        assert!(clean("a/../../b").is_err());
        assert!(clean("..").is_err());
    }

    #[test]
    fn civil_days() {
        use super::super::zipread::days_from_civil;
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11017);
        assert_eq!(days_from_civil(2026, 11, 30), 20787);
    }
}
