//! The channel settings and the tags of a session, checked when it opens.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use sluice_guest::numeric::DataType;
use sluice_guest::session::ranges::{Extent, NotBool, points};
use sluice_guest::settings::{SettingValue, read_all, unknown_key, wrong_type};

use crate::address::{self, Naming};
use crate::frame::FrameType;
use crate::plan::limits;
use crate::sluice::dataflow::types::{ConfigError, Setting, TagSpec};
use crate::{
    Config, Tag, config_error, each_setting, tag_array_len, tag_byte_order, tag_data_type,
};

const SETTINGS: &[&str] = &["series", "frameType", "monitorTimer", "byteOrder"];

/// The channel settings and the tags; every mistake is reported.
pub fn read(
    settings: &[Setting],
    tags: Vec<TagSpec>,
) -> Result<(Config, Vec<Tag>), Vec<ConfigError>> {
    let mut errors = Vec::new();
    let config = read_settings(settings, &mut errors);
    let tags = read_all(tags, errors, |index, spec| read_tag(index, spec, config))?;
    Ok((config, tags))
}

/// Frame type, series and monitoring timer from the channel settings.
fn read_settings(settings: &[Setting], errors: &mut Vec<ConfigError>) -> Config {
    let mut config = Config {
        frame: FrameType::E3,
        wide: false,
        timer: 10,
    };
    let mut series_a = false;
    each_setting(settings, errors, |key, value| {
        match (key, value) {
            ("series", SettingValue::Text(name)) => match *name {
                "QnA" | "Q_L" => config.wide = false,
                "IQ_R" => config.wide = true,
                "A" => series_a = true,
                other => {
                    return Err(format!("unknown series `{other}`: use A, QnA, Q_L or IQ_R"));
                }
            },
            ("frameType", SettingValue::Text(name)) => match *name {
                "FRAME_1E" => config.frame = FrameType::E1,
                "FRAME_3E" => config.frame = FrameType::E3,
                "FRAME_4E" => config.frame = FrameType::E4,
                other => {
                    return Err(format!(
                        "unknown frameType `{other}`: use FRAME_1E, FRAME_3E or FRAME_4E"
                    ));
                }
            },
            ("monitorTimer", _) => match value.as_u32() {
                Some(v @ 1..=65535) => config.timer = v as u16,
                _ => {
                    let expected = "an integer from 1 to 65535 (units of 250 ms)";
                    return Err(wrong_type(key, expected, value));
                }
            },
            ("series" | "frameType", _) => return Err(wrong_type(key, "a name", value)),
            ("byteOrder", _) => {}
            (other, _) => return Err(unknown_key(other, SETTINGS)),
        }
        Ok(())
    });
    if series_a && config.frame != FrameType::E1 {
        errors.push(config_error(
            None,
            "series",
            "series A speaks only the 1E frame: set frameType FRAME_1E".into(),
        ));
    }
    config
}

/// Words a value of `data_type` occupies on a word device (counted without
/// overflow for any string length).
fn words_of(data_type: DataType) -> u64 {
    match data_type {
        DataType::String(chars) => u64::from(chars).div_ceil(2),
        other => (other.byte_len() / 2) as u64,
    }
}

fn read_tag(index: usize, spec: TagSpec, config: Config) -> Result<Tag, ConfigError> {
    let err = |key: &str, message: String| config_error(Some(index as u32), key, message);
    let naming = match (config.frame, config.wide) {
        (FrameType::E1, _) => Naming::Frame1E,
        (_, true) => Naming::Wide,
        (_, false) => Naming::Narrow,
    };
    let address = address::parse(&spec.address, naming).map_err(|m| err("address", m))?;
    let data_type = tag_data_type(&spec);
    let device = address.device;
    let array_len = tag_array_len(&spec);
    let count = points(
        data_type,
        device.bits,
        address.bit.is_some(),
        words_of(data_type),
        array_len,
    )
    .map_err(|wrong| match wrong {
        NotBool::BitArea => err(
            "dataType",
            format!("{} is a bit device: the dataType must be BOOL", device.name),
        ),
        NotBool::BitOfWord => err(
            "dataType",
            "a bit of a word (`.N`) must have dataType BOOL".into(),
        ),
        NotBool::ArrayInWord => err(
            "length",
            "an array cannot start at a bit of a word (`.N`): give the word, or a bit device"
                .into(),
        ),
    })?;
    if count == 0 {
        return Err(err(
            "length",
            "a STRING needs a length of at least 1".into(),
        ));
    }
    let unit = if device.bits { "bits" } else { "words" };
    limits(config.frame)
        .fits(device.bits, count, unit)
        .map_err(|m| err("length", m))?;
    let last = if naming == Naming::Wide {
        u64::from(u32::MAX)
    } else {
        u64::from(address::MAX_NARROW)
    };
    if u64::from(address.number) + count - 1 > last {
        return Err(err(
            "address",
            format!("the value runs past device number {last}"),
        ));
    }
    Ok(Tag {
        extent: Extent {
            area: address.device,
            start: address.number,
            count: count as u32,
        },
        bit: address.bit,
        data_type,
        array_len,
        byte_order: tag_byte_order(&spec),
    })
}
