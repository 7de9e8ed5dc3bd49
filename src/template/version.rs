//! The `version` test (`version_compare`): compares two version strings under one of the
//! schemes ansible-core offers: loose (the default), strict, semver and pep440, with its
//! argument checks and messages, which playbooks test for.

use std::cmp::Ordering;

use minijinja::value::Kwargs;
use minijinja::{Error, Value};
use regex::Regex;
use std::sync::OnceLock;

use super::pyrepr::py_string;
use super::value::{defined, op_err};

/// The schemes, in the order ansible-core's message lists them.
const TYPES: &[&str] = &["loose", "strict", "semver", "semantic", "pep440"];
const OPERATORS: &[&str] = &[
    "==", "=", "eq", "<", "lt", "<=", "le", ">", "gt", ">=", "ge", "!=", "<>", "ne",
];

/// `value is version(other, operator='eq', strict=None, version_type=None)`.
pub(super) fn test_version(
    value: &Value,
    other: &Value,
    operator: Option<String>,
    strict: Option<bool>,
    kwargs: Kwargs,
) -> Result<bool, Error> {
    let operator = match operator {
        Some(op) => Some(op),
        None => kwargs.get("operator")?,
    };
    let strict = match strict {
        Some(s) => Some(s),
        None => kwargs.get("strict")?,
    };
    let version_type: Option<String> = kwargs.get("version_type")?;
    kwargs.assert_all_used()?;
    if strict.is_some() && version_type.is_some() {
        return Err(op_err("Cannot specify both 'strict' and 'version_type'"));
    }
    if !defined(value)?.is_true() {
        return Err(op_err("Input version value cannot be empty"));
    }
    if !defined(other)?.is_true() {
        return Err(op_err(
            "Version parameter to compare against cannot be empty",
        ));
    }
    let scheme = match (strict, version_type.as_deref()) {
        (Some(true), _) => "strict",
        (_, Some(t)) if TYPES.contains(&t) => t,
        (_, Some(t)) => {
            let known: Vec<String> = TYPES.iter().map(|t| format!("'{t}'")).collect();
            return Err(op_err(format!(
                "Invalid version type ({t}). Must be one of {}",
                known.join(", ")
            )));
        }
        _ => "loose",
    };
    let op = operator.unwrap_or_else(|| "eq".into());
    if !OPERATORS.contains(&op.as_str()) {
        let known: Vec<String> = OPERATORS.iter().map(|o| format!("'{o}'")).collect();
        return Err(op_err(format!(
            "Invalid operator type ({op}). Must be one of {}",
            known.join(", ")
        )));
    }
    let (a, b) = (py_string(value)?, py_string(other)?);
    let ord =
        compare(scheme, &a, &b).map_err(|e| op_err(format!("Version comparison failed: {e}")))?;
    use Ordering::*;
    Ok(match op.as_str() {
        "<" | "lt" => ord == Less,
        "<=" | "le" => ord != Greater,
        ">" | "gt" => ord == Greater,
        ">=" | "ge" => ord != Less,
        "!=" | "<>" | "ne" => ord != Equal,
        _ => ord == Equal,
    })
}

fn compare(scheme: &str, a: &str, b: &str) -> Result<Ordering, String> {
    Ok(match scheme {
        "strict" => strict_key(a)?.cmp(&strict_key(b)?),
        "semver" | "semantic" => semver_cmp(a, b)?,
        "pep440" => pep440_key(a)?.cmp(&pep440_key(b)?),
        _ => loose_parts(a).cmp(&loose_parts(b)),
    })
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum LoosePart {
    Num(u64),
    Text(String),
}

/// LooseVersion-style components: runs of digits compare numerically, other runs as text.
fn loose_parts(v: &str) -> Vec<LoosePart> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut cur_digit = false;
    for c in v.chars() {
        if c == '.' || c == '-' || c == '_' || c == '+' {
            if !cur.is_empty() {
                parts.push(std::mem::take(&mut cur));
            }
            continue;
        }
        if !cur.is_empty() && c.is_ascii_digit() != cur_digit {
            parts.push(std::mem::take(&mut cur));
        }
        cur_digit = c.is_ascii_digit();
        cur.push(c);
    }
    if !cur.is_empty() {
        parts.push(cur);
    }
    parts
        .into_iter()
        .map(|p| p.parse::<u64>().map_or(LoosePart::Text(p), LoosePart::Num))
        .collect()
}

fn regex(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("valid regex"))
}

/// StrictVersion: `N.N[.N]` with an optional `aN`/`bN` pre-release, which sorts first.
fn strict_key(v: &str) -> Result<(u64, u64, u64, (u8, u64)), String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = regex(&RE, r"^(\d+)\.(\d+)(?:\.(\d+))?(?:([ab])(\d+))?$");
    let c = re
        .captures(v)
        .ok_or_else(|| format!("invalid version number '{v}'"))?;
    let n = |i: usize| c.get(i).map_or(Ok(0), |m| m.as_str().parse::<u64>());
    let bad = |_| format!("invalid version number '{v}'");
    let pre = match c.get(4).map(|m| m.as_str()) {
        Some("a") => (0, n(5).map_err(bad)?),
        Some(_) => (1, n(5).map_err(bad)?),
        None => (2, 0),
    };
    Ok((
        n(1).map_err(bad)?,
        n(2).map_err(bad)?,
        n(3).map_err(bad)?,
        pre,
    ))
}

/// Semantic Versioning 2.0.0: precedence by major, minor, patch, then the pre-release (a
/// version without one is higher; its identifiers compare numerically when numeric, numeric
/// ones lower); build metadata is ignored.
fn semver_cmp(a: &str, b: &str) -> Result<Ordering, String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = regex(
        &RE,
        r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$",
    );
    let parse = |v: &str| -> Result<(Vec<u64>, Option<Vec<String>>), String> {
        let c = re
            .captures(v)
            .ok_or_else(|| format!("invalid semantic version '{v}'"))?;
        let core = (1..=3)
            .map(|i| c[i].parse::<u64>().map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        let pre = c
            .get(4)
            .map(|m| m.as_str().split('.').map(str::to_string).collect());
        Ok((core, pre))
    };
    let ((ca, pa), (cb, pb)) = (parse(a)?, parse(b)?);
    Ok(ca.cmp(&cb).then_with(|| match (pa, pb) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (Some(x), Some(y)) => {
            let id = |s: &String| match s.parse::<u64>() {
                Ok(n) if s.bytes().all(|b| b.is_ascii_digit()) => (0, n, String::new()),
                _ => (1, 0, s.clone()),
            };
            x.iter().map(id).cmp(y.iter().map(id))
        }
    }))
}

/// A PEP 440 version's sort key: epoch, release (trailing zeros dropped), pre-release,
/// post-release, development release, local label (a version with one sorts after the same
/// version without; labels compare by segment, numbers above text).
type Pep440Key = (
    u64,
    Vec<u64>,
    (i8, u64),
    (i8, u64),
    (i8, u64),
    Vec<(u8, u64, String)>,
);

fn pep440_key(v: &str) -> Result<Pep440Key, String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = regex(
        &RE,
        r"(?i)^\s*v?(?:(\d+)!)?(\d+(?:\.\d+)*)(?:[-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?(\d*))?(?:-(\d+)|[-_.]?(post|rev|r)[-_.]?(\d*))?(?:[-_.]?(dev)[-_.]?(\d*))?(?:\+([a-z0-9]+(?:[-_.][a-z0-9]+)*))?\s*$",
    );
    let c = re
        .captures(v)
        .ok_or_else(|| format!("Invalid version: '{v}'"))?;
    let num = |m: Option<regex::Match<'_>>| -> u64 {
        m.map(|m| m.as_str())
            .filter(|s| !s.is_empty())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    };
    let mut release: Vec<u64> = c[2].split('.').map(|p| p.parse().unwrap_or(0)).collect();
    while release.len() > 1 && release.last() == Some(&0) {
        release.pop();
    }
    let has_post = c.get(5).is_some() || c.get(6).is_some();
    let has_dev = c.get(8).is_some();
    let pre = match c.get(3).map(|m| m.as_str().to_ascii_lowercase()) {
        Some(l) => {
            let rank = match l.as_str() {
                "a" | "alpha" => 0,
                "b" | "beta" => 1,
                _ => 2,
            };
            (rank, num(c.get(4)))
        }
        // A development release of a final version sorts before its pre-releases.
        None if has_dev && !has_post => (-1, 0),
        None => (3, 0),
    };
    let post = if has_post {
        (1, num(c.get(5)).max(num(c.get(7))))
    } else {
        (-1, 0)
    };
    let dev = if has_dev { (0, num(c.get(9))) } else { (1, 0) };
    let local = c.get(10).map_or_else(Vec::new, |m| {
        m.as_str()
            .split(['-', '_', '.'])
            .map(|s| match s.parse::<u64>() {
                Ok(n) => (1, n, String::new()),
                Err(_) => (0, 0, s.to_ascii_lowercase()),
            })
            .collect()
    });
    Ok((num(c.get(1)), release, pre, post, dev, local))
}

#[cfg(test)]
mod tests {
    use super::compare;
    use std::cmp::Ordering::*;

    #[test]
    fn schemes_order_versions_as_python_does() {
        let cases = [
            ("loose", "1.10", "1.9", Greater),
            ("loose", "2.0", "2.0", Equal),
            ("strict", "1.0", "1.0.0", Equal),
            ("strict", "1.0a1", "1.0", Less),
            ("strict", "1.0a2", "1.0b1", Less),
            ("semver", "1.2.3", "2.0.0", Less),
            ("semver", "1.0.0-alpha", "1.0.0", Less),
            ("semver", "1.0.0-alpha.1", "1.0.0-alpha.beta", Less),
            ("semver", "1.0.0-2", "1.0.0-10", Less),
            ("semver", "1.0.0+build", "1.0.0", Equal),
            ("pep440", "2.14.0rc1", "2.14.0", Less),
            ("pep440", "2.14.0.dev1", "2.14.0a1", Less),
            ("pep440", "1.0.post1", "1.0", Greater),
            ("pep440", "1.0", "1.0.0", Equal),
            ("pep440", "1!0.1", "2.0", Greater),
            ("pep440", "1.0+local", "1.0", Greater),
        ];
        for (scheme, a, b, want) in cases {
            assert_eq!(compare(scheme, a, b), Ok(want), "{scheme}: {a} vs {b}");
        }
        assert!(compare("semver", "nope", "1.0.0")
            .unwrap_err()
            .contains("invalid semantic version 'nope'"));
        assert!(compare("strict", "1.0.0.0", "1.0").is_err());
        assert!(compare("pep440", "x.y", "1.0").is_err());
    }
}
