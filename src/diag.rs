//! Load-time diagnostics that point into the source: `file:line:col`, the line, a caret, and a hint.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A position in a source file (1-based line and column).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pos {
    pub file: Arc<PathBuf>,
    pub line: usize,
    pub col: usize,
}

impl Pos {
    pub fn new(file: &Arc<PathBuf>, line: usize, col: usize) -> Pos {
        Pos {
            file: file.clone(),
            line,
            col,
        }
    }

    /// A position for a whole file (errors reading it, or data without line information).
    pub fn file_only(file: &Path) -> Pos {
        Pos {
            file: Arc::new(file.to_path_buf()),
            line: 0,
            col: 0,
        }
    }
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.file.display())
        } else {
            write!(f, "{}:{}:{}", self.file.display(), self.line, self.col)
        }
    }
}

/// An error in the input: what is wrong, where, and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub pos: Option<Pos>,
    pub msg: String,
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn at(pos: &Pos, msg: impl Into<String>) -> Diagnostic {
        Diagnostic {
            pos: Some(pos.clone()),
            msg: msg.into(),
            help: None,
        }
    }

    pub fn new(msg: impl Into<String>) -> Diagnostic {
        Diagnostic {
            pos: None,
            msg: msg.into(),
            help: None,
        }
    }

    pub fn help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }
}

impl std::error::Error for Diagnostic {}

impl fmt::Display for Diagnostic {
    /// Rendered like rustc/just: the message, the location, the source line with a caret, a hint.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "error: {}", self.msg)?;
        if let Some(pos) = &self.pos {
            writeln!(f, "  --> {pos}")?;
            let line_text = (pos.line > 0)
                .then(|| std::fs::read_to_string(pos.file.as_path()).ok())
                .flatten()
                .and_then(|text| text.lines().nth(pos.line - 1).map(str::to_string));
            if let Some(text) = line_text {
                let num = pos.line.to_string();
                let pad = " ".repeat(num.len());
                writeln!(f, "{pad} |")?;
                writeln!(f, "{num} | {text}")?;
                // Keep tabs so the caret lines up under tab-indented text.
                let lead: String = text
                    .chars()
                    .take(pos.col.saturating_sub(1))
                    .map(|c| if c == '\t' { '\t' } else { ' ' })
                    .collect();
                writeln!(f, "{pad} | {lead}^")?;
            }
        }
        if let Some(help) = &self.help {
            writeln!(f, "  = help: {help}")?;
        }
        Ok(())
    }
}

/// The closest candidate to `word` by edit distance, for "did you mean" hints.
pub fn suggest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::levenshtein(word, c), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 4))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_near_names_only() {
        assert_eq!(suggest("naem", ["name", "when", "loop"]), Some("name"));
        assert_eq!(suggest("xyzzy", ["name", "when"]), None);
    }
}
