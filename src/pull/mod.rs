//! `fixpoint pull`: on the host itself, fetch a playbook repository, verify it, pick the
//! playbook and run it on the local transport with the same engine, journal and host lock as a
//! push run, then hand the JSON result to the operator; or install the timer that does so.
//!
//! One file per step: `fetch` (git), `verify` (`--verify-commit`), `select` (which playbook,
//! which hosts), `state` (the last successful run for `--only-if-changed`, the pull lock),
//! `result` (result file and POST) and `timer` (`--install-timer`). This file only sequences
//! them and must not know git's, gpg's or systemd's details.

mod args;
mod fetch;
mod result;
mod select;
mod state;
mod timer;
mod verify;

pub use args::PullArgs;

use crate::{config, engine, EXIT_FAILED, EXIT_INVALID};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// How a pull ended, for the `pull` event and the exit status.
struct Ending {
    status: &'static str,
    code: u8,
    msg: Option<String>,
}

impl Ending {
    fn new(status: &'static str, code: u8, msg: Option<String>) -> Ending {
        Ending { status, code, msg }
    }
}

/// What the `pull` event says besides how it ended.
#[derive(Default)]
struct Facts {
    commit: Option<String>,
    playbooks: Vec<String>,
    signer: Option<String>,
}

pub fn pull_cmd(mut args: PullArgs) -> ExitCode {
    crate::init_tracing(args.run.verbose);
    if args.install_timer || args.uninstall_timer {
        return timer::cmd(&args);
    }
    // The playbook runs from the checkout: paths given relative to here are made absolute now.
    for p in [&mut args.result_file, &mut args.directory] {
        if let Some(path) = p.as_mut() {
            *path = std::path::absolute(&*path).unwrap_or_else(|_| path.clone());
        }
    }
    // Read before the checkout, so a password file named relative to here is found.
    if let Err(d) = crate::install_vault_secrets(&args.run.vault) {
        return crate::invalid(&d);
    }
    let extra = match config::parse_extra_vars(&args.run.extra_vars) {
        Ok(e) => e,
        Err(d) => return crate::invalid(&d),
    };
    if args.verify_commit && args.keyring.is_none() && args.allowed_signers.is_none() {
        eprintln!(
            "error: --verify-commit needs the keys that may sign: --keyring <GPG public keys> \
             or --allowed-signers <SSH allowed-signers file>"
        );
        return ExitCode::from(EXIT_INVALID);
    }
    // The state directory the run's host lock and journal use on this host (`-e
    // fixpoint_state_dir=` moves both, as for a push).
    let state_dir = extra
        .get("fixpoint_state_dir")
        .and_then(Value::as_str)
        .map(PathBuf::from)
        .unwrap_or_else(fixpoint_agent::journal::default_state_dir);
    let url = args.url.clone().unwrap_or_default();
    let checkout = args
        .directory
        .clone()
        .unwrap_or_else(|| state_dir.join("pull").join("checkout"));
    let names = select::host_names();
    let key = result::idempotency_key(&names.0);
    let started = state::now();
    let collected = result::Collected::default();
    let mut facts = Facts::default();
    let ending = run_pull(
        &args, &url, &checkout, &state_dir, &names, &collected, &mut facts,
    );
    if let Some(msg) = &ending.msg {
        let kind = if ending.code == 0 { "note" } else { "error" };
        eprintln!("{kind}: {msg}");
    }
    let event = json!({
        "event": "pull",
        "status": ending.status,
        "exit": ending.code,
        "msg": ending.msg,
        "host": names.0,
        "url": url,
        "ref": args.checkout,
        "commit": facts.commit,
        "signed_by": facts.signer,
        "playbooks": facts.playbooks,
        "check": args.change.check,
        "idempotency_key": key,
        "started": started,
        "finished": state::now(),
        "fixpoint": env!("CARGO_PKG_VERSION"),
    });
    let body = collected.finish(&event);
    let mut code = ending.code;
    if let Some(file) = &args.result_file {
        if let Err(e) = state::write_atomic(file, &body) {
            eprintln!("error: the result: {e}");
            code = code.max(EXIT_FAILED);
        }
    }
    if let Some(url) = &args.result_url {
        if let Err(e) = result::post(url, &body, &key, args.result_attempts) {
            eprintln!("error: {e}");
            code = code.max(EXIT_FAILED);
        }
    }
    ExitCode::from(code)
}

/// Fetch, verify, decide, check out, run: every step that can end the pull.
fn run_pull(
    args: &PullArgs,
    url: &str,
    checkout: &Path,
    state_dir: &Path,
    names: &(String, String),
    collected: &result::Collected,
    facts: &mut Facts,
) -> Ending {
    let failed = |msg: String| Ending::new("error", EXIT_FAILED, Some(msg));
    let (record, lock_path) = state::paths(state_dir, url, checkout);
    // Two pulls of one setup (the timer's and one by hand) must not fetch into one checkout at
    // once; the host lock, taken by the run itself, orders them against pushes too.
    let _lock = match state::lock(
        &lock_path,
        std::time::Duration::from_secs(args.run.lock_timeout),
    ) {
        Ok(l) => l,
        Err(e) => return failed(e),
    };
    let commit = match fetch::fetch(url, args.checkout.as_deref(), checkout, args.full) {
        Ok(c) => c,
        Err(e) => return failed(e),
    };
    facts.commit = Some(commit.clone());
    if args.verify_commit {
        let keys = verify::Keys {
            keyring: args.keyring.as_deref(),
            allowed_signers: args.allowed_signers.as_deref(),
        };
        match verify::verify(checkout, &commit, &keys) {
            Ok(signer) => facts.signer = Some(signer),
            Err(e) => {
                return Ending::new(
                    "refused",
                    EXIT_INVALID,
                    Some(format!("{e}; nothing was run")),
                )
            }
        }
    }
    let inputs = json!({
        "url": url,
        "ref": args.checkout,
        "playbooks": args.named_playbooks(),
        // One source as it always was (so an upgrade keeps `--only-if-changed` records).
        "inventory": match args.run.inventory.as_slice() {
            [] => Value::Null,
            [one] => json!(one),
            many => json!(many),
        },
        "limit": args.run.limit,
        "extra_vars": args.run.extra_vars,
        "tags": args.run.tags,
        "skip_tags": args.run.skip_tags,
        "force_handlers": args.change.force_handlers,
    });
    let fingerprint = state::fingerprint(&commit, &inputs);
    if args.only_if_changed {
        let last = state::read(&record);
        if state::unchanged(last.as_ref(), &fingerprint, args.max_age, state::now()) {
            let ago = state::now().saturating_sub(last.map(|l| l.finished).unwrap_or(0));
            let msg = format!(
                "skipped: commit {commit} with the same inputs succeeded {ago}s ago \
                 (--only-if-changed); nothing was run"
            );
            println!("{msg}");
            return Ending::new("skipped", 0, None);
        }
    }
    if let Err(e) = fetch::checkout(checkout, &commit) {
        return failed(e);
    }
    let books = match select::playbooks(checkout, &args.named_playbooks(), names) {
        Ok(b) => b,
        Err(e) => return Ending::new("error", EXIT_INVALID, Some(e)),
    };
    facts.playbooks = books
        .iter()
        .map(|b| b.strip_prefix(checkout).unwrap_or(b).display().to_string())
        .collect();
    // As ansible-pull, the playbook runs from the checkout: a relative inventory, `-e @file`
    // and the playbook's own relative paths are the repository's.
    if let Err(e) = std::env::set_current_dir(checkout) {
        return failed(format!("cannot enter {}: {e}", checkout.display()));
    }
    let (status, code) = run_books(args, &books, names, collected);
    if code == 0 && !args.change.check {
        let last = state::LastSuccess {
            fingerprint,
            commit,
            finished: state::now(),
        };
        let bytes = serde_json::to_vec_pretty(&last).unwrap_or_default();
        if let Err(e) = state::write_atomic(&record, &bytes) {
            return failed(format!("the run succeeded, but {e}"));
        }
    }
    Ending::new(status, code, None)
}

/// The run itself, as `fixpoint apply` does it: the pull's run options become `apply`'s, so
/// the configuration is checked by the same code.
fn run_books(
    args: &PullArgs,
    books: &[PathBuf],
    names: &(String, String),
    collected: &result::Collected,
) -> (&'static str, u8) {
    let invalid = ("error", EXIT_INVALID);
    let mut argv: Vec<String> = vec!["fixpoint".into(), "apply".into()];
    let mut opt = |flag: &str, value: String| {
        argv.push(flag.into());
        argv.push(value);
    };
    if !args.run.inventory.is_empty() {
        for i in &args.run.inventory {
            opt("--inventory", i.display().to_string());
        }
        opt(
            "--limit",
            args.run
                .limit
                .clone()
                .unwrap_or_else(|| select::default_limit(names)),
        );
    } else if let Some(l) = &args.run.limit {
        opt("--limit", l.clone());
    }
    argv.extend(args.run_options());
    argv.push("--".into());
    argv.extend(books.iter().map(|b| b.display().to_string()));
    let run_args = match <crate::cli::Cli as clap::Parser>::try_parse_from(&argv) {
        Ok(crate::cli::Cli {
            command: crate::cli::Command::Apply(a),
        }) => a,
        Ok(_) => unreachable!("the argv names `apply`"),
        Err(e) => {
            let _ = e.print();
            return invalid;
        }
    };
    let cfg = match config::Config::from_run_args(run_args, false) {
        Ok(c) => c,
        Err(d) => {
            crate::invalid(&d);
            return invalid;
        }
    };
    let mut inv = match crate::load_inventory(&cfg.inventory) {
        Ok(i) => i,
        Err(d) => {
            crate::invalid(&d);
            return invalid;
        }
    };
    let mut loaded = match crate::load_all(
        &cfg.playbooks,
        &cfg.roles_path,
        &cfg.extra_vars,
        &mut inv,
        None,
    ) {
        Ok(b) => b,
        Err(problems) => {
            crate::invalid_all(&problems);
            return invalid;
        }
    };
    let templar = crate::template::Templar::new();
    if let Err(d) = crate::vars::prompt::settle(&mut loaded, &cfg.extra_vars, &templar) {
        crate::invalid(&d);
        return invalid;
    }
    if let Err(d) = crate::check_limit(&cfg, &inv) {
        crate::invalid(&d);
        return invalid;
    }
    // ansible-pull's `-c local`: the hosts this pull runs on are this machine.
    if let Some(limit) = &cfg.limit {
        if let Ok(hosts) = inv.select_limit(limit) {
            inv.default_to_local(&hosts);
        }
    }
    let runtime = match crate::runtime() {
        Ok(r) => r,
        Err(_) => return ("error", EXIT_FAILED),
    };
    let mut engine = engine::Engine::new(cfg, inv, crate::template::Templar::new());
    engine.tee_json(Box::new(collected.clone()));
    match runtime.block_on(engine.run(&loaded)) {
        engine::RunOutcome::Success => ("ok", 0),
        engine::RunOutcome::Failed => ("failed", EXIT_FAILED),
        engine::RunOutcome::Stopped => ("error", crate::EXIT_INVALID),
        engine::RunOutcome::NotConverged => ("not_converged", crate::EXIT_NOT_CONVERGED),
        engine::RunOutcome::Interrupted => ("interrupted", crate::EXIT_INTERRUPTED),
        // Only `fixpoint drift` runs end so; a pull never asks for it.
        engine::RunOutcome::Drifted => ("drifted", crate::EXIT_DRIFT),
    }
}
