//! fixpoint, the controller: command line, inventory, playbook loading, templating, the engine, connections and reporting.
//!
//! `main_entry` is the only thing the binary calls: it parses arguments, runs the engine, prints
//! an error once and maps the outcome to an exit status (0 ok, 1 failed, 2 bad input, 3 not converged,
//! 130 interrupted).

pub mod cli;
pub mod config;
pub mod connection;
pub mod diag;
pub mod engine;
pub mod inventory;
pub mod playbook;
pub mod pull;
pub mod pymod;
pub mod report;
pub mod schema;
pub mod template;
pub mod validate;
pub mod vars;
pub mod vault;
pub mod yaml;

use clap::Parser;
use diag::{Diagnostic, Pos};
use std::process::ExitCode;

pub const EXIT_FAILED: u8 = 1;
pub const EXIT_INVALID: u8 = 2;
pub const EXIT_NOT_CONVERGED: u8 = 3;
/// `fixpoint drift` found files changed outside fixpoint.
pub const EXIT_DRIFT: u8 = 3;
/// Stopped by Ctrl-C (SIGINT), as shells report a process ended by it (128 + 2).
pub const EXIT_INTERRUPTED: u8 = 130;

pub fn main_entry() -> ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(EXIT_INVALID)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match cli.command {
        cli::Command::Apply(args) => run_cmd(args, false, false),
        cli::Command::Check(args) => run_cmd(args, true, false),
        // Without playbooks: every journal record's file compared, as `journal drift`.
        cli::Command::Drift(args) if args.playbooks.is_empty() => {
            journal_cmd(args.into_journal_args())
        }
        cli::Command::Drift(args) => run_cmd(args.into_run_args(), true, true),
        cli::Command::Validate(args) => validate_cmd(args),
        cli::Command::Pull(args) => pull::pull_cmd(*args),
        cli::Command::Inventory(args) => inventory_cmd(args),
        cli::Command::Journal(args) => journal_cmd(args),
        cli::Command::Completions { shell } => completions_cmd(shell),
        cli::Command::Man { subcommand } => man_cmd(subcommand),
        cli::Command::Schema { kind } => schema_cmd(&kind),
    }
}

/// Completion scripts come from the same clap definitions that parse the arguments, so they
/// cannot name an option the parser does not take.
fn completions_cmd(shell: clap_complete::Shell) -> ExitCode {
    use clap::CommandFactory;
    let mut cmd = cli::Cli::command();
    clap_complete::generate(shell, &mut cmd, "fixpoint", &mut std::io::stdout());
    ExitCode::SUCCESS
}

/// Print the JSON Schema of one kind of file.
fn schema_cmd(kind: &str) -> ExitCode {
    match schema::schema(kind) {
        Some(s) => {
            println!("{s:#}");
            ExitCode::SUCCESS
        }
        None => {
            eprintln!(
                "error: no schema for `{kind}`; kinds: {}",
                schema::KINDS.join(", ")
            );
            ExitCode::from(EXIT_INVALID)
        }
    }
}

/// A manual page generated from the clap definitions like the completions: fixpoint(1), or
/// `fixpoint-<subcommand>`(1) with that subcommand's options in full.
fn man_cmd(subcommand: Option<String>) -> ExitCode {
    use clap::CommandFactory;
    let cmd = cli::Cli::command();
    let page = match subcommand {
        None => cmd,
        Some(name) => match cmd.find_subcommand(&name) {
            Some(sub) => sub.clone().name(format!("fixpoint-{name}")),
            None => {
                let known: Vec<&str> = cmd.get_subcommands().map(|s| s.get_name()).collect();
                eprintln!(
                    "error: `{name}` is not a fixpoint subcommand; pages exist for: {}",
                    known.join(", ")
                );
                return ExitCode::from(EXIT_INVALID);
            }
        },
    };
    let mut out = Vec::new();
    match clap_mangen::Man::new(page)
        .render(&mut out)
        .and_then(|()| std::io::Write::write_all(&mut std::io::stdout(), &out))
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: cannot write the manual page: {e}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

fn init_tracing(verbosity: u8) {
    let default = match verbosity {
        0..=2 => "warn",
        3 => "info",
        _ => "debug",
    };
    // `FIXPOINT_LOG`: a level, or `target=level` directives (`fixpoint::engine=debug,warn`).
    // Not tracing's `EnvFilter`: its span and field matching pulls in regex's eager DFA
    // builder, which every regex the controller compiles then paid for (a third of a small
    // run's instructions).
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let given = std::env::var("FIXPOINT_LOG").ok();
    let filter = given
        .as_deref()
        .and_then(|v| v.parse::<tracing_subscriber::filter::Targets>().ok())
        .unwrap_or_else(|| default.parse().expect("a level is a valid filter"));
    let _ = tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(filter)
        .try_init();
}

fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("error: cannot start the async runtime: {e}");
            ExitCode::from(EXIT_FAILED)
        })
}

fn invalid(d: &Diagnostic) -> ExitCode {
    eprint!("{d}");
    ExitCode::from(EXIT_INVALID)
}

/// The inventory of the `-i` sources (none: the implicit localhost), or what is wrong with it.
pub(crate) fn load_inventory(
    sources: &[std::path::PathBuf],
) -> Result<inventory::Inventory, Diagnostic> {
    inventory::Inventory::load_sources(sources).map_err(inventory_diag)
}

fn inventory_diag(e: inventory::InventoryError) -> Diagnostic {
    let pos = Pos {
        file: std::sync::Arc::new(e.file.clone()),
        line: e.line.unwrap_or(0),
        col: e.col.unwrap_or(1),
    };
    let d = Diagnostic::at(&pos, format!("invalid inventory: {}", e.msg));
    match e.help {
        Some(help) => d.help(help),
        None => d,
    }
}

/// Load every playbook, and the vars directories beside them, or say everything that is wrong
/// (under `--shard` without `--shard-allow-cross`, what needs the whole fleet too).
fn load_all(
    paths: &[std::path::PathBuf],
    roles_path: &[std::path::PathBuf],
    extra_vars: &serde_json::Map<String, serde_json::Value>,
    inv: &mut inventory::Inventory,
    shard: Option<inventory::Shard>,
) -> Result<Vec<playbook::Playbook>, Vec<Diagnostic>> {
    let mut books = Vec::new();
    let mut errors = Vec::new();
    let ((), yaml_warnings) = yaml::collect_warnings(|| {
        for p in paths {
            let (book, load_errors) = playbook::load_playbook_all(p, roles_path, extra_vars);
            errors.extend(load_errors);
            if let Some(book) = book {
                // Beside the playbook and beside each playbook it imports: each play reads
                // those of its own file (`Inventory::set_play_dir`).
                let mut dirs = vec![&book.dir];
                for play in &book.plays {
                    if !dirs.contains(&&play.dir) {
                        dirs.push(&play.dir);
                    }
                }
                for dir in dirs {
                    if let Err(e) = inv.load_playbook_vars_dir(dir) {
                        errors.push(inventory_diag(e));
                    }
                }
                books.push(book);
            }
        }
    });
    let mut shown = std::collections::HashSet::new();
    for w in yaml_warnings {
        let text = w.to_string().replacen("error:", "warning:", 1);
        if shown.insert(text.clone()) {
            eprint!("{text}");
        }
    }
    // The playbooks' own Jinja plugins, known before anything is checked or rendered.
    let dirs: Vec<std::path::PathBuf> = books
        .iter()
        .map(|b: &playbook::Playbook| b.dir.clone())
        .collect();
    if let Some(w) = pymod::plugins::install(&dirs) {
        eprintln!("warning: {w}");
    }
    // What is wrong in the books that loaded, found beside what is wrong in those that did not.
    let inv: &inventory::Inventory = inv;
    let other_owner = |host: &str| shard?.other_owner(inv, host).map(|s| s.to_string());
    let sharding = shard.map(|s| validate::Sharding {
        shard: s.to_string(),
        other_owner: &other_owner,
    });
    let found = validate::validate_sharded(&books, sharding.as_ref());
    errors.extend(found.errors);
    for w in &found.warnings {
        eprint!("{}", w.to_string().replacen("error:", "warning:", 1));
    }
    if errors.is_empty() {
        Ok(books)
    } else {
        Err(errors)
    }
}

/// Print every problem (each once) and say that nothing ran: exit 2.
fn invalid_all(problems: &[Diagnostic]) -> ExitCode {
    let mut seen = std::collections::BTreeSet::new();
    let mut count = 0;
    for d in problems {
        let text = d.to_string();
        if seen.insert(text.clone()) {
            eprint!("{text}");
            count += 1;
        }
    }
    eprintln!("{count} problem(s) found; no host was touched");
    ExitCode::from(EXIT_INVALID)
}

/// `apply`, `check`, or (`drift`) a check that reports drift and exits 3 when it finds some.
fn run_cmd(args: cli::RunArgs, check_cmd: bool, drift: bool) -> ExitCode {
    init_tracing(args.run.verbose);
    if let Err(d) = install_vault_secrets(&args.run.vault) {
        return invalid(&d);
    }
    let cfg = match config::Config::from_run_args(args, check_cmd) {
        Ok(c) => c,
        Err(d) => return invalid(&d),
    };
    let mut inv = match load_inventory(&cfg.inventory) {
        Ok(i) => i,
        Err(d) => return invalid(&d),
    };
    // The same checks as `fixpoint validate`, all of them, before any host is touched.
    let refuse_cross = cfg.shard.filter(|_| !cfg.shard_allow_cross);
    let mut books = match load_all(
        &cfg.playbooks,
        &cfg.roles_path,
        &cfg.extra_vars,
        &mut inv,
        refuse_cross,
    ) {
        Ok(b) => b,
        Err(problems) => return invalid_all(&problems),
    };
    if let Err(d) = vars::prompt::settle(&mut books, &cfg.extra_vars, &template::Templar::new()) {
        return invalid(&d);
    }
    if let Err(d) = check_limit(&cfg, &inv) {
        return invalid(&d);
    }
    if let Err(d) = engine::check_start_at(cfg.start_at_task.as_deref(), &books) {
        return invalid(&d);
    }
    if let Some(what) = cfg.listing {
        return match report::listing::print(&books, &inv, &cfg, what) {
            Ok(()) => ExitCode::SUCCESS,
            Err(d) => invalid(&d),
        };
    }
    if let Err(d) = fit_open_files(run_hosts(&books, &inv, &cfg), &cfg) {
        return invalid(&d);
    }
    let runtime = match runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let templar = template::Templar::new();
    let mut engine = engine::Engine::new(cfg, inv, templar);
    if drift {
        engine.report_drift();
    }
    let outcome = runtime.block_on(engine.run(&books));
    vault::plain::remove_all();
    match outcome {
        engine::RunOutcome::Success => ExitCode::SUCCESS,
        engine::RunOutcome::Drifted => ExitCode::from(EXIT_DRIFT),
        engine::RunOutcome::Failed => ExitCode::from(EXIT_FAILED),
        engine::RunOutcome::Stopped => ExitCode::from(EXIT_INVALID),
        engine::RunOutcome::NotConverged => ExitCode::from(EXIT_NOT_CONVERGED),
        engine::RunOutcome::Interrupted => ExitCode::from(EXIT_INTERRUPTED),
    }
}

/// How many hosts the plays may connect to: the hosts their patterns select (after `--limit`);
/// a pattern that cannot be read before the run (a template) counts the whole inventory.
fn run_hosts(
    books: &[playbook::Playbook],
    inv: &inventory::Inventory,
    cfg: &config::Config,
) -> usize {
    let allowed = cfg.limit.as_ref().and_then(|l| inv.select_limit(l).ok());
    let mut hosts = std::collections::BTreeSet::new();
    for play in books.iter().flat_map(|b| &b.plays) {
        let selected = match inv.select(&play.hosts) {
            Ok(h) if !play.hosts.contains("{{") => h,
            _ => inv.select("all").unwrap_or_default(),
        };
        hosts.extend(
            selected
                .into_iter()
                .filter(|h| allowed.as_ref().is_none_or(|a| a.contains(h))),
        );
    }
    hosts.len()
}

/// Raise the open-file limit to what `hosts` connections need, or refuse the run (exit 2,
/// nothing touched) when even the hard limit is too small.
fn fit_open_files(hosts: usize, cfg: &config::Config) -> Result<(), Diagnostic> {
    match connection::fdlimit::ensure(hosts, cfg.handshakes.limit()) {
        Ok(connection::fdlimit::Raised::From(old, new)) => {
            tracing::debug!("raised the open-file limit from {old} to {new} for {hosts} hosts");
            Ok(())
        }
        Ok(connection::fdlimit::Raised::No) => Ok(()),
        Err(msg) => Err(Diagnostic::new(msg)),
    }
}

/// `--limit` that leaves none of the inventory's hosts is refused before anything runs, as
/// ansible-playbook does ("no hosts to target"); without an inventory file (the implicit
/// localhost) there is nothing to refuse, as there.
fn check_limit(cfg: &config::Config, inv: &inventory::Inventory) -> Result<(), Diagnostic> {
    let Some(limit) = cfg.limit.as_ref().filter(|_| !cfg.inventory.is_empty()) else {
        return Ok(());
    };
    let all = inv
        .select("all")
        .map_err(|e| Diagnostic::new(e.msg.clone()))?;
    if all.is_empty() {
        return Ok(());
    }
    let allowed = inv.select_limit(limit).map_err(|e| {
        Diagnostic::new(format!("bad --limit pattern: {}", e.msg)).help(
            "a pattern is host or group names, globs (`web*`) or `~regex`, joined by `:`, \
             with `&` to intersect and `!` to exclude",
        )
    })?;
    if all.iter().any(|h| allowed.contains(h)) {
        return Ok(());
    }
    Err(Diagnostic::new(format!(
        "--limit `{limit}` leaves no hosts to target: it matches none of the inventory's hosts"
    ))
    .help(inv.unmatched_pattern_hint(limit)))
}

/// Read the vault secrets the options and environment name, before anything is loaded (vars
/// files and inventories may be encrypted), for the whole run (`vault::install`).
pub(crate) fn install_vault_secrets(args: &cli::VaultArgs) -> Result<(), Diagnostic> {
    let secrets = vault::secrets::load(&args.options()).map_err(Diagnostic::new)?;
    vault::install(secrets);
    Ok(())
}

fn validate_cmd(args: cli::ValidateArgs) -> ExitCode {
    init_tracing(0);
    if let Err(d) = install_vault_secrets(&args.vault) {
        return invalid(&d);
    }
    let extra_vars = match config::parse_extra_vars(&args.extra_vars) {
        Ok(v) => v,
        Err(d) => return invalid(&d),
    };
    let mut inv = match load_inventory(&args.inventory) {
        Ok(i) => i,
        Err(d) => return invalid(&d),
    };
    let roles_path = config::roles_path(&args.roles_path);
    match load_all(&args.playbooks, &roles_path, &extra_vars, &mut inv, None) {
        Ok(books) => {
            if args.modules || args.verbose > 0 {
                print!("{}", pymod::listing::modules_table(&books));
            }
            validated(&books)
        }
        Err(problems) => invalid_all(&problems),
    }
}

/// The summary of playbooks `load_all` found nothing wrong with (`validate`).
fn validated(books: &[playbook::Playbook]) -> ExitCode {
    let plays: usize = books.iter().map(|b| b.plays.len()).sum();
    let tasks: usize = books
        .iter()
        .flat_map(|b| &b.plays)
        .map(|p| p.all_tasks().len())
        .sum();
    println!(
        "ok: {} playbook(s), {plays} play(s), {tasks} task(s) valid",
        books.len()
    );
    ExitCode::SUCCESS
}

fn journal_cmd(args: cli::JournalArgs) -> ExitCode {
    init_tracing(0);
    let cfg = match config::Config::for_journal(&args) {
        Ok(c) => c,
        Err(d) => return invalid(&d),
    };
    let inv = match load_inventory(&cfg.inventory) {
        Ok(i) => i,
        Err(d) => return invalid(&d),
    };
    let mut pattern = args.host.clone().unwrap_or_else(|| "all".into());
    let action = match args.action {
        cli::JournalAction::List => fixpoint_agent::protocol::JournalOp::List,
        cli::JournalAction::Show { key } => fixpoint_agent::protocol::JournalOp::Show { key },
        cli::JournalAction::Prune { days } => fixpoint_agent::protocol::JournalOp::Prune { days },
        cli::JournalAction::Drift => fixpoint_agent::protocol::JournalOp::Drift,
        cli::JournalAction::Resolve { mut args, done, .. } => {
            // `args` is `required` with 1..=2 values (cli.rs): never empty.
            let key = args.pop().expect("clap requires the key");
            if let Some(host) = args.pop() {
                pattern = host;
            }
            fixpoint_agent::protocol::JournalOp::Resolve { key, done }
        }
    };
    let hosts = inv.select(&pattern).map_or(0, |h| h.len());
    if let Err(d) = fit_open_files(hosts, &cfg) {
        return invalid(&d);
    }
    let runtime = match runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let mut engine = engine::Engine::new(cfg, inv, template::Templar::new());
    let ok = runtime.block_on(engine.journal(&pattern, args.become_, action));
    if engine.drifts() > 0 {
        ExitCode::from(EXIT_DRIFT)
    } else if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    }
}

fn inventory_cmd(args: cli::InventoryArgs) -> ExitCode {
    if let Err(d) = install_vault_secrets(&args.vault) {
        return invalid(&d);
    }
    let inv = match load_inventory(&args.inventory) {
        Ok(i) => i,
        Err(d) => return invalid(&d),
    };
    if let Some(h) = args.host {
        match inv.host_json(&h) {
            // A non-finite float as ansible-inventory prints it (`Infinity`).
            Some(v) => println!(
                "{}",
                yaml::mark::python_json_floats(
                    serde_json::to_string_pretty(&v).unwrap_or_default()
                )
            ),
            None => {
                eprintln!("error: host `{h}` is not in the inventory");
                return ExitCode::from(EXIT_INVALID);
            }
        }
    } else if args.graph {
        print!("{}", inv.to_graph(None));
    } else {
        println!(
            "{}",
            yaml::mark::python_json_floats(
                serde_json::to_string_pretty(&inv.to_list_json()).unwrap_or_default()
            )
        );
    }
    ExitCode::SUCCESS
}
