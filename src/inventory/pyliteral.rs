//! A Python `ast.literal_eval` clone for INI inventory values, which Ansible evaluates as Python
//! literals (not YAML): `2222` is an int, `'x'` a string, `[1, 2]` a list, anything else text.

use serde_json::{Map, Value};

/// A `[g:vars]` value: Python-literal evaluated like Ansible (`2222` → int, `'x'` → string),
/// with `true`/`false` also taken as booleans; anything else is the string itself.
pub fn parse_value(v: &str) -> Value {
    parse_literal(v).unwrap_or_else(|| Value::String(v.to_string()))
}

/// An inline host variable value after shell splitting: quoted scalars stay strings
/// (`port="22"`), quoted lists/dicts are still structures, unquoted text is literal-evaluated.
pub fn parse_inline_value(v: &str, quoted: bool) -> Value {
    if quoted {
        if v.starts_with(['[', '{']) {
            if let Some(x @ (Value::Array(_) | Value::Object(_))) = parse_literal(v) {
                return x;
            }
        }
        return Value::String(v.to_string());
    }
    parse_value(v)
}

/// Evaluate a Python literal (`ast.literal_eval`): numbers, strings, booleans, None, lists,
/// tuples and dicts. `None` when the text is not one.
fn parse_literal(s: &str) -> Option<Value> {
    let mut p = Lit {
        s: s.as_bytes(),
        src: s,
        i: 0,
        depth: 0,
    };
    let v = p.value()?;
    p.ws();
    (p.i == p.s.len()).then_some(v)
}

/// The deepest bracket nesting Python's parser accepts.
const MAX_NESTING: usize = 200;

struct Lit<'a> {
    s: &'a [u8],
    src: &'a str,
    i: usize,
    /// Brackets open around the current position.
    depth: usize,
}

impl Lit<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
        // Python ignores a trailing comment.
        if self.s.get(self.i) == Some(&b'#') {
            self.i = self.s.len();
        }
    }

    fn eat(&mut self, b: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&b) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self) -> Option<Value> {
        self.ws();
        match *self.s.get(self.i)? {
            b'\'' | b'"' => self.string().map(Value::String),
            open @ (b'[' | b'(' | b'{') => {
                // Python's parser refuses more than 200 nested brackets ("too many nested
                // parentheses"), so Ansible keeps such a value as text. The bound also keeps
                // this recursion well inside the stack.
                if self.depth == MAX_NESTING {
                    return None;
                }
                self.depth += 1;
                self.i += 1;
                let v = match open {
                    b'[' => self.seq(b']').map(Value::Array),
                    b'(' => self.seq(b')').map(Value::Array),
                    _ => self.dict(),
                };
                self.depth -= 1;
                v
            }
            b'-' | b'+' | b'.' | b'0'..=b'9' => self.number(),
            _ => {
                let start = self.i;
                while self.i < self.s.len()
                    && (self.s[self.i].is_ascii_alphanumeric() || self.s[self.i] == b'_')
                {
                    self.i += 1;
                }
                match &self.src[start..self.i] {
                    "True" | "true" => Some(Value::Bool(true)),
                    "False" | "false" => Some(Value::Bool(false)),
                    "None" => Some(Value::Null),
                    _ => None,
                }
            }
        }
    }

    fn seq(&mut self, close: u8) -> Option<Vec<Value>> {
        let mut items = Vec::new();
        loop {
            if self.eat(close) {
                return Some(items);
            }
            items.push(self.value()?);
            if !self.eat(b',') {
                return self.eat(close).then_some(items);
            }
        }
    }

    fn dict(&mut self) -> Option<Value> {
        let mut m = Map::new();
        loop {
            if self.eat(b'}') {
                return Some(Value::Object(m));
            }
            let key = match self.value()? {
                Value::String(s) => s,
                other => other.to_string(),
            };
            if !self.eat(b':') {
                return None;
            }
            m.insert(key, self.value()?);
            if !self.eat(b',') {
                return self.eat(b'}').then_some(Value::Object(m));
            }
        }
    }

    fn string(&mut self) -> Option<String> {
        let q = self.s[self.i];
        self.i += 1;
        let mut out = String::new();
        let rest = &self.src[self.i..];
        let mut it = rest.char_indices();
        while let Some((j, c)) = it.next() {
            if c as u32 == q as u32 {
                self.i += j + 1;
                return Some(out);
            }
            if c == '\\' {
                let (_, n) = it.next()?;
                match n {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    '0' => out.push('\0'),
                    '\\' | '\'' | '"' => out.push(n),
                    other => {
                        out.push('\\');
                        out.push(other);
                    }
                }
            } else {
                out.push(c);
            }
        }
        None
    }

    fn number(&mut self) -> Option<Value> {
        let start = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric()
                || matches!(self.s[self.i], b'.' | b'+' | b'-' | b'_'))
        {
            // A sign only starts the number or follows an exponent.
            if matches!(self.s[self.i], b'+' | b'-')
                && self.i > start
                && !matches!(self.s[self.i - 1], b'e' | b'E')
            {
                break;
            }
            self.i += 1;
        }
        let text = &self.src[start..self.i];
        let (neg, digits) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let sign = if neg { -1 } else { 1 };
        let radix = |prefix: &[&str], r: u32| {
            prefix
                .iter()
                .find_map(|p| digits.strip_prefix(p))
                // Python also allows one `_` right after the base prefix (`0x_1f`).
                .map(|d| d.strip_prefix('_').unwrap_or(d))
                .and_then(|d| without_underscores(d, |c| c.is_ascii_alphanumeric()))
                .and_then(|d| i64::from_str_radix(&d, r).ok())
        };
        if let Some(n) = radix(&["0x", "0X"], 16)
            .or_else(|| radix(&["0o", "0O"], 8))
            .or_else(|| radix(&["0b", "0B"], 2))
        {
            return Some(Value::from(sign * n));
        }
        let digits = without_underscores(digits, |c| c.is_ascii_digit())?;
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            // Python 3 rejects leading zeros (`010`), which keeps such values strings.
            if digits.len() > 1 && digits.starts_with('0') && digits.bytes().any(|b| b != b'0') {
                return None;
            }
            return digits.parse::<i64>().ok().map(|n| Value::from(sign * n));
        }
        let float_like = digits.bytes().any(|b| b.is_ascii_digit())
            && digits
                .bytes()
                .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
        if float_like {
            let f: f64 = digits.parse().ok()?;
            return serde_json::Number::from_f64(if neg { -f } else { f }).map(Value::Number);
        }
        None
    }
}

/// Python's digit grouping: each `_` must sit between two digits (`1_000`, not `1__0`, `1_`
/// or `1_.5`); `None` when one does not, which makes the value a plain string.
fn without_underscores(text: &str, is_digit: impl Fn(u8) -> bool) -> Option<String> {
    let b = text.as_bytes();
    let grouped = b.iter().enumerate().all(|(i, &c)| {
        c != b'_' || (i > 0 && is_digit(b[i - 1]) && b.get(i + 1).is_some_and(|&n| is_digit(n)))
    });
    grouped.then(|| text.replace('_', ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_eval_subset() {
        assert_eq!(
            parse_literal("{'a': [1, 2.5], 'b': (True,)}"),
            Some(serde_json::json!({"a": [1, 2.5], "b": [true]}))
        );
        assert_eq!(parse_literal("0x1f"), Some(Value::from(31)));
        assert_eq!(parse_literal("1e3"), Some(serde_json::json!(1000.0)));
        assert_eq!(parse_literal("hello"), None);
        assert_eq!(parse_literal("1.2.3"), None);
        assert_eq!(parse_literal("'a' 'b'"), None);
    }

    #[test]
    fn literal_eval_digit_grouping_like_python() {
        assert_eq!(parse_literal("1_000"), Some(Value::from(1000)));
        assert_eq!(parse_literal("-1_000"), Some(Value::from(-1000)));
        assert_eq!(parse_literal("0x_1F"), Some(Value::from(31)));
        assert_eq!(parse_literal("0x1_f"), Some(Value::from(31)));
        assert_eq!(parse_literal("0o1_7"), Some(Value::from(15)));
        assert_eq!(parse_literal("1_0.5"), Some(serde_json::json!(10.5)));
        for bad in ["1__0", "1_", "_1", "1_.5", "1._5", "0x__1", "1e_5"] {
            assert_eq!(parse_literal(bad), None, "{bad}");
        }
    }

    #[test]
    fn nesting_deeper_than_python_allows_is_text() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(parse_value(&nested(200)).is_array());
        // ast.literal_eval: "too many nested parentheses"; Ansible keeps the text.
        assert_eq!(parse_value(&nested(201)), Value::String(nested(201)));
        assert_eq!(
            parse_value(&"({1: ".repeat(300)),
            Value::String("({1: ".repeat(300))
        );
        // Through the literal_eval fuzz target, this overflowed the stack.
        let deep = "[".repeat(100_000);
        assert_eq!(parse_value(&deep), Value::String(deep.clone()));
    }
}
