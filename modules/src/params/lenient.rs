//! Module parameters read as ansible-core's argument spec reads them: a `str`/`path`
//! parameter given a mapping, a list, a number, a boolean or null takes Python's `str()` of
//! it (`{'path': '/x'}`, `['a', 1]`, `12`, `True`, and `''` for null), silently.

use std::fmt::Write as _;

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Error, Value};

/// A parameter value that converts itself to text wherever the module's type asks for a
/// string, and otherwise reads as the plain JSON value does. Mappings and lists hand out their
/// members wrapped the same way, so a `Vec<String>` of mappings converts each one (Ansible's
/// `elements='str'`).
pub(crate) struct Lenient<'a>(pub &'a Value);

/// Python's `str()` of a parameter value, as ansible-core's `check_type_str` converts one.
pub fn py_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        // ansible-core 2.19 gives `''` for None where a string is expected.
        Value::Null => String::new(),
        other => {
            let mut out = String::new();
            py_repr(other, &mut out);
            out
        }
    }
}

fn py_repr(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("None"),
        Value::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => {
                let _ = write!(out, "{i}");
            }
            (_, Some(u), _) => {
                let _ = write!(out, "{u}");
            }
            (_, _, Some(f)) => py_float(f, out),
            _ => {
                let _ = write!(out, "{n}");
            }
        },
        Value::String(s) => py_quote(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_repr(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_quote(k, out);
                out.push_str(": ");
                py_repr(item, out);
            }
            out.push('}');
        }
    }
}

/// Python's `repr()` of a float: the shortest digits that read back the same, positional
/// between 1e-4 and 1e16 (always with a fractional part, `2.0`), scientific outside (`1e+16`,
/// `1e-05`).
fn py_float(f: f64, out: &mut String) {
    if !f.is_finite() {
        out.push_str(if f.is_nan() {
            "nan"
        } else if f > 0.0 {
            "inf"
        } else {
            "-inf"
        });
        return;
    }
    // Rust's `{:e}` gives the same shortest round-trip digits: `d[.ddd]e<exp>`.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if f.is_sign_negative() {
        out.push('-');
    }
    // Where the decimal point falls after the first digit's position.
    let point = exp + 1;
    if !(-4 < point && point <= 16) {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    } else if point <= 0 {
        out.push_str("0.");
        out.push_str(&"0".repeat(point.unsigned_abs() as usize));
        out.push_str(&digits);
    } else {
        let point = point as usize;
        if digits.len() <= point {
            out.push_str(&digits);
            out.push_str(&"0".repeat(point - digits.len()));
            out.push_str(".0");
        } else {
            out.push_str(&digits[..point]);
            out.push('.');
            out.push_str(&digits[point..]);
        }
    }
}

/// Python's `repr()` of a string: single quotes unless the text holds one and no double quote.
pub fn py_quote(s: &str, out: &mut String) {
    let q = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(q);
}

impl<'de> Deserializer<'de> for Lenient<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Array(items) => visitor.visit_seq(Items(items.iter())),
            Value::Object(map) => visitor.visit_map(Members {
                iter: map.iter(),
                value: None,
            }),
            scalar => scalar.deserialize_any(visitor),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::String(s) => visitor.visit_borrowed_str(s),
            other => visitor.visit_string(py_str(other)),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Array(items) => visitor.visit_seq(Items(items.iter())),
            other => other.deserialize_seq(visitor),
        }
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Object(map) => visitor.visit_map(Members {
                iter: map.iter(),
                value: None,
            }),
            other => other.deserialize_map(visitor),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.0.deserialize_enum(name, variants, visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    // Every other type (numbers, booleans, bytes, tuples...) reads as the plain value does.
    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char bytes byte_buf unit
        unit_struct tuple tuple_struct identifier
    }
}

struct Items<'a>(std::slice::Iter<'a, Value>);

impl<'de> SeqAccess<'de> for Items<'de> {
    type Error = Error;
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        self.0
            .next()
            .map(|v| seed.deserialize(Lenient(v)))
            .transpose()
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

struct Members<'a> {
    iter: serde_json::map::Iter<'a>,
    value: Option<&'a Value>,
}

impl<'de> MapAccess<'de> for Members<'de> {
    type Error = Error;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        match self.iter.next() {
            Some((k, v)) => {
                self.value = Some(v);
                seed.deserialize(BorrowedStrDeserializer::new(k)).map(Some)
            }
            None => Ok(None),
        }
    }
    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, Error> {
        let v = self
            .value
            .take()
            .ok_or_else(|| <Error as de::Error>::custom("a value asked for before its key"))?;
        seed.deserialize(Lenient(v))
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[test]
    fn floats_print_as_python_repr() {
        let s = |f: f64| py_str(&json!(f));
        assert_eq!(s(1.5), "1.5");
        assert_eq!(s(2.0), "2.0");
        assert_eq!(s(-0.25), "-0.25");
        assert_eq!(s(1e16), "1e+16");
        assert_eq!(s(1e15), "1000000000000000.0");
        assert_eq!(s(1.5e20), "1.5e+20");
        assert_eq!(s(0.0001), "0.0001");
        assert_eq!(s(0.00001), "1e-05");
        assert_eq!(s(1733234234.123456), "1733234234.123456");
    }

    #[test]
    fn strings_take_python_str_and_other_types_read_as_before() {
        #[derive(Deserialize)]
        struct P {
            s: String,
            o: Option<String>,
            l: Vec<String>,
            n: u32,
            #[serde(default)]
            none: Option<String>,
        }
        let v = json!({"s": {"path": "/x", "q": "it's", "z": null}, "o": [true, 1],
            "l": [{"k": 1}, 2], "n": 7, "none": null});
        let p = P::deserialize(Lenient(&v)).unwrap();
        assert_eq!(p.s, "{'path': '/x', 'q': \"it's\", 'z': None}");
        assert_eq!(p.o.as_deref(), Some("[True, 1]"));
        assert_eq!(p.l, ["{'k': 1}", "2"]);
        assert_eq!((p.n, p.none), (7, None));
        // A string given where a number is expected is still refused.
        assert!(P::deserialize(Lenient(&json!({"s": "", "o": null, "l": [], "n": "x"}))).is_err());
        assert_eq!(py_str(&json!(null)), "");
    }
}
