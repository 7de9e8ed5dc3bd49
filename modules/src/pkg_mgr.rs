//! Which package manager a host uses: the `ansible_pkg_mgr` fact, computed as Ansible does
//! (the last known manager program found, then the distribution family's own default).

use std::path::Path;

/// Known managers by program path, in Ansible's order: on a host with several, the last wins
/// before the family default is applied.
const MANAGERS: &[(&str, &str)] = &[
    ("/usr/bin/rpm-ostree", "atomic_container"),
    ("/usr/bin/yum", "dnf"),
    ("/usr/bin/dnf-3", "dnf"),
    ("/usr/bin/dnf5", "dnf5"),
    ("/usr/bin/apt-get", "apt"),
    ("/usr/bin/zypper", "zypper"),
    ("/usr/sbin/urpmi", "urpmi"),
    ("/usr/bin/pacman", "pacman"),
    ("/bin/opkg", "opkg"),
    ("/usr/pkg/bin/pkgin", "pkgin"),
    ("/opt/local/bin/pkgin", "pkgin"),
    ("/opt/tools/bin/pkgin", "pkgin"),
    ("/opt/local/bin/port", "macports"),
    ("/usr/local/bin/brew", "homebrew"),
    ("/opt/homebrew/bin/brew", "homebrew"),
    ("/sbin/apk", "apk"),
    ("/usr/sbin/pkg", "pkgng"),
    ("/usr/sbin/swlist", "swdepot"),
    ("/usr/bin/emerge", "portage"),
    ("/usr/sbin/pkgadd", "svr4pkg"),
    ("/usr/bin/pkg", "pkg5"),
    ("/usr/bin/xbps-install", "xbps"),
    ("/usr/local/sbin/pkg", "pkgng"),
    ("/usr/bin/swupd", "swupd"),
    ("/usr/sbin/sorcery", "sorcery"),
    ("/usr/bin/installp", "installp"),
];

/// The package managers fixpoint's `package` module can drive.
pub const SUPPORTED: &[&str] = &["apt", "dnf", "yum"];

/// `ansible_pkg_mgr` for a host of the given `ansible_os_family`.
pub fn pkg_mgr(os_family: &str) -> String {
    let mut name = "unknown".to_string();
    for (path, mgr) in MANAGERS {
        if os_family == "Altlinux" && *path == "/usr/bin/pkg" {
            continue;
        }
        if Path::new(path).exists() {
            name = mgr.to_string();
        }
    }
    if os_family == "RedHat" {
        name = redhat_default();
    } else if os_family == "Debian" && name != "apt" {
        // dnf, zypper or rpm installed on Debian do not make them the system's manager.
        name = "apt".into();
    } else if os_family == "Altlinux" && name == "apt" {
        name = "apt_rpm".into();
    }
    if name == "apt" && Path::new("/usr/bin/rpm").exists() && apt_is_rpm() {
        name = "apt_rpm".into();
    }
    name
}

fn redhat_default() -> String {
    if Path::new("/run/ostree-booted").exists() {
        return "atomic_container".into();
    }
    for p in ["/usr/bin/dnf", "/usr/bin/microdnf"] {
        if Path::new(p).exists() {
            let real = std::fs::canonicalize(p).unwrap_or_default();
            return if real == Path::new("/usr/bin/dnf5") {
                "dnf5".into()
            } else {
                "dnf".into()
            };
        }
    }
    "unknown".into()
}

/// Whether rpm owns /usr/bin/apt-get (APT-RPM) rather than dpkg.
fn apt_is_rpm() -> bool {
    std::process::Command::new("/usr/bin/rpm")
        .args(["-q", "--whatprovides", "/usr/bin/apt-get"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// `ansible_os_family` from /etc/os-release (the same rules as the agent's facts).
pub fn host_os_family() -> String {
    let text = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    let get = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .map(|v| v.trim_matches('"').to_string())
            .unwrap_or_default()
    };
    os_family(&get("ID"), &get("ID_LIKE")).to_string()
}

/// The family of a distribution from os-release's `ID` and `ID_LIKE`.
pub fn os_family(id: &str, id_like: &str) -> &'static str {
    let like = format!("{id} {id_like}");
    if like.contains("debian") || like.contains("ubuntu") {
        "Debian"
    } else if ["rhel", "fedora", "centos", "rocky", "almalinux"]
        .iter()
        .any(|x| like.contains(x))
    {
        "RedHat"
    } else if like.contains("suse") {
        "Suse"
    } else if like.contains("arch") {
        "Archlinux"
    } else if like.contains("alpine") {
        "Alpine"
    } else {
        "Linux"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debian_family_is_apt_whatever_else_is_installed() {
        // This test host is Debian with apt-get (and maybe rpm/dnf installed beside it).
        if Path::new("/usr/bin/apt-get").exists() {
            assert_eq!(pkg_mgr("Debian"), "apt");
        }
        assert_eq!(os_family("debian", ""), "Debian");
        assert_eq!(os_family("rocky", "rhel centos fedora"), "RedHat");
    }
}
