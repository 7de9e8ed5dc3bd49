//! Roles: `roles:`, role directories, dependencies, search path, `import_role`/`include_role`, precedence.

use crate::fx::Fx;

/// A play header on localhost with the fixture's base and state dir, followed by `body`.
pub fn play_head(fx: &Fx, body: &str) -> String {
    format!(
        "- hosts: localhost\n  gather_facts: false\n  vars:\n    base: {}\n    fixpoint_state_dir: {}\n{body}",
        fx.path("t").display(),
        fx.state_dir().display(),
    )
}

/// A role `web` with defaults, vars, files, templates, handlers.
fn web_role(fx: &Fx) {
    fx.write(
        "roles/web/defaults/main.yml",
        "port: 80\ngreeting: hello from defaults\nfrom_vars: overridden below\n",
    );
    fx.write("roles/web/vars/main.yml", "from_vars: role vars\n");
    fx.write("roles/web/files/static.txt", "static from the role\n");
    fx.write("files/static.txt", "static from the playbook\n");
    fx.write(
        "roles/web/templates/web.conf.j2",
        "port={{ port }}\ngreeting={{ greeting }}\nfrom_vars={{ from_vars }}\nrole={{ role_name }} {{ role_path | basename }}\n",
    );
    fx.write(
        "roles/web/tasks/main.yml",
        concat!(
            "- name: web dir\n  file:\n    path: \"{{ base }}/web\"\n    state: directory\n",
            "- name: web static\n  copy:\n    src: static.txt\n    dest: \"{{ base }}/web/static.txt\"\n",
            "- name: web conf\n  template:\n    src: web.conf.j2\n    dest: \"{{ base }}/web/web.conf\"\n  notify: web restarted\n",
        ),
    );
    fx.write(
        "roles/web/handlers/main.yml",
        "- name: web restarted\n  copy:\n    content: \"restarted on {{ port }}\\n\"\n    dest: \"{{ base }}/web/restarted\"\n",
    );
}

#[test]
fn role_tasks_files_templates_handlers_and_precedence() {
    let fx = Fx::new();
    web_role(&fx);
    // Play vars beat role defaults; role vars beat play vars.
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            "    greeting: hello from the play\n    from_vars: play vars\n  roles:\n    - web\n",
        ),
    );
    let out = fx.apply(&["--twice"]);
    out.expect(0);
    assert_eq!(
        fx.read("t/web/web.conf"),
        "port=80\ngreeting=hello from the play\nfrom_vars=role vars\nrole=web web\n"
    );
    assert_eq!(
        fx.read("t/web/static.txt"),
        "static from the role\n",
        "the role's files/ is searched before the playbook's"
    );
    assert_eq!(fx.read("t/web/restarted"), "restarted on 80\n");
    let recaps: Vec<_> = out
        .events()
        .into_iter()
        .filter(|e| e["event"] == "recap")
        .collect();
    assert_eq!(recaps[0]["hosts"]["localhost"]["changed"], 4);
    assert_eq!(recaps[1]["hosts"]["localhost"]["changed"], 0);
}

#[test]
fn set_fact_beats_role_entry_vars_and_extra_vars_beat_all() {
    let fx = Fx::new();
    web_role(&fx);
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            "  pre_tasks:\n    - set_fact:\n        port: 81\n  roles:\n    - role: web\n      vars:\n        port: 8080\n",
        ),
    );
    fx.apply(&[]).expect(0);
    // An entry's `vars:` are the role's variables, below `set_fact`, as in ansible-core.
    let conf = fx.read("t/web/web.conf");
    assert!(conf.starts_with("port=81\n"), "{conf}");
    fx.apply(&["-e", "port=9"]).expect(0);
    let conf = fx.read("t/web/web.conf");
    assert!(conf.starts_with("port=9\n"), "{conf}");
}

#[test]
fn play_order_is_pre_tasks_handlers_roles_tasks_post_tasks() {
    let fx = Fx::new();
    fx.write(
        "roles/r/tasks/main.yml",
        "- name: role task\n  debug:\n    msg: r\n",
    );
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            concat!(
                "  tasks:\n    - name: task\n      debug:\n        msg: t\n",
                "  post_tasks:\n    - name: post\n      debug:\n        msg: p\n",
                "  roles:\n    - r\n",
                "  pre_tasks:\n    - name: pre\n      copy:\n        content: x\n        dest: \"{{ base }}/pre\"\n      notify: h\n",
                "  handlers:\n    - name: h\n      debug:\n        msg: h\n",
            ),
        ),
    );
    std::fs::create_dir_all(fx.path("t")).unwrap();
    let out = fx.apply(&[]);
    out.expect(0);
    let order: Vec<String> = out
        .events()
        .into_iter()
        .filter(|e| e["event"] == "task")
        .map(|e| e["task"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(order, ["pre", "h", "role task", "task", "post"]);
    // Text output names the role in the banner, as Ansible does.
    let text = fx.run(&["apply", "site.yml"]);
    text.expect(0);
    assert!(
        text.stdout.contains("TASK [r : role task]"),
        "{}",
        text.stdout
    );
}

#[test]
fn dependencies_run_first_and_once_unless_duplicates_are_allowed() {
    let fx = Fx::new();
    fx.write(
        "roles/common/tasks/main.yml",
        "- name: common\n  debug:\n    msg: c\n",
    );
    fx.write(
        "roles/a/meta/main.yml",
        "galaxy_info:\n  author: me\ndependencies:\n  - common\n",
    );
    fx.write(
        "roles/a/tasks/main.yml",
        "- name: a\n  debug:\n    msg: a\n",
    );
    fx.write(
        "roles/b/meta/main.yaml",
        "dependencies:\n  - role: common\n",
    );
    fx.write(
        "roles/b/tasks/main.yaml",
        "- name: b\n  debug:\n    msg: b\n",
    );
    fx.write("roles/dup/meta/main.yml", "allow_duplicates: true\n");
    fx.write(
        "roles/dup/tasks/main.yml",
        "- name: dup\n  debug:\n    msg: d\n",
    );
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            "  roles:\n    - a\n    - b\n    - dup\n    - dup\n    - a\n",
        ),
    );
    let out = fx.apply(&[]);
    out.expect(0);
    let order: Vec<String> = out
        .events()
        .into_iter()
        .filter(|e| e["event"] == "task")
        .map(|e| e["task"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(order, ["common", "a", "b", "dup", "dup"]);
}

#[test]
fn role_errors_point_at_the_role_file_and_line() {
    let fx = Fx::new();
    fx.write(
        "roles/bad/tasks/main.yml",
        "- name: fine\n  debug:\n    msg: ok\n- name: broken\n  copy:\n    dest: /tmp/x\n    colour: red\n",
    );
    fx.write("site.yml", &play_head(&fx, "  roles:\n    - bad\n"));
    let out = fx.apply(&[]);
    out.expect(2);
    assert!(
        out.stderr.contains("roles/bad/tasks/main.yml:7:5"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("colour"), "{}", out.stderr);
    // A missing role names the places searched.
    fx.write("site.yml", &play_head(&fx, "  roles:\n    - nowhere\n"));
    let out = fx.apply(&[]);
    out.expect(2);
    assert!(
        out.stderr.contains("role `nowhere` not found") && out.stderr.contains("site.yml:7:7"),
        "{}",
        out.stderr
    );
    // A failure at run time names the role's task and its place.
    fx.write(
        "roles/bad/tasks/main.yml",
        "- name: fine\n  debug:\n    msg: ok\n- name: broken\n  fail:\n    msg: role broke\n",
    );
    fx.write("site.yml", &play_head(&fx, "  roles:\n    - bad\n"));
    let out = fx.apply(&[]);
    out.expect(1);
    let msg = out.task_events("broken")[0]["msg"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("roles/bad/tasks/main.yml:4:3"), "{msg}");
}

#[test]
fn roles_are_found_on_the_roles_path_and_ansible_roles_path() {
    let fx = Fx::new();
    fx.write(
        "elsewhere/one/tasks/main.yml",
        "- name: one\n  debug:\n    msg: one\n",
    );
    fx.write(
        "envroles/two/tasks/main.yml",
        "- name: two\n  debug:\n    msg: two\n",
    );
    fx.write(
        "site.yml",
        &play_head(&fx, "  roles:\n    - one\n    - two\n"),
    );
    let out = std::process::Command::new(crate::fx::bin())
        .args([
            "apply",
            "--format",
            "json",
            "--roles-path",
            &fx.path("elsewhere").display().to_string(),
            "site.yml",
        ])
        .current_dir(fx.dir.path())
        .env("ANSIBLE_ROLES_PATH", fx.path("envroles"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("\"task\":\"one\"") && stdout.contains("\"task\":\"two\""),
        "{stdout}"
    );
    // Without them, the role is not found.
    fx.apply(&[]).expect(2);
}

#[test]
fn import_role_and_include_role_with_tasks_from_vars_from_loop_and_when() {
    let fx = Fx::new();
    fx.write("roles/tool/defaults/main.yml", "flavour: plain\n");
    fx.write("roles/tool/vars/extra.yml", "other_flavour: spicy\n");
    fx.write("roles/tool/defaults/mild.yml", "flavour: mild\n");
    fx.write(
        "roles/tool/tasks/main.yml",
        "- name: tool main\n  copy:\n    content: \"{{ flavour }} {{ which | default('-') }}\\n\"\n    dest: \"{{ base }}/main-{{ which | default('none') }}\"\n",
    );
    fx.write(
        "roles/tool/tasks/other.yml",
        "- name: tool other\n  copy:\n    content: \"{{ other_flavour }}\\n\"\n    dest: \"{{ base }}/other\"\n",
    );
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            concat!(
                "  tasks:\n",
                "    - file:\n        path: \"{{ base }}\"\n        state: directory\n",
                "    - import_role:\n        name: tool\n        tasks_from: other\n        vars_from: extra\n",
                "    - include_role:\n        name: tool\n      vars:\n        which: \"{{ item }}\"\n      loop: [x, y, z]\n      when: item != 'y'\n",
                "    - include_role:\n        name: tool\n        defaults_from: mild\n      vars:\n        which: m\n",
            ),
        ),
    );
    let out = fx.apply(&["--twice"]);
    out.expect(0);
    assert_eq!(fx.read("t/other"), "spicy\n");
    assert_eq!(fx.read("t/main-x"), "plain x\n");
    assert_eq!(fx.read("t/main-z"), "plain z\n");
    assert!(!fx.path("t/main-y").exists());
    assert_eq!(fx.read("t/main-m"), "mild m\n");
}

#[test]
fn role_when_and_tags_reach_every_task_of_the_role() {
    let fx = Fx::new();
    fx.write(
        "roles/r/tasks/main.yml",
        "- name: r1\n  debug:\n    msg: one\n- name: r2\n  debug:\n    msg: two\n",
    );
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            concat!(
                "  roles:\n    - role: r\n      when: enabled | default(false) | bool\n      tags: [rtag]\n",
                "  tasks:\n    - name: other\n      debug:\n        msg: x\n",
            ),
        ),
    );
    let out = fx.apply(&[]);
    out.expect(0);
    assert_eq!(out.status_of("r1"), "skipped");
    assert_eq!(out.status_of("r2"), "skipped");
    let out = fx.apply(&["-e", "enabled=true", "--tags", "rtag"]);
    out.expect(0);
    assert_eq!(out.status_of("r1"), "ok");
    assert!(out.task_events("other").is_empty());
}

#[test]
fn check_mode_and_diff_inside_a_role_behave_as_outside() {
    let fx = Fx::new();
    web_role(&fx);
    fx.write("site.yml", &play_head(&fx, "  roles:\n    - web\n"));
    std::fs::create_dir_all(fx.path("t/web")).unwrap();
    let before = crate::fx::snapshot(&fx.path("t"));
    let out = fx.run(&["check", "--format", "json", "site.yml"]);
    out.expect(0);
    assert_eq!(
        before,
        crate::fx::snapshot(&fx.path("t")),
        "check mode wrote"
    );
    let ev = &out.task_events("web conf")[0];
    assert_eq!(ev["status"], "changed");
    assert!(ev["diff"].to_string().contains("port=80"), "{ev}");
}

#[test]
fn webapp_example_converges() {
    let fx = Fx::new();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/playbooks/webapp");
    let inventory = format!("{dir}/inventory.ini");
    let site = format!("{dir}/site.yml");
    let base = format!("base={}", fx.path("w").display());
    let state = format!("fixpoint_state_dir={}", fx.state_dir().display());
    let args = ["-i", &inventory, "-e", &base, "-e", &state, &site];
    let out = fx.run(&[&["apply", "--twice", "--format", "json"][..], &args[..]].concat());
    out.expect(0);
    let recaps: Vec<_> = out
        .events()
        .into_iter()
        .filter(|e| e["event"] == "recap")
        .collect();
    // The first pass rescues the missing seed on the database host; the second finds it.
    assert_eq!(recaps[0]["hosts"]["db1"]["rescued"], 1);
    assert_eq!(recaps[1]["hosts"]["db1"]["rescued"], 0);
    for h in ["db1", "web1", "web2"] {
        assert_eq!(recaps[1]["hosts"][h]["changed"], 0, "{h}");
        assert_eq!(recaps[1]["hosts"][h]["failed"], 0, "{h}");
    }
    // group_vars of both groups, role defaults and vars, hostvars across groups.
    assert_eq!(
        fx.read("w/web1/etc/webapp/app.conf"),
        "# webapp on web1\nport = 8081\nworkers = 4\ndatabase = db1:5432/webapp\n"
    );
    assert_eq!(fx.read("w/db1/etc/db.conf"), "port=5432\nname=webapp\n");
    assert!(fx.path("w/web2/var/app.restarted").exists());
    assert!(
        fx.path("w/db1/etc/banner").exists(),
        "the dependency ran on db1"
    );
    // Converged: check mode reports nothing to change.
    let out = fx.run(&[&["check", "--format", "json"][..], &args[..]].concat());
    out.expect(0);
    assert!(
        out.events().iter().all(|e| e["status"] != "changed"),
        "{}",
        out.stdout
    );
}

#[test]
fn roles_defaults_and_vars_are_visible_to_the_play_but_include_role_keeps_its_own() {
    let fx = Fx::new();
    fx.write(
        "roles/a/defaults/main.yml",
        "shared_setting: from-a\nport: 1\n",
    );
    fx.write("roles/a/vars/main.yml", "a_var: a-vars\n");
    fx.write(
        "roles/a/tasks/main.yml",
        "- name: a own\n  debug:\n    msg: \"{{ port }}\"\n",
    );
    fx.write("roles/b/defaults/main.yml", "port: 2\n");
    fx.write(
        "roles/b/tasks/main.yml",
        "- name: b sees a\n  debug:\n    msg: \"{{ shared_setting }} {{ a_var }} {{ port }}\"\n",
    );
    fx.write("roles/priv/defaults/main.yml", "priv_default: secret-ish\n");
    fx.write(
        "roles/priv/tasks/main.yml",
        "- name: priv own\n  debug:\n    msg: \"{{ priv_default }}\"\n",
    );
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            concat!(
                "  roles: [a, b]\n",
                "  pre_tasks:\n    - name: before roles\n      debug:\n        msg: \"{{ shared_setting }} {{ port }}\"\n",
                "  tasks:\n",
                "    - include_role:\n        name: priv\n",
                "    - name: after include\n      debug:\n        msg: \"{{ priv_default | default('not visible') }}\"\n",
            ),
        ),
    );
    let out = fx.apply(&["-v"]);
    out.expect(0);
    let msg = |t: &str| out.task_events(t)[0]["result"]["msg"].clone();
    // Each role sees its own defaults first; the play sees the last role's.
    assert_eq!(msg("a own"), 1);
    assert_eq!(msg("b sees a"), "from-a a-vars 2");
    assert_eq!(msg("before roles"), "from-a 2");
    assert_eq!(msg("priv own"), "secret-ish");
    assert_eq!(msg("after include"), "not visible");
}

#[test]
fn include_role_with_a_templated_name_loads_at_run_time_with_its_handlers() {
    let fx = Fx::new();
    for r in ["red", "blue"] {
        fx.write(
            &format!("roles/{r}/tasks/main.yml"),
            &format!(
                "- name: {r} file\n  copy:\n    content: \"{{{{ shade }}}}\"\n    dest: \"{{{{ base }}}}/{r}\"\n  notify: {r} changed\n"
            ),
        );
        fx.write(
            &format!("roles/{r}/handlers/main.yml"),
            &format!(
                "- name: {r} changed\n  copy:\n    content: handled\n    dest: \"{{{{ base }}}}/{r}.handled\"\n"
            ),
        );
    }
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            concat!(
                "  tasks:\n",
                "    - file:\n        path: \"{{ base }}\"\n        state: directory\n",
                "    - include_role:\n        name: \"{{ item }}\"\n      vars:\n        shade: \"light {{ item }}\"\n      loop: [red, blue]\n",
            ),
        ),
    );
    let out = fx.apply(&["--twice"]);
    out.expect(0);
    assert_eq!(fx.read("t/red"), "light red");
    assert_eq!(fx.read("t/blue"), "light blue");
    assert!(fx.path("t/red.handled").exists() && fx.path("t/blue.handled").exists());
    // A role that does not exist fails the host that reaches it, naming the role.
    fx.write(
        "site.yml",
        &play_head(&fx, "  tasks:\n    - name: inc\n      include_role:\n        name: \"{{ 'gre' ~ 'en' }}\"\n"),
    );
    let out = fx.apply(&[]);
    out.expect(1);
    // As ansible-core: the include is reported ok, then failed when its role cannot load.
    let evs = out.task_events("inc");
    assert_eq!(evs[0]["status"], "ok");
    let msg = evs[1]["msg"].as_str().unwrap().to_string();
    assert!(msg.contains("role `green` not found"), "{msg}");
}

#[test]
fn meta_inside_a_role_sees_the_role_variables() {
    let fx = Fx::new();
    fx.write("roles/stop/defaults/main.yml", "stop_here: true\n");
    fx.write(
        "roles/stop/tasks/main.yml",
        "- meta: end_host\n  when: stop_here\n- name: after meta\n  debug:\n    msg: x\n",
    );
    fx.write("site.yml", &play_head(&fx, "  roles: [stop]\n"));
    let out = fx.apply(&[]);
    out.expect(0);
    assert!(out.task_events("after meta").is_empty(), "{}", out.stdout);
    let out = fx.apply(&["-e", "{\"stop_here\": false}"]);
    out.expect(0);
    assert_eq!(out.status_of("after meta"), "ok");
}

#[test]
fn handlers_from_picks_the_roles_handlers_file() {
    let fx = Fx::new();
    fx.write(
        "roles/svc/tasks/main.yml",
        "- name: svc change\n  copy:\n    content: x\n    dest: \"{{ base }}/svc\"\n  notify: svc alt\n",
    );
    fx.write(
        "roles/svc/handlers/alt.yml",
        "- name: svc alt\n  copy:\n    content: alt\n    dest: \"{{ base }}/alt\"\n",
    );
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            "  tasks:\n    - file:\n        path: \"{{ base }}\"\n        state: directory\n    - import_role:\n        name: svc\n        handlers_from: alt\n",
        ),
    );
    fx.apply(&[]).expect(0);
    assert_eq!(fx.read("t/alt"), "alt");
    // A missing handlers file is a load error naming it.
    fx.write(
        "site.yml",
        &play_head(
            &fx,
            "  tasks:\n    - import_role:\n        name: svc\n        handlers_from: nope\n",
        ),
    );
    let out = fx.apply(&[]);
    out.expect(2);
    assert!(out.stderr.contains("handlers/nope.yml"), "{}", out.stderr);
}
