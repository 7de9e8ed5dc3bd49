//! Builds the `fixpoint-agent` binary (the `agent/` crate) and embeds it, gzip- and
//! zstd-compressed, in the controller, so that one `cargo build` or `cargo install --path .` gives a controller that
//! always has the agent matching its own protocol.
//!
//! The agent is built in its own target directory with the `agent` profile (size-optimised, LTO,
//! stripped). When `cargo-zigbuild` is installed (`.ci/run` installs it), the agent is linked
//! against glibc 2.17 so that old hosts (RHEL 7/8, Ubuntu 20.04) can run it; without it the agent
//! needs the build machine's glibc, and the build says so.
//!
//! Environment knobs:
//! - `FIXPOINT_AGENT_LINKER=zig|plain`: force the zig (glibc 2.17) or the plain build.

use flate2::{write::GzEncoder, Compression};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The glibc that a zig-linked agent needs at most: Rust's own minimum for this target.
const GLIBC_BASELINE: &str = "2.17";

fn main() {
    let manifest_dir = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env("OUT_DIR"));
    for watched in ["agent", "modules", "Cargo.lock", "Cargo.toml"] {
        println!(
            "cargo:rerun-if-changed={}",
            manifest_dir.join(watched).display()
        );
    }
    println!("cargo:rerun-if-env-changed=FIXPOINT_AGENT_LINKER");
    // Whether cargo-zigbuild and zig are found depends on PATH.
    println!("cargo:rerun-if-env-changed=PATH");

    // OUT_DIR is <target>/<profile>/build/fixpoint-<hash>/out: share one agent build between the
    // controller's debug and release builds, next to (not inside) their profile directories.
    let target_root = out_dir
        .ancestors()
        .nth(4)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| out_dir.join("agent-target"));
    let agent_target = target_root.join("agent-build");

    let triple = env("TARGET");
    let use_zig = match std::env::var("FIXPOINT_AGENT_LINKER").as_deref() {
        Ok("zig") => true,
        Ok("plain") => false,
        Ok(other) => panic!("FIXPOINT_AGENT_LINKER={other}: expected `zig` or `plain`"),
        Err(_) => triple.ends_with("-linux-gnu") && has_cargo_zigbuild(),
    };

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(&cargo);
    let target_arg = if use_zig {
        cmd.arg("zigbuild");
        format!("{triple}.{GLIBC_BASELINE}")
    } else {
        cmd.arg("build");
        triple.clone()
    };
    cmd.args([
        "--profile",
        "agent",
        "-p",
        "fixpoint-agent",
        "--bin",
        "fixpoint-agent",
    ])
    .arg("--manifest-path")
    .arg(manifest_dir.join("Cargo.toml"))
    .arg("--target")
    .arg(&target_arg)
    .arg("--target-dir")
    .arg(&agent_target);
    scrub_env(&mut cmd);
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run {cargo} to build fixpoint-agent: {e}"));
    if !status.success() {
        panic!("building fixpoint-agent failed ({status}); see the cargo output above");
    }
    let built = agent_target
        .join(&triple)
        .join("agent")
        .join("fixpoint-agent");
    let bytes = std::fs::read(&built)
        .unwrap_or_else(|e| panic!("cannot read the built agent {}: {e}", built.display()));

    let mut gz = GzEncoder::new(Vec::new(), Compression::best());
    gz.write_all(&bytes).expect("gzip into memory");
    let gz = gz.finish().expect("gzip into memory");
    std::fs::write(out_dir.join("fixpoint-agent.gz"), &gz).expect("write fixpoint-agent.gz");
    // The same binary for hosts that have `zstd`: 17 % fewer bytes than gzip's, unpacked in a
    // third of gzip's CPU time. The frame carries its content checksum, which `zstd -d` checks.
    let mut zst = zstd::stream::Encoder::new(Vec::new(), 19).expect("zstd encoder");
    zst.include_checksum(true).expect("zstd checksum flag");
    zst.set_pledged_src_size(Some(bytes.len() as u64))
        .expect("zstd pledged size");
    zst.write_all(&bytes).expect("zstd into memory");
    let zst = zst.finish().expect("zstd into memory");
    std::fs::write(out_dir.join("fixpoint-agent.zst"), &zst).expect("write fixpoint-agent.zst");

    let baseline = if use_zig {
        format!("glibc {GLIBC_BASELINE}")
    } else {
        println!(
            "cargo:warning=fixpoint-agent was linked against this machine's glibc (cargo-zigbuild not found): \
             hosts with an older glibc cannot run it. For the glibc {GLIBC_BASELINE} baseline: \
             pip install ziglang && cargo install cargo-zigbuild"
        );
        "the build machine's glibc".to_string()
    };
    let sha = hex(&Sha256::digest(&bytes));
    let meta = format!(
        "/// sha256 of the uncompressed agent binary: its name in the hosts' cache.\n\
         pub const SHA256: &str = \"{sha}\";\n\
         /// Size of the uncompressed agent binary, in bytes.\n\
         pub const SIZE: u64 = {size};\n\
         /// The oldest C library the agent runs on.\n\
         pub const BASELINE: &str = \"{baseline}\";\n\
         /// The agent binary, gzip-compressed (hosts unpack it with `gzip -dc`).\n\
         pub static GZ: &[u8] = include_bytes!(concat!(env!(\"OUT_DIR\"), \"/fixpoint-agent.gz\"));\n\
         /// The agent binary, zstd-compressed (hosts with `zstd` unpack it with `zstd -dc`).\n\
         pub static ZST: &[u8] = include_bytes!(concat!(env!(\"OUT_DIR\"), \"/fixpoint-agent.zst\"));\n",
        size = bytes.len(),
    );
    std::fs::write(out_dir.join("agent_binary.rs"), meta).expect("write agent_binary.rs");
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("cargo did not set {name}"))
}

/// cargo-zigbuild and a zig it can find (`zig` on PATH, or Python's `ziglang` package).
fn has_cargo_zigbuild() -> bool {
    let runs = |cmd: &str, args: &[&str]| {
        Command::new(cmd)
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    runs("cargo-zigbuild", &["--version"])
        && (runs("zig", &["version"]) || runs("python3", &["-m", "ziglang", "version"]))
}

/// The nested cargo must build the agent as if run by hand: drop what cargo sets for this build
/// script (flags, wrappers such as clippy-driver, this package's metadata), keep the toolchain
/// selection and the jobserver so both builds share the machine's cores.
fn scrub_env(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let keep = matches!(
            key,
            "CARGO_HOME"
                | "CARGO_MAKEFLAGS"
                | "CARGO_NET_OFFLINE"
                | "CARGO_REGISTRIES_CRATES_IO_PROTOCOL"
        );
        let drop = !keep
            && (key.starts_with("CARGO_")
                || key.starts_with("RUSTC")
                || key.starts_with("DEP_")
                || matches!(
                    key,
                    "RUSTFLAGS"
                        | "RUSTDOCFLAGS"
                        | "TARGET"
                        | "HOST"
                        | "OUT_DIR"
                        | "PROFILE"
                        | "OPT_LEVEL"
                        | "DEBUG"
                        | "NUM_JOBS"
                ));
        if drop {
            cmd.env_remove(key);
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
