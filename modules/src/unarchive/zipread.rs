//! A small zip reader for `unarchive`: the central directory (names, unix modes, times, sizes)
//! and each entry's data, stored or deflated (flate2), its CRC-32 checked. Zip64, encrypted
//! entries and other compression methods are refused. Written here rather than taken from the
//! `zip` crate, whose size the agent (shipped to every host) would carry.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

/// One entry of the central directory.
#[derive(Clone, Debug)]
pub struct ZipEntry {
    pub name: String,
    method: u16,
    /// The CRC-32 of the uncompressed data.
    pub crc: u32,
    csize: u64,
    pub size: u64,
    /// The unix mode (type and permission bits) when a unix zip recorded it.
    pub unix_mode: Option<u32>,
    /// Seconds since the epoch: the extended timestamp (UTC), else the DOS time taken as UTC.
    pub mtime: i64,
    offset: u64,
}

impl ZipEntry {
    pub fn is_dir(&self) -> bool {
        self.name.ends_with('/') || self.unix_mode.is_some_and(|m| m & 0o170000 == 0o040000)
    }

    pub fn is_symlink(&self) -> bool {
        self.unix_mode.is_some_and(|m| m & 0o170000 == 0o120000)
    }
}

fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[i], b[i + 1]])
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

fn dos_time(date: u16, time: u16) -> i64 {
    let (y, m, d) = (
        i64::from(date >> 9) + 1980,
        i64::from((date >> 5) & 0xf),
        i64::from(date & 0x1f),
    );
    let (h, mi, s) = (
        i64::from(time >> 11),
        i64::from((time >> 5) & 0x3f),
        i64::from(time & 0x1f) * 2,
    );
    days_from_civil(y, m.max(1), d.max(1)) * 86400 + h * 3600 + mi * 60 + s
}

/// The mtime of an extended-timestamp extra field (0x5455), if the extra data has one.
fn extended_mtime(mut extra: &[u8]) -> Option<i64> {
    while extra.len() >= 4 {
        let (id, len) = (u16_at(extra, 0), usize::from(u16_at(extra, 2)));
        let data = extra.get(4..4 + len)?;
        if id == 0x5455 && data.len() >= 5 && data[0] & 1 != 0 {
            return Some(i64::from(i32::from_le_bytes([
                data[1], data[2], data[3], data[4],
            ])));
        }
        extra = &extra[4 + len..];
    }
    None
}

/// Every entry of the central directory, in order.
pub fn entries(f: &mut File) -> Result<Vec<ZipEntry>, String> {
    let len = f.seek(SeekFrom::End(0)).map_err(|e| e.to_string())?;
    // The end record is 22 bytes plus a comment of at most 65535.
    let tail_len = len.min(22 + 65535);
    f.seek(SeekFrom::Start(len - tail_len))
        .map_err(|e| e.to_string())?;
    let mut tail = vec![0u8; tail_len as usize];
    f.read_exact(&mut tail).map_err(|e| e.to_string())?;
    let end = (0..tail.len().saturating_sub(21))
        .rev()
        .find(|i| tail[*i..].starts_with(b"PK\x05\x06"))
        .ok_or("no end of central directory record: not a zip file, or a damaged one")?;
    let e = &tail[end..];
    let (count, cd_size, cd_off) = (u16_at(e, 10), u32_at(e, 12), u32_at(e, 16));
    if count == 0xffff || cd_off == 0xffff_ffff || cd_size == 0xffff_ffff {
        return Err("zip64 archives are not supported".into());
    }
    f.seek(SeekFrom::Start(u64::from(cd_off)))
        .map_err(|e| e.to_string())?;
    let mut cd = vec![0u8; cd_size as usize];
    f.read_exact(&mut cd)
        .map_err(|e| format!("the central directory is cut short: {e}"))?;
    let mut out = Vec::with_capacity(usize::from(count));
    let mut i = 0;
    for _ in 0..count {
        let h = cd
            .get(i..i + 46)
            .filter(|h| h.starts_with(b"PK\x01\x02"))
            .ok_or("a damaged central directory")?;
        let (made_by, flags, method) = (u16_at(h, 4), u16_at(h, 8), u16_at(h, 10));
        let (time, date, crc) = (u16_at(h, 12), u16_at(h, 14), u32_at(h, 16));
        let (csize, size) = (u32_at(h, 20), u32_at(h, 24));
        let (n, x, c) = (
            usize::from(u16_at(h, 28)),
            usize::from(u16_at(h, 30)),
            usize::from(u16_at(h, 32)),
        );
        let (attrs, offset) = (u32_at(h, 38), u32_at(h, 42));
        let name_bytes = cd
            .get(i + 46..i + 46 + n)
            .ok_or("a damaged central directory")?;
        let name = String::from_utf8_lossy(name_bytes).into_owned();
        let extra = cd.get(i + 46 + n..i + 46 + n + x).unwrap_or_default();
        if flags & 1 != 0 {
            return Err(format!("entry `{name}` is encrypted"));
        }
        if method != 0 && method != 8 {
            return Err(format!(
                "entry `{name}` uses compression method {method} (only stored and deflate are read)"
            ));
        }
        if csize == 0xffff_ffff || size == 0xffff_ffff || offset == 0xffff_ffff {
            return Err("zip64 archives are not supported".into());
        }
        out.push(ZipEntry {
            unix_mode: (made_by >> 8 == 3 && attrs >> 16 != 0).then_some(attrs >> 16),
            mtime: extended_mtime(extra).unwrap_or_else(|| dos_time(date, time)),
            name,
            method,
            crc,
            csize: u64::from(csize),
            size: u64::from(size),
            offset: u64::from(offset),
        });
        i += 46 + n + x + c;
    }
    Ok(out)
}

/// An entry's data that fails its last read when the CRC-32 or the size is wrong, so a
/// damaged entry fails while it is copied, before the copy is renamed into place.
struct Checked<'a> {
    inner: flate2::CrcReader<Box<dyn Read + 'a>>,
    crc: u32,
    size: u64,
    name: &'a str,
}

impl Read for Checked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && !buf.is_empty() {
            let c = self.inner.crc();
            if c.sum() != self.crc || u64::from(c.amount()) != self.size & 0xffff_ffff {
                return Err(std::io::Error::other(format!(
                    "entry `{}`: its data does not match its CRC-32 (a damaged archive)",
                    self.name
                )));
            }
        }
        Ok(n)
    }
}

/// Call `use_data` with the entry's uncompressed data, which fails its last read when damaged;
/// whatever the caller leaves unread is checked too.
pub fn with_data<T>(
    f: &mut File,
    e: &ZipEntry,
    use_data: impl FnOnce(&mut dyn Read) -> T,
) -> Result<T, String> {
    f.seek(SeekFrom::Start(e.offset))
        .map_err(|x| x.to_string())?;
    let mut h = [0u8; 30];
    f.read_exact(&mut h).map_err(|x| x.to_string())?;
    if !h.starts_with(b"PK\x03\x04") {
        return Err(format!("entry `{}`: a damaged local header", e.name));
    }
    let skip = u64::from(u16_at(&h, 26)) + u64::from(u16_at(&h, 28));
    f.seek(SeekFrom::Current(skip as i64))
        .map_err(|x| x.to_string())?;
    let raw = Read::take(&mut *f, e.csize);
    let inner: Box<dyn Read + '_> = if e.method == 8 {
        Box::new(flate2::read::DeflateDecoder::new(raw))
    } else {
        Box::new(raw)
    };
    let mut checked = Checked {
        inner: flate2::CrcReader::new(inner),
        crc: e.crc,
        size: e.size,
        name: &e.name,
    };
    let out = use_data(&mut checked);
    std::io::copy(&mut checked, &mut std::io::sink()).map_err(|x| x.to_string())?;
    Ok(out)
}
