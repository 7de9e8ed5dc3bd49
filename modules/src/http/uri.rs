//! The `uri` module: one HTTP request, its answer returned as Ansible's `uri` returns it
//! (`status`, `url`, `redirected`, the headers lower-cased with `_` for `-`, `cookies`,
//! `content` and `json`), failing when the status is not one of `status_code`.
//!
//! A request is not a change: `changed` is true only when `dest` gets new content or
//! attributes (ansible-core says changed whenever `dest` is given; see DEVIATIONS.md). As in
//! Ansible, `creates`/`removes` skip the request, and check mode skips the task (uri does not
//! support check mode there).

use super::client::{self, Follow, Request};
use super::{de_opt_secs, disposition_filename, env_map, header_pairs, mask_url, Algo};
use crate::fs::{
    atomic_write, expand_user, id_of, locate, lstat, path_info, plan_attrs, set_attrs_at,
    WantedAttrs,
};
use crate::params::{de_opt_string, Bool, ModeSpec};
use crate::{Ctx, Diff, Module, ModuleError, Plan};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::time::Instant;

pub struct Uri;

fn yes() -> Bool {
    Bool(true)
}

/// `status_code`: one code or a list, numbers or numeric strings.
#[derive(Debug, Clone)]
pub struct Codes(pub Vec<i64>);

impl<'de> Deserialize<'de> for Codes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        let one = |x: &Value| -> Result<i64, D::Error> {
            match x {
                Value::Number(n) => n.as_i64(),
                Value::String(s) => s.trim().parse().ok(),
                _ => None,
            }
            .ok_or_else(|| serde::de::Error::custom(format!("{x} is not a status code")))
        };
        match &v {
            Value::Array(a) => a.iter().map(one).collect::<Result<_, _>>().map(Codes),
            Value::String(s) if s.contains(',') => s
                .split(',')
                .map(|p| one(&Value::String(p.to_string())))
                .collect::<Result<_, _>>()
                .map(Codes),
            other => one(other).map(|c| Codes(vec![c])),
        }
    }
}

/// Parameters of `uri`, spelled as in Ansible.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub url: String,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub method: Option<String>,
    #[serde(default)]
    pub body: Option<Value>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub body_format: Option<String>,
    #[serde(default)]
    pub status_code: Option<Codes>,
    #[serde(default)]
    pub return_content: Bool,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub dest: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub creates: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub removes: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub follow_redirects: Option<String>,
    #[serde(default)]
    pub headers: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "de_opt_secs")]
    pub timeout: Option<u64>,
    #[serde(default = "yes")]
    pub validate_certs: Bool,
    #[serde(default, alias = "user", deserialize_with = "de_opt_string")]
    pub url_username: Option<String>,
    #[serde(default, alias = "password", deserialize_with = "de_opt_string")]
    pub url_password: Option<String>,
    #[serde(default)]
    pub force_basic_auth: Bool,
    #[serde(default = "yes")]
    pub use_proxy: Bool,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub http_agent: Option<String>,
    #[serde(default)]
    pub force: Bool,
    /// Accepted either way: fixpoint never asks for a compressed answer.
    #[serde(default = "yes")]
    pub decompress: Bool,
    #[serde(default)]
    pub mode: Option<ModeSpec>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub owner: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub group: Option<String>,
    #[serde(default, rename = "_env")]
    pub env: Option<Map<String, Value>>,
}

/// The body format, checked at load time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Raw,
    Json,
    Form,
}

impl Params {
    fn format(&self) -> Result<Format, ModuleError> {
        match self
            .body_format
            .as_deref()
            .unwrap_or("raw")
            .to_ascii_lowercase()
            .as_str()
        {
            "raw" => Ok(Format::Raw),
            "json" => Ok(Format::Json),
            "form-urlencoded" => Ok(Format::Form),
            "form-multipart" => Err(ModuleError::Params(
                "body_format: form-multipart is not supported yet (raw, json and form-urlencoded are)"
                    .into(),
            )),
            other => Err(ModuleError::Params(format!(
                "body_format must be one of form-urlencoded, json, raw, form-multipart; got {other:?}"
            ))),
        }
    }

    fn method(&self) -> String {
        self.method.as_deref().unwrap_or("GET").to_ascii_uppercase()
    }

    fn codes(&self) -> Vec<i64> {
        self.status_code
            .as_ref()
            .map(|c| c.0.clone())
            .unwrap_or_else(|| vec![200])
    }
}

pub struct State {
    skip: Option<String>,
}

pub enum Action {
    Request,
}

impl Module for Uri {
    type Params = Params;
    type State = State;
    type Action = Action;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        if let Some(f) = &p.body_format {
            if !crate::params::is_template(f) {
                p.format()?;
            }
        }
        if let Some(f) = &p.follow_redirects {
            if !crate::params::is_template(f) {
                Follow::parse(f).map_err(ModuleError::Params)?;
            }
        }
        if let Some(m) = &p.method {
            let one_word = !m.is_empty() && m.chars().all(|c| c.is_ascii_alphabetic());
            if !crate::params::is_template(m) && !one_word {
                return Err(ModuleError::Params(
                    "Parameter 'method' needs to be a single word in uppercase, like GET or POST."
                        .into(),
                ));
            }
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<State, ModuleError> {
        let mut skip = None;
        if let Some(c) = &p.creates {
            if expand_user(c).exists() {
                skip = Some(format!("skipped, since '{c}' exists"));
            }
        }
        if let Some(r) = &p.removes {
            if skip.is_none() && !expand_user(r).exists() {
                skip = Some(format!("skipped, since '{r}' does not exist"));
            }
        }
        Ok(State { skip })
    }

    fn plan(p: &Params, s: &State, ctx: &Ctx) -> Result<Plan<Action>, ModuleError> {
        let mut plan = Plan::new();
        if let Some(why) = &s.skip {
            plan.result.insert("changed".into(), json!(false));
            plan.result.insert("stdout".into(), json!(why));
            plan.result.insert("stdout_lines".into(), json!([why]));
            return Ok(plan);
        }
        if ctx.check {
            // ansible-core skips a module without check mode support; so does fixpoint.
            // ansible-core's `uri` is an action plugin, so its skip names an action.
            let msg = "This action (uri) does not support check mode.";
            plan.result.insert("changed".into(), json!(false));
            plan.result.insert("skipped".into(), json!(true));
            plan.result.insert("msg".into(), json!(msg));
            plan.msg = Some(msg.into());
            return Ok(plan);
        }
        p.format()?;
        plan.actions.push(Action::Request);
        Ok(plan)
    }

    fn apply(
        p: &Params,
        _s: State,
        _plan: &Plan<Action>,
    ) -> Result<Map<String, Value>, ModuleError> {
        request(p)
    }
}

/// Python's `json.dumps` text (`", "` and `": "` separators, non-ASCII escaped), which is what
/// a server receives from ansible-core.
pub fn py_json(v: &Value) -> String {
    fn string(s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                    let mut buf = [0u16; 2];
                    for u in c.encode_utf16(&mut buf) {
                        out.push_str(&format!("\\u{u:04x}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
    fn walk(v: &Value, out: &mut String) {
        match v {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) => out.push_str(&n.to_string()),
            Value::String(s) => string(s, out),
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    walk(x, out);
                }
                out.push(']');
            }
            Value::Object(m) => {
                out.push('{');
                for (i, (k, x)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    string(k, out);
                    out.push_str(": ");
                    walk(x, out);
                }
                out.push('}');
            }
        }
    }
    let mut out = String::new();
    walk(v, &mut out);
    out
}

/// `body` as `application/x-www-form-urlencoded`: a mapping or a list of pairs, list values
/// repeated, nulls left out, scalars written as Python's `str` writes them.
fn form_urlencoded(body: &Value) -> Result<String, ModuleError> {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        other => other.to_string(),
    };
    let pairs: Vec<(String, Value)> = match body {
        Value::String(s) => return Ok(s.clone()),
        Value::Object(m) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        Value::Array(a) => a
            .iter()
            .map(|x| match x {
                Value::Array(kv) if kv.len() == 2 => Ok((text(&kv[0]), kv[1].clone())),
                _ => Err(ModuleError::failed(
                    "failed to parse body as form_urlencoded: a list must hold [key, value] pairs",
                )),
            })
            .collect::<Result<_, _>>()?,
        other => return Ok(text(other)),
    };
    let mut ser = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        let values = match v {
            Value::Array(a) => a,
            other => vec![other],
        };
        for v in values.iter().filter(|v| !v.is_null()) {
            ser.append_pair(&k, &text(v));
        }
    }
    Ok(ser.finish())
}

/// Send the request and turn the answer into the result.
fn request(p: &Params) -> Result<Map<String, Value>, ModuleError> {
    let method = p.method();
    let mut headers = header_pairs(&p.headers);
    let has_type = headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
    let body = match (&p.body, p.format()?) {
        (None, _) | (Some(Value::Null), _) => None,
        (Some(b), Format::Json) => {
            if !has_type {
                headers.push(("Content-Type".into(), "application/json".into()));
            }
            Some(match b {
                Value::String(s) => s.clone(),
                other => py_json(other),
            })
        }
        (Some(b), Format::Form) => {
            if !has_type {
                headers.push((
                    "Content-Type".into(),
                    "application/x-www-form-urlencoded".into(),
                ));
            }
            Some(form_urlencoded(b)?)
        }
        (Some(Value::String(s)), Format::Raw) => Some(s.clone()),
        (Some(other), Format::Raw) => Some(other.to_string()),
    };
    let mut req = Request::new(&p.url, &method);
    req.headers = headers;
    req.body = body.map(String::into_bytes);
    req.username = p.url_username.clone();
    req.password = p.url_password.clone();
    req.force_basic_auth = p.force_basic_auth.0;
    req.timeout = super::timeout(p.timeout, 30);
    req.validate_certs = p.validate_certs.0;
    req.follow = Follow::parse(p.follow_redirects.as_deref().unwrap_or("safe"))
        .map_err(ModuleError::Params)?;
    req.use_proxy = p.use_proxy.0;
    if let Some(a) = &p.http_agent {
        req.http_agent = a.clone();
    }
    req.no_cache = p.force.0;
    req.env = env_map(&p.env);
    let codes = p.codes();
    let masked = mask_url(&p.url);
    let start = Instant::now();
    let resp = match client::send(&req) {
        Ok(r) => r,
        Err(e) => {
            let mut out = Map::new();
            out.insert("redirected".into(), json!(false));
            out.insert("url".into(), json!(masked));
            out.insert("status".into(), json!(-1));
            out.insert("elapsed".into(), json!(start.elapsed().as_secs()));
            out.insert("changed".into(), json!(false));
            let msg = format!("Status code was -1 and not {codes:?}: {e}");
            return Err(ModuleError::Failed { msg, result: out });
        }
    };
    let info = resp.info();
    let status = resp.status as i64;
    let content_type = resp
        .header("content-type")
        .unwrap_or("application/octet-stream");
    let (mime, params) = content_type.split_once(';').unwrap_or((content_type, ""));
    let sub = mime
        .trim()
        .split('/')
        .nth(1)
        .unwrap_or_default()
        .to_ascii_lowercase();
    let sub = sub.rsplit('+').next().unwrap_or_default();
    let maybe_json = sub == "json" || sub == "javascript";
    let charset_utf8 = !params.to_ascii_lowercase().contains("charset=")
        || params.to_ascii_lowercase().contains("utf-8")
        || params.to_ascii_lowercase().contains("utf8");
    let filename = disposition_filename(resp.header("content-disposition"));
    // urllib raises an HTTPError for any answer but a 2xx: ansible-core then keeps its body
    // (`body`) and has no cookies.
    let http_error = !(200..300).contains(&status);
    let want_body = maybe_json
        || p.return_content.0
        || !codes.contains(&status)
        || p.dest.is_some()
        || http_error;
    let mut body = resp.body;
    let content = if want_body {
        super::read_limited(&mut body)
            .map_err(|e| ModuleError::failed(format!("HTTP Error while fetching {masked}: {e}")))?
    } else {
        Vec::new()
    };
    let mut out = Map::new();
    out.insert(
        "redirected".into(),
        json!(resp.url != masked && resp.url != p.url),
    );
    for (k, v) in info {
        out.insert(k.replace('-', "_").to_ascii_lowercase(), v);
    }
    if http_error {
        out.remove("cookies");
        out.remove("cookies_string");
    }
    out.insert("elapsed".into(), json!(start.elapsed().as_secs()));
    out.insert("status".into(), json!(status));
    out.insert("changed".into(), json!(false));
    if let Some(loc) = out.get("location").and_then(Value::as_str) {
        if let Ok(joined) = url::Url::parse(&masked).and_then(|u| u.join(loc)) {
            out.insert("location".into(), json!(joined.to_string()));
        }
    }
    if let Some(dest) = &p.dest {
        let mut dest = expand_user(dest);
        if dest.is_dir() {
            dest = dest.join(filename.unwrap_or_else(|| "index.html".into()));
        }
        if codes.contains(&status) && status != 304 {
            let changed = write_dest(p, &dest, &content)?;
            out.insert("changed".into(), json!(changed));
            // The file module's view of what was written, as ansible-core's result has it.
            out.extend(path_info(&dest)?);
        }
        out.insert("path".into(), json!(dest.display().to_string()));
    }
    let text = if charset_utf8 {
        String::from_utf8_lossy(&content).into_owned()
    } else {
        content.iter().map(|&b| b as char).collect()
    };
    if maybe_json {
        if let Ok(js) = serde_json::from_str::<Value>(&text) {
            out.insert("json".into(), js);
        }
    }
    if p.return_content.0 {
        out.insert("content".into(), json!(text));
    }
    if http_error && codes.contains(&status) && !p.return_content.0 {
        out.insert("body".into(), json!(text));
    }
    if !codes.contains(&status) {
        let prev = out.get("msg").and_then(Value::as_str).unwrap_or_default();
        let msg = format!("Status code was {status} and not {codes:?}: {prev}");
        out.insert("msg".into(), json!(msg));
        return Err(ModuleError::Failed { msg, result: out });
    }
    Ok(out)
}

/// Write the answer to `dest` when it differs, then its attributes; whether anything changed.
fn write_dest(p: &Params, dest: &std::path::Path, content: &[u8]) -> Result<bool, ModuleError> {
    let meta = lstat(dest)?;
    let same = match super::digest_file(dest, &[Algo::Sha1])? {
        Some(d) => {
            d[0] == super::digest_reader(&mut &content[..], &[Algo::Sha1])
                .map_err(|e| ModuleError::io(dest, e))?[0]
        }
        None => false,
    };
    let mut diff = Diff::default();
    let path = dest.display().to_string();
    let wanted = WantedAttrs::new(&p.mode, &p.owner, &p.group);
    let attrs = plan_attrs(&path, meta.as_ref(), &wanted, &mut diff)?;
    let loc = locate(dest, meta.as_ref().map(id_of))?;
    if !same {
        atomic_write(&loc, content, &attrs, None)?;
        return Ok(true);
    }
    if diff.is_empty() {
        return Ok(false);
    }
    set_attrs_at(&loc, &attrs)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_json_and_form_bodies() {
        assert_eq!(
            py_json(&json!({"a": [1, true, null], "é": "x"})),
            r#"{"a": [1, true, null], "\u00e9": "x"}"#
        );
        assert_eq!(
            form_urlencoded(&json!({"name": "a b", "n": [1, 2], "skip": null, "ok": true}))
                .unwrap(),
            "name=a+b&n=1&n=2&ok=True"
        );
    }

    #[test]
    fn status_codes_as_ansible_takes_them() {
        let c: Codes = serde_json::from_value(json!("200,201")).unwrap();
        assert_eq!(c.0, vec![200, 201]);
        let c: Codes = serde_json::from_value(json!([200, "404"])).unwrap();
        assert_eq!(c.0, vec![200, 404]);
        let c: Codes = serde_json::from_value(json!(204)).unwrap();
        assert_eq!(c.0, vec![204]);
    }
}
