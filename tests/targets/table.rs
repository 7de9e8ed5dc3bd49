//! The table in `CONFORMANCE.md`: one row per target, what ansible-core and fixpoint reached and
//! the first divergence. The test compares each measured row with the committed one, and with
//! `TARGETS_UPDATE=1` rewrites the measured columns in place (the reason column is written by
//! hand and kept).

use std::collections::BTreeMap;

/// The line that opens the table (its header); the table runs to the first line not starting
/// with `|`.
pub const HEADER: &str =
    "| target | ansible-core | fixpoint | first divergence (measured) | reason |";
const RULE: &str = "|---|---|---|---|---|";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub target: String,
    /// ansible-core's task results, with ` (exit N)` when it did not succeed.
    pub ansible: String,
    /// `passes`, or the number of task results fixpoint reached in agreement; either followed
    /// by how many deliberate differences (DEVIATIONS.md) were accepted on the way.
    pub fixpoint: String,
    pub divergence: String,
    pub reason: String,
}

impl Row {
    pub fn render(&self) -> String {
        format!(
            "| `{}` | {} | {} | {} | {} |",
            self.target,
            self.ansible,
            self.fixpoint,
            escape(&self.divergence),
            self.reason
        )
    }

    /// This measured row written as the committed one when they differ only in which of the
    /// committed row's alternative result counts ansible-core reached (`18 or 19 (exit 1)`:
    /// a target whose last cleanup task races with the removal of the user it connects as
    /// ends either way): the committed ansible column, and `N of` its first count.
    pub fn as_committed(&self, committed: &Row) -> Option<Row> {
        let (counts, exit) = split_exit(&committed.ansible);
        let (measured, measured_exit) = split_exit(&self.ansible);
        let alternatives: Vec<&str> = counts.split(" or ").collect();
        if alternatives.len() < 2 || exit != measured_exit || !alternatives.contains(&measured) {
            return None;
        }
        let mut row = self.clone();
        row.ansible = committed.ansible.clone();
        if let Some((reached, _)) = self.fixpoint.split_once(" of ") {
            row.fixpoint = format!("{reached} of {}", alternatives[0]);
        }
        Some(row)
    }

    /// The fixpoint column as a number of results reached (`passes` is all of them).
    pub fn reached(&self, ansible_total: usize) -> Option<usize> {
        if self.fixpoint.starts_with("passes") {
            return Some(ansible_total);
        }
        self.fixpoint.split_whitespace().next()?.parse().ok()
    }
}

/// `19 (exit 1)` → (`19`, ` (exit 1)`).
fn split_exit(ansible: &str) -> (&str, &str) {
    match ansible.find(" (") {
        Some(i) => (&ansible[..i], &ansible[i..]),
        None => (ansible, ""),
    }
}

/// Table cells cannot hold `|` or line breaks.
pub fn escape(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The rows of the committed table, by target, with the line range the table occupies.
pub fn parse(text: &str) -> Result<(BTreeMap<String, Row>, usize, usize), String> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.trim() == HEADER)
        .ok_or_else(|| format!("CONFORMANCE.md: no table headed `{HEADER}`"))?;
    let mut end = start + 1;
    let mut rows = BTreeMap::new();
    while end < lines.len() && lines[end].starts_with('|') {
        let line = lines[end];
        end += 1;
        if line.trim() == RULE {
            continue;
        }
        let cells = split_cells(line);
        if cells.len() != 5 {
            return Err(format!(
                "CONFORMANCE.md:{end}: a row has {} cells, not 5",
                cells.len()
            ));
        }
        let target = cells[0].trim_matches('`').to_string();
        rows.insert(
            target.clone(),
            Row {
                target,
                ansible: cells[1].clone(),
                fixpoint: cells[2].clone(),
                divergence: cells[3].replace("\\|", "|"),
                reason: cells[4].clone(),
            },
        );
    }
    Ok((rows, start, end))
}

/// The cells of a row, split on `|` that is not escaped.
fn split_cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut cells = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cells.last_mut().unwrap().push_str("\\|");
                chars.next();
            }
            '|' => cells.push(String::new()),
            c => cells.last_mut().unwrap().push(c),
        }
    }
    cells.iter().map(|c| c.trim().to_string()).collect()
}

/// `text` with the table replaced by `rows` (in the given order).
pub fn rewrite(text: &str, rows: &[Row]) -> Result<String, String> {
    let (_, start, end) = parse(text)?;
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<String> = lines[..start].iter().map(|s| s.to_string()).collect();
    out.push(HEADER.to_string());
    out.push(RULE.to_string());
    out.extend(rows.iter().map(Row::render));
    out.extend(lines[end..].iter().map(|s| s.to_string()));
    Ok(out.join("\n") + "\n")
}

#[test]
fn a_rendered_row_parses_back() {
    let row = Row {
        target: "stat".into(),
        ansible: "15".into(),
        fixpoint: "3".into(),
        divergence: "`a | b`: ansible-core ok, fixpoint failed".into(),
        reason: "missing module `tempfile`".into(),
    };
    let text = format!("intro\n\n{HEADER}\n{RULE}\n{}\n\nafter\n", row.render());
    let (rows, start, end) = parse(&text).unwrap();
    assert_eq!(rows["stat"], row);
    assert_eq!((start, end), (2, 5));
    assert_eq!(rewrite(&text, &[row]).unwrap(), text);
}
