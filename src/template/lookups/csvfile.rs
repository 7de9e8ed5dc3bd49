//! The `csvfile` lookup: the value in column `col` of the first row whose column `keycol` is
//! the term, read as ansible-core reads the file (Python's `csv` module, `excel` dialect, with
//! the file opened in universal-newline mode).
//!
//! Options: `file` (`ansible.csv`, found as the `file` lookup finds files), `delimiter` (`TAB`
//! by default, the name for a tab), `col` (1), `keycol` (0), `default`, `encoding`, as keyword
//! arguments or inline in the term (`Li file=elements.csv delimiter=,`), where they stay set for
//! the terms after it, as in ansible-core. The file is read as it is: a vaulted file is not
//! decrypted (ansible-core opens it directly).

use std::path::PathBuf;

use minijinja::value::Kwargs;
use minijinja::{Error, Value};

use super::op_err;
use super::options::{self, py_type, repr, text, Kind, Options};

const SPECS: &[(&str, Kind)] = &[
    ("col", Kind::Int),
    ("keycol", Kind::Int),
    ("default", Kind::Raw),
    ("delimiter", Kind::Raw),
    ("file", Kind::Raw),
    ("encoding", Kind::Raw),
];

const SEARCH_KEY_REQUIRED: &str = "Search key is required but was not found";

/// `lookup('csvfile', *terms, **kwargs)`; `find` finds a file as the `file` lookup does.
pub(super) fn lookup(
    terms: &[Value],
    kwargs: &Kwargs,
    find: &dyn Fn(&str) -> Option<PathBuf>,
) -> Result<Vec<Value>, Error> {
    let mut opts = Options::new(
        "csvfile",
        SPECS,
        vec![
            ("col", Value::from(1)),
            ("keycol", Value::from(0)),
            ("delimiter", Value::from("TAB")),
            ("file", Value::from("ansible.csv")),
            ("encoding", Value::from("utf-8")),
        ],
    );
    opts.set_kwargs(kwargs, &[])?;
    if terms.is_empty() {
        return Err(op_err(SEARCH_KEY_REQUIRED));
    }
    let mut out = Vec::new();
    for term in terms {
        let Some(term) = term.as_str() else {
            return Err(op_err(format!(
                "'{}' object has no attribute 'split'",
                py_type(term)
            )));
        };
        let (inline, key) = crate::playbook::kv::parse_kv_raw(term).ok_or_else(|| {
            op_err(format!(
                "failed parsing `{term}`: unbalanced quotes or template delimiters"
            ))
        })?;
        let key = key.ok_or_else(|| op_err(SEARCH_KEY_REQUIRED))?;
        for (name, value) in inline {
            if !opts.knows(&name) {
                return Err(op_err(format!(
                    "{} is not a valid option",
                    repr(&Value::from(name.as_str()))
                )));
            }
            opts.set(&name, Value::from_serialize(&value))
                .map_err(op_err)?;
        }
        let file = text(opts.get("file"));
        let path = find(&file).ok_or_else(|| {
            op_err(format!(
                "Unable to find '{file}' in expected paths: expected str, bytes or os.PathLike \
                 object, not NoneType"
            ))
        })?;
        let bytes = std::fs::read(&path).map_err(|e| op_err(format!("{}: {e}", path.display())))?;
        let content = universal_newlines(
            &options::decode(&bytes, &text(opts.get("encoding")), false).map_err(op_err)?,
        );
        let delimiter = match opts.get("delimiter") {
            d if d.as_str() == Some("TAB") => '\t',
            d => delimiter(d).map_err(op_err)?,
        };
        let col = opts.get("col").as_i64().unwrap_or(1);
        let keycol = opts.get("keycol").as_i64().unwrap_or(0);
        match find_row(&content, delimiter, &key, keycol, col).map_err(op_err)? {
            Some(v) => out.push(Value::from(v)),
            None => {
                let default = opts.get("default");
                if !default.is_none() && !default.is_undefined() {
                    out.push(default.clone());
                }
            }
        }
    }
    Ok(out)
}

/// The one character Python's `csv` takes as a delimiter, with its messages.
fn delimiter(d: &Value) -> Result<char, String> {
    let Some(s) = d.as_str() else {
        return Err(format!("\"delimiter\" must be string, not {}", py_type(d)));
    };
    let mut chars = s.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) => Ok(c),
        _ => Err("\"delimiter\" must be a 1-character string".into()),
    }
}

/// Column `col` of the first row whose column `keycol` is `key` (Python indexes: negative ones
/// count from the end; one out of range fails, as in ansible-core, even on a row before the
/// match).
fn find_row(
    content: &str,
    delimiter: char,
    key: &str,
    keycol: i64,
    col: i64,
) -> Result<Option<String>, String> {
    let mut reader = Reader::new(content, delimiter);
    while let Some(mut row) = reader.next_row() {
        if row.is_empty() {
            continue;
        }
        let k = index(row.len(), keycol)?;
        if row[k] == key {
            let c = index(row.len(), col)?;
            return Ok(Some(row.swap_remove(c)));
        }
    }
    Ok(None)
}

fn index(len: usize, i: i64) -> Result<usize, String> {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let at = if i < 0 { len + i } else { i };
    if (0..len).contains(&at) {
        Ok(at as usize)
    } else {
        Err("list index out of range".into())
    }
}

#[derive(Clone, Copy, PartialEq)]
enum State {
    StartRecord,
    StartField,
    InField,
    InQuotedField,
    QuoteInQuotedField,
    EatCrnl,
}

/// Python's `csv.reader` for the `excel` dialect (quote `"`, doubled quotes, no escape
/// character, not strict) over text whose line ends are already `\n` (universal newlines).
struct Reader<'a> {
    lines: std::str::SplitInclusive<'a, char>,
    delimiter: char,
}

impl<'a> Reader<'a> {
    fn new(content: &'a str, delimiter: char) -> Reader<'a> {
        Reader {
            lines: content.split_inclusive('\n'),
            delimiter,
        }
    }

    /// The next row (empty for an empty line), None at the end of the text. Each line is fed
    /// character by character and then its end (`None`), as `_csv.c` does; a quoted field
    /// takes the next lines until its quote closes.
    fn next_row(&mut self) -> Option<Vec<String>> {
        let mut fields = Vec::new();
        let mut field = String::new();
        let mut state = State::StartRecord;
        loop {
            let Some(line) = self.lines.next() else {
                // The end of the text inside a field (an unclosed quote): the field is kept.
                if state == State::InQuotedField || !field.is_empty() {
                    fields.push(field);
                    return Some(fields);
                }
                return None;
            };
            for c in line.chars().map(Some).chain(std::iter::once(None)) {
                state = self.step(state, c, &mut field, &mut fields);
            }
            if state == State::StartRecord {
                return Some(fields);
            }
        }
    }

    fn step(
        &self,
        state: State,
        c: Option<char>,
        field: &mut String,
        fields: &mut Vec<String>,
    ) -> State {
        let newline = matches!(c, Some('\n' | '\r'));
        let mut save = |field: &mut String| fields.push(std::mem::take(field));
        let after_line = || {
            if c.is_none() {
                State::StartRecord
            } else {
                State::EatCrnl
            }
        };
        match state {
            State::StartRecord if c.is_none() => State::StartRecord,
            State::StartRecord if newline => State::EatCrnl,
            State::StartRecord | State::StartField => {
                if c.is_none() || newline {
                    save(field);
                    after_line()
                } else if c == Some('"') {
                    State::InQuotedField
                } else if c == Some(self.delimiter) {
                    save(field);
                    State::StartField
                } else {
                    field.extend(c);
                    State::InField
                }
            }
            State::InField => {
                if c.is_none() || newline {
                    save(field);
                    after_line()
                } else if c == Some(self.delimiter) {
                    save(field);
                    State::StartField
                } else {
                    field.extend(c);
                    State::InField
                }
            }
            State::InQuotedField => match c {
                None => State::InQuotedField,
                Some('"') => State::QuoteInQuotedField,
                Some(ch) => {
                    field.push(ch);
                    State::InQuotedField
                }
            },
            State::QuoteInQuotedField => {
                if c == Some('"') {
                    field.push('"');
                    State::InQuotedField
                } else if c == Some(self.delimiter) {
                    save(field);
                    State::StartField
                } else if c.is_none() || newline {
                    save(field);
                    after_line()
                } else {
                    field.extend(c);
                    State::InField
                }
            }
            // Only the line's end can follow (universal newlines leave no `\r` before it).
            State::EatCrnl => {
                if c.is_none() {
                    State::StartRecord
                } else {
                    State::EatCrnl
                }
            }
        }
    }
}

/// Text as Python's universal-newline mode reads it: `\r\n` and `\r` become `\n`.
fn universal_newlines(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(text: &str, delimiter: char) -> Vec<Vec<String>> {
        let text = universal_newlines(text);
        let mut r = Reader::new(&text, delimiter);
        std::iter::from_fn(|| r.next_row()).collect()
    }

    #[test]
    fn rows_as_python_csv_reads_them() {
        // Each expectation is what Python 3.11's csv.reader gives.
        assert_eq!(
            rows(
                "Li,3,6.94\n\"Quoted, name\",q1,\"multi\nline\"\n\nshort\n",
                ','
            ),
            vec![
                vec!["Li", "3", "6.94"],
                vec!["Quoted, name", "q1", "multi\nline"],
                vec![],
                vec!["short"],
            ]
        );
        assert_eq!(
            rows("a,\"b \"\"c\"\"\",d\r\ne,\"x\"y,\n", ','),
            vec![vec!["a", "b \"c\"", "d"], vec!["e", "xy", ""]]
        );
        assert_eq!(
            rows("k1\tv1\nk2\t\"open", '\t'),
            vec![vec!["k1", "v1"], vec!["k2", "open"]]
        );
        assert_eq!(rows(" a , b", ','), vec![vec![" a ", " b"]]);
    }

    #[test]
    fn finding_a_row_with_python_indexes() {
        let text = "Li,3,6.94\nshort\nSmith,Jane,j@x\n";
        assert_eq!(
            find_row(text, ',', "Li", 0, 1).unwrap().as_deref(),
            Some("3")
        );
        assert_eq!(
            find_row(text, ',', "Li", 0, -1).unwrap().as_deref(),
            Some("6.94")
        );
        assert_eq!(
            find_row(text, ',', "Jane", 1, 0).unwrap_err(),
            "list index out of range"
        );
        assert_eq!(
            find_row(text, ',', "Li", 0, 9).unwrap_err(),
            "list index out of range"
        );
        assert_eq!(find_row(text, ',', "Nope", 0, 1).unwrap(), None);
        assert_eq!(
            delimiter(&Value::from(",,")).unwrap_err(),
            "\"delimiter\" must be a 1-character string"
        );
        assert_eq!(
            delimiter(&Value::from(5)).unwrap_err(),
            "\"delimiter\" must be string, not int"
        );
    }
}
