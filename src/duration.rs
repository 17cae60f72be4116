//! Durations in configs and settings: every field that asks for a time (`ttl_s`,
//! `dedupe_window_s`, `timeout_s`, `retry_base_delay_ms`, `max_retry_delay_s`, `window_s`,
//! `run_timeout_s`) takes either a plain number in the unit its name says (as before: `ttl_s:
//! 345600` is four days) or text with units, parsed by the `humantime` crate: `"4d"`, `"36h"`,
//! `"90s"`, `"500ms"`, `"1h 30m"`, `"2days"`. A plain number written as text (`"345600"`) is read
//! in the field's unit too.
//!
//! The fields keep their Rust types (whole seconds, fractional seconds or milliseconds): a
//! field's `deserialize_with` reads either form, and its `schemars(with = …)` marks it in the
//! config schema as a duration (`"x-fluxo-duration": "<unit>"`, with the accepted forms in its
//! description), which the editor renders as one text field that takes units. A value that is
//! neither form fails with a message naming the accepted forms; the config checks and the
//! workflow validation put the field's path in front of it.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, Deserializer, Visitor};

/// The forms every duration field accepts, for messages and schemas.
pub const FORMS: &str = "a number, or text with units such as `4d`, `36h`, `90s`, `500ms` or \
                         `1h 30m` (units: ms, s, m, h, d, w)";

/// Parse a duration written with units (`4d`, `36h 30m`, `500ms`): `humantime`'s grammar.
pub fn parse(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim()).map_err(|e| match e {
        humantime::DurationError::NumberOverflow => format!("`{text}` is too long a duration"),
        _ => format!("`{text}` is not a duration"),
    })
}

/// A duration as a person reads it: `4d`, `36h`, `1h 30m`, `500ms` (`humantime`'s format,
/// with its long day and month names shortened).
pub fn human(d: Duration) -> String {
    if d.is_zero() {
        return "0s".into();
    }
    humantime::format_duration(d)
        .to_string()
        .replace("days", "d")
        .replace("day", "d")
}

/// [`human`] of whole seconds.
pub fn human_secs(secs: u64) -> String {
    human(Duration::from_secs(secs))
}

/// What one field's value reads as: a number in the field's unit, or a parsed duration.
enum Read {
    Number(f64),
    /// The duration and the text as written.
    Text(Duration, String),
}

struct ReadVisitor {
    unit: &'static str,
}

impl<'de> Visitor<'de> for ReadVisitor {
    type Value = Read;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a duration: {FORMS}; a plain number is in {}", self.unit)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Read, E> {
        Ok(Read::Number(v as f64))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Read, E> {
        if v < 0 {
            return Err(E::custom(format!(
                "a duration cannot be negative ({v}): give {FORMS}"
            )));
        }
        Ok(Read::Number(v as f64))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Read, E> {
        if !v.is_finite() || v < 0.0 {
            return Err(E::custom(format!(
                "a duration cannot be negative ({v}): give {FORMS}"
            )));
        }
        Ok(Read::Number(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Read, E> {
        let t = v.trim();
        if let Ok(n) = t.parse::<f64>() {
            return self.visit_f64(n);
        }
        parse(t).map(|d| Read::Text(d, t.to_string())).map_err(|e| {
            E::custom(format!(
                "{e}: give {FORMS}; a plain number is in {}",
                self.unit
            ))
        })
    }
}

fn read<'de, D: Deserializer<'de>>(d: D, unit: &'static str) -> Result<Read, D::Error> {
    d.deserialize_any(ReadVisitor { unit })
}

/// Whole seconds from a [`Read`]; text must be a whole number of seconds.
fn whole_secs<E: de::Error>(r: Read) -> Result<u64, E> {
    match r {
        Read::Number(n) if n.fract() == 0.0 && n <= u64::MAX as f64 => Ok(n as u64),
        Read::Number(n) => Err(E::custom(format!(
            "{n} is not a whole number of seconds: give {FORMS}"
        ))),
        Read::Text(d, _) if d.subsec_nanos() == 0 => Ok(d.as_secs()),
        Read::Text(d, _) => Err(E::custom(format!(
            "{} is not a whole number of seconds (this field counts whole seconds): give {FORMS}",
            human(d)
        ))),
    }
}

/// `deserialize_with` for whole seconds (`u64`).
pub fn secs<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    whole_secs(read(d, "seconds")?)
}

/// `deserialize_with` for optional whole seconds (`Option<u64>`; `null` is `None`). Use with
/// `#[serde(default)]`.
pub fn opt_secs<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    struct Opt;
    impl<'de> Visitor<'de> for Opt {
        type Value = Option<u64>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "a duration: {FORMS}; a plain number is in seconds")
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            secs(d).map(Some)
        }
    }
    d.deserialize_option(Opt)
}

/// `deserialize_with` for fractional seconds (`f64`).
pub fn secs_f64<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(match read(d, "seconds")? {
        Read::Number(n) => n,
        Read::Text(t, _) => t.as_secs_f64(),
    })
}

/// `deserialize_with` for whole milliseconds (`u64`).
pub fn millis<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match read(d, "milliseconds")? {
        Read::Number(n) if n.fract() == 0.0 && n <= u64::MAX as f64 => Ok(n as u64),
        Read::Number(n) => Err(de::Error::custom(format!(
            "{n} is not a whole number of milliseconds: give {FORMS}"
        ))),
        Read::Text(t, _) => Ok(u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
    }
}

fn schema(unit: &str, unit_words: &str) -> Schema {
    json_schema!({
        "type": ["integer", "number", "string"],
        "description": format!("A duration: {FORMS}. A plain number is in {unit_words}."),
        "examples": ["4d", "36h", "90s", "500ms"],
        "x-fluxo-duration": unit,
    })
}

/// Whole seconds as a workflow file wrote them (a settings field): a number, or text with
/// units, which a save writes back as it was (`"run_timeout_s": "2m"` stays `"2m"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secs {
    secs: u64,
    text: Option<String>,
}

impl Secs {
    /// A plain number of seconds.
    pub const fn new(secs: u64) -> Secs {
        Secs { secs, text: None }
    }

    /// The value, in seconds.
    pub fn secs(&self) -> u64 {
        self.secs
    }
}

impl serde::Serialize for Secs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.text {
            Some(t) => s.serialize_str(t),
            None => s.serialize_u64(self.secs),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Secs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Secs, D::Error> {
        Ok(match read(d, "seconds")? {
            Read::Number(n) => Secs {
                secs: whole_secs(Read::Number(n))?,
                text: None,
            },
            Read::Text(t, text) => Secs {
                secs: whole_secs(Read::Text(t, String::new()))?,
                text: Some(text),
            },
        })
    }
}

impl JsonSchema for Secs {
    fn schema_name() -> Cow<'static, str> {
        "DurationSeconds".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schema("s", "seconds")
    }
}

/// Schema of a duration field whose plain numbers are seconds (`schemars(with = "Seconds")`).
pub struct Seconds;

impl JsonSchema for Seconds {
    fn schema_name() -> Cow<'static, str> {
        "DurationSeconds".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schema("s", "seconds")
    }
}

/// Schema of a duration field whose plain numbers are milliseconds.
pub struct Millis;

impl JsonSchema for Millis {
    fn schema_name() -> Cow<'static, str> {
        "DurationMillis".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schema("ms", "milliseconds")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Deserialize, Debug)]
    struct C {
        #[serde(default, deserialize_with = "opt_secs")]
        ttl_s: Option<u64>,
        #[serde(default, deserialize_with = "secs_f64")]
        timeout_s: f64,
        #[serde(default, deserialize_with = "millis")]
        delay_ms: u64,
    }

    fn c(v: serde_json::Value) -> Result<C, String> {
        serde_path_to_error::deserialize::<_, C>(v).map_err(|e| {
            let path = e.path().to_string();
            format!("{path}: {}", e.into_inner())
        })
    }

    #[test]
    fn units_and_plain_numbers() {
        for (v, secs) in [
            (json!(345600), 345600),
            (json!("345600"), 345600),
            (json!("4d"), 345600),
            (json!("36h"), 129600),
            (json!("90s"), 90),
            (json!("1h 30m"), 5400),
            (json!("2days"), 172800),
        ] {
            assert_eq!(c(json!({ "ttl_s": v })).unwrap().ttl_s, Some(secs), "{v}");
        }
        assert_eq!(c(json!({ "ttl_s": null })).unwrap().ttl_s, None);
        assert_eq!(c(json!({})).unwrap().ttl_s, None);
        assert_eq!(c(json!({"timeout_s": "500ms"})).unwrap().timeout_s, 0.5);
        assert_eq!(c(json!({"timeout_s": 2.5})).unwrap().timeout_s, 2.5);
        assert_eq!(c(json!({"delay_ms": "2s"})).unwrap().delay_ms, 2000);
        assert_eq!(c(json!({"delay_ms": 750})).unwrap().delay_ms, 750);
        assert_eq!(c(json!({"delay_ms": "500ms"})).unwrap().delay_ms, 500);
    }

    #[test]
    fn a_bad_duration_names_the_field_and_the_forms() {
        let e = c(json!({"ttl_s": "4 dayz"})).unwrap_err();
        assert!(e.starts_with("ttl_s: `4 dayz` is not a duration"), "{e}");
        assert!(e.contains("`4d`, `36h`, `90s`, `500ms`"), "{e}");
        assert!(e.contains("a plain number is in seconds"), "{e}");
        let e = c(json!({"ttl_s": "500ms"})).unwrap_err();
        assert!(e.contains("not a whole number of seconds"), "{e}");
        let e = c(json!({"ttl_s": -5})).unwrap_err();
        assert!(e.contains("cannot be negative"), "{e}");
        let e = c(json!({"timeout_s": true})).unwrap_err();
        assert!(e.starts_with("timeout_s: invalid type: boolean"), "{e}");
        assert!(e.contains("`4d`"), "{e}");
    }

    #[test]
    fn human_reads_back() {
        assert_eq!(human_secs(345600), "4d");
        assert_eq!(human_secs(129600), "1d 12h");
        assert_eq!(human_secs(90), "1m 30s");
        assert_eq!(human(Duration::from_millis(500)), "500ms");
    }
}
