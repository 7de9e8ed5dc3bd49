//! Lenient parameter types shared by modules: Ansible booleans (`yes`, "true"), file modes, string-or-list.

use serde::{Deserialize, Deserializer};

mod lenient;
pub(crate) use lenient::Lenient;
pub use lenient::{py_quote, py_str};

/// Whether a string still holds Jinja2 (`{{`, `{%` or `{#`): the one test used by the loader,
/// the templating layer and the modules' load-time checks, so they never disagree.
pub fn is_template(s: &str) -> bool {
    s.contains("{{") || s.contains("{%") || s.contains("{#")
}

/// Python's truth of a JSON value: false for null, `false`, `0`, `''` and empty containers.
pub fn py_truthy(v: &serde_json::Value) -> bool {
    use serde_json::Value;
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Deserialize an optional string that YAML may have typed otherwise (`line: 8080`, `owner:
/// 1000`, a mapping), converting it as Ansible's `type='str'` does (`8080`, `True`, `{'k': 1}`).
pub fn de_opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => Ok(Some(py_str(&v))),
    }
}

/// Deserialize a required string as [`de_opt_string`] does an optional one; null is `''`, as
/// ansible-core 2.19 converts None for a string parameter.
pub fn de_string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(de_opt_string(d)?.unwrap_or_default())
}

/// Deserialize a required path as Ansible's `type='path'` does: a leading `~` or `~user` is the
/// home directory (on the host: the agent parses the parameters where the module runs), so the
/// result, messages and diffs name the expanded path, as ansible-core's do.
pub fn de_path<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = de_string(d)?;
    Ok(crate::fs::expand_user(&s).to_string_lossy().into_owned())
}

/// Ansible accepts `yes`/`no`/`true`/`false`/`1`/`0`/`on`/`off` as strings where a boolean is expected,
/// because templated values arrive as strings.
pub fn parse_bool_str(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "yes" | "true" | "on" | "1" | "y" | "t" => Some(true),
        "no" | "false" | "off" | "0" | "n" | "f" | "" => Some(false),
        _ => None,
    }
}

/// A boolean that also accepts Ansible's spellings as strings and 0/1 as numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bool(pub bool);

impl<'de> Deserialize<'de> for Bool {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            B(bool),
            I(i64),
            S(String),
        }
        match Raw::deserialize(d)
            .map_err(|_| serde::de::Error::custom("expected a boolean (true/false/yes/no)"))?
        {
            Raw::B(b) => Ok(Bool(b)),
            Raw::I(0) => Ok(Bool(false)),
            Raw::I(1) => Ok(Bool(true)),
            Raw::I(i) => Err(serde::de::Error::custom(format!(
                "expected a boolean, found the number {i}"
            ))),
            Raw::S(s) => parse_bool_str(&s).map(Bool).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "expected a boolean (true/false/yes/no), found \"{s}\""
                ))
            }),
        }
    }
}

impl From<Bool> for bool {
    fn from(b: Bool) -> bool {
        b.0
    }
}

/// An integer as Ansible's `type='int'` takes it: a number, or a string of one (templated
/// values arrive as strings).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Int(pub i64);

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Number(n) => n
                .as_i64()
                .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
                .map(Int)
                .ok_or_else(|| serde::de::Error::custom(format!("expected an integer, found {n}"))),
            serde_json::Value::String(s) => s.trim().parse().map(Int).map_err(|_| {
                serde::de::Error::custom(format!("expected an integer, found \"{s}\""))
            }),
            other => Err(serde::de::Error::custom(format!(
                "expected an integer, found {other}"
            ))),
        }
    }
}

/// An optional non-negative integer taken as `Int` is (a number, or a string of one: `k=v`
/// arguments and templated values arrive as strings).
pub fn de_opt_uint<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Option::<Int>::deserialize(d)?
        .map(|Int(i)| {
            u64::try_from(i).map_err(|_| {
                serde::de::Error::custom(format!("expected a non-negative integer, found {i}"))
            })
        })
        .transpose()
}

/// A value given either as one string or as a list of strings (`notify`, `argv`...); one
/// number is the list of its text, as Ansible's `type='list'` makes it (a templated gid).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StringList(pub Vec<String>);

impl<'de> Deserialize<'de> for StringList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            One(String),
            Number(serde_json::Number),
            Many(Vec<serde_json::Value>),
        }
        match Raw::deserialize(d)
            .map_err(|_| serde::de::Error::custom("expected a string or a list of strings"))?
        {
            Raw::One(s) => Ok(StringList(vec![s])),
            Raw::Number(n) => Ok(StringList(vec![n.to_string()])),
            Raw::Many(v) => v
                .into_iter()
                .map(|x| match x {
                    serde_json::Value::String(s) => Ok(s),
                    serde_json::Value::Number(n) => Ok(n.to_string()),
                    serde_json::Value::Bool(b) => Ok(b.to_string()),
                    other => Err(serde::de::Error::custom(format!(
                        "expected a string in the list, found {other}"
                    ))),
                })
                .collect::<Result<_, _>>()
                .map(StringList),
        }
    }
}

/// A file mode as Ansible accepts it: an integer (already octal-converted by YAML 1.1, as in
/// Ansible), an octal string (`"0644"`, `"644"`), or symbolic (`u=rw,g=r,o=`, `u+x`).
/// Symbolic modes need the current mode to resolve, so they are kept as text until apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModeSpec {
    Octal(u32),
    Symbolic(String),
    /// `mode: preserve` (copy/template): keep the source file's mode.
    Preserve,
}

impl<'de> Deserialize<'de> for ModeSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            I(u64),
            S(String),
        }
        let raw = Raw::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "expected a mode: an octal string like \"0644\" or symbolic like \"u=rw,g=r\"",
            )
        })?;
        match raw {
            Raw::I(i) if i <= 0o7777 => Ok(ModeSpec::Octal(i as u32)),
            Raw::I(i) => Err(serde::de::Error::custom(format!(
                "mode {i} is out of range; quote modes as octal strings, e.g. \"0644\""
            ))),
            Raw::S(s) => ModeSpec::parse(&s).map_err(serde::de::Error::custom),
        }
    }
}

impl ModeSpec {
    pub fn parse(s: &str) -> Result<ModeSpec, String> {
        let t = s.trim();
        if t == "preserve" {
            return Ok(ModeSpec::Preserve);
        }
        if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) {
            return u32::from_str_radix(t, 8)
                .ok()
                .filter(|m| *m <= 0o7777)
                .map(ModeSpec::Octal)
                .ok_or_else(|| format!("invalid octal mode \"{s}\""));
        }
        // Validate the symbolic form now so a typo fails at load time.
        apply_symbolic(0, t, false)?;
        Ok(ModeSpec::Symbolic(t.to_string()))
    }

    /// The concrete permission bits for a path whose current mode is `current`.
    pub fn resolve(&self, current: u32, is_dir: bool) -> Result<Option<u32>, String> {
        match self {
            ModeSpec::Octal(m) => Ok(Some(*m)),
            ModeSpec::Symbolic(s) => apply_symbolic(current, s, is_dir).map(Some),
            ModeSpec::Preserve => Ok(None),
        }
    }
}

/// chmod(1)-style symbolic modes: clauses like `u=rw`, `go-w`, `a+X`, separated by commas.
pub fn apply_symbolic(current: u32, spec: &str, is_dir: bool) -> Result<u32, String> {
    let mut mode = current & 0o7777;
    for clause in spec.split(',') {
        let bad = || format!("invalid symbolic mode \"{spec}\" (expected e.g. \"u=rw,g=r,o=\")");
        let op_pos = clause.find(['=', '+', '-']).ok_or_else(bad)?;
        let (who, rest) = clause.split_at(op_pos);
        let mut who_mask = 0u32;
        for c in who.chars() {
            who_mask |= match c {
                'u' => 0o4700,
                'g' => 0o2070,
                'o' => 0o1007,
                'a' => 0o7777,
                _ => return Err(bad()),
            };
        }
        if who.is_empty() {
            who_mask = 0o7777;
        }
        // A clause may hold several operations: `u=rw+x`.
        let mut chars = rest.chars().peekable();
        while let Some(op) = chars.next() {
            if !matches!(op, '=' | '+' | '-') {
                return Err(bad());
            }
            let mut perm = 0u32;
            while let Some(&c) = chars.peek() {
                if matches!(c, '=' | '+' | '-') {
                    break;
                }
                chars.next();
                perm |= match c {
                    'r' => 0o444,
                    'w' => 0o222,
                    'x' => 0o111,
                    'X' => {
                        if is_dir || mode & 0o111 != 0 {
                            0o111
                        } else {
                            0
                        }
                    }
                    's' => 0o6000,
                    't' => 0o1000,
                    _ => return Err(bad()),
                };
            }
            let bits = perm & who_mask;
            match op {
                '=' => mode = (mode & !who_mask) | bits,
                '+' => mode |= bits,
                _ => mode &= !bits,
            }
        }
    }
    Ok(mode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbolic_modes_follow_chmod() {
        assert_eq!(apply_symbolic(0o777, "u=rw,g=r,o=", false).unwrap(), 0o640);
        assert_eq!(apply_symbolic(0o644, "u+x", false).unwrap(), 0o744);
        assert_eq!(apply_symbolic(0o755, "go-w", false).unwrap(), 0o755);
        assert_eq!(apply_symbolic(0o666, "go-w", false).unwrap(), 0o644);
        assert_eq!(apply_symbolic(0o644, "a+X", false).unwrap(), 0o644);
        assert_eq!(apply_symbolic(0o644, "a+X", true).unwrap(), 0o755);
        assert!(apply_symbolic(0, "q=rw", false).is_err());
    }

    #[test]
    fn a_string_list_takes_one_string_one_number_or_a_list() {
        let l = |j: serde_json::Value| serde_json::from_value::<StringList>(j).map(|l| l.0);
        assert_eq!(l(serde_json::json!("a")).unwrap(), ["a"]);
        assert_eq!(l(serde_json::json!(1240)).unwrap(), ["1240"]);
        assert_eq!(l(serde_json::json!(["a", 2])).unwrap(), ["a", "2"]);
        assert!(l(serde_json::json!({"a": 1})).is_err());
    }

    #[test]
    fn octal_strings_and_integers() {
        assert_eq!(ModeSpec::parse("0644").unwrap(), ModeSpec::Octal(0o644));
        assert_eq!(ModeSpec::parse("755").unwrap(), ModeSpec::Octal(0o755));
        assert!(ModeSpec::parse("0999").is_err());
        let m: ModeSpec = serde_json::from_value(serde_json::json!(420)).unwrap();
        assert_eq!(m, ModeSpec::Octal(0o644));
    }

    #[test]
    fn de_opt_string_types_numbers_and_booleans_like_ansible_str() {
        #[derive(Deserialize)]
        struct P {
            #[serde(default, deserialize_with = "de_opt_string")]
            v: Option<String>,
        }
        let v = |j: serde_json::Value| serde_json::from_value::<P>(j).map(|p| p.v);
        assert_eq!(
            v(serde_json::json!({"v": 8080})).unwrap().as_deref(),
            Some("8080")
        );
        assert_eq!(
            v(serde_json::json!({"v": true})).unwrap().as_deref(),
            Some("True")
        );
        assert_eq!(
            v(serde_json::json!({"v": "x"})).unwrap().as_deref(),
            Some("x")
        );
        assert_eq!(v(serde_json::json!({"v": null})).unwrap(), None);
        assert_eq!(v(serde_json::json!({})).unwrap(), None);
        assert_eq!(
            v(serde_json::json!({"v": [1, "a"]})).unwrap().as_deref(),
            Some("[1, 'a']")
        );
    }
}

/// The field names (aliases included) that a derived `Deserialize` struct accepts: serde hands
/// them to `deserialize_struct`, where this deserializer records them and stops. `None` when
/// the type reads itself some other way (a hand-written impl, or `#[serde(flatten)]`, which
/// reads a map and so accepts keys no list names).
pub fn struct_fields<'de, T: Deserialize<'de>>() -> Option<&'static [&'static str]> {
    use serde::de::{value::Error, Error as _, Visitor};

    struct Recorder<'a>(&'a mut Option<&'static [&'static str]>);

    impl<'de> Deserializer<'de> for Recorder<'_> {
        type Error = Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
            Err(Error::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _visitor: V,
        ) -> Result<V::Value, Error> {
            *self.0 = Some(fields);
            Err(Error::custom("recorded"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }

    let mut fields = None;
    let _ = T::deserialize(Recorder(&mut fields));
    fields
}

#[cfg(test)]
mod struct_fields_tests {
    use super::struct_fields;
    use serde::Deserialize;

    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct P {
        path: String,
        #[serde(alias = "dest")]
        name: Option<String>,
    }

    #[test]
    fn lists_fields_with_aliases_and_none_for_other_readers() {
        let f = struct_fields::<P>().unwrap();
        assert!(
            f.contains(&"path") && f.contains(&"name") && f.contains(&"dest"),
            "{f:?}"
        );
        assert_eq!(struct_fields::<serde_json::Value>(), None);
    }
}
