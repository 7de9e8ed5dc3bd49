//! The native text-file modules `replace`, `ini_file`, `pam_limits` and `authorized_key` over
//! loopback sshd with become: check mode inert, the first run changes the files (root's, or the
//! key file given to its user), the rerun leaves them untouched, `--diff` shows the edit and
//! registers Ansible's `diff`, and bad parameters are refused with a position.

use crate::fx::{snapshot, Fx, Out};
use crate::ssh::Fleet;

/// The files under the host's `base`, with mode, owner and mtime: "untouched" means equal.
fn observe(fleet: &Fleet) -> String {
    format!("{:?}", snapshot(&fleet.base(&fleet.hosts[0])))
}

const SEED: &str = concat!(
    "    - name: dir\n      file: {path: \"{{ base }}\", state: directory, mode: \"0755\"}\n      check_mode: false\n",
    "    - name: seed\n      copy: {content: \"port=80\\nhost=a\\n[x]\\nport=80\\n\", dest: \"{{ base }}/app.conf\", mode: \"0600\", force: false}\n      check_mode: false\n",
);

const EDITS: &str = concat!(
    "    - name: replace\n      replace: {path: \"{{ base }}/app.conf\", regexp: '^port=(80)$', replace: 'port=\\g<1>80', before: '\\[x\\]'}\n      register: r\n",
    "    - name: ini\n      community.general.ini_file: {path: \"{{ base }}/app.ini\", section: main, option: port, value: 8080, mode: \"0640\"}\n      register: i\n",
    "    - name: limits\n      pam_limits: {dest: \"{{ base }}/limits.conf\", domain: fpuser, limit_type: soft, limit_item: nofile, value: 4096}\n      register: l\n",
    "    - name: key\n      ansible.posix.authorized_key: {user: fpuser, key: \"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFp fp@test\", path: \"{{ base }}/ssh/authorized_keys\"}\n      register: k\n",
);

#[test]
fn text_modules_converge_over_ssh_with_become() {
    let fleet = Fleet::start(1, "fpsudo");
    let base = fleet.base(&fleet.hosts[0]);
    fleet.play_full("  gather_facts: false\n  become: true\n", SEED);
    fleet.apply(&[]).expect(0);
    fleet.play_full("  gather_facts: false\n  become: true\n", EDITS);
    let first = crate::fx::converge(&|a: &[&str]| fleet.apply(a), &|| observe(&fleet));
    let replace = &first.task_events("replace")[0]["result"];
    assert_eq!(replace["msg"], "1 replacements made", "{}", first.stdout);
    assert_eq!(
        std::fs::read_to_string(base.join("app.conf")).unwrap(),
        "port=8080\nhost=a\n[x]\nport=80\n"
    );
    assert_eq!(
        std::fs::read_to_string(base.join("app.ini")).unwrap(),
        "\n[main]\nport = 8080\n"
    );
    let meta = std::fs::metadata(base.join("app.ini")).unwrap();
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    assert_eq!(meta.permissions().mode() & 0o7777, 0o640);
    assert_eq!(meta.uid(), 0, "written as root through become");
    assert_eq!(
        std::fs::read_to_string(base.join("limits.conf")).unwrap(),
        "fpuser\tsoft\tnofile\t4096\n"
    );
    // The key file and its directory belong to the user, 0600 and 0700, as Ansible leaves them.
    let fpuser = nix_uid("fpuser");
    let keys = base.join("ssh/authorized_keys");
    assert_eq!(
        std::fs::read_to_string(&keys).unwrap(),
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFp fp@test\n"
    );
    for (p, mode) in [(keys.clone(), 0o600), (base.join("ssh"), 0o700)] {
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(
            (m.uid(), m.permissions().mode() & 0o7777),
            (fpuser, mode),
            "{p:?}"
        );
    }
    let ini = &first.task_events("ini")[0]["result"];
    assert_eq!(ini["msg"], "section and option added", "{ini}");
    assert_eq!(ini["mode"], "0640", "{ini}");
}

#[test]
fn diff_mode_shows_the_edit_and_registers_ansibles_diff() {
    let fleet = Fleet::start(1, "fpsudo");
    let base = fleet.base(&fleet.hosts[0]);
    fleet.play_full("  gather_facts: false\n  become: true\n", SEED);
    fleet.apply(&[]).expect(0);
    fleet.play_full(
        "  gather_facts: false\n  become: true\n",
        &format!(
            "{EDITS}{}",
            concat!(
                "    - name: registered\n      assert:\n        that:\n",
                "          - r.diff.before == 'port=80\\nhost=a\\n[x]\\nport=80\\n'\n",
                "          - r.diff.after is search('port=8080')\n",
                "          - i.diff.before == ''\n",
                "          - i.diff.after == '\\n[main]\\nport = 8080\\n'\n",
                "          - i.diff.after_header is search('app.ini \\(content\\)$')\n",
                "          - l.diff.after == 'fpuser\\tsoft\\tnofile\\t4096\\n'\n",
            )
        ),
    );
    let before = observe(&fleet);
    let out = fleet.apply(&["--check", "--diff"]);
    out.expect(0);
    assert_eq!(out.status_of("registered"), "ok", "{}", out.stdout);
    assert_eq!(observe(&fleet), before, "check mode changed the host");
    let shown = serde_json::to_string(&out.task_events("replace")[0]["diff"]).unwrap();
    assert!(shown.contains("port=8080"), "{shown}");
    let shown = serde_json::to_string(&out.task_events("ini")[0]["diff"]).unwrap();
    assert!(shown.contains("port = 8080"), "{shown}");
    assert!(!base.join("app.ini").exists());
    assert!(!base.join("limits.conf").exists());
}

/// A user's uid, from the passwd database.
fn nix_uid(name: &str) -> u32 {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f[0] == name)
        .map(|f| f[2].parse().unwrap())
        .unwrap_or_else(|| panic!("no user {name}"))
}

fn refused(fx: &Fx, task: &str, says: &str) -> Out {
    fx.play(&format!("    - name: bad\n      {task}\n"));
    let out = fx.apply(&[]);
    out.expect(2);
    assert!(out.stderr.contains(says), "{task}: {}", out.stderr);
    assert!(
        out.stderr.contains("site.yml:"),
        "{task}: no position: {}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "nothing may run: {}", out.stdout);
    out
}

#[test]
fn bad_text_module_parameters_are_refused_at_load_time() {
    let fx = Fx::new();
    refused(&fx, "replace: {path: /tmp/x, regexp: '(a'}", "regexp");
    refused(
        &fx,
        "replace: {path: /tmp/x, regexp: a, encoding: latin-1}",
        "UTF-8",
    );
    refused(
        &fx,
        "ini_file: {path: /tmp/x, section: a, option: b}",
        "value",
    );
    refused(
        &fx,
        "community.general.ini_file: {path: /tmp/x, option: b, value: 1, values: [2]}",
        "mutually exclusive",
    );
    refused(
        &fx,
        "ini_file: {path: /tmp/x, option: b, value: 1, state: gone}",
        "state",
    );
    refused(
        &fx,
        "authorized_key: {user: fpuser, key: \"https://example.com/fp.keys\"}",
        "no HTTP client",
    );
    refused(
        &fx,
        "authorized_key: {user: fpuser, key: nonsense}",
        "invalid key",
    );
    refused(
        &fx,
        "pam_limits: {domain: u, limit_type: soft, limit_item: files, value: 1}",
        "limit_item",
    );
    refused(
        &fx,
        "community.general.pam_limits: {domain: u, limit_type: soft, limit_item: nofile, value: lots}",
        "invalid",
    );
}
