//! Jinja2's text layout filters as Python computes them: `center` (`str.center`), `truncate`,
//! `filesizeformat` and `wordwrap` (Python's `textwrap` rules for where a line may break,
//! which the `textwrap` crate does not follow).

use minijinja::value::{Rest, ValueKind};
use minijinja::{Error, Value};

use super::args::{bind, given, py_index, py_isspace, py_splitlines};
use super::types::filter_type_debug;
use crate::template::pyrepr::py_string;
use crate::template::value::{defined, op_err};

/// Jinja2's `center(width=80)`: Python's `str.center` of the value's text, the odd space on
/// the left only when the width is odd too.
pub(super) fn filter_center(value: &Value, args: Rest<Value>) -> Result<String, Error> {
    let a = bind("center", &args, &["width"])?;
    let s = py_string(defined(value)?)?;
    let width = a[0].as_ref().map(py_index).transpose()?.unwrap_or(80);
    let len = s.chars().count() as i64;
    if width <= len {
        return Ok(s);
    }
    let pad = width - len;
    let left = pad / 2 + (pad & width & 1);
    let spaces = |n: i64| " ".repeat(n as usize);
    Ok(format!("{}{s}{}", spaces(left), spaces(pad - left)))
}

/// Jinja2's `truncate(length=255, killwords=False, end='...', leeway=5)`: text longer than
/// `length + leeway` cut to `length` with `end`, at the last space unless `killwords`.
pub(super) fn filter_truncate(value: &Value, args: Rest<Value>) -> Result<Value, Error> {
    let a = bind("truncate", &args, &["length", "killwords", "end", "leeway"])?;
    let length = match &a[0] {
        Some(v) if v.kind() == ValueKind::String => {
            return Err(op_err(
                "'>=' not supported between instances of 'str' and 'int'",
            ))
        }
        Some(v) => py_index(v)?,
        None => 255,
    };
    let killwords = a[1].as_ref().is_some_and(Value::is_true);
    let end = match &a[2] {
        Some(v) => v.as_str().ok_or_else(|| no_len(v))?.to_string(),
        None => "...".to_string(),
    };
    let leeway = given(&a[3]).map(py_index).transpose()?.unwrap_or(5);
    let end_len = end.chars().count() as i64;
    if length < end_len {
        return Err(op_err(format!(
            "expected length >= {end_len}, got {length}"
        )));
    }
    if leeway < 0 {
        return Err(op_err(format!("expected leeway >= 0, got {leeway}")));
    }
    let Some(s) = defined(value)?.as_str() else {
        // Python measures any sized value and hands it back when it is short enough; cutting
        // one is a string operation it fails.
        let len = match value.kind() {
            ValueKind::Seq | ValueKind::Map => value.len().unwrap_or(0) as i64,
            _ => return Err(no_len(value)),
        };
        if len <= length + leeway {
            return Ok(value.clone());
        }
        return Err(op_err(format!(
            "'{}' object has no attribute 'rsplit'",
            filter_type_debug(value)
        )));
    };
    if s.chars().count() as i64 <= length + leeway {
        return Ok(value.clone());
    }
    let head: String = s.chars().take((length - end_len) as usize).collect();
    let kept = if killwords {
        head.as_str()
    } else {
        head.rsplit_once(' ').map_or(head.as_str(), |(h, _)| h)
    };
    Ok(Value::from(format!("{kept}{end}")))
}

fn no_len(v: &Value) -> Error {
    op_err(format!(
        "object of type '{}' has no len()",
        filter_type_debug(v)
    ))
}

/// Python's `float()` of a value: numbers, bools and numeric text (surrounding white space,
/// `_` between digits, `inf` and `nan` allowed).
fn py_float(v: &Value) -> Result<f64, Error> {
    match defined(v)?.kind() {
        ValueKind::Bool => Ok(if v.is_true() { 1.0 } else { 0.0 }),
        ValueKind::Number => f64::try_from(v.clone()),
        ValueKind::String => {
            let s = v.as_str().unwrap_or_default();
            let t = s.trim_matches(py_isspace);
            let b = t.as_bytes();
            let underscores_ok = b.iter().enumerate().all(|(i, &c)| {
                c != b'_'
                    || (i > 0
                        && b[i - 1].is_ascii_digit()
                        && b.get(i + 1).is_some_and(u8::is_ascii_digit))
            });
            underscores_ok
                .then(|| t.replace('_', "").parse::<f64>().ok())
                .flatten()
                .ok_or_else(|| {
                    op_err(format!(
                        "could not convert string to float: {}",
                        crate::template::pyrepr::py_repr_string(v).unwrap_or_default()
                    ))
                })
        }
        _ => Err(op_err(format!(
            "float() argument must be a string or a real number, not '{}'",
            filter_type_debug(v)
        ))),
    }
}

/// Jinja2's `filesizeformat(binary=False)`: bytes below one kilo(bi)byte as a whole number,
/// then one decimal in the largest unit that keeps the number below the base (YB at most).
pub(super) fn filter_filesizeformat(value: &Value, args: Rest<Value>) -> Result<String, Error> {
    let a = bind("filesizeformat", &args, &["binary"])?;
    let bytes = py_float(value)?;
    let binary = a[0].as_ref().is_some_and(Value::is_true);
    let (base, prefixes) = if binary {
        (
            1024.0,
            ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"],
        )
    } else {
        (1000.0, ["kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"])
    };
    if bytes == 1.0 {
        return Ok("1 Byte".into());
    }
    if bytes < base {
        if bytes.is_infinite() {
            return Err(op_err("cannot convert float infinity to integer"));
        }
        // Python's int() of the float: every digit of its exact value.
        return Ok(format!("{:.0} Bytes", bytes.trunc()));
    }
    for (i, prefix) in prefixes.iter().enumerate() {
        let n = i as i32 + 2;
        let unit: f64 = if binary {
            2f64.powi(10 * n)
        } else {
            format!("1e{}", 3 * n).parse().unwrap_or(f64::INFINITY)
        };
        // Python compares the float with the exact integer `base ** n`; above 10**22 a power
        // of ten is no float, and its nearest float may lie just below it.
        let below = bytes < unit
            || (bytes == unit && !binary && format!("{unit:.0}").len() <= 3 * n as usize);
        if below || i == prefixes.len() - 1 {
            let x = base * bytes / unit;
            return Ok(if x.is_nan() {
                format!("nan {prefix}")
            } else {
                format!("{x:.1} {prefix}")
            });
        }
    }
    unreachable!("the last prefix always answers")
}

/// Jinja2's `wordwrap(width=79, break_long_words=True, wrapstring='\n',
/// break_on_hyphens=True)`: each line of the text wrapped on its own by Python's
/// `textwrap.wrap` (tabs and other white space kept as they are), all joined by `wrapstring`.
pub(super) fn filter_wordwrap(value: &Value, args: Rest<Value>) -> Result<String, Error> {
    let a = bind(
        "wordwrap",
        &args,
        &[
            "width",
            "break_long_words",
            "wrapstring",
            "break_on_hyphens",
        ],
    )?;
    let Some(s) = defined(value)?.as_str() else {
        return Err(op_err(format!(
            "'{}' object has no attribute 'splitlines'",
            filter_type_debug(value)
        )));
    };
    let width = a[0].as_ref().map(py_index).transpose()?.unwrap_or(79);
    let wrapper = Wrapper {
        width,
        break_long_words: a[1].as_ref().is_none_or(Value::is_true),
        break_on_hyphens: a[3].as_ref().is_none_or(Value::is_true),
    };
    let wrapstring = match given(&a[2]) {
        Some(w) => py_string(w)?,
        None => "\n".to_string(),
    };
    let mut paragraphs = Vec::new();
    for line in py_splitlines(s) {
        paragraphs.push(wrapper.wrap(line)?.join(&wrapstring));
    }
    Ok(paragraphs.join(&wrapstring))
}

/// Python's `textwrap.TextWrapper` with Jinja2's options: no indents, no line limit,
/// white space dropped at the ends of lines but not replaced.
struct Wrapper {
    width: i64,
    break_long_words: bool,
    break_on_hyphens: bool,
}

/// The white space textwrap splits on: ASCII's six characters only.
fn tw_space(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\x0b' | '\x0c' | '\r' | ' ')
}

/// Python's `\w` (a Unicode letter, digit or `_`).
fn word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// textwrap's "letter": a word character that is not a decimal digit (`²` is a letter).
fn letter(c: char) -> bool {
    word(c) && !decimal(c)
}

/// Python's `\d`: Unicode's decimal digits (category Nd), which come in runs of ten from a
/// zero; these are the zeros of Unicode 14, the version Python 3.11 reads.
fn decimal(c: char) -> bool {
    const ZEROS: [u32; 66] = [
        0x30, 0x660, 0x6f0, 0x7c0, 0x966, 0x9e6, 0xa66, 0xae6, 0xb66, 0xbe6, 0xc66, 0xce6, 0xd66,
        0xde6, 0xe50, 0xed0, 0xf20, 0x1040, 0x1090, 0x17e0, 0x1810, 0x1946, 0x19d0, 0x1a80, 0x1a90,
        0x1b50, 0x1bb0, 0x1c40, 0x1c50, 0xa620, 0xa8d0, 0xa900, 0xa9d0, 0xa9f0, 0xaa50, 0xabf0,
        0xff10, 0x104a0, 0x10d30, 0x11066, 0x110f0, 0x11136, 0x111d0, 0x112f0, 0x11450, 0x114d0,
        0x11650, 0x116c0, 0x11730, 0x118e0, 0x11950, 0x11c50, 0x11d50, 0x11da0, 0x16a60, 0x16ac0,
        0x16b50, 0x1d7ce, 0x1d7d8, 0x1d7e2, 0x1d7ec, 0x1d7f6, 0x1e140, 0x1e2f0, 0x1e950, 0x1fbf0,
    ];
    let n = c as u32;
    c.is_ascii_digit() || (n > 0x7f && ZEROS.iter().any(|&z| (z..z + 10).contains(&n)))
}

/// Characters that may end a word before an em-dash (`--`).
fn word_punct(c: char) -> bool {
    word(c) || "!\"'&.,?".contains(c)
}

impl Wrapper {
    fn wrap(&self, text: &str) -> Result<Vec<String>, Error> {
        let chars: Vec<char> = text.chars().collect();
        let chunks = if self.break_on_hyphens {
            hyphen_chunks(&chars)
        } else {
            space_chunks(&chars)
        };
        self.wrap_chunks(chunks)
    }

    /// Lines filled greedily with whole chunks; white space dropped where a line ends and
    /// where a later one starts; a chunk wider than a line cut (after its last hyphen that
    /// fits, when hyphens may break) or, without `break_long_words`, left whole on its line.
    fn wrap_chunks(&self, mut chunks: Vec<Vec<char>>) -> Result<Vec<String>, Error> {
        if self.width <= 0 {
            return Err(op_err(format!(
                "invalid width {} (must be > 0)",
                self.width
            )));
        }
        let width = self.width as usize;
        let blank = |c: &[char]| c.iter().all(|&c| py_isspace(c));
        chunks.reverse();
        let mut lines: Vec<String> = Vec::new();
        while !chunks.is_empty() {
            let mut line: Vec<Vec<char>> = Vec::new();
            let mut len = 0;
            if !lines.is_empty() && chunks.last().is_some_and(|c| blank(c)) {
                chunks.pop();
            }
            while let Some(c) = chunks.last() {
                if len + c.len() > width {
                    break;
                }
                len += c.len();
                line.extend(chunks.pop());
            }
            if chunks.last().is_some_and(|c| c.len() > width) {
                self.long_word(&mut chunks, &mut line, len, width);
            }
            if line.last().is_some_and(|c| blank(c)) {
                line.pop();
            }
            if !line.is_empty() {
                lines.push(line.concat().into_iter().collect());
            }
        }
        Ok(lines)
    }

    fn long_word(
        &self,
        chunks: &mut Vec<Vec<char>>,
        line: &mut Vec<Vec<char>>,
        len: usize,
        width: usize,
    ) {
        let space_left = if width < 1 { 1 } else { width - len };
        if self.break_long_words {
            let Some(chunk) = chunks.last_mut() else {
                return;
            };
            let mut end = space_left.min(chunk.len());
            if self.break_on_hyphens && chunk.len() > space_left {
                let hyphen = chunk[..space_left].iter().rposition(|&c| c == '-');
                if let Some(h) = hyphen.filter(|&h| h > 0 && chunk[..h].iter().any(|&c| c != '-')) {
                    end = h + 1;
                }
            }
            let rest = chunk.split_off(end);
            line.push(std::mem::replace(chunk, rest));
        } else if line.is_empty() {
            line.extend(chunks.pop());
        }
    }
}

/// textwrap's split without `break_on_hyphens`: runs of white space and runs of the rest.
fn space_chunks(chars: &[char]) -> Vec<Vec<char>> {
    let mut out: Vec<Vec<char>> = Vec::new();
    for &c in chars {
        match out.last_mut() {
            Some(last) if tw_space(last[0]) == tw_space(c) => last.push(c),
            _ => out.push(vec![c]),
        }
    }
    out
}

/// textwrap's split with `break_on_hyphens`: runs of white space; a run of hyphens (an
/// em-dash) between a word and a word character; and words, each ending at white space, at
/// such an em-dash, or just after a hyphen between two letters on each side (`well-` of
/// `well-known`; `a-b-` of `a-b-c`, where a single letter alternates with hyphens).
fn hyphen_chunks(chars: &[char]) -> Vec<Vec<char>> {
    let at = |i: usize| chars.get(i).copied();
    let is = |i: usize, f: fn(char) -> bool| at(i).is_some_and(f);
    // An em-dash starts at `i`: two or more hyphens, then a word character.
    let dash_at = |i: usize| {
        let n = chars[i..].iter().take_while(|&&c| c == '-').count();
        n >= 2 && is(i + n, word)
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let end = if tw_space(chars[i]) {
            i + chars[i..].iter().take_while(|&&c| tw_space(c)).count()
        } else if i > 0 && word_punct(chars[i - 1]) && dash_at(i) {
            i + chars[i..].iter().take_while(|&&c| c == '-').count()
        } else {
            let run_end = i + chars[i..].iter().take_while(|&&c| !tw_space(c)).count();
            let mut k = i + 1;
            loop {
                if k >= run_end {
                    break run_end;
                }
                if chars[k] == '-' {
                    let before = (k >= 2 && is(k - 2, letter) && is(k - 1, letter))
                        || (k >= 3
                            && is(k - 3, letter)
                            && at(k - 2) == Some('-')
                            && is(k - 1, letter));
                    let after = is(k + 1, letter)
                        && (is(k + 2, letter) || (at(k + 2) == Some('-') && is(k + 3, letter)));
                    if before && after {
                        break k + 1;
                    }
                }
                if word_punct(chars[k - 1]) && dash_at(k) {
                    break k;
                }
                k += 1;
            }
        };
        out.push(chars[i..end].to_vec());
        i = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use serde_json::json;

    #[test]
    fn center_truncate_filesizeformat() {
        assert_eq!(
            eval("['abc' | center(8), 'ab' | center(7), 'ab' | center(1), 5 | center(4)]"),
            json!(["  abc   ", "   ab  ", "ab", " 5  "])
        );
        assert_eq!(
            eval("['foo bar baz qux' | truncate(9), 'foo bar baz qux' | truncate(9, True), 'foo bar baz qux' | truncate(11), 'foo bar baz qux' | truncate(11, False, '...', 0), 'foobarbazqux' | truncate(8, leeway=0)]"),
            json!(["foo...", "foo ba...", "foo bar baz qux", "foo bar...", "fooba..."])
        );
        assert_eq!(eval("[1, 2] | truncate"), json!([1, 2]));
        assert_eq!(
            eval("[1048576 | filesizeformat, 1048576 | filesizeformat(true), 1 | filesizeformat, 999 | filesizeformat, 1.5 | filesizeformat, -5000 | filesizeformat, 1e30 | filesizeformat, 1e30 | filesizeformat(binary=true), '2500' | filesizeformat, -1e30 | filesizeformat]"),
            json!(["1.0 MB", "1.0 MiB", "1 Byte", "999 Bytes", "1 Bytes", "-5000 Bytes", "1000000.0 YB", "827180.6 YiB", "2.5 kB", "-1000000000000000019884624838656 Bytes"])
        );
    }

    #[test]
    fn wordwrap_breaks_where_python_textwrap_does() {
        let long = "The quick brown fox jumps over the lazy dog; a well-known pangram, with some extraordinarily-long-hyphenated-words and --dashes-- too.";
        let wrap = |args: &str| wrap_long(&format!("long | wordwrap({args})"), long);
        assert_eq!(wrap("20"), "The quick brown fox\njumps over the lazy\ndog; a well-known\npangram, with some\nextraordinarily-\nlong-hyphenated-\nwords and --dashes--\ntoo.");
        assert_eq!(wrap("20, break_on_hyphens=false"), "The quick brown fox\njumps over the lazy\ndog; a well-known\npangram, with some e\nxtraordinarily-long-\nhyphenated-words and\n--dashes-- too.");
        assert_eq!(wrap("10, false"), "The quick\nbrown fox\njumps over\nthe lazy\ndog; a\nwell-known\npangram,\nwith some\nextraordinarily-\nlong-\nhyphenated-\nwords and\n--dashes--\ntoo.");
        assert_eq!(wrap("10, true, '|'"), "The quick|brown fox|jumps over|the lazy|dog; a|well-known|pangram,|with some |extraordin|arily-|long-hyphe|nated-|words and|--dashes--|too.");
        assert_eq!(
            eval("['a-b-c-d-e-f-g-h' | wordwrap(4), 'abc--def ghi' | wordwrap(5), 'ab-cd-ef--gh-ij' | wordwrap(6), 'hello-world-foo-bar' | wordwrap(8), '----------' | wordwrap(3), 'a1-b2-c3 x' | wordwrap(3), 'abb²-²c' | wordwrap(4, false)]"),
            json!(["a-b-\nc-d-\ne-f-\ng-h", "abc--\ndef\nghi", "ab-cd-\nef--\ngh-ij", "hello-\nworld-\nfoo-bar", "---\n---\n---\n-", "a1-\nb2-\nc3\nx", "abb²-\n²c"])
        );
        assert_eq!(
            eval("['one\\ntwo three four\\n\\nfive  six   seven' | wordwrap(9), '   leading and trailing   ' | wordwrap(8), 'tab\\there and\\ttabs' | wordwrap(6), '' | wordwrap(0)]"),
            json!(["one\ntwo three\nfour\n\nfive  six\nseven", "leading\nand\ntrailing", "tab\nhere\nand\ntabs", ""])
        );
    }

    fn wrap_long(expr: &str, long: &str) -> String {
        let v = ctx(json!({ "long": long }));
        crate::template::Templar::new()
            .eval(expr, &v)
            .unwrap_or_else(|e| panic!("{expr}: {e}"))
            .as_str()
            .unwrap()
            .to_string()
    }
}
