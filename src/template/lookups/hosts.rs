//! The `inventory_hostnames` lookup: the hosts a host pattern (`all:!www`, `web[0]`,
//! `~db\d+`) selects, matched by the code of plays' `hosts:` (`inventory/pattern.rs`).
//!
//! As ansible-core does, the lookup sees the inventory only through the `groups` variable: it
//! rebuilds an inventory of those groups and hosts and matches the terms against it, each
//! term's hosts after the ones before. A pattern that cannot be matched (a bad regex) gives no
//! host rather than an error, as in ansible-core.

use minijinja::value::ValueKind;
use minijinja::{Error, State, Value};

use super::super::pyrepr::py_string;
use crate::inventory::Inventory;

pub(super) fn inventory_hostnames(state: &State, terms: &[Value]) -> Result<Vec<Value>, Error> {
    if terms.is_empty() {
        return Ok(Vec::new());
    }
    let mut patterns = Vec::new();
    for term in terms {
        flatten_patterns(term, &mut patterns)?;
    }
    let groups = groups_of(state.lookup("groups"))?;
    Ok(Inventory::from_groups(&groups)
        .select_listed(&patterns)
        .unwrap_or_default()
        .into_iter()
        .map(Value::from)
        .collect())
}

/// The terms as pattern strings: a list's items in place (nested lists too), anything else
/// as its text.
fn flatten_patterns(term: &Value, out: &mut Vec<String>) -> Result<(), Error> {
    if term.kind() == ValueKind::Seq {
        for t in term.try_iter()? {
            flatten_patterns(&t, out)?;
        }
    } else {
        out.push(py_string(term)?);
    }
    Ok(())
}

/// The `groups` variable as group names with their hosts (none when it is not there).
fn groups_of(groups: Option<Value>) -> Result<Vec<(String, Vec<String>)>, Error> {
    let Some(groups) = groups.filter(|g| g.kind() == ValueKind::Map) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for name in groups.try_iter()? {
        let hosts = groups.get_item(&name)?;
        let hosts = match hosts.try_iter() {
            Ok(it) => it.map(|h| py_string(&h)).collect::<Result<_, _>>()?,
            Err(_) => Vec::new(),
        };
        out.push((py_string(&name)?, hosts));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::template::Templar;
    use serde_json::json;

    #[test]
    fn patterns_against_the_groups_variable() {
        let t = Templar::new();
        let c = minijinja::Value::from_serialize(json!({"groups": {
            "all": ["h0", "w1", "w2", "d1"],
            "ungrouped": ["h0"],
            "web": ["w1", "w2"],
            "db": ["d1"],
        }}));
        let q = |e: &str| t.eval(e, &c).unwrap();
        assert_eq!(
            q("query('inventory_hostnames', 'all:!web')"),
            json!(["h0", "d1"])
        );
        assert_eq!(
            q("query('inventory_hostnames', 'db', ['web'])"),
            json!(["d1", "w1", "w2"])
        );
        assert_eq!(q("lookup('inventory_hostnames', 'w*')"), json!("w1,w2"));
        assert_eq!(q("query('inventory_hostnames', '~(')"), json!([]));
        assert_eq!(q("query('inventory_hostnames')"), json!([]));
        assert_eq!(
            q("query('inventory_hostnames', 'localhost')"),
            json!(["localhost"])
        );
    }
}
