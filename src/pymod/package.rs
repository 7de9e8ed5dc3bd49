//! Packaging a Python module for the host: the module and exactly the `module_utils` it
//! imports (found by reading its import statements, recursively, as Ansible's packager does),
//! with the package `__init__.py` files on the way, as one zip whose sha256 names it.
//!
//! The zip is deterministic (sorted entries, fixed timestamps), so the same installed module
//! gives the same hash on every run and the agent's cache (`~/.cache/fixpoint/`) is hit. It is
//! built once per module per process and kept in the controller's cache directory, from where it
//! is streamed to a host that lacks it.

use super::PyModule;
use sha2::Digest as _;
use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A built zip on the controller.
#[derive(Debug)]
pub struct Packaged {
    pub zip: PathBuf,
    pub sha256: String,
    pub size: u64,
}

static BUILT: Mutex<Option<HashMap<PathBuf, Arc<Packaged>>>> = Mutex::new(None);

/// Support code every module needs besides what it imports: the runner's entry point (ansible-core
/// 2.19's AnsiballZ loader), `basic`, and the JSON profiles that decode the arguments.
const ALWAYS: &[&str] = &[
    "ansible.module_utils.basic",
    "ansible.module_utils._internal._ansiballz._loader",
    "ansible.module_utils._internal._json._profiles._module_legacy_c2m",
    "ansible.module_utils._internal._json._profiles._module_legacy_m2c",
];

/// `ansible/__init__.py` and `ansible/module_utils/__init__.py` are written by us: the real ones
/// import controller code. They extend their path, so a host's own `ansible` cannot shadow ours.
const NS_INIT: &str =
    "from pkgutil import extend_path\n__path__ = extend_path(__path__, __name__)\n";

/// The zip for `m`, built on first use in this process.
pub fn package(m: &PyModule, play_dir: &Path) -> Result<Arc<Packaged>, String> {
    let lock = || BUILT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(p) = lock().get_or_insert_with(HashMap::new).get(&m.path) {
        return Ok(p.clone());
    }
    let files = collect(m, play_dir)?;
    let bytes = build_zip(&files).map_err(|e| format!("building the module zip: {e}"))?;
    let sha256 = hex::encode(sha2::Sha256::digest(&bytes));
    let dir = cache_dir();
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let zip = dir.join(format!("pymod-{sha256}.zip"));
    if !zip.is_file() {
        let mut tmp =
            tempfile::NamedTempFile::new_in(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        tmp.write_all(&bytes)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        tmp.persist(&zip)
            .map_err(|e| format!("{}: {e}", zip.display()))?;
    }
    let p = Arc::new(Packaged {
        zip,
        sha256,
        size: bytes.len() as u64,
    });
    lock()
        .get_or_insert_with(HashMap::new)
        .insert(m.path.clone(), p.clone());
    Ok(p)
}

/// The controller's own cache (Python module zips, `held` hints).
pub(crate) fn cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("fixpoint").join("controller")
}

/// Zip entry name → content.
type Files = BTreeMap<String, Vec<u8>>;

/// The module and the support code it needs, by their paths inside the zip.
pub fn collect(m: &PyModule, play_dir: &Path) -> Result<Files, String> {
    let core = super::locate::install()
        .core
        .clone()
        .ok_or("no ansible-core installation found on the controller")?;
    let mut roots = vec![play_dir.join("collections")];
    roots.extend(super::locate::install().collection_roots.iter().cloned());
    if let Some(c) = &m.collection {
        roots.insert(0, c.clone());
    }
    let mut files = Files::new();
    let src = std::fs::read(&m.path).map_err(|e| format!("{}: {e}", m.path.display()))?;
    let mut queue: Vec<(String, bool, Vec<u8>)> = vec![(m.fqn.clone(), false, src)];
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    // The always-needed support code (absent pieces belong to older ansible-core versions,
    // whose runner path the bootstrap takes instead).
    let mut wanted: Vec<(Vec<String>, bool)> =
        ALWAYS.iter().map(|n| (vec![n.to_string()], true)).collect();
    loop {
        while let Some((fqn, is_pkg, src)) = queue.pop() {
            if !seen.insert(fqn.clone()) {
                continue;
            }
            let rel = fqn.replace('.', "/");
            let entry = if is_pkg {
                format!("{rel}/__init__.py")
            } else {
                format!("{rel}.py")
            };
            let text = String::from_utf8_lossy(&src).into_owned();
            files.insert(entry, src);
            for imp in imports(&text, &fqn, is_pkg) {
                wanted.push(imp);
            }
            // The packages on the way to it.
            let parts: Vec<&str> = fqn.split('.').collect();
            for i in 1..parts.len() {
                let pkg = parts[..i].join(".");
                if seen.contains(&pkg) {
                    continue;
                }
                match pkg.as_str() {
                    "ansible" | "ansible.module_utils" => {
                        seen.insert(pkg.clone());
                        files.insert(
                            format!("{}/__init__.py", pkg.replace('.', "/")),
                            NS_INIT.as_bytes().to_vec(),
                        );
                    }
                    _ => match locate(&pkg, &core, &roots, &m.module_utils) {
                        Some((path, true)) => {
                            let s = std::fs::read(&path)
                                .map_err(|e| format!("{}: {e}", path.display()))?;
                            queue.push((pkg, true, s));
                        }
                        _ => {
                            // A namespace package (collections): an empty `__init__.py`.
                            seen.insert(pkg.clone());
                            files.insert(format!("{}/__init__.py", pkg.replace('.', "/")), vec![]);
                        }
                    },
                }
            }
        }
        let Some((candidates, optional)) = wanted.pop() else {
            break;
        };
        // The longest name that is a module wins (the others are attributes inside it).
        let found = candidates.iter().find_map(|c| {
            if seen.contains(c) {
                return Some(None);
            }
            locate(c, &core, &roots, &m.module_utils).map(|(p, pkg)| Some((c.clone(), p, pkg)))
        });
        match found {
            Some(None) => {}
            Some(Some((name, path, pkg))) => {
                let s = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                queue.push((name, pkg, s));
            }
            None if optional => {}
            None => {
                return Err(format!(
                    "module `{}` imports `{}`, which is not in the Ansible installation ({}) \
                     nor in the collections searched",
                    m.name,
                    candidates.last().cloned().unwrap_or_default(),
                    core.display()
                ))
            }
        }
    }
    Ok(files)
}

/// The file of a dotted module name: (path, is a package).
fn locate(
    dotted: &str,
    core: &Path,
    roots: &[PathBuf],
    local_utils: &[PathBuf],
) -> Option<(PathBuf, bool)> {
    let rel = dotted.replace('.', "/");
    // The playbook's (and roles') `module_utils/` come first, as in Ansible.
    if let Some(under) = dotted.strip_prefix("ansible.module_utils.") {
        let rel = under.replace('.', "/");
        for d in local_utils {
            let file = d.join(format!("{rel}.py"));
            if file.is_file() {
                return Some((file, false));
            }
            let init = d.join(&rel).join("__init__.py");
            if init.is_file() {
                return Some((init, true));
            }
        }
    }
    let bases: Vec<PathBuf> = if dotted == "ansible" || dotted.starts_with("ansible.") {
        core.parent()
            .map(|p| vec![p.to_path_buf()])
            .unwrap_or_default()
    } else if dotted.starts_with("ansible_collections") {
        roots.to_vec()
    } else {
        return None;
    };
    for b in bases {
        let file = b.join(format!("{rel}.py"));
        if file.is_file() {
            return Some((file, false));
        }
        let init = b.join(&rel).join("__init__.py");
        if init.is_file() {
            return Some((init, true));
        }
    }
    None
}

/// Remove the text inside triple-quoted strings (documentation blocks hold example imports)
/// and comments, keeping line breaks.
fn strip_docs(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let next = ["\"\"\"", "'''"]
            .iter()
            .filter_map(|q| rest.find(q).map(|i| (i, *q)))
            .min();
        match next {
            None => {
                out.push_str(rest);
                break;
            }
            Some((i, q)) => {
                out.push_str(&rest[..i]);
                let after = &rest[i + 3..];
                let end = after.find(q).map_or(after.len(), |j| j + 3);
                // Keep the line breaks so indentation stays line-based.
                out.extend(after[..end].chars().filter(|c| *c == '\n'));
                out.push_str("None");
                rest = &after[end.min(after.len())..];
            }
        }
    }
    out.lines()
        .map(|l| match l.find('#') {
            Some(i) if !l[..i].contains(['\'', '"']) => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The support-code imports of a module: each as the candidate names to try, in order (for
/// `from a.b import c`, `c` may be a module or a name inside `a.b`), and whether it is optional
/// (written inside a block, as `try:` imports are).
fn imports(text: &str, fqn: &str, is_pkg: bool) -> Vec<(Vec<String>, bool)> {
    let clean = strip_docs(text);
    let mut out = Vec::new();
    let mut lines = clean.lines();
    while let Some(line) = lines.next() {
        let indented = line.starts_with([' ', '\t']);
        let t = line.trim();
        if !(t.starts_with("from ") || t.starts_with("import ")) {
            continue;
        }
        // Join continuation lines: parentheses or a trailing backslash.
        let mut stmt = t.to_string();
        while (stmt.contains('(') && !stmt.contains(')')) || stmt.ends_with('\\') {
            let Some(more) = lines.next() else { break };
            stmt = stmt.trim_end_matches('\\').to_string();
            stmt.push(' ');
            stmt.push_str(more.trim());
        }
        let stmt = stmt.replace(['(', ')'], " ");
        for part in stmt.split(';') {
            let part = part.trim();
            if let Some(rest) = part.strip_prefix("import ") {
                for name in rest.split(',') {
                    let name = name.split_whitespace().next().unwrap_or("");
                    if relevant(name) {
                        out.push((candidates(name), indented));
                    }
                }
            } else if let Some(rest) = part.strip_prefix("from ") {
                let Some((base, names)) = rest.split_once(" import ") else {
                    continue;
                };
                let base = base.trim();
                let Some(base) = absolute(base, fqn, is_pkg) else {
                    continue;
                };
                if !relevant(&base) {
                    continue;
                }
                for name in names.split(',') {
                    let name = name.split_whitespace().next().unwrap_or("");
                    if name.is_empty() {
                        // The trailing comma of `(a, b,)`.
                        continue;
                    }
                    if name == "*" {
                        out.push((candidates(&base), indented));
                        continue;
                    }
                    out.push((candidates(&format!("{base}.{name}")), indented));
                }
            }
        }
    }
    out
}

/// `a.b.c.d` → `a.b.c.d`, `a.b.c`, ... down to the first name under `module_utils`: the
/// trailing names may be attributes, or modules a package makes up at run time
/// (`six.moves.collections_abc`), and the nearest file that exists is the one needed.
fn candidates(dotted: &str) -> Vec<String> {
    let parts: Vec<&str> = dotted.split('.').collect();
    let min = match parts.iter().position(|p| *p == "module_utils") {
        Some(i) => i + 2,
        None => parts.len(),
    };
    (min.min(parts.len())..=parts.len())
        .rev()
        .map(|n| parts[..n].join("."))
        .collect()
}

fn relevant(name: &str) -> bool {
    name.starts_with("ansible.module_utils") || name.starts_with("ansible_collections.")
}

/// `from ..x import y` inside `fqn` → the absolute package.
fn absolute(base: &str, fqn: &str, is_pkg: bool) -> Option<String> {
    let level = base.chars().take_while(|c| *c == '.').count();
    if level == 0 {
        return Some(base.to_string());
    }
    let mut parts: Vec<&str> = fqn.split('.').collect();
    // A module's first level is its package; a package's is itself.
    let drop = if is_pkg { level - 1 } else { level };
    if drop > parts.len() {
        return None;
    }
    parts.truncate(parts.len() - drop);
    let rest = &base[level..];
    if !rest.is_empty() {
        parts.push(rest);
    }
    Some(parts.join("."))
}

fn build_zip(files: &Files) -> zip::result::ZipResult<Vec<u8>> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .last_modified_time(zip::DateTime::default())
        .unix_permissions(0o644);
    for (name, data) in files {
        w.start_file(name.as_str(), opts)?;
        w.write_all(data)?;
    }
    Ok(w.finish()?.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_are_read_as_ansibles_packager_reads_them() {
        let src = "DOCUMENTATION = '''\nfrom ansible.module_utils.nothere import x\n'''\n\
                   from ansible.module_utils.basic import AnsibleModule\n\
                   from ansible.module_utils.common.text.converters import (\n    to_bytes,\n    to_native,\n)\n\
                   import ansible.module_utils.six.moves as m  # comment\n\
                   try:\n    from ansible_collections.ns.c.plugins.module_utils.u import v\nexcept ImportError:\n    pass\n\
                   from ..module_utils import w\nimport os\n";
        let got = imports(src, "ansible_collections.ns.c.plugins.modules.m", false);
        let names: Vec<(String, bool)> = got.iter().map(|(c, o)| (c[0].clone(), *o)).collect();
        assert_eq!(
            names,
            vec![
                (
                    "ansible.module_utils.basic.AnsibleModule".to_string(),
                    false
                ),
                (
                    "ansible.module_utils.common.text.converters.to_bytes".into(),
                    false
                ),
                (
                    "ansible.module_utils.common.text.converters.to_native".into(),
                    false
                ),
                ("ansible.module_utils.six.moves".into(), false),
                (
                    "ansible_collections.ns.c.plugins.module_utils.u.v".into(),
                    true
                ),
                (
                    "ansible_collections.ns.c.plugins.module_utils.w".into(),
                    false
                ),
            ]
        );
        assert_eq!(got[0].0[1], "ansible.module_utils.basic");
    }

    #[test]
    fn relative_imports_resolve_from_the_package() {
        assert_eq!(absolute(".x", "a.b.c", false).as_deref(), Some("a.b.x"));
        assert_eq!(absolute(".x", "a.b", true).as_deref(), Some("a.b.x"));
        assert_eq!(absolute("..", "a.b.c", false).as_deref(), Some("a"));
        assert_eq!(absolute("....", "a.b", false), None);
    }
}
