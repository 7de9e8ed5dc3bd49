//! Raw command-line arguments (clap); `config` turns them into a checked `Config`.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "fixpoint",
    version,
    about = "Idempotent reconciler for Ansible-style playbooks: probe, plan, apply only the difference"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply playbooks: probe every task's state, plan the difference, apply only that.
    Apply(RunArgs),
    /// Same as `apply --check --diff`: show what would change, change nothing.
    Check(RunArgs),
    /// Load and check playbooks (schema, guards, templates) without touching any host.
    Validate(ValidateArgs),
    /// On the host itself: fetch a playbook repository (git), verify it, run it locally under
    /// the host lock, report the result; or `--install-timer` to do that on a schedule.
    Pull(Box<crate::pull::PullArgs>),
    /// Show the resolved inventory.
    Inventory(InventoryArgs),
    /// Read and manage the on-host journal of `once:` steps.
    Journal(JournalArgs),
    /// Report files changed outside fixpoint since it last wrote them, on every host, changing
    /// nothing: the playbooks run as a check, and the journal's other records are compared
    /// too (exit 0: no drift, 3: drift found).
    Drift(DriftArgs),
    /// Print a shell completion script (e.g. `fixpoint completions bash > /etc/bash_completion.d/fixpoint`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print a JSON Schema for editors: of playbooks (default), task files, roles'
    /// `meta/main.yml`, or YAML inventories.
    Schema {
        #[arg(default_value = "playbook", value_parser = clap::builder::PossibleValuesParser::new(crate::schema::KINDS))]
        kind: String,
    },
    /// Print a manual page (roff): `fixpoint man | man -l -`, or one subcommand's page
    /// (`fixpoint man apply`).
    Man {
        /// The subcommand whose page to print (its options in full); without it, fixpoint(1).
        subcommand: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Playbook files to run, in order.
    #[arg(required = true)]
    pub playbooks: Vec<PathBuf>,
    #[command(flatten)]
    pub run: RunOptions,
    #[command(flatten)]
    pub change: ChangeOptions,
    #[command(flatten)]
    pub controller: ControllerOptions,
    #[command(flatten)]
    pub apply: ApplyOptions,
    #[command(flatten)]
    pub defaults: PlayDefaultArgs,
}

// The option structs below are flattened into the subcommands that take them, so each option
// is declared once. They carry no `///` line: clap would make it the subcommand's about text.

// What every run of playbooks takes: `apply`, `check`, `drift` and `pull`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct RunOptions {
    /// Inventory file or directory, or a comma-separated host list (`web1,web2:2222,`; one host:
    /// `web1,`); repeatable, each adding to the ones before; without it, the implicit host
    /// `localhost` on the local transport.
    #[arg(short = 'i', long = "inventory", value_name = "INVENTORY")]
    pub inventory: Vec<PathBuf>,
    /// Further limit the selected hosts with a pattern.
    #[arg(short = 'l', long = "limit")]
    pub limit: Option<String>,
    /// Show what changes: unified diffs for content, before → after for attributes.
    #[arg(short = 'D', long = "diff")]
    pub diff: bool,
    /// Extra variables (K=V, @file.yml or JSON); repeatable; highest precedence.
    #[arg(short = 'e', long = "extra-vars")]
    pub extra_vars: Vec<String>,
    /// Only run tasks with these tags.
    #[arg(short = 't', long = "tags", value_delimiter = ',')]
    pub tags: Vec<String>,
    /// Skip tasks with these tags.
    #[arg(long = "skip-tags", value_delimiter = ',')]
    pub skip_tags: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// More detail (repeatable).
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Seconds to wait when another run holds a host's lock (0: fail that host at once).
    #[arg(long = "lock-timeout", default_value_t = 0)]
    pub lock_timeout: u64,
    #[command(flatten)]
    pub vault: VaultArgs,
}

// Where the Ansible Vault secrets come from (`vault/secrets.rs` reads them): every command that
// loads playbooks, vars files or inventories takes them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct VaultArgs {
    /// A file holding the vault password, or an executable printing it (repeatable; also
    /// ANSIBLE_VAULT_PASSWORD_FILE).
    #[arg(
        long = "vault-password-file",
        alias = "vault-pass-file",
        value_name = "FILE"
    )]
    pub vault_password_file: Vec<PathBuf>,
    /// A vault identity, `[label@]FILE` or `[label@]prompt` (repeatable; also
    /// ANSIBLE_VAULT_IDENTITY_LIST).
    #[arg(long = "vault-id", value_name = "[LABEL@]SOURCE")]
    pub vault_id: Vec<String>,
    /// Ask for the vault password (terminal, or one line of stdin).
    #[arg(short = 'J', long = "ask-vault-pass", alias = "ask-vault-password")]
    pub ask_vault_pass: bool,
}

impl VaultArgs {
    pub fn options(&self) -> crate::vault::VaultOptions {
        crate::vault::VaultOptions {
            password_files: self.vault_password_file.clone(),
            vault_ids: self.vault_id.clone(),
            ask: self.ask_vault_pass,
        }
    }
}

// What a run that may change hosts takes: `apply`, `check` and `pull` (not `drift`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct ChangeOptions {
    /// Probe and plan only; change nothing.
    #[arg(short = 'C', long = "check")]
    pub check: bool,
    /// Run notified handlers even on hosts that failed (also ANSIBLE_FORCE_HANDLERS=true).
    #[arg(long = "force-handlers")]
    pub force_handlers: bool,
}

// What a run from this controller to its hosts takes: `apply`, `check` and `drift` (not
// `pull`, which runs on the host itself).
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct ControllerOptions {
    /// How many hosts to work on at once.
    #[arg(short = 'f', long = "forks", default_value_t = 50, value_parser = forks)]
    pub forks: usize,
    /// Seconds to wait for a connection (and for the agent to start); else ANSIBLE_TIMEOUT.
    #[arg(long, env = "ANSIBLE_TIMEOUT", default_value_t = 30)]
    pub timeout: u64,
    /// SSH handshakes in flight at once (default: 4 per core, at most 10; or FIXPOINT_CONNECT_CONCURRENCY);
    /// the other hosts wait for a slot, in order.
    #[arg(long = "connect-concurrency", value_name = "N")]
    pub connect_concurrency: Option<usize>,
    /// An ssh_config file to use instead of ~/.ssh/config.
    #[arg(long = "ssh-config")]
    pub ssh_config: Option<PathBuf>,
    /// Trust and record host keys of hosts not yet in known_hosts (changed keys are still refused).
    #[arg(long = "accept-new-host-keys")]
    pub accept_new_host_keys: bool,
    /// Ask for the sudo password once (read from the terminal, or from stdin when not a terminal).
    #[arg(short = 'K', long = "ask-become-pass")]
    pub ask_become_pass: bool,
    /// Directories to search for roles after roles/ beside the playbook (colon-separated);
    /// ANSIBLE_ROLES_PATH is searched after them.
    #[arg(long = "roles-path")]
    pub roles_path: Vec<String>,
    /// No live status lines per host, even on a terminal (they are never shown when stdout is
    /// not a terminal, with --format json, NO_COLOR or TERM=dumb).
    #[arg(long = "no-progress")]
    pub no_progress: bool,
    /// One request per task, every host finishing a task before any starts the next, as
    /// before pipelining: to compare a run with and without it, or to rule it out when
    /// something looks wrong (README, "Pipelining").
    #[arg(long = "no-pipelining", env = "FIXPOINT_NO_PIPELINING")]
    pub no_pipelining: bool,
}

// What a play does where neither its keywords nor a connection variable say otherwise:
// ansible-playbook's `-b`, `--become-user`, `--become-method`, `-u` and `-c`, which set the
// defaults of the `become`, `become_user`, `become_method`, `remote_user` and `connection`
// keywords (connection/spec.rs reads them last). `apply`, `check`, `drift` and `validate` take
// them; `pull` does not (ansible-pull has no `-b`, and it runs on this host).
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct PlayDefaultArgs {
    /// Become (sudo) on every task whose play, block or task says nothing of `become` (and no
    /// `ansible_become` variable does).
    #[arg(short = 'b', long = "become")]
    pub become_: bool,
    /// The user to become where no `become_user` keyword or `ansible_become_user` names one
    /// (default root).
    #[arg(long = "become-user", value_name = "USER")]
    pub become_user: Option<String>,
    /// How to become where no `become_method` keyword or variable says: `sudo` (the default)
    /// or `su`.
    #[arg(long = "become-method", value_name = "METHOD", value_parser = become_method)]
    pub become_method: Option<String>,
    /// Connect as this user where no `remote_user` keyword or `ansible_user` names one (ssh;
    /// default: ssh_config's, else the local user).
    #[arg(short = 'u', long = "user", value_name = "REMOTE_USER")]
    pub remote_user: Option<String>,
    /// The connection where no `connection` keyword or `ansible_connection` names one: `ssh`
    /// (the default; `smart` and `paramiko` mean it too) or `local`.
    #[arg(short = 'c', long = "connection", value_name = "CONNECTION", value_parser = connection)]
    pub connection: Option<String>,
}

/// `--become-method`: the methods the `become_method` keyword takes (playbook/keywords.rs),
/// refused with the same words.
fn become_method(s: &str) -> Result<String, String> {
    if crate::playbook::known_become_method(s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "become_method `{s}` is not supported by fixpoint; it becomes through sudo or su: \
             use --become-method sudo (or leave it out) or --become-method su"
        ))
    }
}

/// `--connection`: the connections the `connection` keyword takes (playbook/keywords.rs).
fn connection(s: &str) -> Result<String, String> {
    if crate::playbook::known_connection(s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "connection `{s}` is not supported by fixpoint; it connects with `ssh` or `local`: \
             use -c ssh or -c local (or leave it out)"
        ))
    }
}

/// `--forks`: a whole number of hosts, at least 1 (clap's own message would not say what to
/// write instead).
fn forks(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "`{s}` is not a number of hosts to work on at once; write a whole number of at least 1, e.g. --forks 10"
        )),
    }
}

// What only `apply` and `check` take; `drift` runs with the defaults.
#[derive(Debug, Clone, Default, Args)]
pub struct ApplyOptions {
    /// Apply, then apply again; exit 3 if the second pass changed anything.
    #[arg(long)]
    pub twice: bool,
    /// List the tasks each play would run (after --tags/--skip-tags), and exit.
    #[arg(long = "list-tasks")]
    pub list_tasks: bool,
    /// List the hosts each play would run on (after --limit), and exit.
    #[arg(long = "list-hosts")]
    pub list_hosts: bool,
    /// List the tags of each play's tasks, and exit.
    #[arg(long = "list-tags")]
    pub list_tags: bool,
    /// Check the playbooks as `fixpoint validate` does, and exit.
    #[arg(long = "syntax-check")]
    pub syntax_check: bool,
    /// Skip the tasks before the first one with this name (or `role : name`; or matching it as a glob).
    #[arg(long = "start-at-task", value_name = "NAME")]
    pub start_at_task: Option<String>,
    /// Run only this shard's hosts, one of COUNT controllers splitting the inventory (the
    /// index counts from 0: `--shard "$JOB_COMPLETION_INDEX/8"`); applied after --limit.
    #[arg(long, value_name = "INDEX/COUNT", env = "FIXPOINT_SHARD")]
    pub shard: Option<crate::inventory::Shard>,
    /// Under --shard, run plays that need the whole fleet (run_once, serial percentages,
    /// cross-host hostvars, delegate_to) with their per-shard meaning (docs/fleet.md).
    #[arg(long = "shard-allow-cross")]
    pub shard_allow_cross: bool,
}

#[derive(Debug, Args)]
// Drift's own wording where the shared one would mislead: it never applies the diffs.
// `-b` without playbooks has the meaning of `journal -b`.
#[command(
    mut_arg("diff", |a| a.help("Show the diffs a run would apply")),
    mut_arg("become_", |a| a.help("Become on every task whose play, block or task says nothing \
        of `become` (as `apply -b`); without playbooks: read the become user's journal (root by \
        default), where `become: true` tasks record")),
)]
pub struct DriftArgs {
    /// Playbooks to check (their tasks' files are compared, with what a run would change);
    /// without any, only the journal's records are compared.
    pub playbooks: Vec<PathBuf>,
    #[command(flatten)]
    pub run: RunOptions,
    #[command(flatten)]
    pub controller: ControllerOptions,
    #[command(flatten)]
    pub defaults: PlayDefaultArgs,
}

impl DriftArgs {
    /// The check run of `fixpoint drift PLAYBOOK...`, as `fixpoint check` would parse it.
    pub fn into_run_args(self) -> RunArgs {
        RunArgs {
            playbooks: self.playbooks,
            run: self.run,
            change: ChangeOptions {
                check: true,
                ..ChangeOptions::default()
            },
            controller: self.controller,
            apply: ApplyOptions::default(),
            defaults: self.defaults,
        }
    }

    /// `fixpoint drift` without playbooks: `fixpoint journal drift` on the selected hosts.
    pub fn into_journal_args(self) -> JournalArgs {
        let run = self.run;
        JournalArgs {
            inventory: run.inventory,
            host: run.limit,
            ssh_config: self.controller.ssh_config,
            accept_new_host_keys: self.controller.accept_new_host_keys,
            become_: self.defaults.become_,
            lock_timeout: run.lock_timeout,
            format: run.format,
            extra_vars: run.extra_vars,
            action: JournalAction::Drift,
        }
    }
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[arg(required = true)]
    pub playbooks: Vec<PathBuf>,
    /// Directories to search for roles (as for `apply`).
    #[arg(long = "roles-path")]
    pub roles_path: Vec<String>,
    /// Inventory sources (as for `apply`: files, directories, host lists; repeatable).
    #[arg(short = 'i', long = "inventory", value_name = "INVENTORY")]
    pub inventory: Vec<PathBuf>,
    #[arg(short = 'e', long = "extra-vars")]
    pub extra_vars: Vec<String>,
    #[command(flatten)]
    pub defaults: PlayDefaultArgs,
    /// List the modules the playbooks use: native, or Ansible's Python code (and where found).
    #[arg(long)]
    pub modules: bool,
    /// `-v`: also list the modules (as `--modules`).
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(flatten)]
    pub vault: VaultArgs,
}

#[derive(Debug, Args)]
pub struct InventoryArgs {
    /// Inventory file or directory, or a comma-separated host list (`web1,web2,`); repeatable,
    /// each adding to the ones before.
    #[arg(
        short = 'i',
        long = "inventory",
        required = true,
        value_name = "INVENTORY"
    )]
    pub inventory: Vec<PathBuf>,
    /// Print all hosts and groups as JSON (like ansible-inventory --list).
    #[arg(long, group = "what")]
    pub list: bool,
    /// Print the group tree.
    #[arg(long, group = "what")]
    pub graph: bool,
    /// Print one host's variables as JSON.
    #[arg(long, group = "what")]
    pub host: Option<String>,
    #[command(flatten)]
    pub vault: VaultArgs,
}

#[derive(Debug, Args)]
pub struct JournalArgs {
    /// Inventory (as for `apply`: files, directories, host lists; repeatable); without it, the
    /// implicit `localhost`.
    #[arg(
        short = 'i',
        long = "inventory",
        global = true,
        value_name = "INVENTORY"
    )]
    pub inventory: Vec<PathBuf>,
    /// Hosts to act on (a pattern; default all).
    #[arg(long = "host", global = true)]
    pub host: Option<String>,
    #[arg(long = "ssh-config", global = true)]
    pub ssh_config: Option<PathBuf>,
    #[arg(long = "accept-new-host-keys", global = true)]
    pub accept_new_host_keys: bool,
    /// Use the state directory of the become user (root by default), where `become: true` steps record.
    #[arg(short = 'b', long = "become", global = true)]
    pub become_: bool,
    /// Seconds to wait for a running playbook's host lock.
    #[arg(long = "lock-timeout", default_value_t = 0, global = true)]
    pub lock_timeout: u64,
    #[arg(long, value_enum, default_value = "text", global = true)]
    pub format: Format,
    /// Extra variables (e.g. `-e fixpoint_state_dir=/path`).
    #[arg(short = 'e', long = "extra-vars", global = true)]
    pub extra_vars: Vec<String>,
    #[command(subcommand)]
    pub action: JournalAction,
}

#[derive(Debug, Subcommand)]
pub enum JournalAction {
    /// List the records (key, playbook, status, times).
    List,
    /// Show the records of one key, with their stored results.
    Show { key: String },
    /// Settle an in-doubt key: `--done` (the effect happened) or `--retry` (run it again).
    Resolve {
        /// `resolve <host> <key>`, or `resolve <key>` with --host.
        #[arg(num_args = 1..=2, required = true)]
        args: Vec<String>,
        #[arg(long, conflicts_with = "retry", required_unless_present = "retry")]
        done: bool,
        #[arg(long)]
        retry: bool,
    },
    /// Compare every written-file record with its file now: what changed outside fixpoint
    /// (exit 3 when something did), as `fixpoint drift` without playbooks.
    Drift,
    /// Remove records older than the retention.
    Prune {
        #[arg(long, default_value_t = 90)]
        days: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every option of `T` given a value other than its default, as `apply` spells it.
    fn every_option<T: Args>(argv: &[&str]) -> Vec<String> {
        let cmd = T::augment_args(clap::Command::new("t"));
        for arg in cmd.get_arguments() {
            let given = argv.iter().any(|w| {
                arg.get_long().is_some_and(|l| *w == format!("--{l}"))
                    || arg.get_short().is_some_and(|s| *w == format!("-{s}"))
            });
            assert!(given, "the test gives no value to --{}", arg.get_id());
        }
        argv.iter().map(|w| w.to_string()).collect()
    }

    fn parse(argv: &[String]) -> Command {
        let argv = ["fixpoint"]
            .into_iter()
            .map(String::from)
            .chain(argv.iter().cloned());
        Cli::try_parse_from(argv)
            .unwrap_or_else(|e| panic!("{e}"))
            .command
    }

    fn line(parts: &[&[String]]) -> Vec<String> {
        parts.concat()
    }

    #[test]
    fn drift_and_pull_take_the_shared_options_as_apply_does() {
        let run = every_option::<RunOptions>(&[
            "-i",
            "inv",
            "-l",
            "web",
            "-D",
            "-e",
            "a=1",
            "-t",
            "x,y",
            "--skip-tags",
            "z",
            "--format",
            "json",
            "-v",
            "-v",
            "--lock-timeout",
            "7",
            "--vault-password-file",
            "pw",
            "--vault-id",
            "prod@pw2",
            "-J",
        ]);
        let change = every_option::<ChangeOptions>(&["--check", "--force-handlers"]);
        let controller = every_option::<ControllerOptions>(&[
            "-f",
            "3",
            "--timeout",
            "9",
            "--connect-concurrency",
            "2",
            "--ssh-config",
            "cfg",
            "--accept-new-host-keys",
            "-K",
            "--roles-path",
            "r",
            "--no-progress",
            "--no-pipelining",
        ]);
        let words = |w: &[&str]| -> Vec<String> { w.iter().map(|s| s.to_string()).collect() };
        let book = words(&["site.yml"]);
        let Command::Apply(apply) = parse(&line(&[
            &words(&["apply"]),
            &run,
            &change,
            &controller,
            &book,
        ])) else {
            panic!("not apply")
        };
        assert_eq!(apply.run.lock_timeout, 7);
        assert!(apply.change.force_handlers && apply.controller.no_progress);

        let Command::Drift(drift) = parse(&line(&[&words(&["drift"]), &run, &controller, &book]))
        else {
            panic!("not drift")
        };
        assert_eq!(drift.run, apply.run);
        assert_eq!(drift.controller, apply.controller);
        let as_run = drift.into_run_args();
        assert!(as_run.change.check && !as_run.change.force_handlers);

        let Command::Pull(pull) = parse(&line(&[&words(&["pull", "-U", "u"]), &run, &change]))
        else {
            panic!("not pull")
        };
        assert_eq!(pull.run, apply.run);
        assert_eq!(pull.change, apply.change);

        // What a subcommand does not share it refuses: a drift changes nothing, and a pull
        // connects to no other host.
        for (sub, opt) in [
            (&["drift"][..], "--force-handlers"),
            (&["drift"][..], "--twice"),
            (&["pull", "-U", "u"][..], "--forks=2"),
            (&["pull", "-U", "u"][..], "--shard=0/2"),
        ] {
            let argv = ["fixpoint"].iter().chain(sub).chain([&opt, &"site.yml"]);
            assert!(Cli::try_parse_from(argv).is_err(), "{sub:?} took {opt}");
        }
    }

    #[test]
    fn play_defaults_and_inventory_sources_are_shared_by_every_run_of_playbooks() {
        let defaults = every_option::<PlayDefaultArgs>(&[
            "-b",
            "--become-user",
            "deploy",
            "--become-method",
            "su",
            "-u",
            "bob",
            "-c",
            "local",
        ]);
        let sources = ["-i", "hosts", "-i", "web1,web2:2222,"].map(String::from);
        let want_sources: Vec<PathBuf> = ["hosts", "web1,web2:2222,"].map(PathBuf::from).into();
        for sub in ["apply", "check", "drift", "validate"] {
            let argv = line(&[
                &[sub.to_string()],
                &sources,
                &defaults,
                &["site.yml".into()],
            ]);
            let (got, inventory) = match parse(&argv) {
                Command::Apply(a) | Command::Check(a) => (a.defaults, a.run.inventory),
                Command::Drift(d) => (d.defaults, d.run.inventory),
                Command::Validate(v) => (v.defaults, v.inventory),
                other => panic!("{other:?}"),
            };
            assert_eq!(inventory, want_sources, "{sub}");
            assert!(got.become_, "{sub}");
            assert_eq!(
                [
                    got.become_user,
                    got.become_method,
                    got.remote_user,
                    got.connection
                ],
                [Some("deploy"), Some("su"), Some("bob"), Some("local")]
                    .map(|v| v.map(String::from)),
                "{sub}"
            );
        }
        // `drift -b` without playbooks reads the become user's journal, as `journal -b` does.
        let Command::Drift(drift) = parse(&["drift".into(), "-b".into()]) else {
            panic!("not drift")
        };
        assert!(drift.into_journal_args().become_);
        // `inventory` and `journal` take several sources too.
        let Command::Inventory(inv) = parse(&line(&[&["inventory".into()], &sources])) else {
            panic!("not inventory")
        };
        assert_eq!(inv.inventory, want_sources);

        // A method or connection fixpoint lacks is refused as the keywords refuse it; a pull
        // (ansible-pull has no -b) takes none of these.
        for (argv, says) in [
            (
                &["apply", "--become-method", "doas"][..],
                "become_method `doas` is not supported",
            ),
            (
                &["apply", "-c", "winrm"][..],
                "connection `winrm` is not supported",
            ),
            (&["pull", "-U", "u", "-b"][..], "-b"),
        ] {
            let e = Cli::try_parse_from(["fixpoint"].iter().chain(argv).chain(&["site.yml"]))
                .unwrap_err();
            assert_eq!(e.exit_code(), 2, "{argv:?}");
            assert!(e.to_string().contains(says), "{argv:?}: {e}");
        }
    }
}
