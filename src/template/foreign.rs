//! Filters, tests and lookups fixpoint does not implement but the playbook brings as Python
//! plugins (`filter_plugins/`, `test_plugins/`, `lookup_plugins/` beside it and in its roles,
//! or a collection's `ns.coll.name`). This side knows only their names and how to hand them
//! values: the loader sets the provider once per run (`crate::pymod::plugins`), and templating
//! stays free of Python and of where plugins live.
//!
//! fixpoint's own filters, tests and lookups win over a plugin of the same short name.
//!
//! A collection's filter or test (`x | ns.coll.f`) is not registered under its name: `rewrite`
//! turns it into a call of the dispatcher (`x | __fp_filter("ns.coll.f")`), which is in every
//! environment and asks for the plugin by name when it runs. A name no scan could see before
//! the environment was built (a template file named by a variable, an included file) works
//! as one written in the playbook.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use minijinja::value::Rest;
use minijinja::{Environment, Error, State, Value};
use serde_json::{Map, Value as Json};

use super::pyrepr::py_quote;
use super::value::{op_err, split_kwargs, value_to_json};

/// The filter and the test every collection's filter or test is called through: the plugin's
/// name is their first argument after the value (`rewrite`, `by_name`).
pub(super) const FILTER_FN: &str = "__fp_filter";
pub(super) const TEST_FN: &str = "__fp_test";

/// Which kind of Jinja plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Filter,
    Test,
    Lookup,
}

impl Kind {
    pub fn word(self) -> &'static str {
        match self {
            Kind::Filter => "filter",
            Kind::Test => "test",
            Kind::Lookup => "lookup",
        }
    }
}

/// One call of a plugin.
pub struct Call<'a> {
    pub kind: Kind,
    pub name: &'a str,
    pub args: Vec<Json>,
    pub kwargs: Map<String, Json>,
    /// For a lookup: the names of the task's variables, the directory relative files are read
    /// from, and the value of a variable the plugin reads (`None`: not defined).
    pub keys: Vec<String>,
    pub basedir: Option<PathBuf>,
    pub var: &'a mut dyn FnMut(&str) -> Option<Json>,
}

/// Why a plugin call gave no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    Missing,
    /// The plugin's file could not be loaded, with the reason.
    Load(String),
    /// The plugin raised, with its message.
    Run(String),
    /// A lookup that does not take undefined values (`accept_args_markers`) was given one.
    Undefined,
}

/// How an undefined value crosses the bridge: a top-level lookup term that is undefined goes
/// as `{UNDEFINED_KEY: null}`, which the bridge gives a plugin declaring `accept_args_markers`
/// as ansible-core's undefined marker (and refuses for any other plugin, as an undefined value
/// would fail here); a marker the plugin returns comes back the same way and is undefined
/// again in the template.
pub const UNDEFINED_KEY: &str = "__fp_undefined";

fn undefined_json() -> Json {
    let mut m = Map::with_capacity(1);
    m.insert(UNDEFINED_KEY.to_string(), Json::Null);
    Json::Object(m)
}

/// A value the bridge returned, its undefined markers undefined again.
fn from_bridge(v: &Json) -> Value {
    match v {
        Json::Object(m) if m.len() == 1 && m.contains_key(UNDEFINED_KEY) => Value::UNDEFINED,
        Json::Array(items) => Value::from(items.iter().map(from_bridge).collect::<Vec<_>>()),
        Json::Object(m) => Value::from_iter(m.iter().map(|(k, v)| (k.clone(), from_bridge(v)))),
        other => Value::from_serialize(other),
    }
}

/// What provides the plugins.
pub trait Foreign: Send + Sync {
    /// The playbook's own filters or tests, registered under their names (a collection's are
    /// called through the dispatcher).
    fn names(&self, kind: Kind) -> Vec<String>;
    /// Whether a plugin of this kind and name exists (it may look for a collection's).
    fn knows(&self, kind: Kind, name: &str) -> bool;
    fn call(&self, call: Call<'_>) -> Result<Json, Failure>;
}

static FOREIGN: RwLock<Option<Arc<dyn Foreign>>> = RwLock::new(None);

/// Set the run's plugins; environments built from now on register them.
pub fn set_foreign(f: Arc<dyn Foreign>) {
    *FOREIGN.write().unwrap_or_else(|p| p.into_inner()) = Some(f);
}

pub(super) fn foreign() -> Option<Arc<dyn Foreign>> {
    FOREIGN.read().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Whether the run's plugins have this one.
pub(super) fn knows(kind: Kind, name: &str) -> bool {
    foreign().is_some_and(|f| f.knows(kind, name))
}

/// `ns.coll.name` of a collection other than ansible.builtin / ansible.legacy (fixpoint's own).
pub fn is_collection_name(name: &str) -> bool {
    name.split('.').count() >= 3
        && !name.starts_with("ansible.builtin.")
        && !name.starts_with("ansible.legacy.")
        && name.split('.').all(|p| !p.is_empty())
}

/// Register the dispatcher and the playbook's own filters and tests in `env`. Called before
/// fixpoint's own are added, which then replace a plugin of the same name.
pub(super) fn add_foreign(env: &mut Environment<'static>) {
    env.add_filter(FILTER_FN, |args: Rest<Value>| {
        dispatch(Kind::Filter, &args).map(|v| Value::from_serialize(&v))
    });
    env.add_test(TEST_FN, |args: Rest<Value>| {
        dispatch(Kind::Test, &args).map(|v| v.as_bool().unwrap_or(false))
    });
    let Some(f) = foreign() else { return };
    for name in f.names(Kind::Filter) {
        let n = name.clone();
        env.add_filter(name, move |args: Rest<Value>| {
            call(Kind::Filter, &n, &args, None).map(|v| Value::from_serialize(&v))
        });
    }
    for name in f.names(Kind::Test) {
        let n = name.clone();
        env.add_test(name, move |args: Rest<Value>| {
            call(Kind::Test, &n, &args, None).map(|v| v.as_bool().unwrap_or(false))
        });
    }
}

/// The dispatcher's call: `args` are the value, the plugin's name, then its own arguments.
fn dispatch(kind: Kind, args: &[Value]) -> Result<Json, Error> {
    let [value, name, rest @ ..] = args else {
        return Err(op_err(format!(
            "{} needs a value and a plugin name",
            kind.word()
        )));
    };
    let Some(name) = name.as_str() else {
        return Err(op_err(format!("{} needs a plugin name", kind.word())));
    };
    let plugin_args: Vec<Value> = std::iter::once(value.clone())
        .chain(rest.iter().cloned())
        .collect();
    call(kind, name, &plugin_args, None)
}

/// The filter or test to apply when one is named by a string at run time (`map('ns.coll.f')`,
/// `select('ns.coll.t', 1)`), and the arguments to give it after the value: a collection's goes
/// through the dispatcher, named first; `ansible.builtin.x` is fixpoint's `x`.
pub(super) fn by_name(kind: Kind, name: &str, args: Vec<Value>) -> (String, Vec<Value>) {
    if let Some(short) = ["ansible.builtin.", "ansible.legacy."]
        .iter()
        .find_map(|p| name.strip_prefix(p))
    {
        return (short.to_string(), args);
    }
    if !is_collection_name(name) {
        return (name.to_string(), args);
    }
    let dispatcher = if kind == Kind::Test {
        TEST_FN
    } else {
        FILTER_FN
    };
    let mut with_name = Vec::with_capacity(args.len() + 1);
    with_name.push(Value::from(name));
    with_name.extend(args);
    (dispatcher.to_string(), with_name)
}

/// Run lookup `name` with these terms and keyword arguments (`lookup()`'s own, `wantlist` and
/// `errors`, already taken out) for the expression whose variables `state` holds.
pub(super) fn lookup(
    state: &State,
    name: &str,
    args: &[Value],
    basedir: Option<PathBuf>,
) -> Result<Vec<Value>, Error> {
    // The bridge answers a lookup with the list of its values (a plugin that returns anything
    // else fails there, as ansible-core fails it), so there is nothing to wrap in a list.
    match call(Kind::Lookup, name, args, Some((state, basedir)))? {
        Json::Array(items) => Ok(items.iter().map(from_bridge).collect()),
        other => Err(op_err(format!(
            "the plugin bridge answered lookup `{name}` with {other}, not a list"
        ))),
    }
}

fn call(
    kind: Kind,
    name: &str,
    args: &[Value],
    lookup: Option<(&State, Option<PathBuf>)>,
) -> Result<Json, Error> {
    let Some(f) = foreign() else {
        return Err(failed(kind, name, Failure::Missing));
    };
    let (pos, kw) = split_kwargs(args)?;
    let args = pos
        .iter()
        .map(|v| match v.is_undefined() && lookup.is_some() {
            true => Ok(undefined_json()),
            false => value_to_json(v),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut kwargs = Map::new();
    for key in kw.args() {
        if lookup.is_some() && matches!(key, "wantlist" | "errors") {
            continue;
        }
        let v: Value = kw.get(key)?;
        kwargs.insert(key.to_string(), value_to_json(&v)?);
    }
    let (keys, basedir, state) = match lookup {
        Some((state, basedir)) => (super::lookups::variable_names(state), basedir, Some(state)),
        None => (Vec::new(), None, None),
    };
    let mut var = |n: &str| -> Option<Json> {
        let v = state?.lookup(n)?;
        value_to_json(&v).ok()
    };
    f.call(Call {
        kind,
        name,
        args,
        kwargs,
        keys,
        basedir,
        var: &mut var,
    })
    .map_err(|e| failed(kind, name, e))
}

/// ansible-core's words for a plugin that failed.
fn failed(kind: Kind, name: &str, why: Failure) -> Error {
    let mut quoted = String::new();
    py_quote(name, &mut quoted);
    let word = kind.word();
    if why == Failure::Undefined {
        return Error::from(minijinja::ErrorKind::UndefinedError);
    }
    op_err(match why {
        // A filter or test Jinja cannot find: ansible-core's words are Jinja's.
        Failure::Missing if kind != Kind::Lookup => format!("No {word} named {quoted}."),
        Failure::Missing => format!("The {word} plugin {quoted} was not found."),
        Failure::Load(m) if m.is_empty() => format!("The {word} plugin {quoted} failed to load."),
        Failure::Load(m) => format!("The {word} plugin {quoted} failed to load: {m}"),
        Failure::Run(m) if m.is_empty() => format!("The {word} plugin {quoted} failed."),
        Failure::Run(m) => format!("The {word} plugin {quoted} failed: {m}"),
        Failure::Undefined => unreachable!("returned above"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The bridge's undefined mapping is undefined again, at the top and nested; any other
    /// value, a mapping with more keys included, is as it was.
    #[test]
    fn markers_from_the_bridge_are_undefined() {
        let v = from_bridge(&json!([undefined_json(), 42, [undefined_json()],
            {"k": undefined_json(), "n": null}, {UNDEFINED_KEY: null, "other": 1}]));
        assert!(v.get_item(&Value::from(0)).unwrap().is_undefined());
        assert_eq!(v.get_item(&Value::from(1)).unwrap(), Value::from(42));
        let nested = v.get_item(&Value::from(2)).unwrap();
        assert!(nested.get_item(&Value::from(0)).unwrap().is_undefined());
        let map = v.get_item(&Value::from(3)).unwrap();
        assert!(map.get_attr("k").unwrap().is_undefined());
        assert!(map.get_attr("n").unwrap().is_none());
        let two_keys = v.get_item(&Value::from(4)).unwrap();
        assert_eq!(two_keys.get_attr("other").unwrap(), Value::from(1));
    }
}
