//! `find`'s `encoding`: a Python codec name (what ansible-core's `open(..., encoding=)` takes)
//! to the decoder that reads a file for `contains`.
//!
//! Python looks a name up after normalizing it (lower case, every run of punctuation or blanks
//! one `_`), through its alias table; the names below are those aliases for the codecs the host
//! C library's `iconv` decodes as Python does (GBK, Shift_JIS, Big5, the Windows and ISO 8859
//! code pages...): glibc carries those tables, so the agent ships none (a decoding crate would
//! add its CJK tables to what every host receives). UTF-8, UTF-8 with a signature, UTF-16 with a
//! byte-order mark, Latin-1 and ASCII are decoded here. A name outside the table is what Python
//! calls an unknown encoding; as in ansible-core, that is an error only when a file is read (the
//! path is skipped, `unknown encoding: <name>`). Python's other text codecs, named as their
//! modules are (`cp437`, `mac_roman`...), are refused as unsupported rather than taken for
//! unknown names. A host whose C library lacks the table (no glibc `gconv` modules) cannot
//! decode such a file, which is then skipped as undecodable.

use std::ffi::CString;

/// How the files are decoded.
#[derive(Clone, Copy, Debug)]
pub(super) enum Codec {
    /// No `encoding`: Python's default for `open`, UTF-8 here.
    Default,
    Utf8,
    /// Python's `utf-8-sig`: UTF-8 whose byte-order mark, if any, goes.
    Utf8Sig,
    Latin1,
    Ascii,
    /// Python's `utf-16`: a byte-order mark says the order (and goes), little-endian without.
    Utf16,
    /// Decoded by the C library's `iconv`, from the charset it names so.
    Iconv(&'static str),
    /// A name Python does not know.
    Unknown,
    /// One of Python's other text codecs (by its module name): refused, not taken for unknown.
    Unsupported,
}

/// Python's text codecs (`encodings/<name>.py`) that no decoder here reads as Python does.
const NOT_DECODED: &[&str] = &[
    "big5hkscs",
    "charmap",
    "cp037",
    "cp1006",
    "cp1026",
    "cp1125",
    "cp1140",
    "cp273",
    "cp424",
    "cp437",
    "cp500",
    "cp720",
    "cp737",
    "cp775",
    "cp850",
    "cp852",
    "cp855",
    "cp856",
    "cp857",
    "cp858",
    "cp860",
    "cp861",
    "cp862",
    "cp863",
    "cp864",
    "cp865",
    "cp869",
    "cp874",
    "cp875",
    "cp950",
    "euc_jis_2004",
    "euc_jisx0213",
    "gb2312",
    "hp_roman8",
    "hz",
    "idna",
    "iso2022_jp_1",
    "iso2022_jp_2",
    "iso2022_jp_2004",
    "iso2022_jp_3",
    "iso2022_jp_ext",
    "iso2022_kr",
    "iso8859_9",
    "iso8859_11",
    "johab",
    "koi8_t",
    "kz1048",
    "mac_arabic",
    "mac_croatian",
    "mac_cyrillic",
    "mac_farsi",
    "mac_greek",
    "mac_iceland",
    "mac_latin2",
    "mac_roman",
    "mac_romanian",
    "mac_turkish",
    "palmos",
    "ptcp154",
    "punycode",
    "raw_unicode_escape",
    "shift_jis_2004",
    "shift_jisx0213",
    "tis_620",
    "unicode_escape",
    "utf_32",
    "utf_32_be",
    "utf_32_le",
    "utf_7",
];

/// Python's `encodings.normalize_encoding`, lower-cased as `codecs.lookup` does first.
fn normalize(name: &str) -> String {
    let mut out = String::new();
    let mut punct = false;
    for c in name.chars() {
        if c.is_alphanumeric() || c == '.' {
            if punct && !out.is_empty() {
                out.push('_');
            }
            punct = false;
            out.extend(c.to_lowercase());
        } else {
            punct = true;
        }
    }
    out
}

/// The codec Python's name stands for.
pub(super) fn lookup(name: Option<&str>) -> Codec {
    let Some(name) = name else {
        return Codec::Default;
    };
    let n = normalize(name);
    // Python also tries the name with its dots made underscores.
    let n = n.replace('.', "_");
    let iconv = Codec::Iconv;
    match n.as_str() {
        "utf_8" | "utf8" | "u8" | "utf" | "utf8_ucs2" | "utf8_ucs4" | "cp65001" => Codec::Utf8,
        "latin_1" | "latin1" | "latin" | "l1" | "iso_8859_1" | "iso8859_1" | "8859" | "cp819"
        | "iso_ir_100" | "iso_8859_1_1987" | "csisolatin1" | "ibm819" => Codec::Latin1,
        "ascii" | "646" | "us_ascii" | "ansi_x3_4_1968" | "ansi_x3_4_1986" | "iso646_us" | "us"
        | "ibm367" | "cp367" | "csascii" | "iso_646_irv_1991" | "iso_ir_6" => Codec::Ascii,
        "gbk" | "936" | "cp936" | "ms936" => iconv("GBK"),
        "gb18030" | "gb18030_2000" => iconv("GB18030"),
        "big5" | "big5_tw" | "csbig5" => iconv("BIG5"),
        "shift_jis" | "sjis" | "s_jis" | "csshiftjis" => iconv("SHIFT_JIS"),
        "cp932" | "932" | "ms932" | "mskanji" | "ms_kanji" => iconv("CP932"),
        "euc_jp" | "eucjp" | "ujis" | "u_jis" => iconv("EUC-JP"),
        "iso2022_jp" | "csiso2022jp" | "iso2022jp" | "iso_2022_jp" => iconv("ISO-2022-JP"),
        "euc_kr" | "euckr" | "korean" | "ksc5601" | "ks_c_5601" | "ks_c_5601_1987" | "ksx1001"
        | "ks_x_1001" => iconv("EUC-KR"),
        "cp949" | "949" | "ms949" | "uhc" => iconv("CP949"),
        "koi8_r" => iconv("KOI8-R"),
        "koi8_u" => iconv("KOI8-U"),
        "cp866" | "866" | "ibm866" => iconv("CP866"),
        "utf_8_sig" | "utf8_sig" => Codec::Utf8Sig,
        "utf_16" | "u16" | "utf16" => Codec::Utf16,
        "utf_16_le" | "utf_16le" => iconv("UTF-16LE"),
        "utf_16_be" | "utf_16be" => iconv("UTF-16BE"),
        other if NOT_DECODED.contains(&other) => Codec::Unsupported,
        other => windows_or_iso(other).map_or(Codec::Unknown, iconv),
    }
}

/// `cp1250`…`cp1258` (`windows_125x`) and the ISO 8859 parts, as `iconv` names them.
fn windows_or_iso(n: &str) -> Option<&'static str> {
    const WINDOWS: [&str; 9] = [
        "CP1250", "CP1251", "CP1252", "CP1253", "CP1254", "CP1255", "CP1256", "CP1257", "CP1258",
    ];
    if let Some(d) = n
        .strip_prefix("cp125")
        .or_else(|| n.strip_prefix("windows_125"))
    {
        let i: usize = d.parse().ok()?;
        return WINDOWS.get(i).copied();
    }
    let part = n
        .strip_prefix("iso8859_")
        .or_else(|| n.strip_prefix("iso_8859_"))?;
    const ISO: [(&str, &str); 12] = [
        ("2", "ISO-8859-2"),
        ("3", "ISO-8859-3"),
        ("4", "ISO-8859-4"),
        ("5", "ISO-8859-5"),
        ("6", "ISO-8859-6"),
        ("7", "ISO-8859-7"),
        ("8", "ISO-8859-8"),
        ("10", "ISO-8859-10"),
        ("13", "ISO-8859-13"),
        ("14", "ISO-8859-14"),
        ("15", "ISO-8859-15"),
        ("16", "ISO-8859-16"),
    ];
    ISO.iter().find(|(p, _)| *p == part).map(|(_, l)| *l)
}

/// The text of a file's bytes, or None when they are not valid in the codec (Python's
/// `UnicodeDecodeError`). `Unknown` is the caller's to refuse.
pub(super) fn decode(codec: Codec, bytes: Vec<u8>) -> Option<String> {
    match codec {
        Codec::Default | Codec::Utf8 | Codec::Unknown | Codec::Unsupported => {
            String::from_utf8(bytes).ok()
        }
        Codec::Utf8Sig => {
            let rest = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&bytes);
            String::from_utf8(rest.to_vec()).ok()
        }
        Codec::Latin1 => Some(bytes.iter().map(|&b| b as char).collect()),
        Codec::Ascii => bytes
            .is_ascii()
            .then(|| bytes.iter().map(|&b| b as char).collect()),
        // Python's `utf-16`: the byte-order mark says the order and goes; without one, the
        // machine's order (little-endian here).
        Codec::Utf16 => match bytes.get(..2) {
            Some([0xfe, 0xff]) => iconv("UTF-16BE", &bytes[2..]),
            Some([0xff, 0xfe]) => iconv("UTF-16LE", &bytes[2..]),
            _ => iconv("UTF-16LE", &bytes),
        },
        // UTF-16 with its order given keeps a byte-order mark as text, as Python does.
        Codec::Iconv(charset) => iconv(charset, &bytes),
    }
}

/// `bytes` decoded from `charset` by the C library's `iconv`: None when they are not valid in
/// it (or the library lacks the charset).
fn iconv(charset: &str, bytes: &[u8]) -> Option<String> {
    let from = CString::new(charset).ok()?;
    // SAFETY: both names are NUL-terminated C strings that outlive the call.
    let cd = unsafe { nix::libc::iconv_open(c"UTF-8".as_ptr(), from.as_ptr()) };
    if cd as isize == -1 {
        return None;
    }
    // Every charset here takes at least one byte for a character UTF-8 writes in at most four,
    // and an escape sequence writes nothing: the output cannot run out of room.
    let mut out = vec![0u8; bytes.len() * 4 + 16];
    let mut inp = bytes.as_ptr().cast_mut().cast::<nix::libc::c_char>();
    let mut in_left = bytes.len();
    let mut outp = out.as_mut_ptr().cast::<nix::libc::c_char>();
    let mut out_left = out.len();
    // SAFETY: the pointers and counts describe `bytes` (which iconv only reads) and `out`, both
    // alive for the calls; the second call (null input) ends a stateful charset's shift state.
    let ok = unsafe {
        nix::libc::iconv(cd, &mut inp, &mut in_left, &mut outp, &mut out_left) != usize::MAX
            && nix::libc::iconv(
                cd,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut outp,
                &mut out_left,
            ) != usize::MAX
    };
    // SAFETY: `cd` came from iconv_open and is closed once.
    unsafe { nix::libc::iconv_close(cd) };
    if !ok || in_left != 0 {
        return None;
    }
    out.truncate(out.len() - out_left);
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_names_find_their_codec() {
        assert!(matches!(lookup(Some("UTF-8")), Codec::Utf8));
        assert!(matches!(lookup(Some("Latin-1")), Codec::Latin1));
        assert!(matches!(lookup(Some("iso-8859-1")), Codec::Latin1));
        assert!(matches!(lookup(Some("gbk")), Codec::Iconv("GBK")));
        assert!(matches!(lookup(Some("CP936")), Codec::Iconv("GBK")));
        assert!(matches!(
            lookup(Some("windows-1251")),
            Codec::Iconv("CP1251")
        ));
        assert!(matches!(
            lookup(Some("iso8859_15")),
            Codec::Iconv("ISO-8859-15")
        ));
        assert!(matches!(lookup(Some("idontexist")), Codec::Unknown));
        assert!(matches!(lookup(Some("iso8859_9")), Codec::Unsupported));
        assert!(matches!(lookup(Some("mac-roman")), Codec::Unsupported));
        assert!(matches!(lookup(Some("cp1259")), Codec::Unknown));
        assert!(matches!(lookup(None), Codec::Default));
    }

    #[test]
    fn decoding_fails_where_python_raises() {
        // 你好 in GBK.
        let gbk = vec![0xc4, 0xe3, 0xba, 0xc3];
        assert_eq!(
            decode(lookup(Some("gbk")), gbk.clone()).as_deref(),
            Some("你好")
        );
        assert_eq!(decode(lookup(Some("utf-8")), gbk), None);
        assert_eq!(decode(lookup(Some("gbk")), vec![0x81]), None);
        assert_eq!(decode(Codec::Latin1, vec![0x80]).as_deref(), Some("\u{80}"));
        assert_eq!(decode(Codec::Ascii, vec![0x80]), None);
        assert_eq!(
            decode(lookup(Some("utf-16")), vec![0xfe, 0xff, 0, b'a']).as_deref(),
            Some("a")
        );
        assert_eq!(
            decode(lookup(Some("utf-16")), vec![b'a', 0]).as_deref(),
            Some("a")
        );
        assert_eq!(
            decode(lookup(Some("utf_16_le")), vec![0xff, 0xfe, b'a', 0]).as_deref(),
            Some("\u{feff}a")
        );
        assert_eq!(
            decode(lookup(Some("utf-8-sig")), b"\xef\xbb\xbfa".to_vec()).as_deref(),
            Some("a")
        );
        // 0x80 is the euro sign in cp1252; ISO-2022-JP's escapes select JIS X 0208.
        assert_eq!(
            decode(lookup(Some("cp1252")), vec![0x80]).as_deref(),
            Some("€")
        );
        assert_eq!(
            decode(lookup(Some("iso2022_jp")), b"\x1b$B$3$s\x1b(B!".to_vec()).as_deref(),
            Some("こん!")
        );
    }
}
