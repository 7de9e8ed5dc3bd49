//! Decrypted copies of vault-encrypted controller files that travel to hosts as files (`copy`
//! sources): written once per source and content into a private directory of this run (0700,
//! files 0600), and removed when the run ends ([`remove_all`]), as ansible-core removes its
//! decrypted temporary files.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The run's directory, and the copy made of each (source, size, mtime).
type Store = (
    tempfile::TempDir,
    HashMap<(PathBuf, u64, i64, i64), PathBuf>,
);

static STORE: Mutex<Option<Store>> = Mutex::new(None);

/// `path` itself when it is not vault-encrypted; else a decrypted copy of it (with the run's
/// secrets), or ansible-core's error: without any secret, "A vault password or secret must be
/// specified to decrypt <path>".
pub fn plain_path(path: &Path) -> Result<PathBuf, String> {
    use std::io::Read as _;
    let mut head = [0u8; super::HEADER.len()];
    let n = std::fs::File::open(path)
        .and_then(|f| f.take(head.len() as u64).read(&mut head))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !super::is_encrypted(&head[..n]) {
        return Ok(path.to_path_buf());
    }
    if super::installed().is_empty() {
        return Err(format!(
            "A vault password or secret must be specified to decrypt {}",
            path.display()
        ));
    }
    let m = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let key = (path.to_path_buf(), m.size(), m.mtime(), m.mtime_nsec());
    // The map only grows by whole entries: a poisoned lock is used as it is.
    let mut guard = STORE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(done) = guard.as_ref().and_then(|(_, made)| made.get(&key)) {
        return Ok(done.clone());
    }
    let plain = match super::read_file(path) {
        Ok(b) => b,
        Err(e) => return Err(format!("{e} ({})", path.display())),
    };
    if guard.is_none() {
        let dir = tempfile::Builder::new()
            .prefix("fixpoint-vault-")
            .tempdir()
            .map_err(|e| format!("cannot make a directory for decrypted files: {e}"))?;
        *guard = Some((dir, HashMap::new()));
    }
    let (dir, made) = guard.as_mut().expect("made above");
    let out = dir.path().join(made.len().to_string());
    let mut f = tempfile::NamedTempFile::new_in(dir.path())
        .map_err(|e| format!("cannot write a decrypted file: {e}"))?;
    std::io::Write::write_all(&mut f, &plain)
        .map_err(|e| format!("cannot write a decrypted file: {e}"))?;
    f.persist(&out)
        .map_err(|e| format!("cannot write a decrypted file: {e}"))?;
    made.insert(key, out.clone());
    Ok(out)
}

/// Remove every decrypted copy of this run (at its end).
pub fn remove_all() {
    let mut guard = STORE.lock().unwrap_or_else(|p| p.into_inner());
    // Dropping the directory removes it and its files.
    guard.take();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_file_is_itself() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "not vaulted\n").unwrap();
        assert_eq!(plain_path(&p).unwrap(), p);
    }
}
