//! The final state of the files a case touches: every entry under `base`, one line each, sorted.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use sha2::{Digest, Sha256};

/// Contents longer than this are shown by size and sha256 rather than in full.
const SHOWN_BYTES: usize = 2048;

/// One line per entry below `base` (not `base` itself): path, kind, mode, owner, and the content
/// of a file or the target of a link. Links are not followed.
pub fn snapshot(base: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    walk(base, base, &mut lines);
    lines.sort();
    lines
}

fn walk(base: &Path, dir: &Path, lines: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let rel = path
            .strip_prefix(base)
            .unwrap_or(&path)
            .display()
            .to_string();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        let attrs = format!(
            "{:04o} {}:{}",
            meta.permissions().mode() & 0o7777,
            meta.uid(),
            meta.gid()
        );
        let ft = meta.file_type();
        if ft.is_symlink() {
            let target = fs::read_link(&path).map(|t| t.display().to_string());
            lines.push(format!("{rel} link -> {}", target.unwrap_or_default()));
        } else if ft.is_dir() {
            lines.push(format!("{rel}/ dir {attrs}"));
            walk(base, &path, lines);
        } else if ft.is_file() {
            let content = fs::read(&path)
                .map(|c| show(&c))
                .unwrap_or_else(|e| e.to_string());
            lines.push(format!("{rel} file {attrs} {content}"));
        } else {
            lines.push(format!("{rel} other {attrs}"));
        }
    }
}

fn show(content: &[u8]) -> String {
    match std::str::from_utf8(content) {
        Ok(text) if content.len() <= SHOWN_BYTES => format!("{text:?}"),
        _ => format!(
            "({} bytes, sha256 {})",
            content.len(),
            hex::encode(Sha256::digest(content))
        ),
    }
}
