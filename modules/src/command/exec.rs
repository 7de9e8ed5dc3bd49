//! Running the command, and Ansible's return values for it (`rc`, `stdout`, `stderr`, their
//! `_lines`, `start`/`end`/`delta`), with the output cap.

use super::Invocation;
use crate::capture::{Captured, Streams};
use crate::time::format_datetime;
use crate::ModuleError;
use serde_json::{json, Map, Value};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

pub(super) fn output_fields(out: &mut Map<String, Value>, rc: i32, stdout: &str, stderr: &str) {
    out.insert("rc".into(), json!(rc));
    out.insert("stdout".into(), json!(stdout));
    out.insert("stderr".into(), json!(stderr));
    out.insert("stdout_lines".into(), json!(splitlines(stdout)));
    out.insert("stderr_lines".into(), json!(splitlines(stderr)));
}

/// ansible-core's command module (shell's too) always returns `msg`, empty when the command
/// succeeded; `raw` and `script`, which also run through [`execute`], have none.
pub(super) fn with_empty_msg(
    r: Result<Map<String, Value>, ModuleError>,
) -> Result<Map<String, Value>, ModuleError> {
    r.map(|mut out| {
        out.insert("msg".into(), json!(""));
        out
    })
}

/// Run the command and collect Ansible's return values; a non-zero exit is a failure carrying them.
pub(crate) fn execute(inv: &Invocation) -> Result<Map<String, Value>, ModuleError> {
    let mut c = std::process::Command::new(&inv.argv[0]);
    c.args(&inv.argv[1..])
        .envs(inv.env.iter().map(|(k, v)| (k, v)))
        // Never inherit the agent's stdin: it may be the controller's channel.
        .stdin(if inv.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(d) = &inv.chdir {
        c.current_dir(d);
    }
    // The command and whatever it starts share a process group of their own, registered while
    // it runs: a task timeout or a controller that hangs up kills all of it (see `children`).
    c.process_group(0);
    let start = SystemTime::now();
    let t0 = Instant::now();
    let mut child = c.spawn().map_err(|e| spawn_error(inv, &e))?;
    let _running = crate::children::register(child.id());
    // Feed stdin from a thread so a child that writes a lot before reading cannot deadlock us.
    let feeder = match (child.stdin.take(), &inv.stdin) {
        (Some(mut pipe), Some(data)) => {
            let data = data.clone();
            // A child that exits without reading gives EPIPE, which is not our failure.
            Some(std::thread::spawn(move || {
                let _ = pipe.write_all(&data);
            }))
        }
        _ => None,
    };
    // Both pipes are drained at once (a child blocked on a full stderr pipe would never close
    // stdout), each into a bounded capture; once the command has exited, what it left running
    // in the background may keep them open: they are read until they go quiet for a second, as
    // ansible-core reads them (Ansible's command_shell target runs `yoink.sh &` under a timeout).
    let mut streams = Streams::new();
    streams.add(child.stdout.take(), OUTPUT_CAP);
    streams.add(child.stderr.take(), OUTPUT_CAP);
    let status = child.wait();
    let mut caps = streams.finish(Duration::from_secs(1)).into_iter();
    let (out_cap, err_cap) = (
        caps.next().unwrap_or_default(),
        caps.next().unwrap_or_default(),
    );
    let status = status
        .map_err(|e| ModuleError::failed(format!("waiting for `{}` failed: {e}", inv.argv[0])))?;
    if let Some(f) = feeder {
        let _ = f.join();
    }
    let delta = t0.elapsed();
    let end = start + delta;

    // Python reports death by signal N as rc -N.
    let rc = status.code().unwrap_or_else(|| {
        use std::os::unix::process::ExitStatusExt;
        -status.signal().unwrap_or(0)
    });
    let mut stdout = capped_text(&out_cap);
    let mut stderr = capped_text(&err_cap);
    if inv.strip_empty_ends {
        stdout.truncate(stdout.trim_end_matches(['\r', '\n']).len());
        stderr.truncate(stderr.trim_end_matches(['\r', '\n']).len());
    }
    let mut out = Map::new();
    out.insert("cmd".into(), inv.shown.clone());
    output_fields(&mut out, rc, &stdout, &stderr);
    out.insert("start".into(), json!(format_datetime(start)));
    out.insert("end".into(), json!(format_datetime(end)));
    out.insert("delta".into(), json!(format_timedelta(delta)));
    for (key, cap) in [
        ("stdout_truncated", &out_cap),
        ("stderr_truncated", &err_cap),
    ] {
        if cap.omitted() > 0 {
            out.insert(
                key.into(),
                json!({"total_bytes": cap.total, "omitted_bytes": cap.omitted(), "cap_bytes": OUTPUT_CAP}),
            );
        }
    }
    if rc != 0 {
        out.insert("changed".into(), json!(true));
        return Err(ModuleError::Failed {
            msg: "non-zero return code".into(),
            result: out,
        });
    }
    Ok(out)
}

/// How much of each of stdout and stderr a command keeps: the first and the last MiB. The result
/// carries each stream twice (`stdout` and `stdout_lines`), and a byte becomes at most 6 in JSON
/// (`\u0001`), so the two streams stay under 48 MiB on the wire, inside the controller's 64 MiB
/// answer limit (`fixpoint_agent::protocol::MAX_RESPONSE_FRAME`).
pub const OUTPUT_CAP: usize = 2 * 1024 * 1024;

/// A captured stream as text, with a line saying how much was cut from its middle.
fn capped_text(c: &Captured) -> String {
    let mut s = String::from_utf8_lossy(&c.head).into_owned();
    if c.omitted() > 0 {
        s.push_str(&format!(
            "\n[fixpoint: {} bytes omitted here; output is capped at {OUTPUT_CAP} bytes per stream, the first and last {} kept]\n",
            c.omitted(),
            OUTPUT_CAP / 2
        ));
    }
    s.push_str(&String::from_utf8_lossy(&c.tail));
    s
}

/// Ansible reports a program that cannot be started with Python's OSError text and the errno as rc.
fn spawn_error(inv: &Invocation, e: &std::io::Error) -> ModuleError {
    let errno = e.raw_os_error().unwrap_or(2);
    let mut result = Map::new();
    result.insert("cmd".into(), inv.shown.clone());
    result.insert("rc".into(), json!(errno));
    result.insert("stdout".into(), json!(""));
    result.insert("stderr".into(), json!(""));
    result.insert("stdout_lines".into(), json!([]));
    result.insert("stderr_lines".into(), json!([]));
    ModuleError::Failed {
        msg: format!(
            "[Errno {errno}] {}: '{}'",
            nix::errno::Errno::from_raw(errno).desc(),
            inv.argv[0]
        ),
        result,
    }
}

/// Python's `str.splitlines()` (what Ansible uses for `stdout_lines`).
pub(crate) fn splitlines(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                out.push(std::mem::take(&mut cur));
            }
            '\n' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}'
            | '\u{2029}' => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Python's `str(timedelta)`: `0:00:01.500000`, `1 day, 2:03:04`.
pub(super) fn format_timedelta(d: Duration) -> String {
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let mut s = match days {
        0 => String::new(),
        1 => "1 day, ".to_string(),
        n => format!("{n} days, "),
    };
    s.push_str(&format!(
        "{}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    ));
    if d.subsec_micros() != 0 {
        s.push_str(&format!(".{:06}", d.subsec_micros()));
    }
    s
}
