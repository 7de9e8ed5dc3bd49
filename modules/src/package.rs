//! `package`: the generic package module. It runs the host's own manager module, chosen from
//! `use` or, by default, from the host's `ansible_pkg_mgr` computed on the host.

use crate::params::is_template;
use crate::{apt, pkg_mgr, run_hooked, Ctx, ModuleError, Outcome, ParamError};
use serde_json::Value;

/// Split `use` off the arguments; the rest goes to the manager's module unchanged.
fn split(params: &Value) -> Result<(String, Value), ParamError> {
    let mut rest = params.clone();
    let obj = rest.as_object_mut().ok_or_else(|| ParamError {
        path: String::new(),
        msg: "expected a mapping of parameters".into(),
    })?;
    let using = match obj.remove("use") {
        None | Some(Value::Null) => "auto".to_string(),
        Some(Value::String(s)) => s,
        Some(other) => {
            return Err(ParamError {
                path: "use".into(),
                msg: format!("expected a string, found {other}"),
            })
        }
    };
    // `state` may be left out: ansible-core's package action hands the arguments to the
    // manager's module unchecked, and the manager's own default (`present`) applies.
    if !obj.contains_key("name") {
        return Err(ParamError {
            path: String::new(),
            msg: "missing required arguments: `name`".into(),
        });
    }
    Ok((using, rest))
}

/// Load-time check: `use` must name a manager fixpoint drives; the rest is checked as that
/// manager's parameters (`dnf`'s for `use: dnf`, else `apt`'s).
pub fn check(params: &Value) -> Result<(), ParamError> {
    let (using, rest) = split(params)?;
    if using != "auto" && !is_template(&using) && !pkg_mgr::SUPPORTED.contains(&using.as_str()) {
        return Err(ParamError {
            path: "use".into(),
            // The start is ansible-core's wording, which playbooks (its own tests) check.
            msg: format!(
                "Could not find a matching action for the \"{using}\" package manager: \
                 fixpoint's package module drives {} only",
                pkg_mgr::SUPPORTED.join(", ")
            ),
        });
    }
    match using.as_str() {
        "dnf" | "yum" => crate::registry::check_params("dnf", &rest),
        "apt" => crate::registry::check_params("apt", &rest),
        // `auto` (or a template): the host decides, so parameters one of the managers takes
        // pass now and are checked again, as that manager's, when the task runs there.
        _ => crate::registry::check_params("apt", &rest)
            .or_else(|apt| crate::registry::check_params("dnf", &rest).map_err(|_| apt)),
    }
}

/// Run the manager's module on this host.
pub fn run(
    params: &Value,
    ctx: &Ctx,
    before_apply: &mut dyn FnMut() -> Result<(), ModuleError>,
) -> Result<Outcome, ModuleError> {
    let (using, rest) = split(params).map_err(|e| ModuleError::Params(e.to_string()))?;
    let mgr = if using == "auto" {
        pkg_mgr::pkg_mgr(&pkg_mgr::host_os_family())
    } else {
        using
    };
    match mgr.as_str() {
        "apt" => run_hooked::<apt::Apt>(&rest, ctx, before_apply),
        "dnf" | "yum" => run_hooked::<crate::dnf::Dnf>(&rest, ctx, before_apply),
        other => Err(ModuleError::failed(format!(
            "this host's package manager (ansible_pkg_mgr) is `{other}`; fixpoint's package \
             module drives {} only",
            pkg_mgr::SUPPORTED.join(", ")
        ))),
    }
}
