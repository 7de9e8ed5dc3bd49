//! Reading `runme.sh` text as bash would, as far as the runner needs: a line's words, its
//! continuations, here-documents and functions left out, `for` loops over literal words, the
//! script's own variables, and the commands inside `$( ... )`.

/// The words of one shell line, quotes removed; operators (`|`, `&&`, `;`, redirections) are
/// words of their own, marked by `op`.
#[derive(Debug)]
pub(crate) struct Word {
    pub(crate) text: String,
    pub(crate) op: bool,
}

pub(crate) fn words(line: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut started = false;
    let mut chars = line.chars().peekable();
    let flush = |cur: &mut String, started: &mut bool, out: &mut Vec<Word>| {
        if *started {
            out.push(Word {
                text: std::mem::take(cur),
                op: false,
            });
            *started = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                started = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    cur.push(c);
                }
            }
            '"' => {
                started = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => cur.extend(chars.next()),
                        c => cur.push(c),
                    }
                }
            }
            '\\' => {
                started = true;
                cur.extend(chars.next());
            }
            '#' if !started => break,
            c if c.is_whitespace() => flush(&mut cur, &mut started, &mut out),
            '|' | '&' | ';' | '>' | '<' => {
                // `2>&1`: the `2` read so far belongs to the redirection.
                if cur == "2" || cur == "1" {
                    cur.clear();
                    started = false;
                }
                flush(&mut cur, &mut started, &mut out);
                let mut op = c.to_string();
                while let Some(&n) = chars.peek() {
                    if matches!(n, '|' | '&' | '>' | '<') || n.is_ascii_digit() && op.ends_with('&')
                    {
                        op.push(n);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push(Word { text: op, op: true });
            }
            c => {
                started = true;
                cur.push(c);
            }
        }
    }
    flush(&mut cur, &mut started, &mut out);
    out
}

/// `NAME=value` as a shell assignment.
pub(crate) fn assignment(w: &str) -> Option<(&str, &str)> {
    let (k, v) = w.split_once('=')?;
    let ok = !k.is_empty()
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !k.starts_with(|c: char| c.is_ascii_digit());
    ok.then_some((k, v))
}

/// The script's lines with continuations joined, without functions' bodies and here-documents.
pub(crate) fn logical_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut heredoc: Option<String> = None;
    let mut logical = String::new();
    for raw in text.lines() {
        if let Some(end) = &heredoc {
            if raw.trim() == end {
                heredoc = None;
            }
            continue;
        }
        if let Some(cont) = raw.strip_suffix('\\') {
            logical.push_str(cont);
            logical.push(' ');
            continue;
        }
        logical.push_str(raw);
        let line = std::mem::take(&mut logical);
        let trimmed = line.trim();
        if let Some(i) = trimmed.find("<<") {
            // `<<<` is a here-string, on its line.
            if !trimmed[i..].starts_with("<<<") {
                let tag = trimmed[i + 2..].trim().trim_start_matches('-');
                heredoc = Some(tag.trim_matches(|c| c == '\'' || c == '"').to_string());
            }
        }
        // A function's body runs when it is called (fetch's `cleanup`, from `trap ... EXIT`).
        if trimmed.ends_with('{') && (trimmed.starts_with("function ") || trimmed.contains("()")) {
            depth += 1;
            continue;
        }
        if depth > 0 {
            depth -= usize::from(trimmed == "}");
            continue;
        }
        out.push(trimmed.to_string());
    }
    out
}

/// A `for NAME in WORDS` line: the name and the words when they are all literal.
pub(crate) fn for_loop(line: &str) -> Option<(String, Option<Vec<String>>)> {
    let ws = words(line);
    if ws.first()?.text != "for" || ws.get(2)?.text != "in" {
        return None;
    }
    let list: Vec<&Word> = ws[3..]
        .iter()
        .take_while(|w| !w.op && w.text != "do")
        .collect();
    let literal = list
        .iter()
        .all(|w| !w.text.contains(['$', '`']) && !w.text.contains(".."));
    let values = literal.then(|| list.iter().map(|w| w.text.clone()).collect());
    Some((ws[1].text.clone(), values))
}

/// `$name` and `${name}` in `line` replaced by `value`, quoted so that it stays one word as
/// written (escaped inside double quotes, single-quoted outside any).
pub(crate) fn substitute(line: &str, name: &str, value: &str) -> String {
    let (mut out, mut single, mut double) = (String::new(), false, false);
    let mut rest = line;
    while let Some(c) = rest.chars().next() {
        let reference = [format!("${{{name}}}"), format!("${name}")]
            .into_iter()
            .find(|r| {
                rest.starts_with(r.as_str())
                    && (r.ends_with('}')
                        || !rest[r.len()..]
                            .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_'))
            });
        match reference {
            Some(r) if !single => {
                if double {
                    for c in value.chars() {
                        if matches!(c, '"' | '\\' | '$' | '`') {
                            out.push('\\');
                        }
                        out.push(c);
                    }
                } else {
                    out.push('\'');
                    out.push_str(&value.replace('\'', "'\\''"));
                    out.push('\'');
                }
                rest = &rest[r.len()..];
                continue;
            }
            _ => {}
        }
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '\\' if !single => {
                out.push(c);
                rest = &rest[1..];
                if let Some(n) = rest.chars().next() {
                    out.push(n);
                    rest = &rest[n.len_utf8()..];
                }
                continue;
            }
            _ => {}
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// What the script has set so far.
#[derive(Default)]
pub(crate) struct Shell {
    /// Exported variables with their values, in order.
    pub(crate) exported: Vec<(String, String)>,
    /// Names exported before they have a value (`export SELECTED_STRATEGY`).
    exported_names: Vec<String>,
    /// The script's own variables with a literal value (`output_dir=/tmp`).
    vars: Vec<(String, String)>,
}

impl Shell {
    pub(crate) fn export(&mut self, k: &str, v: &str) {
        self.exported.retain(|(n, _)| n != k);
        self.exported.push((k.to_string(), v.to_string()));
    }

    pub(crate) fn export_name(&mut self, k: &str) {
        match self.vars.iter().position(|(n, _)| n == k) {
            Some(i) => {
                let (k, v) = self.vars.remove(i);
                self.export(&k, &v);
            }
            None => self.exported_names.push(k.to_string()),
        }
    }

    pub(crate) fn unset(&mut self, k: &str) {
        self.exported.retain(|(n, _)| n != k);
        self.vars.retain(|(n, _)| n != k);
    }

    pub(crate) fn assign(&mut self, k: &str, v: &str) {
        if self.exported_names.iter().any(|n| n == k) || self.exported.iter().any(|(n, _)| n == k) {
            return self.export(k, v);
        }
        self.vars.retain(|(n, _)| n != k);
        // A value made at run time (`$(mktemp -d)`, `$?`, an array) stays unknown.
        if !v.contains(['$', '`', '(']) {
            self.vars.push((k.to_string(), v.to_string()));
        }
    }

    /// `line` with the script's own variables replaced by their values.
    pub(crate) fn expand(&self, line: &str) -> String {
        self.vars
            .iter()
            .fold(line.to_string(), |l, (k, v)| substitute(&l, k, v))
    }
}

/// The text inside each `$( ... )` of `line` (quotes inside it nest anew, as in bash).
pub(crate) fn substitutions(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let b = line.as_bytes();
    let mut i = 0;
    while let Some(at) = line[i..].find("$(") {
        let start = i + at + 2;
        let (mut depth, mut single, mut double) = (1, false, false);
        let mut j = start;
        while j < b.len() {
            match b[j] {
                b'\\' if !single => j += 1,
                b'\'' if !double => single = !single,
                b'"' if !single => double = !double,
                b'(' if !single && !double => depth += 1,
                b')' if !single && !double => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            j += 1;
        }
        out.push(&line[start..j.min(b.len())]);
        i = (j + 1).min(b.len());
    }
    out
}
