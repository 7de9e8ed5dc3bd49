//! A small real HTTP/1.1 server on 127.0.0.1 for the get_url/uri/url-lookup tests: fixed routes
//! (content, redirects, basic auth, `Content-Disposition`, a JSON echo), every request logged
//! (method, target, headers, body) so that tests can count what was fetched. Also a TLS server
//! (`openssl s_server` with a self-signed certificate made for the test), and the same server
//! behind rustls on an address and certificate of the test's choosing (`Server::start_tls`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

/// One request as the server read it.
#[derive(Clone, Debug)]
pub struct Logged {
    pub method: String,
    /// The request target as sent: a path, or an absolute URL through a proxy.
    pub target: String,
    /// Names lower-cased.
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

/// The answer to a path.
#[derive(Clone, Debug)]
pub struct Route {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// `user:password` this path needs (basic auth; a challenge without it).
    pub auth: Option<String>,
}

impl Route {
    pub fn ok(body: &str) -> Route {
        Route {
            status: 200,
            headers: vec![("Content-Type".into(), "text/plain".into())],
            body: body.as_bytes().to_vec(),
            auth: None,
        }
    }

    pub fn json(body: &str) -> Route {
        Route {
            headers: vec![("Content-Type".into(), "application/json".into())],
            ..Route::ok(body)
        }
    }

    pub fn redirect(status: u16, to: &str) -> Route {
        Route {
            status,
            headers: vec![("Location".into(), to.into())],
            body: Vec::new(),
            auth: None,
        }
    }

    pub fn header(mut self, k: &str, v: &str) -> Route {
        self.headers.push((k.into(), v.into()));
        self
    }

    pub fn needs(mut self, userpass: &str) -> Route {
        self.auth = Some(userpass.into());
        self
    }
}

/// The server: its routes can change while it runs; it stops when dropped.
pub struct Server {
    pub port: u16,
    addr: std::net::SocketAddr,
    routes: Arc<Mutex<BTreeMap<String, Route>>>,
    log: Arc<Mutex<Vec<Logged>>>,
    /// Paths whose next requests fail (`fail_next`): how many are left to fail.
    failing: Arc<Mutex<BTreeMap<String, usize>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Server {
    pub fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        Server::run(listener, None)
    }

    /// HTTPS on `listener`: rustls with `chain` (DER, the server's certificate first) and its
    /// PKCS#8 `key` (DER); the routes and the log are the plain server's.
    pub fn start_tls(listener: TcpListener, chain: Vec<Vec<u8>>, key: Vec<u8>) -> Server {
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(
                chain.into_iter().map(CertificateDer::from).collect(),
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)),
            )
            .expect("the server's certificate and key");
        Server::run(listener, Some(Arc::new(config)))
    }

    fn run(listener: TcpListener, tls: Option<Arc<rustls::ServerConfig>>) -> Server {
        let addr = listener.local_addr().unwrap();
        let port = addr.port();
        let routes: Arc<Mutex<BTreeMap<String, Route>>> = Arc::default();
        let log: Arc<Mutex<Vec<Logged>>> = Arc::default();
        let failing: Arc<Mutex<BTreeMap<String, usize>>> = Arc::default();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (r, l, s) = (routes.clone(), log.clone(), stop.clone());
        let f = failing.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (r, l, f) = (r.clone(), l.clone(), f.clone());
                let tls = tls.clone();
                std::thread::spawn(move || match tls {
                    None => serve(&mut { conn }, &r, &l, &f),
                    Some(config) => {
                        let Ok(session) = rustls::ServerConnection::new(config) else {
                            return;
                        };
                        let mut stream = rustls::StreamOwned::new(session, conn);
                        serve(&mut stream, &r, &l, &f);
                        stream.conn.send_close_notify();
                        let _ = stream.flush();
                    }
                });
            }
        });
        Server {
            port,
            addr,
            routes,
            log,
            failing,
            stop,
        }
    }

    /// The next `n` requests to `path` are answered `503 Service Unavailable`, whatever its
    /// route: a receiver that fails before it works.
    pub fn fail_next(&self, path: &str, n: usize) {
        self.failing.lock().unwrap().insert(path.into(), n);
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn route(&self, path: &str, route: Route) {
        self.routes.lock().unwrap().insert(path.into(), route);
    }

    pub fn log(&self) -> Vec<Logged> {
        self.log.lock().unwrap().clone()
    }

    /// How many requests of this method asked for a target ending in `path`.
    pub fn count(&self, method: &str, path: &str) -> usize {
        self.log()
            .iter()
            .filter(|r| r.method == method && r.target.ends_with(path))
            .count()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve(
    conn: &mut impl ReadWrite,
    routes: &Mutex<BTreeMap<String, Route>>,
    log: &Mutex<Vec<Logged>>,
    failing: &Mutex<BTreeMap<String, usize>>,
) {
    let mut reader = BufReader::new(&mut *conn);
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or_default().to_string();
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    let _ = reader.read_exact(&mut body);
    // The request is read whole (`Connection: close`, no pipelining): nothing buffered is lost.
    drop(reader);
    let body = String::from_utf8_lossy(&body).into_owned();
    // Through a proxy the target is absolute: route on its path.
    let path = match target.strip_prefix("http://") {
        Some(rest) => rest.find('/').map_or("/".into(), |i| rest[i..].to_string()),
        None => target.clone(),
    };
    let path = path.split('?').next().unwrap_or_default().to_string();
    log.lock().unwrap().push(Logged {
        method: method.clone(),
        target,
        headers: headers.clone(),
        body: body.clone(),
    });
    let fail = match failing.lock().unwrap().get_mut(&path) {
        Some(n) if *n > 0 => {
            *n -= 1;
            true
        }
        _ => false,
    };
    let route = if fail {
        Some(Route {
            status: 503,
            ..Route::ok("not yet\n")
        })
    } else {
        routes.lock().unwrap().get(&path).cloned()
    };
    let route = match route {
        // `/echo` answers with what it was sent, as JSON.
        None if path == "/echo" => Route::json(
            &serde_json::json!({"method": method, "body": body, "type": headers.get("content-type")})
                .to_string(),
        )
        .header("Set-Cookie", "session=abc123; Path=/"),
        None => Route {
            status: 404,
            ..Route::ok("not found\n")
        },
        Some(r) => r,
    };
    let route = match &route.auth {
        Some(up) => {
            use base64::Engine as _;
            let want = format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(up)
            );
            if headers.get("authorization") == Some(&want) {
                route
            } else {
                Route {
                    status: 401,
                    ..Route::ok("auth needed\n")
                }
                .header("WWW-Authenticate", "Basic realm=\"test\"")
            }
        }
        None => route,
    };
    let reason = match route.status {
        200 => "OK",
        201 => "Created",
        301 => "Moved Permanently",
        302 => "Found",
        401 => "Unauthorized",
        404 => "Not Found",
        503 => "Service Unavailable",
        _ => "Other",
    };
    let mut out = format!("HTTP/1.1 {} {reason}\r\n", route.status);
    for (k, v) in &route.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        route.body.len()
    ));
    let _ = conn.write_all(out.as_bytes());
    if method != "HEAD" {
        let _ = conn.write_all(&route.body);
    }
    let _ = conn.flush();
}

/// A connection, plain or TLS.
trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// `openssl s_server -www` with a self-signed certificate for 127.0.0.1, killed when dropped.
pub struct TlsServer {
    pub port: u16,
    child: Child,
}

impl TlsServer {
    pub fn start(dir: &Path) -> TlsServer {
        assert!(
            Command::new("openssl").arg("version").output().is_ok(),
            "openssl is missing: apt-get install openssl (.ci/run does)"
        );
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        let made = Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            ])
            .args([
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .expect("run openssl req");
        assert!(made.status.success(), "{made:?}");
        // A free port: bind, note it, release it for s_server.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new("openssl")
            .args(["s_server", "-www", "-accept"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("-cert")
            .arg(&cert)
            .arg("-key")
            .arg(&key)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start openssl s_server");
        // s_server says ACCEPT once it listens.
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while out.read_line(&mut line).unwrap_or(0) > 0 && !line.contains("ACCEPT") {
            line.clear();
        }
        assert!(line.contains("ACCEPT"), "openssl s_server did not start");
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        TlsServer { port, child }
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
