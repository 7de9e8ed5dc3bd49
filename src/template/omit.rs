//! Ansible's `omit`: a value of its own type (`_OmitType` in ansible-core 2.19), not a string.
//! Inside a template it is an opaque object (`omit is string` is false, `omit ~ ''` is
//! `<<Omit>>`); when a template's result is finished it is dropped from every list and mapping,
//! and a result that is `omit` itself leaves the JSON world as the `OMIT` sentinel, which the
//! engine reads as "no value" (a module parameter or fact left out).

use std::fmt;
use std::sync::{Arc, OnceLock};

use minijinja::value::{Object, ObjectRepr};
use minijinja::Value;

/// What an `omit` result is outside templates: module parameters and facts equal to it are
/// dropped; a variable equal to it is `omit` again when a template reads it.
pub const OMIT: &str = "__fixpoint_omit_place_holder__";

#[derive(Debug)]
struct Omit;

impl Object for Omit {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    /// Python's `str()` of ansible-core's omit object (`omit ~ ''`, `omit | string`).
    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<<Omit>>")
    }
}

/// The one `omit` value: one shared object, so `omit == omit` and `omit in [omit]` hold.
pub fn omit() -> Value {
    static OMIT_VALUE: OnceLock<Value> = OnceLock::new();
    OMIT_VALUE.get_or_init(|| Value::from_object(Omit)).clone()
}

/// Whether `v` is `omit`.
pub fn is_omit(v: &Value) -> bool {
    v.downcast_object_ref::<Omit>().is_some()
}

/// Whether a finished JSON value is the `omit` sentinel.
pub fn is_omit_json(v: &serde_json::Value) -> bool {
    v.as_str() == Some(OMIT)
}
