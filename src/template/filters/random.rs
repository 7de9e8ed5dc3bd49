//! Random filters: `random` (a number below an end, or an element of a list) and `shuffle`.
//! With `seed`, the choice is the one Python's `random.Random(seed)` makes, as in ansible-core:
//! `{{ 60 | random(seed=inventory_hostname) }}` spreads cron jobs over the hour, and a host
//! moved from Ansible must keep its minute. Without a seed, any choice will do.

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, Value};
use rand_mt::Mt;
use sha2::{Digest, Sha512};

use crate::template::value::{defined, op_err};

/// The generator of one filter call (or `password` lookup).
pub(in crate::template) enum Rng {
    /// CPython's Mersenne Twister, seeded as `random.seed(seed)` (version 2) seeds it.
    Python(Box<Mt>),
    Any(fastrand::Rng),
}

impl Rng {
    pub(in crate::template) fn new(seed: Option<Value>) -> Result<Rng, Error> {
        let Some(seed) = seed.filter(|s| !s.is_none() && !s.is_undefined()) else {
            return Ok(Rng::Any(fastrand::Rng::new()));
        };
        // A string seeds with the integer of its UTF-8 bytes followed by their SHA-512
        // (big-endian); an integer with its absolute value.
        let big_endian: Vec<u8> = match (seed.as_str(), seed.kind()) {
            (Some(s), _) => [s.as_bytes(), &Sha512::digest(s.as_bytes())[..]].concat(),
            (None, ValueKind::Bool) => vec![u8::from(seed.is_true())],
            (None, ValueKind::Number) if seed.is_integer() => i128::try_from(seed.clone())?
                .unsigned_abs()
                .to_be_bytes()
                .to_vec(),
            _ => {
                return Err(op_err(format!(
                    "random: fixpoint takes a string or an integer as `seed`, not {}",
                    super::types::filter_type_debug(&seed)
                )))
            }
        };
        // CPython's key: the integer's 32-bit words, least significant first, as many as its
        // bits need (at least one).
        let mut key: Vec<u32> = big_endian
            .rchunks(4)
            .map(|c| {
                let mut w = [0u8; 4];
                w[4 - c.len()..].copy_from_slice(c);
                u32::from_be_bytes(w)
            })
            .collect();
        while key.len() > 1 && key.last() == Some(&0) {
            key.pop();
        }
        Ok(Rng::Python(Box::new(Mt::new_with_key(key))))
    }

    /// A number in `0..n` (n > 0), as Python's `_randbelow`: `getrandbits` of n's bit length,
    /// drawn again until it is below n.
    pub(in crate::template) fn below(&mut self, n: u64) -> u64 {
        let mt = match self {
            Rng::Any(r) => return r.u64(0..n),
            Rng::Python(mt) => mt,
        };
        let k = 64 - n.leading_zeros();
        loop {
            // `getrandbits(k)`: 32-bit words from the least significant, the last one's
            // low bits dropped.
            let r = if k <= 32 {
                u64::from(mt.next_u32() >> (32 - k))
            } else {
                let low = u64::from(mt.next_u32());
                low | u64::from(mt.next_u32() >> (64 - k)) << 32
            };
            if r < n {
                return r;
            }
        }
    }
}

/// Python's floor division of integers.
fn floor_div(a: i64, b: i64) -> i64 {
    let q = a / b;
    if a % b != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

/// `end | random(start=0, step=1, seed=None)` (Python's `randrange(start, end, step)`) or
/// `list | random(seed=None)` (`choice`).
pub(super) fn filter_random(
    value: &Value,
    start: Option<i64>,
    step: Option<i64>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let start = start.or(kwargs.get("start")?);
    let step = step.or(kwargs.get("step")?);
    let mut rng = Rng::new(kwargs.get("seed")?)?;
    kwargs.assert_all_used()?;
    let value = defined(value)?;
    if let Some(end) = value.as_i64().filter(|_| value.kind() == ValueKind::Number) {
        // ansible-core: a start or step that is 0 is not given.
        let start = start.unwrap_or(0);
        let step = step.filter(|s| *s != 0).unwrap_or(1);
        let width = end - start;
        let n = match step {
            1 => width,
            s if s > 0 => floor_div(width + s - 1, s),
            s => floor_div(width + s + 1, s),
        };
        if n <= 0 {
            return Err(op_err(format!(
                "random: empty range ({start}, {end}, {step})"
            )));
        }
        return Ok(Value::from(start + step * rng.below(n as u64) as i64));
    }
    if start.is_some_and(|s| s != 0) || step.is_some_and(|s| s != 0) {
        return Err(op_err(
            "random: start and step can only be used with integer values",
        ));
    }
    let items =
        items(value).map_err(|_| op_err("random can only be used on sequences and integers"))?;
    if items.is_empty() {
        return Err(op_err("random: cannot choose from an empty sequence"));
    }
    Ok(items[rng.below(items.len() as u64) as usize].clone())
}

/// The items Python iterates: a string's characters, a list's items, a mapping's keys.
fn items(value: &Value) -> Result<Vec<Value>, Error> {
    match (value.as_str(), value.kind()) {
        (Some(s), _) => Ok(s.chars().map(|c| Value::from(c.to_string())).collect()),
        (None, ValueKind::Number) => Err(op_err("not iterable")),
        _ => Ok(value.try_iter()?.collect()),
    }
}

/// `list | shuffle(seed=None)`: the items in a random order, by Python's `Random.shuffle`.
pub(super) fn filter_shuffle(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let mut rng = Rng::new(kwargs.get("seed")?)?;
    kwargs.assert_all_used()?;
    let mut items = items(defined(value)?)?;
    for i in (1..items.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        items.swap(i, j);
    }
    Ok(Value::from(items))
}

#[cfg(test)]
mod tests {
    use crate::template::test_support::*;
    use serde_json::json;

    #[test]
    fn random_and_shuffle() {
        assert_eq!(eval("[7] | random"), json!(7));
        assert_eq!(eval("[7] | shuffle"), json!([7]));
        for _ in 0..20 {
            let n = eval("10 | random(start=5, step=2)").as_i64().unwrap();
            assert!([5, 7, 9].contains(&n), "{n}");
        }
        assert_eq!(
            eval("[1, 2, 3, 4, 5] | shuffle(seed='x')"),
            eval("[1, 2, 3, 4, 5] | shuffle(seed='x')")
        );
        assert_eq!(eval("[1, 2, 3] | shuffle | sort"), json!([1, 2, 3]));
        assert_eq!(
            eval("100 | random(seed=inventory_hostname | default('h'))"),
            eval("100 | random(seed='h')")
        );
    }

    /// What Python 3.11's `random.Random(seed)` gives (`randrange`, `choice`, `shuffle`).
    #[test]
    fn seeded_choices_are_pythons() {
        for (expr, want) in [
            ("[1, 2, 3] | random(seed=1)", json!(1)),
            ("100 | random(seed=5)", json!(79)),
            ("['a', 'b', 'c'] | shuffle(seed=3)", json!(["b", "c", "a"])),
            ("60 | random(seed='web1.example.com')", json!(31)),
            ("10 | random(start=1, step=3, seed=7)", json!(4)),
            ("1099511627776 | random(seed=-9)", json!(585718914800_u64)),
            ("'abc' | random(seed='s')", json!("b")),
        ] {
            assert_eq!(eval(expr), want, "{expr}");
        }
    }
}
