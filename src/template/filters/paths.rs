//! Path filters as Python's `os.path` computes them: `basename`, `dirname`, `splitext` and
//! `relpath` work on the text only; `expanduser` and `realpath` read the controller's user
//! database and filesystem, as Ansible's filters do (they run where the template is rendered);
//! `expandvars` reads the controller's environment; the `win_` filters split Windows paths as
//! Python's `ntpath` does.

use std::path::{Component, Path, PathBuf};

use minijinja::value::ValueKind;
use minijinja::{Error, Value};

use crate::template::value::{defined, op_err};

/// Python's `os.path.basename`: the text after the last slash.
pub(super) fn filter_basename(path: &str) -> String {
    path.rsplit('/').next().unwrap_or_default().to_string()
}

/// Python's `os.path.dirname`: the text before the last slash, trailing slashes dropped
/// unless that is the root.
pub(super) fn filter_dirname(path: &str) -> String {
    match path.rfind('/') {
        None => String::new(),
        Some(i) => {
            let head = &path[..=i];
            let trimmed = head.trim_end_matches('/');
            if trimmed.is_empty() {
                head.to_string()
            } else {
                trimmed.to_string()
            }
        }
    }
}

/// Python's `os.path.splitext`: `[root, ext]`.
pub(super) fn filter_splitext(path: &str) -> Value {
    let base_start = path.rfind('/').map_or(0, |i| i + 1);
    let base = &path[base_start..];
    let dot = base
        .trim_start_matches('.')
        .rfind('.')
        .map(|i| i + (base.len() - base.trim_start_matches('.').len()));
    match dot {
        Some(i) => Value::from(vec![
            Value::from(&path[..base_start + i]),
            Value::from(&path[base_start + i..]),
        ]),
        None => Value::from(vec![Value::from(path), Value::from("")]),
    }
}

/// Python's `os.path.expanduser`: a leading `~` is `$HOME` (or the controller user's home),
/// `~name` that user's home; an unknown user leaves the path as it is.
pub(super) fn filter_expanduser(path: &str) -> String {
    let Some(rest) = path.strip_prefix('~') else {
        return path.to_string();
    };
    let (name, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let home = if name.is_empty() {
        std::env::var("HOME").ok().or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.dir.display().to_string())
        })
    } else {
        nix::unistd::User::from_name(name)
            .ok()
            .flatten()
            .map(|u| u.dir.display().to_string())
    };
    let Some(home) = home else {
        return path.to_string();
    };
    let joined = format!("{}{tail}", home.trim_end_matches('/'));
    if joined.is_empty() {
        "/".into()
    } else {
        joined
    }
}

/// The path made absolute against the working directory and normalised on the text
/// (Python's `os.path.abspath`): `.` dropped, `..` takes the previous name away.
fn abspath(path: &str) -> Result<PathBuf, Error> {
    let cwd = std::env::current_dir()
        .map_err(|e| op_err(format!("cannot read the working directory: {e}")))?;
    let mut out = PathBuf::from("/");
    for c in cwd.join(path).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    Ok(out)
}

/// Python's `os.path.realpath` (not strict): symbolic links resolved as far as the path
/// exists, the rest normalised on the text.
pub(super) fn filter_realpath(path: &str) -> Result<String, Error> {
    let cwd = std::env::current_dir()
        .map_err(|e| op_err(format!("cannot read the working directory: {e}")))?;
    let mut out = PathBuf::from("/");
    // At most this many links followed, as the kernel's ELOOP; a loop is left as it is.
    let mut links = 40;
    let mut todo: Vec<std::ffi::OsString> = cwd
        .join(path)
        .components()
        .rev()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    while let Some(name) = todo.pop() {
        if name == ".." {
            out.pop();
            continue;
        }
        let next = out.join(&name);
        match std::fs::read_link(&next) {
            Ok(target) if links > 0 => {
                links -= 1;
                if target.is_absolute() {
                    out = PathBuf::from("/");
                }
                todo.extend(target.components().rev().filter_map(|c| match c {
                    Component::Normal(n) => Some(n.to_os_string()),
                    Component::ParentDir => Some("..".into()),
                    _ => None,
                }));
            }
            _ => out = next,
        }
    }
    Ok(out.display().to_string())
}

/// Python's `os.path.relpath(path, start='.')`, on the text of both made absolute.
pub(super) fn filter_relpath(path: &str, start: Option<&str>) -> Result<String, Error> {
    if path.is_empty() {
        return Err(op_err("relpath: no path specified"));
    }
    let path = abspath(path)?;
    let start = abspath(start.unwrap_or("."))?;
    let names = |p: &Path| -> Vec<String> {
        p.components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect()
    };
    let (p, s) = (names(&path), names(&start));
    let common = p.iter().zip(&s).take_while(|(a, b)| a == b).count();
    let parts: Vec<&str> = std::iter::repeat_n("..", s.len() - common)
        .chain(p[common..].iter().map(String::as_str))
        .collect();
    Ok(if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    })
}

/// Python's `os.path.join`: each absolute part starts the path over; a slash is put between
/// parts unless the text so far ends with one.
fn join(parts: &[String]) -> String {
    let mut out = String::new();
    for p in parts {
        if p.starts_with('/') || out.is_empty() {
            out = p.clone();
        } else if out.ends_with('/') {
            out.push_str(p);
        } else {
            out.push('/');
            out.push_str(p);
        }
    }
    out
}

/// The strings of a sequence, or `None` when the value is not one (Ansible's `is_sequence`:
/// not a string, not a mapping).
fn string_seq(value: &Value) -> Result<Option<Vec<String>>, Error> {
    if !matches!(value.kind(), ValueKind::Seq | ValueKind::Iterable) {
        return Ok(None);
    }
    value
        .try_iter()?
        .map(|v| {
            v.as_str().map(str::to_string).ok_or_else(|| {
                op_err(format!(
                    "expected str, bytes or os.PathLike object, not {}",
                    python_type(&v)
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// Python's `type(x)` as it prints (`<class 'bool'>`), for the type errors Ansible words so.
fn python_class(value: &Value) -> String {
    format!("<class '{}'>", python_type(value))
}

fn python_type(value: &Value) -> &'static str {
    super::types::filter_type_debug(value)
}

/// Ansible's `path_join`: a string as it is, a sequence joined as `os.path.join` does.
pub(super) fn filter_path_join(value: &Value) -> Result<String, Error> {
    if let Some(s) = defined(value)?.as_str() {
        return Ok(s.to_string());
    }
    match string_seq(value)? {
        Some(parts) => Ok(join(&parts)),
        None => Err(op_err(format!(
            "|path_join expects string or sequence, got {} instead.",
            python_class(value)
        ))),
    }
}

/// Python's `os.path.normpath`: `.` and empty names dropped, `..` takes the previous name
/// away (kept at the start of a relative path, dropped at the root); two leading slashes stay.
pub(in crate::template) fn filter_normpath(path: &str) -> String {
    if path.is_empty() {
        return ".".into();
    }
    let lead = if path.starts_with("//") && !path.starts_with("///") {
        "//"
    } else if path.starts_with('/') {
        "/"
    } else {
        ""
    };
    let mut names: Vec<&str> = Vec::new();
    for n in path.split('/') {
        match n {
            "" | "." => {}
            ".." if names.last().is_some_and(|l| *l != "..") => {
                names.pop();
            }
            ".." if !lead.is_empty() => {}
            n => names.push(n),
        }
    }
    let out = format!("{lead}{}", names.join("/"));
    if out.is_empty() {
        ".".into()
    } else {
        out
    }
}

/// Python's `os.path.commonpath`: the longest common run of whole names; absolute and
/// relative paths cannot be mixed, nor can the list be empty.
pub(super) fn filter_commonpath(value: &Value) -> Result<String, Error> {
    let Some(paths) = (match defined(value)?.kind() {
        ValueKind::String => None,
        _ => string_seq(value)?,
    }) else {
        return Err(op_err(format!(
            "|commonpath expects sequence, got {} instead.",
            python_class(value)
        )));
    };
    let Some(first) = paths.first() else {
        return Err(op_err("commonpath() arg is an empty sequence"));
    };
    let absolute = first.starts_with('/');
    if paths.iter().any(|p| p.starts_with('/') != absolute) {
        return Err(op_err("Can't mix absolute and relative paths"));
    }
    let split: Vec<Vec<&str>> = paths
        .iter()
        .map(|p| {
            p.split('/')
                .filter(|n| !n.is_empty() && *n != ".")
                .collect()
        })
        .collect();
    let mut common: Vec<&str> = split[0].clone();
    for s in &split[1..] {
        let n = common.iter().zip(s).take_while(|(a, b)| a == b).count();
        common.truncate(n);
    }
    Ok(format!(
        "{}{}",
        if absolute { "/" } else { "" },
        common.join("/")
    ))
}

/// The text of a path argument, or Python's `TypeError` for anything else.
fn path_text(value: &Value) -> Result<&str, Error> {
    defined(value)?.as_str().ok_or_else(|| {
        op_err(format!(
            "expected str, bytes or os.PathLike object, not {}",
            python_type(value)
        ))
    })
}

/// Python's `os.path.expandvars` on the controller: `$name` (ASCII word characters) and
/// `${anything}` replaced by the controller's environment variable of that name; one that is
/// not set is left as written.
pub(super) fn filter_expandvars(value: &Value) -> Result<String, Error> {
    let path = path_text(value)?;
    let mut out = String::with_capacity(path.len());
    let mut rest = path;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name, len) = if let Some(braced) = after.strip_prefix('{') {
            match braced.find('}') {
                Some(j) => (&braced[..j], j + 2),
                None => ("", 0),
            }
        } else {
            let n = after
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                .count();
            (&after[..n], n)
        };
        // std's lookup refuses a name with `=` or NUL; no variable is named so.
        let value = (len > 0 && !name.is_empty() && !name.contains(['=', '\0']))
            .then(|| std::env::var_os(name))
            .flatten();
        match value {
            Some(v) => out.push_str(&v.to_string_lossy()),
            None => out.push_str(&rest[i..i + 1 + len]),
        }
        rest = &after[len..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Python's `ntpath.splitdrive`: a drive letter (`C:`), or a UNC share (`\\server\share`,
/// `\\?\UNC\server\share`, `/` read as `\`) up to its second separator, and the rest.
fn win_splitdrive(p: &str) -> (&str, &str) {
    let norm = p.replace('/', "\\");
    if norm.starts_with("\\\\") {
        let start = if norm
            .get(..8)
            .is_some_and(|h| h.eq_ignore_ascii_case("\\\\?\\UNC\\"))
        {
            8
        } else {
            2
        };
        let Some(index) = norm[start..].find('\\').map(|i| i + start) else {
            return (p, "");
        };
        return match norm[index + 1..].find('\\') {
            Some(j) => p.split_at(index + 1 + j),
            None => (p, ""),
        };
    }
    if norm.chars().nth(1) == Some(':') {
        let two = p.char_indices().nth(2).map_or(p.len(), |(i, _)| i);
        return p.split_at(two);
    }
    ("", p)
}

/// Python's `ntpath.split`: the drive and the directory (its trailing separators dropped
/// unless it is nothing else), and the last name.
fn win_split(p: &str) -> (String, &str) {
    let (drive, rest) = win_splitdrive(p);
    let cut = rest.rfind(['\\', '/']).map_or(0, |i| i + 1);
    let (head, tail) = rest.split_at(cut);
    let trimmed = head.trim_end_matches(['\\', '/']);
    let head = if trimmed.is_empty() { head } else { trimmed };
    (format!("{drive}{head}"), tail)
}

pub(super) fn filter_win_basename(value: &Value) -> Result<String, Error> {
    Ok(win_split(path_text(value)?).1.to_string())
}

pub(super) fn filter_win_dirname(value: &Value) -> Result<String, Error> {
    Ok(win_split(path_text(value)?).0)
}

/// `[drive, rest]` (Python's tuple).
pub(super) fn filter_win_splitdrive(value: &Value) -> Result<Value, Error> {
    let (drive, rest) = win_splitdrive(path_text(value)?);
    Ok(Value::from(vec![Value::from(drive), Value::from(rest)]))
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use serde_json::json;

    #[test]
    fn path_filters() {
        assert_eq!(eval("path | basename"), json!("nginx.conf"));
        assert_eq!(eval("path | dirname"), json!("/etc/nginx"));
        assert_eq!(eval("'/etc/' | basename"), json!(""));
        assert_eq!(eval("'/' | dirname"), json!("/"));
        assert_eq!(eval("'file' | dirname"), json!(""));
        assert_eq!(
            eval("path | splitext"),
            json!(["/etc/nginx/nginx", ".conf"])
        );
        assert_eq!(eval("'.bashrc' | splitext"), json!([".bashrc", ""]));
        assert_eq!(eval("'/a/b/c' | relpath('/a/d')"), json!("../b/c"));
        assert_eq!(eval("'/a/b' | relpath('/a/b/')"), json!("."));
        assert_eq!(eval("'/x/../y/./z' | realpath"), json!("/y/z"));
        assert_eq!(eval("'/tmp' | expanduser"), json!("/tmp"));
        assert_eq!(
            eval("'~nosuchuser_fp/x' | expanduser"),
            json!("~nosuchuser_fp/x")
        );
        assert_eq!(eval("'~root/x' | expanduser"), json!("/root/x"));
        assert_eq!(eval("['/etc', 'a', '/b'] | path_join"), json!("/b"));
        assert_eq!(eval("['etc', 'a/', 'b'] | path_join"), json!("etc/a/b"));
        assert_eq!(eval("'foo' | path_join"), json!("foo"));
        assert_eq!(eval("['/a/b/c', '/a/b'] | commonpath"), json!("/a/b"));
        assert_eq!(eval("['a/b', 'a/c'] | commonpath"), json!("a"));
        assert_eq!(eval("'/a/./b/../c//' | normpath"), json!("/a/c"));
        assert_eq!(eval("'../a/..' | normpath"), json!(".."));
        assert_eq!(eval("'/..' | normpath"), json!("/"));
        let home = std::env::var("HOME").unwrap();
        assert_eq!(eval("'~/x' | expanduser"), json!(format!("{home}/x")));
    }

    #[test]
    fn windows_paths_and_expandvars() {
        assert_eq!(
            eval(
                r"['C:\\Users\\x\\f.txt' | win_basename, 'C:\\Users\\x\\f.txt' | win_dirname, 'C:\\Users\\x\\f.txt' | win_splitdrive]"
            ),
            json!(["f.txt", "C:\\Users\\x", ["C:", "\\Users\\x\\f.txt"]])
        );
        assert_eq!(
            eval(
                r"['\\\\srv\\share\\dir\\f' | win_splitdrive, '//srv/share' | win_splitdrive, '//srv' | win_splitdrive, '\\\\?\\UNC\\srv\\sh\\x' | win_splitdrive, 'C:' | win_dirname, 'C:\\\\' | win_dirname, 'a/b/' | win_basename, 'a/b/' | win_dirname, '' | win_splitdrive, 'x' | win_splitdrive]"
            ),
            json!([
                ["\\\\srv\\share", "\\dir\\f"],
                ["//srv/share", ""],
                ["//srv", ""],
                ["\\\\?\\UNC\\srv\\sh", "\\x"],
                "C:",
                "C:\\\\",
                "",
                "a/b",
                ["", ""],
                ["", "x"]
            ])
        );
        let home = std::env::var("HOME").unwrap();
        assert_eq!(
            eval("'$HOME/x ${HOME} $NOPE_FP_X ${NOPE_FP} $ ${} $HOME_NOPE_FP ${HOME' | expandvars"),
            json!(format!(
                "{home}/x {home} $NOPE_FP_X ${{NOPE_FP}} $ ${{}} $HOME_NOPE_FP ${{HOME"
            ))
        );
        let e = crate::template::Templar::new()
            .eval("5 | win_basename", &vars())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("expected str, bytes or os.PathLike object, not int"),
            "{e}"
        );
    }

    #[test]
    fn path_join_and_commonpath_refuse_other_types() {
        let t = crate::template::Templar::new();
        let e = t.eval("true | path_join", &vars()).unwrap_err().to_string();
        assert!(
            e.contains("|path_join expects string or sequence, got <class 'bool'> instead."),
            "{e}"
        );
        let e = t
            .eval("'/a' | commonpath", &vars())
            .unwrap_err()
            .to_string();
        assert!(e.contains("|commonpath expects sequence"), "{e}");
    }

    #[test]
    fn realpath_follows_links_as_far_as_they_exist() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        std::fs::create_dir(real.join("target")).unwrap();
        std::os::unix::fs::symlink("target", real.join("link")).unwrap();
        std::os::unix::fs::symlink("loop", real.join("loop")).unwrap();
        let t = crate::template::Templar::new();
        let c = ctx(json!({"p": real.join("link/missing/../f").display().to_string()}));
        assert_eq!(
            t.eval("p | realpath", &c).unwrap(),
            json!(real.join("target/f").display().to_string())
        );
        let c = ctx(json!({"p": real.join("loop").display().to_string()}));
        assert_eq!(
            t.eval("p | realpath", &c).unwrap(),
            json!(real.join("loop").display().to_string())
        );
    }
}
