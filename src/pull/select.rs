//! Which playbook a pull runs and which hosts it runs on, as ansible-pull decides: the named
//! playbooks, else the first of `<fqdn>.yml`, `<hostname>.yml` and `local.yml` in the checkout;
//! with an inventory, the hosts named like this machine (and localhost).

use std::path::{Path, PathBuf};

/// This machine's names: (fqdn, node name). The fqdn is what the resolver makes of the node name
/// (`hostname --fqdn`, as Python's `socket.getfqdn` asks it), or the node name itself.
pub fn host_names() -> (String, String) {
    let node = nix::sys::utsname::uname()
        .map(|u| u.nodename().to_string_lossy().into_owned())
        .unwrap_or_else(|_| "localhost".into());
    let fqdn = std::process::Command::new("hostname")
        .arg("--fqdn")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty() && !s.contains(char::is_whitespace))
        .unwrap_or_else(|| node.clone());
    (fqdn, node)
}

/// The playbooks to run from `checkout`: `named` ones (each must exist), or the first default.
pub fn playbooks(
    checkout: &Path,
    named: &[PathBuf],
    names: &(String, String),
) -> Result<Vec<PathBuf>, String> {
    if !named.is_empty() {
        let mut out = Vec::new();
        for p in named {
            let full = checkout.join(p);
            if !full.is_file() {
                return Err(format!(
                    "playbook `{}` is not in the checkout ({})",
                    p.display(),
                    full.display()
                ));
            }
            out.push(full);
        }
        return Ok(out);
    }
    let candidates = default_candidates(names);
    candidates
        .iter()
        .map(|c| checkout.join(c))
        .find(|p| p.is_file())
        .map(|p| vec![p])
        .ok_or_else(|| {
            format!(
                "no playbook to run: the checkout ({}) has none of {}; name one with -p",
                checkout.display(),
                candidates.join(", ")
            )
        })
}

/// `<fqdn>.yml`, `<hostname>.yml`, `local.yml`, each once.
fn default_candidates((fqdn, node): &(String, String)) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in [fqdn.as_str(), node.as_str(), "local"] {
        let file = format!("{name}.yml");
        if !out.contains(&file) {
            out.push(file);
        }
    }
    out
}

/// The default `--limit` with an inventory: this machine under any of its names, as
/// ansible-pull limits its run (`localhost,<fqdn>,<node>,<short names>,127.0.0.1`).
pub fn default_limit((fqdn, node): &(String, String)) -> String {
    let short = |s: &str| s.split('.').next().unwrap_or(s).to_string();
    let mut names = vec!["localhost".to_string()];
    for n in [fqdn.clone(), node.clone(), short(fqdn), short(node)] {
        if !n.is_empty() && !names.contains(&n) {
            names.push(n);
        }
    }
    names.push("127.0.0.1".into());
    names.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_default_the_checkout_has_is_run() {
        let d = tempfile::tempdir().unwrap();
        let names = ("web1.example.org".to_string(), "web1".to_string());
        let err = playbooks(d.path(), &[], &names).unwrap_err();
        assert!(
            err.contains("web1.example.org.yml, web1.yml, local.yml"),
            "{err}"
        );
        std::fs::write(d.path().join("local.yml"), "[]").unwrap();
        assert_eq!(
            playbooks(d.path(), &[], &names).unwrap(),
            vec![d.path().join("local.yml")]
        );
        std::fs::write(d.path().join("web1.yml"), "[]").unwrap();
        assert_eq!(
            playbooks(d.path(), &[], &names).unwrap(),
            vec![d.path().join("web1.yml")]
        );
        std::fs::write(d.path().join("web1.example.org.yml"), "[]").unwrap();
        assert_eq!(
            playbooks(d.path(), &[], &names).unwrap(),
            vec![d.path().join("web1.example.org.yml")]
        );
        // A named playbook must be there; it wins over the defaults.
        let named = [PathBuf::from("site.yml")];
        assert!(playbooks(d.path(), &named, &names)
            .unwrap_err()
            .contains("`site.yml` is not in the checkout"));
        std::fs::write(d.path().join("site.yml"), "[]").unwrap();
        assert_eq!(
            playbooks(d.path(), &named, &names).unwrap(),
            vec![d.path().join("site.yml")]
        );
    }

    #[test]
    fn the_default_limit_names_this_machine() {
        let names = ("web1.example.org".to_string(), "web1".to_string());
        assert_eq!(
            default_limit(&names),
            "localhost,web1.example.org,web1,127.0.0.1"
        );
    }
}
