//! The topics the engine publishes to and subscribes to.

use crate::model::CommandKind;

/// The topics of one device (or driver, or the collector itself) below a prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceTopic<'a> {
    /// Reports: `property/post`.
    PropertyPost,
    /// The retained online/offline status: `status/post`.
    StatusPost,
    /// A state change for the rules: `event/post/{event}`.
    EventPost(&'a str),
    /// A command arriving: `property/set` or `function/invoke`.
    Command(CommandKind),
    /// The outcome of a command: `property/set/reply` or `function/invoke/reply`.
    Reply(CommandKind),
    /// A device's configuration arriving: `config/push`.
    ConfigPush,
    /// The outcome of a configuration push: `config/push/reply`.
    ConfigPushReply,
}

impl DeviceTopic<'_> {
    fn suffix(&self) -> String {
        match self {
            DeviceTopic::PropertyPost => "property/post".to_owned(),
            DeviceTopic::StatusPost => "status/post".to_owned(),
            DeviceTopic::EventPost(event) => format!("event/post/{event}"),
            DeviceTopic::Command(kind) => command_suffix(*kind).to_owned(),
            DeviceTopic::Reply(kind) => format!("{}/reply", command_suffix(*kind)),
            DeviceTopic::ConfigPush => CONFIG_PUSH.to_owned(),
            DeviceTopic::ConfigPushReply => format!("{CONFIG_PUSH}/reply"),
        }
    }
}

const CONFIG_PUSH: &str = "config/push";
/// Heartbeats from outside collectors, below the prefix.
const HEARTBEAT: &str = "heartbeat/post";

fn command_suffix(kind: CommandKind) -> &'static str {
    match kind {
        CommandKind::PropertySet => "property/set",
        CommandKind::FunctionInvoke => "function/invoke",
    }
}

/// A command topic taken apart: which device, which kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandTarget {
    pub product_id: String,
    pub device_num: String,
    pub kind: CommandKind,
}

/// The product id under which the drivers' states are announced, one driver
/// per tenant: `{prefix}/driver/{tenantId}/{driver}/status/post`.
pub const DRIVER_PRODUCT: &str = "driver";

/// The product id under which the engine announces its own status.
const COLLECTOR_PRODUCT: &str = "collector";

/// The topics under one prefix: `{prefix}/{productId}/{deviceNum}/{suffix}`,
/// without a leading slash when the prefix is empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topics {
    prefix: String,
}

impl Topics {
    pub fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.trim_end_matches('/').to_owned(),
        }
    }

    /// `suffix` under the prefix (the alarm topic, ...).
    pub fn under_prefix(&self, suffix: &str) -> String {
        if self.prefix.is_empty() {
            suffix.to_owned()
        } else {
            format!("{}/{suffix}", self.prefix)
        }
    }

    /// A device's topic.
    pub fn device(&self, product_id: &str, device_num: &str, topic: DeviceTopic<'_>) -> String {
        self.under_prefix(&format!("{product_id}/{device_num}/{}", topic.suffix()))
    }

    /// The collector's own retained status (and Last Will) topic.
    pub fn collector_status(&self, client_id: &str) -> String {
        self.device(COLLECTOR_PRODUCT, client_id, DeviceTopic::StatusPost)
    }

    /// What the engine subscribes to: every device's downlink topics (the two
    /// command topics and `config/push`), and the heartbeats of outside
    /// collectors (`heartbeat/post/{tenantId}`).
    pub fn downlink_filters(&self) -> [String; 4] {
        let [set, invoke, push] = [
            DeviceTopic::Command(CommandKind::PropertySet),
            DeviceTopic::Command(CommandKind::FunctionInvoke),
            DeviceTopic::ConfigPush,
        ]
        .map(|topic| self.device("+", "+", topic));
        [
            set,
            invoke,
            push,
            self.under_prefix(&format!("{HEARTBEAT}/+")),
        ]
    }

    /// The topic outside collectors send the heartbeats of `tenant` to.
    pub fn heartbeat(&self, tenant: u32) -> String {
        self.under_prefix(&format!("{HEARTBEAT}/{tenant}"))
    }

    /// Where the refusal of a heartbeat message on `topic` is answered.
    pub fn heartbeat_reply(topic: &str) -> String {
        format!("{topic}/reply")
    }

    /// The tenant of a heartbeat topic; `None` for any other topic.
    pub fn heartbeat_tenant(&self, topic: &str) -> Option<u32> {
        let rest = topic.strip_prefix(&self.under_prefix(HEARTBEAT))?;
        rest.strip_prefix('/')?.parse().ok()
    }

    /// The device and the suffix of one of its topics under the prefix.
    fn split<'t>(&self, topic: &'t str) -> Option<(&'t str, &'t str, &'t str)> {
        let rest = if self.prefix.is_empty() {
            topic
        } else {
            topic.strip_prefix(&self.prefix)?.strip_prefix('/')?
        };
        let mut parts = rest.splitn(3, '/');
        Some((parts.next()?, parts.next()?, parts.next()?))
    }

    /// The device and kind of a command topic; `None` for any other topic.
    pub fn command_target(&self, topic: &str) -> Option<CommandTarget> {
        let (product_id, device_num, suffix) = self.split(topic)?;
        let kind = [CommandKind::PropertySet, CommandKind::FunctionInvoke]
            .into_iter()
            .find(|kind| command_suffix(*kind) == suffix)?;
        Some(CommandTarget {
            product_id: product_id.to_owned(),
            device_num: device_num.to_owned(),
            kind,
        })
    }

    /// The device a `config/push` topic names (productId, deviceNum); `None` for
    /// any other topic.
    pub fn push_target(&self, topic: &str) -> Option<(String, String)> {
        let (product_id, device_num, suffix) = self.split(topic)?;
        (suffix == CONFIG_PUSH).then(|| (product_id.to_owned(), device_num.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_with_and_without_a_prefix() {
        let bare = Topics::new("");
        let site = Topics::new("site1/");
        let post = DeviceTopic::PropertyPost;
        assert_eq!(bare.device("P", "D", post), "P/D/property/post");
        assert_eq!(site.device("P", "D", post), "site1/P/D/property/post");
        assert_eq!(
            site.device("P", "D", DeviceTopic::EventPost("device-offline")),
            "site1/P/D/event/post/device-offline"
        );
        assert_eq!(
            bare.device("P", "D", DeviceTopic::Reply(CommandKind::FunctionInvoke)),
            "P/D/function/invoke/reply"
        );
        assert_eq!(
            site.collector_status("gw"),
            "site1/collector/gw/status/post"
        );
        assert_eq!(site.under_prefix("alarm/post"), "site1/alarm/post");
        assert_eq!(
            site.downlink_filters(),
            [
                "site1/+/+/property/set",
                "site1/+/+/function/invoke",
                "site1/+/+/config/push",
                "site1/heartbeat/post/+"
            ]
        );
        assert_eq!(site.heartbeat(7), "site1/heartbeat/post/7");
        assert_eq!(site.heartbeat_tenant("site1/heartbeat/post/7"), Some(7));
        assert_eq!(bare.heartbeat_tenant("heartbeat/post/0"), Some(0));
        for other in [
            "site1/heartbeat/post",
            "site1/heartbeat/post/x",
            "site1/heartbeat/post/7/reply",
            "site2/heartbeat/post/7",
        ] {
            assert_eq!(site.heartbeat_tenant(other), None, "{other}");
        }
        assert_eq!(
            site.device("P", "D", DeviceTopic::ConfigPushReply),
            "site1/P/D/config/push/reply"
        );
    }

    #[test]
    fn command_topics_are_taken_apart() {
        let site = Topics::new("site1");
        assert_eq!(
            site.command_target("site1/P1/D1/property/set"),
            Some(CommandTarget {
                product_id: "P1".into(),
                device_num: "D1".into(),
                kind: CommandKind::PropertySet,
            })
        );
        assert_eq!(
            Topics::new("")
                .command_target("P1/D1/function/invoke")
                .map(|t| t.kind),
            Some(CommandKind::FunctionInvoke)
        );
        assert_eq!(
            site.push_target("site1/P1/D1/config/push"),
            Some(("P1".into(), "D1".into()))
        );
        assert_eq!(site.push_target("site1/P1/D1/property/set"), None);
        assert_eq!(site.command_target("site1/P1/D1/config/push"), None);
        for other in [
            "site1/P1/D1/property/post",
            "other/P1/D1/property/set",
            "site1/P1/property/set",
            "site1/P1/D1/property/set/reply",
        ] {
            assert_eq!(site.command_target(other), None, "{other}");
        }
    }
}
