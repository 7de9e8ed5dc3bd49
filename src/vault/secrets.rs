//! Where the vault secrets come from: `--vault-id [label@]SOURCE`, `--vault-password-file FILE`,
//! `--ask-vault-pass`, `ANSIBLE_VAULT_IDENTITY_LIST` and `ANSIBLE_VAULT_PASSWORD_FILE`, read in
//! ansible-core's order and with its rules (an executable file is run and its standard output
//! is the password; a file that cannot be read is a warning as long as another source works).

use std::path::{Path, PathBuf};

/// The label ansible-core gives a secret that names none.
pub const DEFAULT_ID: &str = "default";

/// One secret and the vault id it answers to. `Debug` does not show the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    pub id: String,
    pub bytes: Vec<u8>,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// The vault options of the command line (`cli.rs` declares them for clap).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VaultOptions {
    pub password_files: Vec<PathBuf>,
    pub vault_ids: Vec<String>,
    pub ask: bool,
}

/// Read every secret the options and the environment name, in the order ansible-core tries
/// them: `ANSIBLE_VAULT_IDENTITY_LIST`, `--vault-id`, `--vault-password-file`,
/// `ANSIBLE_VAULT_PASSWORD_FILE`, then the `--ask-vault-pass` prompt. A source that fails is
/// a warning (on stderr) when another one works, else the error.
pub fn load(opts: &VaultOptions) -> Result<Vec<Secret>, String> {
    let mut slugs: Vec<String> = std::env::var("ANSIBLE_VAULT_IDENTITY_LIST")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    slugs.extend(opts.vault_ids.iter().cloned());
    let env_file = std::env::var_os("ANSIBLE_VAULT_PASSWORD_FILE")
        .filter(|f| !f.is_empty())
        .map(PathBuf::from);
    for f in opts.password_files.iter().chain(env_file.iter()) {
        slugs.push(format!("{DEFAULT_ID}@{}", f.display()));
    }
    if opts.ask {
        slugs.push(format!("{DEFAULT_ID}@prompt_ask_vault_pass"));
    }
    let mut secrets: Vec<Secret> = Vec::new();
    let mut last_error = None;
    for slug in &slugs {
        let (label, source) = match slug.split_once('@') {
            Some((l, s)) => (Some(l), s),
            None => (None, slug.as_str()),
        };
        let id = label.unwrap_or(DEFAULT_ID).to_string();
        let bytes = match source {
            "prompt" | "prompt_ask_vault_pass" => {
                let prompt = match (source, label) {
                    ("prompt", Some(l)) => format!("Vault password ({l}): "),
                    _ => "Vault password: ".to_string(),
                };
                match read_hidden(&prompt) {
                    Ok(pw) if pw.is_empty() => Err("Invalid vault password was provided".into()),
                    Ok(pw) => Ok(pw.into_bytes()),
                    Err(e) => Err(format!("Error in vault password prompt ({id}): {e}")),
                }
            }
            file => from_file(Path::new(file), &id, &secrets),
        };
        match bytes {
            Ok(bytes) => secrets.push(Secret { id, bytes }),
            Err(e) => {
                eprintln!("[WARNING]: Error getting vault password file ({id}): {e}");
                last_error = Some(e);
            }
        }
    }
    match last_error {
        Some(e) if secrets.is_empty() => Err(e),
        _ => Ok(secrets),
    }
}

/// The password a file holds, or that it prints when it is executable (a `*-client` script is
/// asked for `--vault-id <id>`). Surrounding whitespace and line ends are not part of it.
fn from_file(path: &Path, id: &str, known: &[Secret]) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::PermissionsExt;
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let shown = abs.display();
    let meta = std::fs::metadata(&abs)
        .map_err(|_| format!("The vault password file {shown} was not found"))?;
    if meta.is_dir() {
        return Err(format!(
            "The vault password file provided '{shown}' can not be a directory"
        ));
    }
    let (bytes, from) = if meta.permissions().mode() & 0o111 != 0 {
        let stem = abs.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let mut cmd = std::process::Command::new(&abs);
        if stem.ends_with("-client") {
            cmd.args(["--vault-id", id]);
        }
        // stderr stays the terminal's, so a script may prompt there.
        let out = cmd
            .stdin(std::process::Stdio::inherit())
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| {
                format!(
                    "Problem running vault password script {shown} ({e}). If this is not a \
                     script, remove the executable bit from the file."
                )
            })?;
        if !out.status.success() {
            let code = out.status.code().unwrap_or(-1);
            return Err(format!(
                "Vault password script {shown} returned non-zero ({code}): None"
            ));
        }
        (out.stdout, "script")
    } else {
        let raw = std::fs::read(&abs)
            .map_err(|_| format!("Could not read vault password file '{shown}'."))?;
        let text = raw.trim_ascii().to_vec();
        // A password file may itself be vaulted with a secret given before it.
        let text = if super::is_encrypted(&text) {
            super::decrypt(&String::from_utf8_lossy(&text), known)?
        } else {
            text
        };
        (text, "file")
    };
    let pw = trim_line_ends(&bytes).to_vec();
    if pw.is_empty() {
        return Err(format!(
            "Invalid vault password was provided from {from} ({shown})"
        ));
    }
    Ok(pw)
}

fn trim_line_ends(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|c| !matches!(c, b'\r' | b'\n'))
        .unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !matches!(c, b'\r' | b'\n'))
        .map_or(start, |i| i + 1);
    &b[start..end]
}

/// One line typed on the terminal without echo (the prompt on stderr), or read from stdin when
/// it is not a terminal; the line end is not part of it. (`-K`'s become password too.)
pub fn read_hidden(prompt: &str) -> std::io::Result<String> {
    use std::io::IsTerminal;
    let tty = std::io::stdin().is_terminal();
    crate::vars::prompt::read_line(tty.then_some(prompt), true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn files_scripts_and_labels() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("pw");
        std::fs::write(&plain, "  hunter2 \n").unwrap();
        let script = dir.path().join("pw.sh");
        std::fs::write(&script, "#!/bin/sh\necho fromscript\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let opts = VaultOptions {
            password_files: vec![plain.clone()],
            vault_ids: vec![format!("prod@{}", script.display())],
            ask: false,
        };
        let s = load(&opts).unwrap();
        // --vault-id before --vault-password-file, as in ansible-core.
        assert_eq!(s[0].id, "prod");
        assert_eq!(s[0].bytes, b"fromscript");
        assert_eq!(s[1].id, "default");
        assert_eq!(s[1].bytes, b"hunter2");
        assert!(!format!("{:?}", s[1]).contains("hunter2"));
    }

    #[test]
    fn a_missing_file_is_an_error_only_when_nothing_else_works() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let e = load(&VaultOptions {
            password_files: vec![missing.clone()],
            ..Default::default()
        })
        .unwrap_err();
        assert!(e.starts_with("The vault password file /"), "{e}");
        assert!(e.ends_with("nope was not found"), "{e}");
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        let e = from_file(&empty, "default", &[]).unwrap_err();
        assert!(
            e.starts_with("Invalid vault password was provided from file"),
            "{e}"
        );
    }
}
