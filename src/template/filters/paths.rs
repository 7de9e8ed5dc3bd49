//! Path filters as Python's `os.path` computes them: `basename`, `dirname`, `splitext`.
//! They work on the text only; nothing here touches the filesystem.

use minijinja::Value;

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
    }
}
