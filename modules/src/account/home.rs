//! `user`'s home directory when it has to be made outside useradd (a home that went missing):
//! the skeleton copied, the mode login.defs asks for, owned by the user, as Ansible's
//! `create_homedir`.

use super::PwEntry;
use crate::service::run;
use crate::ModuleError;
use std::path::Path;

/// Ansible's `create_homedir`: a copy of the skeleton (or an empty directory) with the mode
/// login.defs asks for, then owned by the user throughout.
pub fn make_home(pw: &PwEntry, skeleton: Option<&str>, home: &str) -> Result<(), ModuleError> {
    let skel = skeleton.unwrap_or("/etc/skel").to_string();
    if Path::new(&skel).is_dir() {
        if let Some(parent) = Path::new(home).parent() {
            std::fs::create_dir_all(parent).map_err(|e| ModuleError::io(parent, e))?;
        }
        let cp = run(Path::new("/bin/cp"), &["-a", &skel, home])?;
        if cp.rc != 0 {
            return Err(ModuleError::failed(format!(
                "copying {skel} to {home}: {}",
                cp.stderr.trim_end()
            )));
        }
    } else {
        std::fs::create_dir_all(home).map_err(|e| ModuleError::io(home, e))?;
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(home, std::fs::Permissions::from_mode(home_mode()))
        .map_err(|e| ModuleError::io(home, e))?;
    let owner = format!("{}:{}", pw.uid, pw.gid);
    let ch = run(Path::new("/bin/chown"), &["-R", &owner, home])?;
    if ch.rc != 0 {
        return Err(ModuleError::failed(format!(
            "chown {home}: {}",
            ch.stderr.trim_end()
        )));
    }
    Ok(())
}

/// `HOME_MODE`, else `0777 & ~UMASK`, from /etc/login.defs (0755 when it says neither).
fn home_mode() -> u32 {
    let defs = std::fs::read_to_string("/etc/login.defs").unwrap_or_default();
    let get = |key: &str| {
        defs.lines().find_map(|l| {
            let mut it = l.split_whitespace();
            (it.next() == Some(key))
                .then(|| it.next().and_then(|v| u32::from_str_radix(v, 8).ok()))
                .flatten()
        })
    };
    get("HOME_MODE").unwrap_or_else(|| 0o777 & !get("UMASK").unwrap_or(0o022))
}
