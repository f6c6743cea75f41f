//! Threshold alarms on numeric samples, with hysteresis: a threshold raises once
//! when its tag crosses the limit and clears once when the value is back at its
//! clear point, however many samples stay beyond in between.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::Cell;
use core::fmt;

use sluice_guest::settings::{SettingValue, unknown_key, wrong_type};

use crate::exports::sluice::dataflow::alarm_rules::{AlarmSignal, SignalKind};
use crate::sluice::dataflow::types::{ConfigError, Setting, TagSpec};
use crate::{config_error, setting_value};
use sluice_guest::columns::{Cell as Value, Columns, quality};

/// The fields of one threshold, `thresholds.N.<field>`.
const FIELDS: &[&str] = &["tag", "above", "below", "clearAt", "ruleKey", "message"];

/// The accepted keys, for the unknown-key message.
const KEYS: &[&str] = &[
    "thresholds.N.tag",
    "thresholds.N.above",
    "thresholds.N.below",
    "thresholds.N.clearAt",
    "thresholds.N.ruleKey",
    "thresholds.N.message",
];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Limit {
    /// Raise above the limit, clear at or below the clear point.
    Above,
    /// Raise below the limit, clear at or above the clear point.
    Below,
}

struct Threshold {
    tag: u32,
    tag_key: String,
    limit: Limit,
    at: f64,
    clear_at: f64,
    rule_key: String,
    message: Option<String>,
    /// Raised and not yet cleared.
    active: Cell<bool>,
}

/// The thresholds of one device.
pub struct Thresholds {
    /// Sorted by tag, and by position in the settings within a tag.
    list: Vec<Threshold>,
}

/// A sample's value as it was, for messages.
enum Shown {
    Int(i64),
    Uint(u64),
    Float(f64),
}

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shown::Int(v) => write!(f, "{v}"),
            Shown::Uint(v) => write!(f, "{v}"),
            Shown::Float(v) => write!(f, "{v}"),
        }
    }
}

/// The threshold index of a `thresholds.N.field` key, and its field; `None` for
/// any other key. Indices are plain decimal (`0`, `12`, never `01`).
fn parse_key(key: &str) -> Option<(u32, &str)> {
    let (index, field) = key.strip_prefix("thresholds.")?.split_once('.')?;
    let canonical = index == "0" || (!index.starts_with('0') && !index.is_empty());
    if !canonical || !index.bytes().all(|b| b.is_ascii_digit()) || !FIELDS.contains(&field) {
        return None;
    }
    Some((index.parse().ok()?, field))
}

/// `TAG_KEY_HIGH` / `TAG_KEY_LOW`: the tag key uppercased, every character other
/// than an ASCII letter or digit turned into `_`.
fn default_rule_key(tag_key: &str, limit: Limit) -> String {
    let mut key: String = tag_key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    key.push_str(match limit {
        Limit::Above => "_HIGH",
        Limit::Below => "_LOW",
    });
    key
}

/// The settings of one threshold, by field, as given.
#[derive(Default)]
struct Draft<'a> {
    fields: BTreeMap<&'a str, &'a Setting>,
}

/// Reads one threshold's settings, pushing every mistake to `errors`.
struct Reader<'a> {
    index: u32,
    draft: &'a Draft<'a>,
    errors: &'a mut Vec<ConfigError>,
}

impl Reader<'_> {
    fn key(&self, field: &str) -> String {
        format!("thresholds.{}.{field}", self.index)
    }

    fn error(&mut self, field: &str, message: String) {
        let key = self.key(field);
        self.errors.push(config_error(None, &key, message));
    }

    /// A finite number, or `None` (absent, or an error pushed).
    fn number(&mut self, field: &str) -> Option<f64> {
        let setting = self.draft.fields.get(field)?;
        let value = setting_value(setting);
        match value.as_f64() {
            Some(v) if v.is_finite() => Some(v),
            Some(_) => {
                self.error(field, format!("`{}` must be a finite number", setting.key));
                None
            }
            None => {
                self.error(field, wrong_type(&setting.key, "a number", &value));
                None
            }
        }
    }

    /// A non-empty text, or `None` (absent, or an error pushed).
    fn text(&mut self, field: &str, expected: &str) -> Option<&str> {
        let setting = *self.draft.fields.get(field)?;
        match setting_value(setting) {
            SettingValue::Text(text) if !text.trim().is_empty() => Some(text),
            SettingValue::Text(_) => {
                self.error(field, format!("`{}` must not be empty", setting.key));
                None
            }
            other => {
                self.error(field, wrong_type(&setting.key, expected, &other));
                None
            }
        }
    }
}

impl Thresholds {
    /// Reads the thresholds from the evaluator's settings.
    ///
    /// # Errors
    /// Every mistake found, each against the setting key it is about.
    pub fn parse(settings: &[Setting], tags: &[TagSpec]) -> Result<Self, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let mut drafts: BTreeMap<u32, Draft<'_>> = BTreeMap::new();
        for setting in settings {
            let Some((index, field)) = parse_key(&setting.key) else {
                errors.push(config_error(
                    None,
                    &setting.key,
                    unknown_key(&setting.key, KEYS),
                ));
                continue;
            };
            let draft = drafts.entry(index).or_default();
            if draft.fields.insert(field, setting).is_some() {
                errors.push(config_error(
                    None,
                    &setting.key,
                    format!("setting `{}` is given twice", setting.key),
                ));
            }
        }

        let mut list = Vec::with_capacity(drafts.len());
        // Rule keys in use, with the threshold that took each.
        let mut taken: Vec<(String, u32)> = Vec::new();
        for (&index, draft) in &drafts {
            let mut reader = Reader {
                index,
                draft,
                errors: &mut errors,
            };

            let tag_key = reader.text("tag", "a tag key (text)").map(String::from);
            let tag = match &tag_key {
                Some(key) => {
                    let found = tags.iter().position(|t| t.key == *key);
                    match found.map(|i| crate::tag_array_len(&tags[i])) {
                        None => reader.error("tag", format!("no tag `{key}` on this device")),
                        Some(Some(len)) => reader.error(
                            "tag",
                            format!(
                                "tag `{key}` is an array of {len} values: a threshold \
                                 compares one value"
                            ),
                        ),
                        Some(None) => {}
                    }
                    found
                }
                None => {
                    if !draft.fields.contains_key("tag") {
                        reader.error("tag", format!("threshold {index} needs a `tag`"));
                    }
                    None
                }
            };

            let above = reader.number("above");
            let below = reader.number("below");
            let limit = match (
                draft.fields.contains_key("above"),
                draft.fields.contains_key("below"),
            ) {
                (true, false) => above.map(|at| (Limit::Above, at)),
                (false, true) => below.map(|at| (Limit::Below, at)),
                (true, true) => {
                    reader.error(
                        "below",
                        format!("threshold {index} has both `above` and `below`; give one"),
                    );
                    None
                }
                (false, false) => {
                    reader.error(
                        "above",
                        format!("threshold {index} needs `above` or `below`"),
                    );
                    None
                }
            };

            let clear_at = reader.number("clearAt");
            if let (Some((limit, at)), Some(clear)) = (limit, clear_at) {
                let wrong = match limit {
                    Limit::Above => clear > at,
                    Limit::Below => clear < at,
                };
                if wrong {
                    let (side, bound) = match limit {
                        Limit::Above => ("at most", "above"),
                        Limit::Below => ("at least", "below"),
                    };
                    reader.error(
                        "clearAt",
                        format!("`clearAt` ({clear}) must be {side} `{bound}` ({at})"),
                    );
                }
            }

            let explicit_rule_key = reader
                .text("ruleKey", "a rule key (text)")
                .map(String::from);
            let message = reader.text("message", "text").map(String::from);

            let rule_key = match (&explicit_rule_key, &tag_key, limit) {
                (Some(key), _, _) => Some(key.clone()),
                (None, Some(tag_key), Some((limit, _))) => Some(default_rule_key(tag_key, limit)),
                _ => None,
            };
            if let Some(rule_key) = &rule_key {
                if let Some((_, other)) = taken.iter().find(|(k, _)| k == rule_key) {
                    let how = if explicit_rule_key.is_some() {
                        ""
                    } else {
                        " by default"
                    };
                    reader.error(
                        "ruleKey",
                        format!(
                            "rule key `{rule_key}`{how} is already used by threshold {other}; set a distinct `ruleKey`"
                        ),
                    );
                } else {
                    taken.push((rule_key.clone(), index));
                }
            }

            if let (Some(tag), Some(tag_key), Some((limit, at)), Some(rule_key)) =
                (tag, tag_key, limit, rule_key)
            {
                list.push(Threshold {
                    tag: tag as u32,
                    tag_key,
                    limit,
                    at,
                    clear_at: clear_at.unwrap_or(at),
                    rule_key,
                    message,
                    active: Cell::new(false),
                });
            }
        }

        if !errors.is_empty() {
            return Err(errors);
        }
        // Stable: thresholds of one tag keep their settings order.
        list.sort_by_key(|t| t.tag);
        Ok(Thresholds { list })
    }

    /// The thresholds on `tag`.
    /// The tags some threshold watches, ascending, each once (only their samples
    /// can raise or clear a threshold alarm).
    pub fn watched_tags(&self) -> Vec<u32> {
        let mut tags: Vec<u32> = self.list.iter().map(|t| t.tag).collect();
        tags.dedup();
        tags
    }

    fn on_tag(&self, tag: u32) -> &[Threshold] {
        let start = self.list.partition_point(|t| t.tag < tag);
        let end = self.list.partition_point(|t| t.tag <= tag);
        &self.list[start..end]
    }

    /// The signals of one round's samples, in sample order.
    pub fn on_samples(&self, batch: &Columns) -> Vec<AlarmSignal> {
        let mut signals = Vec::new();
        if self.list.is_empty() {
            return signals;
        }
        for i in 0..batch.rows() {
            if batch.qualities[i] == quality::BAD {
                continue;
            }
            let (value, shown) = match batch.cell(i) {
                Value::Int(v) => (v as f64, Shown::Int(v)),
                Value::Uint(v) => (v as f64, Shown::Uint(v)),
                Value::Float(v) => (v, Shown::Float(v)),
                _ => continue,
            };
            let (tag, ts_ms) = (batch.tags[i], batch.ts_ms[i]);
            for threshold in self.on_tag(tag) {
                if let Some((kind, message)) = threshold.step(value, &shown) {
                    signals.push(AlarmSignal {
                        kind,
                        rule_key: threshold.rule_key.clone(),
                        ts_ms,
                        message,
                        event_id: None,
                    });
                }
            }
        }
        signals
    }
}

impl Threshold {
    /// Moves the hysteresis on by one value: a raise or a clear, or nothing.
    fn step(&self, value: f64, shown: &Shown) -> Option<(SignalKind, String)> {
        let active = self.active.get();
        let (raise, clear) = match self.limit {
            Limit::Above => (value > self.at, value <= self.clear_at),
            Limit::Below => (value < self.at, value >= self.clear_at),
        };
        let tag = &self.tag_key;
        if !active && raise {
            self.active.set(true);
            let side = match self.limit {
                Limit::Above => "above",
                Limit::Below => "below",
            };
            let what = format!("{tag} = {shown}, {side} {}", self.at);
            let message = match &self.message {
                Some(text) => format!("{text} ({what})"),
                None => what,
            };
            Some((SignalKind::Raise, message))
        } else if active && clear {
            self.active.set(false);
            let side = match self.limit {
                Limit::Above => "less",
                Limit::Below => "more",
            };
            let message = format!("{tag} = {shown}, back to {} or {side}", self.clear_at);
            Some((SignalKind::Clear, message))
        } else {
            None
        }
    }
}

impl fmt::Debug for Thresholds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.list.iter().map(|t| t.rule_key.as_str()))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sluice::dataflow::types::{Access, ByteOrder, DataType, SettingValue as Wit};
    use alloc::vec;
    use sluice_guest::columns::Quality;

    fn tag(key: &str) -> TagSpec {
        TagSpec {
            key: key.into(),
            address: "40001".into(),
            data_type: DataType::Float32,
            length: 0,
            byte_order: ByteOrder::Abcd,
            factor: 1.0,
            offset: 0.0,
            deadband: 0.0,
            access: Access::Read,
            settings: Vec::new(),
        }
    }

    fn tags() -> Vec<TagSpec> {
        vec![tag("temperature"), tag("pressure"), tag("tank-level.2")]
    }

    fn num(key: &str, value: f64) -> Setting {
        Setting {
            key: key.into(),
            value: Wit::Float(value),
        }
    }

    fn int(key: &str, value: i64) -> Setting {
        Setting {
            key: key.into(),
            value: Wit::Int(value),
        }
    }

    fn text(key: &str, value: &str) -> Setting {
        Setting {
            key: key.into(),
            value: Wit::Text(value.into()),
        }
    }

    type Sample = (u32, Value<'static>, Quality, i64);

    fn sample(tag: u32, value: Value<'static>, quality: Quality, ts_ms: i64) -> Sample {
        (tag, value, quality, ts_ms)
    }

    fn batch(samples: Vec<Sample>) -> Columns {
        let mut columns = Columns::default();
        for (tag, value, quality, ts_ms) in samples {
            columns.push_cell(tag, quality, value, ts_ms);
        }
        columns
    }

    fn feed(rules: &Thresholds, samples: Vec<Sample>) -> Vec<(SignalKind, String, i64)> {
        rules
            .on_samples(&batch(samples))
            .into_iter()
            .map(|s| {
                assert!(s.event_id.is_none());
                assert!(!s.message.is_empty());
                (s.kind, s.rule_key, s.ts_ms)
            })
            .collect()
    }

    /// Feeds one float per round to tag 0 and returns what each round signalled.
    fn rounds(rules: &Thresholds, values: &[f64]) -> Vec<Option<SignalKind>> {
        values
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let got = feed(
                    rules,
                    vec![sample(0, Value::Float(v), Quality::Good, i as i64)],
                );
                assert!(got.len() <= 1);
                got.first().map(|s| s.0)
            })
            .collect()
    }

    fn errors(settings: Vec<Setting>) -> Vec<(String, String)> {
        Thresholds::parse(&settings, &tags())
            .expect_err("the settings are wrong")
            .into_iter()
            .map(|e| {
                assert_eq!(e.tag, None);
                (e.key, e.message)
            })
            .collect()
    }

    fn error_keys(settings: Vec<Setting>) -> Vec<String> {
        errors(settings).into_iter().map(|(k, _)| k).collect()
    }

    const R: Option<SignalKind> = Some(SignalKind::Raise);
    const C: Option<SignalKind> = Some(SignalKind::Clear);

    #[test]
    fn no_settings_means_no_thresholds() {
        let rules = Thresholds::parse(&[], &tags()).unwrap();
        assert!(rules.list.is_empty());
        assert!(rules.watched_tags().is_empty());
        assert_eq!(rounds(&rules, &[1e9, -1e9]), [None, None]);
    }

    #[test]
    fn the_watched_tags_are_those_of_some_threshold_once_each_in_order() {
        let rules = Thresholds::parse(
            &[
                text("thresholds.0.tag", "tank-level.2"),
                num("thresholds.0.above", 9.0),
                text("thresholds.1.tag", "temperature"),
                num("thresholds.1.above", 80.0),
                text("thresholds.2.tag", "tank-level.2"),
                num("thresholds.2.below", 1.0),
            ],
            &tags(),
        )
        .unwrap();
        assert_eq!(rules.watched_tags(), [0, 2]);
    }

    #[test]
    fn above_raises_once_and_clears_at_clear_point() {
        let rules = Thresholds::parse(
            &[
                text("thresholds.0.tag", "temperature"),
                int("thresholds.0.above", 80),
                num("thresholds.0.clearAt", 75.0),
            ],
            &tags(),
        )
        .unwrap();
        assert_eq!(
            rounds(
                &rules,
                &[70.0, 80.0, 85.5, 90.0, 78.0, 75.1, 75.0, 74.0, 81.0, 82.0]
            ),
            [None, None, R, None, None, None, C, None, R, None]
        );
    }

    #[test]
    fn below_raises_once_and_clears_at_clear_point() {
        let rules = Thresholds::parse(
            &[
                text("thresholds.0.tag", "temperature"),
                num("thresholds.0.below", 5.0),
                num("thresholds.0.clearAt", 8.0),
            ],
            &tags(),
        )
        .unwrap();
        assert_eq!(
            rounds(&rules, &[10.0, 5.0, 4.9, 2.0, 6.0, 7.99, 8.0, 9.0, 4.0]),
            [None, None, R, None, None, None, C, None, R]
        );
    }

    #[test]
    fn clear_point_defaults_to_the_limit() {
        let rules = Thresholds::parse(
            &[
                text("thresholds.0.tag", "temperature"),
                num("thresholds.0.above", 80.0),
            ],
            &tags(),
        )
        .unwrap();
        assert_eq!(
            rounds(&rules, &[81.0, 80.5, 80.0, 80.0, 80.1]),
            [R, None, C, None, R]
        );
        let rules = Thresholds::parse(
            &[
                text("thresholds.0.tag", "temperature"),
                num("thresholds.0.below", 0.0),
            ],
            &tags(),
        )
        .unwrap();
        assert_eq!(rounds(&rules, &[-1.0, 0.0, -0.5]), [R, C, R]);
    }

    #[test]
    fn default_rule_keys_and_messages() {
        let rules = Thresholds::parse(
            &[
                text("thresholds.0.tag", "temperature"),
                num("thresholds.0.above", 80.0),
                num("thresholds.0.clearAt", 75.0),
                text("thresholds.1.tag", "tank-level.2"),
                num("thresholds.1.below", 10.0),
                text("thresholds.1.message", "Tank almost empty"),
            ],
            &tags(),
        )
        .unwrap();
        let raise = rules.on_samples(&batch(vec![
            sample(0, Value::Float(85.5), Quality::Good, 100),
            sample(2, Value::Int(3), Quality::Uncertain, 101),
        ]));
        assert_eq!(raise.len(), 2);
        assert_eq!(raise[0].rule_key, "TEMPERATURE_HIGH");
        assert_eq!(raise[0].message, "temperature = 85.5, above 80");
        assert_eq!(raise[0].ts_ms, 100);
        assert_eq!(raise[1].rule_key, "TANK_LEVEL_2_LOW");
        assert_eq!(
            raise[1].message,
            "Tank almost empty (tank-level.2 = 3, below 10)"
        );
        let clear = rules.on_samples(&batch(vec![sample(0, Value::Uint(74), Quality::Good, 200)]));
        assert_eq!(clear.len(), 1);
        assert_eq!(clear[0].kind, SignalKind::Clear);
        assert_eq!(clear[0].message, "temperature = 74, back to 75 or less");
    }

    #[test]
    fn bad_samples_and_non_numbers_are_ignored() {
        let rules = Thresholds::parse(
            &[
                text("thresholds.0.tag", "temperature"),
                num("thresholds.0.above", 80.0),
            ],
            &tags(),
        )
        .unwrap();
        let got = feed(
            &rules,
            vec![
                sample(0, Value::Float(99.0), Quality::Bad, 1),
                sample(0, Value::Boolean(true), Quality::Good, 2),
                sample(0, Value::Text("99"), Quality::Good, 3),
                sample(0, Value::None, Quality::Bad, 4),
                sample(0, Value::Float(f64::NAN), Quality::Good, 5),
                sample(1, Value::Float(99.0), Quality::Good, 6),
                sample(7, Value::Float(99.0), Quality::Good, 7),
            ],
        );
        assert!(got.is_empty(), "{got:?}");
        // Uncertain counts; a bad sample while active does not clear.
        let got = feed(
            &rules,
            vec![
                sample(0, Value::Int(81), Quality::Uncertain, 8),
                sample(0, Value::Float(10.0), Quality::Bad, 9),
                sample(0, Value::Float(10.0), Quality::Good, 10),
            ],
        );
        assert_eq!(
            got,
            [
                (SignalKind::Raise, "TEMPERATURE_HIGH".into(), 8),
                (SignalKind::Clear, "TEMPERATURE_HIGH".into(), 10),
            ]
        );
    }

    #[test]
    fn several_thresholds_on_one_tag_keep_their_own_state() {
        let rules = Thresholds::parse(
            &[
                text("thresholds.0.tag", "pressure"),
                num("thresholds.0.above", 10.0),
                text("thresholds.0.ruleKey", "PRESSURE_WARN"),
                text("thresholds.1.tag", "temperature"),
                num("thresholds.1.above", 50.0),
                text("thresholds.2.tag", "pressure"),
                num("thresholds.2.above", 20.0),
                text("thresholds.2.ruleKey", "PRESSURE_TRIP"),
                text("thresholds.3.tag", "pressure"),
                num("thresholds.3.below", 1.0),
            ],
            &tags(),
        )
        .unwrap();
        let got = feed(
            &rules,
            vec![
                sample(1, Value::Float(25.0), Quality::Good, 1),
                sample(0, Value::Float(60.0), Quality::Good, 2),
                sample(1, Value::Float(15.0), Quality::Good, 3),
                sample(1, Value::Float(0.5), Quality::Good, 4),
            ],
        );
        let keys: Vec<(SignalKind, &str)> = got.iter().map(|(k, r, _)| (*k, r.as_str())).collect();
        assert_eq!(
            keys,
            [
                (SignalKind::Raise, "PRESSURE_WARN"),
                (SignalKind::Raise, "PRESSURE_TRIP"),
                (SignalKind::Raise, "TEMPERATURE_HIGH"),
                (SignalKind::Clear, "PRESSURE_TRIP"),
                (SignalKind::Clear, "PRESSURE_WARN"),
                (SignalKind::Raise, "PRESSURE_LOW"),
            ]
        );
    }

    #[test]
    fn unknown_keys_are_errors() {
        assert_eq!(
            error_keys(vec![
                text("mode", "x"),
                num("thresholds.0.limit", 1.0),
                num("thresholds.above", 1.0),
                num("thresholds.01.above", 1.0),
                num("thresholds.x.above", 1.0),
                num("thresholds.-1.above", 1.0),
                num("thresholds..above", 1.0),
                num("thresholds.0.above.1", 1.0),
            ]),
            [
                "mode",
                "thresholds.0.limit",
                "thresholds.above",
                "thresholds.01.above",
                "thresholds.x.above",
                "thresholds.-1.above",
                "thresholds..above",
                "thresholds.0.above.1",
            ]
        );
        let (_, message) = &errors(vec![text("mode", "x")])[0];
        assert!(message.contains("thresholds.N.clearAt"), "{message}");
    }

    #[test]
    fn wrong_types_and_missing_fields_are_errors() {
        assert_eq!(
            error_keys(vec![
                int("thresholds.0.tag", 3),
                text("thresholds.0.above", "80"),
                text("thresholds.1.tag", "temperature"),
                text("thresholds.1.below", "low"),
                Setting {
                    key: "thresholds.1.clearAt".into(),
                    value: Wit::Boolean(true),
                },
                int("thresholds.1.ruleKey", 5),
                num("thresholds.1.message", 1.0),
                text("thresholds.2.tag", "temperature"),
                num("thresholds.3.above", 1.0),
                text("thresholds.4.tag", "temperature"),
                num("thresholds.4.above", f64::INFINITY),
                text("thresholds.5.tag", ""),
                num("thresholds.5.above", 1.0),
            ]),
            [
                "thresholds.0.tag",
                "thresholds.0.above",
                "thresholds.1.below",
                "thresholds.1.clearAt",
                "thresholds.1.ruleKey",
                "thresholds.1.message",
                "thresholds.2.above",
                "thresholds.3.tag",
                "thresholds.4.above",
                "thresholds.5.tag",
            ]
        );
    }

    #[test]
    fn a_threshold_on_an_array_tag_is_refused() {
        let mut list = tags();
        list[1].length = 4;
        let found = Thresholds::parse(
            &[
                text("thresholds.0.tag", "pressure"),
                num("thresholds.0.above", 1.0),
            ],
            &list,
        )
        .expect_err("an array");
        assert_eq!(found[0].key, "thresholds.0.tag");
        assert_eq!(
            found[0].message,
            "tag `pressure` is an array of 4 values: a threshold compares one value"
        );
    }

    #[test]
    fn unknown_tag_both_limits_and_bad_clear_points_are_errors() {
        let found = errors(vec![
            text("thresholds.0.tag", "humidity"),
            num("thresholds.0.above", 80.0),
            text("thresholds.1.tag", "temperature"),
            num("thresholds.1.above", 80.0),
            num("thresholds.1.below", 5.0),
            text("thresholds.2.tag", "temperature"),
            num("thresholds.2.above", 80.0),
            num("thresholds.2.clearAt", 80.5),
            text("thresholds.3.tag", "pressure"),
            num("thresholds.3.below", 1.0),
            num("thresholds.3.clearAt", 0.5),
        ]);
        let keys: Vec<&str> = found.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "thresholds.0.tag",
                "thresholds.1.below",
                "thresholds.2.clearAt",
                "thresholds.3.clearAt",
            ]
        );
        assert!(found[0].1.contains("humidity"), "{}", found[0].1);
        // clearAt equal to the limit is allowed on both sides.
        Thresholds::parse(
            &[
                text("thresholds.0.tag", "temperature"),
                num("thresholds.0.above", 80.0),
                int("thresholds.0.clearAt", 80),
                text("thresholds.1.tag", "pressure"),
                num("thresholds.1.below", 1.0),
                num("thresholds.1.clearAt", 1.0),
            ],
            &tags(),
        )
        .unwrap();
    }

    #[test]
    fn duplicate_rule_keys_are_errors() {
        assert_eq!(
            error_keys(vec![
                text("thresholds.0.tag", "temperature"),
                num("thresholds.0.above", 80.0),
                text("thresholds.1.tag", "temperature"),
                num("thresholds.1.above", 90.0),
                text("thresholds.2.tag", "pressure"),
                num("thresholds.2.above", 1.0),
                text("thresholds.2.ruleKey", "TEMPERATURE_HIGH"),
                text("thresholds.3.tag", "pressure"),
                num("thresholds.3.below", 1.0),
                text("thresholds.3.ruleKey", "PRESSURE_HIGH"),
            ]),
            ["thresholds.1.ruleKey", "thresholds.2.ruleKey"]
        );
        // The same key given twice is reported too.
        assert_eq!(
            error_keys(vec![
                text("thresholds.0.tag", "temperature"),
                num("thresholds.0.above", 80.0),
                num("thresholds.0.above", 81.0),
            ]),
            ["thresholds.0.above"]
        );
    }

    #[test]
    fn every_error_is_collected() {
        let found = errors(vec![
            text("bogus", "x"),
            text("thresholds.0.tag", "nope"),
            text("thresholds.1.tag", "temperature"),
            num("thresholds.1.above", 1.0),
            num("thresholds.1.clearAt", 2.0),
            num("thresholds.2.below", 1.0),
        ]);
        assert_eq!(found.len(), 5, "{found:?}");
    }

    #[test]
    fn default_rule_key_shape() {
        assert_eq!(default_rule_key("temp", Limit::Above), "TEMP_HIGH");
        assert_eq!(
            default_rule_key("tank-level.2", Limit::Below),
            "TANK_LEVEL_2_LOW"
        );
        assert_eq!(default_rule_key("déb it", Limit::Above), "D_B_IT_HIGH");
    }
}
