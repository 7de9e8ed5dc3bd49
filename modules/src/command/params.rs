//! Parameters of `command` and `shell`, spelled as in Ansible.

use crate::params::{de_opt_string, Bool, StringList};
use serde::Deserialize;
use serde_json::{Map, Value};

fn yes() -> Bool {
    Bool(true)
}

/// Parameters of `command`. (`shell` has its own struct: serde cannot combine `flatten` with
/// `deny_unknown_fields`, so the common fields are repeated.)
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The command line; the controller turns the free form (`command: ls -l`) into this.
    #[serde(default, alias = "_raw_params", deserialize_with = "de_opt_string")]
    pub cmd: Option<String>,
    /// The program and its arguments as a list, for arguments that would need quoting.
    #[serde(default)]
    pub argv: Option<StringList>,
    /// Expand `~` and `$VARS` in the arguments, as Ansible's command does by default.
    #[serde(default = "yes")]
    pub expand_argument_vars: Bool,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub chdir: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub stdin: Option<String>,
    #[serde(default = "yes")]
    pub stdin_add_newline: Bool,
    #[serde(default = "yes")]
    pub strip_empty_ends: Bool,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub creates: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub removes: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub unless: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub onlyif: Option<String>,
    /// Accepted and ignored, as ansible-core's command does since 2.4 (it warns and runs the
    /// program directly): playbooks written for older Ansible still carry it.
    #[serde(default, deserialize_with = "de_opt_string")]
    pub executable: Option<String>,
    /// Environment from the play/task `environment`, passed by the controller.
    #[serde(default, rename = "_env")]
    pub env: Option<Map<String, Value>>,
}

/// Parameters of `shell`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShellParams {
    /// The shell script; the controller turns the free form (`shell: a | b`) into this.
    #[serde(default, alias = "_raw_params", deserialize_with = "de_opt_string")]
    pub cmd: Option<String>,
    /// The shell that runs `cmd` (and the `unless`/`onlyif` guards) with `-c`.
    #[serde(default, deserialize_with = "de_opt_string")]
    pub executable: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub chdir: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub stdin: Option<String>,
    #[serde(default = "yes")]
    pub stdin_add_newline: Bool,
    #[serde(default = "yes")]
    pub strip_empty_ends: Bool,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub creates: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub removes: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub unless: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub onlyif: Option<String>,
    #[serde(default, rename = "_env")]
    pub env: Option<Map<String, Value>>,
}
