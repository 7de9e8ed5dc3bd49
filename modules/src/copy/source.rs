//! Where the new content of a `copy` comes from (`content`, the controller's bytes or upload, or a
//! file on the host with `remote_src`), and the hashes of files it compares.

use super::Params;
use crate::fs::expand_user;
use crate::ModuleError;
use base64::Engine as _;
use serde_json::Value;
use sha2::Digest as _;
use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The new content, or where to get it.
#[derive(Debug)]
pub enum Data {
    /// Given in the request (`content`, `_content_b64`, a rendered template).
    Bytes(Vec<u8>),
    /// A file on the host (`remote_src`), streamed when written.
    Host(PathBuf),
    /// A controller file known by its sha256: its bytes are uploaded only when needed.
    Controller,
}

/// Where the new content comes from.
pub(super) struct Source {
    pub(super) data: Data,
    pub(super) sha256: String,
    pub(super) sha1: String,
    pub(super) size: u64,
    /// The source file's permission bits, when there is a source file.
    pub(super) mode: Option<u32>,
    /// The file name used when `dest` is a directory.
    pub(super) name: Option<String>,
}

/// sha256 (hex) and size of a file, read in chunks: memory stays flat whatever its size.
pub(super) fn sha256_of_file(path: &Path) -> Result<(String, u64), ModuleError> {
    let mut f = fs::File::open(path).map_err(|e| ModuleError::io(path, e))?;
    let mut h = sha2::Sha256::new();
    let n = std::io::copy(&mut f, &mut h).map_err(|e| ModuleError::io(path, e))?;
    Ok((hex::encode(h.finalize()), n))
}

/// md5 (hex) of a file, read in chunks.
pub(super) fn md5_of_file(path: &Path) -> Result<String, ModuleError> {
    let mut f = fs::File::open(path).map_err(|e| ModuleError::io(path, e))?;
    let mut h = md5::Md5::new();
    std::io::copy(&mut f, &mut h).map_err(|e| ModuleError::io(path, e))?;
    Ok(hex::encode(h.finalize()))
}

/// sha1 (hex) of a file, read in chunks.
pub(super) fn sha1_of_file(path: &Path) -> Result<String, ModuleError> {
    let mut f = fs::File::open(path).map_err(|e| ModuleError::io(path, e))?;
    let mut h = sha1::Sha1::new();
    std::io::copy(&mut f, &mut h).map_err(|e| ModuleError::io(path, e))?;
    Ok(hex::encode(h.finalize()))
}

fn bytes_source(data: Vec<u8>, mode: Option<u32>, name: Option<String>) -> Source {
    Source {
        sha256: hex::encode(sha2::Sha256::digest(&data)),
        sha1: hex::encode(sha1::Sha1::digest(&data)),
        size: data.len() as u64,
        data: Data::Bytes(data),
        mode,
        name,
    }
}

/// The new content from `content`, `_content_b64`, `_src_sha256` or (with `remote_src`) the
/// host file `src`.
pub(super) fn source(p: &Params) -> Result<Source, ModuleError> {
    if let Some(content) = &p.content {
        let text = match content {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        return Ok(bytes_source(
            text.into_bytes(),
            p.src_mode,
            p.src_name.clone(),
        ));
    }
    let src_name = || {
        p.src_name
            .clone()
            .or_else(|| p.src.as_deref().and_then(base_name))
    };
    if let Some(b64) = &p.content_b64 {
        let data = base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .map_err(|e| ModuleError::Params(format!("`_content_b64` is not valid base64: {e}")))?;
        return Ok(bytes_source(data, p.src_mode, src_name()));
    }
    if let (Some(sha256), Some(size)) = (&p.src_sha256, p.src_size) {
        if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ModuleError::Params(format!(
                "`_src_sha256` is not a sha256 in hex: {sha256}"
            )));
        }
        return Ok(Source {
            data: Data::Controller,
            sha256: sha256.to_ascii_lowercase(),
            // The controller always sends it; a request without it gets the sha256 instead.
            sha1: p.src_sha1.as_deref().unwrap_or(sha256).to_ascii_lowercase(),
            size,
            mode: p.src_mode,
            name: src_name(),
        });
    }
    let src = p.src.as_deref().unwrap_or_default();
    if !p.remote_src.0 {
        return Err(ModuleError::Params(format!(
            "src `{src}` is a file on the controller, but its content did not arrive; set \
             remote_src: true if the file is already on the host"
        )));
    }
    let path = expand_user(src);
    if !path.is_absolute() {
        return Err(ModuleError::Params(format!(
            "with remote_src: true, `src` must be an absolute path on the host, got `{src}`"
        )));
    }
    let meta = match fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(ModuleError::failed(format!("Source {src} not found")))
        }
        Err(e) => return Err(ModuleError::io(&path, e)),
    };
    if meta.is_dir() {
        return Err(ModuleError::failed(format!(
            "Cannot copy {src}: it is a directory (copied by `copy_remote_tree`, which the \
             registry picks for a `copy` of a directory)"
        )));
    }
    if !meta.is_file() {
        return Err(ModuleError::failed(format!(
            "Cannot copy invalid source '{src}': not a file"
        )));
    }
    let (sha256, size) = sha256_of_file(&path)?;
    let sha1 = sha1_of_file(&path)?;
    Ok(Source {
        data: Data::Host(path),
        sha256,
        sha1,
        size,
        mode: Some(meta.mode() & 0o7777),
        name: base_name(src),
    })
}

fn base_name(path: &str) -> Option<String> {
    Path::new(path.trim_end_matches('/'))
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
}
