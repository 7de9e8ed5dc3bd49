//! The command line of `fixpoint pull`: ansible-pull's options (`-U`, `-C`, `-d`, `-i`, `-o`,
//! `--verify-commit`, `--check`...), fixpoint's result and timer options, and the run options
//! of `apply` that make sense on the host itself.

use crate::cli::{ChangeOptions, Format, RunOptions};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Clone, Args)]
// The shared run options in a pull's words: it runs in the checkout, on this host; and `-C` is
// ansible-pull's `--checkout`, so `--check` has no short form here.
#[command(
    mut_arg("inventory", |a| a.help("Inventory file or directory, relative to the checkout, or a \
        comma-separated host list (repeatable); without it, `localhost` on the local transport")),
    mut_arg("limit", |a| a.help("Further limit the selected hosts (default with `-i`: this host's \
        names and localhost)")),
    mut_arg("diff", |a| a.help("Show what changes")),
    mut_arg("extra_vars", |a| a.help("Extra variables (K=V, @file.yml or JSON); repeatable")),
    mut_arg("format", |a| a.help("Output format on stdout")),
    mut_arg("lock_timeout", |a| a.help("Seconds to wait when another run (a push, another pull) \
        holds the host's lock")),
    mut_arg("check", |a| a.short(None)),
)]
pub struct PullArgs {
    /// The playbook repository: a git URL (`https://`, `git://`, `ssh://`, `file://`, a path) or
    /// a `git bundle` file.
    #[arg(short = 'U', long = "url", required_unless_present = "uninstall_timer")]
    pub url: Option<String>,
    /// The branch, tag or commit to check out (default: the repository's HEAD).
    #[arg(short = 'C', long = "checkout", value_name = "REF")]
    pub checkout: Option<String>,
    /// Where the repository is checked out (default: `<state dir>/pull/checkout`, i.e.
    /// /var/lib/fixpoint/pull/checkout for root).
    #[arg(short = 'd', long = "directory", value_name = "DIR")]
    pub directory: Option<PathBuf>,
    /// Fetch the whole history instead of only the wanted commit.
    #[arg(long)]
    pub full: bool,
    /// The playbook to run, relative to the checkout (repeatable); without it, the first of
    /// `<fqdn>.yml`, `<hostname>.yml`, `local.yml` that the checkout has.
    #[arg(short = 'p', long = "playbook")]
    pub playbook: Vec<PathBuf>,
    /// Playbooks, as ansible-pull takes them (the same as `-p`).
    #[arg(value_name = "PLAYBOOK")]
    pub playbooks: Vec<PathBuf>,
    /// Run only a commit whose signature verifies against `--keyring` (GPG) or
    /// `--allowed-signers` (SSH); refuse anything else.
    #[arg(long = "verify-commit")]
    pub verify_commit: bool,
    /// GPG public keys (exported, armored or binary) that may sign the commit.
    #[arg(long, requires = "verify_commit")]
    pub keyring: Option<PathBuf>,
    /// An SSH allowed-signers file (git's `gpg.ssh.allowedSignersFile`) of keys that may sign.
    #[arg(long = "allowed-signers", requires = "verify_commit")]
    pub allowed_signers: Option<PathBuf>,
    /// Skip the run when the commit and the inputs are those of the last successful run.
    #[arg(short = 'o', long = "only-if-changed")]
    pub only_if_changed: bool,
    /// With `--only-if-changed`: run anyway once the last successful run is this old (`1h`,
    /// `30min`, `1d`).
    #[arg(long = "max-age", value_name = "DURATION", requires = "only_if_changed", value_parser = parse_duration)]
    pub max_age: Option<std::time::Duration>,
    /// Write the run's JSON events (as `--format json` prints them, then a `pull` event) to this
    /// file, atomically.
    #[arg(long = "result-file", value_name = "FILE")]
    pub result_file: Option<PathBuf>,
    /// POST the same JSON to this URL (retried with backoff; one `Idempotency-Key` per run).
    #[arg(long = "result-url", value_name = "URL")]
    pub result_url: Option<String>,
    /// How many times the POST is tried before giving up.
    #[arg(long = "result-attempts", default_value_t = 5, value_name = "N")]
    pub result_attempts: u32,
    #[command(flatten)]
    pub run: RunOptions,
    #[command(flatten)]
    pub change: ChangeOptions,
    /// Instead of pulling now, install a systemd timer (or, without systemd, a cron.d entry)
    /// that runs this same pull command.
    #[arg(long = "install-timer", conflicts_with = "uninstall_timer")]
    pub install_timer: bool,
    /// Stop and remove what `--install-timer` installed.
    #[arg(long = "uninstall-timer")]
    pub uninstall_timer: bool,
    /// How often the timer runs the pull.
    #[arg(long, default_value = "15min", value_parser = parse_duration, requires = "install_timer")]
    pub interval: std::time::Duration,
    /// A random delay of up to this much before each run, so a fleet does not pull at once.
    #[arg(long, default_value = "5min", value_parser = parse_duration, requires = "install_timer")]
    pub splay: std::time::Duration,
    /// A systemd calendar expression (`OnCalendar=`, e.g. `hourly`) instead of `--interval`.
    #[arg(long = "on-calendar", value_name = "SPEC", requires = "install_timer")]
    pub on_calendar: Option<String>,
}

/// `15min`, `1h`, `30s`, `1d` (humantime's units, which systemd's time spans also read).
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(s.trim()).map_err(|e| {
        format!("`{s}` is not a duration ({e}); write a number and a unit: 30s, 15min, 2h, 1d")
    })
}

impl PullArgs {
    /// The playbooks named on the command line, `-p` ones first.
    pub fn named_playbooks(&self) -> Vec<PathBuf> {
        self.playbook
            .iter()
            .chain(&self.playbooks)
            .cloned()
            .collect()
    }

    /// This pull's own arguments written back as a command line (without the timer options):
    /// what the timer's service or the cron entry runs.
    pub fn pull_argv(&self) -> Vec<String> {
        let mut v: Vec<String> = vec!["pull".into()];
        let mut opt = |flag: &str, value: Option<String>| {
            if let Some(value) = value {
                v.push(flag.to_string());
                v.push(value);
            }
        };
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        opt("--url", self.url.clone());
        opt("--checkout", self.checkout.clone());
        opt("--directory", path(&self.directory));
        for i in &self.run.inventory {
            opt("--inventory", Some(i.display().to_string()));
        }
        for p in self.named_playbooks() {
            opt("--playbook", Some(p.display().to_string()));
        }
        opt("--keyring", path(&self.keyring));
        opt("--allowed-signers", path(&self.allowed_signers));
        opt(
            "--max-age",
            self.max_age
                .map(|d| humantime::format_duration(d).to_string()),
        );
        opt("--result-file", path(&self.result_file));
        opt("--result-url", self.result_url.clone());
        if self.result_attempts != 5 {
            opt("--result-attempts", Some(self.result_attempts.to_string()));
        }
        opt("--limit", self.run.limit.clone());
        // The vault secrets' sources, absolute: the scheduled run starts elsewhere. A prompt
        // (`--ask-vault-pass`) has no terminal there, so it is not carried over.
        let abs = |p: &PathBuf| std::path::absolute(p).unwrap_or_else(|_| p.clone());
        for f in &self.run.vault.vault_password_file {
            opt("--vault-password-file", Some(abs(f).display().to_string()));
        }
        for id in &self.run.vault.vault_id {
            let id = match id.split_once('@') {
                Some((label, src)) if src != "prompt" => {
                    format!("{label}@{}", abs(&PathBuf::from(src)).display())
                }
                _ => id.clone(),
            };
            opt("--vault-id", Some(id));
        }
        for (on, flag) in [
            (self.full, "--full"),
            (self.verify_commit, "--verify-commit"),
            (self.only_if_changed, "--only-if-changed"),
        ] {
            if on {
                v.push(flag.into());
            }
        }
        v.extend(self.run_options());
        v
    }

    /// The run options a pull shares with `apply`, as `apply` spells them: the scheduled pull's
    /// command line and the run's configuration are both made from them.
    pub fn run_options(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for e in &self.run.extra_vars {
            v.extend(["--extra-vars".into(), e.clone()]);
        }
        if !self.run.tags.is_empty() {
            v.extend(["--tags".into(), self.run.tags.join(",")]);
        }
        if !self.run.skip_tags.is_empty() {
            v.extend(["--skip-tags".into(), self.run.skip_tags.join(",")]);
        }
        if self.run.lock_timeout != 0 {
            v.extend(["--lock-timeout".into(), self.run.lock_timeout.to_string()]);
        }
        if self.run.format == Format::Json {
            v.extend(["--format".into(), "json".into()]);
        }
        for (on, flag) in [
            (self.change.check, "--check"),
            (self.run.diff, "--diff"),
            (self.change.force_handlers, "--force-handlers"),
        ] {
            if on {
                v.push(flag.into());
            }
        }
        for _ in 0..self.run.verbose {
            v.push("-v".into());
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use crate::cli::{Cli, Command};
    use clap::Parser;
    use std::path::PathBuf;

    fn parse(argv: &[&str]) -> super::PullArgs {
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Pull(a) => *a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_scheduled_command_line_says_the_same_pull() {
        let a = parse(&[
            "fixpoint",
            "pull",
            "-U",
            "file:///r.git",
            "-C",
            "main",
            "-p",
            "site.yml",
            "--install-timer",
            "--interval",
            "1h",
            "-o",
            "--max-age",
            "1d",
            "-e",
            "x=1 y=2",
            "-t",
            "a,b",
            "--check",
            "-v",
            "--lock-timeout",
            "30",
            "--vault-password-file",
            "/etc/vault-pass",
            "--vault-id",
            "prod@/etc/prod-pass",
            "-i",
            "hosts",
            "-i",
            "web1,web2,",
        ]);
        let mut argv = vec!["fixpoint".to_string()];
        argv.extend(a.pull_argv());
        assert!(!argv
            .iter()
            .any(|w| w.contains("interval") || w.contains("timer")));
        let b = parse(&argv.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(
            format!("{:?}", b.pull_argv()),
            format!("{:?}", a.pull_argv())
        );
        assert_eq!(b.run.extra_vars, ["x=1 y=2"]);
        assert_eq!(
            b.run.vault.vault_password_file,
            [PathBuf::from("/etc/vault-pass")]
        );
        assert_eq!(b.run.vault.vault_id, ["prod@/etc/prod-pass"]);
        assert_eq!(b.run.inventory, ["hosts", "web1,web2,"].map(PathBuf::from));
        assert_eq!(b.max_age, Some(std::time::Duration::from_secs(86400)));
        assert!(
            b.change.check && b.only_if_changed && b.run.verbose == 1 && b.run.lock_timeout == 30
        );
    }
}
