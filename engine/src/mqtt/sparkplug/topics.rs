//! Sparkplug topics: `spBv1.0/{group}/{type}/{edge node}` for the node's own
//! messages and `spBv1.0/{group}/{type}/{edge node}/{device}` for a device's.
//! The topic prefix of the JSON topics does not apply: the namespace is fixed.

/// The namespace of Sparkplug B topics.
pub const NAMESPACE: &str = "spBv1.0";

/// One edge node's topics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SparkplugTopics {
    /// `spBv1.0/{group}/`.
    group: String,
    node: String,
}

impl SparkplugTopics {
    pub fn new(group_id: &str, edge_node_id: &str) -> Self {
        Self {
            group: format!("{NAMESPACE}/{group_id}/"),
            node: edge_node_id.to_owned(),
        }
    }

    fn node_topic(&self, kind: &str) -> String {
        format!("{}{kind}/{}", self.group, self.node)
    }

    fn device_topic(&self, kind: &str, device_id: &str) -> String {
        format!("{}{kind}/{}/{device_id}", self.group, self.node)
    }

    pub fn node_birth(&self) -> String {
        self.node_topic("NBIRTH")
    }

    pub fn node_death(&self) -> String {
        self.node_topic("NDEATH")
    }

    pub fn node_command(&self) -> String {
        self.node_topic("NCMD")
    }

    pub fn device_birth(&self, device_id: &str) -> String {
        self.device_topic("DBIRTH", device_id)
    }

    pub fn device_data(&self, device_id: &str) -> String {
        self.device_topic("DDATA", device_id)
    }

    pub fn device_death(&self, device_id: &str) -> String {
        self.device_topic("DDEATH", device_id)
    }

    /// The filter of every device command to this node.
    pub fn device_commands(&self) -> String {
        self.device_topic("DCMD", "+")
    }

    /// The device a DCMD topic of this node is for.
    pub fn command_device<'t>(&self, topic: &'t str) -> Option<&'t str> {
        self.device_of("DCMD", topic)
    }

    /// Whether `topic` carries a device's data of this node.
    pub fn is_device_data(&self, topic: &str) -> bool {
        self.device_of("DDATA", topic).is_some()
    }

    fn device_of<'t>(&self, kind: &str, topic: &'t str) -> Option<&'t str> {
        let device = topic
            .strip_prefix(self.group.as_str())?
            .strip_prefix(kind)?
            .strip_prefix('/')?
            .strip_prefix(self.node.as_str())?
            .strip_prefix('/')?;
        (!device.is_empty() && !device.contains('/')).then_some(device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_follow_the_namespace() {
        let topics = SparkplugTopics::new("plant", "edge-1");
        assert_eq!(topics.node_birth(), "spBv1.0/plant/NBIRTH/edge-1");
        assert_eq!(topics.node_death(), "spBv1.0/plant/NDEATH/edge-1");
        assert_eq!(topics.node_command(), "spBv1.0/plant/NCMD/edge-1");
        assert_eq!(topics.device_birth("m1"), "spBv1.0/plant/DBIRTH/edge-1/m1");
        assert_eq!(topics.device_data("m1"), "spBv1.0/plant/DDATA/edge-1/m1");
        assert_eq!(topics.device_death("m1"), "spBv1.0/plant/DDEATH/edge-1/m1");
        assert_eq!(topics.device_commands(), "spBv1.0/plant/DCMD/edge-1/+");
    }

    #[test]
    fn a_command_topic_names_its_device_only_for_this_node() {
        let topics = SparkplugTopics::new("plant", "edge-1");
        assert_eq!(
            topics.command_device("spBv1.0/plant/DCMD/edge-1/m1"),
            Some("m1")
        );
        assert_eq!(topics.command_device("spBv1.0/plant/DCMD/edge-10/m1"), None);
        assert_eq!(topics.command_device("spBv1.0/other/DCMD/edge-1/m1"), None);
        assert_eq!(topics.command_device("spBv1.0/plant/DCMD/edge-1/"), None);
        assert_eq!(
            topics.command_device("spBv1.0/plant/DCMD/edge-1/m1/x"),
            None
        );
        assert_eq!(topics.command_device("spBv1.0/plant/DDATA/edge-1/m1"), None);
        assert!(topics.is_device_data("spBv1.0/plant/DDATA/edge-1/m1"));
        assert!(!topics.is_device_data("plant/P/m1/property/post"));
    }
}
