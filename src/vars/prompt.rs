//! `vars_prompt`: the play variables the user gives when the run starts (`-e`, a terminal, or
//! the prompt's `default`), asked for every play before any host is touched.

use crate::diag::Diagnostic;
use crate::playbook::{Playbook, VarPrompt};
use crate::template::Templar;
use serde_json::{json, Map, Value};
use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

/// Settle every `vars_prompt` of these playbooks into its play's `vars`. A variable given with
/// `-e` is not asked for (extra vars win anyway, as in ansible-core). On a terminal the user is
/// asked (an empty answer takes the `default`); without one the `default` is taken, and with
/// no default the run is refused before any host is touched (ansible-core would go on with
/// the text "None"; the README says so under `vars_prompt`).
pub fn settle(
    books: &mut [Playbook],
    extra_vars: &Map<String, Value>,
    templar: &Templar,
) -> Result<(), Diagnostic> {
    let tty = std::io::stdin().is_terminal();
    for book in books {
        for play in &mut book.plays {
            let mut answers = Map::new();
            for p in &play.vars_prompt {
                if extra_vars.contains_key(&p.name) {
                    continue;
                }
                let typed = if tty { ask(p)? } else { None };
                let value = match (typed, &p.default) {
                    (Some(v), _) if !v.is_empty() => v,
                    (_, Some(d)) => d.clone(),
                    (_, None) => {
                        return Err(Diagnostic::at(
                            &p.pos,
                            format!(
                                "`vars_prompt` asks for `{}`, but there is no terminal to ask \
                                 on and no `default`",
                                p.name
                            ),
                        )
                        .help(format!(
                            "give it on the command line (`-e {}=...`), add a `default`, or run \
                             on a terminal",
                            p.name
                        )))
                    }
                };
                answers.insert(p.name.clone(), encrypted(p, value, templar)?);
            }
            if !answers.is_empty() {
                Arc::make_mut(&mut play.vars).extend(answers);
            }
        }
    }
    Ok(())
}

/// `encrypt: <hash type>`: the answer hashed as `password_hash` does (with `salt` if given).
fn encrypted(p: &VarPrompt, value: String, templar: &Templar) -> Result<Value, Diagnostic> {
    let Some(kind) = &p.encrypt else {
        return Ok(Value::String(value));
    };
    let ctx = minijinja::Value::from_serialize(json!({"v": value, "k": kind, "s": p.salt}));
    let expr = if p.salt.is_some() {
        "{{ v | password_hash(k, s) }}"
    } else {
        "{{ v | password_hash(k) }}"
    };
    templar.render_str(expr, &ctx).map_err(|e| {
        Diagnostic::at(
            &p.pos,
            format!("cannot encrypt the answer for `{}`: {e}", p.name),
        )
    })
}

/// Ask on the terminal; `private` answers are not echoed; `confirm` asks twice until both agree.
fn ask(p: &VarPrompt) -> Result<Option<String>, Diagnostic> {
    let text = p
        .prompt
        .clone()
        .unwrap_or_else(|| format!("input for {}", p.name));
    let msg = match &p.default {
        Some(d) => format!("{text} [{d}]: "),
        None => format!("{text}: "),
    };
    loop {
        let first = answer(&msg, p.private).map_err(|e| io_err(p, e))?;
        if !p.confirm {
            return Ok(Some(first));
        }
        let second = answer(&format!("confirm {msg}"), p.private).map_err(|e| io_err(p, e))?;
        if first == second {
            return Ok(Some(first));
        }
        eprintln!("***** VALUES ENTERED DO NOT MATCH ****");
    }
}

fn io_err(p: &VarPrompt, e: std::io::Error) -> Diagnostic {
    Diagnostic::at(
        &p.pos,
        format!("cannot read the answer for `{}`: {e}", p.name),
    )
}

/// One line from stdin after `msg` on stderr, with echo off for a private answer: a private
/// answer needs a terminal, so it is never read from one that would show it.
fn answer(msg: &str, private: bool) -> std::io::Result<String> {
    if private && !std::io::stdin().is_terminal() {
        return Err(nix::errno::Errno::ENOTTY.into());
    }
    read_line(Some(msg), private)
}

/// One line from stdin, without its line end, after `prompt` on stderr when there is one; with
/// `hide`, not echoed when stdin is a terminal (its settings restored however the read ends).
/// `vars_prompt`, `pause`, and the vault and become passwords read through it.
pub fn read_line(prompt: Option<&str>, hide: bool) -> std::io::Result<String> {
    use nix::sys::termios::{tcgetattr, tcsetattr, LocalFlags, SetArg};
    let mut err = std::io::stderr();
    if let Some(p) = prompt {
        write!(err, "{p}")?;
        err.flush()?;
    }
    let stdin = std::io::stdin();
    let saved = if hide { tcgetattr(&stdin).ok() } else { None };
    if let Some(t) = &saved {
        let mut quiet = t.clone();
        quiet.local_flags.remove(LocalFlags::ECHO);
        let _ = tcsetattr(&stdin, SetArg::TCSANOW, &quiet);
    }
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    if let Some(t) = saved {
        let _ = tcsetattr(&stdin, SetArg::TCSANOW, &t);
        writeln!(err)?;
    }
    read?;
    Ok(line.trim_end_matches(['\n', '\r']).to_string())
}
