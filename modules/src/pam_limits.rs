//! The `pam_limits` module (community.general): set one limit (domain, type, item, value) in
//! `/etc/security/limits.conf` or another limits file, as community.general's pam_limits writes
//! it. The file handling (atomic rewrite, backup) is shared with lineinfile in `text`.

use crate::fs::WantedAttrs;
use crate::params::{de_opt_string, de_string, is_template, Bool};
use crate::text::{apply_edit, exclusive, plan_edit, probe_text_file, EditAction, TextFile};
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::path::Path;

pub struct PamLimits;

/// `limit_type`: `-` sets both the soft and the hard limit.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
pub enum LimitType {
    #[serde(rename = "soft")]
    Soft,
    #[serde(rename = "hard")]
    Hard,
    #[serde(rename = "-")]
    Both,
}

impl LimitType {
    fn word(self) -> &'static str {
        match self {
            LimitType::Soft => "soft",
            LimitType::Hard => "hard",
            LimitType::Both => "-",
        }
    }
}

/// The items limits.conf(5) knows, as the module accepts them.
const ITEMS: &[&str] = &[
    "core",
    "data",
    "fsize",
    "memlock",
    "nofile",
    "rss",
    "stack",
    "cpu",
    "nproc",
    "as",
    "maxlogins",
    "maxsyslogins",
    "priority",
    "locks",
    "sigpending",
    "msgqueue",
    "nice",
    "rtprio",
    "chroot",
];

fn default_dest() -> String {
    "/etc/security/limits.conf".into()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(deserialize_with = "de_string")]
    pub domain: String,
    pub limit_type: LimitType,
    #[serde(deserialize_with = "de_string")]
    pub limit_item: String,
    #[serde(deserialize_with = "de_string")]
    pub value: String,
    #[serde(default)]
    pub use_max: Bool,
    #[serde(default)]
    pub use_min: Bool,
    #[serde(default)]
    pub backup: Bool,
    #[serde(default = "default_dest")]
    pub dest: String,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub comment: Option<String>,
}

/// No limit, in any of its three spellings.
fn unlimited(v: &str) -> bool {
    matches!(v, "unlimited" | "infinity" | "-1")
}

/// limits.conf(5)'s rule for a value of `item`: nice and priority take -20..19, the others a
/// count of 0 or more, or no limit.
fn check_value(item: &str, value: &str, prefix: &str) -> Result<(), String> {
    if item == "nice" || item == "priority" {
        if value.parse::<i64>().is_ok_and(|v| (-20..=19).contains(&v)) {
            return Ok(());
        }
        return Err(format!(
            "{prefix} Value of '{value}' for item '{item}' is invalid. Value must be a number in \
             the range -20 to 19 inclusive. Refer to the limits.conf(5) manual pages for more details."
        ));
    }
    if unlimited(value) || (!value.is_empty() && value.bytes().all(|b| b.is_ascii_digit())) {
        return Ok(());
    }
    Err(format!(
        "{prefix} Value of '{value}' for item '{item}' is invalid. Value must either be \
         'unlimited', 'infinity' or -1, all of which indicate no limit, or a limit of 0 or larger. \
         Refer to the limits.conf(5) manual pages for more details."
    ))
}

impl Module for PamLimits {
    type Params = Params;
    type State = TextFile;
    type Action = EditAction;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if p.use_max.0 && p.use_min.0 {
            return Err(exclusive("use_max", "use_min"));
        }
        if !is_template(&p.limit_item) && !ITEMS.contains(&p.limit_item.as_str()) {
            return Err(ModuleError::Params(format!(
                "`limit_item: {}` is not one of: {}",
                p.limit_item,
                ITEMS.join(", ")
            )));
        }
        if !is_template(&p.value) && !is_template(&p.limit_item) {
            check_value(&p.limit_item, &p.value, "")
                .map_err(|e| ModuleError::Params(e.trim_start().into()))?;
        }
        if p.dest.is_empty() {
            return Err(ModuleError::Params("`dest` is empty".into()));
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<TextFile, ModuleError> {
        probe_text_file(&p.dest)
    }

    fn plan(p: &Params, file: &TextFile, ctx: &Ctx) -> Result<Plan<EditAction>, ModuleError> {
        let mut plan = Plan::new();
        let original: &[u8] = match &file.content {
            Some(c) => c,
            None => {
                let dir = Path::new(&p.dest).parent().unwrap_or(Path::new(""));
                if !dir.is_dir() {
                    return Err(ModuleError::failed(format!(
                        "directory {} is not writable (check presence, access rights, use sudo)",
                        dir.display()
                    )));
                }
                b""
            }
        };
        let text = std::str::from_utf8(original).map_err(|e| {
            ModuleError::failed(format!("{} is not valid UTF-8 text ({e})", p.dest))
        })?;
        let (after, changed, msg) = edit(p, text).map_err(ModuleError::failed)?;
        let changed = changed || file.content.is_none();
        // pam_limits returns both texts whether or not diffs are asked for.
        plan.result
            .insert("diff".into(), json!({"before": text, "after": after}));
        let new_content = changed.then(|| after.into_bytes());
        // pam_limits takes no file attributes.
        let wanted = WantedAttrs::default();
        plan_edit(
            file,
            new_content,
            &wanted,
            p.backup.0,
            ctx,
            String::new(),
            &mut plan,
        )?;
        plan.msg = Some(msg);
        Ok(plan)
    }

    fn apply(
        _p: &Params,
        file: TextFile,
        plan: &Plan<EditAction>,
    ) -> Result<Map<String, Value>, ModuleError> {
        apply_edit(&file, &plan.actions, None, "backup_file")
    }
}

/// pam_limits' pass over the file: the new text, whether the limit changed or was added, and the
/// message (the limit's line as it ends up). Fails on a limit line whose value is invalid.
fn edit(p: &Params, text: &str) -> Result<(String, bool, String), String> {
    let (domain, kind, item) = (
        p.domain.as_str(),
        p.limit_type.word(),
        p.limit_item.as_str(),
    );
    let mut out = String::with_capacity(text.len() + 64);
    let mut changed = false;
    let mut found = false;
    let mut message = String::new();
    let mut new_value = p.value.clone();
    // The comment to write: the parameter, or else the first limit line's own comment (the
    // module carries it over, quirk included).
    let mut comment = p.comment.clone().unwrap_or_default();
    let limit_line =
        |value: &str, comment: &str| format!("{domain}\t{kind}\t{item}\t{value}{comment}\n");
    for line in text.split_inclusive('\n') {
        if line.starts_with('#') {
            out.push_str(line);
            continue;
        }
        let squeezed = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if squeezed.is_empty() {
            out.push_str(line);
            continue;
        }
        let fields_text = squeezed.split('#').next().unwrap_or_default().trim_end();
        let own_comment = line.split_once('#').map_or("", |(_, c)| c);
        if comment.is_empty() {
            comment = own_comment.to_string();
        }
        let fields: Vec<&str> = fields_text.split(' ').collect();
        let [l_domain, l_type, l_item, actual] = fields[..] else {
            out.push_str(line);
            continue;
        };
        check_value(
            l_item,
            actual,
            &format!("Invalid configuration found in '{}'.", p.dest),
        )?;
        if (l_domain, l_type, l_item) != (domain, kind, item) {
            out.push_str(line);
            continue;
        }
        found = true;
        if p.value == actual {
            message = line.to_string();
            out.push_str(line);
            continue;
        }
        let (actual_unlimited, value_unlimited) = (unlimited(actual), unlimited(&p.value));
        let num = |s: &str| {
            s.parse::<i64>()
                .map_err(|e| format!("invalid limit {s:?}: {e}"))
        };
        if p.use_max.0 {
            new_value = if actual_unlimited {
                actual.to_string()
            } else if value_unlimited {
                p.value.clone()
            } else {
                num(&p.value)?.max(num(actual)?).to_string()
            };
        }
        if p.use_min.0 {
            new_value = match (actual_unlimited, value_unlimited) {
                (true, true) => actual.to_string(),
                (true, false) => p.value.clone(),
                (false, true) => actual.to_string(),
                (false, false) => num(&p.value)?.min(num(actual)?).to_string(),
            };
        }
        if new_value != actual {
            changed = true;
            if !comment.is_empty() {
                comment = format!("\t#{comment}");
            }
            message = limit_line(&new_value, &comment);
            out.push_str(&message);
        } else {
            message = line.to_string();
            out.push_str(line);
        }
    }
    if !found {
        changed = true;
        if !comment.is_empty() {
            comment = format!("\t#{comment}");
        }
        message = limit_line(&new_value, &comment);
        out.push_str(&message);
    }
    Ok((out, changed, message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{read, setup, stamp, CHECK};
    use crate::{check_params, run, Outcome};
    use std::fs;

    fn go(params: Value) -> Outcome {
        run::<PamLimits>(&params, &Ctx::default()).unwrap()
    }

    #[test]
    fn adds_then_converges_without_rewriting() {
        let (_d, path) = setup("# limits\n*\tsoft\tcore\t0\n");
        let params = json!({"dest": path, "domain": "fpuser", "limit_type": "soft", "limit_item": "nofile", "value": 4096});
        let out = go(params.clone());
        assert!(out.changed);
        assert_eq!(out.msg.as_deref(), Some("fpuser\tsoft\tnofile\t4096\n"));
        assert_eq!(
            read(&path),
            "# limits\n*\tsoft\tcore\t0\nfpuser\tsoft\tnofile\t4096\n"
        );
        let before = stamp(&path);
        let again = go(params);
        assert!(!again.changed);
        assert_eq!(again.msg.as_deref(), Some("fpuser\tsoft\tnofile\t4096\n"));
        assert_eq!(
            again.result["diff"]["before"],
            again.result["diff"]["after"]
        );
        assert_eq!(stamp(&path), before);
    }

    #[test]
    fn changes_in_place_with_comment_and_spacing_normalised() {
        let (_d, path) = setup("@dev   hard  nproc   10\nx - nofile 5\n");
        go(
            json!({"dest": path, "domain": "@dev", "limit_type": "hard", "limit_item": "nproc", "value": "20", "comment": "more"}),
        );
        assert_eq!(read(&path), "@dev\thard\tnproc\t20\t#more\nx - nofile 5\n");
    }

    #[test]
    fn use_max_and_use_min_keep_the_larger_or_smaller() {
        let (_d, path) = setup("u soft nofile 100\n");
        let out = go(
            json!({"dest": path, "domain": "u", "limit_type": "soft", "limit_item": "nofile", "value": 50, "use_max": true}),
        );
        assert!(!out.changed);
        go(
            json!({"dest": path, "domain": "u", "limit_type": "soft", "limit_item": "nofile", "value": 500, "use_max": true}),
        );
        assert_eq!(read(&path), "u\tsoft\tnofile\t500\n");
        go(
            json!({"dest": path, "domain": "u", "limit_type": "soft", "limit_item": "nofile", "value": "unlimited", "use_min": true}),
        );
        assert_eq!(read(&path), "u\tsoft\tnofile\t500\n");
        go(
            json!({"dest": path, "domain": "u", "limit_type": "soft", "limit_item": "nofile", "value": 7, "use_min": true}),
        );
        assert_eq!(read(&path), "u\tsoft\tnofile\t7\n");
    }

    #[test]
    fn new_file_in_existing_dir_and_missing_dir_fails() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("90-fp.conf");
        let params = json!({"dest": path, "domain": "*", "limit_type": "-", "limit_item": "core", "value": 0});
        let out = run::<PamLimits>(&params, &CHECK).unwrap();
        assert!(out.changed);
        assert!(!path.exists());
        go(params);
        assert_eq!(read(&path), "*\t-\tcore\t0\n");
        let err = run::<PamLimits>(
            &json!({"dest": dir.path().join("no/f"), "domain": "*", "limit_type": "-", "limit_item": "core", "value": 0}),
            &Ctx::default(),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("is not writable (check presence"),
            "{err}"
        );
    }

    #[test]
    fn an_invalid_existing_limit_fails_and_backup_is_made_on_change() {
        let (_d, path) = setup("u soft nofile lots\n");
        let err = run::<PamLimits>(
            &json!({"dest": path, "domain": "u", "limit_type": "soft", "limit_item": "core", "value": 1}),
            &Ctx::default(),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("Invalid configuration found in"),
            "{err}"
        );
        fs::write(&path, "u soft nofile 1\n").unwrap();
        let out = go(
            json!({"dest": path, "domain": "u", "limit_type": "soft", "limit_item": "nofile", "value": 2, "backup": true}),
        );
        let b = out.result["backup_file"].as_str().unwrap();
        assert_eq!(fs::read_to_string(b).unwrap(), "u soft nofile 1\n");
    }

    #[test]
    fn bad_parameters_are_rejected() {
        let base = json!({"domain": "u", "limit_type": "soft", "limit_item": "nofile", "value": 1});
        let with = |k: &str, v: Value| {
            let mut p = base.clone();
            p[k] = v;
            check_params("pam_limits", &p)
        };
        check_params("pam_limits", &base).unwrap();
        assert_eq!(
            with("limit_type", json!("medium")).unwrap_err().path,
            "limit_type"
        );
        assert!(with("limit_item", json!("files"))
            .unwrap_err()
            .to_string()
            .contains("nofile"));
        assert!(with("value", json!("lots"))
            .unwrap_err()
            .to_string()
            .contains("invalid"));
        assert!(with("limit_item", json!("nice")).is_ok());
        let mut p = base.clone();
        p["limit_item"] = json!("nice");
        p["value"] = json!(25);
        assert!(check_params("pam_limits", &p)
            .unwrap_err()
            .to_string()
            .contains("-20 to 19"));
        assert!(with("use_min", json!(true)).is_ok());
        let mut p = base.clone();
        p["use_min"] = json!(true);
        p["use_max"] = json!(true);
        assert!(check_params("pam_limits", &p)
            .unwrap_err()
            .to_string()
            .contains("mutually exclusive"));
    }
}
