//! playbook/: YAML playbooks, task files and roles -> typed plays and tasks, checked at load time.
//!
//! It owns the syntax tree (`ast`), the parser (`load` -> `includes` -> `task`, with `keywords`,
//! `roles`, `files`), the load-time checks (`validate`, `actions`) and the `with_*` loop
//! expansion the engine applies (`loops`). It must NOT know about hosts, inventories,
//! connections or the engine's run state: what needs a host's values is left in the tree
//! (templated includes, conditions, loops) for the engine.
//!
//! Dependencies go one way: `ast` uses nothing here; the parser files use `ast` and the
//! readers below them; `roles`, `actions` and `validate` never call the parser.

pub mod actions;
pub mod ast;
pub mod defaults;
pub mod files;
pub mod includes;
pub mod inherited;
pub mod keywords;
pub mod kv;
pub mod load;
pub mod loops;
mod names;
pub mod roles;
pub mod task;
pub mod validate;

pub use ast::{
    all_tasks, BatchSize, Block, Conditions, ConnKeywords, EnvPart, Environment, HostOrder,
    Include, IncludeSource, Inherited, LoopKind, Meta, MetaAction, Play, Playbook, RoleCtx,
    RoleFrom, Step, Task, VarPrompt,
};
pub use files::{find_in, load_vars_file, looked_in};
pub use includes::Loader;
pub use keywords::{
    become_flags_for, become_flags_of, check_var_name, is_var_name, known_become_method,
    known_connection,
};
pub use kv::parse_kv;
pub use load::{load_playbook, load_playbook_all};
