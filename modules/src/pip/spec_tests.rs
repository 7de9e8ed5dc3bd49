//! Tests of `pip::spec`: names, versions and specifiers against what the `packaging` library
//! (which Ansible's module uses) answers for the same inputs.

use super::*;

fn v(s: &str) -> Version {
    Version::parse(s).unwrap_or_else(|| panic!("{s} is a version"))
}

fn sat(req: &str, version: &str) -> bool {
    Requirement::parse(req).satisfied_by(version)
}

#[test]
fn names_are_canonical_as_pep_503_says() {
    assert_eq!(canonical_name("Fp_Other"), "fp-other");
    assert_eq!(canonical_name("a.-_b"), "a-b");
    assert_eq!(canonical_name("ZOPE.Interface"), "zope-interface");
}

#[test]
fn versions_order_as_pep_440() {
    let order = [
        "1.0.dev1",
        "1.0a1",
        "1.0a2.dev3",
        "1.0a2",
        "1.0b1",
        "1.0rc1",
        "1.0",
        "1.0+abc",
        "1.0+5",
        "1.0.post1.dev1",
        "1.0.post1",
        "1.1",
        "1!0.1",
    ];
    for w in order.windows(2) {
        assert!(v(w[0]) < v(w[1]), "{} < {}", w[0], w[1]);
    }
    assert_eq!(v("1.0"), v("1.0.0"));
    assert_eq!(v("v1.0-RC1"), v("1.0rc1"));
    assert_eq!(v("1.0-1"), v("1.0.post1"));
    assert_eq!(v("1.0alpha"), v("1.0a0"));
    assert!(Version::parse("1.0 foo").is_none());
    assert!(Version::parse("banana").is_none());
}

#[test]
fn specifiers_as_packaging_decides_them() {
    assert!(sat("foo==1.0", "1.0.0"));
    assert!(sat("foo==1.0", "1.0+local"));
    assert!(!sat("foo==1.0+a", "1.0"));
    assert!(sat("foo>=1,<2", "1.5"));
    assert!(!sat("foo>=1,<2", "2.0"));
    assert!(sat("foo!=1.1", "1.0"));
    assert!(sat("foo==1.*", "1.9.3"));
    assert!(!sat("foo==1.*", "2.0"));
    assert!(sat("foo!=1.*", "2.0"));
    assert!(sat("foo~=1.4.5", "1.4.9"));
    assert!(!sat("foo~=1.4.5", "1.5.0"));
    assert!(sat("foo~=1.4", "1.9"));
    // Pre-releases count (Ansible asks with prereleases=True)...
    assert!(sat("foo>=1.0", "2.0b1"));
    // ...except a pre-release of the version `<` names, and a post-release of the one `>` names.
    assert!(!sat("foo<2.0", "2.0rc1"));
    assert!(sat("foo<2.0rc2", "2.0rc1"));
    assert!(!sat("foo>1.0", "1.0.post1"));
    assert!(sat("foo>1.0.post1", "1.0.post2"));
    assert!(!sat("foo>1.0", "1.0+local"));
    assert!(sat("foo===1.0", "1.0"));
    assert!(!sat("foo===1.0", "1.0.0"));
    assert!(sat("foo", "anything"));
    assert!(!sat("foo==1.0", "not-a-version"));
}

#[test]
fn requirements_print_as_packaging_prints_them() {
    let r = Requirement::parse("Foo_Bar[z, a] >= 1, <2");
    assert_eq!(r.to_string(), "Foo_Bar[a,z]<2,>=1");
    assert_eq!(r.key().as_deref(), Some("foo-bar"));
    assert!(r.has_specifier());
    assert_eq!(Requirement::parse("foo (==1.0)").to_string(), "foo==1.0");
    for other in [
        "git+https://example.com/x.git#egg=x",
        "./some/dir",
        "file:///tmp/x.whl",
        "foo; python_version > '3'",
        "foo >= ",
        "foo==1.0 bar",
    ] {
        assert_eq!(Requirement::parse(other), Requirement::Other(other.into()));
    }
    assert_eq!(
        Requirement::with_version("foo", "1.0").to_string(),
        "foo==1.0"
    );
    assert_eq!(
        Requirement::with_version("foo", ">=1.0").to_string(),
        "foo>=1.0"
    );
}

#[test]
fn comma_split_names_are_joined_again_as_ansible_does() {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        recover_names(&s(&[
            "django>1.11.1",
            "<1.11.3",
            "ipaddress",
            "simple>1.1.0",
            "<2.0.0"
        ])),
        s(&["django>1.11.1,<1.11.3", "ipaddress", "simple>1.1.0,<2.0.0"])
    );
    assert_eq!(
        recover_names(&s(&["foo[a", "b]>=1", "bar"])),
        s(&["foo[a,b]>=1", "bar"])
    );
}
