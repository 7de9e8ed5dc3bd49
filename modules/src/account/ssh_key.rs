//! `user`'s `generate_ssh_key`: where the key goes, whether ssh-keygen runs (an existing key is
//! kept unless `force`), the run itself (a passphrase typed on a pseudo-terminal, the only
//! place ssh-keygen reads a new one from besides its command line), and the `ssh_fingerprint`,
//! `ssh_key_file` and `ssh_public_key` values `user` returns.

use super::PwEntry;
use crate::service::{run, which};
use crate::ModuleError;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

/// The key parameters of a `user` task.
#[derive(Debug, Clone)]
pub struct KeySpec {
    /// `ssh_key_file` as given (relative: below the home); default `.ssh/id_<type>`.
    pub file: String,
    pub kind: String,
    /// 0: ssh-keygen's own default.
    pub bits: i64,
    /// None: `ansible-generated on <host name>`, as Ansible.
    pub comment: Option<String>,
    pub passphrase: Option<String>,
    pub force: bool,
}

/// What the host has of the key, for a user whose home is known.
#[derive(Debug, Clone)]
pub struct KeyState {
    pub path: PathBuf,
    pub private_exists: bool,
    pub public_exists: bool,
}

impl KeySpec {
    /// The key's path for a home directory (Ansible's `get_ssh_key_path`).
    pub fn path(&self, home: &str) -> PathBuf {
        let f = Path::new(&self.file);
        if f.is_absolute() {
            f.to_path_buf()
        } else {
            Path::new(home).join(f)
        }
    }

    pub fn state(&self, home: &str) -> KeyState {
        let path = self.path(home);
        KeyState {
            // `exists` follows links, as Python's `os.path.exists`.
            private_exists: path.exists(),
            public_exists: public_of(&path).exists(),
            path,
        }
    }

    /// Whether ssh-keygen runs, and the warnings Ansible gives either way.
    pub fn decide(&self, s: &KeyState) -> (bool, Vec<String>) {
        let (prv, publ) = (s.path.display(), public_of(&s.path));
        let mut warnings = Vec::new();
        if s.private_exists {
            if !self.force {
                warnings.push(format!(
                    "Found existing ssh key private file \"{prv}\", no force, so skipping ssh-keygen generation"
                ));
                return (false, warnings);
            }
            warnings.push(format!(
                "Overwriting existing ssh key private file \"{prv}\""
            ));
        }
        if s.public_exists {
            if !self.force {
                warnings.push(format!(
                    "Found existing ssh key public file \"{}\", no force, so skipping ssh-keygen generation",
                    publ.display()
                ));
                return (false, warnings);
            }
            warnings.push(format!(
                "Overwriting existing ssh key public file \"{}\"",
                publ.display()
            ));
        }
        (true, warnings)
    }
}

fn public_of(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".pub");
    PathBuf::from(p)
}

fn keygen() -> Result<PathBuf, ModuleError> {
    which("ssh-keygen").ok_or_else(|| {
        ModuleError::failed("cannot find ssh-keygen: install openssh-client on the host")
    })
}

/// The values `user` returns for the key at `path` (Ansible's: the fingerprint, or "" when the
/// key is missing; the public key's text, or null).
pub fn report(path: &Path, out: &mut Map<String, Value>) -> Result<(), ModuleError> {
    let fingerprint = if path.exists() {
        let ran = run(&keygen()?, &["-l", "-f", &path.display().to_string()])?;
        if ran.rc == 0 {
            ran.stdout.trim().to_string()
        } else {
            ran.stderr.trim().to_string()
        }
    } else {
        String::new()
    };
    out.insert("ssh_fingerprint".into(), json!(fingerprint));
    out.insert("ssh_key_file".into(), json!(path.display().to_string()));
    let public = std::fs::read_to_string(public_of(path))
        .ok()
        .map(|s| s.trim().to_string());
    out.insert("ssh_public_key".into(), json!(public));
    Ok(())
}

/// Generate the key for `pw` (its home must exist when the path is relative), owned by it.
/// Returns the key's path and Ansible's warnings (an existing key kept or replaced).
pub fn generate(spec: &KeySpec, pw: &PwEntry) -> Result<(PathBuf, Vec<String>), ModuleError> {
    if !Path::new(&spec.file).is_absolute() && !Path::new(&pw.home).exists() {
        return Err(ModuleError::failed(format!(
            "User {} home directory does not exist",
            pw.name
        )));
    }
    let st = spec.state(&pw.home);
    let path = st.path.clone();
    let owner = |p: &Path| {
        nix::unistd::chown(
            p,
            Some(nix::unistd::Uid::from_raw(pw.uid)),
            Some(nix::unistd::Gid::from_raw(pw.gid)),
        )
        .map_err(|e| ModuleError::io(p, e))
    };
    if let Some(dir) = path.parent().filter(|d| !d.exists()) {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dir)
            .map_err(|e| ModuleError::failed(format!("Failed to create {}: {e}", dir.display())))?;
        owner(dir)?;
    }
    let (go, warnings) = spec.decide(&st);
    if !go {
        return Ok((path, warnings));
    }
    // Replaced, not overwritten in place: the old files may be links to somewhere else.
    for f in [public_of(&path), path.clone()] {
        if f.symlink_metadata().is_ok() {
            std::fs::remove_file(&f).map_err(|e| ModuleError::io(&f, e))?;
        }
    }
    let comment = spec.comment.clone().unwrap_or_else(|| {
        let host = nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default();
        format!("ansible-generated on {host}")
    });
    let mut args: Vec<String> = vec!["-t".into(), spec.kind.clone()];
    if spec.bits > 0 {
        args.extend(["-b".into(), spec.bits.to_string()]);
    }
    args.extend([
        "-C".into(),
        comment,
        "-f".into(),
        path.display().to_string(),
    ]);
    let ran = match &spec.passphrase {
        None => {
            args.extend(["-N".into(), String::new()]);
            let argv: Vec<&str> = args.iter().map(String::as_str).collect();
            run(&keygen()?, &argv)?
        }
        Some(pass) => typed::keygen_with_passphrase(&keygen()?, &args, pass)?,
    };
    if ran.rc != 0 {
        return Err(ModuleError::Failed {
            msg: ran.stderr.trim_end().to_string(),
            result: [
                ("name".to_string(), json!(pw.name)),
                ("rc".to_string(), json!(ran.rc)),
            ]
            .into_iter()
            .collect(),
        });
    }
    owner(&path)?;
    owner(&public_of(&path))?;
    Ok((path, warnings))
}

mod typed {
    //! ssh-keygen with a passphrase: it asks for it twice on its terminal. The child gets a
    //! session of its own whose only terminal is a pseudo-terminal we hold, so the passphrase
    //! never appears on a command line (where `ps` shows it).

    use crate::service::Ran;
    use crate::ModuleError;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;
    use std::path::Path;
    use std::process::{Command, Stdio};

    pub fn keygen_with_passphrase(
        prog: &Path,
        args: &[String],
        passphrase: &str,
    ) -> Result<Ran, ModuleError> {
        let pty = nix::pty::openpty(None, None)
            .map_err(|e| ModuleError::failed(format!("cannot open a pseudo-terminal: {e}")))?;
        let slave = |what: &str| {
            pty.slave
                .as_fd()
                .try_clone_to_owned()
                .map(Stdio::from)
                .map_err(|e| ModuleError::failed(format!("pseudo-terminal {what}: {e}")))
        };
        let mut c = Command::new(prog);
        c.args(args)
            .stdin(slave("stdin")?)
            .stdout(slave("stdout")?)
            .stderr(slave("stderr")?)
            .env("LC_ALL", "C");
        // SAFETY: setsid is async-signal-safe and touches no memory of the parent. A session
        // of its own keeps ssh-keygen off the agent's terminal (when it has one) and makes the
        // child the leader of the process group `children` registers.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut c, || {
                nix::unistd::setsid()
                    .map(|_| ())
                    .map_err(std::io::Error::from)
            });
        }
        let mut child = c
            .spawn()
            .map_err(|e| ModuleError::failed(format!("cannot run {}: {e}", prog.display())))?;
        let _reg = crate::children::register(child.id());
        // Every copy of the terminal's other end closed: reading then ends with the child.
        drop(c);
        drop(pty.slave);
        let mut master = std::fs::File::from(pty.master);
        let mut seen = Vec::new();
        let mut answered = 0;
        let mut buf = [0u8; 4096];
        // Read until the child closes its end (EIO on Linux once no process holds the slave).
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen);
            let prompts = if text.contains("Enter same passphrase") {
                2
            } else if text.contains("Enter passphrase") {
                1
            } else {
                0
            };
            while answered < prompts {
                master
                    .write_all(format!("{passphrase}\r").as_bytes())
                    .map_err(|e| ModuleError::failed(format!("pseudo-terminal: {e}")))?;
                answered += 1;
            }
        }
        let status = child
            .wait()
            .map_err(|e| ModuleError::failed(format!("waiting for {}: {e}", prog.display())))?;
        use std::os::unix::process::ExitStatusExt;
        let rc = status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
        // Echo is off while ssh-keygen reads, but a failure's text must never carry the secret.
        let mut text = String::from_utf8_lossy(&seen).into_owned();
        if !passphrase.is_empty() {
            text = text.replace(passphrase, "********");
        }
        Ok(Ran {
            rc,
            stdout: String::new(),
            stderr: if rc == 0 { String::new() } else { text },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(file: &str, force: bool) -> KeySpec {
        KeySpec {
            file: file.into(),
            kind: "ed25519".into(),
            bits: 0,
            comment: Some("c".into()),
            passphrase: None,
            force,
        }
    }

    #[test]
    fn a_relative_file_is_below_the_home() {
        assert_eq!(
            spec(".ssh/id_rsa", false).path("/home/u"),
            Path::new("/home/u/.ssh/id_rsa")
        );
        assert_eq!(spec("/k/x", false).path("/home/u"), Path::new("/k/x"));
    }

    #[test]
    fn an_existing_key_is_kept_without_force() {
        let st = |p, q| KeyState {
            path: "/h/.ssh/k".into(),
            private_exists: p,
            public_exists: q,
        };
        assert!(spec("k", false).decide(&st(false, false)).0);
        let (go, w) = spec("k", false).decide(&st(true, false));
        assert!(!go && w[0].contains("no force"), "{w:?}");
        let (go, w) = spec("k", false).decide(&st(false, true));
        assert!(!go && w[0].contains("public file"), "{w:?}");
        let (go, w) = spec("k", true).decide(&st(true, true));
        assert!(go && w.len() == 2, "{w:?}");
    }

    /// A real ssh-keygen: the passphrase typed on the pseudo-terminal locks the key.
    #[test]
    fn a_passphrase_is_typed_on_a_terminal() {
        let Some(prog) = which("ssh-keygen") else {
            panic!("ssh-keygen is missing: install openssh-client");
        };
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("k");
        let args: Vec<String> = ["-t", "ed25519", "-C", "t", "-f"]
            .iter()
            .map(|s| s.to_string())
            .chain([key.display().to_string()])
            .collect();
        let ran = typed::keygen_with_passphrase(&prog, &args, "s3cret pass").unwrap();
        assert_eq!(ran.rc, 0, "{ran:?}");
        let k = key.display().to_string();
        let wrong = run(&prog, &["-y", "-P", "nope", "-f", &k]).unwrap();
        assert_ne!(wrong.rc, 0, "the key has no passphrase");
        let right = run(&prog, &["-y", "-P", "s3cret pass", "-f", &k]).unwrap();
        assert_eq!(right.rc, 0, "{right:?}");
        assert!(right.stdout.starts_with("ssh-ed25519 "), "{right:?}");
    }
}
