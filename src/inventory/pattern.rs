//! Host patterns as plays and `--limit` give them: unions, `&` intersections, `!` exclusions,
//! globs, `~regex` terms and `[i]`/`[a:b]` subscripts.

use std::collections::HashSet;

use super::host_entry::is_ipv6;
use super::model::{Inventory, InventoryError, ALL, LOCALHOST_NAMES, UNGROUPED};

impl Inventory {
    /// Hosts matching an Ansible host pattern (`hosts:` of a play, `--limit`), in inventory
    /// order without duplicates. Terms are joined by `,` or `:`; `&term` intersects, `!term`
    /// excludes (applied after all unions, as in Ansible). A term is a group or host name, a
    /// glob (`web*`), a regex (`~web\d+`, anchored at the start), optionally with a subscript
    /// (`web[0]`, `web[-1]`, `web[0:2]` inclusive, `web[1:]`). Matching nothing gives an empty
    /// list; `localhost`/`127.0.0.1` match the implicit local host when the inventory lacks it.
    pub fn select(&self, pattern: &str) -> Result<Vec<String>, InventoryError> {
        // In the pattern's order (`db,web`: db's hosts, then web's), as ansible-core's
        // `get_hosts` gives them for the default `order: inventory`.
        self.evaluate(split_pattern(pattern))
    }

    /// Hosts matching the patterns, one after the other, in the order ansible-core's
    /// `get_hosts` gives them to the `inventory_hostnames` lookup: each term's hosts after
    /// those of the terms before it, as `select` gives one pattern's.
    pub fn select_listed(&self, patterns: &[String]) -> Result<Vec<String>, InventoryError> {
        self.evaluate(patterns.iter().flat_map(|p| split_pattern(p)).collect())
    }

    /// The hosts `--limit` allows: its pattern, where a term `@path` stands for the patterns
    /// in that file, one a line, as ansible-core's `subset` reads them.
    pub fn select_limit(&self, limit: &str) -> Result<Vec<String>, InventoryError> {
        let mut terms = Vec::new();
        for t in split_pattern(limit) {
            let Some(file) = t.strip_prefix('@') else {
                terms.push(t);
                continue;
            };
            let path = std::path::Path::new(file);
            let text = std::fs::read_to_string(path).map_err(|e| {
                InventoryError::new(path, None, None, format!("cannot read limit file: {e}"))
                    .help("`--limit @FILE` names a file of host patterns, one a line")
            })?;
            terms.extend(
                text.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(String::from),
            );
        }
        self.evaluate(terms)
    }

    /// An inventory of these groups and their hosts alone, each group flat (its hosts are the
    /// ones listed, its descendants' among them), as ansible-core's `inventory_hostnames`
    /// lookup rebuilds one from the `groups` variable. Hosts are in the order of `all`, then
    /// of the other groups.
    pub fn from_groups(groups: &[(String, Vec<String>)]) -> Inventory {
        let mut inv = Inventory::empty(std::path::Path::new("groups"));
        for (_, hosts) in groups.iter().filter(|(g, _)| g == ALL) {
            for h in hosts {
                inv.add_host_to_group(ALL, h);
            }
        }
        for (group, hosts) in groups.iter().filter(|(g, _)| g != ALL) {
            inv.declare_group(group);
            for h in hosts {
                inv.add_host_to_group(group, h);
            }
        }
        inv
    }

    /// The hosts of pattern terms: unions in order, then `&` intersections, then `!`
    /// exclusions, as ansible-core orders them.
    fn evaluate(&self, terms: Vec<String>) -> Result<Vec<String>, InventoryError> {
        let (mut regular, mut intersect, mut exclude) = (Vec::new(), Vec::new(), Vec::new());
        for t in &terms {
            if let Some(r) = t.strip_prefix('&') {
                intersect.push(r.trim());
            } else if let Some(r) = t.strip_prefix('!') {
                exclude.push(r.trim());
            } else {
                regular.push(t.as_str());
            }
        }
        // `!web` alone means "all but web".
        if regular.is_empty() && !(intersect.is_empty() && exclude.is_empty()) {
            regular.push(ALL);
        }
        let mut out: Vec<String> = Vec::new();
        let mut seen = HashSet::new();
        for t in regular {
            for h in self.match_term(t)? {
                if seen.insert(h.clone()) {
                    out.push(h);
                }
            }
        }
        for t in intersect {
            let keep: HashSet<String> = self.match_term(t)?.into_iter().collect();
            out.retain(|h| keep.contains(h));
        }
        for t in exclude {
            let drop: HashSet<String> = self.match_term(t)?.into_iter().collect();
            out.retain(|h| !drop.contains(h));
        }
        Ok(out)
    }

    /// What to do about a pattern that selects no host: the nearest host or group name to a
    /// term that names neither, else the groups there are.
    pub fn unmatched_pattern_hint(&self, pattern: &str) -> String {
        let names = || {
            self.groups
                .keys()
                .map(String::as_str)
                .chain(self.hosts.iter().map(String::as_str))
        };
        for term in split_pattern(pattern) {
            let name = split_subscript(term.trim_start_matches(['&', '!'])).0;
            let plain = !name.starts_with('~') && !name.contains(['*', '?', '[']);
            if plain && !names().any(|n| n == name) {
                if let Some(near) = crate::diag::suggest(name, names()) {
                    return format!("`{name}` is no host or group here; did you mean `{near}`?");
                }
            }
        }
        let mut groups: Vec<&str> = self
            .groups
            .keys()
            .map(String::as_str)
            .filter(|g| *g != ALL && *g != UNGROUPED)
            .collect();
        if groups.len() > 10 {
            groups.truncate(10);
            groups.push("…");
        }
        if groups.is_empty() {
            "name a host of the inventory (`fixpoint inventory -i INVENTORY --list` shows them)"
                .to_string()
        } else {
            format!(
                "name a host or one of the groups {} (`fixpoint inventory -i INVENTORY --graph` shows them)",
                groups.join(", ")
            )
        }
    }

    /// Hosts of one pattern term, in inventory order, subscript applied.
    fn match_term(&self, term: &str) -> Result<Vec<String>, InventoryError> {
        if term.is_empty() {
            return Ok(Vec::new());
        }
        let (expr, subscript) = split_subscript(term);
        let (list, _) = self.match_expr(term, expr)?;
        Ok(match subscript {
            None => list,
            Some(s) => s.apply(list),
        })
    }

    /// The first term of `pattern` that names no group and matches no host (`all` aside), as
    /// ansible-core's `HOST_PATTERN_MISMATCH` judges a term: an empty group is no mismatch.
    pub fn mismatched_term(&self, pattern: &str) -> Result<Option<String>, InventoryError> {
        for term in split_pattern(pattern) {
            let term = term.trim_start_matches(['&', '!']).trim();
            let expr = split_subscript(term).0;
            if term.is_empty() || expr == ALL {
                continue;
            }
            let (list, group_matched) = self.match_expr(term, expr)?;
            if list.is_empty() && !group_matched {
                return Ok(Some(expr.to_string()));
            }
        }
        Ok(None)
    }

    /// The hosts a term's expression (its subscript removed) matches, and whether a group
    /// matched it.
    fn match_expr(&self, term: &str, expr: &str) -> Result<(Vec<String>, bool), InventoryError> {
        let matcher = Matcher::new(expr).map_err(|m| {
            InventoryError::new(
                &self.source,
                None,
                None,
                format!("invalid host pattern `{term}`: {m}"),
            )
        })?;
        // As ansible-core: the hosts of each matching group (groups in the order they
        // appeared, each group's hosts in its order), then the matching host names.
        let mut list: Vec<String> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        let mut group_matched = false;
        for g in &self.group_order {
            if matcher.matches(g) {
                group_matched = true;
                for h in self.hosts_of_group(g) {
                    if seen.insert(h.clone()) {
                        list.push(h);
                    }
                }
            }
        }
        // Like Ansible: a plain name that names a group is the group; wildcards match both.
        if !group_matched || matcher.is_wildcard() {
            for h in self.hosts.iter().filter(|h| matcher.matches(h)) {
                if seen.insert(h.clone()) {
                    list.push(h.clone());
                }
            }
        }
        if list.is_empty() && LOCALHOST_NAMES.contains(&expr) {
            list.push(expr.to_string());
        }
        Ok((list, group_matched))
    }
}

/// Split a pattern into terms on `,` and on `:` outside brackets (ranges and subscripts
/// contain colons), keeping IPv6 addresses whole.
fn split_pattern(pattern: &str) -> Vec<String> {
    // As ansible-core: a pattern with a comma is its comma-separated terms, each taken whole
    // (`web:&prod,staging` is the terms `web:&prod` and `staging`); only a pattern without one
    // is split on colons.
    if pattern.contains(',') {
        return pattern
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(String::from)
            .collect();
    }
    let mut out = Vec::new();
    for piece in [pattern] {
        let piece = piece.trim();
        if piece.is_empty() {
            continue;
        }
        if is_ipv6(piece.trim_start_matches(['&', '!'])) {
            out.push(piece.to_string());
            continue;
        }
        let mut depth = 0i32;
        let mut cur = String::new();
        for c in piece.chars() {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                ':' if depth <= 0 => {
                    let t = cur.trim();
                    if !t.is_empty() {
                        out.push(t.to_string());
                    }
                    cur.clear();
                    continue;
                }
                _ => {}
            }
            cur.push(c);
        }
        let t = cur.trim();
        if !t.is_empty() {
            out.push(t.to_string());
        }
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Subscript {
    Index(i64),
    /// Inclusive end; `None` runs to the last host.
    Range(usize, Option<usize>),
}

impl Subscript {
    fn apply(self, hosts: Vec<String>) -> Vec<String> {
        let len = hosts.len();
        match self {
            Subscript::Index(i) => {
                let idx = if i < 0 { len as i64 + i } else { i };
                usize::try_from(idx)
                    .ok()
                    .and_then(|i| hosts.get(i).cloned())
                    .into_iter()
                    .collect()
            }
            Subscript::Range(start, end) => {
                let end = end.unwrap_or(usize::MAX).min(len.saturating_sub(1));
                if start >= len || start > end {
                    return Vec::new();
                }
                hosts[start..=end].to_vec()
            }
        }
    }
}

/// `name[3]`, `name[-1]`, `name[0:2]`, `name[1:]` (not for regex terms, whose brackets are
/// character classes).
fn split_subscript(term: &str) -> (&str, Option<Subscript>) {
    if term.starts_with('~') || !term.ends_with(']') {
        return (term, None);
    }
    let Some(open) = term.rfind('[') else {
        return (term, None);
    };
    let (base, inner) = (&term[..open], &term[open + 1..term.len() - 1]);
    if base.is_empty() {
        return (term, None);
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some((a, b)) = inner.split_once([':', '-']) {
        if digits(a) && (b.is_empty() || digits(b)) {
            let (Ok(start), end) = (a.parse(), b.parse().ok()) else {
                return (term, None);
            };
            return (base, Some(Subscript::Range(start, end)));
        }
    }
    let unsigned = inner.strip_prefix('-').unwrap_or(inner);
    if digits(unsigned) {
        if let Ok(i) = inner.parse() {
            return (base, Some(Subscript::Index(i)));
        }
    }
    (term, None)
}

/// A shell glob with Python's `fnmatch` semantics (`*`, `?`, `[..]`, `[!..]`) over names.
fn fnmatch_pattern(expr: &str) -> Result<glob::Pattern, glob::PatternError> {
    // Names are no paths: `**` means what `*` does in `fnmatch`, while the glob crate only
    // accepts it as a whole path component.
    let mut collapsed = String::with_capacity(expr.len());
    for c in expr.chars() {
        if !(c == '*' && collapsed.ends_with('*')) {
            collapsed.push(c);
        }
    }
    glob::Pattern::new(&collapsed)
}

/// Python's `fnmatch.fnmatch(name, pattern)` (on POSIX: case matters); a pattern that is no
/// glob (an unclosed `[`) matches only itself.
pub fn fnmatch(pattern: &str, name: &str) -> bool {
    match fnmatch_pattern(pattern) {
        Ok(p) => p.matches(name),
        Err(_) => pattern == name,
    }
}

/// How one pattern term compares against group and host names.
enum Matcher {
    Exact(String),
    /// Shell globs, with Python's `fnmatch` semantics (`*`, `?`, `[..]`, `[!..]`).
    Glob(glob::Pattern),
    /// `~` regexes.
    Regex(regex::Regex),
}

impl Matcher {
    fn new(expr: &str) -> Result<Matcher, String> {
        if let Some(re) = expr.strip_prefix('~') {
            // Python's `re.match`: anchored at the start only.
            return regex::Regex::new(&format!("^(?:{re})"))
                .map(Matcher::Regex)
                .map_err(|e| {
                    let detail = e.to_string();
                    let last = detail.lines().last().unwrap_or_default().trim().to_string();
                    format!("{last}; after `~` write a regular expression")
                });
        }
        if !expr.contains(['*', '?', '[']) {
            return Ok(Matcher::Exact(expr.to_string()));
        }
        fnmatch_pattern(expr)
            .map(Matcher::Glob)
            .map_err(|e| format!("cannot use it as a glob: {e}"))
    }

    fn matches(&self, name: &str) -> bool {
        match self {
            Matcher::Exact(s) => s == name,
            Matcher::Glob(g) => g.matches(name),
            Matcher::Regex(r) => r.is_match(name),
        }
    }

    /// Wildcard terms match host names even when they also match groups (Ansible checks for
    /// `~`, `.`, `?`, `*` and `[` the same way).
    fn is_wildcard(&self) -> bool {
        match self {
            Matcher::Exact(s) => s.contains('.'),
            Matcher::Glob(_) | Matcher::Regex(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::testutil::{strs, write};
    use serde_json::Value;

    fn pattern_fixture() -> (tempfile::TempDir, Inventory) {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "hosts",
            "[web]\nweb1\nweb2\nweb3\n[db]\ndb1\ndb2\n[prod]\nweb1\ndb1\n[staging]\nweb2\n\
             [edge]\ncdn.example.com\n[all:vars]\nshared=1\n",
        );
        let inv = Inventory::load(&p).unwrap();
        (dir, inv)
    }

    #[test]
    fn groups_rebuilt_and_patterns_in_listed_order() {
        let groups: Vec<(String, Vec<String>)> = [
            ("db", vec!["d1", "w1"]),
            ("all", vec!["h0", "w1", "w2", "d1"]),
            ("ungrouped", vec!["h0"]),
            ("web", vec!["w1", "w2"]),
        ]
        .into_iter()
        .map(|(g, h)| (g.to_string(), strs(&h)))
        .collect();
        let inv = Inventory::from_groups(&groups);
        let sel = |p: &[&str]| inv.select_listed(&strs(p)).unwrap();
        // Each group's hosts in the order `groups` lists them.
        assert_eq!(sel(&["db,web"]), strs(&["d1", "w1", "w2"]));
        assert_eq!(sel(&["web", "db"]), strs(&["w1", "w2", "d1"]));
        assert_eq!(sel(&["all:!web"]), strs(&["h0", "d1"]));
        assert_eq!(sel(&["db:&web"]), strs(&["w1"]));
        assert_eq!(sel(&["web[1]", "ungrouped"]), strs(&["w2", "h0"]));
        assert_eq!(sel(&["localhost"]), strs(&["localhost"]));
        assert_eq!(sel(&["nope"]), strs(&[]));
        assert_eq!(inv.select("db,web").unwrap(), strs(&["d1", "w1", "w2"]));
    }

    #[test]
    fn a_mismatched_term_names_no_group_and_matches_no_host() {
        let (_d, mut inv) = pattern_fixture();
        inv.declare_group("empty");
        let term = |p: &str| inv.mismatched_term(p).unwrap();
        // An empty group, `all`, the implicit localhost, a glob that matches: no mismatch.
        for p in [
            "empty",
            "all",
            "localhost",
            "web*:&prod",
            "web[5]",
            "all:!db",
        ] {
            assert_eq!(term(p), None, "{p}");
        }
        assert_eq!(term("web:nosuch"), Some("nosuch".into()));
        assert_eq!(term("all:!gone[0]"), Some("gone".into()));
        assert_eq!(term("~^zz"), Some("~^zz".into()));
    }

    #[test]
    fn patterns_union_intersection_exclusion() {
        let (_d, inv) = pattern_fixture();
        let sel = |p: &str| inv.select(p).unwrap();
        let every = strs(&["web1", "web2", "web3", "db1", "db2", "cdn.example.com"]);
        assert_eq!(sel("all"), every);
        assert_eq!(sel("*"), every);
        assert_eq!(sel("web"), strs(&["web1", "web2", "web3"]));
        // In the pattern's order, as `ansible --list-hosts` gives them.
        assert_eq!(sel("db:web"), strs(&["db1", "db2", "web1", "web2", "web3"]));
        assert_eq!(sel("db, web2"), strs(&["db1", "db2", "web2"]));
        assert_eq!(sel("web:&prod"), strs(&["web1"]));
        assert_eq!(sel("web:!prod"), strs(&["web2", "web3"]));
        assert_eq!(sel("!prod:web"), strs(&["web2", "web3"]));
        assert_eq!(sel("&prod"), strs(&["web1", "db1"]));
        assert_eq!(sel("all:!web:!db"), strs(&["cdn.example.com"]));
        // With a comma, the terms are not split on colons: `web:&prod` names nothing.
        assert_eq!(sel("web:&prod,staging"), strs(&["web2"]));
        assert_eq!(sel("db1:db1:db"), strs(&["db1", "db2"]));
        assert!(sel("nope").is_empty());
        assert!(sel("").is_empty());
    }

    #[test]
    fn patterns_glob_regex_and_subscripts() {
        let (_d, inv) = pattern_fixture();
        let sel = |p: &str| inv.select(p).unwrap();
        assert_eq!(sel("web*"), strs(&["web1", "web2", "web3"]));
        assert_eq!(sel("*1"), strs(&["web1", "db1"]));
        assert_eq!(sel("db?"), strs(&["db1", "db2"]));
        assert_eq!(sel("*.example.com"), strs(&["cdn.example.com"]));
        assert_eq!(sel("web[!1]"), strs(&["web2", "web3"]));
        assert_eq!(sel("~web[12]"), strs(&["web1", "web2"]));
        assert_eq!(sel("~(web|db)1"), strs(&["web1", "db1"]));
        assert_eq!(
            sel("~eb"),
            Vec::<String>::new(),
            "regex is anchored at the start"
        );
        assert_eq!(
            sel("~stag"),
            strs(&["web2"]),
            "regex matches group names too"
        );
        assert_eq!(sel("web[0]"), strs(&["web1"]));
        assert_eq!(sel("web[-1]"), strs(&["web3"]));
        assert_eq!(sel("web[0:1]"), strs(&["web1", "web2"]));
        assert_eq!(sel("web[1:]"), strs(&["web2", "web3"]));
        assert_eq!(sel("web[1:]:&prod"), Vec::<String>::new());
        assert!(sel("web[7]").is_empty());

        let e = inv.select("~web[").unwrap_err();
        assert!(e.msg.contains("invalid host pattern `~web[`"), "{}", e.msg);
    }

    #[test]
    /// Each expectation checked with ansible-core 2.19: `ansible all -i INV --list-hosts -l PAT`.
    fn globs_follow_fnmatch() {
        let (_d, inv) = pattern_fixture();
        let sel = |p: &str| inv.select(p).unwrap();
        assert_eq!(sel("w**1"), strs(&["web1"]), "`**` is `*`, not an error");
        assert_eq!(sel("**"), sel("all"));
        assert_eq!(sel("[v-x]eb*"), strs(&["web1", "web2", "web3"]));
        assert_eq!(
            sel("db[0-1]*"),
            strs(&["db1"]),
            "a range class when not a subscript"
        );
        assert_eq!(sel("db[!2]"), strs(&["db1"]));
        assert_eq!(sel("*[.]example.com"), strs(&["cdn.example.com"]));
        assert_eq!(sel("web?"), strs(&["web1", "web2", "web3"]));
        assert!(sel("web1?").is_empty(), "`?` is exactly one character");
        // As in `fnmatch` (and ansible-core 2.19), `^` does not negate a class: only `!` does.
        assert_eq!(sel("web[^1]"), strs(&["web1"]));
    }

    #[test]
    fn implicit_localhost_is_selectable_but_not_in_all() {
        let (_d, inv) = pattern_fixture();
        assert_eq!(inv.select("localhost").unwrap(), strs(&["localhost"]));
        assert_eq!(inv.select("127.0.0.1").unwrap(), strs(&["127.0.0.1"]));
        assert_eq!(
            inv.select("db2:localhost").unwrap(),
            strs(&["db2", "localhost"])
        );
        assert!(!inv
            .select("all")
            .unwrap()
            .contains(&"localhost".to_string()));
        assert!(!inv.groups_map()["all"].contains(&"localhost".to_string()));
        let v = inv.host_vars("localhost");
        assert_eq!(v["ansible_connection"], Value::from("local"));
        assert_eq!(
            v["shared"],
            Value::from(1),
            "implicit localhost still gets `all` vars"
        );
        assert!(inv.group_names("localhost").is_empty());

        // An inventory that defines localhost uses its own definition.
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "hosts",
            "[ctl]\nlocalhost ansible_connection=ssh\n",
        );
        let inv = Inventory::load(&p).unwrap();
        assert_eq!(inv.select("all").unwrap(), strs(&["localhost"]));
        assert_eq!(
            inv.host_vars("localhost")["ansible_connection"],
            Value::from("ssh")
        );
    }
}
