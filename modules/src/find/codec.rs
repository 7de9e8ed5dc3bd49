//! `find`'s `encoding`: a Python codec name (what ansible-core's `open(..., encoding=)` takes)
//! to the decoder that reads a file for `contains`.
//!
//! Python looks a name up after normalizing it (lower case, every run of punctuation or blanks
//! one `_`), through its alias table; the names below are those aliases for the codecs whose
//! decoding a WHATWG decoder of `encoding_rs` does (GBK, Shift_JIS, Big5, the Windows and
//! ISO 8859 code pages...). Latin-1 and ASCII are decoded here: the WHATWG labels `latin1` and
//! `ascii` mean windows-1252, which reads 0x80–0x9F otherwise than Python. A name outside the
//! table is what Python calls an unknown encoding; as in ansible-core, that is an error only
//! when a file is read (the path is skipped, `unknown encoding: <name>`). Python's other text
//! codecs, named as their modules are (`cp437`, `mac_roman`...), are refused as unsupported
//! rather than taken for unknown names.

use encoding_rs::Encoding;

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
    Whatwg(&'static Encoding),
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
    let whatwg =
        |label: &str| Codec::Whatwg(Encoding::for_label(label.as_bytes()).expect("a WHATWG label"));
    match n.as_str() {
        "utf_8" | "utf8" | "u8" | "utf" | "utf8_ucs2" | "utf8_ucs4" | "cp65001" => Codec::Utf8,
        "latin_1" | "latin1" | "latin" | "l1" | "iso_8859_1" | "iso8859_1" | "8859" | "cp819"
        | "iso_ir_100" | "iso_8859_1_1987" | "csisolatin1" | "ibm819" => Codec::Latin1,
        "ascii" | "646" | "us_ascii" | "ansi_x3_4_1968" | "ansi_x3_4_1986" | "iso646_us" | "us"
        | "ibm367" | "cp367" | "csascii" | "iso_646_irv_1991" | "iso_ir_6" => Codec::Ascii,
        "gbk" | "936" | "cp936" | "ms936" => whatwg("gbk"),
        "gb18030" | "gb18030_2000" => whatwg("gb18030"),
        "big5" | "big5_tw" | "csbig5" => whatwg("big5"),
        "shift_jis" | "sjis" | "s_jis" | "csshiftjis" | "cp932" | "932" | "ms932" | "mskanji"
        | "ms_kanji" => whatwg("shift_jis"),
        "euc_jp" | "eucjp" | "ujis" | "u_jis" => whatwg("euc-jp"),
        "iso2022_jp" | "csiso2022jp" | "iso2022jp" | "iso_2022_jp" => whatwg("iso-2022-jp"),
        "euc_kr" | "euckr" | "korean" | "ksc5601" | "ks_c_5601" | "ks_c_5601_1987" | "ksx1001"
        | "ks_x_1001" | "cp949" | "949" | "ms949" | "uhc" => whatwg("euc-kr"),
        "koi8_r" => whatwg("koi8-r"),
        "cp866" | "866" | "ibm866" => whatwg("ibm866"),
        "utf_8_sig" | "utf8_sig" => Codec::Utf8Sig,
        "koi8_u" => whatwg("koi8-u"),
        "utf_16" | "u16" | "utf16" => Codec::Utf16,
        "utf_16_le" | "utf_16le" => whatwg("utf-16le"),
        "utf_16_be" | "utf_16be" => whatwg("utf-16be"),
        other if NOT_DECODED.contains(&other) => Codec::Unsupported,
        other => windows_or_iso(other).map_or(Codec::Unknown, whatwg),
    }
}

/// `cp1250`…`cp1258` (`windows_125x`) and the ISO 8859 parts WHATWG decodes as Python does.
fn windows_or_iso(n: &str) -> Option<&'static str> {
    const WINDOWS: [&str; 9] = [
        "windows-1250",
        "windows-1251",
        "windows-1252",
        "windows-1253",
        "windows-1254",
        "windows-1255",
        "windows-1256",
        "windows-1257",
        "windows-1258",
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
    // 9 and 11 are windows-1254 and windows-874 under WHATWG, not Python's tables.
    const ISO: [(&str, &str); 12] = [
        ("2", "iso-8859-2"),
        ("3", "iso-8859-3"),
        ("4", "iso-8859-4"),
        ("5", "iso-8859-5"),
        ("6", "iso-8859-6"),
        ("7", "iso-8859-7"),
        ("8", "iso-8859-8"),
        ("10", "iso-8859-10"),
        ("13", "iso-8859-13"),
        ("14", "iso-8859-14"),
        ("15", "iso-8859-15"),
        ("16", "iso-8859-16"),
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
            let (text, bad) = encoding_rs::UTF_8.decode_with_bom_removal(&bytes);
            (!bad).then(|| text.into_owned())
        }
        Codec::Latin1 => Some(bytes.iter().map(|&b| b as char).collect()),
        Codec::Ascii => bytes
            .is_ascii()
            .then(|| bytes.iter().map(|&b| b as char).collect()),
        Codec::Utf16 => {
            let (text, _, bad) = encoding_rs::UTF_16LE.decode(&bytes);
            (!bad).then(|| text.into_owned())
        }
        // UTF-16 with its order given keeps a byte-order mark as text, as Python does.
        Codec::Whatwg(enc) if enc == encoding_rs::UTF_16LE || enc == encoding_rs::UTF_16BE => {
            let (text, bad) = enc.decode_without_bom_handling(&bytes);
            (!bad).then(|| text.into_owned())
        }
        Codec::Whatwg(enc) => enc
            .decode_without_bom_handling_and_without_replacement(&bytes)
            .map(|t| t.into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_names_find_their_codec() {
        assert!(matches!(lookup(Some("UTF-8")), Codec::Utf8));
        assert!(matches!(lookup(Some("Latin-1")), Codec::Latin1));
        assert!(matches!(lookup(Some("iso-8859-1")), Codec::Latin1));
        assert!(matches!(lookup(Some("gbk")), Codec::Whatwg(e) if e == encoding_rs::GBK));
        assert!(matches!(lookup(Some("CP936")), Codec::Whatwg(e) if e == encoding_rs::GBK));
        assert!(
            matches!(lookup(Some("windows-1251")), Codec::Whatwg(e) if e == encoding_rs::WINDOWS_1251)
        );
        assert!(
            matches!(lookup(Some("iso8859_15")), Codec::Whatwg(e) if e == encoding_rs::ISO_8859_15)
        );
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
    }
}
