//! Ansible's free-form `k=v` arguments: splitting and decoding them as ansible-core's
//! `parse_kv` does, and the inline guards of a free-form command.
use crate::diag::{Diagnostic, Pos};
use serde_json::{Map, Value};

/// Split Ansible's `k=v k2="a b"` free-form arguments as ansible-core's `parse_kv` does: words
/// are split on whitespace outside quotes and outside `{{ }}`, `{% %}` and `{# #}` (so
/// `path={{ base }}/d` is one word), escapes (`\n`, `\"`...) are decoded, and a value loses
/// the quotes around it.
pub fn parse_kv(s: &str, pos: &Pos) -> Result<Map<String, Value>, Diagnostic> {
    let words = split_args(s).ok_or_else(|| {
        Diagnostic::at(
            pos,
            format!("cannot parse the arguments `{s}`: unbalanced quotes or template delimiters"),
        )
    })?;
    let mut m = Map::new();
    for w in words {
        let w = decode_escapes(&w);
        // The first `=` not escaped by a backslash (and not the first character).
        let eq = w
            .char_indices()
            .skip(1)
            .find(|&(i, c)| c == '=' && !w[..i].ends_with('\\'))
            .map(|(i, _)| i);
        match eq {
            Some(i) => {
                let (k, v) = (w[..i].trim(), w[i + 1..].trim());
                m.insert(k.to_string(), Value::String(unquote(v).to_string()));
            }
            None => {
                return Err(Diagnostic::at(
                    pos,
                    format!("expected key=value arguments, found `{w}`"),
                )
                .help("write the module's parameters as a mapping under the module name"))
            }
        }
    }
    Ok(m)
}

/// Words of a `k=v` string: whitespace splits them, except inside quotes (kept in the word) and
/// inside template delimiters. None when a quote or a delimiter is left open.
fn split_args(s: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    // Open `{{`, `{%`, `{#` blocks.
    let mut depth = [0usize; 3];
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let in_jinja = depth.iter().any(|d| *d > 0);
        if !in_jinja {
            if let Some(q) = quote {
                cur.push(c);
                if c == '\\' {
                    if let Some(n) = next {
                        cur.push(n);
                        i += 1;
                    }
                } else if c == q {
                    quote = None;
                }
                i += 1;
                continue;
            }
            if c == '"' || c == '\'' {
                quote = Some(c);
                cur.push(c);
                i += 1;
                continue;
            }
            if c == '\\' {
                cur.push(c);
                if let Some(n) = next {
                    cur.push(n);
                    i += 1;
                }
                i += 1;
                continue;
            }
            if c.is_whitespace() {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
                i += 1;
                continue;
            }
        }
        let opener = ['{', '{', '{'];
        let closers = [('{', '}', '}'), ('%', '%', '}'), ('#', '#', '}')];
        let mut stepped = false;
        for (k, (open2, close1, close2)) in closers.iter().enumerate() {
            if c == opener[k] && next == Some(*open2) {
                depth[k] += 1;
                stepped = true;
            } else if c == *close1 && next == Some(*close2) && depth[k] > 0 {
                depth[k] -= 1;
                stepped = true;
            }
            if stepped {
                cur.push(c);
                cur.push(next.unwrap_or_default());
                i += 2;
                break;
            }
        }
        if !stepped {
            cur.push(c);
            i += 1;
        }
    }
    if quote.is_some() || depth.iter().any(|d| *d > 0) {
        return None;
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    Some(words)
}

/// The value without the matching quotes around it, as Ansible's `unquote`.
fn unquote(v: &str) -> &str {
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return &v[1..v.len() - 1];
        }
    }
    v
}

/// Python's string escapes in a `k=v` word (`\n`, `\t`, `\\`, `\"`, `\xHH`, `\uHHHH`...),
/// as ansible-core decodes them; other backslashes are kept.
fn decode_escapes(w: &str) -> String {
    let mut out = String::with_capacity(w.len());
    let mut it = w.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let simple = match it.peek() {
            Some('\\') => Some('\\'),
            Some('\'') => Some('\''),
            Some('"') => Some('"'),
            Some('a') => Some('\u{7}'),
            Some('b') => Some('\u{8}'),
            Some('f') => Some('\u{c}'),
            Some('n') => Some('\n'),
            Some('r') => Some('\r'),
            Some('t') => Some('\t'),
            Some('v') => Some('\u{b}'),
            _ => None,
        };
        if let Some(d) = simple {
            it.next();
            out.push(d);
            continue;
        }
        let width = match it.peek() {
            Some('x') => 2,
            Some('u') => 4,
            Some('U') => 8,
            _ => 0,
        };
        if width > 0 {
            let rest: String = it.clone().skip(1).take(width).collect();
            if rest.len() == width && rest.chars().all(|h| h.is_ascii_hexdigit()) {
                if let Some(d) = u32::from_str_radix(&rest, 16).ok().and_then(char::from_u32) {
                    for _ in 0..=width {
                        it.next();
                    }
                    out.push(d);
                    continue;
                }
            }
        }
        out.push(c);
    }
    out
}

/// The parameters `command`/`shell`/`raw`/`script` take inline in their free-form string (the
/// list ansible-core's `parse_kv` checks when it keeps the rest as the command).
const COMMAND_INLINE: &[&str] = &[
    "creates",
    "removes",
    "chdir",
    "executable",
    "warn",
    "stdin",
    "stdin_add_newline",
    "strip_empty_ends",
];

/// A free-form command (`shell: echo hi creates=/x`): its inline parameters and, as `cmd`, the
/// rest, rebuilt as ansible-core rebuilds it: newlines and runs of spaces kept, a `\` ending a
/// line outside quotes joins it to the next (the multiline `shell` of the `command_shell`
/// target asserts the exact `cmd`), nothing trimmed. Unbalanced quotes or template delimiters
/// are an error, as in ansible-core.
pub(super) fn free_form_command(s: &str, pos: &Pos) -> Result<Map<String, Value>, Diagnostic> {
    let (mut m, raw) = split_kv(s, Some(COMMAND_INLINE)).ok_or_else(|| {
        Diagnostic::at(
            pos,
            format!("cannot split the command `{s}`: unbalanced quotes or template delimiters"),
        )
    })?;
    if let Some(cmd) = raw {
        m.insert("cmd".into(), Value::String(cmd));
    }
    Ok(m)
}

/// ansible-core's `parse_kv` as its lookups call it (`check_raw=False`): every `k=v` word is an
/// option, and the other words, as written, are joined again into `_raw_params` (the second
/// value; None when there are none). None when a quote or a template block is left open.
pub fn parse_kv_raw(s: &str) -> Option<(Map<String, Value>, Option<String>)> {
    split_kv(s, None)
}

/// The `k=v` words of `s` whose key is one of `inline` (any key when None) as options, and the
/// rest as the raw text, rebuilt as ansible-core's `join_args` rebuilds it.
fn split_kv(s: &str, inline: Option<&[&str]>) -> Option<(Map<String, Value>, Option<String>)> {
    let words = split_raw_args(s)?;
    let mut m = Map::new();
    let mut raw: Vec<String> = Vec::new();
    for word in words {
        let decoded = decode_escapes(&word);
        // The first `=` after the first character that no backslash escapes.
        let eq = decoded
            .char_indices()
            .skip(1)
            .find(|&(i, c)| c == '=' && !decoded[..i].ends_with('\\'))
            .map(|(i, _)| i);
        match eq {
            Some(i) if inline.is_none_or(|keys| keys.contains(&&decoded[..i])) => {
                let key = decoded[..i].trim().to_string();
                // `warn` is gone from ansible-core's command; it stays accepted and ignored.
                if inline.is_none() || key != "warn" {
                    let v = unquote(decoded[i + 1..].trim()).to_string();
                    m.insert(key, Value::String(v));
                }
            }
            Some(_) => raw.push(word),
            // Only escaped `=`: a word of the raw text, unescaped.
            None if decoded.contains('=') => raw.push(decoded.replace("\\=", "=")),
            None => raw.push(word),
        }
    }
    if raw.is_empty() {
        return Some((m, None));
    }
    let mut joined = String::new();
    for w in raw {
        if !joined.is_empty() && !joined.ends_with('\n') {
            joined.push(' ');
        }
        joined.push_str(&w);
    }
    Some((m, Some(joined)))
}

/// ansible-core's `split_args`, which free-form commands go through: lines are split on `\n` and
/// words on single spaces; a word that opens a quote or a template block takes the following
/// ones (with the space or newline between them) until it closes; an empty word (a second
/// space) adds a space to the word before; a lone `\` outside quotes drops the line break after
/// it; every other line break is kept at the end of the word before it. None when a quote or a
/// template block is left open.
fn split_raw_args(s: &str) -> Option<Vec<String>> {
    const BLOCKS: [(&str, &str); 3] = [("{{", "}}"), ("{%", "%}"), ("{#", "#}")];
    let mut params: Vec<String> = Vec::new();
    let mut quote: Option<char> = None;
    let mut depth = [0usize; 3];
    let lines: Vec<&str> = s.split('\n').collect();
    for (li, line) in lines.iter().enumerate() {
        let mut continued = false;
        for (wi, tok) in line.split(' ').enumerate() {
            if tok.is_empty() && wi != 0 {
                append(&mut params, " ");
                continue;
            }
            if tok == "\\" && quote.is_none() {
                continued = true;
                continue;
            }
            let was_quoted = quote.is_some();
            quote = quote_state(tok, quote);
            let quoted = quote.is_some();
            let in_block = depth.iter().any(|d| *d > 0);
            let mut appended = false;
            if quoted && !was_quoted && !in_block {
                params.push(tok.to_string());
                appended = true;
            } else if in_block || quoted || was_quoted {
                if wi > 0 {
                    append(&mut params, " ");
                }
                append(&mut params, tok);
                appended = true;
            }
            for (d, (open, close)) in depth.iter_mut().zip(BLOCKS) {
                let (opens, closes) = (tok.matches(open).count(), tok.matches(close).count());
                if opens != closes {
                    *d = (*d + opens).saturating_sub(closes);
                    if !appended {
                        params.push(tok.to_string());
                        appended = true;
                    }
                }
            }
            if !appended && !tok.is_empty() && quote.is_none() && depth.iter().all(|d| *d == 0) {
                params.push(tok.to_string());
            }
        }
        if lines.len() > 1 && li != lines.len() - 1 && !continued {
            append(&mut params, "\n");
        }
    }
    if quote.is_some() || depth.iter().any(|d| *d > 0) {
        return None;
    }
    Some(params)
}

/// Add text to the last word (starting one when there is none).
fn append(params: &mut Vec<String>, s: &str) {
    match params.last_mut() {
        Some(last) => last.push_str(s),
        None => params.push(s.to_string()),
    }
}

/// The quote left open after `tok`, given the one open before it: a quote character not
/// preceded by a backslash opens a quote, or closes the open one when it is the same character.
fn quote_state(tok: &str, mut open: Option<char>) -> Option<char> {
    let mut prev: Option<char> = None;
    for c in tok.chars() {
        if (c == '"' || c == '\'') && prev != Some('\\') {
            match open {
                Some(q) if q == c => open = None,
                Some(_) => {}
                None => open = Some(c),
            }
        }
        prev = Some(c);
    }
    open
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn cmd(s: &str) -> Map<String, Value> {
        free_form_command(s, &Pos::file_only(Path::new("x.yml"))).unwrap()
    }

    #[test]
    fn free_form_command_extracts_inline_guards() {
        let m = cmd("touch /tmp/x creates=/tmp/x chdir=/tmp");
        assert_eq!(m["cmd"], "touch /tmp/x");
        assert_eq!(m["creates"], "/tmp/x");
        assert_eq!(m["chdir"], "/tmp");
        // Spaces inside a template do not end the value, and the command keeps its last
        // newline (Ansible's command_shell target).
        let m =
            cmd("executable=\"{{ bash.stdout }}\"\ncreates={{ dir }}/afile.txt\necho \"test\"\n");
        assert_eq!(m["cmd"], "echo \"test\"\n");
        assert_eq!(m["creates"], "{{ dir }}/afile.txt");
        assert_eq!(m["executable"], "{{ bash.stdout }}");
        // Only the inline parameters are taken out; other `k=v` words stay in the command.
        let m = cmd("env FOO=bar printenv FOO");
        assert_eq!(m["cmd"], "env FOO=bar printenv FOO");
        assert!(!m.contains_key("FOO"));
        // Nothing at all: no `cmd` (the module then says a command is required).
        assert!(!cmd("creates=/x").contains_key("cmd"));
    }

    #[test]
    fn free_form_command_is_rebuilt_as_ansible_does() {
        // A lone backslash ends a line without its newline; quotes keep theirs.
        let m = cmd("echo a \\\n\"b c\" \\\n\"d\ne\" | cat\necho f\n");
        assert_eq!(m["cmd"], "echo a \"b c\" \"d\ne\" | cat\necho f\n");
        // Indentation and runs of spaces survive.
        let m = cmd("cat <<EOF\nOne\n  Two\n    Three\nEOF\n");
        assert_eq!(m["cmd"], "cat <<EOF\nOne\n  Two\n    Three\nEOF\n");
        let m = cmd("echo  {{ a }}   b");
        assert_eq!(m["cmd"], "echo  {{ a }}   b");
        // A backslash inside quotes is the command's.
        let m = cmd("echo 'a \\\nb'");
        assert_eq!(m["cmd"], "echo 'a \\\nb'");
        let pos = Pos::file_only(Path::new("x.yml"));
        assert!(free_form_command("echo 'open", &pos).is_err());
        assert!(free_form_command("echo {{ x", &pos).is_err());
    }

    #[test]
    fn kv_for_lookups_keeps_every_option() {
        let (m, raw) = parse_kv_raw("Li  file=elements.csv delimiter=, col='2'").unwrap();
        assert_eq!(raw.as_deref(), Some("Li "));
        assert_eq!(m["file"], "elements.csv");
        assert_eq!(m["delimiter"], ",");
        assert_eq!(m["col"], "2");
        let (m, raw) = parse_kv_raw("H H file=x").unwrap();
        assert_eq!(raw.as_deref(), Some("H H"));
        assert_eq!(m.len(), 1);
        assert_eq!(parse_kv_raw("file=x").unwrap().1, None);
        assert!(parse_kv_raw("a 'b").is_none());
    }

    #[test]
    fn kv_arguments() {
        let pos = Pos::file_only(Path::new("x.yml"));
        let m = parse_kv("path=/tmp/a state=directory msg=\"a b\"", &pos).unwrap();
        assert_eq!(m["msg"], "a b");
        assert!(parse_kv("oops", &pos).is_err());
        // Spaces inside template delimiters do not split a word.
        let m = parse_kv(
            "path={{ base }}/{{ item | default('x y') }} mode=0755",
            &pos,
        )
        .unwrap();
        assert_eq!(m["path"], "{{ base }}/{{ item | default('x y') }}");
        assert_eq!(m["mode"], "0755");
        let m = parse_kv(r#"msg='a "b"' line="x\ty" k=a\=b"#, &pos).unwrap();
        assert_eq!(m["msg"], "a \"b\"");
        assert_eq!(m["line"], "x\ty");
        assert_eq!(m["k"], "a\\=b");
        assert!(parse_kv("path={{ base", &pos).is_err());
        assert!(parse_kv("msg='open", &pos).is_err());
    }
}
