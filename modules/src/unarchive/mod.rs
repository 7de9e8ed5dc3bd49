//! The `unarchive` module: unpack a tar (plain, gz, bz2, xz, zst) or zip archive into an
//! existing `dest`, with the parameters and return values of Ansible's unarchive.
//!
//! `probe` lists the archive (`archive.rs`), refuses it when an entry would land outside
//! `dest` (an absolute name, `..`, or a path through a symlink, in the archive or on disk), and
//! compares each entry with the tree: type, size, mtime, mode, owner (as root) and link target,
//! as Ansible's `tar --diff` does, and a zip entry's CRC-32 as its zip handler does (which also
//! registers `diff.prepared`, itemized by `itemize.rs`). `plan` names the entries that differ;
//! `apply` (`extract.rs`)
//! writes only those, each file through a temp file renamed into place, so a converged tree is
//! not written at all (Ansible re-extracts the whole archive when anything differs).
//!
//! A controller `src` arrives as its sha256 (`_src_sha256`): the archive is kept in the agent
//! user's `~/.cache/fixpoint/` under that hash and asked for (`NeedContent`) only when missing.

pub mod archive;
mod extract;
mod itemize;
mod zipread;

use crate::fs::{expand_user, lookup_gid, lookup_uid, path_info};
use crate::params::{de_opt_string, Bool, ModeSpec, StringList};
use crate::{Ctx, Module, ModuleError, Plan};
use archive::{Entry, Format, Kind};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

pub struct Unarchive;

/// Parameters of `unarchive`, as Ansible names them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(deserialize_with = "de_string")]
    pub src: String,
    #[serde(deserialize_with = "de_string")]
    pub dest: String,
    #[serde(default)]
    pub remote_src: Bool,
    /// Ansible's deprecated inverse of `remote_src`.
    #[serde(default)]
    pub copy: Option<Bool>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub creates: Option<String>,
    #[serde(default)]
    pub list_files: Bool,
    #[serde(default)]
    pub keep_newer: Bool,
    #[serde(default)]
    pub exclude: StringList,
    #[serde(default)]
    pub include: StringList,
    #[serde(default)]
    pub extra_opts: StringList,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub owner: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub group: Option<String>,
    #[serde(default)]
    pub mode: Option<ModeSpec>,
    /// Ignored: the archive is read with buffers of fixpoint's choosing.
    #[serde(default)]
    pub io_buffer_size: Option<Value>,
    /// Ignored: URLs are not downloaded (refused), and vault files are not decrypted here.
    #[serde(default)]
    pub validate_certs: Option<Bool>,
    #[serde(default)]
    pub decrypt: Option<Bool>,
    /// The sha256, size and name of a controller-side `src`; set by the controller.
    #[serde(default, rename = "_src_sha256")]
    pub src_sha256: Option<String>,
    #[serde(default, rename = "_src_size")]
    pub src_size: Option<u64>,
}

fn de_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    de_opt_string(d)?.ok_or_else(|| serde::de::Error::custom("expected a path, found null"))
}

/// One step of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Write these entries (indices into `Probed::entries`), in archive order.
    Extract(Vec<usize>),
    /// Only owner/group/mode of these entries differ.
    SetAttrs(Vec<usize>),
    /// owner/group/mode for the top directories of the entries (Ansible sets them there too,
    /// ansible/ansible#35426), after the extraction.
    SetTopAttrs(Vec<(PathBuf, extract::Want)>),
}

/// What `probe` found.
#[derive(Debug, Default)]
pub struct Probed {
    /// `creates` exists: nothing to do.
    pub skip: bool,
    /// The archive on the host.
    pub archive: PathBuf,
    pub format: Option<Format>,
    pub entries: Vec<Entry>,
    /// The indices of the entries include/exclude keep.
    pub selected: Vec<usize>,
    /// `dest` with symlinks resolved (the tree below it is walked without following any).
    pub root: PathBuf,
    pub write: Vec<usize>,
    pub attrs: Vec<usize>,
    /// Owner, group and permission bits each selected entry must end with (None: not checked).
    pub want: HashMap<usize, extract::Want>,
    /// Top directories whose owner/group/mode the parameters change.
    pub tops: Vec<(PathBuf, extract::Want)>,
    /// A zip's itemized lines of the entries that differ (`itemize.rs`), registered as
    /// `diff.prepared`.
    pub itemized: String,
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The cache directory of the agent's user (from the password database: sudo may keep $HOME).
fn cache_dir() -> Result<PathBuf, ModuleError> {
    let home = crate::fs::effective_home()
        .ok_or_else(|| ModuleError::failed("the agent's user has no home for its cache"))?;
    let dir = home.join(".cache").join("fixpoint");
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| ModuleError::io(&dir, e))?;
    Ok(dir)
}

/// The controller's archive in the host's cache: there already, just uploaded, or asked for.
/// (`script` keeps its controller file the same way.)
pub(crate) fn cached_archive(sha256: &str, size: u64) -> Result<PathBuf, ModuleError> {
    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ModuleError::Params(format!(
            "`_src_sha256` is not a sha256 in hex: {sha256}"
        )));
    }
    let dir = cache_dir()?;
    let path = dir.join(format!("archive-{}", sha256.to_ascii_lowercase()));
    if std::fs::metadata(&path).is_ok_and(|m| m.len() == size) {
        return Ok(path);
    }
    if let Some(staged) = crate::fs::stage::take(sha256) {
        // Hashed as it arrived: the rename publishes the whole, verified archive.
        let from = staged.dir.at(&staged.name);
        std::fs::rename(&from, &path).map_err(|e| ModuleError::io(&path, e))?;
        return Ok(path);
    }
    Err(ModuleError::NeedContent {
        dir,
        sha256: sha256.to_string(),
        size,
    })
}

/// Ansible's fnmatch of include/exclude patterns against an entry's name.
fn matches(pattern: &str, name: &str) -> bool {
    let name = name.trim_end_matches('/');
    let pattern = pattern.trim_end_matches('/');
    glob::Pattern::new(pattern).is_ok_and(|p| p.matches(name))
        || name == pattern
        || name.starts_with(&format!("{pattern}/"))
}

impl Module for Unarchive {
    type Params = Params;
    type State = Probed;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if !p.include.0.is_empty() && !p.exclude.0.is_empty() {
            return Err(ModuleError::Params(
                "parameters are mutually exclusive: include|exclude".into(),
            ));
        }
        if !p.extra_opts.0.is_empty() {
            return Err(ModuleError::Params(
                "`extra_opts` is not supported: fixpoint reads archives itself, not through tar or unzip".into(),
            ));
        }
        if p.mode == Some(ModeSpec::Preserve) {
            return Err(ModuleError::Params(
                "`mode: preserve` is not supported by unarchive; give a mode like \"0644\"".into(),
            ));
        }
        let remote = p.remote_src.0 || p.copy.is_some_and(|c| !c.0);
        if remote && p.src.contains("://") {
            return Err(ModuleError::Params(
                "`src` with `remote_src: true` is a URL: downloading archives is not supported; fetch it first (get_url) and unarchive the file".into(),
            ));
        }
        if p.src_sha256.is_some() != p.src_size.is_some() {
            return Err(ModuleError::Params(
                "`_src_sha256` and `_src_size` come together".into(),
            ));
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<Probed, ModuleError> {
        let mut st = Probed::default();
        if let Some(c) = &p.creates {
            if expand_user(c).exists() {
                st.skip = true;
                return Ok(st);
            }
        }
        st.archive = match (&p.src_sha256, p.src_size) {
            (Some(sha), Some(size)) => cached_archive(sha, size)?,
            _ => {
                let path = expand_user(&p.src);
                match std::fs::metadata(&path) {
                    Ok(_) => {}
                    Err(_) if p.remote_src.0 || p.copy.is_some_and(|c| !c.0) => {
                        return Err(ModuleError::failed(format!(
                            "Source '{}' does not exist",
                            p.src
                        )))
                    }
                    Err(_) => {
                        return Err(ModuleError::failed(format!(
                            "Source '{}' failed to transfer",
                            p.src
                        )))
                    }
                }
                std::path::absolute(&path).unwrap_or(path)
            }
        };
        let meta = std::fs::metadata(&st.archive).map_err(|e| ModuleError::io(&st.archive, e))?;
        if meta.len() == 0 {
            return Err(ModuleError::failed(format!(
                "Invalid archive '{}', the file is 0 bytes",
                st.archive.display()
            )));
        }
        let dest = expand_user(&p.dest);
        if !dest.is_dir() {
            return Err(ModuleError::failed(format!(
                "dest '{}' must be an existing dir",
                p.dest
            )));
        }
        st.root = std::fs::canonicalize(&dest).map_err(|e| ModuleError::io(&dest, e))?;
        let fmt = archive::detect(&st.archive)?;
        st.format = Some(fmt);
        st.entries = archive::list(&st.archive, fmt)?;
        st.selected = (0..st.entries.len())
            .filter(|i| {
                let name = &st.entries[*i].name;
                let inc = p.include.0.is_empty() || p.include.0.iter().any(|x| matches(x, name));
                let exc = p.exclude.0.iter().any(|x| matches(x, name));
                inc && !exc
            })
            .collect();
        extract::check_paths(&st)?;

        let uid = p.owner.as_deref().map(lookup_uid).transpose()?;
        let gid = p.group.as_deref().map(lookup_gid).transpose()?;
        let root = is_root();
        let umask = crate::fs::current_umask();
        for &i in &st.selected {
            let e = &st.entries[i];
            if e.path.as_os_str().is_empty() {
                continue;
            }
            // As root, tar gives entries their archived owner (by name when the host knows it)
            // and exact modes; as another user, its own and the modes less the umask.
            let (ouid, ogid) = match (root, fmt) {
                (true, Format::Tar(_)) => {
                    (Some(extract::owner_uid(e)), Some(extract::owner_gid(e)))
                }
                _ => (None, None),
            };
            let base_mode = if root { e.mode } else { e.mode & !umask };
            let mode = match &p.mode {
                Some(spec) => spec
                    .resolve(base_mode, e.kind == Kind::Dir)
                    .map_err(ModuleError::Params)?,
                None => Some(base_mode),
            };
            let want = extract::Want {
                uid: uid.or(ouid),
                gid: gid.or(ogid),
                mode,
            };
            let diff = extract::compare(&st.root, e, &want, p.keep_newer.0, &st.entries)?;
            match diff {
                extract::Diff::Same => {}
                extract::Diff::Attrs => st.attrs.push(i),
                extract::Diff::Content => st.write.push(i),
            }
            if diff != extract::Diff::Same && fmt == Format::Zip {
                let line = itemize::line(&st.root, e, &want, p.keep_newer.0)?;
                st.itemized.push_str(&line);
            }
            st.want.insert(i, want);
        }
        if p.owner.is_some() || p.group.is_some() || p.mode.is_some() {
            let tops: std::collections::BTreeSet<PathBuf> = st
                .selected
                .iter()
                .map(|i| &st.entries[*i])
                .filter(|e| e.name.contains('/'))
                .filter_map(|e| e.path.components().next())
                .map(|c| PathBuf::from(c.as_os_str()))
                .collect();
            for top in tops {
                let meta = std::fs::symlink_metadata(st.root.join(&top)).ok();
                if meta.as_ref().is_some_and(|m| m.file_type().is_symlink()) {
                    continue;
                }
                let current = meta.as_ref().map(|m| m.mode() & 0o7777).unwrap_or(0o755);
                let mode = match &p.mode {
                    Some(spec) => spec.resolve(current, true).map_err(ModuleError::Params)?,
                    None => None,
                };
                let want = extract::Want { uid, gid, mode };
                let ok = meta.is_some_and(|m| {
                    owned(&m, &want) && mode.is_none_or(|w| m.mode() & 0o7777 == w)
                });
                if !ok {
                    st.tops.push((top, want));
                }
            }
        }
        Ok(st)
    }

    fn plan(p: &Params, st: &Probed, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let mut plan = Plan::new();
        if st.skip {
            let c = p.creates.clone().unwrap_or_default();
            plan.msg = Some(format!("skipped, since {c} exists"));
            plan.result.insert("skipped".into(), true.into());
            return Ok(plan);
        }
        plan.result = path_info(&expand_user(&p.dest))?;
        plan.result.insert("dest".into(), p.dest.clone().into());
        plan.result
            .insert("src".into(), st.archive.display().to_string().into());
        if let Some(f) = st.format {
            plan.result.insert("handler".into(), f.handler().into());
        }
        if p.list_files.0 {
            let files: Vec<Value> = st
                .selected
                .iter()
                .map(|i| Value::String(st.entries[*i].name.clone()))
                .collect();
            plan.result.insert("files".into(), Value::Array(files));
        }
        if !st.write.is_empty() {
            plan.actions.push(Action::Extract(st.write.clone()));
        }
        if !st.attrs.is_empty() {
            plan.actions.push(Action::SetAttrs(st.attrs.clone()));
        }
        if !st.tops.is_empty() {
            plan.actions.push(Action::SetTopAttrs(st.tops.clone()));
        }
        if !st.itemized.is_empty() {
            // Registered with or without --diff, as Ansible's zip handler does.
            let mut diff = Map::new();
            diff.insert("prepared".into(), st.itemized.clone().into());
            plan.result.insert("diff".into(), Value::Object(diff));
            if ctx.diff {
                plan.diff.prepared = Some(st.itemized.clone());
            }
        } else if ctx.diff && !plan.actions.is_empty() {
            let mut text = String::new();
            for i in st.write.iter().chain(&st.attrs) {
                text.push_str(&format!("{}\n", st.entries[*i].name));
            }
            plan.diff.prepared = Some(format!("entries to extract or fix:\n{text}"));
        }
        Ok(plan)
    }

    fn apply(
        p: &Params,
        st: Probed,
        plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        for a in &plan.actions {
            match a {
                Action::Extract(list) => extract::write(&st, list)?,
                Action::SetAttrs(list) => extract::set_attrs(&st, list)?,
                Action::SetTopAttrs(list) => extract::set_top_attrs(&st, list)?,
            }
        }
        let mut out = path_info(&expand_user(&p.dest))?;
        out.insert("dest".into(), p.dest.clone().into());
        Ok(out)
    }
}

/// The uid a tar entry gets as root: its user's, when the host knows the name.
fn name_or_id(name: Option<&str>, id: u64, by_name: impl Fn(&str) -> Option<u32>) -> u32 {
    name.and_then(by_name)
        .unwrap_or_else(|| u32::try_from(id).unwrap_or(u32::MAX))
}

/// Whether `meta` belongs to the wanted owner and group.
fn owned(meta: &std::fs::Metadata, w: &extract::Want) -> bool {
    w.uid.is_none_or(|u| meta.uid() == u) && w.gid.is_none_or(|g| meta.gid() == g)
}

#[cfg(test)]
mod tests;
