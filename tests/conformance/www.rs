//! The HTTP server a case gets when its `files` hold `www/...` entries: those files, served on
//! 127.0.0.1 at a port fixed by the case's name (so that ansible-core's cached results and
//! fixpoint's name the same URLs), for `get_url`, `uri` and the `url` lookup. Both tools see
//! it as the extra variable `http` (`http://127.0.0.1:<port>`), which `case::parse` adds to the
//! case's `args`.
//!
//! GET and HEAD of `/<path>` answer the file of `www/<path>` (`text/plain`, or
//! `application/json` for `.json`); anything else is 404.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::case::Case;

/// Serves the case's `www/` files until dropped.
pub struct Www {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl Www {
    pub fn start(case: &Case) -> Result<Option<Www>, String> {
        let Some(port) = case.http_port() else {
            return Ok(None);
        };
        let files: BTreeMap<String, String> = case
            .files
            .iter()
            .filter_map(|(k, v)| k.strip_prefix("www").map(|p| (p.to_string(), v.clone())))
            .collect();
        let listener = TcpListener::bind(("127.0.0.1", port)).map_err(|e| {
            format!("the case's HTTP server cannot listen on 127.0.0.1:{port}: {e}")
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(conn) = conn {
                    answer(conn, &files);
                }
            }
        });
        Ok(Some(Www { port, stop }))
    }
}

impl Drop for Www {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn answer(conn: TcpStream, files: &BTreeMap<String, String>) {
    let Ok(clone) = conn.try_clone() else { return };
    let mut reader = BufReader::new(clone);
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default();
    let path = parts.next().unwrap_or_default();
    let path = path.split('?').next().unwrap_or_default();
    let (status, kind, body) = match files.get(path) {
        Some(b) if method == "GET" || method == "HEAD" => {
            let kind = if path.ends_with(".json") {
                "application/json"
            } else {
                "text/plain"
            };
            ("200 OK", kind, b.as_str())
        }
        _ => ("404 Not Found", "text/plain", "not found\n"),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut conn = conn;
    let _ = conn.write_all(head.as_bytes());
    if method != "HEAD" {
        let _ = conn.write_all(body.as_bytes());
    }
}
