//! What the package tools say, read-only: dpkg's database (`dpkg-query`), apt's candidates
//! (`apt-cache policy`), the names apt knows (for wildcards) and Debian version order (`dpkg`).

use super::exec::{run, Ran};
use crate::ModuleError;
use std::collections::HashMap;

/// One package in dpkg's database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// `${db:Status-Abbrev}`: want, status, error flags (`ii `, `rc `, `un `...).
    pub abbrev: String,
    pub version: String,
}

impl Installed {
    /// Unpacked and configured (dpkg status `installed`), as python-apt's `CURSTATE_INSTALLED`.
    pub fn is_installed(&self) -> bool {
        self.abbrev.as_bytes().get(1) == Some(&b'i')
    }

    /// Anything left on disk: an installed package, or one removed with its conffiles kept (`rc`).
    pub fn has_files(&self) -> bool {
        !matches!(self.abbrev.as_bytes().get(1), None | Some(b'n'))
    }
}

fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// dpkg's record of each of `names` it knows (unknown names are simply absent).
pub fn installed(
    names: &[String],
    env: &[(String, String)],
) -> Result<HashMap<String, Installed>, ModuleError> {
    let mut out = HashMap::new();
    if names.is_empty() {
        return Ok(out);
    }
    let mut a = argv(&[
        "dpkg-query",
        "-W",
        "-f",
        "${binary:Package}\\t${Package}\\t${db:Status-Abbrev}\\t${Version}\\n",
        "--",
    ]);
    a.extend(names.iter().cloned());
    // Exit 1 only means some name is unknown to dpkg, which is an answer too.
    let ran = run(&a, env, None)?;
    if ran.rc > 1 {
        return Err(super::exec::failure(
            format!("`dpkg-query` failed: {}", ran.stderr.trim()),
            &ran,
        ));
    }
    for line in ran.stdout.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() != 4 {
            continue;
        }
        let rec = Installed {
            abbrev: f[2].to_string(),
            version: f[3].to_string(),
        };
        // Keyed by both spellings: `name` and `name:arch`.
        out.insert(f[1].to_string(), rec.clone());
        out.insert(f[0].to_string(), rec);
    }
    Ok(out)
}

/// apt's view of one package: its candidate and every version it knows, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    pub candidate: Option<String>,
    pub versions: Vec<String>,
}

/// Options that make apt see what the task asked for (`default_release`).
pub fn release_opts(default_release: Option<&str>) -> Vec<String> {
    match default_release {
        Some(r) => vec!["-o".into(), format!("APT::Default-Release={r}")],
        None => Vec::new(),
    }
}

/// `apt-cache policy` of each of `names` apt knows; a name apt does not know is absent.
pub fn policy(
    names: &[String],
    default_release: Option<&str>,
    env: &[(String, String)],
) -> Result<HashMap<String, Policy>, ModuleError> {
    let mut out = HashMap::new();
    if names.is_empty() {
        return Ok(out);
    }
    let mut a = argv(&["apt-cache"]);
    a.extend(release_opts(default_release));
    a.push("policy".into());
    a.push("--".into());
    a.extend(names.iter().cloned());
    let ran = run(&a, env, None)?;
    if ran.rc != 0 {
        return Err(super::exec::failure(
            format!("`apt-cache policy` failed: {}", ran.stderr.trim()),
            &ran,
        ));
    }
    Ok(parse_policy(&ran.stdout)).map(|m| {
        out.extend(m);
        out
    })
}

/// Parse `apt-cache policy` output (C locale): a `name:` line per package, then `Candidate:`
/// and the version table, whose version lines are indented five columns (` *** ` marks the
/// installed one) and whose source lines eight.
pub fn parse_policy(text: &str) -> HashMap<String, Policy> {
    let mut out: HashMap<String, Policy> = HashMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            let name = line.trim_end_matches(':').to_string();
            out.insert(name.clone(), Policy::default());
            current = Some(name);
            continue;
        }
        let Some(p) = current.as_ref().and_then(|n| out.get_mut(n)) else {
            continue;
        };
        let t = line.trim_start();
        if let Some(c) = t.strip_prefix("Candidate:") {
            let c = c.trim();
            p.candidate = (c != "(none)").then(|| c.to_string());
        } else if line.starts_with(" *** ")
            || (line.starts_with("     ") && !line.starts_with("      "))
        {
            let body = line.trim_start().trim_start_matches("*** ");
            let mut f = body.split_whitespace();
            if let (Some(v), Some(prio)) = (f.next(), f.next()) {
                if prio.parse::<i64>().is_ok() && !p.versions.iter().any(|x| x == v) {
                    p.versions.push(v.to_string());
                }
            }
        }
    }
    out
}

/// Every package name apt knows, without the foreign-architecture (`name:arch`) ones unless
/// `with_arch`: `apt*` selects native packages, `apt*:i386` the foreign ones, as in Ansible.
pub fn all_names(with_arch: bool, env: &[(String, String)]) -> Result<Vec<String>, ModuleError> {
    let ran = run(&argv(&["apt-cache", "pkgnames"]), env, None)?;
    if ran.rc != 0 {
        return Err(super::exec::failure(
            format!("`apt-cache pkgnames` failed: {}", ran.stderr.trim()),
            &ran,
        ));
    }
    let mut v: Vec<String> = ran
        .stdout
        .lines()
        .filter(|l| with_arch || !l.contains(':'))
        .map(str::to_string)
        .collect();
    v.sort();
    Ok(v)
}

/// Packages that provide the virtual package `name` (`apt-cache showpkg`'s "Reverse Provides").
pub fn providers(name: &str, env: &[(String, String)]) -> Result<Vec<String>, ModuleError> {
    let ran = run(&argv(&["apt-cache", "showpkg", "--", name]), env, None)?;
    let mut out = Vec::new();
    let mut inside = false;
    for line in ran.stdout.lines() {
        if line.starts_with("Reverse Provides:") {
            inside = true;
            continue;
        }
        if inside {
            if let Some(p) = line.split_whitespace().next() {
                if !out.iter().any(|x| x == p) {
                    out.push(p.to_string());
                }
            }
        }
    }
    Ok(out)
}

/// Debian version order: `a op b` with `op` one of dpkg's `lt`, `le`, `eq`, `ge`, `gt`.
pub fn version_cmp(a: &str, op: &str, b: &str) -> Result<bool, ModuleError> {
    let ran: Ran = run(
        &argv(&["dpkg", "--compare-versions", a, op, b]),
        &super::exec::base_env(),
        None,
    )?;
    match ran.rc {
        0 => Ok(true),
        1 => Ok(false),
        _ => Err(super::exec::failure(
            format!(
                "cannot compare versions `{a}` and `{b}`: {}",
                ran.stderr.trim()
            ),
            &ran,
        )),
    }
}

/// Python's `fnmatch.fnmatch` (shell wildcards `*`, `?`, `[...]`, `[!...]`) on a whole string.
pub fn fnmatch(pattern: &str, s: &str) -> bool {
    glob::Pattern::new(pattern)
        .map(|p| {
            p.matches_with(
                s,
                glob::MatchOptions {
                    case_sensitive: true,
                    require_literal_separator: false,
                    require_literal_leading_dot: false,
                },
            )
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_output_gives_candidate_and_versions_newest_first() {
        let text = "fptest-a:\n  Installed: 1.0\n  Candidate: 2.0\n  Version table:\n     2.0 500\n        500 file:/tmp/r ./ Packages\n *** 1.0 500\n        500 file:/tmp/r ./ Packages\n        100 /var/lib/dpkg/status\nvirt:\n  Installed: (none)\n  Candidate: (none)\n  Version table:\n";
        let p = parse_policy(text);
        assert_eq!(p["fptest-a"].candidate.as_deref(), Some("2.0"));
        assert_eq!(p["fptest-a"].versions, vec!["2.0", "1.0"]);
        assert_eq!(p["virt"], Policy::default());
    }

    #[test]
    fn installed_states() {
        let ii = Installed {
            abbrev: "ii ".into(),
            version: "1".into(),
        };
        let rc = Installed {
            abbrev: "rc ".into(),
            version: "1".into(),
        };
        let un = Installed {
            abbrev: "un ".into(),
            version: "".into(),
        };
        assert!(ii.is_installed() && ii.has_files());
        assert!(!rc.is_installed() && rc.has_files());
        assert!(!un.is_installed() && !un.has_files());
    }

    #[test]
    fn fnmatch_is_shell_wildcards() {
        assert!(fnmatch("fptest-*", "fptest-a"));
        assert!(fnmatch("1.*", "1.0-1"));
        assert!(fnmatch("fptest-[!b]", "fptest-a"));
        assert!(!fnmatch("fptest-[!a]", "fptest-a"));
        assert!(!fnmatch("2.*", "1.0"));
    }
}
