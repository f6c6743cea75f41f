//! The channel settings and the tags of a session, checked when it opens.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use sluice_guest::numeric::DataType;
use sluice_guest::session::ranges::{Extent, NotBool, RangeLimits, points};
use sluice_guest::settings::{SettingValue, integer, read_all, unknown_key, wrong_type};

use crate::address;
use crate::frame::UNITS;
use crate::sluice::dataflow::types::{ConfigError, Setting, TagSpec};
use crate::{
    SettingDeclaration, Tag, choices, config_error, declare, each_setting, int, integers,
    tag_array_len, tag_byte_order, tag_data_type, text,
};

const SETTINGS: &[&str] = &[
    "unitId",
    "mergeGap",
    "maxRegisters",
    "maxBits",
    "writeMultiple",
    "byteOrder",
];

/// The channel settings a Modbus protocol declares: the ones `read_settings`
/// takes, in the order channels are shown.
pub fn declared() -> Vec<SettingDeclaration> {
    use crate::SettingType::Boolean;
    vec![
        declare(
            "unitId",
            integers(i64::from(UNITS.0), i64::from(UNITS.1)),
            int(1),
            "the unit (slave) id the device answers to",
        ),
        declare(
            "byteOrder",
            choices(&["ABCD", "BADC", "CDAB", "DCBA", "GHEFCDAB"]),
            text("ABCD"),
            "how the channel's multi-register values are laid out; a tag may say otherwise",
        ),
        declare(
            "mergeGap",
            integers(0, 1000),
            None,
            "unused registers a read may span to merge two tags into one request",
        ),
        declare(
            "maxRegisters",
            integers(1, 125),
            None,
            "the most registers one request reads (120 when left out)",
        ),
        declare(
            "maxBits",
            integers(1, 2000),
            None,
            "the most coils or inputs one request reads (2000 when left out)",
        ),
        declare(
            "writeMultiple",
            Boolean,
            None,
            "write single registers and coils with FC16/FC15 too",
        ),
    ]
}

/// What a tag's address is, on every Modbus protocol.
pub const ADDRESS_HELP: &str = "a Modicon number (`40001`, `30001`, `00001`, `10001`) or a table and a 0-based \
     number (`hr:0`, `ir:0`, `co:0`, `di:0`), with `.N` for one bit of a register";

/// The unit id and `writeMultiple` of the channel.
pub struct Options {
    pub unit: u8,
    pub write_multiple: bool,
}

/// The channel settings, the request limits they set and the tags; every
/// mistake is reported.
pub fn read(
    settings: &[Setting],
    tags: Vec<TagSpec>,
) -> Result<(Options, RangeLimits, Vec<Tag>), Vec<ConfigError>> {
    let mut errors = Vec::new();
    let (options, limits) = read_settings(settings, &mut errors);
    let tags = read_all(tags, errors, |index, spec| read_tag(index, spec, limits))?;
    Ok((options, limits, tags))
}

/// Unit id, `writeMultiple` and the request limits from the channel settings.
fn read_settings(settings: &[Setting], errors: &mut Vec<ConfigError>) -> (Options, RangeLimits) {
    let mut unit = 1u8;
    let mut limits = RangeLimits {
        merge_gap: 16,
        max_words: 120,
        max_bits: 2000,
    };
    let mut write_multiple = false;
    each_setting(settings, errors, |key, value| match key {
        "unitId" => integer(key, value, UNITS.0, UNITS.1).map(|v| unit = v as u8),
        "mergeGap" => integer(key, value, 0, 1000).map(|v| limits.merge_gap = v),
        "maxRegisters" => integer(key, value, 1, 125).map(|v| limits.max_words = v),
        "maxBits" => integer(key, value, 1, 2000).map(|v| limits.max_bits = v),
        "writeMultiple" => match value {
            SettingValue::Boolean(b) => {
                write_multiple = *b;
                Ok(())
            }
            _ => Err(wrong_type(key, "true or false", value)),
        },
        "byteOrder" => Ok(()),
        other => Err(unknown_key(other, SETTINGS)),
    });
    let options = Options {
        unit,
        write_multiple,
    };
    (options, limits)
}

fn read_tag(index: usize, spec: TagSpec, limits: RangeLimits) -> Result<Tag, ConfigError> {
    let err = |key: &str, message: String| config_error(Some(index as u32), key, message);
    let address = address::parse(&spec.address).map_err(|m| err("address", m))?;
    let data_type = tag_data_type(&spec);
    let words = (data_type.byte_len() / 2) as u64;
    let in_bits = address.table.is_bits();
    if data_type == DataType::Bool && !in_bits && address.bit.is_none() {
        let written = &spec.address;
        return Err(err(
            "dataType",
            format!(
                "a BOOL in a register needs one of its bits: `{written}.0` is the least \
                 significant (or read the whole register as UINT16)"
            ),
        ));
    }
    let array_len = tag_array_len(&spec);
    let count =
        points(data_type, in_bits, address.bit.is_some(), words, array_len).map_err(|wrong| {
            let message = match wrong {
                NotBool::BitArea => format!(
                    "{} hold single bits: the dataType must be BOOL",
                    address.table.name()
                ),
                NotBool::BitOfWord => "a register bit (`.N`) must have dataType BOOL".into(),
                NotBool::ArrayInWord => {
                    "an array cannot start at a register bit (`.N`): give the register, or coils"
                        .into()
                }
            };
            err("dataType", message)
        })?;
    let unit = if in_bits { "bits" } else { "registers" };
    limits
        .fits(in_bits, count, unit)
        .map_err(|m| err("length", m))?;
    if u64::from(address.offset) + count > 65536 {
        return Err(err("address", "the value runs past register 65535".into()));
    }
    Ok(Tag {
        extent: Extent {
            area: address.table,
            start: u32::from(address.offset),
            count: count as u32,
        },
        bit: address.bit,
        data_type,
        array_len,
        byte_order: tag_byte_order(&spec),
    })
}
