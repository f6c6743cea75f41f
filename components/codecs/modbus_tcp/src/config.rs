//! The channel settings and the tags of a session, checked when it opens.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use sluice_guest::numeric::DataType;
use sluice_guest::session::ranges::{Extent, RangeLimits};
use sluice_guest::settings::{SettingValue, integer, unknown_key, wrong_type};

use crate::address;
use crate::sluice::dataflow::types::{ConfigError, Setting, TagSpec};
use crate::{Tag, config_error, each_setting, tag_data_type};

const SETTINGS: &[&str] = &[
    "unitId",
    "mergeGap",
    "maxRegisters",
    "maxBits",
    "writeMultiple",
    "byteOrder",
];

/// Unit id, request limits and `writeMultiple` from the channel settings.
pub fn read_settings(
    settings: &[Setting],
    errors: &mut Vec<ConfigError>,
) -> (u8, RangeLimits, bool) {
    let mut unit = 1u8;
    let mut limits = RangeLimits {
        merge_gap: 16,
        max_words: 120,
        max_bits: 2000,
    };
    let mut write_multiple = false;
    each_setting(settings, errors, |key, value| match key {
        "unitId" => integer(key, value, 0, 255).map(|v| unit = v as u8),
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
    (unit, limits, write_multiple)
}

pub fn read_tag(index: usize, spec: TagSpec, limits: RangeLimits) -> Result<Tag, ConfigError> {
    let err = |key: &str, message: String| config_error(Some(index as u32), key, message);
    let address = address::parse(&spec.address).map_err(|m| err("address", m))?;
    let data_type = tag_data_type(&spec);
    let count = if address.table.is_bits() {
        if data_type != DataType::Bool {
            return Err(err(
                "dataType",
                format!(
                    "{} hold single bits: the dataType must be BOOL",
                    address.table.name()
                ),
            ));
        }
        1
    } else if address.bit.is_some() {
        if data_type != DataType::Bool {
            return Err(err(
                "dataType",
                "a register bit (`.N`) must have dataType BOOL".into(),
            ));
        }
        1
    } else {
        data_type.byte_len() / 2
    };
    if count > limits.max_words as usize {
        return Err(err(
            "length",
            format!(
                "the value needs {count} registers, more than one request may read ({})",
                limits.max_words
            ),
        ));
    }
    if u32::from(address.offset) + count as u32 > 65536 {
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
        spec,
    })
}
