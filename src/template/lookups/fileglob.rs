//! The `fileglob` lookup and `with_fileglob` loop: controller files matching a pattern.

use std::path::{Path, PathBuf};

/// `fileglob`: files (not directories) matching a `*`/`?` pattern in its last component;
/// a relative pattern is looked for in each search directory's `files/`, then the directory.
/// The first directory with a match wins; its matches come in the directory's own order, as
/// Python's `glob` lists them (`os.scandir`, unsorted), and a name starting with `.` matches
/// only a pattern that starts with one.
pub fn fileglob(pattern: &str, search: &[PathBuf]) -> Vec<PathBuf> {
    let p = Path::new(pattern);
    let (dir_part, name_part) = match (p.parent(), p.file_name()) {
        (Some(d), Some(n)) => (d.to_path_buf(), n.to_string_lossy().into_owned()),
        _ => return Vec::new(),
    };
    let Ok(name) = glob::Pattern::new(&name_pattern(&name_part)) else {
        return Vec::new();
    };
    let dirs: Vec<PathBuf> = if p.is_absolute() {
        vec![dir_part]
    } else {
        search
            .iter()
            .flat_map(|d| [d.join("files").join(&dir_part), d.join(&dir_part)])
            .collect()
    };
    for d in dirs {
        // The directory is taken literally (a role path may contain `[`); only the name is a
        // pattern.
        // Absolute, as ansible-core's are (its search path is), whatever the working directory.
        let abs = std::path::absolute(&d).unwrap_or_else(|_| d.clone());
        let found: Vec<PathBuf> = matching_names(&d, &name)
            .into_iter()
            .map(|n| abs.join(n))
            .filter(|f| f.is_file())
            .collect();
        if !found.is_empty() {
            return found;
        }
    }
    Vec::new()
}

/// Python's `glob.glob(pattern)` (what the `fileglob` filter calls): every path matching a
/// pattern with wildcards in any component, each directory listed in its own order (unsorted),
/// `*` matching no name that starts with `.`, relative when the pattern is.
pub fn py_glob(pattern: &str) -> Vec<String> {
    let magic = |s: &str| s.contains(['*', '?', '[']);
    let (dir, base) = match pattern.rfind('/') {
        Some(i) => {
            let head = pattern[..i].trim_end_matches('/');
            // Only slashes before the name: the root.
            (
                if head.is_empty() {
                    &pattern[..=i]
                } else {
                    head
                },
                &pattern[i + 1..],
            )
        }
        None => ("", pattern),
    };
    let dirs = if magic(dir) && dir != pattern {
        py_glob(dir)
    } else {
        vec![dir.to_string()]
    };
    let join = |d: &str, name: &str| match d {
        "" => name.to_string(),
        d if d.ends_with('/') => format!("{d}{name}"),
        d => format!("{d}/{name}"),
    };
    let mut out = Vec::new();
    for d in dirs {
        if !magic(base) {
            let p = join(&d, base);
            let found = match base {
                "" => Path::new(&p).is_dir(),
                _ => Path::new(&p).symlink_metadata().is_ok(),
            };
            if found {
                out.push(p);
            }
            continue;
        }
        let Ok(pat) = glob::Pattern::new(base) else {
            continue;
        };
        let listed = matching_names(Path::new(if d.is_empty() { "." } else { &d }), &pat);
        out.extend(listed.iter().map(|n| join(&d, n)));
    }
    out
}

/// The names in `dir` that `pat` matches, in the directory's own order (Python's `os.scandir`
/// under `glob`); none when it cannot be listed.
fn matching_names(dir: &Path, pat: &glob::Pattern) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| pat.matches_with(n, PY_MATCH))
        .collect()
}

/// How Python's `fnmatch` compares one name under `glob`.
const PY_MATCH: glob::MatchOptions = glob::MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: true,
};

/// The last component as a glob pattern in which only `*` and `?` are wildcards, as they
/// always were here: `[` and `]` stay literal characters.
fn name_pattern(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '[' => out.push_str("[[]"),
            ']' => out.push_str("[]]"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_files_only_in_directory_order_in_the_first_directory_with_a_match() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("files/conf.d")).unwrap();
        std::fs::create_dir_all(root.join("conf.d/sub.conf")).unwrap();
        for f in [
            "files/conf.d/b.conf",
            "files/conf.d/a.conf",
            "files/conf.d/.h.conf",
        ] {
            std::fs::write(root.join(f), "").unwrap();
        }
        std::fs::write(root.join("files/conf.d/c.txt"), "").unwrap();
        std::fs::write(root.join("conf.d/z.conf"), "").unwrap();
        let search = vec![root.to_path_buf()];
        let names = |v: Vec<PathBuf>| -> Vec<String> {
            v.iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        // `files/` comes first; the order is the directory's (Python's `glob`), and `*` does
        // not match a name starting with `.`, which `.*` does.
        let listed: Vec<String> = std::fs::read_dir(root.join("files/conf.d"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".conf") && !n.starts_with('.'))
            .collect();
        assert_eq!(names(fileglob("conf.d/*.conf", &search)), listed);
        assert_eq!(listed.len(), 2);
        assert_eq!(names(fileglob("conf.d/.*", &search)), [".h.conf"]);
        let mut one_char = fileglob("conf.d/?.conf", &search);
        one_char.sort();
        assert_eq!(
            one_char,
            [
                root.join("files/conf.d/a.conf"),
                root.join("files/conf.d/b.conf")
            ]
        );
        // A directory that matches is not a file; the next search directory is not consulted
        // when an earlier one has a match, but is when none does.
        assert_eq!(names(fileglob("conf.d/z*", &search)), ["z.conf"]);
        assert_eq!(
            names(fileglob("conf.d/sub*", &search)),
            Vec::<String>::new()
        );
        // Absolute patterns ignore the search path.
        let abs = format!("{}/files/conf.d/*.txt", root.display());
        assert_eq!(names(fileglob(&abs, &[])), ["c.txt"]);
        assert!(fileglob("nothing/*.x", &search).is_empty());
    }

    #[test]
    fn brackets_are_literal_in_names_and_directories() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("r[1]");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a[x].txt"), "").unwrap();
        std::fs::write(root.join("ax.txt"), "").unwrap();
        let search = vec![root.clone()];
        assert_eq!(fileglob("a[x]*", &search), [root.join("a[x].txt")]);
        assert_eq!(fileglob("*.txt", &search).len(), 2);
    }
}
