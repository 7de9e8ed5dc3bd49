//! Lists and dicts a template builds up in place, as Jinja2 under ansible-core lets it:
//! `{% set names = [] %}{% for u in users %}{% set _ = names.append(u.name) %}{% endfor %}`,
//! `{% set d = {} %}{% set _ = d.update({k: v}) %}`.
//!
//! minijinja's values never change, so a list or dict literal assigned by `{% set %}` in a
//! template that calls one of Python's changing methods is rewritten to `__fp_mutable(literal)`
//! (`rewrite_template`), which makes it a list or dict with interior mutability. Only such
//! templates are parsed for it; every other value stays minijinja's own.

use std::sync::{Arc, Mutex, MutexGuard};

use minijinja::value::{Enumerator, Kwargs, Object, ObjectRepr, ValueKind};
use minijinja::{Error, ErrorKind, State, Value};

use super::ast_walk::{apply, each_expr, extent, parse_template, Edit};
use super::pyops::raised;
use super::value::split_kwargs;

/// The helper the literals are wrapped in.
pub(super) const MUTABLE_FN: &str = "__fp_mutable";

/// Python's methods that change a list or a dict: a template calling one needs the rewrite.
const CHANGING: &[&str] = &[
    ".append(",
    ".extend(",
    ".insert(",
    ".pop(",
    ".remove(",
    ".clear(",
    ".reverse(",
    ".update(",
    ".setdefault(",
    ".popitem(",
];

/// `src` with the list and dict literals of its `{% set x = ... %}` wrapped, when it calls a
/// changing method; None otherwise.
pub(super) fn rewrite_template(src: &str) -> Option<String> {
    if !CHANGING.iter().any(|m| src.contains(m)) {
        return None;
    }
    let ast = parse_template(src)?;
    let mut edits = Vec::new();
    each_expr(&ast, &mut |x| {
        use minijinja::machinery::ast::Expr;
        if !matches!(x, Expr::List(_) | Expr::Map(_)) {
            return;
        }
        let (start, end) = extent(x);
        // Only the value of a `{% set name = ... %}` (the outermost expressions of a
        // statement are visited, so a literal here is a whole value).
        let before = src.get(..start).unwrap_or_default().trim_end();
        let Some(lhs) = before.strip_suffix('=').map(str::trim_end) else {
            return;
        };
        let name_start = lhs
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map_or(0, |i| i + 1);
        let keyword = lhs[..name_start].trim_end();
        if name_start == lhs.len() || !keyword.ends_with("set") {
            return;
        }
        edits.push(Edit {
            range: start..start,
            text: format!("{MUTABLE_FN}("),
            rank: (2, 0),
        });
        edits.push(Edit {
            range: end..end,
            text: ")".into(),
            rank: (0, 0),
        });
    });
    apply(src, edits)
}

/// `__fp_mutable(literal)`: the literal as a list or dict that its methods can change.
pub(super) fn mutable(v: Value) -> Result<Value, Error> {
    Ok(match v.kind() {
        ValueKind::Seq => Value::from_object(List(Mutex::new(v.try_iter()?.collect()))),
        ValueKind::Map => {
            let pairs = v
                .try_iter()?
                .map(|k| Ok((k.clone(), v.get_item(&k)?)))
                .collect::<Result<_, Error>>()?;
            Value::from_object(Dict(Mutex::new(pairs)))
        }
        _ => v,
    })
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn arity(method: &str, args: &[Value], min: usize, max: usize) -> Result<(), Error> {
    if args.len() < min || args.len() > max {
        return Err(raised(&format!(
            "{method}() takes {min} to {max} arguments ({} given)",
            args.len()
        )));
    }
    Ok(())
}

/// A list its methods change.
#[derive(Debug)]
struct List(Mutex<Vec<Value>>);

impl Object for List {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let items = lock(&self.0);
        let i = i64::try_from(key.clone()).ok()?;
        let i = if i < 0 { i + items.len() as i64 } else { i };
        items.get(usize::try_from(i).ok()?).cloned()
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(lock(&self.0).clone())
    }

    fn call_method(
        self: &Arc<Self>,
        _state: &State<'_, '_>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, Error> {
        let mut items = lock(&self.0);
        match method {
            "append" => {
                arity(method, args, 1, 1)?;
                items.push(args[0].clone());
            }
            "extend" => {
                arity(method, args, 1, 1)?;
                items.extend(args[0].try_iter()?);
            }
            "insert" => {
                arity(method, args, 2, 2)?;
                let len = items.len() as i64;
                let i = i64::try_from(args[0].clone())?;
                let i = if i < 0 { (i + len).max(0) } else { i.min(len) };
                items.insert(i as usize, args[1].clone());
            }
            "pop" => {
                arity(method, args, 0, 1)?;
                let len = items.len() as i64;
                let i = match args.first() {
                    Some(i) => i64::try_from(i.clone())?,
                    None => -1,
                };
                let i = if i < 0 { i + len } else { i };
                if items.is_empty() {
                    return Err(raised("pop from empty list"));
                }
                if i < 0 || i >= len {
                    return Err(raised("pop index out of range"));
                }
                return Ok(items.remove(i as usize));
            }
            "remove" => {
                arity(method, args, 1, 1)?;
                let Some(i) = items.iter().position(|x| *x == args[0]) else {
                    return Err(raised("list.remove(x): x not in list"));
                };
                items.remove(i);
            }
            "clear" => {
                arity(method, args, 0, 0)?;
                items.clear();
            }
            "reverse" => {
                arity(method, args, 0, 0)?;
                items.reverse();
            }
            "copy" => {
                arity(method, args, 0, 0)?;
                return Ok(Value::from(items.clone()));
            }
            _ => return Err(Error::from(ErrorKind::UnknownMethod)),
        }
        // Python's changing methods return None.
        Ok(Value::from(()))
    }
}

/// A dict its methods change, in insertion order.
#[derive(Debug)]
struct Dict(Mutex<Vec<(Value, Value)>>);

/// Sets `k` in an insertion-ordered list of pairs, as a Python dict does.
pub(super) fn set_pair(items: &mut Vec<(Value, Value)>, k: Value, v: Value) {
    match items.iter_mut().find(|(ok, _)| *ok == k) {
        Some(slot) => slot.1 = v,
        None => items.push((k, v)),
    }
}

impl Object for Dict {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        lock(&self.0)
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(lock(&self.0).iter().map(|(k, _)| k.clone()).collect())
    }

    fn call_method(
        self: &Arc<Self>,
        _state: &State<'_, '_>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, Error> {
        let mut items = lock(&self.0);
        let find = |items: &[(Value, Value)], k: &Value| items.iter().position(|(ok, _)| ok == k);
        match method {
            "update" => {
                let (positional, kwargs): (Vec<Value>, Kwargs) = split_kwargs(args)?;
                arity(method, &positional, 0, 1)?;
                if let Some(other) = positional.first() {
                    for k in other.try_iter()? {
                        let v = other.get_item(&k)?;
                        set_pair(&mut items, k, v);
                    }
                }
                for k in kwargs.args() {
                    let v: Value = kwargs.get(k)?;
                    set_pair(&mut items, Value::from(k), v);
                }
            }
            "setdefault" => {
                arity(method, args, 1, 2)?;
                if let Some(i) = find(&items, &args[0]) {
                    return Ok(items[i].1.clone());
                }
                let v = args.get(1).cloned().unwrap_or(Value::from(()));
                items.push((args[0].clone(), v.clone()));
                return Ok(v);
            }
            "pop" => {
                arity(method, args, 1, 2)?;
                return match (find(&items, &args[0]), args.get(1)) {
                    (Some(i), _) => Ok(items.remove(i).1),
                    (None, Some(default)) => Ok(default.clone()),
                    (None, None) => Err(raised(&format!("KeyError: {}", args[0]))),
                };
            }
            "popitem" => {
                arity(method, args, 0, 0)?;
                let Some((k, v)) = items.pop() else {
                    return Err(raised("popitem(): dictionary is empty"));
                };
                return Ok(Value::from(vec![k, v]));
            }
            "clear" => {
                arity(method, args, 0, 0)?;
                items.clear();
            }
            "copy" => {
                arity(method, args, 0, 0)?;
                return Ok(Value::from_iter(items.iter().cloned()));
            }
            // `get`, `keys`, `items`... are pycompat's, which reads any mapping.
            _ => return Err(Error::from(ErrorKind::UnknownMethod)),
        }
        Ok(Value::from(()))
    }
}

#[cfg(test)]
mod tests {
    use super::rewrite_template;
    use crate::template::test_support::*;
    use serde_json::json;

    #[test]
    fn only_set_literals_of_templates_that_change_them_are_wrapped() {
        assert_eq!(rewrite_template("{% set l = [] %}{{ l }}"), None);
        assert_eq!(
            rewrite_template("{% set l = [] %}{% set d = {'a': [1]} %}{{ l.append(1) }}").unwrap(),
            "{% set l = __fp_mutable([]) %}{% set d = __fp_mutable({'a': [1]}) %}{{ l.append(1) }}"
        );
        assert_eq!(
            rewrite_template("{{ [1].append(2) }}{% if x == [] %}{% endif %}"),
            None
        );
    }

    #[test]
    fn lists_and_dicts_change_in_place() {
        for (src, want) in [
            (
                "{% set l = [] %}{% for u in users %}{% set _ = l.append(u | upper) %}{% endfor %}{{ l }}",
                json!(["ALICE", "BOB"]),
            ),
            (
                "{% set l = [3] %}{% set _ = l.extend([1, 2]) %}{% set _ = l.insert(0, 9) %}{{ l.pop() }}{{ l }}",
                json!("2[9, 3, 1]"),
            ),
            (
                "{% set d = {} %}{% for i in items %}{% set _ = d.update({i.key: i.value}) %}{% endfor %}{{ d }}",
                json!({"a": 1, "b": 2}),
            ),
            (
                "{% set d = {'a': 1} %}{{ d.setdefault('b', 2) }}{{ d.setdefault('a', 5) }}{{ d.pop('a') }}{{ d | to_json }}",
                json!("211{\"b\": 2}"),
            ),
            (
                "{% set d = {} %}{% set _ = d.update(x=1) %}{{ d.keys() | list }} {{ d.get('x') }} {{ d | length }}",
                json!("['x'] 1 1"),
            ),
        ] {
            assert_eq!(render(src), want, "{src}");
        }
        let err = render_err("{% set l = [] %}{{ l.pop() }}").to_string();
        assert!(err.contains("pop from empty list"), "{err}");
    }
}
