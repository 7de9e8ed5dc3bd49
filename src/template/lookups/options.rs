//! The options of the file-reading lookups (`ini`, `csvfile`) as ansible-core's plugin
//! configuration converts them (booleans, integers, choices, raw values, with its error
//! messages), and a file's text in a Python encoding name.
//!
//! ansible-core keeps a plugin's options across the terms of one call (an inline `k=v` in one
//! term still applies to the next), so `Options` is mutable and lives for the whole call.

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, Value};

use super::super::pyrepr::{py_repr_string, py_string};

/// How ansible-core converts an option's value.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    /// Kept as given (options without a `type`: `default`, `section`, `case_sensitive`...).
    Raw,
    /// `type: bool`: ansible-core's lenient `boolean()` (anything not true-ish is false).
    Bool,
    /// `type: int`: an integer, or a string or float holding a whole number.
    Int,
    /// `choices:` without a type: one of these strings.
    Choice(&'static [&'static str]),
}

/// One lookup's options: their kinds, current values and the plugin's name for messages.
pub(super) struct Options {
    plugin: &'static str,
    specs: &'static [(&'static str, Kind)],
    values: Vec<(&'static str, Value)>,
}

impl Options {
    /// The options with their defaults (`defaults` names some of `specs`).
    pub(super) fn new(
        plugin: &'static str,
        specs: &'static [(&'static str, Kind)],
        defaults: Vec<(&'static str, Value)>,
    ) -> Options {
        let values = specs
            .iter()
            .map(|(name, _)| {
                let v = defaults.iter().find(|(n, _)| n == name).map(|(_, v)| v);
                (*name, v.cloned().unwrap_or(Value::from(())))
            })
            .collect();
        Options {
            plugin,
            specs,
            values,
        }
    }

    /// Whether `name` is one of the options (inline `k=v` names are checked against these).
    pub(super) fn knows(&self, name: &str) -> bool {
        self.specs.iter().any(|(n, _)| *n == name)
    }

    /// The option names in ansible-core's order (the order its inline parser tries them).
    pub(super) fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.specs.iter().map(|(n, _)| *n)
    }

    pub(super) fn get(&self, name: &str) -> &Value {
        self.values
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
            .unwrap_or(&NONE)
    }

    /// Set `name` (one of the options) to `value`, converted as ansible-core converts it.
    pub(super) fn set(&mut self, name: &str, value: Value) -> Result<(), String> {
        let Some((_, kind)) = self.specs.iter().find(|(n, _)| *n == name) else {
            return Err(format!(
                "No config definition exists for '{name}' for '{}' lookup plugin.",
                self.plugin
            ));
        };
        let converted = match kind {
            Kind::Raw => value,
            Kind::Bool => Value::from(ansible_bool(&value)),
            Kind::Int => Value::from(to_int(&value).ok_or_else(|| {
                format!(
                    "Config '{name}' for '{}' lookup plugin from 'Direct' has an invalid value: \
                     Invalid value provided for 'int': {}",
                    self.plugin,
                    repr(&value)
                )
            })?),
            Kind::Choice(choices) => {
                if !value.as_str().is_some_and(|s| choices.contains(&s)) {
                    return Err(format!(
                        "Invalid value {} for config '{name}' for '{}' lookup plugin.",
                        repr(&value),
                        self.plugin
                    ));
                }
                value
            }
        };
        if let Some(slot) = self.values.iter_mut().find(|(n, _)| *n == name) {
            slot.1 = converted;
        }
        Ok(())
    }

    /// The keyword arguments of the call: each option given is set (an alias under its
    /// option's name); others are taken and ignored, as ansible-core ignores them.
    pub(super) fn set_kwargs(
        &mut self,
        kwargs: &Kwargs,
        aliases: &[(&str, &str)],
    ) -> Result<(), Error> {
        let names: Vec<String> = kwargs.args().map(str::to_string).collect();
        for name in names {
            let value: Value = kwargs.get(&name)?;
            let target = aliases
                .iter()
                .find(|(alias, _)| *alias == name)
                .map_or(name.as_str(), |(_, to)| to);
            if self.knows(target) && !target.starts_with('_') {
                self.set(target, value).map_err(super::op_err)?;
            }
        }
        Ok(())
    }
}

static NONE: Value = Value::UNDEFINED;

/// ansible-core's lenient `boolean()`: `y`, `yes`, `on`, `1`, `true`, `t` (any case), 1 and
/// true are true; anything else is false.
pub(super) fn ansible_bool(v: &Value) -> bool {
    match v.kind() {
        ValueKind::Bool => v.is_true(),
        ValueKind::Number => v.as_i64() == Some(1) || f64::try_from(v.clone()).ok() == Some(1.0),
        ValueKind::String => matches!(
            v.as_str()
                .unwrap_or_default()
                .trim()
                .to_lowercase()
                .as_str(),
            "y" | "yes" | "on" | "1" | "true" | "t"
        ),
        _ => false,
    }
}

/// An `int` option's value: an integer (true is 1), or a string or float that is a whole
/// number.
fn to_int(v: &Value) -> Option<i64> {
    match v.kind() {
        ValueKind::Bool => Some(i64::from(v.is_true())),
        ValueKind::Number => match v.as_i64() {
            Some(i) => Some(i),
            None => f64::try_from(v.clone())
                .ok()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9e15)
                .map(|f| f as i64),
        },
        ValueKind::String => {
            let s = v.as_str().unwrap_or_default().trim();
            s.parse::<i64>().ok().or_else(|| {
                s.parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite() && f.fract() == 0.0 && f.abs() < 9e15)
                    .map(|f| f as i64)
            })
        }
        _ => None,
    }
}

/// Python's `repr()` of a value, for messages.
pub(super) fn repr(v: &Value) -> String {
    py_repr_string(v).unwrap_or_else(|_| v.to_string())
}

/// Python's name for a value's type, as its `TypeError`s say it.
pub(super) fn py_type(v: &Value) -> &'static str {
    match v.kind() {
        ValueKind::None | ValueKind::Undefined => "NoneType",
        ValueKind::Bool => "bool",
        ValueKind::Number if v.as_i64().is_some() => "int",
        ValueKind::Number => "float",
        ValueKind::String => "str",
        ValueKind::Seq | ValueKind::Iterable => "list",
        ValueKind::Map => "dict",
        _ => "object",
    }
}

/// A string option's text (`str()` of anything else).
pub(super) fn text(v: &Value) -> String {
    py_string(v).unwrap_or_else(|_| v.to_string())
}

/// `bytes` as text in the Python encoding `encoding`: UTF-8, Latin-1 and ASCII under their
/// Python names and aliases, UTF-16, and the WHATWG encodings under their own names. `lossy`
/// replaces what cannot be decoded (ansible-core's loader reads lookup files leniently);
/// otherwise it fails in Python's words, as `open(encoding=...)` does.
pub(super) fn decode(bytes: &[u8], encoding: &str, lossy: bool) -> Result<String, String> {
    let name = encoding.trim().to_lowercase().replace(['_', ' '], "-");
    match name.as_str() {
        "utf-8" | "utf8" | "u8" | "utf" | "cp65001" => utf8(bytes, "utf-8", lossy),
        "utf-8-sig" => utf8(bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes), "utf-8-sig", lossy),
        "latin-1" | "latin1" | "iso-8859-1" | "iso8859-1" | "8859" | "cp819" | "l1" | "latin" => {
            Ok(bytes.iter().map(|&b| char::from(b)).collect())
        }
        "ascii" | "us-ascii" | "646" => match bytes.iter().position(|b| !b.is_ascii()) {
            Some(pos) if !lossy => Err(format!(
                "'ascii' codec can't decode byte {:#04x} in position {pos}: ordinal not in range(128)",
                bytes[pos]
            )),
            _ => Ok(bytes
                .iter()
                .map(|&b| if b.is_ascii() { char::from(b) } else { '\u{fffd}' })
                .collect()),
        },
        _ => {
            let enc = encoding_rs::Encoding::for_label(name.as_bytes())
                .filter(|e| e.name().eq_ignore_ascii_case(&name) || name.starts_with("utf-16"))
                .ok_or_else(|| {
                    format!(
                        "unknown encoding: {encoding} (fixpoint reads UTF-8, Latin-1, ASCII, \
                         UTF-16 and the WHATWG encodings under their own names)"
                    )
                })?;
            let (text, _, bad) = enc.decode(bytes);
            if bad && !lossy {
                return Err(format!("'{encoding}' codec can't decode the file"));
            }
            Ok(text.into_owned())
        }
    }
}

/// UTF-8 text; strictly, the first bad byte is named as Python's codec names it.
fn utf8(bytes: &[u8], codec: &str, lossy: bool) -> Result<String, String> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(s.to_string()),
        Err(_) if lossy => Ok(String::from_utf8_lossy(bytes).into_owned()),
        Err(e) => {
            let pos = e.valid_up_to();
            let byte = bytes[pos];
            let why = match e.error_len() {
                None => "unexpected end of data",
                Some(_) if (0x80..0xc2).contains(&byte) || byte > 0xf4 => "invalid start byte",
                Some(_) => "invalid continuation byte",
            };
            Err(format!(
                "'{codec}' codec can't decode byte {byte:#04x} in position {pos}: {why}"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[(&str, Kind)] = &[
        ("col", Kind::Int),
        ("re", Kind::Bool),
        ("type", Kind::Choice(&["ini", "properties"])),
        ("default", Kind::Raw),
    ];

    #[test]
    fn options_convert_as_ansible_core() {
        let mut o = Options::new("t", SPECS, vec![("col", Value::from(1))]);
        assert_eq!(o.get("col"), &Value::from(1));
        o.set("col", Value::from("2")).unwrap();
        assert_eq!(o.get("col"), &Value::from(2));
        o.set("col", Value::from("3.0")).unwrap();
        assert_eq!(o.get("col"), &Value::from(3));
        o.set("col", Value::from(true)).unwrap();
        assert_eq!(o.get("col"), &Value::from(1));
        assert_eq!(
            o.set("col", Value::from("x")).unwrap_err(),
            "Config 'col' for 't' lookup plugin from 'Direct' has an invalid value: Invalid \
             value provided for 'int': 'x'"
        );
        assert!(o
            .set("col", Value::from(2.5))
            .unwrap_err()
            .ends_with(": 2.5"));
        for (v, want) in [("yes", true), ("T", true), ("off", false), ("maybe", false)] {
            o.set("re", Value::from(v)).unwrap();
            assert_eq!(o.get("re"), &Value::from(want), "{v}");
        }
        assert_eq!(
            o.set("type", Value::from("xml")).unwrap_err(),
            "Invalid value 'xml' for config 'type' for 't' lookup plugin."
        );
        o.set("default", Value::from(5)).unwrap();
        assert_eq!(o.get("default"), &Value::from(5));
        assert!(o.set("nope", Value::from(1)).is_err());
    }

    #[test]
    fn decoding_in_python_encoding_names() {
        assert_eq!(decode(b"caf\xe9", "latin-1", false).unwrap(), "café");
        assert_eq!(decode("café".as_bytes(), "UTF_8", false).unwrap(), "café");
        assert_eq!(
            decode(b"caf\xe9", "utf-8", false).unwrap_err(),
            "'utf-8' codec can't decode byte 0xe9 in position 3: unexpected end of data"
        );
        assert_eq!(
            decode(b"caf\xe9x", "utf-8", false).unwrap_err(),
            "'utf-8' codec can't decode byte 0xe9 in position 3: invalid continuation byte"
        );
        assert_eq!(decode(b"caf\xe9", "utf-8", true).unwrap(), "caf\u{fffd}");
        assert!(decode(b"caf\xe9", "ascii", false)
            .unwrap_err()
            .contains("ordinal not in range(128)"));
        assert_eq!(decode(b"\x80", "windows-1252", false).unwrap(), "€");
        assert!(decode(b"x", "nope", false)
            .unwrap_err()
            .starts_with("unknown encoding: nope"));
    }
}
