//! Shared fixtures of the inventory unit tests: temp files, an INI inventory and its YAML twin.

use std::fs;
use std::path::{Path, PathBuf};

/// Write `text` to `dir/rel`, creating parent directories.
pub(super) fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
    let p = dir.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(&p, text).unwrap();
    p
}

/// Owned strings, to compare with host and group lists.
pub(super) fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// An INI inventory exercising ranges, ports, children and typed `[g:vars]`.
pub(super) const INI: &str = "\
# comment
jump ansible_host=192.0.2.1

[web]
web[01:03].example.com ansible_port=2222 role=\"front end\"
; another comment
[db]
db-[a:b] ansible_user=postgres
solo:2200

[prod:children]
web
db

[web:vars]
http_port=8080
enabled=true
name='quoted'
ratio=1.5

[prod:vars]
env=production
";

/// The same inventory as [`INI`], written as YAML.
pub(super) const YAML: &str = "\
all:
  hosts:
    jump:
      ansible_host: 192.0.2.1
  children:
    web:
      hosts:
        web[01:03].example.com:
          ansible_port: 2222
          role: front end
      vars:
        http_port: 8080
        enabled: true
        name: quoted
        ratio: 1.5
    db:
      hosts:
        db-[a:b]: {ansible_user: postgres}
        solo:2200:
    prod:
      children:
        web:
        db:
      vars:
        env: production
";

/// Inventory with `all` > `site` > `web` > host, each setting `v`/`from_*` keys.
pub(super) fn precedence_fixture(dir: &Path) -> PathBuf {
    let inv = write(
        dir,
        "inv/hosts",
        "[web]\nw1 v=host from_host=1\nw2\n\
         [site:children]\nweb\n\
         [all:vars]\nv=all\nfrom_all=1\n\
         [site:vars]\nv=site\nfrom_site=1\n\
         [web:vars]\nv=web\nfrom_web=1\nfile_beats_inline=inline\n",
    );
    write(dir, "inv/group_vars/web.yml", "file_beats_inline: file\n");
    inv
}
