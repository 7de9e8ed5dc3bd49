//! The `replace` module: substitute every match of a Python-style regular expression in a text
//! file (optionally only between `after` and `before`), with Ansible's replace semantics. The
//! file handling (atomic rewrite, backup, validate, attributes) is shared with lineinfile in `text`.

use crate::fs::WantedAttrs;
use crate::lineinfile::{check_template, expand_template};
use crate::params::{de_opt_string, is_template, Bool, ModeSpec};
use crate::text::{
    apply_edit, check_common, compile_regex, missing_file, plan_edit, probe_text_file, EditAction,
    TextFile,
};
use crate::{Ctx, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};

pub struct Replace;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(
        alias = "dest",
        alias = "destfile",
        alias = "name",
        deserialize_with = "crate::params::de_path"
    )]
    pub path: String,
    #[serde(deserialize_with = "crate::params::de_string")]
    pub regexp: String,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub replace: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub after: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub before: Option<String>,
    #[serde(default)]
    pub backup: Bool,
    #[serde(default)]
    pub validate: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub encoding: Option<String>,
    #[serde(default)]
    pub mode: Option<ModeSpec>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub owner: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub group: Option<String>,
    /// Accepted for compatibility; writes are always atomic here.
    #[serde(default)]
    pub unsafe_writes: Option<Bool>,
}

impl Params {
    /// The `after`/`before` section pattern Ansible builds (dot matches newlines), if any.
    /// An empty string counts as not given, as in Ansible.
    fn section_pattern(&self) -> Option<String> {
        let after = self.after.as_deref().filter(|s| !s.is_empty());
        let before = self.before.as_deref().filter(|s| !s.is_empty());
        match (after, before) {
            (Some(a), Some(b)) => Some(format!("(?s){a}(?P<subsection>.*?){b}")),
            (Some(a), None) => Some(format!("(?s){a}(?P<subsection>.*)")),
            (None, Some(b)) => Some(format!("(?s)(?P<subsection>.*){b}")),
            (None, None) => None,
        }
    }
}

/// Only UTF-8 text is edited: the file is matched as UTF-8 and written back byte for byte.
fn is_utf8_name(enc: &str) -> bool {
    matches!(
        enc.to_ascii_lowercase().replace('_', "-").as_str(),
        "utf-8" | "utf8"
    )
}

impl Module for Replace {
    type Params = Params;
    type State = TextFile;
    type Action = EditAction;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        check_common(&p.path, p.validate.as_deref(), p.mode.as_ref())?;
        if let Some(enc) = &p.encoding {
            if !is_template(enc) && !is_utf8_name(enc) {
                return Err(ModuleError::Params(format!(
                    "`encoding: {enc}` is not supported: replace edits UTF-8 files only (leave \
                     `encoding` out or set it to utf-8)"
                )));
            }
        }
        // Catch pattern typos at load time, unless a template will produce the pattern.
        if !is_template(&p.regexp) {
            compile_regex("regexp", &format!("(?m){}", p.regexp))?;
        }
        let templated = [&p.after, &p.before]
            .iter()
            .any(|s| s.as_deref().is_some_and(is_template));
        if let (Some(section), false) = (p.section_pattern(), templated) {
            compile_regex("after/before", &section)?;
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<TextFile, ModuleError> {
        probe_text_file(&p.path)
    }

    fn plan(p: &Params, file: &TextFile, ctx: &Ctx) -> Result<Plan<EditAction>, ModuleError> {
        let mut plan = Plan::new();
        plan.result.insert("rc".into(), json!(0));
        let Some(content) = &file.content else {
            return Err(missing_file(format!("Path {} does not exist !", p.path)));
        };
        if std::str::from_utf8(content).is_err() {
            return Err(ModuleError::failed(format!(
                "{} is not valid UTF-8 text; replace edits UTF-8 files only",
                p.path
            )));
        }
        // The part of the file the substitution sees: all of it, or what lies between the
        // `after` and `before` matches.
        let (start, end) = match p.section_pattern() {
            None => (0, content.len()),
            Some(pattern) => {
                let re = compile_regex("after/before", &pattern)?;
                match re.captures(content).and_then(|c| c.name("subsection")) {
                    Some(m) => (m.start(), m.end()),
                    None => {
                        // Ansible stops here: no attribute change either.
                        plan.msg = Some(format!(
                            "Pattern for before/after params did not match the given file: {}",
                            pattern.trim_start_matches("(?s)")
                        ));
                        return Ok(plan);
                    }
                }
            }
        };
        let section = &content[start..end];
        let re = compile_regex("regexp", &format!("(?m){}", p.regexp))?;
        let template = p.replace.as_deref().unwrap_or_default().as_bytes();
        check_template(template, &re).map_err(|e| {
            ModuleError::failed(format!("Unable to process replace due to error: {e}"))
        })?;
        let mut replaced = Vec::with_capacity(section.len());
        let mut count = 0usize;
        let mut last = 0;
        for caps in re.captures_iter(section) {
            let m = caps.get(0).expect("group 0 always takes part");
            replaced.extend_from_slice(&section[last..m.start()]);
            let expanded = expand_template(template, &re, &caps).map_err(|e| {
                ModuleError::failed(format!("Unable to process replace due to error: {e}"))
            })?;
            replaced.extend_from_slice(&expanded);
            last = m.end();
            count += 1;
        }
        replaced.extend_from_slice(&section[last..]);

        let new_content = (count > 0 && replaced != section).then(|| {
            let mut whole = Vec::with_capacity(content.len() - section.len() + replaced.len());
            whole.extend_from_slice(&content[..start]);
            whole.extend_from_slice(&replaced);
            whole.extend_from_slice(&content[end..]);
            whole
        });
        let msg = if new_content.is_some() {
            format!("{count} replacements made")
        } else {
            String::new()
        };
        // Ansible's replace returns its diff (a registered value) only for a change, in diff mode.
        if let (Some(after), true) = (&new_content, ctx.diff) {
            plan.result.insert(
                "diff".into(),
                json!({"before_header": p.path, "before": String::from_utf8_lossy(content),
                       "after_header": p.path, "after": String::from_utf8_lossy(after)}),
            );
        }
        let wanted = WantedAttrs::new(&p.mode, &p.owner, &p.group);
        let msg = plan_edit(file, new_content, &wanted, p.backup.0, ctx, msg, &mut plan)?;
        plan.msg = Some(msg);
        Ok(plan)
    }

    fn apply(
        p: &Params,
        file: TextFile,
        plan: &Plan<EditAction>,
    ) -> Result<Map<String, Value>, ModuleError> {
        apply_edit(&file, &plan.actions, p.validate.as_deref(), "backup_file")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{read, setup, stamp, CHECK};
    use crate::{check_params, run, Outcome};
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    fn go(params: Value) -> Outcome {
        run::<Replace>(&params, &Ctx::default()).unwrap()
    }

    #[test]
    fn replaces_every_match_then_converges_without_rewriting() {
        let (_d, path) = setup("port=1\nx\nport=2\n");
        let params = json!({"path": path, "regexp": "^port=\\d+$", "replace": "port=80"});
        let out = go(params.clone());
        assert!(out.changed);
        assert_eq!(out.msg.as_deref(), Some("2 replacements made"));
        assert_eq!(out.result["rc"], json!(0));
        assert_eq!(read(&path), "port=80\nx\nport=80\n");
        let before = stamp(&path);
        let again = go(params);
        assert!(!again.changed);
        assert_eq!(again.msg.as_deref(), Some(""));
        assert_eq!(stamp(&path), before);
    }

    #[test]
    fn python_back_references_and_escapes_in_replace() {
        let (_d, path) = setup("listen 8080 ssl\nlisten 9090\n");
        go(json!({
            "path": path, "regexp": "^listen (\\d+)(?P<rest>.*)$",
            "replace": "listen \\1 http2\\g<rest>\\tend"
        }));
        assert_eq!(
            read(&path),
            "listen 8080 http2 ssl\tend\nlisten 9090 http2\tend\n"
        );
    }

    #[test]
    fn a_match_replaced_by_itself_is_no_change() {
        let (_d, path) = setup("a=1\n");
        let out = go(json!({"path": path, "regexp": "a=(1)", "replace": "a=\\1"}));
        assert!(!out.changed);
    }

    #[test]
    fn empty_replace_deletes_matches() {
        let (_d, path) = setup("keep\n# drop\nkeep2\n");
        go(json!({"path": path, "regexp": "^#.*\\n"}));
        assert_eq!(read(&path), "keep\nkeep2\n");
    }

    #[test]
    fn after_and_before_limit_the_section() {
        let text = "x=1\n[a]\nx=1\n[b]\nx=1\n";
        let (_d, path) = setup(text);
        go(
            json!({"path": path, "regexp": "x=1", "replace": "x=2", "after": "\\[a\\]", "before": "\\[b\\]"}),
        );
        assert_eq!(read(&path), "x=1\n[a]\nx=2\n[b]\nx=1\n");
        fs::write(&path, text).unwrap();
        go(json!({"path": path, "regexp": "x=1", "replace": "x=2", "after": "\\[a\\]"}));
        assert_eq!(read(&path), "x=1\n[a]\nx=2\n[b]\nx=2\n");
        fs::write(&path, text).unwrap();
        go(json!({"path": path, "regexp": "x=1", "replace": "x=2", "before": "\\[b\\]"}));
        assert_eq!(read(&path), "x=2\n[a]\nx=2\n[b]\nx=1\n");
        // No section match: nothing happens, and Ansible says so.
        let before = stamp(&path);
        let out = go(json!({"path": path, "regexp": "x", "after": "nomatch", "mode": "0600"}));
        assert!(!out.changed);
        assert_eq!(
            out.msg.as_deref(),
            Some("Pattern for before/after params did not match the given file: nomatch(?P<subsection>.*)")
        );
        assert_eq!(stamp(&path), before);
    }

    #[test]
    fn check_mode_reports_diff_and_leaves_disk_alone() {
        let (_d, path) = setup("a\n");
        let before = stamp(&path);
        let out = run::<Replace>(
            &json!({"path": path, "regexp": "a", "replace": "b"}),
            &CHECK,
        )
        .unwrap();
        assert!(out.changed);
        assert_eq!(out.diff.content[0].before, "a\n");
        assert_eq!(out.diff.content[0].after, "b\n");
        assert_eq!(out.result["diff"]["before"], json!("a\n"));
        assert_eq!(out.result["diff"]["after_header"], json!(path));
        assert_eq!(stamp(&path), before);
    }

    #[test]
    fn missing_file_and_directory_fail_with_ansibles_rc() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope");
        let err =
            run::<Replace>(&json!({"path": path, "regexp": "a"}), &Ctx::default()).unwrap_err();
        match err {
            ModuleError::Failed { msg, result } => {
                assert_eq!(msg, format!("Path {} does not exist !", path.display()));
                assert_eq!(result["rc"], json!(257));
            }
            other => panic!("unexpected {other:?}"),
        }
        let err = run::<Replace>(&json!({"path": dir.path(), "regexp": "a"}), &Ctx::default())
            .unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
    }

    #[test]
    fn backup_validate_and_mode() {
        let (_d, path) = setup("a\n");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let err = run::<Replace>(
            &json!({"path": path, "regexp": "a", "replace": "b", "validate": "false %s"}),
            &Ctx::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("failed to validate"), "{err}");
        assert_eq!(read(&path), "a\n");
        let out = go(
            json!({"path": path, "regexp": "a", "replace": "b", "backup": true, "mode": "0600"}),
        );
        assert_eq!(
            out.msg.as_deref(),
            Some("1 replacements made and ownership, perms or SE linux context changed")
        );
        let backup = out.result["backup_file"].as_str().unwrap();
        assert_eq!(fs::read_to_string(backup).unwrap(), "a\n");
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
            0o600
        );
    }

    #[test]
    fn non_utf8_file_is_refused() {
        let (_d, path) = setup("");
        fs::write(&path, b"a\xff\n").unwrap();
        let err =
            run::<Replace>(&json!({"path": path, "regexp": "a"}), &Ctx::default()).unwrap_err();
        assert!(err.to_string().contains("UTF-8"), "{err}");
    }

    /// Python compiles the replacement before substituting: a bad escape fails the task even
    /// where nothing matches (Ansible's replace target, issue 79364).
    #[test]
    fn a_bad_escape_fails_without_a_match() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        fs::write(&path, "abc\n").unwrap();
        let p = json!({"path": path, "regexp": "\\.", "replace": "\\D"});
        let e = run::<Replace>(&p, &Ctx::default()).unwrap_err().to_string();
        assert!(e.starts_with("Unable to process replace"), "{e}");
        let p = json!({"path": path, "regexp": "x", "replace": "\\2"});
        let e = run::<Replace>(&p, &Ctx::default()).unwrap_err().to_string();
        assert!(e.contains("invalid group reference 2"), "{e}");
        assert!(!go(json!({"path": path, "regexp": "x", "replace": "\\n"})).changed);
    }

    #[test]
    fn bad_parameters_are_rejected() {
        let e = check_params("replace", &json!({"path": "/x"})).unwrap_err();
        assert!(e.to_string().contains("regexp"), "{e}");
        let e = check_params("replace", &json!({"path": "/x", "regexp": "(a"})).unwrap_err();
        assert!(e.to_string().contains("`regexp`"), "{e}");
        let e = check_params(
            "replace",
            &json!({"path": "/x", "regexp": "a", "encoding": "latin-1"}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("UTF-8"), "{e}");
        let e =
            check_params("replace", &json!({"path": "/x", "regexp": "a", "bogus": 1})).unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
        check_params(
            "replace",
            &json!({"dest": "/x", "regexp": "a", "encoding": "UTF-8"}),
        )
        .unwrap();
        check_params("replace", &json!({"path": "/x", "regexp": "{{ re }}("})).unwrap();
    }
}
