//! `--shard i/N`: shards run at once against loopback sshd hosts add up to one unsharded run;
//! what needs the whole fleet is refused; and the fleet manifests of docs/fleet/ run as written.

use crate::fx::{bin, Fx, Out};
use crate::ssh::Fleet;
use crate::support;
use fixpoint::inventory::Shard;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use yaml_rust2::{Yaml, YamlLoader};

/// Inventory names, fixed so the shards they fall in are too (each host reached by its alias).
const NAMES: [&str; 6] = ["node1", "node2", "node3", "node4", "node5", "node6"];

/// Write `rel` as an inventory of the fleet under fixed names, and the playbook `site.yml`.
fn fleet_files(fleet: &Fleet, rel: &str) {
    let work = fleet.fx.path("t");
    let hosts = NAMES
        .iter()
        .zip(&fleet.hosts)
        .map(|(name, h)| (name.to_string(), format!("ansible_host={}", h.alias())));
    fleet
        .fx
        .write(rel, &support::hosts_inventory("fleet", hosts, &work));
    fleet.fx.write(
        "site.yml",
        &format!(
            r#"- hosts: fleet
  gather_facts: false
  vars:
    base: "{work}/{{{{ run | default('ci') }}}}/{{{{ inventory_hostname }}}}"
  tasks:
    - name: dir
      file: {{ path: "{{{{ base }}}}", state: directory, mode: "0755" }}
    - name: conf
      copy: {{ content: "host={{{{ inventory_hostname }}}}\n", dest: "{{{{ base }}}}/conf" }}
    - name: conf again
      copy: {{ content: "host={{{{ inventory_hostname }}}}\n", dest: "{{{{ base }}}}/conf" }}
    - name: odd hosts
      debug: {{ msg: odd }}
      when: inventory_hostname is search('[135]$')
"#,
            work = work.display()
        ),
    );
}

fn wait(child: Child) -> Out {
    child.wait_with_output().expect("wait for fixpoint").into()
}

/// The recap's per-host counts.
fn recap_hosts(out: &Out) -> Map<String, Value> {
    out.recap()["hosts"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}

/// The union of the shards' recaps, asserting no host is in two of them.
fn merge(recaps: &[Map<String, Value>]) -> Map<String, Value> {
    let mut all = Map::new();
    for r in recaps {
        for (h, s) in r {
            assert!(
                all.insert(h.clone(), s.clone()).is_none(),
                "{h} in two shards"
            );
        }
    }
    all
}

#[test]
fn two_shards_at_once_equal_one_unsharded_run() {
    let fleet = Fleet::start(NAMES.len(), "fpuser");
    fleet_files(&fleet, "hosts.ini");
    // Both shards have hosts, so the test says something (the assignment is fixed).
    for i in 0..2 {
        assert!(
            NAMES.iter().any(|n| Shard::of(n, 2) == i),
            "shard {i} empty"
        );
    }
    let whole = fleet.apply(&["-e", "run=whole"]);
    whole.expect(0);
    let shards: Vec<Child> = (0..2)
        .map(|i| {
            let shard = format!("{i}/2");
            fleet.spawn_apply(
                &["-e", "run=sharded", "--shard", shard.as_str()],
                Stdio::null(),
            )
        })
        .collect();
    let outs: Vec<Out> = shards.into_iter().map(wait).collect();
    for (i, out) in outs.iter().enumerate() {
        out.expect(0);
        assert_eq!(
            out.recap()["shard"],
            serde_json::json!({"index": i, "count": 2})
        );
        for h in recap_hosts(out).keys() {
            assert_eq!(Shard::of(h, 2), i, "{h} ran in shard {i}");
        }
    }
    let recaps: Vec<Map<String, Value>> = outs.iter().map(recap_hosts).collect();
    let whole_recap = recap_hosts(&whole);
    assert_eq!(whole_recap.len(), NAMES.len(), "{}", whole.stdout);
    assert_eq!(merge(&recaps), whole_recap);
    for name in NAMES {
        let conf = fleet.fx.path("t").join("sharded").join(name).join("conf");
        assert_eq!(
            std::fs::read_to_string(conf).unwrap(),
            format!("host={name}\n")
        );
    }
}

/// A playbook with one of each thing that needs the whole fleet, on hosts never contacted.
fn refusal_fixture() -> (Fx, String) {
    let fx = Fx::new();
    // A db host that shard 0/2 does not run, and one it runs.
    let other = (1..)
        .map(|i| format!("db{i}"))
        .find(|n| Shard::of(n, 2) == 1)
        .unwrap();
    fx.write(
        "hosts.ini",
        &format!("[web]\nweb[1:4]\n[db]\n{other}\n[all:vars]\nansible_host=192.0.2.1\n"),
    );
    fx.write(
        "templates/peers.j2",
        "# peers\n{% for h in groups['web'] %}{{ hostvars[h]['ansible_default_ipv4'] }}\n{% endfor %}\n",
    );
    fx.write(
        "site.yml",
        &format!(
            r#"- hosts: web
  serial: "50%"
  gather_facts: false
  tasks:
    - name: once
      debug: {{ msg: hi }}
      run_once: true
    - name: templated delegate
      debug: {{ msg: hi }}
      delegate_to: "{{{{ groups['db'][0] }}}}"
    - name: other shard
      debug: {{ msg: hi }}
      delegate_to: {other}
    - name: the host itself, and the controller
      debug: {{ msg: "{{{{ hostvars[inventory_hostname].x | default(groups['db'] | length) }}}}" }}
      delegate_to: "{{{{ inventory_hostname }}}}"
    - name: controller
      debug: {{ msg: hi }}
      delegate_to: localhost
    - name: peers
      template: {{ src: peers.j2, dest: /tmp/peers }}
    - name: first of the play
      debug: {{ msg: hi }}
      when: inventory_hostname == ansible_play_hosts[0]
"#
        ),
    );
    (fx, other)
}

/// `msg` is one of the errors, and it points at `at` (`file:line:col`).
fn refused(err: &str, at: &str, msg: &str) {
    let lines: Vec<&str> = err.lines().collect();
    let i = lines
        .iter()
        .position(|l| l.starts_with("error: ") && l.contains(msg))
        .unwrap_or_else(|| panic!("no error {msg:?} in:\n{err}"));
    assert_eq!(
        lines.get(i + 1).map(|l| l.trim()),
        Some(format!("--> {at}").as_str()),
        "{err}"
    );
}

#[test]
fn what_needs_the_whole_fleet_is_refused_under_shard() {
    let (fx, other) = refusal_fixture();
    let out = fx.run(&["apply", "-i", "hosts.ini", "--shard", "0/2", "site.yml"]);
    out.expect(2);
    let err = &out.stderr;
    let other_msg =
        format!("`delegate_to: {other}` names a host of shard 1/2, not of this one (0/2)");
    for (at, msg) in [
        ("site.yml:1:3", "`serial: 50%` needs the whole fleet: under --shard 0/2"),
        ("site.yml:5:7", "`run_once` needs the whole fleet"),
        ("site.yml:8:7", "`delegate_to: {{ groups['db'][0] }}` is templated"),
        ("site.yml:11:7", other_msg.as_str()),
        ("templates/peers.j2:2:32", "`hostvars` of another host needs the whole fleet"),
        (
            "site.yml:22:7",
            "`ansible_play_hosts` needs the whole fleet: under --shard 0/2 it lists only this \
             shard's hosts, in when `inventory_hostname == ansible_play_hosts[0]` (line 1, column 23",
        ),
    ] {
        refused(err, at, msg);
    }
    assert!(err.contains("help: name the host (fixpoint then checks which shard runs it), or pass --shard-allow-cross"), "{err}");
    assert!(
        err.contains("6 problem(s) found; no host was touched"),
        "{err}"
    );
    // The host itself, the controller and the inventory's groups are not refused.
    assert!(!err.contains("site.yml:14:"), "{err}");
    assert!(!err.contains("site.yml:17:"), "{err}");
    assert!(!err.contains("groups['db'] | length"), "{err}");

    // Accepted with their per-shard meaning; the same checks without --shard find nothing.
    for args in [&["--shard", "0/2", "--shard-allow-cross"][..], &[][..]] {
        let mut all = vec!["apply", "-i", "hosts.ini", "--syntax-check"];
        all.extend_from_slice(args);
        all.push("site.yml");
        fx.run(&all).expect(0);
    }
}

#[test]
fn shard_arguments_and_listing() {
    let (fx, other) = refusal_fixture();
    for (bad, want) in [
        (
            "2/2",
            "the index counts from 0, so it must be below 2 (0/2 … 1/2)",
        ),
        ("1", "INDEX/COUNT"),
        ("0/0", "the count must be at least 1"),
    ] {
        let out = fx.run(&["apply", "--shard", bad, "--list-hosts", "site.yml"]);
        out.expect(2);
        assert!(out.stderr.contains(want), "{bad}: {}", out.stderr);
    }
    let out = fx.run(&["apply", "--shard-allow-cross", "--list-hosts", "site.yml"]);
    out.expect(2);
    assert!(
        out.stderr.contains("--shard-allow-cross needs --shard"),
        "{}",
        out.stderr
    );
    // --list-hosts shows each shard's part; FIXPOINT_SHARD stands in for --shard.
    fx.write("hosts.ini", &format!("[web]\nweb[1:9]\n[db]\n{other}\n"));
    fx.write("list.yml", "- hosts: all\n  tasks: []\n");
    let mut listed = Vec::new();
    for i in 0..3 {
        let out: Out = Command::new(bin())
            .args(["apply", "-i", "hosts.ini", "--list-hosts", "list.yml"])
            .env("FIXPOINT_SHARD", format!("{i}/3"))
            .current_dir(fx.dir.path())
            .output()
            .unwrap()
            .into();
        out.expect(0);
        let hosts: Vec<String> = out
            .stdout
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("web") || l.starts_with("db"))
            .map(str::to_string)
            .collect();
        assert!(hosts.iter().all(|h| Shard::of(h, 3) == i), "{hosts:?}");
        listed.extend(hosts);
    }
    listed.sort();
    let mut all: Vec<String> = (1..=9).map(|i| format!("web{i}")).collect();
    all.push(other);
    all.sort();
    assert_eq!(listed, all);
}

#[test]
fn shard_allow_cross_runs_run_once_once_per_shard() {
    let fx = Fx::new();
    let hosts = (1..=8).map(|i| (format!("l{i}"), "ansible_connection=local".to_string()));
    fx.write(
        "hosts.ini",
        &support::hosts_inventory("local", hosts, &fx.state_dir()),
    );
    fx.write(
        "site.yml",
        "- hosts: local\n  gather_facts: false\n  tasks:\n    - name: once\n      debug: { msg: \"{{ ansible_play_hosts | length }}\" }\n      run_once: true\n",
    );
    let mut ran = Vec::new();
    for i in 0..2 {
        let shard = format!("{i}/2");
        let out = fx.run(&[
            "apply",
            "--format",
            "json",
            "-i",
            "hosts.ini",
            "--shard",
            shard.as_str(),
            "--shard-allow-cross",
            "-v",
            "site.yml",
        ]);
        out.expect(0);
        let mine = (1..=8)
            .filter(|n| Shard::of(&format!("l{n}"), 2) == i)
            .count();
        let events = out.task_events("once");
        let hosts: Vec<&str> = events.iter().filter_map(|e| e["host"].as_str()).collect();
        // Once in this shard, on one of its hosts, which sees only the shard's hosts.
        assert_eq!(hosts.len(), 1, "{}", out.stdout);
        assert_eq!(Shard::of(hosts[0], 2), i);
        assert_eq!(events[0]["result"]["msg"], mine, "{}", out.stdout);
        ran.push(hosts[0].to_string());
    }
    assert_ne!(ran[0], ran[1]);
}

/// The `docs/fleet/` files, read as YAML.
fn doc(name: &str) -> Yaml {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/fleet")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut docs =
        YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(docs.len(), 1, "{} holds one document", path.display());
    docs.remove(0)
}

fn s(y: &Yaml) -> String {
    match y {
        Yaml::String(s) => s.clone(),
        Yaml::Integer(i) => i.to_string(),
        other => panic!("not a scalar: {other:?}"),
    }
}

/// Parse a fixpoint command line with the real CLI, as a check that the docs name real options.
fn parses(argv: &[String]) -> fixpoint::cli::RunArgs {
    use clap::Parser;
    let cli = fixpoint::cli::Cli::try_parse_from(
        std::iter::once("fixpoint".to_string()).chain(argv.iter().cloned()),
    )
    .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    match cli.command {
        fixpoint::cli::Command::Apply(a) => a,
        other => panic!("not `apply`: {other:?}"),
    }
}

/// The hosts of every shard's recap (one JSON-lines output each), each once, are the fleet.
fn covers_fleet_once(outputs: &[String]) {
    let recaps: Vec<Map<String, Value>> = outputs
        .iter()
        .map(|stdout| {
            let out = Out {
                code: 0,
                stdout: stdout.clone(),
                stderr: String::new(),
            };
            recap_hosts(&out)
        })
        .collect();
    let all = merge(&recaps);
    let mut names: Vec<&str> = all.keys().map(String::as_str).collect();
    names.sort();
    let mut want = NAMES.to_vec();
    want.sort();
    assert_eq!(names, want);
}

#[test]
fn the_kubernetes_indexed_job_runs_as_written() {
    let job = doc("k8s-indexed-job.yaml");
    assert_eq!(s(&job["kind"]), "Job");
    assert_eq!(s(&job["spec"]["completionMode"]), "Indexed");
    let n: usize = s(&job["spec"]["completions"]).parse().unwrap();
    assert_eq!(s(&job["spec"]["parallelism"]), n.to_string());
    let c = &job["spec"]["template"]["spec"]["containers"][0];
    let command: Vec<String> = c["command"].as_vec().unwrap().iter().map(s).collect();
    assert_eq!(command, ["fixpoint"]);
    let mount = s(&c["volumeMounts"][0]["mountPath"]);

    let fleet = Fleet::start(NAMES.len(), "fpuser");
    // The fixture directory stands for the image's working directory.
    assert_eq!(s(&c["workingDir"]), "/srv/fleet");
    fleet_files(&fleet, "inventory/hosts.ini");
    let children: Vec<Child> = (0..n)
        .map(|index| {
            // What the kubelet does with `$(VAR)` in args, JOB_COMPLETION_INDEX set by the
            // Job controller; the Secret's mount is the test's ssh configuration.
            let args: Vec<String> = c["args"]
                .as_vec()
                .unwrap()
                .iter()
                .map(|a| {
                    s(a).replace("$(JOB_COMPLETION_INDEX)", &index.to_string())
                        .replace(&format!("{mount}/config"), fleet.config.to_str().unwrap())
                })
                .collect();
            let parsed = parses(&args);
            assert_eq!(parsed.apply.shard, Some(Shard { index, count: n }));
            Command::new(bin())
                .args(&args)
                .env("JOB_COMPLETION_INDEX", index.to_string())
                .env_remove("FIXPOINT_SHARD")
                .current_dir(fleet.fx.dir.path())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<String> = children
        .into_iter()
        .map(|ch| {
            let out = wait(ch);
            out.expect(0);
            out.stdout
        })
        .collect();
    covers_fleet_once(&outs);
}

#[test]
fn the_github_actions_matrix_runs_as_written() {
    let wf = doc("github-actions.yml");
    let job = &wf["jobs"]["apply"];
    let shards: Vec<String> = job["strategy"]["matrix"]["shard"]
        .as_vec()
        .unwrap()
        .iter()
        .map(s)
        .collect();
    let shard_env = s(&job["env"]["FIXPOINT_SHARD"]);
    let apply = job["steps"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|st| st["name"].as_str() == Some("Apply"))
        .expect("an Apply step");
    let run = s(&apply["run"]);

    let fleet = Fleet::start(NAMES.len(), "fpuser");
    fleet_files(&fleet, "inventory/hosts.ini");
    // The runner's temporary directory, where the workflow's previous step wrote ssh_config.
    let runner_temp = fleet.fx.path("runner-temp");
    std::fs::create_dir_all(&runner_temp).unwrap();
    std::fs::copy(&fleet.config, runner_temp.join("ssh_config")).unwrap();
    let path = format!(
        "{}:{}",
        PathBuf::from(bin()).parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let children: Vec<Child> = shards
        .iter()
        .map(|m| {
            // What the runner does: `${{ matrix.shard }}` substituted, the step run by bash.
            let run = run.replace("${{ matrix.shard }}", m);
            let env = shard_env.replace("${{ matrix.shard }}", m);
            let words = shlex::split(&run).expect("a shell command line");
            let cut = words.iter().position(|w| w == ">").unwrap_or(words.len());
            assert_eq!(words[0], "fixpoint");
            let parsed = parses(&words[1..cut]);
            assert_eq!(
                parsed.apply.shard, None,
                "the matrix sets FIXPOINT_SHARD instead"
            );
            Command::new("bash")
                .args(["--noprofile", "--norc", "-e", "-o", "pipefail", "-c", &run])
                .env("PATH", &path)
                .env("RUNNER_TEMP", &runner_temp)
                .env("FIXPOINT_SHARD", env)
                .current_dir(fleet.fx.dir.path())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for ch in children {
        wait(ch).expect(0);
    }
    let outs: Vec<String> = shards
        .iter()
        .map(|m| fleet.fx.read(&format!("shard-{m}.jsonl")))
        .collect();
    for (m, out) in shards.iter().zip(&outs) {
        let recap = Out {
            code: 0,
            stdout: out.clone(),
            stderr: String::new(),
        }
        .recap();
        assert_eq!(recap["shard"]["index"].to_string(), *m);
        assert_eq!(recap["shard"]["count"], shards.len());
    }
    covers_fleet_once(&outs);
}
