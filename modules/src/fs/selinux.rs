//! Ansible's SELinux file arguments (`seuser`, `serole`, `setype`, `selevel`), which every module
//! with Ansible's common file arguments takes. Ansible applies them only where SELinux is
//! enabled and ignores them elsewhere; fixpoint does not set SELinux contexts yet, so it ignores
//! them where SELinux is off and refuses the task where it is on, rather than leaving a file with
//! a context other than the one asked for. They are taken out of the parameters here, once, so
//! the modules' own parameter structs need not list them.

use crate::ModuleError;
use serde_json::Value;
use std::borrow::Cow;
use std::path::Path;

/// The parameter names, as Ansible's common file arguments spell them.
pub const KEYS: &[&str] = &["seuser", "serole", "setype", "selevel"];

/// The native agent modules that take Ansible's common file arguments (`template` hands its
/// parameters to `copy`, `copy` of a controller directory runs as `copy_tree`).
const MODULES: &[&str] = &[
    "file",
    "copy",
    "copy_tree",
    "lineinfile",
    "blockinfile",
    "replace",
    "ini_file",
    "unarchive",
    "get_url",
    "uri",
];

/// Whether `module` takes the SELinux arguments.
pub fn takes(module: &str) -> bool {
    MODULES.contains(&module)
}

/// The parameters without the SELinux arguments, for a module that takes them.
pub fn without<'a>(module: &str, params: &'a Value) -> Cow<'a, Value> {
    match params.as_object() {
        Some(obj) if takes(module) && KEYS.iter().any(|k| obj.contains_key(*k)) => {
            let mut obj = obj.clone();
            for k in KEYS {
                obj.remove(*k);
            }
            Cow::Owned(Value::Object(obj))
        }
        _ => Cow::Borrowed(params),
    }
}

/// Whether SELinux is enabled on this host: its filesystem is mounted (libselinux's test).
fn enabled() -> bool {
    Path::new("/sys/fs/selinux/enforce").exists()
}

/// Fail when `params` ask for an SELinux context on a host where SELinux is enabled.
pub fn check(params: &Value) -> Result<(), ModuleError> {
    let Some(obj) = params.as_object() else {
        return Ok(());
    };
    let asked: Vec<&str> = KEYS
        .iter()
        .copied()
        .filter(|k| obj.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    if asked.is_empty() || !enabled() {
        return Ok(());
    }
    Err(ModuleError::failed(format!(
        "SELinux is enabled on this host and the task sets {}: fixpoint does not set SELinux \
         contexts yet (Ansible ignores these arguments only where SELinux is off)",
        asked.join(", ")
    )))
}
