//! The `password` lookup: a random password, kept in a file on the controller so the next run
//! reads the same one back (`/dev/null` keeps nothing), as ansible-core's plugin does.
//!
//! `length`, `chars` and `seed` are taken, in the term (`path length=8 chars=digits`) or as
//! keyword arguments; with `seed` the password is the one Python's `random.Random(seed)` draws,
//! as in ansible-core. `encrypt` and `ident` are refused with a message (the hashed form is not
//! implemented).

use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use minijinja::value::Kwargs;
use minijinja::{Error, Value};

use super::super::filters::random::Rng;
use super::super::pyrepr::py_string;
use super::super::value::op_err;

const DEFAULT_LENGTH: usize = 20;
const DEFAULT_CHARS: [&str; 3] = ["ascii_letters", "digits", ".,:-_"];
const PARAMS: [&str; 5] = ["length", "encrypt", "chars", "ident", "seed"];

/// One term of `lookup('password', term, **kwargs)`; `base` is the playbook's directory, where
/// relative paths are.
pub(super) fn password(term: &str, kwargs: &Kwargs, base: Option<&Path>) -> Result<Value, Error> {
    let err = |m: String| op_err(format!("lookup('password'): {m}"));
    let (rel, inline) = match term.split_once(' ') {
        Some((p, rest)) => (p.to_string(), parse_inline(rest).map_err(err)?),
        None => (term.to_string(), Vec::new()),
    };
    let option = |name: &str| -> Result<Option<Value>, Error> {
        if let Some((_, v)) = inline.iter().find(|(k, _)| k == name) {
            // Marks the keyword argument as used too, as ansible-core lets the term win.
            let _: Option<Value> = kwargs.get(name)?;
            return Ok(Some(Value::from(v.clone())));
        }
        Ok(kwargs.get::<Option<Value>>(name)?.filter(|v| !v.is_none()))
    };
    for refused in ["encrypt", "ident"] {
        if option(refused)?.is_some() {
            return Err(err(format!(
                "`{refused}` is not supported by fixpoint (plain random passwords are)"
            )));
        }
    }
    let length = match option("length")? {
        None => DEFAULT_LENGTH,
        Some(v) => v
            .as_usize()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
            .ok_or_else(|| err(format!("`length` must be a whole number, not {v}")))?,
    };
    let specs: Vec<String> = match option("chars")? {
        None => DEFAULT_CHARS.iter().map(|s| s.to_string()).collect(),
        Some(v) => match v.as_str() {
            Some(s) => split_chars(s),
            None => v
                .try_iter()
                .map_err(|_| err(format!("`chars` must be a list of names, not {v}")))?
                .map(|c| {
                    c.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| c.to_string())
                })
                .collect(),
        },
    };
    let chars = candidate_chars(&specs);
    if chars.is_empty() && length > 0 {
        return Err(err("`chars` leaves no character to choose from".into()));
    }
    let path = match base {
        Some(b) if Path::new(&rel).is_relative() => b.join(&rel),
        _ => PathBuf::from(&rel),
    };
    // ansible-core reads the option as a string: `seed=3` seeds with "3", not 3.
    let seed = option("seed")?
        .map(|s| py_string(&s).map(Value::from))
        .transpose()?;
    let new = || match &seed {
        Some(seed) => {
            let mut rng = Rng::new(Some(seed.clone())).map_err(|e| e.to_string())?;
            Ok((0..length)
                .map(|_| chars[rng.below(chars.len() as u64) as usize])
                .collect())
        }
        None => generate(length, &chars),
    };
    if path == Path::new("/dev/null") {
        return Ok(Value::from(new().map_err(err)?));
    }
    stored_or_new(&path, new).map(Value::from).map_err(err)
}

/// `k=v k2=v2` after the path (values without spaces; the keys ansible-core knows).
fn parse_inline(rest: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for word in rest.split_whitespace() {
        let Some((k, v)) = word.split_once('=') else {
            return Err(format!(
                "`{word}`: a password file name with a space, or a parameter without `=`"
            ));
        };
        if !PARAMS.contains(&k) {
            return Err(format!(
                "Unrecognized parameter(s) given to password lookup: {k}"
            ));
        }
        out.push((k.to_string(), v.to_string()));
    }
    Ok(out)
}

/// `chars` given as text: names separated by commas, `,,` standing for a comma itself.
fn split_chars(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.contains(",,") {
        out.push(",".to_string());
    }
    out.extend(
        s.replace(",,", ",")
            .split(',')
            .filter(|c| !c.is_empty())
            .map(str::to_string),
    );
    out
}

/// The characters to draw from: Python's `string` constants by name, anything else literally;
/// quotes are left out, as ansible-core does.
fn candidate_chars(specs: &[String]) -> Vec<char> {
    const LOWER: &str = "abcdefghijklmnopqrstuvwxyz";
    const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    const DIGITS: &str = "0123456789";
    const PUNCT: &str = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
    const WHITE: &str = " \t\n\r\x0b\x0c";
    let mut all = String::new();
    for spec in specs {
        match spec.as_str() {
            "ascii_letters" => all.extend([LOWER, UPPER]),
            "ascii_lowercase" => all.push_str(LOWER),
            "ascii_uppercase" => all.push_str(UPPER),
            "digits" => all.push_str(DIGITS),
            "hexdigits" => all.push_str("0123456789abcdefABCDEF"),
            "octdigits" => all.push_str("01234567"),
            "punctuation" => all.push_str(PUNCT),
            "whitespace" => all.push_str(WHITE),
            "printable" => all.extend([DIGITS, LOWER, UPPER, PUNCT, WHITE]),
            literal => all.push_str(literal),
        }
    }
    all.chars().filter(|c| *c != '"' && *c != '\'').collect()
}

/// `length` characters drawn uniformly from `chars` with the system's random source.
fn generate(length: usize, chars: &[char]) -> Result<String, String> {
    let mut urandom =
        std::fs::File::open("/dev/urandom").map_err(|e| format!("/dev/urandom: {e}"))?;
    let n = chars.len() as u32;
    // Values at or above the largest multiple of n would favour the first characters.
    let limit = u32::MAX - u32::MAX % n.max(1);
    let mut out = String::with_capacity(length);
    let mut buf = [0u8; 4];
    while out.chars().count() < length {
        urandom
            .read_exact(&mut buf)
            .map_err(|e| format!("/dev/urandom: {e}"))?;
        let x = u32::from_le_bytes(buf);
        if x < limit {
            out.push(chars[(x % n) as usize]);
        }
    }
    Ok(out)
}

/// The password kept in `path` (its first part, before a ` salt=` ansible-core may have
/// stored), or a new one written there (directories 0700, the file 0600). The new file appears
/// whole or not at all (a hard link of a finished temp file), so hosts rendering the same
/// lookup at once all get the password that won.
fn stored_or_new(path: &Path, new: impl Fn() -> Result<String, String>) -> Result<String, String> {
    if let Some(p) = read_stored(path)? {
        return Ok(p);
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let password = new()?;
    let tmp = tempfile::Builder::new()
        .prefix(".fixpoint-password")
        .permissions(std::fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::write(tmp.path(), format!("{password}\n"))
        .map_err(|e| format!("{}: {e}", tmp.path().display()))?;
    match std::fs::hard_link(tmp.path(), path) {
        Ok(()) => Ok(password),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            read_stored(path)?.ok_or_else(|| format!("{}: vanished", path.display()))
        }
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

fn read_stored(path: &Path) -> Result<Option<String>, String> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let text = text.trim_end();
            Ok(Some(match text.rfind(" salt=") {
                Some(i) => text[..i].to_string(),
                None => text.to_string(),
            }))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chars_and_lengths_as_ansible_reads_them() {
        let c = candidate_chars(&split_chars("digits,,"));
        assert_eq!(c.iter().collect::<String>(), ",0123456789");
        assert_eq!(candidate_chars(&["a'\"b".to_string()]), ['a', 'b']);
        let p = generate(12, &['x', 'y']).unwrap();
        assert_eq!(p.len(), 12);
        assert!(p.chars().all(|c| c == 'x' || c == 'y'));
        assert!(parse_inline("length=8 chars=digits").is_ok());
        assert!(parse_inline("lenght=8").unwrap_err().contains("lenght"));
    }

    #[test]
    fn a_stored_password_is_read_back_and_a_new_one_kept() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("creds/db/pw");
        let first = stored_or_new(&f, || Ok("abc".into())).unwrap();
        assert_eq!(first, "abc");
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "abc\n");
        assert_eq!(
            std::fs::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let again = stored_or_new(&f, || Ok("other".into())).unwrap();
        assert_eq!(again, "abc");
        std::fs::write(&f, "secret salt=12345678\n").unwrap();
        assert_eq!(stored_or_new(&f, || Ok("x".into())).unwrap(), "secret");
    }
}
