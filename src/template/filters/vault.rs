//! `vault` and `unvault`: a string encrypted with a secret given in the template, and a vaulted
//! value (or vault text) decrypted with one, as ansible-core's encryption filters do.

use minijinja::value::Kwargs;
use minijinja::{Error, Value};

use crate::template::value::{op_err, vault_text};
use crate::vault::Secret;

/// `data | vault(secret, salt=None, vault_id='filter_default')`: the vault text of `data`.
pub(super) fn filter_vault(data: &Value, secret: &Value, rest: Kwargs) -> Result<Value, Error> {
    let salt: Option<String> = rest.get("salt")?;
    let vault_id: Option<String> = rest.get("vault_id")?;
    let _: Option<bool> = rest.get("wrap_object")?;
    rest.assert_all_used()?;
    let secret = secret.as_str().ok_or_else(|| {
        op_err(format!(
            "Secret passed is required to be a string, instead we got {}.",
            py_type(secret)
        ))
    })?;
    let data = data.as_str().ok_or_else(|| {
        op_err(format!(
            "Can only vault strings, instead we got {}.",
            py_type(data)
        ))
    })?;
    let id = vault_id.unwrap_or_else(|| "filter_default".into());
    let text = match salt.filter(|s| !s.is_empty()) {
        Some(salt) => Ok(crate::vault::encrypt_with_salt(
            data.as_bytes(),
            secret.as_bytes(),
            Some(&id),
            salt.as_bytes(),
        )),
        None => crate::vault::encrypt(data.as_bytes(), secret.as_bytes(), Some(&id)),
    };
    text.map(Value::from)
        .map_err(|e| op_err(format!("Unable to encrypt. {e}")))
}

/// `vaulted | unvault(secret, vault_id='filter_default')`: the plain text; a string that is
/// not vault text is returned as it is.
pub(super) fn filter_unvault(vault: &Value, secret: &Value, rest: Kwargs) -> Result<Value, Error> {
    let vault_id: Option<String> = rest.get("vault_id")?;
    rest.assert_all_used()?;
    let secret = secret.as_str().ok_or_else(|| {
        op_err(format!(
            "Secret passed is required to be as string, instead we got {}.",
            py_type(secret)
        ))
    })?;
    let text = match (vault_text(vault), vault.as_str()) {
        (Some(t), _) => t,
        (None, Some(s)) => s.to_string(),
        (None, None) => {
            return Err(op_err(format!(
                "Vault should be in the form of a string, instead we got {}.",
                py_type(vault)
            )))
        }
    };
    if !crate::vault::is_encrypted(text.as_bytes()) {
        return Ok(Value::from(text));
    }
    let secrets = [Secret {
        id: vault_id.unwrap_or_else(|| "filter_default".into()),
        bytes: secret.as_bytes().to_vec(),
    }];
    crate::vault::decrypt(&text, &secrets)
        .map(|b| Value::from(String::from_utf8_lossy(&b).into_owned()))
        .map_err(|_| op_err("Unable to decrypt."))
}

/// Python's name of a value's type, for the filters' type errors.
fn py_type(v: &Value) -> &'static str {
    use minijinja::value::ValueKind;
    match v.kind() {
        ValueKind::Map => "<class 'dict'>",
        ValueKind::Seq | ValueKind::Iterable => "<class 'list'>",
        ValueKind::Number if v.as_i64().is_some() => "<class 'int'>",
        ValueKind::Number => "<class 'float'>",
        ValueKind::Bool => "<class 'bool'>",
        ValueKind::None => "<class 'NoneType'>",
        _ => "<class 'object'>",
    }
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use serde_json::json;

    #[test]
    fn vault_then_unvault_round_trips() {
        assert_eq!(
            eval("'s3cret' | vault('pw') | unvault('pw')"),
            json!("s3cret")
        );
        assert_eq!(eval("'plain' | unvault('pw')"), json!("plain"));
        let text = eval("'x' | vault('pw', vault_id='prod')");
        assert!(text
            .as_str()
            .unwrap()
            .starts_with("$ANSIBLE_VAULT;1.2;AES256;prod\n"));
        let e = render_err("{{ 'x' | vault('pw') | unvault('other') }}").to_string();
        assert!(e.contains("Unable to decrypt."), "{e}");
    }
}
