use super::super::tests::{errors_of, load_ok};
use super::{DeviceBroker, PushChannel};

/// A file with device `m` (product P, number M7) whose channel is `channel`
/// (indented under `channels:`) and a tag `t` with `tag` more keys.
fn file(channel: &str, tag: &str) -> String {
    format!(
        "devices:
  - deviceId: m
    productId: P
    deviceNum: M7
    channels:
      - channelId: c
        protocol: mqtt
{channel}        tags:
          - {{ key: t, address: /temp, dataType: FLOAT32{tag} }}
"
    )
}

#[test]
fn an_mqtt_channel_reads_its_keys_and_gives_the_rest_to_its_decoder() {
    let config = load_ok(&file(
        "        topic: sensors/{deviceNum}/up\n        commandTopic: sensors/{deviceNum}/set\n        reportPeriodMs: 5000\n        timestampPointer: /ts\n",
        "",
    ));
    let channel = &config.devices[0].channels[0];
    let push = channel.push.as_ref().expect("an MQTT channel");
    assert_eq!(
        push,
        &PushChannel {
            broker: DeviceBroker::Uplink,
            topic: "sensors/{deviceNum}/up".into(),
            command_topic: Some("sensors/{deviceNum}/set".into()),
            report_period_ms: 5000,
            decoder: "json".into(),
            max_messages_per_second: 100,
        }
    );
    assert_eq!(channel.protocol.name(), "mqtt");
    assert_eq!(
        channel.protocol.codec(),
        "json",
        "the decoder is its driver"
    );
    assert_eq!(channel.settings.len(), 1);
    assert_eq!(channel.settings[0].key, "timestampPointer");
    assert_eq!(channel.tags[0].period_ms, 0, "never polled");
    assert_eq!(
        PushChannel::resolve(&push.topic, "P", "M7", "m"),
        "sensors/M7/up"
    );
}

#[test]
fn a_broker_of_its_own_is_a_url_with_its_credentials() {
    let config = load_ok(&file(
        "        broker: mqtts://devices.plant:8883\n        username: gw\n        password: s3cret\n        topic: '+/{deviceId}/#'\n        reportPeriodMs: 100\n        decoder: binary\n",
        "",
    ));
    let push = config.devices[0].channels[0].push.clone().expect("MQTT");
    let DeviceBroker::Own {
        host,
        port,
        tls,
        username,
        password,
    } = push.broker
    else {
        panic!("its own broker: {:?}", push.broker);
    };
    assert_eq!((host.as_str(), port, tls), ("devices.plant", 8883, true));
    assert_eq!(username.as_deref(), Some("gw"));
    assert_eq!(
        password.map(|p| p.expose().to_owned()).as_deref(),
        Some("s3cret")
    );
    assert_eq!(
        config.devices[0].channels[0].port, 8883,
        "fences see the broker"
    );
}

#[test]
fn every_mistake_of_an_mqtt_channel_is_named() {
    let cases = [
        (
            "        reportPeriodMs: 1000\n",
            "",
            "missing required key `topic`",
        ),
        (
            "        topic: a/b\n",
            "",
            "missing required key `reportPeriodMs`",
        ),
        (
            "        topic: a/{serial}\n        reportPeriodMs: 1000\n",
            "",
            "`{serial}` is no placeholder",
        ),
        (
            "        topic: a/b+\n        reportPeriodMs: 1000\n",
            "",
            "`+` and `#` stand alone in a level",
        ),
        (
            "        topic: a/#/b\n        reportPeriodMs: 1000\n",
            "",
            "`#` is the last level",
        ),
        (
            "        topic: a\n        commandTopic: a/+/set\n        reportPeriodMs: 1000\n",
            "",
            "a topic to publish to has no `+` or `#`",
        ),
        (
            "        topic: a\n        reportPeriodMs: 50\n",
            "",
            "below the 100 ms minimum",
        ),
        (
            "        topic: a\n        reportPeriodMs: 1000\n        host: plc\n",
            "",
            "`host`: an MQTT device is not connected to",
        ),
        (
            "        topic: a\n        reportPeriodMs: 1000\n        username: u\n",
            "",
            "the uplink's broker is used with the uplink's credentials",
        ),
        (
            "        topic: a\n        reportPeriodMs: 1000\n        broker: ws://x:1\n",
            "",
            "scheme `ws://` is not supported",
        ),
        (
            "        topic: a\n        reportPeriodMs: 1000\n",
            ", periodMs: 1000",
            "an MQTT device's tags are not polled",
        ),
        (
            "        topic: a\n        reportPeriodMs: 1000\n        extra: [1, 2]\n",
            "",
            "a decoder setting is one value",
        ),
    ];
    for (channel, tag, expected) in cases {
        let errors = errors_of(&file(channel, tag)).to_string();
        assert!(errors.contains(expected), "{channel}{tag}: {errors}");
    }
}

#[test]
fn an_mqtt_channel_is_its_devices_only_one() {
    let errors = errors_of(
        "devices:
  - deviceId: m
    productId: P
    deviceNum: M7
    channels:
      - { channelId: a, protocol: mqtt, topic: t, reportPeriodMs: 1000 }
      - { channelId: b, protocol: modbus-tcp, host: plc }
",
    )
    .to_string();
    assert!(
        errors.contains("gw.yaml:6:9: an MQTT channel is its device's only channel"),
        "{errors}"
    );
}
