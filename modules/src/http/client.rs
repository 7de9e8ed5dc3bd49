//! One HTTP(S) request as Ansible's `fetch_url` makes it: redirects by policy, basic auth (sent
//! up front or after a `401` challenge), proxies from `http_proxy`/`https_proxy`/`no_proxy`,
//! certificate checking that can be turned off, and the `info` result shape (lower-cased
//! headers, `cookies`, `msg`, `status`, `url`).
//!
//! ureq (rustls with ring, the system's CA store) does the wire work; this file only decides
//! what to send. It knows nothing of modules' parameters or files.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Map, Value};
use url::Url;

/// Which redirects are followed (`follow_redirects`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Follow {
    /// `none` / `no`: the 3xx answer is the response.
    None,
    /// `safe`: only for GET and HEAD.
    Safe,
    /// `all` / `urllib2` / `yes`.
    All,
}

impl Follow {
    pub fn parse(s: &str) -> Result<Follow, String> {
        match s {
            "none" | "no" => Ok(Follow::None),
            "safe" => Ok(Follow::Safe),
            "all" | "urllib2" | "yes" => Ok(Follow::All),
            other => Err(format!(
                "follow_redirects must be one of all, no, none, safe, urllib2, yes; got {other:?}"
            )),
        }
    }
}

/// Everything that shapes one request.
#[derive(Clone, Debug)]
pub struct Request {
    pub url: String,
    pub method: String,
    /// In the order given; a later one of the same name (any case) replaces an earlier one.
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub force_basic_auth: bool,
    pub timeout: Duration,
    pub validate_certs: bool,
    pub follow: Follow,
    pub use_proxy: bool,
    pub http_agent: String,
    /// `force: true`: ask caches for a fresh copy (`cache-control: no-cache`).
    pub no_cache: bool,
    /// The task's `environment`, looked at before the agent's own for proxy variables.
    pub env: BTreeMap<String, String>,
}

impl Request {
    pub fn new(url: &str, method: &str) -> Request {
        Request {
            url: url.to_string(),
            method: method.to_string(),
            headers: Vec::new(),
            body: None,
            username: None,
            password: None,
            force_basic_auth: false,
            timeout: Duration::from_secs(10),
            validate_certs: true,
            follow: Follow::All,
            use_proxy: true,
            http_agent: "ansible-httpget".into(),
            no_cache: false,
            env: BTreeMap::new(),
        }
    }
}

/// An answer, whatever its status; the body is still to be read.
pub struct Response {
    pub status: u16,
    pub reason: String,
    /// The URL that answered (after redirects), without credentials.
    pub url: String,
    /// Names lower-cased, in the order received.
    pub headers: Vec<(String, String)>,
    pub body: Box<dyn Read + Send + Sync>,
}

impl Response {
    /// The first value of a header (`name` lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Ansible's `info`: every header lower-cased (repeated ones joined by `, `), `cookies` and
    /// `cookies_string` from `Set-Cookie`, `msg`, `url` and `status`.
    pub fn info(&self) -> Map<String, Value> {
        let mut info = Map::new();
        for (name, value) in &self.headers {
            let joined = match info.get(name).and_then(Value::as_str) {
                Some(prev) => format!("{prev}, {value}"),
                None => value.clone(),
            };
            info.insert(name.clone(), Value::String(joined));
        }
        let mut cookies = Map::new();
        let mut pairs = Vec::new();
        for (name, value) in self.headers.iter().filter(|(n, _)| n == "set-cookie") {
            let _ = name;
            let first = value.split(';').next().unwrap_or_default();
            if let Some((k, v)) = first.split_once('=') {
                cookies.insert(k.trim().to_string(), Value::String(v.trim().to_string()));
                pairs.push(format!("{}={}", k.trim(), v.trim()));
            }
        }
        info.insert("cookies_string".into(), Value::String(pairs.join("; ")));
        info.insert("cookies".into(), Value::Object(cookies));
        info.insert("msg".into(), Value::String(self.msg()));
        info.insert("url".into(), Value::String(self.url.clone()));
        info.insert("status".into(), Value::from(self.status));
        info
    }

    /// `OK (N bytes)` for a success, `HTTP Error 404: Not Found` for an error, as urllib says.
    pub fn msg(&self) -> String {
        if self.status < 400 && !(300..400).contains(&self.status) {
            format!(
                "OK ({} bytes)",
                self.header("content-length").unwrap_or("unknown")
            )
        } else {
            format!("HTTP Error {}: {}", self.status, self.reason)
        }
    }
}

/// A request that got no HTTP answer (name resolution, connection, TLS, timeout).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TransportError(pub String);

/// At most this many redirects are followed, as urllib does.
const MAX_REDIRECTS: usize = 10;

/// Send `req`, following redirects as its policy says.
pub fn send(req: &Request) -> Result<Response, TransportError> {
    let mut url = parse_url(&req.url)?;
    // Credentials in the URL are used when no username is given, as Ansible does.
    let mut username = req.username.clone().filter(|u| !u.is_empty());
    let mut password = req.password.clone();
    if !url.username().is_empty() {
        if username.is_none() {
            username = Some(decode(url.username()));
            password = url.password().map(decode);
        }
        let _ = url.set_username("");
        let _ = url.set_password(None);
    }
    let auth = username.map(|u| {
        let token = base64::engine::general_purpose::STANDARD
            .encode(format!("{u}:{}", password.unwrap_or_default()));
        format!("Basic {token}")
    });
    let mut method = req.method.clone();
    let mut body = req.body.clone();
    let origin_host = url.host_str().map(str::to_string);
    for _ in 0..=MAX_REDIRECTS {
        // Credentials go to the host they were given for only.
        let same_host = url.host_str().map(str::to_string) == origin_host;
        let send_auth = auth.as_ref().filter(|_| same_host);
        let mut resp = once(
            req,
            &url,
            &method,
            body.as_deref(),
            send_auth.filter(|_| req.force_basic_auth),
        )?;
        if resp.status == 401 && !req.force_basic_auth {
            let challenged = resp
                .header("www-authenticate")
                .is_some_and(|c| c.trim_start().to_ascii_lowercase().starts_with("basic"));
            if let (true, Some(a)) = (challenged, send_auth) {
                resp = once(req, &url, &method, body.as_deref(), Some(a))?;
            }
        }
        let redirect = matches!(resp.status, 301 | 302 | 303 | 307 | 308);
        let location = resp.header("location").map(str::to_string);
        let follow = match req.follow {
            Follow::None => false,
            Follow::Safe => method == "GET" || method == "HEAD",
            Follow::All => true,
        };
        match (redirect && follow, location) {
            (true, Some(loc)) => {
                url = url
                    .join(&loc)
                    .map_err(|e| TransportError(format!("bad redirect location {loc:?}: {e}")))?;
                // 301/302/303 turn into a GET without body, as browsers and urllib do.
                if resp.status != 307 && resp.status != 308 && method != "HEAD" {
                    method = "GET".into();
                    body = None;
                }
            }
            _ => return Ok(resp),
        }
    }
    Err(TransportError(format!(
        "more than {MAX_REDIRECTS} redirects from {}",
        req.url
    )))
}

fn decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={s}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| s.to_string())
}

fn parse_url(s: &str) -> Result<Url, TransportError> {
    let url = Url::parse(s).map_err(|e| TransportError(format!("invalid URL {s:?}: {e}")))?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        other => Err(TransportError(format!(
            "URL scheme {other:?} is not supported (http and https are): {s}"
        ))),
    }
}

/// One exchange, no redirect followed.
fn once(
    req: &Request,
    url: &Url,
    method: &str,
    body: Option<&[u8]>,
    auth: Option<&String>,
) -> Result<Response, TransportError> {
    let mut builder = ureq::AgentBuilder::new()
        .redirects(0)
        .timeout_connect(req.timeout)
        .timeout_read(req.timeout)
        .timeout_write(req.timeout)
        .user_agent(&req.http_agent);
    if !req.validate_certs {
        builder = builder.tls_config(insecure_tls());
    }
    if req.use_proxy {
        if let Some(proxy) = proxy_for(url, &|k| env_var(&req.env, k)) {
            let p = ureq::Proxy::new(&proxy)
                .map_err(|e| TransportError(format!("invalid proxy {proxy:?}: {e}")))?;
            builder = builder.proxy(p);
        }
    }
    let agent = builder.build();
    let mut r = agent.request_url(method, url);
    if req.no_cache {
        r = r.set("cache-control", "no-cache");
    }
    if let Some(a) = auth {
        r = r.set("authorization", a);
    }
    // Headers the task gives override the ones set above.
    for (k, v) in &req.headers {
        r = r.set(k, v);
    }
    let result = match body {
        Some(b) => r.send_bytes(b),
        None if method == "POST" || method == "PUT" || method == "PATCH" => r.send_bytes(&[]),
        None => r.call(),
    };
    let resp = match result {
        Ok(resp) => resp,
        Err(ureq::Error::Status(_, resp)) => resp,
        Err(ureq::Error::Transport(t)) => return Err(TransportError(transport_msg(url, &t))),
    };
    let headers = resp
        .headers_names()
        .into_iter()
        .flat_map(|n| {
            let lower = n.to_ascii_lowercase();
            resp.all(&n)
                .into_iter()
                .map(move |v| (lower.clone(), v.to_string()))
                .collect::<Vec<_>>()
        })
        .collect();
    Ok(Response {
        status: resp.status(),
        reason: resp.status_text().to_string(),
        url: url.to_string(),
        headers,
        body: resp.into_reader(),
    })
}

/// urllib's words where they matter to a reader: certificate failures say so.
fn transport_msg(url: &Url, t: &ureq::Transport) -> String {
    let text = t.to_string();
    if text.contains("certificate") || text.contains("UnknownIssuer") {
        format!(
            "Request failed: certificate verify failed for {url} ({text}); \
             validate_certs: false skips the check"
        )
    } else {
        format!("Request failed: {text}")
    }
}

fn env_var(env: &BTreeMap<String, String>, key: &str) -> Option<String> {
    env.get(key)
        .cloned()
        .or_else(|| std::env::var(key).ok())
        .filter(|v| !v.is_empty())
}

/// The proxy Python's urllib would use for `url`: `<scheme>_proxy` (lower case first), unless
/// `no_proxy` names the host (`*`, the host itself, or a domain it ends in).
pub fn proxy_for(url: &Url, var: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let scheme = url.scheme();
    let proxy = var(&format!("{scheme}_proxy"))
        .or_else(|| var(&format!("{}_PROXY", scheme.to_ascii_uppercase())))?;
    let host = url.host_str().unwrap_or_default().trim_matches(['[', ']']);
    let no_proxy = var("no_proxy").or_else(|| var("NO_PROXY"));
    if let Some(list) = no_proxy {
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if entry == "*" {
                return None;
            }
            let name = entry.trim_start_matches('.');
            let name = name.rsplit_once(':').map_or(name, |(h, p)| {
                if p.chars().all(|c| c.is_ascii_digit()) {
                    h
                } else {
                    name
                }
            });
            let host_l = host.to_ascii_lowercase();
            let name_l = name.to_ascii_lowercase();
            if host_l == name_l || host_l.ends_with(&format!(".{name_l}")) {
                return None;
            }
        }
    }
    Some(proxy)
}

/// `validate_certs: false`: any certificate is accepted (signatures are still checked, so the
/// handshake itself is sound).
fn insecure_tls() -> Arc<ureq::rustls::ClientConfig> {
    use ureq::rustls;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
        .with_no_client_auth();
    Arc::new(config)
}

#[derive(Debug)]
struct AcceptAny(Arc<ureq::rustls::crypto::CryptoProvider>);

impl ureq::rustls::client::danger::ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &ureq::rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[ureq::rustls::pki_types::CertificateDer<'_>],
        _server_name: &ureq::rustls::pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: ureq::rustls::pki_types::UnixTime,
    ) -> Result<ureq::rustls::client::danger::ServerCertVerified, ureq::rustls::Error> {
        Ok(ureq::rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &ureq::rustls::pki_types::CertificateDer<'_>,
        dss: &ureq::rustls::DigitallySignedStruct,
    ) -> Result<ureq::rustls::client::danger::HandshakeSignatureValid, ureq::rustls::Error> {
        ureq::rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &ureq::rustls::pki_types::CertificateDer<'_>,
        dss: &ureq::rustls::DigitallySignedStruct,
    ) -> Result<ureq::rustls::client::danger::HandshakeSignatureValid, ureq::rustls::Error> {
        ureq::rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<ureq::rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_proxy_matches_hosts_and_domains() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let u = Url::parse("http://a.example.com:8080/x").unwrap();
        let p = env(&[("http_proxy", "http://p:3128")]);
        assert_eq!(proxy_for(&u, &p).as_deref(), Some("http://p:3128"));
        let p = env(&[
            ("HTTP_PROXY", "http://q:3128"),
            ("no_proxy", "other,.example.com"),
        ]);
        assert_eq!(proxy_for(&u, &p), None);
        let p = env(&[
            ("http_proxy", "http://p:3128"),
            ("no_proxy", "example.com:80"),
        ]);
        assert_eq!(proxy_for(&u, &p), None);
        let p = env(&[("http_proxy", "http://p:3128"), ("no_proxy", "ample.com")]);
        assert!(proxy_for(&u, &p).is_some());
        let p = env(&[("https_proxy", "http://p:3128")]);
        assert_eq!(proxy_for(&u, &p), None, "https_proxy is not for http URLs");
        let p = env(&[("http_proxy", "http://p:3128"), ("NO_PROXY", "*")]);
        assert_eq!(proxy_for(&u, &p), None);
    }

    #[test]
    fn follow_words() {
        assert_eq!(Follow::parse("urllib2").unwrap(), Follow::All);
        assert_eq!(Follow::parse("no").unwrap(), Follow::None);
        assert!(Follow::parse("sometimes").is_err());
    }
}
