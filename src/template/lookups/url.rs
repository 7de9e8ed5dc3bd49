//! The `url` lookup: fetch a URL from the controller and return its content, split into lines
//! unless `split_lines=False`, with ansible.builtin.url's options (`validate_certs`, `headers`,
//! `username`/`password`, `force_basic_auth`, `timeout`, `use_proxy`, `follow_redirects`...).
//!
//! The request is the modules' own client (`fixpoint_modules::http::client`); an HTTP error
//! status fails the lookup, as in Ansible.

use fixpoint_modules::http::client::{self, Follow, Request};
use minijinja::value::Kwargs;
use minijinja::{Error, Value};

use super::op_err;

/// The values one term gives: its lines, or its whole content.
pub(super) fn lookup(term: &str, kwargs: &Kwargs) -> Result<Vec<Value>, Error> {
    let flag = |name: &str, default: bool| -> Result<bool, Error> {
        Ok(kwargs.get::<Option<bool>>(name)?.unwrap_or(default))
    };
    let text = |name: &str| -> Result<Option<String>, Error> {
        Ok(kwargs
            .get::<Option<Value>>(name)?
            .filter(|v| !v.is_none() && !v.is_undefined())
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string)))
    };
    let mut req = Request::new(term, "GET");
    req.validate_certs = flag("validate_certs", true)?;
    req.use_proxy = flag("use_proxy", true)?;
    req.no_cache = flag("force", false)?;
    req.force_basic_auth = flag("force_basic_auth", false)?;
    req.username = text("username")?;
    req.password = text("password")?;
    if let Some(agent) = text("http_agent")? {
        req.http_agent = agent;
    }
    if let Some(t) = kwargs.get::<Option<f64>>("timeout")? {
        req.timeout = std::time::Duration::from_secs_f64(t.max(1.0));
    }
    if let Some(f) = text("follow_redirects")? {
        req.follow = Follow::parse(&f).map_err(op_err)?;
    }
    if let Some(h) = kwargs.get::<Option<Value>>("headers")? {
        if let Ok(keys) = h.try_iter() {
            for k in keys {
                let v = h.get_item(&k)?;
                let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                req.headers.push((k.to_string(), v));
            }
        }
    }
    let split_lines = flag("split_lines", true)?;
    let shown = fixpoint_modules::http::mask_url(term);
    let resp = client::send(&req).map_err(|e| {
        op_err(format!(
            "lookup('url'): Failed lookup url for {shown} : {e}"
        ))
    })?;
    if !(200..300).contains(&resp.status) {
        return Err(op_err(format!(
            "lookup('url'): Received HTTP error for {shown} : {}",
            resp.msg()
        )));
    }
    let mut stream = resp.body;
    let body = fixpoint_modules::http::read_limited(&mut stream)
        .map_err(|e| op_err(format!("lookup('url'): reading {shown}: {e}")))?;
    let content = String::from_utf8_lossy(&body).into_owned();
    Ok(if split_lines {
        content
            .lines()
            .map(|l| Value::from(l.to_string()))
            .collect()
    } else {
        vec![Value::from(content)]
    })
}
