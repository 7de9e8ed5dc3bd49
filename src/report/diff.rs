//! File diffs as shown with `--diff`: attribute changes, then unified content diffs.

use super::Reporter;
use fixpoint_modules::Diff;

impl Reporter {
    pub(super) fn diff(&mut self, d: &Diff) {
        if let Some(text) = &d.prepared {
            for l in text.lines() {
                self.line(l);
            }
        }
        for a in &d.attrs {
            let none = |s: &str| {
                if s.is_empty() {
                    "(none)".to_string()
                } else {
                    s.to_string()
                }
            };
            let line = format!(
                "{}: {} {} → {}",
                a.path,
                a.attr,
                none(&a.before),
                none(&a.after)
            );
            self.line(&line);
        }
        for c in &d.content {
            let text = render_unified(&c.path, &c.before, &c.after);
            for l in text.lines() {
                let painted = if l.starts_with('+') && !l.starts_with("+++") {
                    self.paint("32", l)
                } else if l.starts_with('-') && !l.starts_with("---") {
                    self.paint("31", l)
                } else {
                    l.to_string()
                };
                self.line(&painted);
            }
        }
    }
}

/// A unified diff with `before`/`after` headers naming the path.
pub fn render_unified(path: &str, before: &str, after: &str) -> String {
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(&format!("before: {path}"), &format!("after: {path}"))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unified_diff_names_the_path_in_both_headers() {
        let d = render_unified("/etc/motd", "a\nb\n", "a\nc\n");
        assert!(d.contains("--- before: /etc/motd"), "{d}");
        assert!(d.contains("+++ after: /etc/motd"), "{d}");
        assert!(d.contains("\n-b\n+c\n"), "{d}");
        assert!(render_unified("f", "same\n", "same\n").is_empty());
    }
}
