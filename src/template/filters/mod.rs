//! The Ansible filters minijinja lacks or has differently, registered by `add_filters`.
//!
//! Filters are pure functions of their input and arguments: they never see the context, the
//! environment's options or anything outside templating. Each file groups filters by what they
//! work on; this file only registers them.

mod args;
pub(in crate::template) mod collections;
mod combinatorics;
mod dicts;
mod encoding;
mod html;
mod layout;
mod math;
pub(crate) use math::human_to_bytes;
mod password;
pub(super) mod paths;
pub(in crate::template) mod random;
pub(in crate::template) mod regex;
mod serialize;
mod text;
pub(in crate::template) mod types;
mod vault;

use minijinja::{Environment, Value};

use self::collections::*;
use self::combinatorics::*;
use self::dicts::*;
use self::encoding::*;
use self::html::*;
use self::layout::*;
use self::math::*;
use self::password::*;
use self::paths::*;
use self::random::*;
use self::regex::*;
use self::serialize::*;
use self::text::*;
use self::types::*;
use self::vault::*;

pub(super) fn add_filters(env: &mut Environment<'static>) {
    // Builtins kept as they are: default/d, lower, upper, trim, join, length/count,
    // first, last, map, select, reject, selectattr, rejectattr, split. Those below are missing
    // or differ from Ansible's (and min, max, sort: `pycmp`; sum: `pyops`).
    env.add_filter("bool", filter_bool);
    env.add_filter("int", filter_int);
    env.add_filter("float", filter_float);
    env.add_filter("round", filter_round);
    env.add_filter("wordcount", filter_wordcount);
    env.add_filter("string", filter_string);
    env.add_filter("to_json", filter_to_json);
    env.add_filter("to_nice_json", filter_to_nice_json);
    env.add_filter("from_json", filter_from_json);
    env.add_filter("to_yaml", filter_to_yaml);
    env.add_filter("to_nice_yaml", filter_to_nice_yaml);
    env.add_filter("from_yaml", filter_from_yaml);
    env.add_filter("regex_replace", filter_regex_replace);
    env.add_filter("regex_search", filter_regex_search);
    env.add_filter("regex_findall", filter_regex_findall);
    env.add_filter("regex_escape", filter_regex_escape);
    env.add_filter("from_yaml_all", filter_from_yaml_all);
    env.add_filter("path_join", filter_path_join);
    env.add_filter("commonpath", filter_commonpath);
    env.add_filter("normpath", filter_normpath);
    env.add_filter("md5", filter_md5);
    env.add_filter("sha1", filter_sha1);
    env.add_filter("checksum", filter_sha1);
    env.add_filter("to_uuid", filter_to_uuid);
    env.add_filter("groupby", filter_groupby);
    // Ansible's wrappers of Jinja's `map`, `select`, `reject`, `selectattr` and `rejectattr`:
    // an undefined input gives an undefined result (`x | map('upper') is undefined`), not an
    // error. The filter or test they name may be a collection's (`foreign::by_name`).
    use super::foreign::{by_name, Kind};
    use minijinja::filters as jinja;
    use minijinja::value::Rest;
    use minijinja::State;
    type Out = Result<Value, minijinja::Error>;
    env.add_filter("map", |st: &State, v: Value, a: Rest<Value>| -> Out {
        if v.is_undefined() {
            return Ok(v);
        }
        let mut args = a.0;
        if let Some(name) = args.first().and_then(|n| n.as_str()).map(str::to_string) {
            let (name, rest) = by_name(Kind::Filter, &name, args.split_off(1));
            args = std::iter::once(Value::from(name)).chain(rest).collect();
        }
        jinja::map(st, v, Rest(args)).map(Value::from)
    });
    let test = |t: Option<String>, a: Rest<Value>| match t {
        Some(t) => {
            let (t, a) = by_name(Kind::Test, &t, a.0);
            (Some(std::borrow::Cow::Owned(t)), Rest(a))
        }
        None => (None, a),
    };
    env.add_filter(
        "select",
        move |st: &State, v: Value, t: Option<String>, a: Rest<Value>| -> Out {
            if v.is_undefined() {
                return Ok(v);
            }
            let (t, a) = test(t, a);
            jinja::select(st, v, t, a).map(Value::from)
        },
    );
    env.add_filter(
        "reject",
        move |st: &State, v: Value, t: Option<String>, a: Rest<Value>| -> Out {
            if v.is_undefined() {
                return Ok(v);
            }
            let (t, a) = test(t, a);
            jinja::reject(st, v, t, a).map(Value::from)
        },
    );
    env.add_filter(
        "selectattr",
        move |st: &State, v: Value, at: String, t: Option<String>, a: Rest<Value>| -> Out {
            if v.is_undefined() {
                return Ok(v);
            }
            let (t, a) = test(t, a);
            jinja::selectattr(st, v, at.into(), t, a).map(Value::from)
        },
    );
    env.add_filter(
        "rejectattr",
        move |st: &State, v: Value, at: String, t: Option<String>, a: Rest<Value>| -> Out {
            if v.is_undefined() {
                return Ok(v);
            }
            let (t, a) = test(t, a);
            jinja::rejectattr(st, v, at.into(), t, a).map(Value::from)
        },
    );
    env.add_filter("zip", filter_zip);
    env.add_filter("zip_longest", filter_zip_longest);
    env.add_filter("subelements", filter_subelements);
    env.add_filter("strftime", crate::template::now::filter_strftime);
    env.add_filter("to_datetime", crate::template::now::filter_to_datetime);
    env.add_filter("basename", filter_basename);
    env.add_filter("dirname", filter_dirname);
    env.add_filter("splitext", filter_splitext);
    env.add_filter("expanduser", filter_expanduser);
    env.add_filter("realpath", filter_realpath);
    env.add_filter("relpath", filter_relpath);
    env.add_filter("log", filter_log);
    env.add_filter("pow", filter_pow);
    env.add_filter("root", filter_root);
    env.add_filter("human_readable", filter_human_readable);
    env.add_filter("human_to_bytes", filter_human_to_bytes);
    env.add_filter("quote", filter_quote);
    env.add_filter("b64encode", filter_b64encode);
    env.add_filter("b64decode", filter_b64decode);
    // ansible-core's internal `ansible._protomatter.finalize` (its own tests use it): a value
    // here is always plain data already.
    env.add_filter("finalize", |v: minijinja::Value| v);
    // `fileglob`: the controller's files (not directories) matching the pattern, as written
    // (relative to the working directory), as Python's `glob` lists them: each directory in its
    // own order, `*` matching no name that starts with `.`.
    env.add_filter("fileglob", |pattern: String| -> Vec<String> {
        crate::template::lookups::py_glob(&pattern)
            .into_iter()
            .filter(|p| std::path::Path::new(p).is_file())
            .collect()
    });
    env.add_filter("hash", filter_hash);
    env.add_filter("dict2items", filter_dict2items);
    env.add_filter("items2dict", filter_items2dict);
    env.add_filter("combine", filter_combine);
    env.add_filter("rekey_on_member", filter_rekey_on_member);
    env.add_filter("mandatory", filter_mandatory);
    env.add_filter("ternary", filter_ternary);
    env.add_filter("flatten", filter_flatten);
    env.add_filter("unique", filter_unique);
    env.add_filter("difference", filter_difference);
    env.add_filter("intersect", filter_intersect);
    env.add_filter("union", filter_union);
    env.add_filter("symmetric_difference", filter_symmetric_difference);
    env.add_filter("extract", filter_extract);
    env.add_filter("type_debug", filter_type_debug);
    env.add_filter("comment", filter_comment);
    env.add_filter("urlsplit", filter_urlsplit);
    env.add_filter("random", filter_random);
    env.add_filter("shuffle", filter_shuffle);
    env.add_filter("password_hash", filter_password_hash);
    env.add_filter("vault", filter_vault);
    env.add_filter("unvault", filter_unvault);
    env.add_filter("product", filter_product);
    env.add_filter("permutations", filter_permutations);
    env.add_filter("combinations", filter_combinations);
    env.add_filter("center", filter_center);
    env.add_filter("truncate", filter_truncate);
    env.add_filter("wordwrap", filter_wordwrap);
    env.add_filter("filesizeformat", filter_filesizeformat);
    env.add_filter("forceescape", filter_forceescape);
    env.add_filter("striptags", filter_striptags);
    env.add_filter("urlize", filter_urlize);
    env.add_filter("xmlattr", filter_xmlattr);
    env.add_filter("urldecode", filter_urldecode);
    env.add_filter("urlencode", filter_urlencode);
    env.add_filter("replace", filter_replace);
    env.add_filter("expandvars", filter_expandvars);
    env.add_filter("win_basename", filter_win_basename);
    env.add_filter("win_dirname", filter_win_dirname);
    env.add_filter("win_splitdrive", filter_win_splitdrive);
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use serde_json::json;

    #[test]
    fn builtin_string_and_list_filters() {
        assert_eq!(eval("'AbC' | lower"), json!("abc"));
        assert_eq!(eval("'AbC' | upper"), json!("ABC"));
        assert_eq!(eval("'  t  ' | trim"), json!("t"));
        assert_eq!(eval("users | join(',')"), json!("alice,bob"));
        assert_eq!(eval("users | count"), json!(2));
        assert_eq!(eval("'a,b' | split(',')"), json!(["a", "b"]));
        assert_eq!(eval("'a-b' | replace('-', '_')"), json!("a_b"));
        assert_eq!(eval("[3, 1, 3] | unique | list"), json!([3, 1]));
        assert_eq!(eval("[3, 1, 2] | sort"), json!([1, 2, 3]));
        assert_eq!(eval("users | first"), json!("alice"));
        assert_eq!(eval("users | last"), json!("bob"));
        assert_eq!(eval("[3, 1, 2] | min"), json!(1));
        assert_eq!(eval("[3, 1, 2] | max"), json!(3));
        assert_eq!(eval("[3, 1, 2] | sum"), json!(6));
        assert_eq!(
            eval("items | map(attribute='key') | list"),
            json!(["a", "b"])
        );
        assert_eq!(
            eval("items | selectattr('value', 'gt', 1) | map(attribute='key') | list"),
            json!(["b"])
        );
        assert_eq!(
            eval("items | rejectattr('key', 'equalto', 'a') | list"),
            json!([{"key": "b", "value": 2}])
        );
        assert_eq!(eval("[0, 1, 2] | select | list"), json!([1, 2]));
        assert_eq!(eval("[0, 1, 2] | reject('odd') | list"), json!([0, 2]));
    }
}
