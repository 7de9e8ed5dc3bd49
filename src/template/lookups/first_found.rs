//! The `first_found` lookup: the first of a list of candidate files that exists.

use std::path::{Path, PathBuf};

use minijinja::value::Kwargs;
use minijinja::{Error, Value};

use crate::template::pyrepr::py_string;
use crate::template::value::defined;

/// `first_found`: terms are names or lists of names (a name may list several, split at `,`
/// and `;`), or mappings with `files` and `paths`.
pub(super) fn first_found(
    terms: &[Value],
    kwargs: &Kwargs,
    find: &dyn Fn(&str) -> Option<PathBuf>,
) -> Result<Option<PathBuf>, Error> {
    let mut files: Vec<String> = Vec::new();
    let mut paths: Vec<String> = Vec::new();
    let strings = |v: &Value| -> Result<Vec<String>, Error> {
        if let Some(s) = v.as_str() {
            return Ok(s.split([',', ';']).map(|x| x.trim().to_string()).collect());
        }
        match v.try_iter() {
            Ok(it) => it.map(|x| py_string(&x)).collect(),
            Err(_) => Ok(vec![py_string(v)?]),
        }
    };
    let mut add = |v: &Value| -> Result<(), Error> {
        if v.kind() == minijinja::value::ValueKind::Map {
            if let Ok(f) = v.get_attr("files") {
                if !f.is_undefined() {
                    files.extend(strings(&f)?);
                }
            }
            if let Ok(p) = v.get_attr("paths") {
                if !p.is_undefined() {
                    paths.extend(strings(&p)?);
                }
            }
            return Ok(());
        }
        match v.try_iter() {
            Ok(it) if v.as_str().is_none() => {
                for x in it {
                    files.extend(strings(&x)?);
                }
            }
            _ => files.extend(strings(v)?),
        }
        Ok(())
    };
    for t in terms {
        add(defined(t)?)?;
    }
    if let Some(f) = kwargs.get::<Option<Value>>("files")? {
        files.extend(strings(&f)?);
    }
    if let Some(p) = kwargs.get::<Option<Value>>("paths")? {
        paths.extend(strings(&p)?);
    }
    for f in &files {
        if paths.is_empty() {
            if let Some(p) = find(f) {
                return Ok(Some(p));
            }
        }
        for dir in &paths {
            let joined = Path::new(dir).join(f);
            if let Some(p) = find(&joined.display().to_string()) {
                return Ok(Some(p));
            }
        }
    }
    Ok(None)
}
