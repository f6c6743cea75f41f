//! One entry of a channel's `tags`: a value in the PLC, where it lives, how to decode
//! and scale it, and how often to read it.

use super::read::{Text, Unique, choice, entry_name, out_of_range, read_at, required_name, text};
use crate::model::{Access, ByteOrder, DataType, ListKey, Setting, SettingValue, TagSpec};
use crate::yaml::{self, Diagnostics, Fields, FromNode, Node, Pos};

/// Shortest polling period accepted, in milliseconds.
const MIN_PERIOD_MS: u64 = 10;

/// Longest STRING tag, in characters.
const MAX_STRING_LENGTH: u32 = 256;
/// The most elements of an array tag (a Modbus read takes at most 2000 coils;
/// each protocol refuses what does not fit one of its requests).
const MAX_ARRAY_LENGTH: u32 = 2000;

/// One entry of a channel's `tags`.
#[derive(Debug, Clone, PartialEq)]
pub struct TagConfig {
    /// What the codec and the pipeline see:
    /// - `key`: the tag's name, unique within the device, `[A-Za-z0-9_.-]+` (required);
    /// - `address`: where the value lives, in the protocol's notation, e.g. `DB1.0`,
    ///   `D100`, `'40001'` (required);
    /// - `dataType`: one of `DataType::NAMES` (default INT16, as the seed's);
    /// - `length`: characters of a STRING tag, 1 to 256 (required for STRING); for
    ///   another type, the elements of an array tag, whose value is a list (2 to
    ///   2000; 1, the seed's default, is one value, kept as 0 here like a tag
    ///   that does not say);
    /// - `byteOrder`: the tag's own byte order, else the channel's, else ABCD;
    /// - `factor` (default 1, not 0), `offset` (default 0): value = raw * factor + offset;
    /// - `deadband`: smallest change the pipeline's `deadband` stage lets through,
    ///   in every report mode (default 0, not negative);
    /// - `access`: `R` (default), `W` or `RW`.
    pub spec: TagSpec,
    /// `periodMs`: how often the tag is read (default 1000); 0 = never polled
    /// (write-only); otherwise at least 10.
    pub period_ms: u64,
    /// `readback`: read the value again after writing it (only for W and RW
    /// tags); `None` when not written: see [`TagConfig::reads_back`].
    pub readback: Option<bool>,
    /// `min`: smallest value a write may set.
    pub min: Option<f64>,
    /// `max`: largest value a write may set (not below `min`).
    pub max: Option<f64>,
    /// `unit`: engineering unit, for display (`°C`, `m3/h`, ...).
    pub unit: Option<String>,
    /// `precision`: decimals the console shows of the tag's values (0 to
    /// 12); without it, four significant digits. Published values are not
    /// rounded by it.
    pub precision: Option<u8>,
    /// Whether `byteOrder` was written on the tag itself.
    pub byte_order_override: bool,
}

/// Where a tag is written. Kept beside the channel's tags rather than in them:
/// devices of one model list equal tags at different lines, and equal lists are
/// kept once.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TagPositions {
    /// Where the entry starts.
    pub entry: Pos,
    /// Where `address` is written, for address errors the codec reports later.
    pub address: Pos,
}

impl ListKey for TagConfig {
    fn key(&self, hasher: &mut impl std::hash::Hasher) {
        self.spec.key(hasher);
    }
}

impl TagConfig {
    /// Whether a write is read back to check it: as written, else for RW tags
    /// (the seed's default: a tag that is read can be checked) and not for W
    /// tags (write-only: the device may not answer a read of it).
    pub fn reads_back(&self) -> bool {
        self.readback
            .unwrap_or(self.spec.access == Access::ReadWrite)
    }

    /// The tag as components see it, with its valid range as settings.
    pub fn component_spec(&self) -> TagSpec {
        let mut spec = self.spec.clone();
        for (key, bound) in [("min", self.min), ("max", self.max)] {
            if let Some(value) = bound {
                spec.settings.push(Setting {
                    key: key.into(),
                    value: SettingValue::Float(value),
                });
            }
        }
        spec
    }
}

/// Reads one tag and where it is written. `channel_order` is the channel's byte
/// order; `keys` the tag keys already used in the device (across its channels).
pub(super) fn read(
    node: &Node,
    channel_order: Option<ByteOrder>,
    keys: &mut Unique,
    errors: &mut Diagnostics,
) -> Option<(TagConfig, TagPositions)> {
    let mark = errors.len();
    let tag = read_entry(node, channel_order, keys, errors);
    if let Some(key) = entry_name(node, "key") {
        errors.name_since(mark, &format!("tag `{key}`"));
    }
    tag
}

fn read_entry(
    node: &Node,
    channel_order: Option<ByteOrder>,
    keys: &mut Unique,
    errors: &mut Diagnostics,
) -> Option<(TagConfig, TagPositions)> {
    let mut f = Fields::of(node, "tag", errors)?;
    let key = required_name(&mut f, "key", errors).map(|(key, pos)| {
        if !is_valid_key(&key) {
            errors.push(
                pos,
                format!("`key`: `{key}` may only use letters, digits, `_`, `.` and `-`"),
            );
        } else if let Some(first) = keys.first(&key, pos) {
            errors.push(
                pos,
                format!("duplicate tag key `{key}` in this device (first at {first})"),
            );
        }
        key
    });
    let address = f.required_with("address", errors, read_address);
    // `None` when written but invalid (already reported); INT16 when left out,
    // as the seed's tag defaults.
    let data_type = match f.node("dataType") {
        Some(_) => f.optional_with("dataType", errors, |node| {
            yaml::enum_value(node, DataType::NAMES)
        }),
        None => Some(DataType::Int16),
    };
    let length = read_length(&mut f, data_type, errors);

    let period = read_at::<u64>(&mut f, "periodMs", errors);
    if let Some((period, pos)) = period
        && period != 0
        && period < MIN_PERIOD_MS
    {
        errors.push(
            pos,
            format!(
                "`periodMs`: {period} ms is below the {MIN_PERIOD_MS} ms minimum (0 makes a \
                 write-only tag)"
            ),
        );
    }
    let factor = match read_at::<f64>(&mut f, "factor", errors) {
        Some((0.0, pos)) => {
            errors.push(
                pos,
                "`factor`: must not be 0 (every value would be the offset)",
            );
            1.0
        }
        other => other.map_or(1.0, |(factor, _)| factor),
    };
    let offset = read_at::<f64>(&mut f, "offset", errors).map_or(0.0, |(offset, _)| offset);
    let deadband = match read_at::<f64>(&mut f, "deadband", errors) {
        Some((deadband, pos)) if deadband < 0.0 => {
            errors.push(
                pos,
                format!("`deadband`: must be 0 or more, found {deadband}"),
            );
            0.0
        }
        other => other.map_or(0.0, |(deadband, _)| deadband),
    };
    // `None` when written but invalid (already reported): then no check depends on it.
    let access = match f.node("access") {
        Some(_) => f.optional_with("access", errors, |node| {
            yaml::enum_value(node, Access::NAMES)
        }),
        None => Some(Access::Read),
    };
    let readback = read_at::<bool>(&mut f, "readback", errors);
    if let Some((true, pos)) = readback
        && access == Some(Access::Read)
    {
        errors.push(
            pos,
            "`readback`: only a tag that is written (access W or RW) can be read back",
        );
    }
    if let Some((0, pos)) = period
        && access == Some(Access::Read)
    {
        errors.push(
            pos,
            "`periodMs`: 0 means never polled, and access R means never written: the tag \
             would do nothing (give it a period, or make it W or RW)",
        );
    }
    let byte_order_override = f.node("byteOrder").is_some();
    let byte_order = choice(
        &mut f,
        "byteOrder",
        ByteOrder::NAMES,
        channel_order.unwrap_or_default(),
        errors,
    );
    let min = read_at::<f64>(&mut f, "min", errors);
    let max = read_at::<f64>(&mut f, "max", errors);
    if let (Some((min, _)), Some((max, pos))) = (min, max)
        && min > max
    {
        errors.push(
            pos,
            format!("`max`: must be at least `min` ({min}), found {max}"),
        );
    }
    let unit = text(&mut f, "unit", errors);
    let precision = read_at::<u8>(&mut f, "precision", errors).and_then(|(decimals, pos)| {
        if decimals > MAX_PRECISION {
            errors.push(pos, out_of_range("precision", decimals, 0, MAX_PRECISION));
            return None;
        }
        Some(decimals)
    });
    f.finish(errors);

    let (address, address_pos) = address?;
    let tag = TagConfig {
        spec: TagSpec {
            key: key?.into(),
            address: address.into(),
            data_type: data_type?,
            length,
            byte_order,
            factor,
            offset,
            deadband,
            access: access?,
            settings: Vec::new(),
        },
        period_ms: period.map_or(1000, |(period, _)| period),
        readback: readback.map(|(readback, _)| readback),
        min: min.map(|(min, _)| min),
        max: max.map(|(max, _)| max),
        unit,
        precision,
        byte_order_override,
    };
    Some((
        tag,
        TagPositions {
            entry: node.pos,
            address: address_pos,
        },
    ))
}

/// The most decimals `precision` may ask for.
const MAX_PRECISION: u8 = 12;

/// `[A-Za-z0-9_.-]+`
fn is_valid_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// A quoted or unquoted address; an unquoted one that YAML reads as a fraction or with
/// leading zeros is refused, because its text is lost (`100.10` would become `100.1`).
fn read_address(node: &Node) -> Result<String, String> {
    match Text::from_node(node)?.0 {
        address if address.trim().is_empty() => Err("must not be empty".to_owned()),
        address => Ok(address),
    }
}

/// `length`: required for STRING tags, the elements of an array for the others;
/// 0 when not applicable.
fn read_length(f: &mut Fields<'_>, data_type: Option<DataType>, errors: &mut Diagnostics) -> u32 {
    let written = f.node("length").is_some();
    match data_type {
        Some(DataType::String) if !written => {
            errors.push(
                f.pos(),
                format!(
                    "tag: a STRING tag needs `length` (its size in characters, 1 to \
                     {MAX_STRING_LENGTH})"
                ),
            );
            0
        }
        Some(DataType::String) => match read_at::<u32>(f, "length", errors) {
            Some((length, _)) if (1..=MAX_STRING_LENGTH).contains(&length) => length,
            Some((length, pos)) => {
                errors.push(
                    pos,
                    format!(
                        "`length`: must be 1 to {MAX_STRING_LENGTH} characters, found {length}"
                    ),
                );
                0
            }
            None => 0,
        },
        Some(_) if !written => 0,
        Some(_) => match read_at::<u32>(f, "length", errors) {
            Some((1, _)) => 0,
            Some((length, _)) if (2..=MAX_ARRAY_LENGTH).contains(&length) => length,
            Some((length, pos)) => {
                errors.push(
                    pos,
                    format!(
                        "`length`: an array has 1 to {MAX_ARRAY_LENGTH} elements, found {length}"
                    ),
                );
                0
            }
            None => 0,
        },
        // Unknown data type (already reported): nothing to say about the length.
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{errors_of, load_ok};
    use super::*;

    /// A one-device modbus document whose tags are `tags` (indented as list items at
    /// column 11).
    fn doc(tags: &str) -> String {
        format!(
            "devices:
  - deviceId: d
    productId: P
    deviceNum: D
    channels:
      - channelId: c
        protocol: modbus-tcp
        host: plc1
        byteOrder: BADC
        tags:
{tags}"
        )
    }

    fn tags_of(tags: &str) -> Vec<TagConfig> {
        placed_tags_of(tags)
            .into_iter()
            .map(|(tag, _)| tag)
            .collect()
    }

    fn placed_tags_of(tags: &str) -> Vec<(TagConfig, TagPositions)> {
        let mut config = load_ok(&doc(tags));
        let channel = config.devices.remove(0).channels.remove(0);
        channel
            .placed_tags()
            .map(|(t, at)| (t.clone(), at))
            .collect()
    }

    /// The rendered diagnostics of a document with these tags.
    fn errors_text(tags: &str) -> String {
        errors_of(&doc(tags)).to_string()
    }

    #[test]
    fn defaults() {
        let tags = placed_tags_of("          - {key: a, address: 40001, dataType: UINT16}\n");
        let (t, at) = &tags[0];
        assert_eq!(t.spec.address, "40001");
        assert_eq!(t.spec.length, 0);
        assert_eq!(t.spec.byte_order, ByteOrder::Badc);
        assert!(!t.byte_order_override);
        assert_eq!(
            (t.spec.factor, t.spec.offset, t.spec.deadband),
            (1.0, 0.0, 0.0)
        );
        assert_eq!(t.spec.access, Access::Read);
        assert!(t.spec.settings.is_empty());
        assert_eq!(t.period_ms, 1000);
        assert_eq!((t.readback, t.reads_back()), (None, false), "an R tag");
        // The seed's defaults: INT16 when no type is said; a write of an RW
        // tag is read back, one of a W tag (write-only) is not.
        let tags = tags_of(
            "          - {key: a, address: 40001}\n          - {key: b, address: 40002, access: RW}\n          - {key: c, address: 40003, access: W}\n",
        );
        assert_eq!(tags[0].spec.data_type, DataType::Int16);
        let reads_back: Vec<bool> = tags.iter().map(TagConfig::reads_back).collect();
        assert_eq!(reads_back, [false, true, false]);
        assert_eq!((t.min, t.max, t.unit.as_deref()), (None, None, None));
        assert_eq!(
            at.entry,
            Pos {
                line: 11,
                column: 13
            }
        );
        assert_eq!(
            at.address,
            Pos {
                line: 11,
                column: 31
            }
        );
    }

    #[test]
    fn every_key() {
        let tags = tags_of(
            "          - key: name.1
            address: D200
            dataType: STRING
            length: 20
            byteOrder: DCBA
            periodMs: 10
            factor: 2
            offset: -1.5
            deadband: 0.25
            access: W
            readback: true
            min: -10
            max: 10
            unit: m3/h
",
        );
        let t = &tags[0];
        assert_eq!(t.spec.data_type, DataType::String);
        assert_eq!(t.spec.length, 20);
        assert_eq!(t.spec.byte_order, ByteOrder::Dcba);
        assert!(t.byte_order_override);
        assert_eq!(
            (t.spec.factor, t.spec.offset, t.spec.deadband),
            (2.0, -1.5, 0.25)
        );
        assert_eq!(t.spec.access, Access::Write);
        assert!(t.reads_back());
        assert_eq!(t.period_ms, 10);
        assert_eq!((t.min, t.max), (Some(-10.0), Some(10.0)));
        assert_eq!(t.unit.as_deref(), Some("m3/h"));
    }

    #[test]
    fn readback_on_a_read_only_tag() {
        assert_eq!(
            errors_text("          - {key: a, address: '1', dataType: BOOL, readback: true}\n"),
            "gw.yaml:11:62: `readback`: only a tag that is written (access W or RW) can be read back"
        );
    }

    #[test]
    fn write_only_period_on_a_read_only_tag() {
        assert_eq!(
            errors_text("          - {key: a, address: '1', dataType: BOOL, periodMs: 0}\n"),
            "gw.yaml:11:62: `periodMs`: 0 means never polled, and access R means never \
             written: the tag would do nothing (give it a period, or make it W or RW)"
        );
        // Write-only is fine.
        let tags =
            tags_of("          - {key: a, address: '1', dataType: BOOL, periodMs: 0, access: W}\n");
        assert_eq!(tags[0].period_ms, 0);
    }

    #[test]
    fn period_below_minimum() {
        assert_eq!(
            errors_text("          - {key: a, address: '1', dataType: BOOL, periodMs: 5}\n"),
            "gw.yaml:11:62: `periodMs`: 5 ms is below the 10 ms minimum (0 makes a write-only tag)"
        );
    }

    #[test]
    fn precision_is_decimals_for_the_console() {
        let tags = placed_tags_of(
            "          - {key: a, address: '40001', unit: degC, precision: 1}\n          - {key: b, address: '40002'}\n",
        );
        assert_eq!((tags[0].0.precision, tags[1].0.precision), (Some(1), None));
        assert_eq!(
            errors_text("          - {key: a, address: '40001', precision: 13}\n"),
            "gw.yaml:11:51: `precision`: must be at most 12, found 13"
        );
    }

    #[test]
    fn string_length() {
        assert_eq!(
            errors_text("          - {key: s, address: D1, dataType: STRING}\n"),
            "gw.yaml:11:13: tag: a STRING tag needs `length` (its size in characters, 1 to 256)"
        );
        assert_eq!(
            errors_text("          - {key: s, address: D1, dataType: STRING, length: 300}\n"),
            "gw.yaml:11:61: `length`: must be 1 to 256 characters, found 300"
        );
        assert_eq!(
            errors_text("          - {key: s, address: D1, dataType: INT16, length: 0}\n"),
            "gw.yaml:11:60: `length`: an array has 1 to 2000 elements, found 0"
        );
        let tags = tags_of(concat!(
            "          - {key: a, address: '40001', dataType: FLOAT32, length: 4}\n",
            "          - {key: b, address: '40009', dataType: INT16, length: 1}\n",
        ));
        assert_eq!(
            (tags[0].spec.array_len(), tags[1].spec.array_len()),
            (Some(4), None)
        );
        assert_eq!(tags[1].spec.length, 0, "length 1 is one value");
    }

    #[test]
    fn bad_values_are_all_reported() {
        let text = errors_text(
            "          - key: bad key
            address: 100.5
            dataType: REAL
            factor: 0
            deadband: -1
            access: X
            byteOrder: LE
            min: 5
            max: 1
            unit: ''
            color: red
          - address: D1
",
        );
        let expected = [
            "gw.yaml:11:18: `key`: `bad key` may only use letters, digits, `_`, `.` and `-`",
            "gw.yaml:12:22: `address`: expected a string, found a number: write it in quotes",
            "gw.yaml:13:23: `dataType`: unknown value `REAL`",
            "gw.yaml:14:21: `factor`: must not be 0",
            "gw.yaml:15:23: `deadband`: must be 0 or more, found -1",
            "gw.yaml:16:21: `access`: unknown value `X`: expected R | W | RW",
            "gw.yaml:17:24: `byteOrder`: unknown value `LE`: expected ABCD | BADC | CDAB | DCBA",
            "gw.yaml:19:18: `max`: must be at least `min` (5), found 1",
            "gw.yaml:20:19: `unit`: must not be empty",
            "gw.yaml:21:13: unknown key `color` in tag; expected one of:",
            "gw.yaml:22:13: tag: missing required key `key`",
        ];
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), expected.len(), "{text}");
        for (line, want) in lines.iter().zip(expected) {
            assert!(line.starts_with(want), "got  {line}\nwant {want}");
        }
    }

    #[test]
    fn duplicate_tag_keys_across_channels() {
        let text = errors_of(
            "devices:
  - deviceId: d
    productId: P
    deviceNum: D
    channels:
      - channelId: c1
        protocol: modbus-tcp
        host: plc1
        tags:
          - {key: a, address: '1', dataType: BOOL}
      - channelId: c2
        protocol: s7
        host: plc2
        tags:
          - {key: a, address: DB1.0, dataType: BOOL}
",
        )
        .to_string();
        assert_eq!(
            text,
            "gw.yaml:15:19: duplicate tag key `a` in this device (first at 10:19)"
        );
    }
}
