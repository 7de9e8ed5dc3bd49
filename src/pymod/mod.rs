//! Ansible's own module code for the modules fixpoint does not implement natively ("python"
//! engine): finding a module in the controller's Ansible installation (`locate`), packaging it
//! with the support code it imports (`package`), checking a task's parameters against its
//! documentation (`doc`), and turning its JSON answer into a fixpoint outcome (`result`).
//!
//! Native modules win over Ansible's installed ones: those are asked only about names the
//! registry does not know. A module of the playbook's own `library/` wins over both, as in
//! Ansible (`library`). Ansible
//! code is never copied into fixpoint: it is the user's installation, read and shipped at run
//! time. This folder must not know the engine or the connection; the engine calls it.

pub mod bridge;
pub mod doc;
pub mod library;
pub mod listing;
pub mod locate;
pub mod package;
pub mod plugins;
pub mod result;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A module found in the Ansible installation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyModule {
    /// The name the task wrote (`replace`, `ansible.posix.sysctl`).
    pub name: String,
    /// Its Python module name (`ansible.modules.replace`,
    /// `ansible_collections.ansible.posix.plugins.modules.sysctl`).
    pub fqn: String,
    pub path: PathBuf,
    /// The collection root (holding `ansible_collections/`) it came from; None for ansible-core.
    pub collection: Option<PathBuf>,
    /// `module_utils/` directories of the playbook and its roles, searched before
    /// ansible-core's for `ansible.module_utils.*` (only for a module of a `library/`).
    pub module_utils: Vec<PathBuf>,
}

type Found = Result<Arc<PyModule>, String>;

/// Lookups already made, by (name, playbook directory).
type FoundMap = HashMap<(String, PathBuf), Option<Found>>;

static FOUND: Mutex<Option<FoundMap>> = Mutex::new(None);

/// Look up a module fixpoint does not implement: `Ok(None)` when Ansible has no such module
/// either, `Err` when it has one fixpoint cannot run (action plugin, PowerShell...).
pub fn find(name: &str, play_dir: &Path) -> Result<Option<Arc<PyModule>>, String> {
    let key = (name.to_string(), play_dir.to_path_buf());
    let lock = || FOUND.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(r) = lock().get_or_insert_with(HashMap::new).get(&key) {
        return r.clone().transpose();
    }
    let r = match locate::find(name, play_dir) {
        Ok(m) => Some(Ok(m)),
        Err(locate::Refusal::Refused(why)) => Some(Err(why)),
        Err(locate::Refusal::NotFound) => locate::non_python_hint(name).map(Err),
    };
    lock()
        .get_or_insert_with(HashMap::new)
        .insert(key, r.clone());
    r.transpose()
}

static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

/// The task's module name as a `&'static str`, as native module names are: interned, so each
/// distinct name is allocated once per process.
pub fn intern(name: &str) -> &'static str {
    let mut g = NAMES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(n) = g.iter().find(|n| **n == name) {
        return n;
    }
    let n: &'static str = Box::leak(name.to_string().into_boxed_str());
    g.push(n);
    n
}

/// The Python the host runs to start a module from the zip: it puts the zip first on the path
/// and hands the arguments (stdin) to ansible-core's own module runner (2.19's AnsiballZ
/// loader; older ansible-core reads `basic._ANSIBLE_ARGS`). argv: zip path, module name.
pub const BOOTSTRAP: &str = r#"import sys
zip_path, fqn = sys.argv[1], sys.argv[2]
sys.path = [p for p in sys.path if p not in ('', '.')]
sys.path.insert(0, zip_path)
params = sys.stdin.buffer.read()
try:
    from ansible.module_utils._internal._ansiballz import _loader
except ImportError:
    _loader = None
if _loader is not None:
    _loader.run_module(json_params=params, profile='legacy', module_fqn=fqn, modlib_path=zip_path, extensions={})
else:
    import runpy
    from ansible.module_utils import basic
    basic._ANSIBLE_ARGS = params
    runpy.run_module(mod_name=fqn, init_globals=dict(_module_fqn=fqn, _modlib_path=zip_path), run_name='__main__', alter_sys=True)
    raise RuntimeError('the module did not exit')
"#;
