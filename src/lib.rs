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
pub mod pymod;
pub mod report;
pub mod template;
pub mod vars;
pub mod yaml;

use clap::Parser;
use diag::{Diagnostic, Pos};
use std::process::ExitCode;

pub const EXIT_FAILED: u8 = 1;
pub const EXIT_INVALID: u8 = 2;
pub const EXIT_NOT_CONVERGED: u8 = 3;
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
        cli::Command::Apply(args) => run_cmd(args, false),
        cli::Command::Check(args) => run_cmd(args, true),
        cli::Command::Validate(args) => validate_cmd(args),
        cli::Command::Inventory(args) => inventory_cmd(args),
        cli::Command::Journal(args) => journal_cmd(args),
    }
}

fn init_tracing(verbosity: u8) {
    let default = match verbosity {
        0..=2 => "warn",
        3 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("FIXPOINT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
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

fn load_inventory(path: Option<&std::path::Path>) -> Result<inventory::Inventory, Diagnostic> {
    match path {
        None => Ok(inventory::Inventory::implicit_localhost()),
        Some(p) => inventory::Inventory::load(p).map_err(inventory_diag),
    }
}

fn inventory_diag(e: inventory::InventoryError) -> Diagnostic {
    let pos = Pos {
        file: std::sync::Arc::new(e.file.clone()),
        line: e.line.unwrap_or(0),
        col: e.col.unwrap_or(1),
    };
    Diagnostic::at(&pos, format!("invalid inventory: {}", e.msg))
}

/// Load every playbook, and the vars directories beside them, or say what is wrong.
fn load_all(
    paths: &[std::path::PathBuf],
    roles_path: &[std::path::PathBuf],
    inv: &mut inventory::Inventory,
) -> Result<Vec<playbook::Playbook>, Diagnostic> {
    let mut books = Vec::new();
    for p in paths {
        let book = playbook::load_playbook(p, roles_path)?;
        inv.load_vars_dir(&book.dir).map_err(inventory_diag)?;
        books.push(book);
    }
    Ok(books)
}

fn run_cmd(args: cli::RunArgs, check_cmd: bool) -> ExitCode {
    init_tracing(args.verbose);
    let cfg = match config::Config::from_run_args(args, check_cmd) {
        Ok(c) => c,
        Err(d) => return invalid(&d),
    };
    let mut inv = match load_inventory(cfg.inventory.as_deref()) {
        Ok(i) => i,
        Err(d) => return invalid(&d),
    };
    let books = match load_all(&cfg.playbooks, &cfg.roles_path, &mut inv) {
        Ok(b) => b,
        Err(d) => return invalid(&d),
    };
    if let Err(msg) = check_limit(&cfg, &inv) {
        eprintln!("error: {msg}");
        return ExitCode::from(EXIT_INVALID);
    }
    match cfg.listing {
        Some(config::Listing::SyntaxCheck) => return validate_books(&books),
        Some(what) => {
            return match report::listing::print(&books, &inv, &cfg, what) {
                Ok(()) => ExitCode::SUCCESS,
                Err(d) => invalid(&d),
            }
        }
        None => {}
    }
    let runtime = match runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let templar = template::Templar::new();
    let mut engine = engine::Engine::new(cfg, inv, templar);
    let outcome = runtime.block_on(engine.run(&books));
    match outcome {
        engine::RunOutcome::Success => ExitCode::SUCCESS,
        engine::RunOutcome::Failed => ExitCode::from(EXIT_FAILED),
        engine::RunOutcome::NotConverged => ExitCode::from(EXIT_NOT_CONVERGED),
        engine::RunOutcome::Interrupted => ExitCode::from(EXIT_INTERRUPTED),
    }
}

/// `--limit` that leaves none of the inventory's hosts is refused before anything runs, as
/// ansible-playbook does ("no hosts to target"); without an inventory file (the implicit
/// localhost) there is nothing to refuse, as there.
fn check_limit(cfg: &config::Config, inv: &inventory::Inventory) -> Result<(), String> {
    let (Some(limit), Some(_)) = (&cfg.limit, &cfg.inventory) else {
        return Ok(());
    };
    let all = inv.select("all").map_err(|e| e.msg.clone())?;
    if all.is_empty() {
        return Ok(());
    }
    let allowed = inv
        .select(limit)
        .map_err(|e| format!("bad --limit pattern: {}", e.msg))?;
    if all.iter().any(|h| allowed.contains(h)) {
        return Ok(());
    }
    Err(format!(
        "--limit `{limit}` leaves no hosts to target: it matches none of the inventory's hosts"
    ))
}

fn validate_cmd(args: cli::ValidateArgs) -> ExitCode {
    init_tracing(0);
    if let Err(d) = config::parse_extra_vars(&args.extra_vars) {
        return invalid(&d);
    }
    let mut inv = match load_inventory(args.inventory.as_deref()) {
        Ok(i) => i,
        Err(d) => return invalid(&d),
    };
    let roles_path = config::roles_path(&args.roles_path);
    let books = match load_all(&args.playbooks, &roles_path, &mut inv) {
        Ok(b) => b,
        Err(d) => return invalid(&d),
    };
    let status = validate_books(&books);
    if args.modules || args.verbose > 0 {
        print!("{}", pymod::listing::modules_table(&books));
    }
    status
}

/// Check the templates of every task and print a summary (`validate`, `--syntax-check`).
fn validate_books(books: &[playbook::Playbook]) -> ExitCode {
    let templar = template::Templar::new();
    for book in books {
        for play in &book.plays {
            for task in play.all_tasks() {
                if let Err(msg) = check_task_templates(&templar, task) {
                    return invalid(
                        &Diagnostic::at(&task.pos, msg)
                            .help("fix the Jinja2 syntax of this task's templates"),
                    );
                }
            }
        }
    }
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

/// Check the syntax of every template string in a task (without rendering: no host values yet).
fn check_task_templates(templar: &template::Templar, task: &playbook::Task) -> Result<(), String> {
    fn walk(templar: &template::Templar, v: &serde_json::Value) -> Result<(), String> {
        match v {
            serde_json::Value::String(s) if template::Templar::is_template(s) => templar
                .check_syntax(s)
                .map_err(|e| format!("template syntax error in `{s}`: {e}")),
            serde_json::Value::Array(a) => a.iter().try_for_each(|x| walk(templar, x)),
            serde_json::Value::Object(m) => m.values().try_for_each(|x| walk(templar, x)),
            _ => Ok(()),
        }
    }
    walk(templar, &task.params)?;
    for cond in task
        .when
        .iter()
        .chain(task.changed_when.iter().flatten())
        .chain(task.failed_when.iter().flatten())
    {
        let wrapped = if template::Templar::is_template(cond) {
            cond.clone()
        } else {
            format!("{{{{ {cond} }}}}")
        };
        templar
            .check_syntax(&wrapped)
            .map_err(|e| format!("syntax error in condition `{cond}`: {e}"))?;
    }
    Ok(())
}

fn journal_cmd(args: cli::JournalArgs) -> ExitCode {
    init_tracing(0);
    let cfg = match config::Config::for_journal(&args) {
        Ok(c) => c,
        Err(d) => return invalid(&d),
    };
    let inv = match load_inventory(cfg.inventory.as_deref()) {
        Ok(i) => i,
        Err(d) => return invalid(&d),
    };
    let mut pattern = args.host.clone().unwrap_or_else(|| "all".into());
    let action = match args.action {
        cli::JournalAction::List => fixpoint_agent::protocol::JournalOp::List,
        cli::JournalAction::Show { key } => fixpoint_agent::protocol::JournalOp::Show { key },
        cli::JournalAction::Prune { days } => fixpoint_agent::protocol::JournalOp::Prune { days },
        cli::JournalAction::Resolve { mut args, done, .. } => {
            // `args` is `required` with 1..=2 values (cli.rs): never empty.
            let key = args.pop().expect("clap requires the key");
            if let Some(host) = args.pop() {
                pattern = host;
            }
            fixpoint_agent::protocol::JournalOp::Resolve { key, done }
        }
    };
    let runtime = match runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let mut engine = engine::Engine::new(cfg, inv, template::Templar::new());
    if runtime.block_on(engine.journal(&pattern, args.become_, action)) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    }
}

fn inventory_cmd(args: cli::InventoryArgs) -> ExitCode {
    let inv = match inventory::Inventory::load(&args.inventory) {
        Ok(i) => i,
        Err(e) => return invalid(&inventory_diag(e)),
    };
    if let Some(h) = args.host {
        match inv.host_json(&h) {
            Some(v) => println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default()),
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
            serde_json::to_string_pretty(&inv.to_list_json()).unwrap_or_default()
        );
    }
    ExitCode::SUCCESS
}
