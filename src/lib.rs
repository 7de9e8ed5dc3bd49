//! fixpoint's engine: CLI, loader, templating, scheduler, transports, agent and reporter.

pub fn main_entry() -> std::process::ExitCode {
    std::process::ExitCode::SUCCESS
}
