//! The `fixpoint-agent` binary: serve the controller's requests on stdin/stdout until it hangs up.

fn main() -> std::process::ExitCode {
    fixpoint_agent::serve::serve()
}
