//! The `fixpoint-agent` binary: serve the controller's requests on stdin/stdout until it hangs up.

fn main() -> std::process::ExitCode {
    // A background job's own process (started by the agent, see `job.rs`), not an agent.
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, jid, limit] = args.as_slice() {
        if flag == fixpoint_agent::job::JOB_ARG {
            return fixpoint_agent::job::run(jid, limit);
        }
    }
    fixpoint_agent::serve::serve()
}
