//! `collector.alarms`: where alarms are published, when they escalate, and which
//! day `GET /alarms/stats` counts as today. Also the time formats of quiet hours.

use super::read::{read_at, text};
use crate::yaml::{Diagnostics, Fields, Node};

/// `collector.alarms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlarmConfig {
    /// `topic`: where NEW alarms are published, under the MQTT topic prefix
    /// (default `alarm/post`).
    pub topic: String,
    /// `escalateAfterSec`: a CONFIRMED alarm not handled within this many seconds is
    /// ESCALATED (default 1800; 0 never escalates).
    pub escalate_after_sec: u64,
    /// `utcOffset`: the gateway's local time, `+08:00` style (default `+00:00`):
    /// where "today" starts in the statistics, and the default of recipients.
    pub utc_offset_min: i16,
}

impl Default for AlarmConfig {
    fn default() -> Self {
        Self {
            topic: "alarm/post".to_owned(),
            escalate_after_sec: 1800,
            utc_offset_min: 0,
        }
    }
}

pub(super) fn read(node: &Node, errors: &mut Diagnostics) -> AlarmConfig {
    let d = AlarmConfig::default();
    let Some(mut f) = Fields::of(node, "collector.alarms", errors) else {
        return d;
    };
    let topic = text(&mut f, "topic", errors).unwrap_or(d.topic);
    let escalate_after_sec =
        read_at::<u64>(&mut f, "escalateAfterSec", errors).map_or(d.escalate_after_sec, |(v, _)| v);
    let utc_offset_min = f
        .optional_with("utcOffset", errors, |n| parse_offset(&text_of(n)?))
        .unwrap_or(d.utc_offset_min);
    f.finish(errors);
    AlarmConfig {
        topic,
        escalate_after_sec,
        utc_offset_min,
    }
}

pub(super) fn text_of(node: &Node) -> Result<String, String> {
    use crate::yaml::FromNode;
    String::from_node(node)
}

/// `+08:00`, `-05:30` or `Z` -> minutes east of UTC.
pub(super) fn parse_offset(text: &str) -> Result<i16, String> {
    let bad = || format!("`{text}` is not a UTC offset: write it as +HH:MM or -HH:MM");
    if text == "Z" {
        return Ok(0);
    }
    let (sign, rest) = match text.split_at_checked(1) {
        Some(("+", rest)) => (1, rest),
        Some(("-", rest)) => (-1, rest),
        _ => return Err(bad()),
    };
    let minutes = parse_clock(rest).map_err(|_| bad())?;
    if minutes > 14 * 60 {
        return Err(format!("`{text}`: a UTC offset is at most 14 hours"));
    }
    Ok(sign * minutes as i16)
}

/// `HH:MM` (00:00 to 24:00) -> minutes after midnight.
pub(super) fn parse_clock(text: &str) -> Result<u16, String> {
    let bad = || format!("`{text}` is not a time of day: write it as HH:MM");
    let (hours, minutes) = text.split_once(':').ok_or_else(bad)?;
    if hours.len() != 2 || minutes.len() != 2 {
        return Err(bad());
    }
    let hours: u16 = hours.parse().map_err(|_| bad())?;
    let minutes: u16 = minutes.parse().map_err(|_| bad())?;
    if minutes >= 60 || hours > 24 || (hours == 24 && minutes > 0) {
        return Err(bad());
    }
    Ok(hours * 60 + minutes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_and_clock_times() {
        assert_eq!(parse_offset("+08:00"), Ok(480));
        assert_eq!(parse_offset("-05:30"), Ok(-330));
        assert_eq!(parse_offset("Z"), Ok(0));
        assert!(parse_offset("08:00").is_err());
        assert!(parse_offset("+15:00").is_err());
        assert_eq!(parse_clock("22:00"), Ok(1320));
        assert_eq!(parse_clock("24:00"), Ok(1440));
        assert!(parse_clock("7:00").is_err());
        assert!(parse_clock("12:60").is_err());
    }
}
