//! A run's input ([`RunInput`]): the JSON a trigger delivered, kept as the text it arrived as
//! when it came over the wire, and parsed into a [`Value`] only when something reads it.
//!
//! Why: a webhook delivery is made durable before its `202`, and on that path building a
//! `serde_json::Value` of a 6 KB body (maps, strings, an index map per object) and writing it
//! back as JSON three times (queued, running, final) were the largest costs after the store's
//! own writes. A delivery whose key is in a header needs no parsed payload to be claimed and
//! queued (issue 11): [`RunInput::from_json_bytes`] checks that the body is well-formed JSON
//! and collects the identifiers the free search indexes in one pass without building a
//! `Value`; storing it copies the text; the worker parses it once, when the first step reads
//! it.
//!
//! One reading (handed case C12): a body with a duplicated member is parsed at once and kept as
//! its `Value` (the last member wins, as everywhere else in Fluxo), so the stored text never
//! holds two readings of one member.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, OnceLock};

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

/// Most values of one run that the free search (`q`) finds, through a value index every
/// backend writes with the run's summary (sled: `runs_by_value`; PostgreSQL: `run_values`;
/// in memory: a map). The values are the scalar **strings** of the run's input, then of each
/// step's output in step order (depth first, document order), kept when they look like
/// identifiers ([`is_search_value`]: [`SEARCH_VALUE_MIN_BYTES`]-[`SEARCH_VALUE_MAX_BYTES`]
/// bytes long, no whitespace or control character, and either at least one ASCII digit or
/// `@`, or a token of ASCII letters, `_` and `-` with a capital past its first character and
/// a small letter: ids such as `cus_QXg1…`, `in_1Nv…`, `ORD-1042`, emails, and random ids that
/// happen to draw no digit, `cus_QXgbTfeWzA` (one Stripe id of 14 base-62 characters in 12
/// draws none); not prose, nor words such as `invoice.paid`, `manual`, `eur`, `USD`,
/// `Codertocat`), distinct, the first 64. Numbers, booleans and keys are not
/// indexed. A search matches a value exactly or by prefix, case-sensitively, like ids and keys.
/// The index follows the run: rewritten when its summary is, removed with it (retention,
/// released claims).
///
/// Why identifiers only: a word that most runs carry (an event type, a currency, an enum) is
/// what analysts filter by, not search for, and a search for it would match most of history;
/// yet those words were four in five of the rows of a Stripe event (21 of its 26 strings), and
/// each row is a B-tree insert on the durable ingest path (measured: the webhook ingest on sled
/// did 1,600 deliveries/s indexing all 26, 4,090 indexing none; README, "Benchmarks").
pub const SEARCH_VALUES_MAX: usize = 64;
/// Shortest indexed value, in bytes: 4.
pub const SEARCH_VALUE_MIN_BYTES: usize = 4;
/// Longest indexed value, in bytes: 128.
pub const SEARCH_VALUE_MAX_BYTES: usize = 128;

/// Whether the free search indexes this string ([`SEARCH_VALUES_MAX`] gives the rule and why).
pub fn is_search_value(s: &str) -> bool {
    (SEARCH_VALUE_MIN_BYTES..=SEARCH_VALUE_MAX_BYTES).contains(&s.len())
        && !s.chars().any(|c| c.is_whitespace() || c.is_control())
        && (s.bytes().any(|b| b.is_ascii_digit() || b == b'@') || is_mixed_case_token(s))
}

/// A token of ASCII letters, `_` and `-` holding a small letter and, past its first
/// character, a capital: how a random id without a digit looks (`cus_QXgbTfeWzA`), unlike a
/// word, a capitalised name or a constant (`paid`, `Codertocat`, `USD`).
fn is_mixed_case_token(s: &str) -> bool {
    let b = s.as_bytes();
    b.iter()
        .all(|c| c.is_ascii_alphabetic() || *c == b'_' || *c == b'-')
        && b.iter().any(u8::is_ascii_lowercase)
        && b.iter().skip(1).any(u8::is_ascii_uppercase)
}

/// A run's input: a JSON value, possibly still as the text it arrived as.
///
/// * Reads go through `Deref<Target = Value>` (`&run.input`, `run.input["id"]`); the text is
///   parsed on the first read and the value kept.
/// * It serialises as its text when it has one (a copy, not a walk of the value), else as its
///   value. It deserialises as its text too (a stored run read back is scanned, not parsed),
///   under the same rule as [`RunInput::from_json_bytes`].
/// * Equality compares values. Cloning is cheap (shared).
#[derive(Clone)]
pub struct RunInput(Arc<Inner>);

struct Inner {
    /// The text as delivered or stored (well-formed, no duplicated member); `None` for a
    /// value built in memory.
    raw: Option<Box<RawValue>>,
    value: OnceLock<Value>,
    /// For a raw input: the values the free search indexes, as [`search_values`] finds them
    /// (document order, distinct, at most [`SEARCH_VALUES_MAX`]).
    search: Vec<String>,
}

impl Inner {
    /// The text parsed (`Null` without one). The text was checked when it was taken in, so it
    /// parses.
    fn parse(&self) -> Value {
        self.raw
            .as_ref()
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
            .unwrap_or(Value::Null)
    }
}

impl RunInput {
    /// The input of a delivery whose body is `bytes`: checked to be one well-formed JSON value
    /// and kept as its text, without building a [`Value`]. A body with a duplicated member is
    /// parsed and kept as its value instead (see the module doc).
    ///
    /// Errors: the body is not JSON; the [`serde_json::Error`] gives line and column.
    pub fn from_json_bytes(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        // JSON is UTF-8: checked once for the whole body. Not UTF-8: serde_json says where.
        let Ok(text) = std::str::from_utf8(bytes) else {
            return serde_json::from_slice::<Value>(bytes).map(RunInput::from);
        };
        // serde_json's `&str` reader: no string is checked for UTF-8 again (17.4 → 13.6 µs
        // for the 6 KB Stripe event, `cargo bench --bench door -- door/input`; 262,000 →
        // 233,000 instructions under callgrind).
        let scan = Scan::of(text)?;
        if scan.duplicate {
            return serde_json::from_str::<Value>(text).map(RunInput::from);
        }
        let raw: &RawValue = serde_json::from_str(text)?;
        Ok(RunInput::raw_scanned(raw.to_owned(), scan))
    }

    fn raw_scanned(raw: Box<RawValue>, scan: Scan) -> Self {
        RunInput(Arc::new(Inner {
            raw: Some(raw),
            value: OnceLock::new(),
            search: scan.values,
        }))
    }

    /// The parsed value (parsed now if it was not yet).
    pub fn value(&self) -> &Value {
        self.0.value.get_or_init(|| self.0.parse())
    }

    /// The value, taken out (cloned if shared).
    pub fn into_value(self) -> Value {
        match Arc::try_unwrap(self.0) {
            Ok(inner) => match inner.value.get() {
                Some(_) => inner.value.into_inner().unwrap_or(Value::Null),
                None => inner.parse(),
            },
            Err(shared) => RunInput(shared).value().clone(),
        }
    }

    /// The text as delivered, when the input still has it.
    pub fn raw(&self) -> Option<&str> {
        self.0.raw.as_deref().map(RawValue::get)
    }

    /// The strings of this input the free search indexes ([`SEARCH_VALUES_MAX`]): from the
    /// scan of the text when the input has one (no parse), else from the value.
    pub fn search_values(&self) -> Vec<String> {
        if self.0.raw.is_some() {
            return self.0.search.clone();
        }
        let mut out = Vec::new();
        search_values(self.value(), &mut out, &mut HashSet::new());
        out
    }
}

/// Adds the strings of `v` the free search indexes to `out` (depth first, document order),
/// skipping those in `seen`, until `out` holds [`SEARCH_VALUES_MAX`].
pub fn search_values(v: &Value, out: &mut Vec<String>, seen: &mut HashSet<String>) {
    if out.len() >= SEARCH_VALUES_MAX {
        return;
    }
    match v {
        Value::String(s) if is_search_value(s) && seen.insert(s.clone()) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| search_values(i, out, seen)),
        Value::Object(map) => map.values().for_each(|i| search_values(i, out, seen)),
        _ => {}
    }
}

impl From<Value> for RunInput {
    fn from(value: Value) -> Self {
        RunInput(Arc::new(Inner {
            raw: None,
            value: OnceLock::from(value),
            search: Vec::new(),
        }))
    }
}

impl Default for RunInput {
    fn default() -> Self {
        RunInput::from(Value::Null)
    }
}

impl std::ops::Deref for RunInput {
    type Target = Value;
    fn deref(&self) -> &Value {
        self.value()
    }
}

impl PartialEq for RunInput {
    fn eq(&self, other: &Self) -> bool {
        match (self.raw(), other.raw()) {
            (Some(a), Some(b)) if a == b => true,
            _ => self.value() == other.value(),
        }
    }
}

impl PartialEq<Value> for RunInput {
    fn eq(&self, other: &Value) -> bool {
        self.value() == other
    }
}

impl PartialEq<RunInput> for Value {
    fn eq(&self, other: &RunInput) -> bool {
        self == other.value()
    }
}

impl fmt::Debug for RunInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.value(), f)
    }
}

/// The JSON text: as delivered when the input has it, else the value's.
impl fmt::Display for RunInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.raw() {
            Some(raw) => f.write_str(raw),
            None => fmt::Display::fmt(self.value(), f),
        }
    }
}

impl Serialize for RunInput {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match (&self.0.raw, self.0.value.get()) {
            // A value already parsed serialises the same as its text; the text is a copy.
            (Some(raw), _) => raw.serialize(s),
            (None, Some(v)) => v.serialize(s),
            (None, None) => Value::Null.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for RunInput {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        let scan = Scan::of(raw.get()).map_err(serde::de::Error::custom)?;
        if scan.duplicate {
            return serde_json::from_str::<Value>(raw.get())
                .map(RunInput::from)
                .map_err(serde::de::Error::custom);
        }
        Ok(RunInput::raw_scanned(raw, scan))
    }
}

/// What one pass over a body found: its searchable strings, and whether an object repeats a
/// member name.
#[derive(Default)]
struct Scan {
    values: Vec<String>,
    seen: HashSet<String>,
    duplicate: bool,
}

impl Scan {
    /// One pass over `text`, which must hold one JSON value (whitespace around it allowed).
    fn of(text: &str) -> Result<Scan, serde_json::Error> {
        let mut scan = Scan::default();
        let mut de = serde_json::Deserializer::from_str(text);
        ScanSeed(&mut scan).deserialize(&mut de)?;
        de.end()?;
        Ok(scan)
    }
    fn string(&mut self, s: &str) {
        if self.values.len() < SEARCH_VALUES_MAX && is_search_value(s) && !self.seen.contains(s) {
            self.seen.insert(s.to_string());
            self.values.push(s.to_string());
        }
    }
}

/// Walks one JSON value (any kind), feeding [`Scan`]; builds nothing. serde_json's recursion
/// limit (128 levels) applies, as for a `Value`.
struct ScanSeed<'a>(&'a mut Scan);

impl<'de> DeserializeSeed<'de> for ScanSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ScanSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, s: &str) -> Result<(), E> {
        self.0.string(s);
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(ScanSeed(&mut *self.0))?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // Member names of this object (most objects are small: a list beats hashing).
        let mut names: Vec<Cow<'de, str>> = Vec::new();
        while let Some(name) = map.next_key_seed(NameSeed)? {
            if names.contains(&name) {
                self.0.duplicate = true;
            } else {
                names.push(name);
            }
            map.next_value_seed(ScanSeed(&mut *self.0))?;
        }
        Ok(())
    }
}

/// A member name, borrowed from the body when it has no escapes.
struct NameSeed;

impl<'de> DeserializeSeed<'de> for NameSeed {
    type Value = Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for NameSeed {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }
    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(s))
    }
    fn visit_str<E>(self, s: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(text: &str) -> RunInput {
        RunInput::from_json_bytes(text.as_bytes()).expect("well-formed")
    }

    /// The text is kept and written back as it came; reads parse it once; equality is by value.
    #[test]
    fn a_body_is_kept_as_its_text_and_read_as_its_value() {
        let text = r#" {"id":"evt_1","n":123456789012345678901234567890,"data":{"object":{"customer":"cus_QX1"}}} "#;
        let input = raw(text);
        assert_eq!(input.raw(), Some(text.trim()));
        assert_eq!(serde_json::to_string(&input).unwrap(), text.trim());
        assert_eq!(input["data"]["object"]["customer"], "cus_QX1");
        assert_eq!(
            input,
            RunInput::from(serde_json::from_str::<Value>(text).unwrap())
        );
        let record = json!({"input": input});
        assert_eq!(record["input"]["id"], "evt_1");
        // Read back from stored text: still the text (the big number exact), and the same
        // search values; from a `Value` too.
        #[derive(Serialize, Deserialize)]
        struct Record {
            input: RunInput,
        }
        let stored = serde_json::to_string(&Record {
            input: input.clone(),
        })
        .unwrap();
        assert!(
            stored.contains("123456789012345678901234567890"),
            "{stored}"
        );
        let back: Record = serde_json::from_str(&stored).unwrap();
        assert_eq!(back.input.raw(), Some(text.trim()));
        assert_eq!(back.input.search_values(), ["evt_1", "cus_QX1"]);
        let from_value: Record = serde_json::from_value(record).unwrap();
        assert_eq!(from_value.input["data"]["object"]["customer"], "cus_QX1");
        assert_eq!(from_value.input.search_values(), ["evt_1", "cus_QX1"]);
    }

    /// The scan finds the same searchable strings, in the same order, as the walk of the value.
    #[test]
    fn the_scan_finds_what_the_value_walk_finds() {
        let text = r#"{"id":"evt_1Q","type":"invoice.paid","list":["in_01","in_01",{"email":"ada@example.com"}],
                      "note":"two words 12","short":"a1","currency":"eur","n":42,"k":{"cus_9":"not a value"},
                      "customer":"cus_QXgbTfeWzA","repo":"Hello-World","login":"Codertocat","cur":"USD",
                      "url":"https://github.com/Codertocat","state":"payment_failed"}"#;
        let input = raw(text);
        let parsed = RunInput::from(serde_json::from_str::<Value>(text).unwrap());
        assert_eq!(
            input.search_values(),
            [
                "evt_1Q",
                "in_01",
                "ada@example.com",
                "cus_QXgbTfeWzA",
                "Hello-World"
            ]
        );
        assert_eq!(input.search_values(), parsed.search_values());
        let many = Value::Array((0..100).map(|i| json!(format!("v_{i:03}"))).collect());
        let many_raw = raw(&many.to_string());
        assert_eq!(many_raw.search_values().len(), SEARCH_VALUES_MAX);
        assert_eq!(
            many_raw.search_values(),
            RunInput::from(many).search_values()
        );
    }

    /// A duplicated member is read once, the last one winning, and the text is not kept.
    #[test]
    fn a_duplicated_member_keeps_one_reading() {
        let input = raw(r#"{"a":1,"b":{"x":"in_1","x":"in_2"}}"#);
        assert_eq!(input.raw(), None);
        assert_eq!(input["b"]["x"], "in_2");
        assert_eq!(
            serde_json::to_string(&input).unwrap(),
            r#"{"a":1,"b":{"x":"in_2"}}"#
        );
        // Read back from text that has one: the same single reading.
        let back: RunInput = serde_json::from_str(r#"{"x":"in_1","x":"in_2"}"#).unwrap();
        assert_eq!((back.raw(), &back["x"]), (None, &json!("in_2")));
        // The same name in two objects is no duplicate.
        assert!(raw(r#"{"a":{"x":1},"b":{"x":2}}"#).raw().is_some());
    }

    /// Bad bodies are refused with where; nothing past the value is accepted; what a `Value`
    /// refuses though its syntax is fine (a number past f64, a lone surrogate) is refused too.
    #[test]
    fn malformed_bodies_are_refused() {
        for bad in [
            "",
            "{",
            r#"{"a":1}x"#,
            "[1,]",
            "\"\\ud800\"",
            "nul",
            "1e400",
            r#"{"a":[-1e309]}"#,
            &"9".repeat(400),
            r#"{"id":"in_1","b":"\udc00x"}"#,
        ] {
            assert!(
                RunInput::from_json_bytes(bad.as_bytes()).is_err(),
                "{bad:?}"
            );
        }
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(
            RunInput::from_json_bytes(deep.as_bytes()).is_err(),
            "recursion limit"
        );
        let e = RunInput::from_json_bytes(b"{\n  \"a\": }").unwrap_err();
        assert_eq!((e.line(), e.column()), (2, 8));
    }
}
