//! Ansible's Jinja tests (`is failed`, `is changed`, `is match`, `is version`, `is subset`,
//! ...), registered by `add_tests`. Named `jinja_tests` so it is not mistaken for unit tests.
//!
//! Like filters, tests see only their arguments; the result tests know the shape of a
//! registered result (`failed`, `changed`, `skipped`, `results`), nothing more of the engine.

use std::path::Path;

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State, Value};

use super::filters::collections::unique_items;
use super::filters::regex::{cached_regex, match_err, regex_flags};
use super::filters::types::filter_bool;
use super::pyrepr::py_string;
use super::value::{defined, op_err};

pub(super) fn add_tests(env: &mut Environment<'static>) {
    // Builtins kept: defined, undefined, none, string, number, mapping, sequence, ...
    env.add_test("failed", test_failed);
    env.add_test("failure", test_failed);
    env.add_test("succeeded", test_succeeded);
    env.add_test("success", test_succeeded);
    env.add_test("successful", test_succeeded);
    env.add_test("changed", test_changed);
    env.add_test("change", test_changed);
    env.add_test("skipped", test_skipped);
    env.add_test("skip", test_skipped);
    env.add_test("finished", |r: &Value| async_flag(r, "finished"));
    env.add_test("started", |r: &Value| async_flag(r, "started"));
    env.add_test("timedout", test_timedout);
    env.add_test("unreachable", test_unreachable);
    env.add_test("reachable", test_reachable);
    env.add_test("match", test_match);
    env.add_test("search", test_search);
    env.add_test("regex", test_regex);
    env.add_test("version", super::version::test_version);
    env.add_test("version_compare", super::version::test_version);
    env.add_test("contains", test_contains);
    env.add_test("subset", test_subset);
    env.add_test("superset", test_superset);
    env.add_test("truthy", test_truthy);
    // A vaulted value no secret has opened (a decrypted one is its plain text here, where
    // ansible-core still knows it came from a vault).
    env.add_test("vault_encrypted", |v: &Value| {
        super::value::vault_text(v).is_some_and(|t| crate::vault::is_encrypted(t.as_bytes()))
    });
    env.add_test("vaulted_file", test_vaulted_file);
    // ansible-core's internal data-tagging tests (`ansible._protomatter.tagged_with`, its own
    // targets use them), for the tags fixpoint's values can carry.
    env.add_test("tagged_with", test_tagged_with);
    env.add_test("__fp_tagged_at", test_tagged_at);
    env.add_test("tagged", |v: &Value| vaulted_tag(v).map(|t| t.is_some()));
    env.add_test("falsy", test_falsy);
    // Ansible's `nan`/`isnan`: Python's `math.isnan` of a number; anything it refuses (a
    // string, a list) is not NaN.
    for name in ["nan", "isnan"] {
        env.add_test(name, |v: &Value| -> Result<bool, Error> {
            Ok(defined(v)?.kind() == ValueKind::Number
                && f64::try_from(v.clone()).is_ok_and(f64::is_nan))
        });
    }
    env.add_test("callable", test_callable);
    // Jinja2's `value % num == 0`. minijinja's own panics on a zero divisor; Python raises
    // ZeroDivisionError, which Ansible reports as a template error.
    env.add_test(
        "divisibleby",
        |v: &Value, num: &Value| -> Result<bool, Error> {
            let zero = || {
                Error::new(
                    ErrorKind::InvalidOperation,
                    "integer division or modulo by zero",
                )
            };
            match (i64::try_from(v.clone()), i64::try_from(num.clone())) {
                (_, Ok(0)) => Err(zero()),
                // i64::MIN % -1 overflows: it divides, as in Python.
                (Ok(a), Ok(b)) => Ok(a.checked_rem(b).is_none_or(|r| r == 0)),
                _ => {
                    let (a, b) = (f64::try_from(v.clone())?, f64::try_from(num.clone())?);
                    if b == 0.0 {
                        return Err(zero());
                    }
                    Ok(a % b == 0.0)
                }
            }
        },
    );
    // Python's `any()` and `all()` over the items' truth.
    env.add_test("any", |v: &Value| -> Result<bool, Error> {
        Ok(defined(v)?.try_iter()?.any(|x| x.is_true()))
    });
    env.add_test("all", |v: &Value| -> Result<bool, Error> {
        Ok(defined(v)?.try_iter()?.all(|x| x.is_true()))
    });
    // Jinja2's `sequence` asks for a length and indexing, so strings and mappings pass too.
    env.add_test("sequence", |v: &Value| {
        matches!(
            v.kind(),
            ValueKind::String | ValueKind::Seq | ValueKind::Map | ValueKind::Iterable
        ) && !v.is_undefined()
    });
    // Ansible's file tests, on the controller; each under both of its names.
    for name in ["file", "is_file"] {
        env.add_test(name, |p: &str| Path::new(p).is_file());
    }
    for name in ["directory", "is_dir"] {
        env.add_test(name, |p: &str| Path::new(p).is_dir());
    }
    for name in ["link", "is_link"] {
        env.add_test(name, |p: &str| Path::new(p).is_symlink());
    }
    for name in ["abs", "is_abs"] {
        env.add_test(name, |p: &str| Path::new(p).is_absolute());
    }
    env.add_test("exists", |p: &str| Path::new(p).exists());
    env.add_test("link_exists", |p: &str| {
        Path::new(p).symlink_metadata().is_ok()
    });
    // Python's os.path.samefile: both must exist (an error otherwise, as its OSError).
    for name in ["same_file", "is_same_file"] {
        env.add_test(name, |a: &str, b: &str| -> Result<bool, Error> {
            use std::os::unix::fs::MetadataExt;
            let stat = |p: &str| std::fs::metadata(p).map_err(|e| op_err(format!("{p}: {e}")));
            let (x, y) = (stat(a)?, stat(b)?);
            Ok(x.dev() == y.dev() && x.ino() == y.ino())
        });
    }
    // Python's os.path.ismount: not a link, and on another device than its parent, or the
    // parent is itself (`/`).
    for name in ["mount", "is_mount"] {
        env.add_test(name, |p: &str| {
            use std::os::unix::fs::MetadataExt;
            let (Ok(m), Ok(parent)) = (
                Path::new(p).symlink_metadata(),
                Path::new(p).join("..").symlink_metadata(),
            ) else {
                return false;
            };
            !m.is_symlink() && (m.dev() != parent.dev() || m.ino() == parent.ino())
        });
    }
}

/// Jinja2's `callable`: a function (`lookup`, `range`, `now`...), a macro or a loop's `loop`
/// (callable in a recursive loop); a value, and `now()`'s datetime (the one other plain object
/// here), is not. minijinja's macro and loop types are its own: a macro is known by its printed
/// form, a loop by its attribute names, all of them in their order.
fn test_callable(v: &Value) -> Result<bool, Error> {
    const LOOP: [&str; 9] = [
        "index0",
        "index",
        "length",
        "revindex",
        "revindex0",
        "first",
        "last",
        "depth",
        "depth0",
    ];
    Ok(match defined(v)?.kind() {
        ValueKind::Plain => v.downcast_object_ref::<super::now::DateTime>().is_none(),
        ValueKind::Map => {
            let macro_like = v
                .get_attr("arguments")
                .is_ok_and(|a| a.kind() == ValueKind::Seq)
                && format!("{v:?}").starts_with("<macro ");
            let loop_like = v.len().is_some_and(|n| n >= LOOP.len())
                && v.try_iter()?
                    .zip(LOOP)
                    .all(|(k, name)| k.as_str() == Some(name));
            macro_like || loop_like
        }
        _ => false,
    })
}

/// Registered results are maps; anything else is a usage error, as in Ansible.
fn result_flag(result: &Value, test: &str, key: &str) -> Result<bool, Error> {
    if defined(result)?.kind() != ValueKind::Map {
        return Err(op_err(format!(
            "the `{test}` test expects a dictionary (a registered result)"
        )));
    }
    let v = result.get_attr(key)?;
    Ok(!v.is_undefined() && filter_bool(&v)?.is_true())
}

fn test_failed(result: &Value) -> Result<bool, Error> {
    result_flag(result, "failed", "failed")
}

fn test_succeeded(result: &Value) -> Result<bool, Error> {
    result_flag(result, "succeeded", "failed").map(|f| !f)
}

fn test_skipped(result: &Value) -> Result<bool, Error> {
    result_flag(result, "skipped", "skipped")
}

/// `is finished` / `is started`: an async result's flag (ansible-core compares it with 1, which
/// `true` equals); a result without it (a task that was not async) passes, as in ansible-core
/// (which also warns).
fn async_flag(result: &Value, key: &str) -> Result<bool, Error> {
    if defined(result)?.kind() != ValueKind::Map {
        return Err(op_err(format!(
            "The '{key}' test expects a dictionary, not {}",
            result.kind()
        )));
    }
    let v = result.get_attr(key)?;
    if v.is_undefined() {
        return Ok(true);
    }
    Ok(match v.kind() {
        ValueKind::Bool => v.is_true(),
        ValueKind::Number => f64::try_from(v).is_ok_and(|n| n == 1.0),
        _ => false,
    })
}

/// `is timedout`: the task's `timeout` stopped it (its result's `timedout` says the period).
fn test_timedout(result: &Value) -> Result<bool, Error> {
    if defined(result)?.kind() != ValueKind::Map {
        return Err(op_err("The 'timedout' test expects a dictionary"));
    }
    let t = result.get_attr("timedout")?;
    if t.is_undefined() || !t.is_true() {
        return Ok(false);
    }
    let period = t.get_attr("period").unwrap_or(Value::UNDEFINED);
    Ok(!period.is_undefined() && period.is_true())
}

fn test_unreachable(result: &Value) -> Result<bool, Error> {
    result_flag(result, "unreachable", "unreachable")
}

fn test_reachable(result: &Value) -> Result<bool, Error> {
    result_flag(result, "reachable", "unreachable").map(|f| !f)
}

/// Changed when the result says so, or any of a loop's `results` does.
fn test_changed(result: &Value) -> Result<bool, Error> {
    if result_flag(result, "changed", "changed")? {
        return Ok(true);
    }
    let results = result.get_attr("results")?;
    if results.kind() == ValueKind::Seq {
        for r in results.try_iter()? {
            if r.kind() == ValueKind::Map && result_flag(&r, "changed", "changed")? {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

fn regex_test(
    value: &Value,
    pattern: &str,
    kwargs: &Kwargs,
    match_type: &str,
) -> Result<bool, Error> {
    let (ignorecase, multiline) = regex_flags(kwargs)?;
    let text = py_string(defined(value)?)?;
    let anchored = match match_type {
        "match" => format!(r"\A(?:{pattern})"),
        "fullmatch" => format!(r"\A(?:{pattern})\z"),
        "search" => pattern.to_string(),
        other => return Err(op_err(format!("regex test: unknown match_type {other:?}"))),
    };
    cached_regex(&anchored, ignorecase, multiline)?
        .is_match(&text)
        .map_err(|e| match_err(&anchored, e))
}

fn test_match(value: &Value, pattern: String, kwargs: Kwargs) -> Result<bool, Error> {
    let rv = regex_test(value, &pattern, &kwargs, "match")?;
    kwargs.assert_all_used()?;
    Ok(rv)
}

fn test_search(value: &Value, pattern: String, kwargs: Kwargs) -> Result<bool, Error> {
    let rv = regex_test(value, &pattern, &kwargs, "search")?;
    kwargs.assert_all_used()?;
    Ok(rv)
}

fn test_regex(value: &Value, pattern: String, kwargs: Kwargs) -> Result<bool, Error> {
    let match_type: Option<String> = kwargs.get("match_type")?;
    let rv = regex_test(
        value,
        &pattern,
        &kwargs,
        match_type.as_deref().unwrap_or("search"),
    )?;
    kwargs.assert_all_used()?;
    Ok(rv)
}

/// Python's `item in container`: a substring test when the container is text.
fn test_contains(container: &Value, item: &Value) -> Result<bool, Error> {
    if let Some(text) = defined(container)?.as_str() {
        let Some(sub) = item.as_str() else {
            return Err(op_err(format!(
                "the `contains` test on a string needs a string, got {item}"
            )));
        };
        return Ok(text.contains(sub));
    }
    Ok(container.try_iter()?.any(|x| &x == item))
}

fn test_subset(a: &Value, b: &Value) -> Result<bool, Error> {
    let b = unique_items(b)?;
    Ok(unique_items(a)?.iter().all(|x| b.contains(x)))
}

fn test_superset(a: &Value, b: &Value) -> Result<bool, Error> {
    test_subset(b, a)
}

fn test_truthy(value: &Value, kwargs: Kwargs) -> Result<bool, Error> {
    let convert: Option<bool> = kwargs.get("convert_bool")?;
    kwargs.assert_all_used()?;
    // ansible-core converts only what its strict `boolean()` knows (`yes`, `off`, `1`...);
    // anything else (`"fred"`) keeps its own truth.
    if convert.unwrap_or(false) {
        let known =
            match value.kind() {
                ValueKind::String => value
                    .as_str()
                    .map(|s| s.to_ascii_lowercase())
                    .and_then(|s| match s.as_str() {
                        "y" | "yes" | "on" | "1" | "true" | "t" => Some(true),
                        "n" | "no" | "off" | "0" | "false" | "f" => Some(false),
                        _ => None,
                    }),
                ValueKind::Number => match f64::try_from(value.clone()) {
                    Ok(1.0) => Some(true),
                    Ok(0.0) => Some(false),
                    _ => None,
                },
                _ => None,
            };
        if let Some(b) = known {
            return Ok(b);
        }
    }
    Ok(defined(value)?.is_true())
}

fn test_falsy(value: &Value, kwargs: Kwargs) -> Result<bool, Error> {
    test_truthy(value, kwargs).map(|t| !t)
}

/// ansible-core's data tags, by name (an unknown one is an error, as there).
const TAG_NAMES: &[&str] = &[
    "Deprecated",
    "Origin",
    "SourceWasEncrypted",
    "TrustedAsTemplate",
    "VaultedValue",
    "_JinjaConstTemplate",
];

/// `value is tagged_with(name)`. fixpoint's values are plain data: the one tag it knows on a
/// value is `VaultedValue`, on a `!vault` value (which the test uses: one no secret opens is
/// an error, as in ansible-core). The others are never known: `TrustedAsTemplate` (what
/// ansible-core puts on a string written in the playbook), `Origin`... are false.
fn test_tagged_with(value: &Value, name: &str) -> Result<bool, Error> {
    if !TAG_NAMES.contains(&name) {
        return Err(op_err(format!("Unknown tag name '{name}'.")));
    }
    Ok(name == "VaultedValue" && vaulted_tag(value)?.is_some())
}

/// `path is tagged_with(name)`, rewritten with the operand's variable path
/// (`rewrite::mark_tag_tests`): `TrustedAsTemplate` is true of a string the path names that
/// is the playbook's own text, as the context's trust says (`TRUST_ORACLE`, the scope's
/// `trusted_string`, the same answer that lets a string be a condition); the rest as
/// `tagged_with`.
fn test_tagged_at(state: &State, value: &Value, path: &str, name: &str) -> Result<bool, Error> {
    if name != "TrustedAsTemplate" {
        return test_tagged_with(value, name);
    }
    let (Some(text), Some(oracle)) = (value.as_str(), state.lookup(super::TRUST_ORACLE)) else {
        return Ok(false);
    };
    Ok(oracle
        .call(state, &[Value::from(path), Value::from(text)])?
        .is_true())
}

/// `Some` for a `!vault` value that decrypts, the error of one that does not, `None` for the
/// rest.
fn vaulted_tag(value: &Value) -> Result<Option<()>, Error> {
    match super::value::vault_text(value) {
        Some(text) => super::value::used_vault(&text).map(|_| Some(())),
        None => Ok(None),
    }
}

/// `path is vaulted_file`: the controller's file (relative to the working directory) starts
/// with the vault header.
fn test_vaulted_file(path: &Value) -> Result<bool, Error> {
    use std::io::Read as _;
    let p = path
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| path.to_string());
    let mut head = [0u8; crate::vault::HEADER.len()];
    let n = std::fs::File::open(&p)
        .and_then(|f| f.take(head.len() as u64).read(&mut head))
        .map_err(|_| op_err(format!("Cannot test if the file '{p}' is a vault.")))?;
    Ok(crate::vault::is_encrypted(&head[..n]))
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use crate::template::Templar;
    use serde_json::json;

    #[test]
    fn callable_and_nan_tests() {
        assert_eq!(
            eval("[lookup is callable, range is callable, now is callable, now() is callable, 'x' is callable, {} is callable, {'arguments': [], 'name': 'm', 'caller': false} is callable]"),
            json!([true, true, true, false, false, false, false])
        );
        assert_eq!(
            render("{% macro m(a) %}{% endmacro %}{{ m is callable }} {% for i in [1] %}{{ loop is callable }}{% endfor %}"),
            json!("True True")
        );
        assert_eq!(
            eval("['nan' | float is nan, 'nan' is nan, 1 is nan, 'nan' | float is isnan]"),
            json!([true, false, false, true])
        );
        assert!(Templar::new().eval("nope is callable", &vars()).is_err());
        assert!(Templar::new().eval("nope is nan", &vars()).is_err());
    }

    #[test]
    fn async_and_timeout_result_tests() {
        let c = ctx(json!({
            "running": {"started": true, "finished": false},
            "done": {"started": 1, "finished": 1},
            "plain": {"changed": false},
            "timed": {"timedout": {"period": 3}},
        }));
        let t = Templar::new();
        let holds = |e: &str| {
            t.eval_bool(e, &c)
                .unwrap_or_else(|err| panic!("{e}: {err}"))
        };
        assert!(holds("running is started and running is not finished"));
        assert!(holds("done is started and done is finished"));
        assert!(holds("plain is finished and plain is started"));
        assert!(holds("timed is timedout and plain is not timedout"));
        for e in ["'x' is finished", "'x' is started", "'x' is timedout"] {
            assert!(t.eval_bool(e, &c).is_err(), "{e}");
        }
    }

    #[test]
    fn vault_and_data_tag_tests() {
        // No secret is installed in unit tests: the vaulted value cannot be decrypted.
        let c = ctx(json!({"v": crate::yaml::mark::vault("$ANSIBLE_VAULT;1.1;AES256\n6162\n")}));
        let t = Templar::new();
        let holds = |e: &str| {
            t.eval_bool(e, &c)
                .unwrap_or_else(|err| panic!("{e}: {err}"))
        };
        assert!(holds("v is vault_encrypted"));
        assert!(holds("'$ANSIBLE_VAULT;1.1;AES256' is not vault_encrypted"));
        assert!(holds(
            "'x' is not ansible._protomatter.tagged_with('TrustedAsTemplate')"
        ));
        assert!(holds("1 is not ansible._protomatter.tagged"));
        let err = |e: &str| t.eval_bool(e, &c).expect_err(e).to_string();
        assert!(err("v is tagged_with('VaultedValue')").contains(
            "Attempt to use undecryptable variable: Attempting to decrypt but no vault secrets found."
        ));
        assert!(err("v is tagged_with('Bogus')").contains("Unknown tag name 'Bogus'."));
        // Printing it or serializing it is using it.
        let used = t
            .render_str("{{ v | to_json }}", &c)
            .unwrap_err()
            .to_string();
        assert!(used.contains("undecryptable variable"), "{used}");
        let printed = t.render_str("x {{ v }}", &c).unwrap_err().to_string();
        assert!(printed.contains("undecryptable variable"), "{printed}");
        // Tests run in the package's directory.
        assert!(holds("'Cargo.toml' is not vaulted_file"));
        assert!(err("'no/such/file' is vaulted_file")
            .contains("Cannot test if the file 'no/such/file' is a vault."));
    }

    #[test]
    fn result_tests() {
        let c = ctx(json!({
            "ok": {"changed": false, "failed": false},
            "ch": {"changed": true},
            "bad": {"failed": true, "msg": "boom"},
            "skip": {"skipped": true, "changed": false},
            "loop": {"results": [{"changed": false}, {"changed": true}]},
            "s": "not a result",
        }));
        let t = Templar::new();
        let b = |e: &str| {
            t.eval_bool(e, &c)
                .unwrap_or_else(|err| panic!("{e}: {err}"))
        };
        assert!(b("ch is changed"));
        assert!(!b("ok is changed"));
        assert!(b("loop is changed"));
        assert!(b("bad is failed"));
        assert!(!b("bad is succeeded"));
        assert!(b("ok is success"));
        assert!(b("ok is succeeded"));
        assert!(b("skip is skipped"));
        assert!(!b("ok is skipped"));
        assert!(b("ok is not failed"));
        assert!(t.eval_bool("s is changed", &c).is_err());
    }

    #[test]
    fn regex_and_other_tests() {
        assert!(truth("'foobar' is match('foo')"));
        assert!(!truth("'foobar' is match('bar')"));
        assert!(truth("'foobar' is search('bar')"));
        assert!(truth("'FOO' is search('foo', ignorecase=true)"));
        assert!(truth("'foobar' is regex('o+b')"));
        assert!(!truth("'foobar' is regex('bar', match_type='match')"));
        assert!(truth("'a\\nb' is match('^b', multiline=true) == false"));
        assert!(truth("'20.04' is version('18.04', '>')"));
        assert!(truth("'1.10.0' is version('1.9', 'gt')"));
        assert!(truth("'2.0' is version('2.0', operator='eq')"));
        assert!(truth("'1.0rc1' is version('1.0', '>')"));
        assert!(truth("users is contains('bob')"));
        assert!(truth("'has an invalid value' is contains 'invalid'"));
        assert!(!truth("'abc' is contains 'x'"));
        assert!(truth("['bob'] is subset(users)"));
        assert!(truth("users is superset(['bob'])"));
        assert!(truth("x is truthy"));
        assert!(truth("empty is falsy"));
        assert!(truth("nothing is none"));
        assert!(truth("'/' is directory"));
        assert!(truth("'/' is exists"));
        assert!(!truth("'/definitely/not/here' is file"));
        assert!(truth("'/etc' is abs"));
        assert!(truth(
            "'/' is is_dir and '/etc' is is_abs and not ('/' is is_file)"
        ));
        assert!(truth(
            "'/proc/self' is is_link and '/proc/self' is link_exists"
        ));
        assert!(truth("[0, 'x'] is any and not ([0, 'x'] is all)"));
        assert!(truth("[] is all and not ([] is any)"));
        assert!(truth("'aa' is search('(a)\\\\1')"));
        assert!(truth("'ab' is match('a(?=b)')"));
    }
}
