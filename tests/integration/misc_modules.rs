//! `find`, `slurp`, `tempfile` and `wait_for` over a loopback sshd host as fpsudo with `become`:
//! find on a tree built here (each filter), slurp of a root-only file, tempfile's new path each
//! run, and wait_for on a port and a file that appear only after the run reached the task (the
//! test reacts to the run's own JSON events, it does not sleep).

use crate::fx::Out;
use crate::ssh::Fleet;
use serde_json::Value;
use std::io::BufRead;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;

fn result(out: &Out, task: &str) -> Value {
    let evs = out.task_events(task);
    assert_eq!(evs.len(), 1, "one result for {task}: {}", out.stdout);
    evs[0]["result"].clone()
}

/// The found paths relative to `root`, sorted (the walk's own order is the directory's).
fn found(out: &Out, task: &str, root: &Path) -> Vec<String> {
    let r = result(out, task);
    let files = r["files"]
        .as_array()
        .unwrap_or_else(|| panic!("{task}: {r}"));
    assert_eq!(r["matched"], files.len(), "{task}: {r}");
    let mut v: Vec<String> = files
        .iter()
        .map(|f| {
            let p = f["path"].as_str().unwrap();
            p.strip_prefix(&format!("{}/", root.display()))
                .unwrap_or(p)
                .to_string()
        })
        .collect();
    v.sort();
    v
}

fn write(p: &Path, content: &str, mode: u32) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn find_slurp_and_tempfile_over_ssh_with_become() {
    let fleet = Fleet::start(1, "fpsudo");
    let base = fleet.base(&fleet.hosts[0]);
    let tree = base.join("tree");
    // Made by root, readable by root only where it matters: the play must become root.
    write(&tree.join("app.conf"), "# app\nport=8080\n", 0o600);
    write(
        &tree.join("notes.txt"),
        "free text, port=1 in the middle\n",
        0o644,
    );
    write(&tree.join("skip-me.txt"), "x\n", 0o644);
    write(&tree.join("big.bin"), &"z".repeat(3000), 0o644);
    write(&tree.join(".hidden.txt"), "h\n", 0o644);
    write(&tree.join("sub/inner.txt"), "port=9\n", 0o644);
    write(&tree.join("sub/deeper/deep.txt"), "d\n", 0o644);
    std::os::unix::fs::symlink("sub", tree.join("to-sub")).unwrap();
    std::fs::set_permissions(&tree, std::fs::Permissions::from_mode(0o700)).unwrap();
    let tmp = base.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();

    let t = "{{ base }}/tree";
    fleet.play_full(
        "  gather_facts: false\n  become: true\n",
        &format!(
            "    - name: plain\n      find: {{ paths: \"{t}\" }}\n\
             \x20   - name: globs\n      find: {{ paths: \"{t}\", patterns: \"*.txt,*.conf\", excludes: \"skip*\", recurse: true }}\n\
             \x20   - name: regex\n      find: {{ paths: \"{t}\", patterns: ['^[a-n].*\\.(txt|conf)$'], use_regex: true }}\n\
             \x20   - name: contains\n      find: {{ paths: \"{t}\", contains: 'port=\\d+$', recurse: true }}\n\
             \x20   - name: dirs\n      find: {{ paths: \"{t}\", file_type: directory, recurse: true }}\n\
             \x20   - name: links\n      find: {{ paths: \"{t}\", file_type: link }}\n\
             \x20   - name: any\n      find: {{ paths: \"{t}\", file_type: any, patterns: 'to-*,sub' }}\n\
             \x20   - name: size\n      find: {{ paths: \"{t}\", size: 2k }}\n\
             \x20   - name: age\n      find: {{ paths: \"{t}\", age: 1d }}\n\
             \x20   - name: mode\n      find: {{ paths: \"{t}\", mode: \"0600\", get_checksum: true }}\n\
             \x20   - name: hidden\n      find: {{ paths: \"{t}\", hidden: true, patterns: '.*' }}\n\
             \x20   - name: depth\n      find: {{ paths: \"{t}\", recurse: true, depth: 2 }}\n\
             \x20   - name: follow\n      find: {{ paths: \"{t}\", recurse: true, follow: true, patterns: inner.txt }}\n\
             \x20   - name: missing\n      find: {{ paths: \"{t}/nope,{t}\", patterns: app.conf }}\n\
             \x20   - name: slurp\n      slurp: {{ src: \"{t}/app.conf\" }}\n      register: s\n\
             \x20   - name: decoded\n      assert:\n        that: (s.content | b64decode) == '# app\\nport=8080\\n'\n\
             \x20   - name: tempdir\n      tempfile: {{ state: directory, path: \"{{{{ base }}}}/tmp\", suffix: .test }}\n\
             \x20   - name: tempfile\n      tempfile: {{ path: \"{{{{ base }}}}/tmp\", prefix: fp. }}\n"
        ),
    );
    let out = fleet.apply(&["-v"]);
    out.expect(0);
    let statuses: Vec<(String, String)> = out
        .events()
        .into_iter()
        .filter(|e| e["event"] == "task")
        .map(|e| {
            (
                e["task"].as_str().unwrap().to_string(),
                e["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (task, status) in &statuses {
        let want = if task.starts_with("temp") {
            "changed"
        } else {
            "ok"
        };
        assert_eq!(status, want, "{task}: {}", out.stdout);
    }
    assert_eq!(
        found(&out, "plain", &tree),
        ["app.conf", "big.bin", "notes.txt", "skip-me.txt"]
    );
    assert_eq!(
        found(&out, "globs", &tree),
        [
            "app.conf",
            "notes.txt",
            "sub/deeper/deep.txt",
            "sub/inner.txt"
        ]
    );
    assert_eq!(found(&out, "regex", &tree), ["app.conf", "notes.txt"]);
    assert_eq!(
        found(&out, "contains", &tree),
        ["app.conf", "sub/inner.txt"]
    );
    assert_eq!(found(&out, "dirs", &tree), ["sub", "sub/deeper"]);
    assert_eq!(found(&out, "links", &tree), ["to-sub"]);
    assert_eq!(found(&out, "any", &tree), ["sub", "to-sub"]);
    assert_eq!(found(&out, "size", &tree), ["big.bin"]);
    assert_eq!(found(&out, "age", &tree), Vec::<String>::new());
    assert_eq!(found(&out, "mode", &tree), ["app.conf"]);
    assert_eq!(found(&out, "hidden", &tree), [".hidden.txt"]);
    assert_eq!(
        found(&out, "depth", &tree),
        [
            "app.conf",
            "big.bin",
            "notes.txt",
            "skip-me.txt",
            "sub/inner.txt"
        ]
    );
    assert_eq!(
        found(&out, "follow", &tree),
        ["sub/inner.txt", "to-sub/inner.txt"]
    );

    let mode = &result(&out, "mode")["files"][0];
    assert_eq!(
        (
            &mode["pw_name"],
            &mode["mode"],
            &mode["isreg"],
            &mode["size"]
        ),
        (&"root".into(), &"0600".into(), &true.into(), &16.into()),
        "{mode}"
    );
    // sha1 of "# app\nport=8080\n".
    assert_eq!(mode["checksum"], "7ac6502cb355643217b69042f03a215ff591dafb");
    let plain = result(&out, "plain");
    // Seven entries in the tree's top directory, examined without recursing.
    assert_eq!(plain["examined"], 7, "{plain}");
    let missing = result(&out, "missing");
    assert_eq!(
        missing["skipped_paths"],
        serde_json::json!({format!("{}/nope", tree.display()): format!("'{}/nope' is not a directory", tree.display())})
    );
    assert_eq!(missing["matched"], 1);

    let s = result(&out, "slurp");
    assert_eq!(s["encoding"], "base64");
    assert_eq!(s["source"], tree.join("app.conf").display().to_string());

    let dir = result(&out, "tempdir");
    let dir_path = dir["path"].as_str().unwrap().to_string();
    assert!(
        dir_path.starts_with(&format!("{}/ansible.", tmp.display())) && dir_path.ends_with(".test"),
        "{dir}"
    );
    assert_eq!(
        (&dir["state"], &dir["mode"], &dir["owner"]),
        (&"directory".into(), &"0700".into(), &"root".into())
    );
    let file = result(&out, "tempfile");
    let file_path = file["path"].as_str().unwrap().to_string();
    let meta = std::fs::metadata(&file_path).unwrap();
    assert!(meta.is_file());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(
        std::os::unix::fs::MetadataExt::uid(&meta),
        0,
        "made as root"
    );

    // Again: find and slurp report the same; tempfile makes new ones (never idempotent).
    let again = fleet.apply(&["-v"]);
    again.expect(0);
    assert_eq!(found(&again, "globs", &tree), found(&out, "globs", &tree));
    assert_ne!(result(&again, "tempfile")["path"], file_path.as_str());
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 4);

    // Check mode: tempfile is skipped and creates nothing; the readers still read.
    let check = fleet.apply(&["--check", "-v"]);
    check.expect(0);
    assert_eq!(check.status_of("tempfile"), "skipped", "{}", check.stdout);
    assert_eq!(check.status_of("globs"), "ok");
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 4);
}

#[test]
fn wait_for_ports_and_files_that_appear_during_the_run() {
    let fleet = Fleet::start(1, "fpsudo");
    let base = fleet.base(&fleet.hosts[0]);
    std::fs::create_dir_all(&base).unwrap();
    std::fs::write(base.join("log"), "booting\nlistening on 8080\n").unwrap();
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let later = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    fleet.play_full(
        "  gather_facts: false\n  become: true\n",
        &format!(
            "    - name: already there\n      wait_for: {{ path: \"{{{{ base }}}}/log\", search_regex: 'listening on (?P<port>\\d+)', timeout: 10 }}\n\
             \x20   - name: stopped\n      wait_for: {{ port: {closed}, state: stopped, timeout: 10 }}\n\
             \x20   - name: absent\n      wait_for: {{ path: \"{{{{ base }}}}/nothing\", state: absent, timeout: 10 }}\n\
             \x20   - name: times out\n      wait_for: {{ port: {closed}, timeout: 1 }}\n      ignore_errors: true\n\
             \x20   - name: armed port\n      debug: {{ msg: armed }}\n\
             \x20   - name: port later\n      wait_for: {{ port: {later}, timeout: 120 }}\n\
             \x20   - name: armed file\n      debug: {{ msg: armed }}\n\
             \x20   - name: file later\n      wait_for: {{ path: \"{{{{ base }}}}/late\", search_regex: 'ready (\\d+)', timeout: 120 }}\n\
             \x20   - name: task timeout\n      wait_for: {{ path: \"{{{{ base }}}}/never\", timeout: 300 }}\n      timeout: 2\n      ignore_errors: true\n\
             \x20   - name: after\n      debug: {{ msg: done }}\n"
        ),
    );
    let mut child = fleet.spawn_apply(&["-v"], Stdio::null());
    let stdout = child.stdout.take().unwrap();
    let late = base.join("late");
    // React to the run's events: the listener and the file appear only once the run is past
    // the task just before the one waiting for them.
    let mut lines = Vec::new();
    let mut listener = None;
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if let Ok(e) = serde_json::from_str::<Value>(&line) {
            if e["event"] == "task" && e["task"] == "armed port" {
                listener = Some(std::net::TcpListener::bind(("127.0.0.1", later)).unwrap());
            }
            if e["event"] == "task" && e["task"] == "armed file" {
                std::fs::write(&late, "ready 42\n").unwrap();
            }
        }
        lines.push(line);
    }
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    let out = Out {
        code: status.code().unwrap_or(-1),
        stdout: lines.join("\n"),
        stderr,
    };
    out.expect(0);
    assert!(listener.is_some(), "the run never reached `armed port`");

    let there = result(&out, "already there");
    assert_eq!(out.status_of("already there"), "ok");
    assert_eq!(there["match_groups"], serde_json::json!(["8080"]));
    assert_eq!(
        there["match_groupdict"],
        serde_json::json!({"port": "8080"})
    );
    // As in Ansible, a path's attributes come with the result, its `state` among them.
    assert_eq!(
        (&there["state"], &there["owner"]),
        (&"file".into(), &"root".into())
    );
    assert_eq!(out.status_of("stopped"), "ok");
    assert_eq!(result(&out, "stopped")["port"], closed);
    assert_eq!(out.status_of("absent"), "ok");
    let timed = &out.task_events("times out")[0];
    assert_eq!(timed["status"], "failed");
    // The reporter adds where the task is.
    assert!(
        timed["msg"].as_str().unwrap_or("").starts_with(&format!(
            "Timeout when waiting for 127.0.0.1:{closed} (task"
        )),
        "{timed}"
    );
    assert_eq!(out.status_of("port later"), "ok");
    assert_eq!(
        result(&out, "file later")["match_groups"],
        serde_json::json!(["42"])
    );
    // The task's own timeout stops the wait (the agent answers for it), the run goes on.
    let stopped = &out.task_events("task timeout")[0];
    assert_eq!(stopped["status"], "failed", "{stopped}");
    assert!(
        stopped["msg"]
            .as_str()
            .unwrap_or("")
            .contains("Timed out after 2 second(s)"),
        "{stopped}"
    );
    assert_eq!(out.status_of("after"), "ok");
}

#[test]
fn fetch_round_trip_over_ssh_with_become_transfers_only_changes() {
    let fleet = Fleet::start(1, "fpsudo");
    let host = fleet.hosts[0].alias().to_string();
    let base = fleet.base(&fleet.hosts[0]);
    // Root-only on the host, and larger than one chunk (4 MiB): three chunks.
    let big: Vec<u8> = (0..9 * 1024 * 1024 + 7).map(|i| (i % 251) as u8).collect();
    let src = base.join("remote/big.bin");
    std::fs::create_dir_all(src.parent().unwrap()).unwrap();
    std::fs::write(&src, &big).unwrap();
    std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o600)).unwrap();
    write(&base.join("remote/small.conf"), "port=8080\n", 0o600);
    fleet.play_full(
        "  gather_facts: false\n  become: true\n",
        "    - name: big\n      fetch: { src: \"{{ base }}/remote/big.bin\", dest: got }\n\
         \x20   - name: small flat\n      fetch: { src: \"{{ base }}/remote/small.conf\", dest: flat/, flat: true }\n\
         \x20   - name: slurp back\n      slurp: { src: \"{{ base }}/remote/small.conf\" }\n      register: s\n\
         \x20   - name: same bytes\n      when: not ansible_check_mode\n      assert:\n        that: (s.content | b64decode) == lookup('file', 'flat/small.conf') ~ '\\n'\n",
    );
    let fetched = fleet
        .fx
        .path("got")
        .join(&host)
        .join(src.strip_prefix("/").unwrap());
    let flat = fleet.fx.path("flat/small.conf");

    let first = fleet.apply(&["-v"]);
    first.expect(0);
    let big_ev = &first.task_events("big")[0];
    assert_eq!(big_ev["status"], "changed", "{}", first.stdout);
    assert_eq!(
        big_ev["note"],
        format!("content fetched: {} bytes", big.len())
    );
    let r = &big_ev["result"];
    assert_eq!(r["dest"], fetched.display().to_string());
    assert_eq!(r["checksum"], r["remote_checksum"]);
    assert_eq!(std::fs::read(&fetched).unwrap(), big, "the same bytes");
    assert_eq!(std::fs::read_to_string(&flat).unwrap(), "port=8080\n");
    assert_eq!(first.status_of("same bytes"), "ok");
    let stamps = (crate::fx::stamp(&fetched), crate::fx::stamp(&flat));

    // Unchanged on the host: nothing is transferred and the controller's files stay as they are.
    let second = fleet.apply(&["-v"]);
    second.expect(0);
    for task in ["big", "small flat"] {
        let ev = &second.task_events(task)[0];
        assert_eq!(ev["status"], "ok", "{}", second.stdout);
        assert!(ev.get("note").is_none(), "nothing fetched: {ev}");
        assert_eq!(ev["result"]["changed"], false);
    }
    assert_eq!(
        (crate::fx::stamp(&fetched), crate::fx::stamp(&flat)),
        stamps
    );

    // A change on the host is fetched again; check mode skips fetch and writes nothing.
    write(&base.join("remote/small.conf"), "port=9090\n", 0o600);
    let check = fleet.apply(&["--check"]);
    check.expect(0);
    assert_eq!(check.status_of("small flat"), "skipped");
    assert_eq!(std::fs::read_to_string(&flat).unwrap(), "port=8080\n");
    let third = fleet.apply(&["-v"]);
    third.expect(0);
    assert_eq!(third.status_of("small flat"), "changed");
    assert_eq!(third.status_of("big"), "ok");
    assert_eq!(std::fs::read_to_string(&flat).unwrap(), "port=9090\n");
}
