//! The bootstrap shell script every transport runs first: find or receive the agent in a private
//! cache directory keyed by sha256, optionally go through sudo, and exec it.
//!
//! One script for the local and the SSH transport, so `localhost` and remote hosts share one code
//! path. It is POSIX `sh`, needs only `head`, `gzip`, `sha256sum`, `find` and `mktemp`.

use super::ConnSpec;

/// Written by the bootstrap script when the cached agent is missing: send the binary now.
pub const NEED_UPLOAD: &[u8; 8] = b"FXPNEED1";

/// The word of the line the controller sends first (after a become password): `FXPEARLY <n>`,
/// then `n` bytes of requests for the agent, written before the controller knows whether the
/// host has it.
pub const EARLY: &str = "FXPEARLY";

/// The architecture name `uname -m` reports for the machine this build runs on.
fn build_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86" => "i686",
        "arm" => "armv7l",
        other => other,
    }
}

fn sh_quote(s: &str) -> String {
    fixpoint_modules::fs::shell_quote(s)
}

/// The script for an agent whose unpacked binary has digest `sha` and whose compressed upload is
/// `gz_size` bytes.
pub fn script(spec: &ConnSpec, sha: &str, gz_size: usize) -> String {
    // No `umask` here: the agent, and every file and command it makes, runs under the login's
    // umask, as Ansible's modules do. What must be private says so itself (`mkdir -m 700`, the
    // 0700 cache directory around the upload, `mktemp`).
    let mut s = String::from("set -u\n");
    if spec.become_password.is_some() {
        // The password is the first line of stdin, before any upload: read it first. `read`
        // takes one byte at a time from a pipe, so not a byte of the upload is consumed.
        s.push_str("IFS= read -r FIXPOINT_BECOME_PASS; export FIXPOINT_BECOME_PASS\n");
    }
    // The controller's first requests follow (see `EARLY`): the agent reads them where they
    // are once it is exec'd; a host that must receive the agent first drops them (they come
    // again after the upload). `read` takes a pipe one byte at a time and GNU `head -c` reads
    // no more than it is asked, so neither takes a byte beyond its own.
    s.push_str(&format!(
        r#"IFS= read -r early || {{ echo "the controller sent no start line" >&2; exit 98; }}
early=${{early#{EARLY} }}
case $early in ''|*[!0-9]*) echo "unexpected start line from the controller" >&2; exit 98;; esac
"#
    ));
    s.push_str(&format!(
        r#"d="${{XDG_CACHE_HOME:-$HOME/.cache}}/fixpoint"
[ -d "$d" ] || mkdir -p -m 700 "$d" || {{ echo "cannot create the agent cache directory $d" >&2; exit 98; }}
if [ -L "$d" ] || [ ! -O "$d" ] || [ -n "$(find "$d" -maxdepth 0 -perm /022)" ]; then
  echo "refusing the agent cache directory $d: it must be a directory owned by $(id -un) and not group- or world-writable (fix: chmod 700 $d, or remove it)" >&2; exit 98
fi
f="$d/fixpoint-agent-{sha}"
if [ ! -x "$f" ]; then
  # Only a host without this agent needs the platform check (it costs two forks).
  os=$(uname -s); arch=$(uname -m)
  if [ "$os" != Linux ] || [ "$arch" != {arch} ]; then
    echo "host runs $os $arch, but this fixpoint agent is built for Linux {arch}; build fixpoint-agent for that target and set the host variable fixpoint_agent_path to it" >&2; exit 96
  fi
  command -v gzip >/dev/null || {{ echo "the host has no gzip, which unpacks the fixpoint agent: install gzip" >&2; exit 96; }}
  [ "$early" -eq 0 ] || head -c "$early" >/dev/null
  printf FXPNEED1
  t="$f.tmp.$$"
  if head -c {gz_size} | gzip -dc > "$t" && echo "{sha}  $t" | sha256sum -c --status; then
    chmod 700 "$t" && mv -f "$t" "$f"
    # Agents of other builds (and the pre-0.1 whole-controller copies) pile up one per build:
    # drop those uploaded over 30 days ago. A controller still using one uploads it again.
    find "$d" -maxdepth 1 -type f -name 'fixpoint-*' ! -name "fixpoint-agent-{sha}" -mtime +30 -exec rm -f {{}} + 2>/dev/null
  else
    rm -f "$t"; echo "the uploaded agent binary does not match its sha256 {sha}" >&2; exit 99
  fi
fi
"#,
        arch = build_arch(),
    ));
    // `become_exe` and the `become_flags` fixpoint passes on (checked at load time).
    let sudo = std::iter::once(sh_quote(spec.become_exe.as_deref().unwrap_or("sudo")))
        .chain(spec.become_flags.iter().map(|f| sh_quote(f)))
        .collect::<Vec<_>>()
        .join(" ");
    // A become user other than root cannot read the login user's private cache (nor, when
    // the login is root, root's home): it runs a copy of the agent in a fresh directory of its
    // own, which others may enter and run but not change, removed when the agent exits (so the
    // shell waits for sudo instead of `exec`ing it).
    let unprivileged = spec.become_user.as_deref().is_some_and(|u| u != "root");
    if let Some(user) = spec.become_user.as_deref().filter(|_| unprivileged) {
        s.push_str(&format!(
            r#"b=$(mktemp -d /tmp/fixpoint-become.XXXXXX) || {{ echo "cannot create a directory in /tmp for the agent of {user}" >&2; exit 98; }}
if ! {{ cp "$f" "$b/fixpoint-agent" && chmod 755 "$b/fixpoint-agent" && chmod 711 "$b"; }}; then
  rm -rf "$b"; echo "cannot copy the agent to $b for {user}" >&2; exit 98
fi
f="$b/fixpoint-agent"
"#,
            user = user.replace(['"', '\\', '$', '`'], "_")
        ));
    }
    let run = match (&spec.become_user, &spec.become_password) {
        (None, _) => "\"$f\"".to_string(),
        (Some(user), None) => format!("{sudo} -n -u {} -- \"$f\"", sh_quote(user)),
        (Some(user), Some(_)) => {
            // The password (read above) reaches sudo through an askpass helper that reads it
            // from the environment: never in argv, never in a file or a log.
            s.push_str(
                r#"a=$(mktemp "${TMPDIR:-/tmp}/fixpoint-askpass.XXXXXX") || exit 98
printf '#!/bin/sh\nprintf "%%s\\n" "$FIXPOINT_BECOME_PASS"\n' > "$a"; chmod 700 "$a"
"#,
            );
            format!(
                "SUDO_ASKPASS=\"$a\" {sudo} -A -k -p fixpoint -u {} -- \"$f\"",
                sh_quote(user)
            )
        }
    };
    let cleanup = [
        spec.become_password.is_some().then_some("\"$a\""),
        unprivileged.then_some("\"$b\""),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>();
    if cleanup.is_empty() {
        s.push_str(&format!("exec {run}\n"));
    } else {
        s.push_str(&format!(
            "{run}\nr=$?; rm -rf {}; exit $r\n",
            cleanup.join(" ")
        ));
    }
    s
}
