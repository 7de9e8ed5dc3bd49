//! Unit tests of `unarchive` on tar archives built here with the `tar` crate: converge and
//! rerun without rewriting, check mode inert, a hard link, keep_newer, and escapes refused.

use super::Unarchive;
use crate::testutil::{stamp, CHECK, RUN};
use crate::{run, ModuleError};
use serde_json::json;
use std::fs;
use std::path::Path;

/// One tar entry: name, type, data (or link target), mode, mtime.
fn tar_of(path: &Path, entries: &[(&str, tar::EntryType, &[u8], u32)]) {
    let mut b = tar::Builder::new(fs::File::create(path).unwrap());
    for (name, kind, data, mode) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(*kind);
        h.set_mode(*mode);
        h.set_mtime(1_600_000_000);
        h.set_uid(nix::unistd::geteuid().as_raw().into());
        h.set_gid(nix::unistd::getegid().as_raw().into());
        if matches!(kind, tar::EntryType::Symlink | tar::EntryType::Link) {
            h.set_size(0);
            b.append_link(&mut h, name, std::str::from_utf8(data).unwrap())
                .unwrap();
        } else {
            h.set_size(data.len() as u64);
            h.set_path(name).unwrap();
            h.set_cksum();
            b.append(&h, *data).unwrap();
        }
    }
    b.finish().unwrap();
}

fn params(src: &Path, dest: &Path) -> serde_json::Value {
    json!({"src": src, "dest": dest, "remote_src": true})
}

#[test]
fn converges_without_rewriting_and_check_mode_is_inert() {
    use tar::EntryType as T;
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("a.tar");
    tar_of(
        &src,
        &[
            ("top/", T::Directory, b"", 0o750),
            ("top/f.txt", T::Regular, b"data\n", 0o640),
            ("top/hard", T::Link, b"top/f.txt", 0o640),
            ("top/sym", T::Symlink, b"f.txt", 0o777),
        ],
    );
    let dest = d.path().join("out");
    fs::create_dir(&dest).unwrap();
    let p = params(&src, &dest);
    let check = run::<Unarchive>(&p, &CHECK).unwrap();
    assert!(check.changed);
    assert_eq!(fs::read_dir(&dest).unwrap().count(), 0, "check mode wrote");
    let first = run::<Unarchive>(&p, &RUN).unwrap();
    assert!(first.changed);
    assert_eq!(first.result["handler"], "TarArchive");
    let f = dest.join("top/f.txt");
    assert_eq!(fs::read_to_string(&f).unwrap(), "data\n");
    use std::os::unix::fs::MetadataExt;
    let m = fs::metadata(&f).unwrap();
    assert_eq!(
        (m.mode() & 0o7777, m.mtime(), m.nlink()),
        (0o640, 1_600_000_000, 2)
    );
    assert_eq!(
        fs::read_link(dest.join("top/sym")).unwrap(),
        Path::new("f.txt")
    );
    let before = stamp(&f);
    let second = run::<Unarchive>(&p, &RUN).unwrap();
    assert!(!second.changed, "{second:?}");
    assert_eq!(stamp(&f), before);
}

#[test]
fn keep_newer_keeps_a_newer_file() {
    use tar::EntryType as T;
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("a.tar");
    tar_of(&src, &[("f.txt", T::Regular, b"archive\n", 0o644)]);
    let dest = d.path().join("out");
    fs::create_dir(&dest).unwrap();
    fs::write(dest.join("f.txt"), "mine, newer\n").unwrap();
    let mut p = params(&src, &dest);
    p["keep_newer"] = json!(true);
    let out = run::<Unarchive>(&p, &RUN).unwrap();
    assert!(!out.changed);
    assert_eq!(
        fs::read_to_string(dest.join("f.txt")).unwrap(),
        "mine, newer\n"
    );
    p["keep_newer"] = json!(false);
    assert!(run::<Unarchive>(&p, &RUN).unwrap().changed);
    assert_eq!(fs::read_to_string(dest.join("f.txt")).unwrap(), "archive\n");
}

#[test]
fn escapes_are_refused_before_writing() {
    use tar::EntryType as T;
    let d = tempfile::tempdir().unwrap();
    let outside = d.path().join("outside");
    fs::create_dir(&outside).unwrap();
    let dest = d.path().join("out");
    fs::create_dir(&dest).unwrap();
    let via_archive = d.path().join("via.tar");
    tar_of(
        &via_archive,
        &[
            ("ok.txt", T::Regular, b"fine\n", 0o644),
            ("l", T::Symlink, outside.to_str().unwrap().as_bytes(), 0o777),
            ("l/x", T::Regular, b"evil\n", 0o644),
        ],
    );
    // A symlink already in dest is not followed either.
    let via_tree = d.path().join("tree.tar");
    tar_of(&via_tree, &[("t/x", T::Regular, b"evil\n", 0o644)]);
    let hard = d.path().join("hard.tar");
    tar_of(&hard, &[("h", T::Link, b"../outside/secret", 0o644)]);
    for src in [&via_archive, &via_tree, &hard] {
        if src == &via_tree {
            std::os::unix::fs::symlink(&outside, dest.join("t")).unwrap();
        }
        match run::<Unarchive>(&params(src, &dest), &RUN) {
            Err(ModuleError::Failed { msg, .. }) => {
                assert!(msg.contains("refusing to extract"), "{msg}")
            }
            other => panic!("{} was not refused: {other:?}", src.display()),
        }
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
        assert!(!dest.join("ok.txt").exists());
    }
}

#[test]
fn zip_entries_are_read_and_damage_is_detected() {
    let d = tempfile::tempdir().unwrap();
    let tree = d.path().join("tree");
    fs::create_dir(&tree).unwrap();
    fs::write(
        tree.join("f.txt"),
        "zip data zip data zip data\n".repeat(20),
    )
    .unwrap();
    let status = std::process::Command::new("zip")
        .args(["-qr", "../a.zip", "f.txt"])
        .current_dir(&tree)
        .status()
        .expect("zip is missing: install zip (.ci/run does)");
    assert!(status.success());
    let src = d.path().join("a.zip");
    let dest = d.path().join("out");
    fs::create_dir(&dest).unwrap();
    let out = run::<Unarchive>(&params(&src, &dest), &RUN).unwrap();
    assert_eq!(out.result["handler"], "ZipArchive");
    assert_eq!(
        fs::read_to_string(dest.join("f.txt")).unwrap(),
        "zip data zip data zip data\n".repeat(20)
    );
    // Flip a byte of the stored or deflated data (after the 30-byte local header, the name
    // and the extra fields): the CRC check fails and nothing is written.
    let mut bytes = fs::read(&src).unwrap();
    let le = |i: usize| usize::from(u16::from_le_bytes([bytes[i], bytes[i + 1]]));
    let data = 30 + le(26) + le(28);
    bytes[data + 2] ^= 0x55;
    fs::write(&src, bytes).unwrap();
    fs::remove_file(dest.join("f.txt")).unwrap();
    assert!(run::<Unarchive>(&params(&src, &dest), &RUN).is_err());
    assert!(!dest.join("f.txt").exists());
}

/// Regression (issue 9): the itemized lines of a zip's `diff.prepared`, as Ansible's zip
/// handler writes them for a missing entry, another type in the way, other data of the same
/// size and mtime, and a directory's mode.
#[test]
fn itemized_lines_name_what_differs() {
    use super::archive::{Entry, Kind};
    use super::extract::Want;
    use super::itemize::line;
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let mut crc = flate2::Crc::new();
    crc.update(b"abc");
    let file = Entry {
        name: "a.txt".into(),
        path: "a.txt".into(),
        kind: Kind::File,
        size: 3,
        mode: 0o644,
        mtime: 1_600_000_000,
        uid: 0,
        gid: 0,
        uname: None,
        gname: None,
        crc: Some(crc.sum()),
    };
    let want = Want {
        mode: Some(0o644),
        ..Want::default()
    };
    assert_eq!(
        line(d.path(), &file, &want, false).unwrap(),
        ">f++++++.?? a.txt\n"
    );
    fs::create_dir(d.path().join("a.txt")).unwrap();
    assert_eq!(
        line(d.path(), &file, &want, false).unwrap(),
        "cf++++++.?? a.txt\n"
    );
    fs::remove_dir(d.path().join("a.txt")).unwrap();
    fs::write(d.path().join("a.txt"), b"abd").unwrap();
    fs::set_permissions(d.path().join("a.txt"), fs::Permissions::from_mode(0o644)).unwrap();
    fs::File::options()
        .write(true)
        .open(d.path().join("a.txt"))
        .unwrap()
        .set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000))
        .unwrap();
    assert_eq!(
        line(d.path(), &file, &want, false).unwrap(),
        ".fc......?? a.txt\n"
    );
    let dir = Entry {
        name: "d/".into(),
        path: "d".into(),
        kind: Kind::Dir,
        size: 0,
        mode: 0o755,
        crc: None,
        ..file
    };
    fs::create_dir(d.path().join("d")).unwrap();
    fs::set_permissions(d.path().join("d"), fs::Permissions::from_mode(0o700)).unwrap();
    let want = Want {
        mode: Some(0o755),
        ..Want::default()
    };
    assert_eq!(
        line(d.path(), &dir, &want, false).unwrap(),
        ".d...p...?? d/\n"
    );
}
