//! One conformance case: a YAML file under `cases/` (or `cases/pending/`) read into a [`Case`].
//!
//! The format (see the README, "Development / conformance"):
//!
//! ```yaml
//! # what the case checks (for a pending case: the bug it shows)
//! playbook: |
//!   - hosts: all
//!     ...
//! inventory: |          # optional INI text; default: `localhost ansible_connection=local`,
//!   ...                 # or nothing when `args` give -i (see below)
//! files:                # optional: relative path -> content, written beside the playbook;
//!                       # `www/<path>` files are also served over HTTP at `{{ http }}/<path>` (www.rs)
//!   group_vars/all.yml: |
//!     ...
//! args: [--check]       # optional: flags both tools share
//! env:                  # optional: ansible-core settings both tools read (`config::ANSIBLE_ENV`)
//!   ANSIBLE_FORCE_HANDLERS: "true"
//! expect_exit: 0        # optional: ansible-core's exit, in fixpoint's terms (0, 1 or 2)
//! ```
//!
//! Both tools get `-i inventory` (the file of `inventory:`) before the case's `args`. A case
//! whose `args` give inventory sources of their own (`args: [-i, "h1,h2:2222,", -c, local]`)
//! runs against those alone: its `inventory` file is then empty unless it has `inventory:`,
//! which comes first, before its sources (to combine a file with a host list).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Component, Path, PathBuf};

use yaml_rust2::{Yaml, YamlLoader};

// The `ANSIBLE_*` settings a case may give both tools: the ones fixpoint reads. The harness's
// own (`ANSIBLE_CONFIG`, the callback, ...) are not among them.
use fixpoint::config::ANSIBLE_ENV as UNDERSTOOD_ENV;

/// The inventory a case runs against when it gives none.
pub const DEFAULT_INVENTORY: &str = "localhost ansible_connection=local\n";

/// Flags that mean the same to `ansible-playbook` and `fixpoint apply`; the next word is their
/// value when `true`.
const SHARED_FLAGS: &[(&str, bool)] = &[
    ("--check", false),
    ("--diff", false),
    ("-e", true),
    ("--tags", true),
    ("--skip-tags", true),
    ("--limit", true),
    ("--force-handlers", false),
    ("--forks", true),
    ("-f", true),
    ("--start-at-task", true),
    // Inventory sources besides the case's `inventory` file (a host list: `h1,h2:2222,`).
    ("-i", true),
    ("--inventory", true),
    // The play-level defaults: `become`, `become_user`, `become_method`, `remote_user`,
    // `connection`.
    ("-b", false),
    ("--become", false),
    ("--become-user", true),
    ("--become-method", true),
    ("-u", true),
    ("--user", true),
    ("-c", true),
    ("--connection", true),
    // A file of the case's own (`files:`), relative to the run directory both tools run in.
    ("--vault-password-file", true),
    ("--vault-id", true),
    // Listings: what both tools print is compared as text (`Case::lists`).
    ("--list-tasks", false),
    ("--list-tags", false),
    ("--list-hosts", false),
    ("--syntax-check", false),
];

#[derive(Debug, Clone)]
pub struct Case {
    /// The file stem; unique over `cases/` and `cases/pending/`.
    pub name: String,
    pub path: PathBuf,
    /// In `cases/pending/`: shows a known bug, so it must differ from ansible-core.
    pub pending: bool,
    /// The first comment line: what the case checks (or the bug it shows).
    pub about: String,
    pub playbook: String,
    pub inventory: String,
    pub files: BTreeMap<String, String>,
    pub args: Vec<String>,
    /// `ANSIBLE_*` settings given to both tools.
    pub env: BTreeMap<String, String>,
    pub expect_exit: i32,
}

/// Every case under `dir` (`*.yml`) and `dir/pending` (`*.yml`), sorted by name.
pub fn discover(dir: &Path) -> Result<Vec<Case>, String> {
    let mut cases = Vec::new();
    for (sub, pending) in [(dir.to_path_buf(), false), (dir.join("pending"), true)] {
        // No pending folder: no known bug has a case.
        if pending && !sub.exists() {
            continue;
        }
        let entries = fs::read_dir(&sub).map_err(|e| format!("{}: {e}", sub.display()))?;
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yml"))
            .collect();
        paths.sort();
        for p in paths {
            let text = fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            cases.push(parse(&p, &text, pending).map_err(|e| format!("{}: {e}", p.display()))?);
        }
    }
    let mut seen = BTreeMap::new();
    for c in &cases {
        if let Some(other) = seen.insert(c.name.clone(), c.path.clone()) {
            return Err(format!(
                "two cases are named `{}`: {} and {}",
                c.name,
                other.display(),
                c.path.display()
            ));
        }
    }
    Ok(cases)
}

/// Reads one case file; `pending` says whether it lives in `cases/pending/`.
pub fn parse(path: &Path, text: &str, pending: bool) -> Result<Case, String> {
    let name = path
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or("the file name is not UTF-8")?
        .to_string();
    // The comment is the case's documentation: a case without one says nothing about why it
    // exists, and a pending case must name its bug.
    let about = match text.lines().next().map(str::trim) {
        Some(l) if l.starts_with('#') && l.trim_start_matches('#').trim().len() > 3 => {
            l.trim_start_matches('#').trim().to_string()
        }
        _ => return Err("the first line must be a comment saying what the case checks".into()),
    };
    let docs = YamlLoader::load_from_str(text).map_err(|e| format!("YAML: {e}"))?;
    let doc = match docs.as_slice() {
        [d] => d,
        _ => return Err("expected one YAML document".into()),
    };
    let map = doc.as_hash().ok_or("expected a mapping")?;
    let mut inventory = None;
    let mut case = Case {
        name,
        path: path.to_path_buf(),
        pending,
        about,
        playbook: String::new(),
        inventory: String::new(),
        files: BTreeMap::new(),
        args: Vec::new(),
        env: BTreeMap::new(),
        expect_exit: 0,
    };
    for (k, v) in map {
        let key = k.as_str().ok_or("keys must be strings")?;
        match key {
            "playbook" => case.playbook = text_value(key, v)?,
            "inventory" => inventory = Some(text_value(key, v)?),
            "files" => {
                for (fk, fv) in v.as_hash().ok_or("`files` must map paths to contents")? {
                    let rel = fk.as_str().ok_or("`files` keys must be strings")?;
                    check_relative(rel)?;
                    case.files.insert(rel.to_string(), text_value(rel, fv)?);
                }
            }
            "args" => {
                let list = v.as_vec().ok_or("`args` must be a list of strings")?;
                for a in list {
                    case.args.push(match a {
                        Yaml::String(s) => s.clone(),
                        _ => return Err("`args` must be a list of strings".into()),
                    });
                }
                check_args(&case.args)?;
            }
            "env" => {
                for (ek, ev) in v.as_hash().ok_or("`env` must map settings to values")? {
                    let name = ek.as_str().ok_or("`env` keys must be strings")?;
                    if !UNDERSTOOD_ENV.contains(&name) {
                        return Err(format!(
                            "`env` may give {}, not `{name}`",
                            UNDERSTOOD_ENV.join(", ")
                        ));
                    }
                    let value = ev.as_str().ok_or("`env` values must be strings")?;
                    case.env.insert(name.to_string(), value.to_string());
                }
            }
            "expect_exit" => {
                case.expect_exit = match v.as_i64() {
                    Some(n @ 0..=2) => n as i32,
                    _ => return Err("`expect_exit` must be 0, 1 or 2 (fixpoint's terms)".into()),
                }
            }
            other => return Err(format!("unknown key `{other}`")),
        }
    }
    if case.playbook.trim().is_empty() {
        return Err("`playbook` is missing".into());
    }
    // Inventory sources in `args` replace the default inventory (the module documentation).
    let own_sources = case.args.iter().any(|a| a == "-i" || a == "--inventory");
    case.inventory = match inventory {
        Some(text) => text,
        None if own_sources => String::new(),
        None => DEFAULT_INVENTORY.to_string(),
    };
    for reserved in ["playbook.yml", "inventory"] {
        if case.files.contains_key(reserved) {
            return Err(format!("`files` may not replace `{reserved}`"));
        }
    }
    // Where the case's `www/` files are served (www.rs), as the extra variable `http`.
    if let Some(port) = case.http_port() {
        case.args.push("-e".into());
        case.args.push(format!("http=http://127.0.0.1:{port}"));
    }
    Ok(case)
}

impl Case {
    /// The port the case's `www/` files are served on (www.rs), if it has any: 20000 + a hash
    /// of its name (FNV-1a) modulo 20000, so that ansible-core's cached results and fixpoint's
    /// name the same URLs.
    pub fn http_port(&self) -> Option<u16> {
        if !self.files.keys().any(|k| k.starts_with("www/")) {
            return None;
        }
        let mut h: u32 = 0x811c9dc5;
        for b in self.name.bytes() {
            h = (h ^ b as u32).wrapping_mul(0x0100_0193);
        }
        Some(20000 + (h % 20000) as u16)
    }

    /// Whether the case becomes one of `.ci/run`'s unprivileged test users (`fpuser`,
    /// `fppass`): fixpoint keeps such a user's journal in that user's own state directory,
    /// shared by every case, whose run lock admits one run at a time (the others would fail
    /// "locked by run ..."), so the harness runs them one at a time.
    pub fn becomes_test_user(&self) -> bool {
        [&self.playbook, &self.inventory]
            .into_iter()
            .chain(&self.args)
            .any(|text| text.contains("fpuser") || text.contains("fppass"))
    }

    /// A listing (`--list-tasks`, `--list-tags`, `--list-hosts`, `--syntax-check`): its text
    /// is compared.
    pub fn lists(&self) -> bool {
        self.args
            .iter()
            .any(|a| a.starts_with("--list-") || a == "--syntax-check")
    }

    /// Whether the playbook has a `user` or `group` task: such a case changes the machine's
    /// real accounts, and two of them at once race for the next free id (useradd gives a new
    /// account one more than the highest, which a concurrent case may be about to claim), so
    /// the harness runs them one at a time.
    pub fn touches_accounts(&self) -> bool {
        self.playbook.lines().any(|line| {
            let l = line.trim_start().trim_start_matches("- ").trim_start();
            let l = l.strip_prefix("ansible.builtin.").unwrap_or(l);
            ["user:", "group:"].iter().any(|m| {
                l.strip_prefix(m).is_some_and(|rest| {
                    let rest = rest.trim();
                    // `user: root` is another module's parameter; a task's arguments are a
                    // mapping (inline or on the next lines) or key=value words.
                    rest.is_empty() || rest.starts_with('{') || rest.contains('=')
                })
            })
        })
    }
}

fn text_value(key: &str, v: &Yaml) -> Result<String, String> {
    match v {
        Yaml::String(s) => Ok(s.clone()),
        _ => Err(format!("`{key}` must be a string (use a `|` block)")),
    }
}

/// Case files are written inside the run directory: no absolute paths, no `..`.
fn check_relative(rel: &str) -> Result<(), String> {
    let p = Path::new(rel);
    let ok = !rel.is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`files` path `{rel}` must be relative, without `..`"
        ))
    }
}

/// Only flags both tools read the same way, so that one argument list serves both runs.
fn check_args(args: &[String]) -> Result<(), String> {
    let mut i = 0;
    while i < args.len() {
        match SHARED_FLAGS.iter().find(|(f, _)| *f == args[i]) {
            Some((_, true)) if i + 1 < args.len() => i += 2,
            Some((f, true)) => return Err(format!("`{f}` needs a value in `args`")),
            Some((_, false)) => i += 1,
            None => {
                let known: Vec<&str> = SHARED_FLAGS.iter().map(|(f, _)| *f).collect();
                return Err(format!(
                    "`{}` is not a flag both tools share ({})",
                    args[i],
                    known.join(", ")
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn a_case_with_a_user_or_group_task_touches_accounts() {
    let case = |playbook: &str| {
        let text = format!("# a case\nplaybook: |\n{playbook}");
        parse(Path::new("c.yml"), &text, false).unwrap()
    };
    assert!(case("  - user: {name: a}\n").touches_accounts());
    assert!(case("  - ansible.builtin.group:\n      name: a\n").touches_accounts());
    assert!(case("  - user: name=a uid=5\n").touches_accounts());
    assert!(!case("  - authorized_key: {key: k,\n      user: root}\n").touches_accounts());
    assert!(!case("  - file: {path: /x, group: root}\n").touches_accounts());
}

#[test]
fn a_case_needs_its_comment_and_shared_flags_only() {
    let p = Path::new("cases/x.yml");
    let ok = parse(
        p,
        "# checks a thing\nargs: [--check, -e, \"a=1\"]\nplaybook: |\n  - hosts: all\n",
        false,
    )
    .unwrap();
    assert_eq!(
        (ok.name.as_str(), ok.args.len(), ok.expect_exit),
        ("x", 3, 0)
    );
    assert_eq!(ok.inventory, DEFAULT_INVENTORY);
    let no_comment = parse(p, "playbook: |\n  - hosts: all\n", false).unwrap_err();
    assert!(no_comment.contains("comment"), "{no_comment}");
    let bad_flag = parse(p, "# checks a thing\nargs: [--step]\nplaybook: x\n", false).unwrap_err();
    assert!(bad_flag.contains("--step"), "{bad_flag}");
    // Inventory sources in `args`: no default inventory, unless the case gives one.
    let own = |extra: &str| {
        let text = format!("# checks a thing\nargs: [-i, \"h1,\", -b]\n{extra}playbook: x\n");
        parse(p, &text, false).unwrap().inventory
    };
    assert_eq!(own(""), "");
    assert_eq!(own("inventory: \"h2\\n\"\n"), "h2\n");
    let escape = parse(
        p,
        "# checks a thing\nfiles: {../x: y}\nplaybook: x\n",
        false,
    )
    .unwrap_err();
    assert!(escape.contains("relative"), "{escape}");
    assert!(parse(p, "# checks a thing\nplaybook: x\nexpect_exit: 4\n", false).is_err());
}
