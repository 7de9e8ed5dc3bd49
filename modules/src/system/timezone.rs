//! `timezone` (community.general): the host's time zone (and with timedatectl, the hardware
//! clock's mode) with the two strategies Ansible uses on Debian-family Linux: `timedatectl`
//! where it works (systemd runs the host), else `/etc/timezone`, the `/etc/localtime` link to
//! the zoneinfo file, then `dpkg-reconfigure tzdata`.

use super::{get_bin_path, run_c, ConfFile};
use crate::fs::Dir;
use crate::params::{de_opt_string, is_template};
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

pub struct Timezone;

const TIMEZONE_FILE: &str = "/etc/timezone";
const LOCALTIME: &str = "/etc/localtime";
const ZONEINFO: &str = "/usr/share/zoneinfo";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(default, deserialize_with = "de_opt_string")]
    pub name: Option<String>,
    #[serde(default, alias = "rtc", deserialize_with = "de_opt_string")]
    pub hwclock: Option<String>,
}

#[derive(Debug)]
pub enum State {
    /// Without timedatectl: the zone as Ansible reads it (`n/a` when unreadable) and the file.
    Files { current: String, file: ConfFile },
    /// timedatectl (its path) and the settings its status shows.
    Timedatectl { ctl: PathBuf, before: Settings },
}

/// What timedatectl reports for the parameters the task gives (Ansible's `before`/`after`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `local` or `UTC`.
    hwclock: Option<String>,
    name: Option<String>,
}

impl Settings {
    /// As Ansible's diff and messages show them: only the parameters the task gives.
    fn to_json(&self) -> Value {
        let mut m = Map::new();
        if let Some(h) = &self.hwclock {
            m.insert("hwclock".into(), json!(h));
        }
        if let Some(n) = &self.name {
            m.insert("name".into(), json!(n));
        }
        Value::Object(m)
    }

    /// Python's `str()` of the same dict, for the "still not desired state" message.
    fn python_repr(&self) -> String {
        let items: Vec<String> = [("hwclock", &self.hwclock), ("name", &self.name)]
            .iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| format!("'{k}': '{v}'")))
            .collect();
        format!("{{{}}}", items.join(", "))
    }
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// The file strategy's whole change.
    Files(SetZone),
    /// `timedatectl <subcommand> <value>`: `set-local-rtc yes|no` or `set-timezone <zone>`.
    Timedatectl {
        subcommand: &'static str,
        value: String,
    },
}

/// Set the zone: rewrite `/etc/timezone` with this text, relink, reconfigure tzdata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetZone {
    text: String,
    /// Lines of the old file that named a zone (Ansible's message counts them).
    deleted: usize,
}

/// The zone a line of `/etc/timezone` names: a line that starts with a non-blank.
fn zone_line(line: &str) -> Option<&str> {
    line.split_whitespace()
        .next()
        .filter(|_| !line.starts_with(char::is_whitespace))
}

/// The zone named by what `/etc/localtime` links to (`.../zoneinfo/<zone>`).
fn linked_zone(target: &Path) -> Option<String> {
    let t = target.to_string_lossy();
    ["/usr/share/zoneinfo/", "/etc/zoneinfo/"]
        .iter()
        .filter_map(|m| t.find(m).map(|i| (i, m.len())))
        .min()
        .map(|(i, len)| t[i + len..].to_string())
}

/// The zone in force as Ansible reads it: `/etc/timezone`'s first zone line, and when that is
/// the wanted zone, `/etc/localtime` must agree (its link, or its bytes) or the zone is `n/a`.
fn current_zone(text: Option<&str>, wanted: &str) -> String {
    let Some(value) = text.and_then(|t| t.lines().find_map(zone_line)) else {
        return "n/a".into();
    };
    if value != wanted {
        return value.to_string();
    }
    let local = Path::new(LOCALTIME);
    match std::fs::symlink_metadata(local) {
        Ok(m) if m.file_type().is_symlink() => {
            if !local.exists() {
                return "n/a".into();
            }
            match std::fs::read_link(local).ok().and_then(|t| linked_zone(&t)) {
                Some(z) => z,
                None => "n/a".into(),
            }
        }
        _ => {
            let same = match (
                std::fs::read(local),
                std::fs::read(Path::new(ZONEINFO).join(wanted)),
            ) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            };
            if same {
                value.to_string()
            } else {
                "n/a".into()
            }
        }
    }
}

/// `/etc/timezone` with every zone line removed and `zone` put where the first one was.
fn edit_timezone_file(text: &str, zone: &str) -> SetZone {
    let mut lines: Vec<String> = text.split_inclusive('\n').map(str::to_string).collect();
    let matched: Vec<usize> = (0..lines.len())
        .filter(|i| zone_line(&lines[*i]).is_some())
        .collect();
    let at = matched.first().copied().unwrap_or(0);
    for i in matched.iter().rev() {
        lines.remove(*i);
    }
    lines.insert(at, format!("{zone}\n"));
    SetZone {
        text: lines.concat(),
        deleted: matched.len(),
    }
}

impl Params {
    fn zone(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }

    /// The settings the task asks for.
    fn planned(&self) -> Settings {
        Settings {
            hwclock: self.hwclock.clone(),
            name: self.name.clone(),
        }
    }
}

/// Ansible's check of `name`, before anything else is read: a file under the zoneinfo tree.
fn verify_zone(zone: &str) -> Result<(), ModuleError> {
    let zonefile = Path::new(ZONEINFO).join(zone);
    if zone.is_empty() || !zonefile.is_file() || zone.split('/').any(|c| c == "..") {
        return Err(ModuleError::failed(format!(
            "Error message:\ngiven timezone \"{zone}\" is not available"
        )));
    }
    Ok(())
}

/// timedatectl, when Ansible would use it: found, and `timedatectl` (its status) succeeds,
/// which it does only where systemd runs the host. Its path and that status.
fn usable_timedatectl() -> Option<(PathBuf, String)> {
    let ctl = get_bin_path("timedatectl").ok()?;
    let ran = run_c(&[&ctl.to_string_lossy()]).ok()?;
    (ran.rc == 0).then_some((ctl, ran.stdout))
}

/// The value after `<label>:` on a line of timedatectl's status (Ansible's
/// `^\s*<label>\s*:\s*([^\s]+)`).
fn status_field<'a>(status: &'a str, labels: &[&str]) -> Option<&'a str> {
    status.lines().find_map(|line| {
        let line = line.trim_start();
        let rest = labels.iter().find_map(|l| line.strip_prefix(l))?;
        let rest = rest.trim_start().strip_prefix(':')?;
        rest.split_whitespace().next()
    })
}

/// The settings the status shows, for the parameters the task gives.
fn read_status(status: &str, p: &Params) -> Result<Settings, ModuleError> {
    let unreadable = |what: &str| {
        ModuleError::failed(format!(
            "Error message:\ntimedatectl's status shows no {what}:\n{status}"
        ))
    };
    let hwclock = match p.hwclock {
        None => None,
        Some(_) => {
            let v = status_field(status, &["RTC in local TZ"])
                .ok_or_else(|| unreadable("\"RTC in local TZ\""))?;
            // Ansible reads the yes/no as a boolean.
            Some(match v.to_ascii_lowercase().as_str() {
                "yes" | "y" | "on" | "true" | "t" | "1" => "local".to_string(),
                "no" | "n" | "off" | "false" | "f" | "0" => "UTC".to_string(),
                _ => return Err(unreadable("boolean \"RTC in local TZ\"")),
            })
        }
    };
    let name = match p.name {
        None => None,
        Some(_) => Some(
            status_field(status, &["Time zone", "Timezone"])
                .ok_or_else(|| unreadable("\"Time zone\""))?
                .to_string(),
        ),
    };
    Ok(Settings { hwclock, name })
}

/// timedatectl's status now.
fn timedatectl_status(ctl: &Path) -> Result<String, ModuleError> {
    let ctl = ctl.to_string_lossy();
    let ran = run_c(&[&ctl, "status"])?;
    check_rc(&[&ctl, "status"], ran)
}

/// A run of a program that must succeed, failing as Ansible's `check_rc` does (the message is
/// the program's stderr); its stdout.
fn check_rc(argv: &[&str], ran: crate::apt::exec::Ran) -> Result<String, ModuleError> {
    if ran.rc == 0 {
        return Ok(ran.stdout);
    }
    let mut e = crate::apt::exec::failure(ran.stderr.trim_end().to_string(), &ran);
    if let ModuleError::Failed { result, .. } = &mut e {
        result.insert("cmd".into(), json!(argv.join(" ")));
    }
    Err(e)
}

impl Module for Timezone {
    type Params = Params;
    type State = State;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if let Some(h) = p.hwclock.as_deref().filter(|h| !is_template(h)) {
            if h != "local" && h != "UTC" {
                return Err(ModuleError::Params(format!(
                    "value of hwclock must be one of: local, UTC, got: {h}"
                )));
            }
        }
        if p.name.is_none() && p.hwclock.is_none() {
            return Err(ModuleError::Params(
                "one of the following is required: hwclock, name".into(),
            ));
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<State, ModuleError> {
        // Ansible's choice on Linux: timedatectl when it is there and answers, else the files.
        if let Some((ctl, status)) = usable_timedatectl() {
            if p.name.is_some() {
                verify_zone(p.zone())?;
            }
            let before = read_status(&status, p)?;
            return Ok(State::Timedatectl { ctl, before });
        }
        if p.hwclock.is_some() {
            return Err(ModuleError::failed(
                "`hwclock` is not supported here: fixpoint's timezone sets the hardware clock's \
                 mode with timedatectl (hosts that systemd runs); on this host Ansible would run \
                 `hwclock --systohc`, which fixpoint does not do",
            ));
        }
        let family = crate::pkg_mgr::host_os_family();
        if family != "Debian" {
            return Err(ModuleError::failed(format!(
                "fixpoint's timezone sets the zone of Debian-family hosts only (or with \
                 timedatectl where systemd runs); this one is {family}"
            )));
        }
        let zone = p.zone();
        verify_zone(zone)?;
        let file = ConfFile::probe(Path::new(TIMEZONE_FILE))?;
        Ok(State::Files {
            current: current_zone(file.text.as_deref(), zone),
            file,
        })
    }

    fn plan(p: &Params, st: &State, _ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let mut plan = Plan::new();
        match st {
            State::Files { current, file } => {
                let zone = p.zone();
                // Ansible returns the zone before and after in every result (not only with
                // --diff).
                plan.result.insert(
                    "diff".into(),
                    json!({"before": {"name": current}, "after": {"name": zone}}),
                );
                if current != zone {
                    let set = edit_timezone_file(file.text.as_deref().unwrap_or_default(), zone);
                    plan.diff.attr("timezone", "name", current.clone(), zone);
                    plan.actions.push(Action::Files(set));
                }
            }
            State::Timedatectl { before, .. } => {
                let planned = p.planned();
                plan.result.insert(
                    "diff".into(),
                    json!({"before": before.to_json(), "after": planned.to_json()}),
                );
                // Ansible's order: the clock's mode, then the zone.
                if let (Some(b), Some(a)) = (&before.hwclock, &planned.hwclock) {
                    if b != a {
                        plan.diff.attr("timezone", "hwclock", b.clone(), a.clone());
                        let value = if a == "local" { "yes" } else { "no" };
                        plan.actions.push(Action::Timedatectl {
                            subcommand: "set-local-rtc",
                            value: value.into(),
                        });
                    }
                }
                if let (Some(b), Some(a)) = (&before.name, &planned.name) {
                    if b != a {
                        plan.diff.attr("timezone", "name", b.clone(), a.clone());
                        plan.actions.push(Action::Timedatectl {
                            subcommand: "set-timezone",
                            value: a.clone(),
                        });
                    }
                }
            }
        }
        Ok(plan)
    }

    fn apply(
        p: &Params,
        st: State,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        match st {
            State::Files { file, .. } => apply_files(p, &file, plan),
            State::Timedatectl { ctl, .. } => apply_timedatectl(p, &ctl, plan),
        }
    }
}

/// The file strategy: rewrite `/etc/timezone`, relink, reconfigure tzdata, read back.
fn apply_files(
    p: &Params,
    file: &ConfFile,
    plan: &Plan<Action>,
) -> Result<Map<String, Value>, ModuleError> {
    let zone = p.zone();
    let mut out = Map::new();
    for action in &plan.actions {
        let Action::Files(set) = action else { continue };
        // Ansible's message, only once the file is written (none in check mode).
        out.insert(
            "msg".into(),
            json!(format!(
                "Added 1 line and deleted {} line(s) on {TIMEZONE_FILE}",
                set.deleted
            )),
        );
        file.write(&set.text)?;
        relink_localtime(&Path::new(ZONEINFO).join(zone))?;
        if which("dpkg-reconfigure").is_some() {
            let ran = run_c(&["dpkg-reconfigure", "--frontend", "noninteractive", "tzdata"])?;
            if ran.rc != 0 {
                return Err(crate::apt::exec::failure(
                    format!(
                        "Error message:\ndpkg-reconfigure tzdata failed: {}",
                        ran.stderr.trim_end()
                    ),
                    &ran,
                ));
            }
        }
    }
    let after = current_zone(
        ConfFile::probe(Path::new(TIMEZONE_FILE))?.text.as_deref(),
        zone,
    );
    if after != zone {
        return Err(ModuleError::failed(format!(
            "Error message:\nstill not desired state, though changes have made - planned: \
             {{'name': '{zone}'}}, after: {{'name': '{after}'}}"
        )));
    }
    Ok(out)
}

/// The timedatectl strategy: each planned `set-*`, then the status read again, which must show
/// what was asked for. `msg` lists the commands run, as Ansible's does.
fn apply_timedatectl(
    p: &Params,
    ctl: &Path,
    plan: &Plan<Action>,
) -> Result<Map<String, Value>, ModuleError> {
    let shown = ctl.to_string_lossy();
    let mut executed = Vec::new();
    for action in &plan.actions {
        let Action::Timedatectl { subcommand, value } = action else {
            continue;
        };
        let argv = [shown.as_ref(), subcommand, value.as_str()];
        check_rc(&argv, run_c(&argv)?)?;
        executed.push(format!("executed `{}`", argv.join(" ")));
    }
    let after = read_status(&timedatectl_status(ctl)?, p)?;
    let planned = p.planned();
    if after != planned {
        return Err(ModuleError::failed(format!(
            "Error message:\nstill not desired state, though changes have made - planned: {}, \
             after: {}\nOther message(s):\n{}",
            planned.python_repr(),
            after.python_repr(),
            executed.join("\n")
        )));
    }
    let mut out = Map::new();
    out.insert("msg".into(), json!(executed.join("\n")));
    Ok(out)
}

/// Point `/etc/localtime` at `target` by renaming a new link over it, so it never is missing.
fn relink_localtime(target: &Path) -> Result<(), ModuleError> {
    let dir = Dir::open(Path::new("/etc"))?;
    let tmp = format!(".fixpoint.localtime.{}", std::process::id());
    let _ = dir.unlink(OsStr::new(&tmp));
    dir.symlink(target, OsStr::new(&tmp))
        .map_err(|e| ModuleError::io(dir.at(OsStr::new(&tmp)), e))?;
    if let Err(e) = dir.rename(OsStr::new(&tmp), OsStr::new("localtime")) {
        let _ = dir.unlink(OsStr::new(&tmp));
        return Err(e);
    }
    dir.fsync()
}

/// A program on the agent's PATH.
fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check_params;

    #[test]
    fn the_file_edit_replaces_zone_lines() {
        // Any line starting with a non-blank counts, comments too (Ansible's `^([^\s]+)`).
        let s = edit_timezone_file(" c\nEurope/Paris\n# x\n", "Asia/Tokyo");
        assert_eq!(s.text, " c\nAsia/Tokyo\n");
        assert_eq!(s.deleted, 2);
        let s = edit_timezone_file("", "UTC");
        assert_eq!((s.text.as_str(), s.deleted), ("UTC\n", 0));
    }

    #[test]
    fn zone_lines_and_links() {
        assert_eq!(zone_line("Etc/UTC\n"), Some("Etc/UTC"));
        assert_eq!(zone_line("  x"), None);
        assert_eq!(
            linked_zone(Path::new("../usr/share/zoneinfo/Europe/Paris")).as_deref(),
            Some("Europe/Paris")
        );
        assert_eq!(linked_zone(Path::new("/opt/tz/Paris")), None);
        assert_eq!(current_zone(None, "UTC"), "n/a");
        assert_eq!(current_zone(Some("Europe/Paris\n"), "UTC"), "Europe/Paris");
    }

    #[test]
    fn hwclock_is_checked_at_load() {
        // Whether it can be set depends on the host (timedatectl): decided at run time.
        assert!(check_params("timezone", &serde_json::json!({"hwclock": "UTC"})).is_ok());
        assert!(check_params("timezone", &serde_json::json!({"rtc": "local"})).is_ok());
        let e = check_params("timezone", &serde_json::json!({"hwclock": "utc"})).unwrap_err();
        assert!(e.msg.contains("must be one of: local, UTC"), "{e}");
        assert!(check_params("timezone", &serde_json::json!({})).is_err());
        assert!(check_params("timezone", &serde_json::json!({"name": "Etc/UTC"})).is_ok());
    }

    /// bookworm's `timedatectl status`.
    const STATUS: &str = "               Local time: Tue 2026-12-01 01:12:41 UTC\n           Universal time: Tue 2026-12-01 01:12:41 UTC\n                 RTC time: n/a\n                Time zone: Etc/UTC (UTC, +0000)\nSystem clock synchronized: no\n              NTP service: n/a\n          RTC in local TZ: no\n";

    #[test]
    fn timedatectl_status_is_read_for_the_given_parameters() {
        let p = |v: serde_json::Value| serde_json::from_value::<Params>(v).unwrap();
        let s = read_status(STATUS, &p(serde_json::json!({"name": "Asia/Tokyo"}))).unwrap();
        assert_eq!((s.hwclock, s.name.as_deref()), (None, Some("Etc/UTC")));
        let both = p(serde_json::json!({"name": "Asia/Tokyo", "hwclock": "local"}));
        let s = read_status(STATUS, &both).unwrap();
        assert_eq!(s.hwclock.as_deref(), Some("UTC"));
        assert_eq!(
            s.to_json(),
            serde_json::json!({"hwclock": "UTC", "name": "Etc/UTC"})
        );
        assert_eq!(s.python_repr(), "{'hwclock': 'UTC', 'name': 'Etc/UTC'}");
        let local = STATUS.replace("RTC in local TZ: no", "RTC in local TZ: yes");
        assert_eq!(
            read_status(&local, &both).unwrap().hwclock.as_deref(),
            Some("local")
        );
        // Older systemd says "Timezone".
        let old = STATUS.replace("Time zone", "Timezone");
        assert_eq!(
            read_status(&old, &both).unwrap().name.as_deref(),
            Some("Etc/UTC")
        );
        assert!(read_status("nothing\n", &both).is_err());
    }
}
