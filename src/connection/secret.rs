//! `Secret`: a password on its way to the host (the `-K` answer, `ansible_become_password`).
//!
//! Its `Debug` and `Display` print a placeholder and it has no `Serialize`, so a type that holds
//! one can derive `Debug`, be logged or be put in an error without showing the password. The one
//! place that needs the text, writing it to the host's sudo, asks for it with `expose`.

use std::fmt;

#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    pub fn new(text: impl Into<String>) -> Secret {
        Secret(text.into())
    }

    /// The password itself: only for handing it to the host, never for showing it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connection::{ConnKind, ConnSpec};
    use std::time::Duration;

    const PW: &str = "hunter2-pw";

    #[test]
    fn debug_and_display_never_show_the_text() {
        let s = Secret::new(PW);
        let shown = format!("{s:?} {s:#?} {s} {:?}", Some(s.clone()));
        assert!(!shown.contains(PW), "{shown}");
        assert_eq!(s.expose(), PW);
    }

    #[test]
    fn a_spec_and_a_config_with_a_password_debug_print_without_it() {
        let spec = ConnSpec {
            host: "h".into(),
            kind: ConnKind::Local,
            become_user: Some("root".into()),
            become_password: Some(Secret::new(PW)),
            become_method: crate::connection::BecomeMethod::Sudo,
            become_exe: None,
            become_flags: Vec::new(),
            agent_path: None,
            state_dir: None,
            connect_timeout: Duration::from_secs(1),
        };
        let shown = format!("{spec:?} {spec:#?}");
        assert!(!shown.contains(PW), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");

        use clap::Parser;
        let crate::cli::Command::Apply(args) =
            crate::cli::Cli::parse_from(["fixpoint", "apply", "site.yml"]).command
        else {
            unreachable!("parsed an apply command")
        };
        let mut cfg = crate::config::Config::from_run_args(args, false).unwrap();
        cfg.become_password = Some(Secret::new(PW));
        let shown = format!("{cfg:?} {cfg:#?}");
        assert!(!shown.contains(PW), "{shown}");
    }
}
