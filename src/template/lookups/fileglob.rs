//! The `fileglob` lookup and `with_fileglob` loop: controller files matching a pattern.

use std::path::{Path, PathBuf};

/// `fileglob`: files (not directories) matching a `*`/`?` pattern in its last component;
/// a relative pattern is looked for in each search directory's `files/`, then the directory.
pub fn fileglob(pattern: &str, search: &[PathBuf]) -> Vec<PathBuf> {
    let p = Path::new(pattern);
    let (dir_part, name_part) = match (p.parent(), p.file_name()) {
        (Some(d), Some(n)) => (d.to_path_buf(), n.to_string_lossy().into_owned()),
        _ => return Vec::new(),
    };
    let re = regex::Regex::new(&format!(
        "^{}$",
        regex::escape(&name_part)
            .replace("\\*", ".*")
            .replace("\\?", ".")
    ))
    .expect("escaped glob");
    let dirs: Vec<PathBuf> = if p.is_absolute() {
        vec![dir_part]
    } else {
        search
            .iter()
            .flat_map(|d| [d.join("files").join(&dir_part), d.join(&dir_part)])
            .collect()
    };
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut found: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|f| {
                f.is_file() && re.is_match(&f.file_name().unwrap_or_default().to_string_lossy())
            })
            .collect();
        if !found.is_empty() {
            found.sort();
            return found;
        }
    }
    Vec::new()
}
