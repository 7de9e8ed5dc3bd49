//! Python's printf-style string formatting, `'%s/%d' % (a, b)`: what `str % value` does under
//! Jinja2 (ansible-core's templates use it, e.g. the `find` target). minijinja's `%` is numeric
//! only, so `pyops` sends a string left operand here.
//!
//! Conversions `s r a d i u o x X e E f F g G c %`, the flags `#0- +`, width and precision
//! (`*` too), `%(key)s` with a mapping, and Python's errors in Python's words (which playbooks
//! search for in a failed task's `msg`).

use std::fmt::Write as _;

use minijinja::value::ValueKind;
use minijinja::{Error, ErrorKind, Value};

use super::pyops::{py_type, raised, Num};
use super::pyrepr::{py_repr_string, py_string};

/// The widest field (and the longest precision) a conversion may ask for.
const MAX_WIDTH: usize = 1 << 20;

/// The arguments of one `%`: a tuple's items, or one value (which, when it is a mapping or a
/// sequence, also answers `%(key)s`, as in CPython).
struct Args<'a> {
    items: Vec<Value>,
    /// The next positional argument; a single value is consumed once.
    next: usize,
    mapping: Option<&'a Value>,
}

impl Args<'_> {
    fn take(&mut self) -> Result<Value, Error> {
        let v = self
            .items
            .get(self.next)
            .cloned()
            .ok_or_else(|| raised("not enough arguments for format string"))?;
        self.next += 1;
        Ok(v)
    }
}

/// One conversion's flags, width and precision.
#[derive(Default)]
struct Spec {
    left: bool,
    zero: bool,
    plus: bool,
    space: bool,
    alt: bool,
    width: usize,
    precision: Option<usize>,
}

/// `fmt % args`. `tuple`: `args` was written as a tuple (`(a, b)`), whose items are the
/// arguments; any other value is one argument.
pub(super) fn format(fmt: &str, args: &Value, tuple: bool) -> Result<String, Error> {
    if args.is_undefined() {
        return Err(Error::from(ErrorKind::UndefinedError));
    }
    let mut a = if tuple {
        Args {
            items: args.try_iter()?.collect(),
            next: 0,
            mapping: None,
        }
    } else {
        let mapping = matches!(args.kind(), ValueKind::Map | ValueKind::Seq).then_some(args);
        Args {
            items: vec![args.clone()],
            next: 0,
            mapping,
        }
    };
    let chars: Vec<char> = fmt.chars().collect();
    let mut out = String::with_capacity(fmt.len() + 16);
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '%' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        i += 1;
        if chars.get(i) == Some(&'%') {
            out.push('%');
            i += 1;
            continue;
        }
        // `%(key)`: the value comes from the mapping (parentheses may nest in the key).
        let mut keyed = None;
        if chars.get(i) == Some(&'(') {
            let Some(m) = a.mapping else {
                return Err(raised("format requires a mapping"));
            };
            let mut depth = 1;
            let start = i + 1;
            i += 1;
            while i < chars.len() && depth > 0 {
                match chars[i] {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                i += 1;
            }
            if depth > 0 {
                return Err(raised("incomplete format key"));
            }
            let key: String = chars[start..i - 1].iter().collect();
            let v = m.get_item(&Value::from(key.as_str()))?;
            if v.is_undefined() {
                let mut quoted = String::new();
                super::pyrepr::py_quote(&key, &mut quoted);
                return Err(raised(&quoted));
            }
            keyed = Some(v);
        }
        let mut spec = Spec::default();
        while let Some(&c) = chars.get(i) {
            match c {
                '-' => spec.left = true,
                '0' => spec.zero = true,
                '+' => spec.plus = true,
                ' ' => spec.space = true,
                '#' => spec.alt = true,
                _ => break,
            }
            i += 1;
        }
        if chars.get(i) == Some(&'*') {
            let w = star(&mut a)?;
            if w < 0 {
                spec.left = true;
            }
            spec.width = w.unsigned_abs() as usize;
            i += 1;
        } else {
            spec.width = digits(&chars, &mut i);
        }
        if chars.get(i) == Some(&'.') {
            i += 1;
            if chars.get(i) == Some(&'*') {
                spec.precision = Some(star(&mut a)?.max(0) as usize);
                i += 1;
            } else {
                spec.precision = Some(digits(&chars, &mut i));
            }
        }
        while matches!(chars.get(i), Some('h' | 'l' | 'L')) {
            i += 1;
        }
        // Python would build any width; a template is not let run the controller out of memory.
        if spec.width > MAX_WIDTH {
            return Err(raised("width too big"));
        }
        if spec.precision.is_some_and(|p| p > MAX_WIDTH) {
            return Err(raised("precision too big"));
        }
        let Some(&conv) = chars.get(i) else {
            return Err(raised("incomplete format"));
        };
        let v = match keyed {
            Some(v) => v,
            None => a.take()?,
        };
        if v.is_undefined() {
            return Err(Error::from(ErrorKind::UndefinedError));
        }
        let piece = match conv {
            '%' => "%".to_string(),
            's' => text(py_string(&v)?, &spec),
            'r' => text(py_repr_string(&v)?, &spec),
            'a' => text(ascii(&py_repr_string(&v)?), &spec),
            'c' => text(char_of(&v)?.to_string(), &spec),
            'd' | 'i' | 'u' => integer(int_of(&v, conv, true)?, 10, false, &spec),
            'o' | 'x' | 'X' => integer(
                int_of(&v, conv, false)?,
                if conv == 'o' { 8 } else { 16 },
                conv == 'X',
                &spec,
            ),
            'e' | 'E' | 'f' | 'F' | 'g' | 'G' => float(real_of(&v)?, conv, &spec),
            other => {
                return Err(raised(&format!(
                    "unsupported format character '{other}' (0x{:x}) at index {}",
                    other as u32,
                    fmt.char_indices().nth(i).map_or(i, |(b, _)| b)
                )))
            }
        };
        out.push_str(&piece);
        i += 1;
    }
    if a.next < a.items.len() && a.mapping.is_none() {
        return Err(raised(
            "not all arguments converted during string formatting",
        ));
    }
    Ok(out)
}

fn digits(chars: &[char], i: &mut usize) -> usize {
    let mut n = 0usize;
    while let Some(d) = chars.get(*i).and_then(|c| c.to_digit(10)) {
        n = n.saturating_mul(10).saturating_add(d as usize);
        *i += 1;
    }
    n
}

/// A `*` width or precision: the next argument, an integer.
fn star(a: &mut Args<'_>) -> Result<i64, Error> {
    let v = a.take()?;
    match Num::of(&v) {
        Some(Num::Int(n)) => Ok(n.clamp(i64::MIN as i128, i64::MAX as i128) as i64),
        _ => Err(raised("* wants int")),
    }
}

/// Pads `s` to the width (spaces; `-` puts them on the right) after cutting it to the precision.
fn text(mut s: String, spec: &Spec) -> String {
    if let Some(p) = spec.precision {
        if let Some((cut, _)) = s.char_indices().nth(p) {
            s.truncate(cut);
        }
    }
    pad(String::new(), s, spec, false)
}

/// `sign` then `body`, padded to the width: spaces on the left or (`-`) the right, or zeros
/// between the sign and the digits (`0`, numbers only).
fn pad(sign: String, body: String, spec: &Spec, numeric: bool) -> String {
    let len = sign.chars().count() + body.chars().count();
    let fill = spec.width.saturating_sub(len);
    if spec.left {
        format!("{sign}{body}{}", " ".repeat(fill))
    } else if spec.zero && numeric {
        format!("{sign}{}{body}", "0".repeat(fill))
    } else {
        format!("{}{sign}{body}", " ".repeat(fill))
    }
}

fn sign_of(negative: bool, spec: &Spec) -> &'static str {
    if negative {
        "-"
    } else if spec.plus {
        "+"
    } else if spec.space {
        " "
    } else {
        ""
    }
}

/// The integer of `%d` (a float is truncated) or of `%o`/`%x` (integers only).
fn int_of(v: &Value, conv: char, real: bool) -> Result<i128, Error> {
    match Num::of(v) {
        Some(Num::Int(n)) => Ok(n),
        Some(Num::Float(f)) if real => {
            if f.is_nan() {
                Err(raised("cannot convert float NaN to integer"))
            } else if f.is_infinite() {
                Err(raised("cannot convert float infinity to integer"))
            } else {
                Ok(f.trunc() as i128)
            }
        }
        _ => Err(raised(&format!(
            "%{conv} format: {} is required, not {}",
            if real { "a real number" } else { "an integer" },
            py_type(v)
        ))),
    }
}

fn real_of(v: &Value) -> Result<f64, Error> {
    match Num::of(v) {
        Some(Num::Int(n)) => Ok(n as f64),
        Some(Num::Float(f)) => Ok(f),
        None => Err(raised(&format!("must be real number, not {}", py_type(v)))),
    }
}

fn char_of(v: &Value) -> Result<char, Error> {
    if let Some(s) = v.as_str() {
        let mut it = s.chars();
        if let (Some(c), None) = (it.next(), it.next()) {
            return Ok(c);
        }
        return Err(raised("%c requires int or char"));
    }
    match Num::of(v) {
        Some(Num::Int(n)) => u32::try_from(n)
            .ok()
            .and_then(char::from_u32)
            .ok_or_else(|| raised("%c arg not in range(0x110000)")),
        _ => Err(raised("%c requires int or char")),
    }
}

fn integer(n: i128, base: u32, upper: bool, spec: &Spec) -> String {
    let magnitude = n.unsigned_abs();
    let mut digits = match base {
        8 => format!("{magnitude:o}"),
        16 if upper => format!("{magnitude:X}"),
        16 => format!("{magnitude:x}"),
        _ => magnitude.to_string(),
    };
    if let Some(p) = spec.precision {
        if digits.len() < p {
            digits = format!("{}{digits}", "0".repeat(p - digits.len()));
        }
    }
    let prefix = match (spec.alt, base, upper) {
        (true, 8, _) => "0o",
        (true, 16, false) => "0x",
        (true, 16, true) => "0X",
        _ => "",
    };
    pad(
        format!("{}{prefix}", sign_of(n < 0, spec)),
        digits,
        spec,
        true,
    )
}

fn float(f: f64, conv: char, spec: &Spec) -> String {
    let upper = conv.is_ascii_uppercase();
    let sign = sign_of(f.is_sign_negative() && !f.is_nan(), spec).to_string();
    if !f.is_finite() {
        let body = if f.is_nan() { "nan" } else { "inf" };
        let body = if upper {
            body.to_uppercase()
        } else {
            body.to_string()
        };
        // Python pads infinities and NaN with spaces, never zeros.
        let no_zero = Spec {
            zero: false,
            left: spec.left,
            width: spec.width,
            ..Spec::default()
        };
        return pad(sign, body, &no_zero, false);
    }
    let x = f.abs();
    let prec = spec.precision.unwrap_or(6);
    let mut body = match conv.to_ascii_lowercase() {
        'f' => fixed(x, prec, spec.alt),
        'e' => exponent(x, prec, spec.alt),
        _ => general(x, prec, spec.alt),
    };
    if upper {
        body = body.to_uppercase();
    }
    pad(sign, body, spec, true)
}

fn fixed(x: f64, prec: usize, alt: bool) -> String {
    let mut s = format!("{x:.prec$}");
    if alt && prec == 0 {
        s.push('.');
    }
    s
}

/// C's `%e`: the exponent signed and at least two digits (`1.5e-05`).
fn exponent(x: f64, prec: usize, alt: bool) -> String {
    let s = format!("{x:.prec$e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut m = mantissa.to_string();
    if alt && prec == 0 {
        m.push('.');
    }
    let _ = write!(m, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    m
}

/// C's `%g`: `%e` or `%f` by the exponent, trailing zeros dropped unless `#`.
fn general(x: f64, prec: usize, alt: bool) -> String {
    let p = prec.max(1);
    let exp = if x == 0.0 {
        0
    } else {
        let s = format!("{x:.*e}", p - 1);
        s.split_once('e')
            .and_then(|(_, e)| e.parse::<i32>().ok())
            .unwrap_or(0)
    };
    let s = if exp >= -4 && exp < p as i32 {
        fixed(x, (p as i32 - 1 - exp).max(0) as usize, alt)
    } else {
        exponent(x, p - 1, alt)
    };
    if alt {
        return s;
    }
    let (num, exp_part) = match s.find('e') {
        Some(at) => (s[..at].to_string(), s[at..].to_string()),
        None => (s, String::new()),
    };
    let num = if num.contains('.') {
        num.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        num
    };
    num + &exp_part
}

/// Python's `ascii()` of a `repr()`: non-ASCII characters escaped.
fn ascii(repr: &str) -> String {
    let mut out = String::with_capacity(repr.len());
    for c in repr.chars() {
        let n = c as u32;
        if n < 0x80 {
            out.push(c);
        } else if n < 0x100 {
            let _ = write!(out, "\\x{n:02x}");
        } else if n < 0x10000 {
            let _ = write!(out, "\\u{n:04x}");
        } else {
            let _ = write!(out, "\\U{n:08x}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::format;
    use minijinja::Value;

    fn f(fmt: &str, args: Value) -> String {
        format(fmt, &args, true).unwrap_or_else(|e| panic!("{fmt}: {e}"))
    }

    fn err(fmt: &str, args: Value, tuple: bool) -> String {
        format(fmt, &args, tuple)
            .expect_err(fmt)
            .detail()
            .unwrap_or_default()
            .to_string()
    }

    #[test]
    fn conversions_match_python() {
        // Each expected string is what CPython 3.11 prints.
        assert_eq!(
            f(
                "%s|%r|%d|%i|%f|%x|%o|%%|%5.2f|%-4s|%04d|%e|%g|%X|%c",
                Value::from_serialize(serde_json::json!([
                    "a", "b", 3.7, -4, 1.5, 255, 8, 3.25159, "z", 42, 12345.678, 0.00001234, 255,
                    65
                ]))
            ),
            "a|'b'|3|-4|1.500000|ff|10|%| 3.25|z   |0042|1.234568e+04|1.234e-05|FF|A"
        );
        assert_eq!(
            f(
                "%5s|%-5d|%+d|% d|%#x|%#o|%.3s|%*d",
                Value::from_serialize(serde_json::json!(["ab", 3, 5, 6, 255, 8, "abcdef", 4, 7]))
            ),
            "   ab|3    |+5| 6|0xff|0o10|abc|   7"
        );
        assert_eq!(
            f(
                "%g %g %g %g %G",
                Value::from_serialize(serde_json::json!([100000, 1000000, 1.5e-5, 0.0001, 1e20]))
            ),
            "100000 1e+06 1.5e-05 0.0001 1E+20"
        );
        assert_eq!(
            f(
                "%#.0f|%#.3g|%05.1f|%-8.3e|%+.2e",
                Value::from_serialize(serde_json::json!([3, 1, -2.25, 12345, 0.000123]))
            ),
            "3.|1.00|-02.2|1.234e+04|+1.23e-04"
        );
        assert_eq!(
            f(
                "%.0f %.0f %.0f|%05d|%-05d|% 05d|%+.3d",
                Value::from_serialize(serde_json::json!([0.5, 1.5, 2.5, -42, 7, 9, 5]))
            ),
            "0 2 2|-0042|7    | 0009|+005"
        );
        assert_eq!(
            f("%a|%.2s|%5.1s|", Value::from(vec!["é", "abc", "xyz"])),
            "'\\xe9'|ab|    x|"
        );
        assert_eq!(
            f(
                "%i %u %s",
                Value::from_serialize(serde_json::json!([true, 3.9, true]))
            ),
            "1 3 True"
        );
    }

    #[test]
    fn one_value_and_mappings() {
        let m = Value::from_serialize(serde_json::json!({"a": "x", "b": 2}));
        assert_eq!(format("%(a)s-%(b)d", &m, false).unwrap(), "x-2");
        assert_eq!(format("%s", &m, false).unwrap(), "{'a': 'x', 'b': 2}");
        // A mapping (or a list, which CPython also takes for one) may go unused.
        assert_eq!(format("plain", &m, false).unwrap(), "plain");
        assert_eq!(
            format("plain", &Value::from(vec![1]), false).unwrap(),
            "plain"
        );
        assert_eq!(
            format("%s", &Value::from(vec![1, 2]), false).unwrap(),
            "[1, 2]"
        );
        assert_eq!(format("plain", &Value::from(()), true).unwrap(), "plain");
    }

    #[test]
    fn errors_are_pythons() {
        let one = || Value::from(1);
        assert_eq!(
            err("%d", Value::from("a"), false),
            "%d format: a real number is required, not str"
        );
        assert_eq!(
            err("%x", Value::from(1.5), false),
            "%x format: an integer is required, not float"
        );
        assert_eq!(
            err("%f", Value::from("a"), false),
            "must be real number, not str"
        );
        assert_eq!(
            err("%s %s", Value::from(vec!["a"]), true),
            "not enough arguments for format string"
        );
        assert_eq!(
            err("%s", Value::from(vec!["a", "b"]), true),
            "not all arguments converted during string formatting"
        );
        assert_eq!(
            err("abc", Value::from("x"), false),
            "not all arguments converted during string formatting"
        );
        assert_eq!(err("%(a)s", one(), false), "format requires a mapping");
        assert_eq!(err("%", one(), false), "incomplete format");
        assert_eq!(
            err("%y", one(), false),
            "unsupported format character 'y' (0x79) at index 1"
        );
        assert_eq!(
            err("%c", Value::from("ab"), false),
            "%c requires int or char"
        );
        assert_eq!(err("%99999999999d", one(), false), "width too big");
        assert_eq!(err("%.99999999999f", one(), false), "precision too big");
        assert_eq!(
            err(
                "%(a)s",
                Value::from_serialize(serde_json::json!({"b": 1})),
                false
            ),
            "'a'"
        );
    }
}
