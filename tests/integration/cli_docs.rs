//! `fixpoint completions` and `fixpoint man`: generated from the parser's own definitions, so
//! they name exactly the options `--help` names, and bash accepts the completion script.

use crate::fx::Fx;
use std::process::Command;

/// The long options `fixpoint <sub> --help` lists.
fn long_options(fx: &Fx, sub: &str) -> Vec<String> {
    let help = fx.run(&[sub, "--help"]);
    help.expect(0);
    let mut opts: Vec<String> = help
        .stdout
        .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == '<' || c == '=')
        .filter(|w| w.starts_with("--") && w.len() > 2)
        // A counted flag is shown as `--verbose...`.
        .map(|w| w.trim_end_matches('.').to_string())
        .collect();
    opts.sort();
    opts.dedup();
    assert!(
        opts.len() > 3,
        "`{sub} --help` lists no options:\n{}",
        help.stdout
    );
    opts
}

#[test]
fn man_pages_document_every_option_of_every_subcommand() {
    let fx = Fx::new();
    let main = fx.run(&["man"]);
    main.expect(0);
    assert!(main.stdout.contains(".TH fixpoint 1"), "{}", main.stdout);
    for sub in ["apply", "check", "validate", "inventory", "journal", "pull"] {
        assert!(
            main.stdout.contains(sub),
            "fixpoint(1) does not name `{sub}`"
        );
        let page = fx.run(&["man", sub]);
        page.expect(0);
        assert!(
            page.stdout.contains(&format!(".TH fixpoint-{sub} 1")),
            "{}",
            page.stdout
        );
        // roff escapes every `-` as `\-`.
        let roff = page.stdout.replace("\\-", "-");
        for opt in long_options(&fx, sub) {
            assert!(
                roff.contains(&opt),
                "`fixpoint man {sub}` does not document {opt}"
            );
        }
    }
    let bad = fx.run(&["man", "nosuch"]);
    bad.expect(2);
    assert!(
        bad.stderr.contains("`nosuch` is not a fixpoint subcommand"),
        "{}",
        bad.stderr
    );
}

#[test]
fn bash_loads_the_completion_script_and_completes_subcommands_and_options() {
    let fx = Fx::new();
    let script = fx.run(&["completions", "bash"]);
    script.expect(0);
    fx.write("fixpoint.bash", &script.stdout);
    // Ask bash's own completion machinery, as an interactive shell would on <Tab>.
    let probe = format!(
        "source {}\ncomplete -p fixpoint\n\
         COMP_WORDS=(fixpoint ap); COMP_CWORD=1; COMP_LINE='fixpoint ap'; COMP_POINT=11\n\
         _fixpoint fixpoint ap fixpoint; echo \"subs: ${{COMPREPLY[*]}}\"\n\
         COMP_WORDS=(fixpoint apply --tw); COMP_CWORD=2; COMP_LINE='fixpoint apply --tw'; COMP_POINT=19\n\
         _fixpoint fixpoint --tw apply; echo \"opts: ${{COMPREPLY[*]}}\"\n",
        fx.path("fixpoint.bash").display()
    );
    let out = Command::new("bash").arg("-c").arg(&probe).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("-F _fixpoint fixpoint"), "{stdout}");
    assert!(stdout.contains("subs: apply"), "{stdout}");
    assert!(stdout.contains("opts: --twice"), "{stdout}");
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let s = fx.run(&["completions", shell]);
        s.expect(0);
        assert!(
            s.stdout.contains("apply"),
            "{shell} script names no subcommand"
        );
    }
}
