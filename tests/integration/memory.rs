//! Bounded memory: a `copy` of a controller file sends only its hash unless the host's file
//! differs, streams the content in chunks when it must, and keeps the controller's (and the
//! agent's) peak memory flat as the file grows.

use crate::fx::Fx;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::process::{Command, Stdio};

const GIB: u64 = 1 << 30;

/// The ceiling above a small copy's peak: what a 1 GiB copy may add to the largest process of
/// the run (controller or agent; `time` reports the largest peak among them).
const CEILING_KB: u64 = 64 * 1024;

/// A sparse file of `size` bytes with markers at both ends (it costs no disk).
fn sparse(path: &std::path::Path, size: u64) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut f = std::fs::File::create(path).unwrap();
    f.set_len(size).unwrap();
    f.write_all(b"HEAD").unwrap();
    f.seek(SeekFrom::Start(size - 4)).unwrap();
    f.write_all(b"TAIL").unwrap();
}

/// Run `fixpoint apply` under `/usr/bin/time`: the JSON events and the peak RSS in KiB of the
/// largest process of the run (wait4's rusage covers the descendants it reaped: the agent).
fn apply_measured(fx: &Fx) -> (crate::fx::Out, u64) {
    let out = Command::new("/usr/bin/time")
        .args(["-f", "maxrss_kb=%M", crate::fx::bin()])
        .args(["apply", "--format", "json", "site.yml"])
        .current_dir(fx.dir.path())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("/usr/bin/time (package `time`) runs fixpoint");
    let out = crate::fx::Out::from(out);
    let kb = out
        .stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("maxrss_kb="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no maxrss line: {}", out.stderr));
    (out, kb)
}

fn copy_play(fx: &Fx) {
    fx.play("    - name: big\n      copy:\n        src: big.bin\n        dest: \"{{ base }}/big.bin\"\n");
    std::fs::create_dir_all(fx.path("t")).unwrap();
}

#[test]
fn a_1_gib_copy_stays_under_the_memory_ceiling_and_is_sent_once() {
    // The baseline: the same copy of a small file.
    let small = Fx::new();
    sparse(&small.path("files/big.bin"), 64 * 1024);
    copy_play(&small);
    let (out, idle_kb) = apply_measured(&small);
    out.expect(0);
    assert_eq!(out.status_of("big"), "changed");

    let fx = Fx::new();
    sparse(&fx.path("files/big.bin"), GIB);
    copy_play(&fx);
    let (first, peak_kb) = apply_measured(&fx);
    first.expect(0);
    assert_eq!(first.status_of("big"), "changed");
    let ev = &first.task_events("big")[0];
    assert!(
        ev["note"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("content sent: {GIB} bytes")),
        "the content travels once, whole: {ev}"
    );
    assert!(
        peak_kb <= idle_kb + CEILING_KB,
        "a 1 GiB copy peaked at {peak_kb} KiB, a 64 KiB one at {idle_kb} KiB: more than {CEILING_KB} KiB apart"
    );
    let dest = fx.path("t/big.bin");
    let m = std::fs::metadata(&dest).unwrap();
    assert_eq!(m.len(), GIB);
    let mut f = std::fs::File::open(&dest).unwrap();
    let mut ends = [0u8; 4];
    std::io::Read::read_exact(&mut f, &mut ends).unwrap();
    assert_eq!(&ends, b"HEAD");
    f.seek(SeekFrom::Start(GIB - 4)).unwrap();
    std::io::Read::read_exact(&mut f, &mut ends).unwrap();
    assert_eq!(&ends, b"TAIL");
    // Only the two 4 MiB chunks that hold the markers are written.
    assert!(
        m.blocks() * 512 <= 2 * 4 * 1024 * 1024,
        "zeros are not written: the copy stays sparse ({} blocks)",
        m.blocks()
    );
    let names: Vec<_> = std::fs::read_dir(fx.path("t"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["big.bin"], "no staged temp file is left");

    // Converged: nothing is sent, and memory stays as flat.
    let (second, peak2_kb) = apply_measured(&fx);
    second.expect(0);
    assert_eq!(second.status_of("big"), "ok");
    let ev = &second.task_events("big")[0];
    assert!(
        ev.get("note").is_none_or(|n| n.is_null()),
        "nothing is sent: {ev}"
    );
    assert!(peak2_kb <= idle_kb + CEILING_KB, "{peak2_kb} KiB");
}

#[test]
fn an_unchanged_copy_sends_no_content_and_a_changed_one_sends_it_once() {
    let fx = Fx::new();
    fx.write("files/big.bin", &"x".repeat(300_000));
    copy_play(&fx);
    let first = fx.apply(&["--diff"]);
    first.expect(0);
    let ev = &first.task_events("big")[0];
    assert_eq!(ev["note"], "content sent: 300000 bytes", "{ev}");
    assert!(
        first.stdout.contains("diff skipped"),
        "a large file's diff is summarised: {}",
        first.stdout
    );
    assert_eq!(fx.read("t/big.bin").len(), 300_000);

    let again = fx.apply(&[]);
    again.expect(0);
    assert_eq!(again.status_of("big"), "ok");
    assert!(again.task_events("big")[0]["note"].is_null());

    // The host's file drifts: the content goes again, once.
    std::fs::write(fx.path("t/big.bin"), "drifted").unwrap();
    let check = fx.apply(&["--check", "--diff"]);
    check.expect(0);
    assert_eq!(check.status_of("big"), "changed");
    assert!(
        check.task_events("big")[0]["note"].is_null(),
        "check mode sends nothing"
    );
    assert_eq!(fx.read("t/big.bin"), "drifted");
    let fixed = fx.apply(&[]);
    assert_eq!(
        fixed.task_events("big")[0]["note"],
        "content sent: 300000 bytes"
    );
    assert_eq!(fx.read("t/big.bin").len(), 300_000);
}

#[test]
fn a_request_over_the_frame_limit_fails_its_task_before_sending_and_the_host_goes_on() {
    let fx = Fx::new();
    let limit = fixpoint_agent::protocol::MAX_FRAME;
    // Inline content just over and just under the request limit (plain letters: no escaping).
    let line = "a".repeat(1023) + "\n";
    fx.write("big.txt", &line.repeat(limit / 1024 + 16));
    fx.write("near.txt", &line.repeat(limit / 1024 - 64));
    fx.play(concat!(
        "    - name: dir\n      file:\n        path: \"{{ base }}\"\n        state: directory\n",
        "    - name: too big\n      copy:\n        content: \"{{ lookup('file', 'big.txt') }}\"\n        dest: \"{{ base }}/big\"\n      ignore_errors: true\n",
        "    - name: near the limit\n      copy:\n        content: \"{{ lookup('file', 'near.txt') }}\"\n        dest: \"{{ base }}/near\"\n",
    ));
    let out = fx.apply(&[]);
    out.expect(0);
    let ev = &out.task_events("too big")[0];
    assert_eq!(ev["status"], "failed", "{ev}");
    let msg = ev["msg"].as_str().unwrap();
    assert!(
        msg.contains("larger than the 16 MiB an agent takes") && msg.contains("`src`"),
        "{msg}"
    );
    assert!(!fx.path("t/big").exists());
    // The same agent took the next request: the channel was not broken by the refusal.
    assert_eq!(out.status_of("near the limit"), "changed", "{}", out.stdout);
    assert_eq!(
        std::fs::metadata(fx.path("t/near")).unwrap().len() as usize,
        (limit / 1024 - 64) * 1024 - 1
    );
}
