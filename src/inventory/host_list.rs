//! Host lists given as an inventory source (`-i web1,web2:2222,`), as ansible-core's
//! `host_list` inventory plugin reads them: a source that is no existing path and holds a comma.

use std::path::Path;

use serde_json::Value;

use super::host_entry::split_host_port;
use super::model::{Inventory, InventoryError};

/// The host list `source` is, if it is one: it holds a comma and names no existing file or
/// directory (a path with a comma in its name stays a path, as in ansible-core).
pub(super) fn as_host_list(source: &Path) -> Option<&str> {
    let text = source.to_str()?;
    (text.contains(',') && !source.exists()).then_some(text)
}

impl Inventory {
    /// Add the hosts of a host list, in order: each comma-separated entry is a host name or
    /// address with an optional `:port` (`[v6addr]:port` for IPv6), trimmed; empty entries are
    /// skipped, so `web1,` is the one host `web1`. A host already in the inventory is left as it
    /// is, port included; the others carry no variable but `ansible_port`, so an explicit
    /// `localhost` connects with ssh like any host (`-c local` or `-e ansible_connection=local`
    /// to run it locally), as in ansible-core.
    pub(super) fn add_host_list(
        &mut self,
        source: &Path,
        list: &str,
    ) -> Result<(), InventoryError> {
        let bad = |msg: String| {
            InventoryError::new(source, None, None, format!("host list `{list}`: {msg}")).help(
                "write host names or addresses, each with an optional :port, separated by \
                 commas: -i 'web1,web2:2222,[2001:db8::1]:22,'",
            )
        };
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (host, port) = split_host_port(entry).map_err(bad)?;
            if host.is_empty() {
                return Err(bad(format!("missing host name in `{entry}`")));
            }
            if self.has_host(&host) {
                continue;
            }
            self.add_host(&host);
            if let Some(port) = port {
                self.set_host_var(&host, "ansible_port", Value::from(port));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::testutil::{strs, write};
    use std::path::PathBuf;

    fn load(sources: &[&str]) -> Result<Inventory, InventoryError> {
        let sources: Vec<PathBuf> = sources.iter().map(PathBuf::from).collect();
        Inventory::load_sources(&sources)
    }

    #[test]
    fn a_host_list_is_a_source_with_a_comma_that_is_no_path() {
        let dir = tempfile::tempdir().unwrap();
        let with_comma = write(dir.path(), "a,b", "[web]\nw1\n");
        assert_eq!(
            as_host_list(&with_comma),
            None,
            "an existing path stays a path"
        );
        assert_eq!(as_host_list(Path::new("hosts")), None, "no comma: a path");
        assert_eq!(as_host_list(Path::new("web1,")), Some("web1,"));

        let inv = load(&[" web1 , web2:2222,,[2001:db8::1]:2201,fe80::2,127.0.0.1:22"]).unwrap();
        let hosts = strs(&["web1", "web2", "2001:db8::1", "fe80::2", "127.0.0.1"]);
        assert_eq!(inv.select("all").unwrap(), hosts);
        assert_eq!(inv.groups_map()["ungrouped"], hosts);
        assert!(inv.shown_vars("web1").is_empty());
        // ansible-core's `inventory_file` of a listed host is the list; its directory the
        // text `None`.
        let web1 = inv.host_vars("web1");
        assert_eq!(
            web1["inventory_file"],
            Value::from(" web1 , web2:2222,,[2001:db8::1]:2201,fe80::2,127.0.0.1:22")
        );
        assert_eq!(web1["inventory_dir"], Value::from("None"));
        assert_eq!(inv.host_vars("web2")["ansible_port"], Value::from(2222));
        assert_eq!(
            inv.host_vars("2001:db8::1")["ansible_port"],
            Value::from(2201)
        );
        assert!(inv.host_vars("fe80::2").get("ansible_port").is_none());

        // An explicit localhost is an ordinary host: no local connection of its own.
        let inv = load(&["localhost,"]).unwrap();
        assert_eq!(inv.select("all").unwrap(), strs(&["localhost"]));
        assert!(inv
            .host_vars("localhost")
            .get("ansible_connection")
            .is_none());
    }

    #[test]
    fn several_sources_add_up_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let ini = write(dir.path(), "inv/hosts", "[web]\nw1 ansible_port=2200\n");
        write(dir.path(), "inv/group_vars/ungrouped.yml", "from_dir: 1\n");
        write(dir.path(), "inv/host_vars/h2.yml", "mine: 2\n");
        let sources = [ini.display().to_string(), "h2,w1:2222,".into()];
        let inv = load(&sources.iter().map(String::as_str).collect::<Vec<_>>()).unwrap();
        // `all` lists `ungrouped` before the other groups, as ansible-core does.
        assert_eq!(inv.select("all").unwrap(), strs(&["h2", "w1"]));
        // `w1` keeps its group and port; the listed host is ungrouped and reads the
        // `group_vars/` and `host_vars/` beside the other source, loaded after every source.
        assert_eq!(inv.groups_map()["web"], strs(&["w1"]));
        assert_eq!(inv.groups_map()["ungrouped"], strs(&["h2"]));
        assert_eq!(inv.host_vars("w1")["ansible_port"], Value::from(2200));
        let h2 = inv.host_vars("h2");
        assert_eq!(
            (h2["from_dir"].clone(), h2["mine"].clone()),
            (1.into(), 2.into())
        );

        // A host list first, then a file that groups one of its hosts: it leaves `ungrouped`.
        let inv = load(&["w1,h9,", &ini.display().to_string()]).unwrap();
        assert_eq!(inv.groups_map()["ungrouped"], strs(&["h9"]));
        assert_eq!(inv.groups_map()["web"], strs(&["w1"]));
    }

    #[test]
    fn bad_host_lists_and_missing_paths_say_what_to_write() {
        let e = load(&["web1:99999,web2"]).unwrap_err();
        assert!(e.msg.contains("invalid port `99999`"), "{}", e.msg);
        assert!(e.help.as_deref().unwrap().contains("separated by commas"));
        let e = load(&[":22,"]).unwrap_err();
        assert!(e.msg.contains("missing host name"), "{}", e.msg);
        // A missing path without a comma may be a host list missing its comma.
        let e = load(&["web1"]).unwrap_err();
        assert!(e.msg.contains("cannot read inventory `web1`"), "{}", e.msg);
        assert!(e.help.as_deref().unwrap().contains("-i web1,"), "{e:?}");
        // No source at all: the implicit localhost.
        let inv = load(&[]).unwrap();
        assert_eq!(
            inv.host_vars("localhost")["ansible_connection"],
            Value::from("local")
        );
    }
}
