//! Reading a `Response` without buffering it: the answers a batch streams back (`Step`
//! wrapping `Done` or `Failed`, then `BatchEnd`) are decoded straight from the frame.
//!
//! serde reads an internally tagged enum by first copying the whole object into its own buffer
//! (the tag could come last), then decoding the copy; a `Step` holds a `Response`, so a step's
//! answer was copied twice before it became values. The agent writes the tag first, so the
//! controller can read the tag, then the fields of the hot variants directly. Anything else
//! (another variant, a tag not first) goes through the derived decoder, which also checks what
//! it decodes the same way: the two must give the same `Response` (see the tests).

use super::Response;
use fixpoint_modules::Outcome;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::fmt;

/// `deserialize_with` for a frame's `resp`.
pub fn response<'de, D: Deserializer<'de>>(d: D) -> Result<Response, D::Error> {
    d.deserialize_map(ReplyVisitor)
}

struct ReplyVisitor;

/// The field names of the variants read directly; `Other` fields are skipped, as the derived
/// decoder skips fields it does not know.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum Field {
    Index,
    Resp,
    Outcome,
    Note,
    OutboxWritten,
    Msg,
    Result,
    Ran,
    #[serde(other)]
    Other,
}

/// A `Response` read with `response`, as a map value (a step's `resp`).
struct Nested;

impl<'de> DeserializeSeed<'de> for Nested {
    type Value = Response;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Response, D::Error> {
        response(d)
    }
}

fn missing<E: de::Error>(variant: &str, field: &'static str) -> E {
    E::custom(format_args!("reply `{variant}`: missing field `{field}`"))
}

impl<'de> Visitor<'de> for ReplyVisitor {
    type Value = Response;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an agent reply (a map with `reply` first)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Response, A::Error> {
        let Some(first) = map.next_key::<String>()? else {
            return Err(de::Error::custom("an empty reply"));
        };
        if first != "reply" {
            let value = map.next_value::<Value>()?;
            return rest_derived(map, Map::from_iter([(first, value)]));
        }
        let tag = map.next_value::<String>()?;
        match tag.as_str() {
            "step" => {
                let (mut index, mut resp) = (None, None);
                while let Some(k) = map.next_key::<Field>()? {
                    match k {
                        Field::Index => index = Some(map.next_value::<usize>()?),
                        Field::Resp => resp = Some(Box::new(map.next_value_seed(Nested)?)),
                        _ => drop(map.next_value::<IgnoredAny>()?),
                    }
                }
                Ok(Response::Step {
                    index: index.ok_or_else(|| missing(&tag, "index"))?,
                    resp: resp.ok_or_else(|| missing(&tag, "resp"))?,
                })
            }
            "done" => {
                let (mut outcome, mut note, mut outbox_written) = (None, None, Vec::new());
                while let Some(k) = map.next_key::<Field>()? {
                    match k {
                        Field::Outcome => outcome = Some(map.next_value::<Outcome>()?),
                        Field::Note => note = map.next_value::<Option<String>>()?,
                        Field::OutboxWritten => outbox_written = map.next_value()?,
                        _ => drop(map.next_value::<IgnoredAny>()?),
                    }
                }
                Ok(Response::Done {
                    outcome: outcome.ok_or_else(|| missing(&tag, "outcome"))?,
                    note,
                    outbox_written,
                })
            }
            "failed" => {
                let (mut msg, mut result) = (None, Map::new());
                while let Some(k) = map.next_key::<Field>()? {
                    match k {
                        Field::Msg => msg = Some(map.next_value::<String>()?),
                        Field::Result => result = map.next_value()?,
                        _ => drop(map.next_value::<IgnoredAny>()?),
                    }
                }
                Ok(Response::Failed {
                    msg: msg.ok_or_else(|| missing(&tag, "msg"))?,
                    result,
                })
            }
            "batch_end" => {
                let mut ran = None;
                while let Some(k) = map.next_key::<Field>()? {
                    match k {
                        Field::Ran => ran = Some(map.next_value::<usize>()?),
                        _ => drop(map.next_value::<IgnoredAny>()?),
                    }
                }
                Ok(Response::BatchEnd {
                    ran: ran.ok_or_else(|| missing(&tag, "ran"))?,
                })
            }
            _ => rest_derived(map, Map::from_iter([(first, Value::String(tag))])),
        }
    }
}

/// The rest of the map, with the entries already read, through the derived decoder.
fn rest_derived<'de, A: MapAccess<'de>>(
    mut map: A,
    mut read: Map<String, Value>,
) -> Result<Response, A::Error> {
    while let Some((k, v)) = map.next_entry::<String, Value>()? {
        read.insert(k, v);
    }
    Response::deserialize(Value::Object(read)).map_err(de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::OutboxEntry;
    use crate::protocol::{Needed, ResponseFrame};
    use serde_json::json;

    fn fast(text: &str) -> Result<Response, String> {
        let mut d = serde_json::Deserializer::from_str(text);
        response(&mut d).map_err(|e| e.to_string())
    }

    fn derived(text: &str) -> Result<Response, String> {
        serde_json::from_str::<Response>(text).map_err(|e| e.to_string())
    }

    /// Every variant, as the agent writes it, reads back the same through both decoders.
    #[test]
    fn reads_every_reply_as_the_derived_decoder_does() {
        let outcome: Outcome = serde_json::from_value(json!({
            "changed": true, "result": {"path": "/x", "mode": "0644"}, "msg": "m",
            "diff": {"prepared": "1 upgraded"}
        }))
        .unwrap();
        let done = Response::Done {
            outcome,
            note: Some("replayed".into()),
            outbox_written: vec!["h".into()],
        };
        let replies = [
            Response::Hello {
                version: "1".into(),
                pid: 2,
                uid: 3,
                user: "u".into(),
                protocol: 2,
            },
            Response::Step {
                index: 4,
                resp: Box::new(done.clone()),
            },
            Response::Step {
                index: 5,
                resp: Box::new(Response::NeedContent {
                    sha256: "ab".into(),
                    size: 6,
                    more: vec![Needed {
                        sha256: "cd".into(),
                        size: 7,
                    }],
                }),
            },
            Response::BatchEnd { ran: 8 },
            done,
            Response::Failed {
                msg: "no".into(),
                result: Map::from_iter([("rc".into(), json!(1))]),
            },
            Response::Facts { facts: Map::new() },
            Response::Begun {
                state_dir: "/s".into(),
                pending: Vec::<OutboxEntry>::new(),
                pruned: 0,
            },
            Response::Ack,
            Response::Notice { msg: "n".into() },
            Response::Journal { data: json!([1]) },
        ];
        for reply in replies {
            let text = serde_json::to_string(&reply).unwrap();
            assert!(
                text.starts_with(r#"{"reply":"#),
                "the tag comes first: {text}"
            );
            let (a, b) = (fast(&text).unwrap(), derived(&text).unwrap());
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "{text}");
            assert_eq!(format!("{a:?}"), format!("{reply:?}"), "{text}");
            let frame = format!(r#"{{"id":9,"resp":{text}}}"#);
            let framed = serde_json::from_str::<ResponseFrame>(&frame).unwrap();
            assert_eq!(format!("{:?}", framed.resp), format!("{reply:?}"));
        }
    }

    /// Defaults, unknown fields, a tag not first and bad replies come out as the derived
    /// decoder has them (errors say what is missing).
    #[test]
    fn defaults_unknown_fields_and_errors() {
        for text in [
            r#"{"reply":"done","outcome":{"changed":false},"later":[1,{"a":2}]}"#,
            r#"{"reply":"failed","msg":"x"}"#,
            r#"{"outcome":{"changed":false},"reply":"done"}"#,
            r#"{"index":1,"reply":"step","resp":{"reply":"ack"}}"#,
            r#"{"reply":"step","index":1,"resp":{"resp":{"reply":"ack"},"reply":"step","index":2}}"#,
        ] {
            assert_eq!(
                format!("{:?}", fast(text).unwrap()),
                format!("{:?}", derived(text).unwrap()),
                "{text}"
            );
        }
        for text in [
            r#"{"reply":"done"}"#,
            r#"{"reply":"step","index":1}"#,
            r#"{"reply":"batch_end"}"#,
            r#"{"reply":"no_such_reply"}"#,
            r#"{}"#,
        ] {
            assert!(derived(text).is_err(), "{text}");
            let err = fast(text).unwrap_err();
            assert!(!err.is_empty(), "{text}");
        }
        assert!(fast(r#"{"reply":"step","index":1}"#)
            .unwrap_err()
            .contains("missing field `resp`"));
    }
}
