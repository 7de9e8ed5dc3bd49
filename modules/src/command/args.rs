//! The command line of `command` and `shell`: the task's environment as pairs, and `~`/`$VAR`
//! expansion and shell-words splitting of the arguments, as Ansible's command module does them.

use crate::fs::expand_user_with;
use crate::ModuleError;
use serde_json::{Map, Value};

/// `_env` as name/value pairs; scalars become strings the way Python's `str()` spells them.
pub(crate) fn env_pairs(
    env: &Option<Map<String, Value>>,
) -> Result<Vec<(String, String)>, ModuleError> {
    let Some(env) = env else {
        return Ok(Vec::new());
    };
    env.iter()
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => if *b { "True" } else { "False" }.to_string(),
                Value::Null => String::new(),
                other => {
                    return Err(ModuleError::Params(format!(
                        "environment variable `{k}` must be a string, found {other}"
                    )))
                }
            };
            if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
                return Err(ModuleError::Params(format!(
                    "environment variable `{k}` has an invalid name or value"
                )));
            }
            Ok((k.clone(), v))
        })
        .collect()
}

/// Variable lookup for expansion: `_env` first, then the agent's own environment.
pub(super) struct EnvLookup<'a>(pub(super) &'a [(String, String)]);

impl EnvLookup<'_> {
    pub(super) fn get(&self, name: &str) -> Option<String> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var(name).ok())
    }
}

/// Python's `os.path.expandvars`: `$name` and `${name}` replaced when set, left as written otherwise.
pub(super) fn expand_vars(s: &str, env: &EnvLookup) -> String {
    if !s.contains('$') {
        return s.to_string();
    }
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| {
        regex::Regex::new(r"\$([A-Za-z0-9_]+|\{[^}]*\})").expect("a valid pattern")
    });
    re.replace_all(s, |c: &regex::Captures| {
        let name = c[1].trim_start_matches('{').trim_end_matches('}');
        env.get(name).unwrap_or_else(|| c[0].to_string())
    })
    .into_owned()
}

/// Ansible's `type='path'` parameters (`chdir`, `creates`, `removes`), and `argv` words with
/// `expand_argument_vars`, get `$VAR` and then `~` expanded, `$HOME` included, from the task's
/// `environment` first.
pub(super) fn expand_path(s: &str, env: &EnvLookup) -> String {
    expand_user_with(&expand_vars(s, env), || env.get("HOME").map(Into::into))
        .to_string_lossy()
        .into_owned()
}

/// Split a command line as Python's `shlex.split` does (which Ansible uses). The shlex crate
/// treats `#` at the start of a word as a comment and does not count `\r` as blank; Python's
/// `shlex.split` does neither thing, so both are adjusted before splitting.
pub(crate) fn split_command(s: &str) -> Option<Vec<String>> {
    let mut prepared = String::with_capacity(s.len() + 4);
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut at_word_start = true;
    for c in s.chars() {
        if escaped {
            prepared.push(c);
            escaped = false;
            at_word_start = false;
            continue;
        }
        match quote {
            Some(q) => {
                if c == q {
                    quote = None;
                } else if c == '\\' && q == '"' {
                    escaped = true;
                }
                prepared.push(c);
            }
            None => match c {
                '\\' => {
                    escaped = true;
                    prepared.push(c);
                    at_word_start = false;
                }
                '\'' | '"' => {
                    quote = Some(c);
                    prepared.push(c);
                    at_word_start = false;
                }
                ' ' | '\t' | '\n' | '\r' => {
                    prepared.push(if c == '\r' { ' ' } else { c });
                    at_word_start = true;
                }
                '#' if at_word_start => {
                    prepared.push_str("\\#");
                    at_word_start = false;
                }
                _ => {
                    prepared.push(c);
                    at_word_start = false;
                }
            },
        }
    }
    shlex::split(&prepared)
}
