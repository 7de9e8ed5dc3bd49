//! Encoding filters: shell quoting (`quote`), `b64encode`/`b64decode`, `hash` and `urldecode`.

use std::fmt::Write as _;

use base64::Engine as _;
use minijinja::value::ValueKind;
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

/// Jinja2's `urlencode` (ansible-core's): a string (or any other non-iterable, as text) quoted
/// as Python's `quote` with `/` kept; a mapping, or a list of pairs, as a query string whose
/// keys and values also quote `/` and give a space as `+`.
pub(super) fn filter_urlencode(value: &Value) -> Result<String, Error> {
    let value = defined(value)?;
    let pairs: Vec<(Value, Value)> = match value.kind() {
        ValueKind::Map => value
            .try_iter()?
            .map(|k| Ok((k.clone(), value.get_item(&k)?)))
            .collect::<Result<_, Error>>()?,
        ValueKind::Seq | ValueKind::Iterable => value
            .try_iter()?
            .map(|pair| {
                let kv: Vec<Value> = pair.try_iter()?.collect();
                <[Value; 2]>::try_from(kv)
                    .map(|[k, v]| (k, v))
                    .map_err(|_| op_err("urlencode: a list must hold (key, value) pairs"))
            })
            .collect::<Result<_, Error>>()?,
        _ => return Ok(url_quote(&py_string(value)?, false)),
    };
    let mut out = Vec::with_capacity(pairs.len());
    for (k, v) in pairs {
        out.push(format!(
            "{}={}",
            url_quote(&py_string(&k)?, true),
            url_quote(&py_string(&v)?, true)
        ));
    }
    Ok(out.join("&"))
}

/// Python's `quote` of UTF-8 text: letters, digits and `_.-~` (and `/` unless `for_query`)
/// kept, every other byte `%XX`; in a query, a space is `+`.
fn url_quote(s: &str, for_query: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b'~' => {
                out.push(b as char)
            }
            b'/' if !for_query => out.push('/'),
            b' ' if for_query => out.push('+'),
            _ => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

/// Ansible's `urldecode`, Python's `urllib.parse.unquote_plus`: `+` is a space, and in each
/// run of ASCII text the `%XX` escapes are bytes read as UTF-8 (a byte that is not, U+FFFD).
pub(super) fn filter_urldecode(value: &Value) -> Result<String, Error> {
    let Some(s) = defined(value)?.as_str() else {
        return Err(op_err(format!(
            "'{}' object has no attribute 'replace'",
            super::types::filter_type_debug(value)
        )));
    };
    let s = s.replace('+', " ");
    let mut out = String::with_capacity(s.len());
    let mut bytes = Vec::new();
    for run in s.split_inclusive(|c: char| !c.is_ascii()) {
        // The run's ASCII part, then the one other character that ended it.
        let ascii_len = run.find(|c: char| !c.is_ascii()).unwrap_or(run.len());
        let (ascii, other) = run.split_at(ascii_len);
        let b = ascii.as_bytes();
        bytes.clear();
        let mut i = 0;
        while i < b.len() {
            let hex = |x: u8| (x as char).to_digit(16);
            match (
                b[i],
                b.get(i + 1).and_then(|&x| hex(x)),
                b.get(i + 2).and_then(|&x| hex(x)),
            ) {
                (b'%', Some(h), Some(l)) => {
                    bytes.push((h * 16 + l) as u8);
                    i += 3;
                }
                (c, _, _) => {
                    bytes.push(c);
                    i += 1;
                }
            }
        }
        out.push_str(&String::from_utf8_lossy(&bytes));
        out.push_str(other);
    }
    Ok(out)
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

/// Ansible's `md5` filter: the hex MD5 of the text.
pub(super) fn filter_md5(value: &Value) -> Result<String, Error> {
    filter_hash(value, Some("md5".into()))
}

/// Ansible's `sha1` and `checksum` filters: the hex SHA-1 of the text.
pub(super) fn filter_sha1(value: &Value) -> Result<String, Error> {
    filter_hash(value, Some("sha1".into()))
}

/// Ansible's own namespace for `to_uuid`.
const UUID_NAMESPACE_ANSIBLE: &str = "361E6D51-FAEC-444A-9079-341386DA8E2E";

/// The 16 bytes of a UUID written as Python's `uuid.UUID` reads it: 32 hex digits, hyphens
/// anywhere, optionally in braces or after `urn:uuid:`.
fn uuid_bytes(text: &str) -> Option<[u8; 16]> {
    let t = text.strip_prefix("urn:").unwrap_or(text);
    let t = t.strip_prefix("uuid:").unwrap_or(t);
    let t = t.trim_matches(|c| c == '{' || c == '}').replace('-', "");
    let raw = hex::decode(t).ok()?;
    raw.try_into().ok()
}

/// Ansible's `to_uuid(namespace=...)`: the name-based (SHA-1, version 5) UUID of the text.
pub(super) fn filter_to_uuid(
    value: &Value,
    kwargs: minijinja::value::Kwargs,
) -> Result<String, Error> {
    let ns: Option<Value> = kwargs.get("namespace")?;
    kwargs.assert_all_used()?;
    let ns_bytes = match &ns {
        None => uuid_bytes(UUID_NAMESPACE_ANSIBLE),
        Some(v) => match v.as_str() {
            Some(s) => Some(uuid_bytes(s).ok_or_else(|| {
                op_err(format!(
                    "Invalid value '{s}' for 'namespace': badly formed hexadecimal UUID string"
                ))
            })?),
            None => {
                return Err(op_err(format!(
                    "Invalid value '{}' for 'namespace': '{}' object has no attribute 'replace'",
                    py_string(v)?,
                    super::types::filter_type_debug(v)
                )))
            }
        },
    }
    .ok_or_else(|| op_err("to_uuid: the namespace is not a UUID"))?;
    let mut h = sha1::Sha1::new();
    h.update(ns_bytes);
    h.update(py_string(defined(value)?)?.as_bytes());
    let d = h.finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    b[6] = (b[6] & 0x0f) | 0x50;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hx = hex::encode(b);
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hx[..8],
        &hx[8..12],
        &hx[12..16],
        &hx[16..20],
        &hx[20..]
    ))
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use crate::template::Templar;
    use serde_json::json;

    #[test]
    fn urlencode_as_jinja2() {
        assert_eq!(eval("'a b/ä?' | urlencode"), json!("a%20b/%C3%A4%3F"));
        assert_eq!(
            eval("{'a': 'b c', 'd/': 1} | urlencode"),
            json!("a=b+c&d%2F=1")
        );
        assert_eq!(eval("[['x', 'y z']] | urlencode"), json!("x=y+z"));
        assert_eq!(eval("42 | urlencode"), json!("42"));
    }

    #[test]
    fn urldecode_as_unquote_plus() {
        assert_eq!(
            eval("'a%20b+c%2Bd%zz%e2%82%ac%ff%C3' | urldecode"),
            json!("a b c+d%zz\u{20ac}\u{fffd}\u{fffd}")
        );
        // A non-ASCII character ends a run of escapes: the bytes either side are apart.
        assert_eq!(
            eval("'%c3é%a9' | urldecode"),
            json!("\u{fffd}\u{e9}\u{fffd}")
        );
        assert_eq!(eval("'plain' | urldecode"), json!("plain"));
    }

    #[test]
    fn uuid_and_digest_filters() {
        assert_eq!(
            eval("'monkeys' | to_uuid"),
            json!("0d03a178-da0f-5b51-934e-cda9c76578c3")
        );
        assert_eq!(
            eval("'hash' | sha1"),
            json!("2346ad27d7568ba9896f1b7da6b5991251debdf2")
        );
        assert_eq!(eval("'' | md5"), json!("d41d8cd98f00b204e9800998ecf8427e"));
        let e = Templar::new()
            .eval("'hey' | to_uuid(namespace=22)", &vars())
            .unwrap_err()
            .to_string();
        assert!(e.contains("Invalid value '22' for 'namespace'"), "{e}");
    }

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
