//! `timezone` (community.general): the host's time zone on Debian-family hosts that systemd
//! does not manage, as Ansible sets it there: `/etc/timezone`, the `/etc/localtime` link to the
//! zoneinfo file, then `dpkg-reconfigure tzdata`.

use super::{run_c, ConfFile};
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
pub struct State {
    /// The zone as Ansible reads it (`n/a` when unreadable).
    current: String,
    file: ConfFile,
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
}

impl Module for Timezone {
    type Params = Params;
    type State = State;
    type Action = SetZone;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if let Some(h) = p.hwclock.as_deref().filter(|h| !is_template(h)) {
            if h != "local" && h != "UTC" {
                return Err(ModuleError::Params(format!(
                    "value of hwclock must be one of: local, UTC, got: {h}"
                )));
            }
        }
        if p.hwclock.is_some() {
            return Err(ModuleError::Params(
                "`hwclock` is not supported: fixpoint's timezone sets the zone only (the \
                 hardware clock mode needs `hwclock --systohc`)"
                    .into(),
            ));
        }
        if p.name.is_none() {
            return Err(ModuleError::Params(
                "one of the following is required: hwclock, name".into(),
            ));
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<State, ModuleError> {
        if Path::new("/run/systemd/system").is_dir() {
            return Err(ModuleError::failed(
                "this host runs systemd, where Ansible sets the zone with timedatectl; \
                 fixpoint's timezone does not do that yet",
            ));
        }
        let family = crate::pkg_mgr::host_os_family();
        if family != "Debian" {
            return Err(ModuleError::failed(format!(
                "fixpoint's timezone sets the zone of Debian-family hosts only; this one is \
                 {family}"
            )));
        }
        let zone = p.zone();
        let zonefile = Path::new(ZONEINFO).join(zone);
        if zone.is_empty() || !zonefile.is_file() || zone.split('/').any(|c| c == "..") {
            return Err(ModuleError::failed(format!(
                "Error message:\ngiven timezone \"{zone}\" is not available"
            )));
        }
        let file = ConfFile::probe(Path::new(TIMEZONE_FILE))?;
        Ok(State {
            current: current_zone(file.text.as_deref(), zone),
            file,
        })
    }

    fn plan(p: &Params, st: &State, _ctx: &Ctx) -> Result<Plan<SetZone>, ModuleError> {
        let zone = p.zone();
        let mut plan = Plan::new();
        // Ansible returns the zone before and after in every result (not only with --diff).
        plan.result.insert(
            "diff".into(),
            json!({"before": {"name": st.current}, "after": {"name": zone}}),
        );
        if st.current != zone {
            let set = edit_timezone_file(st.file.text.as_deref().unwrap_or_default(), zone);
            plan.msg = Some(format!(
                "Added 1 line and deleted {} line(s) on {TIMEZONE_FILE}",
                set.deleted
            ));
            plan.diff.attr("timezone", "name", st.current.clone(), zone);
            plan.actions.push(set);
        }
        Ok(plan)
    }

    fn apply(
        p: &Params,
        st: State,
        plan: &Plan<SetZone>,
    ) -> Result<Map<String, Value>, ModuleError> {
        let zone = p.zone();
        for set in &plan.actions {
            st.file.write(&set.text)?;
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
        Ok(Map::new())
    }
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
    fn hwclock_is_refused() {
        let e = check_params("timezone", &serde_json::json!({"hwclock": "UTC"})).unwrap_err();
        assert!(e.msg.contains("`hwclock` is not supported"), "{e}");
        assert!(check_params("timezone", &serde_json::json!({})).is_err());
        assert!(check_params("timezone", &serde_json::json!({"name": "Etc/UTC"})).is_ok());
    }
}
