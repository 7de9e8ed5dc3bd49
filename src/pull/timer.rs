//! `fixpoint pull --install-timer` / `--uninstall-timer`: the pull runs on a schedule, by
//! systemd (`fixpoint-pull.service` and `.timer` in /etc/systemd/system, enabled and started)
//! or, where systemd does not run, by cron (`/etc/cron.d/fixpoint-pull`). The files are written
//! and the timer enabled by fixpoint's own `copy`, `file` and `systemd_service` module code,
//! so a second install with the same arguments changes nothing and says so.

use super::PullArgs;
use crate::{EXIT_FAILED, EXIT_INVALID};
use fixpoint_modules::{run_module, Ctx, Outcome};
use serde_json::json;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

const UNIT_DIR: &str = "/etc/systemd/system";
const SERVICE: &str = "fixpoint-pull.service";
const TIMER: &str = "fixpoint-pull.timer";
const CRON_FILE: &str = "/etc/cron.d/fixpoint-pull";

/// One step and what it did.
struct Step {
    what: String,
    outcome: Outcome,
}

pub fn cmd(args: &PullArgs) -> ExitCode {
    let systemd = Path::new("/run/systemd/system").is_dir();
    let ctx = Ctx {
        check: args.change.check,
        diff: args.run.diff,
    };
    let steps = if args.uninstall_timer {
        uninstall(systemd, &ctx)
    } else {
        match install(args, systemd, &ctx) {
            Err(Bad(msg)) => {
                eprintln!("error: {msg}");
                return ExitCode::from(EXIT_INVALID);
            }
            Ok(s) => s,
        }
    };
    let (steps, failure) = match steps {
        Ok(s) => (s, None),
        Err((s, e)) => (s, Some(e)),
    };
    let changed = steps.iter().any(|s| s.outcome.changed);
    let json = args.run.format == crate::cli::Format::Json;
    for s in &steps {
        let status = if s.outcome.changed { "changed" } else { "ok" };
        if json {
            println!(
                "{}",
                json!({"event": "timer", "step": s.what, "status": status, "diff": s.outcome.diff})
            );
        } else {
            println!("{status}: {}", s.what);
        }
    }
    if let Some(e) = &failure {
        eprintln!("error: {e}");
        return ExitCode::from(EXIT_FAILED);
    }
    let verdict = match (changed, args.change.check) {
        (false, _) => "nothing to change",
        (true, true) => "would change (check mode)",
        (true, false) => "changed",
    };
    let kind = if systemd {
        "systemd timer"
    } else {
        "cron entry"
    };
    if json {
        println!(
            "{}",
            json!({"event": "timer_recap", "kind": kind, "changed": changed})
        );
    } else {
        println!("{kind}: {verdict}");
    }
    ExitCode::SUCCESS
}

/// Arguments that cannot make a schedule (exit 2, nothing written).
struct Bad(String);

type Steps = Result<Vec<Step>, (Vec<Step>, String)>;

fn install(args: &PullArgs, systemd: bool, ctx: &Ctx) -> Result<Steps, Bad> {
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map_err(|e| Bad(format!("cannot tell where the fixpoint binary is: {e}")))?;
    let argv = timer_argv(args);
    if systemd {
        let (service, timer) = units(&exe, &argv, args)?;
        Ok(install_systemd(&service, &timer, ctx))
    } else {
        if args.on_calendar.is_some() {
            return Err(Bad(
                "--on-calendar needs systemd, which does not run here (no /run/systemd/system); \
                 give --interval for the cron entry instead"
                    .into(),
            ));
        }
        let entry = cron_entry(&exe, &argv, args.interval, args.splay, &user())?;
        let mut steps = Vec::new();
        Ok(
            match step(&mut steps, CRON_FILE, "copy", copy(CRON_FILE, &entry), ctx) {
                Ok(()) => Ok(steps),
                Err(e) => Err((steps, e)),
            },
        )
    }
}

fn install_systemd(service: &str, timer: &str, ctx: &Ctx) -> Steps {
    let mut steps = Vec::new();
    let svc_path = format!("{UNIT_DIR}/{SERVICE}");
    let timer_path = format!("{UNIT_DIR}/{TIMER}");
    let mut go = || -> Result<(), String> {
        step(&mut steps, &svc_path, "copy", copy(&svc_path, service), ctx)?;
        step(
            &mut steps,
            &timer_path,
            "copy",
            copy(&timer_path, timer),
            ctx,
        )?;
        let written = steps.iter().any(|s| s.outcome.changed);
        if ctx.check && written {
            // systemd does not know units that are not written yet: nothing more to ask it.
            return Ok(());
        }
        // Changed units are reloaded, and the timer restarted so its new schedule counts.
        let params = json!({
            "name": TIMER,
            "enabled": true,
            "state": if written { "restarted" } else { "started" },
            "daemon_reload": written,
        });
        let what = format!("{TIMER} enabled and started");
        step(&mut steps, &what, "systemd_service", params, ctx)
    };
    match go() {
        Ok(()) => Ok(steps),
        Err(e) => Err((steps, e)),
    }
}

fn uninstall(systemd: bool, ctx: &Ctx) -> Steps {
    let mut steps = Vec::new();
    let svc_path = format!("{UNIT_DIR}/{SERVICE}");
    let timer_path = format!("{UNIT_DIR}/{TIMER}");
    let mut go = || -> Result<(), String> {
        if systemd && Path::new(&timer_path).exists() {
            let params = json!({"name": TIMER, "enabled": false, "state": "stopped"});
            step(
                &mut steps,
                &format!("{TIMER} stopped and disabled"),
                "systemd_service",
                params,
                ctx,
            )?;
        }
        for path in [&timer_path, &svc_path, &CRON_FILE.to_string()] {
            let params = json!({"path": path, "state": "absent"});
            step(&mut steps, path, "file", params, ctx)?;
        }
        if systemd && !ctx.check && steps.iter().any(|s| s.outcome.changed) {
            let params = json!({"daemon_reload": true});
            step(
                &mut steps,
                "systemd reloaded",
                "systemd_service",
                params,
                ctx,
            )?;
        }
        Ok(())
    };
    match go() {
        Ok(()) => Ok(steps),
        Err(e) => Err((steps, e)),
    }
}

/// Run one module and record it; a failure names the step.
fn step(
    steps: &mut Vec<Step>,
    what: &str,
    module: &str,
    params: serde_json::Value,
    ctx: &Ctx,
) -> Result<(), String> {
    let outcome = run_module(module, &params, ctx).map_err(|e| format!("{what}: {e}"))?;
    steps.push(Step {
        what: what.to_string(),
        outcome,
    });
    Ok(())
}

fn copy(dest: &str, content: &str) -> serde_json::Value {
    json!({"content": content, "dest": dest, "mode": "0644", "owner": "root", "group": "root"})
}

/// The pull's own arguments for the scheduled run, with every path that is read from where
/// `fixpoint pull` was started made absolute (the service runs in `/`, cron in the home).
fn timer_argv(args: &PullArgs) -> Vec<String> {
    let mut a = args.clone();
    let abs = |p: &mut Option<std::path::PathBuf>| {
        if let Some(path) = p.as_mut() {
            *path = std::path::absolute(&*path).unwrap_or_else(|_| path.clone());
        }
    };
    abs(&mut a.directory);
    abs(&mut a.keyring);
    abs(&mut a.allowed_signers);
    abs(&mut a.result_file);
    if let Some(url) = &a.url {
        let p = Path::new(url);
        if !url.contains("://") && p.is_relative() && p.exists() {
            if let Ok(full) = std::path::absolute(p) {
                a.url = Some(full.display().to_string());
            }
        }
    }
    a.pull_argv()
}

/// systemd's time span: humantime's spelling (`15m`, `1h 30m`, `2s`), which systemd reads.
fn span(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs().max(1))).to_string()
}

/// The service and timer units.
fn units(exe: &Path, argv: &[String], args: &PullArgs) -> Result<(String, String), Bad> {
    let mut exec = vec![systemd_quote(&exe.display().to_string())];
    exec.extend(argv.iter().map(|a| systemd_quote(a)));
    let url = args.url.clone().unwrap_or_default();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let service = format!(
        "# Written by `fixpoint pull --install-timer`: run that again to change it.\n\
         [Unit]\n\
         Description=fixpoint pull of {url}\n\
         Wants=network-online.target\n\
         After=network-online.target\n\
         \n\
         [Service]\n\
         Type=oneshot\n\
         Environment={}\n\
         ExecStart={}\n",
        systemd_quote(&format!("HOME={home}")),
        exec.join(" ")
    );
    let schedule = match &args.on_calendar {
        Some(spec) => {
            if spec.trim().is_empty() || spec.contains('\n') {
                return Err(Bad(format!(
                    "--on-calendar {spec:?} is not a calendar spec"
                )));
            }
            format!("OnCalendar={spec}\n")
        }
        None => {
            if args.interval.as_secs() == 0 {
                return Err(Bad("--interval must be at least 1s".into()));
            }
            let every = span(args.interval);
            format!("OnBootSec={every}\nOnUnitActiveSec={every}\n")
        }
    };
    let when = match &args.on_calendar {
        Some(spec) => format!("on {spec}"),
        None => format!("every {}", span(args.interval)),
    };
    let timer = format!(
        "# Written by `fixpoint pull --install-timer`: run that again to change it.\n\
         [Unit]\n\
         Description=Run fixpoint pull {when}\n\
         \n\
         [Timer]\n\
         {schedule}\
         RandomizedDelaySec={}\n\
         AccuracySec=1s\n\
         Persistent=true\n\
         \n\
         [Install]\n\
         WantedBy=timers.target\n",
        if args.splay.is_zero() {
            "0".to_string()
        } else {
            span(args.splay)
        }
    );
    Ok((service, timer))
}

/// One word of an `ExecStart=` line: quoted when it has to be, `%` and `$` doubled so systemd
/// expands neither specifiers nor variables in it.
fn systemd_quote(word: &str) -> String {
    let escaped = word.replace('%', "%%").replace('$', "$$");
    let plain = !escaped.is_empty()
        && escaped
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:,=@+%$".contains(c));
    if plain {
        return escaped;
    }
    let mut out = String::from("\"");
    for c in escaped.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One word for the shell cron runs: single-quoted, and `%` escaped for cron itself (which
/// turns an unescaped `%` into a newline, even inside quotes).
fn cron_quote(word: &str) -> String {
    let quoted = if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:,=@+".contains(c))
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    };
    quoted.replace('%', "\\%")
}

fn user() -> String {
    let uid = nix::unistd::geteuid();
    nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| "root".into())
}

/// The cron schedule of an interval: one that divides an hour (in minutes) or a day (in hours).
fn cron_schedule(every: Duration) -> Result<String, Bad> {
    let secs = every.as_secs();
    let bad = || {
        Bad(format!(
            "cron cannot run every {}: without systemd the interval must be whole minutes \
             dividing an hour (1min, 5min, 15min, 30min) or whole hours dividing a day (1h, 2h, \
             6h, 1d)",
            span(every)
        ))
    };
    if secs == 0 || !secs.is_multiple_of(60) {
        return Err(bad());
    }
    let mins = secs / 60;
    Ok(match mins {
        1 => "* * * * *".to_string(),
        m if m < 60 && 60u64.is_multiple_of(m) => format!("*/{m} * * * *"),
        60 => "0 * * * *".to_string(),
        m if m.is_multiple_of(60) && m / 60 < 24 && 24u64.is_multiple_of(m / 60) => {
            format!("0 */{} * * *", m / 60)
        }
        1440 => "0 0 * * *".to_string(),
        _ => return Err(bad()),
    })
}

/// The `/etc/cron.d` entry: bash for `$RANDOM`, a random sleep of up to `splay` (as the
/// ansible-pull documentation suggests), then the pull; its stdout is dropped (the result file
/// or URL is the record), errors go to cron's mail.
fn cron_entry(
    exe: &Path,
    argv: &[String],
    every: Duration,
    splay: Duration,
    user: &str,
) -> Result<String, Bad> {
    let schedule = cron_schedule(every)?;
    let splay = splay.as_secs();
    if splay > 32767 {
        return Err(Bad(format!(
            "--splay of {splay}s is longer than cron's $RANDOM reaches (32767s)"
        )));
    }
    let sleep = if splay > 0 {
        format!("sleep $((RANDOM \\% {})); ", splay + 1)
    } else {
        String::new()
    };
    let mut cmd = vec![cron_quote(&exe.display().to_string())];
    cmd.extend(argv.iter().map(|a| cron_quote(a)));
    Ok(format!(
        "# Written by `fixpoint pull --install-timer` (no systemd here): run that again to change it.\n\
         SHELL=/bin/bash\n\
         PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n\
         {schedule} {user} {sleep}{} >/dev/null\n",
        cmd.join(" ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cron_runs_intervals_that_divide_an_hour_or_a_day() {
        let s = |secs| cron_schedule(Duration::from_secs(secs)).ok();
        assert_eq!(s(60).as_deref(), Some("* * * * *"));
        assert_eq!(s(900).as_deref(), Some("*/15 * * * *"));
        assert_eq!(s(3600).as_deref(), Some("0 * * * *"));
        assert_eq!(s(6 * 3600).as_deref(), Some("0 */6 * * *"));
        assert_eq!(s(86400).as_deref(), Some("0 0 * * *"));
        assert_eq!(s(7 * 60), None);
        assert_eq!(s(90), None);
        assert_eq!(s(5 * 3600), None);
    }

    #[test]
    fn words_are_quoted_for_systemd_and_cron() {
        assert_eq!(systemd_quote("--url"), "--url");
        assert_eq!(systemd_quote("a b"), "\"a b\"");
        assert_eq!(systemd_quote("x=%h$HOME"), "x=%%h$$HOME");
        assert_eq!(systemd_quote("say \"hi\""), "\"say \\\"hi\\\"\"");
        assert_eq!(cron_quote("--url"), "--url");
        assert_eq!(cron_quote("a b"), "'a b'");
        assert_eq!(cron_quote("it's"), "'it'\\''s'");
        assert_eq!(cron_quote("50%"), "'50\\%'");
    }

    #[test]
    fn the_cron_entry_sleeps_a_random_splay_first() {
        let e = cron_entry(
            Path::new("/usr/bin/fixpoint"),
            &["pull".into(), "--url".into(), "file:///srv/r.git".into()],
            Duration::from_secs(900),
            Duration::from_secs(300),
            "root",
        )
        .ok()
        .unwrap();
        assert!(e.contains("SHELL=/bin/bash\n"), "{e}");
        assert!(
            e.ends_with("*/15 * * * * root sleep $((RANDOM \\% 301)); /usr/bin/fixpoint pull --url file:///srv/r.git >/dev/null\n"),
            "{e}"
        );
    }
}
