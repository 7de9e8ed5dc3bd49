//! Python's `match.expand(template)` for `backrefs` (lineinfile) and `replace`: group references
//! and escapes, checked the way Python compiles them.

use crate::text::regex::{Captures, Regex};

/// Python's `match.expand(template)`: `\1`, `\g<1>`, `\g<name>`, and the escapes `\n`, `\t`, `\\`...
/// Groups that did not take part in the match expand to nothing, as in Python 3.5+.
pub(crate) fn expand_template(tpl: &[u8], re: &Regex, caps: &Captures) -> Result<Vec<u8>, String> {
    expand(tpl, re, Some(caps))
}

/// Check a replacement template against `re` without a match, as Python compiles it before
/// substituting: a bad escape or group fails even where nothing matches (`replace: '\D'`).
pub(crate) fn check_template(tpl: &[u8], re: &Regex) -> Result<(), String> {
    expand(tpl, re, None).map(|_| ())
}

/// [`expand_template`]; without `caps`, group references are checked and expand to nothing.
fn expand(tpl: &[u8], re: &Regex, caps: Option<&Captures>) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(tpl.len());
    let mut i = 0;
    let group = |out: &mut Vec<u8>, idx: usize| -> Result<(), String> {
        if idx >= re.captures_len() {
            return Err(format!("invalid group reference {idx}"));
        }
        if let Some(m) = caps.and_then(|c| c.get(idx)) {
            out.extend_from_slice(m.as_bytes());
        }
        Ok(())
    };
    let is_oct = |b: Option<&u8>| b.is_some_and(|c| (b'0'..=b'7').contains(c));
    while i < tpl.len() {
        let c = tpl[i];
        if c != b'\\' {
            out.push(c);
            i += 1;
            continue;
        }
        let Some(&n) = tpl.get(i + 1) else {
            return Err("bad escape (end of pattern)".into());
        };
        match n {
            b'g' => {
                let rest = &tpl[i + 2..];
                let close = rest
                    .strip_prefix(b"<")
                    .and_then(|r| r.iter().position(|b| *b == b'>'))
                    .ok_or("missing group name after \\g (write \\g<1> or \\g<name>)")?;
                let name = String::from_utf8_lossy(&rest[1..1 + close]).into_owned();
                if let Ok(idx) = name.parse::<usize>() {
                    group(&mut out, idx)?;
                } else {
                    match caps.and_then(|c| c.name(&name)) {
                        Some(m) => out.extend_from_slice(m.as_bytes()),
                        // A named group that exists but did not take part is empty.
                        None if re
                            .capture_names()
                            .any(|n| n.as_deref() == Some(name.as_str())) => {}
                        None => return Err(format!("unknown group name '{name}'")),
                    }
                }
                i += 2 + close + 2;
            }
            b'0' => {
                // Octal escape: \0 plus up to two more octal digits.
                let mut j = i + 2;
                let mut v: u32 = 0;
                while j < i + 4 && is_oct(tpl.get(j)) {
                    v = v * 8 + u32::from(tpl[j] - b'0');
                    j += 1;
                }
                out.push(v as u8);
                i = j;
            }
            b'1'..=b'9' => {
                let d1 = tpl.get(i + 2);
                if d1.is_some_and(u8::is_ascii_digit) {
                    if is_oct(Some(&n)) && is_oct(d1) && is_oct(tpl.get(i + 3)) {
                        let v = u32::from(n - b'0') * 64
                            + u32::from(tpl[i + 2] - b'0') * 8
                            + u32::from(tpl[i + 3] - b'0');
                        if v > 0o377 {
                            return Err(format!(
                                "octal escape value \\{v:o} outside of range 0-0o377"
                            ));
                        }
                        out.push(v as u8);
                        i += 4;
                    } else {
                        group(
                            &mut out,
                            usize::from(n - b'0') * 10 + usize::from(tpl[i + 2] - b'0'),
                        )?;
                        i += 3;
                    }
                } else {
                    group(&mut out, usize::from(n - b'0'))?;
                    i += 2;
                }
            }
            b'a' | b'b' | b'f' | b'n' | b'r' | b't' | b'v' | b'\\' => {
                out.push(match n {
                    b'a' => 0x07,
                    b'b' => 0x08,
                    b'f' => 0x0c,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'v' => 0x0b,
                    _ => b'\\',
                });
                i += 2;
            }
            n if n.is_ascii_alphabetic() => {
                return Err(format!("bad escape \\{}", n as char));
            }
            // Any other escaped character stays as written, backslash included.
            n => {
                out.push(b'\\');
                out.push(n);
                i += 2;
            }
        }
    }
    Ok(out)
}
