//! The `ini` lookup: values of an INI file (or a Java properties file) read as ansible-core
//! reads them, with Python's `configparser` (strict, `=` and `:` delimiters, `#`/`;` full-line
//! comments, indented continuation lines, a `DEFAULT` section every section inherits, keys
//! lowercased unless `case_sensitive`, `%(key)s` interpolation unless `interpolation=False`).
//!
//! Options: `section` (`global`), `file` (`ansible.ini`, found as the `file` lookup finds
//! files), `re`, `default` (`''`), `type` (`ini` or `properties`), `encoding`,
//! `case_sensitive`, `allow_no_value` (`allow_none`) and `interpolation`, as keyword arguments
//! or inline in the term (`user section=prod file=users.ini`). One parser serves all the terms
//! of a call, as ansible-core's does: each term's file is read into it again.

use std::path::PathBuf;

use minijinja::value::Kwargs;
use minijinja::{Error, Value};

use super::op_err;
use super::options::{self, ansible_bool, py_type, repr, text, Kind, Options};

const SPECS: &[(&str, Kind)] = &[
    ("_terms", Kind::Raw),
    ("type", Kind::Choice(&["ini", "properties"])),
    ("file", Kind::Raw),
    ("section", Kind::Raw),
    ("re", Kind::Bool),
    ("encoding", Kind::Raw),
    ("default", Kind::Raw),
    ("case_sensitive", Kind::Raw),
    ("allow_no_value", Kind::Bool),
    ("interpolation", Kind::Bool),
];

/// The section name configparser gives to the values every section inherits.
const DEFAULT_SECTION: &str = "DEFAULT";

/// How deep `%(key)s` references may nest (configparser's MAX_INTERPOLATION_DEPTH).
const MAX_DEPTH: usize = 10;

/// `lookup('ini', *terms, **kwargs)`; `find` finds a file as the `file` lookup does.
pub(super) fn lookup(
    terms: &[Value],
    kwargs: &Kwargs,
    find: &dyn Fn(&str) -> Option<PathBuf>,
) -> Result<Vec<Value>, Error> {
    let mut opts = Options::new(
        "ini",
        SPECS,
        vec![
            ("type", Value::from("ini")),
            ("file", Value::from("ansible.ini")),
            ("section", Value::from("global")),
            ("re", Value::from(false)),
            ("encoding", Value::from("utf-8")),
            ("default", Value::from("")),
            ("case_sensitive", Value::from(false)),
            ("allow_no_value", Value::from(false)),
            ("interpolation", Value::from(true)),
        ],
    );
    opts.set_kwargs(kwargs, &[("allow_none", "allow_no_value")])?;
    let mut parser = Parser::new(
        ansible_bool(opts.get("allow_no_value")),
        opts.get("case_sensitive").is_true(),
    );
    // Made once for the call, as ansible-core's parser is: an inline `case_sensitive`,
    // `allow_no_value` or `interpolation` changes nothing.
    let interpolate = opts.get("interpolation").is_true();
    let mut out = Vec::new();
    for term in terms {
        let key = term_key(term, &mut opts).map_err(op_err)?;
        let file = text(opts.get("file"));
        let path = find(&file).ok_or_else(|| {
            op_err(format!(
                "Unable to find '{file}' in expected paths: Invalid filename None."
            ))
        })?;
        let bytes = crate::vault::read_file(&path).map_err(|e| op_err(e.to_string()))?;
        let mut contents =
            options::decode(&bytes, &text(opts.get("encoding")), true).map_err(op_err)?;
        if text(opts.get("type")) == "properties" {
            contents.insert_str(0, "[java_properties]\n");
            opts.set("section", Value::from("java_properties"))
                .map_err(op_err)?;
        }
        parser.read(&contents).map_err(|e| {
            op_err(match e {
                ReadError::DuplicateOption(e) => {
                    format!(
                        "Duplicate option in {}: {e}",
                        repr(&Value::from(file.as_str()))
                    )
                }
                ReadError::Other(e) => e,
            })
        })?;
        let section = opts.get("section").clone();
        let no_section = || {
            op_err(format!(
                "No section {} in {}.",
                repr(&section),
                repr(&Value::from(file.as_str()))
            ))
        };
        let Some(section_name) = section.as_str().filter(|s| parser.has_section(s)) else {
            return Err(no_section());
        };
        if opts.get("re").is_true() {
            // Python's `re.match`: anchored at the start only.
            fancy_regex::Regex::new(&key).map_err(|e| op_err(super::python_re_error(&key, &e)))?;
            let re =
                super::super::filters::regex::cached_regex(&format!(r"\A(?:{key})"), false, false)?;
            for (k, v) in parser.items(section_name, interpolate).map_err(op_err)? {
                if re.is_match(&k).unwrap_or(false) {
                    out.push(Value::from(v));
                }
            }
            continue;
        }
        match parser
            .get(section_name, &key, interpolate)
            .map_err(op_err)?
        {
            Lookup::Missing => {
                let default = opts.get("default");
                if !default.is_none() && !default.is_undefined() {
                    out.push(default.clone());
                }
            }
            Lookup::NoValue => {}
            Lookup::Value(v) => out.push(Value::from(v)),
        }
    }
    Ok(out)
}

/// The key a term looks up, with the options written inline in it set (for this term and the
/// ones after it, as in ansible-core). Inline options are split as ansible-core's `ini` plugin
/// splits them: on whitespace, a word that contains `name=` for an option name starting that
/// option's value, the other words continuing the value before them.
fn term_key(term: &Value, opts: &mut Options) -> Result<String, String> {
    let Some(term) = term.as_str() else {
        return Err(match py_type(term) {
            t @ ("list" | "dict") => format!("'{t}' object has no attribute 'strip'"),
            t => format!("argument of type '{t}' is not iterable"),
        });
    };
    // ansible-core looks for inline options only where there is a `=` or an inner space.
    if !term.contains('=') && !term.trim().contains(' ') {
        return Ok(term.to_string());
    }
    let names: Vec<&str> = opts.names().collect();
    let mut params: Vec<(&str, String)> = Vec::new();
    let mut current = "key";
    for (i, word) in term.split_whitespace().enumerate() {
        if word.contains('=') {
            if let Some(n) = names.iter().rev().find(|n| word.contains(&format!("{n}="))) {
                current = n;
            }
        }
        match params.iter_mut().find(|(k, _)| *k == current) {
            Some((_, v)) if i > 0 && !v.is_empty() => {
                v.push(' ');
                v.push_str(word);
            }
            Some((_, v)) => *v = word.to_string(),
            None => params.push((current, word.to_string())),
        }
    }
    let listed = || {
        let words: Vec<Value> = params
            .iter()
            .map(|(_, v)| Value::from(v.as_str()))
            .collect();
        repr(&Value::from(words))
    };
    let mut key = None;
    for (_, param) in &params {
        if param.contains('=') {
            let parts: Vec<&str> = param.split('=').collect();
            let [name, value] = parts[..] else {
                return Err(format!(
                    "Could not use {} from {}: too many values to unpack (expected 2)",
                    repr(&Value::from(param.as_str())),
                    listed()
                ));
            };
            if !opts.knows(name) {
                return Err(format!(
                    "{} is not a valid option.",
                    repr(&Value::from(name))
                ));
            }
            opts.set(name, Value::from(value))?;
        } else if key.is_none() {
            key = Some(param.clone());
        }
    }
    key.ok_or_else(|| {
        format!("No key to look up was provided as first term within string inline options: {term}")
    })
}

/// What `get` finds for a key.
#[derive(Debug, PartialEq)]
pub(super) enum Lookup {
    /// Not in the section nor in `DEFAULT`: the `default` option then.
    Missing,
    /// A key without a value (`allow_no_value`): nothing.
    NoValue,
    Value(String),
}

#[derive(Debug)]
pub(super) enum ReadError {
    /// configparser's DuplicateOptionError, which ansible-core words as its own.
    DuplicateOption(String),
    Other(String),
}

/// An option's lines while it is read (None: a key without a value), then its value.
type Entries = Vec<(String, Option<Vec<String>>)>;

/// Python's `configparser.ConfigParser` (strict, default delimiters and comment prefixes),
/// as far as a lookup needs it.
pub(super) struct Parser {
    allow_no_value: bool,
    case_sensitive: bool,
    defaults: Entries,
    sections: Vec<(String, Entries)>,
}

impl Parser {
    pub(super) fn new(allow_no_value: bool, case_sensitive: bool) -> Parser {
        Parser {
            allow_no_value,
            case_sensitive,
            defaults: Vec::new(),
            sections: Vec::new(),
        }
    }

    fn optionxform(&self, key: &str) -> String {
        if self.case_sensitive {
            key.to_string()
        } else {
            key.to_lowercase()
        }
    }

    pub(super) fn has_section(&self, name: &str) -> bool {
        name == DEFAULT_SECTION || self.sections.iter().any(|(n, _)| n == name)
    }

    fn entries_mut(&mut self, section: Option<&str>) -> &mut Entries {
        match section {
            Some(DEFAULT_SECTION) | None => &mut self.defaults,
            Some(name) => {
                let i = self
                    .sections
                    .iter()
                    .position(|(n, _)| n == name)
                    .expect("a section is made before it is used");
                &mut self.sections[i].1
            }
        }
    }

    /// Read one file's text into the parser, as configparser's `read_file` does; its errors
    /// in configparser's words (the source is a string: `<???>`).
    pub(super) fn read(&mut self, text: &str) -> Result<(), ReadError> {
        let mut added_sections: Vec<String> = Vec::new();
        let mut added_options: Vec<(String, String)> = Vec::new();
        let mut section: Option<String> = None;
        let mut option: Option<String> = None;
        let mut indent_level = 0usize;
        let mut bad_lines: Vec<String> = Vec::new();
        for (i, line) in text.split_inclusive('\n').enumerate() {
            let lineno = i + 1;
            let full_comment = {
                let t = line.trim();
                t.starts_with('#') || t.starts_with(';')
            };
            let value = if full_comment { "" } else { line.trim() };
            if value.is_empty() {
                // An empty line inside a value is kept (values may hold blank lines); a
                // comment line is not.
                if !full_comment {
                    if let (Some(_), Some(opt)) = (&section, option.as_deref()) {
                        if !opt.is_empty() {
                            let sect = section.clone();
                            if let Some((_, Some(lines))) = self
                                .entries_mut(sect.as_deref())
                                .iter_mut()
                                .find(|(k, _)| k == opt)
                            {
                                lines.push(String::new());
                            }
                        }
                    }
                }
                continue;
            }
            let indent = line.chars().take_while(|c| c.is_whitespace()).count();
            let continues = section.is_some()
                && option.as_deref().is_some_and(|o| !o.is_empty())
                && indent > indent_level;
            if continues {
                let (sect, opt) = (section.clone(), option.clone().unwrap_or_default());
                let entry = self
                    .entries_mut(sect.as_deref())
                    .iter_mut()
                    .find(|(k, _)| *k == opt);
                match entry {
                    Some((_, Some(lines))) => lines.push(value.to_string()),
                    _ => {
                        return Err(ReadError::Other(
                            "'NoneType' object has no attribute 'append'".into(),
                        ))
                    }
                }
                continue;
            }
            indent_level = indent;
            if let Some(header) = section_header(value) {
                if header == DEFAULT_SECTION {
                    // configparser keeps DEFAULT apart and never calls it a duplicate.
                } else if self.sections.iter().any(|(n, _)| n == header) {
                    if added_sections.iter().any(|s| s == header) {
                        return Err(ReadError::Other(format!(
                            "While reading from '<???>' [line {lineno:2}]: section {} already exists",
                            repr(&Value::from(header))
                        )));
                    }
                    added_sections.push(header.to_string());
                } else {
                    self.sections.push((header.to_string(), Vec::new()));
                    added_sections.push(header.to_string());
                }
                section = Some(header.to_string());
                option = None;
                continue;
            }
            let Some(sect) = section.clone() else {
                return Err(ReadError::Other(format!(
                    "File contains no section headers.\nfile: '<???>', line: {lineno}\n{}",
                    repr(&Value::from(line))
                )));
            };
            let Some((name, val)) = split_option(value, self.allow_no_value) else {
                bad_lines.push(format!(
                    "\n\t[line {lineno:2}]: {}",
                    repr(&Value::from(line))
                ));
                continue;
            };
            if name.is_empty() {
                bad_lines.push(format!(
                    "\n\t[line {lineno:2}]: {}",
                    repr(&Value::from(line))
                ));
            }
            let name = self.optionxform(name.trim_end());
            if added_options.iter().any(|(s, o)| *s == sect && *o == name) {
                return Err(ReadError::DuplicateOption(format!(
                    "While reading from '<???>' [line {lineno:2}]: option {} in section {} already exists",
                    repr(&Value::from(name.as_str())),
                    repr(&Value::from(sect.as_str()))
                )));
            }
            added_options.push((sect.clone(), name.clone()));
            let entries = self.entries_mut(Some(&sect));
            let lines = val.map(|v| vec![v.trim().to_string()]);
            match entries.iter_mut().find(|(k, _)| *k == name) {
                Some(slot) => slot.1 = lines,
                None => entries.push((name.clone(), lines)),
            }
            option = Some(name);
        }
        // Each value's lines become one text, without its trailing blank lines.
        for entries in
            std::iter::once(&mut self.defaults).chain(self.sections.iter_mut().map(|(_, e)| e))
        {
            for (_, lines) in entries.iter_mut() {
                if let Some(l) = lines {
                    let joined = l.join("\n").trim_end().to_string();
                    *l = vec![joined];
                }
            }
        }
        if !bad_lines.is_empty() {
            return Err(ReadError::Other(format!(
                "Source contains parsing errors: '<???>'{}",
                bad_lines.concat()
            )));
        }
        Ok(())
    }

    /// A section's own keys over those of `DEFAULT`, in configparser's order (DEFAULT's first).
    fn chain(&self, section: &str) -> Vec<(String, Option<String>)> {
        let mut all: Vec<(String, Option<String>)> = Vec::new();
        let own = self
            .sections
            .iter()
            .find(|(n, _)| n == section)
            .map(|(_, e)| e.as_slice())
            .unwrap_or_default();
        for (k, v) in self.defaults.iter().chain(own) {
            let v = v.as_ref().map(|l| l.concat());
            match all.iter_mut().find(|(n, _)| n == k) {
                Some(slot) => slot.1 = v,
                None => all.push((k.clone(), v)),
            }
        }
        all
    }

    /// configparser's `get`: the key's value in the section (or DEFAULT), interpolated.
    pub(super) fn get(
        &self,
        section: &str,
        key: &str,
        interpolate: bool,
    ) -> Result<Lookup, String> {
        let key = self.optionxform(key);
        let map = self.chain(section);
        match map.iter().find(|(k, _)| *k == key) {
            None => Ok(Lookup::Missing),
            Some((_, None)) => Ok(Lookup::NoValue),
            Some((_, Some(v))) if !interpolate => Ok(Lookup::Value(v.clone())),
            Some((_, Some(v))) => {
                let mut out = String::new();
                self.interpolate(section, &key, v, v, &map, 1, &mut out)?;
                Ok(Lookup::Value(out))
            }
        }
    }

    /// configparser's `items`: every key of the section (DEFAULT's first) with its value,
    /// interpolated; a key without a value gives `''` there.
    pub(super) fn items(
        &self,
        section: &str,
        interpolate: bool,
    ) -> Result<Vec<(String, String)>, String> {
        let map = self.chain(section);
        let mut out = Vec::new();
        for (k, v) in &map {
            let raw = v.clone().unwrap_or_default();
            let mut value = String::new();
            if interpolate {
                self.interpolate(section, k, &raw, &raw, &map, 1, &mut value)?;
            } else {
                value = raw;
            }
            out.push((k.clone(), value));
        }
        Ok(out)
    }

    /// configparser's BasicInterpolation: `%%` is `%`, `%(key)s` the key's value (itself
    /// interpolated), any other `%` an error.
    #[allow(clippy::too_many_arguments)]
    fn interpolate(
        &self,
        section: &str,
        option: &str,
        raw: &str,
        mut rest: &str,
        map: &[(String, Option<String>)],
        depth: usize,
        out: &mut String,
    ) -> Result<(), String> {
        let q = |s: &str| repr(&Value::from(s));
        if depth > MAX_DEPTH {
            return Err(format!(
                "Recursion limit exceeded in value substitution: option {} in section {} \
                 contains an interpolation key which cannot be substituted in {MAX_DEPTH} \
                 steps. Raw value: {}",
                q(option),
                q(section),
                q(raw)
            ));
        }
        while !rest.is_empty() {
            let Some(p) = rest.find('%') else {
                out.push_str(rest);
                return Ok(());
            };
            out.push_str(&rest[..p]);
            rest = &rest[p..];
            if rest[1..].starts_with('%') {
                out.push('%');
                rest = &rest[2..];
            } else if rest[1..].starts_with('(') {
                let Some(end) = rest
                    .find(")s")
                    .filter(|e| *e > 2 && !rest[2..*e].contains(')'))
                else {
                    return Err(format!("bad interpolation variable reference {}", q(rest)));
                };
                let var = self.optionxform(&rest[2..end]);
                rest = &rest[end + 2..];
                let value = match map.iter().find(|(k, _)| *k == var) {
                    Some((_, Some(v))) => v,
                    Some((_, None)) => {
                        return Err("argument of type 'NoneType' is not iterable".into())
                    }
                    None => {
                        return Err(format!(
                            "Bad value substitution: option {} in section {} contains an \
                             interpolation key {} which is not a valid option name. Raw value: {}",
                            q(option),
                            q(section),
                            q(&var),
                            q(raw)
                        ))
                    }
                };
                if value.contains('%') {
                    self.interpolate(section, option, raw, value, map, depth + 1, out)?;
                } else {
                    out.push_str(value);
                }
            } else {
                return Err(format!(
                    "'%' must be followed by '%' or '(', found: {}",
                    q(rest)
                ));
            }
        }
        Ok(())
    }
}

/// `[name]` (configparser's SECTCRE: the name runs to the last `]`).
fn section_header(value: &str) -> Option<&str> {
    let inner = value.strip_prefix('[')?;
    let end = inner.rfind(']')?;
    (end > 0).then(|| &inner[..end])
}

/// configparser's OPTCRE (OPTCRE_NV with `allow_no_value`): the name before the first `=` or
/// `:`, and the value after it (None: no delimiter, a key without a value).
fn split_option(value: &str, allow_no_value: bool) -> Option<(&str, Option<&str>)> {
    match value.find(['=', ':']) {
        Some(i) => Some((value[..i].trim_end(), Some(value[i + 1..].trim_start()))),
        None if allow_no_value => Some((value, None)),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The file of the checks below; each expectation is what Python 3.11's configparser
    // gives for it.
    const INI: &str = "# comment\n; other\n[DEFAULT]\nshared = from default\n\n[global]\n\
        user = root\nUser2 = Mixed\npct = 100%%\ninterp = %(user)s-%(shared)s\n\
        multi = line one\n  line two\n\n  line three\n\ncolon: value: with colon\nempty =\n\
        k2 = v2 ; not a comment\n  [indented]\n[s1]\nkey1 = value1\n";

    fn parsed() -> Parser {
        let mut p = Parser::new(false, false);
        p.read(INI).unwrap();
        p
    }

    fn get(p: &Parser, s: &str, k: &str) -> Lookup {
        p.get(s, k, true).unwrap()
    }

    fn v(s: &str) -> Lookup {
        Lookup::Value(s.to_string())
    }

    #[test]
    fn values_as_configparser_reads_them() {
        let p = parsed();
        assert_eq!(get(&p, "global", "user"), v("root"));
        assert_eq!(get(&p, "global", "USER2"), v("Mixed"));
        assert_eq!(get(&p, "global", "shared"), v("from default"));
        assert_eq!(get(&p, "s1", "shared"), v("from default"));
        assert_eq!(get(&p, "global", "pct"), v("100%"));
        assert_eq!(get(&p, "global", "interp"), v("root-from default"));
        assert_eq!(
            get(&p, "global", "multi"),
            v("line one\nline two\n\nline three")
        );
        assert_eq!(get(&p, "global", "colon"), v("value: with colon"));
        assert_eq!(get(&p, "global", "empty"), v(""));
        assert_eq!(get(&p, "global", "k2"), v("v2 ; not a comment\n[indented]"));
        assert_eq!(get(&p, "global", "nope"), Lookup::Missing);
        assert_eq!(get(&p, "DEFAULT", "shared"), v("from default"));
        assert_eq!(p.get("global", "pct", false).unwrap(), v("100%%"));
        assert!(!p.has_section("indented"));
        let keys: Vec<String> = p
            .items("s1", true)
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(keys, ["shared", "key1"]);
    }

    #[test]
    fn case_and_keys_without_values() {
        let mut p = Parser::new(false, true);
        p.read("[s]\na = 1\nA = 2\n").unwrap();
        assert_eq!(get(&p, "s", "A"), v("2"));
        assert_eq!(get(&p, "s", "a"), v("1"));
        let mut p = Parser::new(true, false);
        p.read("[mysqld]\nuser = mysql\nskip-locking\n").unwrap();
        assert_eq!(get(&p, "mysqld", "skip-locking"), Lookup::NoValue);
        assert_eq!(
            p.items("mysqld", true).unwrap(),
            [
                ("user".to_string(), "mysql".to_string()),
                ("skip-locking".into(), "".into())
            ]
        );
    }

    fn read_err(text: &str, allow_no_value: bool) -> String {
        match Parser::new(allow_no_value, false).read(text).unwrap_err() {
            ReadError::DuplicateOption(e) => format!("dup: {e}"),
            ReadError::Other(e) => e,
        }
    }

    #[test]
    fn errors_in_configparser_words() {
        assert_eq!(
            read_err("[m]\nuser = x\nskip-locking\n", false),
            "Source contains parsing errors: '<???>'\n\t[line  3]: 'skip-locking\\n'"
        );
        assert_eq!(
            read_err("[s]\na = 1\nA = 2\n", false),
            "dup: While reading from '<???>' [line  3]: option 'a' in section 's' already exists"
        );
        assert_eq!(
            read_err("[s]\na=1\n[s]\nb=2\n", false),
            "While reading from '<???>' [line  3]: section 's' already exists"
        );
        assert_eq!(
            read_err("a=1\n", false),
            "File contains no section headers.\nfile: '<???>', line: 1\n'a=1\\n'"
        );
        let mut p = Parser::new(false, false);
        p.read("[s]\na = 5%\nb = %(zz)s\nc = %(c)s\n").unwrap();
        assert_eq!(
            p.get("s", "a", true).unwrap_err(),
            "'%' must be followed by '%' or '(', found: '%'"
        );
        assert_eq!(
            p.get("s", "b", true).unwrap_err(),
            "Bad value substitution: option 'b' in section 's' contains an interpolation key \
             'zz' which is not a valid option name. Raw value: '%(zz)s'"
        );
        assert!(p
            .get("s", "c", true)
            .unwrap_err()
            .starts_with("Recursion limit exceeded in value substitution: option 'c'"));
        assert_eq!(p.get("s", "a", false).unwrap(), v("5%"));
        // Re-reading a file (each term does) is no duplicate.
        p.read("[s]\na = 6\n").unwrap();
        assert_eq!(p.get("s", "a", true).unwrap(), v("6"));
    }

    #[test]
    fn inline_options_as_ansible_core_splits_them() {
        let o = || Options::new("ini", SPECS, vec![("section", Value::from("global"))]);
        let mut opts = o();
        assert_eq!(
            term_key(
                &Value::from("user section=prod file=my file.ini"),
                &mut opts
            )
            .unwrap(),
            "user"
        );
        assert_eq!(opts.get("section"), &Value::from("prod"));
        assert_eq!(opts.get("file"), &Value::from("my file.ini"));
        assert_eq!(
            term_key(&Value::from("multi word key"), &mut o()).unwrap(),
            "multi word key"
        );
        let mut opts = o();
        term_key(&Value::from("k re=False"), &mut opts).unwrap();
        assert_eq!(opts.get("re"), &Value::from(false));
        let e = |t: &str| term_key(&Value::from(t), &mut o()).unwrap_err();
        assert_eq!(
            e("user bogus=1 file=x"),
            "'user bogus' is not a valid option."
        );
        assert_eq!(
            e("section=global file=x"),
            "No key to look up was provided as first term within string inline options: \
             section=global file=x"
        );
        assert_eq!(
            e("user file=a=b"),
            "Could not use 'file=a=b' from ['user', 'file=a=b']: too many values to unpack \
             (expected 2)"
        );
        assert_eq!(
            term_key(&Value::from(5), &mut o()).unwrap_err(),
            "argument of type 'int' is not iterable"
        );
    }
}
