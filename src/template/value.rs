//! minijinja values as the rest of fixpoint sees them (JSON), and the argument helpers every
//! filter, test and lookup shares (undefined checks, keyword splitting, error construction).

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, ErrorKind, Value};
use serde_json::Value as Json;

/// Guard against self-referencing dynamic objects when converting values.
pub(super) const MAX_DEPTH: usize = 64;

/// A JSON value (a variable, a rendered result) as a template value: a non-finite float's
/// mark (`yaml::mark::float`) is the float again.
pub fn json_to_value(j: &Json) -> Value {
    Value::from_serialize(Floats(j))
}

/// Serializes JSON as it is but for the marks of non-finite floats, which become floats.
struct Floats<'a>(&'a Json);

impl serde::Serialize for Floats<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        if let Some(f) = crate::yaml::mark::float_of(self.0) {
            return s.serialize_f64(f);
        }
        match self.0 {
            Json::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Floats(item))?;
                }
                seq.end()
            }
            // Serialized as a value handle (minijinja keeps the object through `from_serialize`).
            Json::Object(m) if m.keys().any(|k| super::pykeys::is_typed_key(k)) => {
                let inner = Value::from_serialize(StringKeys(m));
                Value::from_object(super::pykeys::TypedKeys(inner)).serialize(s)
            }
            Json::Object(m) => StringKeys(m).serialize(s),
            other => other.serialize(s),
        }
    }
}

/// A JSON object's entries as a plain mapping, its values as `Floats` serializes them.
struct StringKeys<'a>(&'a serde_json::Map<String, Json>);

impl serde::Serialize for StringKeys<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            map.serialize_entry(k, &Floats(v))?;
        }
        map.end()
    }
}

/// Converts a template value to JSON; undefined values anywhere are errors.
pub(super) fn value_to_json(v: &Value) -> Result<Json, Error> {
    value_to_json_depth(v, 0, Mode::Value)
}

/// `value_to_json`, leaving out the undefined items of lists and mappings (`with_first_found`'s
/// terms, `Templar::render_term_str`).
pub(super) fn value_to_json_omitting_undefined(v: &Value) -> Result<Json, Error> {
    value_to_json_depth(v, 0, Mode::OmitUndefined)
}

/// `value_to_json` for the JSON filters (`to_json`...), which write datetimes as JSON does.
pub(super) fn value_to_json_text(v: &Value) -> Result<Json, Error> {
    value_to_json_depth(v, 0, Mode::Json)
}

/// What `value_to_json_depth` converts for.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Value,
    OmitUndefined,
    Json,
}

fn value_to_json_depth(v: &Value, depth: usize, mode: Mode) -> Result<Json, Error> {
    let omit = mode == Mode::OmitUndefined;
    if depth > MAX_DEPTH {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "value is nested too deeply",
        ));
    }
    if let Some(text) = vault_text(v) {
        return used_vault(&text).map(Json::String);
    }
    if super::omit::is_omit(v) {
        // Only a whole result gets here: lists and mappings leave `omit` out (below).
        return Ok(Json::String(super::omit::OMIT.to_string()));
    }
    // `to_json` (ansible-core's JSON encoder) writes a datetime as its `isoformat()`; a value
    // that stays a variable or an argument is its `str()` (below). No timedelta can be one.
    if let (Some(dt), Mode::Json) = (v.downcast_object_ref::<super::now::DateTime>(), mode) {
        return Ok(Json::String(dt.isoformat()));
    }
    if super::timedelta::is_timedelta(v) {
        return Err(op_err(
            "Type 'timedelta' is unsupported for variable storage.",
        ));
    }
    Ok(match v.kind() {
        ValueKind::Undefined => return Err(Error::from(ErrorKind::UndefinedError)),
        ValueKind::None => Json::Null,
        ValueKind::Bool => Json::Bool(v.is_true()),
        // JSON has no number for these: they travel marked.
        ValueKind::Number if f64::try_from(v.clone()).is_ok_and(|f| !f.is_finite()) => {
            crate::yaml::mark::float(f64::try_from(v.clone()).unwrap_or(f64::NAN))
        }
        ValueKind::Number => serde_json::to_value(v).unwrap_or_else(|_| {
            v.to_string()
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map_or(Json::Null, Json::Number)
        }),
        ValueKind::String => Json::String(v.as_str().unwrap_or_default().to_string()),
        ValueKind::Bytes => {
            Json::String(String::from_utf8_lossy(v.as_bytes().unwrap_or_default()).into_owned())
        }
        ValueKind::Seq | ValueKind::Iterable => Json::Array(
            v.try_iter()?
                .filter(|item| !((omit && item.is_undefined()) || super::omit::is_omit(item)))
                .map(|item| value_to_json_depth(&item, depth + 1, mode))
                .collect::<Result<_, _>>()?,
        ),
        ValueKind::Map => {
            let mut map = serde_json::Map::new();
            for key in v.try_iter()? {
                let item = v.get_item(&key)?;
                let key = match key.as_str() {
                    Some(s) => s.to_string(),
                    None => key.to_string(),
                };
                if (omit && item.is_undefined()) || super::omit::is_omit(&item) {
                    continue;
                }
                map.insert(key, value_to_json_depth(&item, depth + 1, mode)?);
            }
            Json::Object(map)
        }
        ValueKind::Invalid => return Err(op_err(format!("invalid value: {v}"))),
        _ => Json::String(v.to_string()),
    })
}

/// The vault text of a vaulted value no secret opened when it was rendered (it stays the
/// mapping `yaml::mark::vault` makes), if `v` is one.
pub(super) fn vault_text(v: &Value) -> Option<String> {
    if v.kind() != ValueKind::Map || v.len() != Some(1) {
        return None;
    }
    let inner = v
        .get_item(&Value::from(crate::yaml::mark::VAULT_KEY))
        .ok()?;
    inner.as_str().map(str::to_string)
}

/// A vaulted value is used (printed, serialized, made a task's argument): its plain text, or
/// ansible-core's error when the run's secrets do not open it.
pub(super) fn used_vault(text: &str) -> Result<String, Error> {
    crate::vault::decrypt_installed(text)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(|e| op_err(format!("Attempt to use undecryptable variable: {e}")))
}

/// Rejects undefined input in filters that take `&Value` (minijinja only checks typed args).
pub(super) fn defined(v: &Value) -> Result<&Value, Error> {
    if v.is_undefined() {
        Err(Error::from(ErrorKind::UndefinedError))
    } else {
        Ok(v)
    }
}

/// An `InvalidOperation` error, the kind filters and lookups raise for bad input.
pub(super) fn op_err(msg: impl Into<std::borrow::Cow<'static, str>>) -> Error {
    Error::new(ErrorKind::InvalidOperation, msg)
}

/// Splits trailing keyword arguments off a `Rest` (minijinja passes them as the last value).
pub(super) fn split_kwargs(args: &[Value]) -> Result<(Vec<Value>, Kwargs), Error> {
    match args.split_last() {
        Some((last, rest)) if last.is_kwargs() => {
            Ok((rest.to_vec(), Kwargs::try_from(last.clone())?))
        }
        _ => Ok((
            args.to_vec(),
            Kwargs::from_iter(Vec::<(String, Value)>::new()),
        )),
    }
}
