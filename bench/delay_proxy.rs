//! A TCP proxy that delays every byte by a fixed time in each direction: fixpoint, Ansible and
//! the `ssh host true` floor measured over an emulated WAN (`bench/wan.sh`, through `run.sh`'s
//! `DELAY_MS`), on one machine without root's `tc netem`.
//!
//! Usage: `delay_proxy LISTEN_ADDR TARGET_ADDR ONE_WAY_MS` (a 50 ms round trip is 25 one way).
//! Each chunk read is written out ONE_WAY_MS after it arrived, in order: latency is added,
//! bandwidth is not limited.

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, listen, target, ms] = args.as_slice() else {
        eprintln!("usage: delay_proxy LISTEN_ADDR TARGET_ADDR ONE_WAY_MS");
        std::process::exit(2);
    };
    let Ok(ms) = ms.parse::<u64>() else {
        eprintln!("delay_proxy: ONE_WAY_MS must be a number of milliseconds, not {ms}");
        std::process::exit(2);
    };
    let delay = Duration::from_millis(ms);
    let listener = match TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("delay_proxy: cannot listen on {listen}: {e}");
            std::process::exit(1);
        }
    };
    loop {
        let Ok((inbound, _)) = listener.accept().await else {
            continue;
        };
        let target = target.clone();
        tokio::spawn(async move {
            let outbound = match TcpStream::connect(&target).await {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("delay_proxy: cannot reach {target}: {e}");
                    return;
                }
            };
            // Small writes (one frame, one keystroke) must not wait for Nagle on top of the delay.
            let _ = inbound.set_nodelay(true);
            let _ = outbound.set_nodelay(true);
            let (ri, wi) = inbound.into_split();
            let (ro, wo) = outbound.into_split();
            tokio::join!(pump(ri, wo, delay), pump(ro, wi, delay));
        });
    }
}

/// Copy `from` to `to`, each chunk `delay` after it was read; the end of input is passed on
/// (after the data before it).
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Duration) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reader = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx.send((Instant::now(), buf[..n].to_vec())).is_err() {
                        break;
                    }
                }
            }
        }
    };
    let writer = async move {
        while let Some((at, chunk)) = rx.recv().await {
            tokio::time::sleep_until(at + delay).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reader, writer);
}
