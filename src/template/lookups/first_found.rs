//! The `first_found` lookup: the first of a list of candidate files that exists.

use std::path::PathBuf;

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, Value};

use crate::template::pyrepr::py_string;
use crate::template::value::{defined, op_err};

/// The lookup's options, as keyword arguments or a mapping term set them.
#[derive(Clone, Default)]
struct Options {
    files: Vec<String>,
    paths: Vec<String>,
    skip: bool,
}

impl Options {
    /// The options a mapping (or the keyword arguments) gives; as ansible-core's
    /// `set_options`, what it leaves out is back to its default, not kept from before.
    fn from(get: &dyn Fn(&str) -> Result<Option<Value>, Error>) -> Result<Options, Error> {
        let list = |name: &str, seps: &[char]| -> Result<Vec<String>, Error> {
            match get(name)? {
                Some(v) if !v.is_none() => split_on(&v, seps),
                _ => Ok(Vec::new()),
            }
        };
        Ok(Options {
            files: list("files", &[',', ';'])?,
            paths: list("paths", &[',', ':', ';'])?,
            skip: get("skip")?.is_some_and(|v| v.is_true()),
        })
    }
}

/// A name (or a list of names) split at the separators, as ansible-core's (deprecated)
/// splitting of `files` and `paths`.
fn split_on(v: &Value, seps: &[char]) -> Result<Vec<String>, Error> {
    if let Some(s) = v.as_str() {
        return Ok(s.split(seps).map(str::to_string).collect());
    }
    match v.kind() {
        ValueKind::Seq | ValueKind::Iterable => {
            let mut out = Vec::new();
            for item in v.try_iter()? {
                if item.is_undefined() {
                    continue;
                }
                out.extend(split_on(&item, seps)?);
            }
            Ok(out)
        }
        _ => Ok(vec![py_string(defined(v)?)?]),
    }
}

/// The candidate paths of the terms, in order: each name under each of the term's paths (the
/// paths in force: a mapping's, else the keyword arguments'), or as it is without paths.
fn process(terms: &[Value], opts: &mut Options, out: &mut Vec<String>) -> Result<(), Error> {
    for term in terms {
        let files = match term.kind() {
            ValueKind::Map => {
                *opts = Options::from(&|name| {
                    Ok(term.get_attr(name).ok().filter(|v| !v.is_undefined()))
                })?;
                opts.files.clone()
            }
            ValueKind::String => split_on(term, &[',', ';'])?,
            ValueKind::Seq | ValueKind::Iterable => {
                let items: Vec<Value> = term.try_iter()?.filter(|v| !v.is_undefined()).collect();
                process(&items, opts, out)?;
                continue;
            }
            ValueKind::Undefined => continue,
            _ => {
                return Err(op_err(format!(
                    "Invalid term supplied. A string, dict or list is required, not '{}').",
                    crate::template::filters::types::filter_type_debug(term)
                )))
            }
        };
        if opts.paths.is_empty() {
            out.extend(files);
        } else {
            for dir in &opts.paths {
                for f in &files {
                    out.push(join(dir, f));
                }
            }
        }
    }
    Ok(())
}

/// Python's `os.path.join(dir, name)`.
fn join(dir: &str, name: &str) -> String {
    if name.starts_with('/') || dir.is_empty() {
        name.to_string()
    } else if dir.ends_with('/') {
        format!("{dir}{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// `first_found`: terms are names or lists of names (a name may list several, split at `,`
/// and `;`), or mappings with `files`, `paths` and `skip`; without terms, the `files` keyword.
/// Gives the first candidate `find` finds, and whether `skip` is in force at the end (nothing
/// found is then no error).
pub(super) fn first_found(
    terms: &[Value],
    kwargs: &Kwargs,
    find: &dyn Fn(&str) -> Option<PathBuf>,
) -> Result<(Option<PathBuf>, bool), Error> {
    // An undefined keyword argument is an error, as in ansible-core (not an option left out).
    let mut opts = Options::from(&|name| {
        if !kwargs.has(name) {
            return Ok(None);
        }
        let v: Value = kwargs.get(name)?;
        defined(&v)?;
        Ok(Some(v))
    })?;
    let terms: Vec<Value> = if terms.is_empty() {
        opts.files.iter().map(|f| Value::from(f.as_str())).collect()
    } else {
        terms.to_vec()
    };
    let mut candidates = Vec::new();
    process(&terms, &mut opts, &mut candidates)?;
    for c in &candidates {
        if let Some(p) = find(c) {
            // ansible-core gives the path normalised, links kept (`unfrackpath(follow=False)`):
            // `paths: ['.']` finds `/dir/x`, not `/dir/./x`.
            let p = crate::template::filters::paths::filter_normpath(&p.to_string_lossy());
            return Ok((Some(PathBuf::from(p)), opts.skip));
        }
    }
    Ok((None, opts.skip))
}
