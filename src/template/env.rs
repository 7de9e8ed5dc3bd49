//! The minijinja environment with Ansible's options: strict undefined, Python-style printing,
//! no HTML escaping, trim_blocks, and the filters, tests, lookups and template loader added.

use std::path::PathBuf;
use std::sync::Arc;

use minijinja::value::{Rest, ValueKind};
use minijinja::{AutoEscape, Environment, Error, ErrorKind, State, UndefinedBehavior, Value};

use super::consts::{self, CONST_FN};
use super::filters::add_filters;
use super::jinja_tests::add_tests;
use super::lookups::run_lookup;
use super::pyops::{self, DIV_FN, FLOORDIV_FN, MOD_FN};
use super::pyrepr::{py_str, py_string};
use super::rewrite::{chain_lookup, rewrite_chains, CHAIN_FN};

/// The render's temporary (`State::set_temp`) counting the values printed, and the one holding
/// the first of them.
pub(super) const EMITS: &str = "__fp_emits";
pub(super) const EMITTED: &str = "__fp_emitted";

/// A new environment; `search_path` adds a loader for `{% include %}` and `template` sources
/// relative to those directories (searched in order).
pub(super) fn build_env(search_path: Option<Vec<PathBuf>>) -> Environment<'static> {
    let mut env = Environment::new();
    // Strict: printing, iterating, comparing or testing the truth of an undefined value is an
    // error (Ansible's StrictUndefined), while `default`, `is defined` and `is undefined` still
    // see undefined values. SemiStrict would let `when: typo` silently be false.
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    // Spans and template source on errors, needed to name undefined variables.
    env.set_debug(true);
    // Ansible's template module defaults: trim_blocks yes, lstrip_blocks no, newline kept.
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(false);
    env.set_keep_trailing_newline(true);
    // Ansible never HTML-escapes, whatever the file extension.
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_formatter(|out, state, value| {
        // Jinja2 under ansible-core makes a template string whose output is one value that
        // value (`Templar::render_str`): count the values printed, and keep the first.
        let printed = state
            .get_temp(EMITS)
            .and_then(|n| n.as_usize())
            .unwrap_or(0);
        state.set_temp(EMITS, Value::from(printed + 1));
        if printed == 0 {
            state.set_temp(EMITTED, value.clone());
        }
        // Ansible's finalize: a None printed into text is nothing (`"[{{ none }}]"` is `[]`);
        // inside a list or dict, and through `string`, it stays `None`. `omit` printed into
        // text is nothing too (ansible-core 2.19), though `omit ~ ''` is `<<Omit>>`.
        if value.is_none() || super::omit::is_omit(value) {
            return Ok(());
        }
        let mut s = String::new();
        py_str(value, &mut s, 0)?;
        out.write_str(&s)
            .map_err(|_| Error::new(ErrorKind::WriteFailure, "failed to write output"))
    });
    env.set_unknown_method_callback(unknown_method);
    set_search_path(&mut env, search_path);
    env.add_function(CHAIN_FN, chain_lookup);
    env.add_function(CONST_FN, consts::render_const);
    env.add_function(MOD_FN, pyops::rem);
    env.add_function(DIV_FN, pyops::div);
    env.add_function(FLOORDIV_FN, pyops::floordiv);
    env.add_function(super::timedelta::SUB_FN, super::timedelta::sub);
    env.add_function(super::timedelta::POW_FN, super::timedelta::pow);
    env.add_function(super::mutable::MUTABLE_FN, super::mutable::mutable);
    env.add_function("now", |args: Rest<Value>| super::now::now(&args));
    env.add_function("dict", |args: Rest<Value>| super::pymethods::dict(&args));
    // Ansible's `undef(hint=None)`: a variable's placeholder that fails when it is used, with
    // the hint (or ansible-core's default text) as the message. It fails at once here, where
    // Ansible's fails once its value is used: a variable set to it and never read never calls it.
    env.add_function(
        "undef",
        |hint: Option<String>, kwargs: minijinja::value::Kwargs| {
            let hint = match hint {
                Some(h) => Some(h),
                None => kwargs.get::<Option<String>>("hint")?,
            };
            kwargs.assert_all_used()?;
            Err::<Value, _>(Error::new(
                ErrorKind::UndefinedError,
                hint.filter(|h| !h.is_empty())
                    .unwrap_or_else(|| "Mandatory variable has not been overridden".into()),
            ))
        },
    );
    // Jinja2's global `joiner` (minijinja-contrib's).
    env.add_function("joiner", minijinja_contrib::globals::joiner);
    super::foreign::add_foreign(&mut env);
    add_filters(&mut env);
    add_tests(&mut env);
    super::pycmp::add(&mut env);
    env.add_filter("sum", pyops::sum);
    env
}

/// Point the template loader (`{% include %}`, `template` sources) and the lookups of `env` at
/// these directories (searched in order); `None`: no loader. Cheap on a clone of a built
/// environment (its filters and tests are shared, not copied), which is how the `template`
/// module gets its environment for every host instead of building one (issue 13).
pub(super) fn set_search_path(env: &mut Environment<'static>, search_path: Option<Vec<PathBuf>>) {
    let dirs = Arc::new(search_path.clone().unwrap_or_default());
    if search_path.is_some() {
        let dirs = dirs.clone();
        env.set_loader(move |name| load_from_dirs(&dirs, name));
    }
    let lookup_dirs = dirs.clone();
    env.add_function("lookup", move |state: &State, args: Rest<Value>| {
        let Some((values, wantlist)) = run_lookup(state, &lookup_dirs, &args)? else {
            return Ok(Value::from(()));
        };
        // As ansible-core 2.19: one value is itself, several strings are joined with commas,
        // anything else (none, or values that are not all strings) stays a list.
        let all_strings = values.iter().all(|v| v.kind() == ValueKind::String);
        Ok(
            if wantlist || values.is_empty() || (values.len() > 1 && !all_strings) {
                Value::from(values)
            } else if values.len() == 1 {
                values.into_iter().next().unwrap_or_default()
            } else {
                let strings: Result<Vec<String>, Error> = values.iter().map(py_string).collect();
                Value::from(strings?.join(","))
            },
        )
    });
    for name in ["query", "q"] {
        let dirs = dirs.clone();
        env.add_function(name, move |state: &State, args: Rest<Value>| {
            run_lookup(state, &dirs, &args)
                .map(|found| Value::from(found.map(|(values, _)| values).unwrap_or_default()))
        });
    }
}

/// Loads an included template from the first search directory that has it. Its one trailing
/// newline is dropped, as Jinja does for every template under Ansible (which puts the newlines
/// back only at the end of the whole output): `a {% include 'b' %} c` stays on one line. It is
/// rewritten (`rewrite_chains`) as the template that includes it was, and as `validate` scans
/// it: a collection's filter in it is called through the dispatcher.
pub(super) fn load_from_dirs(dirs: &[PathBuf], name: &str) -> Result<Option<String>, Error> {
    for dir in dirs {
        let path = dir.join(name);
        if path.is_file() {
            let mut text = std::fs::read_to_string(&path).map_err(|e| {
                Error::new(
                    ErrorKind::InvalidOperation,
                    format!("cannot read template {}: {e}", path.display()),
                )
            })?;
            if text.ends_with('\n') {
                text.pop();
                if text.ends_with('\r') {
                    text.pop();
                }
            }
            return Ok(Some(rewrite_chains(&text)));
        }
    }
    Ok(None)
}

/// Python's methods on values: minijinja's pycompat ones, those `pymethods` adds, and
/// `list.index(x[, start[, end]])` (Ansible's loops target uses it).
fn unknown_method(
    state: &State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, Error> {
    if let Some(r) = super::pymethods::call(value, method, args) {
        return r;
    }
    if method == "index" && value.kind() == ValueKind::Seq {
        let items: Vec<Value> = value.try_iter()?.collect();
        let bound = |i: Option<&Value>, default: usize| -> Result<usize, Error> {
            match i {
                None => Ok(default),
                Some(v) => {
                    let n = i64::try_from(v.clone())?;
                    let len = items.len() as i64;
                    // Negative bounds count from the end, as Python slices do.
                    let n = if n < 0 { (len + n).max(0) } else { n.min(len) };
                    Ok(n as usize)
                }
            }
        };
        let Some(wanted) = args.first() else {
            return Err(Error::new(
                ErrorKind::MissingArgument,
                "index() takes at least 1 argument",
            ));
        };
        let start = bound(args.get(1), 0)?;
        let end = bound(args.get(2), items.len())?;
        return items
            .iter()
            .enumerate()
            .take(end)
            .skip(start)
            .find(|(_, v)| *v == wanted)
            .map(|(i, _)| Value::from(i))
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidOperation,
                    format!("{} is not in list", py_string(wanted).unwrap_or_default()),
                )
            });
    }
    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use crate::template::{Templar, TemplateError};
    use serde_json::json;
    use std::path::PathBuf;

    #[test]
    fn python_methods() {
        assert!(truth("x.startswith('a')"));
        assert!(truth("path.endswith('.conf')"));
        assert_eq!(eval("'a b'.split()"), json!(["a", "b"]));
        assert_eq!(eval("'  s '.strip()"), json!("s"));
        assert_eq!(eval("'s'.upper() ~ 'T'.lower()"), json!("St"));
        assert_eq!(eval("'a-b'.replace('-', '+')"), json!("a+b"));
        assert_eq!(
            eval("user.keys() | list | sort"),
            json!(["groups", "name", "uid"])
        );
        assert_eq!(eval("{'a': 1}.values() | list"), json!([1]));
        assert_eq!(eval("{'a': 1}.items() | list"), json!([["a", 1]]));
        assert_eq!(eval("user.get('nope', 'dflt')"), json!("dflt"));
        assert_eq!(eval("user.get('name')"), json!("bob"));
    }

    #[test]
    fn includes_use_the_search_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("part.j2"), "part {{ x }}\n").unwrap();
        std::fs::write(dir.path().join("broken.j2"), "ok\n{{ missing_in_part }}\n").unwrap();
        let t = Templar::new().with_search_path(vec![
            PathBuf::from("/nonexistent"),
            dir.path().to_path_buf(),
        ]);
        let out = t
            .render_file("main.j2", "main\n{% include 'part.j2' %}", &vars())
            .unwrap();
        // The included file's trailing newline is dropped, as under Ansible.
        assert_eq!(out, "main\npart a");
        let e = t
            .render_file("main.j2", "{% include 'broken.j2' %}", &vars())
            .unwrap_err();
        match e {
            TemplateError::Undefined {
                name,
                template,
                line,
                ..
            } => {
                assert_eq!(name, "missing_in_part");
                assert_eq!(template, "broken.j2");
                assert_eq!(line, Some(2));
            }
            other => panic!("{other:?}"),
        }
        let e = Templar::new()
            .render_file("main.j2", "{% include 'part.j2' %}", &vars())
            .unwrap_err();
        assert!(e.to_string().contains("part.j2"), "{e}");
    }

    #[test]
    fn loop_controls_are_enabled() {
        assert_eq!(
            render(
                "{% for u in users %}{% if u == 'bob' %}{% break %}{% endif %}{{ u }}{% endfor %}"
            ),
            json!("alice")
        );
    }
}
