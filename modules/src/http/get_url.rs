//! The `get_url` module: download a URL to a file on the host, with Ansible's parameters and
//! return values. The download streams into a temp file in the destination's directory, is
//! hashed on the way, checked against `checksum`, and renamed over `dest` only when its content
//! differs; a checksum mismatch leaves `dest` as it was.
//!
//! Converged means no request at all: an existing `dest` is kept unless `force` is set or its
//! digest differs from `checksum` (ansible-core sends a conditional GET there; see
//! tests/conformance/DEVIATIONS.md). A `dest` that is a directory is downloaded into every run,
//! as in Ansible: the file name comes from the answer (`Content-Disposition`, or the URL).
//! Check mode sends a HEAD request, as Ansible does, and writes nothing.

use super::client::{self, Follow, Request};
use super::{
    de_opt_secs, digest_file, disposition_filename, env_map, header_pairs, mask_url, url_filename,
    Algo,
};
use crate::fs::{
    backup_file, expand_user, id_of, install_temp, locate, lstat, path_info, plan_attrs,
    set_attrs_at, Dir, WantedAttrs,
};
use crate::params::{de_opt_string, Bool, ModeSpec};
use crate::{Ctx, Diff, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

pub struct GetUrl;

fn yes() -> Bool {
    Bool(true)
}

/// Parameters of `get_url`, spelled as in Ansible.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub url: String,
    pub dest: String,
    /// `algo:hex`, or `algo:<URL of a checksums file>`.
    #[serde(default, deserialize_with = "de_opt_string")]
    pub checksum: Option<String>,
    #[serde(default)]
    pub force: Bool,
    #[serde(default)]
    pub backup: Bool,
    #[serde(default)]
    pub mode: Option<ModeSpec>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub owner: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub group: Option<String>,
    #[serde(default)]
    pub headers: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "de_opt_secs")]
    pub timeout: Option<u64>,
    #[serde(default = "yes")]
    pub validate_certs: Bool,
    #[serde(default, alias = "username", deserialize_with = "de_opt_string")]
    pub url_username: Option<String>,
    #[serde(default, alias = "password", deserialize_with = "de_opt_string")]
    pub url_password: Option<String>,
    #[serde(default)]
    pub force_basic_auth: Bool,
    /// Checked as Ansible checks it (an existing directory); the download itself goes to a temp
    /// file beside `dest`, so that the final rename is atomic.
    #[serde(default, deserialize_with = "de_opt_string")]
    pub tmp_dest: Option<String>,
    #[serde(default = "yes")]
    pub use_proxy: Bool,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub http_agent: Option<String>,
    /// Accepted either way: fixpoint never asks for a compressed answer, so what arrives is
    /// what Ansible gives after decompressing.
    #[serde(default = "yes")]
    pub decompress: Bool,
    #[serde(default, rename = "_env")]
    pub env: Option<Map<String, Value>>,
}

/// `checksum` split into its algorithm and its value (hex, or the URL of a checksums file).
fn split_checksum(c: &str) -> Result<(Algo, &str), ModuleError> {
    let (algo, value) = c.split_once(':').ok_or_else(|| {
        ModuleError::Params(
            "The checksum parameter has to be in format <algorithm>:<checksum>".into(),
        )
    })?;
    let algo = Algo::parse(algo).ok_or_else(|| {
        ModuleError::Params(format!(
            "checksum algorithm {algo:?} is not supported (md5, sha1, sha224, sha256, sha384, sha512 are)"
        ))
    })?;
    Ok((algo, value))
}

fn is_url(s: &str) -> bool {
    ["http://", "https://", "ftp://", "file:/"]
        .iter()
        .any(|p| s.starts_with(p))
}

/// What the probe found.
pub struct State {
    dest: PathBuf,
    dest_is_dir: bool,
    meta: Option<std::fs::Metadata>,
    /// The expected digest, resolved (from a checksums file when given by URL).
    want: Option<(Algo, String)>,
    /// `dest`'s digest in the `checksum` algorithm, when both exist.
    have: Option<String>,
}

pub enum Action {
    /// Only owner, group or mode of the existing `dest`.
    Attrs(crate::fs::Attrs),
    /// Download and replace `dest` when the content differs.
    Fetch,
}

impl Params {
    fn request(&self, url: &str, method: &str) -> Request {
        let mut r = Request::new(url, method);
        r.headers = header_pairs(&self.headers);
        r.username = self.url_username.clone();
        r.password = self.url_password.clone();
        r.force_basic_auth = self.force_basic_auth.0;
        r.timeout = super::timeout(self.timeout, 10);
        r.validate_certs = self.validate_certs.0;
        r.follow = Follow::All;
        r.use_proxy = self.use_proxy.0;
        if let Some(a) = &self.http_agent {
            r.http_agent = a.clone();
        }
        r.no_cache = self.force.0;
        r.env = env_map(&self.env);
        r
    }

    fn base_result(&self, dest: &Path) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("changed".into(), json!(false));
        m.insert("checksum_dest".into(), Value::Null);
        m.insert("checksum_src".into(), Value::Null);
        m.insert("dest".into(), json!(dest.display().to_string()));
        m.insert("elapsed".into(), json!(0));
        m.insert("url".into(), json!(mask_url(&self.url)));
        m
    }
}

fn failed(msg: impl Into<String>, result: Map<String, Value>) -> ModuleError {
    ModuleError::Failed {
        msg: msg.into(),
        result,
    }
}

/// The digest for `filename` in a checksums file (`sha256sum` or BSD `SHA256 (f) = x` lines; a
/// file holding only a digest stands for any name).
fn digest_for(filename: &str, text: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() == 1 && lines[0].split_whitespace().count() == 1 {
        return Some(lines[0].trim().to_string());
    }
    for line in lines {
        let line = line.trim_end();
        // BSD: `SHA256 (name) = digest`
        if let (Some(open), Some(eq)) = (line.find(" ("), line.rfind(") = ")) {
            if open < eq
                && line[..open]
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '_')
            {
                if &line[open + 2..eq] == filename {
                    return Some(line[eq + 4..].to_string());
                }
                continue;
            }
        }
        // GNU: `digest  name` or `digest *name`
        let mut parts = line.splitn(2, char::is_whitespace);
        let (Some(d), Some(rest)) = (parts.next(), parts.next()) else {
            continue;
        };
        let name = rest.trim_start();
        let name = name
            .strip_prefix('*')
            .unwrap_or(name)
            .trim_start_matches("./");
        if name == filename {
            return Some(d.to_string());
        }
    }
    None
}

/// Lower-case hex without separators, as Ansible normalises a checksum.
fn normalise_hex(s: &str) -> Result<String, ModuleError> {
    let h: String = s
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '_')
        .collect::<String>()
        .to_ascii_lowercase();
    if h.is_empty() || !h.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(ModuleError::failed("The checksum format is invalid"));
    }
    Ok(h)
}

impl Module for GetUrl {
    type Params = Params;
    type State = State;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if let Some(c) = p.checksum.as_deref().filter(|c| !c.is_empty()) {
            if !crate::params::is_template(c) {
                split_checksum(c)?;
            }
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<State, ModuleError> {
        let dest = expand_user(&p.dest);
        if let Some(t) = &p.tmp_dest {
            let t = expand_user(t);
            if !t.is_dir() {
                return Err(ModuleError::failed(if t.exists() {
                    format!("{} is a file but should be a directory.", t.display())
                } else {
                    format!("{} directory does not exist.", t.display())
                }));
            }
        }
        let dest_is_dir = dest.is_dir();
        let meta = lstat(&dest)?;
        let mut want = None;
        if let Some(c) = p.checksum.as_deref().filter(|c| !c.is_empty()) {
            let (algo, value) = split_checksum(c)?;
            let value = if is_url(value) {
                let text = fetch_text(p, value)?;
                let name = url_filename(&p.url);
                digest_for(&name, &text).ok_or_else(|| {
                    ModuleError::failed(format!(
                        "Unable to find a checksum for file '{name}' in '{}'",
                        mask_url(value)
                    ))
                })?
            } else {
                value.to_string()
            };
            want = Some((algo, normalise_hex(&value)?));
        }
        let have = match (&want, dest_is_dir) {
            (Some((algo, _)), false) => digest_file(&dest, &[*algo])?.map(|mut d| d.remove(0)),
            _ => None,
        };
        Ok(State {
            dest,
            dest_is_dir,
            meta,
            want,
            have,
        })
    }

    fn plan(p: &Params, s: &State, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let mut plan = Plan::new();
        plan.result = p.base_result(&s.dest);
        let exists = s.meta.is_some() && !s.dest_is_dir;
        let matches = match (&s.want, &s.have) {
            (None, _) => true,
            (Some((_, w)), Some(h)) => w == h,
            (Some(_), None) => false,
        };
        if exists && !p.force.0 && matches {
            let path = s.dest.display().to_string();
            let wanted = WantedAttrs::new(&p.mode, &p.owner, &p.group);
            let attrs = plan_attrs(&path, s.meta.as_ref(), &wanted, &mut plan.diff)?;
            let msg = if attrs.mode.is_some() || attrs.uid.is_some() || attrs.gid.is_some() {
                plan.actions.push(Action::Attrs(attrs));
                plan.result.insert("changed".into(), json!(true));
                "file already exists but file attributes changed"
            } else {
                "file already exists"
            };
            plan.result.insert("msg".into(), json!(msg));
            plan.result.extend(path_info(&s.dest)?);
            plan.msg = Some(msg.into());
            return Ok(plan);
        }
        plan.actions.push(Action::Fetch);
        plan.result.insert("changed".into(), json!(true));
        if ctx.check {
            // As Ansible: a HEAD request says whether the download would work; nothing is
            // written.
            let start = Instant::now();
            let resp = client::send(&p.request(&p.url, "HEAD"))
                .map_err(|e| failed(e.to_string(), plan.result.clone()))?;
            plan.result
                .insert("elapsed".into(), json!(start.elapsed().as_secs()));
            if resp.status != 200 {
                let mut r = plan.result.clone();
                r.remove("checksum_dest");
                r.remove("checksum_src");
                r.insert("status_code".into(), json!(resp.status));
                r.insert("response".into(), json!(resp.msg()));
                return Err(failed("Request failed", r));
            }
            let dest = final_dest(s, &resp);
            plan.result
                .insert("dest".into(), json!(dest.display().to_string()));
            plan.result.insert("msg".into(), json!(resp.msg()));
            // ansible-core hashes the temp file it never filled: the sha1 of nothing.
            plan.result
                .insert("checksum_src".into(), json!(SHA1_OF_NOTHING));
            if let Some(mut d) = digest_file(&dest, &[Algo::Sha1])? {
                plan.result
                    .insert("checksum_dest".into(), json!(d.remove(0)));
                plan.result.extend(path_info(&dest)?);
            }
            plan.msg = Some(resp.msg());
            let after = format!("downloaded from {}", mask_url(&p.url));
            plan.diff
                .attr(dest.display().to_string(), "content", "", after);
        }
        Ok(plan)
    }

    fn apply(p: &Params, s: State, plan: &Plan<Action>) -> Result<Map<String, Value>, ModuleError> {
        match plan.actions.first() {
            Some(Action::Attrs(attrs)) => {
                let loc = locate(&s.dest, s.meta.as_ref().map(id_of))?;
                set_attrs_at(&loc, attrs)?;
                let mut out = path_info(&s.dest)?;
                out.insert("changed".into(), json!(true));
                Ok(out)
            }
            Some(Action::Fetch) => fetch(p, &s, plan.result.clone()),
            None => Ok(Map::new()),
        }
    }
}

/// The sha1 of no bytes: what ansible-core's get_url reports as `checksum_src` in check mode.
const SHA1_OF_NOTHING: &str = "da39a3ee5e6b4b0d3255bfef95601890afd80709";

/// `dest` itself, or for a directory the file the answer names in it.
fn final_dest(s: &State, resp: &client::Response) -> PathBuf {
    if !s.dest_is_dir {
        return s.dest.clone();
    }
    let name = disposition_filename(resp.header("content-disposition"))
        .unwrap_or_else(|| url_filename(&resp.url));
    s.dest.join(name)
}

/// A small text file (a checksums file) from `url`, with the task's connection settings.
fn fetch_text(p: &Params, url: &str) -> Result<String, ModuleError> {
    let resp =
        client::send(&p.request(url, "GET")).map_err(|e| ModuleError::failed(e.to_string()))?;
    if resp.status != 200 {
        return Err(ModuleError::failed(format!(
            "Request failed: {} ({})",
            resp.msg(),
            mask_url(url)
        )));
    }
    let mut body = resp.body;
    let bytes = super::read_limited(&mut body)
        .map_err(|e| ModuleError::failed(format!("reading {}: {e}", mask_url(url))))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// GET into a temp file beside the destination, check it, and install it when it differs.
fn fetch(
    p: &Params,
    s: &State,
    mut result: Map<String, Value>,
) -> Result<Map<String, Value>, ModuleError> {
    let start = Instant::now();
    let resp = client::send(&p.request(&p.url, "GET")).map_err(|e| {
        result.insert("elapsed".into(), json!(start.elapsed().as_secs()));
        failed(e.to_string(), result.clone())
    })?;
    if resp.status != 200 {
        // Nothing was downloaded: ansible-core's failed result names no checksums.
        result.remove("checksum_dest");
        result.remove("checksum_src");
        result.insert("elapsed".into(), json!(start.elapsed().as_secs()));
        result.insert("status_code".into(), json!(resp.status));
        result.insert("response".into(), json!(resp.msg()));
        return Err(failed("Request failed", result));
    }
    let dest = final_dest(s, &resp);
    result.insert("dest".into(), json!(dest.display().to_string()));
    let meta = lstat(&dest)?;
    if meta.as_ref().is_some_and(|m| m.is_dir()) {
        return Err(failed(
            format!("Destination {} is a directory", dest.display()),
            result,
        ));
    }
    let loc = locate(&dest, meta.as_ref().map(id_of))?;
    let dir = Dir::open(&loc.dir).map_err(|e| {
        failed(
            format!("Destination {} does not exist ({e})", loc.dir.display()),
            result.clone(),
        )
    })?;
    let (mut tmp, tmp_name) = dir.create_temp(".fixpoint.", ".download")?;
    let tmp_path = dir.at(&tmp_name);
    result.insert("src".into(), json!(tmp_path.display().to_string()));
    let msg = resp.msg();
    let gzip = resp
        .header("content-encoding")
        .is_some_and(|e| e.eq_ignore_ascii_case("gzip"));
    let length: Option<u64> = resp.header("content-length").and_then(|l| l.parse().ok());
    let mut algos = vec![Algo::Sha1, Algo::Md5];
    if let Some((a, _)) = &s.want {
        algos.push(*a);
    }
    let mut tee = Tee {
        inner: resp.body,
        out: &mut tmp,
        written: 0,
    };
    let digests = super::digest_reader(&mut tee, &algos);
    let written = tee.written;
    let cleanup = |e: ModuleError| {
        let _ = dir.unlink(&tmp_name);
        e
    };
    let digests = digests.map_err(|e| {
        cleanup(failed(
            format!("failed to create temporary content file: {e}"),
            result.clone(),
        ))
    })?;
    result.insert("elapsed".into(), json!(start.elapsed().as_secs()));
    if let (Some(l), false) = (length, gzip) {
        if l != written {
            return Err(cleanup(failed(
                format!(
                    "Incomplete read, (content-length {l}, {written} bytes read) failed to read remaining {} bytes",
                    l.saturating_sub(written)
                ),
                result,
            )));
        }
    }
    let checksum_src = digests[0].clone();
    result.insert("checksum_src".into(), json!(checksum_src));
    if let Some((_, want)) = &s.want {
        if &digests[2] != want {
            return Err(cleanup(failed(
                format!(
                    "The checksum for {} did not match {want}; it was {}.",
                    tmp_path.display(),
                    digests[2]
                ),
                result,
            )));
        }
    }
    let checksum_dest = if meta.is_some() {
        digest_file(&dest, &[Algo::Sha1])
            .map_err(cleanup)?
            .map(|mut d| d.remove(0))
    } else {
        None
    };
    result.insert("checksum_dest".into(), json!(checksum_dest));
    let mut diff = Diff::default();
    let wanted = WantedAttrs::new(&p.mode, &p.owner, &p.group);
    let path = dest.display().to_string();
    let changed;
    if checksum_dest.as_deref() == Some(checksum_src.as_str()) {
        let _ = dir.unlink(&tmp_name);
        let attrs = plan_attrs(&path, meta.as_ref(), &wanted, &mut diff)?;
        changed = !diff.is_empty();
        if changed {
            set_attrs_at(&loc, &attrs)?;
        }
    } else {
        tmp.flush()
            .map_err(|e| cleanup(ModuleError::io(&tmp_path, e)))?;
        if p.backup.0 && meta.is_some() {
            let b = backup_file(&loc).map_err(cleanup)?;
            result.insert("backup_file".into(), json!(b));
        }
        let attrs = plan_attrs(&path, meta.as_ref(), &wanted, &mut diff).map_err(cleanup)?;
        install_temp(&loc, &dir, &tmp, &tmp_name, &attrs)?;
        changed = true;
    }
    result.insert("changed".into(), json!(changed));
    result.insert("md5sum".into(), json!(digests[1]));
    result.insert("msg".into(), json!(msg));
    result.insert("status_code".into(), json!(200));
    result.extend(path_info(&dest)?);
    Ok(result)
}

/// Copies what it reads into `out`, counting the bytes.
struct Tee<'a, R: Read> {
    inner: R,
    out: &'a mut std::fs::File,
    written: u64,
}

impl<R: Read> Read for Tee<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.out.write_all(&buf[..n])?;
        self.written += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_files_gnu_bsd_and_bare() {
        let gnu = "abc123  other.tar.gz\ndef456 *app.tar.gz\n";
        assert_eq!(digest_for("app.tar.gz", gnu).as_deref(), Some("def456"));
        let bsd = "SHA256 (app.tar.gz) = 0a1b\nSHA256 (x) = ff\n";
        assert_eq!(digest_for("app.tar.gz", bsd).as_deref(), Some("0a1b"));
        assert_eq!(digest_for("any", "cafe\n").as_deref(), Some("cafe"));
        assert_eq!(digest_for("none", gnu), None);
        assert_eq!(normalise_hex("AB:CD").unwrap(), "abcd");
        assert!(normalise_hex("xyz").is_err());
    }

    #[test]
    fn checksum_parameter_is_checked_at_load() {
        let p: Params = serde_json::from_value(json!({
            "url": "http://h/x", "dest": "/tmp/x", "checksum": "sha256"
        }))
        .unwrap();
        assert!(GetUrl::validate(&p).is_err());
        let p: Params = serde_json::from_value(json!({
            "url": "http://h/x", "dest": "/tmp/x", "checksum": "crc32:00"
        }))
        .unwrap();
        assert!(GetUrl::validate(&p).is_err());
    }
}
