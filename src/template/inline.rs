//! The engine's template strings compiled once per run: the same strings (task parameters,
//! variables written as templates) are rendered for every task on every host, and compiling
//! one cost more than rendering it (issue 13). Each is kept under its own text as its name.

use super::rewrite::rewrite_chains;
use minijinja::{Environment, Error, Template};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// Longer template strings are compiled for each render, not kept.
const MAX_SOURCE: usize = 64 * 1024;

/// An environment like the templar's own whose loader knows the template strings rendered so
/// far, each under its text: `get_template` compiles one the first time and keeps it (in
/// minijinja's store, for the environment's life). Any other name is not found, as in the
/// templar's own environment, so an `{% include %}` in a template string fails as it did.
pub(super) struct Inline {
    env: Environment<'static>,
    known: Arc<Mutex<HashSet<String>>>,
    /// Each template string rendered so far, with its code (`rewrite_chains`): rewriting
    /// costs about as much as rendering a short string, and the same strings come back for
    /// every host.
    codes: Mutex<HashMap<String, Arc<str>>>,
}

impl Inline {
    pub(super) fn new(base: &Environment<'static>) -> Inline {
        let known: Arc<Mutex<HashSet<String>>> = Arc::default();
        let mut env = base.clone();
        let loader_known = known.clone();
        env.set_loader(move |name| {
            // Locked only to look up or insert a string: nothing under it can panic.
            let known = loader_known.lock().expect("inline template sources");
            Ok(known.contains(name).then(|| name.to_string()))
        });
        Inline {
            env,
            known,
            codes: Mutex::default(),
        }
    }

    /// The code of template string `text` (`rewrite_chains`) and its compiled template, named
    /// by the code (None: too long to keep).
    pub(super) fn get(&self, text: &str) -> Option<(Arc<str>, Result<Template<'_, '_>, Error>)> {
        if text.len() > MAX_SOURCE {
            return None;
        }
        let code = {
            let mut codes = self.codes.lock().expect("inline template codes");
            match codes.get(text) {
                Some(code) => code.clone(),
                None => {
                    let code: Arc<str> = rewrite_chains(text).into();
                    codes.insert(text.to_string(), code.clone());
                    code
                }
            }
        };
        {
            let mut known = self.known.lock().expect("inline template sources");
            if !known.contains(&*code) {
                known.insert(code.to_string());
            }
        }
        let template = self.env.get_template(&code);
        Some((code, template))
    }

    pub(super) fn env(&self) -> &Environment<'static> {
        &self.env
    }
}
