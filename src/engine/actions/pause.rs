//! `pause`: wait a time, or for an answer typed on the controller's terminal, once for all the
//! hosts of the task (the engine runs it on the first one, as ansible-core's BYPASS_HOST_LOOP).
//!
//! Without a terminal on stdin a prompt is not waited for (ansible-core warns and goes on with
//! an empty answer); a time is always waited for, in check mode too.

use super::super::result::ItemResult;
use super::super::Shared;
use crate::playbook::actions::{parse, PauseParams};
use crate::playbook::Task;
use crate::vars::Scope;
use fixpoint_modules::Outcome;
use serde_json::{json, Map, Value};
use std::time::{Duration, Instant, SystemTime};

/// What ansible-core says when it cannot ask (it is also the result's warning).
const NOT_INTERACTIVE: &str = "Not waiting for response to prompt as stdin is not interactive";

impl Shared<'_> {
    /// The pause itself; a prompt that cannot be asked is warned about through `scope`.
    pub(in crate::engine) async fn pause(
        &self,
        task: &Task,
        scope: &Scope,
        params: &Value,
    ) -> ItemResult {
        let p: PauseParams = match parse(params) {
            Ok(p) => p,
            Err(e) => {
                return ItemResult::failed(
                    format!("invalid parameters for `pause`: {e}"),
                    Map::new(),
                )
            }
        };
        let seconds = match p.duration_secs() {
            Ok(s) => s,
            Err(msg) => return ItemResult::failed(msg, Map::new()),
        };
        let echo = p.echo.is_none_or(|b| b.0);
        let minutes_unit = p.seconds.as_ref().is_none_or(Value::is_null);
        let start_wall = SystemTime::now();
        let start = Instant::now();
        let mut warnings = Vec::new();
        let mut user_input = String::new();
        match seconds {
            Some(s) => {
                // ansible-core waits at least a second.
                let s = s.max(1) as u64;
                tokio::time::sleep(Duration::from_secs(s)).await;
            }
            None => {
                if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
                    let hidden = if echo { "" } else { " (output is hidden)" };
                    let question = p
                        .prompt
                        .as_deref()
                        .filter(|q| !q.is_empty())
                        .unwrap_or("Press enter to continue, Ctrl+C to interrupt");
                    let shown = format!("[{}]\n{question}{hidden}:", task.display_name().trim());
                    match tokio::task::spawn_blocking(move || ask(&shown, echo)).await {
                        Ok(Ok(answer)) => user_input = answer,
                        Ok(Err(e)) => {
                            return ItemResult::failed(
                                format!("pause: cannot read the answer: {e}"),
                                Map::new(),
                            )
                        }
                        Err(e) => return ItemResult::failed(format!("pause: {e}"), Map::new()),
                    }
                } else {
                    scope.warn(NOT_INTERACTIVE.to_string());
                    warnings.push(NOT_INTERACTIVE);
                }
            }
        }
        let elapsed = start.elapsed().as_secs_f64();
        let stop_wall = SystemTime::now();
        let (amount, unit) = if minutes_unit {
            (elapsed / 60.0, "minutes")
        } else {
            (elapsed, "seconds")
        };
        let mut result = Map::new();
        result.insert("rc".into(), json!(0));
        result.insert("stderr".into(), json!(""));
        result.insert(
            "stdout".into(),
            json!(format!("Paused for {} {unit}", py_round2(amount))),
        );
        result.insert("start".into(), json!(local_datetime(start_wall)));
        result.insert("stop".into(), json!(local_datetime(stop_wall)));
        result.insert("delta".into(), json!(elapsed as u64));
        result.insert("echo".into(), json!(echo));
        result.insert("user_input".into(), json!(user_input));
        if !warnings.is_empty() {
            result.insert("warnings".into(), json!(warnings));
        }
        ItemResult::done(Outcome {
            changed: false,
            result,
            ..Outcome::default()
        })
    }
}

/// Ask on the terminal (stderr, so `--format json` stays clean) and read one line, without
/// echo when `echo` is false.
fn ask(question: &str, echo: bool) -> std::io::Result<String> {
    crate::vars::prompt::read_line(Some(question), !echo)
}

/// Python's `str(round(x, 2))`: `0.0`, `1.01`, `2.5`.
fn py_round2(x: f64) -> String {
    let r = (x * 100.0).round() / 100.0;
    let s = r.to_string();
    if s.contains('.') {
        s
    } else {
        format!("{s}.0")
    }
}

/// Python's `str(datetime.now())` on the controller: local time, with microseconds.
fn local_datetime(t: SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    // SAFETY: `tm` is plain data, filled by the reentrant `localtime_r`.
    let offset = unsafe {
        let mut tm: nix::libc::tm = std::mem::zeroed();
        let s = secs as nix::libc::time_t;
        if nix::libc::localtime_r(&s, &mut tm).is_null() {
            0
        } else {
            tm.tm_gmtoff
        }
    };
    let shifted = if offset >= 0 {
        t + Duration::from_secs(offset as u64)
    } else {
        t - Duration::from_secs(offset.unsigned_abs())
    };
    fixpoint_modules::time::format_datetime(shifted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_as_python_rounds_them() {
        assert_eq!(py_round2(0.0), "0.0");
        assert_eq!(py_round2(1.0049), "1.0");
        assert_eq!(py_round2(1.0123), "1.01");
        assert_eq!(py_round2(61.0 / 60.0), "1.02");
    }

    #[test]
    fn times_look_like_pythons_datetime() {
        let s = local_datetime(SystemTime::now());
        // `2026-12-01 01:08:33.766511` (the fraction is left out only when it is 0).
        assert!(s.len() == 26 || s.len() == 19, "{s}");
        assert_eq!(&s[4..5], "-");
        assert_eq!(&s[10..11], " ");
    }
}
