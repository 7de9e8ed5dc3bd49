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

/// The parameters `command`/`shell` accept inline in their free-form string.
const COMMAND_INLINE: &[&str] = &["creates", "removes", "chdir", "executable", "stdin", "warn"];

pub(super) fn free_form_command(s: &str) -> Map<String, Value> {
    let mut m = Map::new();
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| {
        regex::Regex::new(
            // A value is quoted, or runs to the next space outside `{{ }}`/`{% %}` (ansible-core
            // splits these words as `parse_kv` does: `creates={{ dir }}/f` is one word).
            r#"(?:^|\s)(creates|removes|chdir|executable|stdin|warn)=("[^"]*"|'[^']*'|(?:\{\{.*?\}\}|\{%.*?%\}|\S)+)"#,
        )
        .expect("static regex")
    });
    let mut rest = s.to_string();
    for cap in re.captures_iter(s) {
        let key = cap[1].to_string();
        let raw = &cap[2];
        let val = raw.trim_matches(|c| c == '"' || c == '\'').to_string();
        debug_assert!(COMMAND_INLINE.contains(&key.as_str()));
        if key != "warn" {
            m.insert(key, Value::String(val));
        }
        rest = rest.replacen(cap[0].trim_start(), "", 1);
    }
    m.insert("cmd".into(), Value::String(rest.trim().to_string()));
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn free_form_command_extracts_inline_guards() {
        let m = free_form_command("touch /tmp/x creates=/tmp/x chdir=/tmp");
        assert_eq!(m["cmd"], "touch /tmp/x");
        assert_eq!(m["creates"], "/tmp/x");
        assert_eq!(m["chdir"], "/tmp");
        // Spaces inside a template do not end the value (Ansible's command_shell target).
        let m = free_form_command(
            "executable=\"{{ bash.stdout }}\"\ncreates={{ dir }}/afile.txt\necho \"test\"\n",
        );
        assert_eq!(m["cmd"], "echo \"test\"");
        assert_eq!(m["creates"], "{{ dir }}/afile.txt");
        assert_eq!(m["executable"], "{{ bash.stdout }}");
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
