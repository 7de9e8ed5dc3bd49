//! `password_hash`: a crypt(3) hash of a password as ansible-core writes it through passlib, so
//! that a hash rendered with a given salt is the same string under both tools (and a `user`
//! task that compares it converges).

use minijinja::value::Kwargs;
use minijinja::{Error, Value};

use crate::template::pyrepr::py_string;
use crate::template::value::{defined, op_err};

/// The salt alphabet of the crypt hashes (and of bcrypt's, in another order).
const CRYPT64: &[u8] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const BCRYPT64: &[u8] = b"./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// One algorithm: passlib's name, the longest salt, whether the salt must have exactly that
/// length, and the rounds ansible-core asks for when none are given (it pins them so that the
/// result does not depend on passlib's version).
struct Algo {
    name: &'static str,
    salt_max: usize,
    salt_exact: bool,
    implicit_rounds: Option<u32>,
}

fn algo(hashtype: &str) -> Option<Algo> {
    let (name, salt_max, salt_exact, implicit_rounds) = match hashtype {
        "sha512" | "sha512_crypt" => ("sha512_crypt", 16, false, Some(656_000)),
        "sha256" | "sha256_crypt" => ("sha256_crypt", 16, false, Some(535_000)),
        "md5" | "md5_crypt" => ("md5_crypt", 8, false, None),
        "blowfish" | "bcrypt" => ("bcrypt", 22, true, Some(12)),
        _ => return None,
    };
    Some(Algo {
        name,
        salt_max,
        salt_exact,
        implicit_rounds,
    })
}

/// `password | password_hash(hashtype='sha512', salt=None, salt_size=None, rounds=None,
/// ident=None)`.
pub(super) fn filter_password_hash(
    value: &Value,
    hashtype: Option<String>,
    salt: Option<Value>,
    kwargs: Kwargs,
) -> Result<String, Error> {
    let hashtype = match hashtype {
        Some(h) => Some(h),
        None => kwargs.get::<Option<String>>("hashtype")?,
    }
    .unwrap_or_else(|| "sha512".into());
    let salt = match salt {
        Some(s) => Some(s),
        None => kwargs.get::<Option<Value>>("salt")?,
    }
    .filter(|s| !s.is_none() && !s.is_undefined());
    let salt_size: Option<usize> = kwargs.get("salt_size")?;
    let rounds: Option<u32> = kwargs.get("rounds")?;
    let ident: Option<String> = kwargs.get("ident")?;
    kwargs.assert_all_used()?;
    let password = py_string(defined(value)?)?;
    let Some(a) = algo(&hashtype) else {
        return Err(op_err(format!(
            "{hashtype} is not in the list of supported passlib algorithms: md5, blowfish, sha256, sha512"
        )));
    };
    let salt = match salt {
        Some(s) => checked_salt(&a, &py_string(&s)?)?,
        None => random_salt(&a, salt_size.unwrap_or(a.salt_max)),
    };
    // An explicit 0 counts as "not given", as in ansible-core.
    let rounds = rounds.filter(|r| *r != 0).or(a.implicit_rounds);
    let hashed = match a.name {
        "bcrypt" => {
            let variant = match ident.as_deref().unwrap_or("2b") {
                "2b" => pwhash::bcrypt::BcryptVariant::V2b,
                "2y" => pwhash::bcrypt::BcryptVariant::V2y,
                other => {
                    return Err(op_err(format!(
                        "password_hash: bcrypt ident {other:?} is not supported (use 2b or 2y)"
                    )))
                }
            };
            pwhash::bcrypt::hash_with(
                pwhash::bcrypt::BcryptSetup {
                    salt: Some(&salt),
                    cost: rounds,
                    variant: Some(variant),
                },
                password.as_bytes(),
            )
        }
        // pwhash marks md5 and sha256 crypt deprecated for new passwords; Ansible offers them,
        // and a playbook that asks for one must get the same hash.
        #[allow(deprecated)]
        "md5_crypt" => pwhash::md5_crypt::hash_with(format!("$1${salt}$").as_str(), &password),
        name => {
            let id = if name == "sha512_crypt" { 6 } else { 5 };
            // 5000 is the rounds the format implies; passlib leaves it out of the hash then.
            let setting = match rounds {
                Some(r) if r != 5000 => format!("${id}$rounds={r}${salt}$"),
                _ => format!("${id}${salt}$"),
            };
            if id == 6 {
                pwhash::sha512_crypt::hash_with(setting.as_str(), &password)
            } else {
                #[allow(deprecated)]
                pwhash::sha256_crypt::hash_with(setting.as_str(), &password)
            }
        }
    };
    hashed.map_err(|e| op_err(format!("Could not hash the secret: {e}")))
}

/// A given salt as passlib takes it: only the hash's alphabet, at most (for bcrypt exactly) the
/// algorithm's length; bcrypt's last character keeps only the bits its 16 salt bytes use.
fn checked_salt(a: &Algo, salt: &str) -> Result<String, Error> {
    let alphabet = if a.name == "bcrypt" {
        BCRYPT64
    } else {
        CRYPT64
    };
    if !salt.bytes().all(|b| alphabet.contains(&b)) {
        return Err(op_err(format!(
            "Could not hash the secret: invalid characters in {} salt",
            a.name
        )));
    }
    if salt.len() > a.salt_max {
        return Err(op_err(format!(
            "Could not hash the secret: salt too large ({} requires {} {} chars)",
            a.name,
            if a.salt_exact { "exactly" } else { "<=" },
            a.salt_max
        )));
    }
    if a.salt_exact && salt.len() != a.salt_max {
        return Err(op_err(format!(
            "Could not hash the secret: salt too small ({} requires exactly {} chars)",
            a.name, a.salt_max
        )));
    }
    if a.name != "bcrypt" {
        return Ok(salt.to_string());
    }
    let mut bytes = salt.as_bytes().to_vec();
    let last = bytes.len() - 1;
    let index = BCRYPT64.iter().position(|c| *c == bytes[last]).unwrap_or(0);
    bytes[last] = BCRYPT64[index & 0x30];
    Ok(String::from_utf8(bytes).unwrap_or_default())
}

/// A fresh salt of `size` characters (capped at the algorithm's length), as passlib makes one.
fn random_salt(a: &Algo, size: usize) -> String {
    let alphabet = if a.name == "bcrypt" {
        BCRYPT64
    } else {
        CRYPT64
    };
    let size = if a.salt_exact {
        a.salt_max
    } else {
        size.min(a.salt_max)
    };
    let mut rng = fastrand::Rng::new();
    let salt: String = (0..size)
        .map(|_| alphabet[rng.usize(..alphabet.len())] as char)
        .collect();
    if a.salt_exact {
        checked_salt(a, &salt).unwrap_or(salt)
    } else {
        salt
    }
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use crate::template::Templar;
    use serde_json::json;

    /// The expected strings are what ansible-core 2.19 with passlib 1.7 renders for the same
    /// filter calls.
    #[test]
    fn hashes_equal_passlib_s_for_a_given_salt() {
        for (expr, want) in [
            ("'secret' | password_hash('sha512', 'mysalt')", "$6$rounds=656000$mysalt$cDA0t8lm/qt.LT6DzpoHxJ.NwTpx.WTkOPwhseSva8pRixDSH2./ffedCjAMbTX1Uo1QNT7jJPJ6FIzU2i59K/"),
            ("'secret' | password_hash('sha512', 'mysalt', rounds=5000)", "$6$mysalt$UX6P1VKOf6dr0s2pg4pLNvIUB6hLXvP6M5f/Yj9hJgMPdAJ4oArvk5YUD9/XWtk1JOpVwt/JTsczMJr8sFVML1"),
            ("'secret' | password_hash('sha256', 'mysalt')", "$5$rounds=535000$mysalt$GnEktJhWXRuwViyPsEWK9s63HYW1GqXFqU5SdKDqol6"),
            ("'secret' | password_hash('md5', 'mysalt')", "$1$mysalt$n/EfEiV74OYgBdqhKQzSW/"),
            ("'secret' | password_hash('sha512', 'mysalt', rounds=10000)", "$6$rounds=10000$mysalt$9XTP7570fxVN/uTspSrH6kRPdR4KKGzGz7.TmJjDYGrKSwZuavW/3YaLur8JX6WP75Czcxa.megIO0lKreY0R."),
            ("'secret' | password_hash('blowfish', '1234567890123456789012')", "$2b$12$123456789012345678901uO/yptqYYqXPYviqOvezm2C7cYzKwtUq"),
        ] {
            assert_eq!(eval(expr), json!(want), "{expr}");
        }
    }

    #[test]
    fn a_random_salt_gives_a_hash_of_the_right_shape_and_bad_salts_are_refused() {
        let h = eval("'secret' | password_hash");
        let h = h.as_str().unwrap();
        assert!(
            h.starts_with("$6$rounds=656000$") && h.split('$').nth(3).unwrap().len() == 16,
            "{h}"
        );
        for (expr, msg) in [
            (
                "'s' | password_hash('sha512', 'aaaaaaaaaaaaaaaaaaaa')",
                "salt too large (sha512_crypt requires <= 16 chars)",
            ),
            (
                "'s' | password_hash('sha512', 'bad!salt')",
                "invalid characters in sha512_crypt salt",
            ),
            (
                "'s' | password_hash('md5', '123456789')",
                "salt too large (md5_crypt requires <= 8 chars)",
            ),
            (
                "'s' | password_hash('whirlpool')",
                "whirlpool is not in the list of supported passlib algorithms",
            ),
        ] {
            let err = Templar::new().eval(expr, &vars()).unwrap_err().to_string();
            assert!(err.contains(msg), "{expr}: {err}");
        }
    }
}
