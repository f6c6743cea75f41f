//! Device and lease events to alarm signals: a fixed, case-sensitive table.

use alloc::string::String;
use alloc::vec::Vec;

use crate::exports::sluice::dataflow::alarm_rules::{AlarmSignal, SignalKind};

/// What one event kind signals.
pub struct EventRule {
    /// The event kind as the device or the lease store names it.
    pub event: &'static str,
    pub signal: SignalKind,
    /// The rule keys raised or cleared, one signal each, in this order.
    pub rule_keys: &'static [&'static str],
    pub message: &'static str,
}

const fn raise(
    event: &'static str,
    rule_keys: &'static [&'static str],
    message: &'static str,
) -> EventRule {
    EventRule {
        event,
        signal: SignalKind::Raise,
        rule_keys,
        message,
    }
}

const fn clear(
    event: &'static str,
    rule_keys: &'static [&'static str],
    message: &'static str,
) -> EventRule {
    EventRule {
        event,
        signal: SignalKind::Clear,
        rule_keys,
        message,
    }
}

/// Power-loss alarms, both cleared by either power-back event.
const POWER_LOSS: &[&str] = &["POWER_OFF", "POWER_CUT"];
/// What a device back online clears: its offline and its fault.
const DEVICE_DOWN: &[&str] = &["DEVICE_OFFLINE", "DEVICE_FAULT"];
/// What a driver back online clears.
const DRIVER_DOWN: &[&str] = &["DRIVER_OFFLINE", "DRIVER_FAULT"];

/// Every event kind that signals something; any other kind signals nothing.
pub const EVENTS: &[EventRule] = &[
    raise("DOOR_OPEN", &["DOOR_OPEN"], "door opened"),
    clear("DOOR_CLOSE", &["DOOR_OPEN"], "door closed"),
    raise("WATER_LEAK", &["WATER_LEAK"], "water leak detected"),
    clear("WATER_LEAK_CLEAR", &["WATER_LEAK"], "water leak cleared"),
    raise("SMOKE", &["SMOKE"], "smoke detected"),
    clear("SMOKE_CLEAR", &["SMOKE"], "smoke cleared"),
    raise("SOS", &["SOS"], "SOS button pressed"),
    clear("SOS_CLEAR", &["SOS"], "SOS cleared"),
    raise("POWER_OFF", &["POWER_OFF"], "power switched off"),
    raise("POWER_CUT", &["POWER_CUT"], "power cut"),
    clear("POWER_ON", POWER_LOSS, "power restored"),
    clear("POWER_RESTORE", POWER_LOSS, "power restored"),
    raise("device-offline", &["DEVICE_OFFLINE"], "device went offline"),
    raise("device-fault", &["DEVICE_FAULT"], "device reports a fault"),
    clear("device-online", DEVICE_DOWN, "device back online"),
    raise("driver-offline", &["DRIVER_OFFLINE"], "driver went offline"),
    raise("driver-fault", &["DRIVER_FAULT"], "driver reports a fault"),
    clear("driver-online", DRIVER_DOWN, "driver back online"),
];

/// The signals of event `kind`, carrying its time and id.
pub fn signals(kind: &str, ts_ms: i64, event_id: Option<String>) -> Vec<AlarmSignal> {
    let Some(rule) = EVENTS.iter().find(|rule| rule.event == kind) else {
        return Vec::new();
    };
    rule.rule_keys
        .iter()
        .map(|&rule_key| AlarmSignal {
            kind: rule.signal,
            rule_key: rule_key.into(),
            ts_ms,
            message: rule.message.into(),
            event_id: event_id.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(kind: &str) -> Vec<(SignalKind, String)> {
        signals(kind, 7, None)
            .into_iter()
            .map(|s| (s.kind, s.rule_key))
            .collect()
    }

    fn one(signal: SignalKind, rule_key: &str) -> Vec<(SignalKind, String)> {
        alloc::vec![(signal, rule_key.into())]
    }

    #[test]
    fn raising_events_raise_their_own_kind() {
        for kind in [
            "DOOR_OPEN",
            "WATER_LEAK",
            "SMOKE",
            "SOS",
            "POWER_OFF",
            "POWER_CUT",
        ] {
            assert_eq!(summary(kind), one(SignalKind::Raise, kind), "{kind}");
        }
    }

    #[test]
    fn clearing_events_clear_exactly_their_pair() {
        for (kind, cleared) in [
            ("DOOR_CLOSE", "DOOR_OPEN"),
            ("WATER_LEAK_CLEAR", "WATER_LEAK"),
            ("SMOKE_CLEAR", "SMOKE"),
            ("SOS_CLEAR", "SOS"),
        ] {
            assert_eq!(summary(kind), one(SignalKind::Clear, cleared), "{kind}");
        }
        for kind in ["POWER_ON", "POWER_RESTORE"] {
            assert_eq!(
                summary(kind),
                alloc::vec![
                    (SignalKind::Clear, "POWER_OFF".into()),
                    (SignalKind::Clear, "POWER_CUT".into()),
                ],
                "{kind}"
            );
        }
    }

    #[test]
    fn power_back_never_clears_anything_else() {
        for kind in ["POWER_ON", "POWER_RESTORE"] {
            for signal in signals(kind, 0, None) {
                assert!(
                    ["POWER_OFF", "POWER_CUT"].contains(&signal.rule_key.as_str()),
                    "{kind} cleared {}",
                    signal.rule_key
                );
            }
        }
        // And no clearing event touches a rule key outside its pair.
        let sos: Vec<_> = EVENTS
            .iter()
            .filter(|r| r.signal == SignalKind::Clear && r.rule_keys.contains(&"SOS"))
            .map(|r| r.event)
            .collect();
        assert_eq!(sos, ["SOS_CLEAR"]);
    }

    #[test]
    fn lease_events_raise_and_clear_offline_and_fault_alarms() {
        for entity in ["device", "driver"] {
            let key = |state: &str| alloc::format!("{}_{state}", entity.to_uppercase());
            let event = |state: &str| alloc::format!("{entity}-{state}");
            assert_eq!(
                summary(&event("offline")),
                one(SignalKind::Raise, &key("OFFLINE"))
            );
            assert_eq!(
                summary(&event("fault")),
                one(SignalKind::Raise, &key("FAULT"))
            );
            assert_eq!(
                summary(&event("online")),
                alloc::vec![
                    (SignalKind::Clear, key("OFFLINE")),
                    (SignalKind::Clear, key("FAULT")),
                ]
            );
            // An operator's maintenance neither raises nor clears.
            assert!(summary(&event("maintain")).is_empty());
        }
    }

    #[test]
    fn unknown_and_miscased_events_signal_nothing() {
        for kind in [
            "",
            "BOOM",
            "door_open",
            "Door_Open",
            "DEVICE-OFFLINE",
            "DEVICE_OFFLINE",
            "POWER_ON ",
        ] {
            assert!(signals(kind, 0, None).is_empty(), "{kind:?}");
        }
    }

    #[test]
    fn signals_carry_time_id_and_a_message() {
        let got = signals("POWER_RESTORE", 1_700_000_000_123, Some("ev-9".into()));
        assert_eq!(got.len(), 2);
        for signal in got {
            assert_eq!(signal.ts_ms, 1_700_000_000_123);
            assert_eq!(signal.event_id.as_deref(), Some("ev-9"));
            assert_eq!(signal.message, "power restored");
        }
        assert_eq!(signals("DOOR_OPEN", 1, None)[0].message, "door opened");
    }

    #[test]
    fn the_table_names_each_event_once() {
        for (i, rule) in EVENTS.iter().enumerate() {
            assert!(
                EVENTS[i + 1..].iter().all(|r| r.event != rule.event),
                "{} twice",
                rule.event
            );
            assert!(!rule.rule_keys.is_empty() && !rule.message.is_empty());
        }
    }
}
