//! Background jobs (`async` with `poll: 0`): a job outlives the run, the agent and the SSH
//! connection that started it and leaves its result in its results file; a repeated start
//! request (the controller retrying after a dropped connection) is answered with the job that
//! exists, which runs once.

use crate::ssh::Fleet;
use fixpoint::connection::AgentBinary;
use fixpoint_agent::protocol::{encode, Request, RequestFrame, Response, ResponseFrame};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Wait up to `secs` for `ready`.
fn wait_for(secs: u64, mut ready: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        if ready() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    ready()
}

/// A results file's record once the job wrote its result (a start record still says `started`).
fn finished_record(path: &Path, secs: u64) -> Value {
    let mut last = Value::Null;
    let done = wait_for(secs, || {
        last = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null);
        last.is_object() && last.get("started").is_none()
    });
    assert!(done, "the job left no result in {}: {last}", path.display());
    last
}

#[test]
fn a_background_job_outlives_the_run_and_its_ssh_connection() {
    let fleet = Fleet::start(1, "fpuser");
    let base = fleet.base(&fleet.hosts[0]);
    std::fs::create_dir_all(&base).unwrap();
    std::fs::set_permissions(&base, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    fleet.play(
        "    - name: start
      shell: sleep 6 && echo done > {{ base }}/out
      args: {creates: \"{{ base }}/out\"}
      async: 60
      poll: 0
      register: job
",
    );
    let began = Instant::now();
    let out = fleet.apply(&["-v"]);
    let took = began.elapsed();
    out.expect(0);
    assert_eq!(out.status_of("start"), "changed", "{}", out.stdout);
    let r = out.task_events("start")[0]["result"].clone();
    assert_eq!(
        (&r["started"], &r["finished"]),
        (&json!(true), &json!(false)),
        "{r}"
    );
    let jid = r["ansible_job_id"].as_str().expect("a job id").to_string();
    let home = nix::unistd::User::from_name("fpuser").unwrap().unwrap().dir;
    let results_file = home.join(".ansible_async").join(&jid);
    assert_eq!(
        r["results_file"],
        json!(results_file.display().to_string()),
        "{r}"
    );
    // The run did not wait for the job (it sleeps 6 s before writing anything).
    if took < Duration::from_secs(6) {
        assert!(!base.join("out").exists(), "the run waited for its job");
    }
    // fixpoint has exited: its SSH master, the session and the agent are gone; the job is not.
    let record = finished_record(&results_file, 30);
    assert_eq!(std::fs::read_to_string(base.join("out")).unwrap(), "done\n");
    assert_eq!(record["rc"], json!(0), "{record}");
    assert_eq!(record["changed"], json!(true), "{record}");
    let _ = std::fs::remove_file(&results_file);
}

/// One framed answer from the agent.
fn read_answer(out: &mut impl Read) -> ResponseFrame {
    let mut len = [0u8; 4];
    out.read_exact(&mut len).expect("an answer");
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    out.read_exact(&mut body).expect("the answer's body");
    serde_json::from_slice(&body).expect("an answer frame")
}

#[test]
fn a_repeated_start_answers_with_the_job_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("fixpoint-agent");
    std::fs::write(&agent, AgentBinary::embedded().unpack().unwrap()).unwrap();
    std::fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let count = dir.path().join("count");
    let jid = format!(
        "j{}.{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    );
    let results_file = fixpoint_modules::async_job::job_path(&jid).unwrap();
    let _ = std::fs::remove_file(&results_file);
    let mut child = Command::new(&agent)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the agent starts");
    let mut stdout = child.stdout.take().unwrap();
    let mut magic = [0u8; 8];
    stdout.read_exact(&mut magic).unwrap();
    assert_eq!(&magic, fixpoint_agent::protocol::AGENT_MAGIC);
    let start = |id: u64| RequestFrame {
        id,
        timeout_ms: Some(10_000),
        req: Request::AsyncStart {
            jid: jid.clone(),
            limit_secs: 60,
            run: Box::new(Request::Run {
                module: "shell".into(),
                params: json!({
                    "cmd": format!("echo x >> {} && sleep 2", count.display()),
                    "creates": "/nonexistent/fixpoint-async-guard",
                }),
                check: false,
                diff: false,
                once: None,
                notify: None,
                inline: Vec::new(),
            }),
        },
    };
    let mut stdin = child.stdin.take().unwrap();
    let mut answers = Vec::new();
    for id in [1, 2] {
        stdin.write_all(&encode(&start(id))).unwrap();
        stdin.flush().unwrap();
        let a = read_answer(&mut stdout);
        assert_eq!(a.id, id);
        answers.push(a.resp);
    }
    // The controller hangs up while the job runs: the agent ends, the job does not.
    drop(stdin);
    child.wait().unwrap();
    for (i, a) in answers.iter().enumerate() {
        let Response::Done { outcome, note, .. } = a else {
            panic!("answer {i}: {a:?}");
        };
        assert!(outcome.changed);
        assert_eq!(outcome.result["ansible_job_id"], json!(jid));
        assert_eq!(
            outcome.result["results_file"],
            json!(results_file.display().to_string())
        );
        match i {
            0 => assert!(note.is_none(), "{note:?}"),
            _ => assert!(
                note.as_deref()
                    .is_some_and(|n| n.contains("not started again")),
                "{note:?}"
            ),
        }
    }
    let record = finished_record(&results_file, 30);
    assert_eq!(record["rc"], json!(0), "{record}");
    assert_eq!(
        std::fs::read_to_string(&count).unwrap(),
        "x\n",
        "the job ran once"
    );
    let _ = std::fs::remove_file(&results_file);
}

#[test]
fn a_job_gated_on_a_controller_step_starts_only_once_the_step_passed() {
    let fleet = Fleet::start(2, "fpuser");
    let (bad, good) = (&fleet.hosts[0], &fleet.hosts[1]);
    for (h, word) in [(bad, "bad"), (good, "fine")] {
        let base = fleet.base(h);
        std::fs::create_dir_all(&base).unwrap();
        std::fs::write(base.join("state"), word).unwrap();
        std::fs::set_permissions(&base, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .unwrap();
    }
    // The job follows the `assert` in the same batch (pipelining), gated on it.
    fleet.play(concat!(
        "    - name: read\n      command: cat {{ base }}/state\n      register: c\n      changed_when: false\n",
        "    - name: check\n      assert: { that: \"'bad' not in c.stdout\" }\n",
        "    - name: job\n      shell: echo started > {{ base }}/job\n      args: { creates: \"{{ base }}/job\" }\n      async: 30\n      poll: 0\n",
    ));
    let out = fleet.apply(&[]);
    out.expect(1);
    let good_job = fleet.base(good).join("job");
    assert!(wait_for(20, || good_job.exists()), "{}", out.stdout);
    // Given the same time, the host whose assert failed started nothing.
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        !fleet.base(bad).join("job").exists(),
        "a gated job started although the assert before it failed"
    );
    let home = nix::unistd::User::from_name("fpuser").unwrap().unwrap().dir;
    for ev in out.task_events("job") {
        if let Some(jid) = ev["result"]["ansible_job_id"].as_str() {
            let _ = std::fs::remove_file(home.join(".ansible_async").join(jid));
        }
    }
}
