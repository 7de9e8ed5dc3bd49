//! Encoding filters: shell quoting (`quote`), `b64encode`/`b64decode` and `hash`.

use std::fmt::Write as _;

use base64::Engine as _;
use minijinja::{Error, Value};
use sha2::Digest as _;

use crate::template::pyrepr::py_string;
use crate::template::value::{defined, op_err};

/// Python's `shlex.quote`.
pub(super) fn filter_quote(value: &Value) -> Result<String, Error> {
    let s = py_string(defined(value)?)?;
    if s.is_empty() {
        return Ok("''".into());
    }
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "@%+=:,./-_".contains(c))
    {
        return Ok(s);
    }
    Ok(format!("'{}'", s.replace('\'', "'\"'\"'")))
}

pub(super) fn filter_b64encode(value: &Value) -> Result<String, Error> {
    let s = py_string(defined(value)?)?;
    Ok(base64::engine::general_purpose::STANDARD.encode(s.as_bytes()))
}

pub(super) fn filter_b64decode(value: &str) -> Result<String, Error> {
    let cleaned: String = value.chars().filter(|c| !c.is_whitespace()).collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(cleaned.as_bytes())
        .map_err(|e| op_err(format!("b64decode: {e}")))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// `hash('sha256')`: sha1 (Ansible's default), md5 and the SHA-2 family.
pub(super) fn filter_hash(value: &Value, algorithm: Option<String>) -> Result<String, Error> {
    let s = py_string(defined(value)?)?;
    let algo = algorithm.unwrap_or_else(|| "sha1".into());
    let digest: Vec<u8> = match algo.as_str() {
        "sha1" => sha1::Sha1::digest(s.as_bytes()).to_vec(),
        "md5" => md5::Md5::digest(s.as_bytes()).to_vec(),
        "sha224" => sha2::Sha224::digest(s.as_bytes()).to_vec(),
        "sha256" => sha2::Sha256::digest(s.as_bytes()).to_vec(),
        "sha384" => sha2::Sha384::digest(s.as_bytes()).to_vec(),
        "sha512" => sha2::Sha512::digest(s.as_bytes()).to_vec(),
        other => {
            return Err(op_err(format!(
                "hash: unsupported algorithm {other:?} (use sha1, md5, sha224, sha256, sha384 or sha512)"
            )))
        }
    };
    Ok(digest.iter().fold(String::new(), |mut acc, b| {
        let _ = write!(acc, "{b:02x}");
        acc
    }))
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use crate::template::Templar;
    use serde_json::json;

    #[test]
    fn encoding_filters() {
        assert_eq!(
            eval("'simple-path/x.txt' | quote"),
            json!("simple-path/x.txt")
        );
        assert_eq!(eval("\"it's here\" | quote"), json!("'it'\"'\"'s here'"));
        assert_eq!(eval("'' | quote"), json!("''"));
        assert_eq!(eval("'hello' | b64encode"), json!("aGVsbG8="));
        assert_eq!(eval("'aGVsbG8=' | b64decode"), json!("hello"));
        assert_eq!(
            eval("'abc' | hash('sha256')"),
            json!("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
        assert_eq!(
            eval("'hello' | hash"),
            json!("aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d")
        );
        assert_eq!(
            eval("'hello' | hash('md5')"),
            json!("5d41402abc4b2a76b9719d911017c592")
        );
        assert!(Templar::new().eval("'abc' | hash('crc')", &vars()).is_err());
    }
}
