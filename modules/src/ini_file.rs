//! The `ini_file` module (community.general): set, add or remove an option, or a whole section,
//! in an INI file, writing what community.general's ini_file writes. The file handling (atomic
//! rewrite, backup, attributes) is shared with lineinfile in `text`.

use crate::fs::WantedAttrs;
use crate::params::{de_opt_string, Bool, ModeSpec};
use crate::text::{
    add_path_info, apply_edit, check_common, exclusive, missing_file, plan_edit, probe_text_file,
    EditAction, Presence, TextFile,
};
use crate::{Ctx, Module, ModuleError, Plan};
use regex::Regex;
use serde::{Deserialize, Deserializer};
use serde_json::{json, Map, Value};

pub struct IniFile;

fn yes() -> Bool {
    Bool(true)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(alias = "dest", deserialize_with = "crate::params::de_path")]
    pub path: String,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub section: Option<String>,
    #[serde(default)]
    pub section_has_values: Option<Vec<Condition>>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub option: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub value: Option<String>,
    #[serde(default, deserialize_with = "de_opt_strings")]
    pub values: Option<Vec<String>>,
    #[serde(default)]
    pub state: Presence,
    #[serde(default = "yes")]
    pub exclusive: Bool,
    #[serde(default)]
    pub backup: Bool,
    #[serde(default)]
    pub no_extra_spaces: Bool,
    #[serde(default)]
    pub ignore_spaces: Bool,
    #[serde(default)]
    pub allow_no_value: Bool,
    #[serde(default = "yes")]
    pub modify_inactive_option: Bool,
    #[serde(default = "yes")]
    pub create: Bool,
    /// A symlinked `path` is always written through to its target (README, ini_file).
    #[serde(default)]
    pub follow: Bool,
    #[serde(default)]
    pub mode: Option<ModeSpec>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub owner: Option<String>,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub group: Option<String>,
    /// Accepted for compatibility; writes are always atomic here.
    #[serde(default)]
    pub unsafe_writes: Option<Bool>,
}

/// One entry of `section_has_values`: the section to edit must hold `option` (with one of
/// `values`, when given).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    #[serde(deserialize_with = "crate::params::de_string")]
    pub option: String,
    #[serde(default, deserialize_with = "de_opt_string")]
    pub value: Option<String>,
    #[serde(default, deserialize_with = "de_opt_strings")]
    pub values: Option<Vec<String>>,
}

impl Condition {
    fn values(&self) -> Vec<String> {
        match (&self.value, &self.values) {
            (Some(v), _) => vec![v.clone()],
            (None, Some(vs)) => vs.clone(),
            (None, None) => Vec::new(),
        }
    }
}

/// A list of strings as Ansible's `type='list', elements='str'` makes it: scalars converted as
/// [`de_opt_string`] does, one string alone taken as a list of one.
fn de_opt_strings<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    let scalar = |v: Value| -> Result<String, D::Error> {
        match v {
            Value::String(s) => Ok(s),
            Value::Number(n) => Ok(n.to_string()),
            Value::Bool(b) => Ok(if b { "True" } else { "False" }.to_string()),
            other => Err(serde::de::Error::custom(format!(
                "expected a string in the list, found {other}"
            ))),
        }
    };
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .into_iter()
            .map(scalar)
            .collect::<Result<_, _>>()
            .map(Some),
        Some(one) => Ok(Some(vec![scalar(one)?])),
    }
}

/// The name of the section ini_file puts before the file's first line, so that options outside
/// any section (`section` left out) are handled as one more section; it matches no real one.
const TOP_SECTION: &str = "ad01e11446efb704fcdbdb21f2c43757423d91c5";

impl Module for IniFile {
    type Params = Params;
    type State = TextFile;
    type Action = EditAction;

    fn validate(p: &Params) -> Result<(), ModuleError> {
        check_common(&p.path, None, p.mode.as_ref())?;
        if p.value.is_some() && p.values.is_some() {
            return Err(exclusive("value", "values"));
        }
        for c in p.section_has_values.iter().flatten() {
            if c.value.is_some() && c.values.is_some() {
                return Err(exclusive("section_has_values[].value", "values"));
            }
        }
        if p.state == Presence::Present
            && !p.allow_no_value.0
            && p.value.is_none()
            && p.values.as_ref().is_none_or(Vec::is_empty)
        {
            return Err(ModuleError::Params(
                "`value` or `values` is required with `state: present` (unless \
                 `allow_no_value: true`)"
                    .into(),
            ));
        }
        Ok(())
    }

    fn probe(p: &Params, _ctx: &Ctx) -> Result<TextFile, ModuleError> {
        probe_text_file(&p.path)
    }

    fn plan(p: &Params, file: &TextFile, ctx: &Ctx) -> Result<Plan<EditAction>, ModuleError> {
        let mut plan = Plan::new();
        plan.result.insert("path".into(), json!(p.path));
        let lines = match &file.content {
            None if !p.create.0 => {
                return Err(missing_file(format!(
                    "Destination {} does not exist!",
                    file.target.display()
                )))
            }
            None => Vec::new(),
            Some(data) => read_lines(&p.path, data)?,
        };
        let (new_lines, changed, msg) = edit(p, &lines);
        let after = new_lines.concat();
        // ini_file always returns its diff; the texts are filled only when diffs are asked for.
        let (before_text, after_text) = if ctx.diff {
            (lines.concat(), after.clone())
        } else {
            (String::new(), String::new())
        };
        let header = format!("{} (content)", p.path);
        plan.result.insert(
            "diff".into(),
            json!({"before": before_text, "after": after_text,
                   "before_header": header, "after_header": header}),
        );
        // Ansible adds the file's attributes to a result that names a path.
        add_path_info(&mut plan.result, &p.path)?;
        let new_content = changed.then(|| after.into_bytes());
        // community.general's ini_file sets attributes only outside check mode: there it
        // reports no attribute change.
        let wanted = if ctx.check {
            WantedAttrs::default()
        } else {
            WantedAttrs::new(&p.mode, &p.owner, &p.group)
        };
        // The message is ini_file's own: attribute changes do not add to it.
        plan_edit(
            file,
            new_content,
            &wanted,
            p.backup.0,
            ctx,
            String::new(),
            &mut plan,
        )?;
        // A file that changes only by newline conversion (CRLF read, LF written) shows the text
        // ini_file compares, not the raw bytes.
        if let Some(d) = plan.diff.content.first_mut() {
            d.before = lines.concat();
        }
        plan.msg = Some(msg.to_string());
        Ok(plan)
    }

    fn apply(
        p: &Params,
        file: TextFile,
        plan: &Plan<EditAction>,
    ) -> Result<Map<String, Value>, ModuleError> {
        let mut out = apply_edit(&file, &plan.actions, None, "backup_file")?;
        add_path_info(&mut out, &p.path)?;
        Ok(out)
    }
}

/// The file as Python reads it in text mode with `utf-8-sig`: a leading BOM dropped, `\r\n` and
/// `\r` read as `\n`, split after each `\n`.
fn read_lines(path: &str, data: &[u8]) -> Result<Vec<String>, ModuleError> {
    let data = data.strip_prefix(b"\xef\xbb\xbf").unwrap_or(data);
    let text = std::str::from_utf8(data).map_err(|e| {
        ModuleError::failed(format!(
            "{path} is not valid UTF-8 text ({e}); ini_file reads UTF-8"
        ))
    })?;
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    Ok(text.split_inclusive('\n').map(str::to_string).collect())
}

/// Lines of the form `[#;]option = value`, as ini_file recognises them: `any` also matches a
/// commented-out option (`#option = x`), `active` only a live one.
struct OptionPattern {
    any: Regex,
    active: Regex,
}

/// What an option line holds: whether it is commented out, and its value.
struct OptionLine<'a> {
    commented: bool,
    value: &'a str,
}

impl OptionPattern {
    fn new(option: &str) -> OptionPattern {
        let o = regex::escape(option);
        let build = |comment: &str| {
            Regex::new(&format!(
                r"^[ \t]*({comment})[ \t]*({o})[ \t]*(=|$)[ \t]*(.*)"
            ))
            .expect("an escaped option makes a valid pattern")
        };
        OptionPattern {
            any: build("[#;]?"),
            active: build(""),
        }
    }

    fn find<'a>(re: &Regex, line: &'a str) -> Option<OptionLine<'a>> {
        let line = line.strip_suffix('\n').unwrap_or(line);
        re.captures(line).map(|c| OptionLine {
            commented: !c.get(1).is_some_and(|m| m.as_str().is_empty()),
            value: c.get(4).map_or("", |m| m.as_str()),
        })
    }
}

/// The option name's patterns, or none without an option (then no line is an option line).
fn matcher(option: Option<&str>) -> Option<OptionPattern> {
    option.map(OptionPattern::new)
}

/// Blank lines and comments, which new options are inserted after the last of.
fn is_blank_or_comment(line: &str) -> bool {
    let l = line.strip_suffix('\n').unwrap_or(line);
    let l = l.trim_start_matches([' ', '\t']);
    l.is_empty() || l.starts_with(['#', ';'])
}

/// Whether `lines` (one section) satisfies every `section_has_values` condition.
fn has_values(conds: Option<&[Condition]>, lines: &[String]) -> bool {
    conds.unwrap_or_default().iter().all(|c| {
        let pat = OptionPattern::new(&c.option);
        let wanted = c.values();
        lines.iter().any(|l| {
            OptionPattern::find(&pat.any, l)
                .is_some_and(|m| wanted.is_empty() || wanted.iter().any(|w| w == m.value))
        })
    })
}

/// ini_file's edit of the file's `lines`: the new lines, whether anything changed, the message.
fn edit(p: &Params, original: &[String]) -> (Vec<String>, bool, &'static str) {
    // An empty option is no option, as in Python's `if option:`.
    let option = p.option.as_deref().filter(|o| !o.is_empty());
    let allow_no_value = p.allow_no_value.0;
    let present = p.state == Presence::Present;
    let mut values: Vec<String> = Vec::new();
    let given = match (&p.value, &p.values) {
        (Some(v), _) => vec![v.clone()],
        (None, Some(vs)) => vs.clone(),
        (None, None) => Vec::new(),
    };
    for v in given {
        if !values.contains(&v) {
            values.push(v);
        }
    }
    let assignment = |o: &str, v: &str| {
        if p.no_extra_spaces.0 {
            format!("{o}={v}\n")
        } else {
            format!("{o} = {v}\n")
        }
    };

    let mut changed = false;
    let mut lines: Vec<String> = original.to_vec();
    if lines.is_empty() {
        lines.push("\n".into());
    }
    if let Some(last) = lines.last_mut() {
        if !last.ends_with('\n') {
            last.push('\n');
            changed = true;
        }
    }
    // Sentinels: a header for the options before the first section, and a closing `[`.
    lines.insert(0, format!("[{TOP_SECTION}]"));
    lines.push("[".into());

    let section = p
        .section
        .as_deref()
        .filter(|s| !s.is_empty())
        .unwrap_or(TOP_SECTION);
    let header = Regex::new(&format!(r"^\[\s*{}\s*]", regex::escape(section.trim())))
        .expect("an escaped section makes a valid pattern");
    let conds = p.section_has_values.as_deref();

    // Find the section: the first one by that name that satisfies `section_has_values`.
    let (mut within, mut start, mut end) = (false, 0, 0);
    for (i, line) in lines.iter().enumerate() {
        if within && line.starts_with('[') {
            if has_values(conds, &lines[start..i]) {
                end = i;
                break;
            }
            (within, start, end) = (false, 0, 0);
        }
        if header.is_match(line) {
            within = true;
            start = i;
        }
    }
    let after: Vec<String> = lines.split_off(end);
    let mut sec: Vec<String> = lines.split_off(start);
    let before = lines;
    let mut touched = vec![false; sec.len()];
    let mut msg = "OK";

    let pat = matcher(option);
    let find = |line: &str| -> Option<String> {
        let pat = pat.as_ref()?;
        let re = if p.modify_inactive_option.0 {
            &pat.any
        } else {
            &pat.active
        };
        OptionPattern::find(re, line).map(|m| m.value.to_string())
    };
    let option_name = option.unwrap_or_default();
    let mut no_value_present = false;
    // Replace line `i` by `new`; with `ignore_spaces`, a live option whose value is unchanged
    // keeps its own spacing.
    let mut update = |sec: &mut Vec<String>, touched: &mut Vec<bool>, i: usize, new: String| {
        let mut differs = None;
        if p.ignore_spaces.0 {
            if let Some(pat) = &pat {
                if let Some(old) = OptionPattern::find(&pat.any, &sec[i]) {
                    if !old.commented {
                        let new_value = OptionPattern::find(&pat.any, &new).map(|m| m.value);
                        differs = Some(Some(old.value) != new_value);
                    }
                }
            }
        }
        let differs = differs.unwrap_or(sec[i] != new);
        if differs {
            sec[i] = new;
            changed = true;
            msg = "option changed";
        }
        touched[i] = true;
    };

    // 1. Lines whose value is one of `values` become live `option = value` lines.
    if present && option.is_some() {
        for i in 0..sec.len() {
            let Some(found) = find(&sec[i]) else { continue };
            if !values.is_empty() && values.contains(&found) {
                let new = if found.is_empty() && allow_no_value {
                    no_value_present = true;
                    format!("{option_name}\n")
                } else {
                    assignment(option_name, &found)
                };
                update(&mut sec, &mut touched, i, new);
                let at = values
                    .iter()
                    .position(|v| *v == found)
                    .expect("found above");
                values.remove(at);
            } else if values.is_empty() && allow_no_value {
                update(&mut sec, &mut touched, i, format!("{option_name}\n"));
                no_value_present = true;
                break;
            }
        }
    }
    // 2. With `exclusive`, other lines of the option take the remaining values, in order, and
    // the rest of them go.
    if present && p.exclusive.0 && !allow_no_value {
        if !values.is_empty() {
            for i in 0..sec.len() {
                if !touched[i] && find(&sec[i]).is_some() {
                    let v = values.remove(0);
                    update(&mut sec, &mut touched, i, assignment(option_name, &v));
                    if values.is_empty() {
                        break;
                    }
                }
            }
        }
        // Index 0 is the section's header, never an option.
        for i in (1..sec.len()).rev() {
            if !touched[i] && find(&sec[i]).is_some() {
                sec.remove(i);
                touched.remove(i);
                changed = true;
                msg = "option changed";
            }
        }
    }
    // 3. Values still missing go after the section's last line that is not blank or a comment.
    if present {
        if let Some(last) = (1..=sec.len())
            .rev()
            .find(|&i| !is_blank_or_comment(&sec[i - 1]))
        {
            if let (Some(o), false) = (option, values.is_empty()) {
                for (k, v) in values.iter().enumerate() {
                    sec.insert(last + k, assignment(o, v));
                }
                msg = "option added";
                changed = true;
            } else if option.is_some() && values.is_empty() && allow_no_value && !no_value_present {
                sec.insert(last, format!("{option_name}\n"));
                msg = "option added";
                changed = true;
            }
        }
    }
    if !present {
        match &pat {
            Some(pat) if p.exclusive.0 => {
                let before_len = sec.len();
                sec.retain(|l| OptionPattern::find(&pat.active, l).is_none());
                if sec.len() != before_len {
                    changed = true;
                    msg = "option changed";
                }
            }
            Some(pat) if !values.is_empty() => {
                let before_len = sec.len();
                sec.retain(|l| {
                    OptionPattern::find(&pat.active, l)
                        .is_none_or(|m| !values.iter().any(|v| v == m.value))
                });
                if sec.len() != before_len {
                    changed = true;
                    msg = "option changed";
                }
            }
            Some(_) => {}
            None => {
                if !sec.is_empty() {
                    sec.clear();
                    msg = "section removed";
                    changed = true;
                }
            }
        }
    }

    let mut lines = before;
    lines.extend(sec);
    lines.extend(after);
    lines.remove(0);
    lines.pop();

    // 4. The section is not there: append it, with its `section_has_values` and the option.
    if !within && present {
        lines.push(format!("[{section}]\n"));
        msg = "section and option added";
        for c in conds.unwrap_or_default() {
            let cond_values = c.values();
            if option != Some(c.option.as_str()) {
                if !cond_values.is_empty() {
                    for v in &cond_values {
                        lines.push(assignment(&c.option, v));
                    }
                } else if allow_no_value {
                    lines.push(format!("{}\n", c.option));
                }
            } else if !p.exclusive.0 {
                for v in cond_values {
                    if !values.contains(&v) {
                        values.push(v);
                    }
                }
            }
        }
        match option {
            Some(o) if !values.is_empty() => {
                for v in &values {
                    lines.push(assignment(o, v));
                }
            }
            Some(o) if allow_no_value => lines.push(format!("{o}\n")),
            _ => msg = "only section added",
        }
        changed = true;
    }
    (lines, changed, msg)
}

#[cfg(test)]
#[path = "ini_file_tests.rs"]
mod tests;
