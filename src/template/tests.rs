//! The templar's own unit tests: rendering, native values, conditions, errors.

use super::test_support::*;
use super::*;
use minijinja::value::{Enumerator, Object};
use serde_json::json;
use std::collections::BTreeMap;

#[test]
fn templar_is_shareable() {
    fn check<T: Send + Sync + Clone>() {}
    check::<Templar>();
}

#[test]
fn detects_templates() {
    assert!(Templar::is_template("{{ x }}"));
    assert!(Templar::is_template("a {% if x %}b{% endif %}"));
    assert!(Templar::is_template("{# note #}"));
    assert!(!Templar::is_template("plain { text } %"));
}

#[test]
fn single_expression_returns_native_values() {
    assert_eq!(render("{{ users }}"), json!(["alice", "bob"]));
    // Text left around the value makes a string, as Jinja2 concatenates output nodes; the
    // one trailing newline Jinja2 drops does not count.
    assert_eq!(render("  {{ users }} "), json!("  ['alice', 'bob'] "));
    assert_eq!(
        render("{{ user }}\n"),
        json!({"name": "bob", "uid": 1000, "groups": ["wheel"]})
    );
    assert_eq!(render("{{- users -}} "), json!(["alice", "bob"]));
    // Statements that print one value and nothing else give that value.
    assert_eq!(render("{% set l = [3] %}{{ l }}"), json!([3]));
    assert_eq!(
        render("{% if flag %}{{ users }}{% endif %}\n"),
        json!(["alice", "bob"])
    );
    assert_eq!(
        render("{% if flag %}{{ users }} {% endif %}"),
        json!("['alice', 'bob'] ")
    );
    assert_eq!(render("{% if flag %}{{ x }}{% endif %}"), json!("a"));
    assert_eq!(render("{{ count + 1 }}"), json!(4));
    assert_eq!(render("{{ flag }}"), json!(true));
    assert_eq!(render("{{ nothing }}"), json!(null));
    assert_eq!(render("{{ 1.5 }}"), json!(1.5));
    assert_eq!(render("{{- users | length -}}"), json!(2));
    assert_eq!(render("{{ {'a': {'b': 1}} }}"), json!({"a": {"b": 1}}));
    assert_eq!(render("{{ x }}"), json!("a"));
    assert_eq!(render("{{ -count }}"), json!(-3));
    // Whitespace around a string result is kept, unless whitespace control strips it.
    assert_eq!(render("{{ x }}\n"), json!("a\n"));
    assert_eq!(render(" {{- x }}\n"), json!("a\n"));
    assert_eq!(render(" {{ x -}}\n"), json!(" a"));
    assert_eq!(render(" {{ users }}\n"), json!(" ['alice', 'bob']\n"));
    // An `if` without `else` is silently undefined, not an error.
    assert_eq!(render("{{ x if false }}"), json!(""));
    assert_eq!(render("{{ foo if foo is defined }}"), json!(""));
    // ... but as a condition it is none, not a boolean (ansible-core 2.19 fails it).
    assert!(Templar::new()
        .eval_bool("foo if foo is defined", &vars())
        .is_err());
    assert_eq!(render("[{{ foo if foo is defined }}]"), json!("[]"));
}

#[test]
fn mixed_text_renders_to_python_style_strings() {
    assert_eq!(render("n={{ count }}"), json!("n=3"));
    assert_eq!(render("{{ x }}{{ count }}"), json!("a3"));
    assert_eq!(render("{{ x }} and {{ y }}"), json!("a and yes"));
    assert_eq!(
        render("flag={{ flag }} none={{ nothing }}"),
        json!("flag=True none=")
    );
    assert_eq!(
        render("users: {{ users }}"),
        json!("users: ['alice', 'bob']")
    );
    assert_eq!(
        render("u: {{ {'k': \"it's\"} }}"),
        json!("u: {'k': \"it's\"}")
    );
    assert_eq!(render("plain text"), json!("plain text"));
    assert_eq!(render("{% if flag %}on{% endif %}"), json!("on"));
    assert_eq!(render("{# only a comment #}"), json!(""));
}

#[test]
fn render_value_walks_lists_maps_and_keys() {
    let t = Templar::new();
    let v = json!({"name": "{{ user.name }}", "{{ x }}_key": ["{{ count }}", 5, "lit"], "n": null});
    let out = t.render_value(&v, &vars()).unwrap();
    assert_eq!(
        out,
        json!({"name": "bob", "a_key": [3, 5, "lit"], "n": null})
    );
}

#[test]
fn when_style_expressions() {
    assert!(truth("x == 'a' and y | bool"));
    assert!(!truth("x == 'b' or not flag"));
    assert!(truth("{{ x == 'a' }}"));
    // A string a whole-template condition renders to is an expression only when trusted
    // (see `condition`); it is never read as a boolean word.
    let c = ctx(json!({"s_false": "False", "s_yes": "yes"}));
    let t = Templar::new();
    assert!(t.eval_bool("{{ s_false }}", &c).is_err());
    assert!(
        !t.eval_condition("{{ s_false }}", &c, &|_, _| true)
            .unwrap()
            .holds
    );
    assert!(
        t.eval_bool("s_false", &c).is_err(),
        "a bare string is not a boolean (ansible-core 2.19)"
    );
    assert!(truth("'alice' in users"));
    assert!(truth("users | length > 1"));
    assert!(truth("count is divisibleby 3"));
    assert!(!truth("count is divisibleby 2"));
    assert!(truth("4.5 is divisibleby 1.5"));
    // A zero divisor is an error, as Python's ZeroDivisionError (minijinja's own panicked).
    assert!(Templar::new().eval("4 is divisibleby(0)", &vars()).is_err());
    // A template inside a string constant renders to a value.
    assert!(truth("'{{ x }}' == 'a'"));
    // Template delimiters outside a constant are not an expression.
    assert!(matches!(
        Templar::new().eval_bool("{{ x }} == 'a'", &vars()),
        Err(TemplateError::Syntax { .. })
    ));
    assert!(matches!(
        Templar::new().eval_bool("x }} y", &vars()),
        Err(TemplateError::Syntax { .. })
    ));
    assert!(!truth("empty | length > 0"));
    assert!(Templar::new().eval_bool("empty", &vars()).is_err());
    assert_eq!(eval("users | map('upper') | list"), json!(["ALICE", "BOB"]));
    assert_eq!(eval("{{ count * 2 }}"), json!(6));
    // `debug: var=` never evaluates what a template rendered to.
    assert_eq!(eval("'{{ x }}' ~ 'b'"), json!("ab"));
    assert!(Templar::new().eval("{{ x }}{{ x }}", &vars()).is_err());
    assert!(Templar::new().eval_bool("  ", &vars()).is_err());
}

#[test]
fn unsafe_values_are_never_rendered() {
    let t = Templar::new();
    let v = json!({"a": mark::mark(json!("{{ x }}")), "b": "{{ x }}",
        "c": mark::mark(json!({"{{ x }}": ["{{ x }}"]}))});
    assert!(Templar::needs_render(&json!([mark::mark(json!(1))])));
    assert!(!Templar::needs_render(&json!({"a": [1, "b"]})));
    assert_eq!(
        t.render_value(&v, &vars()).unwrap(),
        json!({"a": "{{ x }}", "b": "a", "c": {"{{ x }}": ["{{ x }}"]}})
    );
}

/// A context that resolves variables on demand, as the engine's scopes do.
#[derive(Debug)]
struct Lazy {
    vars: BTreeMap<String, Json>,
}

impl Object for Lazy {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        self.vars.get(key.as_str()?).map(Value::from_serialize)
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(self.vars.keys().map(|k| Value::from(k.as_str())).collect())
    }
}

#[test]
fn dynamic_object_context() {
    let lazy = Lazy {
        vars: BTreeMap::from([
            ("pkgs".to_string(), json!(["nginx", "curl"])),
            (
                "svc".to_string(),
                json!({"name": "nginx", "enabled": "yes"}),
            ),
        ]),
    };
    let c = Value::from_object(lazy);
    let t = Templar::new();
    assert_eq!(
        t.render_str("{{ pkgs }}", &c).unwrap(),
        json!(["nginx", "curl"])
    );
    assert_eq!(
        t.render_str("svc={{ svc.name }}", &c).unwrap(),
        json!("svc=nginx")
    );
    assert!(t
        .eval_bool("svc.enabled | bool and 'curl' in pkgs", &c)
        .unwrap());
    assert_eq!(
        t.render_str("{{ nope | default(1) }}", &c).unwrap(),
        json!(1)
    );
    assert_eq!(
        t.render_str("{{ svc.port.num | default(80) }}", &c)
            .unwrap(),
        json!(80)
    );
    assert_eq!(
        undefined_name(t.render_str("{{ svc.nmae }}", &c).unwrap_err()),
        "svc.nmae"
    );
    assert_eq!(undefined_name(t.eval_bool("nope", &c).unwrap_err()), "nope");
    // Enumerating the context works too (e.g. for debugging every variable).
    let all = t.eval("svc", &c).unwrap();
    assert_eq!(all, json!({"name": "nginx", "enabled": "yes"}));
}

#[test]
fn check_syntax_does_not_render() {
    let t = Templar::new();
    assert!(t.check_syntax("{{ undefined_is_fine_here }}").is_ok());
    assert!(t
        .check_syntax("{% for x in y %}{{ x }}{% endfor %}")
        .is_ok());
    let e = t.check_syntax("{% for x in y %}").unwrap_err();
    assert!(matches!(e, TemplateError::Syntax { .. }), "{e:?}");
    let e = t.check_syntax("{{ x | }}").unwrap_err();
    assert!(
        matches!(e, TemplateError::Syntax { line: Some(1), .. }),
        "{e:?}"
    );
}

#[test]
fn untrusted_engine_has_no_lookups_and_runs_out_of_fuel() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let t = Templar::untrusted(10_000);
    let c = vars();
    for call in ["lookup", "query", "q"] {
        let src = format!("{{{{ {call}('lines', 'touch {}') }}}}", marker.display());
        assert!(t.render_str(&src, &c).is_err(), "{src}");
    }
    assert!(!marker.exists(), "a lookup ran a command");
    // Ten billion iterations: without the fuel bound this would not return.
    let e = t
        .render_str(
            "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
            &c,
        )
        .unwrap_err();
    assert!(e.to_string().contains("fuel"), "{e}");
    // Ordinary templates still render.
    assert_eq!(
        t.render_str("{{ count + 1 }}", &c).unwrap(),
        serde_json::json!(4)
    );
}
