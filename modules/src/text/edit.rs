//! The text-file machinery shared by lineinfile, blockinfile and the other text modules: common
//! parameter checks, and the probe → plan → apply of an atomic rewrite with backup, validate,
//! mode, owner and group.

use super::regex::compile_regex;
use crate::fs::{
    atomic_write, backup_file, id_of, locate, lstat, plan_attrs, set_attrs_at, Attrs, Dir, Found,
    IfChecksum, Loc, WantedAttrs,
};
use crate::params::{is_template, ModeSpec};
use crate::{ContentDiff, Ctx, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::fs;
use std::path::{Path, PathBuf};

/// `state` of lineinfile and blockinfile: whether the line or block should be in the file.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Presence {
    #[default]
    Present,
    Absent,
}

/// Ansible reports a missing destination with rc 257; keep it so `failed_when: result.rc == 257` works.
pub(crate) fn missing_file(msg: String) -> ModuleError {
    let mut result = Map::new();
    result.insert("rc".into(), json!(257));
    ModuleError::Failed { msg, result }
}

/// Parameter checks shared by lineinfile and blockinfile.
pub(crate) fn check_common(
    path: &str,
    validate: Option<&str>,
    mode: Option<&ModeSpec>,
) -> Result<(), ModuleError> {
    if path.is_empty() {
        return Err(ModuleError::Params(
            "`path` is empty; give the file to edit".into(),
        ));
    }
    if let Some(v) = validate {
        if !v.contains("%s") {
            return Err(ModuleError::Params(format!(
                "validate must contain %s: {v}"
            )));
        }
    }
    if mode == Some(&ModeSpec::Preserve) {
        return Err(ModuleError::Params(
            "`mode: preserve` only makes sense with copy/template; give an octal or symbolic mode"
                .into(),
        ));
    }
    Ok(())
}

/// The error for two parameters that cannot be given together.
pub(crate) fn exclusive(a: &str, b: &str) -> ModuleError {
    ModuleError::Params(format!(
        "`{a}` and `{b}` are mutually exclusive; give only one of them"
    ))
}

/// Catch typos in the `insertafter`/`insertbefore` patterns at load time: anything but the
/// `EOF`/`BOF` keywords is a regex, unless a template will produce it.
pub(crate) fn check_anchors(
    insertafter: Option<&str>,
    insertbefore: Option<&str>,
) -> Result<(), ModuleError> {
    for (field, re) in [("insertafter", insertafter), ("insertbefore", insertbefore)] {
        if let Some(re) = re {
            if re != "EOF" && re != "BOF" && !is_template(re) {
                compile_regex(field, re)?;
            }
        }
    }
    Ok(())
}

/// `(insertafter, insertbefore)` with Ansible's default: after `EOF` when neither is given.
pub(crate) fn insert_anchors<'a>(
    insertafter: Option<&'a str>,
    insertbefore: Option<&'a str>,
) -> (Option<&'a str>, Option<&'a str>) {
    match (insertafter, insertbefore) {
        (None, None) => (Some("EOF"), None),
        anchors => anchors,
    }
}

/// The lossy text of file content for diffs; binary content is summarised instead of shown.
pub fn diff_text(data: &[u8]) -> String {
    if data.contains(&0) {
        format!("<binary, {} bytes>\n", data.len())
    } else {
        String::from_utf8_lossy(data).into_owned()
    }
}

/// Above this size a file's content is not shown in a diff (Ansible's default
/// `MAX_FILE_SIZE_FOR_DIFF`, 104448 bytes), and `copy` does not read it for one.
pub const MAX_DIFF_SIZE: u64 = 104_448;

/// The largest file `lineinfile` and `blockinfile` edit: they hold the file, its lines and the
/// new content in the agent's memory at once, so a larger one is refused (README, lineinfile).
pub const MAX_EDIT_SIZE: u64 = 32 * 1024 * 1024;

/// Read a file to edit, refusing one larger than [`MAX_EDIT_SIZE`]; the bound holds while the
/// file grows under the read too.
fn read_bounded(shown: &str, target: &Path) -> Result<Vec<u8>, ModuleError> {
    use std::io::Read;
    let too_large = |size: u64| {
        ModuleError::failed(format!(
            "{shown} is {size} bytes, larger than the {} MiB lineinfile and blockinfile edit \
             (the whole file is held in memory on the host); manage a file this large with \
             `copy` or `template`",
            MAX_EDIT_SIZE / (1024 * 1024)
        ))
    };
    let f = fs::File::open(target).map_err(|e| ModuleError::io(target, e))?;
    let size = f.metadata().map_err(|e| ModuleError::io(target, e))?.len();
    if size > MAX_EDIT_SIZE {
        return Err(too_large(size));
    }
    let mut data = Vec::with_capacity(size as usize);
    f.take(MAX_EDIT_SIZE + 1)
        .read_to_end(&mut data)
        .map_err(|e| ModuleError::io(target, e))?;
    if data.len() as u64 > MAX_EDIT_SIZE {
        return Err(too_large(data.len() as u64));
    }
    Ok(data)
}

/// What a diff shows instead of the content of a file larger than [`MAX_DIFF_SIZE`].
pub fn diff_skipped(size: u64) -> String {
    format!("<{size} bytes, larger than {MAX_DIFF_SIZE}: diff skipped>\n")
}

/// Python's `line.rstrip(b'\r\n')`.
pub(crate) fn strip_eol(line: &[u8]) -> &[u8] {
    let end = line
        .iter()
        .rposition(|b| *b != b'\n' && *b != b'\r')
        .map_or(0, |i| i + 1);
    &line[..end]
}

/// What lineinfile and blockinfile find on the host.
#[derive(Debug)]
pub struct TextFile {
    /// The path as the task gave it (used in messages and diffs).
    pub path: String,
    /// Where to write: the final target when `path` is a symlink, so the link stays a link.
    pub target: PathBuf,
    /// Metadata of the target (following symlinks); `None` when it does not exist.
    pub meta: Option<fs::Metadata>,
    /// Its content; `None` when it does not exist.
    pub content: Option<Vec<u8>>,
    /// `target` as probed (its directory without links, and what was there), which `apply_edit`
    /// changes and nothing else.
    pub at: Loc,
}

/// One step of a text-file edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditAction {
    /// Create missing parent directories of a new file (Ansible does this with `create: true`).
    CreateParents(PathBuf),
    /// Copy the current file aside before rewriting it (`backup: true`).
    Backup,
    /// Write new content atomically; `attrs` holds only the attributes that must change.
    Write { content: Vec<u8>, attrs: Attrs },
    /// The content is right; only mode/owner/group differ.
    SetAttrs(Attrs),
}

/// Read the file at `path`, through symlinks. A directory is an error, as in Ansible.
pub fn probe_text_file(path: &str) -> Result<TextFile, ModuleError> {
    let p = Path::new(path);
    let meta = match fs::metadata(p) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(ModuleError::io(p, e)),
    };
    if meta.as_ref().is_some_and(|m| m.is_dir()) {
        let mut result = Map::new();
        result.insert("rc".into(), json!(256));
        return Err(ModuleError::Failed {
            msg: format!("Path {path} is a directory !"),
            result,
        });
    }
    // Write through a symlink to its target, so a rewrite does not replace the link with a file.
    let target = match (&meta, lstat(p)?) {
        (Some(_), Some(l)) if l.file_type().is_symlink() => {
            fs::canonicalize(p).map_err(|e| ModuleError::io(p, e))?
        }
        _ => p.to_path_buf(),
    };
    let content = match meta {
        Some(_) => Some(read_bounded(path, &target)?),
        None => None,
    };
    let at = locate(&target, meta.as_ref().map(id_of))?;
    Ok(TextFile {
        path: path.to_string(),
        target,
        meta,
        content,
        at,
    })
}

/// [`probe_text_file`] for a module that takes fixpoint's `if_checksum`: the file's location
/// carries it to the write path, which re-checks it just before the rename (see `fs::cas`).
pub fn probe_guarded(path: &str, want: Option<&IfChecksum>) -> Result<TextFile, ModuleError> {
    let mut file = probe_text_file(path)?;
    file.at = file.at.guarded(want);
    Ok(file)
}

/// The plan-time `if_checksum` check of an edit: a plan that changes the file needs its current
/// content (as probed) to have the expected sha256, or the file to be missing for `absent`.
fn check_if_checksum(
    file: &TextFile,
    want: Option<&IfChecksum>,
    plan: &Plan<EditAction>,
) -> Result<(), ModuleError> {
    crate::fs::cas::check_plan(want, plan, &file.path, || {
        Ok(match &file.content {
            None => Found::Absent,
            Some(c) => Found::of_bytes(c),
        })
    })
}

/// Plan writing `new_content` (None: the content is already right) and the wanted attributes.
/// Fills `plan.actions` and `plan.diff`; returns Ansible's message: `msg` (what the edit does to
/// the content, or empty), with a note appended when attributes change.
pub fn plan_edit(
    file: &TextFile,
    new_content: Option<Vec<u8>>,
    wanted: &WantedAttrs,
    backup: bool,
    ctx: &Ctx,
    msg: String,
    plan: &mut Plan<EditAction>,
) -> Result<String, ModuleError> {
    let attrs = plan_attrs(&file.path, file.meta.as_ref(), wanted, &mut plan.diff)?;
    let attrs_changed = attrs != Attrs::default() && file.meta.is_some();
    match new_content {
        Some(content) => {
            if file.meta.is_none() {
                plan.diff.attr(&file.path, "state", "absent", "file");
                if let Some(parent) = file.target.parent() {
                    if !parent.as_os_str().is_empty() && lstat(parent)?.is_none() {
                        plan.diff.attr(
                            parent.display().to_string(),
                            "state",
                            "absent",
                            "directory",
                        );
                        plan.actions
                            .push(EditAction::CreateParents(parent.to_path_buf()));
                    }
                }
            } else if backup {
                plan.actions.push(EditAction::Backup);
            }
            if ctx.diff {
                plan.diff.content.push(ContentDiff {
                    path: file.path.clone(),
                    before: diff_text(file.content.as_deref().unwrap_or_default()),
                    after: diff_text(&content),
                });
            }
            plan.actions.push(EditAction::Write { content, attrs });
        }
        None if attrs_changed => plan.actions.push(EditAction::SetAttrs(attrs)),
        None => {}
    }
    Ok(with_attr_msg(msg, attrs_changed))
}

/// The end lineinfile and blockinfile share: plan rewriting the file to `after` (nothing when
/// it already holds that) with the wanted attributes, check `if_checksum` against that plan, and
/// give the result its registered `diff` and the message (`msg`, with the attribute note).
pub fn plan_rewrite(
    file: &TextFile,
    after: Vec<u8>,
    wanted: &WantedAttrs,
    backup: bool,
    if_checksum: Option<&IfChecksum>,
    ctx: &Ctx,
    msg: String,
) -> Result<Plan<EditAction>, ModuleError> {
    let mut plan = Plan::new();
    let diff_after = after.clone();
    let new_content = (file.content.as_deref() != Some(after.as_slice())).then_some(after);
    let msg = plan_edit(file, new_content, wanted, backup, ctx, msg, &mut plan)?;
    check_if_checksum(file, if_checksum, &plan)?;
    let diff = registered_diff(file, &diff_after, &plan.diff.attrs, ctx);
    plan.result.insert("diff".into(), diff);
    if !msg.is_empty() {
        plan.msg = Some(msg);
    }
    Ok(plan)
}

/// The `diff` lineinfile and blockinfile return in their result, which a `register` reader sees:
/// the content (both texts only when diffs are asked for) and, for a file that exists or is
/// written, the attributes that change, as `[content, attributes]`. A file that check mode
/// would create gets the content part alone, as in Ansible. Owners and groups are ids there.
fn registered_diff(file: &TextFile, after: &[u8], attrs: &[crate::AttrChange], ctx: &Ctx) -> Value {
    let (before, after) = if ctx.diff {
        (
            diff_text(file.content.as_deref().unwrap_or_default()),
            diff_text(after),
        )
    } else {
        (String::new(), String::new())
    };
    let header = format!("{} (content)", file.path);
    let content = json!({"before": before, "after": after,
                         "before_header": header, "after_header": header});
    if ctx.check && file.meta.is_none() {
        return content;
    }
    let header = format!("{} (file attributes)", file.path);
    let mut attr = json!({"before_header": header, "after_header": header});
    let (mut was, mut will) = (Map::new(), Map::new());
    for c in attrs.iter().filter(|c| c.path == file.path) {
        let id = |name: &str| match c.attr.as_str() {
            "owner" => crate::fs::lookup_uid(name).map(Value::from).ok(),
            "group" => crate::fs::lookup_gid(name).map(Value::from).ok(),
            "mode" => Some(Value::from(name)),
            _ => None,
        };
        if let (Some(b), Some(a)) = (id(&c.before), id(&c.after)) {
            was.insert(c.attr.clone(), b);
            will.insert(c.attr.clone(), a);
        }
    }
    if !will.is_empty() {
        attr["before"] = Value::Object(was);
        attr["after"] = Value::Object(will);
    }
    json!([content, attr])
}

/// What Ansible's `add_path_info` adds to a result naming an existing `path`: its owner, group,
/// ids, mode, size and `state` (which replaces a `state` parameter echoed there).
pub fn add_path_info(result: &mut Map<String, Value>, path: &str) -> Result<(), ModuleError> {
    if let Some(meta) = lstat(Path::new(path))? {
        result.extend(crate::fs::meta_info(&meta));
    }
    Ok(())
}

/// Ansible's message when only attributes changed, or appended to the content message.
fn with_attr_msg(mut msg: String, attrs_changed: bool) -> String {
    if attrs_changed {
        if !msg.is_empty() {
            msg.push_str(" and ");
        }
        msg.push_str("ownership, perms or SE linux context changed");
    }
    msg
}

/// Perform exactly the planned edit. Returns the module's return values: the backup's path
/// under `backup_key` when one was made.
pub fn apply_edit(
    file: &TextFile,
    actions: &[EditAction],
    validate: Option<&str>,
    backup_key: &str,
) -> Result<Map<String, Value>, ModuleError> {
    let mut out = Map::new();
    for action in actions {
        match action {
            // The directories as located at probe time, created without following any link.
            EditAction::CreateParents(_) => {
                Dir::create_all(&file.at.dir)?;
            }
            EditAction::Backup => {
                let backup = backup_file(&file.at)?;
                out.insert(backup_key.into(), Value::String(backup));
            }
            EditAction::Write { content, attrs } => {
                atomic_write(&file.at, content, attrs, validate)?;
            }
            EditAction::SetAttrs(attrs) => set_attrs_at(&file.at, attrs)?,
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::testutil::{setup, CHECK, RUN};
    use crate::{run, Ctx};
    use serde_json::json;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn lineinfile_and_blockinfile_register_ansibles_diff() {
        let (d, path) = setup("a\n");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let p = path.display().to_string();
        // Diff mode: the texts, and the attributes that change (owner and group as ids).
        let out = run::<crate::lineinfile::LineInFile>(
            &json!({"path": p, "line": "b", "mode": "0600", "owner": "root"}),
            &RUN,
        )
        .unwrap();
        let content_header = format!("{p} (content)");
        let attr_header = format!("{p} (file attributes)");
        let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&path).unwrap());
        assert_eq!(owner, 0, "the tests run as root");
        assert_eq!(
            out.result["diff"],
            json!([
                {"before": "a\n", "after": "a\nb\n", "before_header": content_header, "after_header": content_header},
                {"before": {"mode": "0644"}, "after": {"mode": "0600"},
                 "before_header": attr_header, "after_header": attr_header}
            ])
        );
        // Without diff mode: the same shape, empty texts; unchanged, no attribute part.
        let out = run::<crate::blockinfile::BlockInFile>(
            &json!({"path": p, "block": "x"}),
            &Ctx::default(),
        )
        .unwrap();
        assert_eq!(
            out.result["diff"],
            json!([
                {"before": "", "after": "", "before_header": content_header, "after_header": content_header},
                {"before_header": attr_header, "after_header": attr_header}
            ])
        );
        // A file check mode would create: the content part alone.
        let new = d.path().join("new").display().to_string();
        let out = run::<crate::lineinfile::LineInFile>(
            &json!({"path": new, "line": "x", "create": true}),
            &CHECK,
        )
        .unwrap();
        assert_eq!(out.result["diff"]["after"], json!("x\n"));
        assert_eq!(out.result["diff"]["before"], json!(""));
    }
}
