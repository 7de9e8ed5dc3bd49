//! Vault secrets from the environment and the terminal, through the binary: an executable
//! `ANSIBLE_VAULT_PASSWORD_FILE`, a labelled `ANSIBLE_VAULT_IDENTITY_LIST`, `--ask-vault-pass`
//! reading stdin, and the errors of a missing password file and of an empty answer.

use crate::fx::{bin, Fx, Out};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

/// `filevar: from a vaulted vars file` and `num: 42`, encrypted by ansible-vault 2.19 with
/// the password `correct horse`.
const VAULTED_VARS: &str = "\
$ANSIBLE_VAULT;1.1;AES256\n\
31303537383430346532313363326638666139343732623464333336323833303939353537636330\n\
6636636230336166626365343663643365613066653031630a663036353736313239303833323835\n\
32646666643232343933303063353435656466316335333134653531613939633132346133643666\n\
6530386533366233330a616336653336613131356664663566383836303663346365613230366466\n\
33643066323335373034376265636235316666623061613066626664353239326634353261633161\n\
6664396264323930366138343463636430613532303162353533\n\
";

fn fixture() -> Fx {
    let fx = Fx::new();
    fx.write("vaulted.yml", VAULTED_VARS);
    // Its own state directory: tests run in parallel (see `Fx::state_dir`).
    let play = format!(
        "- hosts: localhost\n  gather_facts: false\n  vars_files: [vaulted.yml]\n  vars:\n    fixpoint_state_dir: {}\n  tasks:\n    - debug: {{msg: \"{{{{ filevar }}}} {{{{ num + 1 }}}}\"}}\n",
        fx.state_dir().display()
    );
    fx.write("site.yml", &play);
    fx
}

/// `fixpoint apply --format json -v site.yml` (`-v`: results in the events) with these
/// arguments, environment and stdin.
fn run(fx: &Fx, args: &[&str], env: &[(&str, &str)], stdin: &str) -> Out {
    let mut child = Command::new(bin())
        .args(["apply", "--format", "json", "-v"])
        .args(args)
        .arg("site.yml")
        .current_dir(fx.path(""))
        .env("NO_COLOR", "1")
        .env_remove("ANSIBLE_VAULT_PASSWORD_FILE")
        .env_remove("ANSIBLE_VAULT_IDENTITY_LIST")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fixpoint");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    Out::from(child.wait_with_output().expect("run fixpoint"))
}

fn printed(out: &Out) -> String {
    out.task_events("debug")
        .first()
        .map(|e| e["result"]["msg"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default()
}

#[test]
fn secrets_from_an_executable_env_file_an_identity_list_and_stdin() {
    let fx = fixture();
    let script = fx.write("pass.sh", "#!/bin/sh\necho 'correct horse'\n");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = script.display().to_string();
    let out = run(&fx, &[], &[("ANSIBLE_VAULT_PASSWORD_FILE", &script)], "");
    out.expect(0);
    assert_eq!(printed(&out), "from a vaulted vars file 43");

    fx.write("pw", "correct horse\n");
    let out = run(&fx, &[], &[("ANSIBLE_VAULT_IDENTITY_LIST", "dev@pw")], "");
    out.expect(0);
    assert_eq!(printed(&out), "from a vaulted vars file 43");

    let out = run(&fx, &["--ask-vault-pass"], &[], "correct horse\n");
    out.expect(0);
    assert_eq!(printed(&out), "from a vaulted vars file 43");
}

#[test]
fn missing_password_file_and_empty_answer_are_errors_before_anything_runs() {
    let fx = fixture();
    let out = run(&fx, &["--vault-password-file", "nope"], &[], "");
    out.expect(2);
    assert!(
        out.stderr.contains("The vault password file ")
            && out.stderr.contains("nope was not found"),
        "{}",
        out.stderr
    );
    let out = run(&fx, &["-J"], &[], "\n");
    out.expect(2);
    assert!(
        out.stderr.contains("Invalid vault password was provided"),
        "{}",
        out.stderr
    );
    // Without any secret, the encrypted vars file is an error where it is read.
    let out = run(&fx, &[], &[], "");
    out.expect(2);
    assert!(
        out.stderr
            .contains("Attempting to decrypt but no vault secrets found."),
        "{}",
        out.stderr
    );
}
