//! `DEVIATIONS.md`: the deliberate differences between fixpoint and ansible-core that the
//! harness accepts, one line each: `- case: <name>[, <name>…] | what: <what> | why: <reason>`.
//! Every other line of the file is prose for people.

use crate::compare::Section;

/// What a deviation accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum What {
    /// Any difference in one compared section.
    Section(Section),
    /// fixpoint's JSON events name a role's task by its own name (the role is in `location`),
    /// where Ansible says `role : name`: the prefix is dropped from Ansible's names, and
    /// everything else is still compared.
    RolePrefix,
}

impl What {
    fn from_name(name: &str) -> Option<What> {
        match name {
            "role-prefix" => Some(What::RolePrefix),
            _ => Section::from_name(name).map(What::Section),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Deviation {
    pub cases: Vec<String>,
    pub what: What,
    pub why: String,
    /// 1-based line in DEVIATIONS.md, for messages.
    pub line: usize,
}

pub fn parse(text: &str) -> Result<Vec<Deviation>, String> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let Some(rest) = raw.strip_prefix("- case:") else {
            continue;
        };
        let line = i + 1;
        let err = |m: &str| format!("DEVIATIONS.md:{line}: {m}");
        let parts: Vec<&str> = rest.split(" | ").map(str::trim).collect();
        let [cases, what, why] = parts.as_slice() else {
            return Err(err(
                "expected `- case: <names> | what: <section> | why: <reason>`",
            ));
        };
        let what = what
            .strip_prefix("what:")
            .ok_or_else(|| err("`what:` missing"))?;
        let why = why
            .strip_prefix("why:")
            .ok_or_else(|| err("`why:` missing"))?;
        let what = What::from_name(what.trim()).ok_or_else(|| {
            err(&format!(
                "`what:` must be role-prefix or a section: {}",
                Section::ALL.map(|s| s.name()).join(", ")
            ))
        })?;
        let why = why.trim().to_string();
        if why.len() < 10 {
            return Err(err("`why:` must give the reason"));
        }
        let cases: Vec<String> = cases
            .split(',')
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty())
            .collect();
        if cases.is_empty() {
            return Err(err("no case named"));
        }
        out.push(Deviation {
            cases,
            what,
            why,
            line,
        });
    }
    Ok(out)
}

#[test]
fn deviation_lines_are_read_and_prose_is_skipped() {
    let text = "# Deviations\n\nSome prose.\n\
        - case: touch_a, touch_b | what: tree | why: touch converges instead of bumping times\n";
    let d = parse(text).unwrap();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].cases, ["touch_a", "touch_b"]);
    assert_eq!(d[0].what, What::Section(Section::Tree));
    assert_eq!(d[0].line, 4);
    let bad = parse("- case: x | what: colour | why: because it is so\n").unwrap_err();
    assert!(
        bad.contains("DEVIATIONS.md:1") && bad.contains("what:"),
        "{bad}"
    );
    assert!(parse("- case: x | what: tree\n").is_err());
}
