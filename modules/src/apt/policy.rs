//! apt's `policy_rc_d`: while the transaction runs, `/usr/sbin/policy-rc.d` answers every
//! invoke-rc.d question with the given exit code (101: do not start services); a file that was
//! there is put aside and back afterwards, as Ansible's `PolicyRcD` does.

use crate::fs::Attrs;
use crate::ModuleError;
use std::path::{Path, PathBuf};

const POLICY: &str = "/usr/sbin/policy-rc.d";

/// In place while it lives; dropping it restores what was there.
pub struct PolicyRcD {
    path: PathBuf,
    /// Where the host's own file waits, when there was one.
    saved: Option<PathBuf>,
}

impl PolicyRcD {
    pub fn install(code: i64) -> Result<PolicyRcD, ModuleError> {
        Self::install_at(Path::new(POLICY), code)
    }

    fn install_at(path: &Path, code: i64) -> Result<PolicyRcD, ModuleError> {
        let saved = if path.symlink_metadata().is_ok() {
            // Beside it, so the move is a rename: never half a file, even if we die.
            let aside =
                path.with_file_name(format!(".policy-rc.d.fixpoint-{}", std::process::id()));
            std::fs::rename(path, &aside).map_err(|e| {
                ModuleError::failed(format!("Fail to move {} aside: {e}", path.display()))
            })?;
            Some(aside)
        } else {
            None
        };
        let guard = PolicyRcD {
            path: path.to_path_buf(),
            saved,
        };
        crate::fs::atomic_write_path(
            path,
            format!("#!/bin/sh\nexit {code}\n").as_bytes(),
            &Attrs {
                mode: Some(0o755),
                uid: None,
                gid: None,
            },
            None,
        )
        .map_err(|e| {
            ModuleError::failed(format!("Failed to create or chmod {}: {e}", path.display()))
        })?;
        Ok(guard)
    }
}

impl Drop for PolicyRcD {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        if let Some(saved) = &self.saved {
            let _ = std::fs::rename(saved, &self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_is_in_place_while_held_and_the_old_file_comes_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("policy-rc.d");
        {
            let _g = PolicyRcD::install_at(&p, 101).unwrap();
            assert_eq!(
                std::fs::read_to_string(&p).unwrap(),
                "#!/bin/sh\nexit 101\n"
            );
            let mode = std::fs::metadata(&p).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o755);
        }
        assert!(!p.exists());
        std::fs::write(&p, "mine\n").unwrap();
        {
            let _g = PolicyRcD::install_at(&p, 0).unwrap();
            assert_eq!(std::fs::read_to_string(&p).unwrap(), "#!/bin/sh\nexit 0\n");
        }
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "mine\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
