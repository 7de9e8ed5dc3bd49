//! Ansible's `now(utc=False, fmt=None)`: the controller's current time as a datetime-like
//! value (`now().year`, `now().strftime('%Y-%m-%d')`, printed as Python prints a datetime),
//! or, with `fmt`, the formatted string; and the date filters `strftime` (a format applied to
//! an epoch time) and `to_datetime` (text parsed into such a value).

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

    /// The fields in order of significance, which is how two datetimes compare.
    fn key(&self) -> [i64; 7] {
        [
            "year",
            "month",
            "day",
            "hour",
            "minute",
            "second",
            "microsecond",
        ]
        .map(|f| self.field(f).unwrap_or_default())
    }

    /// Microseconds since 1970-01-01 00:00:00 of the fields as they read, whatever the zone:
    /// how Python subtracts two naive datetimes.
    pub(super) fn naive_micros(&self) -> i128 {
        let f = |n| i128::from(self.field(n).unwrap_or_default());
        // Days from the civil date (Howard Hinnant's `days_from_civil`).
        let (m, d) = (f("month"), f("day"));
        let y = f("year") - i128::from(m <= 2);
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146_097 + doe - 719_468;
        ((days * 24 + f("hour")) * 60 + f("minute")) * 60_000_000
            + f("second") * 1_000_000
            + f("microsecond")
    }

    /// Python's `isoformat()`, which ansible-core's JSON encoder writes for a datetime.
    pub(super) fn isoformat(&self) -> String {
        self.strftime(self.iso_format("T")).unwrap_or_default()
    }

    /// Python's `repr(datetime)`: `datetime.datetime(2024, 1, 2, 3, 4)`, the second and the
    /// microseconds only when not zero.
    pub(super) fn python_repr(&self) -> String {
        let f = |n| self.field(n).unwrap_or_default();
        let mut s = format!(
            "datetime.datetime({}, {}, {}, {}, {}",
            f("year"),
            f("month"),
            f("day"),
            f("hour"),
            f("minute")
        );
        if f("second") != 0 || self.micros != 0 {
            s.push_str(&format!(", {}", f("second")));
        }
        if self.micros != 0 {
            s.push_str(&format!(", {}", self.micros));
        }
        s.push(')');
        s
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

    fn custom_cmp(
        self: &Arc<Self>,
        other: &minijinja::value::DynObject,
    ) -> Option<std::cmp::Ordering> {
        let other = other.downcast_ref::<DateTime>()?;
        Some(self.key().cmp(&other.key()))
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
            // Monday is 0 (`weekday`) or 1 (`isoweekday`); `tm_wday` counts from Sunday.
            "weekday" => Ok(Value::from((self.tm.tm_wday + 6) % 7)),
            "isoweekday" => Ok(Value::from((self.tm.tm_wday + 6) % 7 + 1)),
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

/// Ansible's `strftime(format, second=None, utc=False)`: the format applied to the epoch time
/// given (any number, or text Python's `float()` reads), or to now.
pub(super) fn filter_strftime(
    format: &str,
    second: Option<Value>,
    kwargs: Kwargs,
) -> Result<String, Error> {
    let second = match second {
        Some(s) => Some(s),
        None => kwargs.get::<Option<Value>>("second")?,
    };
    let utc = kwargs.get::<Option<bool>>("utc")?.unwrap_or(false);
    kwargs.assert_all_used()?;
    let t = match second.filter(|s| !s.is_none()) {
        None => std::time::SystemTime::now(),
        Some(s) => {
            let secs = match s.as_str() {
                Some(text) => text.trim().parse::<f64>().ok(),
                None if s.kind() == minijinja::value::ValueKind::Number => {
                    f64::try_from(s.clone()).ok()
                }
                None => None,
            }
            .filter(|f| f.is_finite() && *f >= 0.0)
            .ok_or_else(|| {
                op_err(format!(
                    "Invalid value for epoch value ({})",
                    super::pyrepr::py_string(&s).unwrap_or_default()
                ))
            })?;
            std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(secs)
        }
    };
    let mut dt = DateTime::at(t, utc)?;
    // Python's time.strftime has no `%f`: it is left as it is.
    dt.micros = 0;
    dt.strftime(&format.replace("%f", "%%f"))
}

/// Ansible's `to_datetime(format='%Y-%m-%d %H:%M:%S')`: the text parsed as C's `strptime`
/// reads it, into a datetime value (comparable, with `.year`...).
pub(super) fn filter_to_datetime(text: &str, format: Option<&str>) -> Result<Value, Error> {
    let format = format.unwrap_or("%Y-%m-%d %H:%M:%S");
    let err = || {
        op_err(format!(
            "time data '{text}' does not match format '{format}'"
        ))
    };
    // SAFETY: `tm` is plain data; strptime writes into it and returns the end of what it read.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // Python's defaults for what the format leaves out: 1900-01-01 00:00:00.
    tm.tm_mday = 1;
    let mut micros = 0;
    // C's strptime has no `%f` (Python's microseconds, one to six digits): the format is read
    // in pieces around each, strptime filling the same `tm`.
    let mut rest = text;
    let mut pieces = format.split("%f").peekable();
    while let Some(piece) = pieces.next() {
        let ctext = std::ffi::CString::new(rest).map_err(|_| err())?;
        let cfmt = std::ffi::CString::new(piece).map_err(|_| err())?;
        let end = unsafe { libc::strptime(ctext.as_ptr(), cfmt.as_ptr(), &mut tm) };
        if end.is_null() {
            return Err(err());
        }
        // SAFETY: strptime returns a pointer into `ctext`, at or after its start.
        rest = &rest[unsafe { end.offset_from(ctext.as_ptr()) } as usize..];
        if pieces.peek().is_some() {
            let digits = rest.bytes().take(6).take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return Err(err());
            }
            micros = format!("{:0<6}", &rest[..digits])
                .parse()
                .map_err(|_| err())?;
            rest = &rest[digits..];
        }
    }
    // Python refuses text left over after the format.
    if !rest.is_empty() {
        return Err(err());
    }
    Ok(Value::from_object(DateTime { tm, micros }))
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

    #[test]
    fn strftime_and_to_datetime() {
        assert_eq!(
            eval("'%Y-%m-%d' | strftime(1585247522, utc=true)"),
            json!("2020-03-26")
        );
        assert_eq!(
            eval("'%Y-%m-%d' | strftime('1585247522.0', utc=True)"),
            json!("2020-03-26")
        );
        assert_eq!(eval("('%Y' | strftime(none))[:2]"), json!("20"));
        let e = crate::template::Templar::new()
            .eval("'%Y' | strftime('foo')", &vars())
            .unwrap_err()
            .to_string();
        assert!(e.contains("Invalid value for epoch value (foo)"), "{e}");
        assert_eq!(
            eval("'1993-03-26 01:23:45' | to_datetime < '1994-03-26 01:23:45' | to_datetime"),
            json!(true)
        );
        assert_eq!(
            eval("('2020-01-02' | to_datetime('%Y-%m-%d')).day"),
            json!(2)
        );
        assert_eq!(
            render("{{ '2020-01-02 03:04:05' | to_datetime }}"),
            json!("2020-01-02 03:04:05")
        );
    }
}
