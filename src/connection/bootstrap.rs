//! The bootstrap shell script every transport runs first: find or receive the agent in a private
//! cache directory keyed by sha256, optionally go through sudo or su, and exec it.
//!
//! One script for the local and the SSH transport, so `localhost` and remote hosts share one code
//! path. It is POSIX `sh`, needs only `head`, `gzip` (or `zstd`), `find` and `mktemp`.

use super::{AgentBinary, BecomeMethod, ConnSpec};

/// Written by the bootstrap script when the cached agent is missing: send the binary now,
/// gzip-compressed.
pub const NEED_UPLOAD: &[u8; 8] = b"FXPNEED1";

/// As `NEED_UPLOAD`, from a host that has `zstd`: send the binary zstd-compressed.
pub const NEED_UPLOAD_ZSTD: &[u8; 8] = b"FXPNEEDZ";

/// Written by the bootstrap script instead of starting su without a password where su would ask
/// for one (the login user is not root).
pub const SU_NEEDS_PASSWORD: &[u8; 8] = b"FXPSUPWD";

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

/// The script that runs `bin` (found in the host's cache under its digest, or received).
pub fn script(spec: &ConnSpec, bin: &AgentBinary) -> String {
    let sha = &bin.sha256;
    // No `umask` here: the agent, and every file and command it makes, runs under the login's
    // umask, as Ansible's modules do. What must be private says so itself (`mkdir -m 700`, the
    // 0700 cache directory around the upload, `mktemp`).
    let mut s = String::from("set -u\n");
    if spec.become_password.is_some() {
        // The password is the first line of stdin, before any upload: read it first. `read`
        // takes one byte at a time from a pipe, so not a byte of the upload is consumed. sudo's
        // askpass helper reads it from the environment (sudo clears the agent's); su keeps the
        // environment, so there it stays a shell variable.
        s.push_str("IFS= read -r FIXPOINT_BECOME_PASS\n");
        if spec.become_method == BecomeMethod::Sudo {
            s.push_str("export FIXPOINT_BECOME_PASS\n");
        }
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
  [ "$early" -eq 0 ] || head -c "$early" >/dev/null
  # zstd unpacks the agent in a third of gzip's CPU time, from fewer bytes; gzip is everywhere.
  if {zst_test}command -v zstd >/dev/null; then
    printf FXPNEEDZ; n={zst_size}; unpack="zstd -dcq"
  else
    command -v gzip >/dev/null || {{ echo "the host has no gzip, which unpacks the fixpoint agent: install gzip" >&2; exit 96; }}
    printf FXPNEED1; n={gz_size}; unpack="gzip -dc"
  fi
  t="$f.tmp.$$"
  # The decompressor checks what it unpacks (zstd's content checksum, gzip's CRC-32 and length;
  # a cut stream fails), and SSH what it carried, so the binary is the controller's without
  # hashing it again here (a sha256sum of it cost as much CPU as unpacking it).
  if head -c "$n" | $unpack > "$t"; then
    chmod 700 "$t" && mv -f "$t" "$f"
    # Agents of other builds (and the pre-0.1 whole-controller copies) pile up one per build:
    # drop those uploaded over 30 days ago. A controller still using one uploads it again.
    find "$d" -maxdepth 1 -type f -name 'fixpoint-*' ! -name "fixpoint-agent-{sha}" -mtime +30 -exec rm -f {{}} + 2>/dev/null
  else
    rm -f "$t"; echo "the uploaded agent binary did not unpack (${{unpack%% *}} found it cut short or corrupt)" >&2; exit 99
  fi
fi
"#,
        arch = build_arch(),
        gz_size = bin.gz.len(),
        // No zstd upload (an overridden agent): the test is false before `command -v` runs.
        zst_test = if bin.zst.is_some() { "" } else { "false && " },
        zst_size = bin.zst.as_ref().map_or(0, |z| z.len()),
    ));
    // `become_exe` and the `become_flags` fixpoint passes on (checked at load time).
    let exe = std::iter::once(sh_quote(spec.become_exe()))
        .chain(spec.become_flags.iter().map(|f| sh_quote(f)))
        .collect::<Vec<_>>()
        .join(" ");
    if let (Some(_), None, BecomeMethod::Su) =
        (&spec.become_user, &spec.become_password, spec.become_method)
    {
        // Only root becomes another user through su without a password (pam_rootok); for
        // anyone else su would read the controller's requests as the password. The controller
        // says so (`SU_NEEDS_PASSWORD`).
        s.push_str("[ \"$(id -u)\" -eq 0 ] || { printf FXPSUPWD; exit 97; }\n");
    }
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
    let mut cleanup = Vec::new();
    let run = match (&spec.become_user, &spec.become_password, spec.become_method) {
        (None, _, _) => "\"$f\"".to_string(),
        (Some(user), None, BecomeMethod::Sudo) => {
            format!("{exe} -n -u {} -- \"$f\"", sh_quote(user))
        }
        (Some(user), Some(_), BecomeMethod::Sudo) => {
            // The password (read above) reaches sudo through an askpass helper that reads it
            // from the environment: never in argv, never in a file or a log.
            s.push_str(
                r#"a=$(mktemp "${TMPDIR:-/tmp}/fixpoint-askpass.XXXXXX") || exit 98
printf '#!/bin/sh\nprintf "%%s\\n" "$FIXPOINT_BECOME_PASS"\n' > "$a"; chmod 700 "$a"
"#,
            );
            cleanup.push("\"$a\"");
            format!(
                "SUDO_ASKPASS=\"$a\" {exe} -A -k -p fixpoint -u {} -- \"$f\"",
                sh_quote(user)
            )
        }
        // su runs `-c` with the user's shell; the agent's path is its `$0`, not part of the
        // command text.
        (Some(user), None, BecomeMethod::Su) => {
            format!("{exe} {} -c 'exec \"$0\"' \"$f\"", sh_quote(user))
        }
        (Some(user), Some(_), BecomeMethod::Su) => {
            // su reads the password from its stdin (util-linux, when stdin is no terminal: the
            // line and nothing after it), and the agent the rest: a relay through a private
            // pipe puts the password in front of the controller's stream. The relay is stopped
            // when su exits, or it would hold the channel open until the controller closes it.
            // (The shell gives a background job /dev/null as stdin: the relay reads fd 3.)
            s.push_str(
                r#"p=$(mktemp -d "${TMPDIR:-/tmp}/fixpoint-su.XXXXXX") && mkfifo -m 600 "$p/in" || { echo "cannot create a pipe for su's password" >&2; exit 98; }
exec 3<&0
{ printf '%s\n' "$FIXPOINT_BECOME_PASS"; exec cat <&3 3<&-; } > "$p/in" &
c=$!; exec 3<&-; FIXPOINT_BECOME_PASS=
"#,
            );
            cleanup.push("\"$p\"");
            format!(
                "{exe} {} -c 'exec \"$0\"' \"$f\" < \"$p/in\"\nr=$?; kill $c 2>/dev/null; (exit $r)",
                sh_quote(user)
            )
        }
    };
    if unprivileged {
        cleanup.push("\"$b\"");
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connection::ConnKind;
    use flate2::{write::GzEncoder, Compression};
    use sha2::{Digest, Sha256};
    use std::io::Write;
    use std::process::{Command, Stdio};
    use std::time::Duration;

    /// Runs the script for `agent` under `sh` with `HOME` = `home` (and `PATH` = `path` when
    /// given), sending `upload` as the controller would after `FXPNEED1` or `FXPNEEDZ`: exit
    /// code, stdout, stderr. `zst` is the binary's zstd form, if it has one.
    fn run_with(
        home: &std::path::Path,
        path: Option<&std::path::Path>,
        agent: &[u8],
        zst: Option<Vec<u8>>,
        upload: &[u8],
    ) -> (i32, String, String) {
        let spec = ConnSpec {
            host: "h".into(),
            kind: ConnKind::Local,
            become_user: None,
            become_password: None,
            become_method: crate::connection::BecomeMethod::Sudo,
            become_exe: None,
            become_flags: Vec::new(),
            agent_path: None,
            state_dir: None,
            connect_timeout: Duration::from_secs(5),
        };
        let bin = AgentBinary {
            sha256: hex::encode(Sha256::digest(agent)),
            size: agent.len() as u64,
            gz: gz(agent).into(),
            zst: zst.map(Into::into),
        };
        let script = script(&spec, &bin);
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", &script])
            .env("HOME", home)
            .env_remove("XDG_CACHE_HOME")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(path) = path {
            cmd.env("PATH", path);
        }
        let mut child = cmd.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"FXPEARLY 0\n").unwrap();
        stdin.write_all(upload).unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into(),
            String::from_utf8_lossy(&out.stderr).into(),
        )
    }

    /// `run_with` for an agent that has only its gzip form.
    fn run(home: &std::path::Path, agent: &[u8], upload: &[u8]) -> (i32, String, String) {
        run_with(home, None, agent, None, upload)
    }

    /// `data` compressed by the `zstd` program, as build.rs's encoder does (with the content
    /// checksum); the test machine must have it, as hosts that get the zstd upload do.
    fn zst(data: &[u8]) -> Vec<u8> {
        let mut child = Command::new("zstd")
            .args(["-q", "-19", "--check", "-c"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the `zstd` program is missing: apt-get install zstd (.ci/run installs it)");
        child.stdin.take().unwrap().write_all(data).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        out.stdout
    }

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::best());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// The cache directory's entries (the agent's name, or a leftover temporary file).
    fn cached(home: &std::path::Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(home.join(".cache/fixpoint"))
            .map(|r| {
                r.flatten()
                    .map(|e| e.file_name().into_string().unwrap())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    #[test]
    fn an_upload_is_kept_only_when_it_unpacks_whole() {
        // A stand-in agent: a script that says it ran.
        let agent = b"#!/bin/sh\necho agent ran\n";
        let good = gz(agent);
        let name = format!("fixpoint-agent-{}", hex::encode(Sha256::digest(agent)));

        // Cut short (a dropped connection): refused, nothing kept under the agent's name.
        let home = tempfile::tempdir().unwrap();
        let cut = &good[..good.len() - 6];
        let (code, out, err) = run(home.path(), agent, cut);
        assert_eq!((code, out.as_str()), (99, "FXPNEED1"), "{err}");
        assert!(err.contains("did not unpack"), "{err}");
        assert!(cached(home.path()).is_empty(), "{:?}", cached(home.path()));

        // A flipped byte in the compressed data or its CRC: refused the same way.
        for at in [good.len() / 2, good.len() - 7] {
            let mut bad = good.clone();
            bad[at] ^= 0x55;
            let (code, _, err) = run(home.path(), agent, &bad);
            assert_eq!(code, 99, "byte {at}: {err}");
            assert!(cached(home.path()).is_empty(), "{:?}", cached(home.path()));
        }

        // The whole upload: kept under its digest and run; the next start finds it.
        let (code, out, err) = run(home.path(), agent, &good);
        assert_eq!((code, out.as_str()), (0, "FXPNEED1agent ran\n"), "{err}");
        assert_eq!(cached(home.path()), [name]);
        let (code, out, _) = run(home.path(), agent, b"");
        assert_eq!((code, out.as_str()), (0, "agent ran\n"));
    }

    #[test]
    fn a_host_with_zstd_gets_the_zstd_upload_checked_as_the_gzip_one() {
        let agent = b"#!/bin/sh\necho agent ran\n";
        let good = zst(agent);
        let home = tempfile::tempdir().unwrap();

        // Cut short, or a flipped byte (in the data or in the checksum): refused, nothing kept.
        let mut bad = vec![good[..good.len() - 3].to_vec()];
        for at in [good.len() / 2, good.len() - 2] {
            let mut b = good.clone();
            b[at] ^= 0x55;
            bad.push(b);
        }
        for upload in bad {
            let (code, out, err) = run_with(home.path(), None, agent, Some(good.clone()), &upload);
            assert_eq!((code, out.as_str()), (99, "FXPNEEDZ"), "{err}");
            assert!(err.contains("zstd found it cut short or corrupt"), "{err}");
            assert!(cached(home.path()).is_empty(), "{:?}", cached(home.path()));
        }

        let (code, out, err) = run_with(home.path(), None, agent, Some(good.clone()), &good);
        assert_eq!((code, out.as_str()), (0, "FXPNEEDZagent ran\n"), "{err}");
        let name = format!("fixpoint-agent-{}", hex::encode(Sha256::digest(agent)));
        assert_eq!(cached(home.path()), [name]);
    }

    #[test]
    fn a_host_without_zstd_gets_the_gzip_upload() {
        // A PATH with every tool the script uses but `zstd`.
        let bin = tempfile::tempdir().unwrap();
        for tool in [
            "head", "gzip", "find", "mkdir", "chmod", "mv", "rm", "uname", "id",
        ] {
            let found = ["/usr/bin", "/bin"]
                .iter()
                .map(|d| std::path::Path::new(d).join(tool))
                .find(|p| p.exists())
                .unwrap_or_else(|| panic!("`{tool}` is missing from /usr/bin and /bin"));
            std::os::unix::fs::symlink(found, bin.path().join(tool)).unwrap();
        }
        let agent = b"#!/bin/sh\necho agent ran\n";
        let home = tempfile::tempdir().unwrap();
        let (code, out, err) = run_with(
            home.path(),
            Some(bin.path()),
            agent,
            Some(zst(agent)),
            &gz(agent),
        );
        assert_eq!((code, out.as_str()), (0, "FXPNEED1agent ran\n"), "{err}");
    }
}
