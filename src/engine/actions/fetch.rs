//! `fetch`: bring a file from the host to the controller, under `dest/<inventory_hostname>/<src>`
//! (or `dest` itself with `flat`). The host's half (`fixpoint_modules::fetch`) reports the
//! file's sha1 and sends its content in chunks only when the controller's copy has another sha1,
//! so a second fetch of an unchanged file transfers nothing. The controller writes a temp file
//! beside the destination, checks its sha1 against the host's, and renames it into place.

use super::super::result::ItemResult;
use super::super::state::{HostState, PlayCtx};
use super::super::Shared;
use crate::playbook::Task;
use crate::report::Status;
use crate::vars::Scope;
use fixpoint_agent::protocol::{Request, Response};
use serde_json::{json, Map, Value};
use sha1::Digest as _;
use std::io::Write as _;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How long one chunk may take when the task has no `timeout`.
const CHUNK_TIMEOUT: Duration = Duration::from_secs(120);

/// `os.path.normpath`, lexically: the destination is named, never resolved.
fn normpath(p: &Path) -> PathBuf {
    let mut out: Vec<Component> = Vec::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if matches!(out.last(), Some(Component::Normal(_))) => {
                out.pop();
            }
            Component::ParentDir if matches!(out.last(), Some(Component::RootDir)) => {}
            other => out.push(other),
        }
    }
    out.iter().collect()
}

/// sha1 and md5 (hex) of a controller file, or None when it is not a readable regular file.
fn sums(path: &Path) -> Option<(String, String)> {
    let data = std::fs::metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .and_then(|_| std::fs::read(path).ok())?;
    Some((
        hex::encode(sha1::Sha1::digest(&data)),
        hex::encode(md5::Md5::digest(&data)),
    ))
}

/// Where the file goes on the controller, as Ansible's fetch action computes it.
fn destination(
    params: &fixpoint_modules::fetch::Params,
    host: &str,
    play_dir: &Path,
) -> Result<PathBuf, String> {
    let dwim = |d: &str| {
        let d = fixpoint_modules::fs::expand_user(d);
        if d.is_absolute() {
            d
        } else {
            play_dir.join(d)
        }
    };
    let src = params.src.as_str();
    if params.flat.0 {
        let mut dest = params.dest.clone();
        if !dest.ends_with('/') && dwim(&dest).is_dir() {
            return Err("dest is an existing directory, use a trailing slash if you want to fetch src into that directory".into());
        }
        if dest.ends_with('/') {
            dest.push_str(src.rsplit('/').next().unwrap_or(src));
            if dwim(&dest).is_dir() {
                return Err(format!("calculated dest '{dest}' is an existing directory, use another path that does not point to an existing directory"));
            }
        }
        return Ok(normpath(&dwim(&dest)));
    }
    let root = normpath(&dwim(&params.dest).join(host));
    let dest = normpath(&PathBuf::from(format!("{}/{src}", root.display())));
    // `..` in src must not lead out of the host's own directory.
    if !dest.starts_with(&root) || dest == root {
        return Err(format!(
            "Detected directory traversal, expected to be contained in '{}' but got '{}'",
            root.display(),
            dest.display()
        ));
    }
    Ok(dest)
}

impl Shared<'_> {
    /// Run `fetch` for one host: ask the agent, write what it sends.
    pub(in super::super) async fn fetch(
        &self,
        ctx: &PlayCtx<'_>,
        task: &Task,
        h: &mut HostState,
        scope: &Arc<Scope>,
        mut params: Value,
    ) -> Result<ItemResult, (bool, String)> {
        if self.effective_check(Some(task)) {
            let msg = "check mode not (yet) supported for this module";
            let mut r = ItemResult::ok(
                json!({"changed": false, "skipped": true, "msg": msg})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            );
            r.status = Status::Skipped;
            r.msg = Some(msg.into());
            return Ok(r);
        }
        super::prepare::strip_omit(&mut params);
        let p: fixpoint_modules::fetch::Params = fixpoint_modules::parse_params(&params)
            .map_err(|e| (false, format!("invalid parameters for `fetch`: {e}")))?;
        // Ansible's `path_dwim`: relative to the playbook's directory, made absolute.
        let play_dir = std::path::absolute(&ctx.play.dir).unwrap_or_else(|_| ctx.play.dir.clone());
        let dest = match destination(&p, &h.name, &play_dir) {
            Ok(d) => d,
            Err(msg) => return Ok(ItemResult::failed(msg, Map::new())),
        };
        let have = sums(&dest);
        let spec = self
            .task_conn_spec(h, ctx, task, scope)
            .map_err(|e| (false, e))?;
        let timeout = Some(task.timeout.map_or(CHUNK_TIMEOUT, Duration::from_secs));
        let conn = self.conn(h, &spec, ctx).await?;
        let ask = |offset: u64| {
            let mut params = params.clone();
            params["_have"] = json!(have.as_ref().map(|(s, _)| s));
            params["_offset"] = json!(offset);
            Request::Run {
                module: "fetch".into(),
                params,
                check: false,
                diff: false,
                once: None,
                notify: None,
                inline: Vec::new(),
            }
        };
        let mut call = async |offset: u64| match conn.call(&ask(offset), timeout).await {
            Ok(Response::Done { outcome, .. }) => Ok(Ok(outcome.result)),
            Ok(Response::Failed { msg, result }) => Ok(Err(ItemResult::failed(msg, result))),
            Ok(other) => Err((
                false,
                format!("unexpected answer from the agent: {other:?}"),
            )),
            Err(e) => Err((false, e.to_string())),
        };
        let first = match call(0).await? {
            Ok(r) => r,
            Err(failed) => return Ok(failed),
        };
        let src = fixpoint_modules::fs::expand_user(&p.src)
            .display()
            .to_string();
        let mut result = Map::new();
        if first["exists"] == false || first["isdir"] == true {
            let missing = first["exists"] == false;
            let mut msg = if missing {
                "the remote file does not exist, not transferring, ignored".to_string()
            } else {
                "remote file is a directory, fetch cannot work on directories".to_string()
            };
            if p.fail_on_missing.0 {
                return Ok(ItemResult::failed(msg, result));
            }
            if !missing {
                msg.push_str(", not transferring, ignored");
            } else {
                result.insert("file".into(), src.into());
                result.insert("changed".into(), false.into());
            }
            result.insert("msg".into(), msg.clone().into());
            let mut r = ItemResult::ok(result);
            r.msg = Some(msg);
            return Ok(r);
        }
        let remote = first["remote_checksum"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if let Some((sha1, md5)) = have.clone().filter(|(s, _)| *s == remote) {
            result.insert("changed".into(), false.into());
            result.insert("md5sum".into(), md5.into());
            result.insert("file".into(), src.into());
            result.insert("dest".into(), dest.display().to_string().into());
            result.insert("checksum".into(), sha1.into());
            return Ok(ItemResult::ok(result));
        }
        // The content, chunk by chunk, into a temp file beside the destination.
        let dir = dest.parent().unwrap_or(Path::new("/")).to_path_buf();
        let io = |e: std::io::Error| (false, format!("{}: {e}", dest.display()));
        std::fs::create_dir_all(&dir).map_err(io)?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".fixpoint-fetch.")
            .tempfile_in(&dir)
            .map_err(io)?;
        let (mut h1, mut h5) = (sha1::Sha1::new(), md5::Md5::new());
        let (mut offset, mut chunk) = (0u64, first);
        loop {
            use base64::Engine as _;
            let data = base64::engine::general_purpose::STANDARD
                .decode(chunk["content"].as_str().unwrap_or_default())
                .map_err(|e| (false, format!("the agent sent bad content: {e}")))?;
            tmp.write_all(&data).map_err(io)?;
            h1.update(&data);
            h5.update(&data);
            offset += data.len() as u64;
            if chunk["eof"] != false {
                break;
            }
            chunk = match call(offset).await? {
                Ok(r) => r,
                Err(failed) => return Ok(failed),
            };
        }
        let (sha1, md5) = (hex::encode(h1.finalize()), hex::encode(h5.finalize()));
        if p.validate_checksum.0 && sha1 != remote {
            // The temp file goes with `tmp`; the destination is left as it was.
            result.insert("md5sum".into(), md5.into());
            result.insert("file".into(), src.into());
            result.insert("dest".into(), dest.display().to_string().into());
            result.insert("remote_md5sum".into(), Value::Null);
            result.insert("checksum".into(), sha1.into());
            result.insert("remote_checksum".into(), remote.into());
            return Ok(ItemResult::failed("checksum mismatch".into(), result));
        }
        // Ansible opens the destination for writing: an existing file keeps its mode, a new
        // one gets the umask's.
        let mode = std::fs::metadata(&dest).map_or_else(
            |_| 0o666 & !fixpoint_modules::fs::current_umask(),
            |m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777,
        );
        use std::os::unix::fs::PermissionsExt as _;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(io)?;
        tmp.as_file().sync_all().map_err(io)?;
        tmp.persist(&dest).map_err(|e| io(e.error))?;
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        result.insert("changed".into(), true.into());
        result.insert("md5sum".into(), md5.into());
        result.insert("dest".into(), dest.display().to_string().into());
        result.insert("remote_md5sum".into(), Value::Null);
        result.insert("checksum".into(), sha1.into());
        result.insert("remote_checksum".into(), remote.into());
        let mut r = ItemResult::done(fixpoint_modules::Outcome {
            changed: true,
            result,
            ..Default::default()
        });
        r.note = Some(format!("content fetched: {offset} bytes"));
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(src: &str, dest: &str, flat: bool) -> fixpoint_modules::fetch::Params {
        fixpoint_modules::parse_params(&json!({"src": src, "dest": dest, "flat": flat})).unwrap()
    }

    #[test]
    fn destinations_are_ansibles() {
        let play = Path::new("/play");
        assert_eq!(
            destination(&params("/etc/motd", "out", false), "web1", play).unwrap(),
            PathBuf::from("/play/out/web1/etc/motd")
        );
        assert_eq!(
            destination(&params("/etc/motd", "/tmp/x/", true), "web1", play).unwrap(),
            PathBuf::from("/tmp/x/motd")
        );
        assert_eq!(
            destination(&params("/etc/motd", "got", true), "web1", play).unwrap(),
            PathBuf::from("/play/got")
        );
        assert_eq!(
            destination(&params("../../x", "out", false), "web1", play).unwrap_err(),
            "Detected directory traversal, expected to be contained in '/play/out/web1' but got '/play/x'"
        );
        // An absolute src is joined after the host's directory, so its `..` climbs out too.
        assert!(destination(&params("/../../etc/passwd", "out", false), "web1", play).is_err());
    }
}
