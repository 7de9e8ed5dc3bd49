//! Python's `-` and `**` where minijinja's differ: two datetimes (`to_datetime`, `now()`)
//! subtract to a `timedelta` (`.days`, `.seconds`, `.microseconds`, `total_seconds()`, printed
//! as Python prints one), the idiom of certificate-expiry checks
//! (`((not_after | to_datetime(fmt)) - now()).days < 30`); and `**` with a negative exponent
//! is a float (`2 ** -1` is 0.5; minijinja refuses it). `pyops` rewrites the operators to these
//! helpers: `**` always, `-` only in templates that make datetimes (numbers subtract the same
//! under both, and most templates need no second parse).

use std::sync::Arc;

use minijinja::value::{Object, ObjectRepr};
use minijinja::{Error, ErrorKind, State, Value};

use super::now::DateTime;
use super::pyops::{py_type, raised, Num};

/// The helpers `-` and `**` are rewritten to.
pub(super) const SUB_FN: &str = "__fp_sub";
pub(super) const POW_FN: &str = "__fp_pow";

const MICROS_PER_DAY: i128 = 86_400_000_000;

/// Whether a template makes datetimes, so that its `-` may subtract them.
pub(super) fn makes_dates(src: &str) -> bool {
    src.contains("to_datetime") || src.contains("now(")
}

/// Python's `timedelta`, normalised as Python keeps it: whole microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct TimeDelta(i128);

impl TimeDelta {
    /// `(days, seconds, microseconds)` with `0 <= seconds < 86400` and
    /// `0 <= microseconds < 10**6`, as Python's attributes are.
    fn parts(self) -> (i128, i128, i128) {
        let days = self.0.div_euclid(MICROS_PER_DAY);
        let rest = self.0.rem_euclid(MICROS_PER_DAY);
        (days, rest / 1_000_000, rest % 1_000_000)
    }
}

impl Object for TimeDelta {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let (days, seconds, micros) = self.parts();
        Some(Value::from(match key.as_str()? {
            "days" => days,
            "seconds" => seconds,
            "microseconds" => micros,
            _ => return None,
        }))
    }

    fn custom_cmp(
        self: &Arc<Self>,
        other: &minijinja::value::DynObject,
    ) -> Option<std::cmp::Ordering> {
        Some(self.0.cmp(&other.downcast_ref::<TimeDelta>()?.0))
    }

    fn call_method(
        self: &Arc<Self>,
        _state: &State<'_, '_>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, Error> {
        match method {
            "total_seconds" if args.is_empty() => Ok(Value::from(self.0 as f64 / 1e6)),
            _ => Err(Error::from(ErrorKind::UnknownMethod)),
        }
    }

    /// Python's `str(timedelta)`: `1:30:00`, `60 days, 0:00:00`, `-1 day, 23:00:00.500000`.
    fn render(self: &Arc<Self>, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (days, seconds, micros) = self.parts();
        if days != 0 {
            let s = if days.abs() != 1 { "s" } else { "" };
            write!(f, "{days} day{s}, ")?;
        }
        write!(
            f,
            "{}:{:02}:{:02}",
            seconds / 3600,
            seconds / 60 % 60,
            seconds % 60
        )?;
        if micros != 0 {
            write!(f, ".{micros:06}")?;
        }
        Ok(())
    }
}

/// Python's `repr(timedelta)`, as it shows inside a printed list or dict.
pub(super) fn repr(v: &Value) -> Option<String> {
    let (days, seconds, micros) = v.downcast_object_ref::<TimeDelta>()?.parts();
    let fields: Vec<String> = [
        ("days", days),
        ("seconds", seconds),
        ("microseconds", micros),
    ]
    .iter()
    .filter(|(_, n)| *n != 0)
    .map(|(name, n)| format!("{name}={n}"))
    .collect();
    Some(if fields.is_empty() {
        "datetime.timedelta(0)".into()
    } else {
        format!("datetime.timedelta({})", fields.join(", "))
    })
}

/// Whether `v` is a timedelta, which ansible-core cannot keep as a task's value.
pub(super) fn is_timedelta(v: &Value) -> bool {
    v.downcast_object_ref::<TimeDelta>().is_some()
}

/// `a - b`: numbers as Python subtracts them, datetimes to a timedelta, timedeltas to one.
pub(super) fn sub(a: &Value, b: &Value) -> Result<Value, Error> {
    if a.is_undefined() || b.is_undefined() {
        return Err(Error::from(ErrorKind::UndefinedError));
    }
    if let (Some(x), Some(y)) = (
        a.downcast_object_ref::<DateTime>(),
        b.downcast_object_ref::<DateTime>(),
    ) {
        return Ok(Value::from_object(TimeDelta(
            x.naive_micros() - y.naive_micros(),
        )));
    }
    if let (Some(x), Some(y)) = (
        a.downcast_object_ref::<TimeDelta>(),
        b.downcast_object_ref::<TimeDelta>(),
    ) {
        return Ok(Value::from_object(TimeDelta(x.0 - y.0)));
    }
    match (Num::of(a), Num::of(b)) {
        (Some(Num::Int(x)), Some(Num::Int(y))) => x
            .checked_sub(y)
            .map(Value::from)
            .ok_or_else(|| raised("integer overflow")),
        (Some(x), Some(y)) => Ok(Value::from(x.float() - y.float())),
        _ => Err(raised(&format!(
            "unsupported operand type(s) for -: '{}' and '{}'",
            py_type(a),
            py_type(b)
        ))),
    }
}

/// `a ** b` as Python computes it for ints and floats.
pub(super) fn pow(a: &Value, b: &Value) -> Result<Value, Error> {
    if a.is_undefined() || b.is_undefined() {
        return Err(Error::from(ErrorKind::UndefinedError));
    }
    let (Some(x), Some(y)) = (Num::of(a), Num::of(b)) else {
        return Err(raised(&format!(
            "unsupported operand type(s) for ** or pow(): '{}' and '{}'",
            py_type(a),
            py_type(b)
        )));
    };
    if x.float() == 0.0 && y.float() < 0.0 {
        return Err(raised("0.0 cannot be raised to a negative power"));
    }
    match (x, y) {
        (Num::Int(x), Num::Int(y)) if y >= 0 => Ok(u32::try_from(y)
            .ok()
            .and_then(|y| x.checked_pow(y))
            .map(Value::from)
            // Python's ints have no bound; past i128 the float is the nearest it can say.
            .unwrap_or_else(|| Value::from((x as f64).powf(y as f64)))),
        (x, y) => {
            let (x, y) = (x.float(), y.float());
            if x < 0.0 && y.fract() != 0.0 {
                return Err(raised(
                    "a negative number to a fractional power is a complex number, which \
                     templates here do not have",
                ));
            }
            Ok(Value::from(x.powf(y)))
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use serde_json::json;

    #[test]
    fn datetimes_subtract_to_a_timedelta_as_in_python() {
        let d = |a: &str, b: &str| format!("(('{a}' | to_datetime) - ('{b}' | to_datetime))");
        let span = d("2024-03-01 10:00:00", "2024-01-01 08:30:00");
        assert_eq!(eval(&format!("{span}.days")), json!(60));
        assert_eq!(eval(&format!("{span}.seconds")), json!(5400));
        assert_eq!(
            eval(&format!("{span}.total_seconds()")),
            json!(60.0 * 86400.0 + 5400.0)
        );
        assert_eq!(
            render(&format!("x {{{{ {span} }}}}")),
            json!("x 60 days, 1:30:00")
        );
        let back = d("2024-01-01 08:30:00", "2024-01-01 09:30:00");
        assert_eq!(
            render(&format!("{{{{ {back} }}}}!")),
            json!("-1 day, 23:00:00!")
        );
        assert_eq!(eval(&format!("{back}.days")), json!(-1));
        assert_eq!(eval(&format!("{back} < {span}")), json!(true));
        // Leap years count.
        assert_eq!(
            eval(&format!(
                "{}.days",
                d("2025-01-01 00:00:00", "2024-01-01 00:00:00")
            )),
            json!(366)
        );
        // Numbers still subtract as numbers there.
        assert_eq!(eval("now().year - 2000 > 20"), json!(true));
        assert_eq!(eval("[now().year - 1.5][0] > 2000"), json!(true));
    }

    #[test]
    fn pow_is_pythons() {
        assert_eq!(eval("2 ** -1"), json!(0.5));
        assert_eq!(eval("2 ** 10"), json!(1024));
        assert_eq!(eval("2.0 ** 3"), json!(8.0));
        assert_eq!(eval("10 ** -2"), json!(0.01));
        // Jinja2's `**` is left-associative (Python's is not).
        assert_eq!(eval("2 ** 3 ** 2"), json!(64));
        let err = render_err("{{ 0 ** -1 }}").to_string();
        assert!(
            err.contains("cannot be raised to a negative power"),
            "{err}"
        );
    }
}
