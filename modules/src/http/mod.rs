//! The HTTP modules: `get_url` (download to a file, checksums) and `uri` (any request, its
//! answer as a result). `client` makes the requests; this file holds what both read from their
//! parameters (headers, timeouts, the task's environment) and the digests they compute.
//!
//! It knows nothing of the controller: the `url` lookup there calls `client` directly.

pub mod client;
pub mod get_url;
pub mod uri;

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use sha2::Digest as _;
use std::collections::BTreeMap;
use std::io::Read;
use std::time::Duration;

use crate::ModuleError;

/// A number of seconds given as an integer or a numeric string (a templated `timeout`).
pub fn de_opt_secs<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        N(u64),
        F(f64),
        S(String),
    }
    match Option::<Raw>::deserialize(d)? {
        None => Ok(None),
        Some(Raw::N(n)) => Ok(Some(n)),
        Some(Raw::F(f)) if f >= 0.0 => Ok(Some(f as u64)),
        Some(Raw::S(s)) => s.trim().parse().map(Some).map_err(|_| {
            serde::de::Error::custom(format!("expected a number of seconds, found {s:?}"))
        }),
        Some(_) => Err(serde::de::Error::custom("expected a number of seconds")),
    }
}

/// `timeout` in seconds (0 is taken as "no wait limit", which urllib refuses; keep a bound).
pub fn timeout(secs: Option<u64>, default: u64) -> Duration {
    Duration::from_secs(secs.unwrap_or(default).max(1))
}

/// `headers` as pairs, values written as Ansible writes them (strings as they are, the rest as
/// JSON text).
pub fn header_pairs(headers: &Option<Map<String, Value>>) -> Vec<(String, String)> {
    headers
        .iter()
        .flatten()
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => s.clone(),
                Value::Bool(true) => "True".into(),
                Value::Bool(false) => "False".into(),
                other => other.to_string(),
            };
            (k.clone(), v)
        })
        .collect()
}

/// The task's `environment` (`_env`) as strings, for the proxy variables.
pub fn env_map(env: &Option<Map<String, Value>>) -> BTreeMap<String, String> {
    env.iter()
        .flatten()
        .filter_map(|(k, v)| match v {
            Value::String(s) => Some((k.clone(), s.clone())),
            Value::Null => None,
            other => Some((k.clone(), other.to_string())),
        })
        .collect()
}

/// The URL as results show it: a password in it replaced by `********`, as Ansible's `mask_url`.
pub fn mask_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("********"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

/// A URL with its user and password shown as `****`, as ansible-core 2.19's `mask_url` shows it
/// in the messages of its action plugins (`unarchive`'s) (`http://****:****@host/path`, `http://****@host/path`).
pub fn mask_userinfo(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let rest = &url[scheme_end..];
    let netloc_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let Some(at) = rest[..netloc_end].rfind('@') else {
        return url.to_string();
    };
    let mask = match rest[..at].contains(':') {
        true => "****:****",
        false => "****",
    };
    format!("{}{mask}{}", &url[..scheme_end], &rest[at..])
}

/// The file name a URL stands for: the last segment of its path, `index.html` when empty.
pub fn url_filename(url: &str) -> String {
    let path = url::Url::parse(url)
        .map(|u| u.path().to_string())
        .unwrap_or_default();
    let name = path.rsplit('/').next().unwrap_or_default();
    let name = url::form_urlencoded::parse(format!("x={}", name.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    if name.is_empty() {
        "index.html".into()
    } else {
        name
    }
}

/// `filename` of a `Content-Disposition` header, without any directory part.
pub fn disposition_filename(header: Option<&str>) -> Option<String> {
    let header = header?;
    for part in header.split(';').skip(1) {
        let Some((k, v)) = part.split_once('=') else {
            continue;
        };
        if k.trim().eq_ignore_ascii_case("filename") {
            let v = v.trim().trim_matches('"');
            let base = v.rsplit(['/', '\\']).next().unwrap_or_default();
            if !base.is_empty() && base != "." && base != ".." {
                return Some(base.to_string());
            }
        }
    }
    None
}

/// The most of an answer that is held in memory (`uri`'s content, a checksums file, the `url`
/// lookup): a larger one fails rather than being cut short (`get_url` streams to disk instead).
pub const MAX_IN_MEMORY: u64 = 64 * 1024 * 1024;

/// The whole body, or an error when it is larger than [`MAX_IN_MEMORY`].
pub fn read_limited(body: &mut dyn Read) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    body.take(MAX_IN_MEMORY + 1)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    if out.len() as u64 > MAX_IN_MEMORY {
        return Err(format!(
            "the answer is larger than {} MiB, the most held in memory (get_url writes any size to a file)",
            MAX_IN_MEMORY >> 20
        ));
    }
    Ok(out)
}

/// A digest algorithm of `checksum: algo:hex`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algo {
    Md5,
    Sha1,
    Sha224,
    Sha256,
    Sha384,
    Sha512,
}

impl Algo {
    pub fn parse(s: &str) -> Option<Algo> {
        // Case-sensitive, as Python's hashlib names are in ansible-core (`SHA256` fails there).
        Some(match s {
            "md5" => Algo::Md5,
            "sha1" => Algo::Sha1,
            "sha224" => Algo::Sha224,
            "sha256" => Algo::Sha256,
            "sha384" => Algo::Sha384,
            "sha512" => Algo::Sha512,
            _ => return None,
        })
    }

    pub fn hasher(self) -> Hasher {
        match self {
            Algo::Md5 => Hasher::Md5(md5::Md5::new()),
            Algo::Sha1 => Hasher::Sha1(sha1::Sha1::new()),
            Algo::Sha224 => Hasher::Sha224(sha2::Sha224::new()),
            Algo::Sha256 => Hasher::Sha256(sha2::Sha256::new()),
            Algo::Sha384 => Hasher::Sha384(sha2::Sha384::new()),
            Algo::Sha512 => Hasher::Sha512(sha2::Sha512::new()),
        }
    }
}

/// A running digest of one of the [`Algo`]s.
pub enum Hasher {
    Md5(md5::Md5),
    Sha1(sha1::Sha1),
    Sha224(sha2::Sha224),
    Sha256(sha2::Sha256),
    Sha384(sha2::Sha384),
    Sha512(sha2::Sha512),
}

impl Hasher {
    pub fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Md5(h) => h.update(data),
            Hasher::Sha1(h) => h.update(data),
            Hasher::Sha224(h) => h.update(data),
            Hasher::Sha256(h) => h.update(data),
            Hasher::Sha384(h) => h.update(data),
            Hasher::Sha512(h) => h.update(data),
        }
    }

    pub fn hex(self) -> String {
        match self {
            Hasher::Md5(h) => hex::encode(h.finalize()),
            Hasher::Sha1(h) => hex::encode(h.finalize()),
            Hasher::Sha224(h) => hex::encode(h.finalize()),
            Hasher::Sha256(h) => hex::encode(h.finalize()),
            Hasher::Sha384(h) => hex::encode(h.finalize()),
            Hasher::Sha512(h) => hex::encode(h.finalize()),
        }
    }
}

/// The hex digests of what `r` yields, for each of `algos`.
pub fn digest_reader(r: &mut dyn Read, algos: &[Algo]) -> std::io::Result<Vec<String>> {
    let mut hashers: Vec<Hasher> = algos.iter().map(|a| a.hasher()).collect();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            break;
        }
        for h in &mut hashers {
            h.update(&buf[..n]);
        }
    }
    Ok(hashers.into_iter().map(Hasher::hex).collect())
}

/// The digests of a host file, or None when it does not exist.
pub fn digest_file(
    path: &std::path::Path,
    algos: &[Algo],
) -> Result<Option<Vec<String>>, ModuleError> {
    match std::fs::File::open(path) {
        Ok(mut f) => digest_reader(&mut f, algos)
            .map(Some)
            .map_err(|e| ModuleError::io(path, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ModuleError::io(path, e)),
    }
}

/// Ansible's `fetch_file`, for modules that take a URL where they want a file (`apt`'s `deb`,
/// `apt_key`'s `url`): GET it on the host into `dir` under the URL's last path segment, and
/// return that path. An answer other than 200 fails as Ansible's does.
pub fn fetch_file(
    url: &str,
    dir: &std::path::Path,
    env: &[(String, String)],
) -> Result<std::path::PathBuf, crate::ModuleError> {
    let fail = |m: String| crate::ModuleError::failed(format!("Failure downloading {url}, {m}"));
    let mut resp = get_ok(url, env, true).map_err(fail)?;
    let name = url
        .split(['?', '#'])
        .next()
        .and_then(|u| u.rsplit('/').next())
        .filter(|n| !n.is_empty() && *n != "." && *n != "..")
        .unwrap_or("download");
    let path = dir.join(name);
    let mut f = std::fs::File::create(&path).map_err(|e| crate::ModuleError::io(&path, e))?;
    std::io::copy(&mut resp.body, &mut f).map_err(|e| fail(e.to_string()))?;
    Ok(path)
}

/// GET `url` on the host (proxies from `env` first), an answer other than 200 being an error
/// (its message is urllib's: `HTTP Error 404: Not Found`).
pub fn get_ok(
    url: &str,
    env: &[(String, String)],
    validate_certs: bool,
) -> Result<client::Response, String> {
    let mut req = client::Request::new(url, "GET");
    req.env = env.iter().cloned().collect();
    req.validate_certs = validate_certs;
    let resp = client::send(&req).map_err(|e| e.to_string())?;
    if resp.status != 200 {
        return Err(resp.msg());
    }
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_from_urls_and_headers() {
        assert_eq!(url_filename("http://h/a/b.tar.gz?x=1"), "b.tar.gz");
        assert_eq!(url_filename("http://h/"), "index.html");
        assert_eq!(url_filename("http://h/a%20b"), "a b");
        assert_eq!(
            disposition_filename(Some("attachment; filename=\"../x.bin\"")).as_deref(),
            Some("x.bin")
        );
        assert_eq!(disposition_filename(Some("inline")), None);
        assert_eq!(
            mask_url("http://u:secret@h/x"),
            "http://u:********@h/x".to_string()
        );
    }

    #[test]
    fn userinfo_is_masked_whole() {
        assert_eq!(mask_userinfo("http://u:p@h/x@y"), "http://****:****@h/x@y");
        assert_eq!(mask_userinfo("https://u@h:8080/"), "https://****@h:8080/");
        assert_eq!(mask_userinfo("http://h/a@b"), "http://h/a@b");
        assert_eq!(mask_userinfo("files/a.tar"), "files/a.tar");
    }

    #[test]
    fn answers_larger_than_the_memory_limit_fail_instead_of_being_cut() {
        let mut big = std::io::repeat(b'x').take(MAX_IN_MEMORY + 1);
        assert!(read_limited(&mut big).unwrap_err().contains("64 MiB"));
        let mut small = &b"abc"[..];
        assert_eq!(read_limited(&mut small).unwrap(), b"abc");
    }

    #[test]
    fn digests() {
        let d = digest_reader(&mut &b"abc"[..], &[Algo::Sha1, Algo::Md5]).unwrap();
        assert_eq!(d[0], "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(d[1], "900150983cd24fb0d6963f7d28e17f72");
    }
}
