//! The deliberate differences of `tests/conformance/DEVIATIONS.md` that concern Ansible's
//! integration targets: one line each,
//! `- target: <t> | task: <name> | ansible-core: <status> | fixpoint: <status> | why: <reason>`.
//! A task result that differs exactly so counts as agreeing, and the comparison goes on past
//! it, so a deliberate difference does not hide every divergence after it. The conformance
//! harness reads only `- case:` lines of the same file; these are prose to it.

use std::collections::BTreeSet;

#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    pub target: String,
    pub task: String,
    pub ansible: String,
    pub fixpoint: String,
    /// 1-based line in DEVIATIONS.md, for messages.
    pub line: usize,
}

const STATUSES: &[&str] = &[
    "ok",
    "changed",
    "failed",
    "skipped",
    "ignored",
    "rescued",
    "unreachable",
];

pub fn parse(text: &str) -> Result<Vec<Accepted>, String> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let Some(rest) = raw.strip_prefix("- target:") else {
            continue;
        };
        let line = i + 1;
        let err = |m: &str| format!("DEVIATIONS.md:{line}: {m}");
        let parts: Vec<&str> = rest.split(" | ").map(str::trim).collect();
        let [target, task, ansible, fixpoint, why] = parts.as_slice() else {
            return Err(err(
                "expected `- target: <t> | task: <name> | ansible-core: \
                 <status> | fixpoint: <status> | why: <reason>`",
            ));
        };
        let field = |text: &str, key: &str| {
            text.strip_prefix(key)
                .map(|v| v.trim().to_string())
                .ok_or_else(|| err(&format!("`{key}` missing")))
        };
        let status = |text: &str, key: &str| {
            let s = field(text, key)?;
            if s == "ignored" {
                // How the runner records a failure that `ignore_errors` let pass.
                Ok("failed (ignored)".to_string())
            } else if STATUSES.contains(&s.as_str()) {
                Ok(s)
            } else {
                Err(err(&format!(
                    "`{key}` must be one of {}",
                    STATUSES.join(", ")
                )))
            }
        };
        let accepted = Accepted {
            target: target.to_string(),
            task: field(task, "task:")?,
            ansible: status(ansible, "ansible-core:")?,
            fixpoint: status(fixpoint, "fixpoint:")?,
            line,
        };
        if field(why, "why:")?.len() < 10 {
            return Err(err("`why:` must give the reason"));
        }
        if accepted.ansible == accepted.fixpoint {
            return Err(err(
                "ansible-core and fixpoint give the same status: nothing to accept",
            ));
        }
        out.push(accepted);
    }
    Ok(out)
}

/// How far two runs' results agree, given what is accepted for `target`.
#[derive(Debug, Default, PartialEq)]
pub struct Agreement {
    /// Results from the start that agree, accepted differences included.
    pub agree: usize,
    /// The lines (in DEVIATIONS.md) of the acceptances used.
    pub used: BTreeSet<usize>,
}

/// Compares `(name, status)` results in order: equal ones agree, and so does a result whose
/// name is the same and whose two statuses an acceptance of `target` names.
pub fn agreement(
    target: &str,
    accepted: &[Accepted],
    ansible: &[(&str, &str)],
    fixpoint: &[(&str, &str)],
) -> Agreement {
    let mut out = Agreement::default();
    for (a, f) in ansible.iter().zip(fixpoint) {
        if a == f {
            out.agree += 1;
            continue;
        }
        let found = accepted.iter().find(|x| {
            x.target == target
                && a.0 == f.0
                && x.task == a.0
                && x.ansible == a.1
                && x.fixpoint == f.1
        });
        match found {
            Some(x) => {
                out.agree += 1;
                out.used.insert(x.line);
            }
            None => break,
        }
    }
    out
}

#[test]
fn acceptance_lines_are_read_and_checked() {
    let text = "prose\n- case: a | what: tree | why: not ours to read\n\
        - target: file | task: Use touch | ansible-core: changed | fixpoint: ok | why: touch converges\n";
    let a = parse(text).unwrap();
    assert_eq!(a.len(), 1);
    assert_eq!((a[0].task.as_str(), a[0].line), ("Use touch", 3));
    let ignored = parse(
        "- target: apt | task: t | ansible-core: ignored | fixpoint: ok | why: needs python3-apt\n",
    )
    .unwrap();
    assert_eq!(ignored[0].ansible, "failed (ignored)");
    for bad in [
        "- target: file | task: t | ansible-core: changed | fixpoint: ok\n",
        "- target: file | task: t | ansible-core: changed | fixpoint: fine | why: long enough\n",
        "- target: file | task: t | ansible-core: ok | fixpoint: ok | why: long enough\n",
        "- target: file | task: t | ansible-core: ok | fixpoint: changed | why: short\n",
    ] {
        let e = parse(bad).unwrap_err();
        assert!(e.starts_with("DEVIATIONS.md:1:"), "{e}");
    }
}

#[test]
fn an_accepted_difference_lets_the_comparison_go_on() {
    let acc = parse(
        "- target: file | task: touch | ansible-core: changed | fixpoint: ok | why: touch converges\n",
    )
    .unwrap();
    let ansible = [
        ("make", "changed"),
        ("touch", "changed"),
        ("stat", "ok"),
        ("x", "ok"),
    ];
    let fixpoint = [
        ("make", "changed"),
        ("touch", "ok"),
        ("stat", "ok"),
        ("x", "failed"),
    ];
    let got = agreement("file", &acc, &ansible, &fixpoint);
    assert_eq!((got.agree, got.used.len()), (3, 1));
    // Another target, another name or other statuses: not accepted.
    assert_eq!(agreement("user", &acc, &ansible, &fixpoint).agree, 1);
    let other = [("make", "changed"), ("touch", "failed")];
    assert_eq!(agreement("file", &acc, &ansible, &other).agree, 1);
}
