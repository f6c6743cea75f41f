//! The channel settings and the tags of a session, checked when it opens.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use sluice_guest::numeric::DataType;
use sluice_guest::settings::{SettingValue, integer, unknown_key, wrong_type};

use crate::address::{self, BYTE_LIMIT};
use crate::plan::TagRange;
use crate::plc::{self, PlcType};
use crate::sluice::dataflow::types::Access;
use crate::sluice::dataflow::types::{ConfigError, Setting, TagSpec};
use crate::{Tag, config_error, each_setting, tag_array_len, tag_byte_order, tag_data_type};

/// The longest STRING tag, in bytes.
const MAX_STRING: u32 = 4096;

const SETTINGS: &[&str] = &["plcType", "rack", "slot", "byteOrder"];

/// PLC type, rack and slot from the channel settings.
pub fn read_settings(settings: &[Setting], errors: &mut Vec<ConfigError>) -> (PlcType, u8, u8) {
    let (mut plc, mut rack, mut slot) = (PlcType::S1200, 0u8, 1u8);
    each_setting(settings, errors, |key, value| match key {
        "rack" => integer(key, value, 0, 7).map(|v| rack = v as u8),
        "slot" => integer(key, value, 0, 31).map(|v| slot = v as u8),
        "plcType" => match value {
            SettingValue::Text(name) => PlcType::from_name(name),
            _ => None,
        }
        .map(|named| plc = named)
        .ok_or_else(|| wrong_type(key, &format!("one of {}", plc::NAMES.join(", ")), value)),
        "byteOrder" => Ok(()),
        other => Err(unknown_key(other, SETTINGS)),
    });
    (plc, rack, slot)
}

pub fn read_tag(index: usize, spec: TagSpec, plc: PlcType) -> Result<Tag, ConfigError> {
    let err = |key: &str, message: String| config_error(Some(index as u32), key, message);
    let data_type = tag_data_type(&spec);
    if let DataType::String(chars) = data_type
        && !(1..=MAX_STRING).contains(&chars)
    {
        return Err(err(
            "length",
            format!("a STRING needs a length from 1 to {MAX_STRING}, got {chars}"),
        ));
    }
    let text = spec.address.trim();
    let address = address::parse(text, plc.has_v_area()).map_err(|m| err("address", m))?;
    let one = address::byte_len(&address, data_type, text).map_err(|m| err("address", m))?;
    let array_len = tag_array_len(&spec);
    // A BOOL array is read as the bytes that hold its bits.
    let first_bit = address.bit.filter(|_| array_len.is_some());
    let len = match (array_len, first_bit) {
        (Some(n), Some(bit)) => (u32::from(bit) + n).div_ceil(8),
        (Some(n), None) => one.saturating_mul(n),
        (None, _) => one,
    };
    if first_bit.is_some() && spec.access != Access::Read {
        return Err(err(
            "access",
            "a BOOL array can only be read (`access: R`): write its bits as BOOL tags".into(),
        ));
    }
    if address.byte + len > BYTE_LIMIT {
        return Err(err(
            "address",
            format!(
                "`{text}` runs past the last addressable byte ({})",
                BYTE_LIMIT - 1
            ),
        ));
    }
    Ok(Tag {
        range: TagRange {
            area: address.area,
            db: address.db,
            start: address.byte,
            len,
            bit: address.bit.filter(|_| first_bit.is_none()),
        },
        data_type,
        array_len,
        first_bit,
        byte_order: tag_byte_order(&spec),
    })
}
