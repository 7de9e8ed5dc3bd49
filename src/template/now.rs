//! Ansible's `now(utc=False, fmt=None)`: the controller's current time as a datetime-like
//! value (`now().year`, `now().strftime('%Y-%m-%d')`, printed as Python prints a datetime),
//! or, with `fmt`, the formatted string.

use std::sync::Arc;

use minijinja::value::{from_args, Kwargs, Object, ObjectRepr};
use minijinja::{Error, State, Value};
use nix::libc;

use super::value::op_err;

/// A point in time broken down in local time or UTC, as Python's `datetime`.
#[derive(Debug)]
pub(super) struct DateTime {
    tm: libc::tm,
    micros: u32,
}

// `libc::tm` holds a pointer to the zone's name (static data of the C library).
unsafe impl Send for DateTime {}
unsafe impl Sync for DateTime {}

impl DateTime {
    fn now(utc: bool) -> Result<DateTime, Error> {
        Self::at(std::time::SystemTime::now(), utc)
    }

    fn at(t: std::time::SystemTime, utc: bool) -> Result<DateTime, Error> {
        let since = t
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|e| op_err(format!("now(): the clock is before 1970: {e}")))?;
        let secs = since.as_secs() as libc::time_t;
        // SAFETY: `tm` is plain data, filled by the reentrant *_r functions.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        let ok = unsafe {
            if utc {
                !libc::gmtime_r(&secs, &mut tm).is_null()
            } else {
                !libc::localtime_r(&secs, &mut tm).is_null()
            }
        };
        if !ok {
            return Err(op_err("now(): cannot break down the current time"));
        }
        Ok(DateTime {
            tm,
            micros: since.subsec_micros(),
        })
    }

    /// C's `strftime` (what Python's calls), with `%f` for microseconds as Python adds.
    fn strftime(&self, fmt: &str) -> Result<String, Error> {
        let fmt = fmt.replace("%f", &format!("{:06}", self.micros));
        let cfmt = std::ffi::CString::new(fmt.clone())
            .map_err(|_| op_err("strftime: the format contains a NUL byte"))?;
        let mut buf = vec![0u8; 256 + fmt.len() * 16];
        // SAFETY: the buffer's length is passed; `tm` is a valid broken-down time.
        let n =
            unsafe { libc::strftime(buf.as_mut_ptr().cast(), buf.len(), cfmt.as_ptr(), &self.tm) };
        buf.truncate(n);
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    fn field(&self, name: &str) -> Option<i64> {
        let t = &self.tm;
        Some(match name {
            "year" => i64::from(t.tm_year) + 1900,
            "month" => i64::from(t.tm_mon) + 1,
            "day" => i64::from(t.tm_mday),
            "hour" => i64::from(t.tm_hour),
            "minute" => i64::from(t.tm_min),
            "second" => i64::from(t.tm_sec),
            "microsecond" => i64::from(self.micros),
            _ => return None,
        })
    }
}

impl Object for DateTime {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        self.field(key.as_str()?).map(Value::from)
    }

    fn call_method(
        self: &Arc<Self>,
        _state: &State<'_, '_>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, Error> {
        match method {
            "strftime" => {
                let (fmt,): (&str,) = from_args(args)?;
                self.strftime(fmt).map(Value::from)
            }
            "isoformat" => self.strftime(self.iso_format("T")).map(Value::from),
            "timestamp" => {
                let mut tm = self.tm;
                // SAFETY: `tm` is a valid broken-down time; mktime reads and normalises it.
                let secs = unsafe { libc::mktime(&mut tm) };
                Ok(Value::from(secs as f64 + f64::from(self.micros) / 1e6))
            }
            _ => Err(minijinja::Error::from(minijinja::ErrorKind::UnknownMethod)),
        }
    }

    fn render(self: &Arc<Self>, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result
    where
        Self: Sized + 'static,
    {
        let s = self
            .strftime(self.iso_format(" "))
            .map_err(|_| std::fmt::Error)?;
        f.write_str(&s)
    }
}

impl DateTime {
    /// Python's `isoformat(sep)`: microseconds only when there are some.
    fn iso_format(&self, sep: &str) -> &'static str {
        match (self.micros == 0, sep) {
            (true, "T") => "%Y-%m-%dT%H:%M:%S",
            (false, "T") => "%Y-%m-%dT%H:%M:%S.%f",
            (true, _) => "%Y-%m-%d %H:%M:%S",
            (false, _) => "%Y-%m-%d %H:%M:%S.%f",
        }
    }
}

/// A local `datetime` value (Python's `datetime.fromtimestamp(t)`: printed as
/// `2026-12-01 08:00:00.123456`, with `.year`, `strftime`...), as the `template` module's
/// `template_mtime` and `template_run_date` are.
pub fn python_local_time(t: std::time::SystemTime) -> Value {
    DateTime::at(t, false)
        .map(Value::from_object)
        .unwrap_or_default()
}

/// `now(utc=False, fmt=None)`.
pub(super) fn now(args: &[Value]) -> Result<Value, Error> {
    let (utc, fmt, kwargs): (Option<bool>, Option<String>, Kwargs) = from_args(args)?;
    let utc = utc.or(kwargs.get("utc")?).unwrap_or(false);
    let fmt: Option<String> = fmt.or(kwargs.get("fmt")?);
    kwargs.assert_all_used()?;
    let dt = DateTime::now(utc)?;
    match fmt {
        Some(f) => dt.strftime(&f).map(Value::from),
        None => Ok(Value::from_object(dt)),
    }
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use serde_json::json;

    #[test]
    fn now_is_a_datetime() {
        assert_eq!(
            eval("now().year > 2000 and now(true).month <= 12"),
            json!(true)
        );
        let y = eval("now(fmt='%Y')");
        assert_eq!(y.as_str().map(str::len), Some(4));
        assert_eq!(
            eval("now(utc=true).strftime('%Y') == now(true, '%Y')"),
            json!(true)
        );
        let printed = render("{{ now() }}");
        let s = printed.as_str().unwrap();
        assert!(s.len() >= 19 && s.as_bytes()[10] == b' ', "{s}");
        assert_eq!(eval("now().isoformat()[10]"), json!("T"));
    }
}
