//! The `fixpoint` binary: parse arguments, run the engine, map the outcome to an exit status.

fn main() -> std::process::ExitCode {
    fixpoint::main_entry()
}
