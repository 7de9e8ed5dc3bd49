//! Ansible Vault: the `$ANSIBLE_VAULT;1.1;AES256` / `1.2;AES256;<id>` format and the run's secrets.
//!
//! The format, as ansible-core writes it: a header line, then the hex of
//! `hex(salt) \n hex(hmac) \n hex(ciphertext)` in lines of 80. The keys come from
//! PBKDF2-HMAC-SHA256 of the password and the salt (10000 rounds, 80 bytes: the AES-256 key,
//! the HMAC key, the CTR counter block); the ciphertext is AES-256-CTR over the PKCS#7-padded
//! plain text and is authenticated by HMAC-SHA256 before anything is decrypted. The crypto is
//! the RustCrypto crates'; nothing here is hand-written but the envelope.
//!
//! The secrets (`secrets.rs`) are read once, from the command line and the environment, before
//! anything is loaded, and installed for the whole process, as ansible-core keeps them in one
//! context: every loader (playbooks, vars files, inventories, `include_vars`, `copy` sources)
//! and the templating reach them through [`installed`] without being handed them.
//!
//! This module depends on nothing else in the crate, so the YAML loader may use it.

pub mod plain;
pub mod secrets;

use aes::cipher::{KeyIvInit, StreamCipher};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::sync::OnceLock;

pub use secrets::{Secret, VaultOptions};

/// The start of every vault text.
pub const HEADER: &str = "$ANSIBLE_VAULT";

type Aes256Ctr = ctr::Ctr128BE<aes::Aes256>;

/// The secrets of this run (empty until [`install`] is called: no secret).
static SECRETS: OnceLock<Vec<Secret>> = OnceLock::new();

/// Install the run's secrets; the first call wins (one run per process).
pub fn install(secrets: Vec<Secret>) {
    let _ = SECRETS.set(secrets);
}

/// The run's secrets, in the order they are tried.
pub fn installed() -> &'static [Secret] {
    SECRETS.get().map(Vec::as_slice).unwrap_or(&[])
}

/// Whether `text` is vault-encrypted data (it starts with the header), as ansible-core tells.
pub fn is_encrypted(text: &[u8]) -> bool {
    text.starts_with(HEADER.as_bytes())
}

/// A file's content, decrypted with the installed secrets when it is vault-encrypted (Ansible
/// reads every playbook, vars file and inventory that way). The error is the reading's, or
/// ansible-core's words for the decryption.
pub fn read_file(path: &std::path::Path) -> Result<Vec<u8>, ReadError> {
    let raw = std::fs::read(path).map_err(ReadError::Io)?;
    if !is_encrypted(&raw) {
        return Ok(raw);
    }
    decrypt_installed(&String::from_utf8_lossy(&raw)).map_err(ReadError::Vault)
}

/// Why [`read_file`] failed.
#[derive(Debug)]
pub enum ReadError {
    Io(std::io::Error),
    Vault(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "cannot read file: {e}"),
            ReadError::Vault(e) => f.write_str(e),
        }
    }
}

/// Decrypt with the installed secrets (see [`decrypt`]).
pub fn decrypt_installed(text: &str) -> Result<Vec<u8>, String> {
    decrypt(text, installed())
}

/// Decrypt a vault text with the first of `secrets` that opens it: those whose id the header
/// names first, then the others, as ansible-core tries them. Errors are ansible-core's words.
pub fn decrypt(text: &str, secrets: &[Secret]) -> Result<Vec<u8>, String> {
    let (body, vault_id) = parse_envelope(text)?;
    if secrets.is_empty() {
        return Err("Attempting to decrypt but no vault secrets found.".into());
    }
    let (salt, mac, ciphertext) = parse_body(&body)?;
    let named = secrets
        .iter()
        .filter(|s| vault_id.as_deref() == Some(s.id.as_str()));
    let others = secrets
        .iter()
        .filter(|s| vault_id.as_deref() != Some(s.id.as_str()));
    for s in named.chain(others) {
        if let Some(plain) = open(&s.bytes, &salt, &mac, &ciphertext) {
            return Ok(plain);
        }
    }
    Err("Decryption failed (no vault secrets were found that could decrypt).".into())
}

/// The hex body of an envelope (lines joined) and the vault id its header names, if any.
fn parse_envelope(text: &str) -> Result<(String, Option<String>), String> {
    let text = text.trim_start();
    if !is_encrypted(text.as_bytes()) {
        return Err("Input is not vault encrypted data.".into());
    }
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").trim().split(';').collect();
    let cipher = header.get(2).map(|c| c.trim());
    match cipher {
        Some("AES256") => {}
        Some(c) => return Err(format!("Cipher '{c}' could not be found.")),
        None => return Err("Vault envelope format error.".into()),
    }
    let id = header.get(3).map(|s| s.trim().to_string());
    let body: String = lines.flat_map(|l| l.trim().chars()).collect();
    Ok((body, id))
}

/// The salt, the HMAC and the ciphertext of a vault text.
type Parts = (Vec<u8>, Vec<u8>, Vec<u8>);

/// Salt, HMAC and ciphertext from the doubly hex-encoded body.
fn parse_body(body: &str) -> Result<Parts, String> {
    let format = || "Vault format unhexlify error.".to_string();
    let inner = hex::decode(body).map_err(|_| format())?;
    let mut parts = inner.splitn(3, |b| *b == b'\n');
    let (Some(salt), Some(mac), Some(ct)) = (parts.next(), parts.next(), parts.next()) else {
        return Err("Vault vaulttext format error.".into());
    };
    let unhex = |b: &[u8]| hex::decode(b).map_err(|_| format());
    Ok((unhex(salt)?, unhex(mac)?, unhex(ct)?))
}

/// The cipher key, HMAC key and counter block for a password and salt.
fn derive(password: &[u8], salt: &[u8]) -> ([u8; 32], [u8; 32], [u8; 16]) {
    let mut out = [0u8; 80];
    pbkdf2::pbkdf2::<Hmac<Sha256>>(password, salt, 10_000, &mut out)
        .expect("HMAC takes keys of any length");
    let mut k1 = [0u8; 32];
    let mut k2 = [0u8; 32];
    let mut iv = [0u8; 16];
    k1.copy_from_slice(&out[..32]);
    k2.copy_from_slice(&out[32..64]);
    iv.copy_from_slice(&out[64..]);
    (k1, k2, iv)
}

/// The plain text, when this password's HMAC key authenticates the ciphertext.
fn open(password: &[u8], salt: &[u8], mac: &[u8], ciphertext: &[u8]) -> Option<Vec<u8>> {
    let (k1, k2, iv) = derive(password, salt);
    let mut h = <Hmac<Sha256> as Mac>::new_from_slice(&k2).expect("any key length");
    h.update(ciphertext);
    // Constant-time comparison (`verify_slice`): the HMAC is checked before decrypting.
    h.verify_slice(mac).ok()?;
    let mut data = ciphertext.to_vec();
    Aes256Ctr::new(&k1.into(), &iv.into()).apply_keystream(&mut data);
    // PKCS#7 padding, 16-byte blocks.
    let pad = *data.last()? as usize;
    let padded = data.get(data.len().checked_sub(pad)?..)?;
    if pad == 0 || pad > 16 || !padded.iter().all(|b| *b as usize == pad) {
        return None;
    }
    data.truncate(data.len() - pad);
    Some(data)
}

/// Encrypt `plain` with `password` into a vault text (1.1, or 1.2 naming `vault_id` when it
/// is given and not `default`), with a fresh random salt, as `ansible-vault encrypt` writes it.
pub fn encrypt(plain: &[u8], password: &[u8], vault_id: Option<&str>) -> Result<String, String> {
    let mut salt = [0u8; 32];
    random_bytes(&mut salt)?;
    Ok(encrypt_with_salt(plain, password, vault_id, &salt))
}

/// [`encrypt`] with a given salt (the `vault` filter's `salt`).
pub fn encrypt_with_salt(
    plain: &[u8],
    password: &[u8],
    vault_id: Option<&str>,
    salt: &[u8],
) -> String {
    let (k1, k2, iv) = derive(password, salt);
    let pad = 16 - plain.len() % 16;
    let mut data = plain.to_vec();
    data.extend(std::iter::repeat_n(pad as u8, pad));
    Aes256Ctr::new(&k1.into(), &iv.into()).apply_keystream(&mut data);
    let mut h = <Hmac<Sha256> as Mac>::new_from_slice(&k2).expect("any key length");
    h.update(&data);
    let mac = h.finalize().into_bytes();
    let inner = format!(
        "{}\n{}\n{}",
        hex::encode(salt),
        hex::encode(mac),
        hex::encode(&data)
    );
    let body = hex::encode(inner.as_bytes());
    let mut out = match vault_id {
        Some(id) if !id.is_empty() && id != "default" => format!("{HEADER};1.2;AES256;{id}"),
        _ => format!("{HEADER};1.1;AES256"),
    };
    for chunk in body.as_bytes().chunks(80) {
        out.push('\n');
        out.push_str(std::str::from_utf8(chunk).expect("hex is ASCII"));
    }
    out.push('\n');
    out
}

/// Fill `buf` from the kernel's random source (the salt must not be guessable).
fn random_bytes(buf: &mut [u8]) -> Result<(), String> {
    use std::io::Read as _;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .map_err(|e| format!("cannot read /dev/urandom for a vault salt: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(id: &str, pw: &str) -> Secret {
        Secret {
            id: id.into(),
            bytes: pw.as_bytes().to_vec(),
        }
    }

    // Written by ansible-vault 2.19 (`encrypt_string --vault-password-file` holding `secret`):
    // the value `hello {{ x }}`.
    const HELLO: &str = "$ANSIBLE_VAULT;1.1;AES256
66663933356266303661663835666638306632613637633965386534323337666432643564623134
6332363039613638336134356266383736393963636266330a613036303032626234343861623863
62663861623538313931393932366566356431313963386134346262383365613233366339653363
3263343330613761390a393230313133373565636538616432656530353736643231396230633362
6265";

    #[test]
    fn decrypts_what_ansible_vault_wrote() {
        let plain = decrypt(HELLO, &[secret("default", "secret")]).unwrap();
        assert_eq!(plain, b"hello {{ x }}");
        // A wrong secret before the right one is skipped.
        let both = [secret("default", "wrong"), secret("other", "secret")];
        assert_eq!(decrypt(HELLO, &both).unwrap(), b"hello {{ x }}");
    }

    #[test]
    fn errors_are_ansible_cores() {
        assert_eq!(
            decrypt(HELLO, &[]).unwrap_err(),
            "Attempting to decrypt but no vault secrets found."
        );
        assert_eq!(
            decrypt(HELLO, &[secret("default", "wrong")]).unwrap_err(),
            "Decryption failed (no vault secrets were found that could decrypt)."
        );
        assert_eq!(
            decrypt("plain", &[]).unwrap_err(),
            "Input is not vault encrypted data."
        );
    }

    #[test]
    fn round_trips_with_and_without_an_id() {
        for id in [None, Some("default"), Some("prod")] {
            let text = encrypt(b"s3cr3t\n", b"pw", id).unwrap();
            let first = text.lines().next().unwrap();
            match id {
                Some("prod") => assert_eq!(first, "$ANSIBLE_VAULT;1.2;AES256;prod"),
                _ => assert_eq!(first, "$ANSIBLE_VAULT;1.1;AES256"),
            }
            assert!(text.lines().skip(1).all(|l| l.len() <= 80));
            assert_eq!(decrypt(&text, &[secret("x", "pw")]).unwrap(), b"s3cr3t\n");
        }
        // Same salt, same text: the output is deterministic apart from the salt.
        let a = encrypt_with_salt(b"x", b"pw", None, &[7; 32]);
        assert_eq!(a, encrypt_with_salt(b"x", b"pw", None, &[7; 32]));
    }
}
