//! `get_url`, `uri` and the `url` lookup against real HTTP servers on 127.0.0.1
//! (`http_server.rs`): the modules run in the agent over loopback sshd (with `become` for
//! get_url), and the server's request log proves what was fetched: a converged run sends no
//! request, check mode downloads nothing, a checksum mismatch leaves `dest` as it was.

use crate::fx::{stamp, Out};
use crate::http_server::{Route, Server, TlsServer};
use crate::ssh::Fleet;
use sha2::Digest;

fn result(out: &Out, task: &str) -> serde_json::Value {
    let evs = out.task_events(task);
    assert_eq!(evs.len(), 1, "one result for {task}: {}", out.stdout);
    evs[0]["result"].clone()
}

fn sha1_hex(s: &str) -> String {
    hex::encode(sha1::Sha1::digest(s.as_bytes()))
}

fn sha256_hex(s: &str) -> String {
    hex::encode(sha2::Sha256::digest(s.as_bytes()))
}

/// A fleet of one host as fpsudo whose agent state belongs to root (for `become`).
fn root_fleet() -> Fleet {
    let fleet = Fleet::start(1, "fpsudo");
    let state = fleet.fx.path("root.state");
    fleet.fx.write(
        "hosts.ini",
        &format!(
            "[fleet]\n{} fixpoint_state_dir={}\n",
            fleet.hosts[0].alias(),
            state.display()
        ),
    );
    fleet
}

/// Leftover temp files of a download in `dir` (there must be none).
fn temps(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".fixpoint."))
        .collect()
}

#[test]
fn get_url_converges_checks_checksums_and_downloads_nothing_when_converged() {
    let srv = Server::start();
    srv.route("/file.txt", Route::ok("payload v1\n"));
    let fleet = root_fleet();
    let base = fleet.base(&fleet.hosts[0]);
    let dest = base.join("f.txt");
    let task = |extra: &str| {
        format!(
            "    - name: fetch\n      file: {{ path: \"{{{{ base }}}}\", state: directory, mode: \"0777\" }}\n      become: true\n\
             \x20   - name: get\n      get_url:\n        url: {}\n        dest: \"{{{{ base }}}}/f.txt\"\n        mode: \"0640\"\n        owner: root\n{extra}      become: true\n",
            srv.url("/file.txt")
        )
    };
    std::fs::create_dir_all(&base).unwrap();
    std::fs::set_permissions(&base, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    fleet.play(&task(""));
    let observe = || {
        use std::os::unix::fs::MetadataExt;
        match std::fs::metadata(&dest) {
            Ok(m) => format!(
                "{:o} {} {}",
                m.mode() & 0o7777,
                m.uid(),
                std::fs::read_to_string(&dest).unwrap()
            ),
            Err(_) => "absent".into(),
        }
    };
    let before = observe();
    let check = fleet.apply(&["--check"]);
    check.expect(0);
    assert_eq!(check.status_of("get"), "changed", "{}", check.stdout);
    assert_eq!(observe(), before, "check mode wrote the file");
    assert_eq!(srv.count("GET", "/file.txt"), 0, "check mode downloaded");
    assert_eq!(
        srv.count("HEAD", "/file.txt"),
        1,
        "check mode asks with HEAD"
    );

    let first = fleet.apply(&["-v"]);
    first.expect(0);
    assert_eq!(first.status_of("get"), "changed", "{}", first.stdout);
    assert_eq!(observe(), "640 0 payload v1\n");
    let r = result(&first, "get");
    assert_eq!(r["status_code"], 200, "{r}");
    assert_eq!(r["checksum_src"], sha1_hex("payload v1\n"), "{r}");
    assert_eq!(r["checksum_dest"], serde_json::Value::Null, "{r}");
    assert_eq!(r["dest"], dest.display().to_string(), "{r}");
    assert_eq!(r["msg"], "OK (11 bytes)", "{r}");
    assert_eq!(r["owner"], "root", "{r}");
    assert_eq!(r["mode"], "0640", "{r}");
    assert_eq!(r["md5sum"], "03362c215458033bddca4a0e320657db", "{r}");
    assert_eq!(srv.count("GET", "/file.txt"), 1);

    let second = fleet.apply(&["-v"]);
    second.expect(0);
    assert_eq!(second.status_of("get"), "ok", "{}", second.stdout);
    assert_eq!(result(&second, "get")["msg"], "file already exists");
    assert_eq!(
        srv.count("GET", "/file.txt"),
        1,
        "a converged run downloaded"
    );
    let stamp_before = stamp(&dest);

    // The server's file changes; the checksum says what dest must hold. A checksum that
    // neither dest nor the download has: the task fails and dest stays as it was.
    srv.route("/file.txt", Route::ok("payload v2\n"));
    let wrong = "0".repeat(64);
    fleet.play(&task(&format!("        checksum: \"sha256:{wrong}\"\n")));
    let bad = fleet.apply(&["-v"]);
    bad.expect(1);
    assert_eq!(bad.status_of("get"), "failed", "{}", bad.stdout);
    let ev = &bad.task_events("get")[0];
    let msg = ev["msg"].as_str().unwrap_or_default();
    assert!(
        msg.contains("did not match") && msg.contains(&wrong),
        "{msg}"
    );
    assert_eq!(observe(), "640 0 payload v1\n", "a mismatch touched dest");
    assert_eq!(stamp(&dest), stamp_before, "a mismatch rewrote dest");
    assert_eq!(temps(&base), Vec::<String>::new(), "temp files left behind");
    assert_eq!(srv.count("GET", "/file.txt"), 2);

    // The checksum of what dest holds: converged, no request.
    fleet.play(&task(&format!(
        "        checksum: \"sha256:{}\"\n",
        sha256_hex("payload v1\n")
    )));
    let same = fleet.apply(&[]);
    same.expect(0);
    assert_eq!(same.status_of("get"), "ok", "{}", same.stdout);
    assert_eq!(srv.count("GET", "/file.txt"), 2);

    // The checksum of the new content, from a checksums file: dest differs, so it is fetched.
    srv.route(
        "/SHA256SUMS",
        Route::ok(&format!(
            "{}  other.txt\n{}  file.txt\n",
            "1".repeat(64),
            sha256_hex("payload v2\n")
        )),
    );
    fleet.play(&task(&format!(
        "        checksum: \"sha256:{}\"\n",
        srv.url("/SHA256SUMS")
    )));
    let by_sums = fleet.apply(&["-v"]);
    by_sums.expect(0);
    assert_eq!(by_sums.status_of("get"), "changed", "{}", by_sums.stdout);
    assert_eq!(observe(), "640 0 payload v2\n");
    let r = result(&by_sums, "get");
    assert_eq!(r["checksum_dest"], sha1_hex("payload v1\n"), "{r}");
    assert_eq!(r["checksum_src"], sha1_hex("payload v2\n"), "{r}");
    let again = fleet.apply(&[]);
    again.expect(0);
    assert_eq!(again.status_of("get"), "ok", "{}", again.stdout);
    assert_eq!(srv.count("GET", "/file.txt"), 3, "the rerun downloaded");

    // force: fetched every time, replaced only when different; attributes kept.
    srv.route("/file.txt", Route::ok("payload v3\n"));
    fleet.play(&task("        force: true\n        backup: true\n"));
    let forced = fleet.apply(&["-v"]);
    forced.expect(0);
    assert_eq!(forced.status_of("get"), "changed", "{}", forced.stdout);
    assert_eq!(observe(), "640 0 payload v3\n");
    let backup = result(&forced, "get")["backup_file"]
        .as_str()
        .expect("backup_file")
        .to_string();
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), "payload v2\n");
    std::fs::remove_file(&backup).unwrap();
    let forced_again = fleet.apply(&[]);
    forced_again.expect(0);
    assert_eq!(
        forced_again.status_of("get"),
        "ok",
        "{}",
        forced_again.stdout
    );
    assert_eq!(srv.count("GET", "/file.txt"), 5);
    let no_cache = srv
        .log()
        .iter()
        .rev()
        .find(|r| r.method == "GET")
        .map(|r| r.headers.get("cache-control").cloned());
    assert_eq!(
        no_cache,
        Some(Some("no-cache".into())),
        "force asks for a fresh copy"
    );
}

#[test]
fn get_url_into_a_directory_with_auth_and_redirects() {
    let srv = Server::start();
    srv.route(
        "/download",
        Route::ok("named content\n")
            .header("Content-Disposition", "attachment; filename=\"named.bin\""),
    );
    srv.route("/pkg/tool-1.0.tar.gz", Route::ok("tool\n"));
    srv.route("/private", Route::ok("secret\n").needs("alice:s3cret"));
    srv.route("/old", Route::redirect(302, "/pkg/tool-1.0.tar.gz"));
    let fleet = Fleet::start(1, "fpuser");
    let base = fleet.base(&fleet.hosts[0]);
    fleet.play(&format!(
        "    - name: dir\n      file: {{ path: \"{{{{ base }}}}/dl\", state: directory }}\n\
         \x20   - name: named\n      get_url: {{ url: \"{u1}\", dest: \"{{{{ base }}}}/dl/\" }}\n\
         \x20   - name: from url\n      get_url: {{ url: \"{u2}\", dest: \"{{{{ base }}}}/dl\" }}\n\
         \x20   - name: challenged\n      get_url: {{ url: \"{u3}\", dest: \"{{{{ base }}}}/p1\", url_username: alice, url_password: s3cret }}\n\
         \x20   - name: preemptive\n      get_url: {{ url: \"{u3}\", dest: \"{{{{ base }}}}/p2\", username: alice, password: s3cret, force_basic_auth: true }}\n\
         \x20   - name: redirected\n      get_url: {{ url: \"{u4}\", dest: \"{{{{ base }}}}/r\" }}\n",
        u1 = srv.url("/download"),
        u2 = srv.url("/pkg/tool-1.0.tar.gz"),
        u3 = srv.url("/private"),
        u4 = srv.url("/old"),
    ));
    let first = fleet.apply(&["-v"]);
    first.expect(0);
    assert_eq!(first.statuses(), ["changed"; 6], "{}", first.stdout);
    let read = |p: &str| std::fs::read_to_string(base.join(p)).unwrap();
    assert_eq!(read("dl/named.bin"), "named content\n");
    assert_eq!(
        result(&first, "named")["dest"],
        base.join("dl/named.bin").display().to_string()
    );
    assert_eq!(read("dl/tool-1.0.tar.gz"), "tool\n");
    assert_eq!(read("p1"), "secret\n");
    assert_eq!(read("p2"), "secret\n");
    assert_eq!(read("r"), "tool\n");
    // Without force_basic_auth the credentials follow a challenge; with it they go at once.
    let private: Vec<Option<String>> = srv
        .log()
        .iter()
        .filter(|r| r.target == "/private")
        .map(|r| r.headers.get("authorization").cloned())
        .collect();
    assert_eq!(private.len(), 3, "{private:?}");
    assert_eq!(private[0], None);
    assert!(private[1]
        .as_deref()
        .is_some_and(|a| a.starts_with("Basic ")));
    assert!(private[2].is_some(), "force_basic_auth sends at once");

    // A directory dest is fetched again (the name comes from the answer), as in Ansible; the
    // files themselves converge. The others send nothing.
    let second = fleet.apply(&[]);
    second.expect(0);
    assert_eq!(second.statuses(), ["ok"; 6], "{}", second.stdout);
    assert_eq!(srv.count("GET", "/download"), 2);
    assert_eq!(srv.count("GET", "/private"), 3);
    assert_eq!(srv.count("GET", "/old"), 1);

    // Wrong credentials and a missing file fail with the status.
    fleet.play(&format!(
        "    - name: denied\n      get_url: {{ url: \"{}\", dest: \"{{{{ base }}}}/p3\", url_username: alice, url_password: nope }}\n      ignore_errors: true\n\
         \x20   - name: missing\n      get_url: {{ url: \"{}\", dest: \"{{{{ base }}}}/p4\" }}\n      ignore_errors: true\n",
        srv.url("/private"),
        srv.url("/nothing-here"),
    ));
    let failing = fleet.apply(&["-v"]);
    failing.expect(0);
    assert_eq!(
        failing.statuses(),
        ["failed", "failed"],
        "{}",
        failing.stdout
    );
    let denied = &failing.task_events("denied")[0];
    assert_eq!(denied["result"]["msg"], "Request failed", "{denied}");
    assert_eq!(denied["result"]["status_code"], 401, "{denied}");
    assert_eq!(
        failing.task_events("missing")[0]["result"]["status_code"],
        404
    );
    assert!(!base.join("p3").exists() && !base.join("p4").exists());
}

#[test]
fn uri_requests_bodies_statuses_and_check_mode() {
    let srv = Server::start();
    srv.route("/api", Route::json(r#"{"version": "1.2.3", "ok": true}"#));
    srv.route("/old", Route::redirect(301, "/api"));
    srv.route("/page", Route::ok("<p>hi</p>\n"));
    let fleet = Fleet::start(1, "fpuser");
    let base = fleet.base(&fleet.hosts[0]);
    fleet.play(&format!(
        "    - name: dir\n      file: {{ path: \"{{{{ base }}}}\", state: directory }}\n\
         \x20   - name: get json\n      uri: {{ url: \"{api}\" }}\n      register: j\n\
         \x20   - name: post json\n      uri:\n        url: \"{echo}\"\n        method: POST\n        body_format: json\n        body: {{ a: 1, b: [x, true] }}\n        status_code: [200, 201]\n        return_content: true\n\
         \x20   - name: post form\n      uri:\n        url: \"{echo}\"\n        method: POST\n        body_format: form-urlencoded\n        body: {{ name: a b, n: [1, 2] }}\n\
         \x20   - name: missing\n      uri: {{ url: \"{missing}\" }}\n      ignore_errors: true\n\
         \x20   - name: missing expected\n      uri: {{ url: \"{missing}\", status_code: 404 }}\n\
         \x20   - name: follow\n      uri: {{ url: \"{old}\" }}\n\
         \x20   - name: no follow\n      uri: {{ url: \"{old}\", follow_redirects: none, status_code: 301 }}\n\
         \x20   - name: save\n      uri: {{ url: \"{page}\", dest: \"{{{{ base }}}}/page.html\" }}\n\
         \x20   - name: guarded\n      uri: {{ url: \"{page}\", creates: \"{{{{ base }}}}/page.html\" }}\n\
         \x20   - name: use\n      assert: {{ that: [\"j.json.version == '1.2.3'\", \"j.status == 200\"] }}\n",
        api = srv.url("/api"),
        echo = srv.url("/echo"),
        missing = srv.url("/missing"),
        old = srv.url("/old"),
        page = srv.url("/page"),
    ));

    // Check mode: uri is skipped (as in ansible-core), nothing is requested.
    let check = fleet.apply(&["--check"]);
    assert_eq!(
        srv.log().len(),
        0,
        "check mode sent requests: {}",
        check.stdout
    );
    assert!(!base.join("page.html").exists());

    let first = fleet.apply(&["-v"]);
    first.expect(0);
    let names = [
        "get json",
        "post json",
        "post form",
        "missing",
        "missing expected",
        "follow",
        "no follow",
        "save",
        "guarded",
        "use",
    ];
    let statuses: Vec<String> = names.iter().map(|n| first.status_of(n)).collect();
    assert_eq!(
        statuses,
        ["ok", "ok", "ok", "failed", "ok", "ok", "ok", "changed", "ok", "ok"],
        "{}",
        first.stdout
    );
    let j = result(&first, "get json");
    assert_eq!(j["json"]["ok"], true, "{j}");
    assert_eq!(j["content_type"], "application/json", "{j}");
    assert_eq!(j["redirected"], false, "{j}");
    assert_eq!(j["msg"], "OK (32 bytes)", "{j}");
    assert!(
        j.get("content").is_none(),
        "no content without return_content: {j}"
    );
    let p = result(&first, "post json");
    assert_eq!(p["json"]["body"], r#"{"a": 1, "b": ["x", true]}"#, "{p}");
    assert_eq!(p["json"]["type"], "application/json", "{p}");
    assert_eq!(p["cookies"]["session"], "abc123", "{p}");
    assert_eq!(p["set_cookie"], "session=abc123; Path=/", "{p}");
    assert!(
        p["content"]
            .as_str()
            .unwrap()
            .contains("\"method\":\"POST\""),
        "{p}"
    );
    let posted: Vec<String> = srv
        .log()
        .iter()
        .filter(|r| r.method == "POST")
        .map(|r| r.body.clone())
        .collect();
    assert_eq!(
        posted,
        [r#"{"a": 1, "b": ["x", true]}"#, "name=a+b&n=1&n=2"]
    );
    let f = result(&first, "post form");
    assert_eq!(f["json"]["body"], "name=a+b&n=1&n=2", "{f}");
    assert_eq!(
        f["json"]["type"], "application/x-www-form-urlencoded",
        "{f}"
    );
    let m = &first.task_events("missing")[0];
    assert_eq!(
        m["result"]["msg"], "Status code was 404 and not [200]: HTTP Error 404: Not Found",
        "{m}"
    );
    assert_eq!(m["result"]["status"], 404, "{m}");
    let fo = result(&first, "follow");
    assert_eq!(fo["redirected"], true, "{fo}");
    assert_eq!(fo["url"], srv.url("/api"), "{fo}");
    let nf = result(&first, "no follow");
    assert_eq!(nf["status"], 301, "{nf}");
    assert_eq!(nf["location"], srv.url("/api"), "{nf}");
    assert_eq!(
        std::fs::read_to_string(base.join("page.html")).unwrap(),
        "<p>hi</p>\n"
    );
    assert_eq!(
        result(&first, "save")["path"],
        base.join("page.html").display().to_string()
    );
    assert_eq!(
        result(&first, "guarded")["stdout"],
        format!(
            "skipped, since '{}' exists",
            base.join("page.html").display()
        )
    );
    assert_eq!(srv.count("GET", "/page"), 1, "creates skipped the request");

    // The rerun: dest holds the same content, so it is not changed.
    let page = stamp(&base.join("page.html"));
    let second = fleet.apply(&[]);
    second.expect(0);
    assert_eq!(second.status_of("save"), "ok", "{}", second.stdout);
    assert_eq!(
        stamp(&base.join("page.html")),
        page,
        "the rerun rewrote dest"
    );
}

#[test]
fn proxies_come_from_the_task_environment_and_no_proxy_bypasses_them() {
    let origin = Server::start();
    origin.route("/file.txt", Route::ok("direct\n"));
    let proxy = Server::start();
    proxy.route("/file.txt", Route::ok("via proxy\n"));
    let fx = crate::fx::Fx::new();
    fx.play(&format!(
        "    - name: dir\n      file: {{ path: \"{{{{ base }}}}\", state: directory }}\n\
         \x20   - name: proxied\n      get_url: {{ url: \"http://fixpoint-test.invalid/file.txt\", dest: \"{{{{ base }}}}/a\" }}\n      environment: {{ http_proxy: \"{p}\" }}\n\
         \x20   - name: bypassed\n      uri: {{ url: \"{o}\", return_content: true }}\n      environment: {{ http_proxy: \"{p}\", no_proxy: \"localhost,127.0.0.1\" }}\n      register: b\n\
         \x20   - assert: {{ that: \"b.content == 'direct\\n'\" }}\n",
        p = proxy.url(""),
        o = origin.url("/file.txt"),
    ));
    let out = fx.apply(&[]);
    out.expect(0);
    assert_eq!(fx.read("t/a"), "via proxy\n");
    let through: Vec<String> = proxy.log().iter().map(|r| r.target.clone()).collect();
    assert_eq!(through, ["http://fixpoint-test.invalid/file.txt"]);
    assert_eq!(origin.count("GET", "/file.txt"), 1);
}

#[test]
fn tls_certificates_are_checked_unless_validate_certs_is_false() {
    let fx = crate::fx::Fx::new();
    let tls = TlsServer::start(fx.dir.path());
    let url = format!("https://127.0.0.1:{}/", tls.port);
    fx.play(&format!(
        "    - name: checked\n      uri: {{ url: \"{url}\" }}\n      ignore_errors: true\n\
         \x20   - name: unchecked\n      uri: {{ url: \"{url}\", validate_certs: false, return_content: true }}\n"
    ));
    let out = fx.apply(&["-v"]);
    out.expect(0);
    assert_eq!(out.statuses(), ["failed", "ok"], "{}", out.stdout);
    let msg = out.task_events("checked")[0]["msg"].to_string();
    assert!(msg.contains("certificate"), "{msg}");
    let r = result(&out, "unchecked");
    assert_eq!(r["status"], 200, "{r}");
    assert!(r["content"].as_str().unwrap().contains("s_server"), "{r}");
}

#[test]
fn url_lookup_fetches_on_the_controller() {
    let srv = Server::start();
    srv.route("/lines", Route::ok("one\ntwo\n"));
    srv.route(
        "/api",
        Route::json(r#"{"tag_name": "v1.8.2"}"#).needs("bob:pw"),
    );
    let fx = crate::fx::Fx::new();
    fx.play(&format!(
        "    - assert:\n        that:\n          - lookup('url', '{l}') == 'one,two'\n          - query('url', '{l}') == ['one', 'two']\n          - lookup('url', '{l}', split_lines=False) == 'one\\ntwo\\n'\n          - (lookup('url', '{a}', username='bob', password='pw', split_lines=False) | from_json).tag_name == 'v1.8.2'\n          - >-\n            lookup('ansible.builtin.url', '{a}', username='bob', password='pw', force_basic_auth=True, headers={{'Accept': 'application/json'}}) == '{{\"tag_name\": \"v1.8.2\"}}'\n\
         \x20   - name: missing\n      debug: {{ msg: \"{{{{ lookup('url', '{m}') }}}}\" }}\n      ignore_errors: true\n",
        l = srv.url("/lines"),
        a = srv.url("/api"),
        m = srv.url("/missing"),
    ));
    let out = fx.apply(&[]);
    out.expect(0);
    assert_eq!(out.statuses(), ["ok", "failed"], "{}", out.stdout);
    let msg = out.task_events("missing")[0]["msg"].to_string();
    assert!(
        msg.contains("Received HTTP error") && msg.contains("404"),
        "{msg}"
    );
    let accept = srv
        .log()
        .iter()
        .filter(|r| r.target == "/api")
        .filter_map(|r| r.headers.get("accept").cloned())
        .collect::<Vec<_>>();
    assert!(
        accept.contains(&"application/json".to_string()),
        "{accept:?}"
    );
    // `fixpoint validate` knows the lookup.
    let v = fx.run(&["validate", "site.yml"]);
    v.expect(0);
}

#[test]
fn unsupported_http_parameters_are_refused_at_load_with_their_location() {
    let fx = crate::fx::Fx::new();
    fx.play(concat!(
        "    - get_url: {url: \"http://127.0.0.1:9/y\", dest: /tmp/y, client_cert: /c}\n",
        "    - uri: {url: \"http://127.0.0.1:9/y\", body_format: form-multipart}\n",
        "    - get_url: {url: \"http://127.0.0.1:9/y\", dest: /tmp/y, checksum: \"crc32:00\"}\n",
        "    - uri: {url: \"http://127.0.0.1:9/y\", method: \"GET /x\"}\n",
    ));
    let out = fx.run(&["validate", "site.yml"]);
    out.expect(2);
    for want in [
        "unknown field `client_cert`",
        "site.yml:7:60",
        "form-multipart is not supported yet",
        "site.yml:8:7",
        "checksum algorithm \"crc32\" is not supported",
        "site.yml:9:7",
        "needs to be a single word",
        "site.yml:10:7",
    ] {
        assert!(out.stderr.contains(want), "{want} in {}", out.stderr);
    }
}
