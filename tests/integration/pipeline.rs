//! Pipelining (engine/section.rs, engine/pipeline.rs): sections of tasks sent to each agent in
//! one batch, hosts not waiting for each other inside a section, results reported as without
//! it, and the round trips the JSON recap counts. Its touches keep both times, the form of
//! `touch` that converges (a plain one is changed on every run, as in Ansible).

use crate::fx::Out;
use crate::ssh::Fleet;
use serde_json::{json, Value};
use std::io::Write;
use std::time::{Duration, Instant};

/// What a run reported, without what differs between two runs.
fn reported(out: &Out) -> Vec<Value> {
    out.events()
        .into_iter()
        .filter(|e| e["event"] == "task" || e["event"] == "recap")
        .map(|mut e| {
            if let Some(o) = e.as_object_mut() {
                // `drift`: the second run finds what the test removed after the first.
                for k in ["run_id", "round_trips", "drift"] {
                    o.remove(k);
                }
            }
            e
        })
        .collect()
}

fn round_trips(out: &Out, host: &str) -> u64 {
    out.recap()["round_trips"][host]
        .as_u64()
        .unwrap_or_else(|| panic!("no round trips for {host} in the recap: {}", out.stdout))
}

/// A first run of the fleet's play without pipelining, then one with it on fresh trees: both
/// succeed and report the same. The pipelined run's output.
fn first_runs_agree(fleet: &Fleet) -> Out {
    let plain = fleet.apply(&["--no-pipelining"]);
    plain.expect(0);
    for h in &fleet.hosts {
        std::fs::remove_dir_all(fleet.base(h)).unwrap();
    }
    let piped = fleet.apply(&[]);
    piped.expect(0);
    assert_eq!(reported(&piped), reported(&plain), "{}", piped.stdout);
    piped
}

const MIXED: &str = concat!(
    "    - name: dir\n      file: { path: \"{{ base }}\", state: directory, mode: \"0755\" }\n",
    "    - name: conf\n      copy: { content: \"host={{ inventory_hostname }}\\n\", dest: \"{{ base }}/conf\" }\n      notify: note\n",
    "    - name: look\n      stat: { path: \"{{ base }}/conf\" }\n      register: conf\n",
    "    - name: never\n      file: { path: \"{{ base }}/never\", state: touch, modification_time: preserve, access_time: preserve }\n      when: false\n      register: skipped\n",
    "    - name: broken\n      file: { path: \"{{ base }}/no/such/dir\", state: touch, modification_time: preserve, access_time: preserve }\n      ignore_errors: true\n      register: broken\n",
    "    - name: each\n      file: { path: \"{{ base }}/{{ item }}\", state: touch, modification_time: preserve, access_time: preserve }\n      loop: [a, b, c]\n      when: item != 'b'\n      register: touched\n",
    "    - name: line\n      lineinfile: { path: \"{{ base }}/env\", line: \"size={{ conf.stat.size }}\", create: true }\n",
    "    - name: read\n      command: cat {{ base }}/env\n      register: env\n      changed_when: false\n",
    "    - name: say\n      debug: { msg: \"{{ env.stdout }}\" }\n",
    "    - name: show\n      copy: { content: \"{{ env.stdout }} {{ skipped.skipped }} {{ broken.failed }} {{ touched.results | map(attribute='skipped', default=false) | list }}\", dest: \"{{ base }}/shown\" }\n",
    "    - name: after\n      file: { path: \"{{ base }}/after\", state: touch, modification_time: preserve, access_time: preserve }\n",
);

#[test]
fn a_pipelined_run_reports_what_a_run_without_pipelining_does() {
    let fleet = Fleet::start(2, "fpuser");
    fleet.play(&format!(
        "{MIXED}  handlers:\n    - name: note\n      file: {{ path: \"{{{{ base }}}}/noted\", state: touch, modification_time: preserve, access_time: preserve }}\n"
    ));
    first_runs_agree(&fleet);
    for h in &fleet.hosts {
        let size = format!("host={}\n", h.alias()).len();
        assert_eq!(
            std::fs::read_to_string(fleet.base(h).join("shown")).unwrap(),
            format!("size={size} True True [False, True, False]")
        );
        assert!(fleet.base(h).join("noted").exists());
    }
    // Converged: the same again, in fewer round trips with pipelining.
    let plain = fleet.apply(&["--no-pipelining"]);
    let piped = fleet.apply(&[]);
    assert_eq!(reported(&piped), reported(&plain), "{}", piped.stdout);
    for h in &fleet.hosts {
        let (p, q) = (
            round_trips(&plain, h.alias()),
            round_trips(&piped, h.alias()),
        );
        assert!(
            q < p,
            "{}: {q} round trips pipelined, {p} without",
            h.alias()
        );
    }
}

#[test]
fn a_failure_inside_a_section_stops_that_host_there_and_ignore_errors_goes_on() {
    let fleet = Fleet::start(2, "fpuser");
    let (bad, good) = (&fleet.hosts[0], &fleet.hosts[1]);
    // A loop item fails on the first host only: its directory is missing there.
    std::fs::create_dir_all(fleet.base(good).join("sub")).unwrap();
    std::fs::create_dir_all(fleet.base(bad)).unwrap();
    for h in &fleet.hosts {
        std::os::unix::fs::chown(fleet.base(h), Some(uid("fpuser")), None).unwrap();
        std::os::unix::fs::chown(fleet.base(h).join("sub"), Some(uid("fpuser")), None).ok();
    }
    fleet.play(concat!(
        "    - name: first\n      file: { path: \"{{ base }}/first\", state: touch, modification_time: preserve, access_time: preserve }\n",
        "    - name: ignored\n      file: { path: \"{{ base }}/no/such/x\", state: touch, modification_time: preserve, access_time: preserve }\n      ignore_errors: true\n",
        "    - name: after ignored\n      file: { path: \"{{ base }}/after-ignored\", state: touch, modification_time: preserve, access_time: preserve }\n",
        "    - name: items\n      file: { path: \"{{ base }}/{{ item }}\", state: touch, modification_time: preserve, access_time: preserve }\n      loop: [i1, sub/i2, i3]\n",
        "    - name: fails on one\n      file: { path: \"{{ base }}/sub/x\", state: touch, modification_time: preserve, access_time: preserve }\n",
        "    - name: later\n      file: { path: \"{{ base }}/later\", state: touch, modification_time: preserve, access_time: preserve }\n",
        "    - name: last\n      copy: { content: x, dest: \"{{ base }}/last\" }\n",
    ));
    let out = fleet.apply(&[]);
    out.expect(1);
    for f in ["first", "after-ignored"] {
        assert!(fleet.base(bad).join(f).exists(), "{f}");
        assert!(fleet.base(good).join(f).exists(), "{f}");
    }
    // The loop went on past the failing item on the first host (as ansible-core's does: the
    // task fails after every item ran), though the agent ended the batch at the failure.
    assert!(fleet.base(good).join("i3").exists());
    assert!(fleet.base(bad).join("i1").exists());
    assert!(fleet.base(bad).join("i3").exists());
    for f in ["later", "last"] {
        assert!(
            !fleet.base(bad).join(f).exists(),
            "{f} ran after the failure"
        );
        assert!(fleet.base(good).join(f).exists(), "{f}");
    }
    let recap = out.recap();
    assert_eq!(recap["hosts"][bad.alias()]["failed"], json!(1));
    assert_eq!(recap["hosts"][bad.alias()]["ignored"], json!(1));
    assert_eq!(recap["hosts"][good.alias()]["failed"], json!(0));
    assert_eq!(
        out.task_names(),
        [
            "first",
            "first",
            "ignored",
            "ignored",
            "after ignored",
            "after ignored",
            "items",
            "items",
            "items",
            "items",
            "items",
            "items",
            "fails on one",
            "later",
            "last"
        ]
    );
}

#[test]
fn failed_when_ends_a_batch_and_stops_the_host_where_it_holds() {
    let fleet = Fleet::start(2, "fpuser");
    let (bad, good) = (&fleet.hosts[0], &fleet.hosts[1]);
    for (h, word) in [(bad, "bad"), (good, "fine")] {
        std::fs::create_dir_all(fleet.base(h)).unwrap();
        std::fs::write(fleet.base(h).join("state"), word).unwrap();
        std::os::unix::fs::chown(fleet.base(h), Some(uid("fpuser")), None).unwrap();
    }
    fleet.play(concat!(
        "    - name: check\n      command: cat {{ base }}/state\n      register: st\n      changed_when: false\n      failed_when: \"'bad' in st.stdout\"\n",
        "    - name: next\n      file: { path: \"{{ base }}/next\", state: touch, modification_time: preserve, access_time: preserve }\n",
        "    - name: then\n      file: { path: \"{{ base }}/then\", state: touch, modification_time: preserve, access_time: preserve }\n",
    ));
    let out = fleet.apply(&[]);
    out.expect(1);
    assert!(!fleet.base(bad).join("next").exists());
    assert!(fleet.base(good).join("next").exists());
    assert!(fleet.base(good).join("then").exists());
}

#[test]
fn a_controller_step_inside_a_batch_lets_the_steps_after_it_change_nothing_unless_it_passes() {
    let fleet = Fleet::start(2, "fpuser");
    let (bad, good) = (&fleet.hosts[0], &fleet.hosts[1]);
    let prepare = || {
        for (h, word) in [(bad, "bad"), (good, "fine")] {
            let _ = std::fs::remove_dir_all(fleet.base(h));
            std::fs::create_dir_all(fleet.base(h)).unwrap();
            std::fs::write(fleet.base(h).join("state"), word).unwrap();
            std::os::unix::fs::chown(fleet.base(h), Some(uid("fpuser")), None).unwrap();
        }
    };
    // `made` and `kept` follow the `assert` and the `set_fact` in the same batch, gated on
    // them: `made` is a change, `kept` is converged. `uses` reads the fact: a new batch.
    fleet.play(concat!(
        "    - name: read\n      command: cat {{ base }}/state\n      register: c\n      changed_when: false\n",
        "    - name: check\n      assert: { that: \"'bad' not in c.stdout\" }\n",
        "    - name: note\n      set_fact: { word: \"{{ c.stdout }}\" }\n",
        "    - name: made\n      copy: { content: made, dest: \"{{ base }}/made\" }\n",
        "    - name: kept\n      file: { path: \"{{ base }}\", state: directory }\n",
        "    - name: uses\n      copy: { content: \"{{ word }}\", dest: \"{{ base }}/word\" }\n",
    ));
    prepare();
    let plain = fleet.apply(&["--no-pipelining"]);
    plain.expect(1);
    prepare();
    let piped = fleet.apply(&[]);
    piped.expect(1);
    assert_eq!(reported(&piped), reported(&plain), "{}", piped.stdout);
    assert!(
        !fleet.base(bad).join("made").exists(),
        "a gated step changed the host after the assert before it failed"
    );
    assert!(!fleet.base(bad).join("word").exists());
    assert_eq!(
        std::fs::read_to_string(fleet.base(good).join("word")).unwrap(),
        "fine"
    );
    assert!(fleet.base(good).join("made").exists());
    // `Hello` with the batch up to `kept` (its two gates) behind it, and `uses`.
    assert_eq!(round_trips(&piped, good.alias()), 2, "{}", piped.stdout);
    // Converged, the gated steps answer before their gates open: the same report again.
    let plain = fleet.apply(&["--no-pipelining"]);
    let piped = fleet.apply(&[]);
    assert_eq!(reported(&piped), reported(&plain), "{}", piped.stdout);
    assert_eq!(round_trips(&piped, good.alias()), 2, "{}", piped.stdout);
}

#[test]
fn a_slow_task_on_one_host_does_not_hold_the_next_tasks_of_another() {
    let fleet = Fleet::start(2, "fpuser");
    let (slow, fast) = (&fleet.hosts[0], &fleet.hosts[1]);
    for h in &fleet.hosts {
        std::fs::create_dir_all(fleet.base(h)).unwrap();
        std::os::unix::fs::chown(fleet.base(h), Some(uid("fpuser")), None).unwrap();
    }
    // `cat` of a FIFO waits for a writer: the slow host's first task waits for this test.
    let fifo = fleet.base(slow).join("gate");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o666)).unwrap();
    std::os::unix::fs::chown(&fifo, Some(uid("fpuser")), None).unwrap();
    std::fs::write(fleet.base(fast).join("gate"), "open\n").unwrap();
    fleet.play(concat!(
        "    - name: wait\n      command: cat {{ base }}/gate\n      changed_when: false\n",
        "    - name: second\n      file: { path: \"{{ base }}/second\", state: touch, modification_time: preserve, access_time: preserve }\n",
        "    - name: third\n      file: { path: \"{{ base }}/third\", state: touch, modification_time: preserve, access_time: preserve }\n",
    ));
    let mut child = fleet.spawn_apply(&[], std::process::Stdio::null());
    // The fast host's later tasks are done while the slow one still waits at the gate.
    let done = fleet.base(fast).join("third");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done.exists() && Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the run ended ({status}) before the gate opened");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let passed = done.exists();
    assert!(
        !fleet.base(slow).join("second").exists(),
        "the slow host went past its gate"
    );
    std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .unwrap()
        .write_all(b"open\n")
        .unwrap();
    let out: Out = child.wait_with_output().unwrap().into();
    out.expect(0);
    assert!(passed, "the fast host waited for the slow one");
    assert!(fleet.base(slow).join("third").exists());
    // Reported in task order all the same.
    assert_eq!(
        out.task_names(),
        ["wait", "wait", "second", "second", "third", "third"]
    );
}

fn uid(user: &str) -> u32 {
    nix::unistd::User::from_name(user)
        .unwrap()
        .expect("test user")
        .uid
        .as_raw()
}

/// `fixpoint apply` on the fleet with the controller's cache in the fixture, so that what the
/// controller remembers about the hosts (`engine/actions/held.rs`) is this test's alone.
fn apply_cached(fleet: &Fleet) -> Out {
    let out = std::process::Command::new(crate::fx::bin())
        .args(fleet.apply_args(&[]))
        .current_dir(fleet.fx.dir.path())
        .env("NO_COLOR", "1")
        .env("XDG_CACHE_HOME", fleet.fx.path("cache"))
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run fixpoint");
    Out::from(out)
}

fn notes(out: &Out) -> Vec<Value> {
    out.events()
        .into_iter()
        .filter(|e| e["event"] == "task")
        .map(|e| e["note"].clone())
        .collect()
}

#[test]
fn small_sources_a_host_lacks_travel_with_their_request() {
    let fleet = Fleet::start(1, "fpuser");
    let h = fleet.hosts[0].alias().to_string();
    fleet.fx.write("a.conf", "alpha\n");
    fleet.fx.write("b.conf", "beta\n");
    fleet.play(concat!(
        "    - file: { path: \"{{ base }}\", state: directory }\n",
        "    - copy: { src: a.conf, dest: \"{{ base }}/a.conf\" }\n",
        "    - copy: { src: b.conf, dest: \"{{ base }}/b.conf\" }\n",
    ));
    let sent = |a: &str, b: &str| vec![Value::Null, json!(a), json!(b)];
    // First run: the contents go with their requests, so it costs the converged run's round
    // trips, no more.
    let first = apply_cached(&fleet);
    first.expect(0);
    assert_eq!(
        notes(&first),
        sent("content sent: 6 bytes", "content sent: 5 bytes"),
        "{}",
        first.stdout
    );
    let converged = apply_cached(&fleet);
    converged.expect(0);
    assert_eq!(
        notes(&converged),
        vec![Value::Null; 3],
        "{}",
        converged.stdout
    );
    assert_eq!(round_trips(&first, &h), round_trips(&converged, &h));
    // The files removed behind the controller's back: it expects the host to hold them, sends
    // hashes, and the host asks for the contents (a round trip each), which arrive all the same.
    std::fs::remove_dir_all(fleet.base(&fleet.hosts[0])).unwrap();
    let stale = apply_cached(&fleet);
    stale.expect(0);
    assert_eq!(
        notes(&stale),
        sent("content sent: 6 bytes", "content sent: 5 bytes"),
        "{}",
        stale.stdout
    );
    assert!(
        round_trips(&stale, &h) > round_trips(&first, &h),
        "{}",
        stale.stdout
    );
    let base = fleet.base(&fleet.hosts[0]);
    assert_eq!(
        std::fs::read_to_string(base.join("a.conf")).unwrap(),
        "alpha\n"
    );
    assert_eq!(
        std::fs::read_to_string(base.join("b.conf")).unwrap(),
        "beta\n"
    );
}

/// Handlers notified on the same hosts, none notifying another, run as one section: one round
/// trip for all of them, reported as without pipelining (`RUNNING HANDLER`, in their order).
#[test]
fn notified_handlers_share_one_round_trip() {
    let fleet = Fleet::start(2, "fpuser");
    fleet.play(concat!(
        "    - name: dir\n      file: { path: \"{{ base }}\", state: directory }\n",
        "    - name: conf\n      copy: { content: \"x\\n\", dest: \"{{ base }}/conf\" }\n      notify: [two, one]\n",
        "  handlers:\n",
        "    - name: one\n      file: { path: \"{{ base }}/one\", state: touch, modification_time: preserve, access_time: preserve }\n",
        "    - name: two\n      copy: { content: \"{{ inventory_hostname }}\", dest: \"{{ base }}/two\" }\n",
    ));
    let piped = first_runs_agree(&fleet);
    for h in &fleet.hosts {
        assert!(fleet.base(h).join("one").exists());
        assert_eq!(
            std::fs::read_to_string(fleet.base(h).join("two")).unwrap(),
            h.alias()
        );
        // The tasks' batch (behind the agent's start), then both handlers in one (each on its
        // own would make 3).
        assert_eq!(round_trips(&piped, h.alias()), 2, "{}", piped.stdout);
    }
}

/// A condition named indirectly (`when: "{{ cond }}"`, `when: "{{ item }}"`) reads what the
/// expression it names reads: the task waits for the result it depends on, as without
/// pipelining.
#[test]
fn a_condition_named_indirectly_waits_for_what_it_reads() {
    let fleet = Fleet::start(1, "fpuser");
    fleet.play(concat!(
        "    - name: dir\n      file: { path: \"{{ base }}\", state: directory }\n",
        "    - name: look\n      stat: { path: \"{{ base }}\" }\n      register: look\n",
        "    - name: named\n      file: { path: \"{{ base }}/named\", state: touch, modification_time: preserve, access_time: preserve }\n      vars: { cond: look.stat.isdir }\n      when: \"{{ cond }}\"\n",
        "    - name: item\n      file: { path: \"{{ base }}/item\", state: touch, modification_time: preserve, access_time: preserve }\n      loop: [look.stat.isdir]\n      when: \"{{ item }}\"\n",
    ));
    first_runs_agree(&fleet);
    for f in ["named", "item"] {
        assert!(fleet.base(&fleet.hosts[0]).join(f).exists(), "{f}");
    }
}
